//! One period of the Linux agent's body around a placer: from the placer's
//! effective masks to the changes put in force, in the order the agent's
//! control loop applies its parts (crates/ampsched-agent/src/control.rs,
//! `Agent::step`), so the agent and the simulator's placer body
//! (crates/ampsched-sim/src/engine/place.rs, a scenario's `[agent]`) run the
//! same code:
//! 1. [`cooperate`](super::cooperate::cooperate): the placer's masks while
//!    more runnable managed threads want the fast CPUs than there are and no
//!    fast CPU idled for a real part of the period; otherwise every narrowed
//!    thread gets its own mask back, a heavy runnable one kept on the slow
//!    CPUs moved onto a free fast CPU first
//!    ([`move_released`](super::cooperate::move_released): widening alone
//!    does not move a running thread);
//! 2. when contended, [`free_light`](super::cooperate::free_light): threads
//!    that ran less than `period / LIGHT_DIV` are left to the kernel (not
//!    narrowed; given their own mask back), then
//!    [`spread_stacked`](super::cooperate::spread_stacked):
//!    runnable threads stacked on one CPU while a CPU of theirs is in no
//!    runnable thread's mask are spread;
//! 3. the back-off ([`super::backoff`]), when on: the period is marked
//!    saturated or not and accounted to each group's mode, verdicts are taken, and the groups hands-off now get
//!    their narrowed threads widened and the placer's changes dropped;
//! 4. [`order_changes`](super::cooperate::order_changes): changes that give
//!    a fast CPU first, those that may land a thread on the agent's CPU last.
//!
//! The reaction to an idle fast CPU between periods is
//! [`on_idle_fast_cpu`](super::cooperate::on_idle_fast_cpu); each body
//! decides when it is due (the agent from `sched_switch` events, the
//! simulator from its CPU switches).

use super::backoff::{group_work, hands_off_filter, saturated, Backoff, BackoffParams, Transition};
use super::cooperate::{cooperate, free_light, move_released, order_changes, spread_stacked, Load};
use crate::{AffinityChange, Snapshot};
use ampsched_model::{CpuId, Topology};

/// The agent's body: its back-off state and buffers, kept across periods.
#[derive(Clone, Debug)]
pub struct Body {
    backoff: Option<Backoff>,
    gwork: Vec<f64>,
    gactive: Vec<bool>,
    transitions: Vec<Transition>,
}

/// What one period did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Period {
    /// The fast CPUs were contended: the placer's masks were put in force.
    pub contended: bool,
    /// Threads given their own mask back by the spreading of stacked pins.
    pub spread: usize,
    /// Light threads kept from a narrowing or given their own mask back (`free_light`).
    pub light: usize,
    /// Threads moved onto a fast CPU as contention ended, before their widening
    /// (`move_released`).
    pub released: usize,
}

impl Body {
    /// A body with the back-off (`Some(params)`) or without; every group managed.
    pub fn new(backoff: Option<BackoffParams>) -> Body {
        Body { backoff: backoff.map(Backoff::new), gwork: Vec::new(), gactive: Vec::new(), transitions: Vec::new() }
    }

    /// The back-off's state, when it runs.
    pub fn backoff(&self) -> Option<&Backoff> {
        self.backoff.as_ref()
    }

    /// The back-off's verdicts of the last period (groups that changed mode).
    pub fn transitions(&self) -> &[Transition] {
        &self.transitions
    }

    /// The changes to put in force at the end of `snap`'s period, in order, given the
    /// placer's effective masks `decided` (`placer_bridge::decide`); `agent_cpu` is the CPU
    /// the agent runs on, if known. See the module doc for the steps.
    pub fn period(
        &mut self,
        topo: &Topology,
        snap: &Snapshot,
        decided: &[AffinityChange],
        agent_cpu: Option<CpuId>,
        out: &mut Vec<AffinityChange>,
    ) -> Period {
        let load = Load::from_snapshot(topo, snap);
        let contended = cooperate(&load, &snap.tasks, decided, out);
        let light = if contended { free_light(&snap.tasks, snap.period, out) } else { 0 };
        let spread = if contended { spread_stacked(&snap.tasks, out) } else { 0 };
        let released = if contended { 0 } else { move_released(topo, snap, out) };
        self.transitions.clear();
        if let Some(b) = self.backoff.as_mut() {
            group_work(topo, snap, &mut self.gwork, &mut self.gactive);
            b.set_saturated(saturated(snap));
            self.transitions = b.end_period(snap.period.0, &self.gwork, &self.gactive);
            hands_off_filter(&snap.tasks, &|g| b.hands_off(g), out);
        }
        order_changes(topo, agent_cpu, out);
        Period { contended, spread, light, released }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TaskSample, TaskState};
    use ampsched_model::TaskId;

    use crate::gate::fixtures::{self, ids};

    fn task(id: u32, state: TaskState, affinity: &[u32]) -> TaskSample {
        fixtures::task(id, state, affinity, 15)
    }

    /// The development machine: CPU 0 fast, CPU 1 slow (the hog's); a 30 ms period with
    /// CPU 0 idle `idle0_ms` of it.
    fn snap(tasks: Vec<TaskSample>, idle0_ms: u64) -> (Topology, Snapshot) {
        fixtures::snap(Topology::fast_slow(1, 1.0, 1, 0.5, 2), tasks, idle0_ms)
    }

    fn list(out: &[AffinityChange]) -> Vec<(u32, String)> {
        out.iter().map(|c| (c.task.0, c.mask.to_list())).collect()
    }

    #[test]
    fn contended_the_placers_masks_go_in_fast_first_else_everyone_gets_its_own_mask_back() {
        // AASH's rotation on two spinning threads: thread 0 (on CPU 0) to slow {1}, thread 1
        // (on CPU 1) to fast {0}. Both runnable, CPU 0 never idle: 2 contenders > 1 fast CPU,
        // contended; the change giving the fast CPU goes first (thread 1, then thread 0), so
        // a stack, if the agent is held up between the calls, forms on the fast CPU.
        let decided =
            [AffinityChange { task: TaskId(0), mask: ids(&[1]) }, AffinityChange { task: TaskId(1), mask: ids(&[0]) }];
        let both = || vec![task(0, TaskState::Runnable, &[0]), task(1, TaskState::Runnable, &[1])];
        let mut body = Body::new(None);
        let mut out = Vec::new();
        let (topo, s) = snap(both(), 0);
        assert_eq!(
            body.period(&topo, &s, &decided, None, &mut out),
            Period { contended: true, spread: 0, light: 0, released: 0 }
        );
        assert_eq!(list(&out), vec![(1, "0".into()), (0, "1".into())]);
        // CPU 0 idled 5 ms (≥ 30 / 8): not contended; both get {0,1} back, the rotation waits.
        let (topo, s) = snap(both(), 5);
        assert_eq!(
            body.period(&topo, &s, &decided, None, &mut out),
            Period { contended: false, spread: 0, light: 0, released: 0 }
        );
        assert_eq!(list(&out), vec![(0, "0-1".into()), (1, "0-1".into())]);
        // Thread 0 blocked at a barrier, thread 1 runnable on slow {1}: 1 contender, not
        // contended; thread 1 is moved onto free CPU 0 ({0}) before both get {0,1} back.
        let (topo, s) = snap(vec![task(0, TaskState::Blocked, &[0]), task(1, TaskState::Runnable, &[1])], 0);
        assert_eq!(
            body.period(&topo, &s, &decided, None, &mut out),
            Period { contended: false, spread: 0, light: 0, released: 1 }
        );
        assert_eq!(list(&out), vec![(1, "0".into()), (0, "0-1".into()), (1, "0-1".into())]);
        assert!(body.backoff().is_none() && body.transitions().is_empty());
    }

    #[test]
    fn in_a_probe_window_the_back_off_drops_the_placers_changes_and_widens() {
        // Back-off with a 2-period policy window and a 1-period probe, nothing left unmeasured;
        // two runnable threads, thread 0 narrowed to {0}, thread 1 free ({0,1}), CPU 0 busy:
        // contended every period, and the placer asks thread 0 → {1} each time.
        let p = BackoffParams {
            managed_periods: 2,
            probe_periods: 1,
            settle_periods: 0,
            max_stretch: 0,
            keep: 3,
            min_windows: 2,
            margin: 0.1,
        };
        let mut body = Body::new(Some(p));
        let decided = [AffinityChange { task: TaskId(0), mask: ids(&[1]) }];
        let mut out = Vec::new();
        let mut got = Vec::new();
        for _ in 0..3 {
            let (topo, s) = snap(vec![task(0, TaskState::Runnable, &[0]), task(1, TaskState::Runnable, &[0, 1])], 0);
            assert!(body.period(&topo, &s, &decided, None, &mut out).contended);
            got.push(list(&out));
        }
        // The accounting of a period decides the window of what it puts in force: period 1
        // ends inside the policy window (managed: the change goes in); period 2 ends it, so
        // its changes are the probe's (hands-off: dropped, the narrowed thread 0 widened);
        // period 3 ends the 1-period probe and is managed again.
        assert_eq!(got[0], vec![(0, "1".into())]);
        assert_eq!(got[1], vec![(0, "0-1".into())]);
        assert_eq!(got[2], vec![(0, "1".into())]);
    }
}
