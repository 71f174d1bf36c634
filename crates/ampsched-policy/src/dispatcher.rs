//! The Dispatcher trait: fine-grained CPU scheduling inside the simulator.
//!
//! The simulator (mechanism) owns task execution and time; a dispatcher
//! (policy) owns its runqueues, credits and priorities, like a Xen
//! `struct scheduler` ops table. Call protocol, all at the current `now`:
//! - `init` once, with every task blocked;
//! - `wake(t)` when a blocked task becomes runnable (it is queued somewhere);
//! - `block(t, cpu)` when the task running on `cpu` blocks or ends; the
//!   simulator then calls `pick_next(cpu, prev = t, prev_runnable = false)`;
//! - `tick(cpu)` every `tick_period` on a CPU that runs a task;
//! - `account()` every `account_period`;
//! - `yielding(t, on)` when a task starts or stops a `yield` wait (it stays
//!   runnable; the dispatcher may reschedule to model `sched_yield`);
//! - `pick_next(cpu, prev, prev_runnable)` when `cpu` reschedules (slice end,
//!   a requested reschedule, or after a block); the dispatcher puts `prev`
//!   back in a queue if it is still runnable and returns what runs next.
//!
//! Effects (reschedule requests) go out through [`Effects`]; the simulator
//! delivers them as events at the same instant, in order.

use ampsched_model::spec::{CoschedType, PriorityClass};
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, TaskId, Topology};

/// What a dispatcher may read about a task.
#[derive(Clone, Debug)]
pub struct TaskView {
    /// Owning domain.
    pub domain: DomainId,
    /// Index of this task within its domain (the vCPU id).
    pub vcpu: u32,
    /// Hard affinity.
    pub affinity: CpuSet,
}

/// What a dispatcher may read about a domain.
#[derive(Clone, Debug)]
pub struct DomainView {
    /// Name.
    pub name: String,
    /// Credit weight.
    pub weight: u32,
    /// Cap, % of one CPU (0 = none).
    pub cap: u32,
    /// Administrator priority class.
    pub priority: PriorityClass,
    /// Aware guest: vCPU ids it declares "fast" (`None` = legacy guest).
    pub fast_vcpus: Option<Vec<u32>>,
    /// Co-scheduling type.
    pub cosched: CoschedType,
    /// Its tasks, in vCPU order.
    pub tasks: Vec<TaskId>,
}

/// Read-only view of the system passed to every dispatcher hook.
pub struct SysView<'a> {
    /// Current time.
    pub now: Nanos,
    /// The machine.
    pub topo: &'a Topology,
    /// All tasks, indexed by `TaskId`.
    pub tasks: &'a [TaskView],
    /// All domains, indexed by `DomainId`.
    pub domains: &'a [DomainView],
    /// The task running on each CPU (`None` = idle).
    pub curr: &'a [Option<TaskId>],
}

/// Side effects a dispatcher asks for.
#[derive(Default, Debug)]
pub struct Effects {
    /// CPUs that must reschedule now (Xen: SCHEDULE_SOFTIRQ), in order.
    pub resched: Vec<CpuId>,
    /// Time CPUs spend in the hypervisor for what was asked of them (an IPI
    /// taken and a pass through `schedule()`): whatever runs on the CPU after
    /// its next reschedule makes that much less progress (engine `hv.rs`).
    pub stall: Vec<(CpuId, Nanos)>,
}

impl Effects {
    /// Ask `cpu` to reschedule.
    #[inline]
    pub fn resched(&mut self, cpu: CpuId) {
        self.resched.push(cpu);
    }

    /// Charge `cpu` `ns` of hypervisor time (see `stall`).
    pub fn stall(&mut self, cpu: CpuId, ns: Nanos) {
        self.stall.push((cpu, ns));
    }
}

/// The result of `pick_next`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    /// The task to run, or `None` to idle.
    pub task: Option<TaskId>,
    /// How long it may run before the CPU reschedules (ignored when idle).
    pub slice: Nanos,
}

impl Pick {
    /// Idle the CPU.
    pub const IDLE: Pick = Pick { task: None, slice: Nanos::MAX };
}

/// A fine-grained scheduler (see the module docs for the call protocol).
pub trait Dispatcher: Send {
    /// Registered name.
    fn name(&self) -> &'static str;
    /// Period of `tick` on busy CPUs (`Nanos::ZERO` = no ticks).
    fn tick_period(&self) -> Nanos;
    /// Period of `account` (`Nanos::ZERO` = none).
    fn account_period(&self) -> Nanos;
    /// The CPU whose timer runs `account`, if it is one CPU's (Xen credit's
    /// `master_ticker`): a stalled CPU runs it late (the engine's stalls); `None`
    /// (the default): a global timer no stall delays.
    fn account_cpu(&self) -> Option<CpuId> {
        None
    }
    /// True when it runs the machine's RT loads itself (an RT class above
    /// its own); otherwise the simulator charges them as noise.
    fn models_rt_load(&self) -> bool {
        false
    }
    /// The run's seed, given once before `init`, for a dispatcher's own seeded
    /// randomness (e.g. `fair`'s initial placement); default: unused.
    fn seed(&mut self, _seed: u64) {}
    /// Set up per-task and per-CPU state; every task starts blocked.
    fn init(&mut self, v: &SysView);
    /// A blocked task became runnable.
    fn wake(&mut self, v: &SysView, t: TaskId, fx: &mut Effects);
    /// The task running on `cpu` blocked (or ended).
    fn block(&mut self, v: &SysView, t: TaskId, cpu: CpuId, fx: &mut Effects);
    /// Periodic tick on a CPU running a task.
    fn tick(&mut self, v: &SysView, cpu: CpuId, fx: &mut Effects);
    /// Periodic global accounting.
    fn account(&mut self, v: &SysView, fx: &mut Effects);
    /// Choose what `cpu` runs next; `prev` was running there until now.
    fn pick_next(
        &mut self,
        v: &SysView,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_runnable: bool,
        fx: &mut Effects,
    ) -> Pick;
    /// A task's hard affinity changed (already visible in `v`).
    fn affinity_changed(&mut self, v: &SysView, t: TaskId, fx: &mut Effects);
    /// Task `t` started (`on`) or stopped polling with `sched_yield` between
    /// polls (a `yield` wait: runnable, spinning); default: ignored, so the
    /// task spins as with `spin` (a dispatcher without a yield model).
    fn yielding(&mut self, _v: &SysView, _t: TaskId, _on: bool, _fx: &mut Effects) {}
    /// A domain's parameters (weight, priority, co-scheduling type) changed.
    fn domain_changed(&mut self, _v: &SysView, _d: DomainId, _fx: &mut Effects) {}
    /// Dispatcher-specific counters for the results (name, value), in a fixed order.
    fn counters(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// Trace probe (read only, called only when a trace is recorded): a task's credit balance, if the policy has one.
    fn credit(&self, _t: TaskId) -> Option<i64> {
        None
    }
    /// Trace probe: tasks waiting in `cpu`'s runqueue (not the running one), if the policy keeps per-CPU queues.
    fn runq_len(&self, _cpu: CpuId) -> Option<u32> {
        None
    }
    /// Dispatcher-specific sample streams for the results (name, values in ns), in a fixed order.
    fn samples(&self) -> Vec<(&'static str, Vec<u64>)> {
        Vec::new()
    }
}
