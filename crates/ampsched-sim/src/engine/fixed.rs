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

/// CPU ns per ns of work of a program with memory-bound share `mem` on a core
/// of speed `full` whose clock is modulated down to `speed` (the duty cycle
/// `speed / full`): the stopped clock stops the memory requests too, so the
/// whole of `cost(full, mem)` stretches by `full / speed` (rounded to nearest).
/// Intel's on-demand clock modulation (IA32_CLOCK_MODULATION, duty cycle in
/// 12.5 % steps on the NetBurst processors): Intel SDM vol. 3, "Software
/// Controlled Clock Modulation".
#[inline]
pub(super) fn cost_modulated(full: f64, speed: f64, mem: f64) -> u64 {
    (((1.0 - mem) / full + mem) * (full / speed) * ONE as f64).round() as u64
}

/// Work done in `cpu` (an amount of CPU time) at `cost`, rounded down.
#[inline]
pub(super) fn work_in(cpu: u128, cost: u64) -> u128 {
    if cost.is_power_of_two() {
        // A dyadic cost (speed 1 or 2 without memory share): a shift, the same quotient.
        return (cpu << SHIFT) >> cost.trailing_zeros();
    }
    // Long division in two 64-bit steps when the pieces fit (a CPU time under
    // 2^32 ns and a cost below one CPU ns per ns of work: a CPU faster than
    // speed 1): with cpu = q·cost + r, cpu·2^SHIFT / cost = q·2^SHIFT +
    // r·2^SHIFT / cost, the same quotient as the 128-bit division, which is
    // done in software and cost a tenth of a noisy run's time.
    if let Ok(c) = u64::try_from(cpu) {
        let (q, r) = (c / cost, c % cost);
        if r >> (64 - SHIFT) == 0 {
            return ((q as u128) << SHIFT) + u128::from((r << SHIFT) / cost);
        }
    }
    (cpu << SHIFT) / cost as u128
}

/// `a` / `d` rounded up: a 64-bit division when `a` fits (the same quotient).
#[inline]
pub(super) fn div_ceil(a: u128, d: u64) -> u128 {
    match u64::try_from(a) {
        Ok(a) => u128::from(a.div_ceil(d)),
        Err(_) => a.div_ceil(d as u128),
    }
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
    fn the_64_bit_paths_give_the_128_bit_quotients() {
        // Speed 2.2: cost round(2^32 / 2.2) = 1952257862. 1 ms of CPU time is
        // amount 10^6·2^32 = q·cost + r with q = 2199999, r = 1951857862
        // (< 2^32), so the work is q·2^32 + ⌊r·2^32 / cost⌋ = 9448923756232704
        // + 4294087296 units: 2.2 ms of work less 880000 units (0.0002 ns, the cost's rounding).
        let c = cost(2.2, 0.0);
        assert_eq!(c, 1_952_257_862);
        let cpu = amount(1_000_000);
        assert_eq!(work_in(cpu, c), 9_448_928_050_320_000);
        // Every path against the plain 128-bit division: CPU times below and
        // above 2^64 units, costs below and above one (a CPU slower than
        // speed 1, or memory-bound work: the remainder no longer fits 32 bits).
        for k in [c, cost(1.1, 0.3), cost(0.5, 0.0), cost(0.7, 0.9), 3, u64::MAX - 1] {
            for cpu in [1u128, 12345, amount(999_999) + 77, (1u128 << 64) - 1, 1 << 64, amount(1 << 40) + 5] {
                assert_eq!(work_in(cpu, k), (cpu << SHIFT) / k as u128, "{cpu} at {k}");
                assert_eq!(div_ceil(cpu, k), cpu.div_ceil(k as u128), "{cpu} / {k}");
            }
        }
    }

    #[test]
    fn a_modulated_core_slows_its_memory_stalls_too() {
        // A half memory-bound program on a speed-1 core modulated to 1/8:
        // (0.5/1 + 0.5) · 8 = 8 CPU ns per ns of work; a 1/8-clocked core
        // would take 0.5 · 8 + 0.5 = 4.5.
        assert_eq!(cost_modulated(1.0, 0.125, 0.5), 8 * ONE);
        assert_eq!(cost(0.125, 0.5), 9 * ONE / 2);
        // Unmodulated (duty 1): the plain cost, to the bit.
        for m in [0.0, 0.05, 0.67, 0.999] {
            assert_eq!(cost_modulated(2.0, 2.0, m), cost(2.0, m));
        }
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
