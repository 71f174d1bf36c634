//! `cds`: co-descheduling (CDS), the strict variant of hybrid co-scheduling.
//!
//! Design (docs/design/cosched.md "CDS"; strict co-scheduling as in VMware ESX's
//! "co-stop", applied to the CS scheme of `cs.rs`): everything of CS, and
//! additionally when a vCPU of a `CON` domain D is descheduled while still
//! runnable by a normal pick (its slice ended and something else won,
//! a BOOSTed waker preempted it, the tick moved it), every sibling of D
//! running on another pCPU is descheduled too: those pCPUs get a
//! co-descheduling signal and reschedule at once, running the first queued
//! vCPU of another domain, or idling. The gang comes back together when a
//! vCPU of D is picked again somewhere (a CS signal). A vCPU that *blocks*
//! does not co-deschedule its siblings: blocking is the guest idling, and
//! the siblings have work of their own.
//!
//! Invariants: as CS; a co-descheduling signal is raised only by a normal
//! pick that took a runnable `CON` vCPU off its pCPU for a vCPU of another
//! domain, and goes only to pCPUs running that vCPU's siblings; a pCPU
//! answering it never runs a vCPU of that domain. A pending CS signal on a
//! pCPU wins over a co-descheduling one. Each co-descheduling counts as one
//! co-scheduling operation (hence "many more co-scheduling events").
//! Units: ns.

use crate::cosched::{forced_pick, CoBase, CoCore, Forced, Scheme};
use crate::cs::Cs;
use crate::dispatcher::{Effects, Pick, SysView};
use ampsched_model::{CpuId, DomainId, TaskId};

/// Co-descheduling state: CS plus pending co-deschedules.
#[derive(Default)]
pub struct Cds {
    /// The CS part.
    pub cs: Cs,
    /// Per CPU: deschedule this domain's vCPU here.
    pub off: Vec<Option<DomainId>>,
    /// Co-descheduling signals raised.
    pub codescheds: u64,
}

impl Scheme for Cds {
    fn init(&mut self, v: &SysView) {
        *self = Cds { off: vec![None; v.topo.ncpus()], ..Cds::default() };
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
        if let Some(p) = self.cs.answer(core, b, v, cpu, prev, prev_runnable, fx) {
            if !self.cs.pending.contains(cpu) {
                self.off[cpu.idx()] = None;
            }
            return p;
        }
        let pick = if let Some(d) = self.off[cpu.idx()] {
            let tasks = v.tasks;
            match forced_pick(core, b, v, cpu, prev, prev_runnable, fx, |t| tasks[t.idx()].domain != d, |_| false) {
                Forced::Kept(p) => return p,
                Forced::Done(p) => {
                    self.off[cpu.idx()] = None;
                    p
                }
            }
        } else {
            let p = b.pick_next(v, cpu, prev, prev_runnable, fx);
            if let Some(x) = prev {
                let d = core.dom(x);
                if prev_runnable && p.task != prev && p.task.is_none_or(|t| core.dom(t) != d) && core.is_con(v, x) {
                    // Co-deschedule x's running siblings.
                    let mut n = 0;
                    for (q, cur) in v.curr.iter().enumerate() {
                        if q != cpu.idx() && cur.is_some_and(|y| core.dom(y) == d) {
                            self.off[q] = Some(d);
                            fx.resched(CpuId(q as u32));
                            n += 1;
                        }
                    }
                    if n > 0 {
                        core.op(n);
                        self.codescheds += 1;
                    }
                }
            }
            p
        };
        core.hold(cpu, None, v.now);
        self.cs.after_normal(core, b, v, cpu, &pick, fx);
        pick
    }

    fn became_hit<B: CoBase>(&mut self, core: &mut CoCore, b: &mut B, v: &SysView, d: DomainId) {
        self.cs.became_hit(core, b, v, d);
        for o in &mut self.off {
            if *o == Some(d) {
                *o = None;
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![("codeschedules", self.codescheds as f64)]
    }
}

#[cfg(test)]
mod tests {
    //! Worked example: a preempted CON vCPU takes its running sibling off too.
    use super::*;
    use crate::cosched::CoSched;
    use crate::credit::{Credit, CreditParams, Profile, PRI_OVER};
    use crate::dispatcher::Dispatcher;
    use crate::testkit::World;
    use ampsched_model::spec::CoschedType;
    use ampsched_model::Nanos;

    #[test]
    fn descheduling_one_sibling_deschedules_the_other() {
        // 2 CPUs; domain 0 = CON {t0, t1}; domain 1 = HIT {t2}.
        let mut w = World::new(2, &[256, 256, 256]);
        w.tasks[1].domain = DomainId(0);
        w.tasks[1].vcpu = 1;
        w.tasks[2].domain = DomainId(1);
        w.domains[0].tasks = vec![TaskId(0), TaskId(1)];
        w.domains[1].tasks = vec![TaskId(2)];
        w.domains.truncate(2);
        w.domains[0].cosched = CoschedType::Con;
        let mut p = CreditParams::defaults(Profile::Current);
        p.ratelimit = Nanos::ZERO;
        let mut d = CoSched::new("cds", Cds::default(), Credit::new("cds", p, &w.topo));
        d.init(&w.view(Nanos::ZERO));
        let now = Nanos::from_ms(1);
        // t0 on CPU 0 and t1 on CPU 1 run (the second pick answers the first's signal).
        for t in [0u32, 1] {
            d.wake(&w.view(now), TaskId(t), &mut Effects::default());
            let p = d.pick_next(&w.view(now), CpuId(t), None, false, &mut Effects::default());
            assert_eq!(p.task, Some(TaskId(t)));
            w.curr[t as usize] = p.task;
        }
        // t0 has overspent (OVER); HIT t2 wakes on CPU 0 with BOOST and wins
        // CPU 0's next pick at 31 ms: t0 is descheduled while runnable.
        d.base.set_pri(TaskId(0), PRI_OVER);
        d.base.place(TaskId(2), CpuId(0));
        let later = Nanos::from_ms(31);
        d.wake(&w.view(later), TaskId(2), &mut Effects::default());
        let mut fx = Effects::default();
        let p = d.pick_next(&w.view(later), CpuId(0), Some(TaskId(0)), true, &mut fx);
        assert_eq!(p.task, Some(TaskId(2)));
        w.curr[0] = p.task;
        // So t1's CPU 1 is told to deschedule it: a co-descheduling operation.
        assert_eq!(d.scheme.off[1], Some(DomainId(0)));
        assert!(fx.resched.contains(&CpuId(1)));
        assert_eq!(d.scheme.codescheds, 1);
        // CPU 1 answers: nothing but t1 could run there, so it idles with t1 queued.
        let p = d.pick_next(&w.view(later), CpuId(1), Some(TaskId(1)), true, &mut Effects::default());
        assert_eq!(p.task, None);
        assert_eq!(d.base.runq(CpuId(1)), [TaskId(1)]);
        assert_eq!(d.base.runq(CpuId(0)), [TaskId(0)]);
    }
}
