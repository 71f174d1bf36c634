//! Test harness shared by the policies' unit tests: a small world of tasks,
//! domains and CPUs to drive a dispatcher hook by hook.

use crate::dispatcher::{DomainView, SysView, TaskView};
use ampsched_model::spec::{CoschedType, PriorityClass};
use ampsched_model::{DomainId, Nanos, TaskId, Topology};

/// Tasks, domains and what runs where, as a dispatcher sees them.
pub struct World {
    /// The machine.
    pub topo: Topology,
    /// Tasks.
    pub tasks: Vec<TaskView>,
    /// Domains.
    pub domains: Vec<DomainView>,
    /// What runs on each CPU.
    pub curr: Vec<Option<TaskId>>,
}

impl World {
    /// `ncpus` equal CPUs; one single-task domain per entry of `weights`.
    pub fn new(ncpus: usize, weights: &[u32]) -> World {
        let topo = Topology::fast_slow(0, 2.0, ncpus, 1.0, ncpus);
        let tasks =
            (0..weights.len()).map(|i| TaskView { domain: DomainId(i as u32), vcpu: 0, affinity: topo.all }).collect();
        let domains = weights
            .iter()
            .enumerate()
            .map(|(i, w)| DomainView {
                name: format!("d{i}"),
                weight: *w,
                cap: 0,
                priority: PriorityClass::Normal,
                fast_vcpus: None,
                cosched: CoschedType::Hit,
                tasks: vec![TaskId(i as u32)],
            })
            .collect();
        World { curr: vec![None; ncpus], topo, tasks, domains }
    }

    /// `ncpus` equal CPUs; domain 0 = `CON` {t0, t1} (vCPUs 0, 1), domain 1 = `HIT` {t2}.
    pub fn con_pair_and_hit(ncpus: usize) -> World {
        let mut w = World::new(ncpus, &[256, 256, 256]);
        w.tasks[1].domain = DomainId(0);
        w.tasks[1].vcpu = 1;
        w.tasks[2].domain = DomainId(1);
        w.domains[0].tasks = vec![TaskId(0), TaskId(1)];
        w.domains[1].tasks = vec![TaskId(2)];
        w.domains.truncate(2);
        w.domains[0].cosched = CoschedType::Con;
        w
    }

    /// The view at time `now`.
    pub fn view(&self, now: Nanos) -> SysView<'_> {
        SysView { now, topo: &self.topo, tasks: &self.tasks, domains: &self.domains, curr: &self.curr }
    }
}
