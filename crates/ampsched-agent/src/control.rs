//! The control loop: a thin loop over the agent's parts, each testable
//! without root (a fixture `/proc` and a fake [`Actuator`]):
//! - clock ([`crate::clock`]): period deadlines, elapsed time per sample;
//! - inventory ([`crate::inventory`]): launch, discovery rescans (every
//!   `rescan_ms`, and in the period after a launched job forks a process:
//!   [`crate::forks`]), thread lists every period; a fork record read as it
//!   comes (its ring wakes the loop while some thread is narrowed) gives a
//!   task that inherited a mask the agent applied to its parent the job's
//!   own mask back at once;
//! - observe ([`crate::observe`]): per CPU and per thread samples → the
//!   placer's [`ampsched_policy::Snapshot`];
//! - decide ([`crate::decide`]): the placer through the shared placer bridge
//!   (`ampsched_policy::placer_bridge`, the simulator runs the same) →
//!   effective masks;
//! - cooperate ([`ampsched_policy::gate::cooperate`]): those masks only while managed
//!   threads contend for the fast CPUs, else every narrowed thread widened
//!   back to its own mask (Linux places a lone thread well by itself), a heavy
//!   runnable one kept on the slow CPUs first moved onto a free fast CPU
//!   (widening does not move a running thread);
//! - back-off ([`ampsched_policy::gate::backoff`]): each group's progress measured in short
//!   hands-off windows interleaved with managed ones; a group whose placement
//!   does worse than the kernel alone is left to the kernel (probed again);
//! - apply ([`crate::apply`]): `sched_setaffinity`, with the state file of
//!   originals written before the first change and everything restored on
//!   exit;
//! - export ([`crate::export`]): decision log, metrics, trace, sample
//!   recording.
//!
//! The loop's thread keeps off CPUs busy with real-time work ([`crate::selfplace`]): there
//! no nice value shortens its wait.
//! The loop's thread runs at nice -20 where it may ([`urgent_loop_thread`]): its wake-ups
//! (each period, an idle fast CPU) should not wait behind the managed threads, and under
//! EEVDF a waking thread preempts the running one when its virtual deadline is earlier
//! (kernel/sched/fair.c `check_preempt_wakeup_fair` → `pick_eevdf`); a thread's virtual
//! slice shrinks with its weight (`calc_delta_fair`), nice -20 weighing 88761 against nice 0's
//! 1024 (`sched_prio_to_weight`). Measured: the loop of a period took 2.1 ms of wall time
//! (median) for 0.2 ms of CPU with two CPU-bound threads managed, the rest waiting to run.
//! Not a real-time policy: tried, `SCHED_FIFO` 1 made the reaping of a finished job
//! (`wait4`) take 0.95 s — a kernel busy-wait on that CPU starved until RT throttling
//! (`sched_rt_runtime_us`, 950 ms of each second) let the other side run.
//!
//! Per period (default 30 ms): inventory → observe → decide → cooperate → back-off → apply →
//! export, then sleep to the next deadline (cooperate, back-off and the order of the changes
//! are one call, `ampsched_policy::gate::body::Body::period`, which the simulator's `[agent]`
//! body runs too). ESRCH and EPERM are logged and
//! skipped. On exit (normal, SIGINT, SIGTERM, SIGHUP, target exit, or a panic
//! unwinding through the loop) every changed thread gets its original back
//! and the state file is removed.

use crate::actuate::{Actuator, DryRun, LinuxActuator, Remembering};
use crate::apply::Applier;
use crate::clock::Clock;
use crate::config::{Target, TargetKind};
use crate::decide::Decider;
use crate::discovery::Discovered;
use crate::events::{EventSource, IdleSwitch, PendingFormat};
use crate::export::{Export, MetricsView};
use crate::forks::{free_forked, ForkWatch};
use crate::inventory::Inventory;
pub use crate::loopstats::LoopStats;
use crate::metrics::MetricsServer;
use crate::observe::Observer;
use crate::sampler::CpuSampler;
use crate::selfplace::OwnPlace;
use crate::signals;
use crate::state;
use crate::trace::AgentTrace;
use crate::AgentError;
use ampsched_model::spec::PolicySpec;
use ampsched_model::Nanos;
use ampsched_policy::gate::backoff::BackoffParams;
use ampsched_policy::gate::body::Body;
use ampsched_policy::gate::cooperate::{fast_set, kept_from_fast, on_idle_fast_cpu, Confined};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

pub use crate::decide::period_param;
pub use crate::inventory::{guest_name, vcpus_by_name, CHILD_GRACE};
pub use crate::observe::{class_of_mask, want_stat, STAT_BURST_DIV, STAT_REFRESH_EVERY};

/// Default control period, ms (one credit accounting period, as AASH).
pub const DEFAULT_PERIOD_MS: f64 = 30.0;
/// Default interval between rescans for new processes and VMs, ms.
pub const DEFAULT_RESCAN_MS: f64 = 500.0;

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
    /// Record the placer's input here, one snapshot a line (`--record-samples`).
    pub record_samples: Option<PathBuf>,
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

/// The figures export shows, borrowed field by field (so `self.ex` stays free to borrow).
macro_rules! view {
    ($a:expr) => {
        MetricsView {
            d: &$a.d,
            domains: &$a.inv.domains,
            last_cpu: &$a.obs.last_cpu,
            fisb_machine_ns: $a.obs.fisb_machine_ns,
            stats: &$a.stats,
            errors_by_kind: &$a.app.errors_by_kind,
            period: $a.period,
        }
    };
}

/// The running agent.
pub struct Agent {
    d: Discovered,
    clock: Clock,
    inv: Inventory,
    obs: Observer,
    dec: Decider,
    /// This period's changes after [`cooperate`] (reused).
    coop: Vec<ampsched_policy::AffinityChange>,
    app: Applier,
    ex: Export,
    period: Nanos,
    stop_with_first: bool,
    stats: LoopStats,
    /// Idle-switch events of the fast CPUs (`None`: periodic only).
    events: Option<EventSource>,
    /// Whether opening the events was tried (they are opened when first wanted).
    events_tried: bool,
    /// `sched_switch`'s format being read off the loop (the events open when it is in).
    events_pending: Option<PendingFormat>,
    idle: Vec<IdleSwitch>,
    /// When the last change was applied (monotonic ns): idle switches before it may be the
    /// agent's own migrations and are not reacted to.
    applied_at_ns: u64,
    /// The gate and the per-group measurement of the agent against the kernel alone
    /// (`ampsched_policy::gate::body`).
    backoff: Body,
    /// Fork records of the launched jobs (`crate::forks`) with their domain, and a buffer for them.
    forks: Vec<(usize, ForkWatch)>,
    forked: Vec<crate::forks::Fork>,
    /// A launched job forked a process since the last period (the rescan is brought forward).
    forked_process: bool,
    /// Some managed thread has a mask narrower than its own (set by [`Agent::rearm`]): only
    /// then can a fork inherit one of the agent's masks, so only then do the fork rings wake
    /// the loop (`crate::forks`).
    narrowed: bool,
    /// The loop thread's own placement, off CPUs busy with real-time work (`crate::selfplace`;
    /// `None` in a dry run or before [`Agent::run`]).
    own: Option<OwnPlace>,
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

/// Give the calling thread nice -20 (module doc); the error says what is missing
/// (`CAP_SYS_NICE`, or an `RLIMIT_NICE` of 40).
pub fn urgent_loop_thread() -> Result<(), String> {
    let tid = signals::gettid();
    // SAFETY: setpriority on our own thread id (Linux applies PRIO_PROCESS to one thread).
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -20) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => format!("setpriority(nice -20): {e}: needs CAP_SYS_NICE or RLIMIT_NICE 40"),
        _ => format!("setpriority(nice -20): {e}"),
    })
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
            record_samples,
        } = opts;
        if !(1.0..=60_000.0).contains(&period_ms) {
            return Err(AgentError::new(format!("period: must be in [1, 60000] ms, got {period_ms}")));
        }
        let dec = Decider::new(&placer, period_ms, &discovered.topo)?;
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
        let mut ex = Export::quiet();
        if let Some(a) = metrics {
            ex.metrics = Some(MetricsServer::start(&a)?);
        }
        ex.open_log(log.as_deref(), dry_run)?;
        let cpu = CpuSampler::new(&proc_root, &discovered.linux_ids)?;
        if let Some(p) = &trace {
            ex.trace = Some(AgentTrace::create(p, discovered.topo.ncpus())?);
        }
        if let Some(p) = &record_samples {
            ex.open_recording(p, &discovered.topo, dec.name())?;
        }
        let act: Box<dyn Actuator> =
            if dry_run { Box::new(DryRun::default()) } else { Box::new(Remembering::new(LinuxActuator)) };
        let period = dec.period();
        let start = signals::monotonic();
        Ok(Agent {
            clock: Clock::new(start, Duration::from_nanos(period.0)),
            d: discovered,
            inv: Inventory::new(proc_root, targets, ms_to_dur(rescan_ms)),
            obs: Observer::new(cpu),
            dec,
            coop: Vec::new(),
            app: Applier::new(act, state_path),
            ex,
            period,
            stop_with_first: stop_with_first_command,
            stats: LoopStats::default(),
            events: None,
            events_tried: false,
            events_pending: None,
            idle: Vec::new(),
            applied_at_ns: 0,
            backoff: Body::new(Some(BackoffParams::default())),
            forks: Vec::new(),
            forked: Vec::new(),
            forked_process: false,
            narrowed: false,
            own: None,
        })
    }

    /// The metrics endpoint's address, when enabled.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.ex.metrics.as_ref().map(|m| m.local_addr())
    }

    /// Start attaching the idle-switch events of the fast CPUs: their format is read off the
    /// loop ([`PendingFormat`]); [`Agent::open_events`] attaches them once it is in.
    fn start_events(&mut self) {
        let fast = fast_set(&self.d.topo);
        if fast.is_empty() || fast.len() == self.d.topo.ncpus() {
            return;
        }
        self.events_pending = Some(PendingFormat::start());
    }

    /// Attach the events once their format is in, or say once why the agent stays periodic.
    fn open_events(&mut self) {
        let Some(format) = self.events_pending.as_ref().and_then(|p| p.poll()) else { return };
        self.events_pending = None;
        let fast: Vec<u32> =
            fast_set(&self.d.topo).iter().filter_map(|c| self.d.linux_ids.get(c.idx()).copied()).collect();
        match crate::events::open(&fast, signals::gettid(), format) {
            Ok(ev) => {
                self.ex.log(serde_json::json!({"event": "events", "source": "sched_switch", "cpus": fast}));
                self.events = Some(ev);
            }
            Err(e) => {
                let ms = self.period.0 as f64 / 1e6;
                eprintln!("ampsched: scheduler events unavailable ({e}); reacting every period ({ms} ms) only");
                self.ex.log(serde_json::json!({"event": "events", "source": "periodic", "reason": e}));
            }
        }
    }

    /// Launch the commands to manage.
    fn launch(&mut self) -> Result<(), AgentError> {
        self.inv.launch(&mut self.ex, self.app.actuator())?;
        // Follow the forks of each launched job whose descendants are managed (`crate::forks`),
        // on every online CPU (the job may run outside the managed ones).
        let cpus: Vec<u32> = crate::discovery::online_cpus(std::path::Path::new("/"))
            .map(|s| s.iter().map(|c| c.0).collect())
            .unwrap_or_else(|_| self.d.linux_ids.clone());
        for (di, d) in self.inv.domains.iter().enumerate() {
            let (Some(c), true) = (d.child.as_ref(), self.inv.targets[d.target].children) else { continue };
            match ForkWatch::open(c.id() as i32, &cpus) {
                Ok(w) => self.forks.push((di, w)),
                Err(e) => self.ex.log(serde_json::json!({"event": "forks", "source": "rescan", "target": d.name,
                    "reason": format!("perf_event_open(dummy, inherit): {e}")})),
            }
        }
        Ok(())
    }

    /// Read the launched jobs' fork records (as they come, from [`Agent::sleep_until`], and at
    /// the start of each period): a task that inherited a mask the agent applied to the thread
    /// that forked it gets its job's own mask back now (`crate::forks`: the placer's decision
    /// was for the parent, not for the child); a new process brings the rescan forward.
    fn take_forks(&mut self) {
        let dry = self.app.actuator().dry_run();
        for (di, w) in &mut self.forks {
            w.drain(&mut self.forked);
            self.forked_process |= self.forked.iter().any(|f| f.new_process());
            let Some(dom) = self.inv.domains.get(*di).filter(|_| !dry && !self.forked.is_empty()) else { continue };
            let freed = free_forked(&self.forked, &dom.applied, &dom.base_mask, self.app.actuator_mut());
            self.stats.forks_freed += freed;
        }
    }

    /// Rescan in this period when a launched job forked a process since the last one.
    fn follow_forks(&mut self) {
        self.take_forks();
        if std::mem::take(&mut self.forked_process) {
            self.stats.fork_rescans += 1;
            self.inv.rescan_soon();
        }
    }

    /// One period: inventory, observe, decide, apply, export.
    fn step(&mut self) -> Result<(), AgentError> {
        self.follow_forks();
        let now_mono = signals::monotonic();
        self.inv.update(&mut self.ex, self.app.actuator(), &self.d, now_mono);
        let elapsed = self.clock.sample(signals::monotonic());
        let now = self.clock.since_start(signals::monotonic());
        let obs = self.obs.observe(&mut self.inv, &self.d, &mut self.ex, &mut self.stats, now, elapsed, self.period);
        if let Some(m) = self.own.as_mut().and_then(|o| o.update(&self.d.linux_ids, &self.obs.last_cpu)) {
            self.stats.loop_moves += 1;
            self.ex.log(serde_json::json!({"event": "loop-cpus", "cpus": m.to_list()}));
        }
        self.ex.record(&obs.snap)?;
        let decided = self.dec.decide(&self.d.topo, &obs.snap);
        // SAFETY: no preconditions.
        let me = u32::try_from(unsafe { libc::sched_getcpu() }).ok().and_then(|c| self.d.topo_id(c));
        // The gate, the back-off and the order: the simulator's `[agent]` body runs the same.
        let p = self.backoff.period(&self.d.topo, &obs.snap, decided, me, &mut self.coop);
        self.stats.contended_periods += u64::from(p.contended);
        self.stats.light_freed += p.light as u64;
        self.stats.released_moves += p.released as u64;
        self.back_off();
        let r = self.app.apply(&self.coop, &mut self.inv, &self.d, &mut self.ex, &mut self.stats);
        self.obs.recycle(obs.snap);
        self.stats.periods += 1;
        r?;
        if self.ex.trace.is_some() {
            self.ex.trace_period(&view!(self), &obs.on_cpu, &obs.runnable_tids)?;
        }
        Ok(())
    }

    /// Do no harm (`ampsched_policy::gate::backoff`, run by the body's period): count and log
    /// the period's verdicts and show each group's mode.
    fn back_off(&mut self) {
        for t in self.backoff.transitions().to_vec() {
            if t.backed_off {
                self.stats.backoffs += 1;
            } else {
                self.stats.backoff_returns += 1;
            }
            let name = self.inv.domains.get(t.group).map(|d| d.name.clone()).unwrap_or_default();
            self.ex.log(serde_json::json!({"event": if t.backed_off { "back-off" } else { "back-on" },
                "target": name, "progress_managed": t.managed, "progress_hands_off": t.hands_off}));
        }
        let Some(bo) = self.backoff.backoff() else { return };
        let mut any = false;
        for (g, dom) in self.inv.domains.iter_mut().enumerate() {
            dom.hands_off = bo.hands_off(g);
            dom.backed_off = bo.backed_off(g);
            dom.backoffs = bo.backoffs(g);
            dom.progress_ratio = bo.ratio(g);
            any |= dom.hands_off && dom.alive;
        }
        self.stats.hands_off_periods += u64::from(any);
        self.stats.skipped_probes = bo.skipped_probes();
    }

    /// Put back every affinity the agent changed; remove the state file. Returns failures.
    pub fn restore_all(&mut self) -> usize {
        let failed = self.app.restore_all(&self.inv, &mut self.ex);
        self.ex.flush_log();
        failed
    }

    /// Sleep to `next`; false when the run should end now (a stop signal, or the job ended:
    /// a launched command's exit wakes the sleep through its pidfd, so `run` ends without
    /// waiting a period). A fast CPU going idle wakes it too ([`Agent::react`]).
    fn sleep_until(&mut self, next: Duration) -> bool {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let poll_in = |fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        loop {
            fds.clear();
            fds.extend(self.inv.child_fds().map(poll_in));
            let children = fds.len();
            if self.narrowed {
                fds.extend(self.forks.iter().flat_map(|(_, w)| w.fds()).map(poll_in));
            }
            let forks = fds.len();
            if let Some(ev) = self.events.as_ref().filter(|e| e.armed()) {
                fds.extend(ev.fds().map(poll_in));
            }
            match signals::wait_until(next, &mut fds) {
                signals::Wake::Stop => return false,
                signals::Wake::Deadline => return true,
                signals::Wake::Ready => {
                    if fds[..children].iter().any(|p| p.revents != 0) {
                        self.inv.reap();
                        if self.inv.finished(self.stop_with_first) {
                            return false;
                        }
                    }
                    if fds[children..forks].iter().any(|p| p.revents != 0) {
                        self.take_forks();
                    }
                    if fds[forks..].iter().any(|p| p.revents != 0) {
                        self.react();
                    }
                }
            }
            if signals::monotonic() >= next {
                return true;
            }
        }
    }

    /// Enable the idle-switch events only while some thread is kept from a fast CPU it may use.
    /// The events are opened the first time they are wanted (a job that never confines a
    /// thread, such as a short one, never pays for them).
    fn rearm(&mut self) {
        let fast = fast_set(&self.d.topo);
        let d = &self.d;
        let want = self.inv.threads.values().any(|t| kept_from_fast(&fast, &t.cur, &d.from_linux(&t.original)));
        self.narrowed = self.inv.threads.values().any(|t| t.cur != d.from_linux(&t.original));
        if want && !self.events_tried {
            self.events_tried = true;
            self.start_events();
        }
        if self.events_pending.is_some() {
            self.open_events();
        }
        let Some(ev) = self.events.as_mut() else { return };
        ev.arm(want);
        self.applied_at_ns = signals::monotonic().as_nanos() as u64;
    }

    /// A fast CPU went idle (scheduler event): move a runnable thread kept from it onto it and
    /// widen every narrowed thread (`cooperate::on_idle_fast_cpu`); the reaction time, from the
    /// switch to the idle task to the change in force, goes into the loop figures.
    fn react(&mut self) {
        let Some(ev) = self.events.as_mut() else { return };
        ev.drain(&mut self.idle);
        self.stats.idle_events += self.idle.len() as u64;
        let Some(sw) = self.idle.iter().rev().find(|s| s.to_idle() && s.time_ns > self.applied_at_ns).copied() else {
            return;
        };
        let Some(cpu) = self.d.topo_id(sw.cpu) else { return };
        let mut threads = Vec::new();
        for (id, t) in self.inv.threads.iter_mut() {
            let allowed = self.d.from_linux(&t.original);
            let runnable = t.cur != allowed
                && !t.cur.contains(cpu)
                && t.stat.read().ok().and_then(crate::procfs::parse_stat).is_some_and(|st| st.state == 'R');
            threads.push(Confined { task: *id, cur: t.cur, allowed, runnable });
        }
        let mut changes = Vec::new();
        let mover = on_idle_fast_cpu(cpu, &threads, &mut changes);
        // In order: the move, then the widening (the mover's own mask last).
        for ch in &changes {
            let _ = self.app.apply(std::slice::from_ref(ch), &mut self.inv, &self.d, &mut self.ex, &mut self.stats);
        }
        let now = signals::monotonic().as_nanos() as u64;
        if let Some(task) = mover {
            let us = now.saturating_sub(sw.time_ns);
            self.stats.reaction_ns.push(us);
            if self.ex.logging() {
                let tid = self.inv.threads.get(&task).map(|t| t.tid);
                self.ex.log(serde_json::json!({"event": "idle-fast-cpu", "cpu": sw.cpu, "moved_tid": tid,
                                               "reaction_us": us as f64 / 1e3}));
            }
        } else {
            self.stats.idle_no_candidate += 1;
        }
        self.rearm();
    }

    /// Launch commands and run until the targets end or a signal arrives; restore on the way out.
    pub fn run(mut self) -> Result<Outcome, AgentError> {
        signals::install();
        let start = signals::monotonic();
        self.clock = Clock::new(start, Duration::from_nanos(self.period.0));
        self.ex.set_start(start);
        self.inv.fd_limit = raise_fd_limit();
        self.launch()?;
        // After the launch: the commands keep the nice they were given (module doc).
        match urgent_loop_thread() {
            Ok(()) => self.ex.log(serde_json::json!({"event": "loop-priority", "nice": -20})),
            Err(e) => self.ex.log(serde_json::json!({"event": "loop-priority", "nice": 0, "reason": e})),
        }
        // After the launch too (no job inherits it): the loop keeps off RT-loaded CPUs.
        if !self.app.actuator().dry_run() {
            self.own = OwnPlace::of_this_thread();
        }
        let cpu0 = signals::process_cpu();
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
            self.rearm();
            self.ex.publish(&view!(self));
            self.ex.flush_log();
            let (w1, c1) = (signals::monotonic(), signals::thread_cpu());
            self.stats.loop_wall_ns.push((w1 - w0).as_nanos() as u64);
            self.stats.loop_cpu_ns.push((c1.saturating_sub(c0)).as_nanos() as u64);
            if self.inv.finished(self.stop_with_first) {
                break;
            }
            let next = self.clock.next_deadline(signals::monotonic());
            if !self.sleep_until(next) {
                break;
            }
        }
        self.stats.elapsed = signals::monotonic().saturating_sub(start);
        self.stats.process_cpu = signals::process_cpu().saturating_sub(cpu0);
        self.ex.trace_final(self.stats.changes);
        let failures = self.restore_all();
        if let Some(o) = self.own.as_mut() {
            o.restore();
        }
        if let Some(ev) = self.events.take() {
            ev.close_detached();
        }
        let flushed = self.ex.flush();
        if result.is_ok() {
            result = flushed;
        }
        let signal = signals::pending();
        if let Some(sig) = signal {
            self.inv.stop_children(sig);
        }
        result?;
        Ok(Outcome {
            first_command: self.inv.first_command_exit(),
            signal,
            restore_failures: failures,
            stats: std::mem::take(&mut self.stats),
        })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Covers early returns and panics unwinding through the loop (on the loop's thread:
        // `run` owns the agent, so the loop thread's own mask is put back on the right thread).
        self.restore_all();
        if let Some(o) = self.own.as_mut() {
            o.restore();
        }
        let _ = self.ex.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actuate::ActError;
    use ampsched_model::CpuSet;
    use std::path::Path;
    use std::process::Command;

    #[test]
    fn the_loop_thread_gets_nice_minus_20_and_no_other_thread_does() {
        // On a thread of its own (nice is per thread on Linux): -20 as root, the test's own
        // thread unchanged. Unprivileged: the error names CAP_SYS_NICE and nothing changes.
        let nice = |tid: i32| {
            // SAFETY: getpriority of a thread of this process; errno cleared first (-1 is a nice).
            unsafe {
                *libc::__errno_location() = 0;
                libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t)
            }
        };
        let me = nice(signals::gettid());
        let (r, it) = std::thread::spawn(move || (urgent_loop_thread(), nice(signals::gettid()))).join().unwrap();
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!((r, it), (Ok(()), -20));
        } else {
            assert!(r.as_ref().is_err_and(|e| e.contains("CAP_SYS_NICE")), "{r:?}");
            assert_eq!(it, me);
        }
        assert_eq!(nice(signals::gettid()), me);
    }

    /// Calls of an actuator: (tid, Linux mask).
    type Calls = std::rc::Rc<std::cell::RefCell<Vec<(i32, CpuSet)>>>;

    /// An actuator whose changes all fail with one error (and are recorded).
    struct Failing {
        err: ActError,
        calls: Calls,
    }

    impl Actuator for Failing {
        fn get(&self, tid: i32) -> Result<CpuSet, ActError> {
            crate::actuate::get_affinity(tid)
        }
        fn set(&mut self, tid: i32, mask: &CpuSet) -> Result<(), ActError> {
            self.calls.borrow_mut().push((tid, *mask));
            Err(self.err)
        }
        fn dry_run(&self) -> bool {
            false
        }
    }

    /// An agent on two CPU-bound processes (`sh` busy loops: two runnable threads for one fast
    /// CPU, so the placer's masks are put in force), CPU 0 fast, whose changes fail with `err`.
    fn failing_agent(err: ActError, dir: &Path) -> (Agent, Busy, Calls) {
        let children =
            Busy((0..2).map(|_| Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap()).collect());
        // The loops inherit the test's nice (19 under a niced `cargo test`); on a loaded machine
        // they then get too little CPU to count as contending (`cooperate::heavy`) and no mask is
        // ever asked. Back to nice 0 where allowed (root: CAP_SYS_NICE); otherwise as inherited.
        for c in children.iter() {
            // SAFETY: setpriority on a child process this test spawned and still owns.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, c.id() as libc::id_t, 0) };
        }
        let ov = crate::Overrides { fast: Some(CpuSet::parse_list("0").unwrap()), ..Default::default() };
        let discovered = crate::discover(Path::new("/"), &ov).unwrap();
        let targets = children
            .iter()
            .enumerate()
            .map(|(i, c)| Target {
                name: format!("busy{i}"),
                kind: TargetKind::Pid(c.id() as i32),
                children: false,
                weight: 256,
                priority: ampsched_model::spec::PriorityClass::Normal,
                fast_vcpus: None,
            })
            .collect();
        let mut agent = Agent::new(AgentOptions {
            discovered,
            placer: PolicySpec { name: "aash".into(), params: Default::default() },
            period_ms: 30.0,
            rescan_ms: 500.0,
            dry_run: false,
            state_path: dir.join("state.json"),
            metrics: None,
            log: None,
            targets,
            proc_root: PathBuf::from("/proc"),
            stop_with_first_command: false,
            trace: None,
            record_samples: None,
        })
        .unwrap();
        let calls = Calls::default();
        agent.app = Applier::new(Box::new(Failing { err, calls: calls.clone() }), dir.join("state.json"));
        agent.launch().unwrap();
        // Both loops are running before the first period (so both are seen runnable): each has
        // run 5 ms (however loaded the machine, within a minute).
        let ran = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
                .ok()
                .and_then(|s| crate::procfs::parse_schedstat(&s))
                .is_some_and(|s| s.0 > 5_000_000)
        };
        let t0 = std::time::Instant::now();
        while !children.iter().all(|c| ran(c.id())) && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
        (agent, children, calls)
    }

    /// Busy-loop children, killed and reaped when dropped — also when an assertion fails
    /// first, so a failing test never leaves a spinning process behind.
    struct Busy(Vec<std::process::Child>);

    impl std::ops::Deref for Busy {
        type Target = [std::process::Child];
        fn deref(&self) -> &Self::Target {
            &self.0
        }
    }

    impl Drop for Busy {
        fn drop(&mut self) {
            for c in &mut self.0 {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    #[test]
    fn a_vanished_or_denied_change_is_counted_and_skipped_never_fatal() {
        if crate::discover(Path::new("/"), &crate::Overrides::default()).map(|d| d.linux_ids.len()).unwrap_or(0) < 2 {
            eprintln!("skipped: needs 2 online CPUs");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        // Denied (EPERM): the two busy threads contend for the fast CPU; the placer's masks are
        // asked, fail, are counted, and are taken as applied: a thread is never asked the same
        // mask twice in a row, and both stay managed.
        let (mut a, children, calls) = failing_agent(ActError::Denied, d.path());
        // Six periods at least, and on until the threads have contended (a loaded machine may
        // starve them for a while; bounded at 200 periods, about 6 s).
        for i in 0..200 {
            a.step().unwrap();
            std::thread::sleep(Duration::from_millis(30));
            if i >= 5 && !calls.borrow().is_empty() {
                break;
            }
        }
        let calls_v = calls.borrow().clone();
        assert!(!calls_v.is_empty(), "contended: the placer's masks were asked");
        for c in children.iter() {
            let tid = c.id() as i32;
            let mine: Vec<_> = calls_v.iter().filter(|(t, _)| *t == tid).map(|(_, m)| *m).collect();
            assert!(mine.windows(2).all(|w| w[0] != w[1]), "{tid} asked the same mask twice: {mine:?}");
            assert!(a.inv.by_tid.contains_key(&tid), "a denied thread stays under management");
        }
        assert_eq!(a.app.errors_by_kind.get("eperm"), Some(&(calls_v.len() as u64)));
        // Nothing was changed, so nothing is restored and the state file goes away.
        assert_eq!(a.restore_all(), 0);
        assert!(!d.path().join("state.json").exists());
        drop(a);
        drop(children);

        // Vanished (ESRCH): a thread whose change fails so is dropped from management at once;
        // the process is still there, so a later period finds it again (a new task).
        // The first period is each thread's baseline (light: `cooperate::heavy`); from the
        // second the two busy threads contend.
        let (mut a, children, calls) = failing_agent(ActError::Vanished, d.path());
        for _ in 0..200 {
            a.step().unwrap();
            if !calls.borrow().is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        let first = calls.borrow().clone();
        assert!(!first.is_empty());
        for (tid, _) in &first {
            assert!(!a.inv.by_tid.contains_key(tid), "a vanished thread is no longer managed");
        }
        for _ in 0..4 {
            a.step().unwrap();
        }
        assert!(
            first.iter().all(|(tid, _)| a.inv.by_tid.contains_key(tid)
                || calls.borrow().iter().filter(|(t, _)| t == tid).count() > 1),
            "re-found (and, when contended again, tried again)"
        );
        assert_eq!(a.app.errors_by_kind.get("esrch"), Some(&(calls.borrow().len() as u64)));
        assert_eq!(a.stats.errors, calls.borrow().len() as u64);
        assert_eq!(a.restore_all(), 0);
        drop(a);
        drop(children);
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

#[cfg(test)]
mod fixture_tests {
    //! The whole loop without root: a fixture `/proc` and `/sys`, a fake actuator.
    use super::*;
    use crate::actuate::ActError;
    use ampsched_model::{CpuId, CpuSet};
    use ampsched_policy::placer_bridge::Recording;
    use ampsched_policy::TaskState;
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::rc::Rc;

    /// Affinities in a map; every `set` is recorded with whether the state file existed then.
    struct Fake {
        masks: Rc<RefCell<BTreeMap<i32, CpuSet>>>,
        sets: Rc<RefCell<Vec<(i32, CpuSet, bool)>>>,
        state: PathBuf,
    }

    impl Actuator for Fake {
        fn get(&self, tid: i32) -> Result<CpuSet, ActError> {
            self.masks.borrow().get(&tid).copied().ok_or(ActError::Vanished)
        }
        fn set(&mut self, tid: i32, mask: &CpuSet) -> Result<(), ActError> {
            self.sets.borrow_mut().push((tid, *mask, self.state.exists()));
            match self.masks.borrow_mut().get_mut(&tid) {
                Some(m) => *m = *mask,
                None => return Err(ActError::Vanished),
            }
            Ok(())
        }
        fn dry_run(&self) -> bool {
            false
        }
    }

    /// A `stat` line: state, CPU (field 39), start time 7 (field 22), SCHED_OTHER.
    fn stat_line(tid: i32, state: char, cpu: u32) -> String {
        let mut f = vec!["0".to_string(); 39];
        f[0] = state.to_string(); // field 3
        f[17] = "2".into(); // field 20: threads
        f[19] = "7".into(); // field 22
        f[36] = cpu.to_string(); // field 39
        format!("{tid} (work) {}\n", f.join(" "))
    }

    fn write_thread(root: &Path, pid: i32, tid: i32, state: char, cpu: u32, run_ns: u64) {
        let t = root.join(format!("proc/{pid}/task/{tid}"));
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(t.join("stat"), stat_line(tid, state, cpu)).unwrap();
        std::fs::write(t.join("schedstat"), format!("{run_ns} 0 1\n")).unwrap();
        std::fs::write(t.join("comm"), "work\n").unwrap();
        if tid == pid {
            std::fs::write(root.join(format!("proc/{pid}/stat")), stat_line(tid, state, cpu)).unwrap();
        }
    }

    #[test]
    fn the_loop_observes_decides_applies_and_restores_on_a_fixture() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("sys/devices/system/cpu")).unwrap();
        std::fs::write(root.join("sys/devices/system/cpu/online"), "0-1\n").unwrap();
        std::fs::create_dir_all(root.join("proc")).unwrap();
        std::fs::write(root.join("proc/stat"), "cpu0 10 0 0 10 0 0 0 0\ncpu1 10 0 0 10 0 0 0 0\n").unwrap();
        // Process 4242 with threads 4242 and 4243, both runnable, on CPUs 0 and 1.
        write_thread(root, 4242, 4242, 'R', 0, 0);
        write_thread(root, 4242, 4243, 'R', 1, 0);
        // Its resident anonymous memory (`statm`: resident − shared pages, here 4 KiB ones on
        // this machine): every thread's `ws_kb` in the snapshot.
        assert_eq!(crate::procfs::page_kb(), 4, "the fixture's statm counts 4 KiB pages");
        std::fs::write(root.join("proc/4242/statm"), "86566 9434 502 11 0 53165 0\n").unwrap();
        let ov = crate::Overrides { fast: Some(CpuSet::parse_list("0").unwrap()), ..Default::default() };
        let discovered = crate::discover(root, &ov).unwrap();
        let both = CpuSet::parse_list("0-1").unwrap();
        let masks = Rc::new(RefCell::new(BTreeMap::from([(4242, both), (4243, both)])));
        let sets = Rc::new(RefCell::new(Vec::new()));
        let state = root.join("state.json");
        let rec = root.join("samples.jsonl");
        let mut params = ampsched_model::spec::Params::new();
        // One process with two active threads would be "low parallelism" (all high priority).
        params.insert("low_parallelism".into(), ampsched_model::spec::ParamValue::Bool(false));
        let mut a = Agent::new(AgentOptions {
            discovered,
            placer: PolicySpec { name: "aash".into(), params },
            period_ms: 30.0,
            rescan_ms: 500.0,
            dry_run: false,
            state_path: state.clone(),
            metrics: None,
            log: None,
            targets: vec![Target {
                name: "work".into(),
                kind: TargetKind::Pid(4242),
                children: false,
                weight: 256,
                priority: ampsched_model::spec::PriorityClass::Normal,
                fast_vcpus: None,
            }],
            proc_root: root.join("proc"),
            stop_with_first_command: false,
            trace: None,
            record_samples: Some(rec.clone()),
        })
        .unwrap();
        a.app = Applier::new(
            Box::new(Fake { masks: masks.clone(), sets: sets.clone(), state: state.clone() }),
            state.clone(),
        );
        a.inv.use_counters = false;
        a.launch().unwrap();
        for k in 1..=3u64 {
            // Both threads ran 1 s more each period and stay runnable: more than the wall time
            // between two steps here, so both are heavy (`cooperate::heavy`: ≥ 1/8 of the
            // period) — from the second period: the first, in which they are found, is their
            // baseline (no run time yet: light).
            write_thread(root, 4242, 4242, 'R', 0, k * 1_000_000_000);
            write_thread(root, 4242, 4243, 'R', 1, k * 1_000_000_000);
            a.step().unwrap();
        }
        // Thread 4243 exits.
        std::fs::remove_dir_all(root.join("proc/4242/task/4243")).unwrap();
        a.step().unwrap();
        a.ex.flush().unwrap();
        let r = Recording::read(&rec).unwrap();
        assert_eq!(r.header.placer, "aash");
        assert_eq!(r.snapshots.len(), 4);
        let s0 = &r.snapshots[0];
        assert_eq!(s0.tasks.len(), 2);
        for t in &s0.tasks {
            // `R` in /proc is reported runnable, never running; the own mask is the original.
            assert_eq!((t.state, t.allowed, t.affinity), (TaskState::Runnable, both, both));
            assert_eq!(t.ws_kb, (9434 - 502) * 4);
        }
        // aash, 1 fast CPU, two busy threads: one holds the fast CPU, the other the slow one.
        let changes = sets.borrow().clone();
        assert!(changes.len() >= 2, "{changes:?}");
        assert!(changes.iter().all(|(_, _, state_existed)| *state_existed), "state file first: {changes:?}");
        assert!(changes[..2].iter().any(|(_, m, _)| *m == CpuSet::single(CpuId(0))), "{changes:?}");
        assert!(changes[..2].iter().any(|(_, m, _)| *m == CpuSet::single(CpuId(1))), "{changes:?}");
        // The first period only found them (light, not narrowed): snapshot 1 still shows their
        // own masks. Each later snapshot's `affinity` is what was applied before it.
        assert!(r.snapshots[1].tasks.iter().all(|t| t.affinity == both));
        for (i, s) in r.snapshots.iter().enumerate().skip(2) {
            for t in s.tasks.iter().filter(|t| t.state != TaskState::Done) {
                let tid = if t.id.0 == 0 { 4242 } else { 4243 };
                let last = changes.iter().filter(|c| c.0 == tid).count();
                assert!(last > 0, "period {i}");
                assert_ne!(t.affinity, both, "period {i}: task {} has a placer mask", t.id);
            }
        }
        // The exit is reported once as done, and the thread is forgotten.
        let last = &r.snapshots[3];
        assert_eq!(
            last.tasks.iter().map(|t| (t.id.0, t.state)).collect::<Vec<_>>(),
            vec![(0, TaskState::Runnable), (1, TaskState::Done)]
        );
        assert!(!a.inv.manages(4243));
        // Thread 4242 is now alone runnable (1 contender for 1 fast CPU): no contention, so
        // the last period handed it back its own mask, whatever the placer decided.
        assert_eq!(masks.borrow()[&4242], both, "a lone runnable thread is never confined");
        assert_eq!(a.stats.contended_periods, 2);
        // Class flips: the applied changes of a thread from one single-CPU mask to the other
        // (CPU 0 fast, CPU 1 slow: {0} ↔ {1}), counted from the recorded calls.
        let mut flips = 0;
        for tid in [4242, 4243] {
            let ms: Vec<CpuSet> = changes.iter().filter(|c| c.0 == tid).map(|c| c.1).collect();
            flips += ms.windows(2).filter(|w| w[0].len() == 1 && w[1].len() == 1 && w[0] != w[1]).count() as u64;
        }
        assert_eq!(a.stats.class_flips, flips, "{changes:?}");
        // The period is the time that passed since the last sample (the clock's test has the
        // arithmetic); never zero here.
        assert!(r.snapshots.iter().all(|s| s.period > Nanos::ZERO));
        // Restore: the live changed thread gets its original back; the state file goes.
        sets.borrow_mut().clear();
        assert_eq!(a.restore_all(), 0);
        assert_eq!(sets.borrow().iter().map(|c| (c.0, c.1)).collect::<Vec<_>>(), vec![(4242, both)]);
        assert_eq!(masks.borrow()[&4242], both);
        assert!(!state.exists());
        // A second restore does nothing.
        assert_eq!(a.restore_all(), 0);
        assert!(sets.borrow().len() == 1);
    }
}
