//! `ampsched validate`: run an rt-app workload for real and in the
//! simulator on the same topology, and compare (docs/validation.md).
//!
//! Real side: Debian's `rt-app FILE` (or a built-in `ampsched-workload`
//! program, [`Builtin`]), first under default Linux, then under the agent
//! (`ampsched run --placer P -- rt-app FILE`) for each placer, interleaved
//! (default, P1, P2, default, P1, … for `reps` rounds), with the RT hog
//! (`ampsched-hog`) started by validate when `--slow` is given.
//!
//! Each run starts in a session of its own (`setsid`), whose autogroup gets
//! nice −20 (`/proc/<pid>/autogroup`, kernel/sched/autogroup.c
//! `proc_sched_autogroup_set_nice`). With autogroups on (the default of
//! desktop and server kernels, `kernel.sched_autogroup_enabled = 1`) every
//! session is one group entity per CPU, so a `nice -n 19` build in another
//! session still takes a full group's share: on the busy development
//! machine (load 14 on 2 CPUs) a 0.3 s loop took 1.0 s at autogroup nice 0
//! and 0.30 s at −20. Inside the group the workload's threads meet each
//! other and the agent exactly as on a quiet host; the group ends with the
//! run (nothing is left changed). `Row::autogroup` records what was set.
//!
//! The workload's threads are measured from the kernel's sched tracepoints
//! (`schedtrace`: run time per CPU charged to the CPU's class, migrations,
//! wake-up latencies, first run and exit). Without tracefs (not root) they
//! fall back to a 2 ms sampler of `/proc/<pid>/task/*` (`schedstat` run
//! time charged to the class of the CPU in `stat` field 39, a CPU change
//! counted as a migration, a lower bound; no wake-up latencies).
//! `Row::measured` says which. The sampler also names the threads. A
//! thread's completion is its exit minus the first run of any workload
//! thread (rt-app's own calibration and the main thread are left out).
//! Instances of one rt-app task share its name; they are numbered `name-k`
//! in thread-id order, as the simulator names them.
//!
//! Simulated side: the same file as a domain's rt-app workload (a built-in
//! program as the equivalent per-thread programs) on the same topology plus
//! the hog as an RT load, dispatcher `linux`, placer `none` or P with the
//! parameters the agent gives P on a real machine (`Options::sim_params`:
//! e.g. aash's `time_credits = true`), seeds 1..=reps. Divergence = (sim − real) / real of the mean
//! completion. A placer's effect is its mean completion minus default's;
//! the signs agree, or the real effect is within the real run-to-run spread
//! (max − min over default's repetitions) and is not counted.
//!
//! Bad input (a key the simulator cannot run, a missing file) is an error
//! before anything starts. A busy machine (1-minute load average above the
//! CPU count, or an RT thread of another process) is refused unless
//! `force`. Stopping (`stop` set by the caller's SIGINT/SIGTERM handler)
//! terminates the hog and the workload (the agent restores affinities on
//! SIGTERM) and returns the rows so far, marked partial.

mod builtin;
mod schedtrace;

use ampsched_model::spec::{Params, PolicySpec};
use ampsched_model::{rtapp, Topology};
use ampsched_sim::latency::LatencyHist;
use ampsched_sim::runner::{run_one, Job};
use ampsched_sim::{Library, Scenario};
pub use builtin::{Builtin, BUILTINS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The emulated slow CPU: an RT hog spinning `spin_us` every `period_us` on `cpu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slow {
    /// CPU (Linux id = topology id).
    pub cpu: u32,
    /// Spin per period, µs.
    pub spin_us: u64,
    /// Period, µs.
    pub period_us: u64,
}

impl Slow {
    /// Parse `CPU:SPIN_US/PERIOD_US`, e.g. `1:5000/10000`.
    pub fn parse(s: &str) -> Result<Slow, String> {
        let bad = || format!("--slow: expected CPU:SPIN_US/PERIOD_US (e.g. 1:5000/10000), got `{s}`");
        let (cpu, rest) = s.split_once(':').ok_or_else(bad)?;
        let (spin, period) = rest.split_once('/').ok_or_else(bad)?;
        let slow = Slow {
            cpu: cpu.trim().parse().map_err(|_| bad())?,
            spin_us: spin.trim().parse().map_err(|_| bad())?,
            period_us: period.trim().parse().map_err(|_| bad())?,
        };
        if slow.spin_us == 0 || slow.spin_us >= slow.period_us {
            return Err(format!("--slow: SPIN_US must be in [1, PERIOD_US − 1], got `{s}`"));
        }
        Ok(slow)
    }
}

/// A workload to validate.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// An rt-app JSON file (run with Debian's `rt-app`).
    RtApp(PathBuf),
    /// A built-in `ampsched-workload` program (`builtin:NAME[:key=value,…]`).
    Builtin(Builtin),
}

impl Workload {
    /// A WORKLOAD argument: `builtin:…` or an rt-app file.
    pub fn parse(s: &str) -> Result<Workload, String> {
        if s.starts_with("builtin:") {
            Builtin::parse(s).map(Workload::Builtin)
        } else {
            Ok(Workload::RtApp(PathBuf::from(s)))
        }
    }

    /// The rows' `workload` field: the file's name, or the built-in's canonical label.
    pub fn label(&self) -> String {
        match self {
            Workload::RtApp(f) => f.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
            Workload::Builtin(b) => b.label(),
        }
    }
}

/// What to validate.
#[derive(Clone, Debug)]
pub struct Options {
    /// rt-app files and built-in programs.
    pub workloads: Vec<Workload>,
    /// Placers run under the agent (besides default Linux).
    pub placers: Vec<String>,
    /// Repetitions per configuration (and simulated seeds).
    pub reps: u32,
    /// The hog, if any.
    pub slow: Option<Slow>,
    /// Run on a busy machine.
    pub force: bool,
    /// The `ampsched` binary (for `ampsched run`).
    pub ampsched: PathBuf,
    /// The `ampsched-hog` binary.
    pub hog: PathBuf,
    /// The `ampsched-workload` binary (built-in workloads).
    pub workload_bin: PathBuf,
    /// Skip the real runs (simulate only).
    pub sim_only: bool,
    /// Per placer, the parameters it runs with in the simulator: the ones the
    /// agent gives it on a real machine (its period and declared real-machine
    /// values, `ampsched_agent::decide::agent_params`), so both bodies run the
    /// same placer. A placer not listed runs with its defaults.
    pub sim_params: BTreeMap<String, Params>,
    /// Simulate each placer in the agent's body (a scenario's `[agent]`: the contention
    /// gate, the reaction to an idle fast CPU, the back-off), as `ampsched run` runs it;
    /// false: its decisions put in force as decided every period.
    pub agent_body: bool,
    /// The agent body's reaction to an idle fast CPU, µs (`[agent] reaction_us`; `None`: the
    /// agent's measured median, `ampsched_sim::engine::AGENT_REACTION_US`).
    pub reaction_us: Option<f64>,
}

/// One thread of one run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ThreadRow {
    /// rt-app's thread name.
    pub name: String,
    /// CPU time per CPU class, s.
    pub cpu_s_by_class: BTreeMap<String, f64>,
    /// Migrations (real: observed CPU changes).
    pub migrations: u64,
    /// Completion, s from the workload's start.
    pub completion_s: f64,
    /// Time runnable but not running, s (not measured by the sampler: 0).
    pub wait_s: f64,
    /// Wake-ups seen (0 when not measured: the sampler cannot).
    pub wakeups: u64,
    /// Wake-up latency median, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_p50_us: Option<f64>,
    /// Wake-up latency 99th percentile, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_p99_us: Option<f64>,
    /// The latencies themselves (merged for the per-configuration figures).
    #[serde(skip)]
    pub wake: LatencyHist,
}

fn us(ns: Option<u64>) -> Option<f64> {
    ns.map(|x| x as f64 / 1e3)
}

impl ThreadRow {
    fn with_wake(mut self, wake: LatencyHist) -> ThreadRow {
        self.wakeups = wake.count();
        self.wake_p50_us = us(wake.quantile(0.5));
        self.wake_p99_us = us(wake.quantile(0.99));
        self.wake = wake;
        self
    }
}

/// One run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// Workload file name.
    pub workload: String,
    /// "default" or the placer's name.
    pub config: String,
    /// "real" or "sim".
    pub source: String,
    /// Repetition (real) or seed index (sim), from 0.
    pub rep: u32,
    /// Completion: the last thread's, s.
    pub completion_s: f64,
    /// Per thread.
    pub threads: Vec<ThreadRow>,
    /// 1-minute load average before the run (real only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_avg: Option<f64>,
    /// Wake-up latency median over the run's threads, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_p50_us: Option<f64>,
    /// Wake-up latency 99th percentile over the run's threads, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_p99_us: Option<f64>,
    /// Real only: how threads were measured, "trace" or "sampled".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<String>,
    /// Real only: the run's autogroup as read back, e.g. "/autogroup-7 nice -20".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autogroup: Option<String>,
}

impl Row {
    fn new(workload: &str, config: &str, source: &str, rep: u32, threads: Vec<ThreadRow>) -> Row {
        let completion_s = threads.iter().map(|t| t.completion_s).fold(0.0, f64::max);
        let mut all = LatencyHist::new();
        for t in &threads {
            all.merge(&t.wake);
        }
        Row {
            workload: workload.to_string(),
            config: config.into(),
            source: source.into(),
            rep,
            completion_s,
            threads,
            load_avg: None,
            wake_p50_us: us(all.quantile(0.5)),
            wake_p99_us: us(all.quantile(0.99)),
            measured: None,
            autogroup: None,
        }
    }
}

/// A validation's outcome.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Outcome {
    /// Every run.
    pub rows: Vec<Row>,
    /// Stopped before the end.
    pub partial: bool,
    /// rt-app's ns per loop, measured once and given to every real run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration_ns: Option<u64>,
    /// The simulated CPUs' speed: the measured rate of rt-app loops relative
    /// to the calibration, the median of `speed_probes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    /// Each speed probe's CPU time for its 300 ms `run`, s, in the order taken (one
    /// before the real runs, two after them; see `median_speed`). Absent in files of before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub speed_probes: Vec<f64>,
    /// CPU time of one `ampsched-workload` work unit, ns (built-ins; `probe_unit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit_ns: Option<f64>,
    /// The parameters each placer ran with in the simulator (`Options::sim_params`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub placer_params: BTreeMap<String, Params>,
    /// How the simulator ran the placers: its `[agent]` table, or `direct` (decisions put
    /// in force as decided; `Options::agent_body`). Absent in files of before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim_body: Option<String>,
}

/// An error before anything started (exit 2) or while running (exit 1).
#[derive(Clone, Debug)]
pub struct ValidateError {
    /// Bad input (nothing was started).
    pub input: bool,
    /// The message.
    pub msg: String,
}

fn input_err(msg: String) -> ValidateError {
    ValidateError { input: true, msg }
}

fn run_err(msg: String) -> ValidateError {
    ValidateError { input: false, msg }
}

/// The files of a suite directory: its `*.json`, sorted.
pub fn suite_files(dir: &Path) -> Result<Vec<PathBuf>, ValidateError> {
    let rd = std::fs::read_dir(dir).map_err(|e| input_err(format!("{}: {e}", dir.display())))?;
    let mut v: Vec<PathBuf> =
        rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    v.sort();
    if v.is_empty() {
        return Err(input_err(format!("{}: no *.json rt-app files", dir.display())));
    }
    Ok(v)
}

/// The simulated machine: the detected topology plus the hog as an RT load;
/// with a hog, the hog's CPU is the class `slow` and the others `fast`
/// (equal speeds), as the agent is told with `--fast`.
///
/// `speed` scales every class: the real machine's rate of rt-app loops
/// relative to the calibration (`probe_speed`; 1.0 when not measured).
/// `phase_us` is where in its period the hog is when the workload starts
/// ([`hog_phase_us`]).
pub fn sim_machine(topo: &Topology, slow: Option<Slow>, speed: f64, phase_us: u64) -> String {
    let mut s = String::from("[machine]\n");
    let cls: Vec<(String, f64)> = match slow {
        Some(_) => vec![("fast".into(), speed), ("slow".into(), speed)],
        None => topo.classes.iter().map(|c| (c.name.clone(), c.speed * speed)).collect(),
    };
    let _ = writeln!(
        s,
        "classes = [{}]",
        cls.iter().map(|(n, v)| format!("{{ name = \"{n}\", speed = {v} }}")).collect::<Vec<_>>().join(", ")
    );
    let cpus: Vec<String> = topo
        .cpus
        .iter()
        .map(|c| {
            let class = match slow {
                Some(sl) => if c.id.0 == sl.cpu { "slow" } else { "fast" }.to_string(),
                None => topo.classes[c.class].name.clone(),
            };
            format!("{{ class = \"{class}\", mem_domain = {}, numa = {} }}", c.mem_domain, c.numa)
        })
        .collect();
    let _ = writeln!(s, "cpus = [{}]", cpus.join(", "));
    if let Some(sl) = slow {
        let _ = writeln!(
            s,
            "[[machine.rt_load]]\ncpu = {}\nspin_us = {}\nperiod_us = {}\nphase_us = {phase_us}",
            sl.cpu, sl.spin_us, sl.period_us
        );
    }
    s
}

/// The hog's phase for simulated repetition `rep` of `reps`: validate starts
/// the hog once and each real run at an arbitrary time, so a real run meets
/// the hog at a phase uniform over its period; the simulated repetitions
/// spread over the period alike (rep k at k·period/reps, in whole ms so the
/// linux model's accounting step, the gcd of the tick and the RT load's
/// times, stays 1 ms), instead of every seed starting with the hog's
/// window. Deterministic: the same repetition always gets the same phase.
pub fn hog_phase_us(slow: &Slow, rep: u32, reps: u32) -> u64 {
    let raw = slow.period_us * rep as u64 / reps.max(1) as u64;
    (raw / 1000 * 1000).min(slow.period_us - 1)
}

fn class_of(topo: &Topology, slow: Option<Slow>, cpu: u32) -> String {
    match slow {
        Some(sl) => if cpu == sl.cpu { "slow" } else { "fast" }.into(),
        None => topo.cpus.get(cpu as usize).map(|c| topo.classes[c.class].name.clone()).unwrap_or_else(|| "?".into()),
    }
}

/// What the simulator runs: the domain's workload as a TOML key, e.g.
/// `workload = { rtapp = "f.json" }` or `tasks = [{ program = [...] }, …]`.
struct SimInput {
    label: String,
    origin: String,
    domain_key: String,
    nthreads: usize,
    names: Vec<String>,
}

impl SimInput {
    fn rtapp(label: String, file: &Path, names: &[String]) -> SimInput {
        SimInput {
            label,
            origin: file.display().to_string(),
            domain_key: format!("workload = {{ rtapp = {:?} }}", file.display().to_string()),
            nthreads: names.len(),
            names: names.to_vec(),
        }
    }

    fn builtin(b: &Builtin, phase_ns: u64, names: &[String]) -> SimInput {
        SimInput {
            label: b.label(),
            origin: b.label(),
            domain_key: format!("tasks = {}", b.sim_tasks(phase_ns)),
            nthreads: b.threads as usize,
            names: names.to_vec(),
        }
    }
}

/// How the placers are simulated, as `Outcome::sim_body` records it (with placers only).
fn sim_body(o: &Options) -> Option<String> {
    (!o.placers.is_empty()).then(|| match agent_key(o).trim_end() {
        "" => "direct".to_string(),
        k => k.replace('\n', "; "),
    })
}

/// The scenario's `[agent]` table for `o` (empty without the agent's body).
fn agent_key(o: &Options) -> String {
    match (o.agent_body, o.reaction_us) {
        (false, _) => String::new(),
        (true, None) => "[agent]\n".into(),
        (true, Some(us)) => format!("[agent]\nreaction_us = {us:?}\n"),
    }
}

fn simulate(
    input: &SimInput,
    topo: &Topology,
    o: &Options,
    config: &str,
    speed: f64,
) -> Result<Vec<Row>, ValidateError> {
    let scenario = |rep: u32| {
        let phase = o.slow.map(|sl| hog_phase_us(&sl, rep, o.reps)).unwrap_or(0);
        let text = format!(
            "name = \"validate\"\nseed = 1\n{}[dispatcher]\nname = \"linux\"\n[placer]\nname = \"none\"\n{}[[domain]]\nname = \"w\"\nvcpus = {}\n{}\n",
            sim_machine(topo, o.slow, speed, phase),
            agent_key(o),
            input.nthreads,
            input.domain_key
        );
        let mut sc = Scenario::parse(&text, &input.origin, "validate", &Library::builtin())
            .map_err(|e| input_err(e.to_string()))?;
        sc.wake_latency = true;
        Ok::<Scenario, ValidateError>(sc)
    };
    // The placer as the agent runs it (its real-machine parameters).
    let placer = (config != "default").then(|| PolicySpec {
        name: config.to_string(),
        params: o.sim_params.get(config).cloned().unwrap_or_default(),
    });
    let names = &input.names;
    let mut rows = Vec::new();
    for rep in 0..o.reps {
        let sc = scenario(rep)?;
        let r = run_one(&Job { scenario: &sc, seed: 1 + rep as u64, dispatcher: None, placer: placer.clone() })
            .map_err(|e| run_err(e.to_string()))?;
        let threads: Vec<ThreadRow> = r
            .tasks
            .iter()
            .filter(|t| !t.idle)
            .map(|t| {
                ThreadRow {
                    // the simulator carries rt-app's thread names (`name`, `name-k`) into its results
                    name: t
                        .name
                        .clone()
                        .or_else(|| names.get(t.vcpu as usize).cloned())
                        .unwrap_or_else(|| format!("t{}", t.vcpu)),
                    cpu_s_by_class: t
                        .cpu_ns
                        .names
                        .iter()
                        .zip(&t.cpu_ns.values)
                        .map(|(n, v)| (n.clone(), *v as f64 / 1e9))
                        .collect(),
                    migrations: t.migrations_local + t.migrations_remote,
                    completion_s: t.completion_ns.unwrap_or(r.end_ns) as f64 / 1e9,
                    wait_s: t.wait_ns as f64 / 1e9,
                    ..ThreadRow::default()
                }
                .with_wake(t.wake_latency.clone())
            })
            .collect();
        rows.push(Row::new(&input.label, config, "sim", rep, threads));
    }
    Ok(rows)
}

/// The 1-minute load average.
pub fn load_avg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// Real-time threads of user processes (SCHED_FIFO / RR / DEADLINE), as "pid comm".
pub fn rt_threads() -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return out };
    for e in rd.flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for t in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else { continue };
            let Some(rp) = stat.rfind(')') else { continue };
            let f: Vec<&str> = stat[rp + 2..].split_whitespace().collect();
            // After ")": state is field 3, flags 9, policy 41 (1-based in proc(5)).
            let flags: u64 = f.get(6).and_then(|x| x.parse().ok()).unwrap_or(0);
            let policy: u32 = f.get(38).and_then(|x| x.parse().ok()).unwrap_or(0);
            if flags & 0x0020_0000 == 0 && matches!(policy, 1 | 2 | 6) {
                out.push(format!("{pid} {}", &stat[stat.find('(').map(|i| i + 1).unwrap_or(0)..rp]));
            }
        }
    }
    out
}

/// Where `rt-app` is, or an error saying which package installs it.
pub fn find_rtapp() -> Result<PathBuf, ValidateError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join("rt-app")).find(|p| p.is_file()).ok_or_else(|| {
        input_err("rt-app not found in PATH: install Debian's package `rt-app` (apt-get install rt-app)".into())
    })
}

struct ThreadTrack {
    name: String,
    run_ns: u64,
    cpu: Option<u32>,
    by_cpu: BTreeMap<u32, u64>,
    migrations: u64,
    first: Instant,
    last: Instant,
}

fn read_thread(dir: &Path) -> Option<(String, u64, u32)> {
    let comm = std::fs::read_to_string(dir.join("comm")).ok()?.trim().to_string();
    let run: u64 = std::fs::read_to_string(dir.join("schedstat")).ok()?.split_whitespace().next()?.parse().ok()?;
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    let rp = stat.rfind(')')?;
    let cpu: u32 = stat[rp + 2..].split_whitespace().nth(36)?.parse().ok()?;
    Some((comm, run, cpu))
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect()
}

fn terminate(child: &mut Child) {
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// rt-app's "ns per loop" on CPU 0, measured once by rt-app itself (a
/// one-task file with `calibration = "CPU0"`, run isolated as the workloads
/// are) and given to every real run as a numeric `global.calibration`: each
/// run then skips rt-app's own calibration (up to a minute on a busy
/// machine) and all runs size their `run` events alike.
fn calibrate(rtapp: &Path, dir: &Path) -> Result<u64, ValidateError> {
    let f = dir.join("calibrate.json");
    let text = r#"{"global": {"calibration": "CPU0", "log_size": "disable"}, "tasks": {"cal": {"loop": 1, "phases": {"p": {"run": 1000}}}}}"#;
    std::fs::write(&f, text).map_err(|e| run_err(format!("{}: {e}", f.display())))?;
    let out = Command::new("setsid")
        .args(["sh", "-c", ISOLATE, "sh"])
        .arg(rtapp)
        .arg(&f)
        .current_dir(dir)
        .output()
        .map_err(|e| run_err(format!("cannot run rt-app: {e}")))?;
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    parse_pload(&all).ok_or_else(|| run_err(format!("rt-app printed no \"pLoad = …ns\" line: {}", all.trim())))
}

/// "pLoad = 15ns" in rt-app's output.
fn parse_pload(out: &str) -> Option<u64> {
    let i = out.find("pLoad = ")? + "pLoad = ".len();
    out[i..].chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().ok()
}

/// The rt-app file with `global.calibration` = `ns` (a numeric calibration
/// already there is kept): the string value is replaced, else the key is
/// added to `global`, else a `global` is added.
fn with_calibration(text: &str, ns: u64) -> String {
    let skip_ws = |i: usize| i + text[i..].len() - text[i..].trim_start().len();
    if let Some(k) = text.find("\"calibration\"") {
        let mut i = skip_ws(k + "\"calibration\"".len());
        if text[i..].starts_with(':') {
            i = skip_ws(i + 1);
            if text[i..].starts_with('"') {
                if let Some(end) = text[i + 1..].find('"') {
                    return format!("{}{ns}{}", &text[..i], &text[i + end + 2..]);
                }
            }
        }
        return text.to_string();
    }
    if let Some(g) = text.find("\"global\"") {
        if let Some(b) = text[g..].find('{') {
            let at = g + b + 1;
            let sep = if text[skip_ws(at)..].starts_with('}') { "" } else { ", " };
            return format!("{}\"calibration\": {ns}{sep}{}", &text[..at], &text[at..]);
        }
    }
    match text.find('{') {
        Some(b) => format!("{}\"global\": {{\"calibration\": {ns}}}, {}", &text[..b + 1], &text[b + 1..]),
        None => text.to_string(),
    }
}

/// validate's scratch directory (calibrated copies of the files, rt-app's
/// logs); removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, ValidateError> {
        let d = std::env::temp_dir().join(format!("ampsched-validate-{}", std::process::id()));
        std::fs::create_dir_all(&d).map_err(|e| run_err(format!("{}: {e}", d.display())))?;
        Ok(TempDir(d))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Nominal length of the speed probe's `run`, µs.
const PROBE_US: u64 = 300_000;

/// The rate at which rt-app's loops really run, relative to its calibration:
/// one thread's `run` of `PROBE_US` (the calibrated copy's loop count),
/// measured in CPU time (sched_switch accounting, so waiting is left out),
/// before the hog starts. rt-app's calibration (`calibrate_cpu_cycles` in
/// src/rt-app.c) keeps the minimum ns per loop of its short trials, in whole ns,
/// so a long `run` in a busy cache and on a shared host costs more CPU
/// than its nominal length; the simulated CPUs get speed nominal / CPU
/// time, so a `run N` takes the time it takes here. `None` when stopped.
fn probe_speed(
    rtapp: &Path,
    dir: &Path,
    pload: u64,
    topo: &Topology,
    o: &Options,
    stop: &AtomicBool,
) -> Result<Option<f64>, ValidateError> {
    let f = dir.join("probe.json");
    let text = format!(
        r#"{{"global": {{"calibration": {pload}, "log_size": "disable"}}, "tasks": {{"probe": {{"loop": 1, "phases": {{"p": {{"run": {PROBE_US}}}}}}}}}}}"#
    );
    std::fs::write(&f, text).map_err(|e| run_err(format!("{}: {e}", f.display())))?;
    let Some(run) = run_real(&RealCmd::rtapp(rtapp, &f), "default", &["probe".to_string()], topo, o, stop)? else {
        return Ok(None);
    };
    let cpu: f64 = run.threads.iter().flat_map(|t| t.cpu_s_by_class.values()).sum();
    if cpu <= 0.0 {
        return Err(run_err("the speed probe's thread was not seen running".into()));
    }
    Ok(Some(cpu))
}

/// The simulated speed from several probes' CPU times (s): the speed of
/// their median. One probe disturbed by something else on the machine (a
/// build's page-cache write-back, another tenant of the host) read 300 ms of
/// `run` as 371 ms of CPU where the probes of the same day read 311-333 ms,
/// and scaled every simulated run of that suite by 15 %; a median of three
/// probes taken minutes apart (before and after the real runs) outvotes one.
fn median_speed(cpu_s: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = cpu_s.iter().copied().filter(|c| *c > 0.0).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mid = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    Some(probe_ratio(mid))
}

/// Work units of the unit probe (`ampsched-workload spin --threads 1`).
const UNIT_PROBE_UNITS: u64 = 50_000;

/// The CPU time of one `ampsched-workload` work unit on this machine, ns:
/// one thread's `spin --units` measured in CPU time (sched_switch
/// accounting), before the hog starts. `None` when stopped.
fn probe_unit(dir: &Path, topo: &Topology, o: &Options, stop: &AtomicBool) -> Result<Option<f64>, ValidateError> {
    let comm = builtin::comm_of(&o.workload_bin.to_string_lossy());
    let args = ["spin", "--threads", "1", "--units", &UNIT_PROBE_UNITS.to_string()].map(String::from).to_vec();
    let names = vec![format!("{comm}-0")];
    let Some(run) = run_real(&RealCmd::workload(&o.workload_bin, args, dir), "default", &names, topo, o, stop)? else {
        return Ok(None);
    };
    let cpu: f64 = run.threads.iter().flat_map(|t| t.cpu_s_by_class.values()).sum();
    if cpu <= 0.0 {
        return Err(run_err("the unit probe's thread was not seen running".into()));
    }
    Ok(Some(cpu * 1e9 / UNIT_PROBE_UNITS as f64))
}

/// Speed from the probe's CPU time (s), bounded to [0.25, 4].
fn probe_ratio(cpu_s: f64) -> f64 {
    (PROBE_US as f64 / 1e6 / cpu_s).clamp(0.25, 4.0)
}

/// What one real run measured.
struct RealRun {
    threads: Vec<ThreadRow>,
    measured: &'static str,
    autogroup: Option<String>,
}

/// The shell step that gives a run's session autogroup nice −20 before it
/// execs the command (see the module essay); a refusal (not root) is
/// ignored and shows in `Row::autogroup`.
const ISOLATE: &str = "echo -20 > /proc/self/autogroup 2>/dev/null; exec \"$@\"";

/// The workload's command line for a real run.
struct RealCmd {
    /// Program and arguments.
    argv: Vec<std::ffi::OsString>,
    /// Working directory (rt-app writes per-thread logs, `rt-app-<task>-<k>.log`,
    /// into its working directory even with `log_size` disabled: keep them out
    /// of the caller's).
    dir: PathBuf,
    /// rt-app: its main thread sleeps on to `global.duration` once the
    /// workload threads are gone, and is ended then.
    rtapp: bool,
}

impl RealCmd {
    fn rtapp(rtapp: &Path, file: &Path) -> RealCmd {
        RealCmd {
            argv: vec![rtapp.into(), file.into()],
            dir: file.parent().unwrap_or(Path::new("/tmp")).to_path_buf(),
            rtapp: true,
        }
    }

    fn workload(bin: &Path, args: Vec<String>, dir: &Path) -> RealCmd {
        let mut argv: Vec<std::ffi::OsString> = vec![bin.into()];
        argv.extend(args.into_iter().map(Into::into));
        RealCmd { argv, dir: dir.to_path_buf(), rtapp: false }
    }
}

/// One real run; `None` when stopped.
fn run_real(
    run: &RealCmd,
    config: &str,
    names: &[String],
    topo: &Topology,
    o: &Options,
    stop: &AtomicBool,
) -> Result<Option<RealRun>, ValidateError> {
    let mut cmd = Command::new("setsid");
    cmd.args(["sh", "-c", ISOLATE, "sh"]);
    if config != "default" {
        cmd.arg(&o.ampsched).arg("run").arg("--placer").arg(config);
        if let Some(sl) = o.slow {
            let fast: Vec<String> =
                topo.cpus.iter().map(|c| c.id.0).filter(|c| *c != sl.cpu).map(|c| c.to_string()).collect();
            cmd.arg("--fast").arg(fast.join(","));
        }
        cmd.arg("--");
    }
    cmd.args(&run.argv).current_dir(&run.dir).stdout(Stdio::null()).stderr(Stdio::null());
    let tracer = schedtrace::Tracer::start().ok();
    let mut child = cmd.spawn().map_err(|e| run_err(format!("cannot start {config} run: {e}")))?;
    let root = child.id();
    let mut tracks: BTreeMap<u32, ThreadTrack> = BTreeMap::new();
    let mut rt_pid: Option<u32> = if config == "default" { Some(root) } else { None };
    let mut autogroup = None;
    let mut ended = false;
    loop {
        if stop.load(Ordering::SeqCst) {
            terminate(&mut child);
            return Ok(None);
        }
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if rt_pid.is_none() {
            rt_pid = children_of(root).into_iter().next();
        }
        if let Some(p) = rt_pid {
            // Read while it lives (the first reads may precede its `setsid`).
            if let Ok(a) = std::fs::read_to_string(format!("/proc/{p}/autogroup")) {
                autogroup = Some(a.trim().to_string());
            }
            let now = Instant::now();
            let mut alive = 0;
            if let Ok(rd) = std::fs::read_dir(format!("/proc/{p}/task")) {
                for e in rd.flatten() {
                    let Ok(tid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
                    if tid == p {
                        continue;
                    }
                    let Some((comm, run, cpu)) = read_thread(&e.path()) else { continue };
                    if !is_workload_thread(names, &comm) {
                        continue;
                    }
                    alive += 1;
                    let tr = tracks.entry(tid).or_insert(ThreadTrack {
                        name: comm,
                        run_ns: run,
                        cpu: None,
                        by_cpu: BTreeMap::new(),
                        migrations: 0,
                        first: now,
                        last: now,
                    });
                    let d = run.saturating_sub(tr.run_ns);
                    tr.run_ns = run;
                    *tr.by_cpu.entry(cpu).or_default() += d;
                    if tr.cpu.is_some_and(|c| c != cpu) {
                        tr.migrations += 1;
                    }
                    tr.cpu = Some(cpu);
                    tr.last = now;
                }
            }
            // Every workload thread has come and gone: rt-app's main thread
            // would sleep on to `global.duration`; end it (rt-app exits 0 on
            // SIGTERM).
            if run.rtapp && !ended && alive == 0 && tracks.len() >= names.len() {
                let _ = Command::new("kill").arg("-TERM").arg(p.to_string()).status();
                ended = true;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let status = child.wait().map_err(|e| run_err(e.to_string()))?;
    if !status.success() && !ended {
        return Err(run_err(format!("{config} run of {:?} exited with {status}", run.argv)));
    }
    let traced = tracer.and_then(|t| t.finish().ok()).map(|text| schedtrace::parse(&text)).filter(|p| !p.lost);
    let (threads, measured) = match traced {
        Some(p) => (from_trace(&p, &tracks, rt_pid, names, topo, o.slow), "trace"),
        None => (from_samples(tracks, names, topo, o.slow), "sampled"),
    };
    Ok(Some(RealRun { threads, measured, autogroup }))
}

/// A thread's comm among `names`: a name is the comm itself, the comm
/// numbered (`comm-k`, instances), or a longer name the kernel cut to 15
/// bytes. (Not a mere prefix: the agent's own threads, `ampsched`, must not
/// pass for `ampsched-worklo-0`.)
fn is_workload_thread(names: &[String], comm: &str) -> bool {
    names.iter().any(|n| {
        n == comm
            || n.strip_prefix(comm)
                .and_then(|r| r.strip_prefix('-'))
                .is_some_and(|k| k.bytes().all(|b| b.is_ascii_digit()))
            || (comm.len() >= 15 && n.starts_with(comm))
    })
}

/// rt-app names every instance of a task object alike (comm = the task
/// name); the simulator calls them `name-k`: number them in tid order.
fn number_instances<'a>(names: &[String], comms: impl Iterator<Item = &'a mut String>) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for name in comms {
        let k = seen.entry(name.clone()).or_default();
        let numbered = format!("{name}-{k}");
        *k += 1;
        if !names.contains(name) && names.contains(&numbered) {
            *name = numbered;
        }
    }
}

fn by_class(topo: &Topology, slow: Option<Slow>, by_cpu: &BTreeMap<u32, u64>) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for (c, ns) in by_cpu {
        *out.entry(class_of(topo, slow, *c)).or_default() += *ns as f64 / 1e9;
    }
    out
}

/// Threads from the trace: the sampler's threads and any other thread of
/// a workload name (one too short-lived for the sampler), not rt-app's main.
fn from_trace(
    p: &schedtrace::Parsed,
    tracks: &BTreeMap<u32, ThreadTrack>,
    rt_pid: Option<u32>,
    names: &[String],
    topo: &Topology,
    slow: Option<Slow>,
) -> Vec<ThreadRow> {
    let mine: Vec<(u32, &schedtrace::ThreadTrace)> = p
        .threads
        .iter()
        .filter(|(tid, t)| {
            Some(**tid) != rt_pid
                && t.first_ns.is_some()
                && (tracks.contains_key(tid) || is_workload_thread(names, &t.comm))
        })
        .map(|(tid, t)| (*tid, t))
        .collect();
    let start = mine.iter().filter_map(|(_, t)| t.first_ns).min().unwrap_or(0);
    let mut comms: Vec<String> =
        mine.iter().map(|(tid, t)| tracks.get(tid).map(|k| k.name.clone()).unwrap_or_else(|| t.comm.clone())).collect();
    number_instances(names, comms.iter_mut());
    mine.iter()
        .zip(comms)
        .map(|((_, t), name)| {
            ThreadRow {
                name,
                cpu_s_by_class: by_class(topo, slow, &t.run_by_cpu),
                migrations: t.migrations,
                completion_s: t.last_ns.saturating_sub(start) as f64 / 1e9,
                wait_s: t.wait_ns as f64 / 1e9,
                ..ThreadRow::default()
            }
            .with_wake(t.wake.clone())
        })
        .collect()
}

fn from_samples(
    mut tracks: BTreeMap<u32, ThreadTrack>,
    names: &[String],
    topo: &Topology,
    slow: Option<Slow>,
) -> Vec<ThreadRow> {
    let start = tracks.values().map(|t| t.first).min();
    number_instances(names, tracks.values_mut().map(|t| &mut t.name));
    tracks
        .into_values()
        .map(|t| ThreadRow {
            cpu_s_by_class: by_class(topo, slow, &t.by_cpu),
            migrations: t.migrations,
            completion_s: start.map(|s| (t.last - s).as_secs_f64()).unwrap_or(0.0),
            name: t.name,
            ..ThreadRow::default()
        })
        .collect()
}

/// Run every workload both ways. `stop` is polled (set it from a signal handler).
pub fn validate(o: &Options, topo: &Topology, stop: &AtomicBool) -> Result<Outcome, ValidateError> {
    // Check everything first: nothing starts on bad input.
    let comm = builtin::comm_of(&o.workload_bin.to_string_lossy());
    let mut work = Vec::new();
    for w in &o.workloads {
        work.push(match w {
            Workload::RtApp(f) => {
                let text = std::fs::read_to_string(f).map_err(|e| input_err(format!("{}: {e}", f.display())))?;
                let app =
                    rtapp::compile(&text, &f.display().to_string(), topo).map_err(|e| input_err(e.to_string()))?;
                let names: Vec<String> = app.threads.iter().map(|t| t.name.clone()).collect();
                let abs = std::fs::canonicalize(f).map_err(|e| input_err(format!("{}: {e}", f.display())))?;
                (w.label(), Some(abs), names)
            }
            Workload::Builtin(b) => (w.label(), None, b.names(&comm)),
        });
    }
    if let Some(sl) = o.slow {
        if sl.cpu as usize >= topo.ncpus() {
            return Err(input_err(format!("--slow: CPU {} does not exist (0-{})", sl.cpu, topo.ncpus() - 1)));
        }
    }
    let any_rtapp = work.iter().any(|w| w.1.is_some());
    let any_builtin = work.iter().any(|w| w.1.is_none());
    let rtapp_bin = if o.sim_only || !any_rtapp { PathBuf::new() } else { find_rtapp()? };
    if !o.sim_only && any_builtin && !o.workload_bin.is_file() {
        return Err(input_err(format!(
            "{}: not found (built-in workloads run it; build it with `cargo build -p ampsched-agent`)",
            o.workload_bin.display()
        )));
    }
    if !o.sim_only && !o.force {
        let la = load_avg().unwrap_or(0.0);
        if la > topo.ncpus() as f64 {
            return Err(input_err(format!(
                "the machine is busy: load average {la:.2} > {} CPUs (use --force to run anyway)",
                topo.ncpus()
            )));
        }
        let rt = rt_threads();
        if !rt.is_empty() {
            return Err(input_err(format!(
                "real-time threads are running ({}); another hog? (use --force to run anyway)",
                rt.join(", ")
            )));
        }
    }
    let mut configs = vec!["default".to_string()];
    configs.extend(o.placers.iter().cloned());
    let placer_params: BTreeMap<String, Params> =
        o.sim_params.iter().filter(|(k, _)| o.placers.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut out = Outcome {
        rows: Vec::new(),
        partial: false,
        calibration_ns: None,
        speed: None,
        speed_probes: Vec::new(),
        unit_ns: None,
        placer_params,
        sim_body: sim_body(o),
    };
    let builtin_of = |i: usize| match &o.workloads[i] {
        Workload::Builtin(b) => Some(b),
        Workload::RtApp(_) => None,
    };
    if o.sim_only {
        // Nominal work: a built-in's phase is phase_ms, an rt-app `run` its nominal length.
        for (i, (label, abs, names)) in work.iter().enumerate() {
            let input = match (abs, builtin_of(i)) {
                (Some(f), _) => SimInput::rtapp(label.clone(), f, names),
                (None, Some(b)) => SimInput::builtin(b, (b.phase_ms * 1e6).round() as u64, names),
                (None, None) => unreachable!("a workload is a file or a built-in"),
            };
            for c in &configs {
                out.rows.extend(simulate(&input, topo, o, c, 1.0)?);
            }
        }
        return Ok(out);
    }
    // Real runs of rt-app files use calibrated copies; the simulator runs the
    // same copies on a machine of the measured loop rate. Built-ins are sized
    // in work units of the measured cost.
    let tmp = TempDir::new()?;
    if any_rtapp {
        let pload = calibrate(&rtapp_bin, &tmp.0)?;
        out.calibration_ns = Some(pload);
        match probe_speed(&rtapp_bin, &tmp.0, pload, topo, o, stop)? {
            Some(cpu) => {
                out.speed_probes.push(cpu);
                out.speed = median_speed(&out.speed_probes);
            }
            None => {
                out.partial = true;
                return Ok(out);
            }
        }
    }
    if any_builtin {
        match probe_unit(&tmp.0, topo, o, stop)? {
            Some(u) => out.unit_ns = Some(u),
            None => {
                out.partial = true;
                return Ok(out);
            }
        }
    }
    let mut runs = Vec::new();
    // What was simulated (the marker: an rt-app file, simulated at the probes' speed).
    let mut sims: Vec<(SimInput, bool)> = Vec::new();
    let first_speed = out.speed.unwrap_or(1.0);
    for (i, (label, abs, names)) in work.iter().enumerate() {
        let (cmd, input, speed) = match (abs, builtin_of(i)) {
            (Some(file), _) => {
                let text = std::fs::read_to_string(file).map_err(|e| input_err(format!("{}: {e}", file.display())))?;
                let to = tmp.0.join(file.file_name().unwrap_or_default());
                let pload = out.calibration_ns.unwrap_or(0);
                std::fs::write(&to, with_calibration(&text, pload))
                    .map_err(|e| run_err(format!("{}: {e}", to.display())))?;
                (RealCmd::rtapp(&rtapp_bin, &to), SimInput::rtapp(label.clone(), &to, names), Some(()))
            }
            (None, Some(b)) => {
                let unit = out.unit_ns.unwrap_or(1.0);
                let units = b.phase_units(unit);
                let phase_ns = (units as f64 * unit).round() as u64;
                (RealCmd::workload(&o.workload_bin, b.args(units), &tmp.0), SimInput::builtin(b, phase_ns, names), None)
            }
            (None, None) => unreachable!("a workload is a file or a built-in"),
        };
        // Simulated now at the first probe's speed (an input the simulator cannot run
        // fails here, before any real run), again below if the later probes move it.
        for c in &configs {
            out.rows.extend(simulate(&input, topo, o, c, speed.map_or(1.0, |_| first_speed))?);
        }
        sims.push((input, speed.is_some()));
        runs.push((label.clone(), cmd, names.clone()));
    }
    let mut hog: Option<Child> = None;
    if let Some(sl) = o.slow {
        let h = Command::new(&o.hog)
            .args(["--cpu", &sl.cpu.to_string()])
            .args(["--spin-ms", &(sl.spin_us as f64 / 1e3).to_string()])
            .args(["--sleep-ms", &((sl.period_us - sl.spin_us) as f64 / 1e3).to_string()])
            .args(["--secs", "86400"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| run_err(format!("cannot start {}: {e}", o.hog.display())))?;
        hog = Some(h);
        // Let the kernel's RT PELT signal settle (≈ 5 half-lives).
        std::thread::sleep(Duration::from_millis(200));
    }
    'outer: for (label, cmd, names) in &runs {
        for rep in 0..o.reps {
            for c in &configs {
                let la = load_avg();
                match run_real(cmd, c, names, topo, o, stop) {
                    Ok(Some(run)) => {
                        let mut row = Row::new(label, c, "real", rep, run.threads);
                        row.load_avg = la;
                        row.measured = Some(run.measured.into());
                        row.autogroup = run.autogroup;
                        out.rows.push(row);
                    }
                    Ok(None) => {
                        out.partial = true;
                        break 'outer;
                    }
                    Err(e) => {
                        if let Some(mut h) = hog.take() {
                            terminate(&mut h);
                        }
                        return Err(e);
                    }
                }
            }
        }
    }
    if let Some(mut h) = hog.take() {
        terminate(&mut h);
    }
    // Two more speed probes after the real runs, the hog stopped as for the first.
    if any_rtapp && !out.partial {
        let pload = out.calibration_ns.unwrap_or(0);
        for _ in 0..2 {
            match probe_speed(&rtapp_bin, &tmp.0, pload, topo, o, stop)? {
                Some(cpu) => out.speed_probes.push(cpu),
                None => {
                    out.partial = true;
                    break;
                }
            }
        }
        out.speed = median_speed(&out.speed_probes);
    }
    let speed = out.speed.unwrap_or(1.0);
    if speed != first_speed && sims.iter().any(|(_, at_speed)| *at_speed) {
        // Every simulated row again at the median speed, in the same order (the
        // simulated rows of each workload, then the real rows).
        let real: Vec<Row> = std::mem::take(&mut out.rows).into_iter().filter(|r| r.source == "real").collect();
        for (input, at_speed) in &sims {
            for c in &configs {
                out.rows.extend(simulate(input, topo, o, c, if *at_speed { speed } else { 1.0 })?);
            }
        }
        out.rows.extend(real);
    }
    Ok(out)
}

/// Simulate again against the real rows of a recorded validate (`--json`
/// of an earlier run on this machine): no real run; the recorded
/// calibration, speed and unit size the simulated work as they did then.
/// The report compares the current simulator with the recorded real runs
/// (their wake-up latencies are not in the JSON: shown as `-`).
pub fn resimulate(o: &Options, topo: &Topology, recorded: &Outcome) -> Result<Outcome, ValidateError> {
    let comm = builtin::comm_of(&o.workload_bin.to_string_lossy());
    let mut configs = vec!["default".to_string()];
    configs.extend(o.placers.iter().cloned());
    let placer_params: BTreeMap<String, Params> =
        o.sim_params.iter().filter(|(k, _)| o.placers.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut out = Outcome {
        rows: Vec::new(),
        partial: recorded.partial,
        calibration_ns: recorded.calibration_ns,
        speed: recorded.speed,
        speed_probes: recorded.speed_probes.clone(),
        unit_ns: recorded.unit_ns,
        placer_params,
        sim_body: sim_body(o),
    };
    let tmp = TempDir::new()?;
    for w in &o.workloads {
        let label = w.label();
        let real: Vec<Row> = recorded
            .rows
            .iter()
            .filter(|r| r.source == "real" && r.workload == label && configs.contains(&r.config))
            .cloned()
            .collect();
        if real.is_empty() {
            return Err(input_err(format!("--resim: no real rows of `{label}` in the recorded run")));
        }
        let (input, speed) = match w {
            Workload::RtApp(f) => {
                let text = std::fs::read_to_string(f).map_err(|e| input_err(format!("{}: {e}", f.display())))?;
                let app =
                    rtapp::compile(&text, &f.display().to_string(), topo).map_err(|e| input_err(e.to_string()))?;
                let names: Vec<String> = app.threads.iter().map(|t| t.name.clone()).collect();
                let pload = recorded.calibration_ns.ok_or_else(|| {
                    input_err("--resim: the recorded run has no calibration_ns (rt-app workloads need it)".into())
                })?;
                let to = tmp.0.join(f.file_name().unwrap_or_default());
                std::fs::write(&to, with_calibration(&text, pload))
                    .map_err(|e| run_err(format!("{}: {e}", to.display())))?;
                (SimInput::rtapp(label.clone(), &to, &names), recorded.speed.unwrap_or(1.0))
            }
            Workload::Builtin(b) => {
                let unit = recorded.unit_ns.ok_or_else(|| {
                    input_err("--resim: the recorded run has no unit_ns (built-in workloads need it)".into())
                })?;
                let phase_ns = (b.phase_units(unit) as f64 * unit).round() as u64;
                (SimInput::builtin(b, phase_ns, &b.names(&comm)), 1.0)
            }
        };
        for c in &configs {
            out.rows.extend(simulate(&input, topo, o, c, speed)?);
        }
        out.rows.extend(real);
    }
    Ok(out)
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn completions(rows: &[Row], w: &str, c: &str, src: &str) -> Vec<f64> {
    rows.iter().filter(|r| r.workload == w && r.config == c && r.source == src).map(|r| r.completion_s).collect()
}

/// Wake-up latency (p50, p99) in µs over every thread and repetition of a configuration.
pub fn wake_quantiles(rows: &[Row], w: &str, c: &str, src: &str) -> (Option<f64>, Option<f64>) {
    let mut all = LatencyHist::new();
    for r in rows.iter().filter(|r| r.workload == w && r.config == c && r.source == src) {
        for t in &r.threads {
            all.merge(&t.wake);
        }
    }
    (us(all.quantile(0.5)), us(all.quantile(0.99)))
}

/// Summary per workload and configuration: (workload, config, real mean, sim mean, divergence %).
pub fn summary(rows: &[Row]) -> Vec<(String, String, f64, f64, f64)> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in rows {
        let k = (r.workload.clone(), r.config.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .map(|(w, c)| {
            let real = mean(&completions(rows, &w, &c, "real"));
            let sim = mean(&completions(rows, &w, &c, "sim"));
            let div = 100.0 * (sim - real) / real;
            (w, c, real, sim, div)
        })
        .collect()
}

/// Placer effects: (workload, placer, real effect s, sim effect s, real spread s, agrees).
/// `agrees` is `None` when the real effect is within the real spread.
pub fn effects(rows: &[Row]) -> Vec<(String, String, f64, f64, f64, Option<bool>)> {
    let s = summary(rows);
    let mut out = Vec::new();
    for (w, c, real, sim, _) in &s {
        if c == "default" {
            continue;
        }
        let Some((_, _, r0, s0, _)) = s.iter().find(|x| &x.0 == w && x.1 == "default") else { continue };
        let d = completions(rows, w, "default", "real");
        let spread = d.iter().cloned().fold(f64::MIN, f64::max) - d.iter().cloned().fold(f64::MAX, f64::min);
        let (re, se) = (real - r0, sim - s0);
        if !re.is_finite() {
            continue;
        }
        let agrees = if re.abs() <= spread.max(0.0) { None } else { Some(re.signum() == se.signum()) };
        out.push((w.clone(), c.clone(), re, se, spread.max(0.0), agrees));
    }
    out
}

/// Median (the mean of the two middle values for an even count) and maximum.
fn median_worst(mut v: Vec<f64>) -> Option<(f64, f64)> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let med = match n {
        0 => return None,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    };
    Some((med, v[n - 1]))
}

/// The text report.
pub fn report(out: &Outcome) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<24} {:<10} {:>8} {:>8} {:>7}  {:>17}  {:>17}",
        "workload", "config", "real_s", "sim_s", "div_%", "wake_p50_us r/s", "wake_p99_us r/s"
    );
    let sum = summary(&out.rows);
    let f = |x: Option<f64>| x.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into());
    for (w, c, r, m, d) in &sum {
        let (r50, r99) = wake_quantiles(&out.rows, w, c, "real");
        let (s50, s99) = wake_quantiles(&out.rows, w, c, "sim");
        let p50 = format!("{}/{}", f(r50), f(s50));
        let p99 = format!("{}/{}", f(r99), f(s99));
        let _ = writeln!(s, "{w:<24} {c:<10} {r:>8.3} {m:>8.3} {d:>7.1}  {p50:>17}  {p99:>17}");
    }
    let divs: Vec<f64> = sum.iter().map(|x| x.4.abs()).filter(|x| x.is_finite()).collect();
    if let Some((med, worst)) = median_worst(divs) {
        let _ = writeln!(s, "|divergence|: median {med:.1} %, worst {worst:.1} % (targets ≤ 10 %, ≤ 25 %)");
    }
    for (w, c, re, se, sp, a) in effects(&out.rows) {
        let verdict = match a {
            None => "within real spread".to_string(),
            Some(true) => "same sign".to_string(),
            Some(false) => "OPPOSITE sign".to_string(),
        };
        let _ = writeln!(s, "effect {c} on {w}: real {re:+.3} s, sim {se:+.3} s (spread {sp:.3} s): {verdict}");
    }
    let _ =
        writeln!(s, "per thread (first repetition): name, source/config, cpu s by class, migrations, runnable wait s");
    for r in out.rows.iter().filter(|r| r.rep == 0) {
        for t in &r.threads {
            let cls: Vec<String> = t.cpu_s_by_class.iter().map(|(k, v)| format!("{k} {v:.3}")).collect();
            let _ = writeln!(
                s,
                "  {:<20} {}/{:<10} {:<28} migr {:<4} wait {:.3}",
                t.name,
                r.source,
                r.config,
                cls.join(", "),
                t.migrations,
                t.wait_s
            );
        }
    }
    if let Some(ns) = out.calibration_ns {
        let _ = writeln!(s, "rt-app calibration: {ns} ns per loop (measured once, given to every real run)");
    }
    if let Some(sp) = out.speed {
        if out.speed_probes.len() > 1 {
            let ms: Vec<String> = out.speed_probes.iter().map(|c| format!("{:.1}", c * 1e3)).collect();
            let _ = writeln!(
                s,
                "simulated CPU speed: {sp:.3} (median of {} probes: rt-app's `run` of 300 ms took {} ms of CPU)",
                ms.len(),
                ms.join(", ")
            );
        } else {
            let _ = writeln!(
                s,
                "simulated CPU speed: {sp:.3} (probe: rt-app's `run` of 300 ms took {:.1} ms of CPU)",
                300.0 / sp
            );
        }
    }
    if let Some(u) = out.unit_ns {
        let _ = writeln!(
            s,
            "ampsched-workload unit: {u:.0} ns of CPU (probe, single thread; built-ins sized in whole units)"
        );
    }
    for (placer, params) in &out.placer_params {
        let kv: Vec<String> = params.iter().map(|(k, v)| format!("{k} = {}", param_text(v))).collect();
        let _ = writeln!(s, "simulated {placer} runs with the agent's parameters: {}", kv.join(", "));
    }
    match out.sim_body.as_deref() {
        Some("direct") => {
            let _ = writeln!(s, "simulated placers: decisions put in force as decided every period (--sim-direct)");
        }
        Some(k) => {
            let _ = writeln!(
                s,
                "simulated placers run in the agent's body ({k}): contention gate, reaction to an idle fast CPU, \
                 back-off (docs/validation.md)"
            );
        }
        None => {}
    }
    if out.partial {
        let _ = writeln!(s, "PARTIAL: stopped before the end");
    }
    s
}

fn param_text(v: &ampsched_model::spec::ParamValue) -> String {
    use ampsched_model::spec::ParamValue as V;
    match v {
        V::Bool(b) => b.to_string(),
        V::Int(i) => i.to_string(),
        V::Float(f) => f.to_string(),
        V::Str(x) => format!("{x:?}"),
        V::List(l) => format!("[{}]", l.iter().map(param_text).collect::<Vec<_>>().join(", ")),
    }
}

/// The JSON document: `{"partial": …, "rows": [...]}`.
pub fn to_json(out: &Outcome) -> String {
    serde_json::to_string_pretty(out).unwrap_or_default()
}

/// A self-contained HTML page with the side-by-side figure (real vs sim per configuration).
pub fn to_html(out: &Outcome) -> String {
    let sum = summary(&out.rows);
    let num = |x: f64| if x.is_finite() { x } else { 0.0 };
    // The project's one plotting path (ampsched-charts, plotters' SVG backend).
    let chart = ampsched_charts::Chart::Bar(ampsched_charts::BarChart {
        title: "Completion time: real vs simulated (linux dispatcher)".into(),
        categories: sum.iter().map(|(w, c, ..)| format!("{} {c}", w.trim_end_matches(".json"))).collect(),
        series: vec![
            ampsched_charts::BarSeries {
                name: "real".into(),
                values: sum.iter().map(|x| num(x.2)).collect(),
                err: None,
            },
            ampsched_charts::BarSeries {
                name: "simulated".into(),
                values: sum.iter().map(|x| num(x.3)).collect(),
                err: None,
            },
        ],
        stacked: false,
        y_label: "completion time (s)".into(),
        reference: None,
    });
    format!(
        "<!doctype html><meta charset='utf-8'><meta name='viewport' content='width=device-width'><title>ampsched validate</title>\
         <style>body{{font-family:sans-serif;max-width:60em;margin:auto;padding:0 1em}}figure{{margin:0}}svg{{max-width:100%;height:auto}}\
         pre{{overflow-x:auto}}</style><h1>ampsched validate</h1>{}<figure>{}<figcaption>How to read: for each workload and \
         configuration (default Linux, or a placer under the agent), the median completion time of the real runs beside the \
         median of the simulated ones; the closer each pair, the better the simulator predicts this machine. The table \
         below gives the divergence in % and whether each placer's effect has the same sign in both.</figcaption></figure>\
         <pre>{}</pre>",
        if out.partial { "<p><b>PARTIAL</b>: interrupted; only the runs that finished are shown.</p>" } else { "" },
        chart.to_svg_inline(),
        ampsched_charts::esc(&report(out))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_parses_and_rejects_with_the_form() {
        assert_eq!(Slow::parse("1:5000/10000").unwrap(), Slow { cpu: 1, spin_us: 5000, period_us: 10000 });
        assert!(Slow::parse("1:5000").unwrap_err().contains("CPU:SPIN_US/PERIOD_US"));
        assert!(Slow::parse("1:10000/10000").unwrap_err().contains("[1, PERIOD_US − 1]"));
    }

    #[test]
    fn the_html_page_draws_real_beside_simulated_with_the_shared_charts_and_escapes_the_table() {
        let row = |c: &str, src: &str, rep: u32, s: f64| Row {
            completion_s: s,
            ..Row::new("w<1>.json", c, src, rep, vec![])
        };
        let out = Outcome {
            rows: vec![row("default", "real", 0, 1.0), row("default", "sim", 0, 1.25), row("aash", "real", 0, 2.0)],
            partial: true,
            calibration_ns: None,
            speed: None,
            speed_probes: vec![],
            unit_ns: None,
            placer_params: BTreeMap::new(),
            sim_body: None,
        };
        let html = to_html(&out);
        // One figure from ampsched-charts (plotters' SVG backend, scaled by CSS: no fixed width).
        assert_eq!(html.matches("<svg").count(), 1, "{html}");
        assert!(html.contains("<svg viewBox="), "inline chart without a fixed size");
        for text in ["real", "simulated", "completion time (s)", "How to read", "PARTIAL"] {
            assert!(html.contains(text), "missing {text:?}");
        }
        // The workload's name is escaped in the chart's labels and in the table.
        assert!(!html.contains("w<1>") && html.contains("w&lt;1&gt;"));
        // A configuration with no simulated run draws a zero-height bar, not NaN.
        let svg = &html[html.find("<svg").unwrap()..html.find("</svg>").unwrap()];
        assert!(!svg.contains("NaN"), "{svg}");
    }

    #[test]
    fn divergence_and_effect_sign() {
        // default real 1.0, 1.1 (spread 0.1), sim 1.05; placer real 1.3 (effect +0.25), sim 1.2 (+0.15): same sign.
        let row =
            |c: &str, src: &str, rep: u32, s: f64| Row { completion_s: s, ..Row::new("w.json", c, src, rep, vec![]) };
        let rows = vec![
            row("default", "real", 0, 1.0),
            row("default", "real", 1, 1.1),
            row("default", "sim", 0, 1.05),
            row("aash", "real", 0, 1.3),
            row("aash", "sim", 0, 1.2),
        ];
        let s = summary(&rows);
        // default: (1.05 − 1.05) / 1.05 = 0 %; aash: (1.2 − 1.3) / 1.3 = −7.7 %.
        assert!(s[0].4.abs() < 1e-9);
        assert!((s[1].4 + 7.692).abs() < 0.01, "{}", s[1].4);
        let e = effects(&rows);
        assert_eq!(e[0].5, Some(true));
        assert!((e[0].2 - 0.25).abs() < 1e-9 && (e[0].4 - 0.1).abs() < 1e-9);
    }

    #[test]
    fn real_threads_come_from_the_trace_numbered_as_the_simulator_names_them() {
        // rt-app (tid 10) starts two instances of task `w` (tids 11, 12; comm
        // `w`), which the simulator calls w-0 and w-1. Thread 11 runs 1.000 →
        // 1.002 s on CPU 0 (fast), thread 12 1.0005 → 1.0015 on CPU 1 (the
        // hog's CPU: slow). Start = first run of a workload thread = 1.000 s,
        // so completions are 2 ms and 1.5 ms; rt-app's main thread is left out.
        let sw = |cpu: u32, t: &str, prev: (&str, u32), next: (&str, u32)| {
            format!(
                "x-1 [{cpu:03}] d..2. {t}: sched_switch: prev_comm={} prev_pid={} prev_prio=120 prev_state=S ==> next_comm={} next_pid={} next_prio=120\n",
                prev.0, prev.1, next.0, next.1
            )
        };
        let text = [
            sw(0, "0.900000", ("swapper/0", 0), ("rt-app", 10)),
            sw(0, "1.000000", ("rt-app", 10), ("w", 11)),
            sw(1, "1.000500", ("swapper/1", 0), ("w", 12)),
            sw(1, "1.001500", ("w", 12), ("swapper/1", 0)),
            sw(0, "1.002000", ("w", 11), ("swapper/0", 0)),
        ]
        .concat();
        let p = schedtrace::parse(&text);
        let topo = Topology::fast_slow(0, 1.0, 2, 1.0, 2);
        let slow = Some(Slow { cpu: 1, spin_us: 5000, period_us: 10000 });
        let names = vec!["w-0".to_string(), "w-1".to_string()];
        let rows = from_trace(&p, &BTreeMap::new(), Some(10), &names, &topo, slow);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].name.as_str(), rows[1].name.as_str()), ("w-0", "w-1"));
        assert!((rows[0].cpu_s_by_class["fast"] - 0.002).abs() < 1e-12);
        assert!((rows[1].cpu_s_by_class["slow"] - 0.001).abs() < 1e-12);
        assert!((rows[0].completion_s - 0.002).abs() < 1e-12 && (rows[1].completion_s - 0.0015).abs() < 1e-12);
        assert_eq!(rows[0].migrations + rows[1].migrations, 0);
    }

    #[test]
    fn workload_threads_are_matched_by_comm_not_by_any_prefix() {
        // rt-app instances `w-0`, `w-1` share comm `w`; a long task name is cut to 15 bytes.
        let names = vec!["w-0".to_string(), "w-1".to_string(), "a-very-long-task-name".to_string()];
        assert!(is_workload_thread(&names, "w"));
        assert!(is_workload_thread(&names, "a-very-long-tas"));
        assert!(!is_workload_thread(&names, "rt-app"));
        // The agent's threads (comm `ampsched`) are not `ampsched-workload`'s (`ampsched-worklo`).
        let b = vec!["ampsched-worklo-0".to_string(), "ampsched-worklo-1".to_string()];
        assert!(is_workload_thread(&b, "ampsched-worklo"));
        assert!(!is_workload_thread(&b, "ampsched"));
        assert_eq!(Workload::parse("x/y.json").unwrap().label(), "y.json");
        assert!(Workload::parse("builtin:spin").unwrap().label().starts_with("builtin:spin:threads=2"));
    }

    #[test]
    fn the_calibration_is_made_numeric_wherever_the_file_has_it() {
        assert_eq!(parse_pload("[rt-app] <notice> pLoad = 15ns : calib_cpu 0"), Some(15));
        // A "CPUk" string is replaced by the number; a number is kept.
        let f = r#"{ "global": { "calibration" : "CPU0", "duration": 30 }, "tasks": {} }"#;
        assert_eq!(with_calibration(f, 15), r#"{ "global": { "calibration" : 15, "duration": 30 }, "tasks": {} }"#);
        let f = r#"{ "global": { "calibration": 40 }, "tasks": {} }"#;
        assert_eq!(with_calibration(f, 15), f);
        // No key: added to global (with a comma only before another key).
        assert_eq!(
            with_calibration(r#"{"global": {}, "tasks": {}}"#, 15),
            r#"{"global": {"calibration": 15}, "tasks": {}}"#
        );
        assert_eq!(
            with_calibration(r#"{"global": { "duration": 3 }}"#, 15),
            r#"{"global": {"calibration": 15,  "duration": 3 }}"#
        );
        // No global: one is added.
        assert_eq!(with_calibration(r#"{"tasks": {}}"#, 15), r#"{"global": {"calibration": 15}, "tasks": {}}"#);
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        // |divergences| 5, 20, 10, 30 → sorted 5, 10, 20, 30: median (10 + 20) / 2 = 15, worst 30.
        assert_eq!(median_worst(vec![5.0, 20.0, 10.0, 30.0]), Some((15.0, 30.0)));
        assert_eq!(median_worst(vec![3.0, 1.0, 2.0]), Some((2.0, 3.0)));
        assert_eq!(median_worst(vec![]), None);
    }

    #[test]
    fn the_probe_gives_the_simulated_speed() {
        // 300 ms of nominal `run` took 330 ms of CPU: speed 300 / 330 = 0.909.
        assert!((probe_ratio(0.330) - 0.9091).abs() < 1e-4);
        // Probes of 370.8, 311.1 and 312.0 ms: the median 312.0 ms gives 300 / 312 = 0.9615;
        // the disturbed 370.8 alone would give 0.809.
        assert!((median_speed(&[0.3708, 0.3111, 0.3120]).unwrap() - 0.9615).abs() < 1e-4);
        // Two probes (a run stopped after the first of the later two): their mean, 0.330 s.
        assert!((median_speed(&[0.320, 0.340]).unwrap() - 0.9091).abs() < 1e-4);
        assert_eq!(median_speed(&[]), None);
        let topo = Topology::fast_slow(0, 1.0, 2, 1.0, 2);
        let m = sim_machine(&topo, Some(Slow { cpu: 1, spin_us: 5000, period_us: 10000 }), 0.5, 0);
        assert!(m.contains("{ name = \"fast\", speed = 0.5 }, { name = \"slow\", speed = 0.5 }"), "{m}");
    }

    #[test]
    fn resimulate_keeps_the_recorded_real_rows_and_sizes_work_as_recorded() {
        // A recorded run of builtin:spin (1 thread, 2 phases of 10 ms) with a
        // unit of 2 µs: 5 000 units a phase, so the simulator gets 2 × 10 ms of
        // work on speed-1.0 CPUs and the thread completes at 20 ms.
        let b = Builtin::parse("builtin:spin:threads=1,phases=2,phase_ms=10").unwrap();
        let w = Workload::Builtin(b.clone());
        let t = ThreadRow { name: "ampsched-worklo-0".into(), completion_s: 0.025, ..ThreadRow::default() };
        let real = Row::new(&w.label(), "default", "real", 0, vec![t]);
        let recorded = Outcome {
            rows: vec![real.clone()],
            partial: false,
            calibration_ns: None,
            speed: None,
            speed_probes: vec![],
            unit_ns: Some(2000.0),
            placer_params: BTreeMap::new(),
            sim_body: None,
        };
        let text = to_json(&recorded);
        let back: Outcome = serde_json::from_str(&text).unwrap();
        let o = Options {
            workloads: vec![w],
            placers: vec![],
            reps: 1,
            slow: None,
            force: false,
            ampsched: PathBuf::new(),
            hog: PathBuf::new(),
            workload_bin: PathBuf::from("/x/ampsched-workload"),
            sim_only: false,
            sim_params: BTreeMap::new(),
            agent_body: true,
            reaction_us: None,
        };
        let topo = Topology::fast_slow(0, 1.0, 2, 1.0, 2);
        let out = resimulate(&o, &topo, &back).unwrap();
        assert_eq!(out.rows.len(), 2);
        let sim = out.rows.iter().find(|r| r.source == "sim").unwrap();
        assert!((sim.completion_s - 0.020).abs() < 1e-6, "{}", sim.completion_s);
        assert_eq!(sim.threads[0].name, "ampsched-worklo-0");
        let r = out.rows.iter().find(|r| r.source == "real").unwrap();
        assert_eq!(r.completion_s, 0.025);
        // A workload the recording does not have is refused by name.
        let o2 = Options { workloads: vec![Workload::parse("builtin:phased").unwrap()], ..o };
        let e = resimulate(&o2, &topo, &back).unwrap_err();
        assert!(e.input && e.msg.contains("no real rows of `builtin:phased"), "{}", e.msg);
    }

    #[test]
    fn the_simulated_machine_declares_the_hog() {
        let topo = Topology::fast_slow(0, 1.0, 2, 1.0, 2);
        let sl = Slow { cpu: 1, spin_us: 5000, period_us: 10000 };
        let m = sim_machine(&topo, Some(sl), 1.0, hog_phase_us(&sl, 2, 5));
        assert!(m.contains("[[machine.rt_load]]\ncpu = 1\nspin_us = 5000\nperiod_us = 10000\nphase_us = 4000"), "{m}");
        // Five repetitions meet the hog at 0, 2, 4, 6, 8 ms of its 10 ms period;
        // three at 0, 3, 6 ms (k·10/3 = 3.33, 6.67 cut to whole ms).
        let five: Vec<u64> = (0..5).map(|k| hog_phase_us(&sl, k, 5)).collect();
        assert_eq!(five, vec![0, 2000, 4000, 6000, 8000]);
        let three: Vec<u64> = (0..3).map(|k| hog_phase_us(&sl, k, 3)).collect();
        assert_eq!(three, vec![0, 3000, 6000]);
        assert!(m.contains("{ class = \"fast\", mem_domain = 0, numa = 0 }, { class = \"slow\""), "{m}");
    }
}
