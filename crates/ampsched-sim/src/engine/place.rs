//! The placer bridge: every placer period, a `Snapshot` of the last period
//! (per CPU busy/idle/noise time and load, per task run time by class,
//! activity, state, own mask and mask in force, per domain weight and
//! priority) goes to the `Placer`; its decision becomes effective masks
//! through `ampsched_policy::placer_bridge` — the same code the Linux agent
//! runs ([`placer_decision`]) — and each goes to the dispatcher in the
//! placer's order. A decision is narrowed to the task's own mask (the
//! scenario's, or the last one its program set); one that does not meet it
//! leaves the task its own mask. `crates/ampsched-cli/tests/placer_conformance.rs`
//! replays a real agent run's samples through this function and the agent's.
//!
//! May import: `Sim`, the bottom rooms, the dispatcher bridge's `view!`.
//! Must never import the interpreter or statistics.

use super::clock::Ev;
use super::fixed;
use super::task::St;
use super::Sim;
use ampsched_model::{CpuId, DomainId, Nanos, TaskId, Topology};
use ampsched_policy::placer_bridge;
use ampsched_policy::{AffinityChange, CpuSample, DomainSample, Placer, Snapshot, TaskSample, TaskState};

impl Sim {
    pub(super) fn run_placer(&mut self) {
        let Some(mut placer) = self.placer.take() else { return };
        let now = self.now;
        for c in 0..self.cpus.len() {
            self.flush_cpu(c);
        }
        for i in 0..self.tasks.len() {
            if let St::Running(_) = self.tasks[i].st {
                self.settle(TaskId(i as u32));
            }
        }
        let mut nr_running = vec![0u32; self.cpus.len()];
        for t in &self.tasks {
            match t.st {
                St::Running(c) => nr_running[c.idx()] += 1,
                St::Runnable => {
                    if let Some(c) = t.last_cpu {
                        nr_running[c.idx()] += 1;
                    }
                }
                _ => {}
            }
        }
        let snap = Snapshot {
            now,
            period: now - self.last_place,
            cpus: self
                .cpus
                .iter()
                .enumerate()
                .map(|(i, c)| CpuSample {
                    id: CpuId(i as u32),
                    busy: Nanos(fixed::round_ns(c.p_busy)),
                    idle: Nanos(fixed::round_ns(c.p_idle)),
                    noise: Nanos(fixed::round_ns(c.p_noise)),
                    nr_running: nr_running[i],
                })
                .collect(),
            tasks: self
                .tasks
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.idle_vcpu)
                .map(|(i, t)| TaskSample {
                    id: TaskId(i as u32),
                    domain: t.domain,
                    vcpu: self.views[i].vcpu,
                    active: t.period_active,
                    state: match t.st {
                        St::Running(_) => TaskState::Running,
                        St::Runnable => TaskState::Runnable,
                        St::Done => TaskState::Done,
                        _ => TaskState::Blocked,
                    },
                    run_by_class: t.period_run.iter().map(|x| Nanos(*x)).collect(),
                    cpu: match t.st {
                        St::Running(c) => Some(c),
                        _ => t.last_cpu,
                    },
                    allowed: self.own[i],
                    affinity: self.views[i].affinity,
                    ws_kb: t.ws_kb,
                })
                .collect(),
            domains: self
                .domains
                .iter()
                .enumerate()
                .map(|(i, d)| DomainSample {
                    id: DomainId(i as u32),
                    weight: d.weight,
                    priority: d.priority,
                    fast_vcpus: d.fast_vcpus.clone(),
                })
                .collect(),
        };
        let mut changes: Vec<AffinityChange> = Vec::new();
        placer_decision(placer.as_mut(), &self.topo, &snap, &mut Vec::new(), &mut changes);
        for c in &mut self.cpus {
            c.p_busy = 0;
            c.p_idle = 0;
            c.p_noise = 0;
        }
        for t in &mut self.tasks {
            t.period_run.iter_mut().for_each(|x| *x = 0);
            t.period_active = matches!(t.st, St::Runnable | St::Running(_));
        }
        self.last_place = now;
        for ch in changes {
            self.placer_changes += 1;
            self.views[ch.task.idx()].affinity = ch.mask;
            let mut fx = std::mem::take(&mut self.fx);
            self.disp.affinity_changed(&view!(self), ch.task, &mut fx);
            self.fx = fx;
            self.flush_fx();
        }
        let per = placer.period();
        self.placer = Some(placer);
        self.push(now + per, Ev::Place);
    }
}

/// The simulator's side of the placer bridge: `placer`'s decision on `snap` as the effective
/// masks to put in force (`ampsched_policy::placer_bridge::decide`: narrowed to each task's
/// own mask, no-ops dropped, in the placer's order); `scratch` holds the raw changes.
pub fn placer_decision(
    placer: &mut dyn Placer,
    topo: &Topology,
    snap: &Snapshot,
    scratch: &mut Vec<AffinityChange>,
    out: &mut Vec<AffinityChange>,
) {
    placer_bridge::decide(placer, topo, snap, scratch, out);
}
