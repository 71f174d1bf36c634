//! The machine: CPUs with speed classes, memory domains, NUMA nodes and noise.

use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use crate::time::Nanos;
use serde::{Deserialize, Serialize};

/// A class of CPUs sharing one speed factor (e.g. "fast" = 2.0, "slow" = 1.0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuClass {
    /// Label shown in outputs.
    pub name: String,
    /// Speed relative to a speed-1.0 core (compute work scales with it).
    pub speed: f64,
}

/// Interrupt/OS noise stealing part of a CPU's time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub enum NoiseSpec {
    /// No noise.
    #[default]
    None,
    /// A constant fraction of the CPU (0 ≤ f < 1).
    Constant {
        /// Fraction of time taken by noise.
        fraction: f64,
    },
    /// Alternating bursts: `fraction_on` for `on`, then `fraction_off` for `off`.
    Bursty {
        /// Noise fraction during a burst.
        fraction_on: f64,
        /// Noise fraction between bursts.
        fraction_off: f64,
        /// Mean burst length.
        on: Nanos,
        /// Mean gap length.
        off: Nanos,
        /// Draw lengths from an exponential distribution (seeded) instead of fixed.
        random: bool,
        /// A burst stalls the CPU itself (a vCPU thread off its host CPU): the
        /// slice ends and ticks due inside it are decided at its end.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stall: bool,
    },
    /// The work a flood of network traffic causes on the CPU that takes the NIC's
    /// interrupts: every `1 / irq_per_s` (interrupt moderation) one hard interrupt and
    /// the receive softirq for the packets that arrived since (a seeded Poisson count at
    /// `pps`, at most `ring`), each batch taking the whole CPU (`crates/ampsched-sim/src/engine/cpu.rs`, "Traffic").
    Traffic {
        /// Packets per second arriving (the flood's rate).
        pps: f64,
        /// CPU time of the receive path per packet (NET_RX softirq).
        per_packet: Nanos,
        /// Hard interrupts per second (the NIC's interrupt moderation).
        irq_per_s: f64,
        /// CPU time of one hard interrupt.
        per_irq: Nanos,
        /// Receive ring size: packets beyond it in one batch are dropped by the NIC.
        ring: u32,
        /// Noise fraction between batches.
        between: f64,
    },
}

impl NoiseSpec {
    /// The long-run average noise fraction.
    pub fn mean_fraction(&self) -> f64 {
        match self {
            NoiseSpec::None => 0.0,
            NoiseSpec::Constant { fraction } => *fraction,
            NoiseSpec::Bursty { fraction_on, fraction_off, on, off, .. } => {
                let t = (on.0 + off.0) as f64;
                if t == 0.0 {
                    0.0
                } else {
                    (fraction_on * on.0 as f64 + fraction_off * off.0 as f64) / t
                }
            }
            NoiseSpec::Traffic { between, .. } => {
                let b = self.traffic_share().min(1.0);
                b + (1.0 - b) * between
            }
        }
    }

    /// Traffic noise: the share of the CPU its batches would take at the mean batch (packets
    /// beyond the ring not counted; above 1 when they could not all be served); 0 for other noise.
    pub fn traffic_share(&self) -> f64 {
        match self {
            NoiseSpec::Traffic { pps, per_packet, irq_per_s, per_irq, ring, .. } => {
                let batch = (pps / irq_per_s).min(f64::from(*ring));
                irq_per_s * (per_irq.0 as f64 + batch * per_packet.0 as f64) / 1e9
            }
            _ => 0.0,
        }
    }
}

/// One CPU of the machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuInfo {
    /// Its id (= index).
    pub id: CpuId,
    /// Index into `Topology::classes`.
    pub class: usize,
    /// Speed factor (copied from its class).
    pub speed: f64,
    /// Memory domain: CPUs sharing a last-level cache.
    pub mem_domain: u32,
    /// NUMA node.
    pub numa: u32,
    /// Noise on this CPU.
    pub noise: NoiseSpec,
}

/// Cache parameters for the migration refill cost (see docs/design/workloads.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheSpec {
    /// Private L2 per CPU, KiB.
    pub l2_kb: u32,
    /// Shared last-level cache per memory domain, KiB.
    pub llc_kb: u32,
    /// Refill bandwidth from the LLC into L2, bytes per ns (= GB/s).
    pub llc_refill_gbps: f64,
    /// Refill bandwidth from DRAM, bytes per ns (= GB/s).
    pub dram_refill_gbps: f64,
}

/// L2 of the paper's Opteron 2350: 512 KiB private.
pub const DEFAULT_L2_KB: u32 = 512;
/// L3 of the paper's Opteron 2350: 2 MiB per chip (memory domain).
pub const DEFAULT_LLC_KB: u32 = 2048;
/// 512 KiB from LLC in ≈ 75 µs (docs/design/workloads.md: 50-100 µs) ≈ 7 GB/s.
pub const DEFAULT_LLC_REFILL_GBPS: f64 = 7.0;
/// 2.5 MiB from DRAM in ≈ 1.1 ms (docs/design/workloads.md: 0.5-1.7 ms) ≈ 2.4 GB/s.
pub const DEFAULT_DRAM_REFILL_GBPS: f64 = 2.4;

impl Default for CacheSpec {
    fn default() -> Self {
        CacheSpec {
            l2_kb: DEFAULT_L2_KB,
            llc_kb: DEFAULT_LLC_KB,
            llc_refill_gbps: DEFAULT_LLC_REFILL_GBPS,
            dram_refill_gbps: DEFAULT_DRAM_REFILL_GBPS,
        }
    }
}

impl CacheSpec {
    /// Stall time to refill `ws_kb` of working set after a migration, scaled by `overlap`
    /// (0 = streaming program that misses anyway, 1 = full penalty).
    pub fn refill_cost(&self, ws_kb: u32, overlap: f64, across_mem_domains: bool) -> Nanos {
        let (kb, gbps) = if across_mem_domains {
            (ws_kb.min(self.l2_kb + self.llc_kb), self.dram_refill_gbps)
        } else {
            (ws_kb.min(self.l2_kb), self.llc_refill_gbps)
        };
        let bytes = kb as f64 * 1024.0;
        Nanos((bytes / gbps * overlap.clamp(0.0, 1.0)).round() as u64)
    }
}

/// The memory bus all CPUs share (a front-side bus SMP): the machine-level
/// memory bandwidth that co-running memory-bound tasks divide among
/// themselves. Absent (`Topology::memory_bus` = `None`), a task's memory-bound
/// share takes the same time whatever the other CPUs do. The engine's rule
/// (`crates/ampsched-sim/src/engine/bus.rs`): a running task uses the bus the
/// share `core_gbps / gbps × m / t` of the time (`m` its memory-bound share,
/// `t` its CPU ns per ns of work), and when the co-runners' shares add up to
/// more than the whole bus, it is divided max-min fairly (round-robin
/// arbitration) and the memory-bound share of every task held to less than it
/// asks for slows until its use fits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryBus {
    /// Bandwidth of the shared bus, bytes per ns (= GB/s).
    pub gbps: f64,
    /// What one core draws while it stalls on memory, bytes per ns (= GB/s).
    pub core_gbps: f64,
}

/// A periodic real-time (SCHED_FIFO) task pinned to one CPU, such as the
/// `ampsched-hog` duty-cycle hog: runnable for `spin` at the start of every
/// `period`, shifted by `phase`. It is part of the machine, not of the
/// workload: what a CPU loses to it is "RT pressure" (Linux `cpu_util_rt`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtLoad {
    /// The CPU it is pinned to.
    pub cpu: CpuId,
    /// Run time per period (0 < spin ≤ period).
    pub spin: Nanos,
    /// Period (> 0).
    pub period: Nanos,
    /// Start of its first period (< period).
    pub phase: Nanos,
}

impl RtLoad {
    /// True when the RT task runs during `[t, t + ε)`.
    pub fn active_at(&self, t: Nanos) -> bool {
        t >= self.phase && (t - self.phase).0 % self.period.0 < self.spin.0
    }

    /// The first instant strictly after `t` at which it starts or stops running.
    pub fn next_change(&self, t: Nanos) -> Nanos {
        if t < self.phase {
            return self.phase;
        }
        let k = (t - self.phase).0 / self.period.0;
        let start = self.phase.0 + k * self.period.0;
        let end = start + self.spin.0;
        Nanos(if t.0 < end { end } else { start + self.period.0 })
    }

    /// The first instant at or after `t` at which it starts a period.
    pub fn next_start(&self, t: Nanos) -> Nanos {
        if t <= self.phase {
            return self.phase;
        }
        let d = (t - self.phase).0;
        Nanos(self.phase.0 + d.div_ceil(self.period.0) * self.period.0)
    }

    /// Its share of the CPU, spin / period.
    pub fn duty(&self) -> f64 {
        self.spin.0 as f64 / self.period.0 as f64
    }
}

/// The whole machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// CPU classes in declaration order.
    pub classes: Vec<CpuClass>,
    /// CPUs, indexed by id.
    pub cpus: Vec<CpuInfo>,
    /// Cache model for migration costs.
    pub cache: CacheSpec,
    /// Index of the fastest class (the AASH "fast" cores).
    pub fast_class: usize,
    /// CPUs of the fastest class.
    pub fast_cpus: CpuSet,
    /// All CPUs.
    pub all: CpuSet,
    /// CPUs of each memory domain, indexed by memory-domain id.
    pub mem_domains: Vec<CpuSet>,
    /// CPUs of each NUMA node, indexed by node id.
    pub numa_nodes: Vec<CpuSet>,
    /// Real-time tasks pinned to CPUs (RT pressure), in declaration order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rt_loads: Vec<RtLoad>,
    /// The memory bus all CPUs share, when its bandwidth bounds co-running
    /// memory-bound tasks (`None`: it never does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bus: Option<MemoryBus>,
    /// The slower classes are the fastest class's cores slowed by on-demand
    /// clock modulation (a duty cycle: the clock stops for the rest of each
    /// period), so everything they do slows by their speed ratio, memory
    /// stalls included; `false`: they are lower-clocked cores, whose
    /// memory-bound share takes the same time as on a fast one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clock_modulation: bool,
    /// A hypervisor's vCPU wake-up latency: a blocked vCPU that a sync object
    /// releases (an event-channel notification from its sibling) becomes
    /// runnable this long after the release, not at once (the engine's
    /// `engine/hv.rs`). Zero: at once.
    #[serde(default, skip_serializing_if = "Nanos::is_zero")]
    pub wake_latency: Nanos,
    /// Tasks computing at once under one shared LLC (a memory domain) divide
    /// its capacity, and the part of a working set the co-runners evict
    /// misses (the engine's `engine/llc.rs`); `false`: each task has the LLC
    /// to itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub llc_contention: bool,
    /// The domain whose vCPUs serve the guests' I/O (`Op::Io`) as Xen's dom0
    /// runs the split drivers' back ends (the engine's `engine/backend.rs`);
    /// `None`: an I/O is a plain sleep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_backend: Option<IoBackend>,
}

/// An I/O back-end domain and what each I/O costs its vCPU (`Topology::io_backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoBackend {
    /// The back-end domain (a background domain).
    pub domain: crate::DomainId,
    /// CPU work per request, at speed 1.0.
    pub request: Nanos,
    /// CPU work per response, at speed 1.0.
    pub response: Nanos,
}

impl Topology {
    /// Build from classes and CPUs, computing the derived sets. CPU ids must be `0..n`.
    pub fn new(classes: Vec<CpuClass>, cpus: Vec<CpuInfo>, cache: CacheSpec) -> Topology {
        let mut fast_class = 0;
        for (i, c) in classes.iter().enumerate() {
            if c.speed > classes[fast_class].speed {
                fast_class = i;
            }
        }
        let all = CpuSet::first_n(cpus.len());
        let fast_cpus = CpuSet::from_cpus(cpus.iter().filter(|c| c.class == fast_class).map(|c| c.id));
        let nmd = cpus.iter().map(|c| c.mem_domain as usize + 1).max().unwrap_or(0);
        let nnuma = cpus.iter().map(|c| c.numa as usize + 1).max().unwrap_or(0);
        let mut mem_domains = vec![CpuSet::new(); nmd];
        let mut numa_nodes = vec![CpuSet::new(); nnuma];
        for c in &cpus {
            mem_domains[c.mem_domain as usize].insert(c.id);
            numa_nodes[c.numa as usize].insert(c.id);
        }
        Topology {
            classes,
            cpus,
            cache,
            fast_class,
            fast_cpus,
            all,
            mem_domains,
            numa_nodes,
            rt_loads: Vec::new(),
            memory_bus: None,
            clock_modulation: false,
            wake_latency: Nanos::ZERO,
            llc_contention: false,
            io_backend: None,
        }
    }

    /// A simple machine: `n_fast` CPUs of speed `fast` then `n_slow` of speed `slow`,
    /// `per_mem_domain` CPUs per memory domain (one NUMA node per memory domain).
    pub fn fast_slow(n_fast: usize, fast: f64, n_slow: usize, slow: f64, per_mem_domain: usize) -> Topology {
        let classes =
            vec![CpuClass { name: "fast".into(), speed: fast }, CpuClass { name: "slow".into(), speed: slow }];
        let per = per_mem_domain.max(1);
        let cpus = (0..n_fast + n_slow)
            .map(|i| {
                let class = if i < n_fast { 0 } else { 1 };
                CpuInfo {
                    id: CpuId(i as u32),
                    class,
                    speed: classes[class].speed,
                    mem_domain: (i / per) as u32,
                    numa: (i / per) as u32,
                    noise: NoiseSpec::None,
                }
            })
            .collect();
        Topology::new(classes, cpus, CacheSpec::default())
    }

    /// Number of CPUs.
    #[inline]
    pub fn ncpus(&self) -> usize {
        self.cpus.len()
    }

    /// True when the CPU belongs to the fastest class.
    #[inline]
    pub fn is_fast(&self, c: CpuId) -> bool {
        self.cpus[c.idx()].class == self.fast_class
    }

    /// True when every CPU has the same speed.
    pub fn is_symmetric(&self) -> bool {
        self.cpus.windows(2).all(|w| w[0].speed == w[1].speed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_slow_machine() {
        let t = Topology::fast_slow(1, 2.0, 7, 1.0, 4);
        assert_eq!(t.ncpus(), 8);
        assert_eq!(t.fast_cpus.to_list(), "0");
        assert_eq!(t.mem_domains.len(), 2);
        assert_eq!(t.mem_domains[1].to_list(), "4-7");
        assert!(t.is_fast(CpuId(0)) && !t.is_fast(CpuId(1)));
    }

    #[test]
    fn rt_load_windows() {
        // spin 5 ms every 10 ms from 2 ms: runs [2, 7), [12, 17), …
        let r = RtLoad { cpu: CpuId(1), spin: Nanos::from_ms(5), period: Nanos::from_ms(10), phase: Nanos::from_ms(2) };
        assert!(!r.active_at(Nanos::from_ms(1)) && r.active_at(Nanos::from_ms(2)) && !r.active_at(Nanos::from_ms(7)));
        assert_eq!(r.next_change(Nanos::ZERO), Nanos::from_ms(2));
        assert_eq!(r.next_change(Nanos::from_ms(2)), Nanos::from_ms(7));
        assert_eq!(r.next_change(Nanos::from_ms(7)), Nanos::from_ms(12));
        assert_eq!(r.next_start(Nanos::from_ms(3)), Nanos::from_ms(12));
        assert_eq!(r.next_start(Nanos::from_ms(12)), Nanos::from_ms(12));
        assert_eq!(r.duty(), 0.5);
    }

    #[test]
    fn refill_cost_matches_spec_ranges() {
        let c = CacheSpec::default();
        // within a memory domain: 512 KiB / 7 GB/s = 524288 / 7 ≈ 74.9 µs (docs/design/workloads.md: 50-100 µs)
        let local = c.refill_cost(8192, 1.0, false);
        assert!((50_000..=100_000).contains(&local.0), "{local:?}");
        // across: (512 + 2048) KiB / 2.4 GB/s = 2621440 / 2.4 ≈ 1.09 ms (docs/design/workloads.md: 0.5-1.7 ms)
        let remote = c.refill_cost(8192, 1.0, true);
        assert!((500_000..=1_700_000).contains(&remote.0), "{remote:?}");
        // a streaming program (overlap 0) pays nothing
        assert_eq!(c.refill_cost(8192, 0.0, true), Nanos(0));
    }
}
