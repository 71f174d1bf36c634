//! `bcs`: boost co-scheduling (BCS): co-schedule by priority, not by signal.
//!
//! Design (docs/design/cosched.md "BCS"; Yu, Wang, Guo, He, IJPEDS 2013, on Xen 4.0.1's
//! credit scheduler): a new priority `COS` (credit.rs `PRI_COS`) above
//! BOOST. Pick-next on pCPU `c` chooses by credit's rules; then
//! - if the pick was raised to `COS`, it is lowered back to the priority it
//!   had when raised (UNDER, or what accounting made of it meanwhile);
//! - else, if it belongs to a `CON` domain, every *active* sibling — waiting
//!   in a runqueue, or running — is raised to `COS` (a waiting one moves to
//!   the front of its queue). No signal, no forced reschedule: a waiting
//!   sibling runs at its pCPU's next scheduling decision (slice end, block,
//!   wake-up preemption, or an idle pCPU stealing it, since a `COS` vCPU
//!   beats everything in a steal); a running one keeps running and wins its
//!   pCPU's next decision too, so the gang is not split when its slices end
//!   (then it leaves `COS`, and credit decides again).
//!
//! Each raise step is one co-scheduling operation (`cosched_ops`), whether
//! it found siblings to raise or not (all blocked, or still `COS` from an
//! earlier raise): the operation the paper counts is the scheme acting at a
//! `CON` pick, as for CS, whose signal goes out even when the siblings
//! already run; `bcs_raised` counts the vCPUs actually raised.
//!
//! Cheaper than PCS (no reschedules, no scheduling fragments) but the
//! siblings' start times differ by up to a timeslice: the sample stream
//! `sibling_start_diff_ns` records that difference for each raised sibling
//! (the CDF of the paper's figure).
//!
//! Invariants: a vCPU holds `COS` only while it is runnable (or parked)
//! and until its next pick; a vCPU picked with `COS` leaves it in that pick; raising never
//! asks a pCPU to reschedule (both tested in `tests/cosched.rs`). Credit's
//! accounting resets priorities every period: raised vCPUs that are still
//! waiting are raised again right after it, so a raise lasts until the
//! sibling runs. Units: ns.

use crate::cosched::{active_siblings, CoBase, CoCore, Scheme};
use crate::credit::PRI_COS;
use crate::dispatcher::{Effects, Pick, SysView};
use ampsched_model::{CpuId, DomainId, TaskId};

/// Boost co-scheduling state.
#[derive(Default)]
pub struct Bcs {
    /// Per task: the priority it had when raised to `COS` (None: not raised).
    pub saved: Vec<Option<i8>>,
    /// vCPUs raised to `COS`.
    pub raised: u64,
}

impl Scheme for Bcs {
    fn init(&mut self, v: &SysView) {
        *self = Bcs { saved: vec![None; v.tasks.len()], raised: 0 };
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
        let p = b.pick_next(v, cpu, prev, prev_runnable, fx);
        let Some(x) = p.task else { return p };
        if let Some(pri) = self.saved[x.idx()].take() {
            b.cr_mut().set_pri(x, pri);
            return p;
        }
        if !core.is_con(v, x) {
            return p;
        }
        let d = core.dom(x);
        let mut n = 0;
        for y in active_siblings(b, v, d, x, cpu) {
            if self.saved[y.idx()].is_some() {
                continue;
            }
            let cr = b.cr_mut();
            self.saved[y.idx()] = Some(cr.pri_of(y));
            if cr.is_queued(y) {
                core.want(y, v.now);
            }
            cr.set_pri(y, PRI_COS);
            n += 1;
        }
        // One co-scheduling operation (signalling nobody) per raise step,
        // however many siblings were active to raise: as CS counts a signal
        // at every `CON` pick, even when the siblings already run.
        core.op(0);
        self.raised += n;
        p
    }

    fn after_account<B: CoBase>(&mut self, _core: &mut CoCore, b: &mut B, _v: &SysView) {
        for i in 0..self.saved.len() {
            if self.saved[i].is_some() {
                let cr = b.cr_mut();
                let t = TaskId(i as u32);
                if cr.pri_of(t) != PRI_COS {
                    self.saved[i] = Some(cr.pri_of(t));
                    cr.set_pri(t, PRI_COS);
                }
            }
        }
    }

    fn became_hit<B: CoBase>(&mut self, core: &mut CoCore, b: &mut B, v: &SysView, d: DomainId) {
        for &t in &v.domains[d.idx()].tasks {
            if let Some(pri) = self.saved[t.idx()].take() {
                b.cr_mut().set_pri(t, pri);
                core.want[t.idx()] = None;
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![("bcs_raised", self.raised as f64)]
    }
}

#[cfg(test)]
mod tests {
    //! Worked example: a CON pick raises its waiting sibling; the sibling's pick lowers it.
    use super::*;
    use crate::cosched::CoSched;
    use crate::credit::{Credit, CreditParams, Profile, PRI_BOOST, PRI_UNDER};
    use crate::dispatcher::Dispatcher;
    use crate::testkit::World;
    use ampsched_model::spec::CoschedType;
    use ampsched_model::Nanos;

    /// BCS over current credit on `w`'s machine, initialised at time 0.
    fn bcs(w: &World) -> CoSched<Bcs, Credit> {
        let mut d =
            CoSched::new("bcs", Bcs::default(), Credit::new("bcs", CreditParams::defaults(Profile::Current), &w.topo));
        d.init(&w.view(Nanos::ZERO));
        d
    }

    #[test]
    fn raise_without_signal_then_lower_when_picked() {
        // 2 CPUs; domain 0 = CON {t0, t1}; domain 1 = HIT {t2, t3}.
        let mut w = World::new(2, &[256; 4]);
        for (t, d, vcpu) in [(1usize, 0u32, 1u32), (2, 1, 0), (3, 1, 1)] {
            w.tasks[t].domain = DomainId(d);
            w.tasks[t].vcpu = vcpu;
        }
        w.domains[0].tasks = vec![TaskId(0), TaskId(1)];
        w.domains[1].tasks = vec![TaskId(2), TaskId(3)];
        w.domains.truncate(2);
        w.domains[0].cosched = CoschedType::Con;
        let mut d = bcs(&w);
        // Scatter: t0 → CPU 0, t1 → CPU 1. HIT t2 runs on CPU 1; t3 and then t1 queue there.
        let now = Nanos::ZERO;
        d.base.place(TaskId(2), CpuId(1));
        d.base.place(TaskId(3), CpuId(1));
        d.wake(&w.view(now), TaskId(2), &mut Effects::default());
        let p = d.pick_next(&w.view(now), CpuId(1), None, false, &mut Effects::default());
        assert_eq!(p.task, Some(TaskId(2)));
        w.curr[1] = p.task;
        d.wake(&w.view(now), TaskId(3), &mut Effects::default());
        d.wake(&w.view(now), TaskId(1), &mut Effects::default());
        assert_eq!(d.base.runq(CpuId(1)), [TaskId(3), TaskId(1)]);
        // t0 wakes on CPU 0 and is picked at 2 ms: t1 is raised to COS, ahead of t3,
        // and nobody is asked to reschedule.
        let t0 = Nanos::from_ms(2);
        d.wake(&w.view(t0), TaskId(0), &mut Effects::default());
        let mut fx = Effects::default();
        let p = d.pick_next(&w.view(t0), CpuId(0), None, false, &mut fx);
        assert_eq!(p.task, Some(TaskId(0)));
        w.curr[0] = p.task;
        assert!(fx.resched.is_empty());
        assert_eq!(d.base.pri_of(TaskId(1)), PRI_COS);
        assert_eq!(d.base.runq(CpuId(1)), [TaskId(1), TaskId(3)]);
        // CPU 1's slice ends at 30 ms: t1 (COS) wins, and leaves COS for the BOOST it had.
        let t1 = Nanos::from_ms(30);
        let p = d.pick_next(&w.view(t1), CpuId(1), Some(TaskId(2)), true, &mut Effects::default());
        assert_eq!(p.task, Some(TaskId(1)));
        assert_eq!(d.base.pri_of(TaskId(1)), PRI_BOOST);
        assert!(d.scheme.saved[1].is_none());
        // Its start lagged t0's by 30 − 2 = 28 ms.
        assert_eq!(d.core.skew.values, vec![28_000_000]);
        assert_ne!(d.base.pri_of(TaskId(2)), PRI_COS);
        assert!(d.base.pri_of(TaskId(2)) >= PRI_UNDER);
    }

    #[test]
    fn a_con_pick_with_its_sibling_blocked_is_still_one_operation() {
        // 2 CPUs; domain 0 = CON {t0, t1}; t1 never wakes (blocked).
        let mut w = World::new(2, &[256; 2]);
        w.tasks[1].domain = DomainId(0);
        w.tasks[1].vcpu = 1;
        w.domains[0].tasks = vec![TaskId(0), TaskId(1)];
        w.domains.truncate(1);
        w.domains[0].cosched = CoschedType::Con;
        let mut d = bcs(&w);
        d.wake(&w.view(Nanos::ZERO), TaskId(0), &mut Effects::default());
        let p = d.pick_next(&w.view(Nanos::ZERO), CpuId(0), None, false, &mut Effects::default());
        assert_eq!(p.task, Some(TaskId(0)));
        w.curr[0] = p.task;
        // The raise step ran and found nobody active: one operation, no vCPU raised.
        assert_eq!((d.core.stats.ops, d.scheme.raised), (1, 0));
        assert_ne!(d.base.pri_of(TaskId(1)), PRI_COS);
        // Its slice ends at 30 ms and it is picked again: a second operation.
        let p = d.pick_next(&w.view(Nanos::from_ms(30)), CpuId(0), Some(TaskId(0)), true, &mut Effects::default());
        assert_eq!(p.task, Some(TaskId(0)));
        assert_eq!((d.core.stats.ops, d.scheme.raised), (2, 0));
    }
}
