//! Capacity contention in a shared last-level cache (`Topology::llc_contention`):
//! tasks computing at once on CPUs of one memory domain (the CPUs sharing
//! an LLC of `CacheSpec::llc_kb`) share its capacity, and the part of a
//! task's working set its co-runners evict is fetched from memory instead.
//!
//! Why: on a chip multiprocessor the threads running on the cores of one
//! shared cache divide it among themselves, and a thread whose share is
//! smaller than its working set misses where it would have hit alone —
//! the slowdown that co-scheduling a domain's vCPUs on one chip can add
//! (Chandra, Guo, Kim, Solihin, "Predicting Inter-Thread Cache Contention on
//! a Chip Multi-Processor Architecture", HPCA 2005, §3: each thread's share
//! of an LRU-managed shared cache follows how much of it the thread
//! touches; their frequency-of-access model). The model here has no access
//! rates, so it takes a task's working set as its claim: a capacity model,
//! not a bandwidth model (the bandwidth one is `engine::bus`).
//!
//! The rule, per memory domain, per instant (it changes only when a task
//! starts or stops computing on one of its CPUs):
//! - A computing task with working set `w` (KiB) larger than its private
//!   L2 (`CacheSpec::l2_kb`) claims `w` of the LLC; one whose working set
//!   fits its L2 never reaches the LLC, claims nothing and loses nothing
//!   (LRU ages out lines nobody re-touches there).
//! - Alone, the share of its LLC accesses that hit is `h_a = min(1, C/w)`
//!   (`C` = `llc_kb`). With the claims `W = Σ w` of all the domain's
//!   computing tasks over `C`, each holds `C·w/W`, so `h_s = min(1, C/W)`.
//! - A miss costs `R = llc_refill_gbps / dram_refill_gbps` times a hit (the
//!   machine's own refill bandwidths, `CacheSpec`; the defaults 7 and 2.4
//!   GB/s give R ≈ 2.9). Its memory-bound share `m` stretches by
//!   `k = (h_s + (1 − h_s)·R) / (h_a + (1 − h_a)·R)`, scaled by how much
//!   the cache helps it at all (`overlap`, 0 for a streaming program that
//!   misses anyway): its cost per ns of work becomes
//!   `c + m·overlap·(k − 1)` (`c` its cost alone, `fixed::cost`).
//!
//! Worked example (test below): two tasks with 2 MiB working sets and
//! `m` = 0.5 on a 2 MiB LLC: `W` = 4096 > 2048, `h_s` = 1/2, `h_a` = 1,
//! `k` = (0.5 + 0.5·R)/1; with R = 3: `k` = 2, cost 1 + 0.5·1 = 1.5 CPU ns
//! per ns of work for each while both compute.
//!
//! Not modelled: the refill after a migration (`engine::trail`: what the
//! task itself moved away) does not count the lines co-runners evicted; a spinning task claims nothing (it spins in its L1); the bus and
//! clock modulation are not combined with it (a scenario asking for both
//! is refused).
//!
//! May import: `engine::fixed` and the model. Must never import `Sim` or
//! any room that extends it: the engine (`engine::shared`) settles the
//! tasks and re-plans them.

use super::fixed::ONE;
use ampsched_model::topology::CacheSpec;
use ampsched_model::TaskId;

/// One task computing on a CPU of a memory domain, with its claim on the LLC.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Member {
    /// The task.
    pub(super) task: TaskId,
    /// Speed of its CPU (the cost is cached for it).
    pub(super) speed: f64,
    /// Its working set, KiB (its claim).
    pub(super) ws: f64,
    /// Memory-bound share times `overlap`: how much of its work a miss slows.
    pub(super) exposed: f64,
    /// CPU ns per ns of work alone (`fixed` cost).
    pub(super) alone: u64,
    /// CPU ns per ns of work now (`fixed` cost).
    pub(super) cost: u64,
}

/// The shared caches of a machine and the tasks computing under each.
pub(super) struct Llc {
    /// LLC capacity per memory domain, KiB.
    cap: f64,
    /// Private L2, KiB: a working set this small claims nothing.
    l2: f64,
    /// Cost of a miss over a hit, `R`.
    ratio: f64,
    /// Per memory domain, its members in the order they joined.
    pub(super) doms: Vec<Vec<Member>>,
    /// Per task, the memory domain it is a member of.
    pub(super) of: Vec<Option<u32>>,
    /// Members whose cost a change moved, with their CPU's speed and new cost
    /// (scratch lent to the engine's `Sim::recost`).
    pub(super) changed: Vec<(TaskId, f64, u64)>,
}

impl Llc {
    /// The caches of a machine with `ndom` memory domains and `ntasks` tasks.
    pub(super) fn new(cache: &CacheSpec, ndom: usize, ntasks: usize) -> Llc {
        Llc {
            cap: cache.llc_kb as f64,
            l2: cache.l2_kb as f64,
            ratio: cache.llc_refill_gbps / cache.dram_refill_gbps,
            doms: vec![Vec::new(); ndom],
            of: vec![None; ntasks],
            changed: Vec::new(),
        }
    }

    /// Whether a working set of `ws_kb` reaches the LLC (larger than the private L2).
    pub(super) fn claims(&self, ws_kb: u32) -> bool {
        ws_kb as f64 > self.l2
    }

    /// Set every member's cost of domain `d` for its present co-runners.
    pub(super) fn divide(&mut self, d: usize) {
        let total: f64 = self.doms[d].iter().map(|m| m.ws).sum();
        let (cap, ratio) = (self.cap, self.ratio);
        for m in &mut self.doms[d] {
            let k = stretch(cap, ratio, m.ws, total);
            m.cost = m.alone + (m.exposed * (k - 1.0) * ONE as f64).round() as u64;
        }
    }
}

/// The stretch `k` of the memory-bound share of a task with working set `ws`
/// (KiB) under an LLC of `cap` KiB whose misses cost `ratio` times a hit, when
/// the claims of its memory domain add up to `total` (module docs).
pub(super) fn stretch(cap: f64, ratio: f64, ws: f64, total: f64) -> f64 {
    let h = |claim: f64| (cap / claim).min(1.0);
    let time = |h: f64| h + (1.0 - h) * ratio;
    time(h(total)) / time(h(ws))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixed::cost;

    fn llc(llc_kb: u32, llc_gbps: f64, dram_gbps: f64) -> Llc {
        let c = CacheSpec { l2_kb: 512, llc_kb, llc_refill_gbps: llc_gbps, dram_refill_gbps: dram_gbps };
        Llc::new(&c, 1, 4)
    }

    fn member(t: u32, ws: f64, mem: f64) -> Member {
        let alone = cost(1.0, mem);
        Member { task: TaskId(t), speed: 1.0, ws, exposed: mem, alone, cost: alone }
    }

    #[test]
    fn two_working_sets_that_fill_the_llc_twice_each_miss_half() {
        // 2 MiB LLC, a miss 3× a hit (6 over 2 GB/s). Two tasks of 2 MiB, m = 0.5:
        // W = 4096, h_s = 1/2, h_a = 1, k = (1/2 + 1/2 · 3) / 1 = 2; cost
        // (1 − 0.5) + 0.5 · 2 = 1.5 each.
        let mut l = llc(2048, 6.0, 2.0);
        l.doms[0] = vec![member(0, 2048.0, 0.5), member(1, 2048.0, 0.5)];
        l.divide(0);
        assert!(l.doms[0].iter().all(|m| m.cost == 3 * ONE / 2));
        // One alone fits: k = 1, its cost alone (1.0).
        l.doms[0].pop();
        l.divide(0);
        assert_eq!(l.doms[0][0].cost, ONE);
        // A 4 MiB task alone already misses half (h_a = 1/2); with a 4 MiB
        // co-runner W = 8192, h_s = 1/4: k = (1/4 + 3/4 · 3) / (1/2 + 1/2 · 3)
        // = 2.5 / 2 = 1.25; m = 0.2: cost 0.8 + 0.2 · 1.25 = 1.05.
        l.doms[0] = vec![member(0, 4096.0, 0.2), member(1, 4096.0, 0.2)];
        l.divide(0);
        assert!(l.doms[0].iter().all(|m| m.cost == (1.05 * ONE as f64).round() as u64), "{:?}", l.doms[0]);
        // Claims that fit together (1 + 1 MiB on 2 MiB) cost nothing.
        l.doms[0] = vec![member(0, 1024.0, 0.5), member(1, 1024.0, 0.5)];
        l.divide(0);
        assert!(l.doms[0].iter().all(|m| m.cost == ONE));
    }

    #[test]
    fn a_working_set_inside_the_l2_claims_nothing() {
        let l = llc(2048, 6.0, 2.0);
        assert!(!l.claims(512) && l.claims(513));
    }
}
