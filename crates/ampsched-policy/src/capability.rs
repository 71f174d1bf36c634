//! `capability`: the capability balancer of parallel applications (Kim et al.,
//! J. Zhejiang Univ-Sci C 2012; docs/design/capability.md, "Capability metrics" and
//! "Balancing process"). A placer: it runs on top of any dispatcher (with
//! `fair` it reproduces the paper's Linux setting) and acts only by pinning
//! tasks to single CPUs.
//!
//! Design:
//! - Per CPU and balance interval (= the placer period, `interval_ms`):
//!   `EC = speed × (busy + idle)` (busy = user work, noise excluded; speed is
//!   the CPU's `Topology` speed, the paper's BogoMIPS) and
//!   `ECPT = EC / task_num`, or `EC` when `task_num = 0`. `task_num` = the
//!   managed tasks homed on the CPU that ran or were runnable during the
//!   interval (the simulator's `CpuSample::nr_running` is not used: it is a
//!   point sample, and the paper counts the CPU's tasks).
//! - Launch (the paper's `chcb`, which "pins its tasks to CPUs in ECPT
//!   order"): a task seen active for the first time is pinned to the allowed
//!   CPU where its share `EC / (tasks already there + 1)` is largest, so
//!   CPUs end up with tasks in proportion to their capability — on static
//!   asymmetry (paper: one 2.2 GHz and three 1.1 GHz cores) 28 threads go
//!   11 / 6 / 6 / 5, not 7 each. Shares within one tolerance of the best
//!   count as equal; among them the fewest tasks first, then the largest
//!   share, the CPU it is on, the lowest id. Fewest first because swaps
//!   never change task counts: a CPU left empty at launch stayed idle
//!   (regression: `cap-npb` static/cg, seed 3, pinned two threads to the
//!   2.2 GHz CPU — EC/2 there ties EC/1 on a 1.1 GHz CPU, and noise jitter
//!   decided the tie — and left CPU 2 idle for the whole run); it also
//!   spreads a program's threads launched together over different CPUs, as
//!   the OS did before the launch, instead of stacking barrier partners. A
//!   round that pins new tasks does no balancing (the per-CPU balancers
//!   start one interval after the launch).
//! - Per-CPU balancers, simulated within one `place` call: all wake at the
//!   same instant, so every step 1 (compute and publish the local ECPT in the
//!   shared vector) precedes every step 2. They then take the lock one after
//!   the other; the first holder rotates by one CPU each round (independent
//!   real-time balancers whose timers expire together grab the lock in no
//!   fixed order; rotation is the deterministic stand-in, and gives every
//!   CPU the first turn equally often).
//!
//! Each lock holder runs steps 2-8:
//!
//! 2. read the vector; average over all CPUs;
//! 3. local ECPT ≤ average × (1 + `tolerance_pct`/100) → step 8 — except
//!    an empty CPU that a task of a stack (≥ 2 tasks) below the average
//!    would gain by moving to (step 6's move): its ECPT is its whole EC, which IRQ load or a slower
//!    clock can hold below the average of busy fast CPUs while a stack
//!    elsewhere gets less per task, and nothing else ever hands it a task;
//! 4. remote = the CPU with the smallest ECPT that has not taken part in a
//!    swap earlier in this round ("recently migrated"), is below the
//!    average, and has a task to give; none → step 8. ECPTs within
//!    `tolerance_pct` of the smallest count as equal, and among them the
//!    CPU whose last swap is oldest wins (the "recently migrated" rule
//!    applied to ties), then the lowest id;
//! 5. select one task on each side by the selection policy, each allowed
//!    (by the affinity it had before pinning) on the other CPU;
//! 6. swap them by changing their hard affinity to the single other CPU;
//!    when the remote's task would get a larger share on the local CPU,
//!    `EC_l / (n_l + 1) > EC_r / n_r` beyond the tolerance (equal CPUs:
//!    the remote has ≥ 2 active tasks more, e.g. the local one's tasks
//!    ended), the local CPU takes the remote's task instead (a one-way
//!    move): the pinned tasks escape the OS runqueue balancer, so this
//!    balancer levels their counts — by capability, the launch rule applied
//!    again as tasks end, so a 2× CPU keeps its extra tasks. A move never
//!    takes a CPU's only task to a CPU that already has one: on dynamic
//!    asymmetry one interval's IRQ load can make `EC_r / 1` look smaller
//!    than `EC_l / 2`, and the move would stack two tasks and leave the
//!    noisy CPU idle for good (an idle CPU below the average never reaches
//!    step 4 again) — regression: `cap-npb` dynamic/lu, where LU's spinning
//!    pipeline stacked on one CPU ran 14× longer; the paper answers dynamic
//!    noise with swaps;
//! 7. re-publish the local ECPT (a one-for-one swap keeps `task_num`, so
//!    the value is unchanged; after a move both the local and the remote
//!    entry are re-published, so the vector is never stale within a round);
//! 8. release the lock.
//!
//! - Selection: `fifo` (default) — each CPU keeps its tasks in arrival order
//!   (launch order, then swaps append at the tail) and gives the head, the
//!   task that has been there longest, so successive swaps rotate different
//!   tasks through a weak CPU instead of ping-ponging two; `cache` — the task
//!   with the smallest working set (`TaskSample::ws_kb`), ties by arrival.
//!   Only tasks active in the interval are selected.
//!
//! Clarifications of the restated steps (documented, not tuned): the
//! tolerance in step 3 is one measurement quantum (1 % = one jiffy of a 1 s
//! interval at USER_HZ 100), so equal CPUs measured with rounding jitter do
//! not swap; step 4 skips remotes at or above the average (a swap with them
//! cannot help) and remotes with no active task (a swap needs two tasks).
//!
//! Invariants (debug-asserted): every managed task sits in exactly one CPU's
//! queue, the one it is pinned to; a round swaps each CPU at most once as a
//! remote.
//!
//! Tasks that end are never active again: they stop counting in `task_num`
//! and are never selected; their pin is harmless and is left in place.
//!
//! **The balancers' own cost** (`pass_us`, `move_us`; `Placer::own_cost`).
//! The paper's balancers are processes on the machine they balance: one per
//! CPU at real-time priority, woken every interval, so each pass preempts
//! whatever task runs on its CPU, and "too short [an interval] loses
//! throughput to balancing overhead". Each balancing round (not the launch
//! round: the launcher pins before the balancers start) charges every CPU one
//! pass, `pass_us`: the timer wakes the balancer and it switches in, reads the
//! per-CPU times, takes and releases the lock on the shared vector, and
//! switches out. Each affinity change of a swap or move charges `move_us` on
//! the CPU whose balancer makes it, and `move_us` again on the CPU the moved
//! task is queued or running on: in the testbed's kernels
//! `sched_setaffinity` → `set_cpus_allowed_ptr` moves a task that is on a
//! runqueue through the CPU's migration thread (`migrate_task` queues a
//! `migration_req`, wakes `migration_thread`, an RT task that preempts the
//! task there, and the caller sleeps in `wait_for_completion`;
//! `stop_one_cpu(migration_cpu_stop)` from 2.6.37), while a sleeping task
//! is only re-pointed (`set_task_cpu`, no charge on its CPU). The simulator
//! takes each charge from its CPU at once: no task progresses there for
//! that long (`engine/place.rs`, "The placer's own cost"); an idle CPU loses
//! nothing. Magnitudes — estimates, no published figure for this balancer:
//! a context switch's direct cost is ≈ 3.8 µs on the paper's generation of
//! machines (Li, Ding, Shen, "Quantifying the cost of context switch",
//! ExpCS 2007: dual 2.0 GHz Xeon, Linux 2.6.17), so a pass, two switches and
//! a few system calls of well under 1 µs each, is ≈ 8 µs, and a migration's
//! sleep-and-wake on either side is two switches, 7.6 µs. Worked example
//! (test `a_pass_preempts_the_task_on_every_cpu_each_interval`): 4 CPUs, a
//! 10 ms interval, passes of 8 µs, one task computing 1 s alone on CPU 0 —
//! 99 passes fall inside its run (the one at 10 ms is the launch round), so
//! it ends 99 × 8 µs = 792 µs late. At the paper's 1 s interval the passes
//! cost 8 µs per CPU-second (0.0008 %); at 10 ms, 0.08 % plus 30 µs per swap.

use crate::params::{Kind, ParamDoc, ParamReader, PolicyError};
use crate::placer::{AffinityChange, Placer, Snapshot, TaskSample};
use ampsched_model::spec::Params;
use ampsched_model::{CpuId, CpuSet, Nanos, TaskId, Topology};
use std::collections::VecDeque;

/// Default balance interval: the paper's choice among 0.01, 0.1, 1 and 10 s.
pub const DEFAULT_INTERVAL: Nanos = Nanos::from_secs(1);
/// Default step-3 tolerance, %: one jiffy of a 1 s interval at USER_HZ 100.
pub const DEFAULT_TOLERANCE_PCT: f64 = 1.0;
/// Default CPU time of one balancer pass on its CPU (module essay: an estimate, two context
/// switches of ≈ 3.8 µs and the reads and lock).
pub const DEFAULT_PASS: Nanos = Nanos(8_000);
/// Default CPU time an affinity change costs on each side (module essay: two context switches).
pub const DEFAULT_MOVE: Nanos = Nanos(7_600);

/// Task selection policy (docs/design/capability.md, "Task selection policies").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Runqueue (arrival) order: the longest-resident task.
    Fifo,
    /// Smallest working set.
    Cache,
}

/// Tunables of the capability balancer.
#[derive(Clone, Debug)]
pub struct CapabilityParams {
    /// Balance interval = placer period.
    pub interval: Nanos,
    /// Task selection policy.
    pub selection: Selection,
    /// Step-3 tolerance, as a fraction (0.01 = 1 %).
    pub tolerance: f64,
    /// CPU time of one balancer pass, charged on every CPU each balancing round.
    pub pass: Nanos,
    /// CPU time of one affinity change, charged on the balancer's CPU and on the moved task's.
    pub move_cost: Nanos,
}

/// Parameters of `capability` as shown by `ampsched policies`.
pub const CAPABILITY_PARAMS: &[ParamDoc] = &[INTERVAL, SELECTION, TOLERANCE, PASS, MOVE];

/// `interval_ms`: the balance interval.
const INTERVAL: ParamDoc = ParamDoc {
    name: "interval_ms",
    kind: Kind::Ms { default: DEFAULT_INTERVAL, min: 1.0, max: 3_600_000.0 },
    unit: "ms",
    doc: "balance interval = placer period (paper: 10, 100, 1000, 10000)",
};

/// `selection`: the task selection policy.
const SELECTION: ParamDoc = ParamDoc {
    name: "selection",
    kind: Kind::Choice { default: "fifo", allowed: &["fifo", "cache"] },
    unit: "",
    doc: "task selection: fifo (runqueue order) or cache (smallest working set)",
};

/// `tolerance_pct`: step 3's margin.
const TOLERANCE: ParamDoc = ParamDoc {
    name: "tolerance_pct",
    kind: Kind::Num { default: DEFAULT_TOLERANCE_PCT, min: 0.0, max: 100.0 },
    unit: "%",
    doc: "a CPU balances only when its ECPT exceeds the average by more than this",
};

/// `pass_us`: the CPU time of one balancer pass.
const PASS: ParamDoc = ParamDoc {
    name: "pass_us",
    kind: Kind::Us { default: DEFAULT_PASS, min: 0.0, max: 100_000.0 },
    unit: "µs",
    doc: "CPU time of one balancer pass, taken from every CPU each round (estimate: 2 context switches + reads); 0 = free",
};

/// `move_us`: the CPU time of one affinity change on each side.
const MOVE: ParamDoc = ParamDoc {
    name: "move_us",
    kind: Kind::Us { default: DEFAULT_MOVE, min: 0.0, max: 100_000.0 },
    unit: "µs",
    doc: "CPU time of one sched_setaffinity on the balancer's CPU and the moved task's (migration thread); 0 = free",
};

impl Default for CapabilityParams {
    fn default() -> Self {
        CapabilityParams {
            interval: DEFAULT_INTERVAL,
            selection: Selection::Fifo,
            tolerance: DEFAULT_TOLERANCE_PCT / 100.0,
            pass: DEFAULT_PASS,
            move_cost: DEFAULT_MOVE,
        }
    }
}

impl CapabilityParams {
    /// Read from scenario parameters.
    pub fn from_params(policy: &str, params: &Params) -> Result<CapabilityParams, PolicyError> {
        let r = ParamReader::new(policy, params, CAPABILITY_PARAMS)?;
        Ok(CapabilityParams {
            interval: r.duration(&INTERVAL)?,
            selection: match r.choice(&SELECTION)? {
                "cache" => Selection::Cache,
                _ => Selection::Fifo,
            },
            tolerance: r.num(&TOLERANCE)? / 100.0,
            pass: r.duration(&PASS)?,
            move_cost: r.duration(&MOVE)?,
        })
    }
}

/// Counters of the capability balancer.
#[derive(Clone, Debug, Default)]
pub struct CapabilityStats {
    /// Balancing rounds run.
    pub rounds: u64,
    /// Swaps done (two affinity changes each).
    pub swaps: u64,
    /// One-way moves to a CPU with ≥ 2 fewer active tasks (one affinity change each).
    pub moves: u64,
    /// Tasks pinned at launch.
    pub launched: u64,
}

/// The capability balancer's state.
pub struct Capability {
    /// Tunables.
    pub p: CapabilityParams,
    /// Per task id: the CPU it is pinned to (`None` = not managed yet).
    pub home: Vec<Option<CpuId>>,
    /// Per task id: its affinity before pinning.
    orig: Vec<CpuSet>,
    /// Per CPU: its managed tasks in arrival order.
    pub queue: Vec<VecDeque<TaskId>>,
    /// The shared ECPT vector as last published.
    pub ecpt: Vec<f64>,
    round: u64,
    /// Per CPU: 1 + the round of its last swap (0 = never).
    last_swap: Vec<u64>,
    /// Counters.
    pub stats: CapabilityStats,
    /// Per CPU, the balancers' CPU time in the last call (ns).
    spent: Vec<u64>,
    /// `spent` as `Placer::own_cost` reports it (CPUs that spent nothing left out).
    cost: Vec<(CpuId, Nanos)>,
}

impl Capability {
    /// A capability balancer for `topo`.
    pub fn new(p: CapabilityParams, topo: &Topology) -> Capability {
        let n = topo.ncpus();
        Capability {
            p,
            home: Vec::new(),
            orig: Vec::new(),
            queue: vec![VecDeque::new(); n],
            ecpt: vec![0.0; n],
            round: 0,
            last_swap: vec![0; n],
            stats: CapabilityStats::default(),
            spent: vec![0; n],
            cost: Vec::new(),
        }
    }

    fn pick(&self, cpu: CpuId, other: CpuId, tasks: &[Option<&TaskSample>]) -> Option<TaskId> {
        let eligible = self.queue[cpu.idx()].iter().copied().filter(|t| {
            tasks.get(t.idx()).copied().flatten().is_some_and(|s| s.active) && self.orig[t.idx()].contains(other)
        });
        match self.p.selection {
            Selection::Fifo => eligible.into_iter().next(),
            Selection::Cache => eligible
                .enumerate()
                .min_by_key(|(i, t)| (tasks[t.idx()].map(|s| s.ws_kb).unwrap_or(0), *i))
                .map(|x| x.1),
        }
    }

    fn move_task(&mut self, t: TaskId, to: CpuId, out: &mut Vec<AffinityChange>) {
        if let Some(from) = self.home[t.idx()] {
            self.queue[from.idx()].retain(|x| *x != t);
        }
        self.home[t.idx()] = Some(to);
        self.queue[to.idx()].push_back(t);
        out.push(AffinityChange { task: t, mask: CpuSet::single(to) });
    }

    /// Charge the sched_setaffinity of task `t` (sample `s`): `move_cost` on the balancer's
    /// CPU `by`, and again on the CPU `t` is queued or running on (its migration thread).
    fn charge_move(&mut self, by: CpuId, s: Option<&TaskSample>) {
        let m = self.p.move_cost.0;
        self.spent[by.idx()] += m;
        if let Some(c) = s.filter(|s| s.runnable()).and_then(|s| s.cpu).filter(|c| c.idx() < self.spent.len()) {
            self.spent[c.idx()] += m;
        }
    }

    fn check_invariants(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        for (c, q) in self.queue.iter().enumerate() {
            for t in q {
                debug_assert_eq!(self.home[t.idx()], Some(CpuId(c as u32)), "{t} queued on cpu{c} but homed elsewhere");
            }
        }
        let queued: usize = self.queue.iter().map(|q| q.len()).sum();
        debug_assert_eq!(
            queued,
            self.home.iter().filter(|h| h.is_some()).count(),
            "a managed task is in no queue or two"
        );
    }
}

impl Placer for Capability {
    fn name(&self) -> &'static str {
        "capability"
    }

    fn period(&self) -> Nanos {
        self.p.interval
    }

    fn own_cost(&self) -> &[(CpuId, Nanos)] {
        &self.cost
    }

    fn place(&mut self, topo: &Topology, snap: &Snapshot, out: &mut Vec<AffinityChange>) {
        let n = topo.ncpus();
        self.cost.clear();
        if n == 0 || snap.period.0 == 0 {
            return;
        }
        let max_id = snap.tasks.iter().map(|s| s.id.idx() + 1).max().unwrap_or(0);
        if self.home.len() < max_id {
            self.home.resize(max_id, None);
            self.orig.resize(max_id, CpuSet::new());
        }
        let mut by_id: Vec<Option<&TaskSample>> = vec![None; max_id];
        for s in &snap.tasks {
            by_id[s.id.idx()] = Some(s);
        }
        // Step 1 for every CPU: EC = speed × (user + idle), noise excluded.
        let ec: Vec<f64> = (0..n)
            .map(|c| {
                let s = snap.cpus.get(c);
                let t = s.map(|s| s.busy.0 + s.idle.0).unwrap_or(0);
                topo.cpus[c].speed * t as f64
            })
            .collect();
        let mut task_num = vec![0u32; n];
        for s in &snap.tasks {
            if let Some(h) = self.home[s.id.idx()] {
                if s.active {
                    task_num[h.idx()] += 1;
                }
            }
        }
        // Launch: pin newly active tasks in ECPT order.
        let tol = self.p.tolerance;
        let mut launched = false;
        for s in &snap.tasks {
            if self.home[s.id.idx()].is_some() || !(s.active || s.runnable()) || s.allowed.is_empty() {
                continue;
            }
            // ECPT order: the CPU where the task's share, EC / (tasks + 1),
            // is largest, so a CPU ends with tasks in proportion to its
            // capability (the paper's launcher pins "in ECPT order"; on
            // static asymmetry a 2× CPU takes twice the tasks). Shares within
            // one tolerance of the best are equal, and among them the CPU
            // with the fewest tasks wins: a 2× CPU holding one task only
            // *ties* an empty 1× CPU, and noise jitter must not decide such
            // ties (regression: `cap-npb` static/cg, seed 3, left CPU 2 idle
            // for the whole run, since swaps never change task counts); it
            // also spreads a program's threads launched together over
            // different CPUs instead of stacking barrier partners.
            let share = |c: CpuId| ec[c.idx()] / (task_num[c.idx()] + 1) as f64;
            let allowed: Vec<CpuId> = s.allowed.iter().filter(|c| c.idx() < n).collect();
            let top = allowed.iter().map(|c| share(*c)).fold(f64::NEG_INFINITY, f64::max);
            let best = allowed.into_iter().filter(|c| share(*c) * (1.0 + tol) >= top).max_by(|a, b| {
                task_num[b.idx()]
                    .cmp(&task_num[a.idx()])
                    .then(share(*a).total_cmp(&share(*b)))
                    .then((Some(*a) == s.cpu).cmp(&(Some(*b) == s.cpu)))
                    .then(b.cmp(a))
            });
            let Some(c) = best else { continue };
            self.orig[s.id.idx()] = s.allowed;
            task_num[c.idx()] += 1;
            self.move_task(s.id, c, out);
            self.stats.launched += 1;
            launched = true;
        }
        // A one-way move pays when the moved task's share on the local CPU,
        // EC_l / (n_l + 1), beats its share now, EC_r / n_r, by more than the
        // tolerance. On equal CPUs that is n_r ≥ n_l + 2; on a 2× local CPU
        // it already pays at n_r = n_l + 1 and a 2× remote keeps its extra
        // tasks (it is the launch rule, applied again as tasks end). A move
        // never takes a CPU's only task to a CPU that has tasks: that stacks
        // two where there was one and idles a CPU, so the "gain" is one
        // interval's measurement of the remote's noise — the dynamic
        // asymmetry the paper answers with swaps, which rotate tasks through
        // the noisy CPU — and, since an idle CPU below the average never
        // holds the lock again (step 3), the stack and the idle CPU would
        // last for the rest of the run.
        let gains_by_moving = |r: CpuId, l: CpuId, task_num: &[u32]| {
            let (nr, nl) = (task_num[r.idx()], task_num[l.idx()]);
            (nr >= 2 || (nr == 1 && nl == 0)) && ec[l.idx()] / (nl + 1) as f64 > ec[r.idx()] / nr as f64 * (1.0 + tol)
        };
        let ecpt_of = |c: usize, task_num: &[u32]| if task_num[c] > 0 { ec[c] / task_num[c] as f64 } else { ec[c] };
        // Every balancer publishes its step-1 value before any takes the lock.
        for c in 0..n {
            self.ecpt[c] = ecpt_of(c, &task_num);
        }
        if launched {
            self.check_invariants();
            return;
        }
        self.stats.rounds += 1;
        // Every CPU's balancer runs its pass (steps 1-3 and 8 at least).
        self.spent.clear();
        self.spent.resize(n, self.p.pass.0);
        let start = (self.round % n as u64) as usize;
        self.round += 1;
        let mut recent = CpuSet::new();
        for k in 0..n {
            let local = CpuId(((start + k) % n) as u32);
            // Step 2: lock held; read the vector.
            let avg = self.ecpt.iter().sum::<f64>() / n as f64;
            // Step 3. An empty CPU below the average still takes a task
            // from a stack (≥ 2 tasks) if the task would gain by moving (the
            // launch rule again): its ECPT is its whole EC, which a noisy or
            // slower CPU can hold below the average of busy fast ones while
            // the stack gets less per task, and no one else ever hands it a
            // task. A lone task is not pulled this way (no stack to undo:
            // that would only chase one interval's noise).
            let empty_pulls = task_num[local.idx()] == 0
                && (0..n).any(|r| {
                    r != local.idx()
                        && task_num[r] >= 2
                        && self.ecpt[r] < avg
                        && gains_by_moving(CpuId(r as u32), local, &task_num)
                });
            if self.ecpt[local.idx()] <= avg * (1.0 + self.p.tolerance) && !empty_pulls {
                continue;
            }
            // Step 4: smallest ECPT, not recently migrated, below average,
            // with a task to give (step 5 picks both tasks). When the
            // remote has at least two active tasks more than the local CPU
            // (e.g. the local one's tasks ended), the swap becomes a one-way
            // move of the remote's task: pinned tasks escape the OS
            // runqueue balancer, so this balancer levels their counts.
            let mut remotes: Vec<(CpuId, Option<TaskId>, TaskId)> = (0..n)
                .map(|c| CpuId(c as u32))
                .filter(|c| *c != local && !recent.contains(*c) && self.ecpt[c.idx()] < avg)
                .filter_map(|r| {
                    let tr = self.pick(r, local, &by_id)?;
                    if gains_by_moving(r, local, &task_num) {
                        Some((r, None, tr))
                    } else {
                        Some((r, Some(self.pick(local, r, &by_id)?), tr))
                    }
                })
                .collect();
            remotes.sort_by(|a, b| self.ecpt[a.0.idx()].total_cmp(&self.ecpt[b.0.idx()]).then(a.0.cmp(&b.0)));
            // ECPTs within one tolerance of the smallest are equal: the least
            // recently migrated of them wins, then the lowest id.
            let pair = remotes.first().map(|f| self.ecpt[f.0.idx()] * (1.0 + self.p.tolerance)).and_then(|limit| {
                remotes
                    .iter()
                    .filter(|r| self.ecpt[r.0.idx()] <= limit)
                    .min_by_key(|r| (self.last_swap[r.0.idx()], r.0))
                    .copied()
            });
            let Some((remote, tl, tr)) = pair else { continue };
            // Step 6: swap by hard affinity (or move, from an empty local).
            if let Some(tl) = tl {
                self.move_task(tl, remote, out);
                self.charge_move(local, by_id[tl.idx()]);
                self.stats.swaps += 1;
            } else {
                task_num[local.idx()] += 1;
                task_num[remote.idx()] -= 1;
                self.stats.moves += 1;
            }
            self.move_task(tr, local, out);
            self.charge_move(local, by_id[tr.idx()]);
            recent.insert(local);
            recent.insert(remote);
            self.last_swap[local.idx()] = self.round;
            self.last_swap[remote.idx()] = self.round;
            // Step 7: re-publish the local ECPT (unchanged by a 1:1 swap). A
            // move also changes the remote's task count, which the mover
            // knows: it re-publishes both, so later lock holders in this
            // round do not read a stale vector.
            self.ecpt[local.idx()] = ecpt_of(local.idx(), &task_num);
            self.ecpt[remote.idx()] = ecpt_of(remote.idx(), &task_num);
            // Step 8: release the lock.
        }
        self.cost.extend(
            self.spent.iter().enumerate().filter(|(_, ns)| **ns > 0).map(|(c, ns)| (CpuId(c as u32), Nanos(*ns))),
        );
        self.check_invariants();
    }
}

#[cfg(test)]
mod tests {
    //! Worked examples driving the placer with hand-made snapshots.
    use super::*;
    use crate::placer::CpuSample;
    use crate::placer_bridge::TaskState;
    use ampsched_model::DomainId;

    /// 1 s snapshot: CPUs fully busy (minus noise); tasks active on their `cpu`.
    fn snap(noise_ms: &[u64], tasks: &[(u32, u32)], ws: &[u32]) -> Snapshot {
        let n = noise_ms.len();
        Snapshot {
            now: Nanos::from_secs(1),
            period: Nanos::from_secs(1),
            cpus: (0..n)
                .map(|c| CpuSample {
                    id: CpuId(c as u32),
                    busy: Nanos::from_ms(1000 - noise_ms[c]),
                    idle: Nanos::ZERO,
                    noise: Nanos::from_ms(noise_ms[c]),
                    nr_running: 0,
                })
                .collect(),
            tasks: tasks
                .iter()
                .map(|&(id, cpu)| TaskSample {
                    id: TaskId(id),
                    domain: DomainId(0),
                    vcpu: id,
                    active: true,
                    state: TaskState::Running,
                    run_by_class: vec![Nanos::ZERO; 2],
                    cpu: Some(CpuId(cpu)),
                    allowed: CpuSet::first_n(n),
                    affinity: CpuSet::first_n(n),
                    ws_kb: ws.get(id as usize).copied().unwrap_or(0),
                })
                .collect(),
            domains: Vec::new(),
        }
    }

    fn apply(s: &mut Snapshot, out: &[AffinityChange]) {
        for ch in out {
            let t = s.tasks.iter_mut().find(|t| t.id == ch.task).unwrap();
            t.affinity = ch.mask;
            t.cpu = ch.mask.first();
        }
    }

    #[test]
    fn launch_pins_in_ecpt_order_and_a_symmetric_machine_never_swaps() {
        let topo = Topology::fast_slow(0, 2.0, 4, 1.0, 4);
        let mut cap = Capability::new(CapabilityParams::default(), &topo);
        // 5 tasks all reported on CPU 0. EC = 1 × 1 s on every CPU.
        // Greedy: t0..t3 → CPUs 0..3 (EC/1 each; t0 stays on its CPU 0, the
        // others to the lowest empty id); t4: EC/2 everywhere, tie → CPU 0 (its own).
        let mut s = snap(&[0, 0, 0, 0], &[(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)], &[]);
        let mut out = Vec::new();
        cap.place(&topo, &s, &mut out);
        let homes: Vec<u32> = out.iter().map(|c| c.mask.first().unwrap().0).collect();
        assert_eq!(homes, vec![0, 1, 2, 3, 0]);
        apply(&mut s, &out);
        // Next rounds: ECPT = 0.5 s, 1, 1, 1 → avg 0.875: CPUs 1-3 are above,
        // CPU 0 is the only remote below average. The first holder swaps with
        // it, the later ones find it recently migrated: one swap per round.
        out.clear();
        cap.place(&topo, &s, &mut out);
        assert_eq!(out.len(), 2);
        // With 4 tasks on 4 equal CPUs all ECPTs equal the average: no swap, ever.
        let mut cap = Capability::new(CapabilityParams::default(), &topo);
        let s = snap(&[0, 0, 0, 0], &[(0, 0), (1, 1), (2, 2), (3, 3)], &[]);
        for round in 0..10 {
            out.clear();
            cap.place(&topo, &s, &mut out);
            // Round 0 pins each task where it is (the placer emits the pins).
            assert_eq!(out.len(), if round == 0 { 4 } else { 0 }, "round {round}");
        }
    }

    #[test]
    fn a_noisy_cpu_gets_a_different_task_every_round_fifo() {
        // Dynamic asymmetry: CPU 0 loses 500 ms of 1 s to interrupts.
        // ECPT = 0.5 s × 1 / 1 task on CPU 0, 1 s on CPUs 1-3; avg = 0.875 s.
        let topo = Topology::fast_slow(0, 2.0, 4, 1.0, 4);
        let mut cap = Capability::new(CapabilityParams::default(), &topo);
        let mut s = snap(&[500, 0, 0, 0], &[(0, 0), (1, 1), (2, 2), (3, 3)], &[]);
        let mut out = Vec::new();
        // Launch, EC = 0.5 s on CPU 0, 1 s elsewhere: t0 → CPU 1 (1 > 0.5),
        // t1 → CPU 2, t2 → CPU 3; t3: 0.5/1 on CPU 0 = 1/2 elsewhere, tie →
        // fewer tasks → CPU 0. The noisy CPU gets the last task.
        cap.place(&topo, &s, &mut out);
        let homes: Vec<u32> = out.iter().map(|c| c.mask.first().unwrap().0).collect();
        assert_eq!(homes, vec![1, 2, 3, 0]);
        apply(&mut s, &out);
        let mut on_cpu0 = Vec::new();
        for _ in 0..4 {
            out.clear();
            cap.place(&topo, &s, &mut out);
            apply(&mut s, &out);
            on_cpu0.push(cap.queue[0][0].0);
        }
        // Round k starts at CPU k mod 4 (the launch round does not count).
        // Round 0: CPU 0 (0.5 ≤ 0.875) skips; CPU 1 (1 > 0.875 × 1.01) swaps
        // its task 0 with CPU 0's task 3; CPUs 2-3 find CPU 0 recently
        // migrated. Round 1 starts at CPU 1, now holding task 3: task 3 goes
        // back. Round 2 starts at CPU 2 → task 1; round 3 at CPU 3 → task 2.
        // Over the launch round and rounds 0-3 each task has one interval on
        // the noisy CPU except task 3, which has two.
        assert_eq!(on_cpu0, vec![0, 3, 1, 2]);
        assert_eq!(cap.stats.swaps, 4);
    }

    #[test]
    fn a_round_charges_a_pass_on_every_cpu_and_each_move_on_both_sides() {
        // As above: CPU 0 loses 500 ms; launch pins t0..t3 on CPUs 1, 2, 3, 0.
        // The launch round charges nothing (the launcher pinned before the
        // balancers started). Round 0: every balancer runs its pass, 8 µs on
        // each CPU; CPU 1 swaps its t0 with CPU 0's t3, both running: two
        // sched_setaffinity calls by CPU 1's balancer (2 × 7.6 µs there), and
        // each task's migration thread on its own CPU (7.6 µs on CPU 1 for t0,
        // 7.6 µs on CPU 0 for t3). CPU 0: 8 + 7.6 = 15.6 µs; CPU 1: 8 + 15.2
        // + 7.6 = 30.8 µs; CPUs 2-3: 8 µs.
        let topo = Topology::fast_slow(0, 2.0, 4, 1.0, 4);
        let mut cap = Capability::new(CapabilityParams::default(), &topo);
        let mut s = snap(&[500, 0, 0, 0], &[(0, 0), (1, 1), (2, 2), (3, 3)], &[]);
        let mut out = Vec::new();
        cap.place(&topo, &s, &mut out);
        assert!(cap.own_cost().is_empty());
        apply(&mut s, &out);
        out.clear();
        cap.place(&topo, &s, &mut out);
        assert_eq!(cap.stats.swaps, 1);
        let us = |c: u32, ns: u64| (CpuId(c), Nanos(ns));
        assert_eq!(cap.own_cost(), &[us(0, 15_600), us(1, 30_800), us(2, 8_000), us(3, 8_000)]);
        // A sleeping task is only re-pointed: no migration thread on its CPU.
        let mut cap = Capability::new(CapabilityParams::default(), &topo);
        let mut s = snap(&[500, 0, 0, 0], &[(0, 0), (1, 1), (2, 2), (3, 3)], &[]);
        out.clear();
        cap.place(&topo, &s, &mut out);
        apply(&mut s, &out);
        s.tasks[3].state = TaskState::Blocked;
        out.clear();
        cap.place(&topo, &s, &mut out);
        assert_eq!(cap.own_cost(), &[us(0, 8_000), us(1, 30_800), us(2, 8_000), us(3, 8_000)]);
        // Free when asked: `pass_us = 0`, `move_us = 0` report nothing.
        let p = CapabilityParams { pass: Nanos::ZERO, move_cost: Nanos::ZERO, ..CapabilityParams::default() };
        let mut cap = Capability::new(p, &topo);
        out.clear();
        cap.place(&topo, &s, &mut out);
        out.clear();
        cap.place(&topo, &s, &mut out);
        assert!(cap.own_cost().is_empty());
    }

    #[test]
    fn cache_policy_gives_the_smallest_working_set() {
        // Static asymmetry: CPU 1 half speed. CPU 0 hosts tasks 0 (4 MiB) and
        // 2 (64 KiB); CPU 1 hosts task 1. Speeds 1.0 and 0.5:
        // ECPT(0) = 1 s / 2 = 0.5, ECPT(1) = 0.5 s / 1 = 0.5 → equal, no swap;
        // so make CPU 1 noisy too: 200 ms noise → ECPT(1) = 0.4, avg 0.45,
        // CPU 0 at 0.5 > 0.45 × 1.01 = 0.4545 → swaps the smallest set, task 2.
        let topo = Topology::fast_slow(1, 1.0, 1, 0.5, 2);
        let p = CapabilityParams { selection: Selection::Cache, ..CapabilityParams::default() };
        let mut cap = Capability::new(p, &topo);
        let mut s = snap(&[0, 200], &[(0, 0), (1, 1), (2, 0)], &[4096, 512, 64]);
        let mut out = Vec::new();
        cap.place(&topo, &s, &mut out);
        // Launch: EC(0) = 1.0 s, EC(1) = 0.5 × 0.8 s = 0.4 s.
        // t0 → CPU 0 (1.0 vs 0.4); t1 → CPU 0 (1.0/2 = 0.5 beats 0.4 by more
        // than the 1 % tolerance); t2: 1.0/3 = 0.33 < 0.4 → CPU 1. The same
        // counts, 2 and 1, in another order. Re-home by hand to the example layout.
        assert_eq!(out.iter().map(|c| c.mask.first().unwrap().0).collect::<Vec<_>>(), vec![0, 0, 1]);
        cap.queue = vec![VecDeque::from([TaskId(0), TaskId(2)]), VecDeque::from([TaskId(1)])];
        cap.home = vec![Some(CpuId(0)), Some(CpuId(1)), Some(CpuId(0))];
        apply(&mut s, &out);
        out.clear();
        cap.place(&topo, &s, &mut out);
        assert_eq!(
            out,
            vec![
                AffinityChange { task: TaskId(2), mask: CpuSet::single(CpuId(1)) },
                AffinityChange { task: TaskId(1), mask: CpuSet::single(CpuId(0)) },
            ]
        );
    }

    #[test]
    fn a_cpu_whose_task_ended_takes_one_from_a_cpu_with_two() {
        // 4 equal CPUs, 5 tasks: launch pins t0..t3 on CPUs 0..3 (empty CPUs
        // first) and t4 on CPU 0 (EC/2 everywhere, its own CPU wins the tie).
        let topo = Topology::fast_slow(0, 2.0, 4, 1.0, 4);
        let mut cap = Capability::new(CapabilityParams::default(), &topo);
        let mut s = snap(&[0, 0, 0, 0], &[(0, 0), (1, 1), (2, 2), (3, 3), (4, 0)], &[]);
        let mut out = Vec::new();
        cap.place(&topo, &s, &mut out);
        assert_eq!(out.iter().map(|c| c.mask.first().unwrap().0).collect::<Vec<_>>(), vec![0, 1, 2, 3, 0]);
        apply(&mut s, &out);
        // t3 ends: CPU 3 has no active task, ECPT = EC = 1 s; CPU 0: 1/2 = 0.5;
        // avg = (0.5 + 1 + 1 + 1) / 4 = 0.875. Swaps alone would keep the
        // counts 2, 1, 1, 0 forever. Rounds 0-2 start at CPUs 0-2: CPU 0 is
        // below average, CPUs 1 and 2 each swap a task with CPU 0 (counts
        // unchanged). Round 3 starts at CPU 3: empty, above average → takes
        // CPU 0's FIFO head (a move, one change): counts 1, 1, 1, 1.
        let t3 = s.tasks.iter_mut().find(|t| t.id == TaskId(3)).unwrap();
        (t3.active, t3.state) = (false, TaskState::Done);
        for _ in 0..4 {
            out.clear();
            cap.place(&topo, &s, &mut out);
            apply(&mut s, &out);
        }
        assert_eq!((cap.stats.swaps, cap.stats.moves), (3, 1));
        assert_eq!(out.len(), 1, "round 3 is one move");
        let active_on = |c: usize| cap.queue[c].iter().filter(|t| **t != TaskId(3)).count();
        assert_eq!((0..4).map(active_on).collect::<Vec<_>>(), vec![1, 1, 1, 1]);
        // Balanced (ECPT 1 s everywhere = the average): no more changes.
        out.clear();
        cap.place(&topo, &s, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }
    #[test]
    fn an_interval_of_heavy_irq_load_swaps_and_never_empties_the_noisy_cpu() {
        // Dynamic asymmetry as in the paper's NIC flood: 4 equal CPUs, one
        // task each, and in this interval CPU 0 loses 550 ms of 1 s to IRQs.
        // ECPT = 0.45, 1, 1, 1; avg = 0.8625. Round 0 starts at CPU 0 (below
        // average: skips); CPU 1 (1 > 0.8625 × 1.01) is the first holder and
        // CPU 0 the remote. A move would give CPU 0's task 1 / 2 = 0.5 > 0.45
        // on CPU 1, but would stack it with CPU 1's task and idle CPU 0, which
        // as an empty CPU below the average (0.45) would never take a task
        // back: so it swaps. CPUs 2-3 find CPU 0 recently migrated.
        let topo = Topology::fast_slow(0, 2.0, 4, 1.0, 4);
        let mut cap = Capability::new(CapabilityParams::default(), &topo);
        let mut s = snap(&[0, 0, 0, 0], &[(0, 0), (1, 1), (2, 2), (3, 3)], &[]);
        let mut out = Vec::new();
        cap.place(&topo, &s, &mut out);
        apply(&mut s, &out);
        s.cpus[0].busy = Nanos::from_ms(450);
        s.cpus[0].noise = Nanos::from_ms(550);
        out.clear();
        cap.place(&topo, &s, &mut out);
        assert_eq!((cap.stats.swaps, cap.stats.moves), (1, 0));
        assert_eq!(
            out,
            vec![
                AffinityChange { task: TaskId(1), mask: CpuSet::single(CpuId(0)) },
                AffinityChange { task: TaskId(0), mask: CpuSet::single(CpuId(1)) },
            ]
        );
        assert_eq!(cap.queue.iter().map(|q| q.len()).collect::<Vec<_>>(), vec![1, 1, 1, 1]);
    }

    #[test]
    fn an_empty_noisy_cpu_below_the_average_takes_a_task_from_a_stack() {
        // Launched during an IRQ burst: CPU 0 loses 550 ms of 1 s, EC = 0.45,
        // 1, 1, 1. t0 → CPU 1, t1 → CPU 2, t2 → CPU 3 (the empty CPUs with
        // EC 1); t3: 0.45 on CPU 0 against 1/2 = 0.5 on CPUs 1-3 → CPU 1
        // (fewest tasks tie, lowest id). Counts 0 / 2 / 1 / 1.
        let topo = Topology::fast_slow(0, 2.0, 4, 1.0, 4);
        let mut cap = Capability::new(CapabilityParams::default(), &topo);
        let mut s = snap(&[550, 0, 0, 0], &[(0, 0), (1, 0), (2, 0), (3, 0)], &[]);
        let mut out = Vec::new();
        cap.place(&topo, &s, &mut out);
        assert_eq!(out.iter().map(|c| c.mask.first().unwrap().0).collect::<Vec<_>>(), vec![1, 2, 3, 1]);
        apply(&mut s, &out);
        // Next interval CPU 0 loses 400 ms: ECPT = 0.6 (empty: its EC), 0.5,
        // 1, 1; avg 0.775. Round 0 starts at CPU 0: below the average, so
        // step 3 alone would skip it — and CPUs 2-3 would only swap with the
        // stacked CPU 1 (1 / 2 = 0.5 no better than 0.5), leaving CPU 0 idle
        // for good. Empty, it takes CPU 1's FIFO head t0 (0.6 / 1 > 0.5 ×
        // 1.01): counts 1 / 1 / 1 / 1. CPUs 1-3 then find only recently
        // migrated CPUs below the average: one change in the round.
        s.cpus[0].busy = Nanos::from_ms(600);
        s.cpus[0].noise = Nanos::from_ms(400);
        out.clear();
        cap.place(&topo, &s, &mut out);
        assert_eq!(out, vec![AffinityChange { task: TaskId(0), mask: CpuSet::single(CpuId(0)) }]);
        assert_eq!((cap.stats.swaps, cap.stats.moves), (0, 1));
        assert_eq!(cap.queue.iter().map(|q| q.len()).collect::<Vec<_>>(), vec![1, 1, 1, 1]);
    }

    #[test]
    fn static_asymmetry_launch_pins_in_proportion_to_speed() {
        // The paper's static asymmetry: CPU 0 at 2.2 GHz, CPUs 1-3 at 1.1 GHz,
        // no noise, so EC = 2.2 and 1.1 (× 1 s). 8 tasks, all reported on CPU 0.
        // t0: shares 2.2 / 1.1 / 1.1 / 1.1 → CPU 0.
        // t1: 2.2/2 = 1.1 on CPU 0 ties 1.1 on the empty CPUs → fewest → CPU 1;
        //     t2 → CPU 2 and t3 → CPU 3 likewise (CPU 0's 1.1 ties, it has more).
        // t4: 2.2/2 = 1.1 > 1.1/2 = 0.55 → CPU 0; t5: 2.2/3 = 0.73 > 0.55 → CPU 0.
        // t6: 2.2/4 = 0.55 ties 0.55 everywhere → fewest (1 task): CPUs 1-3 → CPU 1.
        // t7: 0.55 on CPUs 0, 2, 3 (0.37 on CPU 1) → fewest among them → CPU 2.
        // Counts 3 / 2 / 2 / 1: the fast CPU takes its speed's share.
        let topo = Topology::fast_slow(1, 2.2, 3, 1.1, 4);
        let mut cap = Capability::new(CapabilityParams::default(), &topo);
        let tasks: Vec<(u32, u32)> = (0..8).map(|t| (t, 0)).collect();
        let mut s = snap(&[0, 0, 0, 0], &tasks, &[]);
        let mut out = Vec::new();
        cap.place(&topo, &s, &mut out);
        let homes: Vec<u32> = out.iter().map(|c| c.mask.first().unwrap().0).collect();
        assert_eq!(homes, vec![0, 1, 2, 3, 0, 0, 1, 2]);
        apply(&mut s, &out);
        // Next round: ECPT 2.2/3 = 0.73, 0.55, 0.55, 1.1; avg 0.73. CPU 3
        // (1.1 > avg) would give its task a share 1.1/2 = 0.55 — no better
        // than the 0.55 it has on CPU 1 or 2 — so it swaps, never moves: the
        // counts stay in proportion. (On four equal CPUs CPU 0 would hold the smallest
        // ECPT, 1/3, and CPU 3 would take one of its tasks: 1/2 > 1/3.)
        out.clear();
        cap.place(&topo, &s, &mut out);
        assert_eq!((cap.stats.moves, cap.stats.swaps), (0, 1));
        let counts: Vec<usize> = cap.queue.iter().map(|q| q.len()).collect();
        assert_eq!(counts, vec![3, 2, 2, 1]);
    }
}
