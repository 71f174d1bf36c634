//! Export: everything the agent tells the outside — the JSON-lines decision
//! log, warnings (each once), the Perfetto trace, the Prometheus text, and the
//! sample recording (`--record-samples`: the placer's input, one snapshot a
//! line, see `ampsched_policy::placer_bridge::Recording`). The state file of
//! original affinities belongs to [`crate::apply`] (restore bookkeeping).
//!
//! Nothing here decides; every figure is passed in ([`MetricsView`]), so the
//! rendering is tested on hand-made values.

use crate::discovery::Discovered;
use crate::domain::Domain;
use crate::loopstats::LoopStats;
use crate::metrics::{Exposition, Kind, Labels, MetricsServer};
use crate::sampler::CpuFigures;
use crate::signals;
use crate::trace::{boottime_ns, AgentTrace, PeriodSample};
use crate::AgentError;
use ampsched_model::{CpuId, Nanos, Topology};
use ampsched_policy::placer_bridge::Recording;
use ampsched_policy::Snapshot;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// The figures the metrics and trace show for one period.
pub struct MetricsView<'a> {
    /// The machine.
    pub d: &'a Discovered,
    /// Managed domains.
    pub domains: &'a [Domain],
    /// Per CPU, the last period's figures.
    pub last_cpu: &'a [CpuFigures],
    /// Machine-wide fast-idle-while-slow-busy estimate, ns.
    pub fisb_machine_ns: u64,
    /// Loop figures.
    pub stats: &'a LoopStats,
    /// Failed changes by reason.
    pub errors_by_kind: &'a BTreeMap<&'static str, u64>,
    /// The nominal period.
    pub period: Nanos,
}

/// The agent's outputs.
pub struct Export {
    /// The decision log, when enabled.
    pub(crate) log: Option<Box<dyn Write>>,
    /// The `--trace` recorder.
    pub(crate) trace: Option<AgentTrace>,
    /// Per domain, its fast-class run time at the last trace record.
    trace_fast_ns: Vec<u64>,
    /// When the trace's last period was recorded (boot-time ns).
    trace_last_ts: Option<u64>,
    /// The metrics endpoint.
    pub(crate) metrics: Option<MetricsServer>,
    /// The sample recording.
    record: Option<std::io::BufWriter<std::fs::File>>,
    start: Duration,
    warned: HashSet<String>,
}

fn create_file(path: &Path, what: &str) -> Result<std::fs::File, AgentError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| AgentError::new(format!("{}: cannot create the {what} directory: {e}", dir.display())))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(what != "decision log")
        .append(what == "decision log")
        .open(path)
        .map_err(|e| AgentError::new(format!("{}: cannot open the {what}: {e}", path.display())))
}

impl Export {
    /// Outputs with nothing enabled (tests; the agent adds what its options ask for).
    pub fn quiet() -> Export {
        Export {
            log: None,
            trace: None,
            trace_fast_ns: Vec::new(),
            trace_last_ts: None,
            metrics: None,
            record: None,
            start: signals::monotonic(),
            warned: HashSet::new(),
        }
    }

    /// Open the decision log: `-` = stdout; a dry run without one logs to stdout.
    pub fn open_log(&mut self, log: Option<&Path>, dry_run: bool) -> Result<(), AgentError> {
        self.log = match (log, dry_run) {
            (Some(p), _) if p.as_os_str() == "-" => Some(Box::new(std::io::stdout())),
            (Some(p), _) => Some(Box::new(std::io::BufWriter::new(create_file(p, "decision log")?))),
            (None, true) => Some(Box::new(std::io::stdout())),
            (None, false) => None,
        };
        Ok(())
    }

    /// Start recording the placer's input to `path` (truncated): a header, then a snapshot a period.
    pub fn open_recording(&mut self, path: &Path, topo: &Topology, placer: &str) -> Result<(), AgentError> {
        let mut w = std::io::BufWriter::new(create_file(path, "sample recording")?);
        writeln!(w, "{}", Recording::header_line(topo, placer))
            .map_err(|e| AgentError::new(format!("{}: {e}", path.display())))?;
        self.record = Some(w);
        Ok(())
    }

    /// Restart the log's clock (`t_ms` counts from here).
    pub fn set_start(&mut self, start: Duration) {
        self.start = start;
    }

    /// Append an event to the decision log, stamped with `t_ms` since the start.
    pub fn log(&mut self, mut v: Value) {
        if let Some(w) = self.log.as_mut() {
            let t = (signals::monotonic().saturating_sub(self.start).as_secs_f64() * 1e6).round() / 1000.0;
            if let Value::Object(m) = &mut v {
                m.insert("t_ms".into(), json!(t));
            }
            let _ = writeln!(w, "{v}");
        }
    }

    /// Whether events are logged (building one costs; skip when not).
    pub fn logging(&self) -> bool {
        self.log.is_some()
    }

    /// Print a warning on stderr once per `key`.
    pub fn warn_once(&mut self, key: String, msg: String) {
        if self.warned.insert(key) {
            eprintln!("ampsched: warning: {msg}");
        }
    }

    /// Record the placer's input of one period.
    pub fn record(&mut self, snap: &Snapshot) -> Result<(), AgentError> {
        if let Some(w) = self.record.as_mut() {
            let line = serde_json::to_string(snap).expect("a snapshot serialises");
            writeln!(w, "{line}").map_err(|e| AgentError::new(format!("sample recording: {e}")))?;
        }
        Ok(())
    }

    /// Flush the decision log (every period).
    pub fn flush_log(&mut self) {
        if let Some(w) = self.log.as_mut() {
            let _ = w.flush();
        }
    }

    /// Record the final change count in the trace, so its counter ends at the
    /// agent's own count (changes between the last period and the exit included).
    pub fn trace_final(&mut self, changes_total: u64) {
        if let Some(tr) = self.trace.as_mut() {
            tr.changes(boottime_ns(), changes_total);
        }
    }

    /// Flush the log, the recording and the trace.
    pub fn flush(&mut self) -> Result<(), AgentError> {
        if let Some(w) = self.log.as_mut() {
            let _ = w.flush();
        }
        if let Some(w) = self.record.as_mut() {
            w.flush().map_err(|e| AgentError::new(format!("sample recording: {e}")))?;
        }
        match self.trace.as_mut() {
            Some(tr) => tr.flush(),
            None => Ok(()),
        }
    }

    /// Publish the metrics text, when the endpoint is on.
    pub fn publish(&self, v: &MetricsView) {
        if let Some(m) = &self.metrics {
            m.publish(render_metrics(v));
        }
    }

    /// Record the period just ended in the `--trace` file.
    pub fn trace_period(
        &mut self,
        v: &MetricsView,
        on_cpu: &[Option<i32>],
        runnable_tids: &[i32],
    ) -> Result<(), AgentError> {
        let Some(tr) = self.trace.as_mut() else { return Ok(()) };
        let capacity: Vec<f64> =
            v.d.cpus.iter().zip(v.last_cpu).map(|(c, f)| c.capacity * f.capacity_share()).collect();
        let n_fast = (0..v.d.topo.ncpus()).filter(|i| v.d.topo.is_fast(CpuId(*i as u32))).count().max(1);
        // The fast share is of the time since the last record (a period runs late now and then).
        let ts = boottime_ns();
        let since = self.trace_last_ts.map_or(v.period.0, |t| ts.saturating_sub(t));
        self.trace_last_ts = Some(ts);
        let span = (since * n_fast as u64).max(1) as f64;
        self.trace_fast_ns.resize(v.domains.len(), 0);
        let targets: Vec<(i32, f64, u32, u8)> = v
            .domains
            .iter()
            .enumerate()
            .filter(|(_, d)| d.alive)
            .map(|(i, d)| {
                let hands = if d.backed_off { 2 } else { u8::from(d.hands_off) };
                (d.root, (d.fast_ns - self.trace_fast_ns[i]) as f64 / span, d.active as u32, hands)
            })
            .collect();
        for (i, d) in v.domains.iter().enumerate() {
            self.trace_fast_ns[i] = d.fast_ns;
        }
        let runnable = |tid: i32| runnable_tids.binary_search(&tid).is_ok();
        tr.period(
            ts,
            &PeriodSample {
                on_cpu,
                runnable: &runnable,
                capacity: &capacity,
                targets: &targets,
                changes_total: v.stats.changes,
            },
        )
    }
}

/// Render the Prometheus text of one period.
pub fn render_metrics(v: &MetricsView) -> String {
    let mut expo = Exposition::new();
    let mut metric = |name: &str, kind: &str, help: &str, rows: Vec<(Labels, f64)>| {
        expo.add(name, if kind == "counter" { Kind::Counter } else { Kind::Gauge }, help, rows)
    };
    let l = |k: &str, v: String| (k.to_string(), v);
    let doms: Vec<&Domain> = v.domains.iter().collect();
    let per = |f: &dyn Fn(&Domain) -> f64| -> Vec<(Labels, f64)> {
        doms.iter().map(|d| (vec![l("target", d.name.clone())], f(d))).collect()
    };
    metric(
        "ampsched_fast_core_seconds_total",
        "counter",
        "Run time of the target's managed threads on fast-class CPUs.",
        per(&|d| d.fast_ns as f64 / 1e9),
    );
    metric(
        "ampsched_active_threads",
        "gauge",
        "Managed threads that ran or were runnable in the last period.",
        per(&|d| d.active as f64),
    );
    metric("ampsched_managed_threads", "gauge", "Threads under management.", per(&|d| d.threads as f64));
    metric(
        "ampsched_backed_off",
        "gauge",
        "1 when the agent leaves the target to the kernel because its placement measured worse (probed now and then).",
        per(&|d| f64::from(u8::from(d.backed_off))),
    );
    metric(
        "ampsched_hands_off",
        "gauge",
        "1 when the target is left to the kernel this period (a probe window, or backed off).",
        per(&|d| f64::from(u8::from(d.hands_off))),
    );
    metric("ampsched_backoffs_total", "counter", "Times the agent backed off the target.", per(&|d| d.backoffs as f64));
    metric(
        "ampsched_progress_managed_vs_hands_off",
        "gauge",
        "Median progress (speed-weighted run time per wall time) managed divided by hands-off (NaN until measured).",
        per(&|d| d.progress_ratio.unwrap_or(f64::NAN)),
    );
    metric(
        "ampsched_migrations_total",
        "counter",
        "Affinity changes the agent made to the target's threads.",
        per(&|d| d.changes as f64),
    );
    metric(
        "ampsched_fast_idle_slow_busy_seconds_total",
        "counter",
        "Estimated time a fast CPU was idle while the target ran on a slower CPU (per period: min(fast idle, target slow run)).",
        per(&|d| d.fisb_ns as f64 / 1e9),
    );
    metric(
        "ampsched_machine_fast_idle_slow_busy_seconds_total",
        "counter",
        "Estimated time a fast CPU was idle while a slower CPU was busy (per period: min(fast idle, slow busy)).",
        vec![(Vec::new(), v.fisb_machine_ns as f64 / 1e9)],
    );
    let last = v.stats.loop_wall_ns.last().copied().unwrap_or(0) as f64 / 1e9;
    let sum = v.stats.loop_wall_ns.iter().sum::<u64>() as f64 / 1e9;
    metric(
        "ampsched_loop_duration_seconds",
        "gauge",
        "Wall time of the last control-loop iteration.",
        vec![(Vec::new(), last)],
    );
    metric(
        "ampsched_loop_duration_seconds_sum",
        "gauge",
        "Wall time of all control-loop iterations.",
        vec![(Vec::new(), sum)],
    );
    metric(
        "ampsched_loop_cpu_seconds_total",
        "counter",
        "CPU time of the control loop.",
        vec![(Vec::new(), v.stats.loop_cpu_ns.iter().sum::<u64>() as f64 / 1e9)],
    );
    metric("ampsched_periods_total", "counter", "Control periods run.", vec![(Vec::new(), v.stats.periods as f64)]);
    metric(
        "ampsched_affinity_errors_total",
        "counter",
        "Affinity changes that failed, by reason.",
        v.errors_by_kind.iter().map(|(k, v)| (vec![l("reason", k.to_string())], *v as f64)).collect(),
    );
    metric(
        "ampsched_cpu_effective_capacity",
        "gauge",
        "Capacity (fastest = 1024) left after irq, softirq, steal and real-time work in the last period.",
        v.d.cpus
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let share = v.last_cpu.get(i).map(|f| f.capacity_share()).unwrap_or(1.0);
                (
                    vec![l("cpu", c.linux_id.to_string()), l("class", v.d.topo.classes[c.class].name.clone())],
                    c.capacity * share,
                )
            })
            .collect(),
    );
    expo.encode()
}
