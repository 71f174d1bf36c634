//! Perfetto traces of a run (`ampsched sim … --trace FILE.perfetto-trace`).
//!
//! Design: a hand-written encoder of the few protobuf messages needed (no
//! protoc, no generated code), field numbers from Perfetto's
//! `protos/perfetto/trace/…`. The trace opens in ui.perfetto.dev and
//! `trace_processor` as a Linux system trace:
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
//! Units: timestamps are simulated nanoseconds from 0 (Perfetto's default
//! boot-time clock); frequencies are kHz as in the kernel's `cpu_frequency`.

use crate::engine::Sim;
use crate::results::RunResult;
use crate::runner::Job;
use crate::scenario::ScenarioError;
use ampsched_model::{CpuId, Nanos, TaskId};
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
/// Flush a CPU's ftrace bundle when it reaches this many bytes.
const BUNDLE_BYTES: usize = 32 * 1024;
/// The packet sequence of the track descriptors and counter values.
const SEQ_ID: u64 = 1;
/// `sched_switch` prev_state values (kernel task states as Perfetto reads them).
const STATE_RUNNABLE: u64 = 0;
const STATE_SLEEPING: u64 = 1;
const STATE_DEAD: u64 = 16;
/// Kernel priority of a SCHED_OTHER nice-0 thread.
const PRIO: u64 = 120;

// ---- protobuf wire format -------------------------------------------------

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, ((field as u64) << 3) | wire as u64);
}

fn f_varint(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 0);
    varint(out, v);
}

/// A signed int32/int64 field (two's complement varint, as protobuf `int64`).
fn f_int(out: &mut Vec<u8>, field: u32, v: i64) {
    f_varint(out, field, v as u64);
}

fn f_bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn f_double(out: &mut Vec<u8>, field: u32, v: f64) {
    key(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

/// Field numbers (Perfetto protos).
mod fld {
    pub const TRACE_PACKET: u32 = 1;
    // TracePacket
    pub const P_FTRACE_EVENTS: u32 = 1;
    pub const P_PROCESS_TREE: u32 = 2;
    pub const P_TIMESTAMP: u32 = 8;
    pub const P_SEQ_ID: u32 = 10;
    pub const P_TRACK_EVENT: u32 = 11;
    pub const P_SEQ_FLAGS: u32 = 13;
    pub const P_TRACK_DESCRIPTOR: u32 = 60;
    // FtraceEventBundle
    pub const B_CPU: u32 = 1;
    pub const B_EVENT: u32 = 2;
    // FtraceEvent
    pub const E_TIMESTAMP: u32 = 1;
    pub const E_PID: u32 = 2;
    pub const E_SCHED_SWITCH: u32 = 4;
    pub const E_CPU_FREQUENCY: u32 = 11;
    pub const E_SCHED_WAKING: u32 = 20;
    // ProcessTree
    pub const PT_PROCESSES: u32 = 1;
    pub const PT_THREADS: u32 = 2;
    // TrackDescriptor
    pub const TD_UUID: u32 = 1;
    pub const TD_NAME: u32 = 2;
    pub const TD_PROCESS: u32 = 3;
    pub const TD_THREAD: u32 = 4;
    pub const TD_PARENT: u32 = 5;
    pub const TD_COUNTER: u32 = 8;
    // TrackEvent
    pub const TE_TYPE: u32 = 9;
    pub const TE_TRACK_UUID: u32 = 11;
    pub const TE_DOUBLE_COUNTER_VALUE: u32 = 44;
    pub const TE_TYPE_COUNTER: u64 = 4;
}

const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;

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

/// Where a recorder leaves the finished trace (shared with `Sim::run_traced`).
#[derive(Clone, Default)]
pub(crate) struct TraceSink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl TraceSink {
    /// The bytes written so far (and clear).
    pub(crate) fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Records a run as a Perfetto trace (built by `Sim::run_traced`).
pub struct TraceRecorder {
    out: Vec<u8>,
    sink: TraceSink,
    /// Per CPU: encoded `FtraceEvent`s not yet flushed.
    bundles: Vec<Vec<u8>>,
    /// Per task: (tid, thread name).
    threads: Vec<(u32, String)>,
    /// Per domain: (pid, track uuid).
    procs: Vec<(u32, u64)>,
    /// Per task: thread track uuid.
    thread_uuid: Vec<u64>,
    /// Counter tracks by key, created on first use; value = uuid.
    tracks: std::collections::BTreeMap<(u8, u32, &'static str), u64>,
    next_uuid: u64,
    n_fast: u32,
    last_fast_ns: Vec<u64>,
    last_sample: Nanos,
    opts: TraceOptions,
    first_seq_packet: bool,
}

impl TraceRecorder {
    /// A recorder for a run of these domains and tasks on `ncpus` CPUs, `n_fast` of them fast.
    pub(crate) fn new(
        domains: &[DomainView],
        tasks: &[TaskView],
        ncpus: usize,
        n_fast: u32,
        opts: TraceOptions,
        sink: TraceSink,
    ) -> TraceRecorder {
        // pids: one per domain, then one tid per task (VM d's process has pid 1000·(d+1)).
        let mut r = TraceRecorder {
            out: Vec::new(),
            sink,
            bundles: vec![Vec::new(); ncpus],
            threads: Vec::new(),
            procs: Vec::new(),
            thread_uuid: Vec::new(),
            tracks: Default::default(),
            next_uuid: 1,
            n_fast,
            last_fast_ns: vec![0; domains.len()],
            last_sample: Nanos::ZERO,
            opts,
            first_seq_packet: true,
        };
        let mut next_pid = 1000u32;
        for _ in domains {
            let uuid = r.uuid();
            r.procs.push((next_pid, uuid));
            next_pid += 1;
        }
        for t in tasks {
            let name = format!("{}/v{}", domains[t.domain.idx()].name, t.vcpu);
            r.threads.push((next_pid, name));
            next_pid += 1;
            let uuid = r.uuid();
            r.thread_uuid.push(uuid);
        }
        // ProcessTree: VMs as processes, vCPUs as their threads.
        let mut pt = Vec::new();
        for (d, dv) in domains.iter().enumerate() {
            let mut p = Vec::new();
            f_int(&mut p, 1, r.procs[d].0 as i64); // pid
            f_int(&mut p, 2, 1); // ppid
            f_bytes(&mut p, 3, dv.name.as_bytes()); // cmdline
            f_bytes(&mut pt, fld::PT_PROCESSES, &p);
        }
        for (i, t) in tasks.iter().enumerate() {
            let mut th = Vec::new();
            f_int(&mut th, 1, r.threads[i].0 as i64); // tid
            f_bytes(&mut th, 2, r.threads[i].1.as_bytes()); // name
            f_int(&mut th, 3, r.procs[t.domain.idx()].0 as i64); // tgid
            f_bytes(&mut pt, fld::PT_THREADS, &th);
        }
        let mut pkt = Vec::new();
        f_varint(&mut pkt, fld::P_TIMESTAMP, 0);
        f_bytes(&mut pkt, fld::P_PROCESS_TREE, &pt);
        r.packet(&pkt);
        // Track descriptors for the same processes and threads (parents of counter tracks).
        for (d, dv) in domains.iter().enumerate() {
            let mut pd = Vec::new();
            f_int(&mut pd, 1, r.procs[d].0 as i64); // pid
            f_bytes(&mut pd, 6, dv.name.as_bytes()); // process_name
            let mut td = Vec::new();
            f_varint(&mut td, fld::TD_UUID, r.procs[d].1);
            f_bytes(&mut td, fld::TD_PROCESS, &pd);
            r.seq_packet(None, fld::P_TRACK_DESCRIPTOR, &td);
        }
        for (i, t) in tasks.iter().enumerate() {
            let mut thd = Vec::new();
            f_int(&mut thd, 1, r.procs[t.domain.idx()].0 as i64); // pid
            f_int(&mut thd, 2, r.threads[i].0 as i64); // tid
            f_bytes(&mut thd, 5, r.threads[i].1.as_bytes()); // thread_name
            let mut td = Vec::new();
            f_varint(&mut td, fld::TD_UUID, r.thread_uuid[i]);
            f_bytes(&mut td, fld::TD_THREAD, &thd);
            r.seq_packet(None, fld::P_TRACK_DESCRIPTOR, &td);
        }
        r
    }

    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid
    }

    /// Append one TracePacket (already encoded) to the trace.
    fn packet(&mut self, pkt: &[u8]) {
        f_bytes(&mut self.out, fld::TRACE_PACKET, pkt);
    }

    /// A packet on the counter sequence: `field` = `body`, at `ts` when given.
    fn seq_packet(&mut self, ts: Option<Nanos>, field: u32, body: &[u8]) {
        let mut pkt = Vec::new();
        if let Some(t) = ts {
            f_varint(&mut pkt, fld::P_TIMESTAMP, t.0);
        }
        f_bytes(&mut pkt, field, body);
        f_varint(&mut pkt, fld::P_SEQ_ID, SEQ_ID);
        let flags = if self.first_seq_packet { SEQ_INCREMENTAL_STATE_CLEARED } else { SEQ_NEEDS_INCREMENTAL_STATE };
        self.first_seq_packet = false;
        f_varint(&mut pkt, fld::P_SEQ_FLAGS, flags);
        self.packet(&pkt);
    }

    fn tid(&self, t: Option<TaskId>) -> (u32, &str) {
        match t {
            Some(t) => (self.threads[t.idx()].0, self.threads[t.idx()].1.as_str()),
            None => (0, "swapper"),
        }
    }

    fn ftrace(&mut self, now: Nanos, cpu: CpuId, pid: u32, field: u32, body: &[u8]) {
        let mut ev = Vec::new();
        f_varint(&mut ev, fld::E_TIMESTAMP, now.0);
        f_varint(&mut ev, fld::E_PID, pid as u64);
        f_bytes(&mut ev, field, body);
        let b = &mut self.bundles[cpu.idx()];
        f_bytes(b, fld::B_EVENT, &ev);
        if b.len() >= BUNDLE_BYTES {
            self.flush_cpu(cpu.idx());
        }
    }

    fn flush_cpu(&mut self, c: usize) {
        if self.bundles[c].is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.bundles[c]);
        let mut b = Vec::with_capacity(events.len() + 8);
        f_varint(&mut b, fld::B_CPU, c as u64);
        b.extend_from_slice(&events);
        let mut pkt = Vec::new();
        f_bytes(&mut pkt, fld::P_FTRACE_EVENTS, &b);
        self.packet(&pkt);
    }

    /// CPU `cpu` switches from `prev` (left in state: runnable, blocked or done) to `next`.
    pub(crate) fn switch(
        &mut self,
        now: Nanos,
        cpu: CpuId,
        prev: Option<TaskId>,
        prev_state: u8,
        next: Option<TaskId>,
    ) {
        let (ppid, pname) = self.tid(prev);
        let (npid, nname) = self.tid(next);
        let mut sw = Vec::new();
        f_bytes(&mut sw, 1, pname.as_bytes()); // prev_comm
        f_int(&mut sw, 2, ppid as i64); // prev_pid
        f_int(&mut sw, 3, PRIO as i64); // prev_prio
        let state = match (prev, prev_state) {
            (None, _) | (_, 0) => STATE_RUNNABLE,
            (_, 1) => STATE_SLEEPING,
            _ => STATE_DEAD,
        };
        f_int(&mut sw, 4, state as i64); // prev_state
        f_bytes(&mut sw, 5, nname.as_bytes()); // next_comm
        f_int(&mut sw, 6, npid as i64); // next_pid
        f_int(&mut sw, 7, PRIO as i64); // next_prio
        self.ftrace(now, cpu, ppid, fld::E_SCHED_SWITCH, &sw);
    }

    /// Task `t` became runnable (recorded on CPU `cpu`'s bundle).
    pub(crate) fn waking(&mut self, now: Nanos, cpu: CpuId, t: TaskId) {
        let (pid, name) = self.tid(Some(t));
        let mut w = Vec::new();
        f_bytes(&mut w, 1, name.as_bytes()); // comm
        f_int(&mut w, 2, pid as i64); // pid
        f_int(&mut w, 3, PRIO as i64); // prio
        f_int(&mut w, 4, 1); // success
        f_int(&mut w, 5, cpu.0 as i64); // target_cpu
        self.ftrace(now, cpu, 0, fld::E_SCHED_WAKING, &w);
    }

    /// CPU `cpu` now runs at effective speed `speed` (× 1 GHz).
    pub(crate) fn frequency(&mut self, now: Nanos, cpu: CpuId, speed: f64) {
        let mut f = Vec::new();
        f_varint(&mut f, 1, (speed * KHZ_PER_SPEED).round().max(0.0) as u64); // state, kHz
        f_varint(&mut f, 2, cpu.0 as u64); // cpu_id
        self.ftrace(now, cpu, 0, fld::E_CPU_FREQUENCY, &f);
    }

    /// The counter track for `(kind, index, name)`, created under `parent` on first use.
    fn track(&mut self, kind: u8, index: u32, name: &'static str, title: String, parent: Option<u64>) -> u64 {
        if let Some(u) = self.tracks.get(&(kind, index, name)) {
            return *u;
        }
        let uuid = self.uuid();
        self.tracks.insert((kind, index, name), uuid);
        let mut td = Vec::new();
        f_varint(&mut td, fld::TD_UUID, uuid);
        if let Some(p) = parent {
            f_varint(&mut td, fld::TD_PARENT, p);
        }
        f_bytes(&mut td, fld::TD_NAME, title.as_bytes());
        f_bytes(&mut td, fld::TD_COUNTER, &[]);
        self.seq_packet(None, fld::P_TRACK_DESCRIPTOR, &td);
        uuid
    }

    fn counter(&mut self, now: Nanos, uuid: u64, v: f64) {
        let mut te = Vec::new();
        f_varint(&mut te, fld::TE_TYPE, fld::TE_TYPE_COUNTER);
        f_varint(&mut te, fld::TE_TRACK_UUID, uuid);
        f_double(&mut te, fld::TE_DOUBLE_COUNTER_VALUE, v);
        self.seq_packet(Some(now), fld::P_TRACK_EVENT, &te);
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
    }

    /// The sampling period.
    pub(crate) fn period(&self) -> Nanos {
        self.opts.sample_period
    }

    /// Flush every CPU's events and hand the trace bytes to the sink.
    pub(crate) fn finish(mut self) {
        for c in 0..self.bundles.len() {
            self.flush_cpu(c);
        }
        *self.sink.0.lock().unwrap_or_else(|e| e.into_inner()) = std::mem::take(&mut self.out);
    }
}

/// Run one job with a trace: its results (equal to an untraced run's) and the trace bytes.
pub fn run_traced(job: &Job, opts: TraceOptions) -> Result<(RunResult, Vec<u8>), ScenarioError> {
    if opts.sample_period.0 == 0 {
        return Err(ScenarioError {
            file: job.scenario.file.clone(),
            line: None,
            col: None,
            path: String::new(),
            msg: "the trace sampling period must be > 0".into(),
        });
    }
    let cfg = job.scenario.config(job.seed, job.dispatcher.as_ref(), job.placer.as_ref())?;
    Ok(Sim::new(cfg).run_traced(opts))
}
