//! Scheduling domains and the balancer's vocabulary for the `linux` model:
//! the levels built after `kernel/sched/topology.c` (`build_levels`), the
//! group classification, migration and idle types, per-group statistics
//! (`struct sg_lb_stats`) and `capacity_greater`. Data and pure functions:
//! `balance` (the algorithm, on `Linux`) and the parent module use them.
//!
//! May import: the model and `std`. Must never import the parent module or
//! `balance` (they import this one).

use ampsched_model::{CpuId, CpuSet, Topology};

/// `capacity_greater`: `a` exceeds `b` by more than ~5 %.
pub fn capacity_greater(a: u64, b: u64) -> bool {
    a * 1024 > b * 1078
}

/// One scheduling-domain level.
#[derive(Clone, Debug)]
pub struct Level {
    /// "MC" (an LLC, groups of one CPU) or "PKG" (the machine, groups = LLCs).
    pub name: &'static str,
    /// Per CPU: the span of its domain at this level.
    pub span: Vec<CpuSet>,
    /// Per CPU: the groups of its domain, its own (local) group first, then
    /// the others in CPU order from it.
    pub groups: Vec<Vec<CpuSet>>,
    /// Per CPU: CPUs in its span (`sd->span_weight`).
    pub weight: Vec<u32>,
    /// SD_SHARE_LLC.
    pub share_llc: bool,
    /// SD_ASYM_CPUCAPACITY: the span mixes original capacities.
    pub asym: bool,
    /// The child level asks to spread tasks over groups (SD_PREFER_SIBLING).
    pub prefer_sibling: bool,
    /// The top level (its statistics refresh the root domain's overloaded flag).
    pub top: bool,
}

fn level(name: &'static str, spans: &[CpuSet], groups: &[CpuSet], n: usize, cap: &[u64]) -> Level {
    let span_of = |c: usize| *spans.iter().find(|s| s.contains(CpuId(c as u32))).expect("every CPU in a span");
    let span: Vec<CpuSet> = (0..n).map(span_of).collect();
    let groups_of = |c: usize| {
        let mine: Vec<CpuSet> =
            groups.iter().filter(|g| span[c].contains(g.first().expect("non-empty"))).copied().collect();
        let local = mine.iter().position(|g| g.contains(CpuId(c as u32))).expect("local group");
        (0..mine.len()).map(|k| mine[(local + k) % mine.len()]).collect::<Vec<_>>()
    };
    let asym = spans.iter().any(|s| {
        let caps: Vec<u64> = s.iter().map(|c| cap[c.idx()]).collect();
        caps.windows(2).any(|w| w[0] != w[1])
    });
    Level {
        name,
        groups: (0..n).map(groups_of).collect(),
        weight: span.iter().map(|s| s.len() as u32).collect(),
        span,
        share_llc: name == "MC",
        asym,
        prefer_sibling: false,
        top: false,
    }
}

/// The domain levels of `topo`, lowest first: MC over each memory domain
/// when one has several CPUs, PKG over the machine when there are several
/// memory domains (`build_sched_domains`, degenerate levels removed).
pub fn build_levels(topo: &Topology, cap: &[u64]) -> Vec<Level> {
    let n = topo.ncpus();
    if n < 2 {
        return Vec::new();
    }
    let llcs: Vec<CpuSet> = topo.mem_domains.iter().filter(|s| !s.is_empty()).copied().collect();
    let singles: Vec<CpuSet> = (0..n).map(|c| CpuSet::single(CpuId(c as u32))).collect();
    let mut out = Vec::new();
    if llcs.iter().any(|s| s.len() > 1) {
        out.push(level("MC", &llcs, &singles, n, cap));
    }
    if llcs.len() > 1 {
        let groups = if out.is_empty() { &singles } else { &llcs };
        let mut pkg = level("PKG", &[topo.all], groups, n, cap);
        pkg.prefer_sibling = out.first().is_some_and(|mc: &Level| !mc.asym);
        pkg.share_llc = false;
        out.push(pkg);
    }
    if let Some(l) = out.last_mut() {
        l.top = true;
    }
    out
}

/// `enum group_type`, the cases modelled, in the kernel's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupType {
    /// Spare capacity.
    HasSpare,
    /// Fully used, not overloaded.
    FullyBusy,
    /// A task that does not fit its CPU (or runs on reduced capacity).
    Misfit,
    /// More tasks than CPUs and not enough capacity.
    Overloaded,
}

/// `enum migration_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Migration {
    /// Move load.
    Load,
    /// Move utilisation.
    Util,
    /// Move a number of tasks.
    Task,
    /// Move the misfit task.
    Misfit,
}

/// `enum cpu_idle_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleType {
    /// A busy CPU's periodic balance.
    NotIdle,
    /// An idle CPU (nohz idle balance).
    Idle,
    /// A CPU about to idle.
    NewlyIdle,
}

/// `struct sg_lb_stats`.
#[derive(Clone, Debug)]
pub struct GroupStats {
    /// The group's CPUs.
    pub cpus: CpuSet,
    /// Σ cpu_load.
    pub load: u64,
    /// Σ cpu_util.
    pub util: u64,
    /// Σ cpu_runnable.
    pub runnable: u64,
    /// Σ capacity_of.
    pub capacity: u64,
    /// Smallest and largest capacity_of.
    pub min_capacity: u64,
    /// Largest capacity_of.
    pub max_capacity: u64,
    /// Σ fair tasks (`sum_h_nr_running`).
    pub nr: u32,
    /// Σ tasks of every class, RT included (`sum_nr_running`, from `rq->nr_running`).
    pub nr_running: u32,
    /// Idle CPUs.
    pub idle_cpus: u32,
    /// CPUs.
    pub weight: u32,
    /// Largest misfit (or reduced-capacity) load.
    pub misfit_load: u64,
    /// load × 1024 / capacity (overloaded and fully busy groups).
    pub avg_load: u64,
    /// Classification.
    pub ty: GroupType,
}
