//! The control loop: every period sample the machine and the managed threads,
//! build the placer's [`Snapshot`], run the placer (the same code the
//! simulator runs), apply only the affinity changes, export metrics and log
//! decisions.
//!
//! Mapping (docs/design/architecture.md): a target process or VM is a domain
//! ([`DomainId`], dense, never reused); each managed thread is a task
//! ([`TaskId`], dense in discovery order, stable for the run, never reused).
//! A process's threads are numbered 0, 1, … in discovery order (`vcpu`), a
//! VM's vCPU threads by their QEMU `cpu-index`; only a VM's vCPU threads are
//! managed, never its I/O or main threads.
//!
//! Per period (default 30 ms):
//! 1. rescan (every `rescan_ms`): descendants of launched commands, VMs
//!    through QMP or thread names, new QEMU processes; threads of every
//!    managed process are listed every period;
//! 2. sample: per CPU busy/idle/noise ([`crate::sampler`]); per thread the
//!    `schedstat` run time delta and `stat` state and CPU. A thread is
//!    *active* when it ran or was runnable (state R) in the period; its run
//!    time is charged to the class of the CPU it is on at sampling time (exact
//!    when its mask holds one class, as placers' masks do);
//! 3. place and apply: each change is converted to Linux CPUs, intersected
//!    with the thread's original affinity (the agent never widens a
//!    thread's allowed CPUs), recorded in the state file before the first
//!    change, then applied. ESRCH and EPERM are logged and skipped.
//!
//! Safety: originals are recorded when a thread is first seen. A thread born
//! from a thread the agent had pinned inherits the agent's mask; its original
//! is then the domain's base mask (the root process's mask before any
//! change). On exit (normal, SIGINT, SIGTERM, SIGHUP, target exit, or a
//! panic unwinding through the loop) every changed thread gets its original
//! back and the state file is removed.

use crate::actuate::{ActError, Actuator, DryRun, LinuxActuator, Remembering};
use crate::config::{Target, TargetKind};
use crate::discovery::Discovered;
use crate::metrics::{Exposition, Kind, Labels, MetricsServer};
use crate::procfs::{
    children, cmdline, list_pids, list_tids, parse_schedstat, parse_stat, parse_vcpu_thread_name, ProcFile, TaskDir,
};
use crate::qmp::query_vcpus;
use crate::runclock::RunClock;
use crate::sampler::{CpuFigures, CpuSampler};
use crate::signals;
use crate::state::{self, StateEntry, StateFile, STATE_SCHEMA};
use crate::trace::{boottime_ns, AgentTrace, PeriodSample};
use crate::AgentError;
use ampsched_model::spec::{ParamValue, PolicySpec};
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, TaskId};
use ampsched_policy::{placer_by_name, AffinityChange, CpuSample, DomainSample, Placer, Snapshot, TaskSample, PLACERS};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

/// Default control period, ms (one credit accounting period, as AASH).
pub const DEFAULT_PERIOD_MS: f64 = 30.0;
/// Default interval between rescans for new processes and VMs, ms.
pub const DEFAULT_RESCAN_MS: f64 = 500.0;
/// How long launched commands get to exit after the agent forwards a signal.
pub const CHILD_GRACE: Duration = Duration::from_secs(5);

/// Everything the agent needs to start.
pub struct AgentOptions {
    /// The machine.
    pub discovered: Discovered,
    /// Placer name and parameters.
    pub placer: PolicySpec,
    /// Control period, ms; written into the placer's period parameter unless the parameters set it.
    pub period_ms: f64,
    /// Rescan interval, ms.
    pub rescan_ms: f64,
    /// Print decisions, change nothing.
    pub dry_run: bool,
    /// State file.
    pub state_path: PathBuf,
    /// Metrics address (loopback).
    pub metrics: Option<String>,
    /// Decision log path ("-" = stdout). Dry runs log to stdout when unset.
    pub log: Option<PathBuf>,
    /// Targets.
    pub targets: Vec<Target>,
    /// `/proc` (tests may point elsewhere for parsing only).
    pub proc_root: PathBuf,
    /// Stop when the first launched command exits (the `run` command).
    pub stop_with_first_command: bool,
    /// Perfetto trace file of the decisions (`--trace`).
    pub trace: Option<PathBuf>,
}

/// Loop figures gathered for `--stats` and benchmarks.
#[derive(Clone, Debug, Default)]
pub struct LoopStats {
    /// Periods run.
    pub periods: u64,
    /// CPU time of each period's work (not the sleep), ns.
    pub loop_cpu_ns: Vec<u64>,
    /// Wall time of each period's work, ns.
    pub loop_wall_ns: Vec<u64>,
    /// Largest number of threads managed at once.
    pub managed_max: usize,
    /// Affinity changes applied (or printed, in a dry run).
    pub changes: u64,
    /// Thread `stat` files read (the costly ones; the run time is read for every thread every period).
    pub stat_reads: u64,
    /// Thread run times read from `schedstat` (the rest from task-clock counters, see `runclock`).
    pub schedstat_reads: u64,
    /// Thread-periods sampled (managed threads summed over periods).
    pub thread_samples: u64,
    /// Failed changes (vanished or denied).
    pub errors: u64,
    /// Wall time of the whole loop.
    pub elapsed: Duration,
    /// CPU time of the whole agent process over the loop.
    pub process_cpu: Duration,
}

fn median(v: &[u64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    s[s.len() / 2] as f64
}

impl LoopStats {
    /// One JSON object with the summary figures (µs, %).
    pub fn to_json(&self) -> Value {
        let mean = |v: &[u64]| if v.is_empty() { 0.0 } else { v.iter().sum::<u64>() as f64 / v.len() as f64 };
        let p99 = |v: &[u64]| {
            if v.is_empty() {
                return 0.0;
            }
            let mut s = v.to_vec();
            s.sort_unstable();
            s[(s.len() * 99 / 100).min(s.len() - 1)] as f64
        };
        json!({
            "periods": self.periods,
            "managed_threads_max": self.managed_max,
            "changes": self.changes,
            "stat_reads_per_period": if self.periods == 0 { 0.0 } else { self.stat_reads as f64 / self.periods as f64 },
            "schedstat_reads_per_period": if self.periods == 0 { 0.0 } else { self.schedstat_reads as f64 / self.periods as f64 },
            "threads_per_period": if self.periods == 0 { 0.0 } else { self.thread_samples as f64 / self.periods as f64 },
            "errors": self.errors,
            "loop_cpu_us_median": median(&self.loop_cpu_ns) / 1e3,
            "loop_cpu_us_mean": mean(&self.loop_cpu_ns) / 1e3,
            "loop_wall_us_median": median(&self.loop_wall_ns) / 1e3,
            "loop_wall_us_p99": p99(&self.loop_wall_ns) / 1e3,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "agent_cpu_pct_of_one_cpu": if self.elapsed.is_zero() { 0.0 } else {
                100.0 * self.process_cpu.as_secs_f64() / self.elapsed.as_secs_f64()
            },
        })
    }
}

/// How the agent ended.
#[derive(Debug)]
pub struct Outcome {
    /// Exit status of the first launched command, if it ended.
    pub first_command: Option<ExitStatus>,
    /// The signal that stopped the agent, if any.
    pub signal: Option<i32>,
    /// Threads whose restore failed.
    pub restore_failures: usize,
    /// Loop figures.
    pub stats: LoopStats,
}

enum DomKind {
    Proc { procs: BTreeSet<i32> },
    Vm { pid: i32, qmp: Option<PathBuf>, vcpus: BTreeMap<i32, u32> },
}

struct Domain {
    id: DomainId,
    target: usize,
    name: String,
    root: i32,
    kind: DomKind,
    child: Option<Child>,
    exit: Option<ExitStatus>,
    base_mask: CpuSet,
    applied: Vec<CpuSet>,
    next_vcpu: u32,
    alive: bool,
    fast_ns: u64,
    fisb_ns: u64,
    changes: u64,
    active: usize,
    threads: usize,
}

/// Where a thread's run time comes from.
enum RunSource {
    /// A task-clock counter (see `runclock`): run ns since it was opened.
    Clock(RunClock),
    /// Its kept-open `schedstat`: run ns, run-queue wait ns, time slices.
    Schedstat(ProcFile),
}

struct Thread {
    dom: usize,
    tid: i32,
    pid: i32,
    vcpu: u32,
    stat: ProcFile,
    /// Where its run time is read each period.
    run: RunSource,
    children: Option<ProcFile>,
    /// Last (run, wait, slices) seen; from a clock, (run since opened, 0, 0).
    last_sched: (u64, u64, u64),
    state: char,
    processor: u32,
    starttime: u64,
    original: CpuSet,
    cur: CpuSet,
    touched: bool,
    in_state: bool,
}

/// The running agent.
pub struct Agent {
    d: Discovered,
    targets: Vec<Target>,
    placer: Box<dyn Placer>,
    act: Box<dyn Actuator>,
    dry: bool,
    proc_root: PathBuf,
    state_path: PathBuf,
    state_entries: Vec<StateEntry>,
    state_written: bool,
    metrics: Option<MetricsServer>,
    log: Option<Box<dyn Write>>,
    cpu: CpuSampler,
    domains: Vec<Domain>,
    threads: BTreeMap<TaskId, Thread>,
    by_tid: HashMap<i32, TaskId>,
    task_dirs: HashMap<i32, TaskDir>,
    pid_threads: HashMap<i32, usize>,
    leader_stat: HashMap<i32, ProcFile>,
    next_task: u32,
    known_vms: HashSet<i32>,
    period: Nanos,
    rescan: Duration,
    start: Duration,
    last_rescan: Option<Duration>,
    stop_with_first: bool,
    stats: LoopStats,
    errors_by_kind: BTreeMap<&'static str, u64>,
    fisb_machine_ns: u64,
    last_cpu: Vec<CpuFigures>,
    restored: bool,
    warned: HashSet<String>,
    sample_pool: Vec<TaskSample>,
    changes_buf: Vec<AffinityChange>,
    fd_limit: Option<libc::rlimit>,
    /// The `--trace` recorder and, per domain, its fast-class run time at the last period.
    trace: Option<AgentTrace>,
    trace_fast_ns: Vec<u64>,
    /// When the trace's last period was recorded (boot-time ns).
    trace_last_ts: Option<u64>,
    /// Whether task-clock counters can be opened here (`None`: not tried yet).
    perf_ok: Option<bool>,
    /// When thread lists were last reconciled with `/proc` in full.
    last_reconcile: Option<Duration>,
}

/// A thread whose run + run-queue wait in a period is below `period / STAT_BURST_DIV`
/// (1/8: 3.75 ms of 30 ms) had a short burst: its `stat` is not read (it is taken to be
/// asleep again, and its run time is charged to its mask's class or its last CPU's).
pub const STAT_BURST_DIV: u64 = 8;
/// Every this many periods (staggered by task) a thread that did anything gets its `stat`
/// read anyway, so the CPU of a short-burst thread with a multi-class mask is never stale for long.
pub const STAT_REFRESH_EVERY: u64 = 8;

/// Whether a thread's `stat` (state and CPU; several times the cost of `schedstat`) must be
/// read this period. `state` is what the last read said ('?' = never read), `changed` whether
/// `schedstat` moved, `demand` its run + wait ns in the period, `one_class` whether its mask
/// lies in one CPU class. A thread that did nothing since a read saying it was asleep is still
/// asleep on the same CPU; a runnable one is read until it stops; a short burst is read only
/// when its mask leaves its CPU's class unknown, and then only every `STAT_REFRESH_EVERY`
/// periods.
pub fn want_stat(state: char, changed: bool, demand: u64, burst: u64, one_class: bool, period: u64, task: u32) -> bool {
    if state == '?' || state == 'R' {
        return true;
    }
    if !changed {
        return false;
    }
    if demand >= burst {
        return true;
    }
    !one_class && (period + task as u64).is_multiple_of(STAT_REFRESH_EVERY)
}

/// The class of every CPU in `mask` (topology ids) when they share one; `None` for an empty or mixed mask.
pub fn class_of_mask(topo: &ampsched_model::Topology, mask: &CpuSet) -> Option<usize> {
    let mut it = mask.iter().filter(|c| c.idx() < topo.cpus.len()).map(|c| topo.cpus[c.idx()].class);
    let first = it.next()?;
    it.all(|k| k == first).then_some(first)
}

/// Raise the agent's soft limit on open files to the hard limit (two or three kept-open
/// `/proc` files per managed thread); returns the previous limit, which launched commands get
/// back, when it was raised.
fn raise_fd_limit() -> Option<libc::rlimit> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: valid pointer to an rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 || lim.rlim_cur >= lim.rlim_max {
        return None;
    }
    let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
    // SAFETY: valid pointer to an rlimit.
    (unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0).then_some(lim)
}

/// The name of a placer's period parameter (`period_ms` or `interval_ms`).
pub fn period_param(placer: &str) -> Option<&'static str> {
    let info = PLACERS.iter().find(|p| p.name == placer)?;
    info.params.iter().map(|p| p.name).find(|n| *n == "period_ms" || *n == "interval_ms")
}

fn ms_to_dur(ms: f64) -> Duration {
    Duration::from_nanos((ms * 1e6).round().max(1.0) as u64)
}

impl Agent {
    /// Validate everything and prepare; nothing on the machine changes and no command starts
    /// until [`Agent::run`].
    pub fn new(opts: AgentOptions) -> Result<Agent, AgentError> {
        let AgentOptions {
            discovered,
            placer,
            period_ms,
            rescan_ms,
            dry_run,
            state_path,
            metrics,
            log,
            targets,
            proc_root,
            stop_with_first_command,
            trace,
        } = opts;
        if !(1.0..=60_000.0).contains(&period_ms) {
            return Err(AgentError::new(format!("period: must be in [1, 60000] ms, got {period_ms}")));
        }
        let mut params = placer.params.clone();
        if let Some(p) = period_param(&placer.name) {
            params.entry(p.to_string()).or_insert(ParamValue::Float(period_ms));
        }
        // On a real machine other load shares the fast CPUs: a fast grant is a period of fast
        // time, not of wall time (equal fast-core seconds per thread; docs/agent.md).
        if placer.name == "aash" {
            params.entry("time_credits".to_string()).or_insert(ParamValue::Bool(true));
        }
        let pl = placer_by_name(&placer.name, &params, &discovered.topo)
            .map_err(|e| AgentError::new(format!("placer: {e}")))?;
        if targets.is_empty() {
            return Err(AgentError::new("no target to manage".to_string()));
        }
        // Check existing processes and VMs now: a bad target must fail before any change.
        for t in &targets {
            match &t.kind {
                TargetKind::Pid(p) | TargetKind::QemuPid(p) => {
                    if !proc_root.join(p.to_string()).join("stat").exists() {
                        return Err(AgentError::new(format!("target \"{}\": process {p} does not exist", t.name)));
                    }
                    if matches!(t.kind, TargetKind::QemuPid(_)) && vcpus_by_name(&proc_root, *p).is_empty() {
                        return Err(AgentError::new(format!(
                            "target \"{}\": process {p} has no threads named `CPU n/KVM` or `CPU n/TCG`: start QEMU \
                             with `-name NAME,debug-threads=on`, or give its QMP socket (qmp = PATH)",
                            t.name
                        )));
                    }
                }
                TargetKind::Qmp(path) => {
                    // A VM not started yet (no socket, or a stale one nobody listens on) is
                    // waited for: it is picked up at a rescan once it answers. A socket that
                    // answers but is not QEMU's is an error now.
                    let found = crate::qmp::probe_vcpus(path)
                        .map_err(|e| AgentError::new(format!("target \"{}\": {e}", t.name)))?;
                    if found.is_none() {
                        eprintln!(
                            "ampsched: target \"{}\": no VM listens on {} yet; it is picked up when it starts",
                            t.name,
                            path.display()
                        );
                    }
                }
                TargetKind::Command(_) | TargetKind::QemuAll => {}
            }
        }
        if !dry_run {
            state::check_free(&state_path)?;
        }
        let metrics = match metrics {
            Some(a) => Some(MetricsServer::start(&a)?),
            None => None,
        };
        let log: Option<Box<dyn Write>> = match (&log, dry_run) {
            (Some(p), _) if p.as_os_str() == "-" => Some(Box::new(std::io::stdout())),
            (Some(p), _) => {
                if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| {
                        AgentError::new(format!("{}: cannot create the log directory: {e}", dir.display()))
                    })?;
                }
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| AgentError::new(format!("{}: cannot open the decision log: {e}", p.display())))?;
                Some(Box::new(std::io::BufWriter::new(f)))
            }
            (None, true) => Some(Box::new(std::io::stdout())),
            (None, false) => None,
        };
        let cpu = CpuSampler::new(&proc_root, &discovered.linux_ids)?;
        let trace = match &trace {
            Some(p) => Some(AgentTrace::create(p, discovered.topo.ncpus())?),
            None => None,
        };
        let act: Box<dyn Actuator> =
            if dry_run { Box::new(DryRun::default()) } else { Box::new(Remembering::new(LinuxActuator)) };
        let period = pl.period();
        Ok(Agent {
            d: discovered,
            targets,
            placer: pl,
            act,
            dry: dry_run,
            proc_root,
            state_path,
            state_entries: Vec::new(),
            state_written: false,
            metrics,
            log,
            cpu,
            domains: Vec::new(),
            threads: BTreeMap::new(),
            by_tid: HashMap::new(),
            task_dirs: HashMap::new(),
            pid_threads: HashMap::new(),
            leader_stat: HashMap::new(),
            next_task: 0,
            known_vms: HashSet::new(),
            period,
            rescan: ms_to_dur(rescan_ms),
            start: signals::monotonic(),
            last_rescan: None,
            stop_with_first: stop_with_first_command,
            stats: LoopStats::default(),
            errors_by_kind: BTreeMap::new(),
            fisb_machine_ns: 0,
            last_cpu: Vec::new(),
            restored: false,
            warned: HashSet::new(),
            sample_pool: Vec::new(),
            changes_buf: Vec::new(),
            fd_limit: None,
            trace,
            trace_fast_ns: Vec::new(),
            trace_last_ts: None,
            perf_ok: None,
            last_reconcile: None,
        })
    }

    /// The metrics endpoint's address, when enabled.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(|m| m.local_addr())
    }

    fn t_ms(&self) -> f64 {
        (signals::monotonic().saturating_sub(self.start)).as_secs_f64() * 1e3
    }

    fn log(&mut self, mut v: Value) {
        let t = (self.t_ms() * 1000.0).round() / 1000.0;
        if let Some(w) = self.log.as_mut() {
            if let Value::Object(m) = &mut v {
                m.insert("t_ms".into(), json!(t));
            }
            let _ = writeln!(w, "{v}");
        }
    }

    fn warn_once(&mut self, key: String, msg: String) {
        if self.warned.insert(key) {
            eprintln!("ampsched: warning: {msg}");
        }
    }

    fn new_domain(&mut self, target: usize, name: String, root: i32, kind: DomKind, child: Option<Child>) -> usize {
        let base_mask = self.act.get(root).unwrap_or_default();
        let id = DomainId(self.domains.len() as u32);
        let kind_s = match &kind {
            DomKind::Proc { .. } => "process",
            DomKind::Vm { qmp: Some(_), .. } => "vm (qmp)",
            DomKind::Vm { .. } => "vm (thread names)",
        };
        let ev = json!({"event": "domain", "domain": id.0, "name": name, "target": self.targets[target].name,
                        "kind": kind_s, "pid": root, "base_mask": base_mask.to_list()});
        self.domains.push(Domain {
            id,
            target,
            name,
            root,
            kind,
            child,
            exit: None,
            base_mask,
            applied: Vec::new(),
            next_vcpu: 0,
            alive: true,
            fast_ns: 0,
            fisb_ns: 0,
            changes: 0,
            active: 0,
            threads: 0,
        });
        self.log(ev);
        if let Some(tr) = self.trace.as_mut() {
            tr.add_process(boottime_ns(), root, &self.domains[id.idx()].name);
        }
        self.domains.len() - 1
    }

    fn launch(&mut self) -> Result<(), AgentError> {
        for ti in 0..self.targets.len() {
            let t = self.targets[ti].clone();
            match &t.kind {
                TargetKind::Command(argv) => {
                    let mut cmd = Command::new(&argv[0]);
                    cmd.args(&argv[1..]);
                    if let Some(lim) = self.fd_limit {
                        use std::os::unix::process::CommandExt;
                        // SAFETY: setrlimit is async-signal-safe; `lim` is a plain copy.
                        unsafe {
                            cmd.pre_exec(move || {
                                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                                Ok(())
                            });
                        }
                    }
                    let child = cmd.spawn();
                    let child = match child {
                        Ok(c) => c,
                        Err(e) => {
                            self.stop_children(libc::SIGTERM);
                            return Err(AgentError::new(format!(
                                "target \"{}\": cannot launch `{}`: {e}",
                                t.name, argv[0]
                            )));
                        }
                    };
                    let pid = child.id() as i32;
                    self.new_domain(
                        ti,
                        t.name.clone(),
                        pid,
                        DomKind::Proc { procs: BTreeSet::from([pid]) },
                        Some(child),
                    );
                }
                TargetKind::Pid(p) => {
                    self.new_domain(ti, t.name.clone(), *p, DomKind::Proc { procs: BTreeSet::from([*p]) }, None);
                }
                TargetKind::QemuPid(p) => {
                    let vcpus = vcpus_by_name(&self.proc_root, *p);
                    self.new_domain(ti, t.name.clone(), *p, DomKind::Vm { pid: *p, qmp: None, vcpus }, None);
                }
                TargetKind::Qmp(_) | TargetKind::QemuAll => {}
            }
        }
        Ok(())
    }

    fn stop_children(&mut self, sig: i32) {
        for d in &mut self.domains {
            if let Some(c) = d.child.as_mut() {
                if d.exit.is_none() {
                    // SAFETY: signalling our own child by pid.
                    unsafe { libc::kill(c.id() as i32, sig) };
                }
            }
        }
        let deadline = signals::monotonic() + CHILD_GRACE;
        for d in &mut self.domains {
            if let Some(c) = d.child.as_mut() {
                while d.exit.is_none() {
                    match c.try_wait() {
                        Ok(Some(s)) => d.exit = Some(s),
                        Ok(None) if signals::monotonic() < deadline => std::thread::sleep(Duration::from_millis(10)),
                        _ => break,
                    }
                }
            }
        }
    }

    /// Look for descendants, VMs and new QEMU processes.
    /// Direct children of process `p`: from the kept-open `children` files of its managed
    /// threads (one `pread` each), else by path for a process not managed yet.
    fn children_of(&mut self, p: i32, by_pid: &BTreeMap<i32, Vec<TaskId>>) -> Vec<i32> {
        let Some(tasks) = by_pid.get(&p) else { return children(&self.proc_root, p) };
        let mut out = Vec::new();
        for task in tasks {
            let Some(t) = self.threads.get_mut(task) else { continue };
            if t.children.is_none() {
                let path = self.proc_root.join(p.to_string()).join("task").join(t.tid.to_string()).join("children");
                t.children = ProcFile::open(&path).ok();
            }
            if let Some(text) = t.children.as_mut().and_then(|f| f.read().ok()) {
                out.extend(text.split_ascii_whitespace().filter_map(|x| x.parse::<i32>().ok()));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn rescan(&mut self) {
        let mut by_pid: BTreeMap<i32, Vec<TaskId>> = BTreeMap::new();
        if self.domains.iter().any(|d| d.alive && self.targets[d.target].children) {
            for (id, t) in &self.threads {
                by_pid.entry(t.pid).or_default().push(*id);
            }
        }
        for di in 0..self.domains.len() {
            if !self.domains[di].alive {
                continue;
            }
            let ti = self.domains[di].target;
            let want_children = self.targets[ti].children;
            let root = self.domains[di].root;
            let proc_root = self.proc_root.clone();
            if want_children && matches!(self.domains[di].kind, DomKind::Proc { .. }) {
                let mut all = BTreeSet::new();
                let mut stack = vec![root];
                while let Some(p) = stack.pop() {
                    if all.insert(p) {
                        let kids = self.children_of(p, &by_pid);
                        stack.extend(kids);
                    }
                }
                all.retain(|p| proc_root.join(p.to_string()).exists());
                if !all.is_empty() || !proc_root.join(root.to_string()).exists() {
                    if let DomKind::Proc { procs } = &mut self.domains[di].kind {
                        *procs = all;
                    }
                }
            }
            match &mut self.domains[di].kind {
                DomKind::Proc { .. } => {}
                DomKind::Vm { pid, qmp, vcpus } => {
                    let pid = *pid;
                    let fresh = match qmp {
                        Some(path) => {
                            let gone = vcpus
                                .keys()
                                .any(|t| !proc_root.join(pid.to_string()).join("task").join(t.to_string()).exists());
                            if gone || vcpus.is_empty() {
                                query_vcpus(path)
                                    .ok()
                                    .filter(|vm| vm.pid == pid)
                                    .map(|vm| vm.vcpus.into_iter().map(|x| (x.thread_id, x.cpu_index)).collect())
                            } else {
                                None
                            }
                        }
                        None => Some(vcpus_by_name(&proc_root, pid)),
                    };
                    if let Some(f) = fresh {
                        *vcpus = f;
                    }
                }
            }
        }
        // New VMs: QMP targets without a live domain, and QEMU processes for `qemu = "all"`.
        for ti in 0..self.targets.len() {
            let t = self.targets[ti].clone();
            match &t.kind {
                TargetKind::Qmp(path) => {
                    if self.domains.iter().any(|d| d.target == ti && d.alive) {
                        continue;
                    }
                    match crate::qmp::probe_vcpus(path) {
                        Ok(Some(vm)) if !vm.vcpus.is_empty() => {
                            // The socket's owner (SO_PEERCRED); every vCPU thread was checked to be one of its threads.
                            let pid = vm.pid;
                            let vcpus = vm.vcpus.into_iter().map(|x| (x.thread_id, x.cpu_index)).collect();
                            self.new_domain(
                                ti,
                                t.name.clone(),
                                pid,
                                DomKind::Vm { pid, qmp: Some(path.clone()), vcpus },
                                None,
                            );
                        }
                        // Not running (yet, or any more): looked for again at the next rescan.
                        Ok(_) => {}
                        Err(e) => {
                            self.warn_once(format!("qmp:{ti}"), format!("target \"{}\": {e} (will retry)", t.name))
                        }
                    }
                }
                TargetKind::QemuAll => {
                    for pid in list_pids(&self.proc_root) {
                        if self.known_vms.contains(&pid) {
                            continue;
                        }
                        let comm = std::fs::read_to_string(self.proc_root.join(pid.to_string()).join("comm"))
                            .unwrap_or_default();
                        let comm = comm.trim();
                        if !(comm.starts_with("qemu-system") || comm.starts_with("qemu-kvm") || comm == "kvm") {
                            continue;
                        }
                        let vcpus = vcpus_by_name(&self.proc_root, pid);
                        if vcpus.is_empty() {
                            self.warn_once(
                                format!("nonames:{pid}"),
                                format!("QEMU process {pid} has no `CPU n/KVM|TCG` thread names (start it with -name …,debug-threads=on): not managed"),
                            );
                            continue;
                        }
                        self.known_vms.insert(pid);
                        let name = format!("{}/{}", t.name, guest_name(&self.proc_root, pid));
                        self.new_domain(ti, name, pid, DomKind::Vm { pid, qmp: None, vcpus }, None);
                    }
                }
                _ => {}
            }
        }
    }

    /// A run-time counter for `tid`, or `None` to read its `schedstat`: when perf
    /// events are refused here (decided on the first try, logged once) or this
    /// thread's counter cannot be opened (gone, out of file descriptors).
    fn open_clock(&mut self, tid: i32) -> Option<RunClock> {
        if self.perf_ok == Some(false) {
            return None;
        }
        match RunClock::open(tid) {
            Ok(c) => {
                self.perf_ok = Some(true);
                Some(c)
            }
            Err(e) if self.perf_ok.is_none() && e.raw_os_error() != Some(libc::ESRCH) => {
                self.perf_ok = Some(false);
                let ev = json!({"event": "run-clock", "source": "schedstat", "reason": e.to_string()});
                self.log(ev);
                None
            }
            Err(_) => None,
        }
    }

    fn add_thread(&mut self, di: usize, pid: i32, tid: i32, vcpu: Option<u32>) {
        let dir = self.proc_root.join(pid.to_string()).join("task").join(tid.to_string());
        let Ok(mut stat) = ProcFile::open(&dir.join("stat")) else { return };
        let Some(st) = stat.read().ok().and_then(parse_stat).filter(|s| s.state != 'Z' && s.state != 'X') else {
            return;
        };
        let Ok(cur_lin) = self.act.get(tid) else { return };
        let (run, last_sched) = match self.open_clock(tid) {
            Some(c) => (RunSource::Clock(c), (0, 0, 0)),
            None => {
                let Ok(mut sched) = ProcFile::open(&dir.join("schedstat")) else { return };
                let last = sched.read().ok().and_then(parse_schedstat).unwrap_or_default();
                (RunSource::Schedstat(sched), last)
            }
        };
        let dom = &mut self.domains[di];
        let original = if dom.applied.contains(&cur_lin) && cur_lin != dom.base_mask && !dom.base_mask.is_empty() {
            dom.base_mask
        } else {
            cur_lin
        };
        let vcpu = vcpu.unwrap_or_else(|| {
            dom.next_vcpu += 1;
            dom.next_vcpu - 1
        });
        let task = TaskId(self.next_task);
        self.next_task += 1;
        let cur = self.d.from_linux(&cur_lin);
        let ev = json!({"event": "thread", "domain": self.domains[di].id.0, "target": self.domains[di].name,
                        "tid": tid, "pid": pid, "task": task.0, "vcpu": vcpu, "comm": st.comm,
                        "original": original.to_list(), "inherited": original != cur_lin});
        self.threads.insert(
            task,
            Thread {
                dom: di,
                tid,
                pid,
                vcpu,
                stat,
                run,
                children: None,
                last_sched,
                state: '?',
                processor: st.processor,
                starttime: st.starttime,
                original,
                cur,
                touched: original != cur_lin,
                in_state: false,
            },
        );
        self.by_tid.insert(tid, task);
        *self.pid_threads.entry(pid).or_insert(0) += 1;
        self.log(ev);
        if let Some(tr) = self.trace.as_mut() {
            let dom = &self.domains[di];
            let ts = boottime_ns();
            if pid != dom.root {
                // A child process of the target: its own process in the trace.
                tr.add_process(ts, pid, &format!("{}[{pid}]", dom.name));
            }
            let name = match dom.kind {
                DomKind::Vm { .. } => format!("{}/v{vcpu}", dom.name),
                DomKind::Proc { .. } => st.comm.clone(),
            };
            tr.add_thread(ts, pid, tid, &name);
        }
    }

    fn remove_thread(&mut self, task: TaskId, why: &str) {
        if let Some(t) = self.threads.remove(&task) {
            self.by_tid.remove(&t.tid);
            if let std::collections::hash_map::Entry::Occupied(mut e) = self.pid_threads.entry(t.pid) {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove();
                }
            }
            let ev = json!({"event": "thread-gone", "tid": t.tid, "task": task.0, "reason": why});
            self.log(ev);
            if let Some(tr) = self.trace.as_mut() {
                tr.remove_thread(boottime_ns(), t.tid);
            }
        }
    }

    /// List every domain's threads; add new ones, drop vanished ones; notice ended domains.
    fn refresh_threads(&mut self) {
        // Threads read through a counter are not noticed exiting by a failed read: list every
        // process's threads in full once per rescan interval (and whenever a count changes).
        let now = signals::monotonic();
        let reconcile = self.last_reconcile.is_none_or(|t| now.saturating_sub(t) >= self.rescan);
        if reconcile {
            self.last_reconcile = Some(now);
        }
        let mut vanished: Vec<TaskId> = Vec::new();
        for di in 0..self.domains.len() {
            if !self.domains[di].alive {
                continue;
            }
            let dom = &mut self.domains[di];
            if let (Some(c), None) = (dom.child.as_mut(), dom.exit) {
                if let Ok(Some(s)) = c.try_wait() {
                    dom.exit = Some(s);
                }
            }
            let mut want: Vec<(i32, i32, Option<u32>)> = Vec::new();
            let mut alive_procs = 0;
            match &self.domains[di].kind {
                DomKind::Proc { procs } => {
                    for &p in procs {
                        // List the threads only when the process's thread count (one `fstat` of
                        // its kept-open task directory) differs from the number managed.
                        let dir = match self.task_dirs.entry(p) {
                            std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
                            std::collections::hash_map::Entry::Vacant(v) => {
                                TaskDir::open(&self.proc_root, p).ok().map(|f| v.insert(f))
                            }
                        };
                        let mut n = dir.map(|d| d.threads()).unwrap_or(0);
                        // One thread left may be a zombie leader whose threads all exited: gone.
                        if n == 1 {
                            let f = match self.leader_stat.entry(p) {
                                std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
                                std::collections::hash_map::Entry::Vacant(v) => {
                                    ProcFile::open(&self.proc_root.join(p.to_string()).join("stat"))
                                        .ok()
                                        .map(|f| v.insert(f))
                                }
                            };
                            if f.and_then(|f| f.read().ok().and_then(parse_stat)).is_none_or(|s| s.state == 'Z') {
                                n = 0;
                            }
                        }
                        if n == 0 {
                            self.task_dirs.remove(&p);
                            self.leader_stat.remove(&p);
                            continue;
                        }
                        alive_procs += 1;
                        if reconcile || self.pid_threads.get(&p).copied().unwrap_or(0) as u64 != n {
                            let tids = list_tids(&self.proc_root, p);
                            vanished.extend(
                                self.threads
                                    .iter()
                                    .filter(|(_, t)| t.pid == p && t.dom == di && !tids.contains(&t.tid))
                                    .map(|(id, _)| *id),
                            );
                            want.extend(tids.into_iter().map(|t| (p, t, None)));
                        }
                    }
                }
                DomKind::Vm { pid, vcpus, .. } => {
                    if self.proc_root.join(pid.to_string()).exists() {
                        want.extend(vcpus.iter().map(|(t, i)| (*pid, *t, Some(*i))));
                    }
                }
            }
            // A launched command that was reaped has no threads even if /proc still lists a zombie.
            // (Checked only when nothing else is alive: a `stat` system call per domain per period saved.)
            let root_gone =
                || self.domains[di].exit.is_some() || !self.proc_root.join(self.domains[di].root.to_string()).exists();
            if want.is_empty() && alive_procs == 0 && root_gone() {
                self.domains[di].alive = false;
                vanished.extend(self.threads.iter().filter(|(_, t)| t.dom == di).map(|(id, _)| *id));
                let ev =
                    json!({"event": "domain-gone", "domain": self.domains[di].id.0, "name": self.domains[di].name});
                self.log(ev);
                if let DomKind::Vm { pid, .. } = self.domains[di].kind {
                    self.known_vms.remove(&pid);
                }
                continue;
            }
            for (p, t, v) in want {
                if !self.by_tid.contains_key(&t) {
                    self.add_thread(di, p, t, v);
                }
            }
        }
        for id in vanished {
            self.remove_thread(id, "exited");
        }
    }

    fn write_state(&mut self) -> Result<(), AgentError> {
        let live: HashSet<i32> = self.threads.values().map(|t| t.tid).collect();
        self.state_entries.retain(|e| live.contains(&e.tid));
        // Every managed thread is recorded (not only the changed ones), so that one write
        // covers a whole batch of new threads; restoring an unchanged thread is a no-op.
        for t in self.threads.values_mut() {
            if !t.in_state {
                t.in_state = true;
                self.state_entries.push(StateEntry {
                    tid: t.tid,
                    pid: t.pid,
                    target: self.domains[t.dom].name.clone(),
                    starttime: t.starttime,
                    original: t.original,
                });
            }
        }
        let s = StateFile {
            schema: STATE_SCHEMA.into(),
            agent_pid: std::process::id() as i32,
            entries: self.state_entries.clone(),
        };
        state::write_atomic(&self.state_path, &s)?;
        self.state_written = true;
        Ok(())
    }

    /// One period: sample, place, apply, export.
    fn step(&mut self) -> Result<(), AgentError> {
        let now_mono = signals::monotonic();
        if self.last_rescan.is_none_or(|t| now_mono.saturating_sub(t) >= self.rescan) {
            self.rescan();
            self.last_rescan = Some(now_mono);
        }
        self.refresh_threads();
        let by_tid = &self.by_tid;
        let cpus = self.cpu.sample(&|tid| by_tid.contains_key(&tid));
        let topo = &self.d.topo;
        let ncls = topo.classes.len();
        let fast_idle: u64 =
            cpus.iter().enumerate().filter(|(i, _)| topo.is_fast(CpuId(*i as u32))).map(|(_, c)| c.idle.0).sum();
        let slow_busy: u64 =
            cpus.iter().enumerate().filter(|(i, _)| !topo.is_fast(CpuId(*i as u32))).map(|(_, c)| c.busy.0).sum();
        self.fisb_machine_ns += fast_idle.min(slow_busy);
        let mut nr_running = vec![0u32; topo.ncpus()];
        // Reuse last period's task samples (and their per-class vectors): no allocation per thread.
        let mut pool = std::mem::take(&mut self.sample_pool);
        let mut tasks: Vec<TaskSample> = Vec::with_capacity(self.threads.len());
        let mut gone = Vec::new();
        let mut slow_run = vec![0u64; self.domains.len()];
        for d in &mut self.domains {
            d.active = 0;
            d.threads = 0;
        }
        let burst = self.period.0 / STAT_BURST_DIV;
        let period_no = self.stats.periods;
        // For the trace: per CPU the thread that ran there longest, and who is runnable.
        let tracing = self.trace.is_some();
        let mut longest: Vec<Option<(u64, i32)>> = if tracing { vec![None; topo.ncpus()] } else { Vec::new() };
        let mut runnable_tids: Vec<i32> = Vec::new();
        for (id, t) in self.threads.iter_mut() {
            self.stats.thread_samples += 1;
            let ss = match &mut t.run {
                // The counter stays readable after the thread exits: exits are found by
                // `refresh_threads` (thread counts, a full relist every rescan) and `stat`.
                RunSource::Clock(c) => match c.read() {
                    Ok(run) => (run, 0, 0),
                    Err(_) => {
                        gone.push(*id);
                        continue;
                    }
                },
                RunSource::Schedstat(f) => {
                    self.stats.schedstat_reads += 1;
                    let Some(ss) = f.read().ok().and_then(parse_schedstat) else {
                        gone.push(*id);
                        continue;
                    };
                    ss
                }
            };
            let delta = ss.0.saturating_sub(t.last_sched.0);
            let waited = ss.1.saturating_sub(t.last_sched.1);
            // Class of the CPU it ran on, known without `stat` when its mask lies in one class
            // (the placers' masks do).
            let mask_class = class_of_mask(topo, &t.cur);
            if want_stat(t.state, ss != t.last_sched, delta + waited, burst, mask_class.is_some(), period_no, id.0) {
                self.stats.stat_reads += 1;
                let Some(st) = t.stat.read().ok().and_then(parse_stat) else {
                    gone.push(*id);
                    continue;
                };
                t.state = st.state;
                t.processor = st.processor;
            } else if ss != t.last_sched {
                // A short burst (< period / STAT_BURST_DIV of run + wait) and no `stat`: it
                // ran and, with so little demand, is asleep again.
                t.state = 'S';
            }
            if t.state == 'Z' || t.state == 'X' {
                gone.push(*id);
                continue;
            }
            t.last_sched = ss;
            let mut cpu = self.d.topo_id(t.processor);
            let runnable = t.state == 'R';
            let mut by_class = pool.pop().map(|s| s.run_by_class).unwrap_or_default();
            by_class.clear();
            by_class.resize(ncls, Nanos::ZERO);
            // The CPU last seen is outside a single-class mask only when `stat` was skipped
            // after the mask changed: charge the mask's class then (its first CPU).
            if let (Some(k), Some(c)) = (mask_class, cpu) {
                if topo.cpus[c.idx()].class != k {
                    cpu = t.cur.iter().next();
                }
            }
            if let Some(c) = cpu {
                let cls = topo.cpus[c.idx()].class;
                by_class[cls] = Nanos(delta);
                if cls == topo.fast_class {
                    self.domains[t.dom].fast_ns += delta;
                } else {
                    slow_run[t.dom] += delta;
                }
                if runnable {
                    nr_running[c.idx()] += 1;
                }
                if tracing && delta > 0 && longest[c.idx()].is_none_or(|(d, _)| delta > d) {
                    longest[c.idx()] = Some((delta, t.tid));
                }
            }
            if tracing && runnable {
                runnable_tids.push(t.tid);
            }
            let active = delta > 0 || runnable;
            let dom = &mut self.domains[t.dom];
            dom.threads += 1;
            if active {
                dom.active += 1;
            }
            tasks.push(TaskSample {
                id: *id,
                domain: dom.id,
                vcpu: t.vcpu,
                active,
                runnable_now: runnable,
                running: runnable,
                done: false,
                run_by_class: by_class,
                cpu,
                affinity: t.cur,
                ws_kb: 0,
            });
        }
        for id in gone {
            self.remove_thread(id, "exited");
        }
        for (di, d) in self.domains.iter_mut().enumerate() {
            d.fisb_ns += fast_idle.min(slow_run[di]);
        }
        self.stats.managed_max = self.stats.managed_max.max(tasks.len());
        let now = Nanos(signals::monotonic().saturating_sub(self.start).as_nanos() as u64);
        let snap = Snapshot {
            now,
            period: self.period,
            cpus: cpus
                .iter()
                .enumerate()
                .map(|(i, c)| CpuSample {
                    id: CpuId(i as u32),
                    busy: c.busy,
                    idle: c.idle,
                    noise: c.noise,
                    nr_running: nr_running[i],
                })
                .collect(),
            tasks,
            domains: self
                .domains
                .iter()
                .filter(|d| d.alive)
                .map(|d| {
                    let t = &self.targets[d.target];
                    DomainSample { id: d.id, weight: t.weight, priority: t.priority, fast_vcpus: t.fast_vcpus.clone() }
                })
                .collect(),
        };
        self.last_cpu = cpus;
        let mut changes = std::mem::take(&mut self.changes_buf);
        changes.clear();
        self.placer.place(&self.d.topo, &snap, &mut changes);
        self.sample_pool = snap.tasks;
        let r = self.apply(&changes);
        self.changes_buf = changes;
        self.stats.periods += 1;
        r?;
        if tracing {
            runnable_tids.sort_unstable();
            let on_cpu: Vec<Option<i32>> = longest.iter().map(|x| x.map(|(_, tid)| tid)).collect();
            self.trace_period(&on_cpu, &runnable_tids)?;
        }
        Ok(())
    }

    /// Record the period just ended in the `--trace` file.
    fn trace_period(&mut self, on_cpu: &[Option<i32>], runnable_tids: &[i32]) -> Result<(), AgentError> {
        let Some(tr) = self.trace.as_mut() else { return Ok(()) };
        let capacity: Vec<f64> =
            self.d.cpus.iter().zip(&self.last_cpu).map(|(c, f)| c.capacity * f.capacity_share()).collect();
        let n_fast = (0..self.d.topo.ncpus()).filter(|i| self.d.topo.is_fast(CpuId(*i as u32))).count().max(1);
        // The fast share is of the time since the last record (a period runs late now and then).
        let ts = boottime_ns();
        let since = self.trace_last_ts.map_or(self.period.0, |t| ts.saturating_sub(t));
        self.trace_last_ts = Some(ts);
        let span = (since * n_fast as u64).max(1) as f64;
        self.trace_fast_ns.resize(self.domains.len(), 0);
        let targets: Vec<(i32, f64, u32)> = self
            .domains
            .iter()
            .enumerate()
            .filter(|(_, d)| d.alive)
            .map(|(i, d)| (d.root, (d.fast_ns - self.trace_fast_ns[i]) as f64 / span, d.active as u32))
            .collect();
        for (i, d) in self.domains.iter().enumerate() {
            self.trace_fast_ns[i] = d.fast_ns;
        }
        let runnable = |tid: i32| runnable_tids.binary_search(&tid).is_ok();
        tr.period(
            ts,
            &PeriodSample {
                on_cpu,
                runnable: &runnable,
                capacity: &capacity,
                targets: &targets,
                changes_total: self.stats.changes,
            },
        )
    }

    fn apply(&mut self, changes: &[AffinityChange]) -> Result<(), AgentError> {
        // Resolve each change to a Linux mask within the thread's original affinity.
        let mut todo: Vec<(TaskId, CpuSet, CpuSet)> = Vec::new();
        for ch in changes {
            let Some(t) = self.threads.get(&ch.task) else { continue };
            if ch.mask.is_empty() || ch.mask == t.cur {
                continue;
            }
            let lin = self.d.to_linux(&ch.mask).and(&t.original);
            if lin.is_empty() {
                let (tid, orig) = (t.tid, t.original);
                self.warn_once(
                    format!("outside:{tid}"),
                    format!(
                        "thread {tid}: placer mask {} is outside its own affinity {}: skipped",
                        self.d.to_linux(&ch.mask).to_list(),
                        orig.to_list()
                    ),
                );
                if let Some(t) = self.threads.get_mut(&ch.task) {
                    t.cur = ch.mask;
                }
                continue;
            }
            todo.push((ch.task, ch.mask, lin));
        }
        if !self.dry {
            // The state file holds every thread about to be changed before the first change.
            let need = todo.iter().any(|(task, _, _)| self.threads.get(task).is_some_and(|t| !t.in_state))
                || self.threads.values().any(|t| t.touched && !t.in_state);
            if need {
                self.write_state()?;
            }
        }
        let mut vanished = Vec::new();
        for (task, mask, lin) in todo {
            let Some(t) = self.threads.get(&task) else { continue };
            let (tid, di) = (t.tid, t.dom);
            let r = self.act.set(tid, &lin);
            let result = match r {
                Ok(()) => {
                    self.stats.changes += 1;
                    let dom = &mut self.domains[di];
                    dom.changes += 1;
                    if !dom.applied.contains(&lin) {
                        dom.applied.push(lin);
                    }
                    if let Some(t) = self.threads.get_mut(&task) {
                        t.cur = mask;
                        // Restored on exit (a denied change changed nothing and is not).
                        t.touched |= !self.dry;
                    }
                    if let Some(tr) = self.trace.as_mut() {
                        let topo = &self.d.topo;
                        let fast = mask.iter().filter(|c| topo.is_fast(*c)).count() as f64 / mask.len().max(1) as f64;
                        tr.affinity(boottime_ns(), tid, fast);
                    }
                    if self.dry {
                        "dry-run"
                    } else {
                        "ok"
                    }
                }
                Err(e) => {
                    self.stats.errors += 1;
                    *self.errors_by_kind.entry(e.label()).or_insert(0) += 1;
                    if e == ActError::Vanished {
                        vanished.push(task);
                    } else if let Some(t) = self.threads.get_mut(&task) {
                        // Denied: skip, and do not ask again every period.
                        t.cur = mask;
                    }
                    e.label()
                }
            };
            if self.log.is_none() {
                continue;
            }
            let ev = json!({"event": "change", "target": self.domains[di].name, "tid": tid, "task": task.0,
                            "mask": mask.to_list(), "linux_mask": lin.to_list(), "result": result});
            self.log(ev);
        }
        for t in vanished {
            self.remove_thread(t, "vanished (ESRCH)");
        }
        Ok(())
    }

    fn render_metrics(&self) -> String {
        let mut expo = Exposition::new();
        let mut metric = |name: &str, kind: &str, help: &str, rows: Vec<(Labels, f64)>| {
            expo.add(name, if kind == "counter" { Kind::Counter } else { Kind::Gauge }, help, rows)
        };
        let l = |k: &str, v: String| (k.to_string(), v);
        let doms: Vec<&Domain> = self.domains.iter().collect();
        let per = |f: &dyn Fn(&Domain) -> f64| -> Vec<(Labels, f64)> {
            doms.iter().map(|d| (vec![l("target", d.name.clone())], f(d))).collect()
        };
        metric(
            "ampsched_fast_core_seconds_total",
            "counter",
            "Run time of the target's managed threads on fast-class CPUs.",
            per(&|d| d.fast_ns as f64 / 1e9),
        );
        metric(
            "ampsched_active_threads",
            "gauge",
            "Managed threads that ran or were runnable in the last period.",
            per(&|d| d.active as f64),
        );
        metric("ampsched_managed_threads", "gauge", "Threads under management.", per(&|d| d.threads as f64));
        metric(
            "ampsched_migrations_total",
            "counter",
            "Affinity changes the agent made to the target's threads.",
            per(&|d| d.changes as f64),
        );
        metric(
            "ampsched_fast_idle_slow_busy_seconds_total",
            "counter",
            "Estimated time a fast CPU was idle while the target ran on a slower CPU (per period: min(fast idle, target slow run)).",
            per(&|d| d.fisb_ns as f64 / 1e9),
        );
        metric(
            "ampsched_machine_fast_idle_slow_busy_seconds_total",
            "counter",
            "Estimated time a fast CPU was idle while a slower CPU was busy (per period: min(fast idle, slow busy)).",
            vec![(Vec::new(), self.fisb_machine_ns as f64 / 1e9)],
        );
        let last = self.stats.loop_wall_ns.last().copied().unwrap_or(0) as f64 / 1e9;
        let sum = self.stats.loop_wall_ns.iter().sum::<u64>() as f64 / 1e9;
        metric(
            "ampsched_loop_duration_seconds",
            "gauge",
            "Wall time of the last control-loop iteration.",
            vec![(Vec::new(), last)],
        );
        metric(
            "ampsched_loop_duration_seconds_sum",
            "gauge",
            "Wall time of all control-loop iterations.",
            vec![(Vec::new(), sum)],
        );
        metric(
            "ampsched_loop_cpu_seconds_total",
            "counter",
            "CPU time of the control loop.",
            vec![(Vec::new(), self.stats.loop_cpu_ns.iter().sum::<u64>() as f64 / 1e9)],
        );
        metric(
            "ampsched_periods_total",
            "counter",
            "Control periods run.",
            vec![(Vec::new(), self.stats.periods as f64)],
        );
        metric(
            "ampsched_affinity_errors_total",
            "counter",
            "Affinity changes that failed, by reason.",
            self.errors_by_kind.iter().map(|(k, v)| (vec![l("reason", k.to_string())], *v as f64)).collect(),
        );
        metric(
            "ampsched_cpu_effective_capacity",
            "gauge",
            "Capacity (fastest = 1024) left after irq, softirq, steal and real-time work in the last period.",
            self.d
                .cpus
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let share = self.last_cpu.get(i).map(|f| f.capacity_share()).unwrap_or(1.0);
                    (
                        vec![l("cpu", c.linux_id.to_string()), l("class", self.d.topo.classes[c.class].name.clone())],
                        c.capacity * share,
                    )
                })
                .collect(),
        );
        expo.encode()
    }

    /// Put back every affinity the agent changed; remove the state file. Returns failures.
    pub fn restore_all(&mut self) -> usize {
        if self.restored {
            return 0;
        }
        self.restored = true;
        let mut failed = 0;
        if !self.dry {
            let list: Vec<(TaskId, i32, CpuSet, bool)> =
                self.threads.iter().map(|(id, t)| (*id, t.tid, t.original, t.touched)).collect();
            for (task, tid, orig, touched) in list {
                if !touched {
                    continue;
                }
                let r = crate::actuate::set_affinity(tid, &orig);
                let result = match r {
                    Ok(()) | Err(ActError::Vanished) => "ok",
                    Err(e) => {
                        failed += 1;
                        eprintln!("ampsched: cannot restore thread {tid} to {}: {e}", orig.to_list());
                        e.label()
                    }
                };
                let ev =
                    json!({"event": "restore", "tid": tid, "task": task.0, "mask": orig.to_list(), "result": result});
                self.log(ev);
            }
            if self.state_written && failed == 0 {
                let _ = std::fs::remove_file(&self.state_path);
            }
        }
        if let Some(w) = self.log.as_mut() {
            let _ = w.flush();
        }
        failed
    }

    fn finished(&self) -> bool {
        if self.stop_with_first {
            return self.domains.iter().find(|d| d.child.is_some()).is_some_and(|d| d.exit.is_some() || !d.alive);
        }
        let persistent = self.targets.iter().any(|t| matches!(t.kind, TargetKind::Qmp(_) | TargetKind::QemuAll));
        !persistent && self.domains.iter().all(|d| !d.alive)
    }

    /// Launch commands and run until the targets end or a signal arrives; restore on the way out.
    pub fn run(mut self) -> Result<Outcome, AgentError> {
        signals::install();
        self.start = signals::monotonic();
        self.fd_limit = raise_fd_limit();
        self.launch()?;
        let cpu0 = signals::process_cpu();
        let period = Duration::from_nanos(self.period.0);
        let mut next = self.start;
        let mut result = Ok(());
        loop {
            if signals::pending().is_some() {
                break;
            }
            let (w0, c0) = (signals::monotonic(), signals::thread_cpu());
            if let Err(e) = self.step() {
                result = Err(e);
                break;
            }
            if let Some(m) = &self.metrics {
                m.publish(self.render_metrics());
            }
            if let Some(w) = self.log.as_mut() {
                let _ = w.flush();
            }
            let (w1, c1) = (signals::monotonic(), signals::thread_cpu());
            self.stats.loop_wall_ns.push((w1 - w0).as_nanos() as u64);
            self.stats.loop_cpu_ns.push((c1.saturating_sub(c0)).as_nanos() as u64);
            if self.finished() {
                break;
            }
            next += period;
            let now = signals::monotonic();
            if next < now {
                // Overran: skip to the next period boundary in the future.
                let behind = (now - next).as_nanos() / period.as_nanos().max(1) + 1;
                next += period * behind as u32;
            }
            if !signals::sleep_until(next) {
                break;
            }
        }
        self.stats.elapsed = signals::monotonic().saturating_sub(self.start);
        self.stats.process_cpu = signals::process_cpu().saturating_sub(cpu0);
        let failures = self.restore_all();
        if let Some(tr) = self.trace.as_mut() {
            let flushed = tr.flush();
            if result.is_ok() {
                result = flushed;
            }
        }
        let signal = signals::pending();
        if let Some(sig) = signal {
            self.stop_children(sig);
        }
        result?;
        let first_command = self.domains.iter().find(|d| d.child.is_some()).and_then(|d| d.exit);
        Ok(Outcome { first_command, signal, restore_failures: failures, stats: std::mem::take(&mut self.stats) })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Covers early returns and panics unwinding through the loop.
        self.restore_all();
        if let Some(tr) = self.trace.as_mut() {
            let _ = tr.flush();
        }
    }
}

/// vCPU threads of a QEMU process found by name (`CPU n/KVM`, `CPU n/TCG`): tid → vCPU index.
pub fn vcpus_by_name(proc_root: &Path, pid: i32) -> BTreeMap<i32, u32> {
    let mut out = BTreeMap::new();
    for tid in list_tids(proc_root, pid) {
        let p = proc_root.join(pid.to_string()).join("task").join(tid.to_string()).join("comm");
        if let Some(i) = std::fs::read_to_string(p).ok().and_then(|c| parse_vcpu_thread_name(&c)) {
            out.insert(tid, i);
        }
    }
    out
}

/// A QEMU guest's name from `-name guest=X,…` or `-name X`, else its pid.
pub fn guest_name(proc_root: &Path, pid: i32) -> String {
    let args = cmdline(proc_root, pid);
    let name = args.iter().position(|a| a == "-name").and_then(|i| args.get(i + 1)).map(|v| {
        let first = v.split(',').next().unwrap_or(v);
        first.strip_prefix("guest=").unwrap_or(first).to_string()
    });
    name.filter(|n| !n.is_empty()).unwrap_or_else(|| format!("pid{pid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn period_parameter_names() {
        assert_eq!(period_param("aash"), Some("period_ms"));
        assert_eq!(period_param("capability"), Some("interval_ms"));
        assert_eq!(period_param("fast-first"), Some("interval_ms"));
        assert_eq!(period_param("magic"), None);
    }

    #[test]
    fn guest_names_and_vcpu_threads_from_a_fixture_proc() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("77");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join("cmdline"), b"qemu-system-x86_64\0-name\0guest=web,debug-threads=on\0").unwrap();
        assert_eq!(guest_name(d.path(), 77), "web");
        for (tid, comm) in [(77, "qemu-system-x86"), (78, "CPU 0/TCG"), (79, "CPU 1/TCG"), (80, "worker")] {
            let t = base.join("task").join(tid.to_string());
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("comm"), format!("{comm}\n")).unwrap();
        }
        let v = vcpus_by_name(d.path(), 77);
        assert_eq!(v.into_iter().collect::<Vec<_>>(), vec![(78, 0), (79, 1)]);
        assert_eq!(guest_name(d.path(), 5), "pid5");
    }

    /// An actuator whose changes all fail with one error (and are counted per thread).
    struct Failing {
        err: ActError,
        calls: std::rc::Rc<std::cell::RefCell<Vec<i32>>>,
    }

    impl Actuator for Failing {
        fn get(&self, tid: i32) -> Result<CpuSet, ActError> {
            crate::actuate::get_affinity(tid)
        }
        fn set(&mut self, tid: i32, _mask: &CpuSet) -> Result<(), ActError> {
            self.calls.borrow_mut().push(tid);
            Err(self.err)
        }
        fn dry_run(&self) -> bool {
            false
        }
    }

    /// An agent on a CPU-bound child (`sh` busy loop), CPU 0 fast, whose changes fail with `err`.
    fn failing_agent(
        err: ActError,
        dir: &Path,
    ) -> (Agent, std::process::Child, std::rc::Rc<std::cell::RefCell<Vec<i32>>>) {
        let child = Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        let ov = crate::Overrides { fast: Some(CpuSet::parse_list("0").unwrap()), ..Default::default() };
        let discovered = crate::discover(Path::new("/"), &ov).unwrap();
        let target = Target {
            name: "busy".into(),
            kind: TargetKind::Pid(child.id() as i32),
            children: false,
            weight: 256,
            priority: ampsched_model::spec::PriorityClass::Normal,
            fast_vcpus: None,
        };
        let mut agent = Agent::new(AgentOptions {
            discovered,
            placer: PolicySpec { name: "aash".into(), params: Default::default() },
            period_ms: 30.0,
            rescan_ms: 500.0,
            dry_run: false,
            state_path: dir.join("state.json"),
            metrics: None,
            log: None,
            targets: vec![target],
            proc_root: PathBuf::from("/proc"),
            stop_with_first_command: false,
            trace: None,
        })
        .unwrap();
        let calls = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        agent.act = Box::new(Failing { err, calls: calls.clone() });
        agent.launch().unwrap();
        (agent, child, calls)
    }

    #[test]
    fn a_vanished_or_denied_change_is_counted_and_skipped_never_fatal() {
        if crate::discover(Path::new("/"), &crate::Overrides::default()).map(|d| d.linux_ids.len()).unwrap_or(0) < 2 {
            eprintln!("skipped: needs 2 online CPUs");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        // Denied (EPERM): the busy thread is granted the fast CPU (mask {0}) in the first period;
        // the change fails, is counted, and is not asked again in the next 5 periods (the thread
        // stays managed, its placer mask taken as applied).
        let (mut a, mut child, calls) = failing_agent(ActError::Denied, d.path());
        for _ in 0..6 {
            a.step().unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        let tid = child.id() as i32;
        assert_eq!(calls.borrow().iter().filter(|t| **t == tid).count(), 1, "{:?}", calls.borrow());
        assert_eq!(a.errors_by_kind.get("eperm"), Some(&1));
        assert!(a.by_tid.contains_key(&tid), "a denied thread stays under management");
        // Nothing was changed, so nothing is restored and the state file goes away.
        assert_eq!(a.restore_all(), 0);
        assert!(!d.path().join("state.json").exists());
        drop(a);
        child.kill().unwrap();
        child.wait().unwrap();

        // Vanished (ESRCH): the thread is dropped from management at once; the process is
        // still there, so the next period finds it again (a new task) and tries again.
        let (mut a, mut child, calls) = failing_agent(ActError::Vanished, d.path());
        let tid = child.id() as i32;
        a.step().unwrap();
        assert_eq!(calls.borrow().len(), 1);
        assert!(!a.by_tid.contains_key(&tid), "a vanished thread is no longer managed");
        a.step().unwrap();
        assert_eq!(a.errors_by_kind.get("esrch"), Some(&2), "re-found and tried again");
        assert_eq!(a.stats.errors, 2);
        assert_eq!(a.restore_all(), 0);
        drop(a);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn stat_is_read_only_when_schedstat_cannot_tell() {
        // Period 30 ms, burst threshold 30 / 8 = 3.75 ms.
        let burst = 30_000_000 / STAT_BURST_DIV;
        // Never read, or runnable at the last read: always.
        assert!(want_stat('?', false, 0, burst, true, 1, 0));
        assert!(want_stat('R', false, 0, burst, true, 1, 0));
        // Asleep and nothing moved: still asleep on the same CPU.
        assert!(!want_stat('S', false, 0, burst, false, 0, 0));
        // Woke and ran or waited ≥ 3.75 ms: may still be runnable.
        assert!(want_stat('S', true, 4_000_000, burst, true, 1, 0));
        // A 200 µs burst in a one-class mask: its class is the mask's, no read.
        assert!(!want_stat('S', true, 200_000, burst, true, 0, 0));
        // The same burst with a mask over both classes: read every 8th period, staggered by task:
        // (period 5 + task 3) = 8 ≡ 0 (mod 8) → read; period 6 → not.
        assert!(want_stat('S', true, 200_000, burst, false, 5, 3));
        assert!(!want_stat('S', true, 200_000, burst, false, 6, 3));
    }

    #[test]
    fn class_of_a_mask() {
        // 1 fast CPU (class 0) + 3 slow (class 1).
        let topo = ampsched_model::Topology::fast_slow(1, 2.0, 3, 1.0, 4);
        let ids = |v: &[u32]| CpuSet::from_cpus(v.iter().map(|c| CpuId(*c)));
        assert_eq!(class_of_mask(&topo, &ids(&[0])), Some(topo.fast_class));
        assert_eq!(class_of_mask(&topo, &ids(&[1, 3])), Some(topo.cpus[1].class));
        assert_eq!(class_of_mask(&topo, &ids(&[0, 1])), None);
        assert_eq!(class_of_mask(&topo, &CpuSet::new()), None);
    }

    #[test]
    fn stats_summary() {
        let s = LoopStats {
            periods: 3,
            loop_cpu_ns: vec![100_000, 300_000, 200_000],
            loop_wall_ns: vec![1_000, 2_000, 3_000],
            elapsed: Duration::from_secs(1),
            process_cpu: Duration::from_millis(10),
            ..Default::default()
        };
        let j = s.to_json();
        // median of 100, 200, 300 µs = 200 µs; 10 ms of 1 s = 1 %.
        assert_eq!(j["loop_cpu_us_median"], 200.0);
        assert_eq!(j["agent_cpu_pct_of_one_cpu"], 1.0);
    }
}
