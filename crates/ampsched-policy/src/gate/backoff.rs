//! Do no harm, by measurement (issue 15 D3): the agent measures each
//! managed group's progress under its own placement and under the kernel's
//! alone, and leaves a group to the kernel where its placement does worse.
//!
//! Why measure: [`super::cooperate`] keeps the agent's masks out of the way
//! whenever nobody contends for the fast CPUs, but under contention the
//! placer's rule is put in force on the belief that it helps. On a
//! program whose phases are shorter than the period that belief can be
//! wrong (issue 15's phased program lost 4-43 % to default Linux), and the
//! only judge that needs no model of the program is its own progress.
//!
//! What is measured: a group's *progress* in a period is the run time its
//! threads gained, each CPU class's share weighted by the class speed (the
//! placer's own unit of work, `Topology` speed: run time on a half-speed
//! CPU does half the work), per wall time. Spin-waiting counts as run time,
//! so a program that spins is judged by CPU time, not by its own work;
//! then both modes measure alike and the verdict is a tie (see below).
//!
//! How (the method of A/B windows interleaved in time, as an experiment
//! with a drifting background is run: both arms sampled alternately so the
//! drift hits both alike):
//! - one global cycle for all groups: a *policy* window of
//!   `managed_periods` periods (stretched ×2, ×4, … up to
//!   `2^max_stretch` while verdicts hold, plus a small deterministic jitter
//!   so a program's own period cannot lock onto the cycle), then a *probe*
//!   window of `probe_periods`;
//! - a managed group is managed in the policy window and hands-off (every
//!   narrowed thread gets its own mask back, the placer's changes dropped)
//!   in the probe window; a backed-off group the other way round, so it is
//!   still measured under the agent, for a short window only;
//! - the first `settle_periods` of each window are not measured (the
//!   kernel's balancer needs a moment after masks change);
//! - a window counts for a group when the group was active in at least
//!   half its measured periods; the last `keep` windows of each mode are
//!   remembered, with the progress of all groups together in the same
//!   windows;
//! - verdict after each probe window, once `min_windows` of each mode are
//!   known: **harm** = the median managed progress is below the median
//!   hands-off progress by more than `margin`, *and* so is the progress of
//!   all groups together. The second condition keeps the placer's sharing
//!   rule: equal fast time takes from one group what it gives another
//!   (two identical processes: one loses, the other gains, the total
//!   holds), which is the point of the placer, not harm;
//! - a managed group with harm backs off; a backed-off group comes back
//!   when harm no longer holds at half the margin (hysteresis: the same
//!   figures never flip a group twice).
//!
//! Cost: a managed group is hands-off `probe_periods` out of every cycle —
//! 3 of 23 periods at first, 3 of 163 once verdicts have held three times.
//!
//! Probes only where the measure can tell the modes apart: a period is
//! *saturated* when no CPU idled (less than `period / IDLE_DIV`, as
//! [`super::cooperate`] counts an idle CPU) and every CPU has a runnable
//! managed thread on it at the end ([`saturated`]). Then every CPU ran
//! managed work (or foreign load, which no placement of ours moves) the
//! whole period, so the managed threads' run time is all the machine had to
//! give them, whoever ran where: a hands-off window cannot measure more
//! (harm, as defined above, cannot show), and the per-group split that a
//! probe could show is the placer's sharing rule, which is not harm either.
//! A policy window whose measured periods were all saturated is therefore
//! followed by another policy window, not by a probe. Why: a program whose
//! threads never block (a spin-waiting barrier, two CPU-bound processes)
//! measures a tie by construction, yet each probe left it to the kernel
//! for 3 periods — on the spinning barrier of issue 15, where the agent
//! gains 20 %, about 11 % of a 1.6 s run was probes (2 of them, and no
//! verdict ever taken). Programs that block (the phased program, a
//! barrier that sleeps) leave a CPU idle and are probed as before.
//!
//! The logic here is pure (figures in, modes and verdicts out), tested on
//! worked examples; the control loop feeds it each period's snapshot.

use super::cooperate::IDLE_DIV;
use crate::{AffinityChange, Snapshot, TaskSample};
use ampsched_model::Topology;
use std::collections::VecDeque;

/// Parameters of the measurement (defaults: see [`BackoffParams::default`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackoffParams {
    /// Base length of the policy window, periods.
    pub managed_periods: u32,
    /// Length of the probe window, periods.
    pub probe_periods: u32,
    /// Periods at the start of each window left unmeasured.
    pub settle_periods: u32,
    /// The policy window stretches up to `managed_periods << max_stretch` while verdicts hold.
    pub max_stretch: u32,
    /// Windows of each mode remembered.
    pub keep: usize,
    /// Windows of each mode needed before a verdict.
    pub min_windows: usize,
    /// Relative loss that counts as harm.
    pub margin: f64,
}

impl Default for BackoffParams {
    /// 20-period policy windows (600 ms at 30 ms), 3-period probes (1 settling), up to ×8,
    /// the last 6 windows of each mode, a verdict from 4, 10 % margin. (With a verdict from
    /// 3 at 5 %, a spinning barrier — where the agent helps — backed off at 2.2 s at load 25:
    /// 2-period probes at that load vary by more than 5 %.)
    fn default() -> Self {
        BackoffParams {
            managed_periods: 20,
            probe_periods: 3,
            settle_periods: 1,
            max_stretch: 3,
            keep: 6,
            min_windows: 4,
            margin: 0.10,
        }
    }
}

/// Where the global cycle is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// The long window: managed groups are managed.
    Policy,
    /// The short window: managed groups are left to the kernel.
    Probe,
}

/// One group's measurement.
#[derive(Clone, Debug, Default)]
struct Group {
    backed_off: bool,
    backoffs: u64,
    work: f64,
    busy: u32,
    managed: VecDeque<(f64, f64)>,
    hands: VecDeque<(f64, f64)>,
    ratio: Option<f64>,
}

/// A group changed mode at a verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transition {
    /// The group (domain index).
    pub group: usize,
    /// Backed off now (false: managed again).
    pub backed_off: bool,
    /// Median progress managed, work-ns per ns.
    pub managed: f64,
    /// Median progress hands-off, work-ns per ns.
    pub hands_off: f64,
}

/// The back-off state of all groups.
#[derive(Clone, Debug)]
pub struct Backoff {
    p: BackoffParams,
    window: Window,
    /// Periods of the current window done.
    done: u32,
    /// Its length.
    len: u32,
    stretch: u32,
    cycles: u64,
    wall: u64,
    measured: u32,
    total: f64,
    /// The period being accounted was saturated ([`Backoff::set_saturated`]).
    saturated: bool,
    /// Measured periods of the current window that were not saturated.
    unsaturated: u32,
    /// Probes skipped because their policy window was saturated.
    skipped: u64,
    groups: Vec<Group>,
}

fn median(v: impl Iterator<Item = f64>) -> f64 {
    let mut s: Vec<f64> = v.collect();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

impl Backoff {
    /// Start in a policy window, every group managed.
    pub fn new(p: BackoffParams) -> Backoff {
        Backoff {
            p,
            window: Window::Policy,
            done: 0,
            len: p.managed_periods.max(1),
            stretch: 0,
            cycles: 0,
            wall: 0,
            measured: 0,
            total: 0.0,
            saturated: false,
            unsaturated: 0,
            skipped: 0,
            groups: Vec::new(),
        }
    }

    /// Mark the period about to be accounted by [`Backoff::end_period`] as saturated (see
    /// [`saturated`] and the module doc); a period not marked is not.
    pub fn set_saturated(&mut self, saturated: bool) {
        self.saturated = saturated;
    }

    /// Probes skipped so far because the policy window before them was saturated.
    pub fn skipped_probes(&self) -> u64 {
        self.skipped
    }

    /// The window in force.
    pub fn window(&self) -> Window {
        self.window
    }

    /// Group `g` is left to the kernel in the window in force.
    pub fn hands_off(&self, g: usize) -> bool {
        let backed = self.groups.get(g).is_some_and(|x| x.backed_off);
        (self.window == Window::Probe) != backed
    }

    /// Group `g` is backed off (left to the kernel but for short probes).
    pub fn backed_off(&self, g: usize) -> bool {
        self.groups.get(g).is_some_and(|x| x.backed_off)
    }

    /// Times group `g` backed off.
    pub fn backoffs(&self, g: usize) -> u64 {
        self.groups.get(g).map_or(0, |x| x.backoffs)
    }

    /// Group `g`'s last median progress managed ÷ hands-off, once known.
    pub fn ratio(&self, g: usize) -> Option<f64> {
        self.groups.get(g).and_then(|x| x.ratio)
    }

    /// Account the period that just ended (`wall_ns` long; `work[g]` = group g's weighted run
    /// time in it, `active[g]` = it had an active thread) to the modes that were in force,
    /// then move the cycle on. Returns the transitions of a verdict, if one was due.
    pub fn end_period(&mut self, wall_ns: u64, work: &[f64], active: &[bool]) -> Vec<Transition> {
        if self.groups.len() < work.len() {
            self.groups.resize(work.len(), Group::default());
        }
        let saturated = std::mem::take(&mut self.saturated);
        if self.done >= self.p.settle_periods && wall_ns > 0 {
            self.wall += wall_ns;
            self.measured += 1;
            self.unsaturated += u32::from(!saturated);
            for (g, grp) in self.groups.iter_mut().enumerate() {
                let w = work.get(g).copied().unwrap_or(0.0);
                grp.work += w;
                self.total += w;
                grp.busy += u32::from(active.get(g).copied().unwrap_or(false));
            }
        }
        self.done += 1;
        if self.done < self.len {
            return Vec::new();
        }
        let blind = self.window == Window::Policy && self.measured > 0 && self.unsaturated == 0;
        self.close_window();
        match self.window {
            Window::Policy if blind => {
                // Nothing a probe could tell (module doc): the next policy window instead.
                self.skipped += 1;
                self.cycles += 1;
                let jitter = ((self.cycles * 7) % 5) as u32;
                self.len = (self.p.managed_periods.max(1) << self.stretch) + jitter;
                Vec::new()
            }
            Window::Policy => {
                self.window = Window::Probe;
                self.len = self.p.probe_periods.max(1);
                Vec::new()
            }
            Window::Probe => {
                let (t, judged) = self.verdict();
                // Longer policy windows only once a verdict was taken and held.
                self.stretch = match (judged, t.is_empty()) {
                    (true, true) => (self.stretch + 1).min(self.p.max_stretch),
                    (_, false) => 0,
                    (false, true) => self.stretch,
                };
                self.cycles += 1;
                self.window = Window::Policy;
                // Jitter of 0-4 periods (a fixed sequence), so a program's own period does not
                // keep landing its same phase in the probe.
                let jitter = ((self.cycles * 7) % 5) as u32;
                self.len = (self.p.managed_periods.max(1) << self.stretch) + jitter;
                t
            }
        }
    }

    /// End the current window: each busy group's progress goes to the mode it was in.
    fn close_window(&mut self) {
        let (wall, measured, total) = (self.wall as f64, self.measured, self.total);
        let probe = self.window == Window::Probe;
        for grp in &mut self.groups {
            if measured > 0 && wall > 0.0 && 2 * grp.busy >= measured && grp.busy > 0 {
                let s = (grp.work / wall, total / wall);
                let ring = if probe != grp.backed_off { &mut grp.hands } else { &mut grp.managed };
                ring.push_back(s);
                while ring.len() > self.p.keep {
                    ring.pop_front();
                }
            }
            grp.work = 0.0;
            grp.busy = 0;
        }
        self.wall = 0;
        self.measured = 0;
        self.unsaturated = 0;
        self.total = 0.0;
        self.done = 0;
    }

    /// After a probe: harm (see the module doc) backs a group off; its absence at half the
    /// margin brings a backed-off group back. Also returns whether any group was judged.
    fn verdict(&mut self) -> (Vec<Transition>, bool) {
        let mut out = Vec::new();
        let mut judged = false;
        for (g, grp) in self.groups.iter_mut().enumerate() {
            if grp.managed.len() < self.p.min_windows || grp.hands.len() < self.p.min_windows {
                continue;
            }
            judged = true;
            let m = median(grp.managed.iter().map(|s| s.0));
            let h = median(grp.hands.iter().map(|s| s.0));
            let mt = median(grp.managed.iter().map(|s| s.1));
            let ht = median(grp.hands.iter().map(|s| s.1));
            grp.ratio = (h > 0.0).then(|| m / h);
            let worse = |margin: f64| m < h * (1.0 - margin) && mt < ht * (1.0 - margin);
            let flip = if grp.backed_off { !worse(self.p.margin / 2.0) } else { worse(self.p.margin) };
            if flip {
                grp.backed_off = !grp.backed_off;
                grp.backoffs += u64::from(grp.backed_off);
                out.push(Transition { group: g, backed_off: grp.backed_off, managed: m, hands_off: h });
            }
        }
        (out, judged)
    }
}

/// Whether the snapshot's period was saturated (module doc): no CPU idle for
/// `period / IDLE_DIV` or more, and at its end every CPU has a runnable managed thread on it.
pub fn saturated(snap: &Snapshot) -> bool {
    let min_idle = snap.period.0 / IDLE_DIV;
    !snap.cpus.is_empty()
        && snap
            .cpus
            .iter()
            .all(|c| c.idle.0 < min_idle.max(1) && snap.tasks.iter().any(|t| t.runnable() && t.cpu == Some(c.id)))
}

/// Per group (domain index), its weighted run time in the snapshot's period and whether it
/// had an active thread.
pub fn group_work(topo: &Topology, snap: &Snapshot, work: &mut Vec<f64>, active: &mut Vec<bool>) {
    work.clear();
    active.clear();
    for t in &snap.tasks {
        let g = t.domain.idx();
        if work.len() <= g {
            work.resize(g + 1, 0.0);
            active.resize(g + 1, false);
        }
        work[g] += t.run_by_class.iter().zip(&topo.classes).map(|(r, c)| r.0 as f64 * c.speed).sum::<f64>();
        active[g] |= t.active;
    }
}

/// Leave hands-off groups to the kernel: drop `changes` for their tasks and widen each of
/// their narrowed live tasks back to its own mask (once).
pub fn hands_off_filter(tasks: &[TaskSample], hands_off: &dyn Fn(usize) -> bool, changes: &mut Vec<AffinityChange>) {
    let off = |id: ampsched_model::TaskId| tasks.iter().find(|t| t.id == id).is_some_and(|t| hands_off(t.domain.idx()));
    changes.retain(|c| !off(c.task));
    for t in tasks.iter().filter(|t| hands_off(t.domain.idx()) && !t.done() && t.affinity != t.allowed) {
        changes.push(AffinityChange { task: t.id, mask: t.allowed });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CpuSample, TaskState};
    use ampsched_model::{CpuId, CpuSet, DomainId, Nanos, TaskId};

    /// Small windows for the examples: policy 4 periods, probe 2, 1 settling, no stretch
    /// beyond ×2, 3 windows kept, verdict from 2.
    fn p() -> BackoffParams {
        BackoffParams {
            managed_periods: 4,
            probe_periods: 2,
            settle_periods: 1,
            max_stretch: 1,
            keep: 3,
            min_windows: 2,
            margin: 0.05,
        }
    }

    /// Run periods of 30 ms with per-group progress `rate(g, hands_off)` (work-ns per ns) until
    /// `periods` have passed; returns every transition with the period it came at.
    fn drive(
        b: &mut Backoff,
        groups: usize,
        periods: u32,
        rate: &dyn Fn(usize, bool) -> f64,
    ) -> Vec<(u32, Transition)> {
        let mut out = Vec::new();
        for k in 0..periods {
            let work: Vec<f64> = (0..groups).map(|g| rate(g, b.hands_off(g)) * 30e6).collect();
            for t in b.end_period(30_000_000, &work, &vec![true; groups]) {
                out.push((k, t));
            }
        }
        out
    }

    #[test]
    fn the_cycle_alternates_policy_and_probe_windows_and_stretches_while_verdicts_hold() {
        let mut b = Backoff::new(p());
        let mut seq = String::new();
        for _ in 0..30 {
            seq.push(if b.hands_off(0) { 'h' } else { 'm' });
            b.end_period(30_000_000, &[1.0], &[true]);
        }
        // Policy 4, probe 2; no verdict possible after the first probe (1 window each): no
        // stretch, 4 + jitter (1 × 7) % 5 = 2 → 6; probe 2, a verdict (a tie: nothing flips),
        // so ×2: 8 + (2 × 7) % 5 = 4 → 12; probe 2; stretch stays at the ×2 cap.
        assert_eq!(seq, format!("{}hh{}hh{}hh{}", "m".repeat(4), "m".repeat(6), "m".repeat(12), "m".repeat(2)));
    }

    #[test]
    fn a_group_that_does_worse_managed_backs_off_and_comes_back_when_it_no_longer_does() {
        // One group (the phased program): progress 0.9 managed against 1.2 hands-off, 25 % worse.
        // Windows: m(4) h(2) m(6) h(2): after the second probe both modes have 2 windows and
        // the medians are 0.9 and 1.2: harm (0.9 < 1.2 × 0.95, and the total is the same group),
        // so it backs off at the end of that probe (period index 13).
        let mut b = Backoff::new(p());
        let t = drive(&mut b, 1, 14, &|_, off| if off { 1.2 } else { 0.9 });
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].0, 13);
        assert_eq!(t[0].1, Transition { group: 0, backed_off: true, managed: 0.9, hands_off: 1.2 });
        assert!(b.backed_off(0) && b.backoffs(0) == 1);
        assert!((b.ratio(0).unwrap() - 0.75).abs() < 1e-12);
        // Backed off: left to the kernel in the long window, managed only in the short probe.
        assert!(b.hands_off(0));
        let mut seq = String::new();
        for _ in 0..6 {
            seq.push(if b.hands_off(0) { 'h' } else { 'm' });
            b.end_period(30_000_000, &[1.2e6 * 30.0], &[true]);
        }
        assert_eq!(seq, "hhhhhh");
        // The program changes: now the agent's placement does better (1.5 managed vs 1.2). The
        // managed ring (keep 3) fills with 1.5s; once its median passes 1.2 × (1 − 0.025) the
        // group is managed again.
        let t = drive(&mut b, 1, 80, &|_, off| if off { 1.2 } else { 1.5 });
        assert_eq!(t.len(), 1, "{t:?}");
        assert!(!t[0].1.backed_off && !b.backed_off(0));
        assert_eq!(b.backoffs(0), 1);
    }

    #[test]
    fn equal_sharing_between_two_groups_is_not_harm() {
        // Two identical CPU-bound processes, one fast CPU: managed, the placer shares the fast
        // CPU equally, so group 0 falls from 1.0 to 0.8 and group 1 rises from 0.6 to 0.8: the
        // total (1.6) holds. Group 0 loses, but nobody's loss is the whole's: no back-off.
        let mut b = Backoff::new(p());
        let t = drive(&mut b, 2, 120, &|g, off| match (g, off) {
            (0, true) => 1.0,
            (1, true) => 0.6,
            _ => 0.8,
        });
        assert!(t.is_empty(), "{t:?}");
        assert!((b.ratio(0).unwrap() - 0.8).abs() < 1e-12);
        assert!(!b.backed_off(0) && !b.backed_off(1));
    }

    #[test]
    fn a_spinning_program_measures_alike_in_both_modes_and_stays_managed() {
        // Spin-waiting counts as run time: both threads always run, progress 1.5 in both modes
        // (± 2 % noise): a tie, never harm.
        let mut b = Backoff::new(p());
        let t = drive(&mut b, 1, 200, &|_, off| if off { 1.5 * 1.02 } else { 1.5 * 0.98 });
        assert!(t.is_empty());
        assert!(!b.backed_off(0));
    }

    #[test]
    fn settling_periods_and_idle_windows_are_not_measured() {
        // The first period of each window (the kernel rebalancing after a mask change) is not
        // measured: a huge figure there changes nothing. A window where the group was active in
        // fewer than half its measured periods is not counted: group 1 is active only in the
        // third period of a window (1 of ≥ 3 measured in a policy window; probes are shorter).
        let mut b = Backoff::new(p());
        for _ in 0..40u32 {
            let first = b.done == 0;
            let third = b.done == 2;
            let off = b.hands_off(0);
            let w = if first {
                1e12
            } else if off {
                1.2e6 * 30.0
            } else {
                0.9e6 * 30.0
            };
            let t = b.end_period(30_000_000, &[w, 1e6], &[true, third]);
            if let Some(x) = t.first() {
                assert_eq!((x.group, x.backed_off), (0, true));
            }
        }
        assert!(b.backed_off(0) && b.ratio(0).is_some_and(|r| (r - 0.75).abs() < 1e-12));
        assert!(b.groups[1].managed.is_empty() && b.groups[1].hands.is_empty() && !b.backed_off(1));
    }

    #[test]
    fn a_saturated_policy_window_is_followed_by_another_not_by_a_probe() {
        // The spinning barrier: every period saturated (both CPUs busy with its threads). Policy
        // 4 (1 settling, 3 measured, all saturated) → no probe: policy again, 4 + jitter
        // (1 × 7) % 5 = 2 → 6, then 8, 5, 7, 4, 6 (windows end at periods 4, 10, 18, 23, 30,
        // 34, 40): 7 probes skipped in 40 periods, never hands-off, nothing judged.
        let mut b = Backoff::new(p());
        let mut seq = String::new();
        for _ in 0..40 {
            seq.push(if b.hands_off(0) { 'h' } else { 'm' });
            b.set_saturated(true);
            b.end_period(30_000_000, &[1.5e6 * 30.0], &[true]);
        }
        assert_eq!(seq, "m".repeat(40));
        assert_eq!((b.skipped_probes(), b.ratio(0)), (7, None));
        // One measured period not saturated (a CPU idled) in a window: that window gets its
        // probe. The settling period does not count: an idle there changes nothing.
        let mut b = Backoff::new(p());
        let mut seq = String::new();
        for k in 0..12u32 {
            seq.push(if b.hands_off(0) { 'h' } else { 'm' });
            b.set_saturated(k != 0 && k != 6);
            b.end_period(30_000_000, &[1.5e6 * 30.0], &[true]);
        }
        // Window 1 (periods 0-3, period 0 settling): saturated → skipped; window 2 (4-9,
        // period 6 idle): probe at 10-11.
        assert_eq!(seq, "mmmmmmmmmmhh");
        assert_eq!(b.skipped_probes(), 1);
    }

    #[test]
    fn harm_still_backs_off_when_only_some_windows_are_saturated() {
        // The phased program blocks: its policy windows have idle periods (a CPU idles while the
        // serial thread runs), so they are probed; every third policy window happens to be
        // saturated (both threads busy; the second, fifth, …) and is not. Harm (0.9 managed vs 1.2 hands-off) is still
        // found and the group backs off: do no harm holds.
        let mut b = Backoff::new(p());
        let mut windows = 0u32;
        let mut out = Vec::new();
        for k in 0..120u32 {
            let off = b.hands_off(0);
            if b.done == 0 && !off {
                windows += 1;
            }
            b.set_saturated(windows % 3 == 2);
            let rate = if off { 1.2 } else { 0.9 };
            out.extend(b.end_period(30_000_000, &[rate * 30e6], &[true]).into_iter().map(|t| (k, t)));
            if b.backed_off(0) {
                break;
            }
        }
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].1.backed_off && b.backed_off(0));
        assert!(b.skipped_probes() >= 1);
    }

    #[test]
    fn a_period_is_saturated_when_no_cpu_idled_and_each_has_a_runnable_managed_thread() {
        // Two CPUs, 30 ms: idle below 30 / 8 = 3.75 ms counts as busy.
        let snap = |idle_ms: [u64; 2], on: &[(u32, Option<u32>, TaskState)]| Snapshot {
            now: Nanos::from_ms(30),
            period: Nanos::from_ms(30),
            cpus: (0..2)
                .map(|c| CpuSample {
                    id: CpuId(c),
                    busy: Nanos::from_ms(30 - idle_ms[c as usize]),
                    idle: Nanos::from_ms(idle_ms[c as usize]),
                    ..Default::default()
                })
                .collect(),
            tasks: on
                .iter()
                .map(|&(id, cpu, state)| {
                    let mut t = task(id, 0, &[0, 1], 10, 10);
                    t.cpu = cpu.map(CpuId);
                    t.state = state;
                    t
                })
                .collect(),
            domains: Vec::new(),
        };
        let (r, b) = (TaskState::Runnable, TaskState::Blocked);
        // Two spinners, one on each CPU, CPU 0 idle 3 ms: saturated.
        assert!(saturated(&snap([3, 0], &[(0, Some(0), r), (1, Some(1), r)])));
        // CPU 0 idle 4 ms (≥ 3.75): not.
        assert!(!saturated(&snap([4, 0], &[(0, Some(0), r), (1, Some(1), r)])));
        // Both on CPU 1 (CPU 0 busy with foreign load): CPU 0 has no managed thread: not.
        assert!(!saturated(&snap([0, 0], &[(0, Some(1), r), (1, Some(1), r)])));
        // The thread on CPU 0 blocked at the end: not.
        assert!(!saturated(&snap([0, 0], &[(0, Some(0), b), (1, Some(1), r)])));
    }

    fn task(id: u32, dom: u32, affinity: &[u32], run_fast: u64, run_slow: u64) -> TaskSample {
        TaskSample {
            id: TaskId(id),
            domain: DomainId(dom),
            vcpu: id,
            active: run_fast + run_slow > 0,
            state: TaskState::Runnable,
            run_by_class: vec![Nanos::from_ms(run_fast), Nanos::from_ms(run_slow)],
            cpu: None,
            allowed: CpuSet::from_cpus([CpuId(0), CpuId(1)]),
            affinity: CpuSet::from_cpus(affinity.iter().map(|c| CpuId(*c))),
            ws_kb: 0,
        }
    }

    #[test]
    fn progress_is_run_time_weighted_by_class_speed_and_hands_off_groups_are_widened() {
        // Fast class speed 2, slow 1: 10 ms fast + 20 ms slow = 40 work-ms for group 0; group 1
        // 30 ms slow = 30 work-ms.
        let topo = Topology::fast_slow(1, 2.0, 1, 1.0, 2);
        let tasks = vec![task(0, 0, &[0], 10, 20), task(1, 1, &[1], 0, 30), task(2, 1, &[0, 1], 0, 0)];
        let snap = Snapshot {
            now: Nanos::from_ms(30),
            period: Nanos::from_ms(30),
            cpus: vec![CpuSample::default(); 2],
            tasks: tasks.clone(),
            domains: Vec::new(),
        };
        let (mut w, mut a) = (Vec::new(), Vec::new());
        group_work(&topo, &snap, &mut w, &mut a);
        assert_eq!(w, vec![40e6, 30e6]);
        assert_eq!(a, vec![true, true]);
        // Group 1 hands-off: the placer's change for task 2 is dropped, task 1 (narrowed to
        // {1}) gets {0,1} back; group 0's change stays.
        let mut ch = vec![
            AffinityChange { task: TaskId(0), mask: CpuSet::single(CpuId(1)) },
            AffinityChange { task: TaskId(2), mask: CpuSet::single(CpuId(0)) },
        ];
        hands_off_filter(&tasks, &|g| g == 1, &mut ch);
        let got: Vec<(u32, String)> = ch.iter().map(|c| (c.task.0, c.mask.to_list())).collect();
        assert_eq!(got, vec![(0, "1".into()), (1, "0-1".into())]);
    }
}
