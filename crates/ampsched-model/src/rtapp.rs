//! rt-app workloads: the JSON files of Linux's `rt-app` compiled into programs.
//!
//! rt-app (`rt-app FILE.json`, Debian package `rt-app`) is the de facto format
//! of Linux scheduler workloads: a `tasks` object of threads, each a sequence
//! of events, optionally split into `phases`, looped and instantiated. The same
//! file runs on a real machine under the agent and here, so simulation and
//! reality can be compared on one input.
//!
//! Mapping (rt-app's `doc/tutorial.txt`; durations in µs):
//! - `run N` → `Compute` of `N` µs as measured on the calibration CPU
//!   (`global.calibration = "CPUk"`, default CPU0: work = N × speed(CPUk); an
//!   integer calibration means speed 1.0). Scales with CPU speed.
//! - `runtime N` → `Runtime`: busy for N µs of wall time, whatever the speed.
//! - `sleep N` → `Sleep`; `timer {ref, period, mode}` → `Timer` (shared by
//!   every user of `ref`; a `ref` starting with `unique` is one timer per
//!   thread instance; `mode` `relative` (default) or `absolute`).
//! - `lock`/`unlock` → `Lock`/`Unlock`; `wait {ref, mutex}` → unlock mutex,
//!   `CondWait`, lock mutex (pthread_cond_wait); `signal`/`broad` →
//!   `CondSignal`; `sync {ref, mutex}` → signal then wait;
//!   `suspend X`/`resume X` → wait on / broadcast condition X.
//! - `barrier B` → `BarrierN` whose parties are, as in rt-app, the number of
//!   references to B times each referring thread's `instance` count.
//! - `sem_post S`/`sem_wait S` → `Push`/`Pop` on an unbounded channel.
//! - `loop` (thread: whole phase list, default forever = 2³²−1 times; phase:
//!   default 1), `instance` (threads created from one object), `delay` (µs
//!   before the first phase), `cpus` (thread or phase affinity → `Affinity`),
//!   `phases` (in file order).
//! - Scheduling properties (`policy`, `priority`, `dl-*`, `util_*`,
//!   `taskgroup`, `nodes_membind`) are accepted and ignored: the simulated
//!   dispatcher decides. `global.duration` (s, −1 = none) is reported so the
//!   scenario can stop there.
//! - `mem N` (write N bytes into the thread's buffer of
//!   `global.mem_buffer_size` bytes, default 4 MiB) → `Runtime`: busy for the
//!   time the memory system takes to write N bytes, which CPU speed does not
//!   change: N / `llc_refill_gbps` when the buffer fits in L2 + LLC, else
//!   N / `dram_refill_gbps` (the machine's `cache` figures, bytes per ns).
//! - `iorun N` (write N bytes to `global.io_device`, default `/dev/null`) →
//!   blocked off-CPU for N / `ampsched_io_mbps` (MB/s, an extension key that a
//!   real device needs); to `/dev/null` the write costs nothing (the kernel's
//!   `write_null` returns at once), so nothing is added.
//! - Unsupported events (`memrun`, `yield`, `fork`) are an error naming the
//!   event, the key and the file. rt-app's pre-1.0 grammar (`exec`,
//!   `resources`, `lock_order` in a thread, as in the fragments of its
//!   `doc/examples/merge`) is an error saying so; a file with no `tasks` but
//!   `global` or `resources` is named a `merge.py` fragment.
//! - Unknown `global` keys (e.g. `frag` in rt-app's browser and mp3
//!   examples) are ignored, as rt-app does, with a warning naming the file
//!   and the key (`RtApp::warnings`).
//!
//! Extension keys (ignored by rt-app itself, allowed in `global`, a thread or
//! a phase; the innermost wins): `ampsched_wait` = `"block"` (default, what
//! pthread objects do), `"spin"` or `"spin-then-block"` for every waiting
//! event; `ampsched_spin_limit_us` (spin-then-block limit, default 2000);
//! `ampsched_mem` (memory-stall fraction of `run` work, default 0) and
//! `ampsched_ws_kb` (working set for the migration refill cost, default 0).
//!
//! Like workgen, the reader accepts C and C++ comments, trailing commas and
//! repeated keys (kept in file order). Sync object names become ids from
//! `RTAPP_ID_BASE` on, so they do not collide with hand-written programs.

use crate::cpuset::CpuSet;
use crate::program::{Op, Program, Wait};
use crate::spec::DEFAULT_SPIN_LIMIT_US;
use crate::time::Nanos;
use crate::topology::Topology;
use std::collections::BTreeMap;
use std::fmt;

/// First id given to rt-app sync objects (locks, conditions, barriers, timers, semaphores).
pub const RTAPP_ID_BASE: u32 = 0x4000_0000;
/// "Loop forever" (rt-app `loop = -1`): 2³²−1 iterations; the scenario's stop ends the run.
pub const LOOP_FOREVER: u32 = u32::MAX;

/// Events the simulator runs.
pub const SUPPORTED_EVENTS: &[&str] = &[
    "run", "runtime", "sleep", "timer", "lock", "unlock", "wait", "signal", "broad", "sync", "barrier", "suspend",
    "resume", "sem_post", "sem_wait", "mem", "iorun",
];

/// Thread keys of rt-app's pre-1.0 grammar (kept in its `doc/examples/merge` fragments).
const OLD_GRAMMAR: &[&str] = &["exec", "resources", "lock_order"];

/// rt-app's default `global.mem_buffer_size`, bytes (4 MiB).
const DEFAULT_MEM_BUFFER: i64 = 4 << 20;

/// rt-app's event names in its own matching order (a key is an event when it starts with one).
const EVENTS: &[&str] = &[
    "lock", "unlock", "wait", "signal", "broad", "sync", "sleep", "runtime", "run", "timer", "suspend", "resume",
    "memrun", "mem", "iorun", "yield", "barrier", "fork", "sem_post", "sem_wait",
];

/// Thread and phase properties accepted and ignored (scheduling class parameters).
const IGNORED_PROPS: &[&str] = &[
    "policy",
    "priority",
    "dl-runtime",
    "dl-period",
    "dl-deadline",
    "period",
    "deadline",
    "util_min",
    "util_max",
    "taskgroup",
    "nodes_membind",
];

const EXT_KEYS: &[&str] = &["ampsched_wait", "ampsched_spin_limit_us", "ampsched_mem", "ampsched_ws_kb"];

/// Extension keys of `global` only.
const GLOBAL_EXT_KEYS: &[&str] = &["ampsched_io_mbps"];

/// Known `global` keys (all but `duration`, `calibration` and the extensions are ignored).
const GLOBAL_KEYS: &[&str] = &[
    "duration",
    "calibration",
    "default_policy",
    "pi_enabled",
    "lock_pages",
    "logdir",
    "log_basename",
    "log_size",
    "ftrace",
    "gnuplot",
    "io_device",
    "mem_buffer_size",
    "cumulative_slack",
];

/// An error in an rt-app file: where, which field, what is allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct RtAppError {
    /// The file.
    pub file: String,
    /// 1-based line (0 when unknown).
    pub line: usize,
    /// 1-based column (0 when unknown).
    pub col: usize,
    /// Dotted path of the field (e.g. `tasks.thread0.phases.p1.fork`).
    pub path: String,
    /// What is wrong and what is allowed.
    pub msg: String,
}

impl fmt::Display for RtAppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.col)?;
        }
        if self.path.is_empty() {
            write!(f, ": {}", self.msg)
        } else {
            write!(f, ": field `{}`: {}", self.path, self.msg)
        }
    }
}

impl std::error::Error for RtAppError {}

/// One simulated thread: an instance of an rt-app thread object.
#[derive(Clone, Debug, PartialEq)]
pub struct RtThread {
    /// `name` for a single instance, `name-k` for instance k of several (rt-app's naming).
    pub name: String,
    /// Its program.
    pub program: Program,
}

/// A compiled rt-app file.
#[derive(Clone, Debug, PartialEq)]
pub struct RtApp {
    /// Threads, in file order (instances of one object together).
    pub threads: Vec<RtThread>,
    /// `global.duration` when set (> 0): rt-app stops every thread then.
    pub duration: Option<Nanos>,
    /// What was read but ignored, as rt-app ignores it (e.g. an unknown
    /// `global` key): one line each, naming the file, the field and the key.
    pub warnings: Vec<String>,
}

// ---- a lenient JSON reader that keeps key order and positions ---------------

#[derive(Clone, Debug)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Node>),
    Obj(Vec<(String, Node)>),
}

#[derive(Clone, Debug)]
struct Node {
    at: usize,
    v: Json,
}

impl Node {
    fn kind(&self) -> &'static str {
        match self.v {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Num(_) => "a number",
            Json::Str(_) => "a string",
            Json::Arr(_) => "an array",
            Json::Obj(_) => "an object",
        }
    }
    fn get(&self, key: &str) -> Option<&Node> {
        match &self.v {
            Json::Obj(kv) => kv.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Deepest nesting of objects and arrays the reader accepts. Real rt-app
/// files nest 5 levels (tasks → thread → phases → phase → event); the reader
/// recurses once per level, so a hostile file nested 30 000 deep would
/// overflow the stack without this bound (serde_json's default is 128 too).
pub const MAX_JSON_DEPTH: usize = 128;

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

type PErr = (usize, String);

impl Reader<'_> {
    fn skip(&mut self) -> Result<(), PErr> {
        loop {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
            if self.s[self.i..].starts_with(b"//") {
                while self.i < self.s.len() && self.s[self.i] != b'\n' {
                    self.i += 1;
                }
            } else if self.s[self.i..].starts_with(b"/*") {
                let start = self.i;
                self.i += 2;
                while self.i < self.s.len() && !self.s[self.i..].starts_with(b"*/") {
                    self.i += 1;
                }
                if self.i >= self.s.len() {
                    return Err((start, "unterminated /* comment".into()));
                }
                self.i += 2;
            } else {
                return Ok(());
            }
        }
    }

    fn peek(&mut self) -> Result<Option<u8>, PErr> {
        self.skip()?;
        Ok(self.s.get(self.i).copied())
    }

    fn value(&mut self) -> Result<Node, PErr> {
        let c = self.peek()?.ok_or((self.i, "unexpected end of file, expected a value".to_string()))?;
        let at = self.i;
        if matches!(c, b'{' | b'[') {
            if self.depth >= MAX_JSON_DEPTH {
                return Err((at, format!("nested deeper than {MAX_JSON_DEPTH} objects/arrays: not an rt-app file")));
            }
            self.depth += 1;
        }
        let v = match c {
            b'{' => {
                self.i += 1;
                let mut kv = Vec::new();
                loop {
                    match self.peek()? {
                        Some(b'}') => {
                            self.i += 1;
                            break;
                        }
                        Some(b'"') => {}
                        _ => return Err((self.i, "expected a \"key\" or `}`".into())),
                    }
                    let k = self.string()?;
                    if self.peek()? != Some(b':') {
                        return Err((self.i, format!("expected `:` after key \"{k}\"")));
                    }
                    self.i += 1;
                    let v = self.value()?;
                    kv.push((k, v));
                    match self.peek()? {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {}
                        _ => return Err((self.i, "expected `,` or `}`".into())),
                    }
                }
                Json::Obj(kv)
            }
            b'[' => {
                self.i += 1;
                let mut a = Vec::new();
                loop {
                    if self.peek()? == Some(b']') {
                        self.i += 1;
                        break;
                    }
                    a.push(self.value()?);
                    match self.peek()? {
                        Some(b',') => self.i += 1,
                        Some(b']') => {}
                        _ => return Err((self.i, "expected `,` or `]`".into())),
                    }
                }
                Json::Arr(a)
            }
            b'"' => Json::Str(self.string()?),
            b't' | b'f' | b'n' => {
                let word: &[u8] = match c {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                if !self.s[self.i..].starts_with(word) {
                    return Err((at, "expected true, false or null".into()));
                }
                self.i += word.len();
                match c {
                    b't' => Json::Bool(true),
                    b'f' => Json::Bool(false),
                    _ => Json::Null,
                }
            }
            b'-' | b'+' | b'0'..=b'9' | b'.' => {
                let start = self.i;
                while self.i < self.s.len() && matches!(self.s[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    self.i += 1;
                }
                let t = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                Json::Num(t.parse::<f64>().map_err(|_| (start, format!("bad number `{t}`")))?)
            }
            _ => return Err((at, format!("unexpected character `{}`", c as char))),
        };
        if matches!(c, b'{' | b'[') {
            self.depth -= 1;
        }
        Ok(Node { at, v })
    }

    fn string(&mut self) -> Result<String, PErr> {
        let start = self.i;
        self.i += 1;
        let mut out = Vec::new();
        while self.i < self.s.len() {
            match self.s[self.i] {
                b'"' => {
                    self.i += 1;
                    return String::from_utf8(out).map_err(|_| (start, "string is not UTF-8".into()));
                }
                b'\\' => {
                    let e = *self.s.get(self.i + 1).ok_or((self.i, "unterminated string".to_string()))?;
                    self.i += 2;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'u' => {
                            let hex = self.s.get(self.i..self.i + 4).ok_or((self.i, "bad \\u escape".to_string()))?;
                            let code = u32::from_str_radix(std::str::from_utf8(hex).unwrap_or("x"), 16)
                                .map_err(|_| (self.i, "bad \\u escape".to_string()))?;
                            let ch = char::from_u32(code).unwrap_or('\u{fffd}');
                            let mut b = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                            self.i += 4;
                        }
                        other => out.push(other),
                    }
                }
                b => {
                    out.push(b);
                    self.i += 1;
                }
            }
        }
        Err((start, "unterminated string".into()))
    }
}

fn parse_json(text: &str) -> Result<Node, PErr> {
    let mut r = Reader { s: text.as_bytes(), i: 0, depth: 0 };
    let v = r.value()?;
    if r.peek()?.is_some() {
        return Err((r.i, "trailing characters after the top-level object".into()));
    }
    Ok(v)
}

// ---- compilation -------------------------------------------------------------

struct Ctx<'a> {
    text: &'a str,
    file: &'a str,
    topo: &'a Topology,
    calib_speed: f64,
    /// Name → id per kind (first appearance order).
    ids: BTreeMap<(&'static str, String), u32>,
    next_id: u32,
    /// Barrier name → parties (references × instances).
    barrier_parties: BTreeMap<String, u32>,
    /// Bytes per ns a `mem` event writes (the level holding the buffer).
    mem_gbps: f64,
    /// Bytes per ns an `iorun` writes; `None`: `/dev/null` (free).
    io_gbps: Option<f64>,
    /// Whether `global.io_device` is a real device (needs `ampsched_io_mbps`).
    io_real: bool,
}

#[derive(Clone, Copy)]
struct Ext {
    wait: Wait,
    mem: f64,
    ws_kb: u32,
}

impl Ctx<'_> {
    fn err(&self, at: usize, path: &str, msg: impl Into<String>) -> RtAppError {
        let before = &self.text[..at.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map(|s| s.chars().count()).unwrap_or(0) + 1;
        RtAppError { file: self.file.into(), line, col, path: path.into(), msg: msg.into() }
    }

    fn id(&mut self, kind: &'static str, name: &str) -> u32 {
        let next = &mut self.next_id;
        *self.ids.entry((kind, name.to_string())).or_insert_with(|| {
            *next += 1;
            RTAPP_ID_BASE + *next - 1
        })
    }

    fn fresh_id(&mut self) -> u32 {
        self.next_id += 1;
        RTAPP_ID_BASE + self.next_id - 1
    }

    fn int(&self, n: &Node, path: &str, min: i64) -> Result<i64, RtAppError> {
        match n.v {
            Json::Num(x) if x.fract() == 0.0 && x >= min as f64 && x <= 1e15 => Ok(x as i64),
            _ => Err(self.err(n.at, path, format!("must be an integer in [{min}, 1e15], got {}", show(n)))),
        }
    }

    fn us(&self, n: &Node, path: &str) -> Result<Nanos, RtAppError> {
        Ok(Nanos(self.int(n, path, 0)? as u64 * 1000))
    }

    fn string<'n>(&self, n: &'n Node, path: &str) -> Result<&'n str, RtAppError> {
        match &n.v {
            Json::Str(s) => Ok(s),
            _ => Err(self.err(n.at, path, format!("must be a string (a resource name), got {}", show(n)))),
        }
    }

    fn obj<'n>(&self, n: &'n Node, path: &str) -> Result<&'n [(String, Node)], RtAppError> {
        match &n.v {
            Json::Obj(kv) => Ok(kv),
            _ => Err(self.err(n.at, path, format!("must be an object, got {}", show(n)))),
        }
    }

    fn cpus(&self, n: &Node, path: &str) -> Result<CpuSet, RtAppError> {
        let Json::Arr(a) = &n.v else {
            return Err(self.err(n.at, path, format!("must be an array of CPU numbers, got {}", show(n))));
        };
        let mut set = CpuSet::new();
        for (i, c) in a.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let c = self.int(c, &p, 0)?;
            if c as usize >= self.topo.ncpus() {
                return Err(self.err(
                    a[i].at,
                    &p,
                    format!("CPU {c} does not exist (the simulated machine has 0-{})", self.topo.ncpus() - 1),
                ));
            }
            set.insert(crate::ids::CpuId(c as u32));
        }
        if set.is_empty() {
            return Err(self.err(n.at, path, "must name at least one CPU"));
        }
        Ok(set)
    }

    /// Read extension keys of one level over the inherited values.
    fn ext(&self, obj: &Node, path: &str, up: Ext) -> Result<Ext, RtAppError> {
        let mut e = up;
        let limit = match obj.get("ampsched_spin_limit_us") {
            Some(n) => match n.v {
                Json::Num(x) if x.is_finite() && x >= 0.0 => Some(x),
                _ => {
                    return Err(self.err(
                        n.at,
                        &format!("{path}.ampsched_spin_limit_us"),
                        format!("must be a number ≥ 0 (µs), got {}", show(n)),
                    ))
                }
            },
            None => None,
        };
        if let Some(n) = obj.get("ampsched_wait") {
            let p = format!("{path}.ampsched_wait");
            e.wait = match self.string(n, &p)? {
                "block" => Wait::Block,
                "spin" => Wait::Spin,
                "spin-then-block" => {
                    Wait::SpinThenBlock(Nanos::from_ms_f64(limit.unwrap_or(DEFAULT_SPIN_LIMIT_US) / 1000.0))
                }
                other => {
                    return Err(self.err(
                        n.at,
                        &p,
                        format!("unknown wait `{other}`; allowed: block, spin, spin-then-block"),
                    ))
                }
            };
        } else if let (Some(l), Wait::SpinThenBlock(_)) = (limit, e.wait) {
            e.wait = Wait::SpinThenBlock(Nanos::from_ms_f64(l / 1000.0));
        }
        if let Some(n) = obj.get("ampsched_mem") {
            match n.v {
                Json::Num(x) if (0.0..1.0).contains(&x) => e.mem = x,
                _ => {
                    return Err(self.err(
                        n.at,
                        &format!("{path}.ampsched_mem"),
                        format!("must be a fraction in [0, 1), got {}", show(n)),
                    ))
                }
            }
        }
        if let Some(n) = obj.get("ampsched_ws_kb") {
            e.ws_kb = self.int(n, &format!("{path}.ampsched_ws_kb"), 0)?.min(u32::MAX as i64) as u32;
        }
        Ok(e)
    }
}

fn show(n: &Node) -> String {
    match &n.v {
        Json::Num(x) => crate::spec::show_f64(*x),
        Json::Str(s) => format!("\"{s}\""),
        Json::Bool(b) => format!("{b}"),
        _ => n.kind().to_string(),
    }
}

/// The event a key names (rt-app's prefix rule), if any.
fn event_of(key: &str) -> Option<&'static str> {
    EVENTS.iter().copied().find(|e| key.starts_with(e))
}

/// The phases of a thread object: `(path, phase object)` in order.
fn phases_of<'n>(cx: &Ctx, t: &'n Node, tpath: &str) -> Result<Vec<(String, &'n Node)>, RtAppError> {
    match t.get("phases") {
        Some(ph) => {
            let kv = cx.obj(ph, &format!("{tpath}.phases"))?;
            if kv.is_empty() {
                return Err(cx.err(ph.at, &format!("{tpath}.phases"), "needs at least one phase"));
            }
            Ok(kv.iter().map(|(k, v)| (format!("{tpath}.phases.{k}"), v)).collect())
        }
        None => Ok(vec![(tpath.to_string(), t)]),
    }
}

/// Check a thread or phase object's keys; `thread` says which level it is.
fn check_keys(cx: &Ctx, o: &Node, path: &str, thread: bool, has_phases: bool) -> Result<(), RtAppError> {
    for (k, v) in cx.obj(o, path)? {
        let p = format!("{path}.{k}");
        if let Some(ev) = event_of(k) {
            if thread && has_phases {
                return Err(cx.err(v.at, &p, format!("event `{ev}` next to `phases`: put events inside a phase")));
            }
            if !SUPPORTED_EVENTS.contains(&ev) {
                return Err(cx.err(
                    v.at,
                    &p,
                    format!(
                        "rt-app event `{ev}` is not supported by the simulator (in {}); supported events: {}",
                        cx.file,
                        SUPPORTED_EVENTS.join(", ")
                    ),
                ));
            }
            continue;
        }
        if thread && OLD_GRAMMAR.contains(&k.as_str()) {
            return Err(cx.err(
                v.at,
                &p,
                format!(
                    "`{k}` is rt-app's pre-1.0 grammar (`exec`, `resources`, `lock_order`, as in the fragments of \
                     rt-app's doc/examples/merge), which rt-app 1.0 and ampsched do not read; write the thread's \
                     events instead (run, lock, unlock, wait, …)"
                ),
            ));
        }
        let known = ["loop", "cpus"].contains(&k.as_str())
            || IGNORED_PROPS.contains(&k.as_str())
            || EXT_KEYS.contains(&k.as_str())
            || (thread && ["instance", "delay", "phases"].contains(&k.as_str()));
        if !known {
            let mut allowed: Vec<&str> = vec!["loop", "cpus"];
            if thread {
                allowed.extend(["instance", "delay", "phases"]);
            }
            allowed.extend(IGNORED_PROPS);
            allowed.extend(EXT_KEYS);
            return Err(cx.err(
                v.at,
                &p,
                format!(
                    "unknown key `{k}`: neither an rt-app event ({}) nor a property ({})",
                    SUPPORTED_EVENTS.join(", "),
                    allowed.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Compile one phase's events into `out`.
fn compile_events(
    cx: &mut Ctx,
    ph: &Node,
    path: &str,
    ext: Ext,
    start: Nanos,
    unique: &mut BTreeMap<String, u32>,
    out: &mut Vec<Op>,
) -> Result<(), RtAppError> {
    let kv = cx.obj(ph, path)?;
    let mut any = false;
    for (k, v) in kv {
        let Some(ev) = event_of(k) else { continue };
        any = true;
        let p = format!("{path}.{k}");
        match ev {
            "run" => {
                let us = cx.int(v, &p, 0)? as f64;
                out.push(Op::Compute {
                    work: Nanos((us * 1000.0 * cx.calib_speed).round() as u64),
                    mem: ext.mem,
                    ws_kb: ext.ws_kb,
                    overlap: 1.0,
                });
            }
            "runtime" => out.push(Op::Runtime { dur: cx.us(v, &p)? }),
            "mem" => {
                // Bytes / (bytes per ns) = ns, whatever the CPU's speed.
                let bytes = cx.int(v, &p, 0)? as f64;
                out.push(Op::Runtime { dur: Nanos((bytes / cx.mem_gbps).round() as u64) });
            }
            "iorun" => {
                let bytes = cx.int(v, &p, 0)? as f64;
                match cx.io_gbps {
                    Some(g) => out.push(Op::Sleep { dur: Nanos((bytes / g).round() as u64) }),
                    None if cx.io_real => {
                        return Err(cx.err(
                            v.at,
                            &p,
                            "`iorun` to a real `global.io_device` needs `global.ampsched_io_mbps` (the device's \
                             write bandwidth, MB/s) to model the time blocked",
                        ))
                    }
                    None => {} // /dev/null: the write returns at once
                }
            }
            "sleep" => out.push(Op::Sleep { dur: cx.us(v, &p)? }),
            "timer" => {
                cx.obj(v, &p)?;
                let r = match v.get("ref") {
                    Some(n) => cx.string(n, &format!("{p}.ref"))?.to_string(),
                    None => "unknown".into(),
                };
                let per = v.get("period").ok_or_else(|| cx.err(v.at, &p, "a timer needs a `period` (µs)"))?;
                let period = cx.us(per, &format!("{p}.period"))?;
                if period.0 == 0 {
                    return Err(cx.err(per.at, &format!("{p}.period"), "must be > 0"));
                }
                let relative = match v.get("mode") {
                    None => true,
                    Some(m) => match cx.string(m, &format!("{p}.mode"))? {
                        "relative" => true,
                        "absolute" => false,
                        other => {
                            return Err(cx.err(
                                m.at,
                                &format!("{p}.mode"),
                                format!("unknown mode `{other}`; allowed: relative, absolute"),
                            ))
                        }
                    },
                };
                let id = if r.starts_with("unique") {
                    match unique.get(&r) {
                        Some(id) => *id,
                        None => {
                            let id = cx.fresh_id();
                            unique.insert(r, id);
                            id
                        }
                    }
                } else {
                    cx.id("timer", &r)
                };
                out.push(Op::Timer { id, period, relative, start });
            }
            "lock" => {
                let id = cx.id("mutex", cx.string(v, &p)?);
                out.push(Op::Lock { id, wait: ext.wait });
            }
            "unlock" => {
                let id = cx.id("mutex", cx.string(v, &p)?);
                out.push(Op::Unlock { id });
            }
            "signal" | "broad" => {
                let id = cx.id("cond", cx.string(v, &p)?);
                out.push(Op::CondSignal { id, broadcast: ev == "broad" });
            }
            "resume" => {
                let id = cx.id("cond", cx.string(v, &p)?);
                out.push(Op::CondSignal { id, broadcast: true });
            }
            "suspend" => {
                let id = cx.id("cond", cx.string(v, &p)?);
                out.push(Op::CondWait { id, wait: ext.wait });
            }
            "wait" | "sync" => {
                cx.obj(v, &p)?;
                let r = v.get("ref").ok_or_else(|| cx.err(v.at, &p, format!("`{ev}` needs a `ref` (condition)")))?;
                let m = v.get("mutex").ok_or_else(|| cx.err(v.at, &p, format!("`{ev}` needs a `mutex`")))?;
                let cond = cx.id("cond", cx.string(r, &format!("{p}.ref"))?);
                let mutex = cx.id("mutex", cx.string(m, &format!("{p}.mutex"))?);
                if ev == "sync" {
                    out.push(Op::CondSignal { id: cond, broadcast: false });
                }
                out.push(Op::Unlock { id: mutex });
                out.push(Op::CondWait { id: cond, wait: ext.wait });
                out.push(Op::Lock { id: mutex, wait: ext.wait });
            }
            "barrier" => {
                let name = cx.string(v, &p)?.to_string();
                let id = cx.id("barrier", &name);
                let parties = cx.barrier_parties.get(&name).copied().unwrap_or(1);
                out.push(Op::BarrierN { id, parties, wait: ext.wait });
            }
            "sem_post" => {
                let id = cx.id("sem", cx.string(v, &p)?);
                out.push(Op::Push { chan: id, capacity: u32::MAX, wait: Wait::Block });
            }
            "sem_wait" => {
                let id = cx.id("sem", cx.string(v, &p)?);
                out.push(Op::Pop { chan: id, wait: ext.wait });
            }
            _ => unreachable!("checked by check_keys"),
        }
    }
    if !any {
        return Err(cx.err(ph.at, path, "no events: a phase needs at least one event (e.g. \"run\": 1000)"));
    }
    Ok(())
}

fn loop_count(cx: &Ctx, o: &Node, path: &str, default: u32) -> Result<u32, RtAppError> {
    match o.get("loop") {
        None => Ok(default),
        Some(n) => {
            let l = cx.int(n, &format!("{path}.loop"), -1)?;
            match l {
                -1 => Ok(LOOP_FOREVER),
                0 => Err(cx.err(n.at, &format!("{path}.loop"), "must be ≥ 1, or -1 (forever)")),
                l => Ok(l.min(LOOP_FOREVER as i64) as u32),
            }
        }
    }
}

fn wrap_loop(count: u32, body: Vec<Op>, out: &mut Vec<Op>) {
    // Loop indices in `body` count from 0: shift them to where the body lands.
    let looped = count != 1;
    let start = out.len();
    let base = (start + usize::from(looped)) as u32;
    if looped {
        out.push(Op::LoopStart { count, end: 0 });
    }
    for op in body {
        out.push(match op {
            Op::LoopStart { count, end } => Op::LoopStart { count, end: end + base },
            Op::LoopEnd { start: s } => Op::LoopEnd { start: s + base },
            other => other,
        });
    }
    if looped {
        let end = out.len();
        out.push(Op::LoopEnd { start: start as u32 });
        out[start] = Op::LoopStart { count, end: end as u32 };
    }
}

/// Compile rt-app JSON `text` (from `file`, for errors) for the simulated machine `topo`.
pub fn compile(text: &str, file: &str, topo: &Topology) -> Result<RtApp, RtAppError> {
    let new_ctx = || Ctx {
        text,
        file,
        topo,
        calib_speed: 1.0,
        ids: BTreeMap::new(),
        next_id: 0,
        barrier_parties: BTreeMap::new(),
        mem_gbps: topo.cache.llc_refill_gbps,
        io_gbps: None,
        io_real: false,
    };
    let root = parse_json(text).map_err(|(at, msg)| new_ctx().err(at, "", format!("not valid rt-app JSON: {msg}")))?;
    let mut cx = new_ctx();
    let mut warnings = Vec::new();
    let top = cx.obj(&root, "")?;
    for (k, v) in top {
        if !["tasks", "global", "resources"].contains(&k.as_str()) {
            return Err(cx.err(v.at, k, format!("unknown top-level key `{k}`; allowed: tasks, global, resources")));
        }
    }
    // global
    let mut ext = Ext { wait: Wait::Block, mem: 0.0, ws_kb: 0 };
    let mut duration = None;
    let mut buffer = DEFAULT_MEM_BUFFER;
    if let Some(g) = root.get("global") {
        for (k, v) in cx.obj(g, "global")? {
            let known = [GLOBAL_KEYS, EXT_KEYS, GLOBAL_EXT_KEYS].iter().any(|l| l.contains(&k.as_str()));
            if !known {
                warnings.push(
                    cx.err(
                        v.at,
                        &format!("global.{k}"),
                        format!(
                            "unknown global key `{k}` ignored (rt-app ignores it too); known: {}, {}, {}",
                            GLOBAL_KEYS.join(", "),
                            EXT_KEYS.join(", "),
                            GLOBAL_EXT_KEYS.join(", ")
                        ),
                    )
                    .to_string(),
                );
            }
        }
        if let Some(n) = g.get("mem_buffer_size") {
            buffer = cx.int(n, "global.mem_buffer_size", 1)?;
        }
        if let Some(n) = g.get("io_device") {
            cx.io_real = cx.string(n, "global.io_device")? != "/dev/null";
        }
        if let Some(n) = g.get("ampsched_io_mbps") {
            match n.v {
                // MB/s = 1e6 bytes per 1e9 ns = 1e-3 bytes per ns.
                Json::Num(x) if x.is_finite() && x > 0.0 => cx.io_gbps = Some(x / 1000.0),
                _ => {
                    return Err(cx.err(
                        n.at,
                        "global.ampsched_io_mbps",
                        format!("must be a number > 0 (MB/s), got {}", show(n)),
                    ))
                }
            }
        }
        if let Some(d) = g.get("duration") {
            let s = cx.int(d, "global.duration", -1)?;
            if s > 0 {
                duration = Some(Nanos::from_secs_f64(s as f64));
            }
        }
        if let Some(c) = g.get("calibration") {
            match &c.v {
                Json::Str(s) => {
                    let k = s.strip_prefix("CPU").and_then(|n| n.parse::<usize>().ok()).ok_or_else(|| {
                        cx.err(c.at, "global.calibration", format!("must be \"CPUk\" or an integer, got \"{s}\""))
                    })?;
                    let cpu = topo.cpus.get(k).ok_or_else(|| {
                        cx.err(
                            c.at,
                            "global.calibration",
                            format!("CPU{k} does not exist (the simulated machine has 0-{})", topo.ncpus() - 1),
                        )
                    })?;
                    cx.calib_speed = cpu.speed;
                }
                Json::Num(_) => {
                    cx.int(c, "global.calibration", 1)?;
                }
                _ => return Err(cx.err(c.at, "global.calibration", "must be \"CPUk\" or an integer (ns per loop)")),
            }
        } else if let Some(cpu) = topo.cpus.first() {
            cx.calib_speed = cpu.speed;
        }
        ext = cx.ext(g, "global", ext)?;
    } else if let Some(cpu) = topo.cpus.first() {
        cx.calib_speed = cpu.speed;
    }
    // `mem` writes stay in the caches when the buffer fits in L2 + LLC (KiB).
    if buffer > (topo.cache.l2_kb as i64 + topo.cache.llc_kb as i64) * 1024 {
        cx.mem_gbps = topo.cache.dram_refill_gbps;
    }
    let tasks = root.get("tasks").ok_or_else(|| {
        let fragment = root.get("global").is_some() || root.get("resources").is_some();
        let msg = if fragment {
            "no `tasks` object: this is a fragment (only `global` or `resources`) for rt-app's doc/merge.py; \
             merge it with its thread files into one file first"
        } else {
            "an rt-app file needs a `tasks` object"
        };
        cx.err(root.at, "tasks", msg)
    })?;
    let tkv = cx.obj(tasks, "tasks")?;
    if tkv.is_empty() {
        return Err(cx.err(tasks.at, "tasks", "needs at least one thread"));
    }
    // Pass 1: check keys, count barrier parties (references × instances).
    let mut instances = Vec::new();
    for (name, t) in tkv {
        let tpath = format!("tasks.{name}");
        let has_phases = t.get("phases").is_some();
        check_keys(&cx, t, &tpath, true, has_phases)?;
        let inst = match t.get("instance") {
            Some(n) => cx.int(n, &format!("{tpath}.instance"), 0)?.min(4096) as u32,
            None => 1,
        };
        instances.push(inst);
        for (ppath, ph) in phases_of(&cx, t, &tpath)? {
            if has_phases {
                check_keys(&cx, ph, &ppath, false, false)?;
            }
            for (k, v) in cx.obj(ph, &ppath)? {
                if event_of(k) == Some("barrier") {
                    let b = cx.string(v, &format!("{ppath}.{k}"))?.to_string();
                    *cx.barrier_parties.entry(b).or_insert(0) += inst;
                }
            }
        }
    }
    // Pass 2: programs, one per instance.
    let mut threads = Vec::new();
    for ((name, t), inst) in tkv.iter().zip(instances) {
        let tpath = format!("tasks.{name}");
        let has_phases = t.get("phases").is_some();
        let text_ext = cx.ext(t, &tpath, ext)?;
        let delay = match t.get("delay") {
            Some(n) => cx.us(n, &format!("{tpath}.delay"))?,
            None => Nanos::ZERO,
        };
        let tcpus = match t.get("cpus") {
            Some(n) => Some(cx.cpus(n, &format!("{tpath}.cpus"))?),
            None => None,
        };
        let phases = phases_of(&cx, t, &tpath)?;
        let mut pcpus = Vec::new();
        for (ppath, ph) in &phases {
            pcpus.push(match (has_phases, ph.get("cpus")) {
                (true, Some(n)) => Some(cx.cpus(n, &format!("{ppath}.cpus"))?),
                _ => None,
            });
        }
        let per_phase_affinity = pcpus.iter().any(|c| c.is_some());
        // Thread loop: with phases, default forever; without, `loop` is the phase's and the thread runs once
        // when it is given, forever when not.
        let thread_loop = if has_phases {
            loop_count(&cx, t, &tpath, LOOP_FOREVER)?
        } else if t.get("loop").is_some() {
            1
        } else {
            LOOP_FOREVER
        };
        for k in 0..inst {
            let mut unique = BTreeMap::new();
            let mut body = Vec::new();
            for ((ppath, ph), pc) in phases.iter().zip(&pcpus) {
                if per_phase_affinity {
                    let mask = (*pc).or(tcpus).unwrap_or(topo.all);
                    body.push(Op::Affinity { mask });
                }
                let pext = if has_phases { cx.ext(ph, ppath, text_ext)? } else { text_ext };
                let mut pbody = Vec::new();
                compile_events(&mut cx, ph, ppath, pext, delay, &mut unique, &mut pbody)?;
                let ploop = loop_count(&cx, ph, ppath, 1)?;
                wrap_loop(ploop, pbody, &mut body);
            }
            let mut ops = Vec::new();
            if let Some(m) = tcpus {
                ops.push(Op::Affinity { mask: m });
            }
            if delay.0 > 0 {
                ops.push(Op::Sleep { dur: delay });
            }
            wrap_loop(thread_loop, body, &mut ops);
            ops.push(Op::End);
            let program = Program { ops };
            program.validate().map_err(|m| cx.err(t.at, &tpath, m))?;
            let tname = if inst == 1 { name.clone() } else { format!("{name}-{k}") };
            threads.push(RtThread { name: tname, program });
        }
    }
    if threads.is_empty() {
        return Err(cx.err(tasks.at, "tasks", "every thread has `instance` 0: nothing would run"));
    }
    Ok(RtApp { threads, duration, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo() -> Topology {
        // CPU0 fast (2.0), CPUs 1-3 slow (1.0)
        Topology::fast_slow(1, 2.0, 3, 1.0, 4)
    }

    fn ops(text: &str) -> Vec<Vec<Op>> {
        compile(text, "t.json", &topo())
            .unwrap_or_else(|e| panic!("{e}"))
            .threads
            .into_iter()
            .map(|t| t.program.ops)
            .collect()
    }

    #[test]
    fn run_scales_by_the_calibration_cpu_and_sleep_is_wall_time() {
        // run 1000 µs calibrated on CPU0 (speed 2.0) = 2 ms of work at speed 1.0;
        // calibrated on CPU1 (speed 1.0) = 1 ms. sleep 500 µs = 0.5 ms.
        let a = ops(r#"{ "tasks": { "t": { "loop": 1, "run": 1000, "sleep": 500 } } }"#);
        assert_eq!(a[0][0], Op::Compute { work: Nanos::from_ms(2), mem: 0.0, ws_kb: 0, overlap: 1.0 });
        assert_eq!(a[0][1], Op::Sleep { dur: Nanos::from_us(500) });
        let b = ops(r#"{ "global": { "calibration": "CPU1" }, "tasks": { "t": { "loop": 1, "run": 1000 } } }"#);
        assert_eq!(b[0][0], Op::Compute { work: Nanos::from_ms(1), mem: 0.0, ws_kb: 0, overlap: 1.0 });
    }

    #[test]
    fn phases_loops_instances_and_comments() {
        let text = r#"{
            /* two instances, two phases, thread loop 3 */
            "tasks": { "w": { "instance": 2, "loop": 3, "phases": {
                "p0": { "loop": 4, "run": 100, "runtime": 50, },
                "p1": { "sleep": 10 }, // trailing comma above is fine
            } } }
        }"#;
        let a = ops(text);
        assert_eq!(a.len(), 2);
        // LoopStart(3) [LoopStart(4) run runtime LoopEnd] sleep LoopEnd End
        assert_eq!(a[0].len(), 8);
        assert_eq!(a[0][0], Op::LoopStart { count: 3, end: 6 });
        assert_eq!(a[0][1], Op::LoopStart { count: 4, end: 4 });
        assert_eq!(a[0][3], Op::Runtime { dur: Nanos::from_us(50) });
        assert_eq!(a[0][4], Op::LoopEnd { start: 1 });
        assert_eq!(a[0][5], Op::Sleep { dur: Nanos::from_us(10) });
        assert_eq!(a[0][6], Op::LoopEnd { start: 0 });
        let p = Program { ops: a[0].clone() };
        // 3 × 4 × 100 µs × speed 2.0 = 2.4 ms of work
        assert_eq!(p.total_work(), Nanos::from_us(2400));
    }

    #[test]
    fn without_loop_a_thread_runs_forever_and_phase_loop_defaults_to_one() {
        let a = ops(r#"{ "tasks": { "t": { "run": 10 } } }"#);
        assert_eq!(a[0][0], Op::LoopStart { count: LOOP_FOREVER, end: 2 });
    }

    #[test]
    fn barrier_parties_count_references_times_instances() {
        // a (2 instances) and b (1) reference "B": 3 parties.
        let a = ops(
            r#"{ "tasks": { "a": { "instance": 2, "loop": 1, "barrier": "B" }, "b": { "loop": 1, "barrier": "B" } } }"#,
        );
        for t in &a {
            assert!(matches!(t[0], Op::BarrierN { parties: 3, .. }), "{t:?}");
        }
    }

    #[test]
    fn wait_is_unlock_condwait_lock_and_unique_timers_are_per_instance() {
        let a = ops(r#"{ "tasks": { "t": { "instance": 2, "loop": 1,
                 "lock": "m", "wait": { "ref": "c", "mutex": "m" }, "unlock": "m",
                 "timer": { "ref": "unique", "period": 1000 } } } }"#);
        let m = match a[0][0] {
            Op::Lock { id, .. } => id,
            ref o => panic!("{o:?}"),
        };
        assert_eq!(a[0][1], Op::Unlock { id: m });
        assert!(matches!(a[0][2], Op::CondWait { wait: Wait::Block, .. }));
        assert_eq!(a[0][3], Op::Lock { id: m, wait: Wait::Block });
        let tid = |ops: &[Op]| match ops[5] {
            Op::Timer { id, period, relative: true, start } => {
                assert_eq!((period, start), (Nanos::from_ms(1), Nanos::ZERO));
                id
            }
            ref o => panic!("{o:?}"),
        };
        assert_ne!(tid(&a[0]), tid(&a[1]));
    }

    #[test]
    fn spin_extension_and_cpus() {
        let a = ops(r#"{ "global": { "ampsched_wait": "spin-then-block", "ampsched_spin_limit_us": 100 },
                 "tasks": { "t": { "cpus": [1, 2], "delay": 20, "phases": {
                    "p0": { "cpus": [0], "lock": "m", "unlock": "m" },
                    "p1": { "ampsched_wait": "spin", "barrier": "b" } } } } }"#);
        let t = &a[0];
        assert_eq!(t[0], Op::Affinity { mask: CpuSet::parse_list("1-2").unwrap() });
        assert_eq!(t[1], Op::Sleep { dur: Nanos::from_us(20) });
        // thread loop forever wraps: Affinity(0) lock unlock Affinity(1-2) barrier
        assert_eq!(t[3], Op::Affinity { mask: CpuSet::parse_list("0").unwrap() });
        assert!(matches!(t[4], Op::Lock { wait: Wait::SpinThenBlock(l), .. } if l == Nanos::from_us(100)));
        assert_eq!(t[6], Op::Affinity { mask: CpuSet::parse_list("1-2").unwrap() });
        assert!(matches!(t[7], Op::BarrierN { wait: Wait::Spin, parties: 1, .. }));
    }

    #[test]
    fn mem_is_memory_bound_busy_time_and_iorun_blocks() {
        // Default cache: L2 512 KiB + LLC 2048 KiB = 2,621,440 bytes. rt-app's
        // default 4 MiB buffer (4,194,304 bytes) does not fit: DRAM, 2.4 bytes/ns,
        // so mem 1000 = 1000 / 2.4 = 416.7 → 417 ns busy, whatever the CPU speed.
        let a = ops(r#"{ "tasks": { "t": { "loop": 1, "mem": 1000, "iorun": 5000 } } }"#);
        assert_eq!(a[0][0], Op::Runtime { dur: Nanos(417) });
        // iorun to the default /dev/null costs nothing: mem, then End.
        assert_eq!(a[0][1], Op::End);
        // A 1 MiB buffer fits: LLC, 7.0 bytes/ns: 1000 / 7 = 142.9 → 143 ns.
        // iorun 5000 bytes at 100 MB/s (0.1 bytes/ns) = 50,000 ns blocked.
        let b = ops(r#"{ "global": { "mem_buffer_size": 1048576, "io_device": "/tmp/f", "ampsched_io_mbps": 100 },
                 "tasks": { "t": { "loop": 1, "mem": 1000, "iorun": 5000 } } }"#);
        assert_eq!(b[0][0], Op::Runtime { dur: Nanos(143) });
        assert_eq!(b[0][1], Op::Sleep { dur: Nanos(50_000) });
        let e = compile(
            r#"{ "global": { "io_device": "/tmp/f" }, "tasks": { "t": { "loop": 1, "iorun": 5 } } }"#,
            "io.json",
            &topo(),
        )
        .unwrap_err();
        assert_eq!(e.path, "tasks.t.iorun");
        assert!(e.msg.contains("ampsched_io_mbps"), "{e}");
    }

    #[test]
    fn unknown_global_keys_warn_and_old_grammar_and_fragments_are_named() {
        let r = compile(r#"{ "global": { "frag": 1 }, "tasks": { "t": { "loop": 1, "run": 5 } } }"#, "b.json", &topo())
            .expect("rt-app ignores unknown global keys, so do we");
        assert_eq!(r.warnings.len(), 1);
        // The value `1` is at column 23 of line 1.
        assert!(r.warnings[0].starts_with("b.json:1:23: field `global.frag`: unknown global key `frag` ignored"));
        let e =
            compile(r#"{ "tasks": { "thread0": { "exec": 5000, "period": 5000 } } }"#, "m.json", &topo()).unwrap_err();
        assert_eq!(e.path, "tasks.thread0.exec");
        assert!(e.msg.contains("pre-1.0 grammar"), "{e}");
        let e = compile(r#"{ "resources": { "m0": { "type": "mutex" } } }"#, "r.json", &topo()).unwrap_err();
        assert!(e.msg.contains("fragment") && e.msg.contains("merge.py"), "{e}");
    }

    #[test]
    fn errors_name_the_event_file_and_place() {
        let e = compile("{\n \"tasks\": { \"t\": {\n  \"fork\": \"t\" } } }", "w.json", &topo()).unwrap_err();
        assert_eq!((e.file.as_str(), e.line, e.path.as_str()), ("w.json", 3, "tasks.t.fork"));
        assert!(e.msg.contains("`fork` is not supported") && e.msg.contains("w.json"), "{e}");
        let e = compile(r#"{ "tasks": { "t": { "rn": 5 } } }"#, "w.json", &topo()).unwrap_err();
        assert!(e.msg.contains("unknown key `rn`"), "{e}");
        let e = compile(r#"{ "tasks": { "t": { "cpus": [9], "run": 5 } } }"#, "w.json", &topo()).unwrap_err();
        assert!(e.msg.contains("CPU 9 does not exist"), "{e}");
        let e = compile(r#"{ "tasks": { "t": { "run": -5 } } }"#, "w.json", &topo()).unwrap_err();
        assert_eq!(e.path, "tasks.t.run");
        let e = compile(r#"{ "tasks": { "t": { "run": 5 } "#, "w.json", &topo()).unwrap_err();
        assert!(e.msg.contains("not valid rt-app JSON"), "{e}");
        let e = compile(r#"{ "tasks": { "t": { "run": 1e300 } } }"#, "w.json", &topo()).unwrap_err();
        assert!(e.msg.contains("must be an integer in [0, 1e15], got 1e300"), "{e}");
    }

    #[test]
    fn rtapp_deep_nesting_is_a_located_error_not_a_stack_overflow() {
        // 30 000 levels crashed the recursive reader (SIGABRT); now the level past the limit is
        // named. `{` is level 1, so the 128th `[` is level 129; line 2 starts with `"x": ` (5
        // columns), so that `[` is at column 5 + 128 = 133.
        let deep = format!("{{\n\"x\": {}{}}}", "[".repeat(30_000), "]".repeat(30_000));
        let e = compile(&deep, "deep.json", &topo()).unwrap_err();
        assert_eq!((e.line, e.col), (2, 133), "{e}");
        assert!(e.msg.contains("nested deeper than 128"), "{e}");
        // At the limit the reader still accepts the value (the error is then about the shape).
        let ok_depth = format!("{{\"x\": {}{}}}", "[".repeat(MAX_JSON_DEPTH - 1), "]".repeat(MAX_JSON_DEPTH - 1));
        let e = compile(&ok_depth, "d.json", &topo()).unwrap_err();
        assert!(!e.msg.contains("nested deeper"), "{e}");
    }
}
