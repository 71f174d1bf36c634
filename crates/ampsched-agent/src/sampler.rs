//! Per-CPU sampling: busy, idle and noise time per period, from `/proc/stat`
//! and the real-time tasks present.
//!
//! - `/proc/stat` gives cumulative per-CPU times in clock ticks (USER_HZ):
//!   busy = user + nice + system, idle = idle + iowait, and the kernel's own
//!   interrupt (irq), softirq and hypervisor steal time.
//! - Real-time tasks (SCHED_FIFO, SCHED_RR, SCHED_DEADLINE) outrank every
//!   normal thread, so their run time is capacity the managed threads cannot
//!   have. The sampler looks for them every [`RT_RESCAN`] (a scan of every
//!   thread's `stat`) and reads their `schedstat` run time each period,
//!   charging it to the CPU they are on (`stat` field 39); managed threads
//!   are never counted as noise.
//! - Noise = irq + softirq + steal + RT run time; busy excludes the RT part.
//!   Effective capacity = capacity × (1 − noise / (busy + idle + noise)).
//!
//! Units: nanoseconds (ticks × 10⁹ / USER_HZ). The tick quantum (10 ms at
//! USER_HZ 100) makes a single 30 ms period coarse; it evens out over periods.

use crate::procfs::{
    is_rt_policy, list_pids, list_tids, parse_proc_stat, parse_schedstat, parse_stat, read_task_stat, CpuTimes,
    ProcFile,
};
use crate::AgentError;
use ampsched_model::Nanos;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often all threads are scanned for real-time ones.
pub const RT_RESCAN: Duration = Duration::from_secs(2);

/// One CPU's figures over the last period (topology order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuFigures {
    /// Non-noise busy time.
    pub busy: Nanos,
    /// Idle time.
    pub idle: Nanos,
    /// irq + softirq + steal + real-time run time.
    pub noise: Nanos,
    /// The real-time part of `noise`.
    pub rt: Nanos,
}

impl CpuFigures {
    /// Fraction of the CPU left to normal threads (1 − noise share).
    pub fn capacity_share(&self) -> f64 {
        let total = (self.busy.0 + self.idle.0 + self.noise.0) as f64;
        if total <= 0.0 {
            1.0
        } else {
            1.0 - self.noise.0 as f64 / total
        }
    }
}

struct RtTask {
    stat: ProcFile,
    sched: ProcFile,
    last_run: u64,
    pinned: Option<u32>,
}

/// Samples per-CPU figures each period.
pub struct CpuSampler {
    proc_root: PathBuf,
    stat: ProcFile,
    tick_ns: u64,
    linux_ids: Vec<u32>,
    prev: Vec<Option<CpuTimes>>,
    rt: BTreeMap<i32, RtTask>,
    last_rt_scan: Option<Instant>,
    real_proc: bool,
    /// Calls of [`CpuSampler::sample`] so far.
    calls: u64,
}

impl CpuSampler {
    /// A sampler for the given Linux CPUs (topology order).
    pub fn new(proc_root: &Path, linux_ids: &[u32]) -> Result<CpuSampler, AgentError> {
        let p = proc_root.join("stat");
        let stat = ProcFile::open(&p).map_err(|e| AgentError::new(format!("{}: {e}", p.display())))?;
        Ok(CpuSampler {
            proc_root: proc_root.to_path_buf(),
            stat,
            tick_ns: 1_000_000_000 / crate::procfs::clock_ticks_per_sec(),
            linux_ids: linux_ids.to_vec(),
            prev: vec![None; linux_ids.len()],
            rt: BTreeMap::new(),
            last_rt_scan: None,
            real_proc: proc_root == Path::new("/proc"),
            calls: 0,
        })
    }

    /// Real-time threads currently tracked.
    pub fn rt_threads(&self) -> Vec<i32> {
        self.rt.keys().copied().collect()
    }

    fn rescan_rt(&mut self, managed: &dyn Fn(i32) -> bool) {
        let mut seen = HashSet::new();
        for pid in list_pids(&self.proc_root) {
            for tid in list_tids(&self.proc_root, pid) {
                if managed(tid) {
                    continue;
                }
                // The policy by system call (no file to open and format); `stat` field 41 when
                // sampling a fixture tree.
                let policy = if self.real_proc {
                    // SAFETY: no memory is passed.
                    let p = unsafe { libc::sched_getscheduler(tid) };
                    if p < 0 {
                        continue;
                    }
                    (p & !libc::SCHED_RESET_ON_FORK) as u32
                } else {
                    match read_task_stat(&self.proc_root, pid, tid) {
                        Some(st) => st.policy,
                        None => continue,
                    }
                };
                if !is_rt_policy(policy) {
                    continue;
                }
                seen.insert(tid);
                if self.rt.contains_key(&tid) {
                    continue;
                }
                let dir = self.proc_root.join(pid.to_string()).join("task").join(tid.to_string());
                let (Ok(stat), Ok(mut sched)) =
                    (ProcFile::open(&dir.join("stat")), ProcFile::open(&dir.join("schedstat")))
                else {
                    continue;
                };
                let last_run = sched.read().ok().and_then(parse_schedstat).map(|s| s.0).unwrap_or(0);
                // A thread allowed on one CPU only (per-CPU kernel threads, pinned hogs) needs no
                // `stat` to know where it ran.
                let pinned = if self.real_proc {
                    crate::actuate::get_affinity(tid).ok().filter(|m| m.len() == 1).and_then(|m| m.first())
                } else {
                    None
                }
                .map(|c| c.0);
                self.rt.insert(tid, RtTask { stat, sched, last_run, pinned });
            }
        }
        self.rt.retain(|t, _| seen.contains(t));
    }

    /// Figures since the previous call, per topology CPU (the first call returns zeros).
    /// `managed` tells the agent's own threads apart (never counted as noise).
    pub fn sample(&mut self, managed: &dyn Fn(i32) -> bool) -> Vec<CpuFigures> {
        let now = Instant::now();
        // Not at the first call, which only takes the baselines: a job that ends within its
        // first period (`ampsched run -- true`) never pays for a scan of every thread on the
        // machine; real-time noise is known from the third period on instead of the second.
        self.calls += 1;
        if self.calls > 1 && self.last_rt_scan.is_none_or(|t| now.duration_since(t) >= RT_RESCAN) {
            self.rescan_rt(managed);
            self.last_rt_scan = Some(now);
        }
        let n = self.linux_ids.len();
        let mut rt_ns = vec![0u64; n];
        let mut dead = Vec::new();
        for (tid, t) in self.rt.iter_mut() {
            let run = match t.sched.read().ok().and_then(parse_schedstat) {
                Some(s) => s.0,
                None => {
                    dead.push(*tid);
                    continue;
                }
            };
            let d = run.saturating_sub(t.last_run);
            t.last_run = run;
            if d == 0 {
                continue;
            }
            let cpu = t.pinned.or_else(|| t.stat.read().ok().and_then(parse_stat).map(|s| s.processor));
            if let Some(i) = cpu.and_then(|c| self.linux_ids.iter().position(|l| *l == c)) {
                rt_ns[i] += d;
            }
        }
        for t in dead {
            self.rt.remove(&t);
        }
        let times: Vec<(u32, CpuTimes)> = self.stat.read().map(parse_proc_stat).unwrap_or_default();
        let mut out = vec![CpuFigures::default(); n];
        for (i, l) in self.linux_ids.iter().enumerate() {
            let Some(cur) = times.iter().find(|(c, _)| c == l).map(|x| x.1) else { continue };
            if let Some(p) = self.prev[i] {
                let tk = |a: u64, b: u64| a.saturating_sub(b) * self.tick_ns;
                let busy = tk(cur.busy, p.busy);
                let kernel_noise = tk(cur.irq, p.irq) + tk(cur.softirq, p.softirq) + tk(cur.steal, p.steal);
                // RT run time is inside the tick-based busy time; never let it exceed it by more
                // than one tick of quantisation error.
                let rt = rt_ns[i].min(busy + self.tick_ns);
                out[i] = CpuFigures {
                    busy: Nanos(busy.saturating_sub(rt)),
                    idle: Nanos(tk(cur.idle, p.idle)),
                    noise: Nanos(kernel_noise + rt),
                    rt: Nanos(rt),
                };
            }
            self.prev[i] = Some(cur);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_from_a_fixture_proc_stat() {
        let d = tempfile::tempdir().unwrap();
        let w = |text: &str| std::fs::write(d.path().join("stat"), text).unwrap();
        w("cpu0 100 0 0 100 0 0 0 0\ncpu1 100 0 0 100 0 0 0 0\n");
        let mut s = CpuSampler::new(d.path(), &[0, 1]).unwrap();
        assert_eq!(s.sample(&|_| false), vec![CpuFigures::default(); 2]);
        // cpu0: +2 busy, +1 idle, +1 irq; cpu1: +3 idle, +1 steal (ticks).
        w("cpu0 101 0 1 101 0 1 0 0\ncpu1 100 0 0 102 1 0 0 1\n");
        let f = s.sample(&|_| false);
        let t = 1_000_000_000 / crate::procfs::clock_ticks_per_sec();
        assert_eq!(f[0], CpuFigures { busy: Nanos(2 * t), idle: Nanos(t), noise: Nanos(t), rt: Nanos(0) });
        assert_eq!(f[1], CpuFigures { busy: Nanos(0), idle: Nanos(3 * t), noise: Nanos(t), rt: Nanos(0) });
        // cpu0: 1 of 4 ticks is noise → 75 % capacity left.
        assert!((f[0].capacity_share() - 0.75).abs() < 1e-12);
    }
}
