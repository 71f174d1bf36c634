//! Fixed-point amounts for the engine's accounting, so that a run's books
//! are kept in integers: the same scenario and seed give the same numbers on
//! every machine and compiler, and a long run accumulates no rounding drift.
//!
//! Units: an *amount* (CPU time, work, refill owed) is a `u128` count of
//! `2^-SHIFT` ns (a quarter of an attosecond); a *share* (of a CPU's time left by
//! noise) is a `u64` count of `2^-SHIFT`; a *cost* (CPU ns per ns of work)
//! is a `u64` count of `2^-SHIFT`. A cost, not its inverse, so that the
//! usual dyadic settings (speed 2, memory share 0.5: cost 0.75) are exact. Configured fractions (noise,
//! speed, memory share) are `f64` in the scenario; each is turned into a
//! fixed-point value once, by IEEE-754 arithmetic (exact and portable: no
//! transcendental functions) and rounding to nearest.
//!
//! May import: nothing of the engine. Must never import any other room.

/// Fractional bits of an amount or a share.
pub(super) const SHIFT: u32 = 32;
/// One ns as an amount; a whole share.
pub(super) const ONE: u64 = 1 << SHIFT;
/// `ns` whole nanoseconds as an amount.
#[inline]
pub(super) fn amount(ns: u64) -> u128 {
    (ns as u128) << SHIFT
}

/// An amount rounded to the nearest whole nanosecond.
#[inline]
pub(super) fn round_ns(a: u128) -> u64 {
    ((a + (1 << (SHIFT - 1))) >> SHIFT) as u64
}

/// A fraction in [0, 1] as a share, rounded to nearest.
#[inline]
pub(super) fn share(f: f64) -> u64 {
    (f.clamp(0.0, 1.0) * ONE as f64).round() as u64
}

/// CPU ns per ns of work of a program with memory-bound share `mem` on a
/// CPU of `speed`: (1 − mem) / speed + mem, as a cost (rounded to nearest).
#[inline]
pub(super) fn cost(speed: f64, mem: f64) -> u64 {
    (((1.0 - mem) / speed + mem) * ONE as f64).round() as u64
}

/// Work done in `cpu` (an amount of CPU time) at `cost`, rounded down.
#[inline]
pub(super) fn work_in(cpu: u128, cost: u64) -> u128 {
    if cost.is_power_of_two() {
        // A dyadic cost (speed 1 or 2 without memory share): a shift, the same quotient.
        return (cpu << SHIFT) >> cost.trailing_zeros();
    }
    (cpu << SHIFT) / cost as u128
}

/// The least CPU time (an amount) in which work `work` is done at `cost`: the
/// inverse of `work_in` (`work_in(cpu_for(w, c), c) >= w`; one unit less falls short).
#[inline]
pub(super) fn cpu_for(work: u128, cost: u64) -> u128 {
    (work * cost as u128).div_ceil(1 << SHIFT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_and_their_inverse() {
        // Speed 2, a quarter memory-bound: 0.75/2 + 0.25 = 0.625 CPU ns per
        // ns of work, exact in binary: 0.625 × 2^32 = 2684354560.
        let c = cost(2.0, 0.25);
        assert_eq!(c, 2_684_354_560);
        // 10 ms of work needs exactly 6.25 ms of CPU time.
        let w = amount(10_000_000);
        assert_eq!(cpu_for(w, c), amount(6_250_000));
        assert_eq!(work_in(amount(6_250_000), c), w);
        // A dyadic cost takes the shift: speed 2, no memory share, cost 0.5 = 2^31;
        // 3 ns + one unit of CPU time do 6 ns + two units of work (shift and division agree).
        let half = cost(2.0, 0.0);
        assert_eq!(half, 1 << 31);
        let cpu = amount(3) + 1;
        assert_eq!(work_in(cpu, half), (cpu << SHIFT) / half as u128);
        assert_eq!(work_in(cpu, half), amount(6) + 2);
        // Speed 3 (not dyadic): 2^32/3 = 1431655765.33 → 1431655765; the
        // inverse is still exact to one unit.
        let c = cost(3.0, 0.0);
        assert_eq!(c, 1_431_655_765);
        let cpu = cpu_for(w, c);
        assert!(work_in(cpu, c) >= w && work_in(cpu - 1, c) < w);
    }

    #[test]
    fn shares_and_rounding() {
        assert_eq!(share(0.0), 0);
        assert_eq!(share(1.0), ONE);
        // 0.2 × 2^32 = 858993459.2 → 858993459.
        assert_eq!(share(0.2), 858_993_459);
        assert_eq!(round_ns(amount(7) + (ONE as u128) / 2), 8);
        assert_eq!(round_ns(amount(7) + (ONE as u128) / 2 - 1), 7);
    }
}
