//! The discrete-event engine: simulated CPUs running tasks' programs under a
//! Dispatcher, with an optional Placer on top.
//!
//! Design: one priority queue of events (a calendar ring with FIFO lanes,
//! `clock`) ordered by (time, sequence number), so simultaneous events run in
//! the order they were scheduled (a total order).
//! Time is integer nanoseconds. A superseded completion (a compute segment
//! preempted) is withdrawn from the queue (`Sim::supersede`) and counted as
//! the stale event it would have been; other stale events (a slice ended
//! early, a wake-up replaced) are invalidated by deadlines, keys and
//! generation counters instead of being removed. Effects that happen "now" (a dispatcher asking a CPU to
//! reschedule, a spinning task released by a barrier) go into a FIFO of
//! pending actions drained after each event, at the same instant.
//!
//! Mechanism, not policy: the engine executes programs (compute, barriers,
//! locks, channels, parallel loops, sleeps), charges cache-refill stalls on
//! migration, applies CPU noise, keeps every statistic, and asks the
//! dispatcher what to run. Blocking waits make a task not runnable (an idle
//! vCPU); spinning waits keep it runnable and burn CPU; lock-holder
//! preemption emerges because the engine knows who holds what.
//!
//! Stalls (bursty noise with `stall`: a vCPU thread off its host CPU): a
//! CPU's timer-driven decisions — its slice end and its dispatcher tick —
//! due inside a stall are taken at the stall's end, tick first. That is
//! Xen's rule under a host that deschedules a pCPU: `s_timer_fn` and
//! `csched_tick` run from the pCPU's own timer softirq, which a stalled pCPU
//! handles only when it runs again (`__do_softirq` in `common/softirq.c`
//! takes `TIMER_SOFTIRQ` before `SCHEDULE_SOFTIRQ`), and the next slice ends
//! `next_time` after the moment `schedule()` ran (`do_schedule` in
//! `common/sched/core.c`: `set_timer(&sr->s_timer, now + prev->next_time)`),
//! the next tick `tick_period` after `csched_tick` ran (`credit.c`:
//! `set_timer(&spc->ticker, NOW() + …)`) — so the CPU's slice boundaries
//! drift by the stalls. Noise without `stall` only slows the work.
//! Two more things wait for a busy CPU's stall to end. A reschedule asked of
//! it (`Effects::resched`: credit's tickle, a co-scheduler's signal) is
//! Xen's `cpu_raise_softirq(cpu, SCHEDULE_SOFTIRQ)`, an IPI when `cpu` is
//! another pCPU: under TCG it sets the target's interrupt request and kicks
//! its thread, which takes it only once back on a host CPU; it is decided at
//! the stall's end as a slice end would be (`do_schedule` then sets the next
//! slice from there). And the dispatcher's accounting, when it runs from one
//! CPU's timer (`Dispatcher::account_cpu`: credit's `csched_acct` on the
//! master pCPU's `master_ticker`, re-armed `tslice` after it ran), is taken
//! at that CPU's stall end and the next one a period later, so the
//! accounting drifts with the master's stalls. At a stall's end the owed
//! timers run first — tick, accounting — then the reschedule. An idle CPU is
//! never kept waiting: its QEMU thread sleeps in a halt and a kick or its
//! timer wakes it.
//!
//! Background tasks (a domain with `background = true`: a testbed's dom0)
//! run, block and wake like any other, so the dispatcher sees their wake-ups
//! preempt and displace the guests' vCPUs as the real dom0's do; but a run
//! that ends when all are done counts only the others as live, so it ends
//! with the guests' work, never waiting for a background loop.
//!
//! Invariants (debug-asserted): a task runs on at most one CPU; a running
//! task's CPU has it as `curr`; only runnable tasks are picked.
//!
//! Rooms (each file's `//!` says what it may and must never import; the
//! module graph is a DAG, checked by `scripts/check-module-dag.py`):
//! - bottom rooms, which know nothing of `Sim`: `config` (what a run is
//!   configured with), `clock` (the event queue and same-instant FIFO),
//!   `random` (seeded sampling), `fixed` (fixed-point amounts), `task` (task state and work accounting),
//!   `bus` (the shared memory bus: what co-running tasks' memory traffic costs each),
//!   `llc` (the shared caches: what co-running tasks' working sets cost each),
//!   `gate` (the state of the agent's body around the placer),
//!   `cpu` (CPU time accounting), `sync` (sync objects), `series`
//!   (statistics accumulators), `trail` (what a task moved away from the
//!   caches it left: the refill a migration owes);
//! - this module: the `Sim` state, the event loop and event handling;
//! - the rooms that extend `Sim` with one concern each: `account` (state
//!   times, progress, migrations, completion planning), `dispatch` (the
//!   dispatcher bridge: every call into the `Dispatcher`, CPU switches,
//!   slices), `hv` (the hypervisor's wake-up latency and the stalls a
//!   dispatcher's signals cost), `backend` (the guests' I/O served by a
//!   back-end domain's vCPUs: Xen's split drivers), `interp` (the program interpreter over the sync objects),
//!   `shared` (tasks joining and leaving a shared LLC),
//!   `place` (the placer bridge: snapshots and affinity changes), `stats`
//!   (time series and results), `traced` (Perfetto recording hooks).
//!
//! May import: `crate::results` and `crate::trace` (the recorder), the model
//! and policy crates. Must never import scenario loading, the runner, the
//! bench or anything in `ampsched-lab`.

mod account;
mod backend;
mod bus;
mod clock;
mod config;
mod cpu;
#[macro_use]
mod dispatch;
mod fixed;
mod gate;
mod hv;
mod interp;
mod llc;
pub(crate) mod place;
mod random;
mod series;
mod shared;
mod stats;
mod sync;
mod task;
#[cfg(test)]
mod tests;
mod traced;
mod trail;

pub use config::{AgentBody, DomainChange, SimConfig, Stop, TaskInit, AGENT_REACTION_US};
pub use series::MAX_POINTS as MAX_SERIES_POINTS;

use crate::results::RunResult;
use crate::trace::TraceRecorder;
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, NoiseSpec, Op, TaskId, Topology};
use ampsched_policy::{Dispatcher, DomainView, Effects, Placer, TaskView};
use clock::{Ev, EventQueue, Pending};
use cpu::{Cpu, FastIdleSlowBusy};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use series::Series;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::Arc;
use sync::SyncObj;
use task::{Act, St, Task};

/// The simulator state for one run.
pub struct Sim {
    name: String,
    topo: Topology,
    domains: Vec<DomainView>,
    views: Vec<TaskView>,
    /// Per task its own mask (the scenario's, or the last one its program set): the placer
    /// contract's `allowed`; `views[t].affinity` is the mask in force.
    own: Vec<CpuSet>,
    curr: Vec<Option<TaskId>>,
    /// Per CPU its memory domain (`topo.cpus[c].mem_domain`), dense: a switch
    /// compares the last CPU's with the new one's without loading either's description.
    mem_domain: Vec<u32>,
    tasks: Vec<Task>,
    /// Per task what it moved away from the caches it left (`trail`): read and
    /// written only when it migrates, so kept beside the tasks, not in them.
    trails: Vec<trail::Trail>,
    cpus: Vec<Cpu>,
    disp: Box<dyn Dispatcher>,
    placer: Option<Box<dyn Placer>>,
    /// A placer runs: tasks' per-period run times are kept for its snapshots.
    placed: bool,
    /// The Linux agent's body around the placer (`SimConfig::agent`, with a placer only).
    gate: Option<Box<gate::Gate>>,
    events: EventQueue,
    now: Nanos,
    pending: VecDeque<Pending>,
    fx: Effects,
    /// Sync objects by dense index (`sync::resolve`).
    sync: Vec<SyncObj>,
    group_size: Vec<u32>,
    rng: ChaCha8Rng,
    seed: u64,
    stop: Stop,
    live: usize,
    events_done: u64,
    /// Events that found their timer superseded (popped stale, or planned and replaced before queued).
    superseded: u64,
    /// Superseded plans of a run that may end early and still ahead of `last_key`, earliest on
    /// top: counted as the run passes them (`superseded_plan`), the rest in `finish` if passed.
    ghosts: BinaryHeap<Reverse<clock::Key>>,
    /// Key of the event being handled (0 before the first).
    last_key: clock::Key,
    stats_interval: Nanos,
    /// Whether tasks' wake-up latencies are recorded (`SimConfig::wake_latency`).
    wake_latency: bool,
    domain_events: Vec<(Nanos, DomainId, DomainChange)>,
    series: Series,
    /// Per task and class (`t · nclass + class`), its run time at the last
    /// statistics sample: the series' run times are the differences (`sample_series`).
    sampled: Vec<u64>,
    /// Fast CPU idle while a slow CPU is busy.
    fisb: FastIdleSlowBusy,
    last_place: Nanos,
    /// The placer's last snapshot: its vectors are filled anew each period, not allocated.
    snap: ampsched_policy::Snapshot,
    placer_changes: u64,
    finished: bool,
    truncated: bool,
    /// Perfetto trace recorder (`None`: not tracing, the hot path only tests this).
    trace: Option<Box<TraceRecorder>>,
    /// Progress watcher, called with (now, end) every `PROGRESS_EVERY` events.
    progress: Option<Box<dyn FnMut(Nanos, Nanos) + Send>>,
    /// The shared memory bus and the tasks computing over it (`Topology::memory_bus`; `None`: not modelled).
    bus: Option<Box<bus::Bus>>,
    /// Hypervisor time each CPU owes, ns (`Effects::stall`, `hv`; empty until the first stall).
    owed: Vec<u64>,
    /// The shared LLCs and the tasks computing under them (`Topology::llc_contention`; `None`: not modelled).
    llc: Option<Box<llc::Llc>>,
    /// `llc` is modelled (a flag beside the hot ones the switch paths read).
    llc_on: bool,
    /// Some CPU may owe hypervisor time (`owed`).
    owes: bool,
    /// Released tasks wake after the machine's wake-up latency (`Topology::wake_latency` > 0).
    wake_late: bool,
    /// The I/O back end serving the guests' `Op::Io` (`Topology::io_backend`; `None`: an I/O is a sleep).
    io: Option<Box<backend::queues::Backend>>,
    /// `io` is modelled (a flag beside the hot ones).
    io_on: bool,
}

/// Distinct programs a new one is compared with when a run is built (`Sim::new`): a
/// bound on that work when every task runs a program of its own.
const RECENT_PROGRAMS: usize = 16;

/// Events between two calls of a progress watcher (a power of two: a mask test per event).
const PROGRESS_EVERY: u64 = 1 << 16;

impl Sim {
    /// Build a simulation from its configuration.
    pub fn new(cfg: SimConfig) -> Sim {
        let topo = cpu::rt_loads_for(cfg.topo, cfg.dispatcher.models_rt_load());
        let nclass = topo.classes.len();
        let mut group_size = Vec::new();
        for t in cfg.tasks.iter().filter(|t| t.program.ops.first() != Some(&Op::End)) {
            let g = t.group as usize;
            if group_size.len() <= g {
                group_size.resize(g + 1, 0);
            }
            group_size[g] += 1;
        }
        let mut tasks: Vec<Task> = cfg.tasks.iter().map(|ti| Task::new(ti, nclass)).collect();
        // One program allocation per distinct program among the last `RECENT_PROGRAMS`
        // met (every domain's vCPUs running one template share theirs, whatever the
        // domain: their ops stay in the first-level cache), and one table of
        // sync-object indices per program and group.
        let mut index = BTreeMap::new();
        let mut tables: BTreeMap<(usize, u32), Arc<[[u32; 2]]>> = BTreeMap::new();
        let mut recent: VecDeque<Arc<ampsched_model::Program>> = VecDeque::new();
        for tk in &mut tasks {
            match recent.iter().position(|r| Arc::ptr_eq(r, &tk.prog) || *r == tk.prog) {
                Some(j) => tk.prog = recent[j].clone(),
                None => {
                    if recent.len() == RECENT_PROGRAMS {
                        recent.pop_back();
                    }
                    recent.push_front(tk.prog.clone());
                }
            }
            let key = (Arc::as_ptr(&tk.prog) as usize, tk.group);
            tk.sync =
                tables.entry(key).or_insert_with(|| sync::resolve(&tk.prog.ops, tk.group, &mut index).into()).clone();
        }
        let nsync = index.len();
        // A program that opens with `Affinity` (rt-app `cpus`) starts with that affinity.
        let first_mask = |t: &TaskInit| match t.program.ops.first() {
            Some(Op::Affinity { mask }) => *mask,
            _ => t.affinity,
        };
        let views: Vec<TaskView> =
            cfg.tasks.iter().map(|t| TaskView { domain: t.domain, vcpu: t.vcpu, affinity: first_mask(t) }).collect();
        let own = views.iter().map(|v| v.affinity).collect();
        let asymmetric = !topo.is_symmetric();
        let cpus: Vec<Cpu> =
            topo.cpus.iter().map(|c| Cpu::new(c, c.class == topo.fast_class && asymmetric, cfg.seed)).collect();
        let nd = cfg.domains.len();
        let idle_fast = cpus.iter().filter(|c| c.fast).count() as u32;
        // The tasks a run that ends when all are done waits for: not idle, not background.
        let live = tasks.iter().filter(|t| !t.idle_vcpu && !t.background).count();
        let topo_bus = topo.memory_bus.as_ref().map(|b| Box::new(bus::Bus::new(b)));
        let wake_late_on = topo.wake_latency.0 > 0;
        let llc =
            topo.llc_contention.then(|| Box::new(llc::Llc::new(&topo.cache, topo.mem_domains.len(), tasks.len())));
        let io = topo.io_backend.map(|b| Box::new(backend::queues::Backend::new(&b, &cfg.domains, tasks.len())));
        let ids = tasks.len().max(topo.ncpus()).max(cfg.events.len());
        assert!(ids < 1 << clock::ID_BITS, "{ids} tasks, CPUs or domain changes: at most 2^{} fit", clock::ID_BITS);
        Sim {
            name: cfg.name,
            curr: vec![None; topo.ncpus()],
            mem_domain: topo.cpus.iter().map(|c| c.mem_domain).collect(),
            topo,
            domains: cfg.domains,
            views,
            own,
            trails: vec![trail::Trail::default(); tasks.len()],
            tasks,
            cpus,
            disp: cfg.dispatcher,
            placed: cfg.placer.is_some(),
            gate: cfg.agent.filter(|_| cfg.placer.is_some()).map(|a| Box::new(gate::Gate::new(a))),
            placer: cfg.placer,
            events: EventQueue::default(),
            now: Nanos::ZERO,
            pending: VecDeque::new(),
            fx: Effects::default(),
            sync: (0..nsync).map(|_| SyncObj::default()).collect(),
            group_size,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            seed: cfg.seed,
            stop: cfg.stop,
            live,
            events_done: 0,
            superseded: 0,
            ghosts: BinaryHeap::new(),
            last_key: 0,
            stats_interval: cfg.stats_interval,
            wake_latency: cfg.wake_latency,
            domain_events: cfg.events,
            series: Series::new(nd, nclass),
            sampled: vec![0; cfg.tasks.len() * nclass],
            fisb: FastIdleSlowBusy::new(idle_fast, asymmetric),
            last_place: Nanos::ZERO,
            snap: ampsched_policy::Snapshot::default(),
            placer_changes: 0,
            finished: false,
            truncated: false,
            trace: None,
            progress: None,
            bus: topo_bus,
            owed: Vec::new(),
            llc_on: llc.is_some(),
            llc,
            owes: false,
            wake_late: wake_late_on,
            io_on: io.is_some(),
            io,
        }
    }

    /// Call `f(now, end)` every 65 536 events while the run goes (`end`: the
    /// stop time, or the all-done bound), for a progress bar of a long run.
    pub fn with_progress(mut self, f: impl FnMut(Nanos, Nanos) + Send + 'static) -> Sim {
        self.progress = Some(Box::new(f));
        self
    }

    fn push(&mut self, t: Nanos, ev: Ev) {
        self.events.push(t, ev);
    }

    /// Sleep task `t` until `at`: the only wake-up that counts is the last planned.
    fn plan_wake(&mut self, t: TaskId, at: Nanos) {
        let k = self.events.push(at, Ev::Wake(t));
        self.tasks[t.idx()].wake_key = k;
    }

    /// Run to the stop condition and return the results.
    pub fn run(mut self) -> RunResult {
        self.disp.seed(self.seed);
        self.disp.init(&view!(self));
        let acct = self.disp.account_period();
        if acct.0 > 0 {
            self.push(acct, Ev::Account);
        }
        if self.stats_interval.0 > 0 {
            self.push(self.stats_interval, Ev::Stats);
        }
        if let Some(p) = &self.placer {
            let per = p.period();
            self.push(per, Ev::Place);
        }
        for i in 0..self.domain_events.len() {
            let at = self.domain_events[i].0;
            self.push(at, Ev::Domain(i as u32));
        }
        for c in 0..self.cpus.len() {
            // Traffic noise has no events of its own (`cpu::Traffic`).
            if let NoiseSpec::Bursty { .. } = self.topo.cpus[c].noise {
                let d = self.noise_len(c, false);
                self.push(d, Ev::Noise(CpuId(c as u32)));
            }
        }
        let end = match self.stop {
            Stop::Duration(d) => d,
            Stop::AllDone { max } => max,
        };
        let k = self.events.push(end, Ev::End);
        self.events.set_horizon(k);
        // Wake every task that has work, in id order.
        for i in 0..self.tasks.len() {
            if !self.tasks[i].idle_vcpu {
                self.set_state(TaskId(i as u32), St::Runnable);
                self.disp.wake(&view!(self), TaskId(i as u32), &mut self.fx);
                self.flush_fx();
            }
        }
        self.drain();
        if self.live == 0 {
            self.finished = true;
        }
        while !self.finished {
            let Some((k, t, ev)) = self.events.pop() else { break };
            debug_assert!(t >= self.now, "time went backwards");
            self.now = t;
            self.last_key = k;
            self.events_done += 1;
            self.handle(k, ev);
            self.drain();
            if self.events_done & (PROGRESS_EVERY - 1) == 0 {
                if let Some(p) = self.progress.as_mut() {
                    p(self.now, end);
                }
            }
        }
        self.finish()
    }

    /// Bursty noise on CPU `c`: the length of the phase that starts now (`on`: a burst).
    fn noise_len(&mut self, c: usize, on: bool) -> Nanos {
        let NoiseSpec::Bursty { on: on_len, off, random, .. } = self.topo.cpus[c].noise else {
            unreachable!("only bursty noise has phase events")
        };
        let mean = if on { on_len } else { off };
        if random {
            random::exponential(&mut self.rng, mean)
        } else {
            Nanos(mean.0.max(1))
        }
    }

    /// CPU `c`'s stall ended: take the tick, the accounting and the slice end
    /// or reschedule that came due inside it, in Xen's softirq order (timers,
    /// then `schedule`). An owed reschedule ends the slice now.
    fn stall_ended(&mut self, c: CpuId) {
        let now = self.now;
        let cpu = &mut self.cpus[c.idx()];
        let tick = std::mem::take(&mut cpu.tick_owed);
        let account = std::mem::take(&mut cpu.account_owed);
        if std::mem::take(&mut cpu.resched_owed) && cpu.curr.is_some() {
            cpu.slice_at = now;
        }
        let slice = cpu.curr.is_some() && cpu.slice_at <= now && cpu.slice_ev_at > now;
        if slice {
            cpu.slice_ev_at = now;
        }
        if tick {
            self.push(now, Ev::Tick(c));
        }
        if account {
            self.push(now, Ev::Account);
        }
        if slice {
            self.push(now, Ev::SliceEnd(c));
        }
    }

    fn handle(&mut self, k: clock::Key, ev: Ev) {
        match ev {
            Ev::Tick(c) => {
                if self.cpus[c.idx()].curr.is_some() {
                    if self.cpus[c.idx()].stalled() {
                        // The ticker's softirq waits for the stall's end (module essay).
                        self.cpus[c.idx()].tick_owed = true;
                        return;
                    }
                    self.disp.tick(&view!(self), c, &mut self.fx);
                    self.flush_fx();
                    let p = self.disp.tick_period();
                    self.push(self.now + p, Ev::Tick(c));
                } else {
                    self.cpus[c.idx()].tick_armed = false;
                }
            }
            Ev::Account => {
                if let Some(m) = self.disp.account_cpu().filter(|m| self.cpus[m.idx()].busy_stalled()) {
                    // Its timer's CPU is stalled: taken at the stall's end (module essay).
                    self.cpus[m.idx()].account_owed = true;
                    return;
                }
                self.disp.account(&view!(self), &mut self.fx);
                self.flush_fx();
                let p = self.disp.account_period();
                self.push(self.now + p, Ev::Account);
            }
            Ev::SliceEnd(c) => {
                // A lazy timer: events are pushed only when the deadline moves earlier,
                // so an event may find the deadline later (re-arm) or gone (ignore).
                let cpu = &mut self.cpus[c.idx()];
                if cpu.slice_ev_at == self.now {
                    cpu.slice_ev_at = Nanos::MAX;
                }
                if let Some(t) = cpu.curr.filter(|_| cpu.slice_at <= self.now) {
                    if cpu.stalled() {
                        // Decided at the stall's end (`stall_ended`).
                        return;
                    }
                    // A compute ending at this very instant completes first (its OpDone
                    // is due now too): re-queue the slice end once, behind it.
                    if !std::mem::take(&mut cpu.slice_deferred) {
                        self.settle(t);
                        let tk = &self.tasks[t.idx()];
                        if tk.act == Act::Compute && tk.work_left == 0 {
                            let cpu = &mut self.cpus[c.idx()];
                            cpu.slice_deferred = true;
                            cpu.slice_ev_at = self.now;
                            self.push(self.now, Ev::SliceEnd(c));
                            return;
                        }
                    }
                    self.schedule(c);
                } else if cpu.slice_at != Nanos::MAX && cpu.slice_at < cpu.slice_ev_at {
                    cpu.slice_ev_at = cpu.slice_at;
                    let at = cpu.slice_at;
                    self.push(at, Ev::SliceEnd(c));
                }
            }
            Ev::OpDone(t) => {
                if !self.pop_op(t, k) {
                    return;
                }
                let St::Running(c) = self.tasks[t.idx()].st else { return };
                // A compute completing now: its work left is zeroed below, not computed.
                self.settle_with(t, self.tasks[t.idx()].act != Act::Compute);
                match self.tasks[t.idx()].act {
                    Act::Compute => {
                        if self.io_on && self.io_job_done(t, c) {
                            return;
                        }
                        let tk = &mut self.tasks[t.idx()];
                        // Refill still owed (a short segment) carries over to the next one.
                        tk.work_left = 0;
                        tk.act = Act::Ready;
                        tk.computes_done += 1;
                        if !matches!(tk.prog.ops[tk.pc as usize], Op::ParFor { .. }) {
                            tk.pc += 1;
                        }
                        self.continue_on(t, c);
                    }
                    Act::Spin { .. } => {
                        // Spin limit reached: block.
                        self.tasks[t.idx()].act = Act::Wait;
                        self.block_running(t, c);
                    }
                    Act::Busy { .. } => {
                        let tk = &mut self.tasks[t.idx()];
                        tk.act = Act::Ready;
                        tk.pc += 1;
                        self.continue_on(t, c);
                    }
                    _ => {}
                }
            }
            Ev::Wake(t) => {
                if self.tasks[t.idx()].wake_key == k && self.tasks[t.idx()].st == St::Blocked {
                    self.wake(t);
                } else {
                    self.superseded += 1;
                }
            }
            Ev::Noise(c) if self.cpus[c.idx()].has_traffic() => {
                // A re-plan a completion's plan asked for past the batches it
                // looked at (`Sim::replan`); stale if re-planned since.
                let ci = c.idx();
                if self.cpus[ci].check_at != self.now {
                    self.superseded += 1;
                    return;
                }
                self.cpus[ci].check_at = Nanos::MAX;
                self.reshare(ci, |_| {});
            }
            Ev::Noise(c) => {
                let ci = c.idx();
                let on = !self.cpus[ci].noise_on;
                self.reshare(ci, |cpu| {
                    cpu.noise_on = on;
                    cpu.noise_phase(on);
                });
                if let Some(tr) = self.trace.as_deref_mut() {
                    tr.frequency(self.now, c, self.cpus[ci].speed * (1.0 - self.cpus[ci].noise));
                }
                let d = self.noise_len(ci, on);
                self.push(self.now + d, Ev::Noise(c));
                if !on && self.cpus[ci].stalls {
                    self.stall_ended(c);
                }
            }
            Ev::Io(g) => self.io_device_done(g),
            Ev::Place => self.run_placer(),
            Ev::React(_) => self.react(),
            Ev::Seized(c) => self.seize_end(c),
            Ev::TraceSample => {
                self.events_done -= 1;
                self.trace_sample();
            }
            Ev::Stats => {
                self.sample_series(false);
                self.push(self.now + self.stats_interval, Ev::Stats);
            }
            Ev::Domain(i) => {
                let (_, d, ch) = self.domain_events[i as usize].clone();
                let dv = &mut self.domains[d.idx()];
                if let Some(c) = ch.cosched {
                    dv.cosched = c;
                }
                if let Some(p) = ch.priority {
                    dv.priority = p;
                }
                if let Some(w) = ch.weight {
                    dv.weight = w;
                }
                self.disp.domain_changed(&view!(self), d, &mut self.fx);
                self.flush_fx();
            }
            Ev::End => {
                if let Stop::AllDone { .. } = self.stop {
                    self.truncated = true;
                }
                self.finished = true;
            }
        }
    }
}
