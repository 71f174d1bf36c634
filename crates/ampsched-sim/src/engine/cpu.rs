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
//! The batches are kept in closed form (`Traffic`), not as events: at
//! 4 000 interrupts/s a batch's start and end were two events, each settling
//! the running task and re-planning its completion, and made the capability
//! study's `dynamic` runs about twice as many events as the rest of the
//! machine. Each traffic CPU draws its batches from its own ChaCha8 stream
//! (the run's seed, stream 1 + the CPU's index), so a batch's count does not
//! depend on when it is drawn nor on any other draw of the run, and keeps the
//! CPU time the batches leave to tasks from time 0 as a running sum (an
//! amount, exact integers): a settle or a CPU's flush takes the difference
//! between two instants (`Cpu::run_amount`, `Cpu::flush`), and a completion
//! is planned by walking the batches ahead to the first whole ns at which
//! enough is left (`Traffic::reach`), at most `Traffic::REACH` (64) batches;
//! past them the task is re-planned at the next batch's start (an
//! `Ev::Noise` of the CPU, stale if the CPU re-planned since). The model is
//! the same: a batch takes the whole CPU from whatever runs (no progress in
//! it; busy time only between batches), ticks and slice ends fall through
//! it, a seizure takes everything. What differs from the event version
//! (session 15, 28 Nov 2026): the counts came from the run's one generator
//! in event order, interleaved with other noise's draws (so the
//! other CPUs' bursty noise draws differ too), by Knuth's method (a uniform
//! per packet); they are now drawn by inversion, one uniform per batch
//! (`random::Poisson`: the same law, other counts); and a running task was
//! settled at each batch's edges, where its work is rounded down to 2^-32 ns
//! — now only where the run settles it anyway. The Perfetto trace shows a traffic
//! CPU at its share between batches, without each batch. Worked example
//! (test `traffic_batches_in_closed_form_leave_the_gaps_to_tasks`).
//!
//! May import: the model (`CpuInfo`, `NoiseSpec`), `engine::fixed` and `engine::random`. Must
//! never import the event loop, tasks, the dispatcher or placer bridges: the engine tells a
//! CPU when its state changes; this room only keeps its books.

use super::fixed::{amount, div_ceil, share, ONE};
use super::random;
use ampsched_model::{CpuInfo, Nanos, NoiseSpec, TaskId, Topology};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

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
    pub(super) class: u32,
    /// Traffic noise on this CPU (`traffic` is `Some`): read by every settle and
    /// run start, so kept in the first line beside the share it replaces.
    traffic_on: bool,
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
    /// Traffic noise: its batches in closed form (`None`: other noise).
    traffic: Option<Box<Traffic>>,
    /// Traffic noise: CPU time left to tasks (an amount) from 0 to the running
    /// task's segment start (`Task::seg_start`).
    run_av: u128,
    /// Traffic noise: the same to `acc_since`.
    acc_av: u128,
    /// Traffic noise: when its pending re-plan event falls (`Ev::Noise`; `Nanos::MAX`: none live).
    pub(super) check_at: Nanos,
    pub(super) busy: u128,
    pub(super) idle: u128,
    pub(super) noise_t: u128,
    pub(super) p_busy: u128,
    pub(super) p_idle: u128,
    pub(super) p_noise: u128,
}

impl Cpu {
    /// A CPU as configured (`fast`: of the fast class on an asymmetric machine).
    pub(super) fn new(c: &CpuInfo, fast: bool, seed: u64) -> Cpu {
        let traffic = Traffic::new(&c.noise, seed, c.id.0);
        let mut cpu = Cpu {
            class: u32::try_from(c.class).expect("class index fits u32"),
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
            traffic_on: traffic.is_some(),
            traffic,
            run_av: 0,
            acc_av: 0,
            check_at: Nanos::MAX,
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
        if let NoiseSpec::Bursty { fraction_on, fraction_off, .. } = c.noise {
            cpu.phases = [fraction_off, fraction_on].map(|f| (f, share(1.0 - f)));
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

    /// Whether this CPU has traffic noise (its batches in closed form: `Traffic`).
    #[inline]
    pub(super) fn has_traffic(&self) -> bool {
        self.traffic_on
    }

    /// CPU time (an amount) left to the running task over the `dt` ns up to
    /// `now` since its segment started: `dt` at the share `avail`, or under
    /// traffic noise what the batches left of it (none while seized).
    #[inline]
    pub(super) fn run_amount(&mut self, dt: u64, now: Nanos) -> u128 {
        if self.traffic_on {
            self.traffic_left(now, false)
        } else {
            dt as u128 * self.avail as u128
        }
    }

    /// Under traffic noise: what the batches left to tasks up to `now` since the
    /// running task's segment start (`acc`: since `acc_since` instead). Out of
    /// line: the per-event paths of CPUs without traffic noise only test
    /// `traffic_on`, in the first line.
    #[cold]
    #[inline(never)]
    fn traffic_left(&mut self, now: Nanos, acc: bool) -> u128 {
        let tr = self.traffic.as_deref_mut().expect("traffic noise");
        tr.left_since(if acc { &mut self.acc_av } else { &mut self.run_av }, now, self.seized)
    }

    /// A task's segment starts on this CPU at `now` (it starts running): where
    /// `run_amount` counts from under traffic noise.
    #[inline]
    pub(super) fn run_starts(&mut self, now: Nanos) {
        if self.traffic_on {
            self.traffic_starts(now);
        }
    }

    /// `run_starts` under traffic noise (out of line, as `traffic_left`).
    #[cold]
    #[inline(never)]
    fn traffic_starts(&mut self, now: Nanos) {
        let tr = self.traffic.as_deref_mut().expect("traffic noise");
        self.run_av = tr.left_at(now.0);
    }

    /// Wall time from `now` until this CPU has left its task `need` (an amount
    /// of CPU time) under traffic noise: `Ok` the least whole ns, or `Err` the
    /// start of a batch `Traffic::REACH` batches ahead, before which it has not
    /// (re-plan there). Only for a CPU with traffic noise, not seized.
    pub(super) fn traffic_reach(&mut self, now: Nanos, need: u128) -> Result<Nanos, Nanos> {
        let tr = self.traffic.as_deref_mut().expect("traffic noise");
        tr.reach(now.0, need).map(Nanos).map_err(Nanos)
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
        let left = if self.traffic_on { self.traffic_left(now, true) } else { dt as u128 * self.avail as u128 };
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

/// Traffic noise in closed form (module essay, "Traffic"): one CPU's batches,
/// drawn from that CPU's own random stream as far ahead as a question needs,
/// and the CPU time (an amount) they leave to tasks from time 0 to any instant
/// from the last one asked about on.
pub(super) struct Traffic {
    rng: ChaCha8Rng,
    /// Moderation interval, ns.
    interval: u64,
    per_irq: u64,
    per_packet: u64,
    /// Packets per batch: a Poisson law of mean `pps / irq_per_s`.
    packets: random::Poisson,
    /// Share of its time the CPU leaves tasks between batches (1 − `between`).
    gap: u64,
    /// Batches drawn, earliest first, from the one holding the last instant
    /// asked about: (start ns, length ns, amount left to tasks from 0 to the start).
    drawn: VecDeque<(u64, u64, u128)>,
    /// Start of the next batch to draw, and the amount left to tasks up to it.
    next: u64,
    next_av: u128,
}

impl Traffic {
    /// Batches a completion's plan looks ahead at most; past them the task is
    /// re-planned at the next batch's start (`Cpu::check_at`).
    pub(super) const REACH: usize = 64;

    /// The batches of `noise` on CPU `cpu` in a run of `seed`, if it is traffic
    /// noise: its own ChaCha8 stream (the run's seed, stream 1 + `cpu`), so its
    /// draws depend on nothing else the run draws, nor on when they are made.
    fn new(noise: &NoiseSpec, seed: u64, cpu: u32) -> Option<Box<Traffic>> {
        let NoiseSpec::Traffic { pps, per_packet, irq_per_s, per_irq, ring, between } = *noise else {
            return None;
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(1 + u64::from(cpu));
        let interval = ((1e9 / irq_per_s).round() as u64).max(1);
        let gap = share(1.0 - between);
        // A batch of no length at 0 holds the time before the first interrupt,
        // one moderation interval in.
        Some(Box::new(Traffic {
            rng,
            interval,
            per_irq: per_irq.0,
            per_packet: per_packet.0,
            packets: random::Poisson::new(pps / irq_per_s, ring),
            gap,
            drawn: VecDeque::from([(0, 0, 0)]),
            next: interval,
            next_av: u128::from(interval) * u128::from(gap),
        }))
    }

    /// Draw the next batch: the hard interrupt and the packets that arrived in
    /// one moderation interval (a Poisson count, at most the ring). The
    /// interrupt after it comes one interval later, or 1 ns after the batch
    /// if the batch is longer.
    fn draw(&mut self) {
        let n = self.packets.draw(&mut self.rng);
        let len = self.per_irq + u64::from(n) * self.per_packet;
        self.drawn.push_back((self.next, len, self.next_av));
        let period = self.interval.max(len + 1);
        self.next += period;
        self.next_av += u128::from(period - len) * u128::from(self.gap);
    }

    /// The amount left to tasks from 0 to `t` (no earlier than the last instant
    /// asked about); batches before `t`'s are dropped.
    pub(super) fn left_at(&mut self, t: u64) -> u128 {
        loop {
            while self.drawn.len() > 1 && self.drawn[1].0 <= t {
                self.drawn.pop_front();
            }
            if self.next > t {
                break;
            }
            self.draw();
        }
        let (s, len, av) = self.drawn[0];
        debug_assert!(s <= t, "traffic noise asked about the past");
        av + u128::from((t - s).saturating_sub(len)) * u128::from(self.gap)
    }

    /// The amount left to tasks from the instant whose `left_at` is `mark` to
    /// `now` (none when `seized`: the placer had it all); `mark` moves to `now`.
    #[inline]
    fn left_since(&mut self, mark: &mut u128, now: Nanos, seized: bool) -> u128 {
        let a = self.left_at(now.0);
        let r = a - std::mem::replace(mark, a);
        if seized {
            0
        } else {
            r
        }
    }

    /// The least whole ns `t` ≥ `now` at which the amount left to tasks since
    /// `now` reaches `need` (`Ok`), or, if that lies past `REACH` batches, the
    /// start of the next batch to draw (`Err`).
    fn reach(&mut self, now: u64, need: u128) -> Result<u64, u64> {
        if need == 0 {
            return Ok(now);
        }
        let target = self.left_at(now) + need;
        let mut i = 0;
        loop {
            if i == self.drawn.len() {
                if i > Self::REACH {
                    return Err(self.next);
                }
                self.draw();
            }
            let (s, len, av) = self.drawn[i];
            let end = self.drawn.get(i + 1).map_or(self.next_av, |e| e.2);
            // Reached in this batch's gap (never when the gap leaves nothing).
            if target <= end {
                return Ok(s + len + div_ceil(target - av, self.gap) as u64);
            }
            i += 1;
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
    fn traffic_batches_in_closed_form_leave_the_gaps_to_tasks() {
        // The flood of `traffic_batches_take_the_whole_cpu_at_the_flood_rate`
        // (tests/sim.rs): 1 000 interrupts/s, a Poisson mean of 1 000 packets
        // past the 100-descriptor ring, so every batch is 20 + 100 × 3 =
        // 320 µs, one at each whole ms from 1 ms on. Left to tasks: all of the
        // first ms, then 0.68 ms of each.
        let noise = |between: f64| NoiseSpec::Traffic {
            pps: 1e6,
            per_packet: Nanos(3_000),
            irq_per_s: 1000.0,
            per_irq: Nanos(20_000),
            ring: 100,
            between,
        };
        let mut tr = Traffic::new(&noise(0.0), 1, 0).expect("traffic noise");
        let ms = |x: f64| amount((x * 1e6).round() as u64);
        assert_eq!(tr.left_at(500_000), ms(0.5));
        // Inside the first batch (1 ms to 1.32 ms) nothing is left; after it, the gap.
        assert_eq!(tr.left_at(1_200_000), ms(1.0));
        assert_eq!(tr.left_at(1_500_000), ms(1.18));
        assert_eq!(tr.left_at(3_000_000), ms(2.36));
        // 8.14 ms of CPU time from 0 (asked at 3 ms, 5.78 ms more): 1 ms, then
        // 10 intervals of 0.68 ms (to 11 ms), the 11th batch, 0.34 ms: 11.66 ms.
        assert_eq!(tr.reach(3_000_000, ms(5.78)), Ok(11_660_000));
        // From inside a batch: the first whole ns after it that leaves 1 ns.
        assert_eq!(tr.reach(11_100_000, amount(1)), Ok(11_320_001));
        assert_eq!(tr.reach(11_100_000, 0), Ok(11_100_000));
        // 70 ms from 12 ms is past 64 batches ahead (the 65 intervals to 77 ms
        // leave 44.2 ms): re-plan at the next batch's start, 77 ms.
        assert_eq!(tr.reach(12_000_000, ms(70.0)), Err(77_000_000));
        // A gap with 20 % other noise leaves 0.8 of it: 0.8 ms before the first batch.
        let mut tr = Traffic::new(&noise(0.2), 1, 0).expect("traffic noise");
        assert_eq!(tr.left_at(1_000_000), amount(1_000_000) * u128::from(share(0.8)) / u128::from(ONE));
    }

    #[test]
    fn what_a_switch_reads_is_in_a_cpus_first_line() {
        // The layout `Cpu`'s doc describes: each CPU starts a line; the task it
        // runs, its slice timer, speed, share, class and flags (with whether it
        // has traffic noise, tested by every settle) are in bytes 0..64.
        use std::mem::{align_of, offset_of};
        assert_eq!(align_of::<Cpu>(), 64);
        let first = [
            offset_of!(Cpu, curr),
            offset_of!(Cpu, avail),
            offset_of!(Cpu, class),
            offset_of!(Cpu, traffic_on),
            offset_of!(Cpu, resched_owed),
        ];
        for off in first {
            assert!(off < 64, "{off}");
        }
        assert!(offset_of!(Cpu, busy) >= 64);
    }
}
