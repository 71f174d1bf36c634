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
}
