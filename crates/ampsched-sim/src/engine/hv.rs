//! What the hypervisor's own work costs the vCPUs: the latency of waking a
//! blocked vCPU (`Topology::wake_latency`) and the time a pCPU spends taking
//! an IPI and passing through `schedule()` (`Effects::stall`, asked by a
//! co-scheduler for each pCPU its signal reaches).
//!
//! **Wake-up latency.** A guest thread that releases a sibling blocked on
//! another vCPU (a barrier, a lock, a condition) wakes that vCPU through the
//! hypervisor: the guest kernel sends an event (a Xen PV guest's reschedule
//! IPI is an event channel: `xen_send_IPI_one` → `notify_remote_via_irq` →
//! the `EVTCHNOP_send` hypercall), Xen marks it pending and unblocks the vCPU
//! (`evtchn_set_pending` → `vcpu_unblock` → `vcpu_wake` in
//! `common/schedule.c`), credit queues it and tickles a pCPU
//! (`csched_vcpu_wake` → `__runq_tickle` → `cpumask_raise_softirq`: an IPI
//! when the pCPU is another), that pCPU leaves its idle loop or interrupts
//! its vCPU, runs `schedule()` and `context_switch()` to the vCPU, and the
//! guest takes the event upcall (`evtchn_do_upcall`) and runs its woken
//! thread. The engine's sync objects release a waiter at once; with a
//! latency `L` the released vCPU stays blocked for `L` more and then wakes
//! as before (`Dispatcher::wake`, at `now + L`): the dispatcher decides
//! where it runs at the moment the hypervisor does. A sleep or timer that
//! ends is not delayed (its time is the program's). Magnitude: a Xen vCPU
//! context switch alone is 1.4 µs with a warm cache and up to 9 µs with a
//! cold one (Whitaker, Shaw, Gribble, "Scale and performance in the Denali
//! isolation kernel", OSDI 2002, §6 "context-switching overhead"); the
//! hypercall, the IPI and the guest's own wake-up add µs each. A scenario
//! that sets it names its figure (`[machine] wake_latency_us`).
//!
//! **The hypervisor time of a reschedule asked of another pCPU.** A
//! co-scheduling signal is an IPI to each sibling's pCPU
//! (`cpumask_raise_softirq(mask, SCHEDULE_SOFTIRQ)`), which there takes the
//! interrupt, runs `schedule()` (the scheme's forced pick) and switches
//! context: time in which the vCPU that runs there next makes no progress.
//! A dispatcher charges it with `Effects::stall(cpu, ns)` alongside the
//! reschedule; the engine keeps it owed by the CPU and, once the CPU has
//! rescheduled (`Sim::drain`), hands it to the task running there as refill
//! owed (`Task::refill_left`: paid out of its next compute time, the same
//! total delay as a stall up front; a spinning vCPU carries it to its next
//! compute). An idle CPU pays nothing: it had nothing to run.
//!
//! Both are off by default (latency 0, no stall asked): a run then takes
//! the engine's usual paths, one predictable branch each.
//!
//! May import: `Sim` and the bottom rooms. Must never import the placer
//! bridge or statistics.

use super::fixed;
use super::Sim;
use ampsched_model::{CpuId, TaskId};

impl Sim {
    /// The condition blocked task `w` waited for holds (a sync object released
    /// it): wake it now, or after the machine's wake-up latency.
    #[inline]
    pub(super) fn wake_released(&mut self, w: TaskId) {
        if !self.wake_late {
            self.wake(w);
        } else {
            self.wake_late(w);
        }
    }

    /// Wake released task `w` after the wake-up latency: it stays blocked
    /// until then, and `Ev::Wake` wakes it (its last planned wake-up).
    #[cold]
    #[inline(never)]
    fn wake_late(&mut self, w: TaskId) {
        self.plan_wake(w, self.now + self.topo.wake_latency);
    }

    /// Move the stalls the dispatcher asked for (`Effects::stall`) to the CPUs' books.
    #[cold]
    #[inline(never)]
    pub(super) fn take_stalls(&mut self) {
        let n = self.cpus.len();
        let owed = &mut self.owed;
        if owed.is_empty() {
            owed.resize(n, 0);
        }
        for (c, ns) in self.fx.stall.drain(..) {
            owed[c.idx()] += ns.0;
        }
        self.owes = true;
    }

    /// CPU `c` rescheduled: the task running there now pays what `c` owes.
    #[cold]
    #[inline(never)]
    pub(super) fn pay_stall(&mut self, c: CpuId) {
        let Some(ns) = self.owed.get_mut(c.idx()).map(std::mem::take).filter(|&ns| ns > 0) else { return };
        let Some(t) = self.cpus[c.idx()].curr else { return };
        self.settle(t);
        self.tasks[t.idx()].refill_left += fixed::amount(ns);
        self.replan(t);
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::{Sim, SimConfig, Stop, TaskInit};
    use crate::results::RunResult;
    use ampsched_model::spec::{CoschedType, PriorityClass};
    use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, Op, Program, TaskId, Topology, Wait};
    use ampsched_policy::{Dispatcher, DomainView, Effects, Pick, SysView};
    use std::sync::Arc;

    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;

    fn compute(ms: u64) -> Op {
        Op::Compute { work: Nanos(ms * MS), mem: 0.0, ws_kb: 0, overlap: 0.0 }
    }

    /// Task i runs on CPU i whenever it is runnable. With `signal` set, every
    /// pick on CPU 0 signals CPU 1 (a reschedule and a stall of that many
    /// ns), as a co-scheduler's signal does.
    struct Pinned {
        runnable: Vec<bool>,
        signal: Option<Nanos>,
    }

    impl Dispatcher for Pinned {
        fn name(&self) -> &'static str {
            "pinned"
        }
        fn tick_period(&self) -> Nanos {
            Nanos::ZERO
        }
        fn account_period(&self) -> Nanos {
            Nanos::ZERO
        }
        fn init(&mut self, v: &SysView) {
            self.runnable = vec![false; v.tasks.len()];
        }
        fn wake(&mut self, _v: &SysView, t: TaskId, fx: &mut Effects) {
            self.runnable[t.idx()] = true;
            fx.resched(CpuId(t.0));
        }
        fn block(&mut self, _v: &SysView, t: TaskId, _cpu: CpuId, _fx: &mut Effects) {
            self.runnable[t.idx()] = false;
        }
        fn tick(&mut self, _v: &SysView, _cpu: CpuId, _fx: &mut Effects) {}
        fn account(&mut self, _v: &SysView, _fx: &mut Effects) {}
        fn pick_next(&mut self, _v: &SysView, cpu: CpuId, _p: Option<TaskId>, _r: bool, fx: &mut Effects) -> Pick {
            let t = TaskId(cpu.0);
            if !self.runnable[t.idx()] {
                return Pick::IDLE;
            }
            if let (0, Some(ns)) = (cpu.0, self.signal) {
                fx.resched(CpuId(1));
                fx.stall(CpuId(1), ns);
            }
            Pick { task: Some(t), slice: Nanos::MAX }
        }
        fn affinity_changed(&mut self, _v: &SysView, _t: TaskId, _fx: &mut Effects) {}
    }

    /// One domain, one task per program (task i pinned to CPU i, all in sync group 0).
    fn run(programs: Vec<Vec<Op>>, wake_us: u64, signal: Option<Nanos>) -> RunResult {
        let n = programs.len();
        let mut topo = Topology::fast_slow(n, 1.0, 0, 1.0, n);
        topo.wake_latency = Nanos(wake_us * US);
        let tasks = programs
            .into_iter()
            .enumerate()
            .map(|(i, ops)| TaskInit {
                domain: DomainId(0),
                vcpu: i as u32,
                program: Arc::new(Program { ops }),
                affinity: CpuSet::from_cpus([CpuId(i as u32)]),
                group: 0,
                rank: i as u32,
                name: None,
                background: false,
            })
            .collect();
        let domain = DomainView {
            name: "vm".into(),
            weight: 256,
            cap: 0,
            priority: PriorityClass::default(),
            fast_vcpus: None,
            cosched: CoschedType::default(),
            tasks: (0..n as u32).map(TaskId).collect(),
        };
        Sim::new(SimConfig {
            name: "hv".into(),
            topo,
            domains: vec![domain],
            tasks,
            dispatcher: Box::new(Pinned { runnable: Vec::new(), signal }),
            placer: None,
            agent: None,
            seed: 1,
            stop: Stop::AllDone { max: Nanos(10_000 * MS) },
            stats_interval: Nanos::ZERO,
            wake_latency: false,
            events: Vec::new(),
        })
        .run()
    }

    fn done_us(r: &RunResult, t: usize) -> u64 {
        r.tasks[t].completion_ns.expect("done") / US
    }

    #[test]
    fn a_released_vcpu_wakes_after_the_latency_and_a_sleep_does_not() {
        // Two vCPUs meet at a blocking barrier 3 times; t0 computes 1 ms per
        // phase and 1 ms after the last, t1 2 ms per phase. t0 arrives first
        // and blocks; t1's arrival releases it. Without a latency: barriers
        // at 2, 4, 6 ms, t0 ends at 7 ms, t1 at 6. With 50 µs, each release
        // reaches t0 50 µs late: it resumes at 2.05 ms, arrives at 3.05 and
        // blocks again (t1 arrives at 4: t1 never blocks, so t1 is not
        // delayed), resumes at 4.05, then 6.05, and ends at 7.05 ms; t1
        // still ends at 6 ms.
        let b = Op::Barrier { id: 0, wait: Wait::Block };
        let mut p0 = Vec::new();
        let mut p1 = Vec::new();
        for _ in 0..3 {
            p0.extend([compute(1), b.clone()]);
            p1.extend([compute(2), b.clone()]);
        }
        p0.extend([compute(1), Op::End]);
        p1.push(Op::End);
        let r = run(vec![p0.clone(), p1.clone()], 0, None);
        assert_eq!((done_us(&r, 0), done_us(&r, 1)), (7000, 6000));
        let r = run(vec![p0, p1], 50, None);
        assert_eq!((done_us(&r, 0), done_us(&r, 1)), (7050, 6000));
        // A sleep's end is not an event from a sibling: 1 ms of sleep then
        // 1 ms of compute ends at 2 ms with or without the latency.
        let s = vec![Op::Sleep { dur: Nanos(MS) }, compute(1), Op::End];
        assert_eq!(done_us(&run(vec![s.clone()], 0, None), 0), 2000);
        assert_eq!(done_us(&run(vec![s], 50, None), 0), 2000);
    }

    #[test]
    fn a_signalled_cpu_pays_its_stall_out_of_the_next_compute() {
        // t0 on CPU 0 computes 1 ms, sleeps 1 ms, computes 1 ms: two picks on
        // CPU 0 (at 0 and at 2 ms), each signalling CPU 1 with a 5 µs stall.
        // t1 on CPU 1 computes 10 ms and pays each stall out of it (refill
        // owed: the same total), so it ends at 10 ms + 2 × 5 µs = 10.010 ms.
        // t0 is not slowed: the stall is the signalled CPU's.
        let p0 = vec![compute(1), Op::Sleep { dur: Nanos(MS) }, compute(1), Op::End];
        let p1 = vec![compute(10), Op::End];
        let r = run(vec![p0.clone(), p1.clone()], 0, Some(Nanos(5 * US)));
        assert_eq!((done_us(&r, 0), done_us(&r, 1)), (3000, 10_010));
        // Without a stall, or with one of 0 ns: 10 ms.
        assert_eq!(done_us(&run(vec![p0.clone(), p1.clone()], 0, None), 1), 10_000);
        assert_eq!(done_us(&run(vec![p0, p1], 0, Some(Nanos::ZERO)), 1), 10_000);
    }
}
