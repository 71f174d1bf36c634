//! Integer nanoseconds, the only unit of time inside ampsched.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, Sub, SubAssign};

/// A point in time or a duration, in integer nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Zero.
    pub const ZERO: Nanos = Nanos(0);
    /// The largest representable time (used as "never").
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// Whether this is zero (for `skip_serializing_if`).
    pub fn is_zero(&self) -> bool {
        self.0 == 0
    }
    /// From microseconds.
    pub const fn from_us(us: u64) -> Nanos {
        Nanos(us * 1_000)
    }
    /// From milliseconds.
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    /// From whole seconds.
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s * 1_000_000_000)
    }
    /// From fractional milliseconds, rounded to the nearest nanosecond (negative → 0).
    pub fn from_ms_f64(ms: f64) -> Nanos {
        Nanos((ms * 1e6).round().max(0.0) as u64)
    }
    /// From fractional seconds, rounded to the nearest nanosecond (negative → 0).
    pub fn from_secs_f64(s: f64) -> Nanos {
        Nanos((s * 1e9).round().max(0.0) as u64)
    }
    /// As fractional seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// As fractional milliseconds.
    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Saturating subtraction.
    pub fn saturating_sub(self, o: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(o.0))
    }
    /// The next multiple of `period` strictly after `self` (period > 0).
    pub fn next_multiple(self, period: Nanos) -> Nanos {
        Nanos((self.0 / period.0 + 1) * period.0)
    }
}

impl Add for Nanos {
    type Output = Nanos;
    #[inline]
    fn add(self, o: Nanos) -> Nanos {
        Nanos(self.0 + o.0)
    }
}
impl AddAssign for Nanos {
    #[inline]
    fn add_assign(&mut self, o: Nanos) {
        self.0 += o.0;
    }
}
impl Sub for Nanos {
    type Output = Nanos;
    #[inline]
    fn sub(self, o: Nanos) -> Nanos {
        Nanos(self.0 - o.0)
    }
}
impl SubAssign for Nanos {
    #[inline]
    fn sub_assign(&mut self, o: Nanos) {
        self.0 -= o.0;
    }
}
impl Mul<u64> for Nanos {
    type Output = Nanos;
    #[inline]
    fn mul(self, k: u64) -> Nanos {
        Nanos(self.0 * k)
    }
}
impl Div<u64> for Nanos {
    type Output = Nanos;
    #[inline]
    fn div(self, k: u64) -> Nanos {
        Nanos(self.0 / k)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        // 30 ms = 30 000 000 ns
        assert_eq!(Nanos::from_ms(30).0, 30_000_000);
        assert_eq!(Nanos::from_ms_f64(0.5).0, 500_000);
        assert_eq!(Nanos::from_secs(2).as_secs_f64(), 2.0);
        // next multiple of 10 ms after 25 ms is 30 ms; after 30 ms it is 40 ms
        assert_eq!(Nanos::from_ms(25).next_multiple(Nanos::from_ms(10)), Nanos::from_ms(30));
        assert_eq!(Nanos::from_ms(30).next_multiple(Nanos::from_ms(10)), Nanos::from_ms(40));
    }
}
