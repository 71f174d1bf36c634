//! What a run is configured with: the machine, domains, tasks, policies,
//! seed, stop condition and timed domain changes.
//!
//! What it is: plain data handed to `Sim::new`. Scenario files are one way
//! to build it (`crate::scenario`); tests and bindings build it directly.
//!
//! May import: `ampsched-model` and `ampsched-policy` (the vocabulary and
//! the policy traits). Must never import the rest of the engine, scenario
//! loading, the runner or the trace recorder: it is the engine's bottom room.

use ampsched_model::spec::{CoschedType, PriorityClass};
use ampsched_model::{CpuSet, DomainId, Nanos, Program, Topology};
use ampsched_policy::{Dispatcher, DomainView, Placer};
use std::sync::Arc;

/// Everything needed to run one simulation.
pub struct SimConfig {
    /// Scenario name (copied to results).
    pub name: String,
    /// The machine.
    pub topo: Topology,
    /// Domains.
    pub domains: Vec<DomainView>,
    /// Tasks, indexed by id.
    pub tasks: Vec<TaskInit>,
    /// The dispatcher.
    pub dispatcher: Box<dyn Dispatcher>,
    /// The placer (optional).
    pub placer: Option<Box<dyn Placer>>,
    /// Run the placer in the Linux agent's body (`None`: its decisions are put in force as
    /// decided, every period).
    pub agent: Option<AgentBody>,
    /// The run's seed.
    pub seed: u64,
    /// Stop condition.
    pub stop: Stop,
    /// Time-series interval.
    pub stats_interval: Nanos,
    /// Record each task's wake-up latencies (`ampsched validate` asks for them); off by
    /// default, as the per-wake-up update costs the XL bench about 10 % per event.
    pub wake_latency: bool,
    /// Timed domain changes, sorted by time.
    pub events: Vec<(Nanos, DomainId, DomainChange)>,
}

/// The Linux agent's body around the placer (`ampsched_policy::gate`; the engine's side is
/// `engine/place.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentBody {
    /// Delay from a fast CPU going idle to the agent's move in force.
    pub reaction: Nanos,
    /// The agent's back-off runs.
    pub backoff: bool,
}

/// The agent's reaction to an idle fast CPU, µs: the per-run median p50 measured on the
/// development machine (docs/agent.md, "Reaction time, measured": 88 µs on 27 Nov 06:12,
/// p99 853 µs; 85 µs at 08:39, p99 321 µs).
pub const AGENT_REACTION_US: f64 = 88.0;

/// A task as configured.
#[derive(Clone, Debug)]
pub struct TaskInit {
    /// Owning domain.
    pub domain: DomainId,
    /// vCPU index within the domain.
    pub vcpu: u32,
    /// Its program (`Program::idle()` for an idle vCPU).
    pub program: Arc<Program>,
    /// Hard affinity.
    pub affinity: CpuSet,
    /// Sync group index (tasks sharing barriers, locks, channels).
    pub group: u32,
    /// Index of this task within its sync group.
    pub rank: u32,
    /// The thread's own name (an rt-app task name, `name-k` for instance k),
    /// carried into results and traces; `None`: named `domain/vN` there.
    pub name: Option<Arc<str>>,
    /// Of a background domain: a run that ends when all are done does not wait for it.
    pub background: bool,
}

/// When a run stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// After exactly this much simulated time.
    Duration(Nanos),
    /// When every program is done, or at `max`.
    AllDone {
        /// Upper bound.
        max: Nanos,
    },
}

/// A timed change to a domain.
#[derive(Clone, Debug, Default)]
pub struct DomainChange {
    /// New co-scheduling type.
    pub cosched: Option<CoschedType>,
    /// New priority class.
    pub priority: Option<PriorityClass>,
    /// New weight.
    pub weight: Option<u32>,
}
