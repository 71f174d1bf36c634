//! The loop's clock: period deadlines and the time that actually elapsed
//! between two samples. Pure (times come in as arguments), so it is tested
//! without sleeping; [`crate::signals`] gives the real monotonic time.
//!
//! A period whose work overruns the next deadline does not run twice in a
//! row: the next deadline skips to the first period boundary in the future
//! (boundaries stay `start + k × period`). The placer is told the elapsed
//! time since the previous sample (`Snapshot::period`), which is longer than
//! the nominal period after a late wake-up or a skip.

use ampsched_model::Nanos;
use std::time::Duration;

/// Period deadlines and elapsed time between samples.
#[derive(Clone, Debug)]
pub struct Clock {
    start: Duration,
    period: Duration,
    next: Duration,
    last_sample: Duration,
}

impl Clock {
    /// A clock started at monotonic time `start` with `period` between samples.
    pub fn new(start: Duration, period: Duration) -> Clock {
        let period = period.max(Duration::from_nanos(1));
        Clock { start, period, next: start, last_sample: start }
    }

    /// When the loop started.
    pub fn start(&self) -> Duration {
        self.start
    }

    /// A sample is taken at `now`: the time elapsed since the previous one (since the start
    /// for the first).
    pub fn sample(&mut self, now: Duration) -> Nanos {
        let e = now.saturating_sub(self.last_sample);
        self.last_sample = now;
        Nanos(e.as_nanos() as u64)
    }

    /// Time since the start at `now`, as the placer's `Snapshot::now`.
    pub fn since_start(&self, now: Duration) -> Nanos {
        Nanos(now.saturating_sub(self.start).as_nanos() as u64)
    }

    /// The next deadline after a period's work ended at `now`: the next boundary, or the
    /// first one in the future when the work overran.
    pub fn next_deadline(&mut self, now: Duration) -> Duration {
        self.next += self.period;
        if self.next < now {
            let behind = (now - self.next).as_nanos() / self.period.as_nanos() + 1;
            self.next += self.period * behind as u32;
        }
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_skip_overruns_and_samples_report_elapsed_time() {
        let ms = Duration::from_millis;
        let mut c = Clock::new(ms(1000), ms(30));
        // Work of period 0 ends at 1005 ms: next boundary 1030.
        assert_eq!(c.next_deadline(ms(1005)), ms(1030));
        // Woke at 1031 ms: 31 ms elapsed since the start.
        assert_eq!(c.sample(ms(1031)), Nanos::from_ms(31));
        // That period's work ran until 1100 ms (boundaries 1060 and 1090 missed):
        // next = 1060 < 1100 → behind = (1100 − 1060) / 30 + 1 = 2 → 1060 + 60 = 1120.
        assert_eq!(c.next_deadline(ms(1100)), ms(1120));
        // The placer sees the whole 89 ms since the last sample, not 30.
        assert_eq!(c.sample(ms(1120)), Nanos::from_ms(89));
        assert_eq!(c.since_start(ms(1120)), Nanos::from_ms(120));
    }
}
