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
//! # The agent's body (`SimConfig::agent`, a scenario's `[agent]`)
//!
//! Without it a placer's decision is put in force as decided every period:
//! the body of the papers' placers (a hypervisor applying AASH's credits, the
//! capability study's launcher) and of every reproduction. With it the
//! placer runs as the Linux agent (`ampsched run`) runs it, with the agent's
//! own code (`ampsched_policy::gate`), so one brain gets one body in both:
//! - each period, [`agent_decision`]: the placer's effective masks only while
//!   more runnable tasks want the fast CPUs than there are and no fast CPU
//!   idled, else every narrowed task gets its own mask back, a heavy
//!   runnable one kept on the slow CPUs first moved onto a free fast CPU
//!   (`gate::cooperate::move_released`: widening alone does not move a
//!   running thread); two runnable
//!   tasks stacked on one CPU while another CPU of theirs is in nobody's mask
//!   are spread; the back-off's hands-off windows and verdicts; changes
//!   ordered fast-first (`gate::body::Body::period`; the simulated agent has
//!   no CPU of its own);
//! - the moment a fast CPU goes idle (the engine's switch to idle, as the
//!   agent sees `sched_switch` to the idle task) while some live task is kept
//!   from a fast CPU it may use (the agent arms its events only then), a
//!   reaction is due `reaction` later: the first runnable task kept from that
//!   CPU is moved onto it and every narrowed task widened
//!   (`gate::cooperate::on_idle_fast_cpu`). A switch to idle at or before the
//!   agent's last application (its own changes, or a period's decision taken
//!   meanwhile) is not reacted to, as the agent ignores switches older than
//!   its last application; switches before a planned reaction make one
//!   reaction, to the last (the agent drains its ring and takes the last).
//!   The delay is a measurement, not zero: from the switch to the idle task
//!   to the move in force (`sched_setaffinity` returned) the agent took a
//!   per-run median p50 of 88 µs (p99 853 µs) at 06:12 and of 85 µs (p99
//!   321 µs) at 08:39 on 27 Nov 2026 (docs/agent.md, "Reaction time,
//!   measured", `scripts/bench-agent.sh 7 r`);
//!   [`AGENT_REACTION_US`] is the first (`[agent] reaction_us` sets another);
//! - each change of the agent's body is in force before the next is made
//!   (what it causes runs at once): `sched_setaffinity` of a running task
//!   returns once the CPU stopper has moved it (`affine_move_task` in
//!   kernel/sched/core.c), so a move onto an idle CPU is done before the
//!   mover's mask is widened again.
//!
//! # The placer's own cost (`Placer::own_cost`)
//!
//! A placer that runs as processes on the machine it balances — the
//! capability study's per-CPU balancers, at real-time priority — takes CPU
//! time from the tasks it balances. After each period's decision the placer
//! reports the time its work took on each CPU, and each CPU is *seized* for
//! that long from now (`Cpu::seize`): it leaves its task no time, as a
//! real-time process preempting a CFS task does, so a running task's
//! completion moves back by exactly the seizure; an idle CPU loses nothing
//! to a task; charges on a CPU already seized extend its seizure. The
//! seized time counts as noise in the CPU's books (time the tasks did not
//! get). Capability's figures and sources are in its essay
//! (`crates/ampsched-policy/src/capability.rs`, "The balancers' own cost");
//! the worked example is the test below. A placer that reports nothing (every
//! other) costs one empty loop per period.
//!
//! May import: `Sim`, the bottom rooms, the dispatcher bridge's `view!`.
//! Must never import the interpreter or statistics.

use super::clock::Ev;
#[cfg(doc)]
use super::config::AGENT_REACTION_US;
use super::fixed;
use super::task::St;
use super::Sim;
use ampsched_model::{CpuId, DomainId, Nanos, TaskId, Topology};
use ampsched_policy::gate::body::Body;
use ampsched_policy::gate::cooperate::{fast_set, kept_from_fast, on_idle_fast_cpu, Confined};
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
        // The snapshot's vectors are kept from one period to the next: filled anew, not allocated.
        let mut snap = std::mem::take(&mut self.snap);
        snap.now = now;
        snap.period = now - self.last_place;
        snap.cpus.clear();
        snap.cpus.extend(self.cpus.iter().enumerate().map(|(i, c)| CpuSample {
            id: CpuId(i as u32),
            busy: Nanos(fixed::round_ns(c.p_busy)),
            idle: Nanos(fixed::round_ns(c.p_idle)),
            noise: Nanos(fixed::round_ns(c.p_noise)),
            nr_running: 0,
        }));
        for t in &self.tasks {
            match t.st {
                St::Running(c) => snap.cpus[c.idx()].nr_running += 1,
                St::Runnable => {
                    if let Some(c) = t.last_cpu {
                        snap.cpus[c.idx()].nr_running += 1;
                    }
                }
                _ => {}
            }
        }
        let mut k = 0;
        for (i, t) in self.tasks.iter().enumerate().filter(|(_, t)| !t.idle_vcpu) {
            let state = match t.st {
                St::Running(_) => TaskState::Running,
                St::Runnable => TaskState::Runnable,
                St::Done => TaskState::Done,
                _ => TaskState::Blocked,
            };
            let cpu = match t.st {
                St::Running(c) => Some(c),
                _ => t.last_cpu,
            };
            let run = t.period_run.iter().map(|x| Nanos(*x));
            if k == snap.tasks.len() {
                // The first period: a new sample.
                snap.tasks.push(TaskSample {
                    id: TaskId(i as u32),
                    domain: t.domain,
                    vcpu: self.views[i].vcpu,
                    active: t.period_active,
                    state,
                    run_by_class: run.collect(),
                    cpu,
                    allowed: self.own[i],
                    affinity: self.views[i].affinity,
                    ws_kb: t.ws_kb,
                });
            } else {
                // Every field set in place (a sample is two 128-byte masks and more: no
                // moves); the pattern names them all, so a new field cannot be missed.
                let TaskSample { id, domain, vcpu, active, state: st, run_by_class, cpu: on, allowed, affinity, ws_kb } =
                    &mut snap.tasks[k];
                (*id, *domain, *vcpu, *active, *st) =
                    (TaskId(i as u32), t.domain, self.views[i].vcpu, t.period_active, state);
                run_by_class.clear();
                run_by_class.extend(run);
                (*on, *ws_kb) = (cpu, t.ws_kb);
                *allowed = self.own[i];
                *affinity = self.views[i].affinity;
            }
            k += 1;
        }
        snap.tasks.truncate(k);
        snap.domains.clear();
        snap.domains.extend(self.domains.iter().enumerate().map(|(i, d)| DomainSample {
            id: DomainId(i as u32),
            weight: d.weight,
            priority: d.priority,
            fast_vcpus: d.fast_vcpus.clone(),
        }));
        let mut changes: Vec<AffinityChange> = Vec::new();
        match self.gate.as_deref_mut() {
            Some(g) => {
                agent_decision(placer.as_mut(), &mut g.body, &self.topo, &snap, &mut Vec::new(), &mut changes);
                g.applied_at = now;
            }
            None => placer_decision(placer.as_mut(), &self.topo, &snap, &mut Vec::new(), &mut changes),
        }
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
        for &(c, d) in placer.own_cost() {
            self.seize(c, d);
        }
        let per = placer.period();
        self.placer = Some(placer);
        self.snap = snap;
        self.apply_changes(&changes);
        self.push(now + per, Ev::Place);
    }

    /// The placer's own work holds CPU `c` for `d` more (module essay, "The placer's own
    /// cost"): no task progresses there until `Ev::Seized` ends it.
    fn seize(&mut self, c: CpuId, d: Nanos) {
        let ci = c.idx();
        if d.0 == 0 || ci >= self.cpus.len() {
            return;
        }
        let cpu = &self.cpus[ci];
        let until = if cpu.seized { cpu.seized_until } else { self.now } + d;
        if !cpu.seized {
            self.reshare(ci, |cpu| cpu.seize(true));
        }
        self.cpus[ci].seized_until = until;
        self.push(until, Ev::Seized(c));
    }

    /// A seizure of CPU `c` may end now (`Ev::Seized`): it does unless it was extended.
    pub(super) fn seize_end(&mut self, c: CpuId) {
        let cpu = &self.cpus[c.idx()];
        if cpu.seized && cpu.seized_until == self.now {
            self.reshare(c.idx(), |cpu| cpu.seize(false));
        }
    }

    /// Put `changes` in force in order; in the agent's body each is in force before the next
    /// (what it causes runs at once: see the module doc).
    fn apply_changes(&mut self, changes: &[AffinityChange]) {
        let one_by_one = self.gate.is_some();
        for ch in changes {
            self.placer_changes += 1;
            self.views[ch.task.idx()].affinity = ch.mask;
            self.disp.affinity_changed(&view!(self), ch.task, &mut self.fx);
            self.flush_fx();
            if one_by_one {
                self.drain();
            }
        }
    }

    /// CPU `c` just went idle (`set_curr`): in the agent's body, plan the reaction when `c` is
    /// fast, the switch is not the agent's own doing, and some live task is kept from a fast
    /// CPU it may use (the agent's events are armed).
    pub(super) fn cpu_went_idle(&mut self, c: CpuId) {
        let Some(g) = self.gate.as_deref_mut() else { return };
        if !self.topo.is_fast(c) || self.now <= g.applied_at {
            return;
        }
        if let Some(p) = g.pending.as_mut() {
            *p = (c, self.now);
            return;
        }
        let fast = fast_set(&self.topo);
        let armed = self.tasks.iter().enumerate().any(|(i, t)| {
            !t.idle_vcpu && t.st != St::Done && kept_from_fast(&fast, &self.views[i].affinity, &self.own[i])
        });
        if armed {
            g.pending = Some((c, self.now));
            let at = self.now + g.reaction;
            self.push(at, Ev::React(c));
        }
    }

    /// The agent's reaction to an idle fast CPU is due (`Ev::React`; the CPU reacted to is
    /// the last that went idle since it was planned).
    pub(super) fn react(&mut self) {
        let Some(g) = self.gate.as_deref_mut() else { return };
        let Some((cpu, at)) = g.pending.take() else { return };
        if at <= g.applied_at {
            return;
        }
        g.applied_at = self.now;
        let (mut threads, mut changes) = (std::mem::take(&mut g.threads), std::mem::take(&mut g.changes));
        threads.clear();
        threads.extend(self.tasks.iter().enumerate().filter(|(_, t)| !t.idle_vcpu && t.st != St::Done).map(
            |(i, t)| {
                let (cur, allowed) = (self.views[i].affinity, self.own[i]);
                let runnable = cur != allowed && !cur.contains(cpu) && matches!(t.st, St::Runnable | St::Running(_));
                Confined { task: TaskId(i as u32), cur, allowed, runnable }
            },
        ));
        changes.clear();
        on_idle_fast_cpu(cpu, &threads, &mut changes);
        self.apply_changes(&changes);
        if let Some(g) = self.gate.as_deref_mut() {
            (g.threads, g.changes) = (threads, changes);
        }
    }
}

/// The agent's body on the simulator's side: `placer`'s decision on `snap`
/// ([`placer_decision`]) through the agent's gate and back-off (`body`,
/// `ampsched_policy::gate::body::Body::period`): the changes the agent puts in force this
/// period, in its order. `scratch` holds the raw changes.
pub fn agent_decision(
    placer: &mut dyn Placer,
    body: &mut Body,
    topo: &Topology,
    snap: &Snapshot,
    scratch: &mut Vec<AffinityChange>,
    out: &mut Vec<AffinityChange>,
) {
    let mut decided = Vec::new();
    placer_bridge::decide(placer, topo, snap, scratch, &mut decided);
    body.period(topo, snap, &decided, None, out);
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

#[cfg(test)]
mod tests {
    use crate::engine::{Sim, SimConfig, Stop, TaskInit};
    use ampsched_model::spec::{CoschedType, ParamValue, Params, PriorityClass};
    use ampsched_model::{CpuSet, DomainId, Nanos, Op, Program, Topology};
    use ampsched_policy::registry::{dispatcher_by_name, placer_by_name};
    use ampsched_policy::DomainView;
    use std::sync::Arc;

    /// One task computing `ms` alone on 4 equal CPUs (allowed only CPU 0), under `fair` and
    /// the capability balancer every `interval_ms` with passes of `pass_us`; its completion, ns.
    fn alone_on_cpu0(ms: u64, interval_ms: u64, pass_us: u64) -> u64 {
        let topo = Topology::fast_slow(0, 1.0, 4, 1.0, 4);
        let mut params = Params::new();
        params.insert("interval_ms".into(), ParamValue::Int(interval_ms as i64));
        params.insert("pass_us".into(), ParamValue::Int(pass_us as i64));
        let program =
            Program { ops: vec![Op::Compute { work: Nanos::from_ms(ms), mem: 0.0, ws_kb: 0, overlap: 0.0 }, Op::End] };
        let task = TaskInit {
            domain: DomainId(0),
            vcpu: 0,
            program: Arc::new(program),
            affinity: CpuSet::single(ampsched_model::CpuId(0)),
            group: 0,
            rank: 0,
            name: None,
            background: false,
        };
        let domain = DomainView {
            name: "app".into(),
            weight: 256,
            cap: 0,
            priority: PriorityClass::default(),
            fast_vcpus: None,
            cosched: CoschedType::default(),
            tasks: vec![ampsched_model::TaskId(0)],
        };
        let r = Sim::new(SimConfig {
            name: "own-cost".into(),
            dispatcher: dispatcher_by_name("fair", &Params::new(), &topo).unwrap(),
            placer: Some(placer_by_name("capability", &params, &topo).unwrap()),
            topo,
            domains: vec![domain],
            tasks: vec![task],
            agent: None,
            seed: 1,
            stop: Stop::AllDone { max: Nanos::from_secs(10) },
            stats_interval: Nanos::ZERO,
            wake_latency: false,
            events: Vec::new(),
        })
        .run();
        r.tasks[0].completion_ns.expect("done")
    }

    #[test]
    fn a_pass_preempts_the_task_on_every_cpu_each_interval() {
        // 4 CPUs, a 10 ms interval, passes of 8 µs (capability's default), one
        // task computing 1 s on CPU 0. Rounds at 10, 20, …: the one at 10 ms
        // is the launch round (no pass); the passes at 20 … 1000 ms (99 of
        // them) each hold CPU 0 for 8 µs, so the task ends at 1 s + 792 µs
        // (the pass at 1000 ms falls inside the 792 µs of lateness; the next,
        // at 1010 ms, after the end). Nothing is swapped (one task), so no
        // affinity change is charged. Free passes: exactly 1 s.
        assert_eq!(alone_on_cpu0(1000, 10, 0), 1_000_000_000);
        assert_eq!(alone_on_cpu0(1000, 10, 8), 1_000_000_000 + 99 * 8_000);
        // At the paper's 1 s interval no pass falls inside the run: the
        // round at 1 s is the launch round.
        assert_eq!(alone_on_cpu0(1000, 1000, 8), 1_000_000_000);
    }
}
