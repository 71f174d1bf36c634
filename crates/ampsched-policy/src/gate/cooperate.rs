//! Cooperate with the kernel: the agent narrows masks only while managed
//! threads really contend for the fast CPUs, and leaves Linux alone
//! otherwise.
//!
//! Linux already places a lone runnable thread well on an asymmetric
//! machine: its load balancer sees a CPU's capacity shrink under real-time
//! and interrupt pressure (`update_cpu_capacity` / `scale_rt_capacity` in
//! kernel/sched/fair.c, the capacity the hog's SCHED_FIFO time takes from
//! CPU 1) and moves a runnable CFS thread to the CPU with the most capacity
//! left; a CPU that goes idle pulls work at once (`newidle_balance`). A
//! placer mask taken from a period that is already over fights that: it
//! confined a lone serial thread to the slow CPU for half its run time
//! (issue 15). A placer only adds something when there are more runnable
//! threads than fast CPUs — then its sharing rule (AASH's equal fast time)
//! decides who waits on the slow CPUs — so its decision is put in force only
//! then.
//!
//! The rule, each period (and, with scheduler events, the moment a fast CPU
//! goes idle — the agent's `events` module in ampsched-agent):
//! - **contention** = more managed threads runnable (that may use a fast
//!   CPU) than there are fast CPUs, *and* no fast CPU was idle for at least
//!   `period / IDLE_DIV` of the period ([`Load::contended`]);
//! - contended: the placer's effective masks are applied as decided;
//! - not contended: every managed thread gets its own mask back (the
//!   widest the agent may give it), whatever the placer decided. The placer
//!   still runs (its credits and rotation stay current) and sees the
//!   widened masks as `affinity` next period, so its masks are put in force
//!   again the period contention returns.
//!
//! So a thread alone runnable, or any runnable thread while a fast CPU
//! idles, is never confined away from that fast CPU by the agent; masks
//! narrow only during contention and widen in the period it ends (within
//! ~1 ms of a fast CPU going idle when the event source is attached).
//!
//! **The end of contention moves the thread the agent kept on a slow CPU**
//! ([`move_released`]): widening a mask does not move a thread that is
//! running. `sched_setaffinity` migrates a task at once only when its CPU
//! leaves the new mask (kernel/sched/core.c `__set_cpus_allowed_ptr_locked`
//! → `affine_move_task`, which returns early when the task's CPU is still
//! allowed, else sends it to the CPU stopper, `migration_cpu_stop`); a
//! widened thread running on the slow CPU stays there until the fast CPU's
//! own balancing pulls it — for a lone CFS task on a CPU that RT work
//! takes capacity from, an active balance (`sched_balance_rq` →
//! `need_active_balance` → `check_cpu_capacity`) from the fast CPU's
//! periodic or nohz-idle balance, not its newidle balance, which skips a
//! running task (`can_migrate_task` → `task_on_cpu`). Seen on `xz -T2`
//! under aash on the development machine (27 Nov, `perf sched`, loaded):
//! the last worker, widened when the other worker ended, ran on the hog's
//! CPU 1 for 150-180 ms afterwards. So in the period contention ends, each
//! heavy runnable thread whose mask in force holds no fast CPU is first
//! given `{f}` for a fast CPU `f` no other heavy runnable managed thread
//! runs on (the stopper moves it there), then its own mask, as
//! [`on_idle_fast_cpu`] moves a thread between periods. Once: the next
//! period finds its mask its own, and from then on where it runs is the
//! kernel's — a thread widened earlier and left on a slow CPU by the
//! kernel is not moved (the agent does not fight the balancer).
//!
//! **Light threads are the kernel's** ([`heavy`], [`free_light`]): a thread
//! that ran less than `period / LIGHT_DIV` in the period neither contends
//! nor is narrowed, even under contention; one the placer had narrowed gets
//! its own mask back. Linux steers a task towards a CPU with more capacity
//! only when its demand does not fit the CPU it is on: kernel/sched/fair.c
//! `update_misfit_status` marks a task misfit only when `task_fits_cpu` →
//! `util_fits_cpu` finds its utilisation above what the CPU's capacity
//! holds; a small task fits anywhere and is left to ordinary wake-up
//! placement (`select_idle_sibling`). The same holds here: a thread that
//! mostly sleeps (a `make` or the `cc` driver waiting for its children, the
//! main thread of `xz -T2` feeding its workers) gains nothing from a share
//! of fast time, but a mask narrowed to the slow CPU makes each of its
//! wake-ups wait there (on the development machine behind the hog's 5 ms
//! spins) while it sits on the critical path of the threads that do the
//! work, and every task it forks inherits that mask (`dup_task_struct`).
//! Seen on `make -j2` of 9 files under aash (27 Nov 10:25, load 8): of 156
//! changes in one run, 48 narrowed the `make` and `cc` processes, which
//! wait for their children nearly all the time.
//! A thread is also light in the period it is first seen (the agent's first
//! run-time reading is its baseline; the simulator counts from its start):
//! the placer's decision for a thread that has not run a period is taken on
//! nothing, so a compiler of 50-200 ms is narrowed from its second period
//! on at the earliest. A thread starved by load the agent does not manage
//! (runnable, but run less than `period / LIGHT_DIV`) is light too: the
//! contention there is with threads outside the agent's reach, which masks
//! among its own cannot resolve, so it is left to the kernel. Demand as run
//! time plus run-queue wait would tell starvation from sleep, but the
//! agent's task-clock counters give run time only.

use crate::{AffinityChange, Snapshot, TaskSample};
use ampsched_model::{CpuId, CpuSet, Nanos, TaskId, Topology};

/// A fast CPU idle for at least `period / IDLE_DIV` (3.75 ms of 30 ms) in a period was idle:
/// there was no contention for it. (`/proc/stat` counts in 10 ms ticks, so one idle tick
/// in a period is enough.)
pub const IDLE_DIV: u64 = 8;

/// A thread that ran less than `period / LIGHT_DIV` (3.75 ms of 30 ms) in a period is light:
/// it neither contends for the fast CPUs nor is narrowed (module doc). The same fraction as
/// [`IDLE_DIV`]: below it, a thread's demand, like a CPU's idleness, is noise at the
/// resolution the period measures.
pub const LIGHT_DIV: u64 = 8;

/// Whether `t` ran at least `period / LIGHT_DIV` in the period `period` (module doc): only
/// such a thread contends for the fast CPUs and may be narrowed.
pub fn heavy(t: &TaskSample, period: Nanos) -> bool {
    let ran: u64 = t.run_by_class.iter().map(|n| n.0).sum();
    ran > 0 && ran >= period.0 / LIGHT_DIV
}

/// Who wanted the fast CPUs at the end of a period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Load {
    /// Managed threads runnable at the end of the period, heavy in it ([`heavy`]), whose own
    /// mask holds a fast CPU.
    pub contenders: usize,
    /// Fast CPUs.
    pub fast_cpus: usize,
    /// A fast CPU was idle for a real part of the period (or is idle now).
    pub fast_idle: bool,
}

impl Load {
    /// The load a snapshot shows (see the module doc).
    pub fn from_snapshot(topo: &Topology, snap: &Snapshot) -> Load {
        let fast = fast_set(topo);
        let contenders =
            snap.tasks.iter().filter(|t| t.runnable() && heavy(t, snap.period) && t.allowed.intersects(&fast)).count();
        let min_idle = Nanos(snap.period.0 / IDLE_DIV);
        let fast_idle = snap.cpus.iter().any(|c| topo.is_fast(c.id) && c.idle >= min_idle && c.idle > Nanos::ZERO);
        Load { contenders, fast_cpus: fast.len(), fast_idle }
    }

    /// Real contention for the fast CPUs: more runnable contenders than fast CPUs, none idle.
    pub fn contended(&self) -> bool {
        self.contenders > self.fast_cpus && !self.fast_idle
    }
}

/// The fast CPUs of `topo` (topology ids).
pub fn fast_set(topo: &Topology) -> CpuSet {
    CpuSet::from_cpus((0..topo.ncpus() as u32).map(CpuId).filter(|c| topo.is_fast(*c)))
}

/// Each live task confined narrower than its own mask, with its own mask: the changes that
/// hand a domain back to the kernel.
pub fn widen_all(tasks: &[TaskSample], out: &mut Vec<AffinityChange>) {
    for t in tasks.iter().filter(|t| !t.done() && t.affinity != t.allowed) {
        out.push(AffinityChange { task: t.id, mask: t.allowed });
    }
}

/// The changes to apply this period: the placer's (`decided`, effective masks) under
/// contention, else the widening of every narrowed task. Returns whether it was contended.
pub fn cooperate(load: &Load, tasks: &[TaskSample], decided: &[AffinityChange], out: &mut Vec<AffinityChange>) -> bool {
    out.clear();
    if load.contended() {
        out.extend_from_slice(decided);
        true
    } else {
        widen_all(tasks, out);
        false
    }
}

/// Contention for the fast CPUs ended (`cooperate` returned false and widened; see the
/// module doc): put a one-shot move in front of the widenings in `out` for each heavy
/// ([`heavy`]) runnable thread whose mask in force holds no fast CPU while its own mask does
/// — mask `{f}`, `f` a fast CPU of its own mask that no other heavy runnable thread holds
/// (last ran on, within its mask; or, not known, the one fast CPU its mask is), the one that idled most in the period first (then the lowest id);
/// movers in task order, one per free fast CPU. Its widening, already in `out`, follows, so
/// it stays where the move put it with its own mask. Returns how many move.
pub fn move_released(topo: &Topology, snap: &Snapshot, out: &mut Vec<AffinityChange>) -> usize {
    let fast = fast_set(topo);
    let busy = |t: &TaskSample| !t.done() && t.runnable() && heavy(t, snap.period);
    let confined = |t: &TaskSample| t.affinity.and(&fast).is_empty() && t.allowed.intersects(&fast);
    let mut free = fast;
    for t in snap.tasks.iter().filter(|t| busy(t) && !confined(t)) {
        let only = t.affinity.first().filter(|c| t.affinity.len() == 1 && fast.contains(*c));
        if let Some(c) = t.cpu.filter(|c| fast.contains(*c) && t.affinity.contains(*c)).or(only) {
            free.remove(c);
        }
    }
    let idle = |c: CpuId| snap.cpus.iter().find(|s| s.id == c).map_or(Nanos::ZERO, |s| s.idle);
    let mut moves = Vec::new();
    for t in snap.tasks.iter().filter(|t| busy(t) && confined(t)) {
        let Some(f) = t.allowed.and(&free).iter().max_by_key(|c| (idle(*c), std::cmp::Reverse(c.0))) else {
            continue;
        };
        free.remove(f);
        moves.push(AffinityChange { task: t.id, mask: CpuSet::single(f) });
    }
    let n = moves.len();
    out.splice(0..0, moves);
    n
}

/// Under contention, leave the light threads of `period` ([`heavy`]) to the kernel: a
/// placer change that would narrow one is dropped, or becomes its own mask when it is
/// narrowed now, and a light thread narrowed now with no change gets its own mask back.
/// Changes to a thread's own mask, and every change for a heavy thread, stay as decided.
/// `changes` (effective masks) is amended in place; returns how many light threads a change
/// was kept from or given back their own mask.
pub fn free_light(tasks: &[TaskSample], period: Nanos, changes: &mut Vec<AffinityChange>) -> usize {
    let mut freed = 0;
    for t in tasks.iter().filter(|t| !t.done() && !heavy(t, period)) {
        match changes.iter().position(|c| c.task == t.id) {
            Some(i) if changes[i].mask == t.allowed => {}
            Some(i) if t.affinity != t.allowed => {
                changes[i].mask = t.allowed;
                freed += 1;
            }
            Some(i) => {
                changes.remove(i);
                freed += 1;
            }
            None if t.affinity != t.allowed => {
                changes.push(AffinityChange { task: t.id, mask: t.allowed });
                freed += 1;
            }
            None => {}
        }
    }
    freed
}

/// Work conservation under a placer's pins: where two or more runnable threads are pinned to
/// the same single CPU while a CPU in one of their own masks is in no runnable managed
/// thread's mask (it idles as far as the managed work is concerned), the later of them (task
/// order) gets its own mask back, and Linux's balancer moves it to the idle CPU
/// (`newidle_balance`). Returns how many were widened; `changes` (effective masks) is
/// amended in place.
///
/// Why: `capability`'s launch pins tasks in proportion to the CPUs' capability (the largest
/// share EC / (tasks + 1), the paper's `chcb`); on the development machine the hog leaves CPU 1 an EC of 7.5
/// per 30 ms against CPU 0's 30, so both workers of a 2-worker job are pinned to CPU 0 and
/// CPU 1's remaining half is never used (its balancers find no active task to swap), a
/// throughput of 1 against Linux's 1.5. A pin only adds something when every CPU the threads
/// may use has one.
pub fn spread_stacked(tasks: &[TaskSample], changes: &mut Vec<AffinityChange>) -> usize {
    let mask_of =
        |t: &TaskSample, ch: &[AffinityChange]| ch.iter().rev().find(|c| c.task == t.id).map_or(t.affinity, |c| c.mask);
    let mut covered = CpuSet::new();
    for t in tasks.iter().filter(|t| t.runnable()) {
        covered = covered.or(&mask_of(t, changes));
    }
    let mut singles: Vec<CpuSet> = Vec::new();
    let mut widened = 0;
    for t in tasks.iter().filter(|t| t.runnable()) {
        let m = mask_of(t, changes);
        if m.len() != 1 {
            continue;
        }
        if !singles.contains(&m) {
            singles.push(m);
            continue;
        }
        if t.allowed.and_not(&covered).is_empty() {
            continue;
        }
        covered = covered.or(&t.allowed);
        match changes.iter_mut().find(|c| c.task == t.id) {
            Some(c) => c.mask = t.allowed,
            None => changes.push(AffinityChange { task: t.id, mask: t.allowed }),
        }
        widened += 1;
    }
    widened
}

/// Order one period's changes so that a swap never leaves its threads stacked on one CPU
/// for longer than two system calls (issue 15 D5, capability's slow runs).
///
/// Changes are set one `sched_setaffinity` at a time, and a call can take milliseconds: a
/// running thread is moved by the CPU stopper of the CPU it runs on (kernel/sched/core.c
/// `affine_move_task` → `stop_one_cpu`), which waits for that (virtual) CPU to take the
/// interrupt, and a thread moved onto the agent's own CPU may preempt the agent
/// (`wakeup_preempt` in `move_queued_task`) before its next call. Under `capability`, whose
/// every decision is a swap of two single-CPU pins (A: {0} → {1}, B: {1} → {0}, in task
/// order), both threads sat on slow CPU 1 between the two calls, 2-8 ms of every 30 ms
/// period (decision logs of 16 stress-ng runs, 20-195 ms per ≈ 1 s run). So changes that
/// give a fast CPU go first: the slow call (moving B off the slow CPU it runs on) happens
/// while nothing is stacked yet, and a stack, if the agent is held up after it, forms on a
/// fast CPU (both threads progress at half the fast speed) rather than on the slow one.
/// Among equals, changes that may land a thread on the agent's own CPU go last. The sort is
/// stable: otherwise task order.
pub fn order_changes(topo: &Topology, agent_cpu: Option<CpuId>, changes: &mut [AffinityChange]) {
    let fast = fast_set(topo);
    changes.sort_by_key(|c| (!c.mask.intersects(&fast), agent_cpu.is_some_and(|a| c.mask.contains(a))));
}

/// A managed thread as the reaction to an idle fast CPU sees it.
#[derive(Clone, Copy, Debug)]
pub struct Confined {
    /// The task.
    pub task: TaskId,
    /// The mask in force (topology ids).
    pub cur: CpuSet,
    /// Its own mask.
    pub allowed: CpuSet,
    /// Runnable now (`stat` state `R`).
    pub runnable: bool,
}

/// Whether a thread with mask `cur` and own mask `allowed` is kept away from a fast CPU it
/// may use: the case where an idle fast CPU needs the agent.
pub fn kept_from_fast(fast: &CpuSet, cur: &CpuSet, allowed: &CpuSet) -> bool {
    !allowed.and(fast).and_not(cur).is_empty()
}

/// Fast CPU `cpu` went idle: no contention any more. The changes, applied in order: first
/// the first runnable thread kept away from `cpu` (that may use it) is moved onto it (mask
/// `{cpu}`: `sched_setaffinity` migrates a thread whose CPU leaves its mask at once, where
/// widening alone would wait for the idle CPU's next balance), then every narrowed thread
/// gets its own mask back (the mover too, staying where it now runs). Returns the mover.
pub fn on_idle_fast_cpu(cpu: CpuId, threads: &[Confined], out: &mut Vec<AffinityChange>) -> Option<TaskId> {
    out.clear();
    let mover = threads.iter().find(|t| t.runnable && !t.cur.contains(cpu) && t.allowed.contains(cpu));
    if let Some(m) = mover {
        out.push(AffinityChange { task: m.task, mask: CpuSet::single(cpu) });
    }
    for t in threads.iter().filter(|t| t.cur != t.allowed || mover.is_some_and(|m| m.task == t.task)) {
        out.push(AffinityChange { task: t.task, mask: t.allowed });
    }
    mover.map(|m| m.task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CpuSample, TaskState};

    use crate::gate::fixtures::{self, ids};

    /// A thread that ran the whole 30 ms period (15 ms on each class): heavy.
    fn task(id: u32, state: TaskState, affinity: &[u32]) -> TaskSample {
        fixtures::task(id, state, affinity, 15)
    }

    /// A thread that ran `fast_us` on the fast class and `slow_us` on the slow one.
    fn ran(id: u32, state: TaskState, affinity: &[u32], fast_us: u64, slow_us: u64) -> TaskSample {
        let mut t = fixtures::task(id, state, affinity, 0);
        t.run_by_class = vec![Nanos(fast_us * 1000), Nanos(slow_us * 1000)];
        t
    }

    /// CPU 0 fast, CPU 1 slow (the development machine with the hog on CPU 1); a 30 ms
    /// period; CPU 0 idle for `idle0_ms`.
    fn snap(tasks: Vec<TaskSample>, idle0_ms: u64) -> (Topology, Snapshot) {
        fixtures::snap(Topology::fast_slow(1, 2.0, 1, 1.0, 2), tasks, idle0_ms)
    }

    fn run(topo: &Topology, s: &Snapshot, decided: &[AffinityChange]) -> (bool, Vec<(u32, String)>) {
        let mut out = Vec::new();
        let c = cooperate(&Load::from_snapshot(topo, s), &s.tasks, decided, &mut out);
        (c, out.iter().map(|c| (c.task.0, c.mask.to_list())).collect())
    }

    #[test]
    fn a_lone_runnable_thread_is_never_confined_away_from_the_fast_cpu() {
        // The phased program's serial phase: thread 0 runnable, confined to slow CPU 1 by a
        // rotation decided in a phase already over; thread 1 blocked at the barrier. 1 runnable
        // ≤ 1 fast CPU: no contention, the placer's "keep 0 on {1}, 1 on {0}" is not applied;
        // both get their own mask {0,1} back.
        let (topo, s) = snap(vec![task(0, TaskState::Runnable, &[1]), task(1, TaskState::Blocked, &[0])], 0);
        let decided = [AffinityChange { task: TaskId(1), mask: ids(&[1]) }];
        assert_eq!(run(&topo, &s, &decided), (false, vec![(0, "0-1".into()), (1, "0-1".into())]));
    }

    #[test]
    fn masks_narrow_only_under_contention_and_widen_when_a_fast_cpu_idles() {
        // Two spinning threads, both runnable, CPU 0 busy the whole period: 2 > 1 fast CPU and
        // nothing idle → contended: the placer's rotation (0 → {1}, 1 → {0}) is applied as is.
        let both = || vec![task(0, TaskState::Runnable, &[0]), task(1, TaskState::Runnable, &[1])];
        let decided =
            [AffinityChange { task: TaskId(0), mask: ids(&[1]) }, AffinityChange { task: TaskId(1), mask: ids(&[0]) }];
        let (topo, s) = snap(both(), 0);
        assert_eq!(run(&topo, &s, &decided), (true, vec![(0, "1".into()), (1, "0".into())]));
        // Same, but CPU 0 sat idle 5 ms of the 30 (≥ 30 / 8 = 3.75 ms): the fast CPU was not
        // wanted by both all the time → no contention: both are widened, the rotation waits.
        let (topo, s) = snap(both(), 5);
        assert_eq!(run(&topo, &s, &decided), (false, vec![(0, "0-1".into()), (1, "0-1".into())]));
        // 3 ms idle (< 3.75 ms) is noise: still contended.
        let (topo, s) = snap(both(), 3);
        assert!(run(&topo, &s, &decided).0);
    }

    #[test]
    fn threads_that_cannot_use_a_fast_cpu_do_not_contend_for_it_and_done_ones_are_left() {
        // Thread 1's own mask is {1}: it never contends for CPU 0; with thread 0 the only
        // contender (1 ≤ 1) nothing is narrowed. Thread 2 ended: no change for it.
        let mut t1 = task(1, TaskState::Runnable, &[1]);
        t1.allowed = ids(&[1]);
        let (topo, s) = snap(vec![task(0, TaskState::Runnable, &[1]), t1, task(2, TaskState::Done, &[1])], 0);
        let l = Load::from_snapshot(&topo, &s);
        assert_eq!(l, Load { contenders: 1, fast_cpus: 1, fast_idle: false });
        assert_eq!(run(&topo, &s, &[]), (false, vec![(0, "0-1".into())]));
    }

    #[test]
    fn light_threads_neither_contend_nor_are_narrowed() {
        // `make -j2` at a 30 ms period boundary on the development machine (CPU 0 fast, busy
        // throughout). Light = ran < 30 / 8 = 3.75 ms in the period:
        // - task 0 `make`, blocked, ran 0.4 ms: light;
        // - task 1 the `cc` driver, blocked, ran 1 ms, narrowed to {1} by an earlier period:
        //   light;
        // - tasks 2 and 3, two `cc1`, runnable, ran 28 ms on {0} and 14 ms on {1}: heavy;
        // - task 4 `as`, runnable, started 2 ms ago: light.
        // Contenders: the two `cc1` only (the runnable `as` is light): 2 > 1 fast CPU, no fast
        // idle → contended. AASH's rotation asks make → {1}, cc1 2 → {1}, cc1 3 → {0},
        // as → {0}: the two `cc1` swap; make's and as's narrowings are dropped; the `cc`
        // driver, narrowed with no change, gets its own mask {0,1} back.
        let tasks = vec![
            ran(0, TaskState::Blocked, &[0, 1], 400, 0),
            ran(1, TaskState::Blocked, &[1], 0, 1000),
            ran(2, TaskState::Runnable, &[0], 28_000, 0),
            ran(3, TaskState::Runnable, &[1], 0, 14_000),
            ran(4, TaskState::Runnable, &[0, 1], 2000, 0),
        ];
        let (topo, s) = snap(tasks, 0);
        assert_eq!(Load::from_snapshot(&topo, &s), Load { contenders: 2, fast_cpus: 1, fast_idle: false });
        let decided = [
            AffinityChange { task: TaskId(0), mask: ids(&[1]) },
            AffinityChange { task: TaskId(2), mask: ids(&[1]) },
            AffinityChange { task: TaskId(3), mask: ids(&[0]) },
            AffinityChange { task: TaskId(4), mask: ids(&[0]) },
        ];
        let mut out = Vec::new();
        assert!(cooperate(&Load::from_snapshot(&topo, &s), &s.tasks, &decided, &mut out));
        assert_eq!(free_light(&s.tasks, s.period, &mut out), 3);
        let got: Vec<(u32, String)> = out.iter().map(|c| (c.task.0, c.mask.to_list())).collect();
        assert_eq!(got, vec![(2, "1".into()), (3, "0".into()), (1, "0-1".into())]);
        // The threshold: 3.75 ms in the period (split over the classes) is heavy, 3.749 ms is
        // light, and a thread that did not run is light.
        let p = Nanos::from_ms(30);
        assert!(heavy(&ran(0, TaskState::Runnable, &[0], 2000, 1750), p));
        assert!(!heavy(&ran(0, TaskState::Runnable, &[0], 2000, 1749), p));
        assert!(!heavy(&ran(0, TaskState::Runnable, &[0], 0, 0), p));
        // One `cc1` and a runnable light `make`: 1 contender for 1 fast CPU, not contended;
        // AASH's "cc1 → {1}" is not put in force and everyone narrowed is widened.
        let (topo, s) =
            snap(vec![ran(0, TaskState::Runnable, &[1], 500, 0), ran(1, TaskState::Runnable, &[0], 30_000, 0)], 0);
        let l = Load::from_snapshot(&topo, &s);
        assert_eq!((l.contenders, l.contended()), (1, false));
        assert_eq!(
            run(&topo, &s, &[AffinityChange { task: TaskId(1), mask: ids(&[1]) }]),
            (false, vec![(0, "0-1".into()), (1, "0-1".into())])
        );
    }

    #[test]
    fn two_threads_pinned_to_one_cpu_while_the_other_idles_are_spread() {
        // capability's launch on the development machine: both workers runnable, both pinned
        // to fast CPU 0 (EC 30 / 2 = 15 beats 7.5 on hogged CPU 1); CPU 1 is in nobody's mask.
        // Thread 1 (the later) gets its own mask {0,1} back; thread 0 keeps its pin.
        let tasks = vec![task(0, TaskState::Runnable, &[0, 1]), task(1, TaskState::Runnable, &[0, 1])];
        let mut ch = vec![
            AffinityChange { task: TaskId(0), mask: ids(&[0]) },
            AffinityChange { task: TaskId(1), mask: ids(&[0]) },
        ];
        assert_eq!(spread_stacked(&tasks, &mut ch), 1);
        let got: Vec<(u32, String)> = ch.iter().map(|c| (c.task.0, c.mask.to_list())).collect();
        assert_eq!(got, vec![(0, "0".into()), (1, "0-1".into())]);
        // Already in force from an earlier period (no change this period): the widening is added.
        let tasks = vec![task(0, TaskState::Runnable, &[0]), task(1, TaskState::Runnable, &[0])];
        let mut ch = Vec::new();
        assert_eq!(spread_stacked(&tasks, &mut ch), 1);
        assert_eq!((ch[0].task.0, ch[0].mask.to_list()), (1, "0-1".into()));
        // AASH's 3 threads on 1 fast + 1 slow CPU: {0}, {1}, {1}: two stacked on CPU 1, but
        // every CPU has a pin: nothing to spread. A blocked thread's pin counts for nothing:
        // {0} runnable, {0} blocked, CPU 1 free: nothing stacked among the runnable.
        let tasks = vec![
            task(0, TaskState::Runnable, &[0]),
            task(1, TaskState::Runnable, &[1]),
            task(2, TaskState::Runnable, &[1]),
        ];
        assert_eq!(spread_stacked(&tasks, &mut Vec::new()), 0);
        let tasks = vec![task(0, TaskState::Runnable, &[0]), task(1, TaskState::Blocked, &[0])];
        assert_eq!(spread_stacked(&tasks, &mut Vec::new()), 0);
    }

    #[test]
    fn the_thread_kept_on_the_slow_cpu_is_moved_onto_the_fast_one_as_contention_ends() {
        // `xz -T2` at its end on the development machine (CPU 0 fast, CPU 1 slowed by the
        // hog), a 30 ms period: worker 1 ran its last block on CPU 0 and exited 20 ms before
        // the period's end (CPU 0 idle those 20 ms); worker 2, runnable, heavy (ran 15 ms on
        // CPU 1), was kept on {1} by AASH's rotation; the main thread 0 (light, blocked on its
        // workers) was on {1} too. 1 contender for 1 fast CPU → not contended: everyone
        // narrowed is widened, and worker 2 is first given {0} (the stopper moves it off
        // CPU 1 now; widening alone would leave it there until CPU 0's next active balance),
        // then its own mask {0,1}. The light main thread is only widened.
        let mut main = ran(0, TaskState::Blocked, &[1], 0, 300);
        main.cpu = Some(CpuId(1));
        let mut w1 = ran(1, TaskState::Done, &[0], 10_000, 0);
        w1.cpu = Some(CpuId(0));
        let mut w2 = ran(2, TaskState::Runnable, &[1], 0, 15_000);
        w2.cpu = Some(CpuId(1));
        let (topo, s) = snap(vec![main, w1, w2], 20);
        let mut out = Vec::new();
        assert!(!cooperate(&Load::from_snapshot(&topo, &s), &s.tasks, &[], &mut out));
        assert_eq!(move_released(&topo, &s, &mut out), 1);
        let got: Vec<(u32, String)> = out.iter().map(|c| (c.task.0, c.mask.to_list())).collect();
        assert_eq!(got, vec![(2, "0".into()), (0, "0-1".into()), (2, "0-1".into())]);
        // The order survives `order_changes` (the move's key never sorts after its widening),
        // whichever CPU the agent is on.
        for agent in [None, Some(CpuId(0)), Some(CpuId(1))] {
            let mut o = out.clone();
            order_changes(&topo, agent, &mut o);
            let w2: Vec<String> = o.iter().filter(|c| c.task.0 == 2).map(|c| c.mask.to_list()).collect();
            assert_eq!(w2, vec!["0".to_string(), "0-1".to_string()], "agent on {agent:?}");
        }
    }

    #[test]
    fn no_move_onto_a_fast_cpu_another_heavy_thread_holds_or_for_a_thread_not_kept_from_it() {
        // Three workers on CPU 0 fast, CPU 1 slow; CPU 0 idled 5 ms of the period (≥ 3.75 ms:
        // not contended), but worker 0 is runnable on it again at the end (cpu 0, mask {0}):
        // CPU 0 is held; worker 1, kept on {1}, is only widened.
        let w = |id: u32, st: TaskState, aff: &[u32], cpu: u32| {
            let mut t = task(id, st, aff);
            t.cpu = Some(CpuId(cpu));
            t
        };
        let (topo, s) = snap(vec![w(0, TaskState::Runnable, &[0], 0), w(1, TaskState::Runnable, &[1], 1)], 5);
        let mut out = Vec::new();
        assert!(!cooperate(&Load::from_snapshot(&topo, &s), &s.tasks, &[], &mut out));
        assert_eq!(move_released(&topo, &s, &mut out), 0);
        assert_eq!(
            out.iter().map(|c| (c.task.0, c.mask.to_list())).collect::<Vec<_>>(),
            vec![(0, "0-1".into()), (1, "0-1".into())]
        );
        // Held by a widened thread that last ran on CPU 0 ({0,1}, cpu 0): same. Not held when
        // that thread is blocked, or light, or its cpu unknown with a mask of both CPUs.
        let held = |t0: TaskSample| {
            let (topo, s) = snap(vec![t0, w(1, TaskState::Runnable, &[1], 1)], 5);
            move_released(&topo, &s, &mut Vec::new()) == 0
        };
        assert!(held(w(0, TaskState::Runnable, &[0, 1], 0)));
        assert!(!held(w(0, TaskState::Blocked, &[0, 1], 0)));
        assert!(!held(ran(0, TaskState::Runnable, &[0, 1], 1000, 0)));
        assert!(!held(task(0, TaskState::Runnable, &[0, 1])));
        // Unknown cpu, mask {0}: it must be on CPU 0: held.
        assert!(held(task(0, TaskState::Runnable, &[0])));
        // Not movers: a thread widened already (on CPU 1 by the kernel's choice: the agent
        // does not fight it), a light one, a blocked one, one whose own mask has no fast CPU.
        let mover = |t: TaskSample| {
            let (topo, s) = snap(vec![t], 20);
            move_released(&topo, &s, &mut Vec::new()) == 1
        };
        assert!(mover(w(1, TaskState::Runnable, &[1], 1)));
        assert!(!mover(w(1, TaskState::Runnable, &[0, 1], 1)));
        assert!(!mover(ran(1, TaskState::Runnable, &[1], 0, 3000)));
        assert!(!mover(w(1, TaskState::Blocked, &[1], 1)));
        let mut own_slow = w(1, TaskState::Runnable, &[1], 1);
        own_slow.allowed = ids(&[1]);
        assert!(!mover(own_slow));
    }

    #[test]
    fn with_two_fast_cpus_movers_take_the_idlest_free_one_one_each() {
        // CPUs 0 and 1 fast, 2 and 3 slow; 40 ms period. Fast CPU 0 idled 10 ms, CPU 1 30 ms;
        // nobody runnable holds either. Workers 5, 6, 7 runnable, heavy, each kept on one slow
        // CPU: 5 → {1} (the idlest), 6 → {0}, 7 only widened (no free fast CPU left).
        let topo = Topology::fast_slow(2, 2.0, 2, 1.0, 4);
        let cpu = |id: u32, idle_ms: u64| CpuSample {
            id: CpuId(id),
            busy: Nanos::from_ms(40 - idle_ms),
            idle: Nanos::from_ms(idle_ms),
            ..Default::default()
        };
        let mut tasks = Vec::new();
        for (id, on) in [(5, 2), (6, 3), (7, 2)] {
            let mut t = fixtures::task(id, TaskState::Runnable, &[on], 20);
            t.run_by_class = vec![Nanos::ZERO, Nanos::from_ms(20)];
            t.allowed = ids(&[0, 1, 2, 3]);
            t.cpu = Some(CpuId(on));
            tasks.push(t);
        }
        let s = Snapshot {
            now: Nanos::from_ms(40),
            period: Nanos::from_ms(40),
            cpus: vec![cpu(0, 10), cpu(1, 30), cpu(2, 0), cpu(3, 0)],
            tasks,
            domains: Vec::new(),
        };
        let mut out = Vec::new();
        assert!(!cooperate(&Load::from_snapshot(&topo, &s), &s.tasks, &[], &mut out));
        assert_eq!(move_released(&topo, &s, &mut out), 2);
        let got: Vec<(u32, String)> = out.iter().map(|c| (c.task.0, c.mask.to_list())).collect();
        assert_eq!(
            got,
            vec![(5, "1".into()), (6, "0".into()), (5, "0-3".into()), (6, "0-3".into()), (7, "0-3".into())]
        );
    }

    #[test]
    fn an_idle_fast_cpu_takes_a_runnable_thread_kept_from_it_and_everyone_is_widened() {
        // AASH granted CPU 0 to thread 0 and kept thread 1 on slow CPU 1; thread 0 blocked at
        // a barrier and CPU 0 went idle. Thread 1 (runnable) is moved onto CPU 0 ({0}), then
        // both get {0,1} back; thread 2 (blocked, on {1}) is only widened.
        let c = |task: u32, cur: &[u32], runnable: bool| Confined {
            task: TaskId(task),
            cur: ids(cur),
            allowed: ids(&[0, 1]),
            runnable,
        };
        let threads = [c(0, &[0], false), c(1, &[1], true), c(2, &[1], false)];
        let mut out = Vec::new();
        assert_eq!(on_idle_fast_cpu(CpuId(0), &threads, &mut out), Some(TaskId(1)));
        let got: Vec<(u32, String)> = out.iter().map(|c| (c.task.0, c.mask.to_list())).collect();
        assert_eq!(got, vec![(1, "0".into()), (0, "0-1".into()), (1, "0-1".into()), (2, "0-1".into())]);
        // Nobody runnable: nothing moves, narrowed threads are still handed back.
        let threads = [c(0, &[0], false), c(1, &[1], false)];
        assert_eq!(on_idle_fast_cpu(CpuId(0), &threads, &mut out), None);
        assert_eq!(out.len(), 2);
        // Kept from the fast CPU: {1} with own mask {0,1} is; {0} or {0,1} is not; {1} with
        // own mask {1} is not (it may not use CPU 0).
        let fast = ids(&[0]);
        assert!(kept_from_fast(&fast, &ids(&[1]), &ids(&[0, 1])));
        assert!(!kept_from_fast(&fast, &ids(&[0]), &ids(&[0, 1])));
        assert!(!kept_from_fast(&fast, &ids(&[0, 1]), &ids(&[0, 1])));
        assert!(!kept_from_fast(&fast, &ids(&[1]), &ids(&[1])));
    }
}
