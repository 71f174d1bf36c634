//! Run admission (issue 18 D2): the size of a command's runs, estimated from
//! the scenario before any of them starts, against documented limits.
//!
//! A careless or hostile scenario used to be accepted silently however large
//! (1024 CPUs × 10 000 vCPUs × 1e6 s grew without end; 2 CPUs × 1e7 s took
//! 5.9 GB). Now `ampsched sim` (and the Python `simulate`) first estimates:
//!
//! - **events** per run ≈ simulated time × 2 × (CPUs + tasks) / tick, plus one
//!   per statistics interval and per domain change. The engine's events are
//!   quantum-driven: a busy CPU takes a dispatcher tick each `tick_period`
//!   and every runnable task is switched in, runs an op to its end or is
//!   preempted about once per quantum. Calibrated on `ampsched bench`'s
//!   cases (60 s, credit's 10 ms tick): S (4 CPUs, 4 tasks) 39 k events for
//!   96 k estimated, M (8 CPUs, 16 tasks) 226 k for 288 k, L (64 CPUs, 256
//!   tasks) 2.1 M for 3.8 M — within 2.5× and above the measured count. A
//!   program of very short ops (sub-millisecond phases) can exceed it. A
//!   dispatcher without a tick (fair, linux) counts a 1 ms quantum.
//! - **memory**: the simulator's state per concurrent run (per CPU, per
//!   task, each distinct program's ops), the statistics series (at most
//!   `MAX_SERIES_POINTS` points per domain whatever the duration, see
//!   `engine::series`) and every run's results kept for the summary table.
//!   The per-item sizes are upper figures measured with peak RSS (see
//!   `docs/security.md`); nothing grows with simulated time except up to
//!   the series cap.
//!
//! A command past `MAX_EVENTS` (all its runs together) or `MAX_MEMORY_BYTES`
//! is refused with both figures and their limits unless the caller allows
//! large runs (`--allow-large`, `allow_large=True`).
//!
//! May import: scenario loading, the engine's public configuration and
//! constants. Must never import the runner (which is given an admitted job)
//! or anything in `ampsched-lab`.

use crate::engine::MAX_SERIES_POINTS;
use crate::scenario::{Scenario, ScenarioError, Stop};
use ampsched_model::spec::PolicySpec;
use ampsched_model::{Nanos, Op};
use std::collections::HashSet;
use std::sync::Arc;

/// Most events a command may simulate without `--allow-large` (all runs
/// together): about 3–7 minutes of one core at the engine's 5–10 M events/s.
pub const MAX_EVENTS: f64 = 2e9;
/// Most memory a command may be estimated to need without `--allow-large`: 4 GiB.
pub const MAX_MEMORY_BYTES: f64 = 4.0 * GIB;

/// The quantum assumed for a dispatcher without a periodic tick, ns.
const TICKLESS_QUANTUM_NS: u64 = 1_000_000;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
/// Simulator state per CPU (its accounting, the dispatcher's runqueue, event slots), bytes.
const BYTES_PER_CPU: f64 = 2048.0;
/// Simulator state per task (engine, dispatcher and placer records, event slots), bytes.
const BYTES_PER_TASK: f64 = 2048.0;
/// A task's, a CPU's results, bytes (kept until the command ends).
const RESULT_BYTES_PER_ITEM: f64 = 512.0;
/// Per series point per domain: the point plus one `u64` per CPU class, bytes.
const BYTES_PER_POINT: f64 = 64.0;
/// Counter values per counter point (the dispatchers have at most about this many).
const COUNTERS_PER_POINT: f64 = 16.0;

/// The size of a command's runs, before any starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// Runs of the command.
    pub runs: u64,
    /// Runs simulated at once.
    pub concurrent: u64,
    /// Simulated seconds per run (the stop's bound for an all-done run).
    pub sim_s: f64,
    /// CPUs.
    pub cpus: usize,
    /// Tasks (vCPUs and threads, idle ones included).
    pub tasks: usize,
    /// The dispatcher's tick, ns.
    pub tick_ns: u64,
    /// Events per run.
    pub events_per_run: f64,
    /// Events over all runs.
    pub events: f64,
    /// Statistics points kept per domain per run.
    pub points: f64,
    /// Peak memory, bytes.
    pub memory_bytes: f64,
}

impl Estimate {
    /// Estimate `runs` runs of `sc` (with these policy overrides), `concurrent` at a time.
    pub fn new(
        sc: &Scenario,
        dispatcher: Option<&PolicySpec>,
        placer: Option<&PolicySpec>,
        runs: u64,
        concurrent: u64,
    ) -> Result<Estimate, ScenarioError> {
        let cfg = sc.config(sc.seed, dispatcher, placer)?;
        // Tick-less dispatchers (fair, linux) are driven by their slices: take 1 ms,
        // the order of CFS's minimum granularity (0.75 ms) under load.
        let tick_ns = match cfg.dispatcher.tick_period().0 {
            0 => TICKLESS_QUANTUM_NS,
            t => t.max(1000),
        };
        let end = match sc.stop {
            Stop::Duration(d) => d,
            Stop::AllDone { max } => max,
        };
        let sim_ns = end.0 as f64;
        let (cpus, tasks, domains) = (sc.topo.ncpus(), sc.tasks.len(), sc.domains.len());
        let intervals = if sc.stats_interval > Nanos::ZERO { sim_ns / sc.stats_interval.0 as f64 } else { 0.0 };
        let events_per_run = sim_ns * 2.0 * (cpus + tasks) as f64 / tick_ns as f64 + intervals + sc.events.len() as f64;
        let points = intervals.ceil().min(MAX_SERIES_POINTS as f64) + 1.0;
        // Each distinct program once (vCPUs of a domain share theirs).
        let mut seen = HashSet::new();
        let op_bytes: f64 = sc
            .tasks
            .iter()
            .filter(|t| seen.insert(Arc::as_ptr(&t.program)))
            .map(|t| (t.program.ops.len() * std::mem::size_of::<Op>()) as f64)
            .sum();
        let nclass = sc.topo.classes.len() as f64;
        let series = points * (domains as f64 * (BYTES_PER_POINT + 8.0 * nclass) + 8.0 * (4.0 + COUNTERS_PER_POINT));
        let state = cpus as f64 * BYTES_PER_CPU + tasks as f64 * BYTES_PER_TASK + op_bytes;
        let result = (cpus + tasks + domains) as f64 * RESULT_BYTES_PER_ITEM + series;
        let concurrent = concurrent.clamp(1, runs.max(1));
        let memory_bytes = concurrent as f64 * (state + series) + runs as f64 * result;
        Ok(Estimate {
            runs,
            concurrent,
            sim_s: sim_ns / 1e9,
            cpus,
            tasks,
            tick_ns,
            events_per_run,
            events: events_per_run * runs as f64,
            points,
            memory_bytes,
        })
    }

    /// `Ok` within the limits (or when `allow_large`), else an error naming the estimate and the limits.
    pub fn admit(&self, allow_large: bool, flag: &str) -> Result<(), String> {
        let over_events = self.events > MAX_EVENTS;
        let over_memory = self.memory_bytes > MAX_MEMORY_BYTES;
        if allow_large || !(over_events || over_memory) {
            return Ok(());
        }
        let mut past = Vec::new();
        if over_events {
            past.push(format!("{:.1e} events > the limit of {MAX_EVENTS:.0e}", self.events));
        }
        if over_memory {
            past.push(format!(
                "{:.1} GiB of memory > the limit of {:.0} GiB",
                self.memory_bytes / GIB,
                MAX_MEMORY_BYTES / GIB
            ));
        }
        Err(format!("run too large: {}; estimated from {}; pass {flag} to run it anyway", past.join(" and "), self))
    }
}

impl std::fmt::Display for Estimate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} run(s) × {:.1e} events ({} CPUs, {} tasks, {} s simulated, {} ms tick), {} at once, {:.2} GiB",
            self.runs,
            self.events_per_run,
            self.cpus,
            self.tasks,
            self.sim_s,
            self.tick_ns as f64 / 1e6,
            self.concurrent,
            self.memory_bytes / GIB
        )
    }
}
