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

#![warn(missing_docs)]

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

    /// Flush every CPU's ftrace events and hand over the trace written so far,
    /// keeping the writer's state: a long recording appends successive drains
    /// to one file (a trace is a concatenation of packets).
    pub fn drain(&mut self) -> Vec<u8> {
        for c in 0..self.bundles.len() {
            self.flush_cpu(c);
        }
        std::mem::take(&mut self.out)
    }

    /// Flush every CPU's ftrace events and return the trace bytes.
    pub fn finish(mut self) -> Vec<u8> {
        for c in 0..self.bundles.len() {
            self.flush_cpu(c);
        }
        self.out
    }
}

/// Reading traces back (what this crate writes; for tests and tools).
pub mod read {
    use super::fld;
    use std::collections::BTreeMap;

    /// A `sched_switch` event.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Switch {
        /// Timestamp, ns.
        pub ts: u64,
        /// CPU.
        pub cpu: u32,
        /// Thread leaving (0: idle).
        pub prev_tid: u32,
        /// Its state code (0 runnable, 1 sleeping, 16 dead).
        pub prev_state: i64,
        /// Thread entering (0: idle).
        pub next_tid: u32,
        /// Its name.
        pub next_comm: String,
    }

    /// A track descriptor.
    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct Track {
        /// Name (counter tracks), or the process/thread name.
        pub name: String,
        /// Parent track uuid.
        pub parent: Option<u64>,
        /// Process id (process and thread tracks).
        pub pid: Option<u32>,
        /// Thread id (thread tracks).
        pub tid: Option<u32>,
    }

    /// What a trace holds.
    #[derive(Clone, Debug, Default)]
    pub struct Trace {
        /// Packets.
        pub packets: usize,
        /// Processes of the process trees: (pid, name).
        pub processes: Vec<(u32, String)>,
        /// Threads of the process trees: (tid, tgid, name).
        pub threads: Vec<(u32, u32, String)>,
        /// Scheduling switches, in file order.
        pub switches: Vec<Switch>,
        /// `sched_waking` events: (ts, cpu, tid).
        pub wakings: Vec<(u64, u32, u32)>,
        /// CPU frequency events: (ts, cpu, kHz).
        pub frequencies: Vec<(u64, u32, u64)>,
        /// Track descriptors by uuid.
        pub tracks: BTreeMap<u64, Track>,
        /// Counter values by track uuid: (ts, value).
        pub counters: BTreeMap<u64, Vec<(u64, f64)>>,
    }

    impl Trace {
        /// Uuids of the counter tracks named `name`.
        pub fn tracks_named(&self, name: &str) -> Vec<u64> {
            self.tracks.iter().filter(|(_, t)| t.name == name).map(|(u, _)| *u).collect()
        }
    }

    #[derive(Clone, Debug)]
    enum V {
        Int(u64),
        Bytes(Vec<u8>),
        F64(f64),
    }

    fn varint(b: &[u8], i: &mut usize) -> Result<u64, String> {
        let (mut v, mut s) = (0u64, 0u32);
        loop {
            let x = *b.get(*i).ok_or("truncated varint")?;
            *i += 1;
            v |= ((x & 0x7f) as u64).checked_shl(s).unwrap_or(0);
            if x < 0x80 {
                return Ok(v);
            }
            s += 7;
            if s > 63 {
                return Err("varint too long".into());
            }
        }
    }

    fn fields(b: &[u8]) -> Result<Vec<(u32, V)>, String> {
        let mut i = 0;
        let mut out = Vec::new();
        while i < b.len() {
            let k = varint(b, &mut i)?;
            let f = (k >> 3) as u32;
            match k & 7 {
                0 => out.push((f, V::Int(varint(b, &mut i)?))),
                1 => {
                    let s = b.get(i..i + 8).ok_or("truncated fixed64")?;
                    out.push((f, V::F64(f64::from_le_bytes(s.try_into().expect("8 bytes")))));
                    i += 8;
                }
                2 => {
                    let n = varint(b, &mut i)? as usize;
                    let s = b.get(i..i + n).ok_or("truncated bytes")?;
                    out.push((f, V::Bytes(s.to_vec())));
                    i += n;
                }
                w => return Err(format!("wire type {w} at byte {i}")),
            }
        }
        Ok(out)
    }

    fn int(m: &[(u32, V)], f: u32) -> Option<u64> {
        m.iter().find_map(|(k, v)| match v {
            V::Int(x) if *k == f => Some(*x),
            _ => None,
        })
    }

    fn bytes(m: &[(u32, V)], f: u32) -> Option<&[u8]> {
        m.iter().find_map(|(k, v)| match v {
            V::Bytes(x) if *k == f => Some(x.as_slice()),
            _ => None,
        })
    }

    fn all(m: &[(u32, V)], f: u32) -> impl Iterator<Item = &[u8]> {
        m.iter().filter_map(move |(k, v)| match v {
            V::Bytes(x) if *k == f => Some(x.as_slice()),
            _ => None,
        })
    }

    fn text(m: &[(u32, V)], f: u32) -> String {
        bytes(m, f).map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default()
    }

    /// Decode a trace (a sequence of `TracePacket`s).
    pub fn read(b: &[u8]) -> Result<Trace, String> {
        let mut t = Trace::default();
        for (f, v) in fields(b)? {
            let V::Bytes(pkt) = v else { return Err(format!("top-level field {f} is not a packet")) };
            if f != fld::TRACE_PACKET {
                return Err(format!("top-level field {f} is not a packet"));
            }
            t.packets += 1;
            let p = fields(&pkt)?;
            let ts = int(&p, fld::P_TIMESTAMP).unwrap_or(0);
            if let Some(pt) = bytes(&p, fld::P_PROCESS_TREE) {
                let pt = fields(pt)?;
                for pr in all(&pt, fld::PT_PROCESSES) {
                    let pr = fields(pr)?;
                    t.processes.push((int(&pr, 1).unwrap_or(0) as u32, text(&pr, 3)));
                }
                for th in all(&pt, fld::PT_THREADS) {
                    let th = fields(th)?;
                    t.threads.push((int(&th, 1).unwrap_or(0) as u32, int(&th, 3).unwrap_or(0) as u32, text(&th, 2)));
                }
            }
            if let Some(bu) = bytes(&p, fld::P_FTRACE_EVENTS) {
                let bu = fields(bu)?;
                let cpu = int(&bu, fld::B_CPU).unwrap_or(0) as u32;
                for ev in all(&bu, fld::B_EVENT) {
                    let ev = fields(ev)?;
                    let ets = int(&ev, fld::E_TIMESTAMP).unwrap_or(0);
                    if let Some(sw) = bytes(&ev, fld::E_SCHED_SWITCH) {
                        let sw = fields(sw)?;
                        t.switches.push(Switch {
                            ts: ets,
                            cpu,
                            prev_tid: int(&sw, 2).unwrap_or(0) as u32,
                            prev_state: int(&sw, 4).unwrap_or(0) as i64,
                            next_tid: int(&sw, 6).unwrap_or(0) as u32,
                            next_comm: text(&sw, 5),
                        });
                    } else if let Some(w) = bytes(&ev, fld::E_SCHED_WAKING) {
                        let w = fields(w)?;
                        t.wakings.push((ets, cpu, int(&w, 2).unwrap_or(0) as u32));
                    } else if let Some(fr) = bytes(&ev, fld::E_CPU_FREQUENCY) {
                        let fr = fields(fr)?;
                        t.frequencies.push((ets, int(&fr, 2).unwrap_or(0) as u32, int(&fr, 1).unwrap_or(0)));
                    }
                }
            }
            if let Some(td) = bytes(&p, fld::P_TRACK_DESCRIPTOR) {
                let td = fields(td)?;
                let uuid = int(&td, fld::TD_UUID).ok_or("track descriptor without uuid")?;
                let mut tr =
                    Track { name: text(&td, fld::TD_NAME), parent: int(&td, fld::TD_PARENT), ..Track::default() };
                if let Some(pd) = bytes(&td, fld::TD_PROCESS) {
                    let pd = fields(pd)?;
                    tr.pid = int(&pd, 1).map(|x| x as u32);
                    tr.name = text(&pd, 6);
                }
                if let Some(thd) = bytes(&td, fld::TD_THREAD) {
                    let thd = fields(thd)?;
                    tr.pid = int(&thd, 1).map(|x| x as u32);
                    tr.tid = int(&thd, 2).map(|x| x as u32);
                    tr.name = text(&thd, 5);
                }
                t.tracks.insert(uuid, tr);
            }
            if let Some(te) = bytes(&p, fld::P_TRACK_EVENT) {
                let te = fields(te)?;
                let uuid = int(&te, fld::TE_TRACK_UUID).ok_or("track event without track")?;
                let v = te.iter().find_map(|(k, v)| match v {
                    V::F64(x) if *k == fld::TE_DOUBLE_COUNTER_VALUE => Some(*x),
                    _ => None,
                });
                if let Some(v) = v {
                    t.counters.entry(uuid).or_default().push((ts, v));
                }
            }
        }
        Ok(t)
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
    fn drains_concatenate_to_the_whole_trace() {
        let calls = |w: &mut TraceWriter, k: u64| {
            let th = ThreadRef { tid: 5, name: "t" };
            w.switch(k, 0, IDLE, PrevState::Runnable, th);
            w.switch(k + 1, 0, th, PrevState::Sleeping, IDLE);
        };
        let mut whole = TraceWriter::new(1);
        let mut parts = TraceWriter::new(1);
        let mut drained = Vec::new();
        for k in 0..3 {
            calls(&mut whole, 10 * k);
            calls(&mut parts, 10 * k);
            drained.extend(parts.drain());
        }
        drained.extend(parts.finish());
        let whole = whole.finish();
        // Bundles are cut at each drain, so the bytes differ, but the packets
        // carry the same six switches: 3 packets of 2 events vs 1 packet of 6.
        assert_eq!(fields(&drained).len(), 3);
        assert_eq!(fields(&whole).len(), 1);
        let events = |b: &[u8]| -> usize {
            fields(b).iter().map(|(_, _, p)| fields(&fields(p)[0].2).iter().filter(|(f, _, _)| *f == 2).count()).sum()
        };
        assert_eq!((events(&drained), events(&whole)), (6, 6));
    }

    #[test]
    fn the_reader_gets_back_what_was_written() {
        let mut w = TraceWriter::new(2);
        let (p, t) = w.processes(7, &[(1000, "vm0")], &[(1001, 1000, "vm0/v0")]);
        let th = ThreadRef { tid: 1001, name: "vm0/v0" };
        w.switch(10, 1, IDLE, PrevState::Runnable, th);
        w.waking(12, 0, th);
        w.switch(20, 1, th, PrevState::Dead, IDLE);
        w.frequency(5, 0, 1_500_000);
        let c = w.counter_track("credit", Some(t[0]));
        w.counter(30, c, -5.5);
        let r = read::read(&w.finish()).expect("decodes");
        assert_eq!(r.processes, vec![(1000, "vm0".to_string())]);
        assert_eq!(r.threads, vec![(1001, 1000, "vm0/v0".to_string())]);
        assert_eq!(r.switches.len(), 2);
        assert_eq!((r.switches[0].cpu, r.switches[0].next_tid, r.switches[0].next_comm.as_str()), (1, 1001, "vm0/v0"));
        assert_eq!((r.switches[1].prev_tid, r.switches[1].prev_state), (1001, 16));
        assert_eq!(r.wakings, vec![(12, 0, 1001)]);
        assert_eq!(r.frequencies, vec![(5, 0, 1_500_000)]);
        assert_eq!(r.tracks[&p[0]].pid, Some(1000));
        assert_eq!(r.tracks[&t[0]].tid, Some(1001));
        assert_eq!(r.tracks_named("credit"), vec![c]);
        assert_eq!(r.tracks[&c].parent, Some(t[0]));
        assert_eq!(r.counters[&c], vec![(30, -5.5)]);
        assert!(read::read(&[0x0a, 0x05, 0x01]).is_err(), "a truncated packet is an error");
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
