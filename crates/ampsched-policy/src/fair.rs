//! `fair`: a CFS-like dispatcher with a runqueue-length balancer — the
//! asymmetry-unaware commodity OS that the capability balancer (docs/design/capability.md,
//! "Why") and the asymmetry study (docs/design/asymmetry-study.md, baseline) start from.
//!
//! Design (Linux `kernel/sched/fair.c`, simplified):
//! - Per-CPU runqueues ordered by virtual runtime `(vruntime, TaskId)`; the
//!   running task is outside its queue. Running for `Δ` ns adds
//!   `Δ × 1024 / weight` to its vruntime; a CPU runs the queued task with the
//!   smallest vruntime. Task weight = domain weight × 1024 / 256, so the
//!   scenario default weight 256 (Xen's) is CFS's nice-0 load 1024, and
//!   domain weights 256 : 512 give CFS weights 1024 : 2048.
//! - Slice (`sched_slice`): period × weight / queue load, where period =
//!   `sched_latency` while at most `sched_latency / min_granularity` tasks are
//!   runnable there, else `nr_running × min_granularity`; never below
//!   `min_granularity`. With equal weights that is `sched_latency / nr_running`.
//! - `min_vruntime` per CPU only grows: max(itself, min(curr, leftmost)).
//!   A waking task gets `max(own, min_vruntime − sched_latency / 2)`
//!   (GENTLE_FAIR_SLEEPERS); a task changing CPU keeps its lag:
//!   `vruntime − min_vruntime(old) + min_vruntime(new)`.
//! - Wake-up placement (`select_task_rq_fair`, no wake-affine): the previous
//!   CPU if allowed and idle, else the first idle allowed CPU cycling from the
//!   previous one, else the previous CPU if allowed, else the allowed CPU with
//!   the fewest runnable tasks (ties: cycling order from the previous CPU).
//!   "Idle" = no running and no queued task. The woken task preempts the
//!   running one when that one's vruntime exceeds its own by more than
//!   `wakeup_granularity × 1024 / weight`.
//! - Periodic balancer (`load_balance`, simplified to task counts): every
//!   `balance_interval`, every CPU in turn — least loaded first, as idle CPUs
//!   balance more often than busy ones in Linux (busy_factor), ties by id —
//!   looks for the busiest CPU (most runnable tasks, ties by id) whose count
//!   exceeds its own by ≥ 2 and pulls `⌊difference / 2⌋` queued (not running)
//!   tasks it is allowed to run, least recently run first (ties by id); if
//!   every task of that CPU is pinned elsewhere it tries the next busiest.
//!   A CPU about to idle does the same at once (newidle balance).
//!   Consequence (the property docs/design/capability.md relies on): with the task count
//!   a multiple of the CPU count and tasks spread evenly, it never moves a
//!   task, however slow or noisy a CPU is. It knows nothing of speed or noise.
//! - No ticks: slices end by the simulator's slice timer, and vruntime is
//!   charged lazily (`update_curr`) at every decision.
//!
//! - Yield (`Dispatcher::yielding`; a `yield` wait, an MPI rank polling in
//!   Open MPI's progress loop — `opal_progress()` calls `sched_yield()` after
//!   a pass that found no event when `mpi_yield_when_idle` is set, which
//!   `mpirun` does on an oversubscribed node): the poller stays runnable;
//!   Linux's `sys_sched_yield` → `yield_task_fair` marks it the CFS *skip
//!   buddy* (since 2.6.39) and `pick_next_entity` then takes the second
//!   leftmost entity instead when that one is within `wakeup_gran` of it
//!   (`wakeup_preempt_entity(second, left) < 1`); alone on its runqueue the
//!   call returns at once. Only the last yielder is skipped, so several
//!   pollers left of a working task take turns (each µs-long poll ends in a
//!   yield that skips just itself) until their vruntimes pass it: a poller
//!   gives up its turn, never its fair share. Modelled per pick, not per µs
//!   poll (`pick_first`): a non-polling task runs once at most one poller is
//!   left of it, within `wakeup_gran`; until then the leftmost poller runs
//!   for as long as its vruntime needs to reach the working task's (one
//!   pick per poller instead of their µs round-robin; the CPU time each gets
//!   is the same). The polls cost nothing more: the µs turns of pollers
//!   that only wait on each other are folded into one running poller, and
//!   a task queued behind a running poller (woken, pulled, released from
//!   its own poll loop) gets a pick at once, as the next `sched_yield`,
//!   µs away, would give it. Pollers never idle their CPU, so a CPU of
//!   pollers neither idles nor pulls (no newidle balance): the runqueue
//!   counts stay as launched, as with spinning.
//!
//! - Tunable scaling (`tunable_scaling`; default `none`, the values as
//!   given): Linux multiplies `sysctl_sched_latency`,
//!   `sysctl_sched_min_granularity` and `sysctl_sched_wakeup_granularity` by
//!   a factor of the online CPU count at boot — `sched_init_granularity`,
//!   `1 + ilog2(num_online_cpus())` in 2.6.2x-2.6.32, then
//!   `get_update_sysctl_factor` / `update_sysctl` with
//!   `sysctl_sched_tunable_scaling` (2.6.33+): `log` (the default),
//!   `1 + ⌊log₂ min(CPUs, 8)⌋`, `linear` `min(CPUs, 8)`, or `none`. On 4 CPUs
//!   `log` gives × 3: 6 / 0.75 / 1 ms become 18 / 2.25 / 3 ms, so 7 tasks
//!   share an 18 ms period in 2.57 ms slices and a woken task preempts only
//!   from 3 ms behind. `nr_latency` (period / min granularity) is unchanged.
//!   The capability study's testbed (a 4-CPU Linux of 2010-2011) sets `log`;
//!   the asymmetry study keeps the unscaled values it was calibrated with.
//! - Newidle gate (`newidle_min_avg_idle_us`; default 0 = off): Linux 2.6.32+
//!   `idle_balance` stamps `rq->idle_stamp` and returns without balancing
//!   while `rq->avg_idle < sysctl_sched_migration_cost` (0.5 ms): a CPU
//!   whose idle periods are short does not pull. `try_to_wake_up` ends the
//!   period on the CPU the task wakes on: a period longer than 2 × the cost
//!   counts as that cap, otherwise `avg_idle += (period − avg_idle) / 8`
//!   (`update_avg`); a newidle pull also clears the stamp; `avg_idle`
//!   starts at 2 × the cost. Off by default: with blocking waiters the
//!   gate leaves short idle periods unfilled but saves the refills of the
//!   migrations it skips, and in the capability study the saving wins
//!   (cap-npb-competitive runqueue, natural: 114 105 → 48 436 migrations,
//!   62.2 → 61.5 s) — alone, without the rest of 2.6.32's `load_balance`
//!   (cache-hot tasks, decayed loads, `imbalance_pct`), it would model half
//!   of that balancer.
//!
//! Invariants (debug-asserted): a task is on at most one runqueue and never
//! queued while running; a queued task is runnable and allowed on its CPU.
//!
//! - Initial placement (where the OS puts a new thread): with the run's seed
//!   (`Dispatcher::seed`, always given by the simulator) each task's first
//!   CPU is drawn uniformly from its affinity by a ChaCha8 generator seeded
//!   with `seed ^ PLACEMENT_SALT` (a stream apart from the simulator's
//!   noise); tasks woken together then spread over idle CPUs by the wake-up
//!   rule above, so with fewer tasks than CPUs *which* CPUs (fast or slow)
//!   they get differs from seed to seed — the run-to-run variation of the
//!   asymmetry study. Unseeded (unit tests): round-robin by task id.
//!
//! Simplifications, on purpose: no scheduling domains or groups (one flat
//! level), no cache-hot check on pulls, no START_DEBIT (all tasks start at
//! vruntime 0), no active balance of running tasks.

use crate::dispatcher::{Dispatcher, Effects, Pick, SysView};
use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use ampsched_model::spec::Params;
use ampsched_model::{CpuId, DomainId, Nanos, TaskId, Topology};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Mixed into the run's seed for the initial-placement generator, so its
/// stream is independent of the simulator's own (noise) stream.
pub const PLACEMENT_SALT: u64 = 0x5eed_f41e_u64;

/// CFS load weight of a nice-0 task (Linux NICE_0_LOAD).
pub const NICE_0_LOAD: u64 = 1024;
/// Domain weight that maps to nice 0: the scenario default (Xen's 256).
pub const DOMAIN_WEIGHT_NICE_0: u64 = 256;
/// Default targeted latency: Linux's unscaled `sysctl_sched_latency`, 6 ms.
pub const DEFAULT_SCHED_LATENCY: Nanos = Nanos::from_ms(6);
/// Default minimum slice: Linux's unscaled `sysctl_sched_min_granularity`, 0.75 ms.
pub const DEFAULT_MIN_GRANULARITY: Nanos = Nanos::from_us(750);
/// Default wake-up preemption granularity: Linux's unscaled 1 ms.
pub const DEFAULT_WAKEUP_GRANULARITY: Nanos = Nanos::from_ms(1);
/// Default periodic balance interval: 4 ms, one tick at HZ = 250 (the base
/// interval of Linux's lowest scheduling domain).
pub const DEFAULT_BALANCE_INTERVAL: Nanos = Nanos::from_ms(4);
/// Default newidle gate: 0 = a CPU about to idle always balances (no gate).
pub const DEFAULT_NEWIDLE_MIN_AVG_IDLE: Nanos = Nanos::ZERO;

/// How the three latency tunables grow with the CPU count (Linux
/// `sysctl_sched_tunable_scaling`, `get_update_sysctl_factor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunableScaling {
    /// The values as given (factor 1).
    None,
    /// × (1 + ⌊log₂ min(CPUs, 8)⌋): Linux's default (`SCHED_TUNABLESCALING_LOG`).
    Log,
    /// × min(CPUs, 8) (`SCHED_TUNABLESCALING_LINEAR`).
    Linear,
}

impl TunableScaling {
    /// The factor for a machine of `ncpus` CPUs.
    pub fn factor(self, ncpus: usize) -> u64 {
        let cpus = ncpus.clamp(1, 8) as u64;
        match self {
            TunableScaling::None => 1,
            TunableScaling::Log => 1 + cpus.ilog2() as u64,
            TunableScaling::Linear => cpus,
        }
    }
}

/// Tunables of the fair dispatcher.
#[derive(Clone, Debug)]
pub struct FairParams {
    /// Period within which every runnable task runs once.
    pub sched_latency: Nanos,
    /// Shortest slice.
    pub min_granularity: Nanos,
    /// Vruntime lead a woken task needs to preempt (at nice 0).
    pub wakeup_granularity: Nanos,
    /// Period of the runqueue-length balancer.
    pub balance_interval: Nanos,
    /// Newidle gate: a CPU about to idle balances only when its average idle
    /// period is at least this long (Linux `sysctl_sched_migration_cost`); 0 = always.
    pub newidle_min_avg_idle: Nanos,
    /// Scaling of `sched_latency`, `min_granularity` and `wakeup_granularity`
    /// with the CPU count, applied by [`Fair::new`].
    pub scaling: TunableScaling,
}

/// Parameters of `fair` as shown by `ampsched policies`.
pub const FAIR_PARAMS: &[ParamDoc] =
    &[SCHED_LATENCY, MIN_GRANULARITY, WAKEUP_GRANULARITY, BALANCE_INTERVAL, NEWIDLE_MIN_AVG_IDLE, SCALING];

/// `sched_latency_ms` (CFS `sysctl_sched_latency`).
const SCHED_LATENCY: ParamDoc = ParamDoc {
    name: "sched_latency_ms",
    kind: Kind::Ms { default: DEFAULT_SCHED_LATENCY, min: 0.1, max: 1000.0 },
    unit: "ms",
    doc: "targeted latency: period within which each runnable task runs",
};
/// `min_granularity_ms` (CFS `sysctl_sched_min_granularity`).
const MIN_GRANULARITY: ParamDoc = ParamDoc {
    name: "min_granularity_ms",
    kind: Kind::Ms { default: DEFAULT_MIN_GRANULARITY, min: 0.01, max: 1000.0 },
    unit: "ms",
    doc: "shortest slice",
};
/// `wakeup_granularity_ms` (CFS `sysctl_sched_wakeup_granularity`).
const WAKEUP_GRANULARITY: ParamDoc = ParamDoc {
    name: "wakeup_granularity_ms",
    kind: Kind::Ms { default: DEFAULT_WAKEUP_GRANULARITY, min: 0.0, max: 1000.0 },
    unit: "ms",
    doc: "vruntime lead a woken nice-0 task needs to preempt",
};
/// `balance_interval_ms`: the runqueue-length balancer's period.
const BALANCE_INTERVAL: ParamDoc = ParamDoc {
    name: "balance_interval_ms",
    kind: Kind::Ms { default: DEFAULT_BALANCE_INTERVAL, min: 0.1, max: 10_000.0 },
    unit: "ms",
    doc: "period of the runqueue-length balancer",
};

/// `newidle_min_avg_idle_us`: the newidle balance gate (Linux 2.6.32+ `idle_balance`).
const NEWIDLE_MIN_AVG_IDLE: ParamDoc = ParamDoc {
    name: "newidle_min_avg_idle_us",
    kind: Kind::Us { default: DEFAULT_NEWIDLE_MIN_AVG_IDLE, min: 0.0, max: 1_000_000.0 },
    unit: "µs",
    doc: "a CPU about to idle pulls only if its average idle period is ≥ this (Linux sysctl_sched_migration_cost, 500); 0 = always",
};

/// `tunable_scaling`: Linux `sysctl_sched_tunable_scaling`.
const SCALING: ParamDoc = ParamDoc {
    name: "tunable_scaling",
    kind: Kind::Choice { default: "none", allowed: &["none", "log", "linear"] },
    unit: "",
    doc: "scale the latency, min and wakeup granularities by the CPU count as Linux does at boot: log = 1 + log2 min(CPUs, 8) (Linux's default), linear = min(CPUs, 8), none = as given",
};

impl Default for FairParams {
    fn default() -> Self {
        FairParams {
            sched_latency: DEFAULT_SCHED_LATENCY,
            min_granularity: DEFAULT_MIN_GRANULARITY,
            wakeup_granularity: DEFAULT_WAKEUP_GRANULARITY,
            balance_interval: DEFAULT_BALANCE_INTERVAL,
            newidle_min_avg_idle: DEFAULT_NEWIDLE_MIN_AVG_IDLE,
            scaling: TunableScaling::None,
        }
    }
}

impl FairParams {
    /// Read from scenario parameters.
    pub fn from_params(policy: &str, params: &Params) -> Result<FairParams, PolicyError> {
        let r = ParamReader::new(policy, params, FAIR_PARAMS)?;
        let p = FairParams {
            sched_latency: r.duration(&SCHED_LATENCY)?,
            min_granularity: r.duration(&MIN_GRANULARITY)?,
            wakeup_granularity: r.duration(&WAKEUP_GRANULARITY)?,
            balance_interval: r.duration(&BALANCE_INTERVAL)?,
            newidle_min_avg_idle: r.duration(&NEWIDLE_MIN_AVG_IDLE)?,
            scaling: match r.choice(&SCALING)? {
                "log" => TunableScaling::Log,
                "linear" => TunableScaling::Linear,
                _ => TunableScaling::None,
            },
        };
        if p.min_granularity > p.sched_latency {
            return Err(PolicyError {
                param: "min_granularity_ms".into(),
                msg: "must not exceed sched_latency_ms".into(),
            });
        }
        Ok(p)
    }
}

/// Per-task state (Linux `struct sched_entity`).
#[derive(Clone, Debug)]
pub struct Entity {
    /// Virtual runtime, weighted ns.
    pub vruntime: u64,
    /// CFS load weight.
    pub weight: u64,
    /// CPU whose queue it is (or was last) on.
    pub cpu: CpuId,
    /// On a runqueue (not running).
    pub on_rq: bool,
    /// Runnable as far as the dispatcher knows.
    pub runnable: bool,
    /// In a `yield` wait: polls, calling `sched_yield` between polls.
    pub polls: bool,
    exec_start: Nanos,
    last_ran: Nanos,
}

/// Counters reported in results.
#[derive(Clone, Debug, Default)]
pub struct FairStats {
    /// Tasks pulled by the periodic balancer.
    pub pulls: u64,
    /// Tasks pulled by a CPU about to idle.
    pub newidle_pulls: u64,
    /// Wake-ups that preempted the running task.
    pub wake_preempts: u64,
    /// Tasks moved because their affinity excluded their CPU.
    pub affinity_moves: u64,
    /// Newidle balances skipped by the `avg_idle` gate.
    pub newidle_skips: u64,
}

/// The fair dispatcher's state.
pub struct Fair {
    /// Tunables.
    pub p: FairParams,
    /// Per task.
    pub se: Vec<Entity>,
    /// Per CPU: queued tasks by (vruntime, id).
    rq: Vec<RunQueue>,
    /// Per CPU: the task it runs (as last picked).
    curr: Vec<Option<TaskId>>,
    /// Per CPU: monotonic minimum vruntime.
    pub min_vruntime: Vec<u64>,
    /// Counters.
    pub stats: FairStats,
    /// The run's seed (random initial placement), if given.
    seed: Option<u64>,
    /// Per CPU: average idle period (Linux `rq->avg_idle`), for the newidle gate.
    pub avg_idle: Vec<Nanos>,
    /// Per CPU: when it last went idle, until a wake-up there samples the
    /// idle period (Linux `rq->idle_stamp`; `None` = 0).
    idle_stamp: Vec<Option<Nanos>>,
    /// `load_balance`'s peers (runnable count, CPU) and candidates (last ran,
    /// task), kept between calls so a balance allocates nothing once warm.
    scratch: BalanceScratch,
}

/// `load_balance`'s working lists: peers (runnable count, CPU) and candidates (last ran, task).
type BalanceScratch = (Vec<(u32, CpuId)>, Vec<(Nanos, TaskId)>);

/// A CPU's queued tasks ordered by (vruntime, id), least first (CFS's rbtree
/// keyed by vruntime): a sorted `Vec`, as a CPU queues a few tasks — the
/// order and the ties of an ordered set, without a node allocated and freed
/// as a queue fills and empties.
#[derive(Clone, Debug, Default)]
struct RunQueue(Vec<(u64, TaskId)>);

impl RunQueue {
    /// Queue `k`; false if it is queued already.
    fn insert(&mut self, k: (u64, TaskId)) -> bool {
        match self.0.binary_search(&k) {
            Ok(_) => false,
            Err(i) => {
                self.0.insert(i, k);
                true
            }
        }
    }

    /// Take `k` out; false if it was not queued.
    fn remove(&mut self, k: &(u64, TaskId)) -> bool {
        match self.0.binary_search(k) {
            Ok(i) => {
                self.0.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// The least entry (the leftmost of CFS's tree).
    fn first(&self) -> Option<&(u64, TaskId)> {
        self.0.first()
    }

    /// The entries, least first.
    fn iter(&self) -> std::slice::Iter<'_, (u64, TaskId)> {
        self.0.iter()
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// ⌊a × b / c⌋ (truncated to 64 bits): in 64-bit arithmetic when `a × b`
/// fits, the same quotient as the 128-bit division (done in software) it
/// falls back to. `c` > 0.
#[inline]
fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    match a.checked_mul(b) {
        Some(p) => p / c,
        None => (a as u128 * b as u128 / c as u128) as u64,
    }
}

fn weight_of(domain_weight: u32) -> u64 {
    (domain_weight.max(1) as u64 * NICE_0_LOAD / DOMAIN_WEIGHT_NICE_0).max(1)
}

impl Fair {
    /// A fair dispatcher for `topo`.
    pub fn new(mut p: FairParams, topo: &Topology) -> Fair {
        let n = topo.ncpus();
        // update_sysctl: the three latency tunables × the scaling factor.
        let k = p.scaling.factor(n);
        p.sched_latency = Nanos(p.sched_latency.0 * k);
        p.min_granularity = Nanos(p.min_granularity.0 * k);
        p.wakeup_granularity = Nanos(p.wakeup_granularity.0 * k);
        // Linux starts every runqueue's avg_idle at 2 × sysctl_sched_migration_cost.
        let p_gate = p.newidle_min_avg_idle.0;
        Fair {
            p,
            se: Vec::new(),
            rq: vec![RunQueue::default(); n],
            curr: vec![None; n],
            min_vruntime: vec![0; n],
            stats: FairStats::default(),
            seed: None,
            avg_idle: vec![Nanos(2 * p_gate); n],
            idle_stamp: vec![None; n],
            scratch: (Vec::with_capacity(n), Vec::new()),
        }
    }

    /// Runnable tasks on `cpu`: running + queued.
    pub fn nr_running(&self, cpu: CpuId) -> u32 {
        self.rq[cpu.idx()].len() as u32 + self.curr[cpu.idx()].is_some() as u32
    }

    /// Runnable tasks on every CPU, in id order.
    pub fn counts(&self) -> Vec<u32> {
        (0..self.rq.len()).map(|c| self.nr_running(CpuId(c as u32))).collect()
    }

    fn enqueue(&mut self, cpu: CpuId, t: TaskId) {
        let e = &mut self.se[t.idx()];
        debug_assert!(!e.on_rq, "{t} queued twice");
        e.on_rq = true;
        e.cpu = cpu;
        self.rq[cpu.idx()].insert((e.vruntime, t));
    }

    fn dequeue(&mut self, t: TaskId) {
        let e = &mut self.se[t.idx()];
        debug_assert!(e.on_rq, "{t} not queued");
        e.on_rq = false;
        let removed = self.rq[e.cpu.idx()].remove(&(e.vruntime, t));
        debug_assert!(removed, "{t} missing from its runqueue");
    }

    fn update_min_vruntime(&mut self, cpu: CpuId) {
        let c = cpu.idx();
        let cur = self.curr[c].map(|t| self.se[t.idx()].vruntime);
        let left = self.rq[c].first().map(|k| k.0);
        let m = match (cur, left) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => return,
        };
        self.min_vruntime[c] = self.min_vruntime[c].max(m);
    }

    /// Charge the running task of `cpu` up to `now` (Linux `update_curr`).
    fn update_curr(&mut self, cpu: CpuId, now: Nanos) {
        if let Some(t) = self.curr[cpu.idx()] {
            let e = &mut self.se[t.idx()];
            let delta = now.saturating_sub(e.exec_start).0;
            e.exec_start = now;
            e.vruntime += mul_div(delta, NICE_0_LOAD, e.weight);
            self.update_min_vruntime(cpu);
        }
    }

    /// Slice of `t` on `cpu`, counting `t` as runnable there (`sched_slice`).
    pub fn sched_slice(&self, cpu: CpuId, t: TaskId) -> Nanos {
        let c = cpu.idx();
        let mut load: u64 = self.rq[c].iter().map(|k| self.se[k.1.idx()].weight).sum();
        let mut nr = self.rq[c].len() as u64;
        if let Some(cur) = self.curr[c] {
            load += self.se[cur.idx()].weight;
            nr += 1;
        }
        let e = &self.se[t.idx()];
        if !e.on_rq && self.curr[c] != Some(t) {
            load += e.weight;
            nr += 1;
        }
        let nr_latency = (self.p.sched_latency.0 / self.p.min_granularity.0.max(1)).max(1);
        let period = if nr > nr_latency { self.p.min_granularity.0 * nr } else { self.p.sched_latency.0 };
        let slice = mul_div(period, e.weight, load.max(1));
        Nanos(slice.max(self.p.min_granularity.0))
    }

    /// Move a not-running task's lag from one CPU's clock to another's.
    fn renormalize(&mut self, t: TaskId, from: CpuId, to: CpuId) {
        if from == to {
            return;
        }
        let e = &mut self.se[t.idx()];
        e.vruntime = e.vruntime.saturating_sub(self.min_vruntime[from.idx()]) + self.min_vruntime[to.idx()];
    }

    /// Wake-up placement (see the module docs).
    pub fn select_cpu(&self, v: &SysView, t: TaskId) -> CpuId {
        let aff = &v.tasks[t.idx()].affinity;
        let prev = self.se[t.idx()].cpu;
        let n = self.rq.len();
        let order = (0..n).map(|k| CpuId(((prev.idx() + k) % n) as u32)).filter(|c| aff.contains(*c));
        if let Some(c) = order.clone().find(|c| self.nr_running(*c) == 0) {
            return c;
        }
        if aff.contains(prev) {
            return prev;
        }
        order.min_by_key(|c| self.nr_running(*c)).unwrap_or(prev)
    }

    /// A wake-up on `cpu` ends the idle period stamped there: fold it into
    /// `avg_idle` (Linux 2.6.32 `try_to_wake_up`: a period longer than
    /// 2 × the gate counts as that cap, else `avg += (period − avg) / 8`).
    fn sample_idle(&mut self, cpu: CpuId, now: Nanos) {
        let Some(t0) = self.idle_stamp[cpu.idx()].take() else { return };
        let max = 2 * self.p.newidle_min_avg_idle.0;
        let delta = now.saturating_sub(t0).0;
        let avg = &mut self.avg_idle[cpu.idx()].0;
        if delta > max {
            *avg = max;
        } else {
            *avg = (*avg as i64 + (delta as i64 - *avg as i64) / 8) as u64;
        }
    }

    /// Queued `t` on `cpu`: preempt what runs there if `t` deserves it.
    fn check_preempt(&mut self, v: &SysView, cpu: CpuId, t: TaskId, fx: &mut Effects) {
        match self.curr[cpu.idx()] {
            None => fx.resched(cpu),
            // A poller calls sched_yield within one poll (µs) of `t` being
            // queued: pick again under the yield rule (`pick_first`).
            Some(cur) if self.se[cur.idx()].polls => fx.resched(cpu),
            Some(cur) => {
                self.update_curr(cpu, v.now);
                let e = &self.se[t.idx()];
                let gran = mul_div(self.p.wakeup_granularity.0, NICE_0_LOAD, e.weight);
                if self.se[cur.idx()].vruntime > e.vruntime + gran {
                    self.stats.wake_preempts += 1;
                    fx.resched(cpu);
                }
            }
        }
    }

    /// What `cpu` runs next from its queue and the longest it may run, under
    /// `sched_yield` (see the module docs, "Yield"): the leftmost task, unless
    /// it polls, in which case the leftmost non-polling task `n` runs once at
    /// most one poller is left of it and within `wakeup_gran` (the skip
    /// buddy's test); until then the leftmost poller runs until its vruntime
    /// reaches `n`'s (or `n`'s − `wakeup_gran` when it is the last poller left
    /// of it). Without a non-polling task the leftmost poller runs a slice.
    fn pick_first(&self, cpu: CpuId) -> Option<(TaskId, Nanos)> {
        let q = &self.rq[cpu.idx()];
        let &(lvr, left) = q.first()?;
        let le = &self.se[left.idx()];
        if !le.polls {
            return Some((left, Nanos::MAX));
        }
        let Some((k, &(nvr, n))) = q.iter().enumerate().find(|(_, e)| !self.se[e.1.idx()].polls) else {
            return Some((left, Nanos::MAX));
        };
        // wakeup_gran(left): the granularity in left's virtual time.
        let gran = (self.p.wakeup_granularity.0 as u128 * NICE_0_LOAD as u128 / le.weight as u128) as u64;
        if k == 1 && nvr <= lvr + gran {
            return Some((n, Nanos::MAX));
        }
        let target = if k == 1 { nvr - gran } else { nvr + 1 };
        let run = ((target.saturating_sub(lvr)) as u128 * le.weight as u128 / NICE_0_LOAD as u128) as u64;
        Some((left, Nanos(run.max(1))))
    }

    /// Pull queued tasks from the busiest CPU to `cpu` when their counts
    /// differ by ≥ 2; returns how many moved.
    pub fn load_balance(&mut self, v: &SysView, cpu: CpuId) -> u32 {
        let n = self.rq.len();
        let mine = self.nr_running(cpu);
        let (mut peers, mut cands) = std::mem::take(&mut self.scratch);
        peers.clear();
        peers.extend((0..n).map(|c| CpuId(c as u32)).filter(|c| *c != cpu).map(|c| (self.nr_running(c), c)));
        // Busiest first, ties by id.
        peers.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut moved = 0;
        for &(nr, busiest) in &peers {
            if nr < mine + 2 {
                break;
            }
            let want = (nr - mine) / 2;
            // Least recently run first, ties by id (Linux detaches from the tail of cfs_tasks).
            cands.clear();
            cands.extend(
                self.rq[busiest.idx()]
                    .iter()
                    .map(|k| k.1)
                    .filter(|t| v.tasks[t.idx()].affinity.contains(cpu))
                    .map(|t| (self.se[t.idx()].last_ran, t)),
            );
            if cands.is_empty() {
                continue;
            }
            cands.sort();
            for &(_, t) in cands.iter().take(want as usize) {
                self.dequeue(t);
                self.renormalize(t, busiest, cpu);
                self.enqueue(cpu, t);
                moved += 1;
            }
            self.update_min_vruntime(busiest);
            break;
        }
        self.scratch = (peers, cands);
        moved
    }

    fn check_invariants(&self, v: &SysView) {
        if !cfg!(debug_assertions) {
            return;
        }
        let mut seen = vec![false; self.se.len()];
        for (c, q) in self.rq.iter().enumerate() {
            for (vr, t) in q.iter() {
                debug_assert!(!seen[t.idx()], "{t} on two runqueues");
                seen[t.idx()] = true;
                let e = &self.se[t.idx()];
                debug_assert!(e.on_rq && e.runnable && e.cpu.idx() == c && e.vruntime == *vr, "{t} queue state");
                debug_assert!(v.tasks[t.idx()].affinity.contains(CpuId(c as u32)), "{t} queued outside its affinity");
                debug_assert!(!self.curr.contains(&Some(*t)), "{t} queued while running");
            }
        }
    }
}

impl Dispatcher for Fair {
    fn name(&self) -> &'static str {
        "fair"
    }

    fn tick_period(&self) -> Nanos {
        Nanos::ZERO
    }

    fn account_period(&self) -> Nanos {
        self.p.balance_interval
    }

    fn seed(&mut self, seed: u64) {
        self.seed = Some(seed);
    }

    fn init(&mut self, v: &SysView) {
        let n = v.topo.ncpus();
        let mut rng = self.seed.map(|s| ChaCha8Rng::seed_from_u64(s ^ PLACEMENT_SALT));
        self.se = v
            .tasks
            .iter()
            .enumerate()
            .map(|(i, tv)| {
                // Initial CPU: seeded draw from the affinity, or round-robin
                // by id moved into the affinity.
                let allowed: Vec<CpuId> = tv.affinity.iter().filter(|c| c.idx() < n).collect();
                let mut c = CpuId((i % n) as u32);
                if let (Some(r), false) = (rng.as_mut(), allowed.is_empty()) {
                    c = allowed[r.gen_range(0..allowed.len())];
                } else if !tv.affinity.contains(c) {
                    c = tv.affinity.cycle(c).unwrap_or(CpuId(0));
                }
                Entity {
                    vruntime: 0,
                    weight: weight_of(v.domains[tv.domain.idx()].weight),
                    cpu: c,
                    on_rq: false,
                    runnable: false,
                    polls: false,
                    exec_start: Nanos::ZERO,
                    last_ran: Nanos::ZERO,
                }
            })
            .collect();
    }

    fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        if self.se[t.idx()].runnable || self.curr.contains(&Some(t)) {
            return;
        }
        self.se[t.idx()].runnable = true;
        let old = self.se[t.idx()].cpu;
        let dest = self.select_cpu(v, t);
        self.renormalize(t, old, dest);
        self.sample_idle(dest, v.now);
        self.update_curr(dest, v.now);
        let floor = self.min_vruntime[dest.idx()].saturating_sub(self.p.sched_latency.0 / 2);
        let e = &mut self.se[t.idx()];
        e.vruntime = e.vruntime.max(floor);
        self.enqueue(dest, t);
        self.check_preempt(v, dest, t, fx);
    }

    fn block(&mut self, _v: &SysView, t: TaskId, _cpu: CpuId, _fx: &mut Effects) {
        self.se[t.idx()].runnable = false;
    }

    fn tick(&mut self, _v: &SysView, _cpu: CpuId, _fx: &mut Effects) {}

    fn account(&mut self, v: &SysView, fx: &mut Effects) {
        let n = self.rq.len();
        let mut order: Vec<(u32, CpuId)> = (0..n).map(|c| CpuId(c as u32)).map(|c| (self.nr_running(c), c)).collect();
        order.sort();
        for (_, c) in order {
            let was_idle = self.nr_running(c) == 0;
            let moved = self.load_balance(v, c);
            if moved > 0 {
                self.stats.pulls += moved as u64;
                if was_idle || self.curr[c.idx()].is_none() {
                    fx.resched(c);
                } else {
                    // Preempt if a pulled task deserves the CPU more.
                    let first = self.rq[c.idx()].first().map(|k| k.1).expect("pulled");
                    self.check_preempt(v, c, first, fx);
                }
            }
        }
        self.check_invariants(v);
    }

    fn pick_next(
        &mut self,
        v: &SysView,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_runnable: bool,
        fx: &mut Effects,
    ) -> Pick {
        let now = v.now;
        if let Some(p) = prev {
            debug_assert_eq!(self.curr[cpu.idx()], Some(p), "prev {p} was not running on {cpu}");
            self.update_curr(cpu, now);
            self.curr[cpu.idx()] = None;
            self.se[p.idx()].last_ran = now;
            if prev_runnable {
                self.se[p.idx()].runnable = true;
                if v.tasks[p.idx()].affinity.contains(cpu) {
                    self.enqueue(cpu, p);
                } else {
                    // Its affinity changed while it ran: move it (Linux: migration stopper).
                    let dest = self.select_cpu(v, p);
                    self.renormalize(p, cpu, dest);
                    self.enqueue(dest, p);
                    self.stats.affinity_moves += 1;
                    if dest != cpu {
                        self.check_preempt(v, dest, p, fx);
                    }
                }
            } else {
                self.se[p.idx()].runnable = false;
            }
        }
        if self.rq[cpu.idx()].is_empty() {
            // idle_balance: stamp the idle start, then pull unless the gate says
            // the CPU's idle periods are too short to be worth it.
            let gate = self.p.newidle_min_avg_idle;
            if gate > Nanos::ZERO {
                self.idle_stamp[cpu.idx()] = Some(now);
            }
            if self.avg_idle[cpu.idx()] >= gate {
                let moved = self.load_balance(v, cpu);
                self.stats.newidle_pulls += moved as u64;
                if moved > 0 {
                    self.idle_stamp[cpu.idx()] = None;
                }
            } else {
                self.stats.newidle_skips += 1;
            }
        }
        let pick = match self.pick_first(cpu) {
            Some((t, cap)) => {
                self.dequeue(t);
                self.curr[cpu.idx()] = Some(t);
                let e = &mut self.se[t.idx()];
                e.exec_start = now;
                e.cpu = cpu;
                self.update_min_vruntime(cpu);
                Pick { task: Some(t), slice: self.sched_slice(cpu, t).min(cap) }
            }
            None => Pick::IDLE,
        };
        self.check_invariants(v);
        pick
    }

    fn affinity_changed(&mut self, v: &SysView, t: TaskId, fx: &mut Effects) {
        let aff = &v.tasks[t.idx()].affinity;
        let cpu = self.se[t.idx()].cpu;
        if aff.contains(cpu) {
            return;
        }
        if self.curr[cpu.idx()] == Some(t) {
            // Deschedule; pick_next moves it.
            fx.resched(cpu);
        } else if self.se[t.idx()].on_rq {
            self.dequeue(t);
            let dest = self.select_cpu(v, t);
            self.renormalize(t, cpu, dest);
            self.enqueue(dest, t);
            self.stats.affinity_moves += 1;
            self.check_preempt(v, dest, t, fx);
        }
        // A blocked task is placed by wake-up.
    }

    fn yielding(&mut self, _v: &SysView, t: TaskId, on: bool, fx: &mut Effects) {
        let Some(e) = self.se.get_mut(t.idx()) else { return };
        e.polls = on;
        let (cpu, queued) = (e.cpu, e.on_rq);
        let curr = self.curr[cpu.idx()];
        if on {
            // The running task starts its poll loop: its first sched_yield.
            if curr == Some(t) && !self.rq[cpu.idx()].is_empty() {
                fx.resched(cpu);
            }
        } else if queued && curr.is_some_and(|c| self.se[c.idx()].polls) {
            // Released while queued behind a poller: that one yields within a poll.
            fx.resched(cpu);
        }
    }

    fn domain_changed(&mut self, v: &SysView, d: DomainId, _fx: &mut Effects) {
        let w = weight_of(v.domains[d.idx()].weight);
        for t in &v.domains[d.idx()].tasks {
            if let Some(e) = self.se.get_mut(t.idx()) {
                e.weight = w;
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut c = vec![
            ("pulls", self.stats.pulls as f64),
            ("newidle_pulls", self.stats.newidle_pulls as f64),
            ("wake_preempts", self.stats.wake_preempts as f64),
            ("affinity_moves", self.stats.affinity_moves as f64),
        ];
        // Only where the gate is on: without it the counter is always 0.
        if self.p.newidle_min_avg_idle > Nanos::ZERO {
            c.push(("newidle_skips", self.stats.newidle_skips as f64));
        }
        c
    }

    fn runq_len(&self, cpu: CpuId) -> Option<u32> {
        self.rq.get(cpu.idx()).map(|q| q.len() as u32)
    }
}

#[cfg(test)]
mod tests {
    //! Worked examples driving the fair dispatcher directly, hook by hook.
    use super::*;
    use ampsched_model::CpuSet;
    use std::collections::BTreeSet;

    use crate::testkit::World;

    #[test]
    fn a_runqueue_orders_by_vruntime_then_id_like_an_ordered_set() {
        // CFS picks the leftmost (least vruntime); equal vruntimes go by task id.
        let mut q = RunQueue::default();
        for k in [(500, TaskId(3)), (200, TaskId(9)), (500, TaskId(1)), (200, TaskId(2))] {
            assert!(q.insert(k));
        }
        assert!(!q.insert((500, TaskId(1))), "queued twice");
        let order: Vec<_> = q.iter().copied().collect();
        assert_eq!(order, [(200, TaskId(2)), (200, TaskId(9)), (500, TaskId(1)), (500, TaskId(3))]);
        assert!(q.remove(&(200, TaskId(2))) && !q.remove(&(200, TaskId(2))));
        assert_eq!((q.first(), q.len()), (Some(&(200, TaskId(9))), 3));
    }

    #[test]
    fn mul_div_agrees_with_128_bit_arithmetic() {
        // 3 ms at weight 2048: 3_000_000 × 1024 / 2048 = 1.5 ms of vruntime.
        assert_eq!(mul_div(3_000_000, NICE_0_LOAD, 2048), 1_500_000);
        // A product past 2^64 takes the 128-bit path: (2^62 × 1024) / 3072 = 2^62 / 3.
        assert_eq!(mul_div(1 << 62, NICE_0_LOAD, 3072), (1u64 << 62) / 3);
        assert_eq!(mul_div(u64::MAX, 7, 7), u64::MAX);
    }

    fn fair(w: &World) -> Fair {
        let mut f = Fair::new(FairParams::default(), &w.topo);
        f.init(&w.view(Nanos::ZERO));
        f
    }

    #[test]
    fn weights_1024_and_2048_share_one_cpu_one_third_two_thirds() {
        // Domain weights 256 and 512 → CFS weights 1024 and 2048 (load 3072).
        // Slices: 6 ms × 1024/3072 = 2 ms and 6 ms × 2048/3072 = 4 ms; per
        // 6 ms period A runs 2 ms (vruntime +2 ms) and B 4 ms (+4 × 1024/2048
        // = +2 ms): equal vruntimes, shares 1/3 and 2/3.
        let mut w = World::new(1, &[256, 512]);
        let mut f = fair(&w);
        let (a, b) = (TaskId(0), TaskId(1));
        assert_eq!((f.se[0].weight, f.se[1].weight), (1024, 2048));
        let mut fx = Effects::default();
        f.wake(&w.view(Nanos::ZERO), a, &mut fx);
        f.wake(&w.view(Nanos::ZERO), b, &mut fx);
        let mut now = Nanos::ZERO;
        let mut prev = None;
        let mut ran = [0u64; 2];
        while now < Nanos::from_secs(10) {
            let p = f.pick_next(&w.view(now), CpuId(0), prev, prev.is_some(), &mut fx);
            let t = p.task.expect("always runnable");
            w.curr[0] = Some(t);
            ran[t.idx()] += p.slice.0;
            now += p.slice;
            prev = Some(t);
        }
        let total = (ran[0] + ran[1]) as f64;
        let (sa, sb) = (ran[0] as f64 / total, ran[1] as f64 / total);
        assert!((sa - 1.0 / 3.0).abs() < 0.02 * (1.0 / 3.0), "A share {sa}");
        assert!((sb - 2.0 / 3.0).abs() < 0.02 * (2.0 / 3.0), "B share {sb}");
        assert_eq!(f.sched_slice(CpuId(0), a), Nanos::from_ms(2));
        assert_eq!(f.sched_slice(CpuId(0), b), Nanos::from_ms(4));
    }

    #[test]
    fn pollers_yield_to_a_working_task_once_their_vruntime_catches_up() {
        // One CPU, three nice-0 tasks woken at 0 (vruntime 0): slices
        // 6 ms / 3 = 2 ms, granularity 1 ms.
        let mut w = World::new(1, &[256, 256, 256]);
        let mut f = fair(&w);
        let (a, b, c) = (TaskId(0), TaskId(1), TaskId(2));
        let c0 = CpuId(0);
        let mut fx = Effects::default();
        for t in [a, b, c] {
            f.wake(&w.view(Nanos::ZERO), t, &mut fx);
        }
        let pick = |f: &mut Fair, w: &mut World, ms: f64, prev: TaskId| {
            let p = f.pick_next(&w.view(Nanos::from_ms_f64(ms)), c0, Some(prev), true, &mut Effects::default());
            w.curr[0] = p.task;
            p
        };
        assert_eq!(f.pick_next(&w.view(Nanos::ZERO), c0, None, false, &mut fx).task, Some(a));
        w.curr[0] = Some(a);
        // A polls after its 2 ms (vruntime 2 ms): the yield reschedules; B
        // (vruntime 0) does not poll and is leftmost → B, a normal slice.
        let mut fx = Effects::default();
        f.yielding(&w.view(Nanos::from_ms(2)), a, true, &mut fx);
        assert_eq!(fx.resched, vec![c0]);
        assert_eq!(pick(&mut f, &mut w, 2.0, a), Pick { task: Some(b), slice: Nanos::from_ms(2) });
        // B polls after 0.5 ms (vruntime 0.5 ms): C (vruntime 0) runs 2 ms.
        f.yielding(&w.view(Nanos::from_us(2500)), b, true, &mut Effects::default());
        assert_eq!(pick(&mut f, &mut w, 2.5, b).task, Some(c));
        // At 4.5 ms the queue is B 0.5 (polls), A 2 (polls), C 2 ms (A
        // first on the tie, by id). Two pollers are left of C: in CFS they
        // take turns, each skipped once per yield, until they pass C. One
        // step of that: B, the leftmost, runs until its vruntime is C's + 1 ns
        // = 1.5 ms + 1 ns (sched_yield is not a gift of its fair share).
        let p = pick(&mut f, &mut w, 4.5, c);
        assert_eq!(p, Pick { task: Some(b), slice: Nanos(1_500_001) });
        // A's condition holds at 5 ms while B polls: B yields within a poll.
        let mut fx = Effects::default();
        f.yielding(&w.view(Nanos::from_ms(5)), a, false, &mut fx);
        assert_eq!(fx.resched, vec![c0]);
        // B's vruntime is 1 ms; A (2 ms) is now the first non-poller, with
        // one poller (B) left of it and 2 − 1 = 1 ms ≤ the granularity → A.
        assert_eq!(pick(&mut f, &mut w, 5.0, b).task, Some(a));
        // A task woken onto a CPU where a poller runs gets a pick at once
        // (the poller yields within a poll), even without a vruntime lead.
        let mut w = World::new(1, &[256, 256]);
        let mut f = fair(&w);
        f.wake(&w.view(Nanos::ZERO), a, &mut Effects::default());
        f.pick_next(&w.view(Nanos::ZERO), c0, None, false, &mut Effects::default());
        w.curr[0] = Some(a);
        let mut fx = Effects::default();
        // Alone on its CPU, a poller's sched_yield returns at once: no pick.
        f.yielding(&w.view(Nanos::from_ms(1)), a, true, &mut fx);
        assert!(fx.resched.is_empty());
        f.wake(&w.view(Nanos::from_ms(1)), b, &mut fx);
        assert_eq!(fx.resched, vec![c0]);
    }

    #[test]
    fn the_balancer_leaves_8_tasks_on_4_cpus_alone() {
        // Initial CPUs round-robin: task i → CPU i mod 4. Waking 0-3 finds
        // their CPUs idle; 4-7 find no idle CPU and stay on their previous
        // one: counts 2, 2, 2, 2. Differences < 2 everywhere: no pull, ever.
        let w = World::new(4, &[256; 8]);
        let mut f = fair(&w);
        let mut fx = Effects::default();
        for i in 0..8 {
            f.wake(&w.view(Nanos::ZERO), TaskId(i), &mut fx);
        }
        assert_eq!(f.counts(), vec![2, 2, 2, 2]);
        for k in 1..=100u64 {
            f.account(&w.view(Nanos::from_ms(4 * k)), &mut fx);
        }
        assert_eq!(f.counts(), vec![2, 2, 2, 2]);
        assert_eq!(f.stats.pulls, 0);
    }

    #[test]
    fn the_balancer_moves_one_of_5_tasks_from_3_1_1_0_to_2_1_1_1() {
        // Tasks 0-2 wake on their idle initial CPUs 0, 1, 2; tasks 3 and 4
        // are bound to CPU 0 while they wake: counts 3, 1, 1, 0. Then both
        // are unbound (they stay: CPU 0 is still allowed).
        let mut w = World::new(4, &[256; 5]);
        w.tasks[3].affinity = CpuSet::single(CpuId(0));
        w.tasks[4].affinity = CpuSet::single(CpuId(0));
        let mut f = fair(&w);
        let mut fx = Effects::default();
        for i in 0..5 {
            f.wake(&w.view(Nanos::ZERO), TaskId(i), &mut fx);
        }
        assert_eq!(f.counts(), vec![3, 1, 1, 0]);
        w.tasks[3].affinity = w.topo.all;
        w.tasks[4].affinity = w.topo.all;
        f.affinity_changed(&w.view(Nanos::ZERO), TaskId(3), &mut fx);
        f.affinity_changed(&w.view(Nanos::ZERO), TaskId(4), &mut fx);
        // Balance order: least loaded first → CPU 3 (0 tasks) sees CPU 0 with
        // 3: 3 − 0 ≥ 2 → pulls ⌊3/2⌋ = 1 → counts 2, 1, 1, 1; then CPUs 1, 2
        // and 0 see differences ≤ 1: nothing more.
        let mut fx = Effects::default();
        f.account(&w.view(Nanos::from_ms(4)), &mut fx);
        assert_eq!(f.counts(), vec![2, 1, 1, 1]);
        assert_eq!(f.stats.pulls, 1);
        assert_eq!(fx.resched, vec![CpuId(3)]);
        // Balanced: further rounds change nothing.
        f.account(&w.view(Nanos::from_ms(8)), &mut fx);
        assert_eq!(f.counts(), vec![2, 1, 1, 1]);
    }

    #[test]
    fn log_scaling_triples_the_latencies_on_4_cpus() {
        // sched_init_granularity / get_update_sysctl_factor: 1 + ⌊log₂ min(n, 8)⌋.
        let log: Vec<u64> = [1, 2, 3, 4, 8, 16].iter().map(|n| TunableScaling::Log.factor(*n)).collect();
        assert_eq!(log, [1, 2, 2, 3, 4, 4]);
        assert_eq!((TunableScaling::Linear.factor(4), TunableScaling::Linear.factor(16)), (4, 8));
        assert_eq!(TunableScaling::None.factor(4), 1);
        // 4 CPUs, log: 6 / 0.75 / 1 ms → 18 / 2.25 / 3 ms. Seven tasks on one
        // CPU: 7 ≤ nr_latency = 18 / 2.25 = 8, so the period stays 18 ms and
        // each slice is 18 / 7 ms = 2 571 428 ns (unscaled: 857 142 ns).
        let w = World::new(4, &[256; 7]);
        let p = FairParams { scaling: TunableScaling::Log, ..FairParams::default() };
        let mut f = Fair::new(p, &w.topo);
        f.init(&w.view(Nanos::ZERO));
        assert_eq!(
            (f.p.sched_latency, f.p.min_granularity, f.p.wakeup_granularity),
            (Nanos::from_ms(18), Nanos::from_us(2250), Nanos::from_ms(3))
        );
        for t in 1..7 {
            f.enqueue(CpuId(0), TaskId(t));
        }
        assert_eq!(f.sched_slice(CpuId(0), TaskId(0)), Nanos(2_571_428));
        let mut g = fair(&w);
        for t in 1..7 {
            g.enqueue(CpuId(0), TaskId(t));
        }
        assert_eq!(g.sched_slice(CpuId(0), TaskId(0)), Nanos(857_142));
    }

    #[test]
    fn the_newidle_gate_closes_after_seven_100us_idle_periods_and_reopens_after_a_long_one() {
        // Gate 500 µs (sysctl_sched_migration_cost): avg_idle starts at 1 ms.
        // CPU 0 runs task 0, which blocks and wakes 100 µs later, again and
        // again. The first wake-up ends no idle period; each later one samples
        // a 100 µs period, avg ← avg + (100 − avg) / 8 (integer ns): 887.5,
        // 789.1, 702.9, 627.6, 561.6, 503.9 µs — the gate stays open (≥ 500)
        // for each of these idle periods — then 453.4 µs: closed.
        let mut w = World::new(2, &[256; 4]);
        for t in 1..4 {
            w.tasks[t].affinity = CpuSet::single(CpuId(1));
        }
        let p = FairParams { newidle_min_avg_idle: Nanos::from_us(500), ..FairParams::default() };
        let mut f = Fair::new(p, &w.topo);
        f.init(&w.view(Nanos::ZERO));
        let mut fx = Effects::default();
        let mut now = Nanos::ZERO;
        let mut avgs = Vec::new();
        for _ in 0..7 {
            f.wake(&w.view(now), TaskId(0), &mut fx);
            avgs.push(f.avg_idle[0].0 / 100);
            assert_eq!(f.pick_next(&w.view(now), CpuId(0), None, false, &mut fx).task, Some(TaskId(0)));
            now += Nanos::from_us(50);
            f.block(&w.view(now), TaskId(0), CpuId(0), &mut fx);
            assert_eq!(f.pick_next(&w.view(now), CpuId(0), Some(TaskId(0)), false, &mut fx), Pick::IDLE);
            now += Nanos::from_us(100);
        }
        // In units of 0.1 µs.
        assert_eq!(avgs, [10000, 8875, 7890, 7029, 6275, 5616, 5039]);
        assert_eq!(f.stats.newidle_skips, 0);
        // Tasks 1-3 queue on CPU 1 (3 runnable); their binding is lifted, so
        // CPU 0 could take one.
        for t in 1..4 {
            f.wake(&w.view(now), TaskId(t as u32), &mut fx);
            w.tasks[t].affinity = w.topo.all;
        }
        assert_eq!(f.counts(), vec![0, 3]);
        f.wake(&w.view(now), TaskId(0), &mut fx);
        assert_eq!(f.avg_idle[0], Nanos(453_429));
        assert_eq!(f.pick_next(&w.view(now), CpuId(0), None, false, &mut fx).task, Some(TaskId(0)));
        f.block(&w.view(now), TaskId(0), CpuId(0), &mut fx);
        // About to idle with avg_idle 453.4 µs < 500 µs: no pull.
        assert_eq!(f.pick_next(&w.view(now), CpuId(0), Some(TaskId(0)), false, &mut fx), Pick::IDLE);
        assert_eq!((f.counts(), f.stats.newidle_pulls, f.stats.newidle_skips), (vec![0, 3], 0, 1));
        // A 2 ms idle period (longer than 2 × 500 µs) sets avg_idle to the 1 ms
        // cap: the next newidle balance pulls ⌊(3 − 0) / 2⌋ = 1 task.
        now += Nanos::from_ms(2);
        f.wake(&w.view(now), TaskId(0), &mut fx);
        assert_eq!(f.avg_idle[0], Nanos::from_ms(1));
        assert_eq!(f.pick_next(&w.view(now), CpuId(0), None, false, &mut fx).task, Some(TaskId(0)));
        f.block(&w.view(now), TaskId(0), CpuId(0), &mut fx);
        assert!(f.pick_next(&w.view(now), CpuId(0), Some(TaskId(0)), false, &mut fx).task.is_some());
        assert_eq!((f.counts(), f.stats.newidle_pulls), (vec![1, 2], 1));
    }

    #[test]
    fn the_balancer_respects_affinity() {
        // Four tasks pinned to CPU 0: counts 4, 0 — nothing may move.
        let mut w = World::new(2, &[256; 4]);
        for t in &mut w.tasks {
            t.affinity = CpuSet::single(CpuId(0));
        }
        let mut f = fair(&w);
        let mut fx = Effects::default();
        for i in 0..4 {
            f.wake(&w.view(Nanos::ZERO), TaskId(i), &mut fx);
        }
        f.account(&w.view(Nanos::from_ms(4)), &mut fx);
        assert_eq!(f.counts(), vec![4, 0]);
        // An idle CPU 1 picking finds nothing it may pull.
        assert_eq!(f.pick_next(&w.view(Nanos::from_ms(4)), CpuId(1), None, false, &mut fx), Pick::IDLE);
    }

    #[test]
    fn a_sleeper_wakes_at_most_half_a_latency_behind() {
        // A runs alone for 100 ms (vruntime 100 ms); B slept all along
        // (vruntime 0). B wakes: max(0, min_vruntime 100 ms − 3 ms) = 97 ms,
        // 3 ms ahead of A by more than the 1 ms granularity → preempts.
        let mut w = World::new(1, &[256, 256]);
        let mut f = fair(&w);
        let (a, b) = (TaskId(0), TaskId(1));
        let mut fx = Effects::default();
        f.wake(&w.view(Nanos::ZERO), a, &mut fx);
        assert_eq!(f.pick_next(&w.view(Nanos::ZERO), CpuId(0), None, false, &mut fx).task, Some(a));
        w.curr[0] = Some(a);
        let mut fx = Effects::default();
        f.wake(&w.view(Nanos::from_ms(100)), b, &mut fx);
        assert_eq!(f.se[0].vruntime, Nanos::from_ms(100).0);
        assert_eq!(f.se[1].vruntime, Nanos::from_ms(97).0);
        assert_eq!(fx.resched, vec![CpuId(0)]);
        assert_eq!(f.pick_next(&w.view(Nanos::from_ms(100)), CpuId(0), Some(a), true, &mut fx).task, Some(b));
    }

    #[test]
    fn seeded_initial_placement_differs_between_seeds_and_repeats_for_one() {
        // 2 tasks on 4 CPUs: unseeded, task i starts on CPU i (0, 1). Seeded,
        // each first CPU is a uniform draw of 4: over seeds 1-20 the pair
        // (CPU of task 0, CPU of task 1) takes several values (a fixed pair
        // has probability (1/16)^19 ≈ 0), and one seed always gives the same.
        let w = World::new(4, &[256; 2]);
        let first = |seed: Option<u64>| {
            let mut f = Fair::new(FairParams::default(), &w.topo);
            if let Some(s) = seed {
                f.seed(s);
            }
            f.init(&w.view(Nanos::ZERO));
            (f.se[0].cpu.0, f.se[1].cpu.0)
        };
        assert_eq!(first(None), (0, 1));
        let pairs: BTreeSet<(u32, u32)> = (1..=20).map(|s| first(Some(s))).collect();
        assert!(pairs.len() >= 3, "{pairs:?}");
        assert_eq!(first(Some(5)), first(Some(5)));
    }
}
