//! Seeded sampling: the run's random durations (exponential sleeps, bursty
//! noise phases) and counts (traffic noise's packets per batch) come from one ChaCha8 generator seeded with the run's seed,
//! drawn in event order, so a run is a pure function of scenario and seed.
//! The logarithm is `libm`'s (a portable Rust port of musl's, the same bits
//! on every machine), not the platform's C library, whose `log` may differ
//! in the last bit between systems.
//!
//! May import: `rand`, `libm`, the model's `Nanos`. Must never import the rest of
//! the engine.

use ampsched_model::Nanos;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// An exponentially distributed duration of this mean (at least 1 ns), by
/// inversion of a uniform draw in [ε, 1).
pub(super) fn exponential(rng: &mut ChaCha8Rng, mean: Nanos) -> Nanos {
    let u: f64 = rng.gen_range(f64::EPSILON..1.0);
    Nanos(((-libm::log(u)) * mean.0 as f64).round().max(1.0) as u64)
}

/// A Poisson-distributed count of this mean, at most `cap`: Knuth's method (multiply
/// uniform draws until the product falls below e^−mean), in chunks of mean ≤ 500 so
/// e^−mean stays a normal number; one draw per unit counted, stopping at `cap`.
pub(super) fn poisson(rng: &mut ChaCha8Rng, mean: f64, cap: u32) -> u32 {
    let mut n = 0u32;
    let mut left = mean.max(0.0);
    while left > 0.0 && n < cap {
        let chunk = left.min(500.0);
        left -= chunk;
        let floor = libm::exp(-chunk);
        let mut p: f64 = rng.gen();
        while p > floor && n < cap {
            n += 1;
            p *= rng.gen::<f64>();
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn poisson_counts_have_their_mean_and_stop_at_the_cap() {
        // 20 000 draws of mean 28.75 (traffic noise: 115 000 packets/s over
        // 4 000 interrupts/s): the sample mean is within 0.2 of it (its
        // standard error is √(28.75 / 20 000) ≈ 0.04) and the variance within
        // 10 % of the mean (a Poisson count's variance is its mean).
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let xs: Vec<f64> = (0..20_000).map(|_| f64::from(poisson(&mut rng, 28.75, 256))).collect();
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!((m - 28.75).abs() < 0.2, "mean {m}");
        assert!((v / 28.75 - 1.0).abs() < 0.1, "variance {v}");
        // A mean far above the cap (1 200 > 256 and past one chunk): always the cap.
        assert!((0..100).all(|_| poisson(&mut rng, 1200.0, 256) == 256));
        // Mean 0: never a packet.
        assert_eq!(poisson(&mut rng, 0.0, 256), 0);
    }
}
