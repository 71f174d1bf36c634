//! `pcs`: partial co-scheduling (PCS): signal only the pCPUs that hold the
//! domain's vCPUs.
//!
//! Design (docs/design/cosched.md "PCS"; Yu, Wang, Guo, He, "Optimisation schemes to
//! improve hybrid co-scheduling for concurrent virtual machines", IJPEDS
//! 2013, implemented in Xen 4.0.1's credit scheduler). State:
//! - per pCPU `co_dom`: the domain this pCPU must co-schedule, or none;
//! - per domain `co_cpus`: the pCPUs whose runqueues hold its vCPUs —
//!   waiting, or running (Xen puts the running vCPU back on its runqueue
//!   before it picks, so a signalled pCPU running a sibling picks it again
//!   with a fresh slice: the gang's slices end together again) — computed
//!   when an operation starts;
//! - global masks `co_workers` (pCPUs with a pending request) and
//!   `co_partners` (pCPUs taking part in an operation in progress).
//!
//! Pick-next on pCPU `c` (the current vCPU is put back first):
//! 1. `co_dom[c]` = D: run the first vCPU of D in `c`'s runqueue, else the
//!    first `HIT` vCPU (else idle). Clear `c` from `co_workers`; when no pCPU
//!    of D's operation is still a worker, clear the operation's pCPUs from
//!    `co_partners` (the operation is finished). Clear `co_dom[c]`.
//! 2. Otherwise pick by the credit rules. If the pick x belongs to a `CON`
//!    domain D: `m` = D's `co_cpus` minus `c`. If `m` is empty, nothing to
//!    do. If `m ∪ {c}` meets no partner: set `co_dom[p] = D` for `p` in `m`,
//!    add `m` to `co_workers` and `m ∪ {c}` to `co_partners`, signal `m`.
//!    Otherwise (those pCPUs are co-scheduling someone else) run the first
//!    `HIT` vCPU of `c`'s queue instead of x.
//!
//! Effect: only the pCPUs holding the domain's vCPUs are disturbed, and two
//! `CON` domains on disjoint pCPUs co-schedule at the same time.
//!
//! Invariants (debug-asserted after every pick, tested in
//! `tests/cosched.rs`): operations in progress never share a pCPU; an
//! operation signals only pCPUs of its domain's `co_cpus`; `co_workers` ⊆
//! `co_partners`; `co_dom[p]` is set exactly for `p` in `co_workers`.
//! Units: ns. Departures, on purpose: the initiating pCPU counts as a
//! partner while its operation is in progress (so "never share a pCPU"
//! holds for every pCPU an operation touches, docs/design/cosched.md adds only `m`); a
//! pick of D while D's own operation is in progress runs as is; when no
//! `HIT` vCPU waits in step 2's fallback, x runs without co-scheduling
//! rather than leaving the pCPU idle; answers may wait out credit's
//! ratelimit (≤ 1 ms; Xen 4.0 had none).

use crate::cosched::{active_siblings, first_queued, forced_pick, replace, CoBase, CoCore, Forced, Scheme};
use crate::dispatcher::{Effects, Pick, SysView};
use ampsched_model::spec::CoschedType;
use ampsched_model::{CpuId, CpuSet, DomainId, TaskId};

/// Partial co-scheduling state.
#[derive(Default)]
pub struct Pcs {
    /// Per CPU: the domain it must co-schedule.
    pub co_dom: Vec<Option<DomainId>>,
    /// Per domain: the pCPUs of its operation in progress (empty: none).
    pub op_cpus: Vec<CpuSet>,
    /// pCPUs with a pending request.
    pub co_workers: CpuSet,
    /// pCPUs taking part in an operation in progress.
    pub co_partners: CpuSet,
    /// Picks that fell back to a `HIT` vCPU (or ran uncoordinated) because partners were busy.
    pub busy: u64,
}

impl Pcs {
    /// Operations in progress: (domain, its pCPUs).
    pub fn ops_in_progress(&self) -> Vec<(DomainId, CpuSet)> {
        (0..self.op_cpus.len())
            .filter(|&d| !self.op_cpus[d].is_empty())
            .map(|d| (DomainId(d as u32), self.op_cpus[d]))
            .collect()
    }

    fn check(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let mut seen = CpuSet::new();
        for m in &self.op_cpus {
            debug_assert!(!m.intersects(&seen), "two PCS operations share a pCPU");
            seen = seen.or(m);
        }
        debug_assert!(self.co_workers.and_not(&self.co_partners).is_empty(), "a worker outside the partners");
        for (c, d) in self.co_dom.iter().enumerate() {
            debug_assert_eq!(d.is_some(), self.co_workers.contains(CpuId(c as u32)), "co_dom and co_workers disagree");
        }
    }
}

impl Scheme for Pcs {
    fn init(&mut self, v: &SysView) {
        *self =
            Pcs { co_dom: vec![None; v.topo.ncpus()], op_cpus: vec![CpuSet::new(); v.domains.len()], ..Pcs::default() };
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
        let ci = cpu.idx();
        // Rule 1: answer this pCPU's request.
        if let Some(d) = self.co_dom[ci] {
            let (tasks, doms) = (v.tasks, v.domains);
            let in_d = |t: TaskId| tasks[t.idx()].domain == d;
            let hit = |t: TaskId| doms[tasks[t.idx()].domain.idx()].cosched == CoschedType::Hit;
            match forced_pick(core, b, v, cpu, prev, prev_runnable, fx, in_d, hit) {
                Forced::Kept(p) => return p,
                Forced::Done(p) => {
                    self.co_workers.remove(cpu);
                    self.co_dom[ci] = None;
                    let m = self.op_cpus[d.idx()];
                    if !m.intersects(&self.co_workers) {
                        self.co_partners = self.co_partners.and_not(&m);
                        self.op_cpus[d.idx()] = CpuSet::new();
                    }
                    let hold = if p.task.is_some_and(|t| core.dom(t) == d) { None } else { Some(d) };
                    core.hold(cpu, hold, v.now);
                    self.check();
                    return p;
                }
            }
        }
        // Rule 2: credit's pick, then co-schedule it if it is CON.
        let p = b.pick_next(v, cpu, prev, prev_runnable, fx);
        core.hold(cpu, None, v.now);
        let Some(x) = p.task else { return p };
        if !core.is_con(v, x) {
            return p;
        }
        let d = core.dom(x);
        if !self.op_cpus[d.idx()].is_empty() {
            return p;
        }
        let active = active_siblings(b, v, d, x, cpu);
        let mut m = CpuSet::new();
        for &y in &active {
            m.insert(b.cr().cpu_of(y));
        }
        m.remove(cpu);
        if m.is_empty() {
            return p;
        }
        let mut mc = m;
        mc.insert(cpu);
        if mc.intersects(&self.co_partners) {
            self.busy += 1;
            core.stats.fallbacks += 1;
            let hit = first_queued(b, cpu, |t| v.domains[v.tasks[t.idx()].domain.idx()].cosched == CoschedType::Hit);
            return match hit {
                Some(h) => replace(b, v, cpu, x, h, fx),
                None => p,
            };
        }
        for q in m.iter() {
            self.co_dom[q.idx()] = Some(d);
            core.signal(q, fx);
        }
        self.co_workers = self.co_workers.or(&m);
        self.co_partners = self.co_partners.or(&mc);
        self.op_cpus[d.idx()] = mc;
        core.op(m.len());
        for y in active {
            if b.cr().is_queued(y) && m.contains(b.cr().cpu_of(y)) {
                core.want(y, v.now);
            }
        }
        self.check();
        p
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        vec![("pcs_partners_busy", self.busy as f64)]
    }
}

#[cfg(test)]
mod tests {
    //! Worked examples: two CON domains on disjoint pCPUs co-schedule at once; PCS over
    //! Xen 4.0's credit (`rules = "xen40"`, cosched.rs) lets a BOOSTed wake preempt locally.
    use super::*;
    use crate::cosched::CoSched;
    use crate::credit::{Credit, CreditParams, Profile};
    use crate::dispatcher::Dispatcher;
    use crate::testkit::World;
    use ampsched_model::Nanos;

    #[test]
    fn disjoint_domains_co_schedule_in_parallel_and_only_their_cpus_are_signalled() {
        // 4 CPUs; domain 0 = CON {t2, t3}, domain 1 = CON {t0, t1}, domain 2 = HIT {t4, t5}.
        // Created in that order, every domain's vCPU 0 starts on CPU 0 and vCPU 1 on
        // CPU 1 (credit's `sched_select_initial_cpu`), so domain 0, scattered first,
        // moves off them.
        let mut w = World::new(4, &[256; 6]);
        for (t, d, vcpu) in [(0usize, 1u32, 0u32), (1, 1, 1), (2, 0, 0), (3, 0, 1), (4, 2, 0), (5, 2, 1)] {
            w.tasks[t].domain = DomainId(d);
            w.tasks[t].vcpu = vcpu;
        }
        w.domains[0].tasks = vec![TaskId(2), TaskId(3)];
        w.domains[1].tasks = vec![TaskId(0), TaskId(1)];
        w.domains[2].tasks = vec![TaskId(4), TaskId(5)];
        w.domains.truncate(3);
        w.domains[0].cosched = CoschedType::Con;
        w.domains[1].cosched = CoschedType::Con;
        let mut p = CreditParams::defaults(Profile::Current);
        p.ratelimit = Nanos::ZERO;
        let mut d = CoSched::new("pcs", Pcs::default(), Credit::new("pcs", p, &w.topo));
        d.init(&w.view(Nanos::ZERO));
        // Scatter: t0 → 0, t1 → 1, t2 → 2, t3 → 3. HIT t4, t5 run on CPUs 1 and 3.
        let now = Nanos::from_ms(1);
        for (t, c) in [(4u32, 1u32), (5, 3)] {
            d.base.place(TaskId(t), CpuId(c));
            d.wake(&w.view(now), TaskId(t), &mut Effects::default());
            let p = d.pick_next(&w.view(now), CpuId(c), None, false, &mut Effects::default());
            assert_eq!(p.task, Some(TaskId(t)));
            w.curr[c as usize] = p.task;
        }
        // t1 and t3 wake and queue behind the HIT vCPUs (no preemption: BOOST = BOOST).
        for t in [1u32, 3] {
            d.wake(&w.view(now), TaskId(t), &mut Effects::default());
        }
        assert_eq!(d.base.runq(CpuId(1)), [TaskId(1)]);
        // t0 wakes on idle CPU 0 and is picked: an operation on {0, 1} signals only CPU 1.
        d.wake(&w.view(now), TaskId(0), &mut Effects::default());
        let mut fx = Effects::default();
        let p = d.pick_next(&w.view(now), CpuId(0), None, false, &mut fx);
        assert_eq!(p.task, Some(TaskId(0)));
        w.curr[0] = p.task;
        assert_eq!(fx.resched, vec![CpuId(1)]);
        assert_eq!(d.scheme.co_dom[1], Some(DomainId(1)));
        // t2 on CPU 2 likewise: its operation {2, 3} is disjoint, so it starts too.
        d.wake(&w.view(now), TaskId(2), &mut Effects::default());
        let mut fx = Effects::default();
        let p = d.pick_next(&w.view(now), CpuId(2), None, false, &mut fx);
        assert_eq!(p.task, Some(TaskId(2)));
        w.curr[2] = p.task;
        assert_eq!(fx.resched, vec![CpuId(3)]);
        assert_eq!(d.scheme.ops_in_progress().len(), 2);
        // CPUs 1 and 3 answer: t1 and t3 preempt the HIT vCPUs; both operations finish.
        for (c, t, h) in [(1usize, 1u32, 4u32), (3, 3, 5)] {
            let p = d.pick_next(&w.view(now), CpuId(c as u32), Some(TaskId(h)), true, &mut Effects::default());
            assert_eq!(p.task, Some(TaskId(t)));
            w.curr[c] = p.task;
        }
        assert!(d.scheme.ops_in_progress().is_empty());
        assert!(d.scheme.co_partners.is_empty() && d.scheme.co_workers.is_empty());
        assert_eq!(d.core.stats.ops, 2);
        // Both siblings started at the instant of their request: two samples of 0 ns.
        assert_eq!(d.core.skew.values, vec![0, 0]);
    }

    /// 2 CPUs; domain 0 = CON {t0, t1} (scattered to CPUs 0, 1), domain 1 = HIT {t2}.
    /// t0 runs on CPU 0 (its BOOST dropped by the 10 ms tick), t1 is blocked, CPU 1
    /// idles; t2, last on CPU 0, wakes at 15 ms. Returns the pCPUs asked to reschedule.
    fn hit_wakes_beside_a_running_con_vcpu(rules: &str) -> Vec<CpuId> {
        let mut w = World::con_pair_and_hit(2);
        let mut p = ampsched_model::spec::Params::new();
        p.insert("rules".into(), ampsched_model::spec::ParamValue::Str(rules.into()));
        let cp = crate::cosched::credit_params("pcs", &p).unwrap();
        let mut d = CoSched::new("pcs", Pcs::default(), Credit::new("pcs", cp, &w.topo));
        d.init(&w.view(Nanos::ZERO));
        let t0 = TaskId(0);
        d.wake(&w.view(Nanos::ZERO), t0, &mut Effects::default());
        assert_eq!(d.pick_next(&w.view(Nanos::ZERO), CpuId(0), None, false, &mut Effects::default()).task, Some(t0));
        w.curr[0] = Some(t0);
        d.tick(&w.view(Nanos::from_ms(10)), CpuId(0), &mut Effects::default());
        d.base.place(TaskId(2), CpuId(0));
        let mut fx = Effects::default();
        d.wake(&w.view(Nanos::from_ms(15)), TaskId(2), &mut fx);
        fx.resched
    }

    #[test]
    fn a_scheme_over_xen40_lets_a_boosted_wake_preempt_the_con_vcpu_there() {
        // Xen 4.0's `__runq_tickle`: BOOST (0) > t0's UNDER (−1) → CPU 0 itself, then
        // every idler (CPU 1). Current credit tickles only the idle CPU 1, and t2 runs there.
        assert_eq!(hit_wakes_beside_a_running_con_vcpu("xen40"), [CpuId(0), CpuId(1)]);
        assert_eq!(hit_wakes_beside_a_running_con_vcpu("current"), [CpuId(1)]);
    }
}
