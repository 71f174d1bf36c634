//! New processes of a launched job, learnt the moment they are forked, not at
//! the next discovery rescan (every 500 ms): a job of a few hundred
//! milliseconds (`make -j2`, `sh -c "xz …"`) otherwise runs most of its life
//! unmanaged, and a child forked from a thread the agent had narrowed runs
//! with that narrowed mask until found.
//!
//! Source: the kernel's side-band task records, as `perf record` follows a
//! workload's new tasks: a software `PERF_COUNT_SW_DUMMY` event on the job's
//! first process (`pid` = its pid), one per CPU (`perf_mmap` refuses the
//! ring of an inherited event with `cpu = -1`), that counts nothing, with
//! `task = 1` (a `PERF_RECORD_FORK` / `PERF_RECORD_EXIT` record per task
//! created or ended) and `inherit = 1`: every task the job creates, thread
//! or process, at any depth, gets a copy of the event at `fork`
//! (kernel/events/core.c `perf_event_init_task` → `inherit_event`), and a
//! copy's records go to the original's ring (`perf_output_begin` writes an
//! inherited event's output through its parent). `perf_event_fork` emits the
//! record in `copy_process`, before the child first runs. The agent drains
//! the rings at the start of each period and, when a new process is among
//! the records, rescans the job's descendants in that period, so a process
//! is managed from the first period after its fork (≤ 30 ms) rather than
//! from the next rescan (≤ 500 ms).
//!
//! A fresh task's inherited mask is undone the moment its record is read,
//! not at the next period. Linux gives a new task its parent's affinity:
//! `copy_process` → `dup_task_struct` copies the whole `task_struct`, so
//! `cpus_mask` too, and `sched_fork` → `__set_task_cpu` plus
//! `wake_up_new_task` → `select_task_rq` place the child within it. When the
//! agent had narrowed the forking thread (the placer's decision for *that*
//! thread, from its own past run time), every compiler `make` or `cc` forks
//! during that narrowing starts confined to the slow CPU, a decision nobody
//! took for it, and runs there until the next period finds it (up to 30 ms
//! of a 50-100 ms `cc1`). So each ring wakes the agent on every record
//! (`watermark = 1`, `wakeup_watermark = 1` byte: the kernel's
//! `perf_output_put_handle` wakes the poller once the head passes the
//! watermark, and side-band records count only that way, `wakeup_events`
//! counting samples), and a task whose mask is one the agent applied in its
//! job (and not the job's own) gets the job's own mask back at once
//! ([`own_mask`]); the placer decides for it from its own run time like for
//! any thread. A wake-up per record costs a few µs of the loop's thread and
//! preempts a thread of the job (the loop runs at nice -20), so the rings are
//! polled only while some managed thread is narrowed (the control loop's
//! `narrowed`, updated with every change): otherwise no task can inherit one
//! of the agent's masks, and the records wait for the next period's drain
//! (the rescan). A job the agent leaves alone (a short one, or a `make`
//! whose processes are light: `ampsched_policy::gate::cooperate::free_light`)
//! costs no wake-ups.
//!
//! Attached right after the launch: whatever the job forked before (within
//! the exec of its first program) is found by the first period's rescan. A per-task software event needs only the
//! right to observe the job (the agent launched it: same user, or
//! `CAP_PERFMON`); where it is refused the 500 ms rescan stays the only way
//! and the reason is logged. Its fd and ring are the agent's: the kernel
//! drops them, and every inherited copy, on any exit path; closing a
//! software event waits for no grace period.

use crate::actuate::Actuator;
use crate::perfring::PerfRing;
use crate::runclock::{perf_event_open, PerfEventAttr};
use ampsched_model::CpuSet;
use std::io;

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_DUMMY: u64 = 9;
/// `perf_event_attr` flag bits: inherit (1), task (13), watermark (14).
const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_TASK: u64 = 1 << 13;
const FLAG_WATERMARK: u64 = 1 << 14;
const PERF_RECORD_FORK: u32 = 7;
/// Ring data pages (a power of two): 64 KiB per CPU holds ~2000 fork and exit records
/// between two drains (one period); an overrun only loses records, and the 500 ms rescan
/// stays.
const RING_PAGES: usize = 16;

/// A task created inside the job: `pid` (its process) forked by a thread of `ppid`;
/// `pid == ppid` for a new thread of an existing process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fork {
    /// Process of the new task.
    pub pid: i32,
    /// Process of the task that forked it.
    pub ppid: i32,
    /// The new task (thread id).
    pub tid: i32,
}

impl Fork {
    /// A new process (not a thread of the forking one).
    pub fn new_process(&self) -> bool {
        self.pid != self.ppid
    }
}

/// Parse a ring's records (one after another, as laid out): every `PERF_RECORD_FORK`
/// (`{header; u32 pid, ppid, tid, ptid; u64 time}`); other records are skipped by size.
pub fn parse_forks(bytes: &[u8], out: &mut Vec<Fork>) {
    let rd32 = |at: usize| bytes.get(at..at + 4).map(|s| u32::from_ne_bytes(s.try_into().unwrap()));
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let kind = rd32(at).unwrap_or(0);
        let size = u16::from_ne_bytes([bytes[at + 6], bytes[at + 7]]) as usize;
        if size < 8 || at + size > bytes.len() {
            return;
        }
        if kind == PERF_RECORD_FORK && size >= 24 {
            let (pid, ppid, tid) = (rd32(at + 8), rd32(at + 12), rd32(at + 16));
            if let (Some(pid), Some(ppid), Some(tid)) = (pid, ppid, tid) {
                out.push(Fork { pid: pid as i32, ppid: ppid as i32, tid: tid as i32 });
            }
        }
        at += size;
    }
}

/// The fork records of one launched job.
pub struct ForkWatch {
    rings: Vec<PerfRing>,
    buf: Vec<u8>,
}

impl ForkWatch {
    /// Follow the tasks process `pid` (and, from now on, everything it creates) forks, on
    /// each of `cpus` (Linux numbers: every online CPU). The error is the OS's
    /// (`EACCES`/`EPERM`: not allowed to observe it; `ESRCH`: gone).
    pub fn open(pid: i32, cpus: &[u32]) -> io::Result<ForkWatch> {
        let mut rings = Vec::new();
        for &cpu in cpus {
            let attr = PerfEventAttr {
                kind: PERF_TYPE_SOFTWARE,
                size: std::mem::size_of::<PerfEventAttr>() as u32,
                config: PERF_COUNT_SW_DUMMY,
                flags: FLAG_INHERIT | FLAG_TASK | FLAG_WATERMARK,
                // `wakeup_watermark` (a union with `wakeup_events`): readable after every record.
                wakeup_events: 1,
                ..Default::default()
            };
            let fd = perf_event_open(&attr, pid, cpu as i32)?;
            rings.push(PerfRing::map(fd, RING_PAGES)?);
        }
        Ok(ForkWatch { rings, buf: Vec::new() })
    }

    /// The rings' fds, for `poll` (readable once a record was written since the last poll).
    pub fn fds(&self) -> impl Iterator<Item = i32> + '_ {
        self.rings.iter().map(|r| r.fd())
    }

    /// Every fork recorded since the last call.
    pub fn drain(&mut self, out: &mut Vec<Fork>) {
        out.clear();
        for r in &self.rings {
            r.drain(&mut self.buf);
            parse_forks(&self.buf, out);
        }
    }
}

/// The mask a task created inside a job should run with, when `cur` (its mask, inherited at
/// fork) is not its own: `Some(base)` when `cur` is a mask the agent applied in the job
/// (`applied`, Linux masks) other than the job's own `base`; `None` when `cur` is the job's
/// own (never narrowed, or narrowed by the job itself) or `base` is unknown.
pub fn own_mask(applied: &[CpuSet], base: &CpuSet, cur: &CpuSet) -> Option<CpuSet> {
    (applied.contains(cur) && cur != base && !base.is_empty()).then_some(*base)
}

/// Give each task of `forks` created in a job with masks `applied` and own mask `base` its
/// own mask back where it inherited one of the agent's ([`own_mask`]); returns how many were
/// changed. A task gone already (ESRCH) or refused is left as it is: the next period's
/// inventory sees it like any thread.
pub fn free_forked(forks: &[Fork], applied: &[CpuSet], base: &CpuSet, act: &mut dyn Actuator) -> u64 {
    let mut n = 0;
    for f in forks {
        let Ok(cur) = act.get(f.tid) else { continue };
        if let Some(own) = own_mask(applied, base, &cur) {
            n += u64::from(act.set(f.tid, &own).is_ok());
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fork_record(pid: u32, ppid: u32, tid: u32) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&PERF_RECORD_FORK.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&32u16.to_ne_bytes());
        for v in [pid, ppid, tid, ppid] {
            r.extend_from_slice(&v.to_ne_bytes());
        }
        r.extend_from_slice(&123u64.to_ne_bytes());
        r
    }

    #[test]
    fn fork_records_are_parsed_and_exit_records_skipped() {
        // A process 200 forked by 100, an exit record (type 4, same layout), a thread 201 of 200.
        let mut b = fork_record(200, 100, 200);
        let mut exit = fork_record(200, 100, 200);
        exit[0..4].copy_from_slice(&4u32.to_ne_bytes());
        b.extend(exit);
        b.extend(fork_record(200, 200, 201));
        b.extend_from_slice(&[7, 0]);
        let mut out = Vec::new();
        parse_forks(&b, &mut out);
        assert_eq!(out, vec![Fork { pid: 200, ppid: 100, tid: 200 }, Fork { pid: 200, ppid: 200, tid: 201 }]);
        assert!(out[0].new_process() && !out[1].new_process());
    }

    /// `sh -c 'kill -STOP $$; SCRIPT'`, once it has stopped itself (state T in
    /// /proc/PID/stat; 30 s at most): every fork of SCRIPT comes after the caller resumes it.
    fn stopped_shell(script: &str) -> (std::process::Child, i32) {
        let c = std::process::Command::new("sh").args(["-c", &format!("kill -STOP $$; {script}")]).spawn().unwrap();
        let pid = c.id() as i32;
        let stopped = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit(')').next().map(|r| r.trim_start().starts_with('T')))
                .unwrap_or(false)
        };
        let t0 = std::time::Instant::now();
        while !stopped() && t0.elapsed() < std::time::Duration::from_secs(30) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        (c, pid)
    }

    #[test]
    fn a_grandchild_forked_by_a_launched_shell_is_seen_at_once() {
        // `sh -c 'sleep 0.2 & wait'` is stopped until the watch is attached (SIGSTOP'd by
        // itself through a first `kill -STOP $$`), so every fork after is recorded: the shell's
        // child (a new process whose parent is the shell) shows up in the ring.
        let (mut c, pid) = stopped_shell("sleep 0.2 & wait");
        let cpus: Vec<u32> = (0..std::thread::available_parallelism().map_or(1, |n| n.get()) as u32).collect();
        let mut w = match ForkWatch::open(pid, &cpus) {
            Ok(w) => w,
            Err(e) => {
                // SAFETY: resuming and ending our own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                c.wait().unwrap();
                // Only where perf events are refused outright (a container): say so.
                assert!(matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM | libc::ENOSYS)), "{e}");
                return;
            }
        };
        // SAFETY: resuming our own child.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        c.wait().unwrap();
        let mut out = Vec::new();
        w.drain(&mut out);
        assert!(out.iter().any(|f| f.new_process() && f.ppid == pid), "{out:?}");
    }
    #[test]
    fn a_task_forked_from_a_narrowed_thread_gets_its_jobs_own_mask_back() {
        // Worked example (2 CPUs, the job's own mask 0-1): the agent narrowed `cc` to the slow
        // CPU 1 (`applied` = [{1}], as apply.rs records it); `cc` forks `cc1`, which Linux gives
        // `cc`'s mask ({1}: `dup_task_struct` copies `cpus_mask`): that is the agent's, so `cc1`
        // gets 0-1. A child forked while `cc` was widened again (0-1) keeps it; one the job
        // itself pinned to CPU 0 (`taskset`, never applied by the agent) keeps {0}; a job whose
        // own mask is unknown (empty) is left alone.
        let both = CpuSet::parse_list("0-1").unwrap();
        let (slow, fast) = (CpuSet::parse_list("1").unwrap(), CpuSet::parse_list("0").unwrap());
        let applied = [slow];
        assert_eq!(own_mask(&applied, &both, &slow), Some(both));
        assert_eq!(own_mask(&applied, &both, &both), None);
        assert_eq!(own_mask(&applied, &both, &fast), None);
        assert_eq!(own_mask(&applied, &CpuSet::default(), &slow), None);
        // The job's own mask applied by the agent (a widening) is the job's own: kept.
        assert_eq!(own_mask(&[slow, both], &both, &both), None);
    }

    #[test]
    fn a_fork_wakes_the_poller_and_the_child_is_freed_at_once() {
        // A shell narrowed to one CPU (as the agent narrows a thread) forks `sleep`: the record
        // makes a ring readable (every record wakes the agent), and `free_forked` gives the
        // child the shell's own mask back while it sleeps, the shell keeping its narrowed one.
        use crate::actuate::{get_affinity, LinuxActuator};
        let me = get_affinity(0).unwrap();
        if me.len() < 2 {
            eprintln!("skipped: needs 2 CPUs in this process's affinity");
            return;
        }
        let narrow = CpuSet::single(me.iter().last().unwrap());
        let (mut c, pid) = stopped_shell("sleep 30 & wait");
        let mut act = LinuxActuator;
        act.set(pid, &narrow).unwrap();
        let cpus: Vec<u32> = (0..std::thread::available_parallelism().map_or(1, |n| n.get()) as u32).collect();
        let kill = |p: i32| {
            // SAFETY: ending our own child (or its child).
            unsafe { libc::kill(p, libc::SIGKILL) };
        };
        let mut w = match ForkWatch::open(pid, &cpus) {
            Ok(w) => w,
            Err(e) => {
                kill(pid);
                c.wait().unwrap();
                assert!(matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM | libc::ENOSYS)), "{e}");
                return;
            }
        };
        // SAFETY: resuming our own child.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        let mut fds: Vec<libc::pollfd> =
            w.fds().map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
        // SAFETY: a valid array of pollfds; 30 s at most (a loaded machine).
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 30_000) };
        let mut out = Vec::new();
        w.drain(&mut out);
        let child = out.iter().find(|f| f.new_process() && f.ppid == pid).map(|f| f.tid);
        let freed = free_forked(&out, &[narrow], &me, &mut act);
        let child_mask = child.map(get_affinity);
        if let Some(t) = child {
            kill(t);
        }
        kill(pid);
        c.wait().unwrap();
        assert!(n > 0, "no ring became readable: {out:?}");
        assert!(child.is_some(), "{out:?}");
        assert_eq!((freed, child_mask), (1, Some(Ok(me))));
    }
}
