//! A task's state and its work accounting: how much of a compute op is left
//! after running `dt` on a CPU of a given speed and noise, and how long the
//! rest will take.
//!
//! Units: work is nanoseconds at speed 1.0; `mem` is the memory-bound share
//! of the work (it does not speed up on a faster CPU); noise is the share of
//! a CPU's time stolen from the task. Work left and refill owed are
//! fixed-point amounts (`engine::fixed`), so the books are integers.
//!
//! A cache refill owed after a migration takes half of the cycles until it
//! is paid: a cold cache slows the code that touches the data (misses
//! interleave with work) rather than stalling it up front, so a short
//! critical section right after a migration is not held for the whole
//! refill. The total cost charged is unchanged (docs/design/workloads.md,
//! "Cost of migration"; how much of it a migration owes: `engine::trail`).
//!
//! May import: `engine::config` (`TaskInit`), `engine::clock` (`Key`), `engine::fixed`, `crate::latency` and the model. Must never
//! import the event loop, the dispatcher or placer bridges, or statistics:
//! the engine moves a task between states; this room only keeps its books.

use super::clock::Key;
use super::config::TaskInit;
use super::fixed::{amount, cost, cost_modulated, cpu_for, div_ceil, work_in, ONE};
use crate::latency::LatencyHist;
use ampsched_model::topology::CacheSpec;
use ampsched_model::Topology;
use ampsched_model::{CpuId, DomainId, Nanos, Op, Program};
use std::sync::Arc;

/// Work left below this amount (2^-12 ns) is done: a compute settled in
/// several pieces (placer samples, noise changes) rounds each piece down.
pub(super) const EPS: u128 = 1 << 20;

/// `Task::refill` when no refill cost is cached (no working set needs 2^96 ns).
pub(super) const NO_REFILL: u128 = u128::MAX;

/// `Task::cost_speed` when no cost is cached (a NaN's bits: no CPU has that speed).
pub(super) const NO_SPEED: u64 = u64::MAX;

/// CPU classes whose run time a task keeps in itself ([`ClassNs`]).
const INLINE_CLASSES: usize = 3;

/// Run time per CPU class, ns: the first `INLINE_CLASSES` classes in the
/// task itself (a settle follows no pointer), any further ones beside.
#[derive(Clone, Debug)]
#[repr(C)]
pub(super) struct ClassNs {
    inline: [u64; INLINE_CLASSES],
    more: Box<[u64]>,
    n: u32,
}

impl ClassNs {
    /// Zero for `n` classes.
    pub(super) fn new(n: usize) -> ClassNs {
        ClassNs { inline: [0; INLINE_CLASSES], more: vec![0; n.saturating_sub(INLINE_CLASSES)].into(), n: n as u32 }
    }

    /// Add `dt` ns to class `c`.
    #[inline]
    pub(super) fn add(&mut self, c: usize, dt: u64) {
        match self.inline.get_mut(c) {
            Some(x) => *x += dt,
            None => self.more[c - INLINE_CLASSES] += dt,
        }
    }

    /// The run time of class `c`.
    pub(super) fn get(&self, c: usize) -> u64 {
        self.inline.get(c).copied().unwrap_or_else(|| self.more[c - INLINE_CLASSES])
    }

    /// Per class, in class order.
    pub(super) fn to_vec(&self) -> Vec<u64> {
        (0..self.n as usize).map(|c| self.get(c)).collect()
    }
}

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum St {
    Blocked,
    Runnable,
    Running(CpuId),
    Done,
}

/// What a task is doing on its CPU (or waiting for).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Act {
    /// Between ops: the next op at `pc` has not started.
    Ready,
    /// Computing; `work_left` and `refill_left` say how much is left.
    Compute,
    /// Spin-waiting; `limit` is the CPU time after which it blocks; `yields`:
    /// it calls `sched_yield` between polls (`Wait::Yield`, see `interp`).
    Spin { limit: Option<Nanos>, yields: bool },
    /// Blocked on a sync object (waiting for a release).
    Wait,
    /// Busy on the CPU until this wall time (`Op::Runtime`).
    Busy { until: Nanos },
}

/// Slack of a periodic task, as rt-app's log reports it: at each `timer`
/// event the period's end (the timer's next activation) minus the time the
/// work before it ended; negative = the period's deadline was missed
/// (rt-app `src/rt-app.c`, `run_event`, case `rtapp_timer`: `t_slack =
/// t_next − t_now` after `t_next += period`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Slack {
    /// Timer events (periods) reached.
    pub(super) periods: u64,
    /// Periods whose work ended after the period's end (slack < 0).
    pub(super) misses: u64,
    /// Least, greatest and summed slack, ns.
    pub(super) min: i64,
    pub(super) max: i64,
    pub(super) sum: i64,
}

impl Slack {
    /// One timer event with this slack (ns).
    pub(super) fn record(&mut self, slack: i64) {
        if self.periods == 0 {
            (self.min, self.max) = (slack, slack);
        } else {
            self.min = self.min.min(slack);
            self.max = self.max.max(slack);
        }
        self.periods += 1;
        self.misses += u64::from(slack < 0);
        self.sum = self.sum.saturating_add(slack);
    }
}

/// One task (a vCPU running a program): interpreter state, accounting and statistics.
///
/// Laid out in order (`repr(C)`, each task on its own 64-byte lines) by what
/// an event touches: the work, the completion plan and the state's times
/// (line 1); what it does, at what cost, and the plan's flags (line 2); the
/// program and the time accounts (line 3); run time per class and the loop
/// counter (line 4); migration costs and counters (line 5); then the far
/// heap's key, the debug generations and the statistics that few events
/// touch. A switch, a settle and a completion then read the first five lines
/// of a task and nothing else (issue 19: `ampsched bench` XL has 1024 tasks
/// of 576 bytes; their first five lines are 320 KiB, the rest is rarely read).
#[repr(C, align(64))]
pub(super) struct Task {
    // Line 1: the work left, the completion plan, since when.
    pub(super) work_left: u128,
    pub(super) refill_left: u128,
    /// The latest completion planned (`Sim::plan_op`).
    pub(super) op_key: Key,
    pub(super) seg_start: Nanos,
    pub(super) state_since: Nanos,
    // Line 2: what it does, at what cost; the plan's flags.
    pub(super) act: Act,
    pub(super) st: St,
    /// `fixed::cost` of `mem` at speed `f64::from_bits(cost_speed)` (NaN bits: not
    /// computed): the f64 arithmetic runs once per segment and speed, not per settle.
    pub(super) cost_speed: u64,
    pub(super) cost: u64,
    pub(super) pc: u32,
    pub(super) domain: DomainId,
    /// Whether `op_key` is in the queue and live (not yet popped or superseded).
    pub(super) op_queued: bool,
    /// Whether `op_key` is live and waits for the entry at `far_key` to pop to be queued.
    pub(super) op_waiting: bool,
    /// Whether `far_key` is set (the task has an entry in the far heap).
    pub(super) far: bool,
    /// Computing with a memory-bound share on a machine with a shared memory
    /// bus: among `Bus::members`, its cost set by the bus (`Sim::bus_change`).
    pub(super) on_bus: bool,
    pub(super) period_active: bool,
    // Line 3: program, time accounts.
    pub(super) prog: Arc<Program>,
    /// Per op, the dense indices of the sync objects it uses (`sync::resolve`).
    pub(super) sync: Arc<[[u32; 2]]>,
    pub(super) mem: f64,
    pub(super) wait_ns: u64,
    pub(super) blocked_ns: u64,
    pub(super) computes_done: u64,
    pub(super) spin_used: Nanos,
    // Line 4: run time per class, the last CPU, the innermost loop's counter.
    pub(super) run_by_class: ClassNs,
    pub(super) last_cpu: Option<CpuId>,
    /// Iterations left of the innermost loop running (`loop_depth` > 0); the outer ones are in `loops`.
    pub(super) loop_top: u32,
    /// Loops entered and not left.
    pub(super) loop_depth: u32,
    // Line 5: what a migration and a compute's start read.
    /// `CacheSpec::refill_cost` of `ws_kb` and `overlap` within (`[0]`) and
    /// across (`[1]`) memory domains, as amounts, once computed (`NO_REFILL`:
    /// not yet): the f64 arithmetic runs once per working set, not per migration.
    pub(super) refill: [u128; 2],
    pub(super) mig_local: u64,
    pub(super) mig_remote: u64,
    pub(super) overlap: f64,
    pub(super) ws_kb: u32,
    pub(super) group: u32,
    // Then what a few events touch.
    /// Key of this task's earliest completion entry in the far heap (valid while `far`).
    pub(super) far_key: Key,
    /// Key of the last wake-up planned (the only one that may wake the task).
    pub(super) wake_key: Key,
    /// Bumped whenever the running op's completion may no longer hold, and the
    /// generation the latest plan was made under: kept in debug builds only,
    /// where a queued plan of an old generation is asserted never to pop.
    pub(super) gen: u32,
    pub(super) op_gen: u32,
    pub(super) rank: u32,
    pub(super) idle_vcpu: bool,
    /// Of a background domain: not counted among the live tasks a run waits for.
    pub(super) background: bool,
    pub(super) pf_static_done: bool,
    /// Iteration counters of the loops around the innermost one, outermost first.
    pub(super) loops: Vec<u32>,
    pub(super) spin_ns: u64,
    pub(super) done_at: Option<Nanos>,
    /// When it last woke from Blocked, until it first runs after that.
    pub(super) woke_at: Option<Nanos>,
    /// Wake-up latencies: from a wake-up to running.
    pub(super) wake_lat: LatencyHist,
    pub(super) name: Option<Arc<str>>,
    pub(super) slack: Slack,
    /// Run time per class since the placer's last period (kept only when a placer runs).
    pub(super) period_run: Vec<u64>,
}

impl Task {
    /// A task as configured, blocked before its first op.
    pub(super) fn new(ti: &TaskInit, nclass: usize) -> Task {
        Task {
            domain: ti.domain,
            idle_vcpu: ti.program.ops.first() == Some(&Op::End),
            background: ti.background,
            prog: ti.program.clone(),
            sync: Arc::from(Vec::new()),
            pc: 0,
            loops: Vec::new(),
            loop_top: 0,
            loop_depth: 0,
            group: ti.group,
            rank: ti.rank,
            st: St::Blocked,
            act: Act::Ready,
            work_left: 0,
            mem: 0.0,
            cost_speed: NO_SPEED,
            cost: 0,
            ws_kb: 0,
            overlap: 1.0,
            refill: [NO_REFILL; 2],
            refill_left: 0,
            seg_start: Nanos::ZERO,
            gen: 0,
            op_key: 0,
            op_gen: 0,
            op_queued: false,
            op_waiting: false,
            far_key: Key::MAX,
            far: false,
            wake_key: 0,
            spin_used: Nanos::ZERO,
            pf_static_done: false,
            last_cpu: None,
            state_since: Nanos::ZERO,
            run_by_class: ClassNs::new(nclass),
            wait_ns: 0,
            blocked_ns: 0,
            spin_ns: 0,
            mig_local: 0,
            mig_remote: 0,
            done_at: None,
            computes_done: 0,
            woke_at: None,
            wake_lat: LatencyHist::new(),
            name: ti.name.clone(),
            slack: Slack::default(),
            period_run: vec![0; nclass],
            period_active: false,
            on_bus: false,
        }
    }

    /// The refill owed after a migration (`across` memory domains or not),
    /// an amount: `cache.refill_cost` of the current working set, cached.
    #[inline]
    pub(super) fn refill_cost(&mut self, cache: &CacheSpec, across: bool) -> u128 {
        let (ws_kb, overlap) = (self.ws_kb, self.overlap);
        let r = &mut self.refill[usize::from(across)];
        if *r == NO_REFILL {
            *r = amount(cache.refill_cost(ws_kb, overlap, across).0);
        }
        *r
    }

    /// CPU ns per ns of work (`fixed::cost`) of the current segment on a CPU of
    /// `speed` of `topo`, cached for the last speed: on a machine whose slower
    /// cores are clock-modulated fast ones, `fixed::cost_modulated`. (A task on
    /// the memory bus has its cost set by the bus: `Sim::bus_change`.)
    #[inline]
    pub(super) fn cost_on(&mut self, speed: f64, topo: &Topology) -> u64 {
        if self.cost_speed != speed.to_bits() {
            self.cost_speed = speed.to_bits();
            self.cost = if topo.clock_modulation {
                cost_modulated(topo.classes[topo.fast_class].speed, speed, self.mem)
            } else {
                cost(speed, self.mem)
            };
        }
        self.cost
    }

    /// Account `cpu` (an amount of CPU time its CPU left it: `Cpu::run_amount`)
    /// of computing at `cost` (CPU ns per ns of work, for this task's memory
    /// share on its CPU): the refill owed takes half of the CPU time until paid.
    #[inline]
    pub(super) fn advance_compute(&mut self, cpu: u128, cost: u64) {
        let r = self.pay_refill(cpu);
        self.work_left = self.work_left.saturating_sub(work_in(cpu - r, cost));
        if self.work_left < EPS {
            self.work_left = 0;
        }
    }

    /// The refill part of `advance_compute` alone: pay the refill owed out of
    /// `cpu` (an amount of CPU time); the part that went to refill.
    #[inline]
    pub(super) fn pay_refill(&mut self, cpu: u128) -> u128 {
        let r = self.refill_left.min(cpu >> 1);
        self.refill_left -= r;
        r
    }

    /// CPU time (an amount) the current compute still needs (see
    /// `advance_compute`): the least amount after which one `advance_compute`
    /// leaves no work; 0 when none is left.
    pub(super) fn compute_need(&self, cost: u64) -> u128 {
        if self.work_left == 0 {
            return 0;
        }
        // CPU time that must go to work; while refilling only half of it does,
        // so `need` within the refill takes 2·need − 1 units (the refill gets
        // the halves rounded down), past it refill + need.
        let need = cpu_for(self.work_left, cost);
        if need <= self.refill_left {
            2 * need - 1
        } else {
            self.refill_left + need
        }
    }

    /// Wall time until the current compute ends on a CPU that leaves it the
    /// share `avail` of its time (see `compute_need`): the least whole ns after
    /// which one `advance_compute` leaves no work.
    pub(super) fn compute_wall(&self, cost: u64, avail: u64) -> Nanos {
        let cpu = self.compute_need(cost);
        // Without noise `avail` is one whole share: a shift, not a division.
        Nanos(if avail == ONE { cpu.div_ceil(ONE as u128) } else { div_ceil(cpu, avail) } as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_times_past_the_inline_ones_are_kept_beside() {
        // Six classes: 0..3 in the task, 3, 4 and 5 in the slice beside.
        let mut r = ClassNs::new(6);
        r.add(1, 10);
        r.add(5, 7);
        r.add(1, 5);
        r.add(4, 2);
        r.add(3, 4);
        assert_eq!(r.to_vec(), vec![0, 15, 0, 4, 2, 7]);
        assert_eq!(ClassNs::new(2).to_vec(), vec![0, 0]);
    }

    #[test]
    fn what_a_switch_touches_is_in_a_tasks_first_five_lines() {
        // The layout the struct's doc describes: each task starts a line, and the
        // fields of a switch, a settle, a completion and a compute's start are in
        // lines 1-5 (bytes 0..320); the far heap's key and the statistics after.
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!(align_of::<Task>(), 64);
        assert_eq!(size_of::<ClassNs>(), 48);
        let line = |off: usize| off / 64;
        assert_eq!(line(offset_of!(Task, state_since)), 0);
        assert_eq!(line(offset_of!(Task, period_active)), 1);
        assert_eq!(line(offset_of!(Task, spin_used)), 2);
        assert_eq!(line(offset_of!(Task, loop_depth)), 3);
        assert_eq!(line(offset_of!(Task, group)), 4);
        assert_eq!(offset_of!(Task, far_key), 320);
    }

    #[test]
    fn the_refill_cost_is_the_cache_specs_and_follows_the_working_set() {
        // Default cache: 512 KiB refilled from the LLC at 7 GB/s = 524288 / 7
        // = 74898.3 → 74898 ns within a memory domain; across, (512 + 2048) KiB
        // from DRAM at 2.4 GB/s = 2621440 / 2.4 = 1092266.7 → 1092267 ns.
        let cache = CacheSpec::default();
        let ti = TaskInit {
            domain: DomainId(0),
            vcpu: 0,
            group: 0,
            rank: 0,
            affinity: ampsched_model::CpuSet::new(),
            program: Arc::new(Program { ops: vec![Op::End] }),
            background: false,
            name: None,
        };
        let mut t = Task::new(&ti, 2);
        (t.ws_kb, t.overlap) = (8192, 1.0);
        assert_eq!(t.refill_cost(&cache, false), amount(74_898));
        assert_eq!(t.refill_cost(&cache, true), amount(1_092_267));
        assert_eq!(t.refill, [amount(74_898), amount(1_092_267)]);
        // Half the overlap: the engine clears the cache when it changes (`start_compute`).
        (t.overlap, t.refill) = (0.5, [NO_REFILL; 2]);
        assert_eq!(t.refill_cost(&cache, false), amount(37_449));
    }
}
