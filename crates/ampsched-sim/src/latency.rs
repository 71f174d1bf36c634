//! A latency histogram with bounded memory and a bounded relative error, for
//! wake-up latencies (time from a wake-up to the first instant the woken
//! task runs) in the simulator and on the real machine (`ampsched validate`
//! fills the same type from sched_waking/sched_switch trace events), so both
//! bodies' p50/p99 come from the same arithmetic.
//!
//! Buckets are log-linear, as in HdrHistogram: a value below 2^`SUB_BITS`+1
//! = 64 ns has its own bucket; above, a value `v` with highest set bit `e`
//! lies in one of 2^`SUB_BITS` = 32 equal sub-buckets of `[2^e, 2^(e+1))`,
//! each 2^(e−5) wide, so a bucket's lower bound is within 1/32 (3.1 %) of
//! any value in it. Counts are kept in a dense vector indexed by bucket and
//! grown only to the highest bucket recorded (100 ms = 10^8 ns: e = 26,
//! sub-bucket (10^8 >> 21) & 31 = 15, bucket 64 + 20·32 + 15 = 719, so
//! ≤ 5.8 KiB per task; never more than ~1900 entries), so recording
//! is one indexed add on the engine's per-wake-up path — a sparse `BTreeMap`
//! cost the XL bench about 60 ns per event — and the order of recording never
//! changes the result (determinism).

/// log2 of the number of sub-buckets per power of two.
const SUB_BITS: u32 = 5;
/// Values below this have an exact bucket each.
const LINEAR: u64 = 1 << (SUB_BITS + 1);

/// Counts of latencies (ns) in log-linear buckets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencyHist {
    /// Count per bucket, up to the highest bucket recorded (no trailing zeros).
    buckets: Vec<u64>,
    count: u64,
}

fn bucket_of(v: u64) -> u32 {
    if v < LINEAR {
        return v as u32;
    }
    let e = 63 - v.leading_zeros(); // v in [2^e, 2^(e+1)), e ≥ SUB_BITS + 1
    let sub = ((v >> (e - SUB_BITS)) as u32) & ((1 << SUB_BITS) - 1);
    LINEAR as u32 + (e - SUB_BITS - 1) * (1 << SUB_BITS) + sub
}

fn lower_bound(b: u32) -> u64 {
    if (b as u64) < LINEAR {
        return b as u64;
    }
    let k = b - LINEAR as u32;
    let e = k / (1 << SUB_BITS) + SUB_BITS + 1;
    let sub = (k % (1 << SUB_BITS)) as u64;
    (1u64 << e) + (sub << (e - SUB_BITS))
}

impl LatencyHist {
    /// An empty histogram.
    pub fn new() -> LatencyHist {
        LatencyHist::default()
    }
    /// Count one latency of `ns` nanoseconds.
    pub fn record(&mut self, ns: u64) {
        let b = bucket_of(ns) as usize;
        if b >= self.buckets.len() {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
        self.count += 1;
    }
    /// Add every count of `other`.
    pub fn merge(&mut self, other: &LatencyHist) {
        if other.buckets.len() > self.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (mine, n) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += n;
        }
        self.count += other.count;
    }
    /// Number of latencies recorded.
    pub fn count(&self) -> u64 {
        self.count
    }
    /// The `q`-quantile (0 < q ≤ 1), as the lower bound of the bucket holding
    /// the ⌈q·n⌉-th smallest value (within 3.1 % below it); None if empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (b, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(lower_bound(b as u32));
            }
        }
        self.buckets.len().checked_sub(1).map(|b| lower_bound(b as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact_and_large_ones_within_a_thirty_second() {
        // 63 < 64: its own bucket.
        assert_eq!(lower_bound(bucket_of(63)), 63);
        // 100 = 0b1100100: e = 6, sub-buckets of 2^(6−5) = 2 ns, 100 is on a
        // boundary: [100, 102).
        assert_eq!(lower_bound(bucket_of(100)), 100);
        assert_eq!(lower_bound(bucket_of(101)), 100);
        // 1_000_000: e = 19 (2^19 = 524288), sub-bucket width 2^14 = 16384,
        // (1_000_000 − 524288) / 16384 = 29.03 → 524288 + 29·16384 = 999_424.
        assert_eq!(lower_bound(bucket_of(1_000_000)), 999_424);
        for v in [64u64, 65, 1000, 123_456, 7_654_321, u64::MAX / 3, u64::MAX] {
            let lb = lower_bound(bucket_of(v));
            assert!(lb <= v && (v - lb) as f64 <= v as f64 / 32.0, "v={v} lb={lb}");
        }
    }

    #[test]
    fn dense_buckets_grow_to_the_highest_recorded_and_compare_by_content() {
        // 100 ms = 10^8 ns: e = 26, sub = (10^8 >> 21) & 31 = 47 & 31 = 15,
        // bucket 64 + (26 − 6)·32 + 15 = 719: the vector holds 720 counts.
        assert_eq!(bucket_of(100_000_000), 719);
        let mut a = LatencyHist::new();
        a.record(100_000_000);
        a.record(5);
        assert_eq!(a.buckets.len(), 720);
        // Recording order and merging do not change the histogram.
        let mut b = LatencyHist::new();
        b.record(5);
        let mut c = LatencyHist::new();
        c.record(100_000_000);
        b.merge(&c);
        assert_eq!(a, b);
        assert_eq!(a.quantile(1.0), Some(lower_bound(719)));
    }

    #[test]
    fn quantiles_are_ranks_and_merging_is_adding() {
        let mut a = LatencyHist::new();
        assert_eq!(a.quantile(0.5), None);
        // 1..=50 ns: p50 is the 25th smallest = 25, p99 the ⌈49.5⌉ = 50th = 50.
        for v in 1..=50 {
            a.record(v);
        }
        assert_eq!(a.quantile(0.5), Some(25));
        assert_eq!(a.quantile(0.99), Some(50));
        // Adding 50 latencies of 10 µs: 100 values, p50 = 50th = 50 ns, p99 =
        // 99th = 10_000 → bucket lower bound: e = 13, width 256,
        // 8192 + 7·256 = 9984.
        let mut b = LatencyHist::new();
        for _ in 0..50 {
            b.record(10_000);
        }
        a.merge(&b);
        assert_eq!(a.count(), 100);
        assert_eq!(a.quantile(0.5), Some(50));
        assert_eq!(a.quantile(0.99), Some(9984));
    }
}
