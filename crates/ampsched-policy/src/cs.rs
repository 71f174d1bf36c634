//! `cs`: hybrid co-scheduling (CS) on the Xen credit scheduler, the baseline
//! of the co-scheduling family.
//!
//! Design (docs/design/cosched.md "CS"; Weng, Wang, Li, Liu, "The hybrid scheduling
//! framework for virtual machine systems", VEE 2009): domains are `HIT`
//! (plain credit) or `CON` (co-schedule its vCPUs). When a pCPU's normal
//! pick (credit's rules) is a vCPU of a `CON` domain D, it raises a
//! co-scheduling signal to **all** other online pCPUs and D becomes the
//! single global co-scheduled domain. Each signalled pCPU reschedules at
//! once (a forced pick, `cosched.rs`): it runs the first vCPU of D in its
//! runqueue (its current vCPU counts, put back first), otherwise the first
//! `HIT` vCPU, otherwise it idles. A signalled pCPU never runs another `CON`
//! domain: a new request preempts the running co-scheduled domain wherever
//! it runs (the contention the PCS/BCS paper measures). Answers to a signal
//! raise no signal themselves; every other pick of a `CON` vCPU does, even
//! when its siblings already run (the scheme has no notion of "already
//! co-scheduled": the signal is its only tool).
//!
//! Invariants: at most one co-scheduled domain; once every signalled pCPU
//! has answered (no signal pending), no two `CON` domains have running
//! vCPUs (tested in `tests/cosched.rs`); signals never come from a forced
//! pick. Units: ns. Departures: the ratelimit of current credit delays an
//! answer by at most 1 ms (Xen 4.0 had none: use `ratelimit_us = 0`); pCPUs
//! held by a domain are released when it stops running (`cosched.rs`).

use crate::cosched::{forced_pick, queued_siblings, CoBase, CoCore, Forced, Scheme};
use crate::dispatcher::{Effects, Pick, SysView};
use ampsched_model::spec::CoschedType;
use ampsched_model::{CpuId, CpuSet, DomainId, TaskId};

/// Hybrid co-scheduling state.
#[derive(Default)]
pub struct Cs {
    /// The current co-scheduled domain.
    pub dom: Option<DomainId>,
    /// Signalled pCPUs that have not answered yet.
    pub pending: CpuSet,
}

impl Cs {
    /// Answer a pending signal on `cpu`, if any (a forced pick).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn answer<B: CoBase>(
        &mut self,
        core: &mut CoCore,
        b: &mut B,
        v: &SysView,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_runnable: bool,
        fx: &mut Effects,
    ) -> Option<Pick> {
        if !self.pending.contains(cpu) {
            return None;
        }
        let Some(d) = self.dom else {
            self.pending.remove(cpu);
            return None;
        };
        let (tasks, doms) = (v.tasks, v.domains);
        let in_d = |t: TaskId| tasks[t.idx()].domain == d;
        let hit = |t: TaskId| doms[tasks[t.idx()].domain.idx()].cosched == CoschedType::Hit;
        match forced_pick(core, b, v, cpu, prev, prev_runnable, fx, in_d, hit) {
            Forced::Kept(p) => Some(p),
            Forced::Done(p) => {
                self.pending.remove(cpu);
                let hold = if p.task.is_some_and(|t| core.dom(t) == d) { None } else { Some(d) };
                core.hold(cpu, hold, v.now);
                Some(p)
            }
        }
    }

    /// After a pick that was not an answer: a `CON` pick signals all other pCPUs.
    pub(crate) fn after_normal<B: CoBase>(
        &mut self,
        core: &mut CoCore,
        b: &B,
        v: &SysView,
        cpu: CpuId,
        pick: &Pick,
        fx: &mut Effects,
    ) {
        let Some(x) = pick.task else { return };
        if !core.is_con(v, x) {
            return;
        }
        let d = core.dom(x);
        if let Some(old) = self.dom.filter(|o| *o != d) {
            core.drop_wants(v, old);
        }
        self.dom = Some(d);
        let mut others = v.topo.all;
        others.remove(cpu);
        self.pending = others;
        for p in others.iter() {
            core.signal(p, fx);
        }
        core.op(others.len());
        for y in queued_siblings(b, v, d, x) {
            core.want(y, v.now);
        }
    }
}

impl Scheme for Cs {
    fn init(&mut self, _v: &SysView) {
        *self = Cs::default();
    }

    fn pick<B: CoBase>(
        &mut self,
        core: &mut CoCore,
        b: &mut B,
        v: &SysView,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_runnable: bool,
        fx: &mut Effects,
    ) -> Pick {
        if let Some(p) = self.answer(core, b, v, cpu, prev, prev_runnable, fx) {
            return p;
        }
        let p = b.pick_next(v, cpu, prev, prev_runnable, fx);
        core.hold(cpu, None, v.now);
        self.after_normal(core, b, v, cpu, &p, fx);
        p
    }

    fn became_hit<B: CoBase>(&mut self, _core: &mut CoCore, _b: &mut B, _v: &SysView, d: DomainId) {
        if self.dom == Some(d) {
            self.dom = None;
        }
    }
}

#[cfg(test)]
mod tests {
    //! Worked examples driving `cs` hook by hook over credit.
    use super::*;
    use crate::cosched::CoSched;
    use crate::credit::{Credit, CreditParams, Profile};
    use crate::dispatcher::Dispatcher;
    use crate::testkit::World;
    use ampsched_model::Nanos;

    /// 4 CPUs; domain 0 = CON {t2, t3}, domain 1 = CON {t0, t1}, domain 2 = HIT {t4}.
    /// Created in that order, every domain's vCPU 0 starts on CPU 0 and vCPU 1
    /// on CPU 1 (credit's `sched_select_initial_cpu`), so the scatter at init
    /// moves domain 0, scattered first, off them: t2, t3 → CPUs 2, 3; then
    /// domain 1 → CPUs 0, 1.
    fn world() -> World {
        let mut w = World::new(4, &[256, 256, 256, 256, 256]);
        w.tasks[0].domain = DomainId(1);
        w.tasks[1].domain = DomainId(1);
        w.tasks[1].vcpu = 1;
        w.tasks[2].domain = DomainId(0);
        w.tasks[3].domain = DomainId(0);
        w.tasks[3].vcpu = 1;
        w.tasks[4].domain = DomainId(2);
        w.domains[0].tasks = vec![TaskId(2), TaskId(3)];
        w.domains[1].tasks = vec![TaskId(0), TaskId(1)];
        w.domains[2].tasks = vec![TaskId(4)];
        w.domains.truncate(3);
        w.domains[0].cosched = CoschedType::Con;
        w.domains[1].cosched = CoschedType::Con;
        w
    }

    fn cs(w: &World) -> CoSched<Cs, Credit> {
        let mut p = CreditParams::defaults(Profile::Current);
        p.ratelimit = Nanos::ZERO;
        let mut d = CoSched::new("cs", Cs::default(), Credit::new("cs", p, &w.topo));
        d.init(&w.view(Nanos::ZERO));
        d
    }

    #[test]
    fn a_con_pick_signals_every_other_cpu_and_preempts_the_other_con_domain() {
        let mut w = world();
        let mut d = cs(&w);
        // Scatter at init: domain 1 → CPUs 0, 1; domain 0 → CPUs 2, 3 (fewest CON vCPUs).
        assert_eq!(d.base.cpu_of(TaskId(0)), CpuId(0));
        assert_eq!(d.base.cpu_of(TaskId(1)), CpuId(1));
        assert_eq!(d.base.cpu_of(TaskId(2)), CpuId(2));
        assert_eq!(d.base.cpu_of(TaskId(3)), CpuId(3));
        let now = Nanos::from_ms(1);
        // Domain 0 runs on CPUs 2 and 3 (t2, t3 woken and picked there).
        for t in [2u32, 3] {
            let mut fx = Effects::default();
            d.wake(&w.view(now), TaskId(t), &mut fx);
            let c = CpuId(t);
            let p = d.pick_next(&w.view(now), c, None, false, &mut Effects::default());
            assert_eq!(p.task, Some(TaskId(t)));
            w.curr[c.idx()] = p.task;
        }
        // Answer the signals of those picks (every CPU idles or keeps domain 0).
        for c in [0u32, 1] {
            let p = d.pick_next(&w.view(now), CpuId(c), None, false, &mut Effects::default());
            assert_eq!(p.task, None);
        }
        d.scheme.pending = CpuSet::new();
        // t0 (domain 1) wakes on CPU 0 and is picked: a signal to CPUs 1, 2, 3.
        let mut fx = Effects::default();
        d.wake(&w.view(now), TaskId(0), &mut fx);
        let p = d.pick_next(&w.view(now), CpuId(0), None, false, &mut fx);
        assert_eq!(p.task, Some(TaskId(0)));
        w.curr[0] = p.task;
        assert_eq!(d.scheme.dom, Some(DomainId(1)));
        assert_eq!(d.scheme.pending.iter().collect::<Vec<_>>(), vec![CpuId(1), CpuId(2), CpuId(3)]);
        assert!(fx.resched.contains(&CpuId(2)) && fx.resched.contains(&CpuId(3)));
        // CPU 2 answers: no vCPU of domain 1 and no HIT vCPU there, so t2 goes
        // back to its queue and CPU 2 idles (held for domain 1).
        let p = d.pick_next(&w.view(now), CpuId(2), Some(TaskId(2)), true, &mut Effects::default());
        assert_eq!(p.task, None);
        w.curr[2] = None;
        assert_eq!(d.base.runq(CpuId(2)), [TaskId(2)]);
        assert_eq!(d.core.held[2], Some(DomainId(1)));
        // Two operations: t2's pick on CPU 2 (t3's pick answered it) and t0's.
        assert_eq!(d.core.stats.ops, 2);
    }
}
