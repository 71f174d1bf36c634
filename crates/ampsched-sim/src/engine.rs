//! The discrete-event engine: simulated CPUs running tasks' programs under a
//! Dispatcher, with an optional Placer on top.
//!
//! Design: one binary heap of events ordered by (time, sequence number), so
//! simultaneous events run in the order they were scheduled (a total order).
//! Time is integer nanoseconds. Stale events (a compute segment preempted, a
//! slice ended early) are invalidated by generation counters instead of being
//! removed. Effects that happen "now" (a dispatcher asking a CPU to
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
//! Invariants (debug-asserted): a task runs on at most one CPU; a running
//! task's CPU has it as `curr`; only runnable tasks are picked.

use crate::results::{ClassTimes, CounterPoint, CpuResult, DomainResult, RunResult, SeriesPoint, TaskResult};
use crate::scenario::{DomainChange, Stop};
use crate::trace::{Sample, TraceOptions, TraceRecorder, TraceSink};
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, NoiseSpec, Op, Program, Schedule, TaskId, Topology, Wait};
use ampsched_policy::{
    AffinityChange, CpuSample, Dispatcher, DomainSample, DomainView, Effects, Placer, Snapshot, SysView, TaskSample,
    TaskView,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::Arc;

/// Everything needed to run one simulation.
pub struct SimConfig {
    /// Scenario name (copied to results).
    pub name: String,
    /// The machine.
    pub topo: Topology,
    /// Domains.
    pub domains: Vec<DomainView>,
    /// Tasks, indexed by id.
    pub tasks: Vec<TaskInit>,
    /// The dispatcher.
    pub dispatcher: Box<dyn Dispatcher>,
    /// The placer (optional).
    pub placer: Option<Box<dyn Placer>>,
    /// The run's seed.
    pub seed: u64,
    /// Stop condition.
    pub stop: Stop,
    /// Time-series interval.
    pub stats_interval: Nanos,
    /// Timed domain changes, sorted by time.
    pub events: Vec<(Nanos, DomainId, DomainChange)>,
}

/// A task as configured.
#[derive(Clone, Debug)]
pub struct TaskInit {
    /// Owning domain.
    pub domain: DomainId,
    /// vCPU index within the domain.
    pub vcpu: u32,
    /// Its program (`Program::idle()` for an idle vCPU).
    pub program: Arc<Program>,
    /// Hard affinity.
    pub affinity: CpuSet,
    /// Sync group index (tasks sharing barriers, locks, channels).
    pub group: u32,
    /// Index of this task within its sync group.
    pub rank: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Blocked,
    Runnable,
    Running(CpuId),
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Act {
    /// Between ops: the next op at `pc` has not started.
    Ready,
    /// Computing; `work_left` and `refill_left` say how much is left.
    Compute,
    /// Spin-waiting; `limit` is the CPU time after which it blocks.
    Spin { limit: Option<Nanos> },
    /// Blocked on a sync object (waiting for a release).
    Wait,
    /// Busy on the CPU until this wall time (`Op::Runtime`).
    Busy { until: Nanos },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SyncKey {
    Barrier(u32, u32),
    Lock(u32, u32),
    Chan(u32, u32),
    ParFor(u32, u32),
    Cond(u32, u32),
    Timer(u32, u32),
}

#[derive(Default)]
struct SyncObj {
    arrived: u32,
    owner: Option<TaskId>,
    waiters: VecDeque<TaskId>,
    push_waiters: VecDeque<TaskId>,
    count: u64,
    remaining: u64,
    init: bool,
    exited: u32,
    /// Next expiry of a timer.
    at: Nanos,
}

struct Task {
    domain: DomainId,
    prog: Arc<Program>,
    pc: u32,
    loops: Vec<u32>,
    group: u32,
    rank: u32,
    st: St,
    act: Act,
    idle_vcpu: bool,
    work_left: f64,
    mem: f64,
    ws_kb: u32,
    overlap: f64,
    refill_left: f64,
    seg_start: Nanos,
    gen: u32,
    sleep_gen: u32,
    spin_used: Nanos,
    pf_static_done: bool,
    last_cpu: Option<CpuId>,
    state_since: Nanos,
    // statistics
    run_by_class: Vec<u64>,
    wait_ns: u64,
    blocked_ns: u64,
    spin_ns: u64,
    mig_local: u64,
    mig_remote: u64,
    done_at: Option<Nanos>,
    computes_done: u64,
    // placer sampling
    period_run: Vec<u64>,
    period_active: bool,
}

struct Cpu {
    class: usize,
    speed: f64,
    fast: bool,
    curr: Option<TaskId>,
    /// When the current slice ends (`Nanos::MAX`: no slice).
    slice_at: Nanos,
    /// Time of the earliest pending `SliceEnd` event of this CPU (`Nanos::MAX`: none).
    slice_ev_at: Nanos,
    tick_armed: bool,
    /// This CPU's slice end was put behind a compute completing at the same instant.
    slice_deferred: bool,
    resched_pending: bool,
    noise: f64,
    noise_on: bool,
    acc_since: Nanos,
    busy: f64,
    idle: f64,
    noise_t: f64,
    p_busy: f64,
    p_idle: f64,
    p_noise: f64,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Tick(CpuId),
    Account,
    SliceEnd(CpuId),
    OpDone(TaskId, u32),
    Wake(TaskId, u32),
    Noise(CpuId),
    Place,
    Stats,
    Domain(usize),
    /// Sample the trace's counter tracks (traced runs only; not counted in `events`).
    TraceSample,
    End,
}

struct Item {
    t: Nanos,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        self.t == o.t && self.seq == o.seq
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    fn cmp(&self, o: &Self) -> Ordering {
        // BinaryHeap is a max-heap: invert for earliest-first.
        o.t.cmp(&self.t).then(o.seq.cmp(&self.seq))
    }
}

enum Pending {
    Resched(CpuId),
    Continue(TaskId),
}

enum Outcome {
    Busy,
    Blocked,
    Done,
}

/// The simulator state for one run.
pub struct Sim {
    name: String,
    topo: Topology,
    domains: Vec<DomainView>,
    views: Vec<TaskView>,
    curr: Vec<Option<TaskId>>,
    tasks: Vec<Task>,
    cpus: Vec<Cpu>,
    disp: Box<dyn Dispatcher>,
    placer: Option<Box<dyn Placer>>,
    heap: BinaryHeap<Item>,
    seq: u64,
    now: Nanos,
    pending: VecDeque<Pending>,
    fx: Effects,
    sync: BTreeMap<SyncKey, SyncObj>,
    group_size: Vec<u32>,
    rng: ChaCha8Rng,
    seed: u64,
    stop: Stop,
    live: usize,
    events_done: u64,
    stats_interval: Nanos,
    domain_events: Vec<(Nanos, DomainId, DomainChange)>,
    // time series accumulators, per domain
    ser_run: Vec<Vec<u64>>,
    ser_mig: Vec<u64>,
    ser_active_int: Vec<f64>,
    dom_active: Vec<u32>,
    dom_active_since: Vec<Nanos>,
    series: Vec<Vec<SeriesPoint>>,
    counter_series: Vec<CounterPoint>,
    last_stats: Nanos,
    // fast CPU idle while a slow CPU is busy
    idle_fast: u32,
    busy_slow: u32,
    asymmetric: bool,
    fisb_since: Nanos,
    fisb_ns: u64,
    last_place: Nanos,
    placer_changes: u64,
    finished: bool,
    truncated: bool,
    /// Perfetto trace recorder (`None`: not tracing, the hot path only tests this).
    trace: Option<Box<TraceRecorder>>,
}

const EPS: f64 = 1e-6;
/// Share of a running task's cycles that go to cache misses while it still owes a
/// refill after a migration: a cold cache slows the code that touches the data
/// (misses interleave with work) rather than stalling it up front, so a short
/// critical section right after a migration is not held for the whole refill.
/// The total cost charged is unchanged (workloads.md, "Cost of migration").
const REFILL_SHARE: f64 = 0.5;

/// A `SysView` over the engine's fields (a macro so the borrow is per field).
macro_rules! view {
    ($s:ident) => {
        SysView { now: $s.now, topo: &$s.topo, tasks: &$s.views, domains: &$s.domains, curr: &$s.curr }
    };
}

impl Sim {
    /// Build a simulation from its configuration.
    pub fn new(cfg: SimConfig) -> Sim {
        let topo = cfg.topo;
        let nclass = topo.classes.len();
        let mut group_size = Vec::new();
        for t in cfg.tasks.iter().filter(|t| t.program.ops.first() != Some(&Op::End)) {
            let g = t.group as usize;
            if group_size.len() <= g {
                group_size.resize(g + 1, 0);
            }
            group_size[g] += 1;
        }
        let tasks: Vec<Task> = cfg
            .tasks
            .iter()
            .map(|ti| Task {
                domain: ti.domain,
                idle_vcpu: ti.program.ops.first() == Some(&Op::End),
                prog: ti.program.clone(),
                pc: 0,
                loops: Vec::new(),
                group: ti.group,
                rank: ti.rank,
                st: St::Blocked,
                act: Act::Ready,
                work_left: 0.0,
                mem: 0.0,
                ws_kb: 0,
                overlap: 1.0,
                refill_left: 0.0,
                seg_start: Nanos::ZERO,
                gen: 0,
                sleep_gen: 0,
                spin_used: Nanos::ZERO,
                pf_static_done: false,
                last_cpu: None,
                state_since: Nanos::ZERO,
                run_by_class: vec![0; nclass],
                wait_ns: 0,
                blocked_ns: 0,
                spin_ns: 0,
                mig_local: 0,
                mig_remote: 0,
                done_at: None,
                computes_done: 0,
                period_run: vec![0; nclass],
                period_active: false,
            })
            .collect();
        // A program that opens with `Affinity` (rt-app `cpus`) starts with that affinity.
        let first_mask = |t: &TaskInit| match t.program.ops.first() {
            Some(Op::Affinity { mask }) => *mask,
            _ => t.affinity,
        };
        let views =
            cfg.tasks.iter().map(|t| TaskView { domain: t.domain, vcpu: t.vcpu, affinity: first_mask(t) }).collect();
        let cpus: Vec<Cpu> = topo
            .cpus
            .iter()
            .map(|c| Cpu {
                class: c.class,
                speed: c.speed,
                fast: c.class == topo.fast_class && !topo.is_symmetric(),
                curr: None,
                slice_at: Nanos::MAX,
                slice_ev_at: Nanos::MAX,
                tick_armed: false,
                slice_deferred: false,
                resched_pending: false,
                noise: match c.noise {
                    NoiseSpec::None => 0.0,
                    NoiseSpec::Constant { fraction } => fraction,
                    NoiseSpec::Bursty { fraction_off, .. } => fraction_off,
                },
                noise_on: false,
                acc_since: Nanos::ZERO,
                busy: 0.0,
                idle: 0.0,
                noise_t: 0.0,
                p_busy: 0.0,
                p_idle: 0.0,
                p_noise: 0.0,
            })
            .collect();
        let nd = cfg.domains.len();
        let topo_symmetric = topo.is_symmetric();
        let idle_fast = cpus.iter().filter(|c| c.fast).count() as u32;
        let live = tasks.iter().filter(|t| !t.idle_vcpu).count();
        Sim {
            name: cfg.name,
            curr: vec![None; topo.ncpus()],
            topo,
            domains: cfg.domains,
            views,
            tasks,
            cpus,
            disp: cfg.dispatcher,
            placer: cfg.placer,
            heap: BinaryHeap::new(),
            seq: 0,
            now: Nanos::ZERO,
            pending: VecDeque::new(),
            fx: Effects::default(),
            sync: BTreeMap::new(),
            group_size,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            seed: cfg.seed,
            stop: cfg.stop,
            live,
            events_done: 0,
            stats_interval: cfg.stats_interval,
            domain_events: cfg.events,
            ser_run: vec![vec![0; nclass]; nd],
            ser_mig: vec![0; nd],
            ser_active_int: vec![0.0; nd],
            dom_active: vec![0; nd],
            dom_active_since: vec![Nanos::ZERO; nd],
            series: vec![Vec::new(); nd],
            counter_series: Vec::new(),
            last_stats: Nanos::ZERO,
            idle_fast,
            busy_slow: 0,
            asymmetric: !topo_symmetric,
            fisb_since: Nanos::ZERO,
            fisb_ns: 0,
            last_place: Nanos::ZERO,
            placer_changes: 0,
            finished: false,
            truncated: false,
            trace: None,
        }
    }

    fn push(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        self.heap.push(Item { t, seq: self.seq, ev });
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
            self.push(at, Ev::Domain(i));
        }
        for c in 0..self.cpus.len() {
            if let NoiseSpec::Bursty { .. } = self.topo.cpus[c].noise {
                let d = self.noise_len(c, false);
                self.push(d, Ev::Noise(CpuId(c as u32)));
            }
        }
        let end = match self.stop {
            Stop::Duration(d) => d,
            Stop::AllDone { max } => max,
        };
        self.push(end, Ev::End);
        // Wake every task that has work, in id order.
        for i in 0..self.tasks.len() {
            if !self.tasks[i].idle_vcpu {
                self.set_state(TaskId(i as u32), St::Runnable);
                let mut fx = std::mem::take(&mut self.fx);
                self.disp.wake(&view!(self), TaskId(i as u32), &mut fx);
                self.fx = fx;
                self.flush_fx();
            }
        }
        self.drain();
        if self.live == 0 {
            self.finished = true;
        }
        while !self.finished {
            let Some(item) = self.heap.pop() else { break };
            debug_assert!(item.t >= self.now, "time went backwards");
            self.now = item.t;
            self.events_done += 1;
            self.handle(item.ev);
            self.drain();
        }
        self.finish()
    }

    /// Run to the stop condition recording a Perfetto trace (see `trace`): the
    /// results (the same as `run`'s) and the trace bytes.
    pub fn run_traced(mut self, opts: TraceOptions) -> (RunResult, Vec<u8>) {
        let n_fast = self.cpus.iter().filter(|c| c.fast).count() as u32;
        let sink = TraceSink::default();
        let mut tr = TraceRecorder::new(&self.domains, &self.views, self.cpus.len(), n_fast, opts, sink.clone());
        for (i, c) in self.cpus.iter().enumerate() {
            tr.frequency(Nanos::ZERO, CpuId(i as u32), c.speed * (1.0 - c.noise));
        }
        // `run` wakes every task with work at time 0.
        for (i, t) in self.tasks.iter().enumerate() {
            if !t.idle_vcpu {
                tr.waking(Nanos::ZERO, CpuId(0), TaskId(i as u32));
            }
        }
        self.push(opts.sample_period, Ev::TraceSample);
        self.trace = Some(Box::new(tr));
        let r = self.run();
        (r, sink.take())
    }

    /// A CPU switches to `t` (traced runs only).
    fn trace_switch(&mut self, c: CpuId, t: Option<TaskId>) {
        let prev = self.cpus[c.idx()].curr;
        if prev == t {
            return;
        }
        let state = match prev.map(|p| self.tasks[p.idx()].st) {
            Some(St::Blocked) => 1,
            Some(St::Done) => 2,
            _ => 0,
        };
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.switch(self.now, c, prev, state, t);
        }
    }

    /// Sample the trace's counter tracks and schedule the next sample (traced runs only).
    fn trace_sample(&mut self) {
        let now = self.now;
        let fast = self.topo.fast_class;
        let credit: Vec<Option<i64>> = (0..self.tasks.len())
            .map(|i| if self.tasks[i].idle_vcpu { None } else { self.disp.credit(TaskId(i as u32)) })
            .collect();
        let runq: Vec<Option<u32>> = (0..self.cpus.len()).map(|c| self.disp.runq_len(CpuId(c as u32))).collect();
        let mut fast_ns = vec![0u64; self.domains.len()];
        for t in &self.tasks {
            let mut v = t.run_by_class[fast];
            if let St::Running(c) = t.st {
                if self.cpus[c.idx()].class == fast {
                    v += (now - t.seg_start).0;
                }
            }
            fast_ns[t.domain.idx()] += v;
        }
        let counters = self.disp.counters();
        let sample = Sample {
            credit: &credit,
            runq: &runq,
            fast_ns: &fast_ns,
            active: &self.dom_active,
            counters: &counters,
            placer_changes: self.placer_changes,
        };
        let Some(tr) = self.trace.as_deref_mut() else { return };
        tr.sample(now, &sample);
        let p = tr.period();
        self.push(now + p, Ev::TraceSample);
    }

    fn noise_len(&mut self, c: usize, on: bool) -> Nanos {
        if let NoiseSpec::Bursty { on: on_len, off, random, .. } = self.topo.cpus[c].noise {
            let mean = if on { on_len } else { off };
            if random {
                let u: f64 = self.rng.gen_range(f64::EPSILON..1.0);
                Nanos(((-u.ln()) * mean.0 as f64).round().max(1.0) as u64)
            } else {
                Nanos(mean.0.max(1))
            }
        } else {
            Nanos::MAX
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Tick(c) => {
                if self.cpus[c.idx()].curr.is_some() {
                    let mut fx = std::mem::take(&mut self.fx);
                    self.disp.tick(&view!(self), c, &mut fx);
                    self.fx = fx;
                    self.flush_fx();
                    let p = self.disp.tick_period();
                    self.push(self.now + p, Ev::Tick(c));
                } else {
                    self.cpus[c.idx()].tick_armed = false;
                }
            }
            Ev::Account => {
                let mut fx = std::mem::take(&mut self.fx);
                self.disp.account(&view!(self), &mut fx);
                self.fx = fx;
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
                    // A compute ending at this very instant completes first (its OpDone
                    // is due now too): re-queue the slice end once, behind it.
                    if !std::mem::take(&mut cpu.slice_deferred) {
                        self.settle(t);
                        let tk = &self.tasks[t.idx()];
                        if tk.act == Act::Compute && tk.work_left == 0.0 {
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
            Ev::OpDone(t, g) => {
                let task = &self.tasks[t.idx()];
                if task.gen != g {
                    return;
                }
                let St::Running(c) = task.st else { return };
                self.settle(t);
                match self.tasks[t.idx()].act {
                    Act::Compute => {
                        let tk = &mut self.tasks[t.idx()];
                        // Refill still owed (a short segment) carries over to the next one.
                        tk.work_left = 0.0;
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
            Ev::Wake(t, g) => {
                if self.tasks[t.idx()].sleep_gen == g && self.tasks[t.idx()].st == St::Blocked {
                    self.wake(t);
                }
            }
            Ev::Noise(c) => {
                let ci = c.idx();
                self.flush_cpu(ci);
                if let Some(t) = self.cpus[ci].curr {
                    self.settle(t);
                }
                let on = !self.cpus[ci].noise_on;
                self.cpus[ci].noise_on = on;
                if let NoiseSpec::Bursty { fraction_on, fraction_off, .. } = self.topo.cpus[ci].noise {
                    self.cpus[ci].noise = if on { fraction_on } else { fraction_off };
                }
                if let Some(t) = self.cpus[ci].curr {
                    self.replan(t);
                }
                if let Some(tr) = self.trace.as_deref_mut() {
                    tr.frequency(self.now, c, self.cpus[ci].speed * (1.0 - self.cpus[ci].noise));
                }
                let d = self.noise_len(ci, on);
                self.push(self.now + d, Ev::Noise(c));
            }
            Ev::Place => self.run_placer(),
            Ev::TraceSample => {
                self.events_done -= 1;
                self.trace_sample();
            }
            Ev::Stats => {
                self.sample_series();
                self.push(self.now + self.stats_interval, Ev::Stats);
            }
            Ev::Domain(i) => {
                let (_, d, ch) = self.domain_events[i].clone();
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
                let mut fx = std::mem::take(&mut self.fx);
                self.disp.domain_changed(&view!(self), d, &mut fx);
                self.fx = fx;
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

    fn flush_fx(&mut self) {
        for i in 0..self.fx.resched.len() {
            let c = self.fx.resched[i];
            if !self.cpus[c.idx()].resched_pending {
                self.cpus[c.idx()].resched_pending = true;
                self.pending.push_back(Pending::Resched(c));
            }
        }
        self.fx.resched.clear();
    }

    fn drain(&mut self) {
        while let Some(p) = self.pending.pop_front() {
            match p {
                Pending::Resched(c) => {
                    self.cpus[c.idx()].resched_pending = false;
                    self.schedule(c);
                }
                Pending::Continue(t) => {
                    if let St::Running(c) = self.tasks[t.idx()].st {
                        if self.tasks[t.idx()].act == Act::Ready {
                            self.continue_on(t, c);
                        }
                    }
                }
            }
        }
    }

    // ---- state and time accounting ------------------------------------

    fn set_state(&mut self, t: TaskId, st: St) {
        let now = self.now;
        let tk = &mut self.tasks[t.idx()];
        let dt = (now - tk.state_since).0;
        match tk.st {
            St::Runnable => tk.wait_ns += dt,
            St::Blocked => tk.blocked_ns += dt,
            _ => {}
        }
        tk.state_since = now;
        let was_active = matches!(tk.st, St::Runnable | St::Running(_));
        let is_active = matches!(st, St::Runnable | St::Running(_));
        tk.st = st;
        if is_active {
            tk.period_active = true;
        }
        if was_active != is_active {
            let d = tk.domain.idx();
            let dt = (now - self.dom_active_since[d]).0 as f64;
            self.ser_active_int[d] += dt * self.dom_active[d] as f64;
            self.dom_active_since[d] = now;
            if is_active {
                self.dom_active[d] += 1;
            } else {
                self.dom_active[d] -= 1;
            }
        }
    }

    /// Account a running task's progress up to now.
    fn settle(&mut self, t: TaskId) {
        let now = self.now;
        let tk = &mut self.tasks[t.idx()];
        let St::Running(c) = tk.st else { return };
        let dt = (now - tk.seg_start).0;
        if dt == 0 {
            return;
        }
        tk.seg_start = now;
        let cpu = &self.cpus[c.idx()];
        tk.run_by_class[cpu.class] += dt;
        tk.period_run[cpu.class] += dt;
        self.ser_run[tk.domain.idx()][cpu.class] += dt;
        match tk.act {
            Act::Compute => {
                let avail = dt as f64 * (1.0 - cpu.noise);
                let r = tk.refill_left.min(avail * REFILL_SHARE);
                tk.refill_left -= r;
                let rest = avail - r;
                let per_work = (1.0 - tk.mem) / cpu.speed + tk.mem;
                tk.work_left -= rest / per_work;
                if tk.work_left < EPS {
                    tk.work_left = 0.0;
                }
            }
            Act::Spin { .. } => {
                tk.spin_ns += dt;
                tk.spin_used += Nanos(dt);
            }
            _ => {}
        }
    }

    fn flush_cpu(&mut self, ci: usize) {
        let now = self.now;
        let cpu = &mut self.cpus[ci];
        let dt = (now - cpu.acc_since).0 as f64;
        if dt == 0.0 {
            return;
        }
        cpu.acc_since = now;
        let n = dt * cpu.noise;
        cpu.noise_t += n;
        cpu.p_noise += n;
        if cpu.curr.is_some() {
            cpu.busy += dt - n;
            cpu.p_busy += dt - n;
        } else {
            cpu.idle += dt - n;
            cpu.p_idle += dt - n;
        }
    }

    fn set_curr(&mut self, c: CpuId, t: Option<TaskId>) {
        let ci = c.idx();
        if self.trace.is_some() {
            self.trace_switch(c, t);
        }
        let was_busy = self.cpus[ci].curr.is_some();
        let busy = t.is_some();
        if was_busy != busy {
            self.flush_cpu(ci);
            // fast-idle-while-slow-busy bookkeeping
            let before = self.idle_fast > 0 && self.busy_slow > 0;
            if self.cpus[ci].fast {
                if busy {
                    self.idle_fast -= 1;
                } else {
                    self.idle_fast += 1;
                }
            } else if self.asymmetric {
                if busy {
                    self.busy_slow += 1;
                } else {
                    self.busy_slow -= 1;
                }
            }
            let after = self.idle_fast > 0 && self.busy_slow > 0;
            if before && !after {
                self.fisb_ns += (self.now - self.fisb_since).0;
            } else if !before && after {
                self.fisb_since = self.now;
            }
        }
        self.cpus[ci].curr = t;
        self.curr[ci] = t;
        if busy && !self.cpus[ci].tick_armed {
            let p = self.disp.tick_period();
            if p.0 > 0 {
                self.cpus[ci].tick_armed = true;
                self.push(self.now.next_multiple(p), Ev::Tick(c));
            }
        }
    }

    // ---- scheduling -----------------------------------------------------

    fn schedule(&mut self, c: CpuId) {
        let mut prev = self.cpus[c.idx()].curr;
        loop {
            let prev_runnable = match prev {
                Some(p) => {
                    self.settle(p);
                    self.tasks[p.idx()].st == St::Running(c)
                }
                None => false,
            };
            let mut fx = std::mem::take(&mut self.fx);
            let pick = self.disp.pick_next(&view!(self), c, prev, prev_runnable, &mut fx);
            self.fx = fx;
            self.cpus[c.idx()].slice_at = Nanos::MAX;
            if pick.task != prev {
                if let Some(p) = prev {
                    if prev_runnable {
                        self.set_state(p, St::Runnable);
                    }
                    self.tasks[p.idx()].gen = self.tasks[p.idx()].gen.wrapping_add(1);
                }
                self.set_curr(c, pick.task);
            }
            self.flush_fx();
            let Some(n) = pick.task else { return };
            if pick.task != prev {
                debug_assert_eq!(self.tasks[n.idx()].st, St::Runnable, "picked {n} is not runnable");
                debug_assert!(
                    !self.curr.iter().enumerate().any(|(i, x)| *x == Some(n) && i != c.idx()),
                    "{n} on two CPUs"
                );
                self.start_on(n, c);
            }
            if pick.slice != Nanos::MAX {
                self.set_slice(c, self.now + pick.slice);
            }
            if pick.task == prev {
                self.replan(n);
                return;
            }
            match self.resume(n, c) {
                Outcome::Busy => return,
                Outcome::Blocked | Outcome::Done => {
                    self.mark_blocked(n, c);
                    prev = Some(n);
                }
            }
        }
    }

    /// Arm `c`'s slice timer for `at`, pushing an event only if none fires by then.
    fn set_slice(&mut self, c: CpuId, at: Nanos) {
        let cpu = &mut self.cpus[c.idx()];
        cpu.slice_at = at;
        if at < cpu.slice_ev_at {
            cpu.slice_ev_at = at;
            self.push(at, Ev::SliceEnd(c));
        }
    }

    fn start_on(&mut self, n: TaskId, c: CpuId) {
        self.set_state(n, St::Running(c));
        let now = self.now;
        let md_new = self.topo.cpus[c.idx()].mem_domain;
        let last = self.tasks[n.idx()].last_cpu;
        let tk = &mut self.tasks[n.idx()];
        tk.seg_start = now;
        if let Some(l) = last {
            if l != c {
                let across = self.topo.cpus[l.idx()].mem_domain != md_new;
                if across {
                    tk.mig_remote += 1;
                } else {
                    tk.mig_local += 1;
                }
                self.ser_mig[tk.domain.idx()] += 1;
                let cost = self.topo.cache.refill_cost(tk.ws_kb, tk.overlap, across).0 as f64;
                tk.refill_left = tk.refill_left.max(cost);
            }
        }
        tk.last_cpu = Some(c);
    }

    /// Re-plan the completion event of a running task (rate or state changed).
    fn replan(&mut self, t: TaskId) {
        let tk = &mut self.tasks[t.idx()];
        let St::Running(c) = tk.st else { return };
        tk.gen = tk.gen.wrapping_add(1);
        let g = tk.gen;
        let cpu = &self.cpus[c.idx()];
        match tk.act {
            Act::Compute => {
                let avail = 1.0 - cpu.noise;
                let per_work = (1.0 - tk.mem) / cpu.speed + tk.mem;
                // While refilling, (1 − REFILL_SHARE) of the cycles do work.
                let warm = tk.refill_left / REFILL_SHARE;
                let work_during = warm * (1.0 - REFILL_SHARE) / per_work;
                let wall = if tk.work_left <= work_during {
                    tk.work_left * per_work / (1.0 - REFILL_SHARE)
                } else {
                    warm + (tk.work_left - work_during) * per_work
                } / avail;
                let at = self.now + Nanos(wall.ceil().max(0.0) as u64);
                self.push(at, Ev::OpDone(t, g));
            }
            Act::Spin { limit: Some(l) } => {
                let left = l.saturating_sub(tk.spin_used);
                self.push(self.now + left, Ev::OpDone(t, g));
            }
            Act::Busy { until } => {
                let at = until.max(self.now);
                self.push(at, Ev::OpDone(t, g));
            }
            _ => {}
        }
    }

    /// A task was just put on CPU `c`: carry on with what it was doing.
    fn resume(&mut self, t: TaskId, c: CpuId) -> Outcome {
        match self.tasks[t.idx()].act {
            Act::Compute | Act::Spin { .. } | Act::Busy { .. } => {
                self.replan(t);
                Outcome::Busy
            }
            Act::Ready => self.exec(t, c),
            Act::Wait => unreachable!("a blocked waiter was picked"),
        }
    }

    /// Continue a running task from its pc; block/end it on its CPU if needed.
    fn continue_on(&mut self, t: TaskId, c: CpuId) {
        match self.exec(t, c) {
            Outcome::Busy => {}
            Outcome::Blocked | Outcome::Done => self.block_running(t, c),
        }
    }

    /// The task running on `c` blocked or ended: record it and tell the dispatcher.
    fn mark_blocked(&mut self, t: TaskId, c: CpuId) {
        if self.tasks[t.idx()].st == St::Running(c) {
            self.set_state(t, St::Blocked);
        }
        let mut fx = std::mem::take(&mut self.fx);
        self.disp.block(&view!(self), t, c, &mut fx);
        self.fx = fx;
        self.flush_fx();
    }

    fn block_running(&mut self, t: TaskId, c: CpuId) {
        self.mark_blocked(t, c);
        // The CPU still has t as curr; schedule() sees it not runnable.
        self.schedule(c);
    }

    fn wake(&mut self, t: TaskId) {
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.waking(self.now, self.tasks[t.idx()].last_cpu.unwrap_or(CpuId(0)), t);
        }
        self.set_state(t, St::Runnable);
        let mut fx = std::mem::take(&mut self.fx);
        self.disp.wake(&view!(self), t, &mut fx);
        self.fx = fx;
        self.flush_fx();
    }

    // ---- program interpretation ------------------------------------------

    /// Start `work` (ns at speed 1.0) of computing with these memory traits: a
    /// compute op, or a chunk of a parallel loop.
    fn start_compute(&mut self, t: TaskId, work: u64, mem: f64, ws_kb: u32, overlap: f64) -> Outcome {
        let tk = &mut self.tasks[t.idx()];
        tk.work_left = work as f64;
        tk.mem = mem;
        tk.ws_kb = ws_kb;
        tk.overlap = overlap;
        tk.act = Act::Compute;
        self.replan(t);
        Outcome::Busy
    }

    /// Interpret ops from pc until the task needs time, waits, or ends.
    fn exec(&mut self, t: TaskId, _c: CpuId) -> Outcome {
        loop {
            let tk = &mut self.tasks[t.idx()];
            let op = tk.prog.ops[tk.pc as usize].clone();
            match op {
                Op::Compute { work, mem, ws_kb, overlap } => {
                    if work.0 == 0 {
                        tk.pc += 1;
                        continue;
                    }
                    return self.start_compute(t, work.0, mem, ws_kb, overlap);
                }
                Op::LoopStart { count, .. } => {
                    tk.loops.push(count);
                    tk.pc += 1;
                }
                Op::LoopEnd { start } => {
                    let top = tk.loops.last_mut().expect("loop stack");
                    *top -= 1;
                    if *top > 0 {
                        tk.pc = start + 1;
                    } else {
                        tk.loops.pop();
                        tk.pc += 1;
                    }
                }
                Op::Sleep { dur } => {
                    tk.pc += 1;
                    tk.sleep_gen = tk.sleep_gen.wrapping_add(1);
                    let g = tk.sleep_gen;
                    self.push(self.now + dur, Ev::Wake(t, g));
                    return Outcome::Blocked;
                }
                Op::SleepExp { mean } => {
                    tk.pc += 1;
                    tk.sleep_gen = tk.sleep_gen.wrapping_add(1);
                    let g = tk.sleep_gen;
                    // Exponential by inversion from the run's seeded generator.
                    let u: f64 = self.rng.gen_range(f64::EPSILON..1.0);
                    let dur = Nanos(((-u.ln()) * mean.0 as f64).round().max(1.0) as u64);
                    self.push(self.now + dur, Ev::Wake(t, g));
                    return Outcome::Blocked;
                }
                Op::End => {
                    self.set_state(t, St::Done);
                    self.tasks[t.idx()].done_at = Some(self.now);
                    self.live -= 1;
                    if self.live == 0 {
                        if let Stop::AllDone { .. } = self.stop {
                            self.finished = true;
                        }
                    }
                    return Outcome::Done;
                }
                Op::Barrier { id, wait } => {
                    let key = SyncKey::Barrier(tk.group, id);
                    if let Some(o) = self.barrier_arrive(t, key, wait) {
                        return o;
                    }
                }
                Op::BarrierN { id, parties, wait } => {
                    let key = SyncKey::Barrier(tk.group, id);
                    if let Some(o) = self.barrier_arrive_n(t, key, parties, wait) {
                        return o;
                    }
                }
                Op::Runtime { dur } => {
                    if dur.0 == 0 {
                        tk.pc += 1;
                        continue;
                    }
                    tk.act = Act::Busy { until: self.now + dur };
                    self.replan(t);
                    return Outcome::Busy;
                }
                Op::Timer { id, period, relative, start } => {
                    let now = self.now;
                    let obj = self.sync.entry(SyncKey::Timer(tk.group, id)).or_default();
                    if !obj.init {
                        obj.init = true;
                        obj.at = start;
                    }
                    obj.at += period;
                    let at = obj.at;
                    if now >= at && relative {
                        obj.at = now;
                    }
                    tk.pc += 1;
                    if now < at {
                        tk.sleep_gen = tk.sleep_gen.wrapping_add(1);
                        let g = tk.sleep_gen;
                        self.push(at, Ev::Wake(t, g));
                        return Outcome::Blocked;
                    }
                }
                Op::CondWait { id, wait } => {
                    let obj = self.sync.entry(SyncKey::Cond(tk.group, id)).or_default();
                    obj.waiters.push_back(t);
                    return self.enter_wait(t, wait);
                }
                Op::CondSignal { id, broadcast } => {
                    tk.pc += 1;
                    let obj = self.sync.entry(SyncKey::Cond(tk.group, id)).or_default();
                    let n = if broadcast { obj.waiters.len() } else { obj.waiters.len().min(1) };
                    let ws: Vec<TaskId> = obj.waiters.drain(..n).collect();
                    for w in ws {
                        self.release(w);
                    }
                }
                Op::Affinity { mask } => {
                    tk.pc += 1;
                    if self.views[t.idx()].affinity != mask {
                        self.views[t.idx()].affinity = mask;
                        let mut fx = std::mem::take(&mut self.fx);
                        self.disp.affinity_changed(&view!(self), t, &mut fx);
                        self.fx = fx;
                        self.flush_fx();
                    }
                }
                Op::Lock { id, wait } => {
                    let key = SyncKey::Lock(tk.group, id);
                    let obj = self.sync.entry(key).or_default();
                    if obj.owner.is_none() {
                        obj.owner = Some(t);
                        self.tasks[t.idx()].pc += 1;
                    } else {
                        debug_assert_ne!(obj.owner, Some(t), "{t} re-locks a lock it holds");
                        obj.waiters.push_back(t);
                        return self.enter_wait(t, wait);
                    }
                }
                Op::Unlock { id } => {
                    let key = SyncKey::Lock(tk.group, id);
                    tk.pc += 1;
                    let obj = self.sync.entry(key).or_default();
                    debug_assert_eq!(obj.owner, Some(t), "{t} unlocks a lock it does not hold");
                    obj.owner = obj.waiters.pop_front();
                    if let Some(w) = obj.owner {
                        self.release(w);
                    }
                }
                Op::Push { chan, capacity, wait } => {
                    let key = SyncKey::Chan(tk.group, chan);
                    let obj = self.sync.entry(key).or_default();
                    if let Some(w) = obj.waiters.pop_front() {
                        // a consumer is waiting: hand the item over
                        self.tasks[t.idx()].pc += 1;
                        self.release(w);
                    } else if obj.count < capacity as u64 {
                        obj.count += 1;
                        self.tasks[t.idx()].pc += 1;
                    } else {
                        obj.push_waiters.push_back(t);
                        return self.enter_wait(t, wait);
                    }
                }
                Op::Pop { chan, wait } => {
                    let key = SyncKey::Chan(tk.group, chan);
                    let obj = self.sync.entry(key).or_default();
                    if obj.count > 0 {
                        obj.count -= 1;
                        self.tasks[t.idx()].pc += 1;
                        // a producer waiting for room puts its item in
                        if let Some(p) = obj.push_waiters.pop_front() {
                            obj.count += 1;
                            self.release(p);
                        }
                    } else if let Some(p) = obj.push_waiters.pop_front() {
                        self.tasks[t.idx()].pc += 1;
                        self.release(p);
                    } else {
                        obj.waiters.push_back(t);
                        return self.enter_wait(t, wait);
                    }
                }
                Op::ParFor { id, work, schedule, mem, ws_kb, overlap, wait } => {
                    let n = self.group_size[tk.group as usize] as u64;
                    let rank = tk.rank as u64;
                    let group = tk.group;
                    let key = SyncKey::ParFor(group, id);
                    let obj = self.sync.entry(key).or_default();
                    if !obj.init {
                        obj.init = true;
                        obj.remaining = work.0;
                    }
                    let take = match schedule {
                        Schedule::Static => {
                            if tk.pf_static_done {
                                0
                            } else {
                                tk.pf_static_done = true;
                                work.0 / n + u64::from(rank < work.0 % n)
                            }
                        }
                        Schedule::Dynamic { chunk } => chunk.0.min(obj.remaining),
                        Schedule::Guided { min_chunk } => obj.remaining.div_ceil(n).max(min_chunk.0).min(obj.remaining),
                    };
                    if !matches!(schedule, Schedule::Static) {
                        obj.remaining -= take;
                    }
                    if take > 0 {
                        return self.start_compute(t, take, mem, ws_kb, overlap);
                    }
                    // This task is out of work: leave the loop, then the implicit barrier.
                    self.tasks[t.idx()].pf_static_done = false;
                    obj.exited += 1;
                    if obj.exited as u64 == n {
                        obj.init = false;
                        obj.exited = 0;
                    }
                    if let Some(o) = self.barrier_arrive(t, SyncKey::Barrier(group, id | 0x8000_0000), wait) {
                        return o;
                    }
                }
            }
        }
    }

    /// Arrive at a barrier: `None` when it completed (pc advanced), else how the task waits.
    fn barrier_arrive(&mut self, t: TaskId, key: SyncKey, wait: Wait) -> Option<Outcome> {
        let n = self.group_size[self.tasks[t.idx()].group as usize];
        self.barrier_arrive_n(t, key, n, wait)
    }

    /// Arrive at a barrier of `n` parties (see `barrier_arrive`).
    fn barrier_arrive_n(&mut self, t: TaskId, key: SyncKey, n: u32, wait: Wait) -> Option<Outcome> {
        let obj = self.sync.entry(key).or_default();
        obj.arrived += 1;
        if obj.arrived >= n {
            obj.arrived = 0;
            let ws: Vec<TaskId> = obj.waiters.drain(..).collect();
            self.tasks[t.idx()].pc += 1;
            for w in ws {
                self.release(w);
            }
            None
        } else {
            obj.waiters.push_back(t);
            Some(self.enter_wait(t, wait))
        }
    }

    fn enter_wait(&mut self, t: TaskId, wait: Wait) -> Outcome {
        let tk = &mut self.tasks[t.idx()];
        match wait {
            Wait::Block => {
                tk.act = Act::Wait;
                Outcome::Blocked
            }
            Wait::Spin => {
                tk.act = Act::Spin { limit: None };
                tk.spin_used = Nanos::ZERO;
                Outcome::Busy
            }
            Wait::SpinThenBlock(l) => {
                tk.act = Act::Spin { limit: Some(l) };
                tk.spin_used = Nanos::ZERO;
                if l.0 == 0 {
                    tk.act = Act::Wait;
                    return Outcome::Blocked;
                }
                self.replan(t);
                Outcome::Busy
            }
        }
    }

    /// The condition `w` waited for holds: move it past its op and let it go on.
    fn release(&mut self, w: TaskId) {
        let st = self.tasks[w.idx()].st;
        if let St::Running(_) = st {
            self.settle(w);
        }
        let tk = &mut self.tasks[w.idx()];
        tk.pc += 1;
        tk.act = Act::Ready;
        tk.gen = tk.gen.wrapping_add(1);
        match st {
            St::Blocked => self.wake(w),
            St::Running(_) => self.pending.push_back(Pending::Continue(w)),
            St::Runnable => {}
            St::Done => unreachable!("a finished task was waiting"),
        }
    }

    // ---- placer, statistics, results ----------------------------------------

    fn run_placer(&mut self) {
        let Some(mut placer) = self.placer.take() else { return };
        let now = self.now;
        for c in 0..self.cpus.len() {
            self.flush_cpu(c);
        }
        for i in 0..self.tasks.len() {
            if let St::Running(_) = self.tasks[i].st {
                self.settle(TaskId(i as u32));
            }
        }
        let mut nr_running = vec![0u32; self.cpus.len()];
        for t in &self.tasks {
            match t.st {
                St::Running(c) => nr_running[c.idx()] += 1,
                St::Runnable => {
                    if let Some(c) = t.last_cpu {
                        nr_running[c.idx()] += 1;
                    }
                }
                _ => {}
            }
        }
        let snap = Snapshot {
            now,
            period: now - self.last_place,
            cpus: self
                .cpus
                .iter()
                .enumerate()
                .map(|(i, c)| CpuSample {
                    id: CpuId(i as u32),
                    busy: Nanos(c.p_busy.round() as u64),
                    idle: Nanos(c.p_idle.round() as u64),
                    noise: Nanos(c.p_noise.round() as u64),
                    nr_running: nr_running[i],
                })
                .collect(),
            tasks: self
                .tasks
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.idle_vcpu)
                .map(|(i, t)| TaskSample {
                    id: TaskId(i as u32),
                    domain: t.domain,
                    vcpu: self.views[i].vcpu,
                    active: t.period_active,
                    runnable_now: matches!(t.st, St::Runnable | St::Running(_)),
                    running: matches!(t.st, St::Running(_)),
                    done: t.st == St::Done,
                    run_by_class: t.period_run.iter().map(|x| Nanos(*x)).collect(),
                    cpu: match t.st {
                        St::Running(c) => Some(c),
                        _ => t.last_cpu,
                    },
                    affinity: self.views[i].affinity,
                    ws_kb: t.ws_kb,
                })
                .collect(),
            domains: self
                .domains
                .iter()
                .enumerate()
                .map(|(i, d)| DomainSample {
                    id: DomainId(i as u32),
                    weight: d.weight,
                    priority: d.priority,
                    fast_vcpus: d.fast_vcpus.clone(),
                })
                .collect(),
        };
        let mut changes: Vec<AffinityChange> = Vec::new();
        placer.place(&self.topo, &snap, &mut changes);
        for c in &mut self.cpus {
            c.p_busy = 0.0;
            c.p_idle = 0.0;
            c.p_noise = 0.0;
        }
        for t in &mut self.tasks {
            t.period_run.iter_mut().for_each(|x| *x = 0);
            t.period_active = matches!(t.st, St::Runnable | St::Running(_));
        }
        self.last_place = now;
        for ch in changes {
            if ch.mask.is_empty() || ch.task.idx() >= self.tasks.len() || self.views[ch.task.idx()].affinity == ch.mask
            {
                continue;
            }
            self.placer_changes += 1;
            self.views[ch.task.idx()].affinity = ch.mask;
            let mut fx = std::mem::take(&mut self.fx);
            self.disp.affinity_changed(&view!(self), ch.task, &mut fx);
            self.fx = fx;
            self.flush_fx();
        }
        let per = placer.period();
        self.placer = Some(placer);
        self.push(now + per, Ev::Place);
    }

    fn sample_series(&mut self) {
        let now = self.now;
        for i in 0..self.tasks.len() {
            if let St::Running(_) = self.tasks[i].st {
                self.settle(TaskId(i as u32));
            }
        }
        let span = (now - self.last_stats).0.max(1);
        for d in 0..self.domains.len() {
            let dt = (now - self.dom_active_since[d]).0 as f64;
            self.ser_active_int[d] += dt * self.dom_active[d] as f64;
            self.dom_active_since[d] = now;
            let point = SeriesPoint {
                t_ns: now.0,
                class_ns: std::mem::replace(&mut self.ser_run[d], vec![0; self.topo.classes.len()]),
                active_avg: self.ser_active_int[d] / span as f64,
                migrations: std::mem::take(&mut self.ser_mig[d]),
            };
            self.ser_active_int[d] = 0.0;
            self.series[d].push(point);
        }
        let values = self.disp.counters().into_iter().map(|(_, v)| v).collect();
        self.counter_series.push(CounterPoint { t_ns: now.0, values });
        self.last_stats = now;
    }

    fn finish(mut self) -> RunResult {
        if let Some(tr) = self.trace.take() {
            tr.finish();
        }
        let now = self.now;
        for i in 0..self.tasks.len() {
            let t = TaskId(i as u32);
            self.settle(t);
            let st = self.tasks[i].st;
            self.set_state(t, st);
        }
        for c in 0..self.cpus.len() {
            self.flush_cpu(c);
        }
        if self.idle_fast > 0 && self.busy_slow > 0 {
            self.fisb_ns += (now - self.fisb_since).0;
        }
        if self.stats_interval.0 > 0 && now > self.last_stats {
            self.sample_series();
        }
        let classes = self.topo.classes.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        let ct = |v: &[u64]| ClassTimes::new(&classes, v);
        let tasks: Vec<TaskResult> = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| TaskResult {
                id: i as u32,
                domain: t.domain.0,
                vcpu: self.views[i].vcpu,
                idle: t.idle_vcpu,
                completion_ns: t.done_at.map(|x| x.0),
                computes_done: t.computes_done,
                cpu_ns: ct(&t.run_by_class),
                wait_ns: t.wait_ns,
                blocked_ns: t.blocked_ns,
                spin_ns: t.spin_ns,
                migrations_local: t.mig_local,
                migrations_remote: t.mig_remote,
            })
            .collect();
        let domains: Vec<DomainResult> = self
            .domains
            .iter()
            .enumerate()
            .map(|(d, dv)| {
                let mine: Vec<&TaskResult> = tasks.iter().filter(|t| t.domain == d as u32 && !t.idle).collect();
                let mut run = vec![0u64; classes.len()];
                for t in &mine {
                    for (k, v) in t.cpu_ns.values.iter().enumerate() {
                        run[k] += v;
                    }
                }
                let completion = if !mine.is_empty() && mine.iter().all(|t| t.completion_ns.is_some()) {
                    mine.iter().filter_map(|t| t.completion_ns).max()
                } else {
                    None
                };
                DomainResult {
                    id: d as u32,
                    name: dv.name.clone(),
                    completion_ns: completion,
                    cpu_ns: ct(&run),
                    wait_ns: mine.iter().map(|t| t.wait_ns).sum(),
                    blocked_ns: mine.iter().map(|t| t.blocked_ns).sum(),
                    spin_ns: mine.iter().map(|t| t.spin_ns).sum(),
                    migrations_local: mine.iter().map(|t| t.migrations_local).sum(),
                    migrations_remote: mine.iter().map(|t| t.migrations_remote).sum(),
                    series: std::mem::take(&mut self.series[d]),
                }
            })
            .collect();
        let cpus = self
            .cpus
            .iter()
            .enumerate()
            .map(|(i, c)| CpuResult {
                id: i as u32,
                class: classes[c.class].clone(),
                busy_ns: c.busy.round() as u64,
                idle_ns: c.idle.round() as u64,
                noise_ns: c.noise_t.round() as u64,
            })
            .collect();
        let counters = self.disp.counters().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        RunResult {
            scenario: self.name.clone(),
            dispatcher: self.disp.name().to_string(),
            placer: self.placer.as_ref().map(|p| p.name().to_string()).unwrap_or_else(|| "none".into()),
            seed: self.seed,
            end_ns: now.0,
            all_done: self.live == 0,
            truncated: self.truncated && self.live > 0,
            events: self.events_done,
            classes,
            stats_interval_ns: self.stats_interval.0,
            fast_idle_slow_busy_ns: self.fisb_ns,
            placer_changes: self.placer_changes,
            dispatcher_counters: counters,
            counter_series: std::mem::take(&mut self.counter_series),
            dispatcher_samples: self.disp.samples().into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            tasks,
            domains,
            cpus,
        }
    }
}
