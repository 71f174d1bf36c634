//! Statistics accumulators: per-domain time series (CPU time per class,
//! average active vCPUs, migrations per interval) and the dispatcher's
//! counter series, sampled every `stats_interval`.
//!
//! May import: `crate::results` (the point types). Must never import the
//! event loop, tasks, CPUs or the bridges: the engine reports run time,
//! migrations and active-count changes; this room integrates them.

use crate::results::{CounterPoint, SeriesPoint};
use ampsched_model::Nanos;

/// Time-series accumulators of a run.
pub(super) struct Series {
    /// Per domain, per class: run time in the current interval.
    pub(super) run: Vec<Vec<u64>>,
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
}

impl Series {
    /// Empty accumulators for `nd` domains and `nclass` CPU classes.
    pub(super) fn new(nd: usize, nclass: usize) -> Series {
        Series {
            run: vec![vec![0; nclass]; nd],
            mig: vec![0; nd],
            active_int: vec![0; nd],
            active: vec![0; nd],
            active_since: vec![Nanos::ZERO; nd],
            points: vec![Vec::new(); nd],
            counters: Vec::new(),
            last: Nanos::ZERO,
        }
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

    /// Close the interval at `now`: one point per domain and the counters' values.
    pub(super) fn sample(&mut self, now: Nanos, nclass: usize, counters: Vec<f64>) {
        let span = (now - self.last).0.max(1);
        for d in 0..self.points.len() {
            self.active_int[d] += (now - self.active_since[d]).0 * self.active[d] as u64;
            self.active_since[d] = now;
            let point = SeriesPoint {
                t_ns: now.0,
                class_ns: std::mem::replace(&mut self.run[d], vec![0; nclass]),
                active_avg: self.active_int[d] as f64 / span as f64,
                migrations: std::mem::take(&mut self.mig[d]),
            };
            self.active_int[d] = 0;
            self.points[d].push(point);
        }
        self.counters.push(CounterPoint { t_ns: now.0, values: counters });
        self.last = now;
    }
}
