//! Seeded sampling: the run's random durations (exponential sleeps, bursty
//! noise phases) come from one ChaCha8 generator seeded with the run's seed,
//! drawn in event order, and traffic noise's packets per batch from a stream
//! of each traffic CPU's own (`cpu::Traffic`), so a run is a pure function of
//! scenario and seed.
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

/// A Poisson law of a fixed mean, drawn by inversion: one uniform draw `u`
/// per chunk of mean ≤ 500 (so e^−mean stays a normal number; a sum of
/// Poisson counts is a Poisson count of the summed means), and the count is
/// the least `k` whose cumulative probability exceeds `u` (Devroye,
/// *Non-Uniform Random Variate Generation*, 1986, X.3.3). The cumulative
/// probabilities are built once, from e^−mean by `p(k) = p(k − 1) · mean / k`,
/// up to the last term that rounds to more than 0 or `cap`, and a draw
/// starts its search where a guide table sends it (Chen and Asau's method,
/// Devroye III.2.4: `guide[j]`, the least k whose cumulative probability
/// exceeds j / G, for G cells as many as the terms) and steps up from there,
/// about one step on average. One uniform per batch, where Knuth's method
/// (multiply uniforms until the product falls below e^−mean) takes mean + 1
/// of them.
pub(super) struct Poisson {
    /// Each chunk's cumulative probabilities, from k = 0, and its guide table.
    chunks: Vec<(Vec<f64>, Vec<u32>)>,
    cap: u32,
}

impl Poisson {
    /// The law of mean `mean` (a negative mean counts as 0), its counts at most `cap`.
    pub(super) fn new(mean: f64, cap: u32) -> Poisson {
        let mut chunks = Vec::new();
        let mut left = mean.max(0.0);
        while left > 0.0 {
            let chunk = left.min(500.0);
            left -= chunk;
            let cdf = cumulative(chunk, cap);
            let cells = cdf.len();
            let guide = (0..cells).map(|j| pick(&cdf, j as f64 / cells as f64) as u32).collect();
            chunks.push((cdf, guide));
        }
        Poisson { chunks, cap }
    }

    /// A count drawn from `rng`.
    pub(super) fn draw(&self, rng: &mut ChaCha8Rng) -> u32 {
        let mut n = 0u32;
        for (cdf, guide) in &self.chunks {
            let u: f64 = rng.gen();
            // The least k with cdf(k) > u: at least the guide's for u's cell.
            let mut k = guide[((u * guide.len() as f64) as usize).min(guide.len() - 1)] as usize;
            while cdf[k] <= u && k + 1 < cdf.len() {
                k += 1;
            }
            n += k as u32;
            if n >= self.cap {
                return self.cap;
            }
        }
        n
    }
}

/// The least k whose cumulative probability `cdf[k]` exceeds `u`; the table's last k if none.
fn pick(cdf: &[f64], u: f64) -> usize {
    cdf.partition_point(|&c| c <= u).min(cdf.len() - 1)
}

/// The cumulative probabilities of a Poisson law of mean `mean` (≤ 500) for
/// k = 0, 1, … up to the last term that rounds to more than 0, or `cap`.
fn cumulative(mean: f64, cap: u32) -> Vec<f64> {
    let mut p = libm::exp(-mean);
    let mut cdf = vec![p];
    let mut k = 0u32;
    while k < cap {
        k += 1;
        p *= mean / f64::from(k);
        if p <= 0.0 {
            break;
        }
        cdf.push(cdf[cdf.len() - 1] + p);
    }
    cdf
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
        let law = Poisson::new(28.75, 256);
        let xs: Vec<f64> = (0..20_000).map(|_| f64::from(law.draw(&mut rng))).collect();
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!((m - 28.75).abs() < 0.2, "mean {m}");
        assert!((v / 28.75 - 1.0).abs() < 0.1, "variance {v}");
        // A mean far above the cap (1 200 > 256 and past one chunk): always the cap.
        let far = Poisson::new(1200.0, 256);
        assert!((0..100).all(|_| far.draw(&mut rng) == 256));
        // Past one chunk and below the cap: 1 200 in three chunks, a sum of their counts.
        let far = Poisson::new(1200.0, 3000);
        let xs: Vec<f64> = (0..2_000).map(|_| f64::from(far.draw(&mut rng))).collect();
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((m - 1200.0).abs() < 3.0, "mean {m}");
        // Mean 0: never a packet.
        assert_eq!(Poisson::new(0.0, 256).draw(&mut rng), 0);
        // The table by hand at mean 2 (e^−2 = 0.1353, then 0.2707, 0.2707,
        // 0.1804: cumulative 0.1353, 0.4060, 0.6767, 0.8571): a uniform of
        // 0.5 is a count of 2, 0.1 of 0, 0.8 of 3; under a cap of 2 the table
        // stops at k = 2, so 0.8 is 2.
        let cdf = cumulative(2.0, 256);
        assert!((cdf[3] - 0.8571).abs() < 1e-4, "{cdf:?}");
        assert_eq!([0.5, 0.1, 0.8].map(|u| pick(&cdf, u)), [2, 0, 3]);
        assert_eq!(pick(&cumulative(2.0, 2), 0.8), 2);
        // The guided search finds what the binary search over the whole table finds.
        for law in [Poisson::new(2.0, 256), Poisson::new(28.75, 256), Poisson::new(1200.0, 3000)] {
            let (mut a, mut b) = (ChaCha8Rng::seed_from_u64(3), ChaCha8Rng::seed_from_u64(3));
            for _ in 0..2_000 {
                let by_search: u32 = law.chunks.iter().map(|(cdf, _)| pick(cdf, b.gen()) as u32).sum();
                assert_eq!(law.draw(&mut a), by_search.min(law.cap));
            }
        }
    }
}
