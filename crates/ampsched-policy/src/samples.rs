//! A sample stream bounded whatever the run's length (issue 18 D2): the
//! values a dispatcher records per event (e.g. co-scheduling's sibling
//! start-time differences) are kept whole up to `MAX_SAMPLES`; past that,
//! every other kept value is dropped and from then on only every `stride`-th
//! new value is kept, `stride` doubling at each halving. Deterministic
//! systematic sampling: the kept values are evenly spread over the run, so
//! an empirical distribution drawn from them (a CDF) stays representative.
//!
//! May import: nothing of this crate. Imported by the dispatchers that record samples.

/// Most values a stream keeps (even, so a halving is exact): 100 000 (800 kB).
pub const MAX_SAMPLES: usize = 100_000;

/// A bounded stream of `u64` samples.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// The kept values, in the order they happened.
    pub values: Vec<u64>,
    /// Keep one value in `stride` (1 until the first halving).
    stride: u64,
    /// Values offered since the last one kept.
    skipped: u64,
}

impl Samples {
    /// Offer a value: kept when it is the `stride`-th since the last kept one.
    pub fn push(&mut self, x: u64) {
        self.push_capped(x, MAX_SAMPLES);
    }

    fn push_capped(&mut self, x: u64, cap: usize) {
        let stride = self.stride.max(1);
        self.skipped += 1;
        if self.skipped < stride {
            return;
        }
        self.skipped = 0;
        self.values.push(x);
        if self.values.len() >= cap {
            let kept: Vec<u64> = self.values.iter().skip(1).step_by(2).copied().collect();
            self.values = kept;
            self.stride = stride * 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_stay_bounded_and_evenly_spread() {
        let mut s = Samples::default();
        for x in 1..=10 {
            s.push_capped(x, 4);
        }
        // 1 2 3 4 → cap: keep 2 4, stride 2; then 6 and 8 are kept (5, 7 skipped)
        // → 2 4 6 8 → cap: keep 4 8, stride 4; 9 and 10 are skipped (the 1st and 2nd of 4).
        assert_eq!(s.values, vec![4, 8]);
        let mut s = Samples::default();
        for x in 0..1_000_000 {
            s.push(x);
        }
        assert!(s.values.len() < MAX_SAMPLES);
        assert!(s.values.len() >= MAX_SAMPLES / 4, "{}", s.values.len());
        // Evenly spread: consecutive kept values are one stride apart.
        let d: Vec<u64> = s.values.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(d.iter().all(|&x| x == d[0]), "uneven strides");
    }

    #[test]
    fn short_streams_are_kept_whole() {
        let mut s = Samples::default();
        for x in 0..1000 {
            s.push(x);
        }
        assert_eq!(s.values, (0..1000).collect::<Vec<u64>>());
    }
}
