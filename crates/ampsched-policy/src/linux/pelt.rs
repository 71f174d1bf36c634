//! PELT, per-entity load tracking (Linux `kernel/sched/pelt.c`).
//!
//! A signal is a geometric series over 1024 µs periods (time is counted in
//! units of 1024 ns, as the kernel's `delta >>= 10`): the contribution of a
//! period `n` periods ago is weighted by `y^n` with `y^32 = 1/2`, so the
//! half-life is 32 periods ≈ 32 ms. `___update_load_sum` splits the time
//! since the last update into the rest of the open period (`d1`), whole
//! periods (`p`) and the start of the new open period (`d3`);
//! `__accumulate_pelt_segments` adds `d1·y^p + 1024·Σ_{n=1}^{p-1} y^n + d3`,
//! where the middle sum is `LOAD_AVG_MAX − LOAD_AVG_MAX·y^p − 1024`.
//! `___update_load_avg` divides the sum by `LOAD_AVG_MAX − 1024 +
//! period_contrib` (`get_pelt_divider`), so an always-active signal tends to
//! 1024 (`SCHED_CAPACITY_SCALE`). `decay_load` multiplies by `y^n` as
//! `val >> (n / 32)` then a 32-bit fixed-point factor `y^(n mod 32)·2^32`
//! (the kernel's `runnable_avg_yN_inv` table, computed here from its
//! definition).
//!
//! Scaling: a task running on a CPU of original capacity `c` contributes
//! `c / 1024` of its running time, so an always-running task on a
//! half-capacity CPU tends to 512 (Linux scales the PELT clock instead,
//! `update_rq_clock_pelt`; scaling the contribution gives the same steady
//! state and skips the idle-time catch-up of the scaled clock).

/// `LOAD_AVG_MAX`: the sum of an always-active signal, 1024·Σ y^n.
pub const LOAD_AVG_MAX: u64 = 47742;
/// Periods in which a contribution halves (`LOAD_AVG_PERIOD`).
pub const LOAD_AVG_PERIOD: u64 = 32;
/// `SCHED_CAPACITY_SCALE`.
pub const SCALE: u64 = 1024;

/// `y^n · 2^32` for n in 0..32 (n = 0 is capped to `u32::MAX`, as in Linux).
fn y_inv(n: u64) -> u64 {
    debug_assert!(n < LOAD_AVG_PERIOD);
    let v = (2f64.powi(32) * (-(n as f64) / LOAD_AVG_PERIOD as f64).exp2()).floor();
    (v as u64).min(u32::MAX as u64)
}

/// `decay_load`: `val · y^n`.
pub fn decay_load(val: u64, n: u64) -> u64 {
    if n > LOAD_AVG_PERIOD * 63 {
        return 0;
    }
    let v = val >> (n / LOAD_AVG_PERIOD);
    ((v as u128 * y_inv(n % LOAD_AVG_PERIOD) as u128) >> 32) as u64
}

/// One PELT signal (`struct sched_avg`, one of its sums).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pelt {
    /// Decayed sum, in 1024ths of a 1024-ns unit.
    pub sum: u64,
    /// Average in [0, 1024].
    pub avg: u64,
    /// Units (1024 ns) already counted in the open period.
    pub period_contrib: u64,
    /// Time of the last update, ns (a multiple of 1024).
    pub last: u64,
}

impl Pelt {
    /// Advance to `now_ns`: the signal was `active` (running, or runnable)
    /// since the last update, contributing `scale / 1024` of that time.
    pub fn update(&mut self, now_ns: u64, active: bool, scale: u64) {
        if now_ns <= self.last {
            return;
        }
        let delta = (now_ns - self.last) >> 10;
        if delta == 0 {
            return;
        }
        self.last += delta << 10;
        let mut contrib = delta;
        let total = delta + self.period_contrib;
        let periods = total / 1024;
        let d3 = total % 1024;
        if periods > 0 {
            self.sum = decay_load(self.sum, periods);
            let d1 = 1024 - self.period_contrib;
            contrib = decay_load(d1, periods) + (LOAD_AVG_MAX - decay_load(LOAD_AVG_MAX, periods) - 1024) + d3;
        }
        self.period_contrib = d3;
        if active {
            self.sum += (contrib * scale.min(SCALE)) >> 10 << 10;
        }
        self.avg = self.sum / (LOAD_AVG_MAX - 1024 + self.period_contrib);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_halves_every_32_periods() {
        // y^32 = 1/2: 1024 → 512 after 32 periods, → 256 after 64.
        assert_eq!(decay_load(1024, 32), 511); // 512 · (2^32 − 1) / 2^32, floored
        assert_eq!(decay_load(1 << 20, 64), (1 << 18) - 1);
        // y^16 = 1/√2: the kernel's table entry 0xb504f333.
        assert_eq!(y_inv(16), 0xb504_f333);
        assert_eq!(decay_load(5, 32 * 64), 0);
    }

    #[test]
    fn an_always_running_task_tends_to_1024_and_halves_32_ms_after_stopping() {
        // Running 1 s (≈ 31 half-lives): avg ≈ 1024 (within rounding).
        let mut s = Pelt::default();
        s.update(1_000_000_000, true, 1024);
        assert!(s.avg >= 1010, "{}", s.avg);
        // 32 periods of 1024 µs later (32.768 ms) it has halved.
        let peak = s.avg;
        s.update(1_000_000_000 + 32 * 1024 * 1024, false, 1024);
        assert!((s.avg as i64 - peak as i64 / 2).abs() <= 8, "{} vs {}", s.avg, peak);
    }

    #[test]
    fn half_duty_settles_near_512_and_half_capacity_halves_the_signal() {
        // 5 ms on, 5 ms off for 1 s: the mean of a 50 % duty signal is 512;
        // at the end of an off phase it sits below, at the end of an on phase above.
        let mut s = Pelt::default();
        let ms = 1_000_000u64;
        for k in 0..100 {
            s.update((10 * k + 5) * ms, true, 1024);
            s.update((10 * k + 10) * ms, false, 1024);
        }
        assert!((440..=512).contains(&s.avg), "{}", s.avg);
        // Always running at capacity 512: tends to 512.
        let mut h = Pelt::default();
        h.update(1_000_000_000, true, 512);
        assert!((500..=512).contains(&h.avg), "{}", h.avg);
    }
}
