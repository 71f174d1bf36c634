//! `cds`: co-descheduling (CDS), the strict variant of hybrid co-scheduling.
//!
//! Design (docs/design/cosched.md "CDS"; strict co-scheduling as in VMware ESX's
//! "co-stop", applied to the CS scheme of `cs.rs`; the rule as the PCS/BCS
//! paper states it, Yu et al., IJPEDS 2013: "when one vCPU of a `CON`
//! domain is descheduled, all its siblings are descheduled too"):
//! everything of CS, and additionally, when a normal pick takes a vCPU x of
//! a `CON` domain D off its pCPU for something that is not a vCPU of D,
//! every sibling of x running on another pCPU is descheduled too: those
//! pCPUs get a co-descheduling signal and reschedule at once. Two ways of
//! leaving, two answers:
//! - **x was preempted** (still runnable: its slice ended and something else
//!   won, a BOOSTed waker took its pCPU, the tick moved it). x will run
//!   again and its siblings would only spin on it, so a signalled pCPU runs
//!   the first queued vCPU of another domain, or idles (held for D).
//! - **x blocked** (deschedule-on-block: its guest went idle, e.g. a thread
//!   waiting at a barrier). The gang gives its pCPUs up together, so the
//!   other domains' waiting vCPUs get them at the same moment; a signalled
//!   pCPU runs the first queued vCPU of another domain, and when none waits
//!   there its sibling runs on (Xen's `csched_schedule` never idles a pCPU
//!   with a runnable vCPU queued, and the sibling may be the one x waits
//!   for: idling it would hold a barrier until some unrelated event). Either
//!   way the pick that follows is a normal pick, so a `CON` vCPU it runs —
//!   the sibling itself included — raises a CS signal again.
//!
//! So CDS pays, per block of a `CON` vCPU whose sibling runs, a
//! co-descheduling and a co-scheduling operation that CS does not: "many
//! more co-scheduling events". Worked examples: the tests below (preempted:
//! the sibling's pCPU idles; blocked: the sibling yields to a waiting vCPU
//! of another domain, or runs on and re-signals).
//!
//! Invariants: as CS; a co-descheduling signal is raised only by a normal
//! pick that took a `CON` vCPU off its pCPU for a vCPU of another domain
//! (or idle), and goes only to pCPUs running that vCPU's siblings; a pCPU
//! answering a preemption's signal never runs a vCPU of that domain, one
//! answering a block's runs one only when no vCPU of another domain waits
//! in its queue. A pending CS signal on a pCPU wins over a co-descheduling
//! one. Each co-descheduling counts as one co-scheduling operation.
//! Units: ns.

use crate::cosched::{forced_pick, CoBase, CoCore, Forced, Scheme};
use crate::cs::Cs;
use crate::dispatcher::{Effects, Pick, SysView};
use ampsched_model::{CpuId, DomainId, TaskId};

/// Why a co-descheduling signal was raised (decides how it is answered).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Off {
    /// A sibling was preempted: run another domain's vCPU or idle.
    Preempted(DomainId),
    /// A sibling blocked: run another domain's vCPU, else the sibling runs on.
    Blocked(DomainId),
}

impl Off {
    /// The domain being descheduled.
    pub fn dom(self) -> DomainId {
        match self {
            Off::Preempted(d) | Off::Blocked(d) => d,
        }
    }
}

/// Co-descheduling state: CS plus pending co-deschedules.
#[derive(Default)]
pub struct Cds {
    /// The CS part.
    pub cs: Cs,
    /// Per CPU: deschedule this domain's vCPU here, and why.
    pub off: Vec<Option<Off>>,
    /// Co-descheduling signals raised.
    pub codescheds: u64,
    /// Of those, raised because a vCPU blocked (deschedule-on-block).
    pub codescheds_on_block: u64,
}

impl Cds {
    /// Signal every other pCPU running a vCPU of `off`'s domain to deschedule it.
    fn codeschedule(&mut self, core: &mut CoCore, v: &SysView, cpu: CpuId, off: Off, fx: &mut Effects) {
        let d = off.dom();
        let mut n = 0;
        for (q, cur) in v.curr.iter().enumerate() {
            if q != cpu.idx() && cur.is_some_and(|y| core.dom(y) == d) {
                self.off[q] = Some(off);
                core.signal(CpuId(q as u32), fx);
                n += 1;
            }
        }
        if n > 0 {
            core.op(n);
            self.codescheds += 1;
            if matches!(off, Off::Blocked(_)) {
                self.codescheds_on_block += 1;
            }
        }
    }
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
        let pick = if let Some(off) = self.off[cpu.idx()] {
            let (tasks, d) = (v.tasks, off.dom());
            let other = |t: TaskId| tasks[t.idx()].domain != d;
            let runs_on = |_: TaskId| matches!(off, Off::Blocked(_));
            match forced_pick(core, b, v, cpu, prev, prev_runnable, fx, other, runs_on) {
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
                if p.task != prev && p.task.is_none_or(|t| core.dom(t) != d) && core.is_con(v, x) {
                    self.codeschedule(
                        core,
                        v,
                        cpu,
                        if prev_runnable { Off::Preempted(d) } else { Off::Blocked(d) },
                        fx,
                    );
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
            if o.is_some_and(|o| o.dom() == d) {
                *o = None;
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![("codeschedules", self.codescheds as f64), ("codeschedules_on_block", self.codescheds_on_block as f64)]
    }
}

#[cfg(test)]
mod tests {
    //! Worked examples: a CON vCPU leaving its pCPU takes its running sibling
    //! off too — preempted: the sibling's pCPU idles; blocked: the sibling
    //! yields to a waiting vCPU of another domain, or runs on and re-signals.
    use super::*;
    use crate::cosched::CoSched;
    use crate::credit::{Credit, CreditParams, Profile, PRI_OVER};
    use crate::dispatcher::Dispatcher;
    use crate::testkit::World;
    use ampsched_model::Nanos;

    /// 2 CPUs; domain 0 = CON {t0, t1}; domain 1 = HIT {t2}; t0 runs on
    /// CPU 0 and t1 on CPU 1 from 1 ms (the second pick answers the first's
    /// signal, so it raises none): one CS operation so far.
    fn running_gang() -> (World, CoSched<Cds, Credit>) {
        let mut w = World::con_pair_and_hit(2);
        let mut p = CreditParams::defaults(Profile::Current);
        p.ratelimit = Nanos::ZERO;
        let mut d = CoSched::new("cds", Cds::default(), Credit::new("cds", p, &w.topo));
        d.init(&w.view(Nanos::ZERO));
        let now = Nanos::from_ms(1);
        for t in [0u32, 1] {
            d.wake(&w.view(now), TaskId(t), &mut Effects::default());
            let p = d.pick_next(&w.view(now), CpuId(t), None, false, &mut Effects::default());
            assert_eq!(p.task, Some(TaskId(t)));
            w.curr[t as usize] = p.task;
        }
        d.scheme.cs.pending = ampsched_model::CpuSet::new();
        assert_eq!(d.core.stats.ops, 1);
        (w, d)
    }

    #[test]
    fn a_preempted_sibling_deschedules_the_other_and_its_cpu_idles() {
        let (mut w, mut d) = running_gang();
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
        assert_eq!(d.scheme.off[1], Some(Off::Preempted(DomainId(0))));
        assert!(fx.resched.contains(&CpuId(1)));
        assert_eq!((d.scheme.codescheds, d.scheme.codescheds_on_block), (1, 0));
        // CPU 1 answers: nothing but t1 could run there, so it idles with t1 queued.
        let p = d.pick_next(&w.view(later), CpuId(1), Some(TaskId(1)), true, &mut Effects::default());
        assert_eq!(p.task, None);
        assert_eq!(d.base.runq(CpuId(1)), [TaskId(1)]);
        assert_eq!(d.base.runq(CpuId(0)), [TaskId(0)]);
    }

    #[test]
    fn a_blocked_sibling_makes_the_other_yield_to_a_waiting_domain() {
        let (mut w, mut d) = running_gang();
        // HIT t2, pinned to CPU 1 (so idle CPU 0 cannot steal it), waits in
        // CPU 1's queue behind t1 (woken there at 2 ms).
        w.tasks[2].affinity = ampsched_model::CpuSet::single(CpuId(1));
        d.base.place(TaskId(2), CpuId(1));
        d.wake(&w.view(Nanos::from_ms(2)), TaskId(2), &mut Effects::default());
        assert_eq!(d.base.runq(CpuId(1)), [TaskId(2)]);
        // t0 blocks at 5 ms (its thread waits at a barrier): CPU 0 idles, and
        // t1's CPU 1 is told to deschedule t1 — deschedule-on-block.
        let at = Nanos::from_ms(5);
        d.block(&w.view(at), TaskId(0), CpuId(0), &mut Effects::default());
        let mut fx = Effects::default();
        let p = d.pick_next(&w.view(at), CpuId(0), Some(TaskId(0)), false, &mut fx);
        assert_eq!(p.task, None);
        w.curr[0] = None;
        assert_eq!(d.scheme.off[1], Some(Off::Blocked(DomainId(0))));
        assert_eq!(fx.resched, [CpuId(1)]);
        assert_eq!((d.scheme.codescheds, d.scheme.codescheds_on_block), (1, 1));
        assert_eq!(d.core.stats.ops, 2);
        // CPU 1 answers by running the waiting HIT t2; t1 goes back to the queue.
        let p = d.pick_next(&w.view(at), CpuId(1), Some(TaskId(1)), true, &mut Effects::default());
        assert_eq!(p.task, Some(TaskId(2)));
        assert_eq!(d.base.runq(CpuId(1)), [TaskId(1)]);
        assert_eq!(d.scheme.off[1], None);
        // A HIT pick raises no co-scheduling signal.
        assert_eq!(d.core.stats.ops, 2);
    }

    #[test]
    fn a_blocked_sibling_with_nothing_else_waiting_lets_the_other_run_on_and_resignal() {
        let (mut w, mut d) = running_gang();
        let at = Nanos::from_ms(5);
        d.block(&w.view(at), TaskId(0), CpuId(0), &mut Effects::default());
        let p = d.pick_next(&w.view(at), CpuId(0), Some(TaskId(0)), false, &mut Effects::default());
        assert_eq!(p.task, None);
        w.curr[0] = None;
        assert_eq!(d.scheme.off[1], Some(Off::Blocked(DomainId(0))));
        // CPU 1's queue is empty: t1 (which t0's barrier may wait for) runs on,
        // and as a normal pick of a CON vCPU it signals CPU 0 again.
        let mut fx = Effects::default();
        let p = d.pick_next(&w.view(at), CpuId(1), Some(TaskId(1)), true, &mut fx);
        assert_eq!(p.task, Some(TaskId(1)));
        assert!(d.base.runq(CpuId(1)).is_empty());
        assert_eq!(d.scheme.cs.pending.iter().collect::<Vec<_>>(), vec![CpuId(0)]);
        assert_eq!(fx.resched, [CpuId(0)]);
        // Ops: 1 (the gang's start) + 1 co-descheduling + 1 co-scheduling signal.
        assert_eq!(d.core.stats.ops, 3);
    }
}
