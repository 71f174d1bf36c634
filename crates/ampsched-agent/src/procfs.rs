//! `/proc` parsing: pure functions over the text of `stat`, `schedstat` and
//! `/proc/stat`, and [`ProcFile`], a kept-open handle re-read with `pread` so
//! that sampling a thread every period costs one system call per file.
//!
//! `stat` and `schedstat` are parsed by the procfs crate's parsers
//! (`procfs-core`, the parsing half of the `procfs` project, fed the text of
//! a kept-open file). Kept by hand, where the crate does not fit:
//! - `/proc/stat`: `procfs_core::KernelStats` lists the per-CPU lines by
//!   position, dropping the CPU numbers, which the agent needs (an offline
//!   CPU has no line, shifting every later one);
//! - [`ProcFile`] and [`TaskDir`]: the crate opens and parses a file afresh
//!   at each call (`Process::stat`), with no kept-open re-read (`pread`) or
//!   thread count from one `fstat`, the two things that keep the agent's
//!   period within its budget;
//! - the directory listings ([`list_tids`], [`list_pids`]): the full `procfs`
//!   crate's `Process` opens a directory fd per process, twice the system
//!   calls of a plain `read_dir` for the real-time scan of every thread every
//!   2 s (`sampler`), and it would add a second version of `rustix`.
//!
//! Field numbers follow proc(5) (1-based): 3 state, 4 ppid, 14 utime,
//! 15 stime, 22 starttime, 39 processor, 41 policy.

use procfs_core::FromRead;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// A `/proc` file kept open and re-read from offset 0 on every [`ProcFile::read`].
pub struct ProcFile {
    file: File,
    buf: Vec<u8>,
}

impl ProcFile {
    /// Open `path` for repeated reads.
    pub fn open(path: &Path) -> io::Result<ProcFile> {
        Ok(ProcFile { file: File::open(path)?, buf: vec![0; 512] })
    }

    /// Read the whole file afresh. An empty result means the task is gone.
    ///
    /// One `pread` per call once the buffer has grown to the file's size: a
    /// `/proc` (seq_file) read returns everything that fits, so a short read
    /// is the end of the file. (Asking again at the end would cost a second
    /// system call for nothing; every period, for every thread.)
    pub fn read(&mut self) -> io::Result<&str> {
        let mut n = 0;
        loop {
            if n == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let want = self.buf.len() - n;
            let k = self.file.read_at(&mut self.buf[n..], n as u64)?;
            n += k;
            if k == 0 || k < want {
                break;
            }
        }
        if std::str::from_utf8(&self.buf[..n]).is_err() {
            // A thread name may hold any bytes; the fields we parse are ASCII.
            for b in &mut self.buf[..n] {
                if !b.is_ascii() {
                    *b = b'?';
                }
            }
        }
        Ok(std::str::from_utf8(&self.buf[..n]).unwrap_or(""))
    }
}

/// A process's `/proc/<pid>/task` directory kept open: its link count is 2 + the number
/// of threads, so one `fstat` per period tells whether the thread list changed (cheaper than
/// `stat`, which for a whole process walks every thread, and than listing the directory).
pub struct TaskDir {
    dir: File,
}

impl TaskDir {
    /// Open `/proc/<pid>/task` under `proc_root`.
    pub fn open(proc_root: &Path, pid: i32) -> io::Result<TaskDir> {
        Ok(TaskDir { dir: File::open(proc_root.join(pid.to_string()).join("task"))? })
    }

    /// Threads in the process now; 0 once it has been reaped (a zombie still counts its
    /// leader: 1).
    pub fn threads(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        self.dir.metadata().map(|m| m.nlink().saturating_sub(2)).unwrap_or(0)
    }
}

/// Scheduling policies as numbered by the kernel (`SCHED_FIFO` = 1 …).
pub const SCHED_FIFO: u32 = 1;
/// `SCHED_RR`.
pub const SCHED_RR: u32 = 2;
/// `SCHED_DEADLINE`.
pub const SCHED_DEADLINE: u32 = 6;

/// True for the real-time policies (FIFO, RR, DEADLINE), whose run time lowers other work's capacity.
pub fn is_rt_policy(policy: u32) -> bool {
    matches!(policy, SCHED_FIFO | SCHED_RR | SCHED_DEADLINE)
}

/// The fields of `/proc/<pid>/task/<tid>/stat` the agent uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskStat {
    /// Thread name (field 2, without parentheses).
    pub comm: String,
    /// State letter (R running or runnable, S, D, T, Z, …).
    pub state: char,
    /// Parent pid.
    pub ppid: i32,
    /// User time, clock ticks.
    pub utime: u64,
    /// System time, clock ticks.
    pub stime: u64,
    /// Threads in the process (field 20).
    pub num_threads: u32,
    /// Start time after boot, clock ticks (with the tid, identifies the thread across pid reuse).
    pub starttime: u64,
    /// CPU it runs on or last ran on.
    pub processor: u32,
    /// Scheduling policy number.
    pub policy: u32,
}

/// Parse a `stat` line (with the procfs crate's parser, `procfs_core::process::Stat`); `None`
/// when it is truncated or malformed.
pub fn parse_stat(s: &str) -> Option<TaskStat> {
    let st = procfs_core::process::Stat::from_read(s.as_bytes()).ok()?;
    Some(TaskStat {
        state: st.state,
        ppid: st.ppid,
        utime: st.utime,
        stime: st.stime,
        num_threads: u32::try_from(st.num_threads).ok()?,
        starttime: st.starttime,
        processor: u32::try_from(st.processor?).ok()?,
        policy: st.policy?,
        comm: st.comm,
    })
}

/// Parse `schedstat` (`procfs_core::process::Schedstat`): (run time ns, run-queue wait ns,
/// time slices).
pub fn parse_schedstat(s: &str) -> Option<(u64, u64, u64)> {
    let st = procfs_core::process::Schedstat::from_read(s.as_bytes()).ok()?;
    Some((st.sum_exec_runtime, st.run_delay, st.pcount))
}

/// One CPU's cumulative times from `/proc/stat`, in clock ticks (USER_HZ).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// user + nice + system (guest time is already inside user).
    pub busy: u64,
    /// idle + iowait.
    pub idle: u64,
    /// Hard interrupts.
    pub irq: u64,
    /// Soft interrupts.
    pub softirq: u64,
    /// Time stolen by the hypervisor.
    pub steal: u64,
}

/// Parse the per-CPU lines (`cpuN …`) of `/proc/stat` into (Linux CPU number, times).
pub fn parse_proc_stat(s: &str) -> Vec<(u32, CpuTimes)> {
    let mut out = Vec::new();
    for line in s.lines() {
        let Some(rest) = line.strip_prefix("cpu") else { continue };
        // "cpu " (the all-CPU total) is skipped: a CPU number follows "cpu" directly.
        if !rest.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let mut it = rest.split_ascii_whitespace();
        let Some(Ok(cpu)) = it.next().map(|n| n.parse::<u32>()) else { continue };
        let v: Vec<u64> = it.map(|x| x.parse().unwrap_or(0)).collect();
        let g = |i: usize| v.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal guest guest_nice
        out.push((
            cpu,
            CpuTimes { busy: g(0) + g(1) + g(2), idle: g(3) + g(4), irq: g(5), softirq: g(6), steal: g(7) },
        ));
    }
    out
}

/// Parse a QEMU vCPU thread name, `CPU n/KVM` or `CPU n/TCG` (QEMU run with
/// `-name …,debug-threads=on`), into the vCPU index.
pub fn parse_vcpu_thread_name(comm: &str) -> Option<u32> {
    let rest = comm.trim_end().strip_prefix("CPU ")?;
    let (n, accel) = rest.split_once('/')?;
    if accel != "KVM" && accel != "TCG" {
        return None;
    }
    n.parse().ok()
}

/// Clock ticks per second (USER_HZ) for `/proc/stat` and `stat` times.
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Thread ids of a process, from `/proc/<pid>/task`, ascending. Empty when the process is gone.
pub fn list_tids(proc_root: &Path, pid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = match std::fs::read_dir(proc_root.join(pid.to_string()).join("task")) {
        Ok(d) => d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort_unstable();
    v
}

/// Process ids under `/proc`, ascending.
pub fn list_pids(proc_root: &Path) -> Vec<i32> {
    let mut v: Vec<i32> = match std::fs::read_dir(proc_root) {
        Ok(d) => d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort_unstable();
    v
}

/// Direct children of a process: the union of `/proc/<pid>/task/<tid>/children` over its threads.
pub fn children(proc_root: &Path, pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for tid in list_tids(proc_root, pid) {
        let p = proc_root.join(pid.to_string()).join("task").join(tid.to_string()).join("children");
        if let Ok(s) = std::fs::read_to_string(p) {
            out.extend(s.split_ascii_whitespace().filter_map(|x| x.parse::<i32>().ok()));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The stat of one thread read once (not kept open).
pub fn read_task_stat(proc_root: &Path, pid: i32, tid: i32) -> Option<TaskStat> {
    let p = proc_root.join(pid.to_string()).join("task").join(tid.to_string()).join("stat");
    parse_stat(&std::fs::read_to_string(p).ok()?)
}

/// A process's resident anonymous memory in KiB from the text of `/proc/<pid>/statm`: its
/// `resident` minus `shared` pages (fs/proc/task_mmu.c `task_statm`: `shared` is the file and
/// shmem pages, `resident` those plus the anonymous ones, so the difference is `MM_ANONPAGES`,
/// the `RssAnon` of `status`), times the page size. One short line with no per-mapping walk, so
/// cheap enough to re-read every period from a kept-open file; `None` when malformed.
pub fn parse_statm_anon_kb(statm: &str, page_kb: u64) -> Option<u32> {
    let mut f = statm.split_ascii_whitespace().skip(1).map(|x| x.parse::<u64>().ok());
    let (resident, shared) = (f.next()??, f.next()??);
    Some((resident.saturating_sub(shared) * page_kb).min(u32::MAX as u64) as u32)
}

/// The page size in KiB (`sysconf(_SC_PAGESIZE)`; 4 where it does not say).
pub fn page_kb() -> u64 {
    // SAFETY: sysconf reads a constant of the C library; no memory is passed.
    let b = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if b > 0 {
        (b as u64 / 1024).max(1)
    } else {
        4
    }
}

/// A process's command line as arguments (NUL-separated in `/proc/<pid>/cmdline`).
pub fn cmdline(proc_root: &Path, pid: i32) -> Vec<String> {
    match std::fs::read(proc_root.join(pid.to_string()).join("cmdline")) {
        Ok(b) => {
            b.split(|c| *c == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
        }
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_anonymous_memory_is_resident_minus_shared_pages() {
        // `xz -T2` on this machine 0.5 s into a run (27 Nov 19:00): statm "size resident shared
        // text lib data dt" in 4 KiB pages, read together with status's `RssAnon: 38088 kB`
        // (`RssFile: 2008 kB` = 502 pages, `RssShmem: 0 kB`).
        let statm = "86566 10024 502 11 0 53165 0\n";
        assert_eq!(parse_statm_anon_kb(statm, 4), Some(38088));
        // A process whose resident pages are all file-backed has no anonymous memory.
        assert_eq!(parse_statm_anon_kb("100 40 40 1 0 5 0\n", 4), Some(0));
        // Too few or non-numeric fields (or an empty read: the process is gone) are no figure.
        assert_eq!(parse_statm_anon_kb("100 40\n", 4), None);
        assert_eq!(parse_statm_anon_kb("100 x 3 1 0 5 0\n", 4), None);
        assert_eq!(parse_statm_anon_kb("", 4), None);
    }

    #[test]
    fn stat_fields_survive_a_name_with_spaces_and_parentheses() {
        // A real line from this machine with the name replaced by "CPU 0/TCG) x (".
        let line = "4242 (CPU 0/TCG) x () R 4200 4242 11830 0 -1 4194304 100 0 0 0 \
                    1234 56 0 0 20 0 1 0 305749 3133440 414 18446744073709551615 1 2 3 0 0 0 0 0 0 0 0 0 \
                    17 1 0 0 0 0 0 4 5 6 7 8 9 10 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.comm, "CPU 0/TCG) x (");
        assert_eq!((s.state, s.ppid, s.utime, s.stime), ('R', 4200, 1234, 56));
        assert_eq!((s.starttime, s.processor, s.policy, s.num_threads), (305749, 1, 0, 1));
        assert!(parse_stat("4242 (cat) R 1 2").is_none());
    }

    #[test]
    fn schedstat_and_proc_stat() {
        assert_eq!(parse_schedstat("56643023 7231168 185\n"), Some((56643023, 7231168, 185)));
        assert_eq!(parse_schedstat("12"), None);
        let text = "cpu  345793 0 20270 228244 1271 0 131 168 0 0\n\
                    cpu0 164313 1 8096 125098 281 7 26 79 0 0\n\
                    cpu1 181480 0 12174 103145 990 0 105 89 0 0\nintr 1 2 3\n";
        let v = parse_proc_stat(text);
        assert_eq!(v.len(), 2);
        // cpu0: busy = 164313 + 1 + 8096 = 172410; idle = 125098 + 281 = 125379.
        assert_eq!(v[0], (0, CpuTimes { busy: 172410, idle: 125379, irq: 7, softirq: 26, steal: 79 }));
        assert_eq!(v[1].0, 1);
    }

    #[test]
    fn vcpu_thread_names() {
        assert_eq!(parse_vcpu_thread_name("CPU 0/KVM"), Some(0));
        assert_eq!(parse_vcpu_thread_name("CPU 12/TCG\n"), Some(12));
        assert_eq!(parse_vcpu_thread_name("CPU 1/XYZ"), None);
        assert_eq!(parse_vcpu_thread_name("qemu-system-x86"), None);
        assert!(is_rt_policy(SCHED_FIFO) && !is_rt_policy(0));
    }

    #[test]
    fn a_task_dir_counts_threads_until_the_process_is_reaped() {
        let mut c = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let d = TaskDir::open(Path::new("/proc"), c.id() as i32).unwrap();
        // `sleep` has one thread; nlink = 2 + 1.
        assert_eq!(d.threads(), 1);
        // Our own process: the test harness runs this test on a thread of its own, so ≥ 2.
        assert!(TaskDir::open(Path::new("/proc"), std::process::id() as i32).unwrap().threads() >= 2);
        c.kill().unwrap();
        c.wait().unwrap();
        // Reaped: no threads left, the kept handle says 0.
        assert_eq!(d.threads(), 0);
    }

    #[test]
    fn a_kept_file_reads_fresh_contents() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "one").unwrap();
        let mut f = ProcFile::open(&p).unwrap();
        assert_eq!(f.read().unwrap(), "one");
        std::fs::write(&p, "a much longer second content, longer than before".repeat(20)).unwrap();
        assert_eq!(f.read().unwrap().len(), 48 * 20);
    }
}
