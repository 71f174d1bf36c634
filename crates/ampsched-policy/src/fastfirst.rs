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
//! period. Determinism: pins are kept in task-id order and every choice has
//! an explicit tie-break. A period allocates nothing once its working space
//! (per-CPU counts, the runnable tasks grouped by CPU, the idle and source
//! CPU lists, the changes) has grown to the machine's size.
//!
//! The real fix acts at the instant a fast core idles; as a periodic placer
//! it acts within one `interval_ms` (default 4 ms, the `fair` balance
//! interval), which bounds how long a fast CPU can idle while a slower one
//! has work.

use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use crate::placer::{AffinityChange, Placer, Snapshot, TaskSample};
use ampsched_model::spec::Params;
use ampsched_model::{CpuId, CpuSet, Nanos, TaskId, Topology};

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
    /// Pinned tasks in id order: the task, the CPU it was pinned to, its affinity before the pin.
    pinned: Vec<(TaskId, CpuId, CpuSet)>,
    /// Counters.
    pub stats: FastFirstStats,
    /// Working space of [`Placer::place`], kept from one period to the next.
    scratch: Scratch,
}

/// The working space of one decision, kept so that a period allocates nothing once warm.
#[derive(Default)]
struct Scratch {
    /// Per CPU, where its runnable tasks start in `slots`, and how many remain there.
    start: Vec<u32>,
    count: Vec<u32>,
    /// The runnable tasks grouped by CPU, each CPU's in snapshot (id) order, as
    /// indices into the snapshot's tasks; [`MOVED`] once a task moved away.
    slots: Vec<u32>,
    /// The initially idle CPUs, fastest first.
    idle: Vec<CpuId>,
    /// The candidate sources of one idle CPU, in the order they are tried.
    srcs: Vec<CpuId>,
    /// Final affinity per task changed this period (emitted in id order).
    changes: Vec<(TaskId, CpuSet)>,
}

/// A slot whose task moved to another CPU this period.
const MOVED: u32 = u32::MAX;

impl FastFirst {
    /// A fast-first placer running every `interval`.
    pub fn new(interval: Nanos) -> FastFirst {
        FastFirst { interval, pinned: Vec::new(), stats: FastFirstStats::default(), scratch: Scratch::default() }
    }

    /// Read from scenario parameters.
    pub fn from_params(policy: &str, params: &Params) -> Result<FastFirst, PolicyError> {
        let r = ParamReader::new(policy, params, FAST_FIRST_PARAMS)?;
        Ok(FastFirst::new(r.duration(&INTERVAL)?))
    }

    /// The tasks this placer holds pinned, in id order: (task, its CPU, its affinity before the pin).
    pub fn pinned(&self) -> &[(TaskId, CpuId, CpuSet)] {
        &self.pinned
    }
}

/// The sample of task `t` in `snap` (its tasks are in id order, usually dense).
fn sample(snap: &Snapshot, t: TaskId) -> Option<&TaskSample> {
    let tasks = &snap.tasks;
    if let Some(s) = tasks.get(t.idx()).filter(|s| s.id == t) {
        return Some(s);
    }
    match tasks.binary_search_by_key(&t, |s| s.id) {
        Ok(i) => Some(&tasks[i]),
        Err(_) => tasks.iter().find(|s| s.id == t),
    }
}

/// Set `t`'s entry of `changes` to `mask` (the last one counts).
fn set_change(changes: &mut Vec<(TaskId, CpuSet)>, t: TaskId, mask: CpuSet) {
    match changes.iter_mut().find(|c| c.0 == t) {
        Some(c) => c.1 = mask,
        None => changes.push((t, mask)),
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
        let Scratch { start, count, slots, idle, srcs, changes } = &mut self.scratch;
        // Runnable tasks per CPU, in id order: counted, then placed (a counting sort).
        start.clear();
        start.resize(n + 1, 0);
        count.clear();
        count.resize(n, 0);
        let on_cpu = |s: &TaskSample| s.cpu.filter(|c| s.runnable() && c.idx() < n);
        for s in &snap.tasks {
            if let Some(c) = on_cpu(s) {
                count[c.idx()] += 1;
            }
        }
        for c in 0..n {
            start[c + 1] = start[c] + count[c];
        }
        slots.clear();
        slots.resize(start[n] as usize, MOVED);
        let mut fill = 0;
        for (i, s) in snap.tasks.iter().enumerate() {
            if let Some(c) = on_cpu(s) {
                // `count` is rebuilt below: use it here as each CPU's fill level.
                fill += 1;
                let at = start[c.idx() + 1] - count[c.idx()];
                slots[at as usize] = i as u32;
                count[c.idx()] -= 1;
            }
        }
        debug_assert_eq!(fill, slots.len());
        for c in 0..n {
            count[c] = start[c + 1] - start[c];
        }
        // Final affinity per task (emitted in id order, so a release and a
        // re-pin of the same task in one period cost one change).
        changes.clear();
        let stats = &mut self.stats;
        self.pinned.retain(|&(t, cpu, orig)| {
            let runnable = sample(snap, t).is_some_and(|s| s.runnable());
            let release = !runnable || count[cpu.idx()] > 1;
            if release {
                set_change(changes, t, orig);
                stats.releases += 1;
            }
            !release
        });
        let speed = |c: CpuId| topo.cpus[c.idx()].speed;
        idle.clear();
        idle.extend((0..n).map(|c| CpuId(c as u32)).filter(|c| count[c.idx()] == 0));
        idle.sort_unstable_by(|a, b| speed(*b).total_cmp(&speed(*a)).then(a.cmp(b)));
        for &dst in idle.iter() {
            let sp = speed(dst);
            srcs.clear();
            srcs.extend((0..n).map(|c| CpuId(c as u32)).filter(|c| speed(*c) < sp && count[c.idx()] > 0));
            srcs.sort_unstable_by(|a, b| {
                speed(*a).total_cmp(&speed(*b)).then(count[b.idx()].cmp(&count[a.idx()])).then(a.cmp(b))
            });
            let pinned_orig = |pinned: &[(TaskId, CpuId, CpuSet)], t: TaskId| {
                pinned.binary_search_by_key(&t, |p| p.0).ok().map(|i| pinned[i].2)
            };
            let mut best: Option<(CpuId, usize)> = None;
            'src: for &src in srcs.iter() {
                let (a, b) = (start[src.idx()] as usize, start[src.idx() + 1] as usize);
                for (k, &i) in slots[a..b].iter().enumerate() {
                    if i == MOVED {
                        continue;
                    }
                    let s = &snap.tasks[i as usize];
                    let aff = pinned_orig(&self.pinned, s.id).unwrap_or(s.allowed);
                    if aff.contains(dst) {
                        best = Some((src, a + k));
                        break 'src;
                    }
                }
            }
            let Some((src, slot)) = best else { continue };
            let s = &snap.tasks[slots[slot] as usize];
            let t = s.id;
            let orig = match pinned_orig(&self.pinned, t) {
                Some(o) => o,
                None => changes.iter().find(|c| c.0 == t).map(|c| c.1).unwrap_or(s.affinity),
            };
            match self.pinned.binary_search_by_key(&t, |p| p.0) {
                Ok(i) => self.pinned[i] = (t, dst, orig),
                Err(i) => self.pinned.insert(i, (t, dst, orig)),
            }
            set_change(changes, t, CpuSet::single(dst));
            slots[slot] = MOVED;
            count[src.idx()] -= 1;
            count[dst.idx()] += 1;
            self.stats.moves += 1;
            debug_assert_eq!(count[dst.idx()], 1, "an idle CPU took two tasks");
        }
        changes.sort_unstable_by_key(|c| c.0);
        for &(t, mask) in changes.iter() {
            if sample(snap, t).is_some_and(|s| s.affinity != mask) {
                out.push(AffinityChange { task: t, mask });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Worked examples with hand-made snapshots.
    use super::*;
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
