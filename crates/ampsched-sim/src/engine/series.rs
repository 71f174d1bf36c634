//! Statistics accumulators: per-domain time series (CPU time per class,
//! average active vCPUs, migrations per interval) and the dispatcher's
//! counter series, sampled every `stats_interval`.
//!
//! Bounded whatever the duration (issue 18 D2): a series keeps at most
//! `MAX_POINTS` points per domain. When it reaches that many, neighbouring
//! pairs merge (run times and migrations add up, the active average is
//! weighted by each point's span, a counter point keeps the later, cumulative
//! values) and from then on a point closes every `stride` intervals, `stride`
//! doubling at each merge, like a round-robin database's consolidation. Runs
//! with fewer samples than the cap are unchanged. The run's
//! `stats_interval_ns` reports the interval in force at the end.
//!
//! May import: `crate::results` (the point types). Must never import the
//! event loop, tasks, CPUs or the bridges: the engine reports run time,
//! migrations and active-count changes; this room integrates them.

use crate::results::{CounterPoint, SeriesPoint};
use ampsched_model::Nanos;

/// Time-series accumulators of a run.
pub(super) struct Series {
    /// Per domain, per class (`d · nclass + class`, one flat vector: no
    /// pointer to follow on a settle): run time in the current interval.
    run: Vec<u64>,
    /// CPU classes.
    nclass: usize,
    /// Per domain: migrations in the current interval.
    pub(super) mig: Vec<u64>,
    /// Per domain: ∫ active vCPUs dt over the current interval.
    active_int: Vec<u64>,
    /// Per domain: vCPUs runnable or running now.
    pub(super) active: Vec<u32>,
    /// Per domain: when `active` last changed (or was integrated).
    active_since: Vec<Nanos>,
    /// Per domain: the points so far.
    pub(super) points: Vec<Vec<SeriesPoint>>,
    /// The dispatcher's counters at each sample.
    pub(super) counters: Vec<CounterPoint>,
    /// When the last sample was taken.
    pub(super) last: Nanos,
    /// Statistics intervals per point (doubles at each merge).
    pub(super) stride: u64,
    /// Intervals closed since the last point.
    pending: u64,
    /// Points kept before a merge (`MAX_POINTS`).
    cap: usize,
}

/// Most points a domain's series (and the counter series) keeps; even, so that a merge halves it exactly.
pub const MAX_POINTS: usize = 10_000;

impl Series {
    /// Empty accumulators for `nd` domains and `nclass` CPU classes.
    pub(super) fn new(nd: usize, nclass: usize) -> Series {
        Series {
            run: vec![0; nd * nclass],
            nclass,
            mig: vec![0; nd],
            active_int: vec![0; nd],
            active: vec![0; nd],
            active_since: vec![Nanos::ZERO; nd],
            points: vec![Vec::new(); nd],
            counters: Vec::new(),
            last: Nanos::ZERO,
            stride: 1,
            pending: 0,
            cap: MAX_POINTS,
        }
    }

    /// Domain `d` ran `dt` ns on CPUs of class `class` (reported by the engine at each sample, `Sim::sample_series`).
    #[inline]
    pub(super) fn add_run(&mut self, d: usize, class: usize, dt: u64) {
        self.run[d * self.nclass + class] += dt;
    }

    /// Domain `d` gained (`up`) or lost an active vCPU at `now`.
    #[inline]
    pub(super) fn active_changed(&mut self, d: usize, up: bool, now: Nanos) {
        self.active_int[d] += (now - self.active_since[d]).0 * self.active[d] as u64;
        self.active_since[d] = now;
        if up {
            self.active[d] += 1;
        } else {
            self.active[d] -= 1;
        }
    }

    /// Close the interval at `now`: one point per domain and the counters'
    /// values every `stride` intervals, or now when `last` (the end of the run).
    pub(super) fn sample(&mut self, now: Nanos, counters: Vec<f64>, last: bool) {
        let nclass = self.nclass;
        self.pending += 1;
        if self.pending < self.stride && !last {
            return; // the accumulators run on into the next interval
        }
        self.pending = 0;
        let span = (now - self.last).0.max(1);
        for d in 0..self.points.len() {
            self.active_int[d] += (now - self.active_since[d]).0 * self.active[d] as u64;
            self.active_since[d] = now;
            let point = SeriesPoint {
                t_ns: now.0,
                class_ns: self.run[d * nclass..(d + 1) * nclass].to_vec(),
                active_avg: self.active_int[d] as f64 / span as f64,
                migrations: std::mem::take(&mut self.mig[d]),
            };
            self.active_int[d] = 0;
            self.run[d * nclass..(d + 1) * nclass].fill(0);
            self.points[d].push(point);
        }
        self.counters.push(CounterPoint { t_ns: now.0, values: counters });
        self.last = now;
        if self.counters.len() >= self.cap && !last {
            self.merge_pairs();
        }
    }

    /// Halve every series by merging neighbouring points; double the stride.
    fn merge_pairs(&mut self) {
        for pts in &mut self.points {
            *pts = merge_points(pts);
        }
        let counters = std::mem::take(&mut self.counters);
        // Counter values are cumulative: the later point of a pair holds the pair's values.
        self.counters = counters.into_iter().skip(1).step_by(2).collect();
        self.stride *= 2;
    }
}

/// Merge neighbouring points (0 with 1, 2 with 3, …; an odd last point stays).
fn merge_points(pts: &[SeriesPoint]) -> Vec<SeriesPoint> {
    let mut out = Vec::with_capacity(pts.len().div_ceil(2));
    let mut start = 0u64; // the first interval starts at time 0
    for pair in pts.chunks(2) {
        let [a, b] = pair else {
            out.push(pair[0].clone());
            break;
        };
        let (sa, sb) = ((a.t_ns - start) as f64, (b.t_ns - a.t_ns) as f64);
        let span = (sa + sb).max(1.0);
        out.push(SeriesPoint {
            t_ns: b.t_ns,
            class_ns: a.class_ns.iter().zip(&b.class_ns).map(|(x, y)| x + y).collect(),
            active_avg: (a.active_avg * sa + b.active_avg * sb) / span,
            migrations: a.migrations + b.migrations,
        });
        start = b.t_ns;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One domain, one class: each interval of 10 ns runs `run` ns, with one
    /// active vCPU from the interval's start, and one migration.
    fn feed(s: &mut Series, intervals: u64, run: u64, last_at_end: bool) {
        for i in 1..=intervals {
            s.add_run(0, 0, run);
            s.mig[0] += 1;
            if s.active[0] == 0 {
                s.active_changed(0, true, Nanos((i - 1) * 10));
            }
            s.sample(Nanos(i * 10), vec![i as f64], last_at_end && i == intervals);
        }
    }

    #[test]
    fn series_merges_pairs_at_the_cap_and_keeps_totals() {
        let mut s = Series::new(1, 1);
        s.cap = 4;
        // Intervals 1..4 → 4 points → merge: (t=20, run 2×3, mig 2), (t=40, run 6, mig 2); stride 2.
        // Intervals 5..8 close a point every 2: t=60 and t=80 → 4 points → merge again:
        // (t=40, run 12, mig 4), (t=80, run 12, mig 4); stride 4. Intervals 9..10
        // (the last one ends the run) close one partial point: (t=100, run 6, mig 2).
        feed(&mut s, 10, 3, true);
        let t: Vec<u64> = s.points[0].iter().map(|p| p.t_ns).collect();
        assert_eq!(t, vec![40, 80, 100]);
        let run: Vec<u64> = s.points[0].iter().map(|p| p.class_ns[0]).collect();
        assert_eq!(run, vec![12, 12, 6]);
        let mig: Vec<u64> = s.points[0].iter().map(|p| p.migrations).collect();
        assert_eq!(mig, vec![4, 4, 2]);
        // One vCPU active all along: every merged average stays 1.
        assert!(s.points[0].iter().all(|p| (p.active_avg - 1.0).abs() < 1e-12));
        // Counters are cumulative: each point keeps the later value of its pair.
        let c: Vec<f64> = s.counters.iter().map(|p| p.values[0]).collect();
        assert_eq!(c, vec![4.0, 8.0, 10.0]);
        assert_eq!(s.stride, 4);
    }

    #[test]
    fn series_merge_weights_the_active_average_by_span() {
        // Points ending at 10 (avg 2 over 10 ns) and 40 (avg 1 over 30 ns):
        // merged average = (2×10 + 1×30) / 40 = 1.25.
        let p = |t_ns, active_avg| SeriesPoint { t_ns, class_ns: vec![1], active_avg, migrations: 0 };
        let m = merge_points(&[p(10, 2.0), p(40, 1.0)]);
        assert_eq!(m.len(), 1);
        assert!((m[0].active_avg - 1.25).abs() < 1e-12);
    }

    #[test]
    fn series_under_the_cap_is_unchanged() {
        let mut s = Series::new(1, 1);
        feed(&mut s, 100, 3, true);
        assert_eq!(s.points[0].len(), 100);
        assert_eq!(s.stride, 1);
        assert!(s.points[0].iter().enumerate().all(|(i, p)| p.t_ns == (i as u64 + 1) * 10 && p.class_ns[0] == 3));
    }
}
