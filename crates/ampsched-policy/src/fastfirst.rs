//! `fast-first`: "fast cores never go idle before slow cores", the
//! asymmetry-aware kernel fix proposed by Balakrishnan et al., ISCA 2005
//! (docs/design/asymmetry-study.md, "The asymmetry-aware kernel scheduler fix"), as a
//! placer on top of an asymmetry-unaware dispatcher (`fair`).
//!
//! Design, every `interval_ms`:
//! - A CPU is *idle* when no runnable task is on it at the end of the period
//!   (from `TaskSample::state` and `TaskSample::cpu`).
//! - Release first: a task this placer pinned gets its previous affinity back
//!   when it is no longer runnable (it blocked or ended: the next wake-up is
//!   placed by the dispatcher as usual) or when its CPU holds other runnable
//!   tasks (the pin would only stop the OS balancer from spreading them).
//!   Releasing does not move a task by itself: the dispatcher only moves a
//!   task whose CPU leaves its affinity.
//! - Then, idle CPUs in order of speed (fastest first, ties by id) each take
//!   one runnable task from a strictly slower CPU, chosen from the slowest
//!   CPU first, then the CPU with the most runnable tasks, then the lowest
//!   task id; the task must be allowed there by its affinity (a program that
//!   binds its own workers is left alone, as the study notes the fix cannot
//!   help it). The move is a hard affinity of that single CPU; the task stays
//!   pinned until released as above.
//!
//! Invariants (debug-asserted): an idle CPU takes at most one task per
//! period. Determinism: pins live in a `BTreeMap` (task-id order) and every
//! choice has an explicit tie-break.
//!
//! The real fix acts at the instant a fast core idles; as a periodic placer
//! it acts within one `interval_ms` (default 4 ms, the `fair` balance
//! interval), which bounds how long a fast CPU can idle while a slower one
//! has work.

use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use crate::placer::{AffinityChange, Placer, Snapshot};
use ampsched_model::spec::Params;
use ampsched_model::{CpuId, CpuSet, Nanos, TaskId, Topology};
use std::collections::BTreeMap;

/// Default period: 4 ms, the `fair` dispatcher's balance interval.
pub const DEFAULT_INTERVAL: Nanos = Nanos::from_ms(4);

/// Parameters of `fast-first` as shown by `ampsched policies`.
pub const FAST_FIRST_PARAMS: &[ParamDoc] = &[INTERVAL];

/// `interval_ms`: the placer's period.
const INTERVAL: ParamDoc = ParamDoc {
    name: "interval_ms",
    kind: Kind::Ms { default: DEFAULT_INTERVAL, min: 0.1, max: 60_000.0 },
    unit: "ms",
    doc: "how often idle fast CPUs take work from slower ones",
};

/// Counters of the fast-first placer.
#[derive(Clone, Debug, Default)]
pub struct FastFirstStats {
    /// Tasks moved to a faster idle CPU.
    pub moves: u64,
    /// Pins released.
    pub releases: u64,
}

/// The fast-first placer's state.
pub struct FastFirst {
    interval: Nanos,
    /// Pinned tasks: (CPU it was pinned to, affinity before the pin).
    pub pinned: BTreeMap<TaskId, (CpuId, CpuSet)>,
    /// Counters.
    pub stats: FastFirstStats,
}

impl FastFirst {
    /// A fast-first placer running every `interval`.
    pub fn new(interval: Nanos) -> FastFirst {
        FastFirst { interval, pinned: BTreeMap::new(), stats: FastFirstStats::default() }
    }

    /// Read from scenario parameters.
    pub fn from_params(policy: &str, params: &Params) -> Result<FastFirst, PolicyError> {
        let r = ParamReader::new(policy, params, FAST_FIRST_PARAMS)?;
        Ok(FastFirst::new(r.duration(&INTERVAL)?))
    }
}

impl Placer for FastFirst {
    fn name(&self) -> &'static str {
        "fast-first"
    }

    fn period(&self) -> Nanos {
        self.interval
    }

    fn place(&mut self, topo: &Topology, snap: &Snapshot, out: &mut Vec<AffinityChange>) {
        let n = topo.ncpus();
        // Runnable tasks per CPU, in id order.
        let mut on: Vec<Vec<TaskId>> = vec![Vec::new(); n];
        for s in &snap.tasks {
            if let (true, Some(c)) = (s.runnable(), s.cpu) {
                if c.idx() < n {
                    on[c.idx()].push(s.id);
                }
            }
        }
        let sample = |t: TaskId| snap.tasks.iter().find(|s| s.id == t);
        // Final affinity per task (emitted in id order, so a release and a
        // re-pin of the same task in one period cost one change).
        let mut changes: BTreeMap<TaskId, CpuSet> = BTreeMap::new();
        let pinned: Vec<(TaskId, (CpuId, CpuSet))> = self.pinned.iter().map(|(t, v)| (*t, *v)).collect();
        for (t, (cpu, orig)) in pinned {
            let runnable = sample(t).is_some_and(|s| s.runnable());
            if !runnable || on[cpu.idx()].len() > 1 {
                self.pinned.remove(&t);
                changes.insert(t, orig);
                self.stats.releases += 1;
            }
        }
        let mut idle: Vec<CpuId> = (0..n).map(|c| CpuId(c as u32)).filter(|c| on[c.idx()].is_empty()).collect();
        idle.sort_by(|a, b| topo.cpus[b.idx()].speed.total_cmp(&topo.cpus[a.idx()].speed).then(a.cmp(b)));
        for dst in idle {
            let speed = topo.cpus[dst.idx()].speed;
            let mut best: Option<(CpuId, TaskId)> = None;
            let mut srcs: Vec<CpuId> = (0..n)
                .map(|c| CpuId(c as u32))
                .filter(|c| topo.cpus[c.idx()].speed < speed && !on[c.idx()].is_empty())
                .collect();
            srcs.sort_by(|a, b| {
                topo.cpus[a.idx()]
                    .speed
                    .total_cmp(&topo.cpus[b.idx()].speed)
                    .then(on[b.idx()].len().cmp(&on[a.idx()].len()))
                    .then(a.cmp(b))
            });
            'src: for src in srcs {
                for &t in &on[src.idx()] {
                    let aff = self.pinned.get(&t).map(|p| p.1).or(sample(t).map(|s| s.allowed)).unwrap_or_default();
                    if aff.contains(dst) {
                        best = Some((src, t));
                        break 'src;
                    }
                }
            }
            let Some((src, t)) = best else { continue };
            let orig = match self.pinned.get(&t) {
                Some(p) => p.1,
                None => changes.get(&t).copied().unwrap_or_else(|| sample(t).map(|s| s.affinity).unwrap_or_default()),
            };
            self.pinned.insert(t, (dst, orig));
            changes.insert(t, CpuSet::single(dst));
            on[src.idx()].retain(|x| *x != t);
            on[dst.idx()].push(t);
            self.stats.moves += 1;
            debug_assert_eq!(on[dst.idx()].len(), 1, "an idle CPU took two tasks");
        }
        for (t, mask) in changes {
            if sample(t).is_some_and(|s| s.affinity != mask) {
                out.push(AffinityChange { task: t, mask });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Worked examples with hand-made snapshots.
    use super::*;
    use crate::placer::TaskSample;
    use crate::placer_bridge::TaskState;
    use ampsched_model::DomainId;

    fn task(id: u32, cpu: u32, runnable: bool, aff: CpuSet) -> TaskSample {
        TaskSample {
            id: TaskId(id),
            domain: DomainId(0),
            vcpu: id,
            active: runnable,
            state: if runnable { TaskState::Running } else { TaskState::Blocked },
            run_by_class: vec![Nanos::ZERO; 2],
            cpu: Some(CpuId(cpu)),
            allowed: aff,
            affinity: aff,
            ws_kb: 0,
        }
    }

    #[test]
    fn an_idle_fast_cpu_takes_the_task_of_the_slowest_busiest_cpu_then_releases_it() {
        // CPU 0 fast (2.0), CPUs 1-3 slow (1.0). CPU 0 idle; CPU 1 runs task 0,
        // CPU 2 runs tasks 1 and 2 (one queued): CPU 2 has more → task 1 moves.
        let topo = Topology::fast_slow(1, 2.0, 3, 1.0, 4);
        let all = topo.all;
        let mut ff = FastFirst::new(DEFAULT_INTERVAL);
        let mut snap = Snapshot {
            tasks: vec![task(0, 1, true, all), task(1, 2, true, all), task(2, 2, true, all)],
            ..Snapshot::default()
        };
        let mut out = Vec::new();
        ff.place(&topo, &snap, &mut out);
        assert_eq!(out, vec![AffinityChange { task: TaskId(1), mask: CpuSet::single(CpuId(0)) }]);
        // Next period task 1 runs on CPU 0 alone: the pin stays, nothing changes.
        snap.tasks[1] = task(1, 0, true, CpuSet::single(CpuId(0)));
        out.clear();
        ff.place(&topo, &snap, &mut out);
        assert!(out.is_empty());
        // Task 1 blocks: its pin is released (affinity back to all CPUs).
        snap.tasks[1] = task(1, 0, false, CpuSet::single(CpuId(0)));
        out.clear();
        ff.place(&topo, &snap, &mut out);
        // …and CPU 0 is idle again: tasks 0 and 2 are alone on equal slow
        // CPUs 1 and 2, so the tie goes to the lower CPU id: task 0 moves.
        assert_eq!(
            out,
            vec![
                AffinityChange { task: TaskId(0), mask: CpuSet::single(CpuId(0)) },
                AffinityChange { task: TaskId(1), mask: all },
            ]
        );
        assert_eq!(ff.stats.moves, 2);
        assert_eq!(ff.stats.releases, 1);
    }

    #[test]
    fn a_task_bound_away_from_the_fast_cpu_is_left_alone() {
        let topo = Topology::fast_slow(1, 2.0, 3, 1.0, 4);
        let mut ff = FastFirst::new(DEFAULT_INTERVAL);
        let bound = CpuSet::from_cpus([CpuId(1), CpuId(2), CpuId(3)]);
        let snap = Snapshot { tasks: vec![task(0, 1, true, bound)], ..Snapshot::default() };
        let mut out = Vec::new();
        ff.place(&topo, &snap, &mut out);
        assert!(out.is_empty());
    }
}
