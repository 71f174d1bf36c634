//! Results of a run: per task, per domain, per CPU, time series; JSON and a
//! terminal table. Schema `ampsched.sim/1` (documented in the README).

use crate::latency::LatencyHist;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::fmt::Write;

/// Schema id written into every JSON result.
pub const SCHEMA: &str = "ampsched.sim/1";

/// Nanoseconds per CPU class, serialised as `{class: ns}` in class order.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassTimes {
    /// Class names.
    pub names: Vec<String>,
    /// Values, one per class.
    pub values: Vec<u64>,
}

impl ClassTimes {
    /// Pair names with values.
    pub fn new(names: &[String], values: &[u64]) -> ClassTimes {
        ClassTimes { names: names.to_vec(), values: values.to_vec() }
    }
    /// Sum over classes.
    pub fn total(&self) -> u64 {
        self.values.iter().sum()
    }
    /// Value of a class by name.
    pub fn get(&self, name: &str) -> u64 {
        self.names.iter().position(|n| n == name).map(|i| self.values[i]).unwrap_or(0)
    }
}

impl Serialize for ClassTimes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.names.len()))?;
        for (n, v) in self.names.iter().zip(&self.values) {
            m.serialize_entry(n, v)?;
        }
        m.end()
    }
}

/// One task (vCPU or thread).
#[derive(Clone, Debug, Serialize)]
pub struct TaskResult {
    /// Task id.
    pub id: u32,
    /// Domain id.
    pub domain: u32,
    /// vCPU index in the domain.
    pub vcpu: u32,
    /// The thread's own name (an rt-app task name, `name-k` for instance k;
    /// the same name as in a real run's trace); absent for vCPUs of
    /// hand-written workloads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// True for a vCPU with no program (never runnable).
    pub idle: bool,
    /// When its program ended (null: not done).
    pub completion_ns: Option<u64>,
    /// Compute segments (ops or parallel-loop chunks) completed (the chore counter's count).
    pub computes_done: u64,
    /// Run time per CPU class.
    pub cpu_ns: ClassTimes,
    /// Time runnable but not running.
    pub wait_ns: u64,
    /// Time blocked (sync waits, sleeps).
    pub blocked_ns: u64,
    /// Part of the run time spent spin-waiting.
    pub spin_ns: u64,
    /// Migrations within a memory domain.
    pub migrations_local: u64,
    /// Migrations across memory domains.
    pub migrations_remote: u64,
    /// Wake-up latencies (from leaving Blocked to running). Not in the JSON
    /// (schema `ampsched.sim/1` unchanged); `ampsched validate` prints p50/p99. Empty
    /// unless the run asked for it (`Scenario::wake_latency` / `SimConfig::wake_latency`).
    #[serde(skip)]
    pub wake_latency: LatencyHist,
    /// Slack and deadline misses of a periodic task (one that reaches rt-app
    /// `timer` events); absent for tasks without timers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub periodic: Option<Periodic>,
}

/// A periodic task's slack, as rt-app's per-thread log reports it: at each
/// `timer` event, the period's end minus the time its work ended. Negative
/// slack is a deadline miss (the work overran the period).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Periodic {
    /// Timer events reached (periods).
    pub periods: u64,
    /// Periods with negative slack.
    pub deadline_misses: u64,
    /// Least slack, ns (negative: the worst overrun).
    pub slack_min_ns: i64,
    /// Mean slack, ns (rounded toward −∞).
    pub slack_mean_ns: i64,
    /// Greatest slack, ns.
    pub slack_max_ns: i64,
}

/// One point of a domain's time series.
#[derive(Clone, Debug, Serialize)]
pub struct SeriesPoint {
    /// End of the interval.
    pub t_ns: u64,
    /// Run time in the interval per CPU class (in class order).
    pub class_ns: Vec<u64>,
    /// Time-averaged number of active (runnable or running) tasks.
    pub active_avg: f64,
    /// Migrations in the interval.
    pub migrations: u64,
}

/// The dispatcher's cumulative counters at the end of a statistics interval.
#[derive(Clone, Debug, Serialize)]
pub struct CounterPoint {
    /// End of the interval.
    pub t_ns: u64,
    /// Cumulative values, in the order of `dispatcher_counters`.
    pub values: Vec<f64>,
}

/// One domain (VM or process).
#[derive(Clone, Debug, Serialize)]
pub struct DomainResult {
    /// Domain id.
    pub id: u32,
    /// Name.
    pub name: String,
    /// When its last task ended (null: not all done).
    pub completion_ns: Option<u64>,
    /// Run time per CPU class.
    pub cpu_ns: ClassTimes,
    /// Sum of its tasks' runnable-wait time.
    pub wait_ns: u64,
    /// Sum of its tasks' blocked time.
    pub blocked_ns: u64,
    /// Sum of its tasks' spin time.
    pub spin_ns: u64,
    /// Migrations within memory domains.
    pub migrations_local: u64,
    /// Migrations across memory domains.
    pub migrations_remote: u64,
    /// A background domain (a testbed's dom0): the run did not wait for it (absent: false).
    #[serde(skip_serializing_if = "is_false")]
    pub background: bool,
    /// Time series at the statistics interval.
    pub series: Vec<SeriesPoint>,
}

/// One CPU.
#[derive(Clone, Debug, Serialize)]
pub struct CpuResult {
    /// CPU id.
    pub id: u32,
    /// Class name.
    pub class: String,
    /// Time running tasks (noise excluded).
    pub busy_ns: u64,
    /// Idle time (noise excluded).
    pub idle_ns: u64,
    /// Time taken by noise.
    pub noise_ns: u64,
}

/// The result of one run.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// Scenario name.
    pub scenario: String,
    /// Dispatcher name.
    pub dispatcher: String,
    /// Placer name.
    pub placer: String,
    /// Seed of this run.
    pub seed: u64,
    /// Simulated time at the end.
    pub end_ns: u64,
    /// Every program finished.
    pub all_done: bool,
    /// Stopped by the `max_s` bound before all programs finished.
    pub truncated: bool,
    /// Events processed.
    pub events: u64,
    /// CPU class names, in order.
    pub classes: Vec<String>,
    /// Time-series interval.
    pub stats_interval_ns: u64,
    /// Time during which a fastest-class CPU idled while a slower CPU ran a task.
    pub fast_idle_slow_busy_ns: u64,
    /// Affinity changes applied from the placer.
    pub placer_changes: u64,
    /// Dispatcher-specific counters.
    #[serde(serialize_with = "ser_counters")]
    pub dispatcher_counters: Vec<(String, f64)>,
    /// Dispatcher counters over time, at the statistics interval (cumulative).
    pub counter_series: Vec<CounterPoint>,
    /// Dispatcher-specific sample streams (e.g. co-scheduling delays, ns).
    #[serde(serialize_with = "ser_samples", skip_serializing_if = "Vec::is_empty")]
    pub dispatcher_samples: Vec<(String, Vec<u64>)>,
    /// Per task.
    pub tasks: Vec<TaskResult>,
    /// Per domain.
    pub domains: Vec<DomainResult>,
    /// Per CPU.
    pub cpus: Vec<CpuResult>,
    /// How the engine ran (figures of the simulator, not of the simulated
    /// machine: not written to JSON, printed by `ampsched bench`).
    #[serde(skip)]
    pub engine: EngineFigures,
}

/// Figures of the engine itself for one run.
#[derive(Clone, Debug, Default)]
pub struct EngineFigures {
    /// Of `events`, those that found their timer superseded (a completion
    /// re-planned or cancelled, a wake-up replaced): `events − superseded` did work.
    pub superseded: u64,
    /// The most entries the event queue held at once.
    pub queue_peak: u64,
}

fn ser_counters<S: Serializer>(v: &[(String, f64)], s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(v.len()))?;
    for (k, x) in v {
        m.serialize_entry(k, x)?;
    }
    m.end()
}

fn ser_samples<S: Serializer>(v: &[(String, Vec<u64>)], s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(v.len()))?;
    for (k, x) in v {
        m.serialize_entry(k, x)?;
    }
    m.end()
}

/// Several runs, as written by `ampsched sim --json`.
#[derive(Clone, Debug, Serialize)]
pub struct SimOutput {
    /// Always `SCHEMA`.
    pub schema: &'static str,
    /// The runs, in seed order.
    pub runs: Vec<RunResult>,
}

/// Serde's `skip_serializing_if` for a flag that is absent when false.
fn is_false(b: &bool) -> bool {
    !*b
}

fn secs(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e9)
}

impl RunResult {
    /// A readable table for the terminal.
    pub fn table(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{} — dispatcher {}, placer {}, seed {}: {} s simulated, {} events{}",
            self.scenario,
            self.dispatcher,
            self.placer,
            self.seed,
            secs(self.end_ns),
            self.events,
            if self.truncated { " (stopped at max_s before all programs finished)" } else { "" }
        );
        let mut head = format!("{:<16} {:>12}", "domain", "completion_s");
        for c in &self.classes {
            head.push_str(&format!(" {:>10}", format!("{c}_s")));
        }
        head.push_str(&format!(" {:>9} {:>10} {:>8} {:>10}", "wait_s", "blocked_s", "spin_s", "migr l/r"));
        let _ = writeln!(o, "{head}");
        for d in &self.domains {
            let mut line = format!("{:<16} {:>12}", d.name, d.completion_ns.map(secs).unwrap_or_else(|| "-".into()));
            for v in &d.cpu_ns.values {
                line.push_str(&format!(" {:>10}", secs(*v)));
            }
            line.push_str(&format!(
                " {:>9} {:>10} {:>8} {:>10}",
                secs(d.wait_ns),
                secs(d.blocked_ns),
                secs(d.spin_ns),
                format!("{}/{}", d.migrations_local, d.migrations_remote)
            ));
            let _ = writeln!(o, "{line}");
        }
        let _ = writeln!(o, "{:<6} {:<8} {:>8} {:>8} {:>8}", "cpu", "class", "busy_s", "idle_s", "noise_s");
        for c in &self.cpus {
            let _ = writeln!(
                o,
                "{:<6} {:<8} {:>8} {:>8} {:>8}",
                c.id,
                c.class,
                secs(c.busy_ns),
                secs(c.idle_ns),
                secs(c.noise_ns)
            );
        }
        let _ = writeln!(o, "fast CPU idle while a slow CPU is busy: {} s", secs(self.fast_idle_slow_busy_ns));
        o
    }
}
