//! CPU accounting: each simulated CPU's state (what runs, its slice timer,
//! its noise) and where its time went (busy, idle, stolen by noise), in
//! total and since the placer's last period; and the machine-wide "a fast
//! CPU idles while a slow one is busy" time.
//!
//! Units: times are fixed-point amounts of wall time (`engine::fixed`),
//! rounded to whole ns only in results and placer snapshots; noise is the
//! share of a CPU's time that is stolen (it counts neither as busy nor idle).
//!
//! **Traffic** (`NoiseSpec::Traffic`, a `[[machine.noise]]` entry with
//! `traffic_pps`): the noise of a CPU that takes a flooded NIC's interrupts,
//! as the work the packets cause rather than a share drawn at random. Under
//! a sustained flood a NAPI driver with interrupt moderation raises one hard
//! interrupt per moderation interval (`irq_per_s`; e1000's
//! `InterruptThrottleRate` settles at 4 000/s for bulk traffic,
//! `e1000_update_itr`'s `bulk_latency`); the handler (`irq_us`) masks the
//! NIC's interrupts and schedules the poll (`napi_schedule`), and on
//! `irq_exit` the NET_RX softirq (`net_rx_action`) polls the ring until it is
//! empty, each packet costing `packet_us` (driver, `netif_receive_skb`, the
//! protocol layers). So each interrupt brings one batch: the packets that
//! arrived since the last, a seeded Poisson count of mean `pps / irq_per_s`
//! (packets of a flood arrive independently of the moderation timer), at
//! most the ring (`ring`, default 256, e1000's `RxDescriptors`; the NIC
//! drops the rest), and the batch holds the whole CPU — hard and soft
//! interrupt context preempt every task — for `irq_us + n × packet_us`. The
//! next interrupt comes one moderation interval after this one. Between
//! batches the CPU has `fraction_off` of other noise (default 0). Deferral to
//! ksoftirqd is not modelled because it cannot happen here: `net_rx_action`
//! stops after `netdev_budget` (300) packets and re-raises NET_RX;
//! `__do_softirq` restarts up to MAX_SOFTIRQ_RESTART (10) times before it
//! wakes ksoftirqd (`wakeup_softirqd`), so only a batch beyond 3 000
//! packets would be deferred, and the ring is at most 3 000 (the parser
//! rejects more, and traffic whose batches would take more than
//! `MAX_NOISE` of the CPU: NAPI would then poll without pause). What the
//! balancers see is the kernel's view: batch time is noise (softirq and irq
//! time in `/proc/stat`), never a task. Worked example (test
//! `traffic_batches_take_the_whole_cpu_at_the_flood_rate`).
//!
//! May import: the model (`CpuInfo`, `NoiseSpec`), `engine::fixed` and `engine::random`. Must
//! never import the event loop, tasks, the dispatcher or placer bridges: the engine tells a
//! CPU when its state changes; this room only keeps its books.

use super::fixed::{amount, share, ONE};
use super::random;
use ampsched_model::{CpuInfo, Nanos, NoiseSpec, TaskId, Topology};
use rand_chacha::ChaCha8Rng;

/// The machine as the engine runs it for `disp`: a dispatcher with an RT
/// class (`Dispatcher::models_rt_load`, e.g. `linux`) runs the RT loads
/// itself; for the others each RT load becomes constant noise of its duty
/// (spin / period) on its CPU, combined with the CPU's own noise as
/// independent shares (1 − (1 − n)(1 − duty)).
pub(super) fn rt_loads_for(mut topo: Topology, models_rt: bool) -> Topology {
    if models_rt {
        return topo;
    }
    for r in std::mem::take(&mut topo.rt_loads) {
        let both = |n: f64| 1.0 - (1.0 - n) * (1.0 - r.duty());
        let c = &mut topo.cpus[r.cpu.idx()];
        c.noise = match c.noise.clone() {
            NoiseSpec::None => NoiseSpec::Constant { fraction: r.duty() },
            NoiseSpec::Constant { fraction } => NoiseSpec::Constant { fraction: both(fraction) },
            NoiseSpec::Bursty { fraction_on, fraction_off, on, off, random, stall } => NoiseSpec::Bursty {
                fraction_on: both(fraction_on),
                fraction_off: both(fraction_off),
                on,
                off,
                random,
                stall,
            },
            NoiseSpec::Traffic { pps, per_packet, irq_per_s, per_irq, ring, between } => {
                NoiseSpec::Traffic { pps, per_packet, irq_per_s, per_irq, ring, between: both(between) }
            }
        };
    }
    topo
}

/// One simulated CPU.
///
/// Laid out in order (`repr(C)`, each CPU on its own 64-byte lines): what a
/// switch, a settle and a timer read (the task it runs, its slice timer, its
/// speed, class and share left by noise, its flags) in the first line; the
/// noise's phases and the time accounts, read when it turns busy or idle,
/// after (issue 19: `ampsched bench` XL has 256 CPUs).
#[repr(C, align(64))]
pub(super) struct Cpu {
    // Line 1: what a switch, a settle and a timer read.
    pub(super) curr: Option<TaskId>,
    /// When the current slice ends (`Nanos::MAX`: no slice).
    pub(super) slice_at: Nanos,
    /// Time of the earliest pending `SliceEnd` event of this CPU (`Nanos::MAX`: none).
    pub(super) slice_ev_at: Nanos,
    pub(super) speed: f64,
    /// Share of its time left to the task: 1 − `noise`, fixed-point.
    pub(super) avail: u64,
    pub(super) class: usize,
    pub(super) acc_since: Nanos,
    pub(super) fast: bool,
    pub(super) tick_armed: bool,
    /// This CPU's slice end was put behind a compute completing at the same instant.
    pub(super) slice_deferred: bool,
    pub(super) resched_pending: bool,
    pub(super) noise_on: bool,
    /// Its bursts are stalls (`NoiseSpec::Bursty::stall`): timer decisions wait for their end.
    pub(super) stalls: bool,
    /// A tick came due inside a stall and is owed at its end.
    pub(super) tick_owed: bool,
    /// A reschedule asked inside a stall, owed at its end.
    pub(super) resched_owed: bool,
    // Then the noise and the time accounts.
    /// The dispatcher's accounting (its timer on this CPU) came due inside a stall.
    pub(super) account_owed: bool,
    /// Share of its time noise steals (as configured; see `avail`).
    pub(super) noise: f64,
    /// Bursty noise's fraction and `avail` outside (`[0]`) and inside (`[1]`) a burst,
    /// turned into shares once, not at every switch.
    phases: [(f64, u64); 2],
    /// The noise's fraction and `avail` now, outside a seizure (`noise` and `avail` are these
    /// unless `seized`).
    free: (f64, u64),
    /// The placer's own work holds the CPU (`Sim::seize`): no task progresses on it.
    pub(super) seized: bool,
    /// When the seizure ends (meaningful while `seized`).
    pub(super) seized_until: Nanos,
    /// Traffic noise: the length of the last batch (the gap to the next interrupt is the
    /// rest of the moderation interval).
    batch: Nanos,
    pub(super) busy: u128,
    pub(super) idle: u128,
    pub(super) noise_t: u128,
    pub(super) p_busy: u128,
    pub(super) p_idle: u128,
    pub(super) p_noise: u128,
}

impl Cpu {
    /// A CPU as configured (`fast`: of the fast class on an asymmetric machine).
    pub(super) fn new(c: &CpuInfo, fast: bool) -> Cpu {
        let mut cpu = Cpu {
            class: c.class,
            speed: c.speed,
            fast,
            curr: None,
            slice_at: Nanos::MAX,
            slice_ev_at: Nanos::MAX,
            tick_armed: false,
            slice_deferred: false,
            resched_pending: false,
            noise: 0.0,
            avail: 0,
            phases: [(0.0, ONE); 2],
            free: (0.0, ONE),
            seized: false,
            seized_until: Nanos::ZERO,
            batch: Nanos::ZERO,
            noise_on: false,
            stalls: matches!(c.noise, NoiseSpec::Bursty { stall: true, .. }),
            tick_owed: false,
            resched_owed: false,
            account_owed: false,
            acc_since: Nanos::ZERO,
            busy: 0,
            idle: 0,
            noise_t: 0,
            p_busy: 0,
            p_idle: 0,
            p_noise: 0,
        };
        match c.noise {
            NoiseSpec::Bursty { fraction_on, fraction_off, .. } => {
                cpu.phases = [fraction_off, fraction_on].map(|f| (f, share(1.0 - f)));
            }
            // A batch of interrupts takes the whole CPU (module essay, "Traffic").
            NoiseSpec::Traffic { between, .. } => cpu.phases = [(between, share(1.0 - between)), (1.0, 0)],
            _ => {}
        }
        cpu.set_noise(match c.noise {
            NoiseSpec::None => 0.0,
            NoiseSpec::Constant { fraction } => fraction,
            NoiseSpec::Bursty { fraction_off, .. } => fraction_off,
            NoiseSpec::Traffic { between, .. } => between,
        });
        cpu
    }

    /// Bursty noise switched on (inside a burst) or off: its fraction of that phase now applies.
    #[inline]
    pub(super) fn noise_phase(&mut self, on: bool) {
        self.free = self.phases[usize::from(on)];
        self.apply_share();
    }

    /// The placer's own work takes (`true`) or gives back the whole CPU: while
    /// seized the noise takes all of its time (a real-time process preempts the task).
    pub(super) fn seize(&mut self, on: bool) {
        self.seized = on;
        self.apply_share();
    }

    /// `noise` and `avail` from the noise's phase and the seizure.
    #[inline]
    fn apply_share(&mut self) {
        (self.noise, self.avail) = if self.seized { (1.0, 0) } else { self.free };
    }

    /// Traffic noise `spec`: the length of the phase that starts now — a batch (`on`: the
    /// hard interrupt and the packets that arrived in one moderation interval, a Poisson
    /// count drawn from `rng`, at most the ring) or the gap to the next interrupt (the rest
    /// of the interval after the last batch, at least 1 ns). Module essay, "Traffic".
    pub(super) fn traffic_phase(&mut self, spec: &NoiseSpec, rng: &mut ChaCha8Rng, on: bool) -> Nanos {
        let NoiseSpec::Traffic { pps, per_packet, irq_per_s, per_irq, ring, .. } = *spec else { return Nanos::MAX };
        let interval = Nanos((1e9 / irq_per_s).round() as u64);
        if on {
            let n = random::poisson(rng, pps / irq_per_s, ring);
            self.batch = Nanos(per_irq.0 + u64::from(n) * per_packet.0);
            self.batch
        } else {
            Nanos(interval.0.saturating_sub(self.batch.0).max(1))
        }
    }

    /// Whether the CPU is inside a stall now (a burst of stalling noise).
    #[inline]
    pub(super) fn stalled(&self) -> bool {
        self.stalls && self.noise_on
    }

    /// Whether the CPU runs a task and is inside a stall: what is asked of it waits
    /// for the stall's end (an idle one sleeps and is woken at once; engine essay).
    #[inline]
    pub(super) fn busy_stalled(&self) -> bool {
        self.curr.is_some() && self.stalled()
    }

    /// Noise now steals `fraction` of this CPU's time.
    pub(super) fn set_noise(&mut self, fraction: f64) {
        self.free = (fraction, share(1.0 - fraction));
        self.apply_share();
    }

    /// Account this CPU's time up to `now` as busy or idle (less noise).
    pub(super) fn flush(&mut self, now: Nanos) {
        let dt = (now - self.acc_since).0;
        if dt == 0 {
            return;
        }
        self.acc_since = now;
        let left = dt as u128 * self.avail as u128;
        let n = amount(dt) - left;
        self.noise_t += n;
        self.p_noise += n;
        if self.curr.is_some() {
            self.busy += left;
            self.p_busy += left;
        } else {
            self.idle += left;
            self.p_idle += left;
        }
    }
}

/// Time during which at least one fast CPU idles while a slow CPU is busy.
pub(super) struct FastIdleSlowBusy {
    idle_fast: u32,
    busy_slow: u32,
    asymmetric: bool,
    since: Nanos,
    /// Total so far (closed intervals).
    pub(super) ns: u64,
}

impl FastIdleSlowBusy {
    /// All CPUs idle: `fast` of them fast, on an `asymmetric` machine.
    pub(super) fn new(fast: u32, asymmetric: bool) -> Self {
        FastIdleSlowBusy { idle_fast: fast, busy_slow: 0, asymmetric, since: Nanos::ZERO, ns: 0 }
    }

    /// A CPU (`fast` or not) became busy (`busy`) or idle at `now`.
    pub(super) fn changed(&mut self, fast: bool, busy: bool, now: Nanos) {
        let before = self.holds();
        if fast {
            if busy {
                self.idle_fast -= 1;
            } else {
                self.idle_fast += 1;
            }
        } else if self.asymmetric {
            if busy {
                self.busy_slow += 1;
            } else {
                self.busy_slow -= 1;
            }
        }
        let after = self.holds();
        if before && !after {
            self.ns += (now - self.since).0;
        } else if !before && after {
            self.since = now;
        }
    }

    /// Whether the condition holds now.
    fn holds(&self) -> bool {
        self.idle_fast > 0 && self.busy_slow > 0
    }

    /// Close an open interval at the end of the run.
    pub(super) fn finish(&mut self, now: Nanos) {
        if self.holds() {
            self.ns += (now - self.since).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_switch_reads_is_in_a_cpus_first_line() {
        // The layout `Cpu`'s doc describes: each CPU starts a line; the task it
        // runs, its slice timer, speed, share, class and flags are in bytes 0..64.
        use std::mem::{align_of, offset_of};
        assert_eq!(align_of::<Cpu>(), 64);
        for off in
            [offset_of!(Cpu, curr), offset_of!(Cpu, avail), offset_of!(Cpu, class), offset_of!(Cpu, resched_owed)]
        {
            assert!(off < 64, "{off}");
        }
        assert!(offset_of!(Cpu, busy) >= 64);
    }
}
