//! Where a task's data still is after a migration: the refill a migration
//! owes is the part of the working set the task touched since it last ran on
//! the destination's caches, up to the whole of it (issue 16, D5).
//!
//! A cache keeps a task's lines while the task runs elsewhere, until they are
//! invalidated or evicted; what the task must fetch again on its return is
//! what it moved away meanwhile. That is cache affinity as Kazempour,
//! Fedorova and Alagheband define it ("Performance implications of cache
//! affinity on multicore processors", Euro-Par 2008: the cache has
//! accumulated some amount of the process's state, and rescheduling the
//! process where that state is saves re-fetching it), and what Linux
//! approximates by time in `task_hot()` (`kernel/sched/fair.c`: a task that
//! ran within `sysctl_sched_migration_cost` of now is cache-hot). The
//! model's unit of "touched" is the refill itself: when a task arrives on a
//! cache that lacks its data it pulls its working set in at the refill rate
//! (`CacheSpec::refill_cost`, latency-bound misses interleaved with work,
//! `engine::task`), and every line it pulls into the new cache is a line the
//! old one no longer holds current (MESI: a write invalidates the other
//! copies; we take every touched line as written, an upper bound). So a task
//! keeps one counter, `moved`, the share of its working set it has pulled into
//! caches by refills since it began (read at each move from the refill owed
//! then and now: only payment lowers it in between), and a mark of that
//! counter for each cache it left: arriving back on a cache it left at mark `m`, it owes the
//! share `moved − m` of that cache's full refill (whole, once the difference
//! reaches one working set).
//!
//! The caches are the private L2 of each CPU and the shared last-level cache
//! of each memory domain, the two refills `CacheSpec::refill_cost` already
//! distinguishes: a move within a memory domain refills the L2 from the LLC,
//! one across refills both from DRAM. Arriving across domains the task owes
//! the larger of the two partial refills: its LLC share from DRAM and its L2
//! share from the LLC (they overlap in time). A task remembers the last two
//! L2s and the last two memory domains it left (a two-entry LRU each; the
//! record lives beside the task and is read only when it migrates), enough for the ping-pong between two CPUs that a
//! fast-core hand-over (AASH's steal and swap), a co-scheduler's pull or a
//! barrier wake-up produces; a cache not remembered is taken as cold. Other
//! tasks' evictions on the cache meanwhile are not modelled (the shared-LLC
//! contention model is separate): the refill after a bounce is a lower bound
//! when the cache was busy, the whole refill after a long absence an upper
//! one when it was not.
//!
//! Worked example (the unit test below): default cache, an 8 MiB working set
//! (full refills 74 898 ns within a domain, 1 092 267 ns across). A task
//! moves from CPU 0 to CPU 1 in the same domain and owes 74 898 ns; it runs
//! 50 000 ns of CPU time there, half of which pays refill (25 000 ns, a third
//! of its working set moved); moved back to CPU 0 it owes a third of
//! 74 898 ns, 25 000 ns, not the whole refill the fixed cost charged.
//!
//! May import: `engine::fixed` and the model. Must never import another room of the engine.

use super::fixed::SHIFT;
use ampsched_model::CpuId;

/// One whole working set as a share of `Trail::moved` (2^20).
pub(super) const WHOLE: u64 = 1 << 20;

/// An empty slot of a `Trail` LRU.
const NONE: u32 = u32::MAX;

/// The first slot of the L2s' LRU in `Trail::keys` and `Trail::marks`.
const L2: usize = 0;
/// The first slot of the LLCs' LRU.
const LLC: usize = 2;

/// A task's record of what it moved away from the caches it left: one
/// 64-byte line, read and written only when the task migrates.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Trail {
    /// Share of the working set pulled into caches by refills since the task
    /// began, in units of `1 / WHOLE` (saturating).
    moved: u64,
    /// Per LRU slot, `moved` when the task left that cache.
    marks: [u64; 4],
    /// The LRUs' caches (`NONE`: empty): the last two CPUs (private L2s) left,
    /// most recent first, at `L2`; the last two memory domains (LLCs) at `LLC`.
    keys: [u32; 4],
    /// The refill owed at the last move, in whole ns (saturating): what the
    /// task owes now is less by what it has paid since (`Task::refill_left`
    /// only falls between moves), so the next move reads the payment from the two.
    owed_ns: u32,
    /// The full refill of the refill being paid, in whole ns (saturating):
    /// the divisor that turns a payment into a share of the working set.
    full_ns: u32,
}

impl Default for Trail {
    fn default() -> Self {
        Trail { moved: 0, marks: [0; 4], keys: [NONE; 4], owed_ns: 0, full_ns: 0 }
    }
}

/// Whole ns of an amount, saturating at `u32::MAX` (a refill of 4.3 s: no cache is that slow).
#[inline]
fn ns32(a: u128) -> u32 {
    (a >> SHIFT).min(u32::MAX as u128) as u32
}

/// `full` scaled by `share` of a working set (`WHOLE`: all of it), rounded down.
#[inline]
fn scale(full: u128, share: u64) -> u128 {
    if share >= WHOLE {
        full
    } else {
        full * share as u128 / WHOLE as u128
    }
}

impl Trail {
    /// The share of a working set touched since the task left `key`, in the
    /// LRU at slot `lru` (whole when not remembered).
    #[inline]
    fn touched(&self, lru: usize, key: u32) -> u64 {
        let i = if self.keys[lru] == key {
            lru
        } else if self.keys[lru + 1] == key {
            lru + 1
        } else {
            return WHOLE;
        };
        (self.moved - self.marks[i]).min(WHOLE)
    }

    /// Record in the LRU at slot `lru` that the task leaves `key` now.
    #[inline]
    fn remember(&mut self, lru: usize, key: u32) {
        if self.keys[lru] != key {
            self.keys[lru + 1] = self.keys[lru];
            self.marks[lru + 1] = self.marks[lru];
        }
        self.keys[lru] = key;
        self.marks[lru] = self.moved;
    }

    /// The refill owed (an amount) on moving `from` a CPU and its memory
    /// domain `to` another, given the full refills within a domain (`local`)
    /// and across (`remote`, read only when the domains differ: the caller
    /// may pass 0 otherwise) and the refill still owed from the last move
    /// (`left`); records that the task left `from`.
    pub(super) fn arrive(
        &mut self,
        from: (CpuId, u32),
        to: (CpuId, u32),
        local: u128,
        remote: u128,
        left: u128,
    ) -> u128 {
        let ((from, from_md), (to, to_md)) = (from, to);
        self.settle(left);
        let mut cost = scale(local, self.touched(L2, to.0));
        let mut full = local;
        let across = from_md != to_md;
        if across {
            let far = scale(remote, self.touched(LLC, to_md));
            if far >= cost {
                (cost, full) = (far, remote);
            }
        }
        self.remember(L2, from.0);
        if across {
            self.remember(LLC, from_md);
        }
        self.full_ns = ns32(full);
        self.owed_ns = ns32(cost);
        cost
    }

    /// Count the refill paid since the last move (owed then, `left` now) as
    /// that share of the working set moved into the cache the task is
    /// leaving (whole ns over the full refill's whole ns, rounded down).
    #[inline]
    fn settle(&mut self, left: u128) {
        let paid_ns = self.owed_ns.saturating_sub(ns32(left)).min(self.full_ns);
        if paid_ns != 0 {
            self.moved = self.moved.saturating_add(u64::from(paid_ns) * WHOLE / u64::from(self.full_ns));
        }
    }

    /// The share of its working set the task has moved between caches so far.
    #[cfg(test)]
    pub(super) fn moved(&self) -> u64 {
        self.moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Amounts as the engine keeps them (`engine::fixed`: 2^-32 ns).
    fn ns(n: u64) -> u128 {
        (n as u128) << 32
    }

    /// Full refills of an 8 MiB working set under the default cache: within a
    /// domain 512 KiB at 7 GB/s, across 2.5 MiB at 2.4 GB/s.
    const LOCAL: u64 = 74_898;
    const REMOTE: u64 = 1_092_267;

    /// Move from CPU `from` (domain `fm`) to `to` (domain `tm`) after paying
    /// `paid` of the refill owed at the last move; the refill now owed.
    fn after(t: &mut Trail, paid: u128, (from, fm): (u32, u32), (to, tm): (u32, u32)) -> u128 {
        let left = (u128::from(t.owed_ns) << SHIFT) - paid;
        t.arrive((CpuId(from), fm), (CpuId(to), tm), ns(LOCAL), ns(REMOTE), left)
    }

    #[test]
    fn a_bounce_back_owes_what_was_touched_away_not_the_whole_refill() {
        // The module's worked example.
        let mut t = Trail::default();
        // CPU 0 → CPU 1, same domain, never there: the whole L2 refill.
        assert_eq!(after(&mut t, 0, (0, 0), (1, 0)), ns(LOCAL));
        // 50 000 ns of CPU time on CPU 1 pays half of it in refill, 25 000 ns:
        // back to CPU 0 it owes 25 000 / 74 898 of the full L2 refill (the
        // share in 2^-20 units, rounded down: a little under 25 000 ns).
        let back = after(&mut t, ns(25_000), (1, 0), (0, 0));
        assert_eq!(t.moved(), 25_000 * WHOLE / LOCAL);
        assert!(back <= ns(25_000) && back > ns(24_999), "{back}");
        // A third CPU it never ran on: cold, the whole refill.
        assert_eq!(after(&mut t, 0, (0, 0), (2, 0)), ns(LOCAL));
    }

    #[test]
    fn a_whole_working_set_moved_away_makes_the_return_cold_again() {
        let mut t = Trail::default();
        after(&mut t, 0, (0, 0), (1, 0));
        // The whole refill paid on CPU 1: back on CPU 0, all of it again.
        assert_eq!(after(&mut t, ns(LOCAL), (1, 0), (0, 0)), ns(LOCAL));
        // Nothing paid since: straight back to CPU 1 owes nothing.
        assert_eq!(after(&mut t, 0, (0, 0), (1, 0)), 0);
    }

    #[test]
    fn across_domains_the_larger_partial_refill_is_owed() {
        let mut t = Trail::default();
        // CPU 0 (domain 0) → CPU 4 (domain 1): cold, the whole DRAM refill.
        assert_eq!(after(&mut t, 0, (0, 0), (4, 1)), ns(REMOTE));
        // A tenth of it paid there, then back to CPU 0: a tenth of the DRAM
        // refill (109 226.7 ns; the share is taken in whole ns, so a little
        // under) beats a tenth of the L2's (7 489.8 ns).
        let back = after(&mut t, ns(REMOTE) / 10, (4, 1), (0, 0));
        assert!(back > ns(109_225) && back <= ns(109_227), "{back}");
        // To CPU 1 (domain 0, its L2 never filled) after a hundredth moved
        // away: the LLC still holds 99/100 (10 922.7 ns from DRAM owed), but
        // the L2 is cold: the whole L2 refill from the LLC, 74 898 ns, is owed.
        let mut u = Trail::default();
        after(&mut u, 0, (0, 0), (4, 1));
        assert_eq!(after(&mut u, ns(REMOTE) / 100, (4, 1), (1, 0)), ns(LOCAL));
    }

    #[test]
    fn the_lru_keeps_the_last_two_caches_left() {
        let mut t = Trail::default();
        after(&mut t, 0, (0, 0), (1, 0));
        after(&mut t, 0, (1, 0), (2, 0));
        // A debt left unpaid is not a payment: CPUs 1 and 0 are both
        // remembered and nothing was touched away, so back on 0 nothing is owed.
        assert_eq!(after(&mut t, 0, (2, 0), (0, 0)), 0);
        // Left 2, then 0 (now at 3): 1 has fallen out, cold.
        after(&mut t, 0, (0, 0), (3, 0));
        assert_eq!(after(&mut t, 0, (3, 0), (1, 0)), ns(LOCAL));
    }

    #[test]
    fn a_trail_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Trail>(), 64);
        assert_eq!(std::mem::align_of::<Trail>(), 64);
    }
}
