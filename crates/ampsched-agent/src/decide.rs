//! Decide: the agent's side of the placer bridge. The placer is built from
//! the registry with the agent's period and the placer's own declared
//! real-machine parameters (`PolicyInfo::real_machine`, applied by
//! `ampsched_policy::placer_bridge::real_machine_params`: no parameter is
//! switched on by a placer's name here), and each period's decision goes
//! through `placer_bridge::decide` — the same code the simulator's bridge
//! runs — which returns effective masks (decision ∩ the thread's own mask,
//! the own mask when they do not meet) in topology ids.

use crate::AgentError;
use ampsched_model::spec::{ParamValue, PolicySpec};
use ampsched_model::{Nanos, Topology};
use ampsched_policy::placer_bridge::{self, real_machine_params};
use ampsched_policy::{placer_by_name, AffinityChange, Placer, Snapshot, PLACERS};

/// The name of a placer's period parameter (`period_ms` or `interval_ms`).
pub fn period_param(placer: &str) -> Option<&'static str> {
    let info = PLACERS.iter().find(|p| p.name == placer)?;
    info.params.iter().map(|p| p.name).find(|n| *n == "period_ms" || *n == "interval_ms")
}

/// The placer's parameters on this machine: the user's, then the agent's period (unless
/// set), then the placer's declared real-machine values (unless set).
pub fn agent_params(spec: &PolicySpec, period_ms: f64) -> Result<ampsched_model::spec::Params, AgentError> {
    let mut params = spec.params.clone();
    if let Some(p) = period_param(&spec.name) {
        params.entry(p.to_string()).or_insert(ParamValue::Float(period_ms));
    }
    match PLACERS.iter().find(|p| p.name == spec.name) {
        Some(info) => real_machine_params(info, &params).map_err(|e| AgentError::new(format!("placer: {e}"))),
        None => Ok(params),
    }
}

/// The placer and its buffers.
pub struct Decider {
    placer: Box<dyn Placer>,
    scratch: Vec<AffinityChange>,
    out: Vec<AffinityChange>,
}

impl Decider {
    /// Build the placer named in `spec` for `topo` with the agent's parameters.
    pub fn new(spec: &PolicySpec, period_ms: f64, topo: &Topology) -> Result<Decider, AgentError> {
        let params = agent_params(spec, period_ms)?;
        let placer = placer_by_name(&spec.name, &params, topo).map_err(|e| AgentError::new(format!("placer: {e}")))?;
        Ok(Decider::with_placer(placer))
    }

    /// Wrap a built placer.
    pub fn with_placer(placer: Box<dyn Placer>) -> Decider {
        Decider { placer, scratch: Vec::new(), out: Vec::new() }
    }

    /// The placer's name.
    pub fn name(&self) -> &'static str {
        self.placer.name()
    }

    /// The placer's period.
    pub fn period(&self) -> Nanos {
        self.placer.period()
    }

    /// One decision: the effective masks to apply (topology ids, task-id order).
    pub fn decide(&mut self, topo: &Topology, snap: &Snapshot) -> &[AffinityChange] {
        placer_bridge::decide(self.placer.as_mut(), topo, snap, &mut self.scratch, &mut self.out);
        &self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ampsched_model::CpuSet;

    #[test]
    fn period_parameter_names() {
        assert_eq!(period_param("aash"), Some("period_ms"));
        assert_eq!(period_param("capability"), Some("interval_ms"));
        assert_eq!(period_param("fast-first"), Some("interval_ms"));
        assert_eq!(period_param("magic"), None);
    }

    #[test]
    fn the_agent_sets_the_period_and_the_declared_values_never_over_the_users() {
        let spec = PolicySpec { name: "aash".into(), params: Default::default() };
        let p = agent_params(&spec, 20.0).unwrap();
        assert_eq!(p["period_ms"], ParamValue::Float(20.0));
        // aash declares time_credits = true for real machines.
        assert_eq!(p["time_credits"], ParamValue::Bool(true));
        let mut mine = spec.clone();
        mine.params.insert("time_credits".into(), ParamValue::Bool(false));
        mine.params.insert("period_ms".into(), ParamValue::Float(50.0));
        let p = agent_params(&mine, 20.0).unwrap();
        assert_eq!(
            (p["time_credits"].clone(), p["period_ms"].clone()),
            (ParamValue::Bool(false), ParamValue::Float(50.0))
        );
        // capability declares nothing: only its interval is set.
        let cap = agent_params(&PolicySpec { name: "capability".into(), params: Default::default() }, 30.0).unwrap();
        assert_eq!(cap.len(), 1);
        assert!(Decider::new(
            &PolicySpec { name: "magic".into(), params: Default::default() },
            30.0,
            &Topology::fast_slow(1, 2.0, 1, 1.0, 2)
        )
        .is_err());
    }

    /// Which threads share a single-CPU mask after each change is set in turn: the stacks a
    /// sequence of `sched_setaffinity` calls goes through (masks start as `start`).
    fn stacks(start: &[(u32, CpuSet)], changes: &[AffinityChange]) -> Vec<Option<u32>> {
        let mut m: Vec<(u32, CpuSet)> = start.to_vec();
        changes
            .iter()
            .map(|c| {
                m.iter_mut().find(|(t, _)| *t == c.task.0).unwrap().1 = c.mask;
                let single: Vec<CpuSet> = m.iter().map(|x| x.1).filter(|s| s.len() == 1).collect();
                single.iter().enumerate().find(|(i, a)| single[i + 1..].contains(a)).map(|(_, a)| a.first().unwrap().0)
            })
            .collect()
    }

    #[test]
    fn capabilitys_swap_is_set_without_stacking_both_threads_on_the_slow_cpu() {
        use ampsched_model::{CpuId, DomainId, TaskId};
        use ampsched_policy::{CpuSample, TaskSample, TaskState};
        // CPU 0 fast (speed 1), CPU 1 half as fast (0.5), both fully busy: EC 30 and 15 per
        // 30 ms period. Two stress-ng workers, both running. (With the development machine's
        // hog, 15 ms of noise on CPU 1, EC there is 7.5 and capability's launch now stacks both
        // workers on CPU 0, 30 / 2 > 7.5: no swap to order.)
        let topo = Topology::fast_slow(1, 1.0, 1, 0.5, 2);
        let mut dec =
            Decider::new(&PolicySpec { name: "capability".into(), params: Default::default() }, 30.0, &topo).unwrap();
        let all = CpuSet::from_cpus([CpuId(0), CpuId(1)]);
        let w = |id: u32, cpu: u32, aff: CpuSet| TaskSample {
            id: TaskId(id),
            domain: DomainId(0),
            vcpu: id,
            active: true,
            state: TaskState::Running,
            run_by_class: vec![Nanos::from_ms(15); 2],
            cpu: Some(CpuId(cpu)),
            allowed: all,
            affinity: aff,
            ws_kb: 0,
        };
        let snap = |a: CpuSet, b: CpuSet| Snapshot {
            now: Nanos::from_ms(30),
            period: Nanos::from_ms(30),
            cpus: vec![
                CpuSample { id: CpuId(0), busy: Nanos::from_ms(30), ..Default::default() },
                CpuSample { id: CpuId(1), busy: Nanos::from_ms(30), ..Default::default() },
            ],
            tasks: vec![w(0, 0, a), w(1, 1, b)],
            domains: Vec::new(),
        };
        // Launch in ECPT order: A → CPU 0 (share 30 against 15); B: 30 / 2 ties 15 / 1, the
        // fewer tasks win → CPU 1.
        let one = |c: u32| CpuSet::single(CpuId(c));
        let got: Vec<(u32, CpuSet)> = dec.decide(&topo, &snap(all, all)).iter().map(|c| (c.task.0, c.mask)).collect();
        assert_eq!(got, vec![(0, one(0)), (1, one(1))]);
        // Next period: ECPT 30 on CPU 0 against 15 on CPU 1: CPU 0 swaps with CPU 1 (B's
        // share on CPU 0, 30 / 2, is not larger than its 15 / 1: a swap, not a one-way move),
        // A → {1}, B → {0}, decided in task order.
        let mut swap = dec.decide(&topo, &snap(one(0), one(1))).to_vec();
        assert_eq!(swap.iter().map(|c| (c.task.0, c.mask)).collect::<Vec<_>>(), vec![(0, one(1)), (1, one(0))]);
        let start = [(0, one(0)), (1, one(1))];
        // Set in that order, the first call stacks both workers on slow CPU 1 until the second
        // returns — which moves B, running on CPU 1, by CPU 1's stopper: 2-8 ms of every
        // period, measured.
        assert_eq!(stacks(&start, &swap), vec![Some(1), None]);
        // Ordered: B's move to fast CPU 0 first, wherever the agent runs; a stack after it is
        // on the fast CPU.
        for me in [Some(CpuId(1)), Some(CpuId(0)), None] {
            ampsched_policy::gate::cooperate::order_changes(&topo, me, &mut swap);
            assert_eq!(swap.iter().map(|c| c.task.0).collect::<Vec<_>>(), vec![1, 0], "agent on {me:?}");
            assert_eq!(stacks(&start, &swap), vec![Some(0), None]);
        }
        // Among changes that both give a fast CPU, the one onto the agent's own CPU goes last.
        let mut two = vec![
            AffinityChange { task: ampsched_model::TaskId(0), mask: CpuSet::from_cpus([CpuId(0), CpuId(1)]) },
            AffinityChange { task: ampsched_model::TaskId(1), mask: one(0) },
        ];
        ampsched_policy::gate::cooperate::order_changes(&topo, Some(CpuId(1)), &mut two);
        assert_eq!(two.iter().map(|c| c.task.0).collect::<Vec<_>>(), vec![1, 0]);
    }
}
