//! Perfetto traces of a run (`ampsched sim … --trace FILE.perfetto-trace`).
//!
//! Design: the encoding is `ampsched-perfetto`'s `TraceWriter` (shared with the
//! real agent's `--trace`); this module decides what a run looks like in it.
//! The trace opens in ui.perfetto.dev and `trace_processor` as a Linux system
//! trace:
//! - VM (domain) → process, vCPU (task) → thread: a `ProcessTree` packet
//!   plus `TrackDescriptor`s with `ProcessDescriptor`/`ThreadDescriptor`.
//! - Which vCPU runs where: ftrace `sched_switch` events in per-CPU
//!   `FtraceEventBundle`s (and `sched_waking` when a vCPU becomes runnable),
//!   so Perfetto builds its native CPU tracks and thread-state tables.
//! - CPU speed (speed × (1 − noise) × 1 GHz) as ftrace `cpu_frequency`
//!   events: Perfetto's CPU frequency tracks.
//! - Counter tracks (`TrackEvent` counters on one packet sequence), sampled
//!   every `TraceOptions::sample_period`: per vCPU `credit` (credit-based
//!   dispatchers), per CPU `runqueue`, per VM `fast share` (its share of the
//!   fast CPUs' time in the last period) and `active vCPUs`, and every
//!   dispatcher counter (`dispatcher.<name>`: steals, boosts, co-scheduling
//!   operations, …) and the placer's affinity changes, cumulative.
//!
//! Zero cost when off: the engine holds an `Option<Box<TraceRecorder>>` and
//! only tests it at a CPU switch, a wake-up and a noise change; sampling
//! events exist only in traced runs and are not counted in `events`. Tracing
//! only reads engine state, so a traced run's results equal an untraced
//! run's, and the same scenario and seed give a byte-identical trace.
//!
//! Streaming: completed packets leave the recorder every sampling period once
//! `STREAM_CHUNK_BYTES` of them have gathered; `ampsched sim --trace` writes
//! them to the file as the run goes (`runner::run_traced_to`), so a traced
//! run's memory is bounded like an untraced one's whatever its duration, and
//! the file holds the same bytes as an in-memory trace (`run_traced`).
//!
//! Units: timestamps are simulated nanoseconds from 0 (Perfetto's default
//! boot-time clock); frequencies are kHz as in the kernel's `cpu_frequency`.
//!
//! May import: `ampsched-perfetto`, the model and policy vocabularies. Must
//! never import the engine, the runner or scenario loading: the engine calls
//! the recorder, and `runner::run_traced` runs a scenario with a trace.

use ampsched_model::{CpuId, Nanos, TaskId};
use ampsched_perfetto::{PrevState, ThreadRef, TraceWriter, IDLE};
use ampsched_policy::{DomainView, TaskView};

/// Options of a traced run.
#[derive(Clone, Copy, Debug)]
pub struct TraceOptions {
    /// How often counter tracks are sampled.
    pub sample_period: Nanos,
}

/// Default counter sampling period: 10 ms, one credit tick.
pub const DEFAULT_SAMPLE_PERIOD: Nanos = Nanos::from_ms(10);

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions { sample_period: DEFAULT_SAMPLE_PERIOD }
    }
}

/// Nominal frequency of speed 1.0, kHz (1 GHz).
pub const KHZ_PER_SPEED: f64 = 1_000_000.0;

/// What the engine hands the recorder at each sample.
pub(crate) struct Sample<'a> {
    /// Per task: its credit, if the dispatcher has credits.
    pub credit: &'a [Option<i64>],
    /// Per CPU: runqueue length, if the dispatcher keeps per-CPU queues.
    pub runq: &'a [Option<u32>],
    /// Per domain: cumulative fast-class run time (ns).
    pub fast_ns: &'a [u64],
    /// Per domain: active (runnable or running) vCPUs now.
    pub active: &'a [u32],
    /// Dispatcher counters, cumulative.
    pub counters: &'a [(&'static str, f64)],
    /// Placer affinity changes, cumulative.
    pub placer_changes: u64,
}

/// Completed packets a recorder holds before handing them to its sink: a
/// streamed trace (`ampsched sim --trace`) keeps at most about this much of
/// itself in memory, plus each CPU's unflushed bundle (32 KiB) and one
/// sampling period's packets, whatever the simulated duration.
pub const STREAM_CHUNK_BYTES: usize = 1 << 20;

/// Where a recorder's bytes go (shared with `Sim::run_traced*`): kept in
/// memory (`run_traced`), or written through to a file as the run goes
/// (`run_traced_to`), the first write error kept and later bytes dropped.
#[derive(Clone, Default)]
pub(crate) struct TraceSink(std::sync::Arc<std::sync::Mutex<SinkState>>);

#[derive(Default)]
pub(crate) struct SinkState {
    buf: Vec<u8>,
    out: Option<Box<dyn std::io::Write + Send>>,
    err: Option<std::io::Error>,
}

impl TraceSink {
    /// A sink writing through to `out`.
    pub(crate) fn to_writer(out: Box<dyn std::io::Write + Send>) -> TraceSink {
        TraceSink(std::sync::Arc::new(std::sync::Mutex::new(SinkState { out: Some(out), ..Default::default() })))
    }

    fn put(&self, bytes: Vec<u8>) {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *s;
        match &mut s.out {
            None => s.buf.extend_from_slice(&bytes),
            Some(_) if s.err.is_some() => {}
            Some(w) => {
                if let Err(e) = w.write_all(&bytes) {
                    s.err = Some(e);
                }
            }
        }
    }

    /// The bytes kept in memory (and clear).
    pub(crate) fn take(&self) -> Vec<u8> {
        std::mem::take(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()).buf)
    }

    /// Flush the writer: the first write or flush error, if any.
    pub(crate) fn close(&self) -> std::io::Result<()> {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = s.err.take() {
            return Err(e);
        }
        match &mut s.out {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

/// The trace's name for task `t` (the idle thread for `None`).
fn thread_ref(threads: &[(u32, String)], t: Option<TaskId>) -> ThreadRef<'_> {
    match t {
        Some(t) => ThreadRef { tid: threads[t.idx()].0, name: threads[t.idx()].1.as_str() },
        None => IDLE,
    }
}

/// Records a run as a Perfetto trace (built by `Sim::run_traced`).
pub struct TraceRecorder {
    w: TraceWriter,
    sink: TraceSink,
    /// Per task: (tid, thread name).
    threads: Vec<(u32, String)>,
    /// Per domain: (pid, track uuid).
    procs: Vec<(u32, u64)>,
    /// Per task: thread track uuid.
    thread_uuid: Vec<u64>,
    /// Counter tracks by key, created on first use; value = uuid.
    tracks: std::collections::BTreeMap<(u8, u32, &'static str), u64>,
    n_fast: u32,
    last_fast_ns: Vec<u64>,
    last_sample: Nanos,
    opts: TraceOptions,
}

impl TraceRecorder {
    /// A recorder for a run of these domains and tasks on `ncpus` CPUs, `n_fast` of them fast.
    /// A task with a name of its own (`names`, e.g. an rt-app thread) is that
    /// thread in the trace, as in a real run's; the others are `domain/vN`.
    pub(crate) fn new(
        domains: &[DomainView],
        tasks: &[TaskView],
        names: &[Option<&str>],
        ncpus: usize,
        n_fast: u32,
        opts: TraceOptions,
        sink: TraceSink,
    ) -> TraceRecorder {
        // pids: one per domain, then one tid per task (VM d's process has pid 1000 + d).
        let pids: Vec<u32> = (0..domains.len() as u32).map(|d| 1000 + d).collect();
        let mut next_tid = 1000 + domains.len() as u32;
        let threads: Vec<(u32, String)> = tasks
            .iter()
            .zip(names)
            .map(|(t, n)| {
                next_tid += 1;
                let name = match n {
                    Some(n) => n.to_string(),
                    None => format!("{}/v{}", domains[t.domain.idx()].name, t.vcpu),
                };
                (next_tid - 1, name)
            })
            .collect();
        let mut w = TraceWriter::new(ncpus);
        let procs: Vec<(u32, &str)> = pids.iter().zip(domains).map(|(p, d)| (*p, d.name.as_str())).collect();
        let ths: Vec<(u32, u32, &str)> =
            tasks.iter().zip(&threads).map(|(t, (tid, n))| (*tid, pids[t.domain.idx()], n.as_str())).collect();
        // VMs as processes, vCPUs as their threads.
        let (proc_uuid, thread_uuid) = w.processes(0, &procs, &ths);
        TraceRecorder {
            w,
            sink,
            procs: pids.into_iter().zip(proc_uuid).collect(),
            threads,
            thread_uuid,
            tracks: Default::default(),
            n_fast,
            last_fast_ns: vec![0; domains.len()],
            last_sample: Nanos::ZERO,
            opts,
        }
    }

    /// CPU `cpu` switches from `prev` (left in state: 0 runnable, 1 blocked, else done) to `next`.
    pub(crate) fn switch(
        &mut self,
        now: Nanos,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_state: u8,
        next: Option<TaskId>,
    ) {
        let state = match prev_state {
            0 => PrevState::Runnable,
            1 => PrevState::Sleeping,
            _ => PrevState::Dead,
        };
        let (p, n) = (thread_ref(&self.threads, prev), thread_ref(&self.threads, next));
        self.w.switch(now.0, cpu.idx(), p, state, n);
    }

    /// Task `t` became runnable (recorded on CPU `cpu`'s bundle).
    pub(crate) fn waking(&mut self, now: Nanos, cpu: CpuId, t: TaskId) {
        let (tid, name) = &self.threads[t.idx()];
        self.w.waking(now.0, cpu.idx(), ThreadRef { tid: *tid, name });
    }

    /// CPU `cpu` now runs at effective speed `speed` (× 1 GHz).
    pub(crate) fn frequency(&mut self, now: Nanos, cpu: CpuId, speed: f64) {
        self.w.frequency(now.0, cpu.idx(), (speed * KHZ_PER_SPEED).round().max(0.0) as u64);
    }

    /// The counter track for `(kind, index, name)`, created under `parent` on first use.
    fn track(&mut self, kind: u8, index: u32, name: &'static str, title: String, parent: Option<u64>) -> u64 {
        if let Some(u) = self.tracks.get(&(kind, index, name)) {
            return *u;
        }
        let uuid = self.w.counter_track(&title, parent);
        self.tracks.insert((kind, index, name), uuid);
        uuid
    }

    fn counter(&mut self, now: Nanos, uuid: u64, v: f64) {
        self.w.counter(now.0, uuid, v);
    }

    /// Record one sample of every counter track.
    pub(crate) fn sample(&mut self, now: Nanos, s: &Sample) {
        for (t, c) in s.credit.iter().enumerate() {
            if let Some(c) = c {
                let parent = self.thread_uuid[t];
                let u = self.track(0, t as u32, "credit", "credit".into(), Some(parent));
                self.counter(now, u, *c as f64);
            }
        }
        for (cpu, q) in s.runq.iter().enumerate() {
            if let Some(q) = q {
                let u = self.track(1, cpu as u32, "runq", format!("cpu{cpu} runqueue"), None);
                self.counter(now, u, *q as f64);
            }
        }
        let span = (now - self.last_sample).0.max(1) as f64;
        for d in 0..s.fast_ns.len() {
            let parent = self.procs[d].1;
            if self.n_fast > 0 {
                let share = (s.fast_ns[d] - self.last_fast_ns[d]) as f64 / (span * self.n_fast as f64);
                let u = self.track(2, d as u32, "fast", "fast share".into(), Some(parent));
                self.counter(now, u, share);
            }
            let u = self.track(2, d as u32, "active", "active vCPUs".into(), Some(parent));
            self.counter(now, u, s.active[d] as f64);
        }
        self.last_fast_ns.copy_from_slice(s.fast_ns);
        for (name, v) in s.counters {
            let u = self.track(3, 0, name, format!("dispatcher.{name}"), None);
            self.counter(now, u, *v);
        }
        let u = self.track(3, 0, "placer", "placer.affinity_changes".into(), None);
        self.counter(now, u, s.placer_changes as f64);
        self.last_sample = now;
        if self.w.len() >= STREAM_CHUNK_BYTES {
            self.sink.put(self.w.take_completed());
        }
    }

    /// The sampling period.
    pub(crate) fn period(&self) -> Nanos {
        self.opts.sample_period
    }

    /// Flush every CPU's events and hand the rest of the trace to the sink.
    pub(crate) fn finish(self) {
        self.sink.put(self.w.finish());
    }
}
