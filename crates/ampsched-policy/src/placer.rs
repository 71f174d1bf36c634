//! The Placer trait: coarse, periodic placement shared by the simulator and
//! the real agent. A placer sees a [`Snapshot`] of the last period and returns
//! affinity changes; it never touches threads itself.

use ampsched_model::spec::PriorityClass;
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, TaskId, Topology};

/// Per-CPU figures over the last period.
#[derive(Clone, Debug, Default)]
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
#[derive(Clone, Debug)]
pub struct TaskSample {
    /// The task.
    pub id: TaskId,
    /// Owning domain.
    pub domain: DomainId,
    /// Index within the domain (vCPU id).
    pub vcpu: u32,
    /// Ran or was runnable during the period.
    pub active: bool,
    /// Runnable (running or queued) at the end of the period.
    pub runnable_now: bool,
    /// Running on a CPU at the end of the period.
    pub running: bool,
    /// Its program has ended (it will never run again).
    pub done: bool,
    /// Run time in the period per CPU class (indexed like `Topology::classes`).
    pub run_by_class: Vec<Nanos>,
    /// CPU it runs on, or last ran on.
    pub cpu: Option<CpuId>,
    /// Current hard affinity.
    pub affinity: CpuSet,
    /// Working-set estimate, KiB (0 = unknown).
    pub ws_kb: u32,
}

/// Per-domain facts.
#[derive(Clone, Debug)]
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
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Time at the end of the period.
    pub now: Nanos,
    /// Length of the period just ended.
    pub period: Nanos,
    /// Per CPU, indexed by id.
    pub cpus: Vec<CpuSample>,
    /// Managed tasks, in id order.
    pub tasks: Vec<TaskSample>,
    /// Domains, in id order.
    pub domains: Vec<DomainSample>,
}

/// An affinity change to apply.
#[derive(Clone, Debug, PartialEq, Eq)]
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
}
