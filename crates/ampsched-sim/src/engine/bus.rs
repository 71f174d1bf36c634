//! The memory bus all CPUs share (`Topology::memory_bus`): when the tasks
//! running at once ask more of it than it carries, the memory-bound share of
//! the heaviest users slows until what they use fits.
//!
//! Why: on a front-side-bus SMP every processor reaches memory over one bus
//! (the 4-way Xeon MP servers of 2003-2005: four processors on one 400 MT/s,
//! 8-byte bus, 3.2 GB/s: the IBM eServer xSeries 440 Redbook, chapter 1,
//! "Technical description", on the Xeon MP's 100 MHz quad-pumped bus). STREAM
//! measures that such a machine's sustainable bandwidth does not grow with
//! its processors once the bus is busy (McCalpin, "Memory Bandwidth and
//! Machine Balance in Current High Performance Computers", IEEE TCCA
//! Newsletter, Dec. 1995: its shared-memory systems), and a bandwidth-bound code such as swim runs
//! at the pace of the bytes it moves (McCalpin, "SWIM-BW" analysis,
//! www.cs.virginia.edu/stream/Analyses/SWIM-BW.html): its run time is
//! its traffic over the bandwidth it gets, not its cycles over the clock.
//!
//! The rule, per instant (it changes only when a task starts or stops
//! computing on a CPU):
//! - A computing task with memory-bound share `m` on a CPU of speed `v`
//!   takes `c = (1 − m)/v + m` CPU ns per ns of work alone (`fixed::cost`;
//!   `(1 − m + m·v_fast)/v` on a clock-modulated core, `fixed::cost_modulated`);
//!   of that, `m` is spent waiting on memory, during which its core draws
//!   `core_gbps` from the bus. So it asks the bus for the share
//!   `d = r·m / c` of the bus's time, `r = core_gbps / gbps`: its *demand*
//!   (a core of the study machine can fill the bus alone: `r` = 1).
//! - When the demands add up to at most 1, every task runs at `c`.
//!   Otherwise the bus is divided max-min fairly (water-filling): a task
//!   asking less than an equal share of what is left gets all it asks for,
//!   and the rest is split equally among the others at the *level* `L`.
//!   That is what round-robin arbitration among the bus agents gives (the
//!   P6/NetBurst bus's rotating symmetric-agent priority: a processor that
//!   asks rarely waits at most one turn, one that always asks gets the
//!   turns left): max-min fairness and its water-filling computation as in
//!   Bertsekas & Gallager, *Data Networks* (2nd ed., 1992), max-min flow
//!   control; round-robin service realises it (E. L. Hahne, "Round-Robin
//!   Scheduling for Max-Min Fairness in Data Networks", IEEE JSAC 9(7), 1991).
//! - A task held to `L < d` moves its bytes `L/d` as fast as it asks: its
//!   work rate is `L/(r·m)` per ns, so its cost becomes `r·m/L` (≥ `c`): the
//!   memory-bound share stretches and the compute share does not. The bus
//!   is then full: the held tasks' work rates add up to what the bus
//!   carries, whatever their CPUs' speeds (the utilisation law, `U = X·D ≤
//!   1` at the bottleneck: Lazowska, Zahorjan, Graham, Sevcik, *Quantitative
//!   System Performance*, 1984, ch. 5, asymptotic bounds).
//!
//! Not modelled: the time a CPU loses to noise still counts as asking (the
//! study's timer noise takes 0.45 % of a CPU); a spinning or busy-waiting
//! task asks nothing (it spins in its cache); the refill after a migration
//! asks what its work would.
//!
//! May import: `engine::fixed` and the model. Must never import `Sim` or any
//! room that extends it: the engine settles the tasks and re-plans them.

use super::fixed::ONE;
use ampsched_model::{MemoryBus, TaskId};

/// One task computing on a CPU, with what it asks of the bus.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Member {
    /// The task.
    pub(super) task: TaskId,
    /// Speed of its CPU.
    pub(super) speed: f64,
    /// Its memory-bound share.
    mem: f64,
    /// Share of the bus's time it asks for, `r·m / c`.
    demand: f64,
    /// CPU ns per ns of work with the bus to itself, `c` (`fixed` cost).
    alone: u64,
    /// CPU ns per ns of work now (`fixed` cost): alone, or held to the level.
    pub(super) cost: u64,
}

/// The bus and the tasks using it, in the order they started.
pub(super) struct Bus {
    /// What one stalled core draws over the bus's bandwidth.
    ratio: f64,
    /// The computing tasks with a memory-bound share, in the order they joined.
    pub(super) members: Vec<Member>,
    /// Demands sorted (scratch, kept to avoid an allocation per change).
    sorted: Vec<f64>,
    /// Members whose cost a change moved, with their CPU's speed and new cost
    /// (scratch lent to the engine's `Sim::recost`).
    pub(super) changed: Vec<(TaskId, f64, u64)>,
}

impl Bus {
    /// An empty bus of this machine.
    pub(super) fn new(b: &MemoryBus) -> Bus {
        Bus { ratio: b.core_gbps / b.gbps, members: Vec::new(), sorted: Vec::new(), changed: Vec::new() }
    }

    /// Task `t` starts computing on a CPU of `speed` with memory-bound share
    /// `mem` (> 0) at `alone` CPU ns per ns of work when it has the bus to itself
    /// (`fixed::cost`, or `fixed::cost_modulated` on a clock-modulated core).
    pub(super) fn join(&mut self, t: TaskId, speed: f64, mem: f64, alone: u64) {
        debug_assert!(self.members.iter().all(|m| m.task != t), "{t} joins the bus twice");
        let c = alone as f64 / ONE as f64;
        self.members.push(Member { task: t, speed, mem, demand: self.ratio * mem / c, alone, cost: alone });
    }

    /// Task `t` stops computing (if it was on the bus).
    pub(super) fn leave(&mut self, t: TaskId) {
        if let Some(i) = self.members.iter().position(|m| m.task == t) {
            self.members.remove(i);
        }
    }

    /// Divide the bus among the members: set each one's cost. Returns the level
    /// (`f64::INFINITY`: the bus is not full, nobody is held).
    pub(super) fn divide(&mut self) -> f64 {
        self.sorted.clear();
        self.sorted.extend(self.members.iter().map(|m| m.demand));
        let level = fair_level(&mut self.sorted);
        for m in &mut self.members {
            m.cost = if m.demand > level { held_cost(self.ratio, m.mem, level) } else { m.alone };
        }
        level
    }
}

/// The max-min fair level of a bus of capacity 1 among these demands (sorted
/// in place): `f64::INFINITY` when they fit, else the equal share `L` that
/// every demand above it gets once every demand below it is met in full.
pub(super) fn fair_level(demands: &mut [f64]) -> f64 {
    let total: f64 = demands.iter().sum();
    if total <= 1.0 {
        return f64::INFINITY;
    }
    demands.sort_by(f64::total_cmp);
    let mut left = 1.0;
    let n = demands.len();
    for (k, &d) in demands.iter().enumerate() {
        let share = left / (n - k) as f64;
        if d > share {
            return share;
        }
        left -= d;
    }
    // The demands add up to more than 1, so the last one exceeds what is left.
    unreachable!("demands {demands:?} add up to {total} > 1 yet all fit")
}

/// CPU ns per ns of work of a task with memory-bound share `mem` held to the
/// bus share `level` (`ratio` = core over bus bandwidth): `ratio·mem / level`,
/// as a `fixed` cost (rounded to nearest).
pub(super) fn held_cost(ratio: f64, mem: f64, level: f64) -> u64 {
    (ratio * mem / level * ONE as f64).round() as u64
}

#[cfg(test)]
mod tests {
    use super::super::fixed::cost;
    use super::*;

    fn bus(gbps: f64, core_gbps: f64) -> Bus {
        Bus::new(&MemoryBus { gbps, core_gbps })
    }

    #[test]
    fn two_fast_cores_fill_the_bus_as_four_do() {
        // A half memory-bound loop (m = 0.5) on a bus one core can fill (r = 1).
        // Fast CPU (speed 1): c = 0.5 + 0.5 = 1, demand 0.5/1 = 1/2.
        // Slow CPU (speed 1/8): c = 0.5·8 + 0.5 = 4.5, demand 0.5/4.5 = 1/9.
        //
        // 4f-0s: demands 4 × 1/2 = 2 > 1; the equal share is 1/4 < 1/2, so
        // L = 1/4 and every task costs 0.5 / (1/4) = 2 CPU ns per ns of work:
        // 4 × 1/2 = 2 ns of work per ns in all.
        let mut b = bus(3.2, 3.2);
        for t in 0..4 {
            b.join(TaskId(t), 1.0, 0.5, cost(1.0, 0.5));
        }
        assert_eq!(b.divide(), 0.25);
        assert!(b.members.iter().all(|m| m.cost == 2 * ONE));
        //
        // 2f-2s/8: demands 1/2, 1/2, 1/9, 1/9 = 11/9 > 1. Water-filling from
        // the smallest: 1/9 ≤ 1/4 (met, 8/9 left), 1/9 ≤ (8/9)/3 = 8/27 (met,
        // 7/9 left), 1/2 > (7/9)/2 = 7/18: L = 7/18. The slow tasks keep
        // c = 4.5; the fast ones cost 0.5 / (7/18) = 9/7 ≈ 1.2857. Work per ns:
        // 2 × 7/9 + 2 × 2/9 = 2, the same as 4f-0s: with the bus full, two fast
        // cores and two 1/8-speed ones do what four fast cores do (compute
        // power 2.25 against 4 would say +78 %).
        let mut b = bus(3.2, 3.2);
        b.join(TaskId(0), 1.0, 0.5, cost(1.0, 0.5));
        b.join(TaskId(1), 1.0, 0.5, cost(1.0, 0.5));
        b.join(TaskId(2), 0.125, 0.5, cost(0.125, 0.5));
        b.join(TaskId(3), 0.125, 0.5, cost(0.125, 0.5));
        let l = b.divide();
        assert!((l - 7.0 / 18.0).abs() < 1e-15, "{l}");
        let per_ns: f64 = b.members.iter().map(|m| ONE as f64 / m.cost as f64).sum();
        assert!((per_ns - 2.0).abs() < 1e-9, "{per_ns}");
        assert_eq!(b.members[0].cost, (9.0 / 7.0 * ONE as f64).round() as u64);
        assert_eq!(b.members[2].cost, cost(0.125, 0.5));
        assert_eq!(b.members[2].cost, 9 * ONE / 2);
        //
        // 0f-4s/8: demands 4/9 ≤ 1, the bus is not full: everyone at c = 4.5,
        // 4/4.5 = 0.89 ns of work per ns (so 4f-0s is 2.25× as fast, not 8×).
        let mut b = bus(3.2, 3.2);
        for t in 0..4 {
            b.join(TaskId(t), 0.125, 0.5, cost(0.125, 0.5));
        }
        assert_eq!(b.divide(), f64::INFINITY);
        assert!(b.members.iter().all(|m| m.cost == 9 * ONE / 2));
        // A fast task leaves: 2f-2s/8 less one fast = 1/2 + 2/9 = 13/18 ≤ 1, nobody held.
        let mut b = bus(3.2, 3.2);
        for (t, v) in [(0, 1.0), (1, 1.0), (2, 0.125), (3, 0.125)] {
            b.join(TaskId(t), v, 0.5, cost(v, 0.5));
        }
        b.leave(TaskId(1));
        assert_eq!(b.divide(), f64::INFINITY);
        assert_eq!(b.members.iter().map(|m| m.task.0).collect::<Vec<_>>(), vec![0, 2, 3]);
        assert_eq!(b.members[0].cost, ONE);
    }

    #[test]
    fn a_core_that_draws_less_than_the_bus_asks_less() {
        // r = 1.6 / 3.2 = 1/2: a fully fast m = 0.5 task asks 1/4; four fit exactly.
        let mut b = bus(3.2, 1.6);
        for t in 0..4 {
            b.join(TaskId(t), 1.0, 0.5, cost(1.0, 0.5));
        }
        assert_eq!(b.divide(), f64::INFINITY);
        // A fifth: 5/4 > 1, L = 1/5, cost = (1/2)(1/2) / (1/5) = 1.25.
        b.join(TaskId(4), 1.0, 0.5, cost(1.0, 0.5));
        assert_eq!(b.divide(), 0.2);
        assert!(b.members.iter().all(|m| m.cost == 5 * ONE / 4));
    }

    #[test]
    fn the_level_meets_small_demands_in_full() {
        let mut d = [0.9, 0.05, 0.6];
        // Sorted 0.05, 0.6, 0.9: 0.05 ≤ 1/3 (0.95 left); 0.6 > 0.95/2 = 0.475.
        assert_eq!(fair_level(&mut d), 0.95 / 2.0);
        assert_eq!(fair_level(&mut [0.5, 0.5]), f64::INFINITY);
        assert_eq!(fair_level(&mut []), f64::INFINITY);
    }
}
