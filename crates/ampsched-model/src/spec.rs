//! The scenario file format (TOML), as plain serde types.
//!
//! Shapes only: loading, locating errors on lines and resolving names (models,
//! policies) happen in `ampsched-sim::scenario`. Unknown fields are rejected so
//! a typo never passes silently. Times are in the unit their field name says.

use crate::error::ModelError;
use crate::program::{Op, Program, Schedule, Wait};
use crate::time::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A free-form parameter value (policy and model parameters).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    /// true/false.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// A list.
    List(Vec<ParamValue>),
}

/// As written in a scenario file (TOML): `"cubic"`, `3`, `2.5`, `true`, `[1, 2]`.
impl std::fmt::Display for ParamValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Float(x) => write!(f, "{x:?}"),
            ParamValue::Str(s) => write!(f, "{s:?}"),
            ParamValue::List(l) => {
                write!(f, "[")?;
                for (i, v) in l.iter().enumerate() {
                    write!(f, "{}{v}", if i == 0 { "" } else { ", " })?;
                }
                write!(f, "]")
            }
        }
    }
}

impl ParamValue {
    /// As f64 if numeric.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ParamValue::Int(i) => Some(*i as f64),
            ParamValue::Float(f) => Some(*f),
            _ => None,
        }
    }
    /// As a non-negative integer if it is one.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            ParamValue::Int(i) if *i >= 0 => Some(*i as u64),
            ParamValue::Float(f) if *f >= 0.0 && f.fract() == 0.0 => Some(*f as u64),
            _ => None,
        }
    }
    /// As bool.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            ParamValue::Bool(b) => Some(*b),
            _ => None,
        }
    }
    /// As str.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            ParamValue::Str(s) => Some(s),
            _ => None,
        }
    }
    /// A short type name for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            ParamValue::Bool(_) => "a boolean",
            ParamValue::Int(_) => "an integer",
            ParamValue::Float(_) => "a float",
            ParamValue::Str(_) => "a string",
            ParamValue::List(_) => "a list",
        }
    }
}

/// Named parameters.
pub type Params = BTreeMap<String, ParamValue>;

/// The documented range of every number in a scenario file (docs/security.md).
/// Values outside are refused while parsing, with the file, line, column,
/// field, value and range; the bounds keep all time arithmetic (integer
/// nanoseconds in a `u64`, at most 1.8e19 ns ≈ 584 years) far from overflow:
/// the longest simulated time, 1e7 s, is 1e16 ns, and the slowest CPU (speed
/// 0.01) stretches it at most 100× to 1e18 ns.
pub mod limits {
    /// Longest simulated time (`stop.duration_s`, `stop.max_s`), seconds (≈ 116 days).
    pub const MAX_SIM_S: f64 = 1e7;
    /// Longest time field in milliseconds (event times, op lengths, noise bursts): [`MAX_SIM_S`] in ms.
    pub const MAX_MS: f64 = MAX_SIM_S * 1e3;
    /// Slowest and fastest CPU class speed (relative to 1.0). Real asymmetric machines
    /// differ by less than 10× (big.LITTLE, Intel hybrid); 100× either way is generous.
    pub const SPEED: (f64, f64) = (0.01, 100.0);
    /// Most CPUs on the simulated machine (the capacity of a `CpuSet`).
    pub const MAX_CPUS: u32 = crate::cpuset::MAX_CPUS as u32;
    /// Most vCPUs of one domain: KVM_MAX_VCPUS on x86 (4096, arch/x86/include/asm/kvm_host.h).
    pub const MAX_VCPUS: u32 = 4096;
    /// Credit weight range (Xen's credit scheduler accepts 1..=65535).
    pub const WEIGHT: (u32, u32) = (1, 65535);
    /// Largest cap, % of one CPU: every CPU of the largest machine.
    pub const MAX_CAP: u32 = 100 * MAX_CPUS;
    /// Largest cache or working-set size, KiB (16 GiB).
    pub const MAX_KB: u32 = 1 << 24;
    /// Refill bandwidth range, GB/s (1e12 stands for "free": a refill then costs 0 ns).
    pub const GBPS: (f64, f64) = (0.001, 1e12);
    /// Most runs (seeds) of one scenario.
    pub const MAX_RUNS: u32 = 10_000;
    /// Shortest statistics interval, ms (1 µs).
    pub const MIN_STATS_MS: f64 = 1e-3;
    /// Longest reaction of the agent to an idle fast CPU, µs (`[agent] reaction_us`): one second.
    pub const MAX_REACTION_US: f64 = 1e6;
    /// Longest vCPU wake-up latency, µs (`[machine] wake_latency_us`): 10 ms, one credit tick.
    pub const MAX_WAKE_LATENCY_US: f64 = 1e4;
    /// Longest CPU work of an I/O back end per request or response, µs (`[machine.io_backend]`): one credit tick.
    pub const MAX_BACKEND_US: f64 = 1e4;
}

/// A number as a person reads it: plain for ordinary magnitudes, `1e300` / `1e-12` for extreme ones.
pub fn show_f64(v: f64) -> String {
    if v != 0.0 && !(1e-6..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `v` within [lo, hi] (finite), else a message naming the field, the value and the range.
pub fn check_f64(field: &str, v: f64, lo: f64, hi: f64, what: &str) -> Result<f64, String> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(v)
    } else {
        Err(format!("`{field}` = {} is out of range: must be a finite number in [{lo}, {hi}] ({what})", show_f64(v)))
    }
}

/// `v` within [lo, hi], else a message naming the field, the value and the range.
pub fn check_u32(field: &str, v: u32, lo: u32, hi: u32, what: &str) -> Result<u32, String> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(format!("`{field}` = {v} is out of range: must be an integer in [{lo}, {hi}] ({what})"))
    }
}

/// Deserializers that check a number's range while parsing, so the parser's
/// error carries the line and column of the offending value.
mod ranged {
    use super::limits::*;
    use super::{check_f64, check_u32};
    use serde::de::Error;
    use serde::{Deserialize, Deserializer};

    macro_rules! ranged {
        (one $name:ident, $t:ty, $check:ident, $field:expr, $lo:expr, $hi:expr, $what:expr) => {
            pub fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                $check($field, <$t>::deserialize(d)?, $lo, $hi, $what).map_err(D::Error::custom)
            }
        };
        (opt $name:ident, $t:ty, $check:ident, $field:expr, $lo:expr, $hi:expr, $what:expr) => {
            pub fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<$t>, D::Error> {
                match Option::<$t>::deserialize(d)? {
                    Some(v) => $check($field, v, $lo, $hi, $what).map(Some).map_err(D::Error::custom),
                    None => Ok(None),
                }
            }
        };
    }

    ranged!(opt runs_opt, u32, check_u32, "runs", 1, MAX_RUNS, "number of seeds");
    ranged!(opt stats_ms_opt, f64, check_f64, "stats_interval_ms", MIN_STATS_MS, MAX_MS, "ms");
    ranged!(opt duration_s_opt, f64, check_f64, "duration_s", 1e-6, MAX_SIM_S, "simulated seconds");
    ranged!(opt max_s_opt, f64, check_f64, "max_s", 1e-6, MAX_SIM_S, "simulated seconds");
    ranged!(opt count_opt, u32, check_u32, "count", 1, MAX_CPUS, "CPUs in the group");
    ranged!(opt mem_domain_opt, u32, check_u32, "mem_domain", 0, MAX_CPUS - 1, "memory domain id");
    ranged!(opt numa_opt, u32, check_u32, "numa", 0, MAX_CPUS - 1, "NUMA node id");
    ranged!(opt mem_domain_size_opt, u32, check_u32, "mem_domain_size", 1, MAX_CPUS, "CPUs");
    ranged!(opt fraction_opt, f64, check_f64, "fraction", 0.0, 0.999, "share of time taken by noise");
    ranged!(opt fraction_on_opt, f64, check_f64, "fraction_on", 0.0, 1.0, "share of time");
    ranged!(opt fraction_off_opt, f64, check_f64, "fraction_off", 0.0, 1.0, "share of time");
    ranged!(opt on_ms_opt, f64, check_f64, "on_ms", 1e-3, MAX_MS, "ms");
    ranged!(opt off_ms_opt, f64, check_f64, "off_ms", 1e-3, MAX_MS, "ms");
    ranged!(opt traffic_pps_opt, f64, check_f64, "traffic_pps", 1.0, 1e8, "packets per second");
    ranged!(opt packet_us_opt, f64, check_f64, "packet_us", 1e-3, 1e4, "µs of CPU per packet");
    ranged!(opt irq_per_s_opt, f64, check_f64, "irq_per_s", 1.0, 1e6, "hard interrupts per second");
    ranged!(opt irq_us_opt, f64, check_f64, "irq_us", 0.0, 1e4, "µs of CPU per hard interrupt");
    ranged!(opt ring_opt, u32, check_u32, "ring", 1, 3000, "receive descriptors, ≤ netdev_budget × MAX_SOFTIRQ_RESTART");
    ranged!(opt l2_kb_opt, u32, check_u32, "l2_kb", 1, MAX_KB, "KiB");
    ranged!(opt llc_kb_opt, u32, check_u32, "llc_kb", 1, MAX_KB, "KiB");
    ranged!(opt llc_gbps_opt, f64, check_f64, "llc_refill_gbps", GBPS.0, GBPS.1, "GB/s");
    ranged!(opt dram_gbps_opt, f64, check_f64, "dram_refill_gbps", GBPS.0, GBPS.1, "GB/s");
    ranged!(one bus_gbps, f64, check_f64, "memory_bus.gbps", GBPS.0, GBPS.1, "GB/s");
    ranged!(opt core_gbps_opt, f64, check_f64, "memory_bus.core_gbps", GBPS.0, GBPS.1, "GB/s");
    ranged!(one vcpus, u32, check_u32, "vcpus", 1, MAX_VCPUS, "vCPUs of one domain, KVM_MAX_VCPUS");
    ranged!(opt weight_opt, u32, check_u32, "weight", WEIGHT.0, WEIGHT.1, "credit weight");
    ranged!(opt cap_opt, u32, check_u32, "cap", 0, MAX_CAP, "% of one CPU, 0 = none");
    ranged!(one at_ms, f64, check_f64, "at_ms", 0.0, MAX_MS, "ms of simulated time");
    ranged!(opt reaction_us_opt, f64, check_f64, "reaction_us", 0.0, MAX_REACTION_US, "µs from a fast CPU going idle to the agent's move");
    ranged!(opt wake_latency_us_opt, f64, check_f64, "wake_latency_us", 0.0, MAX_WAKE_LATENCY_US, "µs from an event to the woken vCPU's wake-up");
    ranged!(one request_us, f64, check_f64, "io_backend.request_us", 0.0, MAX_BACKEND_US, "µs of back-end CPU work per request at speed 1.0");
    ranged!(one response_us, f64, check_f64, "io_backend.response_us", 0.0, MAX_BACKEND_US, "µs of back-end CPU work per response at speed 1.0");
}

/// A whole scenario file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// Short name (defaults to the file stem).
    pub name: Option<String>,
    /// One-paragraph description.
    pub description: Option<String>,
    /// First seed (runs use seed, seed+1, …). Default 1.
    pub seed: Option<u64>,
    /// Number of runs (seeds). Default 1.
    #[serde(default, deserialize_with = "ranged::runs_opt")]
    pub runs: Option<u32>,
    /// When to stop.
    #[serde(default)]
    pub stop: StopSpec,
    /// Statistics interval for time series, ms. Default 1000.
    #[serde(default, deserialize_with = "ranged::stats_ms_opt")]
    pub stats_interval_ms: Option<f64>,
    /// The machine.
    pub machine: MachineSpec,
    /// The fine-grained dispatcher. Default `credit`.
    pub dispatcher: Option<PolicySpec>,
    /// The periodic placer. Default `none`.
    pub placer: Option<PolicySpec>,
    /// The placer runs in the Linux agent's body (`[agent]`): its decisions pass the agent's
    /// contention gate and back-off, and an idle fast CPU is reacted to. Absent: a placer's
    /// decision is put in force as decided, every period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentSpec>,
    /// Domains (VMs or processes).
    #[serde(rename = "domain", default)]
    pub domains: Vec<DomainSpec>,
    /// Timed changes to domains.
    #[serde(rename = "event", default)]
    pub events: Vec<EventSpec>,
    /// Variable defaults (`${name}` references are substituted before parsing; see `ampsched_sim::scenario::vars`).
    #[serde(default, skip_serializing)]
    pub vars: Option<serde::de::IgnoredAny>,
    /// What `ampsched reproduce` compares on this scenario (read by `ampsched_lab::experiment`).
    #[serde(default, skip_serializing)]
    pub experiment: Option<serde::de::IgnoredAny>,
}

/// How the Linux agent's body runs the placer in the simulator (`[agent]`; see
/// `ampsched_policy::gate`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// Delay from a fast CPU going idle to the agent's move in force, µs. Default: the agent's
    /// measured median (docs/agent.md).
    #[serde(default, deserialize_with = "ranged::reaction_us_opt", skip_serializing_if = "Option::is_none")]
    pub reaction_us: Option<f64>,
    /// The agent's back-off (hands-off probe windows, a group left to the kernel where its
    /// placement does worse). Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<bool>,
}

/// Stop condition: a fixed duration, or when every program is done (bounded by `max_s`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StopSpec {
    /// Run exactly this long (seconds of simulated time).
    #[serde(default, deserialize_with = "ranged::duration_s_opt")]
    pub duration_s: Option<f64>,
    /// With no duration: stop when all programs are done, or at this bound. Default 3600.
    #[serde(default, deserialize_with = "ranged::max_s_opt")]
    pub max_s: Option<f64>,
}

/// A CPU class in a scenario.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    /// Label.
    pub name: String,
    /// Speed factor (> 0).
    pub speed: f64,
}

/// A group of identical CPUs.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CpuGroupSpec {
    /// Class name.
    pub class: String,
    /// How many CPUs. Default 1.
    #[serde(default, deserialize_with = "ranged::count_opt")]
    pub count: Option<u32>,
    /// Memory domain of these CPUs (default: by `machine.mem_domain_size`).
    #[serde(default, deserialize_with = "ranged::mem_domain_opt")]
    pub mem_domain: Option<u32>,
    /// NUMA node (default: = memory domain).
    #[serde(default, deserialize_with = "ranged::numa_opt")]
    pub numa: Option<u32>,
}

/// Noise on a set of CPUs: constant (`fraction`) or bursty (`on_ms`/`off_ms`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NoiseGroupSpec {
    /// CPU list, e.g. "0" or "0-3".
    pub cpus: String,
    /// Constant fraction of time taken (0 ≤ f < 1).
    #[serde(default, deserialize_with = "ranged::fraction_opt")]
    pub fraction: Option<f64>,
    /// Burst length, ms (bursty noise).
    #[serde(default, deserialize_with = "ranged::on_ms_opt")]
    pub on_ms: Option<f64>,
    /// Gap length, ms (bursty noise).
    #[serde(default, deserialize_with = "ranged::off_ms_opt")]
    pub off_ms: Option<f64>,
    /// Fraction during a burst.
    #[serde(default, deserialize_with = "ranged::fraction_on_opt")]
    pub fraction_on: Option<f64>,
    /// Fraction between bursts. Default 0.
    #[serde(default, deserialize_with = "ranged::fraction_off_opt")]
    pub fraction_off: Option<f64>,
    /// Exponentially distributed lengths (seeded). Default false.
    pub random: Option<bool>,
    /// Bursty noise only: a burst is a stall of the CPU, which decides its slice
    /// ends and ticks due inside it only at its end. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<bool>,
    /// Traffic noise: packets per second arriving at the NIC whose interrupts this CPU takes.
    #[serde(default, deserialize_with = "ranged::traffic_pps_opt", skip_serializing_if = "Option::is_none")]
    pub traffic_pps: Option<f64>,
    /// Traffic noise: CPU time of the receive softirq per packet, µs.
    #[serde(default, deserialize_with = "ranged::packet_us_opt", skip_serializing_if = "Option::is_none")]
    pub packet_us: Option<f64>,
    /// Traffic noise: hard interrupts per second (the NIC's interrupt moderation).
    #[serde(default, deserialize_with = "ranged::irq_per_s_opt", skip_serializing_if = "Option::is_none")]
    pub irq_per_s: Option<f64>,
    /// Traffic noise: CPU time of one hard interrupt, µs.
    #[serde(default, deserialize_with = "ranged::irq_us_opt", skip_serializing_if = "Option::is_none")]
    pub irq_us: Option<f64>,
    /// Traffic noise: receive ring size (default 256, e1000's `RxDescriptors`).
    #[serde(default, deserialize_with = "ranged::ring_opt", skip_serializing_if = "Option::is_none")]
    pub ring: Option<u32>,
}

/// Cache parameters (all optional; defaults in `topology`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CacheParamsSpec {
    /// Private L2, KiB.
    #[serde(default, deserialize_with = "ranged::l2_kb_opt")]
    pub l2_kb: Option<u32>,
    /// Shared LLC per memory domain, KiB.
    #[serde(default, deserialize_with = "ranged::llc_kb_opt")]
    pub llc_kb: Option<u32>,
    /// LLC → L2 refill bandwidth, GB/s.
    #[serde(default, deserialize_with = "ranged::llc_gbps_opt")]
    pub llc_refill_gbps: Option<f64>,
    /// DRAM refill bandwidth, GB/s.
    #[serde(default, deserialize_with = "ranged::dram_gbps_opt")]
    pub dram_refill_gbps: Option<f64>,
}

/// The machine section.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MachineSpec {
    /// Classes. Default: fast = 2.0, slow = 1.0.
    pub classes: Option<Vec<ClassSpec>>,
    /// CPU groups, in id order.
    pub cpus: Vec<CpuGroupSpec>,
    /// CPUs per memory domain when groups do not say. Default: all in one.
    #[serde(default, deserialize_with = "ranged::mem_domain_size_opt")]
    pub mem_domain_size: Option<u32>,
    /// Cache model.
    #[serde(default)]
    pub cache: CacheParamsSpec,
    /// Noise.
    #[serde(default)]
    pub noise: Vec<NoiseGroupSpec>,
    /// Real-time tasks pinned to CPUs (`[[machine.rt_load]]`): RT pressure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rt_load: Vec<RtLoadSpec>,
    /// The memory bus all CPUs share (`[machine.memory_bus]`); absent: memory
    /// never bounds co-running tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bus: Option<MemoryBusSpec>,
    /// The slower classes are the fastest class's cores under on-demand clock
    /// modulation (`topology::Topology::clock_modulation`). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_modulation: Option<bool>,
    /// A hypervisor's vCPU wake-up latency, µs (`topology::Topology::wake_latency`). Default 0.
    #[serde(default, deserialize_with = "ranged::wake_latency_us_opt", skip_serializing_if = "Option::is_none")]
    pub wake_latency_us: Option<f64>,
    /// Co-running tasks divide each shared LLC's capacity (`topology::Topology::llc_contention`).
    /// Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_contention: Option<bool>,
    /// The domain that serves the guests' I/O (`[machine.io_backend]`, Xen's split drivers:
    /// `topology::Topology::io_backend`); absent: an I/O is a plain sleep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_backend: Option<IoBackendSpec>,
}

/// `[machine.io_backend]`: the background domain whose vCPUs run the back-end
/// drivers (Xen's dom0 with blkback/netback) and the CPU work each I/O costs it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IoBackendSpec {
    /// Name of the back-end domain (a `[[domain]]` with `background = true`).
    pub domain: String,
    /// Back-end CPU work per request (ring read, grant map, bio submit), µs at speed 1.0.
    #[serde(deserialize_with = "ranged::request_us")]
    pub request_us: f64,
    /// Back-end CPU work per response (bio completion, grant unmap, response, notify), µs at speed 1.0.
    #[serde(deserialize_with = "ranged::response_us")]
    pub response_us: f64,
}

/// The shared memory bus (`topology::MemoryBus`): its bandwidth and what one
/// core stalled on memory draws from it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryBusSpec {
    /// Bandwidth of the bus, GB/s.
    #[serde(deserialize_with = "ranged::bus_gbps")]
    pub gbps: f64,
    /// What one core stalled on memory draws, GB/s. Default: `gbps` (one core can fill the bus).
    #[serde(default, deserialize_with = "ranged::core_gbps_opt", skip_serializing_if = "Option::is_none")]
    pub core_gbps: Option<f64>,
}

impl MemoryBusSpec {
    /// The topology's bus.
    pub fn build(&self) -> crate::topology::MemoryBus {
        crate::topology::MemoryBus { gbps: self.gbps, core_gbps: self.core_gbps.unwrap_or(self.gbps) }
    }
}

/// A periodic SCHED_FIFO task pinned to one CPU, e.g. the duty-cycle hog
/// (`ampsched-hog --cpu 1 --spin-ms 5 --sleep-ms 5` is `cpu = 1, spin_us =
/// 5000, period_us = 10000`). The `linux` dispatcher runs it as an RT task
/// above the fair class; the other dispatchers see the time it takes as
/// noise on that CPU.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RtLoadSpec {
    /// The CPU it is pinned to.
    pub cpu: u32,
    /// Run time per period, µs (0 < spin_us ≤ period_us).
    pub spin_us: u64,
    /// Period, µs.
    pub period_us: u64,
    /// Start of its first period, µs (< period_us). Default 0.
    pub phase_us: Option<u64>,
}

impl RtLoadSpec {
    /// Check `[[machine.rt_load]]` entries against a machine of `ncpus` CPUs
    /// and build them (at most one per CPU).
    pub fn build_all(specs: &[RtLoadSpec], ncpus: usize) -> Result<Vec<crate::topology::RtLoad>, ModelError> {
        let mut out: Vec<crate::topology::RtLoad> = Vec::new();
        for (i, r) in specs.iter().enumerate() {
            let p = format!("machine.rt_load[{i}]");
            if r.cpu as usize >= ncpus {
                return Err(ModelError::new(
                    format!("{p}.cpu"),
                    format!("CPU {} does not exist (the machine has 0-{})", r.cpu, ncpus.saturating_sub(1)),
                ));
            }
            if out.iter().any(|o| o.cpu.0 == r.cpu) {
                return Err(ModelError::new(
                    format!("{p}.cpu"),
                    format!("CPU {} already has an rt_load (one per CPU)", r.cpu),
                ));
            }
            if r.period_us == 0 {
                return Err(ModelError::new(format!("{p}.period_us"), "must be > 0"));
            }
            if r.spin_us == 0 || r.spin_us >= r.period_us {
                return Err(ModelError::new(
                    format!("{p}.spin_us"),
                    format!("must be in [1, period_us − 1] = [1, {}], got {}", r.period_us - 1, r.spin_us),
                ));
            }
            let phase = r.phase_us.unwrap_or(0);
            if phase >= r.period_us {
                return Err(ModelError::new(
                    format!("{p}.phase_us"),
                    format!("must be < period_us ({}), got {phase}", r.period_us),
                ));
            }
            out.push(crate::topology::RtLoad {
                cpu: crate::ids::CpuId(r.cpu),
                spin: Nanos::from_us(r.spin_us),
                period: Nanos::from_us(r.period_us),
                phase: Nanos::from_us(phase),
            });
        }
        Ok(out)
    }
}

/// A policy choice with its parameters (flattened into the same table).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct PolicySpec {
    /// Registered name (see `ampsched policies`).
    pub name: String,
    /// Parameters (checked against the policy's list).
    #[serde(flatten)]
    pub params: Params,
}

/// Administrator priority class of a domain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PriorityClass {
    /// Low priority.
    Low,
    /// The default.
    #[default]
    Normal,
    /// High priority (AASH coarse priorities).
    High,
}

/// Co-scheduling type of a domain (docs/design/cosched.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CoschedType {
    /// High throughput: plain scheduling.
    #[default]
    Hit,
    /// Concurrent: co-schedule its vCPUs.
    Con,
}

/// A domain (VM or process).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DomainSpec {
    /// Unique name.
    pub name: String,
    /// Number of vCPUs / threads.
    #[serde(deserialize_with = "ranged::vcpus")]
    pub vcpus: u32,
    /// Credit weight. Default 256.
    #[serde(default, deserialize_with = "ranged::weight_opt")]
    pub weight: Option<u32>,
    /// Cap in % of one CPU (0 = none). Default 0.
    #[serde(default, deserialize_with = "ranged::cap_opt")]
    pub cap: Option<u32>,
    /// Priority class. Default normal.
    pub priority: Option<PriorityClass>,
    /// Aware guest: the vCPU ids it considers "fast".
    pub fast_vcpus: Option<Vec<u32>>,
    /// Aware guest with the default fast ids `0..n_fast-1`.
    pub aware: Option<bool>,
    /// Co-scheduling type. Default hit.
    pub cosched: Option<CoschedType>,
    /// Sync group name: domains with the same group share barriers, locks and
    /// channels (a program spanning VMs). Default: the domain's own name.
    pub sync_group: Option<String>,
    /// Hard affinity of every vCPU, CPU list. Default: all CPUs.
    pub affinity: Option<String>,
    /// One workload for the whole domain.
    pub workload: Option<WorkloadSpec>,
    /// Per-task workloads (vCPU i gets `tasks[i]`; the rest stay idle).
    pub tasks: Option<Vec<WorkloadSpec>>,
    /// A background domain (a testbed's dom0): its vCPUs run and compete as any
    /// other's, but a run that ends when all are done does not wait for them,
    /// and studies leave it out of their per-VM figures. Default false.
    pub background: Option<bool>,
}

/// A workload: a named model (with parameter overrides) or an inline program.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct WorkloadSpec {
    /// Model name from the library (see `ampsched models`).
    pub model: Option<String>,
    /// An inline program.
    pub program: Option<Vec<OpSpec>>,
    /// An rt-app JSON file (path relative to the scenario file): one thread per vCPU (see `rtapp`).
    pub rtapp: Option<String>,
    /// Hard affinity (per-task workloads only), CPU list.
    pub affinity: Option<String>,
    /// Parameter overrides of the model.
    #[serde(flatten)]
    pub params: Params,
}

/// A timed change to a domain.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    /// When, ms of simulated time.
    #[serde(deserialize_with = "ranged::at_ms")]
    pub at_ms: f64,
    /// Domain name.
    pub domain: String,
    /// New co-scheduling type.
    pub cosched: Option<CoschedType>,
    /// New priority class.
    pub priority: Option<PriorityClass>,
    /// New weight.
    #[serde(default, deserialize_with = "ranged::weight_opt")]
    pub weight: Option<u32>,
}

/// How a waiting op waits, in files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitKind {
    /// Block.
    #[default]
    Block,
    /// Spin.
    Spin,
    /// Spin up to `spin_limit_us`, then block.
    SpinThenBlock,
    /// Poll, yielding the CPU between polls (`sched_yield`).
    Yield,
}

/// Loop partitioning, in files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleKind {
    /// Equal shares up front.
    #[default]
    Static,
    /// Fixed chunks from a shared queue.
    Dynamic,
    /// Shrinking chunks from a shared queue.
    Guided,
}

/// An op as written in a scenario or model file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum OpSpec {
    /// `{ compute = { ms = 5, mem = 0.1, ws_kb = 512, overlap = 1.0 } }`
    Compute {
        /// Work at speed 1.0, ms.
        ms: f64,
        /// Memory-stall fraction, default 0.
        #[serde(default)]
        mem: f64,
        /// Working set, KiB, default 0.
        #[serde(default)]
        ws_kb: u32,
        /// Refill overlap factor, default 1.
        overlap: Option<f64>,
    },
    /// `{ barrier = { id = 0, wait = "spin" } }`
    Barrier {
        /// Barrier id.
        id: u32,
        /// How to wait.
        #[serde(default)]
        wait: WaitKind,
        /// Spin limit for spin-then-block, µs.
        spin_limit_us: Option<f64>,
    },
    /// `{ lock = { id = 0, wait = "spin" } }`
    Lock {
        /// Lock id.
        id: u32,
        /// How to wait.
        #[serde(default)]
        wait: WaitKind,
        /// Spin limit for spin-then-block, µs.
        spin_limit_us: Option<f64>,
    },
    /// `{ unlock = { id = 0 } }`
    Unlock {
        /// Lock id.
        id: u32,
    },
    /// `{ sleep = { ms = 2 } }`
    Sleep {
        /// Wall time, ms.
        ms: f64,
    },
    /// `{ io = { ms = 2 } }`: an I/O of this device time (a sleep, or a request to
    /// the machine's I/O back end when it has one: `[machine.io_backend]`).
    Io {
        /// Device time, ms.
        ms: f64,
    },
    /// `{ sleep_exp = { mean_ms = 8 } }`: an exponentially distributed sleep
    /// (Poisson arrivals), drawn from the run's seed.
    SleepExp {
        /// Mean wall time, ms (> 0).
        mean_ms: f64,
    },
    /// `{ loop = { count = 10, body = [ … ] } }`
    Loop {
        /// Iterations.
        count: u32,
        /// Body.
        body: Vec<OpSpec>,
    },
    /// `{ parfor = { id = 0, ms = 100, schedule = "dynamic", chunk_ms = 1 } }`
    Parfor {
        /// Work-queue id.
        id: u32,
        /// Total work at speed 1.0, ms.
        ms: f64,
        /// Partitioning, default static.
        #[serde(default)]
        schedule: ScheduleKind,
        /// Chunk (dynamic) or minimum chunk (guided), ms. Default 1.
        chunk_ms: Option<f64>,
        /// Memory-stall fraction.
        #[serde(default)]
        mem: f64,
        /// Working set, KiB.
        #[serde(default)]
        ws_kb: u32,
        /// Refill overlap factor, default 1.
        overlap: Option<f64>,
        /// How to wait at the implicit barrier.
        #[serde(default)]
        wait: WaitKind,
        /// Spin limit for spin-then-block, µs.
        spin_limit_us: Option<f64>,
    },
    /// `{ push = { chan = 0, capacity = 4 } }`
    Push {
        /// Channel id.
        chan: u32,
        /// Capacity, default 1.
        capacity: Option<u32>,
        /// How to wait while full.
        #[serde(default)]
        wait: WaitKind,
        /// Spin limit for spin-then-block, µs.
        spin_limit_us: Option<f64>,
    },
    /// `{ pop = { chan = 0 } }`
    Pop {
        /// Channel id.
        chan: u32,
        /// How to wait while empty.
        #[serde(default)]
        wait: WaitKind,
        /// Spin limit for spin-then-block, µs.
        spin_limit_us: Option<f64>,
    },
}

/// Default libgomp-like spin limit when `spin-then-block` gives none: 300 000
/// spins ≈ 2 ms (docs/design/workloads.md: 1.5-3 ms).
pub const DEFAULT_SPIN_LIMIT_US: f64 = 2000.0;

fn wait_of(kind: WaitKind, limit_us: Option<f64>, path: &str) -> Result<Wait, ModelError> {
    Ok(match kind {
        WaitKind::Block => Wait::Block,
        WaitKind::Spin => Wait::Spin,
        WaitKind::Yield => Wait::Yield,
        WaitKind::SpinThenBlock => {
            let us = limit_us.unwrap_or(DEFAULT_SPIN_LIMIT_US);
            check_f64("spin_limit_us", us, 0.0, limits::MAX_MS * 1e3, "µs")
                .map_err(|m| ModelError::new(format!("{path}.spin_limit_us"), m))?;
            Wait::SpinThenBlock(Nanos::from_ms_f64(us / 1000.0))
        }
    })
}

fn nonneg(v: f64, path: String, what: &str) -> Result<f64, ModelError> {
    check_f64(what, v, 0.0, limits::MAX_MS, "ms").map_err(|m| ModelError::new(path, m))
}

fn kb(v: u32, path: String) -> Result<u32, ModelError> {
    check_u32("ws_kb", v, 0, limits::MAX_KB, "KiB").map_err(|m| ModelError::new(path, m))
}

fn frac(v: f64, path: String) -> Result<f64, ModelError> {
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(ModelError::new(path, format!("must be in [0, 1), got {v}")))
    }
}

fn compile_into(ops: &[OpSpec], path: &str, out: &mut Vec<Op>) -> Result<(), ModelError> {
    for (i, op) in ops.iter().enumerate() {
        let p = format!("{path}[{i}]");
        match op {
            OpSpec::Compute { ms, mem, ws_kb, overlap } => out.push(Op::Compute {
                work: Nanos::from_ms_f64(nonneg(*ms, format!("{p}.compute.ms"), "ms")?),
                mem: frac(*mem, format!("{p}.compute.mem"))?,
                ws_kb: kb(*ws_kb, format!("{p}.compute.ws_kb"))?,
                overlap: frac_incl(overlap.unwrap_or(1.0), format!("{p}.compute.overlap"))?,
            }),
            OpSpec::Barrier { id, wait, spin_limit_us } => {
                out.push(Op::Barrier { id: *id, wait: wait_of(*wait, *spin_limit_us, &format!("{p}.barrier"))? })
            }
            OpSpec::Lock { id, wait, spin_limit_us } => {
                out.push(Op::Lock { id: *id, wait: wait_of(*wait, *spin_limit_us, &format!("{p}.lock"))? })
            }
            OpSpec::Unlock { id } => out.push(Op::Unlock { id: *id }),
            OpSpec::Sleep { ms } => {
                out.push(Op::Sleep { dur: Nanos::from_ms_f64(nonneg(*ms, format!("{p}.sleep.ms"), "ms")?) })
            }
            OpSpec::Io { ms } => out.push(Op::Io { dur: Nanos::from_ms_f64(nonneg(*ms, format!("{p}.io.ms"), "ms")?) }),
            OpSpec::SleepExp { mean_ms } => {
                let mean = nonneg(*mean_ms, format!("{p}.sleep_exp.mean_ms"), "ms")?;
                if mean <= 0.0 {
                    return Err(ModelError::new(
                        format!("{p}.sleep_exp.mean_ms"),
                        format!("must be > 0 ms, got {mean}"),
                    ));
                }
                out.push(Op::SleepExp { mean: Nanos::from_ms_f64(mean).max(Nanos(1)) })
            }
            OpSpec::Loop { count, body } => {
                if *count == 0 {
                    return Err(ModelError::new(format!("{p}.loop.count"), "must be ≥ 1"));
                }
                let start = out.len();
                out.push(Op::LoopStart { count: *count, end: 0 });
                compile_into(body, &format!("{p}.loop.body"), out)?;
                let end = out.len();
                out.push(Op::LoopEnd { start: start as u32 });
                out[start] = Op::LoopStart { count: *count, end: end as u32 };
            }
            OpSpec::Parfor { id, ms, schedule, chunk_ms, mem, ws_kb, overlap, wait, spin_limit_us } => {
                let chunk =
                    Nanos::from_ms_f64(nonneg(chunk_ms.unwrap_or(1.0), format!("{p}.parfor.chunk_ms"), "chunk_ms")?);
                if *schedule != ScheduleKind::Static && chunk.0 == 0 {
                    return Err(ModelError::new(format!("{p}.parfor.chunk_ms"), "must be > 0"));
                }
                out.push(Op::ParFor {
                    id: *id,
                    work: Nanos::from_ms_f64(nonneg(*ms, format!("{p}.parfor.ms"), "ms")?),
                    schedule: match schedule {
                        ScheduleKind::Static => Schedule::Static,
                        ScheduleKind::Dynamic => Schedule::Dynamic { chunk },
                        ScheduleKind::Guided => Schedule::Guided { min_chunk: chunk },
                    },
                    mem: frac(*mem, format!("{p}.parfor.mem"))?,
                    ws_kb: kb(*ws_kb, format!("{p}.parfor.ws_kb"))?,
                    overlap: frac_incl(overlap.unwrap_or(1.0), format!("{p}.parfor.overlap"))?,
                    wait: wait_of(*wait, *spin_limit_us, &format!("{p}.parfor"))?,
                })
            }
            OpSpec::Push { chan, capacity, wait, spin_limit_us } => {
                let capacity = capacity.unwrap_or(1);
                if capacity == 0 {
                    return Err(ModelError::new(format!("{p}.push.capacity"), "must be ≥ 1"));
                }
                out.push(Op::Push {
                    chan: *chan,
                    capacity,
                    wait: wait_of(*wait, *spin_limit_us, &format!("{p}.push"))?,
                })
            }
            OpSpec::Pop { chan, wait, spin_limit_us } => {
                out.push(Op::Pop { chan: *chan, wait: wait_of(*wait, *spin_limit_us, &format!("{p}.pop"))? })
            }
        }
    }
    Ok(())
}

fn frac_incl(v: f64, path: String) -> Result<f64, ModelError> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(ModelError::new(path, format!("must be in [0, 1], got {v}")))
    }
}

/// Compile ops from a file into a flat program; `path` prefixes error paths.
pub fn compile_program(ops: &[OpSpec], path: &str) -> Result<Program, ModelError> {
    let mut out = Vec::new();
    compile_into(ops, path, &mut out)?;
    out.push(Op::End);
    let p = Program { ops: out };
    p.validate().map_err(|m| ModelError::new(path, m))?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_param_value_prints_as_a_scenario_file_writes_it() {
        use ParamValue::*;
        let l = List(vec![Int(1), Float(2.0), Str("a".into()), Bool(true)]);
        assert_eq!(l.to_string(), r#"[1, 2.0, "a", true]"#);
        assert_eq!(Str("cubic".into()).to_string(), "\"cubic\"");
    }

    #[test]
    fn compile_nested_loops() {
        let ops = vec![OpSpec::Loop {
            count: 3,
            body: vec![
                OpSpec::Compute { ms: 2.0, mem: 0.1, ws_kb: 0, overlap: None },
                OpSpec::Barrier { id: 0, wait: WaitKind::SpinThenBlock, spin_limit_us: Some(100.0) },
            ],
        }];
        let p = compile_program(&ops, "program").unwrap();
        assert_eq!(p.ops.len(), 5);
        assert_eq!(p.ops[0], Op::LoopStart { count: 3, end: 3 });
        assert_eq!(p.ops[2], Op::Barrier { id: 0, wait: Wait::SpinThenBlock(Nanos::from_us(100)) });
        // 3 × 2 ms
        assert_eq!(p.total_work(), Nanos::from_ms(6));
    }

    #[test]
    fn compile_rejects_bad_values_with_path() {
        let ops = vec![OpSpec::Compute { ms: 1.0, mem: 1.5, ws_kb: 0, overlap: None }];
        let e = compile_program(&ops, "domain[0].workload.program").unwrap_err();
        assert_eq!(e.path, "domain[0].workload.program[0].compute.mem");
        let ops = vec![OpSpec::Sleep { ms: 1e300 }];
        let e = compile_program(&ops, "p").unwrap_err();
        assert_eq!(e.path, "p[0].sleep.ms");
        assert!(e.msg.contains("= 1e300 is out of range") && e.msg.contains("[0, 10000000000]"), "{e}");
    }

    /// A scenario with `line` (1-based, after the header) replaced.
    fn scenario_with(line: &str) -> Result<ScenarioSpec, String> {
        let text = format!(
            "[stop]\nduration_s = 0.5\n[machine]\nclasses = [{{ name = \"fast\", speed = 2.0 }}]\n\
             cpus = [{{ class = \"fast\", count = 2 }}]\n[[domain]]\nname = \"d\"\nvcpus = 2\n{line}\n"
        );
        toml::from_str::<ScenarioSpec>(&text).map_err(|e| e.to_string())
    }

    #[test]
    fn numeric_fields_out_of_range_are_refused_with_line_field_value_and_range() {
        assert!(scenario_with("").is_ok());
        // The offending value's line comes from the parser: line 4 holds the CPU groups.
        let e = toml::from_str::<ScenarioSpec>(
            "[stop]\nduration_s = 0.5\n[machine]\ncpus = [{ class = \"f\", count = 5000 }]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 4"), "{e}");
        assert!(e.contains("`count` = 5000 is out of range") && e.contains("[1, 1024]"), "{e}");
        for (line, want) in [
            ("[[event]]\nat_ms = nan\ndomain = \"d\"", "`at_ms` = NaN is out of range"),
            ("weight = 0", "`weight` = 0 is out of range: must be an integer in [1, 65535]"),
            ("cap = 4000000000", "`cap` = 4000000000 is out of range"),
            ("[[event]]\nat_ms = -1\ndomain = \"d\"", "`at_ms` = -1 is out of range"),
        ] {
            let e = scenario_with(line).unwrap_err();
            assert!(e.contains(want), "{line}: {e}");
        }
        let e = toml::from_str::<ScenarioSpec>("[stop]\nduration_s = 1e300\n[machine]\ncpus = []\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("[0.000001, 10000000]"), "{e}");
        let e = toml::from_str::<ScenarioSpec>("[machine]\ncpus = []\n[[domain]]\nname = \"d\"\nvcpus = 1000000000\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 5") && e.contains("`vcpus` = 1000000000") && e.contains("[1, 4096]"), "{e}");
    }

    #[test]
    fn rt_loads_are_checked_with_their_path() {
        let ok = RtLoadSpec { cpu: 1, spin_us: 5000, period_us: 10_000, phase_us: None };
        let built = RtLoadSpec::build_all(std::slice::from_ref(&ok), 2).unwrap();
        assert_eq!(built[0].spin, Nanos::from_ms(5));
        assert_eq!(built[0].period, Nanos::from_ms(10));
        let bad = |r: RtLoadSpec| RtLoadSpec::build_all(&[r], 2).unwrap_err();
        assert_eq!(bad(RtLoadSpec { cpu: 2, ..ok.clone() }).path, "machine.rt_load[0].cpu");
        let e = bad(RtLoadSpec { spin_us: 10_000, ..ok.clone() });
        assert_eq!(e.path, "machine.rt_load[0].spin_us");
        assert!(e.msg.contains("[1, 9999]"), "{}", e.msg);
        assert_eq!(bad(RtLoadSpec { phase_us: Some(10_000), ..ok.clone() }).path, "machine.rt_load[0].phase_us");
        assert_eq!(bad(RtLoadSpec { period_us: 0, ..ok.clone() }).path, "machine.rt_load[0].period_us");
        let e = RtLoadSpec::build_all(&[ok.clone(), ok], 2).unwrap_err();
        assert_eq!(e.path, "machine.rt_load[1].cpu");
    }
}
