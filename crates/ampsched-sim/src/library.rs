//! Workload model library: named program models as data, turned into programs
//! by a handful of templates.
//!
//! Design. The models (which program, which template, which numbers, where the
//! numbers come from) live in `models/library.toml`, never in code
//! (docs/design/architecture.md rule 6). Code holds only the *templates*: how a parameter
//! set becomes one [`Program`] per thread of a sync group. A scenario names a
//! model and may override any of its parameters; overrides are checked against
//! the template's parameter list exactly like the file's own values.
//!
//! Templates (parameters, defaults and docs: [`Library::templates`]):
//! - `sequential`: one compute per thread (each thread is an independent copy).
//! - `cpu-bound`: one long compute per thread (duration-bounded scenarios).
//! - `fork-join`: rounds of [serial part on thread 0 | barrier | equal shares | barrier];
//!   `work_s` is the total single-threaded work (strong scaling).
//! - `phased`: bulk-synchronous phases of `phase_ms` work *per thread* (weak
//!   scaling), `barriers_per_phase` barriers each, a sequential section on
//!   thread 0 every `serial_every` phases while the others wait at a barrier.
//! - `pipeline`: stages connected by bounded channels, threads assigned to
//!   stages round-robin.
//! - `workqueue`: parallel loops (`ParFor`) with static, dynamic or guided
//!   partitioning, optional serial work between loops.
//! - `server`: a throughput server — thread 0 generates requests with
//!   exponential inter-arrival times (Poisson arrivals, drawn from the run's
//!   seed) into a bounded backlog; threads 1.. are a worker pool that pops
//!   and serves them. Meant for duration-bounded runs (`stop.duration_s`):
//!   `requests` is an upper bound the run normally does not reach.
//! - `closed-server`: a server under a closed loop of clients, as load
//!   generators drive one (SPECweb/TPC-style drivers, Menascé & Almeida's
//!   closed queueing model): each of `clients` client threads thinks (an
//!   exponential sleep of mean `think_ms`), sends one request and waits for
//!   its reply before thinking again; the other threads are the worker pool.
//!   Light and heavy load differ in the client count, not in a rate: a slow
//!   machine slows its own clients down (response time lengthens the cycle)
//!   instead of piling up a backlog (see `build_closed_server`).
//! - `periodic`: independent threads that wake every period (random first
//!   phase) for a little work — an idle guest's or dom0's timer ticks.
//! - `blocked-lu`: SPLASH-2 LU as lu.c runs it — N/B block steps, 2 barriers
//!   each, the diagonal factorised by its owner, the rest by 2-D scatter
//!   ownership, interior work shrinking quadratically (see `build_blocked_lu`).
//! - `frame-encoder`: a threaded H.264 encoder — a master pre-processes and
//!   commits frames, a frame's slices are issued once its reference frames are
//!   encoded, and any worker takes the next slice (see `build_frame_encoder`).
//! - `parallel-make`: `make -jN` — a serial configure, per directory compile
//!   jobs taken by free slots then a serial archive, a serial final link (see
//!   `build_parallel_make`).
//!
//! Invariants. Every program ends with `End` and passes [`Program::validate`];
//! barriers involve every thread of the group (every thread's program passes
//! the same barrier ids the same number of times); in a pipeline the pushes
//! and pops of every channel balance exactly, so no thread waits for an item
//! that never comes; sync ids (barrier, lock, channel, loop ids) are small
//! constants shared by all threads of the group. Compute work is exact to the
//! nanosecond where the template promises a total (remainders go to named
//! threads or segments, never silently dropped), except `fork-join`, whose
//! per-round work is rounded to whole nanoseconds.
//!
//! Units: `_s` seconds, `_ms` milliseconds, `_us` microseconds, all of work
//! at speed 1.0 except `io_ms` (wall time) and `spin_limit_us` (CPU time
//! spent spinning); `ws_kb` KiB. Source of the models: docs/design/workloads.md.

use ampsched_model::program::{Op, Program, Schedule, Wait};
use ampsched_model::spec::{ParamValue, Params};
use ampsched_model::{ModelError, Nanos};
use std::sync::OnceLock;

/// The library file shipped in the repository.
const BUILTIN_TEXT: &str = include_str!("../../../models/library.toml");
/// How the shipped library file is named in errors.
const BUILTIN_FILE: &str = "models/library.toml";

/// The keys of a `[[model]]` table that are not template parameters.
const FIXED_KEYS: [&str; 5] = ["name", "suite", "template", "source", "description"];

/// A parsed model library: entries in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct Library {
    entries: Vec<ModelEntry>,
}

/// One named model of the library.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelEntry {
    /// Unique name (exact, case-sensitive), e.g. `mcf`.
    pub name: String,
    /// Benchmark suite, e.g. `SPEC CPU2006`.
    pub suite: String,
    /// Template that turns the parameters into programs.
    pub template: String,
    /// Where the numbers come from: `V: …` (read in the source) or `estimate: …`.
    pub source: String,
    /// One-line description.
    pub description: String,
    /// Template parameters as written in the file (unset ones take the template default).
    pub params: Params,
}

/// A template with its parameters, for listings (`ampsched models`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateInfo {
    /// Template name as used in `template = "…"`.
    pub name: String,
    /// One-line description.
    pub doc: String,
    /// Parameters: (name, default rendered as text, one-line doc).
    pub params: Vec<(String, String, String)>,
}

// ---------------------------------------------------------------------------
// Templates and their parameter tables
// ---------------------------------------------------------------------------

/// The templates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Template {
    Sequential,
    CpuBound,
    ForkJoin,
    Phased,
    Pipeline,
    Workqueue,
    Server,
    ClosedServer,
    BlockedLu,
    Periodic,
    FrameEncoder,
    ParallelMake,
}

/// What values a parameter accepts.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A finite number between `lo` and `hi` (bounds open when the flag says so).
    Float { lo: f64, hi: f64, lo_open: bool, hi_open: bool },
    /// An integer in `[min, max]`.
    Int { min: u64, max: u64 },
    /// One of these names.
    Choice(&'static [&'static str]),
}

/// A parameter's default value.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Val {
    F(f64),
    I(u64),
    S(&'static str),
}

impl Val {
    fn render(self) -> String {
        match self {
            Val::F(f) => format!("{f}"),
            Val::I(i) => format!("{i}"),
            Val::S(s) => s.to_string(),
        }
    }
}

/// One template parameter.
#[derive(Clone, Copy, Debug)]
struct ParamDef {
    name: &'static str,
    kind: Kind,
    default: Val,
    doc: &'static str,
}

/// The names `wait` accepts.
const WAIT_NAMES: &[&str] = &["block", "spin", "spin-then-block", "yield"];
/// The names `schedule` accepts.
const SCHEDULE_NAMES: &[&str] = &["static", "dynamic", "guided"];
/// Largest time parameter in ms or µs (keeps every product inside u64 ns).
const MAX_TIME: f64 = 1e9;
/// Largest loop count.
const MAX_COUNT: u64 = u32::MAX as u64;
/// Largest frame count of `frame-encoder` (its waves are listed in memory).
const MAX_FRAMES: u64 = 1_000_000;
/// Default spin limit of spin-then-block: 300 000 spins ≈ 2 ms, modern libgomp
/// (docs/design/workloads.md); the NPB models set the pre-GCC-4.6 limit themselves.
const DEFAULT_SPIN_LIMIT_US: f64 = ampsched_model::spec::DEFAULT_SPIN_LIMIT_US;

const fn float(lo: f64, hi: f64) -> Kind {
    Kind::Float { lo, hi, lo_open: false, hi_open: false }
}
const fn positive(hi: f64) -> Kind {
    Kind::Float { lo: 0.0, hi, lo_open: true, hi_open: false }
}
const fn int(min: u64, max: u64) -> Kind {
    Kind::Int { min, max }
}

const fn p(name: &'static str, kind: Kind, default: Val, doc: &'static str) -> ParamDef {
    ParamDef { name, kind, default, doc }
}

const MEM: ParamDef = p(
    "mem",
    Kind::Float { lo: 0.0, hi: 1.0, lo_open: false, hi_open: true },
    Val::F(0.0),
    "fraction of compute time stalled on memory (does not scale with core speed)",
);
const WS_KB: ParamDef = p("ws_kb", int(0, u32::MAX as u64), Val::I(0), "working set, KiB (migration refill cost)");
const OVERLAP: ParamDef =
    p("overlap", float(0.0, 1.0), Val::F(1.0), "share of the cache refill a migration pays (0 = streaming, 1 = all)");
const WAIT: ParamDef = p(
    "wait",
    Kind::Choice(WAIT_NAMES),
    Val::S("block"),
    "how threads wait: block, spin, spin-then-block or yield (poll with sched_yield)",
);
const SPIN_LIMIT: ParamDef = p(
    "spin_limit_us",
    float(0.0, 1e12),
    Val::F(DEFAULT_SPIN_LIMIT_US),
    "spin-then-block: CPU time spun before blocking, µs",
);

const SEQUENTIAL_PARAMS: &[ParamDef] = &[
    p("work_s", positive(1e7), Val::F(20.0), "work at speed 1.0, seconds (a scale)"),
    MEM,
    WS_KB,
    OVERLAP,
    p("segment_ms", float(0.0, MAX_TIME), Val::F(0.0), "split the work into segments of this length, ms (0 = one op)"),
];

const CPU_BOUND_PARAMS: &[ParamDef] =
    &[p("work_s", positive(1e7), Val::F(3600.0), "work at speed 1.0, seconds"), MEM, WS_KB, OVERLAP];

const FORK_JOIN_PARAMS: &[ParamDef] = &[
    p("work_s", positive(1e7), Val::F(20.0), "total single-threaded work at speed 1.0, seconds"),
    p("serial_frac", float(0.0, 1.0), Val::F(0.05), "share of the work done by thread 0 alone (Amdahl)"),
    p("iterations", int(1, MAX_COUNT), Val::I(1), "fork-join rounds (the work is split evenly among them)"),
    MEM,
    WS_KB,
    OVERLAP,
    WAIT,
    SPIN_LIMIT,
];

const PHASED_PARAMS: &[ParamDef] = &[
    p("phases", int(1, MAX_COUNT), Val::I(200), "number of parallel phases"),
    p("phase_ms", float(0.0, MAX_TIME), Val::F(100.0), "parallel work per thread per phase, ms"),
    p(
        "barriers_per_phase",
        int(1, MAX_COUNT),
        Val::I(1),
        "barriers per phase (the phase work is split evenly between them)",
    ),
    p("serial_every", int(0, MAX_COUNT), Val::I(0), "a sequential section after every k phases (0 = never)"),
    p("serial_ms", float(0.0, MAX_TIME), Val::F(0.0), "work of a sequential section on thread 0, ms"),
    p(
        "io_ms",
        float(0.0, MAX_TIME),
        Val::F(0.0),
        "I/O device time of thread 0 in each sequential section (a sleep, or requests to the machine's I/O back end), ms",
    ),
    p(
        "io_requests",
        int(1, MAX_COUNT),
        Val::I(1),
        "I/O requests a section's io_ms is split into, issued one after another (each waits for the last)",
    ),
    p(
        "lock_every",
        float(0.0, MAX_TIME),
        Val::F(0.0),
        "a lock-protected critical section every this many µs of phase work (0 = none)",
    ),
    p("hold_us", float(0.0, MAX_TIME), Val::F(0.0), "work inside each critical section, µs (part of the phase work)"),
    WAIT,
    SPIN_LIMIT,
    MEM,
    WS_KB,
    OVERLAP,
];

const PIPELINE_PARAMS: &[ParamDef] = &[
    p("stages", int(1, MAX_COUNT), Val::I(4), "pipeline stages (merged into consecutive groups when threads < stages)"),
    p("items", int(1, MAX_COUNT), Val::I(1000), "items flowing through the pipeline"),
    p("item_ms", float(0.0, MAX_TIME), Val::F(5.0), "work per item per stage, ms"),
    p("queue_cap", int(1, MAX_COUNT), Val::I(4), "capacity of each queue between stages, items"),
    WAIT,
    SPIN_LIMIT,
    MEM,
    WS_KB,
    OVERLAP,
];

const WORKQUEUE_PARAMS: &[ParamDef] = &[
    p("iterations", int(1, MAX_COUNT), Val::I(100), "number of parallel loops"),
    p("work_ms", float(0.0, MAX_TIME), Val::F(200.0), "total work of one loop, ms"),
    p("schedule", Kind::Choice(SCHEDULE_NAMES), Val::S("dynamic"), "partitioning: static, dynamic or guided"),
    p("chunk_ms", positive(MAX_TIME), Val::F(1.0), "chunk (dynamic) or smallest chunk (guided), ms"),
    p(
        "serial_ms",
        float(0.0, MAX_TIME),
        Val::F(0.0),
        "serial work on thread 0 after each loop, ms (others wait at a barrier)",
    ),
    WAIT,
    SPIN_LIMIT,
    MEM,
    WS_KB,
    OVERLAP,
];

const SERVER_PARAMS: &[ParamDef] = &[
    p("rate_per_s", positive(1e9), Val::F(100.0), "mean request arrival rate, requests per second (Poisson)"),
    p("request_ms", float(0.0, MAX_TIME), Val::F(10.0), "work per request at speed 1.0, ms"),
    p(
        "requests",
        int(1, MAX_COUNT),
        Val::I(100_000),
        "requests sent in all (an upper bound: runs normally stop at stop.duration_s first)",
    ),
    p(
        "queue_cap",
        int(1, MAX_COUNT),
        Val::I(1024),
        "backlog of waiting requests; the generator waits while it is full",
    ),
    WAIT,
    SPIN_LIMIT,
    MEM,
    WS_KB,
    OVERLAP,
];

const CLOSED_SERVER_PARAMS: &[ParamDef] = &[
    p(
        "clients",
        int(1, MAX_COUNT),
        Val::I(10),
        "client threads of the closed loop (the load: light = few, heavy = many)",
    ),
    p("think_ms", positive(MAX_TIME), Val::F(100.0), "mean client think time between a reply and the next request, ms"),
    p("request_ms", float(0.0, MAX_TIME), Val::F(10.0), "work per request at speed 1.0, ms"),
    p(
        "requests",
        int(1, MAX_COUNT),
        Val::I(100_000),
        "requests sent in all (an upper bound: runs normally stop at stop.duration_s first)",
    ),
    WAIT,
    SPIN_LIMIT,
    MEM,
    WS_KB,
    OVERLAP,
];

const BLOCKED_LU_PARAMS: &[ParamDef] = &[
    p("n", int(1, 1 << 20), Val::I(4096), "matrix order N (SPLASH-2 LU `-n`)"),
    p("block", int(1, 1 << 20), Val::I(16), "block size B (SPLASH-2 LU `-b`); block steps = ⌈N / B⌉"),
    p("work_s", positive(1e7), Val::F(40.0), "total single-threaded work at speed 1.0, seconds (a scale)"),
    WAIT,
    SPIN_LIMIT,
    MEM,
    WS_KB,
    OVERLAP,
];

const PERIODIC_PARAMS: &[ParamDef] = &[
    p("period_ms", positive(MAX_TIME), Val::F(10.0), "time between wake-ups, ms (a timer tick: 1000 / HZ)"),
    p("work_us", float(0.0, MAX_TIME), Val::F(20.0), "work at each wake-up, µs at speed 1.0"),
    p("duration_s", positive(1e7), Val::F(60.0), "how long the thread keeps waking, s (wake-ups = duration / period)"),
    MEM,
    WS_KB,
    OVERLAP,
];

const FRAME_ENCODER_PARAMS: &[ParamDef] = &[
    p("frames", int(1, MAX_FRAMES), Val::I(300), "frames of the input sequence"),
    p("slices", int(1, MAX_COUNT), Val::I(18), "slices per frame, the unit a worker takes from the slice queue"),
    p(
        "b_frames",
        int(0, MAX_COUNT),
        Val::I(2),
        "B frames between consecutive reference (I/P) frames (0 = IPPP: every frame references the one before)",
    ),
    p("slice_ms", positive(MAX_TIME), Val::F(4.0), "work of one P or B slice at speed 1.0, ms"),
    p("i_slice_ms", positive(MAX_TIME), Val::F(2.0), "work of one slice of the first (I) frame, ms"),
    p("input_ms", float(0.0, MAX_TIME), Val::F(0.5), "master thread: pre-processing of one input frame, ms"),
    p("output_ms", float(0.0, MAX_TIME), Val::F(0.25), "master thread: committing one encoded frame to the stream, ms"),
    WAIT,
    SPIN_LIMIT,
    MEM,
    WS_KB,
    OVERLAP,
];

const PARALLEL_MAKE_PARAMS: &[ParamDef] = &[
    p("configure_ms", float(0.0, MAX_TIME), Val::F(500.0), "serial configure step before the build, ms"),
    p("dirs", int(1, MAX_COUNT), Val::I(8), "directories built one after another (recursive make)"),
    p("jobs_per_dir", int(1, MAX_COUNT), Val::I(50), "compile jobs in each directory, taken by free job slots"),
    p("job_ms", positive(MAX_TIME), Val::F(50.0), "work of one compile job, ms"),
    p("archive_ms", float(0.0, MAX_TIME), Val::F(20.0), "serial step closing each directory (ar / partial link), ms"),
    p("link_ms", float(0.0, MAX_TIME), Val::F(300.0), "serial final link after the last directory, ms"),
    WAIT,
    SPIN_LIMIT,
    MEM,
    WS_KB,
    OVERLAP,
];

/// Every template: (template, name, doc, parameters).
const TEMPLATES: &[(Template, &str, &str, &[ParamDef])] = &[
    (
        Template::Sequential,
        "sequential",
        "one compute per thread; each thread is an independent copy",
        SEQUENTIAL_PARAMS,
    ),
    (Template::CpuBound, "cpu-bound", "one long compute per thread, for duration-bounded scenarios", CPU_BOUND_PARAMS),
    (
        Template::ForkJoin,
        "fork-join",
        "rounds of: serial part on thread 0, barrier, equal parallel shares, barrier",
        FORK_JOIN_PARAMS,
    ),
    (
        Template::Phased,
        "phased",
        "parallel phases (work per thread) separated by barriers, with sequential sections on thread 0",
        PHASED_PARAMS,
    ),
    (
        Template::Pipeline,
        "pipeline",
        "stages linked by bounded queues; thread i serves stage i % stages",
        PIPELINE_PARAMS,
    ),
    (
        Template::Workqueue,
        "workqueue",
        "parallel loops split by a static, dynamic or guided schedule, optional serial work between them",
        WORKQUEUE_PARAMS,
    ),
    (
        Template::Server,
        "server",
        "thread 0 sends Poisson-arriving requests into a backlog; threads 1.. (a worker pool) serve them",
        SERVER_PARAMS,
    ),
    (
        Template::ClosedServer,
        "closed-server",
        "a closed loop: client threads think, send a request and wait for its reply; the other threads serve",
        CLOSED_SERVER_PARAMS,
    ),
    (
        Template::BlockedLu,
        "blocked-lu",
        "SPLASH-2 blocked dense LU: N/B block steps of shrinking work, blocks owned by a 2-D scatter, 2 barriers a step",
        BLOCKED_LU_PARAMS,
    ),
    (
        Template::Periodic,
        "periodic",
        "background activity: each thread wakes every period (random first phase) and does a little work",
        PERIODIC_PARAMS,
    ),
    (
        Template::FrameEncoder,
        "frame-encoder",
        "a slice-queue video encoder: frames issued when their references are encoded, slices taken by any worker",
        FRAME_ENCODER_PARAMS,
    ),
    (
        Template::ParallelMake,
        "parallel-make",
        "a parallel build: serial configure, per directory compile jobs taken by free slots then a serial step, link",
        PARALLEL_MAKE_PARAMS,
    ),
];

fn template_by_name(name: &str) -> Option<(Template, &'static [ParamDef])> {
    TEMPLATES.iter().find(|t| t.1 == name).map(|t| (t.0, t.3))
}

fn template_names() -> String {
    TEMPLATES.iter().map(|t| t.1).collect::<Vec<_>>().join(", ")
}

fn describe_kind(kind: Kind) -> String {
    match kind {
        Kind::Float { lo, hi, lo_open, hi_open } => {
            format!("a number in {}{lo}, {hi}{}", if lo_open { "(" } else { "[" }, if hi_open { ")" } else { "]" })
        }
        Kind::Int { min, max } => format!("an integer in [{min}, {max}]"),
        Kind::Choice(names) => {
            format!("one of {}", names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", "))
        }
    }
}

fn show_value(v: &ParamValue) -> String {
    match v {
        ParamValue::Str(s) => format!("\"{s}\""),
        ParamValue::Bool(b) => b.to_string(),
        ParamValue::Int(i) => i.to_string(),
        ParamValue::Float(f) => f.to_string(),
        ParamValue::List(_) => "a list".to_string(),
    }
}

/// Check one value against a parameter definition.
fn check_value(def: &ParamDef, v: &ParamValue) -> Result<Val, String> {
    let bad = || format!("must be {}, got {}", describe_kind(def.kind), show_value(v));
    match def.kind {
        Kind::Float { lo, hi, lo_open, hi_open } => {
            let x = v.as_f64().ok_or_else(bad)?;
            let above = if lo_open { x > lo } else { x >= lo };
            let below = if hi_open { x < hi } else { x <= hi };
            if x.is_finite() && above && below {
                Ok(Val::F(x))
            } else {
                Err(bad())
            }
        }
        Kind::Int { min, max } => {
            let i = match v {
                ParamValue::Int(_) | ParamValue::Float(_) => v.as_u64(),
                _ => None,
            };
            match i {
                Some(i) if (min..=max).contains(&i) => Ok(Val::I(i)),
                _ => Err(bad()),
            }
        }
        Kind::Choice(names) => match v.as_str().and_then(|s| names.iter().find(|n| **n == s)) {
            Some(n) => Ok(Val::S(n)),
            None => Err(bad()),
        },
    }
}

/// Parameter values after defaults, the model's values and the overrides.
struct Resolved {
    /// (name, value, field path where it was set).
    vals: Vec<(&'static str, Val, String)>,
}

impl Resolved {
    fn get(&self, name: &str) -> Val {
        match self.vals.iter().find(|v| v.0 == name) {
            Some(v) => v.1,
            // Templates only ask for their own parameters (tested); a default keeps this panic-free.
            None => Val::F(0.0),
        }
    }
    fn f(&self, name: &str) -> f64 {
        match self.get(name) {
            Val::F(f) => f,
            Val::I(i) => i as f64,
            Val::S(_) => 0.0,
        }
    }
    fn i(&self, name: &str) -> u64 {
        match self.get(name) {
            Val::I(i) => i,
            Val::F(f) => f as u64,
            Val::S(_) => 0,
        }
    }
    fn s(&self, name: &str) -> &'static str {
        match self.get(name) {
            Val::S(s) => s,
            _ => "",
        }
    }
    fn path(&self, name: &str) -> String {
        self.vals.iter().find(|v| v.0 == name).map(|v| v.2.clone()).unwrap_or_else(|| name.to_string())
    }
    fn err(&self, name: &str, msg: impl Into<String>) -> ModelError {
        ModelError::new(self.path(name), msg)
    }
}

/// A layer of parameter values with the function naming a parameter's field path.
type Layer<'a> = (&'a Params, &'a dyn Fn(&str) -> String);

/// Merge parameter layers (the model's values, then overrides) over the defaults;
/// defaults are reported at the last layer's paths.
fn resolve(template: &str, defs: &[ParamDef], model: &str, layers: &[Layer<'_>]) -> Result<Resolved, ModelError> {
    let default_path = |k: &str| layers.last().map(|l| (l.1)(k)).unwrap_or_else(|| k.to_string());
    let mut vals: Vec<(&'static str, Val, String)> =
        defs.iter().map(|d| (d.name, d.default, default_path(d.name))).collect();
    for (params, path_of) in layers {
        for (key, v) in params.iter() {
            let Some(idx) = defs.iter().position(|d| d.name == key) else {
                let list = defs.iter().map(|d| format!("{} ({})", d.name, d.default.render())).collect::<Vec<_>>();
                return Err(ModelError::new(
                    path_of(key),
                    format!(
                        "unknown parameter `{key}` of model `{model}` (template `{template}`); \
                         its parameters (default): {}",
                        list.join(", ")
                    ),
                ));
            };
            let val = check_value(&defs[idx], v).map_err(|m| ModelError::new(path_of(key), m))?;
            vals[idx] = (defs[idx].name, val, path_of(key));
        }
    }
    Ok(Resolved { vals })
}

// ---------------------------------------------------------------------------
// Program building
// ---------------------------------------------------------------------------

/// The memory behaviour shared by every compute of a model.
#[derive(Clone, Copy)]
struct MemSpec {
    mem: f64,
    ws_kb: u32,
    overlap: f64,
}

impl MemSpec {
    fn of(r: &Resolved) -> MemSpec {
        MemSpec { mem: r.f("mem"), ws_kb: u32::try_from(r.i("ws_kb")).unwrap_or(u32::MAX), overlap: r.f("overlap") }
    }
}

fn wait_of(r: &Resolved) -> Wait {
    match r.s("wait") {
        "spin" => Wait::Spin,
        "yield" => Wait::Yield,
        "spin-then-block" => Wait::SpinThenBlock(Nanos::from_ms_f64(r.f("spin_limit_us") / 1000.0)),
        _ => Wait::Block,
    }
}

/// Appends ops; loops are patched with their matching indices.
struct Builder {
    ops: Vec<Op>,
    m: MemSpec,
}

impl Builder {
    fn new(m: MemSpec) -> Builder {
        Builder { ops: Vec::new(), m }
    }
    /// Compute `work` (skipped when zero).
    fn compute(&mut self, work: Nanos) {
        if work.0 > 0 {
            self.ops.push(Op::Compute { work, mem: self.m.mem, ws_kb: self.m.ws_kb, overlap: self.m.overlap });
        }
    }
    fn push(&mut self, op: Op) {
        self.ops.push(op);
    }
    /// Emit `body` `count` times: nothing for 0, inline for 1, a loop otherwise.
    fn repeat(&mut self, count: u32, body: impl FnOnce(&mut Builder)) {
        if count == 0 {
            return;
        }
        if count == 1 {
            body(self);
            return;
        }
        let start = self.ops.len();
        self.ops.push(Op::LoopStart { count, end: 0 });
        body(self);
        if self.ops.len() == start + 1 {
            self.ops.pop(); // empty body: no loop
            return;
        }
        let end = self.ops.len();
        self.ops.push(Op::LoopEnd { start: start as u32 });
        self.ops[start] = Op::LoopStart { count, end: end as u32 };
    }
    fn finish(mut self) -> Program {
        self.ops.push(Op::End);
        Program { ops: self.ops }
    }
}

/// A count that must fit a loop counter.
fn count_u32(n: u64, r: &Resolved, field: &str, what: &str) -> Result<u32, ModelError> {
    u32::try_from(n).map_err(|_| r.err(field, format!("too small: {n} {what} (at most {})", u32::MAX)))
}

fn build(t: Template, r: &Resolved, threads: u32) -> Result<Vec<Program>, ModelError> {
    let m = MemSpec::of(r);
    match t {
        Template::Sequential | Template::CpuBound => build_sequential(t, r, threads, m),
        Template::ForkJoin => Ok(build_fork_join(r, threads, m)),
        Template::Phased => build_phased(r, threads, m),
        Template::Pipeline => Ok(build_pipeline(r, threads, m)),
        Template::Workqueue => build_workqueue(r, threads, m),
        Template::Server => build_server(r, threads, m),
        Template::ClosedServer => build_closed_server(r, threads, m),
        Template::BlockedLu => build_blocked_lu(r, threads, m),
        Template::Periodic => build_periodic(r, threads, m),
        Template::FrameEncoder => build_frame_encoder(r, threads, m),
        Template::ParallelMake => build_parallel_make(r, threads, m),
    }
}

/// `sequential` / `cpu-bound`: every thread computes `work_s` on its own.
fn build_sequential(t: Template, r: &Resolved, threads: u32, m: MemSpec) -> Result<Vec<Program>, ModelError> {
    let total = Nanos::from_secs_f64(r.f("work_s"));
    let seg_ms = if t == Template::Sequential { r.f("segment_ms") } else { 0.0 };
    let mut b = Builder::new(m);
    if seg_ms > 0.0 {
        let seg = Nanos::from_ms_f64(seg_ms);
        if seg.0 == 0 {
            return Err(r.err("segment_ms", format!("must be 0 (one op) or ≥ 0.000001 ms, got {seg_ms}")));
        }
        // n whole segments, then the remainder: n × seg + rem = total exactly.
        let n = count_u32(total.0 / seg.0, r, "segment_ms", "segments")?;
        b.repeat(n, |b| b.compute(seg));
        b.compute(total - seg * n as u64);
    } else {
        b.compute(total);
    }
    let p = b.finish();
    Ok(vec![p; threads as usize])
}

/// `fork-join`: per round, thread 0 runs the serial part while the others wait
/// at barrier 0, then every thread runs its share, then barrier 1.
fn build_fork_join(r: &Resolved, threads: u32, m: MemSpec) -> Vec<Program> {
    let iters = r.i("iterations") as u32; // ≤ u32::MAX by the parameter range
    let sf = r.f("serial_frac");
    let work_s = r.f("work_s");
    let serial = Nanos::from_secs_f64(work_s * sf / iters as f64);
    let par = Nanos::from_secs_f64(work_s * (1.0 - sf) / iters as f64);
    let wait = wait_of(r);
    let n = threads as u64;
    (0..threads)
        .map(|t| {
            // Shares differ by at most 1 ns and sum to `par` exactly.
            let share = Nanos(par.0 / n + u64::from((t as u64) < par.0 % n));
            let mut b = Builder::new(m);
            b.repeat(iters, |b| {
                if sf > 0.0 {
                    if t == 0 {
                        b.compute(serial);
                    }
                    b.push(Op::Barrier { id: 0, wait });
                }
                b.compute(share);
                b.push(Op::Barrier { id: 1, wait });
            });
            b.finish()
        })
        .collect()
}

/// `phased`: see the module doc. Barrier 0 ends each part of a phase, barrier
/// 1 ends a sequential section, lock 0 guards the critical sections.
fn build_phased(r: &Resolved, threads: u32, m: MemSpec) -> Result<Vec<Program>, ModelError> {
    let phases = r.i("phases") as u32;
    let phase = Nanos::from_ms_f64(r.f("phase_ms"));
    let nb = r.i("barriers_per_phase");
    let every_k = r.i("serial_every") as u32;
    let serial = Nanos::from_ms_f64(r.f("serial_ms"));
    let io = Nanos::from_ms_f64(r.f("io_ms"));
    let io_n = count_u32(r.i("io_requests"), r, "io_requests", "I/O requests")?;
    let wait = wait_of(r);
    if io.0 > 0 && every_k == 0 {
        return Err(r.err("io_ms", "needs sequential sections: set serial_every ≥ 1 (or io_ms = 0)"));
    }
    // Barrier parts: nb − 1 of `sub`, the last one `sub + rem`; their sum is `phase`.
    let sub = Nanos(phase.0 / nb);
    let last = Nanos(sub.0 + phase.0 % nb);
    let nb = count_u32(nb, r, "barriers_per_phase", "barriers")?;
    // Critical sections: after every `every` of work, of which `hold` inside the lock.
    let lock = if r.f("lock_every") > 0.0 {
        let every = Nanos::from_ms_f64(r.f("lock_every") / 1000.0);
        let hold = Nanos::from_ms_f64(r.f("hold_us") / 1000.0);
        if every.0 == 0 {
            return Err(r.err("lock_every", "must be 0 (no locks) or ≥ 0.001 µs"));
        }
        if hold > every {
            return Err(r.err(
                "hold_us",
                format!("must be ≤ lock_every ({} µs): the critical section is part of that work", r.f("lock_every")),
            ));
        }
        count_u32(last.0 / every.0, r, "lock_every", "critical sections per barrier part")?;
        Some((every, hold))
    } else {
        None
    };
    let work = |b: &mut Builder, w: Nanos| match lock {
        Some((every, hold)) => {
            let n = (w.0 / every.0) as u32; // checked above: last ≥ every part
            b.repeat(n, |b| {
                b.compute(every - hold);
                b.push(Op::Lock { id: 0, wait });
                b.compute(hold);
                b.push(Op::Unlock { id: 0 });
            });
            b.compute(w - every * n as u64);
        }
        None => b.compute(w),
    };
    let programs = (0..threads)
        .map(|t| {
            let phase_body = |b: &mut Builder| {
                b.repeat(nb - 1, |b| {
                    work(b, sub);
                    b.push(Op::Barrier { id: 0, wait });
                });
                work(b, last);
                b.push(Op::Barrier { id: 0, wait });
            };
            let serial_body = |b: &mut Builder| {
                if t == 0 {
                    b.compute(serial);
                    if io.0 > 0 {
                        // n − 1 requests of io / n, the last one with the remainder: their sum is `io`.
                        let each = Nanos(io.0 / io_n as u64);
                        b.repeat(io_n - 1, |b| b.push(Op::Io { dur: each }));
                        b.push(Op::Io { dur: Nanos(each.0 + io.0 % io_n as u64) });
                    }
                }
                b.push(Op::Barrier { id: 1, wait });
            };
            let mut b = Builder::new(m);
            match phases.checked_div(every_k) {
                // serial_every = 0: no sequential sections.
                None => b.repeat(phases, phase_body),
                // ⌊phases / k⌋ groups of k phases + a sequential section, then the rest.
                Some(groups) => {
                    b.repeat(groups, |b| {
                        b.repeat(every_k, phase_body);
                        serial_body(b);
                    });
                    b.repeat(phases % every_k, phase_body);
                }
            }
            b.finish()
        })
        .collect();
    Ok(programs)
}

/// `pipeline`: effective stages `S' = min(stages, threads)` (consecutive
/// stages merged, their item work summed); thread `t` serves stage `t % S'`
/// as its `t / S'`-th worker; a stage with `k` workers gives worker `j`
/// `items / k` items plus one if `j < items % k`. Stage `e` pops from channel
/// `e − 1` and pushes to channel `e`, so each channel sees exactly `items`
/// pushes and `items` pops.
fn build_pipeline(r: &Resolved, threads: u32, m: MemSpec) -> Vec<Program> {
    let stages = r.i("stages");
    let items = r.i("items");
    let item = Nanos::from_ms_f64(r.f("item_ms"));
    let cap = r.i("queue_cap") as u32;
    let wait = wait_of(r);
    let n = threads as u64;
    let eff = stages.min(n);
    (0..n)
        .map(|t| {
            let e = t % eff;
            let merged = (e + 1) * stages / eff - e * stages / eff;
            let workers = n / eff + u64::from(e < n % eff);
            let j = t / eff;
            let mine = items / workers + u64::from(j < items % workers);
            let mut b = Builder::new(m);
            b.repeat(mine as u32, |b| {
                if e > 0 {
                    b.push(Op::Pop { chan: (e - 1) as u32, wait });
                }
                b.compute(item * merged);
                if e + 1 < eff {
                    b.push(Op::Push { chan: e as u32, capacity: cap, wait });
                }
            });
            b.finish()
        })
        .collect()
}

/// `workqueue`: `iterations` × [ParFor 0 (implicit barrier); serial work on
/// thread 0 + barrier 0 when `serial_ms` > 0].
fn build_workqueue(r: &Resolved, threads: u32, m: MemSpec) -> Result<Vec<Program>, ModelError> {
    let iters = r.i("iterations") as u32;
    let work = Nanos::from_ms_f64(r.f("work_ms"));
    let chunk = Nanos::from_ms_f64(r.f("chunk_ms"));
    let serial = Nanos::from_ms_f64(r.f("serial_ms"));
    let wait = wait_of(r);
    let schedule = match r.s("schedule") {
        "static" => Schedule::Static,
        "guided" => Schedule::Guided { min_chunk: chunk },
        _ => Schedule::Dynamic { chunk },
    };
    if schedule != Schedule::Static && chunk.0 == 0 {
        return Err(r.err("chunk_ms", "must be ≥ 0.000001 ms"));
    }
    let programs = (0..threads)
        .map(|t| {
            let mut b = Builder::new(m);
            b.repeat(iters, |b| {
                b.push(Op::ParFor { id: 0, work, schedule, mem: m.mem, ws_kb: m.ws_kb, overlap: m.overlap, wait });
                if serial.0 > 0 {
                    if t == 0 {
                        b.compute(serial);
                    }
                    b.push(Op::Barrier { id: 0, wait });
                }
            });
            b.finish()
        })
        .collect();
    Ok(programs)
}

/// The processor grid of SPLASH-2 LU for `p` threads: `rows` = ⌊√p⌋ lowered
/// until it divides `p`, `cols` = p / rows (lu.c, main).
fn lu_grid(p: u64) -> (u64, u64) {
    let mut rows = (p as f64).sqrt().floor() as u64;
    while rows > 1 && !p.is_multiple_of(rows) {
        rows -= 1;
    }
    let rows = rows.max(1);
    (rows, p / rows)
}

/// How many of the indices `lo..hi` are ≡ `a` (mod `q`).
fn count_mod(lo: u64, hi: u64, a: u64, q: u64) -> u64 {
    let below = |x: u64| if x > a { (x - a).div_ceil(q) } else { 0 };
    below(hi) - below(lo)
}

/// Per-thread work units of SPLASH-2 LU, step by step (see `build_blocked_lu`):
/// `(diag owner, per-thread perimeter units, per-thread interior units)` per step,
/// in units of one B×B block update (B³ multiply-adds).
#[allow(clippy::type_complexity)]
fn lu_units(m: u64, threads: u64) -> Vec<(u64, Vec<u64>, Vec<u64>)> {
    let (rows, cols) = lu_grid(threads);
    let owner = |i: u64, j: u64| (i % rows) * cols + (j % cols);
    (0..m)
        .map(|k| {
            let mut per = vec![0u64; threads as usize];
            let mut inner = vec![0u64; threads as usize];
            for t in 0..threads {
                let (a, b) = (t / cols, t % cols);
                // Perimeter: blocks (i, k), i > k, and (k, j), j > k, owned by t.
                let col = if k % cols == b { count_mod(k + 1, m, a, rows) } else { 0 };
                let row = if k % rows == a { count_mod(k + 1, m, b, cols) } else { 0 };
                per[t as usize] = col + row;
                // Interior: blocks (i, j), i, j > k, owned by t; a bmod is 2 units.
                inner[t as usize] = 2 * count_mod(k + 1, m, a, rows) * count_mod(k + 1, m, b, cols);
            }
            (owner(k, k), per, inner)
        })
        .collect()
}

/// `blocked-lu`: SPLASH-2 LU (contiguous blocks, lu.c): the N×N matrix is cut
/// into m = ⌈N/B⌉ block rows and columns; block (i, j) belongs to thread
/// (i mod rows)·cols + (j mod cols) of the processor grid ([`lu_grid`]). Step
/// k: the owner of (k, k) factors it (lu0, ⅔ of a block update), barrier 0;
/// every thread divides its blocks of column k and row k by it (bdiv/bmodd,
/// one update each), barrier 0; every thread updates its interior blocks
/// (i, j > k: bmod, two updates each). Total units Σₖ ⅔ + 2r + 2r² with
/// r = m − k − 1 (≈ ⅔ m³: LU's ⅔ N³ flops); `work_s` is spread over them.
/// Work of the interior phase falls as r², so early steps take hundreds of
/// ms and late ones µs, with 2 barriers a step (V: lu.c).
fn build_blocked_lu(r: &Resolved, threads: u32, m: MemSpec) -> Result<Vec<Program>, ModelError> {
    let (n, bs) = (r.i("n"), r.i("block"));
    if bs > n {
        return Err(r.err("block", format!("must be ≤ n ({n}), got {bs}")));
    }
    let steps = n.div_ceil(bs);
    count_u32(steps, r, "block", "block steps")?;
    let units = lu_units(steps, threads as u64);
    // Units ×3 so the diagonal factorisation (⅔ of an update) is a whole number: 2.
    let total3: u64 = units.iter().map(|(_, p, i)| 2 + 3 * (p.iter().sum::<u64>() + i.iter().sum::<u64>())).sum();
    let unit3 = r.f("work_s") * 1e9 / total3 as f64;
    let ns = |u3: u64| Nanos((u3 as f64 * unit3).round() as u64);
    let wait = wait_of(r);
    let programs = (0..threads as usize)
        .map(|t| {
            let mut b = Builder::new(m);
            for (owner, per, inner) in &units {
                if *owner == t as u64 {
                    b.compute(ns(2));
                }
                b.push(Op::Barrier { id: 0, wait });
                b.compute(ns(3 * per[t]));
                b.push(Op::Barrier { id: 0, wait });
                b.compute(ns(3 * inner[t]));
            }
            b.finish()
        })
        .collect();
    Ok(programs)
}

/// `periodic`: every thread = [SleepExp(period) — a random phase, drawn from
/// the run's seed — then (n − 1) × [work; Sleep(period)]; work], n = ⌊duration
/// / period⌋ wake-ups. The threads are independent (no sync ops): the timer
/// ticks and housekeeping of an otherwise idle guest or of dom0, which wake
/// its vCPUs whatever the other domains do.
fn build_periodic(r: &Resolved, threads: u32, m: MemSpec) -> Result<Vec<Program>, ModelError> {
    let period = Nanos::from_ms_f64(r.f("period_ms"));
    if period.0 == 0 {
        return Err(r.err("period_ms", "must be ≥ 0.000001 ms"));
    }
    let work = Nanos::from_ms_f64(r.f("work_us") / 1000.0);
    if work >= period {
        return Err(r.err("work_us", format!("must be shorter than period_ms ({} ms)", r.f("period_ms"))));
    }
    let n = (r.f("duration_s") * 1e9 / period.0 as f64).floor() as u64;
    let n = count_u32(n.max(1), r, "duration_s", "wake-ups")?;
    let mut b = Builder::new(m);
    b.push(Op::SleepExp { mean: period });
    b.repeat(n - 1, |b| {
        b.compute(work);
        b.push(Op::Sleep { dur: period });
    });
    b.compute(work);
    Ok(vec![b.finish(); threads as usize])
}

/// `server`: thread 0 = `requests` × [SleepExp(1 / rate); Push 0]; worker
/// `w` of the `threads − 1` workers = its share of the requests (an equal
/// split, remainder to the first) × [Pop 0; compute `request_ms`]. Pushes and
/// pops balance exactly. Workers take requests in FIFO order of their
/// waiting, so while the run is far from `requests` (the intended use) the
/// split never binds. One thread: it sleeps, then serves, in turn.
fn build_server(r: &Resolved, threads: u32, m: MemSpec) -> Result<Vec<Program>, ModelError> {
    let rate = r.f("rate_per_s");
    let mean = Nanos::from_secs_f64(1.0 / rate);
    if mean.0 == 0 {
        return Err(r.err("rate_per_s", format!("too large: {rate} (mean inter-arrival must be ≥ 1 ns)")));
    }
    let requests = r.i("requests");
    let work = Nanos::from_ms_f64(r.f("request_ms"));
    let cap = count_u32(r.i("queue_cap"), r, "queue_cap", "requests")?;
    let wait = wait_of(r);
    if threads <= 1 {
        let mut b = Builder::new(m);
        b.repeat(count_u32(requests, r, "requests", "requests")?, |b| {
            b.push(Op::SleepExp { mean });
            b.compute(work);
        });
        return Ok(vec![b.finish()]);
    }
    let mut gen = Builder::new(m);
    gen.repeat(count_u32(requests, r, "requests", "requests")?, |b| {
        b.push(Op::SleepExp { mean });
        b.push(Op::Push { chan: 0, capacity: cap, wait: Wait::Block });
    });
    let mut out = vec![gen.finish()];
    let workers = (threads - 1) as u64;
    for w in 0..workers {
        let mine = requests / workers + u64::from(w < requests % workers);
        let mut b = Builder::new(m);
        if mine > 0 {
            b.repeat(mine as u32, |b| {
                b.push(Op::Pop { chan: 0, wait });
                b.compute(work);
            });
        }
        out.push(b.finish());
    }
    Ok(out)
}

/// `closed-server`: the last `clients` threads are clients, the first
/// `threads − clients` (at least one) the worker pool. Client `c` =
/// its share of `requests` (an equal split, remainder to the first) ×
/// [SleepExp(`think_ms`); Push 0; Pop 1]; worker `w` = its share × [Pop 0;
/// compute `request_ms`; Push 1]. Channel 0 holds the requests, channel 1 the
/// replies; each has capacity `clients`, which never binds: a client has at
/// most one request outstanding, so at most `clients` requests and replies
/// are in flight. Pushes and pops of both channels balance exactly. A client
/// takes whichever reply comes first, not necessarily its own; the loop
/// stays closed (a client sends again only after a reply), which is what
/// sets the load.
///
/// Why a closed loop (the interactive response-time law, Menascé & Almeida,
/// *Capacity Planning for Web Services*, ch. 3; the drivers of SPECweb99 and
/// SPECjbb2000 run a fixed number of clients or warehouses with think
/// times): with `N` clients, think `Z` and response time `R`, throughput is
/// `X = N / (Z + R)`, at most the machine's capacity. An open Poisson stream
/// (template `server`) keeps arriving at its rate however slow the machine
/// is; a closed loop slows down with the machine, so the offered load itself
/// depends on the configuration. The client threads do no work: they stand
/// for the remote load generator, and their wake-ups for a request's arrival.
fn build_closed_server(r: &Resolved, threads: u32, m: MemSpec) -> Result<Vec<Program>, ModelError> {
    let clients = r.i("clients");
    if u64::from(threads) <= clients {
        return Err(r.err(
            "clients",
            format!("{clients} clients need at least {} threads (clients + 1 worker), got {threads}", clients + 1),
        ));
    }
    let cap = count_u32(clients, r, "clients", "clients")?;
    let think = Nanos::from_ms_f64(r.f("think_ms"));
    if think.0 == 0 {
        return Err(r.err("think_ms", format!("too small: {} ms (at least 1 ns)", r.f("think_ms"))));
    }
    let requests = r.i("requests");
    let work = Nanos::from_ms_f64(r.f("request_ms"));
    let wait = wait_of(r);
    let share = |n: u64, i: u64| requests / n + u64::from(i < requests % n);
    let workers = u64::from(threads) - clients;
    let mut out = Vec::with_capacity(threads as usize);
    for w in 0..workers {
        let mut b = Builder::new(m);
        b.repeat(count_u32(share(workers, w), r, "requests", "requests")?, |b| {
            b.push(Op::Pop { chan: 0, wait });
            b.compute(work);
            b.push(Op::Push { chan: 1, capacity: cap, wait: Wait::Block });
        });
        out.push(b.finish());
    }
    for c in 0..clients {
        let mut b = Builder::new(m);
        b.repeat(count_u32(share(clients, c), r, "requests", "requests")?, |b| {
            b.push(Op::SleepExp { mean: think });
            b.push(Op::Push { chan: 0, capacity: cap, wait: Wait::Block });
            b.push(Op::Pop { chan: 1, wait: Wait::Block });
        });
        out.push(b.finish());
    }
    Ok(out)
}

/// One wave of `frame-encoder`: the frames issued together, because the
/// reference frames they need are all encoded once the wave before is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Wave {
    /// Frames in the wave.
    frames: u64,
    /// The first wave: the I frame alone.
    intra: bool,
}

/// The waves of `frames` frames coded with `b` B frames between reference
/// frames, in encoding order. Reference (anchor) frames are display frames
/// 0, b+1, 2(b+1), … and the last frame; frame 0 is the I frame, every other
/// anchor a P frame referencing the anchor before it, and the B frames
/// between anchors j−1 and j reference both. So anchor j can be encoded once
/// anchor j−1 is, and together with it the B frames between anchors j−2 and
/// j−1, whose references are then both done: wave 0 = {I}, wave 1 = {P₁},
/// wave j ≥ 2 = {B frames between anchors j−2 and j−1} ∪ {Pⱼ}, and a last wave
/// of the B frames before the last anchor. The waves hold every frame once.
fn encoder_waves(frames: u64, b: u64) -> Vec<Wave> {
    let step = usize::try_from(b.saturating_add(1)).unwrap_or(usize::MAX);
    let mut anchors: Vec<u64> = (0..frames).step_by(step).collect();
    if anchors.last() != Some(&(frames - 1)) {
        anchors.push(frames - 1);
    }
    let between = |j: usize| anchors[j] - anchors[j - 1] - 1;
    let mut waves = vec![Wave { frames: 1, intra: true }];
    for j in 1..anchors.len() {
        let bs = if j >= 2 { between(j - 1) } else { 0 };
        waves.push(Wave { frames: bs + 1, intra: false });
    }
    let n = anchors.len();
    if n >= 2 && between(n - 1) > 0 {
        waves.push(Wave { frames: between(n - 1), intra: false });
    }
    waves
}

/// `frame-encoder`: the threaded H.264 encoder of Chen, Tian, Ge and Girkar
/// (Intel, IPDPS 2004, "Towards efficient multi-level threading of H.264
/// encoder on Intel Hyper-Threading architectures"; the design as its
/// authors describe it in "Optimizing video encoding using threads and
/// parallelism"). A master thread pre-processes input frames into an image
/// buffer and commits encoded frames to the bitstream in order; a frame's
/// slices enter the slice queue once its reference frames are encoded (the
/// master checks readiness at input), and encoding threads take slices from
/// the queue in any order — a slice has no dependency inside its frame. The
/// unit of work is the slice (CIF 352×288 = 22×18 macroblocks, up to 18
/// slices, one macroblock row each).
///
/// As programs: the slices issued together are one wave (`encoder_waves`);
/// each wave is a dynamically scheduled parallel loop (`ParFor`, one chunk
/// per slice) over every thread, so a free thread takes the next slice, and
/// its implicit barrier is "the wave's reference frame is encoded". Thread 0
/// is also the master: before taking slices of wave k it pre-processes the
/// frames of wave k+1 and commits those of wave k−1, while the other
/// threads already encode (the master's serial work overlaps the encoding,
/// as in the source; here the master encodes too once done, where the
/// source's master waits). Simplifications, stated: slices of one kind cost
/// the same (`slice_ms`; the I frame's `i_slice_ms`); the next wave's P
/// slices wait for the current wave's B slices (the barrier), where the
/// source's two slice queues let them start as soon as their reference
/// frame is done — so the model's frame-level overlap is one wave.
fn build_frame_encoder(r: &Resolved, threads: u32, m: MemSpec) -> Result<Vec<Program>, ModelError> {
    let frames = r.i("frames");
    let slices = r.i("slices");
    let slice = Nanos::from_ms_f64(r.f("slice_ms"));
    let i_slice = Nanos::from_ms_f64(r.f("i_slice_ms"));
    let input = Nanos::from_ms_f64(r.f("input_ms"));
    let output = Nanos::from_ms_f64(r.f("output_ms"));
    let wait = wait_of(r);
    for (name, v) in [("slice_ms", slice), ("i_slice_ms", i_slice)] {
        if v.0 == 0 {
            return Err(r.err(name, format!("too small: {} ms (at least 1 ns)", r.f(name))));
        }
    }
    let times = |v: Nanos, k: u64, name: &str| {
        v.0.checked_mul(k).map(Nanos).ok_or_else(|| r.err(name, format!("{name} × {k} frames overflows 2^64 ns")))
    };
    let waves = encoder_waves(frames, r.i("b_frames"));
    let frames_of = |k: usize| waves.get(k).map_or(0, |w| w.frames);
    // Per wave: (loop work, chunk, the master's serial work before it).
    let mut steps: Vec<(Nanos, Nanos, Nanos)> = Vec::with_capacity(waves.len());
    for (k, w) in waves.iter().enumerate() {
        let chunk = if w.intra { i_slice } else { slice };
        let work = w
            .frames
            .checked_mul(slices)
            .and_then(|n| n.checked_mul(chunk.0))
            .ok_or_else(|| r.err("slices", "frames × slices × slice work overflows 2^64 ns"))?;
        let next_in = times(input, frames_of(k + 1), "input_ms")?;
        let prev_out = if k == 0 { Nanos::ZERO } else { times(output, frames_of(k - 1), "output_ms")? };
        let master =
            next_in.0.checked_add(prev_out.0).ok_or_else(|| r.err("input_ms", "master work overflows 2^64 ns"))?;
        steps.push((Nanos(work), chunk, Nanos(master)));
    }
    // Consecutive equal waves become one loop.
    let mut runs: Vec<((Nanos, Nanos, Nanos), u32)> = Vec::new();
    for s in steps {
        match runs.last_mut() {
            Some((last, n)) if *last == s && *n < u32::MAX => *n += 1,
            _ => runs.push((s, 1)),
        }
    }
    let first_in = times(input, frames_of(0), "input_ms")?;
    let last_out = times(output, frames_of(waves.len() - 1), "output_ms")?;
    let programs = (0..threads)
        .map(|t| {
            let mut b = Builder::new(m);
            if t == 0 {
                b.compute(first_in);
            }
            b.push(Op::Barrier { id: 0, wait });
            for &((work, chunk, master), n) in &runs {
                b.repeat(n, |b| {
                    if t == 0 {
                        b.compute(master);
                    }
                    b.push(Op::ParFor {
                        id: 0,
                        work,
                        schedule: Schedule::Dynamic { chunk },
                        mem: m.mem,
                        ws_kb: m.ws_kb,
                        overlap: m.overlap,
                        wait,
                    });
                });
            }
            if t == 0 {
                b.compute(last_out);
            }
            b.finish()
        })
        .collect();
    Ok(programs)
}

/// `parallel-make`: a build driven by `make -jN` with N job slots = the
/// threads. GNU make runs up to N recipe commands at once and starts the next
/// ready one as soon as a slot frees (GNU make manual, "Parallel Execution"),
/// so compile jobs are taken dynamically by whichever slot is free; a target
/// waits for all its prerequisites, so a directory's archive or partial link
/// runs alone after its objects; a recursive build descends into its
/// subdirectories one after another (the `SUBDIRS` loop of the usual
/// recursive makefile; Miller, "Recursive Make Considered Harmful", 1998:
/// parallelism is bounded by one directory at a time), and the serial steps
/// around it — the configure script before, the final link after — run on
/// one CPU. As programs: thread 0 runs `configure_ms` while the others wait
/// (barrier 0); per directory a dynamically scheduled parallel loop of
/// `jobs_per_dir` chunks of `job_ms`, then `archive_ms` on thread 0 behind
/// barrier 0; `link_ms` on thread 0 at the end. Simplification, stated: a
/// slot is a thread that takes the next job at once on its CPU, where make
/// forks a new compiler process per job (placed by the kernel at fork).
fn build_parallel_make(r: &Resolved, threads: u32, m: MemSpec) -> Result<Vec<Program>, ModelError> {
    let configure = Nanos::from_ms_f64(r.f("configure_ms"));
    let dirs = count_u32(r.i("dirs"), r, "dirs", "directories")?;
    let job = Nanos::from_ms_f64(r.f("job_ms"));
    if job.0 == 0 {
        return Err(r.err("job_ms", format!("too small: {} ms (at least 1 ns)", r.f("job_ms"))));
    }
    let work = r
        .i("jobs_per_dir")
        .checked_mul(job.0)
        .ok_or_else(|| r.err("jobs_per_dir", "jobs_per_dir × job_ms overflows 2^64 ns"))?;
    let archive = Nanos::from_ms_f64(r.f("archive_ms"));
    let link = Nanos::from_ms_f64(r.f("link_ms"));
    let wait = wait_of(r);
    let programs = (0..threads)
        .map(|t| {
            let mut b = Builder::new(m);
            if t == 0 {
                b.compute(configure);
            }
            b.push(Op::Barrier { id: 0, wait });
            b.repeat(dirs, |b| {
                b.push(Op::ParFor {
                    id: 0,
                    work: Nanos(work),
                    schedule: Schedule::Dynamic { chunk: job },
                    mem: m.mem,
                    ws_kb: m.ws_kb,
                    overlap: m.overlap,
                    wait,
                });
                if t == 0 {
                    b.compute(archive);
                }
                b.push(Op::Barrier { id: 0, wait });
            });
            if t == 0 {
                b.compute(link);
            }
            b.finish()
        })
        .collect();
    Ok(programs)
}

// ---------------------------------------------------------------------------
// The library
// ---------------------------------------------------------------------------

/// 1-based line of each `[[model]]` header, in order.
fn header_lines(text: &str) -> Vec<usize> {
    text.lines().enumerate().filter(|(_, l)| l.trim_start().starts_with("[[model]]")).map(|(i, _)| i + 1).collect()
}

/// 1-based line of `key = …` inside the entry starting at `from` (before `to`), else `from`.
fn key_line(text: &str, from: usize, to: usize, key: &str) -> usize {
    text.lines()
        .enumerate()
        .skip(from)
        .take(to.saturating_sub(from))
        .find(|(_, l)| {
            let l = l.trim_start();
            l.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|(i, _)| i + 1)
        .unwrap_or(from)
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1
}

fn toml_to_param(v: &toml::Value) -> Option<ParamValue> {
    Some(match v {
        toml::Value::String(s) => ParamValue::Str(s.clone()),
        toml::Value::Integer(i) => ParamValue::Int(*i),
        toml::Value::Float(f) => ParamValue::Float(*f),
        toml::Value::Boolean(b) => ParamValue::Bool(*b),
        toml::Value::Array(a) => ParamValue::List(a.iter().map(toml_to_param).collect::<Option<Vec<_>>>()?),
        toml::Value::Datetime(_) | toml::Value::Table(_) => return None,
    })
}

impl Library {
    /// The library shipped in the repository (`models/library.toml`).
    pub fn builtin() -> Library {
        static BUILTIN: OnceLock<Library> = OnceLock::new();
        BUILTIN
            .get_or_init(|| {
                Library::parse(BUILTIN_TEXT, BUILTIN_FILE)
                    .unwrap_or_else(|e| panic!("the builtin library must parse (a unit test checks it): {e}"))
            })
            .clone()
    }

    /// Parse a library file's text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Library, ModelError> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let at = e.span().map(|s| format!("{file}:{}", line_of_offset(text, s.start)));
            ModelError::new(at.unwrap_or_else(|| file.to_string()), e.message().trim_end().to_string())
        })?;
        for key in table.keys() {
            if key != "model" {
                return Err(ModelError::new(
                    format!("{file}:{}", key_line(text, 0, usize::MAX, key)),
                    format!("unknown top-level key `{key}`; a library file holds only [[model]] tables"),
                ));
            }
        }
        let Some(models) = table.get("model") else {
            return Ok(Library { entries: Vec::new() });
        };
        let toml::Value::Array(models) = models else {
            return Err(ModelError::new(file, "`model` must be an array of tables ([[model]])"));
        };
        let headers = header_lines(text);
        let mut entries: Vec<ModelEntry> = Vec::with_capacity(models.len());
        let mut entry_lines: Vec<usize> = Vec::with_capacity(models.len());
        for (i, m) in models.iter().enumerate() {
            let from = headers.get(i).copied().unwrap_or(1);
            let to = headers.get(i + 1).map(|l| l - 1).unwrap_or(usize::MAX);
            let at = |key: &str, label: &str| format!("{file}:{}: {label}.{key}", key_line(text, from, to, key));
            let toml::Value::Table(m) = m else {
                return Err(ModelError::new(format!("{file}:{from}: model[{i}]"), "must be a table"));
            };
            let fixed = |key: &str| -> Result<String, ModelError> {
                match m.get(key) {
                    Some(toml::Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
                    Some(v) => Err(ModelError::new(
                        at(key, &format!("model[{i}]")),
                        format!("must be a non-empty string, got {}", v.type_str()),
                    )),
                    None => Err(ModelError::new(
                        format!("{file}:{from}: model[{i}]"),
                        format!("missing `{key}` (a string); every model has {}", FIXED_KEYS.join(", ")),
                    )),
                }
            };
            let name = fixed("name")?;
            let label = format!("model.{name}");
            let entry = ModelEntry {
                suite: fixed("suite")?,
                template: fixed("template")?,
                source: fixed("source")?,
                description: fixed("description")?,
                params: m
                    .iter()
                    .filter(|(k, _)| !FIXED_KEYS.contains(&k.as_str()))
                    .map(|(k, v)| {
                        toml_to_param(v).map(|pv| (k.clone(), pv)).ok_or_else(|| {
                            ModelError::new(
                                at(k, &label),
                                format!("must be a number, string, boolean or list, got {}", v.type_str()),
                            )
                        })
                    })
                    .collect::<Result<Params, ModelError>>()?,
                name,
            };
            if let Some(j) = entries.iter().position(|e| e.name == entry.name) {
                return Err(ModelError::new(
                    at("name", &label),
                    format!("duplicate model name `{}` (first defined at line {})", entry.name, entry_lines[j]),
                ));
            }
            if !(entry.source.starts_with("V:") || entry.source.starts_with("estimate:")) {
                return Err(ModelError::new(
                    at("source", &label),
                    format!(
                        "must start with \"V:\" (read in the program's source) or \"estimate:\", got \"{}\"",
                        entry.source
                    ),
                ));
            }
            let Some((t, defs)) = template_by_name(&entry.template) else {
                return Err(ModelError::new(
                    at("template", &label),
                    format!("unknown template `{}`; templates: {}", entry.template, template_names()),
                ));
            };
            // Check the values now (and that the model builds at its smallest
            // thread count: one, or a closed loop's clients plus one worker), so
            // bad data fails at load.
            let path_of = |k: &str| at(k, &label);
            let r = resolve(&entry.template, defs, &entry.name, &[(&entry.params, &path_of)])?;
            let fewest = if t == Template::ClosedServer { r.i("clients").saturating_add(1) } else { 1 };
            build(t, &r, u32::try_from(fewest).unwrap_or(u32::MAX))?;
            entries.push(entry);
            entry_lines.push(from);
        }
        Ok(Library { entries })
    }

    /// The models, in file order.
    pub fn entries(&self) -> &[ModelEntry] {
        &self.entries
    }

    /// The model with exactly this name (case-sensitive).
    pub fn get(&self, name: &str) -> Option<&ModelEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// Programs for `threads` tasks of one sync group running model `name` with
    /// `overrides` applied; `path` (e.g. `domain[1].workload`) prefixes error paths.
    pub fn instantiate(
        &self,
        name: &str,
        overrides: &Params,
        threads: u32,
        path: &str,
    ) -> Result<Vec<Program>, ModelError> {
        let Some(entry) = self.get(name) else {
            let known = self.entries.iter().map(|e| e.name.as_str()).collect::<Vec<_>>();
            return Err(ModelError::new(
                format!("{path}.model"),
                format!("unknown model `{name}`; known models: {}", known.join(", ")),
            ));
        };
        if threads == 0 {
            return Err(ModelError::new(path, format!("model `{name}` needs at least 1 thread, got 0")));
        }
        let Some((t, defs)) = template_by_name(&entry.template) else {
            return Err(ModelError::new(
                format!("{path}.model"),
                format!("model `{name}` uses unknown template `{}`; templates: {}", entry.template, template_names()),
            ));
        };
        let entry_path = |k: &str| format!("model `{name}` (library).{k}");
        let over_path = |k: &str| format!("{path}.{k}");
        let r = resolve(&entry.template, defs, name, &[(&entry.params, &entry_path), (overrides, &over_path)])?;
        let programs = build(t, &r, threads)?;
        for (i, p) in programs.iter().enumerate() {
            p.validate().map_err(|m| ModelError::new(path, format!("model `{name}`, thread {i}: {m}")))?;
        }
        Ok(programs)
    }

    /// The templates with their parameters, defaults and one-line docs (for `ampsched models`).
    pub fn templates() -> Vec<TemplateInfo> {
        TEMPLATES
            .iter()
            .map(|(_, name, doc, defs)| TemplateInfo {
                name: name.to_string(),
                doc: doc.to_string(),
                params: defs.iter().map(|d| (d.name.to_string(), d.default.render(), d.doc.to_string())).collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn params(kv: &[(&str, ParamValue)]) -> Params {
        kv.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }
    fn int(i: i64) -> ParamValue {
        ParamValue::Int(i)
    }
    fn float(f: f64) -> ParamValue {
        ParamValue::Float(f)
    }
    fn string(s: &str) -> ParamValue {
        ParamValue::Str(s.to_string())
    }

    /// Per-program counts with loops unrolled: (pushes, pops) per channel and barrier arrivals per id.
    #[derive(Default, Debug, PartialEq)]
    struct Counts {
        push: BTreeMap<u32, u64>,
        pop: BTreeMap<u32, u64>,
        barrier: BTreeMap<u32, u64>,
    }

    fn counts(p: &Program) -> Counts {
        fn walk(ops: &[Op], i: &mut usize, stop: usize, mult: u64, c: &mut Counts) {
            while *i < stop {
                match &ops[*i] {
                    Op::Push { chan, .. } => *c.push.entry(*chan).or_default() += mult,
                    Op::Pop { chan, .. } => *c.pop.entry(*chan).or_default() += mult,
                    Op::Barrier { id, .. } => *c.barrier.entry(*id).or_default() += mult,
                    Op::LoopStart { count, end } => {
                        let end = *end as usize;
                        *i += 1;
                        walk(ops, i, end, mult * *count as u64, c);
                        *i = end;
                    }
                    _ => {}
                }
                *i += 1;
            }
        }
        let mut c = Counts::default();
        let mut i = 0;
        walk(&p.ops, &mut i, p.ops.len(), 1, &mut c);
        c
    }

    /// Time of a program on a core of `speed`, ignoring waits: Σ work × ((1 − m)/s + m), in seconds.
    fn time_on(p: &Program, speed: f64) -> f64 {
        fn walk(ops: &[Op], i: &mut usize, stop: usize, speed: f64) -> f64 {
            let mut t = 0.0;
            while *i < stop {
                match &ops[*i] {
                    Op::Compute { work, mem, .. } => t += work.as_secs_f64() * ((1.0 - mem) / speed + mem),
                    Op::LoopStart { count, end } => {
                        let end = *end as usize;
                        *i += 1;
                        t += walk(ops, i, end, speed) * *count as f64;
                        *i = end;
                    }
                    _ => {}
                }
                *i += 1;
            }
            t
        }
        let mut i = 0;
        walk(&p.ops, &mut i, p.ops.len(), speed)
    }

    /// Run a group's programs with zero-time compute: barriers (and ParFor's
    /// implicit barrier) need every thread, locks are exclusive, channels
    /// bounded. Returns Err if the group deadlocks.
    fn run_to_completion(progs: &[Program]) -> Result<(), String> {
        #[derive(Clone)]
        struct T {
            pc: usize,
            stack: Vec<(usize, u32)>,
            at_barrier: bool,
            done: bool,
        }
        let n = progs.len();
        let mut ts = vec![T { pc: 0, stack: Vec::new(), at_barrier: false, done: false }; n];
        let mut arrived: BTreeMap<(bool, u32), Vec<usize>> = BTreeMap::new();
        let mut locks: BTreeMap<u32, usize> = BTreeMap::new();
        let mut queues: BTreeMap<u32, u32> = BTreeMap::new();
        loop {
            let mut progress = false;
            for t in 0..n {
                // Run thread t until it blocks or ends.
                while !ts[t].done && !ts[t].at_barrier {
                    let op = &progs[t].ops[ts[t].pc];
                    let mut next = true;
                    match op {
                        Op::End => {
                            ts[t].done = true;
                            next = false;
                        }
                        Op::Barrier { id, .. } | Op::ParFor { id, .. } => {
                            let key = (matches!(op, Op::ParFor { .. }), *id);
                            let list = arrived.entry(key).or_default();
                            list.push(t);
                            if list.len() == n {
                                for w in std::mem::take(list) {
                                    ts[w].at_barrier = false;
                                    ts[w].pc += 1;
                                }
                                progress = true;
                            } else {
                                ts[t].at_barrier = true;
                            }
                            next = false;
                        }
                        Op::Lock { id, .. } => {
                            if locks.contains_key(id) {
                                next = false;
                                if locks[id] == t {
                                    return Err(format!("thread {t} relocks {id}"));
                                }
                            } else {
                                locks.insert(*id, t);
                            }
                        }
                        Op::Unlock { id } => {
                            if locks.remove(id) != Some(t) {
                                return Err(format!("thread {t} unlocks {id} it does not hold"));
                            }
                        }
                        Op::Push { chan, capacity, .. } => {
                            let q = queues.entry(*chan).or_default();
                            if *q < *capacity {
                                *q += 1;
                            } else {
                                next = false;
                            }
                        }
                        Op::Pop { chan, .. } => {
                            let q = queues.entry(*chan).or_default();
                            if *q > 0 {
                                *q -= 1;
                            } else {
                                next = false;
                            }
                        }
                        Op::LoopStart { count, .. } => {
                            let pc = ts[t].pc;
                            ts[t].stack.push((pc, *count));
                        }
                        Op::LoopEnd { start } => {
                            let top = ts[t].stack.last_mut().expect("loop stack");
                            top.1 -= 1;
                            if top.1 > 0 {
                                ts[t].pc = *start as usize;
                            } else {
                                ts[t].stack.pop();
                            }
                        }
                        Op::Compute { .. } | Op::Sleep { .. } | Op::SleepExp { .. } | Op::Io { .. } => {}
                        other => return Err(format!("op {other:?} is not used by library models")),
                    }
                    if next {
                        ts[t].pc += 1;
                        progress = true;
                    } else {
                        break;
                    }
                }
            }
            if ts.iter().all(|t| t.done) {
                return if queues.values().all(|q| *q == 0) { Ok(()) } else { Err("items left in queues".into()) };
            }
            if !progress {
                let stuck: Vec<_> = (0..n).filter(|t| !ts[*t].done).map(|t| (t, ts[t].pc)).collect();
                return Err(format!("deadlock: (thread, pc) {stuck:?}"));
            }
        }
    }

    #[test]
    fn builtin_parses_and_every_entry_instantiates() {
        let lib = Library::parse(BUILTIN_TEXT, BUILTIN_FILE).unwrap();
        assert_eq!(Library::builtin(), lib);
        for e in lib.entries() {
            // A closed-loop server needs its clients plus at least one worker.
            let clients = e.params.get("clients").and_then(ParamValue::as_u64).unwrap_or(0) as u32;
            for threads in [1u32, 2, 3, 4, 8].map(|t| t + clients) {
                let progs = lib
                    .instantiate(&e.name, &Params::new(), threads, "test")
                    .unwrap_or_else(|err| panic!("{} × {threads}: {err}", e.name));
                // One program per thread, each structurally valid.
                assert_eq!(progs.len(), threads as usize, "{}", e.name);
                for p in &progs {
                    p.validate().unwrap();
                }
            }
        }
    }

    #[test]
    fn every_builtin_model_runs_to_completion_without_deadlock() {
        // With zero-time compute, every barrier, lock and channel of every model
        // must be satisfiable at awkward and usual thread counts.
        let lib = Library::builtin();
        for e in lib.entries() {
            let clients = e.params.get("clients").and_then(ParamValue::as_u64).unwrap_or(0) as u32;
            for threads in [1u32, 2, 3, 6, 8].map(|t| t + clients) {
                let progs = lib.instantiate(&e.name, &Params::new(), threads, "test").unwrap();
                run_to_completion(&progs).unwrap_or_else(|m| panic!("{} × {threads}: {m}", e.name));
            }
        }
    }

    #[test]
    fn every_workloads_md_program_is_present() {
        let lib = Library::builtin();
        let names = [
            // 14 SPEC programs
            "eon",
            "sixtrack",
            "crafty",
            "mesa",
            "gzip",
            "perlbmk",
            "calculix",
            "namd",
            "sjeng",
            "equake",
            "leslie3d",
            "mcf",
            "swim",
            "libquantum", // PARSEC
            "blackscholes",
            "bodytrack",
            "facesim",
            "ferret",
            "fluidanimate", // SPLASH-2, FFTW, BLAST
            "radix",
            "lu-splash2",
            "FFT-W",
            "BLAST", // NPB
            "npb-ep",
            "npb-bt",
            "npb-cg",
            "npb-ft",
            "npb-is",
            "npb-lu",
            "npb-mg", // generic
            "cpu-bound",
            "fork-join",
            "phased",
            "pipeline",
            "workqueue", // the asymmetry study's encoder and build
            "h264-encoder",
            "pmake",
        ];
        for n in names {
            let e = lib.get(n).unwrap_or_else(|| panic!("model {n} missing"));
            assert!(e.source.starts_with("V:") || e.source.starts_with("estimate:"), "{n}");
            assert!(!e.description.is_empty());
        }
        // 14 + 5 + 4 + 7 + 5 + 2 = 37 named entries at least (users may add more).
        assert!(lib.entries().len() >= 37);
        // Lookup is exact and case-sensitive.
        assert!(lib.get("MCF").is_none());
    }

    #[test]
    fn generic_entries_equal_the_template_defaults() {
        // The generic models are the templates as-is: data and code must agree.
        let lib = Library::builtin();
        for info in Library::templates() {
            let Some(e) = lib.get(&info.name) else {
                continue;
            };
            assert_eq!(e.template, info.name);
            for (k, v) in &e.params {
                let (_, default, _) = info.params.iter().find(|p| &p.0 == k).unwrap();
                let shown = match v {
                    ParamValue::Str(s) => s.clone(),
                    v => format!("{}", v.as_f64().unwrap()),
                };
                assert_eq!(&shown, default, "{}.{k}", e.name);
            }
        }
    }

    #[test]
    fn mcf_speedup_factor_from_its_ops() {
        // mcf: m = 0.6, 20 s of work. On speed 1: 20 × (0.4/1 + 0.6) = 20 s;
        // on speed 2: 20 × (0.4/2 + 0.6) = 16 s; SF = 20/16 = 1.25 = 2/(1 + 0.6).
        let lib = Library::builtin();
        let p = &lib.instantiate("mcf", &Params::new(), 1, "t").unwrap()[0];
        let (t1, t2) = (time_on(p, 1.0), time_on(p, 2.0));
        assert!((t1 - 20.0).abs() < 1e-9);
        assert!((t2 - 16.0).abs() < 1e-9);
        assert!((t1 / t2 - 2.0 / (1.0 + 0.6)).abs() < 1e-12);
        // eon: m = 0.03 → SF = 2/1.03 ≈ 1.94 (docs/design/workloads.md table: 1.95).
        let p = &lib.instantiate("eon", &Params::new(), 1, "t").unwrap()[0];
        assert!((time_on(p, 1.0) / time_on(p, 2.0) - 2.0 / 1.03).abs() < 1e-12);
    }

    #[test]
    fn sequential_copies_and_segments() {
        let lib = Library::builtin();
        // 8 copies of sixtrack: identical independent programs, no sync ops.
        let progs = lib.instantiate("sixtrack", &Params::new(), 8, "t").unwrap();
        assert!(progs.iter().all(|p| p == &progs[0] && p.ops.len() == 2));
        // work_s = 1, segment_ms = 300 → 3 × 300 ms + 100 ms remainder = 1 s.
        let o = params(&[("work_s", int(1)), ("segment_ms", int(300))]);
        let p = &lib.instantiate("mcf", &o, 1, "t").unwrap()[0];
        assert_eq!(p.ops[0], Op::LoopStart { count: 3, end: 2 });
        assert_eq!(p.total_work(), Nanos::from_secs(1));
        assert!(matches!(p.ops[3], Op::Compute { work, .. } if work == Nanos::from_ms(100)));
    }

    #[test]
    fn phased_io_is_split_into_requests_that_sum_to_io_ms() {
        let lib = Library::builtin();
        // 2 phases, a section after each; thread 0's 10 ms of I/O in 3 requests:
        // a loop of 2 × 3.333333 ms, then 3.333334 ms, per section (the program
        // text holds each op once); other threads do none.
        let o = params(&[("phases", int(2)), ("serial_every", int(1)), ("io_ms", int(10)), ("io_requests", int(3))]);
        let progs = lib.instantiate("phased", &o, 2, "t").unwrap();
        let ios: Vec<Nanos> =
            progs[0].ops.iter().filter_map(|op| if let Op::Io { dur } = op { Some(*dur) } else { None }).collect();
        assert_eq!(ios, vec![Nanos(3_333_333), Nanos(3_333_334)]);
        assert!(!progs[1].ops.iter().any(|op| matches!(op, Op::Io { .. })));
        // One request (the default): one I/O of the whole 10 ms.
        let o = params(&[("phases", int(2)), ("serial_every", int(1)), ("io_ms", int(10))]);
        let p = &lib.instantiate("phased", &o, 1, "t").unwrap()[0];
        assert!(p.ops.contains(&Op::Io { dur: Nanos::from_ms(10) }));
        let e = lib.instantiate("phased", &params(&[("io_requests", int(0))]), 1, "t").unwrap_err();
        assert!(e.path.ends_with("io_requests"), "{}", e.path);
    }

    #[test]
    fn phased_total_work_is_phases_times_phase_plus_serial_sections() {
        let lib = Library::builtin();
        // 7 phases of 10 ms in 2 barrier parts, a 2 ms sequential section every 3 phases:
        // ⌊7/3⌋ = 2 sections. Thread 0: 7 × 10 + 2 × 2 = 74 ms; others 7 × 10 = 70 ms.
        // Barrier arrivals per thread: 7 × 2 = 14 on id 0, 2 on id 1 (the sections).
        let mut o = params(&[
            ("phases", int(7)),
            ("phase_ms", int(10)),
            ("barriers_per_phase", int(2)),
            ("serial_every", int(3)),
            ("serial_ms", int(2)),
        ]);
        for with_locks in [false, true] {
            if with_locks {
                // A 1 µs critical section every 3000 µs is carved out of the same work:
                // 5 ms parts → 1 section + 2 ms remainder each; totals unchanged.
                o.insert("lock_every".into(), int(3000));
                o.insert("hold_us".into(), int(1));
            }
            let progs = lib.instantiate("phased", &o, 4, "t").unwrap();
            assert_eq!(progs[0].total_work(), Nanos::from_ms(74));
            for p in &progs[1..] {
                assert_eq!(p.total_work(), Nanos::from_ms(70));
            }
            for p in &progs {
                assert_eq!(counts(p).barrier, BTreeMap::from([(0, 14), (1, 2)]));
            }
            let group: u64 = progs.iter().map(|p| p.total_work().0).sum();
            // 4 × 70 + 4 = 284 ms for the whole group.
            assert_eq!(Nanos(group), Nanos::from_ms(284));
            assert_eq!(progs.iter().any(|p| p.ops.iter().any(|op| matches!(op, Op::Lock { .. }))), with_locks);
            run_to_completion(&progs).unwrap();
        }
    }

    #[test]
    fn builtin_phased_models_match_their_numbers() {
        let lib = Library::builtin();
        // FFT-W: 200 transforms × (13 ms parallel + 87 ms serial on thread 0):
        // thread 0 computes 200 × 100 ms = 20 s, the others 200 × 13 ms = 2.6 s;
        // on equal cores 87 ms of every 100 ms run single-threaded.
        let progs = lib.instantiate("FFT-W", &Params::new(), 8, "t").unwrap();
        assert_eq!(progs[0].total_work(), Nanos::from_secs(20));
        assert_eq!(progs[7].total_work(), Nanos::from_ms(2600));
        // fluidanimate: 384 frames × 9 barriers (V) + 1 sequential-section barrier.
        let progs = lib.instantiate("fluidanimate", &Params::new(), 4, "t").unwrap();
        assert_eq!(counts(&progs[2]).barrier, BTreeMap::from([(0, 384 * 9), (1, 384)]));
        // thread 0: 384 × (49.5 + 2.605) ms = 20 008.32 ms.
        assert_eq!(progs[0].total_work(), Nanos::from_ms_f64(384.0 * 49.5 + 384.0 * 2.605));
        // lu-splash2: exactly 2 barriers per block step (V), N/B = 4096/16 = 256 steps.
        let progs = lib.instantiate("lu-splash2", &Params::new(), 2, "t").unwrap();
        let c = counts(&progs[1]).barrier;
        assert_eq!(c.values().sum::<u64>(), 2 * 256);
        // NPB, class A structure counted in NPB 3.3-OMP (models/library.toml): iterations incl. the
        // warm-up × barriers per iteration, plus one sequential-section barrier per iteration.
        // CG: 16 × (2 + 25 × 5 + 2 + 2) = 16 × 131; LU: 251 × (124 k-plane stages + 7); MG: 5 × (80 + 3).
        // The work is the earlier 20 s scale, unchanged to within 1 ms: a worker's share is the old
        // phases × phase_ms (thread 0 adds the serial share), e.g. CG 2880 × 6.875 = 16 × 1237.5 ms.
        let npb = [
            ("npb-bt", 201, 9, 1320.0 * 15.0),
            ("npb-cg", 16, 131, 2880.0 * 6.875),
            ("npb-ft", 8, 5, 132.0 * 150.0),
            ("npb-is", 11, 4, 1267.0 * 15.0),
            ("npb-lu", 251, 131, 3094.0 * 6.4),
            ("npb-mg", 5, 83, 1219.0 * 16.0),
        ];
        for (name, iters, per, work_ms) in npb {
            let progs = lib.instantiate(name, &Params::new(), 4, "t").unwrap();
            assert_eq!(counts(&progs[3]).barrier, BTreeMap::from([(0, iters * per), (1, iters)]), "{name}");
            let w = progs[3].total_work().0 as f64 / 1e6;
            assert!((w - work_ms).abs() < 1.0, "{name}: {w} ms of work, was {work_ms}");
        }
        // NPB: OpenMP waiting with the pre-GCC-4.6 spin limit of 150 ms; NPB LU spins.
        let bt = lib.instantiate("npb-bt", &Params::new(), 2, "t").unwrap();
        assert!(bt[0].ops.contains(&Op::Barrier { id: 0, wait: Wait::SpinThenBlock(Nanos::from_ms(150)) }));
        let lu = lib.instantiate("npb-lu", &Params::new(), 2, "t").unwrap();
        assert!(lu[0].ops.contains(&Op::Barrier { id: 0, wait: Wait::Spin }));
    }

    #[test]
    fn blocked_lu_steps_and_shares_follow_lu_c() {
        // Grids (lu.c): 2 → 1×2, 4 → 2×2, 6 → 2×3, 7 → 1×7.
        assert_eq!(
            [lu_grid(1), lu_grid(2), lu_grid(4), lu_grid(6), lu_grid(7)],
            [(1, 1), (1, 2), (2, 2), (2, 3), (1, 7)]
        );
        // m = 3 block steps, 2 threads on a 1×2 grid: block (i, j) belongs to j mod 2.
        // k = 0: diag (0,0) → t0; perimeter column (1,0),(2,0) → t0, row (0,1) → t1, (0,2) → t0;
        //        interior (1..3)² : columns 1 → t1, 2 → t0: 2 blocks each, 2 units a block → 4, 4.
        // k = 1: diag (1,1) → t1; perimeter (2,1) → t1, (1,2) → t0; interior (2,2) → t0: 2 units.
        // k = 2: diag (2,2) → t0; nothing else.
        let u = lu_units(3, 2);
        assert_eq!(u[0], (0, vec![3, 1], vec![4, 4]));
        assert_eq!(u[1], (1, vec![1, 1], vec![2, 0]));
        assert_eq!(u[2], (0, vec![0, 0], vec![0, 0]));
        // In thirds: 3 diagonals × 2 + 3 × (4 + 8 + 2 + 2) = 6 + 48 = 54 thirds = 18 units; work_s = 0.054
        // gives 1 ms a third: t0 = 2 + 9 + 12 | 3 + 6 | 2 = 34 ms, t1 = 3 + 12 | 2 + 3 = 20 ms.
        let o = params(&[("n", int(48)), ("block", int(16)), ("work_s", ParamValue::Float(0.054))]);
        let progs = Library::builtin().instantiate("lu-splash2", &o, 2, "t").unwrap();
        assert_eq!(progs[0].total_work(), Nanos::from_ms(34));
        assert_eq!(progs[1].total_work(), Nanos::from_ms(20));
        assert_eq!(counts(&progs[0]).barrier, BTreeMap::from([(0, 6)]));
        // N = 4096, B = 16: 256 steps; the first interior update is 255²·2 of ≈ ⅔·256³ units,
        // ≈ 1.16 % of the work per thread pair, the last step's is empty.
        let u = lu_units(256, 2);
        assert_eq!(u[0].2.iter().sum::<u64>(), 2 * 255 * 255);
        assert_eq!(u[255].2, vec![0, 0]);
        // A block larger than the matrix is refused, naming the field.
        let o = params(&[("n", int(8)), ("block", int(16))]);
        let e = Library::builtin().instantiate("lu-splash2", &o, 2, "t").unwrap_err();
        assert!(e.to_string().contains("block"), "{e}");
    }

    #[test]
    fn closed_server_clients_think_send_and_wait() {
        // 3 clients, 2 workers (5 threads), 7 requests, think 100 ms, 10 ms a request:
        // clients send 7 / 3 → 3, 2, 2; workers serve 7 / 2 → 4, 3. Both channels balance:
        // 7 pushes and 7 pops of requests (chan 0) and of replies (chan 1).
        let o = params(&[("clients", int(3)), ("requests", int(7))]);
        let progs = Library::builtin().instantiate("server-light", &o, 5, "t").unwrap();
        let c: Vec<Counts> = progs.iter().map(counts).collect();
        let pushes = |ch: u32| c.iter().map(|k| k.push.get(&ch).copied().unwrap_or(0)).sum::<u64>();
        let pops = |ch: u32| c.iter().map(|k| k.pop.get(&ch).copied().unwrap_or(0)).sum::<u64>();
        assert_eq!([pushes(0), pops(0), pushes(1), pops(1)], [7, 7, 7, 7]);
        assert_eq!([c[0].pop[&0], c[1].pop[&0]], [4, 3]);
        assert_eq!([c[2].push[&0], c[3].push[&0], c[4].push[&0]], [3, 2, 2]);
        // Worker 0: 4 × 10 ms of work; clients do none, they think (exponential, mean 100 ms),
        // send, then wait for a reply before thinking again.
        assert_eq!(progs[0].total_work(), Nanos::from_ms(40));
        assert_eq!(progs[2].total_work(), Nanos(0));
        assert_eq!(
            &progs[2].ops[1..4],
            &[
                Op::SleepExp { mean: Nanos::from_ms(100) },
                Op::Push { chan: 0, capacity: 3, wait: Wait::Block },
                Op::Pop { chan: 1, wait: Wait::Block },
            ]
        );
        // Light vs heavy load is the client count: 12 and 36 clients thinking 100 ms offer at most
        // 12 / 0.1 s = 120 and 36 / 0.1 s = 360 requests per second (X = N / (Z + R), R ≥ 10 ms).
        let lib = Library::builtin();
        let n = |m: &str| lib.get(m).unwrap().params.get("clients").and_then(ParamValue::as_u64).unwrap();
        assert_eq!([n("server-light"), n("server-heavy")], [12, 36]);
        // As many threads as clients leaves no worker: refused, naming the field.
        let e = Library::builtin().instantiate("server-light", &o, 3, "t").unwrap_err();
        assert!(e.to_string().contains("clients"), "{e}");
    }

    #[test]
    fn periodic_wakes_duration_over_period_times() {
        // guest-idle: HZ = 100 → a 10 ms period, 20 µs a tick, 60 s → 6000 wake-ups:
        // work 6000 × 20 µs = 120 ms; a random first phase, then 5999 periods of sleep.
        let progs = Library::builtin().instantiate("guest-idle", &Params::new(), 2, "t").unwrap();
        assert_eq!(progs.len(), 2);
        assert_eq!(progs[0], progs[1]);
        assert_eq!(progs[0].total_work(), Nanos::from_ms(120));
        assert_eq!(progs[0].ops[0], Op::SleepExp { mean: Nanos::from_ms(10) });
        assert_eq!(progs[0].ops[1], Op::LoopStart { count: 5999, end: 4 });
        // Work as long as the period is refused, naming the field.
        let o = params(&[("period_ms", int(1)), ("work_us", int(1000))]);
        let e = Library::builtin().instantiate("guest-idle", &o, 1, "t").unwrap_err();
        assert!(e.to_string().contains("work_us"), "{e}");
        // xen-dom0: 100 ms, 20 µs, 3600 s → 36 000 wake-ups, 0.72 s of work in all, i.e.
        // 0.02 % of a pCPU per dom0 vCPU: it outlasts every run, which does not wait for it.
        let progs = Library::builtin().instantiate("xen-dom0", &Params::new(), 1, "t").unwrap();
        assert_eq!(progs[0].total_work(), Nanos::from_ms(720));
        assert_eq!(progs[0].ops[0], Op::SleepExp { mean: Nanos::from_ms(100) });
        assert_eq!(progs[0].ops[1], Op::LoopStart { count: 35_999, end: 4 });
    }

    #[test]
    fn fork_join_rounds_split_the_work() {
        // work_s = 1, serial 20 %, 2 rounds, 4 threads: per round 0.1 s serial on
        // thread 0 and 0.4 s / 4 = 0.1 s per thread. Thread 0: 2 × (0.1 + 0.1) = 0.4 s;
        // others 2 × 0.1 = 0.2 s; group total 0.4 + 3 × 0.2 = 1.0 s = work_s.
        let lib = Library::builtin();
        let o = params(&[("work_s", int(1)), ("serial_frac", float(0.2)), ("iterations", int(2))]);
        let progs = lib.instantiate("fork-join", &o, 4, "t").unwrap();
        assert_eq!(progs[0].total_work(), Nanos::from_ms(400));
        assert_eq!(progs[3].total_work(), Nanos::from_ms(200));
        assert_eq!(counts(&progs[3]).barrier, BTreeMap::from([(0, 2), (1, 2)]));
        // Without a serial part there is no serial barrier.
        let o = params(&[("serial_frac", int(0))]);
        let progs = lib.instantiate("fork-join", &o, 3, "t").unwrap();
        assert_eq!(counts(&progs[1]).barrier, BTreeMap::from([(1, 1)]));
        // 20 s / 3 threads does not divide: shares differ by ≤ 1 ns and sum exactly.
        let sum: u64 = progs.iter().map(|p| p.total_work().0).sum();
        assert_eq!(Nanos(sum), Nanos::from_secs(20));
    }

    #[test]
    fn pipeline_pushes_and_pops_balance_for_awkward_counts() {
        let lib = Library::builtin();
        for (stages, items, threads) in
            [(3, 10, 5), (3, 7, 8), (6, 6667, 8), (4, 5, 2), (5, 1, 3), (2, 3, 7), (1, 9, 4), (6, 2, 6)]
        {
            let o =
                params(&[("stages", int(stages)), ("items", int(items)), ("item_ms", int(1)), ("queue_cap", int(2))]);
            let progs = lib.instantiate("pipeline", &o, threads, "t").unwrap();
            let mut push: BTreeMap<u32, u64> = BTreeMap::new();
            let mut pop: BTreeMap<u32, u64> = BTreeMap::new();
            for p in &progs {
                let c = counts(p);
                c.push.into_iter().for_each(|(k, v)| *push.entry(k).or_default() += v);
                c.pop.into_iter().for_each(|(k, v)| *pop.entry(k).or_default() += v);
            }
            // Effective stages S' = min(stages, threads); channels 0..S'−1 each
            // carry exactly `items` pushes and `items` pops.
            let eff = stages.min(threads as i64) as u32;
            let expect: BTreeMap<u32, u64> = (0..eff - 1).map(|c| (c, items as u64)).collect();
            assert_eq!(push, expect, "{stages}/{items}/{threads}");
            assert_eq!(pop, expect, "{stages}/{items}/{threads}");
            // Work is conserved: items × stages × 1 ms.
            let sum: u64 = progs.iter().map(|p| p.total_work().0).sum();
            assert_eq!(Nanos(sum), Nanos::from_ms((items * stages) as u64));
            run_to_completion(&progs).unwrap_or_else(|m| panic!("{stages}/{items}/{threads}: {m}"));
        }
        // (3 stages, 10 items, 5 threads): stage 0 = threads {0, 3} → 5 + 5 items,
        // stage 1 = {1, 4} → 5 + 5 (pop chan 0, push chan 1), stage 2 = {2} → pops 10 from chan 1.
        let o = params(&[("stages", int(3)), ("items", int(10))]);
        let progs = lib.instantiate("pipeline", &o, 5, "t").unwrap();
        assert_eq!(counts(&progs[0]).push, BTreeMap::from([(0, 5)]));
        assert_eq!(counts(&progs[4]).pop, BTreeMap::from([(0, 5)]));
        assert_eq!(counts(&progs[4]).push, BTreeMap::from([(1, 5)]));
        assert_eq!(counts(&progs[2]).pop, BTreeMap::from([(1, 10)]));
    }

    #[test]
    fn workqueue_uses_parfor_with_the_schedule() {
        // 3 loops of 30 ms in 2 ms dynamic chunks; 1 ms serial after each on thread 0.
        let lib = Library::builtin();
        let o = params(&[
            ("iterations", int(3)),
            ("work_ms", int(30)),
            ("chunk_ms", int(2)),
            ("serial_ms", int(1)),
            ("schedule", string("guided")),
        ]);
        let progs = lib.instantiate("workqueue", &o, 2, "t").unwrap();
        assert!(progs[1].ops.iter().any(|op| matches!(
            op,
            Op::ParFor { work, schedule: Schedule::Guided { min_chunk }, .. }
                if *work == Nanos::from_ms(30) && *min_chunk == Nanos::from_ms(2)
        )));
        // total_work counts each ParFor whole: 3 × 30 = 90 ms, + 3 × 1 ms serial on thread 0.
        assert_eq!(progs[0].total_work(), Nanos::from_ms(93));
        assert_eq!(progs[1].total_work(), Nanos::from_ms(90));
        run_to_completion(&progs).unwrap();
    }

    #[test]
    fn encoder_waves_follow_the_reference_frames() {
        // 10 frames, IBBP: anchors (display order) 0, 3, 6, 9. Encoding order
        // I0 | P3 | B1 B2 P6 | B4 B5 P9 | B7 B8: P3 needs I0; B1, B2 need I0 and
        // P3, and P6 needs P3, so they go together once P3 is done; and so on.
        let w = |frames, intra| Wave { frames, intra };
        assert_eq!(encoder_waves(10, 2), vec![w(1, true), w(1, false), w(3, false), w(3, false), w(2, false)]);
        // 8 frames: the last frame (7) is made an anchor, right after anchor 6,
        // so no B frames are left for a last wave.
        assert_eq!(encoder_waves(8, 2), vec![w(1, true), w(1, false), w(3, false), w(3, false)]);
        // IPPP: every frame references the one before, one frame a wave.
        assert_eq!(encoder_waves(4, 0), vec![w(1, true), w(1, false), w(1, false), w(1, false)]);
        assert_eq!(encoder_waves(1, 2), vec![w(1, true)]);
        // Every frame exactly once, whatever the counts.
        for (f, b) in [(300, 2), (299, 3), (7, 10), (2, 1)] {
            assert_eq!(encoder_waves(f, b).iter().map(|w| w.frames).sum::<u64>(), f, "{f} frames, {b} B");
        }
    }

    #[test]
    fn frame_encoder_issues_slices_per_wave_and_the_master_works_on_thread_0() {
        // 10 frames × 3 slices, IBBP, P/B slice 4 ms, I slice 2 ms, input 1 ms
        // and output 0.5 ms a frame, 3 threads.
        let lib = Library::builtin();
        let o = params(&[
            ("frames", int(10)),
            ("slices", int(3)),
            ("b_frames", int(2)),
            ("slice_ms", int(4)),
            ("i_slice_ms", int(2)),
            ("input_ms", int(1)),
            ("output_ms", float(0.5)),
        ]);
        let progs = lib.instantiate("h264-encoder", &o, 3, "t").unwrap();
        // Waves of 1 (I), 1, 3, 3, 2 frames: loops of 3 × 2 = 6 ms in 2 ms
        // slices, then 3 × 4 = 12, 36, 36 and 24 ms in 4 ms slices.
        let loops: Vec<(u64, u64)> = progs[1]
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::ParFor { work, schedule: Schedule::Dynamic { chunk }, .. } => Some((work.0, chunk.0)),
                _ => None,
            })
            .collect();
        let ms = 1_000_000;
        // The two equal waves of 3 frames are one loop run twice.
        assert_eq!(loops, vec![(6 * ms, 2 * ms), (12 * ms, 4 * ms), (36 * ms, 4 * ms), (24 * ms, 4 * ms)]);
        // Every thread takes part in every wave: 6 + 12 + 36 + 36 + 24 = 114 ms
        // of loops (total_work counts a loop whole for each thread).
        assert_eq!(progs[1].total_work(), Nanos::from_ms(114));
        // Thread 0 also pre-processes 10 frames (10 ms) and commits 10 (5 ms).
        assert_eq!(progs[0].total_work(), Nanos::from_ms(114 + 10 + 5));
        run_to_completion(&progs).unwrap();
        // A frame count past the limit is refused at the parameter, naming it.
        let err = lib.instantiate("h264-encoder", &params(&[("frames", int(2_000_000))]), 2, "t").unwrap_err();
        assert!(err.to_string().contains("frames"), "{err}");
    }

    #[test]
    fn parallel_make_configures_builds_each_directory_then_links() {
        // configure 100 ms; 3 directories of 4 jobs of 10 ms, each closed by a
        // 5 ms archive; link 30 ms; make -j2.
        let lib = Library::builtin();
        let o = params(&[
            ("configure_ms", int(100)),
            ("dirs", int(3)),
            ("jobs_per_dir", int(4)),
            ("job_ms", int(10)),
            ("archive_ms", int(5)),
            ("link_ms", int(30)),
        ]);
        let progs = lib.instantiate("pmake", &o, 2, "t").unwrap();
        assert!(progs[1].ops.iter().any(|op| matches!(
            op,
            Op::ParFor { work, schedule: Schedule::Dynamic { chunk }, .. }
                if *work == Nanos::from_ms(40) && *chunk == Nanos::from_ms(10)
        )));
        // Slot 1: 3 directories × 40 ms of jobs; slot 0 also runs configure,
        // the 3 archives and the link: 100 + 120 + 15 + 30 = 265 ms.
        assert_eq!(progs[1].total_work(), Nanos::from_ms(120));
        assert_eq!(progs[0].total_work(), Nanos::from_ms(265));
        // Barrier 0 after configure and after each directory, on every slot.
        for p in &progs {
            assert_eq!(counts(p).barrier, BTreeMap::from([(0, 4)]));
        }
        run_to_completion(&progs).unwrap();
    }

    #[test]
    fn unknown_model_lists_known_names() {
        let lib = Library::builtin();
        let e = lib.instantiate("mfc", &Params::new(), 1, "domain[1].workload").unwrap_err();
        assert_eq!(e.path, "domain[1].workload.model");
        assert!(e.msg.contains("unknown model `mfc`"), "{}", e.msg);
        for n in ["mcf", "npb-lu", "BLAST", "workqueue"] {
            assert!(e.msg.contains(n), "{}", e.msg);
        }
    }

    #[test]
    fn unknown_parameter_lists_the_template_parameters() {
        let lib = Library::builtin();
        let o = params(&[("wrok_s", int(5))]);
        let e = lib.instantiate("mcf", &o, 1, "domain[0].workload").unwrap_err();
        assert_eq!(e.path, "domain[0].workload.wrok_s");
        for n in ["work_s (20)", "mem (0)", "ws_kb (0)", "overlap (1)", "segment_ms (0)", "sequential"] {
            assert!(e.msg.contains(n), "{}", e.msg);
        }
    }

    #[test]
    fn bad_values_say_what_is_allowed() {
        let lib = Library::builtin();
        let err = |name: &str, k: &str, v: ParamValue| {
            lib.instantiate(name, &params(&[(k, v)]), 2, "domain[0].workload").unwrap_err()
        };
        let e = err("mcf", "mem", float(1.5));
        assert_eq!(e.path, "domain[0].workload.mem");
        assert!(e.msg.contains("[0, 1)"), "{}", e.msg);
        let e = err("npb-bt", "wait", string("spinning"));
        assert!(e.msg.contains("\"block\", \"spin\", \"spin-then-block\""), "{}", e.msg);
        let e = err("phased", "phases", float(2.5));
        assert!(e.msg.contains("an integer in [1, 4294967295]"), "{}", e.msg);
        let e = err("mcf", "work_s", float(f64::NAN));
        assert!(e.msg.contains("(0, 10000000]"), "{}", e.msg);
        let e = err("phased", "phase_ms", string("10"));
        assert!(e.msg.contains("got \"10\""), "{}", e.msg);
        let e = err("fluidanimate", "hold_us", int(500));
        assert_eq!(e.path, "domain[0].workload.hold_us");
        let e = err("phased", "io_ms", int(5));
        assert!(e.msg.contains("serial_every"), "{}", e.msg);
        // An integral float is a fine integer; an int is a fine float.
        assert!(lib.instantiate("phased", &params(&[("phases", float(3.0))]), 1, "t").is_ok());
        // threads must be ≥ 1.
        let e = lib.instantiate("mcf", &Params::new(), 0, "domain[2]").unwrap_err();
        assert_eq!(e.path, "domain[2]");
    }

    #[test]
    fn parse_errors_name_file_line_and_field() {
        let head = "[[model]]\nname = \"x\"\nsuite = \"s\"\ntemplate = \"sequential\"\n\
                    source = \"estimate: test\"\ndescription = \"d\"\n";
        // Good file: one entry, params kept as written.
        let lib = Library::parse(&format!("{head}mem = 0.5\n"), "lib.toml").unwrap();
        assert_eq!(lib.entries()[0].params, params(&[("mem", float(0.5))]));
        // A bad value, on line 7.
        let e = Library::parse(&format!("{head}mem = 2\n"), "lib.toml").unwrap_err();
        assert_eq!(e.path, "lib.toml:7: model.x.mem");
        // An unknown parameter lists the template's parameters.
        let e = Library::parse(&format!("{head}men = 0.5\n"), "lib.toml").unwrap_err();
        assert!(e.msg.contains("work_s (20)"), "{}", e.msg);
        // Unknown template lists the templates.
        let e = Library::parse(&head.replace("sequential", "seq"), "lib.toml").unwrap_err();
        assert_eq!(e.path, "lib.toml:4: model.x.template");
        assert!(e.msg.contains("fork-join, phased, pipeline, workqueue"), "{}", e.msg);
        // Duplicate names.
        let e = Library::parse(&format!("{head}{head}"), "lib.toml").unwrap_err();
        assert!(e.msg.contains("duplicate") && e.msg.contains("line 1"), "{}", e.msg);
        // The source must carry its label.
        let e = Library::parse(&head.replace("estimate: test", "guess"), "lib.toml").unwrap_err();
        assert!(e.msg.contains("estimate:"), "{}", e.msg);
        // Missing fixed key.
        let e = Library::parse(&head.replace("suite = \"s\"\n", ""), "lib.toml").unwrap_err();
        assert!(e.msg.contains("missing `suite`"), "{}", e.msg);
        // TOML syntax error: line of the error.
        let e = Library::parse("[[model]]\nname = \n", "lib.toml").unwrap_err();
        assert_eq!(e.path, "lib.toml:2");
        // Unknown top-level key.
        let e = Library::parse("models = 1\n", "lib.toml").unwrap_err();
        assert!(e.msg.contains("[[model]]"), "{}", e.msg);
        // Empty file: empty library.
        assert!(Library::parse("", "lib.toml").unwrap().entries().is_empty());
    }

    #[test]
    fn templates_list_their_parameters() {
        let t = Library::templates();
        let names: Vec<_> = t.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "sequential",
                "cpu-bound",
                "fork-join",
                "phased",
                "pipeline",
                "workqueue",
                "server",
                "closed-server",
                "blocked-lu",
                "periodic",
                "frame-encoder",
                "parallel-make"
            ]
        );
        let phased = &t[3];
        assert!(phased.params.iter().any(|p| p.0 == "wait" && p.1 == "block"));
        // The default spin limit is modern libgomp's ≈ 2 ms.
        assert!(phased.params.iter().any(|p| p.0 == "spin_limit_us" && p.1 == "2000"));
        assert!(t.iter().all(|t| !t.doc.is_empty() && t.params.iter().all(|p| !p.2.is_empty())));
    }
}
