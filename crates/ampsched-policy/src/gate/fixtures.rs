//! Test fixtures shared by the gate's unit tests: the development machine
//! (CPU 0 fast, CPU 1 slowed by the hog) over one 30 ms period.

use crate::{CpuSample, Snapshot, TaskSample, TaskState};
use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, TaskId, Topology};

/// A CPU set of the given CPU numbers.
pub(crate) fn ids(v: &[u32]) -> CpuSet {
    CpuSet::from_cpus(v.iter().map(|c| CpuId(*c)))
}

/// A task of domain 0 that may use both CPUs, in `state`, with `affinity` in force and
/// `run_ms` of run time on each of the two classes.
pub(crate) fn task(id: u32, state: TaskState, affinity: &[u32], run_ms: u64) -> TaskSample {
    TaskSample {
        id: TaskId(id),
        domain: DomainId(0),
        vcpu: id,
        active: state != TaskState::Blocked,
        state,
        run_by_class: vec![Nanos::from_ms(run_ms); 2],
        cpu: None,
        allowed: ids(&[0, 1]),
        affinity: ids(affinity),
        ws_kb: 0,
    }
}

/// A 30 ms period on `topo` (2 CPUs): CPU 0 idle for `idle0_ms` of it, CPU 1 busy throughout.
pub(crate) fn snap(topo: Topology, tasks: Vec<TaskSample>, idle0_ms: u64) -> (Topology, Snapshot) {
    let cpus = vec![
        CpuSample {
            id: CpuId(0),
            busy: Nanos::from_ms(30 - idle0_ms),
            idle: Nanos::from_ms(idle0_ms),
            ..Default::default()
        },
        CpuSample { id: CpuId(1), busy: Nanos::from_ms(30), ..Default::default() },
    ];
    (topo, Snapshot { now: Nanos::from_ms(30), period: Nanos::from_ms(30), cpus, tasks, domains: Vec::new() })
}
