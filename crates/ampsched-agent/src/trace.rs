//! A Perfetto trace of the agent's real decisions (`ampsched run|agent --trace FILE`),
//! written with the same encoder and in the same shape as the simulator's
//! traces (`ampsched-perfetto`), so a simulated run and a real one open side by
//! side in ui.perfetto.dev.
//!
//! What it holds, sampled once per control period:
//! - targets as processes and managed threads as their threads (real pids and
//!   tids; a QEMU vCPU thread is named `<guest>/v<n>`);
//! - per-CPU scheduling tracks (ftrace `sched_switch`): on each CPU, the managed
//!   thread that ran there longest during the period, idle when none ran. This is
//!   the agent's view at period granularity (it reads `/proc`, not the kernel's
//!   switches), enough to see where the placer put whom;
//! - each CPU's effective capacity (capacity less interrupt, steal and real-time
//!   load) as its CPU frequency track, 1024 = 1.024 GHz;
//! - counter tracks: per target its share of the fast CPUs' time in the period
//!   (`fast share`; estimated as the agent accounts it: a thread's run time in
//!   a period is charged to the class of the CPU it was last seen on, or of its
//!   mask, so a period in which the fast CPU changed hands can read a few %
//!   above 1 or below), its active threads and `hands-off` (0 = the agent's
//!   placement in force, 1 = left to the kernel: a probe window, 2 = backed
//!   off, see `ampsched_policy::gate::backoff`); per managed thread the fast share of
//!   the affinity mask the agent gave it (`mask fast`: 1 = fast CPUs only,
//!   0 = slow CPUs only; a step at every decision); the agent's cumulative
//!   affinity changes (`agent.affinity_changes`).
//!
//! Timestamps are `CLOCK_BOOTTIME` nanoseconds, Perfetto's default clock, so the
//! trace lines up with a kernel trace of the same machine taken meanwhile. The
//! file is appended to every second (`FLUSH_EVERY`) so a daemon's trace survives
//! a crash up to the last flush and memory stays bounded.

use crate::AgentError;
use ampsched_perfetto::{PrevState, ThreadRef, TraceWriter, IDLE};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// How often the trace is appended to its file, ns of trace time.
pub const FLUSH_EVERY: u64 = 1_000_000_000;

/// `CLOCK_BOOTTIME` now, ns (Perfetto's default trace clock).
pub fn boottime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

struct ThreadInfo {
    name: String,
    pid: i32,
    mask_track: Option<u64>,
    track: u64,
}

struct ProcInfo {
    fast_track: u64,
    active_track: u64,
    hands_track: u64,
}

/// One period as the agent saw it.
pub struct PeriodSample<'a> {
    /// Per CPU: the managed thread that ran there longest in the period, if any.
    pub on_cpu: &'a [Option<i32>],
    /// Managed threads runnable or running at the end of the period.
    pub runnable: &'a dyn Fn(i32) -> bool,
    /// Per CPU: effective capacity (1024 = a full CPU of the reference class).
    pub capacity: &'a [f64],
    /// Per target process: (pid, share of the fast CPUs' time in the period, active threads,
    /// hands-off: 0 managed, 1 probe window, 2 backed off).
    pub targets: &'a [(i32, f64, u32, u8)],
    /// Affinity changes made so far.
    pub changes_total: u64,
}

/// Records the agent's decisions as a Perfetto trace file.
pub struct AgentTrace {
    w: TraceWriter,
    path: PathBuf,
    file: std::fs::File,
    threads: BTreeMap<i32, ThreadInfo>,
    procs: BTreeMap<i32, ProcInfo>,
    on_cpu: Vec<Option<i32>>,
    khz: Vec<u64>,
    changes_track: u64,
    last_flush: u64,
}

impl AgentTrace {
    /// Create (truncate) `path` for a trace of a machine with `ncpus` CPUs.
    pub fn create(path: &Path, ncpus: usize) -> Result<AgentTrace, AgentError> {
        let file = std::fs::File::create(path)
            .map_err(|e| AgentError::new(format!("--trace {}: cannot create the file: {e}", path.display())))?;
        let mut w = TraceWriter::new(ncpus);
        let changes_track = w.counter_track("agent.affinity_changes", None);
        Ok(AgentTrace {
            w,
            path: path.to_path_buf(),
            file,
            threads: BTreeMap::new(),
            procs: BTreeMap::new(),
            on_cpu: vec![None; ncpus],
            khz: vec![0; ncpus],
            changes_track,
            last_flush: 0,
        })
    }

    /// A target process comes under management.
    pub fn add_process(&mut self, ts: u64, pid: i32, name: &str) {
        if self.procs.contains_key(&pid) {
            return;
        }
        let (pu, _) = self.w.processes(ts, &[(pid as u32, name)], &[]);
        let fast_track = self.w.counter_track("fast share", Some(pu[0]));
        let active_track = self.w.counter_track("active threads", Some(pu[0]));
        let hands_track = self.w.counter_track("hands-off", Some(pu[0]));
        self.procs.insert(pid, ProcInfo { fast_track, active_track, hands_track });
    }

    /// A thread of process `pid` comes under management.
    pub fn add_thread(&mut self, ts: u64, pid: i32, tid: i32, name: &str) {
        if self.threads.contains_key(&tid) {
            return;
        }
        let (_, tu) = self.w.processes(ts, &[], &[(tid as u32, pid as u32, name)]);
        self.threads.insert(tid, ThreadInfo { name: name.to_string(), pid, mask_track: None, track: tu[0] });
    }

    /// A managed thread is gone (exited or no longer managed).
    pub fn remove_thread(&mut self, ts: u64, tid: i32) {
        for c in 0..self.on_cpu.len() {
            if self.on_cpu[c] == Some(tid) {
                self.switch(ts, c, None, PrevState::Dead);
            }
        }
        self.threads.remove(&tid);
    }

    /// The agent set `tid`'s affinity to a mask whose fast share is `fast` (0..1).
    pub fn affinity(&mut self, ts: u64, tid: i32, fast: f64) {
        let Some(th) = self.threads.get_mut(&tid) else { return };
        let track = match th.mask_track {
            Some(u) => u,
            None => {
                let parent = th.track;
                let u = self.w.counter_track("mask fast", Some(parent));
                self.threads.get_mut(&tid).expect("present").mask_track = Some(u);
                u
            }
        };
        self.w.counter(ts, track, fast);
    }

    fn switch(&mut self, ts: u64, cpu: usize, next: Option<i32>, prev_state: PrevState) {
        let prev = self.on_cpu[cpu];
        if prev == next {
            return;
        }
        let name = |t: Option<i32>| -> ThreadRef<'_> {
            match t.and_then(|t| self.threads.get(&t).map(|i| (t, i))) {
                Some((t, i)) => ThreadRef { tid: t as u32, name: i.name.as_str() },
                None => IDLE,
            }
        };
        let (p, n) = (name(prev), name(next));
        // Borrow the names while writing: copy the two short strings.
        let (p, n) = ((p.tid, p.name.to_string()), (n.tid, n.name.to_string()));
        self.w.switch(ts, cpu, ThreadRef { tid: p.0, name: &p.1 }, prev_state, ThreadRef { tid: n.0, name: &n.1 });
        self.on_cpu[cpu] = next;
    }

    /// Record one control period ending at `ts`; append to the file every `FLUSH_EVERY`.
    pub fn period(&mut self, ts: u64, s: &PeriodSample) -> Result<(), AgentError> {
        for c in 0..self.on_cpu.len() {
            let next = s.on_cpu.get(c).copied().flatten().filter(|t| self.threads.contains_key(t));
            let prev_state = match self.on_cpu[c] {
                Some(p) if (s.runnable)(p) => PrevState::Runnable,
                _ => PrevState::Sleeping,
            };
            self.switch(ts, c, next, prev_state);
            let khz = (s.capacity.get(c).copied().unwrap_or(0.0).max(0.0) * 1000.0).round() as u64;
            if khz != self.khz[c] {
                self.w.frequency(ts, c, khz);
                self.khz[c] = khz;
            }
        }
        for &(pid, fast, active, hands) in s.targets {
            if let Some(p) = self.procs.get(&pid) {
                let (f, a, h) = (p.fast_track, p.active_track, p.hands_track);
                self.w.counter(ts, f, fast);
                self.w.counter(ts, a, active as f64);
                self.w.counter(ts, h, hands as f64);
            }
        }
        self.w.counter(ts, self.changes_track, s.changes_total as f64);
        if ts.saturating_sub(self.last_flush) >= FLUSH_EVERY {
            self.last_flush = ts;
            self.flush()?;
        }
        Ok(())
    }

    /// The agent's change count at `ts` (at exit: changes made after the last
    /// period, e.g. a reaction to an idle fast CPU, count too).
    pub fn changes(&mut self, ts: u64, total: u64) {
        self.w.counter(ts, self.changes_track, total as f64);
    }

    /// Append what is recorded so far to the file.
    pub fn flush(&mut self) -> Result<(), AgentError> {
        let bytes = self.w.drain();
        self.file
            .write_all(&bytes)
            .and_then(|_| self.file.flush())
            .map_err(|e| AgentError::new(format!("--trace {}: cannot write: {e}", self.path.display())))
    }

    /// Threads known to the trace (for tests and the closing summary).
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Process of a managed thread, if known.
    pub fn pid_of(&self, tid: i32) -> Option<i32> {
        self.threads.get(&tid).map(|t| t.pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_trace_lands_in_the_file_with_switches_and_counters() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.perfetto-trace");
        let mut tr = AgentTrace::create(&path, 2).expect("create");
        tr.add_process(100, 40, "job");
        tr.add_thread(100, 40, 41, "job/0");
        tr.add_thread(100, 40, 42, "job/1");
        tr.affinity(110, 41, 1.0);
        let all = |_t: i32| true;
        // Period 1: 41 on CPU 0, 42 on CPU 1; period 2: swapped; then 42 exits.
        tr.period(
            30_000_000,
            &PeriodSample {
                on_cpu: &[Some(41), Some(42)],
                runnable: &all,
                capacity: &[1024.0, 512.0],
                targets: &[(40, 1.0, 2, 0)],
                changes_total: 1,
            },
        )
        .expect("period");
        tr.period(
            60_000_000,
            &PeriodSample {
                on_cpu: &[Some(42), Some(41)],
                runnable: &all,
                capacity: &[1024.0, 512.0],
                targets: &[(40, 1.0, 2, 2)],
                changes_total: 2,
            },
        )
        .expect("period");
        tr.remove_thread(70_000_000, 42);
        assert_eq!(tr.threads(), 1);
        assert_eq!(tr.pid_of(41), Some(40));
        tr.flush().expect("flush");
        let r = ampsched_perfetto::read::read(&std::fs::read(&path).expect("read")).expect("decodes");
        assert_eq!(r.processes, vec![(40, "job".to_string())]);
        assert_eq!(r.threads.len(), 2);
        // Period 1: idle→41 on CPU 0, idle→42 on CPU 1; period 2: 41→42 on CPU 0 and
        // 42→41 on CPU 1 (both runnable: state 0); the exit: 42 leaves CPU 0 dead (16).
        let sw: Vec<(u64, u32, u32, i64, u32)> =
            r.switches.iter().map(|s| (s.ts, s.cpu, s.prev_tid, s.prev_state, s.next_tid)).collect();
        let mut want = vec![
            (30_000_000, 0, 0, 0, 41),
            (30_000_000, 1, 0, 0, 42),
            (60_000_000, 0, 41, 0, 42),
            (60_000_000, 1, 42, 0, 41),
            (70_000_000, 0, 42, 16, 0),
        ];
        let mut got = sw.clone();
        got.sort();
        want.sort();
        assert_eq!(got, want);
        // Capacities 1024 and 512 → 1 024 000 and 512 000 kHz, written once each.
        let mut f: Vec<(u32, u64)> = r.frequencies.iter().map(|x| (x.1, x.2)).collect();
        f.sort();
        assert_eq!(f, vec![(0, 1_024_000), (1, 512_000)]);
        let mask = r.tracks_named("mask fast");
        assert_eq!(mask.len(), 1);
        assert_eq!(r.counters[&mask[0]], vec![(110, 1.0)]);
        let ch = r.tracks_named("agent.affinity_changes");
        assert_eq!(r.counters[&ch[0]].iter().map(|x| x.1).collect::<Vec<_>>(), vec![1.0, 2.0]);
        assert_eq!(r.tracks_named("fast share").len(), 1);
        // Managed in period 1, backed off in period 2.
        let h = r.tracks_named("hands-off");
        assert_eq!(r.counters[&h[0]], vec![(30_000_000, 0.0), (60_000_000, 2.0)]);
    }

    #[test]
    fn an_unwritable_path_is_a_clear_error() {
        let e = AgentTrace::create(Path::new("/nonexistent-dir/x.perfetto-trace"), 1).err().expect("error");
        assert!(e.msg.contains("--trace /nonexistent-dir/x.perfetto-trace"), "{}", e.msg);
    }
}
