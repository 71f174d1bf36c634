//! Scenario files: load, validate, resolve names, and build `SimConfig`s.
//!
//! Every error names the file, the line and column, the field (a dotted path
//! such as `domain[1].workload.model`) and what is allowed. Shape errors come
//! from serde (unknown fields, wrong types, bad enum values); semantic errors
//! (unknown model or policy, out-of-range numbers) are located by walking the
//! same path in a span-keeping TOML parse.
//!
//! What it may import: the engine (`SimConfig`, `TaskInit`, `Stop`,
//! `DomainChange` — the types a run is configured with), the model library,
//! the model and policy crates. What it must never import: the runner, the
//! trace recorder, or anything in `ampsched-lab`; the engine never imports
//! scenario loading (a scenario is one way to build a `SimConfig`; tests and
//! the Python bindings build them directly too).
//!
//! Rooms: `error` (the error type and field-path location; the bottom),
//! `vars` (`[vars]`/`${name}` substitution; imports `error` only), and this
//! module (validation and building `SimConfig`s; imports both).

pub mod error;
pub mod vars;

pub use crate::engine::{AgentBody, DomainChange, Stop};
pub use error::ScenarioError;

use crate::engine::{SimConfig, TaskInit};
use crate::library::Library;
use ampsched_model::spec::{DomainSpec, Params, PolicySpec, ScenarioSpec, WorkloadSpec};
use ampsched_model::topology::CacheSpec;
use ampsched_model::{CpuClass, CpuId, CpuInfo, CpuSet, DomainId, ModelError, Nanos, NoiseSpec, Op, Program, Topology};
use ampsched_policy::{dispatcher_by_name, placer_by_name, DomainView};
use error::{error_at, line_col};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// A loaded and validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// File it came from.
    pub file: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// The raw spec.
    pub spec: ScenarioSpec,
    /// The machine.
    pub topo: Topology,
    /// Domains.
    pub domains: Vec<DomainView>,
    /// Tasks (programs shared between runs).
    pub tasks: Vec<TaskInit>,
    /// Dispatcher choice.
    pub dispatcher: PolicySpec,
    /// Placer choice.
    pub placer: PolicySpec,
    /// The placer runs in the Linux agent's body (`[agent]`).
    pub agent: Option<AgentBody>,
    /// First seed.
    pub seed: u64,
    /// Number of runs.
    pub runs: u32,
    /// Stop condition.
    pub stop: Stop,
    /// Statistics interval.
    pub stats_interval: Nanos,
    /// Record each task's wake-up latencies (not in the file: `ampsched validate` sets it).
    pub wake_latency: bool,
    /// Timed domain changes, sorted by time.
    pub events: Vec<(Nanos, DomainId, DomainChange)>,
    /// What was read but ignored (an rt-app file's unknown `global` keys,
    /// which rt-app ignores too), one line each naming file and field; the
    /// CLI prints them to stderr.
    pub warnings: Vec<String>,
    text: String,
}

/// Most `[[domain]]`s in a scenario.
pub const MAX_DOMAINS: usize = 4096;
/// Most vCPUs (tasks) of all domains together: 2^20.
pub const MAX_TASKS: u64 = 1 << 20;

/// Largest scenario or rt-app file read: 64 MiB (the largest real ones are tens of KiB).
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// Read an input file as text: only a regular file (a device such as
/// `/dev/zero`, a FIFO or a directory is refused before it is opened, so
/// nothing blocks or grows without end) of at most `MAX_INPUT_BYTES`.
pub fn read_input(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_INPUT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(format!("larger than {} MiB", MAX_INPUT_BYTES >> 20));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()))
}

/// Default statistics interval: 1 s (the AASH study used 1-2 s).
pub const DEFAULT_STATS_INTERVAL_MS: f64 = 1000.0;
/// Default bound on an all-done run: one simulated hour.
pub const DEFAULT_MAX_S: f64 = 3600.0;
/// Noise above this fraction would leave a CPU all but dead.
pub const MAX_NOISE: f64 = 0.95;

/// Default receive ring of traffic noise: e1000's `RxDescriptors` default.
pub const DEFAULT_RING: u32 = 256;

/// A `[[machine.noise]]` entry with `traffic_pps` (at `p`): traffic noise
/// (`NoiseSpec::Traffic`; `engine/cpu.rs`, "Traffic"). It needs `packet_us` and `irq_per_s`,
/// takes `irq_us` (default 0), `ring` (default 256) and `fraction_off` (noise between
/// batches, default 0), and nothing of constant or bursty noise; its batches must leave the
/// CPU more than 1 − `MAX_NOISE` of its time.
fn traffic_noise(nz: &ampsched_model::spec::NoiseGroupSpec, p: &str) -> Result<NoiseSpec, ModelError> {
    for (field, set) in [
        ("fraction", nz.fraction.is_some()),
        ("on_ms", nz.on_ms.is_some()),
        ("off_ms", nz.off_ms.is_some()),
        ("fraction_on", nz.fraction_on.is_some()),
        ("random", nz.random.is_some()),
        ("stall", nz.stall.is_some()),
    ] {
        if set {
            return Err(ModelError::new(
                format!("{p}.{field}"),
                "traffic noise (`traffic_pps`) takes `packet_us`, `irq_per_s`, `irq_us`, `ring` and `fraction_off` only",
            ));
        }
    }
    let need = |v: Option<f64>, field: &str, what: &str| {
        v.ok_or_else(|| ModelError::new(format!("{p}.{field}"), format!("traffic noise needs `{field}` ({what})")))
    };
    let packet_us = need(nz.packet_us, "packet_us", "µs of CPU the receive path takes per packet")?;
    let irq_per_s = need(nz.irq_per_s, "irq_per_s", "hard interrupts per second, the NIC's interrupt moderation")?;
    let between = nz.fraction_off.unwrap_or(0.0);
    if !(0.0..=MAX_NOISE).contains(&between) {
        return Err(ModelError::new(
            format!("{p}.fraction_off"),
            format!("must be in [0, {MAX_NOISE}], got {between}"),
        ));
    }
    let noise = NoiseSpec::Traffic {
        pps: nz.traffic_pps.unwrap_or(0.0),
        per_packet: Nanos((packet_us * 1e3).round() as u64),
        irq_per_s,
        per_irq: Nanos((nz.irq_us.unwrap_or(0.0) * 1e3).round() as u64),
        ring: nz.ring.unwrap_or(DEFAULT_RING),
        between,
    };
    let share = noise.traffic_share();
    if share > MAX_NOISE {
        return Err(ModelError::new(
            format!("{p}.traffic_pps"),
            format!(
                "the traffic's batches would take {:.1} % of the CPU (> {} %): the receive path \
                 would never catch up and Linux would defer it to ksoftirqd, which is not modelled",
                share * 100.0,
                MAX_NOISE * 100.0
            ),
        ));
    }
    Ok(noise)
}

/// The field path a policy error points at: `{kind}.name` or `{kind}.{param}`.
fn policy_path(kind: &str, e: &ampsched_policy::PolicyError) -> String {
    if e.param.is_empty() {
        format!("{kind}.name")
    } else {
        format!("{kind}.{}", e.param)
    }
}

impl Scenario {
    /// Load a scenario file.
    pub fn load(path: &Path, lib: &Library) -> Result<Scenario, ScenarioError> {
        Scenario::load_with(path, lib, &BTreeMap::new())
    }

    /// Load a scenario file with variable values overriding its `[vars]` defaults.
    pub fn load_with(
        path: &Path,
        lib: &Library,
        set: &BTreeMap<String, toml::Value>,
    ) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = read_input(path)
            .map_err(|e| ScenarioError::plain(&file, "", format!("cannot read the scenario file: {e}")))?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
        Scenario::parse_with(&text, &file, &stem, lib, set)
    }

    /// Parse scenario text; `file` names it in errors, `default_name` is used when it has no name.
    /// Variables take their `[vars]` defaults.
    pub fn parse(text: &str, file: &str, default_name: &str, lib: &Library) -> Result<Scenario, ScenarioError> {
        Scenario::parse_with(text, file, default_name, lib, &BTreeMap::new())
    }

    /// Parse scenario text with variable values `set` overriding the file's `[vars]` defaults.
    pub fn parse_with(
        text: &str,
        file: &str,
        default_name: &str,
        lib: &Library,
        set: &BTreeMap<String, toml::Value>,
    ) -> Result<Scenario, ScenarioError> {
        let text = &vars::substitute(text, file, set)?;
        let spec: ScenarioSpec = toml::from_str(text).map_err(|e| {
            let (line, col) =
                e.span().map(|s| line_col(text, s.start)).map(|(l, c)| (Some(l), Some(c))).unwrap_or((None, None));
            let mut msg = e.message().trim().to_string();
            if msg == "recursion limit exceeded" {
                // toml_edit's own bound (80 levels), which keeps its recursive parser off the stack's end.
                msg.push_str(": arrays or inline tables nested deeper than 80 levels");
            }
            ScenarioError { file: file.into(), line, col, path: String::new(), msg }
        })?;
        let at = |path: &str, msg: String| error_at(text, file, path, msg);
        let me = |e: ModelError| at(&e.path, e.msg);
        let mut topo = build_topology(&spec).map_err(me)?;
        let mut rt = RtAppCtx {
            base: Path::new(file).parent().map(Path::to_path_buf).unwrap_or_default(),
            duration: None,
            warnings: Vec::new(),
        };
        let (domains, tasks) = build_domains(&spec, &topo, lib, &mut rt).map_err(me)?;
        topo.io_backend = io_backend_of(&spec, &tasks).map_err(me)?;
        let dispatcher = spec.dispatcher.clone().unwrap_or(PolicySpec { name: "credit".into(), params: Params::new() });
        let placer = spec.placer.clone().unwrap_or(PolicySpec { name: "none".into(), params: Params::new() });
        dispatcher_by_name(&dispatcher.name, &dispatcher.params, &topo)
            .map_err(|e| at(&policy_path("dispatcher", &e), e.msg))?;
        placer_by_name(&placer.name, &placer.params, &topo).map_err(|e| at(&policy_path("placer", &e), e.msg))?;
        let pos = |v: f64, path: &str| -> Result<f64, ScenarioError> {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(at(path, format!("must be a number > 0, got {v}")))
            }
        };
        let stop = match spec.stop.duration_s {
            Some(d) => Stop::Duration(Nanos::from_secs_f64(pos(d, "stop.duration_s")?)),
            // rt-app's `global.duration` stops the run when the scenario gives no stop of its own.
            None if spec.stop.max_s.is_none() && rt.duration.is_some() => {
                Stop::Duration(rt.duration.unwrap_or_default())
            }
            None => Stop::AllDone {
                max: Nanos::from_secs_f64(pos(spec.stop.max_s.unwrap_or(DEFAULT_MAX_S), "stop.max_s")?),
            },
        };
        let stats_interval =
            Nanos::from_ms_f64(pos(spec.stats_interval_ms.unwrap_or(DEFAULT_STATS_INTERVAL_MS), "stats_interval_ms")?);
        let runs = spec.runs.unwrap_or(1);
        if runs == 0 {
            return Err(at("runs", "must be ≥ 1".into()));
        }
        let mut events = Vec::new();
        for (i, ev) in spec.events.iter().enumerate() {
            let d = domains.iter().position(|d| d.name == ev.domain).ok_or_else(|| {
                let names: Vec<_> = domains.iter().map(|d| d.name.as_str()).collect();
                at(
                    &format!("event[{i}].domain"),
                    format!("unknown domain `{}`; known: {}", ev.domain, names.join(", ")),
                )
            })?;
            let t = pos(ev.at_ms.max(f64::MIN_POSITIVE), &format!("event[{i}].at_ms"))?;
            events.push((
                Nanos::from_ms_f64(t),
                DomainId(d as u32),
                DomainChange { cosched: ev.cosched, priority: ev.priority, weight: ev.weight },
            ));
        }
        events.sort_by_key(|e| e.0);
        let agent = spec.agent.as_ref().map(|a| AgentBody {
            reaction: Nanos::from_ms_f64(a.reaction_us.unwrap_or(crate::engine::AGENT_REACTION_US) / 1e3),
            backoff: a.backoff.unwrap_or(true),
        });
        Ok(Scenario {
            file: file.into(),
            name: spec.name.clone().unwrap_or_else(|| default_name.to_string()),
            description: spec.description.clone().unwrap_or_default(),
            seed: spec.seed.unwrap_or(1),
            runs,
            stop,
            stats_interval,
            wake_latency: false,
            events,
            topo,
            domains,
            tasks,
            dispatcher,
            placer,
            agent,
            spec,
            warnings: rt.warnings,
            text: text.to_string(),
        })
    }

    /// Locate a field path in this scenario's file (for errors found later).
    pub fn error_at(&self, path: &str, msg: String) -> ScenarioError {
        error_at(&self.text, &self.file, path, msg)
    }

    /// The seeds of this scenario's runs.
    pub fn seeds(&self) -> Vec<u64> {
        (0..self.runs as u64).map(|i| self.seed + i).collect()
    }

    /// Build the configuration of one run, with optional policy overrides
    /// (an override with another name drops the file's parameters).
    pub fn config(
        &self,
        seed: u64,
        dispatcher: Option<&PolicySpec>,
        placer: Option<&PolicySpec>,
    ) -> Result<SimConfig, ScenarioError> {
        let dspec = dispatcher.unwrap_or(&self.dispatcher);
        let pspec = placer.unwrap_or(&self.placer);
        // Overrides come from the caller, not the file: no line to point at.
        let policy_err = |kind: &str, e: ampsched_policy::PolicyError| {
            ScenarioError::plain(&self.file, &policy_path(kind, &e), e.msg)
        };
        let disp =
            dispatcher_by_name(&dspec.name, &dspec.params, &self.topo).map_err(|e| policy_err("dispatcher", e))?;
        let placer = if pspec.name == "none" {
            None
        } else {
            Some(placer_by_name(&pspec.name, &pspec.params, &self.topo).map_err(|e| policy_err("placer", e))?)
        };
        Ok(SimConfig {
            name: self.name.clone(),
            topo: self.topo.clone(),
            domains: self.domains.clone(),
            tasks: self.tasks.clone(),
            dispatcher: disp,
            placer,
            agent: self.agent,
            seed,
            stop: self.stop,
            stats_interval: self.stats_interval,
            wake_latency: self.wake_latency,
            events: self.events.clone(),
        })
    }
}

fn build_topology(spec: &ScenarioSpec) -> Result<Topology, ModelError> {
    let m = &spec.machine;
    let classes: Vec<CpuClass> = match &m.classes {
        Some(cs) => {
            if cs.is_empty() {
                return Err(ModelError::new("machine.classes", "needs at least one class"));
            }
            let mut out: Vec<CpuClass> = Vec::new();
            for (i, c) in cs.iter().enumerate() {
                // A documented range (docs/security.md): speeds near 0 made work finish at once and
                // busy time overflow to 2^64 ns.
                let (lo, hi) = ampsched_model::spec::limits::SPEED;
                ampsched_model::spec::check_f64("speed", c.speed, lo, hi, "speed factor relative to 1.0")
                    .map_err(|m| ModelError::new(format!("machine.classes[{i}].speed"), m))?;
                if out.iter().any(|o| o.name == c.name) {
                    return Err(ModelError::new(
                        format!("machine.classes[{i}].name"),
                        format!("duplicate class `{}`", c.name),
                    ));
                }
                out.push(CpuClass { name: c.name.clone(), speed: c.speed });
            }
            out
        }
        None => vec![CpuClass { name: "fast".into(), speed: 2.0 }, CpuClass { name: "slow".into(), speed: 1.0 }],
    };
    if m.cpus.is_empty() {
        return Err(ModelError::new("machine.cpus", "needs at least one CPU group"));
    }
    if m.mem_domain_size == Some(0) {
        return Err(ModelError::new("machine.mem_domain_size", "must be ≥ 1"));
    }
    let mut cpus = Vec::new();
    for (gi, g) in m.cpus.iter().enumerate() {
        let class = classes.iter().position(|c| c.name == g.class).ok_or_else(|| {
            let names: Vec<_> = classes.iter().map(|c| c.name.as_str()).collect();
            ModelError::new(
                format!("machine.cpus[{gi}].class"),
                format!("unknown class `{}`; known: {}", g.class, names.join(", ")),
            )
        })?;
        let count = g.count.unwrap_or(1);
        if count == 0 {
            return Err(ModelError::new(format!("machine.cpus[{gi}].count"), "must be ≥ 1"));
        }
        for _ in 0..count {
            let id = cpus.len() as u32;
            if id as usize >= ampsched_model::cpuset::MAX_CPUS {
                return Err(ModelError::new(
                    format!("machine.cpus[{gi}].count"),
                    format!("at most {} CPUs are supported", ampsched_model::cpuset::MAX_CPUS),
                ));
            }
            let md = g.mem_domain.unwrap_or_else(|| m.mem_domain_size.map(|s| id / s).unwrap_or(0));
            cpus.push(CpuInfo {
                id: CpuId(id),
                class,
                speed: classes[class].speed,
                mem_domain: md,
                numa: g.numa.unwrap_or(md),
                noise: NoiseSpec::None,
            });
        }
    }
    let n = cpus.len();
    for (i, nz) in m.noise.iter().enumerate() {
        let p = format!("machine.noise[{i}]");
        let set = CpuSet::parse_list(&nz.cpus).map_err(|e| ModelError::new(format!("{p}.cpus"), e))?;
        if let Some(bad) = set.iter().find(|c| c.idx() >= n) {
            return Err(ModelError::new(
                format!("{p}.cpus"),
                format!("CPU {} does not exist (the machine has 0-{})", bad.0, n - 1),
            ));
        }
        let frac = |v: Option<f64>, field: &str| -> Result<f64, ModelError> {
            let v = v.unwrap_or(0.0);
            if (0.0..=MAX_NOISE).contains(&v) {
                Ok(v)
            } else {
                Err(ModelError::new(format!("{p}.{field}"), format!("must be in [0, {MAX_NOISE}], got {v}")))
            }
        };
        if nz.stall.is_some() && nz.on_ms.is_none() {
            return Err(ModelError::new(
                format!("{p}.stall"),
                "`stall` applies to bursty noise only (give `on_ms`, `off_ms` and `fraction_on`)",
            ));
        }
        let noise =
            if nz.traffic_pps.is_some() {
                traffic_noise(nz, &p)?
            } else if let Some(f) = [("packet_us", nz.packet_us.is_some()), ("irq_per_s", nz.irq_per_s.is_some())]
                .into_iter()
                .chain([("irq_us", nz.irq_us.is_some()), ("ring", nz.ring.is_some())])
                .find(|f| f.1)
            {
                return Err(ModelError::new(
                    format!("{p}.{}", f.0),
                    "applies to traffic noise only (give `traffic_pps`, `packet_us` and `irq_per_s`)",
                ));
            } else {
                match (nz.fraction, nz.on_ms, nz.off_ms) {
                    (Some(_), None, None) => NoiseSpec::Constant { fraction: frac(nz.fraction, "fraction")? },
                    (None, Some(on), Some(off)) => {
                        if !(on > 0.0 && off > 0.0) {
                            return Err(ModelError::new(format!("{p}.on_ms"), "on_ms and off_ms must be > 0"));
                        }
                        if nz.fraction_on.is_none() {
                            return Err(ModelError::new(format!("{p}.fraction_on"), "bursty noise needs fraction_on"));
                        }
                        NoiseSpec::Bursty {
                            fraction_on: frac(nz.fraction_on, "fraction_on")?,
                            fraction_off: frac(nz.fraction_off, "fraction_off")?,
                            on: Nanos::from_ms_f64(on),
                            off: Nanos::from_ms_f64(off),
                            random: nz.random.unwrap_or(false),
                            stall: nz.stall.unwrap_or(false),
                        }
                    }
                    _ => return Err(ModelError::new(
                        p,
                        "give either `fraction` (constant noise), `on_ms`, `off_ms` and `fraction_on` (bursty noise) \
                     or `traffic_pps`, `packet_us` and `irq_per_s` (traffic noise)",
                    )),
                }
            };
        for c in set.iter() {
            cpus[c.idx()].noise = noise.clone();
        }
    }
    let cs = &m.cache;
    let d = CacheSpec::default();
    let cache = CacheSpec {
        l2_kb: cs.l2_kb.unwrap_or(d.l2_kb),
        llc_kb: cs.llc_kb.unwrap_or(d.llc_kb),
        llc_refill_gbps: cs.llc_refill_gbps.unwrap_or(d.llc_refill_gbps),
        dram_refill_gbps: cs.dram_refill_gbps.unwrap_or(d.dram_refill_gbps),
    };
    if !(cache.llc_refill_gbps > 0.0 && cache.dram_refill_gbps > 0.0) {
        return Err(ModelError::new("machine.cache", "refill bandwidths must be > 0"));
    }
    let mut topo = Topology::new(classes, cpus, cache);
    topo.rt_loads = ampsched_model::spec::RtLoadSpec::build_all(&m.rt_load, n)?;
    topo.memory_bus = m.memory_bus.as_ref().map(|b| b.build());
    topo.clock_modulation = m.clock_modulation.unwrap_or(false);
    topo.wake_latency = Nanos((m.wake_latency_us.unwrap_or(0.0) * 1e3).round() as u64);
    topo.llc_contention = m.llc_contention.unwrap_or(false);
    if topo.llc_contention && (topo.memory_bus.is_some() || topo.clock_modulation) {
        return Err(ModelError::new(
            "machine.llc_contention",
            "true together with `memory_bus` or `clock_modulation = true` is not modelled: give one of them",
        ));
    }
    Ok(topo)
}

/// The I/O back end (`[machine.io_backend]`): its domain must be a
/// background domain whose vCPUs only compute, sleep and wait on timers
/// (what the engine's `engine/backend.rs` parks while they serve).
fn io_backend_of(spec: &ScenarioSpec, tasks: &[TaskInit]) -> Result<Option<ampsched_model::IoBackend>, ModelError> {
    let Some(b) = &spec.machine.io_backend else { return Ok(None) };
    let backgrounds: Vec<&str> =
        spec.domains.iter().filter(|d| d.background == Some(true)).map(|d| d.name.as_str()).collect();
    let allowed = if backgrounds.is_empty() {
        "the scenario has none: add `background = true` to the domain that runs the back ends (e.g. dom0)".to_string()
    } else {
        format!("the scenario's: {}", backgrounds.join(", "))
    };
    let path = "machine.io_backend.domain";
    let Some(d) = spec.domains.iter().position(|d| d.name == b.domain) else {
        return Err(ModelError::new(
            path,
            format!("no [[domain]] is named `{}`: name a background domain ({allowed})", b.domain),
        ));
    };
    if spec.domains[d].background != Some(true) {
        return Err(ModelError::new(
            path,
            format!("domain `{}` is not a background domain: the I/O back end must be one ({allowed})", b.domain),
        ));
    }
    for t in tasks.iter().filter(|t| t.domain.idx() == d) {
        let bad = t.program.ops.iter().position(|op| {
            !matches!(
                op,
                Op::Compute { .. }
                    | Op::Sleep { .. }
                    | Op::SleepExp { .. }
                    | Op::Timer { .. }
                    | Op::Runtime { .. }
                    | Op::LoopStart { .. }
                    | Op::LoopEnd { .. }
                    | Op::End
            )
        });
        if let Some(i) = bad {
            return Err(ModelError::new(
                format!("domain[{d}].workload"),
                format!(
                    "the I/O back-end domain `{}` runs op {i} ({:?}): its vCPUs may only compute, sleep and wait on timers",
                    b.domain, t.program.ops[i]
                ),
            ));
        }
    }
    Ok(Some(ampsched_model::IoBackend {
        domain: DomainId(d as u32),
        request: Nanos((b.request_us * 1e3).round() as u64),
        response: Nanos((b.response_us * 1e3).round() as u64),
    }))
}

fn affinity_of(s: &Option<String>, path: String, topo: &Topology) -> Result<CpuSet, ModelError> {
    match s {
        None => Ok(topo.all),
        Some(s) => {
            let set = CpuSet::parse_list(s).map_err(|e| ModelError::new(path.clone(), e))?;
            if set.is_empty() {
                return Err(ModelError::new(path, "affinity must name at least one CPU"));
            }
            if let Some(bad) = set.iter().find(|c| c.idx() >= topo.ncpus()) {
                return Err(ModelError::new(
                    path,
                    format!("CPU {} does not exist (the machine has 0-{})", bad.0, topo.ncpus() - 1),
                ));
            }
            Ok(set)
        }
    }
}

/// Where rt-app files are found (the scenario's directory) and the longest `global.duration` seen.
struct RtAppCtx {
    base: std::path::PathBuf,
    duration: Option<Nanos>,
    /// The rt-app files' warnings, with the workload field that named the file.
    warnings: Vec<String>,
}

/// A task's program and its own name (an rt-app thread's; `None` for other workloads).
type Named = (Program, Option<Arc<str>>);

/// The programs of an rt-app file for `threads` vCPUs, with the rt-app thread
/// names (extra vCPUs stay idle and unnamed).
fn rtapp_programs(
    w: &WorkloadSpec,
    file: &str,
    threads: u32,
    path: &str,
    topo: &Topology,
    rt: &mut RtAppCtx,
) -> Result<Vec<Named>, ModelError> {
    let p = format!("{path}.rtapp");
    if w.model.is_some() || w.program.is_some() {
        return Err(ModelError::new(p, "give one of `model`, `program` or `rtapp`"));
    }
    if let Some(k) = w.params.keys().next() {
        return Err(ModelError::new(format!("{path}.{k}"), "parameters apply to a `model`, not to an rt-app file"));
    }
    let full = rt.base.join(file);
    let text = read_input(&full)
        .map_err(|e| ModelError::new(&p, format!("cannot read rt-app file {}: {e}", full.display())))?;
    let app = ampsched_model::rtapp::compile(&text, &full.display().to_string(), topo)
        .map_err(|e| ModelError::new(&p, e.to_string()))?;
    if app.threads.len() > threads as usize {
        return Err(ModelError::new(
            p,
            format!(
                "{} has {} threads (instances) but there are only {threads} vCPUs for them",
                full.display(),
                app.threads.len()
            ),
        ));
    }
    rt.duration = rt.duration.max(app.duration);
    rt.warnings.extend(app.warnings.iter().map(|w| format!("warning: {w} (rt-app file of `{p}`)")));
    let mut progs: Vec<Named> = app.threads.into_iter().map(|t| (t.program, Some(Arc::from(t.name)))).collect();
    progs.resize(threads as usize, (Program::idle(), None));
    Ok(progs)
}

fn programs_for(
    w: &WorkloadSpec,
    threads: u32,
    path: &str,
    lib: &Library,
    topo: &Topology,
    rt: &mut RtAppCtx,
) -> Result<Vec<Named>, ModelError> {
    if let Some(f) = &w.rtapp {
        return rtapp_programs(w, f, threads, path, topo, rt);
    }
    let unnamed = |v: Vec<Program>| v.into_iter().map(|p| (p, None)).collect();
    match (&w.model, &w.program) {
        (Some(m), None) => lib.instantiate(m, &w.params, threads, path).map(unnamed),
        (None, Some(ops)) => {
            if let Some(k) = w.params.keys().next() {
                return Err(ModelError::new(
                    format!("{path}.{k}"),
                    "parameters apply to a `model`, not to an inline `program`",
                ));
            }
            let p = ampsched_model::spec::compile_program(ops, &format!("{path}.program"))?;
            Ok(unnamed(vec![p; threads as usize]))
        }
        (Some(_), Some(_)) => Err(ModelError::new(path, "give either `model` or `program`, not both")),
        (None, None) => {
            Err(ModelError::new(path, "needs a `model` (see `ampsched models`), a `program` or an `rtapp` file"))
        }
    }
}

fn build_domains(
    spec: &ScenarioSpec,
    topo: &Topology,
    lib: &Library,
    rt: &mut RtAppCtx,
) -> Result<(Vec<DomainView>, Vec<TaskInit>), ModelError> {
    if spec.domains.is_empty() {
        return Err(ModelError::new("domain", "a scenario needs at least one [[domain]]"));
    }
    // Bounded before anything is built: parsing allocates per vCPU and the
    // checks below compare domains pairwise.
    if spec.domains.len() > MAX_DOMAINS {
        let p = format!("domain[{MAX_DOMAINS}]");
        return Err(ModelError::new(p, format!("{} domains: at most {MAX_DOMAINS}", spec.domains.len())));
    }
    let mut total = 0u64;
    for (di, d) in spec.domains.iter().enumerate() {
        total += d.vcpus as u64;
        if total > MAX_TASKS {
            return Err(ModelError::new(
                format!("domain[{di}].vcpus"),
                format!("the domains' vCPUs add up to {total} here: at most {MAX_TASKS} in all"),
            ));
        }
    }
    let n_fast = topo.fast_cpus.len() as u32;
    let mut views = Vec::new();
    for (di, d) in spec.domains.iter().enumerate() {
        let p = format!("domain[{di}]");
        if spec.domains[..di].iter().any(|o| o.name == d.name) {
            return Err(ModelError::new(format!("{p}.name"), format!("duplicate domain name `{}`", d.name)));
        }
        if d.vcpus == 0 {
            return Err(ModelError::new(format!("{p}.vcpus"), "must be ≥ 1"));
        }
        let weight = d.weight.unwrap_or(256);
        if weight == 0 || weight > 65535 {
            return Err(ModelError::new(format!("{p}.weight"), format!("must be in 1..=65535 (Xen), got {weight}")));
        }
        let fast_vcpus = match (&d.fast_vcpus, d.aware) {
            (Some(v), _) => {
                if let Some(bad) = v.iter().find(|x| **x >= d.vcpus) {
                    return Err(ModelError::new(
                        format!("{p}.fast_vcpus"),
                        format!("vCPU {bad} does not exist (the domain has 0-{})", d.vcpus - 1),
                    ));
                }
                Some(v.clone())
            }
            (None, Some(true)) => Some((0..n_fast.min(d.vcpus)).collect()),
            _ => None,
        };
        views.push(DomainView {
            name: d.name.clone(),
            weight,
            cap: d.cap.unwrap_or(0),
            priority: d.priority.unwrap_or_default(),
            fast_vcpus,
            cosched: d.cosched.unwrap_or_default(),
            tasks: Vec::new(),
        });
    }
    // Sync groups, in order of first appearance.
    let group_name = |d: &DomainSpec| d.sync_group.clone().unwrap_or_else(|| d.name.clone());
    let mut groups: Vec<String> = Vec::new();
    for d in &spec.domains {
        let g = group_name(d);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    // Programs per domain: a shared workload in a multi-domain group is instantiated once for all its vCPUs.
    let mut progs: Vec<Vec<Option<Named>>> = vec![Vec::new(); spec.domains.len()];
    for g in &groups {
        let members: Vec<usize> = (0..spec.domains.len()).filter(|&i| &group_name(&spec.domains[i]) == g).collect();
        let shared: Vec<usize> = members.iter().copied().filter(|&i| spec.domains[i].workload.is_some()).collect();
        if shared.len() > 1 {
            let first = spec.domains[shared[0]].workload.as_ref().expect("workload");
            let fj = serde_json_like(first);
            for &i in &shared[1..] {
                if serde_json_like(spec.domains[i].workload.as_ref().expect("workload")) != fj {
                    return Err(ModelError::new(
                        format!("domain[{i}].workload"),
                        format!("domains of sync group `{g}` must run the same workload (they form one program)"),
                    ));
                }
            }
            let total: u32 = shared.iter().map(|&i| spec.domains[i].vcpus).sum();
            let mut all =
                programs_for(first, total, &format!("domain[{}].workload", shared[0]), lib, topo, rt)?.into_iter();
            for &i in &shared {
                progs[i] = (0..spec.domains[i].vcpus).map(|_| all.next()).collect();
            }
        }
        for &i in &members {
            let d = &spec.domains[i];
            let p = format!("domain[{i}]");
            match (&d.workload, &d.tasks) {
                (Some(_), Some(_)) => {
                    return Err(ModelError::new(format!("{p}.tasks"), "give either `workload` or `tasks`, not both"))
                }
                (Some(w), None) if shared.len() <= 1 => {
                    progs[i] = programs_for(w, d.vcpus, &format!("{p}.workload"), lib, topo, rt)?
                        .into_iter()
                        .map(Some)
                        .collect();
                }
                (None, Some(ts)) => {
                    if ts.len() > d.vcpus as usize {
                        return Err(ModelError::new(
                            format!("{p}.tasks"),
                            format!("{} tasks for {} vCPUs", ts.len(), d.vcpus),
                        ));
                    }
                    progs[i] = ts
                        .iter()
                        .enumerate()
                        .map(|(k, w)| {
                            programs_for(w, 1, &format!("{p}.tasks[{k}]"), lib, topo, rt).map(|mut v| v.pop())
                        })
                        .collect::<Result<_, _>>()?;
                }
                _ => {}
            }
        }
    }
    let mut tasks = Vec::new();
    let mut rank_in_group = vec![0u32; groups.len()];
    for (di, d) in spec.domains.iter().enumerate() {
        let p = format!("domain[{di}]");
        let dom_aff = affinity_of(&d.affinity, format!("{p}.affinity"), topo)?;
        let g = groups.iter().position(|x| *x == group_name(d)).expect("group") as u32;
        for v in 0..d.vcpus {
            let (prog, name) = match progs[di].get(v as usize).cloned().flatten() {
                Some((p, n)) => (Some(p), n),
                None => (None, None),
            };
            let task_aff = match &d.tasks {
                Some(ts) if (v as usize) < ts.len() && ts[v as usize].affinity.is_some() => {
                    affinity_of(&ts[v as usize].affinity, format!("{p}.tasks[{v}].affinity"), topo)?
                }
                _ => dom_aff,
            };
            let rank = if prog.is_some() {
                rank_in_group[g as usize] += 1;
                rank_in_group[g as usize] - 1
            } else {
                0
            };
            let id = tasks.len() as u32;
            views[di].tasks.push(ampsched_model::TaskId(id));
            tasks.push(TaskInit {
                domain: DomainId(di as u32),
                vcpu: v,
                program: Arc::new(prog.unwrap_or_else(Program::idle)),
                affinity: task_aff,
                group: g,
                rank,
                name,
                background: d.background.unwrap_or(false),
            });
        }
    }
    Ok((views, tasks))
}

/// A comparable rendering of a workload spec (to check shared workloads match).
fn serde_json_like(w: &WorkloadSpec) -> String {
    format!("{:?}|{:?}|{:?}|{:?}", w.model, w.params, w.program.as_ref().map(|p| format!("{p:?}")), w.rtapp)
}
