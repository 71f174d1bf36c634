//! Seeded sampling: the run's random durations (exponential sleeps, bursty
//! noise phases) come from one ChaCha8 generator seeded with the run's seed,
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
