//! The Placer trait: coarse, periodic placement shared by the simulator and
//! the real agent. A placer sees a [`Snapshot`] of the last period and returns
//! affinity changes; it never touches threads itself. What the fields mean in
//! both bodies, and how a change becomes the mask in force, is the contract in
//! [`crate::placer_bridge`].

use ampsched_model::spec::PriorityClass;
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, TaskId, Topology};
use serde::{Deserialize, Serialize};

/// Per-CPU figures over the last period.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CpuSample {
    /// The CPU.
    pub id: CpuId,
    /// Time spent running managed or unmanaged work (not noise).
    pub busy: Nanos,
    /// Idle time (not noise).
    pub idle: Nanos,
    /// Time taken by interrupts, softirqs, steal and real-time work.
    pub noise: Nanos,
    /// Runnable tasks at the end of the period that run on or last ran on this CPU
    /// (the running one and those waiting for it; Linux: state R with this `processor`).
    pub nr_running: u32,
}

/// Per-task figures over the last period.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskSample {
    /// The task.
    pub id: TaskId,
    /// Owning domain.
    pub domain: DomainId,
    /// Index within the domain (vCPU id).
    pub vcpu: u32,
    /// Ran or was runnable during the period.
    pub active: bool,
    /// State at the end of the period.
    pub state: TaskState,
    /// Run time in the period per CPU class (indexed like `Topology::classes`).
    pub run_by_class: Vec<Nanos>,
    /// CPU it runs on, or last ran on.
    pub cpu: Option<CpuId>,
    /// Its own affinity: where it may run by its own (or its user's) choice.
    pub allowed: CpuSet,
    /// The mask in force now (the last effective mask; `allowed` before any change).
    pub affinity: CpuSet,
    /// Working-set estimate, KiB (0 = unknown).
    pub ws_kb: u32,
}

impl TaskSample {
    /// Runnable (running or queued) at the end of the period.
    pub fn runnable(&self) -> bool {
        self.state.runnable()
    }

    /// Its program has ended (it will never run again).
    pub fn done(&self) -> bool {
        self.state == TaskState::Done
    }
}

/// Per-domain facts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DomainSample {
    /// The domain.
    pub id: DomainId,
    /// Credit-style weight.
    pub weight: u32,
    /// Priority class.
    pub priority: PriorityClass,
    /// Aware guest's "fast" vCPU ids.
    pub fast_vcpus: Option<Vec<u32>>,
}

/// What a placer sees each period.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// Time at the end of the period.
    pub now: Nanos,
    /// Time that elapsed since the last decision (not the nominal period).
    pub period: Nanos,
    /// Per CPU, indexed by id.
    pub cpus: Vec<CpuSample>,
    /// Managed tasks, in id order.
    pub tasks: Vec<TaskSample>,
    /// Domains, in id order.
    pub domains: Vec<DomainSample>,
}

/// An affinity change to apply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinityChange {
    /// The task.
    pub task: TaskId,
    /// Its new hard affinity.
    pub mask: CpuSet,
}

/// A periodic placement policy.
pub trait Placer: Send {
    /// Registered name.
    fn name(&self) -> &'static str;
    /// How often `place` runs.
    fn period(&self) -> Nanos;
    /// Decide affinity changes from the last period.
    fn place(&mut self, topo: &Topology, snap: &Snapshot, out: &mut Vec<AffinityChange>);
    /// The CPU time the last `place` call's own work takes on each CPU of a simulated
    /// machine (a placer that runs as processes on the machine it balances, e.g.
    /// `capability`'s per-CPU balancers); the simulator takes it from that CPU. A real
    /// machine's body spends it for real and ignores this. Default: none.
    fn own_cost(&self) -> &[(CpuId, Nanos)] {
        &[]
    }
}

/// A task's state at the end of a period.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    /// On a CPU now.
    Running,
    /// Waiting for a CPU (or running, where the body cannot tell).
    Runnable,
    /// Asleep: waiting for an event, a lock, I/O.
    Blocked,
    /// Ended; it never runs again.
    Done,
}

impl TaskState {
    /// Running or waiting for a CPU.
    pub fn runnable(self) -> bool {
        matches!(self, TaskState::Running | TaskState::Runnable)
    }
}

/// One parameter a placer wants set differently when it runs on a real machine.
#[derive(Clone, Copy, Debug)]
pub struct RealMachineParam {
    /// Parameter name (one of the placer's parameters).
    pub name: &'static str,
    /// Value on a real machine, as the parameter's text.
    pub value: &'static str,
    /// Why it differs there.
    pub why: &'static str,
}
