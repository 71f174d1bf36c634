//! The I/O back end's state (`engine/backend`): the back-end domain's vCPUs,
//! the jobs queued at each (FIFO), where each one's own program was parked,
//! the back-end vCPU each guest domain's I/O goes to, and the device time of
//! each I/O in flight.
//!
//! May import: `ampsched-model` ids and the policy crate's `DomainView`.
//! Must never import the rest of the engine (`Sim` drives this state from
//! `backend`).

use ampsched_model::{IoBackend, Nanos, TaskId};
use ampsched_policy::DomainView;
use std::collections::VecDeque;

/// No back-end vCPU (a task that is not one; the back-end domain itself).
pub(super) const NONE: u32 = u32::MAX;

/// One piece of back-end work: a guest's request or its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Job {
    /// The guest thread whose I/O it is.
    pub(super) guest: TaskId,
    /// The response (after the device), not the request.
    pub(super) response: bool,
}

/// Where a back-end vCPU's own program was when its service began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Parked {
    /// Blocked until its wake-up at this time (a sleep or timer).
    Until(Nanos),
    /// Ended.
    Done,
}

/// A vCPU of the back-end domain.
pub(super) struct Vcpu {
    /// Its task.
    pub(super) task: TaskId,
    /// Jobs waiting, in arrival order.
    pub(super) queue: VecDeque<Job>,
    /// The job its CPU work is for now (`None`: its program runs, or it is idle).
    pub(super) serving: Option<Job>,
    /// Its program's state while it serves.
    pub(super) parked: Parked,
}

/// The back-end domain's vCPUs, the guests bound to each, and the I/Os in flight.
pub(crate) struct Backend {
    /// CPU work per request, ns at speed 1.0 (≥ 1).
    pub(super) request: u64,
    /// CPU work per response, ns at speed 1.0 (≥ 1).
    pub(super) response: u64,
    /// The back-end domain's vCPUs, in vCPU order.
    pub(super) vcpus: Vec<Vcpu>,
    /// Per domain, the back-end vCPU its I/O goes to (`NONE` for the back-end domain).
    pub(super) of_domain: Vec<u32>,
    /// Per task, its back-end vCPU index when it is one, else `NONE`.
    pub(super) slot: Vec<u32>,
    /// Per task, the device time of its I/O in flight.
    pub(super) device: Vec<Nanos>,
}

impl Backend {
    /// The back end `b` over these domains and `ntasks` tasks. Panics when the
    /// domain does not exist or has no vCPU (the scenario checks both).
    pub(crate) fn new(b: &IoBackend, domains: &[DomainView], ntasks: usize) -> Backend {
        let d = b.domain.idx();
        assert!(d < domains.len(), "I/O back-end domain {d} does not exist ({} domains)", domains.len());
        let own = &domains[d].tasks;
        assert!(!own.is_empty(), "I/O back-end domain {d} has no vCPU");
        let mut slot = vec![NONE; ntasks];
        for (i, t) in own.iter().enumerate() {
            slot[t.idx()] = i as u32;
        }
        let n = own.len() as u32;
        let mut next = 0;
        let of_domain = (0..domains.len())
            .map(|i| {
                if i == d {
                    return NONE;
                }
                let v = next % n;
                next += 1;
                v
            })
            .collect();
        Backend {
            request: b.request.0.max(1),
            response: b.response.0.max(1),
            vcpus: own
                .iter()
                .map(|&task| Vcpu { task, queue: VecDeque::new(), serving: None, parked: Parked::Done })
                .collect(),
            of_domain,
            slot,
            device: vec![Nanos::ZERO; ntasks],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ampsched_model::spec::{CoschedType, PriorityClass};
    use ampsched_model::DomainId;

    #[test]
    fn guest_domains_take_the_backend_vcpus_in_turn() {
        // Domains: vm0 (task 0), dom0 (tasks 1, 2), vm1 (3), vm2 (4), vm3 (5).
        // The guests in declaration order take dom0's vCPUs 0, 1, 0, 1; dom0's
        // own tasks are its vCPUs 0 and 1, the others none.
        let view = |tasks: Vec<u32>| DomainView {
            name: String::new(),
            weight: 256,
            cap: 0,
            priority: PriorityClass::default(),
            fast_vcpus: None,
            cosched: CoschedType::default(),
            tasks: tasks.into_iter().map(TaskId).collect(),
        };
        let domains = [view(vec![0]), view(vec![1, 2]), view(vec![3]), view(vec![4]), view(vec![5])];
        let b = IoBackend { domain: DomainId(1), request: Nanos(0), response: Nanos(7) };
        let q = Backend::new(&b, &domains, 6);
        assert_eq!(q.of_domain, vec![0, NONE, 1, 0, 1]);
        assert_eq!(q.slot, vec![NONE, 0, 1, NONE, NONE, NONE]);
        assert_eq!(q.vcpus.iter().map(|v| v.task).collect::<Vec<_>>(), vec![TaskId(1), TaskId(2)]);
        // A zero cost is one nanosecond of work (a job always ends with an event).
        assert_eq!((q.request, q.response), (1, 7));
    }
}
