//! A small writer of Perfetto protobuf traces, shared by the simulator
//! (`ampsched sim … --trace`) and the real agent (`ampsched run|agent --trace`),
//! so both traces have the same shape and open the same way in
//! ui.perfetto.dev and `trace_processor`.
//!
//! Design: a hand-written encoder of the few protobuf messages needed (no
//! protoc, no generated code); field numbers from Perfetto's
//! `protos/perfetto/trace/…`. What a trace may hold:
//! - processes and threads: a `ProcessTree` packet plus `TrackDescriptor`s
//!   with `ProcessDescriptor`/`ThreadDescriptor` (parents of counter tracks);
//! - per-CPU ftrace `FtraceEventBundle`s of `sched_switch`, `sched_waking`
//!   and `cpu_frequency` events, so Perfetto builds its native CPU
//!   scheduling tracks, thread-state tables and CPU frequency tracks;
//! - counter tracks (`TrackEvent` counters on one packet sequence).
//!
//! Units: timestamps in nanoseconds of the caller's clock (the simulator's
//! time from 0; the agent's `CLOCK_BOOTTIME`, Perfetto's default clock);
//! frequencies in kHz as in the kernel's `cpu_frequency` event. The output is
//! a pure function of the calls made: same calls, byte-identical trace.

/// Flush a CPU's ftrace bundle when it reaches this many bytes.
const BUNDLE_BYTES: usize = 32 * 1024;
/// The packet sequence of the track descriptors and counter values.
const SEQ_ID: u64 = 1;
/// Kernel priority of a SCHED_OTHER nice-0 thread.
const PRIO: i64 = 120;

/// How a thread left the CPU in a `sched_switch` (the kernel's `prev_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrevState {
    /// Preempted, still runnable (`R`).
    Runnable,
    /// Blocked (`S`).
    Sleeping,
    /// Exited (`X`).
    Dead,
}

impl PrevState {
    fn code(self) -> i64 {
        match self {
            PrevState::Runnable => 0,
            PrevState::Sleeping => 1,
            PrevState::Dead => 16,
        }
    }
}

/// A thread as the trace names it: its id and its name (`comm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadRef<'a> {
    /// Thread id (0 is the idle "swapper").
    pub tid: u32,
    /// Thread name.
    pub name: &'a str,
}

/// The idle thread of a CPU.
pub const IDLE: ThreadRef<'static> = ThreadRef { tid: 0, name: "swapper" };

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

/// Builds one Perfetto trace in memory.
pub struct TraceWriter {
    out: Vec<u8>,
    /// Per CPU: encoded `FtraceEvent`s not yet flushed.
    bundles: Vec<Vec<u8>>,
    next_uuid: u64,
    first_seq_packet: bool,
}

impl TraceWriter {
    /// An empty trace of a machine with `ncpus` CPUs.
    pub fn new(ncpus: usize) -> TraceWriter {
        TraceWriter { out: Vec::new(), bundles: vec![Vec::new(); ncpus], next_uuid: 1, first_seq_packet: true }
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
    fn seq_packet(&mut self, ts: Option<u64>, field: u32, body: &[u8]) {
        let mut pkt = Vec::new();
        if let Some(t) = ts {
            f_varint(&mut pkt, fld::P_TIMESTAMP, t);
        }
        f_bytes(&mut pkt, field, body);
        f_varint(&mut pkt, fld::P_SEQ_ID, SEQ_ID);
        let flags = if self.first_seq_packet { SEQ_INCREMENTAL_STATE_CLEARED } else { SEQ_NEEDS_INCREMENTAL_STATE };
        self.first_seq_packet = false;
        f_varint(&mut pkt, fld::P_SEQ_FLAGS, flags);
        self.packet(&pkt);
    }

    /// Declare processes `(pid, name)` and threads `(tid, tgid, name)` at `ts`:
    /// a process tree packet and one track per process and per thread. Returns
    /// the track uuids (processes, then threads, in the order given), usable
    /// as parents of counter tracks.
    pub fn processes(&mut self, ts: u64, procs: &[(u32, &str)], threads: &[(u32, u32, &str)]) -> (Vec<u64>, Vec<u64>) {
        let mut pt = Vec::new();
        for &(pid, name) in procs {
            let mut p = Vec::new();
            f_int(&mut p, 1, pid as i64); // pid
            f_int(&mut p, 2, 1); // ppid
            f_bytes(&mut p, 3, name.as_bytes()); // cmdline
            f_bytes(&mut pt, fld::PT_PROCESSES, &p);
        }
        for &(tid, tgid, name) in threads {
            let mut th = Vec::new();
            f_int(&mut th, 1, tid as i64); // tid
            f_bytes(&mut th, 2, name.as_bytes()); // name
            f_int(&mut th, 3, tgid as i64); // tgid
            f_bytes(&mut pt, fld::PT_THREADS, &th);
        }
        let mut pkt = Vec::new();
        f_varint(&mut pkt, fld::P_TIMESTAMP, ts);
        f_bytes(&mut pkt, fld::P_PROCESS_TREE, &pt);
        self.packet(&pkt);
        let mut pu = Vec::with_capacity(procs.len());
        for &(pid, name) in procs {
            let uuid = self.uuid();
            let mut pd = Vec::new();
            f_int(&mut pd, 1, pid as i64); // pid
            f_bytes(&mut pd, 6, name.as_bytes()); // process_name
            let mut td = Vec::new();
            f_varint(&mut td, fld::TD_UUID, uuid);
            f_bytes(&mut td, fld::TD_PROCESS, &pd);
            self.seq_packet(None, fld::P_TRACK_DESCRIPTOR, &td);
            pu.push(uuid);
        }
        let mut tu = Vec::with_capacity(threads.len());
        for &(tid, tgid, name) in threads {
            let uuid = self.uuid();
            let mut thd = Vec::new();
            f_int(&mut thd, 1, tgid as i64); // pid
            f_int(&mut thd, 2, tid as i64); // tid
            f_bytes(&mut thd, 5, name.as_bytes()); // thread_name
            let mut td = Vec::new();
            f_varint(&mut td, fld::TD_UUID, uuid);
            f_bytes(&mut td, fld::TD_THREAD, &thd);
            self.seq_packet(None, fld::P_TRACK_DESCRIPTOR, &td);
            tu.push(uuid);
        }
        (pu, tu)
    }

    fn ftrace(&mut self, ts: u64, cpu: usize, pid: u32, field: u32, body: &[u8]) {
        let mut ev = Vec::new();
        f_varint(&mut ev, fld::E_TIMESTAMP, ts);
        f_varint(&mut ev, fld::E_PID, pid as u64);
        f_bytes(&mut ev, field, body);
        let b = &mut self.bundles[cpu];
        f_bytes(b, fld::B_EVENT, &ev);
        if b.len() >= BUNDLE_BYTES {
            self.flush_cpu(cpu);
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

    /// CPU `cpu` switches from `prev` (which leaves in `prev_state`) to `next`
    /// (an ftrace `sched_switch`).
    pub fn switch(&mut self, ts: u64, cpu: usize, prev: ThreadRef, prev_state: PrevState, next: ThreadRef) {
        let mut sw = Vec::new();
        f_bytes(&mut sw, 1, prev.name.as_bytes()); // prev_comm
        f_int(&mut sw, 2, prev.tid as i64); // prev_pid
        f_int(&mut sw, 3, PRIO); // prev_prio
        let state = if prev.tid == 0 { PrevState::Runnable } else { prev_state };
        f_int(&mut sw, 4, state.code()); // prev_state
        f_bytes(&mut sw, 5, next.name.as_bytes()); // next_comm
        f_int(&mut sw, 6, next.tid as i64); // next_pid
        f_int(&mut sw, 7, PRIO); // next_prio
        self.ftrace(ts, cpu, prev.tid, fld::E_SCHED_SWITCH, &sw);
    }

    /// Thread `t` became runnable, to run on `cpu` (an ftrace `sched_waking`).
    pub fn waking(&mut self, ts: u64, cpu: usize, t: ThreadRef) {
        let mut w = Vec::new();
        f_bytes(&mut w, 1, t.name.as_bytes()); // comm
        f_int(&mut w, 2, t.tid as i64); // pid
        f_int(&mut w, 3, PRIO); // prio
        f_int(&mut w, 4, 1); // success
        f_int(&mut w, 5, cpu as i64); // target_cpu
        self.ftrace(ts, cpu, 0, fld::E_SCHED_WAKING, &w);
    }

    /// CPU `cpu` now runs at `khz` (an ftrace `cpu_frequency`).
    pub fn frequency(&mut self, ts: u64, cpu: usize, khz: u64) {
        let mut f = Vec::new();
        f_varint(&mut f, 1, khz); // state, kHz
        f_varint(&mut f, 2, cpu as u64); // cpu_id
        self.ftrace(ts, cpu, 0, fld::E_CPU_FREQUENCY, &f);
    }

    /// A new counter track titled `title`, under the track `parent` (a
    /// process's or thread's) when given; returns its uuid.
    pub fn counter_track(&mut self, title: &str, parent: Option<u64>) -> u64 {
        let uuid = self.uuid();
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

    /// Counter track `uuid` has value `v` at `ts`.
    pub fn counter(&mut self, ts: u64, uuid: u64, v: f64) {
        let mut te = Vec::new();
        f_varint(&mut te, fld::TE_TYPE, fld::TE_TYPE_COUNTER);
        f_varint(&mut te, fld::TE_TRACK_UUID, uuid);
        f_double(&mut te, fld::TE_DOUBLE_COUNTER_VALUE, v);
        self.seq_packet(Some(ts), fld::P_TRACK_EVENT, &te);
    }

    /// Bytes of the trace so far, not counting unflushed ftrace events.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing has been written yet.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty() && self.bundles.iter().all(|b| b.is_empty())
    }

    /// Flush every CPU's ftrace events and return the trace bytes.
    pub fn finish(mut self) -> Vec<u8> {
        for c in 0..self.bundles.len() {
            self.flush_cpu(c);
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read a varint at `*i`.
    fn rd_varint(b: &[u8], i: &mut usize) -> u64 {
        let (mut v, mut s) = (0u64, 0);
        loop {
            let x = b[*i];
            *i += 1;
            v |= ((x & 0x7f) as u64) << s;
            if x < 0x80 {
                return v;
            }
            s += 7;
        }
    }

    /// Top-level fields of a message: (field, wire type, payload or value bytes).
    fn fields(b: &[u8]) -> Vec<(u32, u8, Vec<u8>)> {
        let mut i = 0;
        let mut out = Vec::new();
        while i < b.len() {
            let k = rd_varint(b, &mut i);
            let (f, w) = ((k >> 3) as u32, (k & 7) as u8);
            match w {
                0 => {
                    let v = rd_varint(b, &mut i);
                    out.push((f, w, v.to_le_bytes().to_vec()));
                }
                1 => {
                    out.push((f, w, b[i..i + 8].to_vec()));
                    i += 8;
                }
                2 => {
                    let n = rd_varint(b, &mut i) as usize;
                    out.push((f, w, b[i..i + n].to_vec()));
                    i += n;
                }
                _ => panic!("wire type {w}"),
            }
        }
        out
    }

    #[test]
    fn a_trace_is_a_list_of_packets_with_bundles_per_cpu() {
        let mut w = TraceWriter::new(2);
        let (p, t) = w.processes(0, &[(1000, "vm0")], &[(1001, 1000, "vm0/v0")]);
        assert_eq!((p.len(), t.len()), (1, 1));
        let th = ThreadRef { tid: 1001, name: "vm0/v0" };
        w.switch(10, 1, IDLE, PrevState::Runnable, th);
        w.switch(20, 1, th, PrevState::Sleeping, IDLE);
        w.frequency(0, 0, 2_000_000);
        let c = w.counter_track("credit", Some(t[0]));
        w.counter(30, c, -5.0);
        let bytes = w.finish();
        let packets = fields(&bytes);
        // Every top-level field is a TracePacket (field 1, length-delimited).
        assert!(packets.iter().all(|(f, w, _)| *f == 1 && *w == 2));
        // 1 process tree + 2 descriptors (process, thread) + 1 counter descriptor
        // + 1 counter value + 2 bundles (CPU 1's switches, CPU 0's frequency) = 7.
        assert_eq!(packets.len(), 7);
        let bundles: Vec<_> = packets.iter().filter(|(_, _, p)| fields(p).iter().any(|(f, _, _)| *f == 1)).collect();
        assert_eq!(bundles.len(), 2);
        // CPU 1's bundle holds two events.
        let b1 = bundles.iter().map(|(_, _, p)| fields(&fields(p)[0].2)).find(|b| b[0].2[0] == 1).expect("cpu 1");
        assert_eq!(b1.iter().filter(|(f, _, _)| *f == 2).count(), 2);
    }

    #[test]
    fn the_same_calls_give_the_same_bytes() {
        let run = || {
            let mut w = TraceWriter::new(1);
            w.processes(0, &[(7, "p")], &[(8, 7, "t")]);
            let u = w.counter_track("x", None);
            w.counter(5, u, 1.5);
            w.finish()
        };
        assert_eq!(run(), run());
    }
}
