//! Scheduler events: learn within a millisecond that a fast CPU went idle,
//! instead of at the next 30 ms period.
//!
//! Source: the kernel's `sched:sched_switch` tracepoint (kernel/sched/core.c,
//! `__schedule` → `trace_sched_switch`), read through perf event ring
//! buffers (`perf_event_open(2)` with `PERF_TYPE_TRACEPOINT`, the event id
//! from tracefs `events/sched/sched_switch/id`, one event per fast CPU,
//! `pid = -1`). The kernel filters in place (`PERF_EVENT_IOC_SET_FILTER`,
//! the tracefs filter syntax): only switches *to the idle task*
//! (`next_pid == 0`) are recorded, so the agent is woken (`wakeup_events =
//! 1`, `poll`) exactly when a fast CPU goes idle, not at every context
//! switch. Switches away from the agent's own loop thread are filtered out
//! too (its own sleep would otherwise wake it again at once). Samples carry
//! `CLOCK_MONOTONIC` time (`use_clockid`), the agent's clock, so the
//! reaction time is the time from the idle switch to the agent's change.
//!
//! The events are enabled only while the agent confines some thread away
//! from a fast CPU it may use ([`EventSource::arm`]); otherwise an idle fast
//! CPU needs nothing from the agent, and it is not woken.
//!
//! The event id and the record layout come from tracefs
//! (`events/sched/sched_switch/{id,format}`). Many systems do not mount
//! tracefs (this development machine does not); then the agent mounts it
//! for the two reads only, the way `perf` and `bpftrace` find tracepoints,
//! but without touching the machine's mount table: a short-lived thread
//! unshares its mount namespace (`unshare(CLONE_NEWNS)`, which for a thread
//! also unshares its `fs_struct`, kernel/fork.c `ksys_unshare` →
//! `unshare_fs`), makes every mount in it private (`MS_REC | MS_PRIVATE`, so
//! nothing propagates back through a shared `/sys`), mounts tracefs on
//! `/sys/kernel/tracing`, reads, unmounts and exits; the namespace and its
//! mount die with the thread (`exit_task_namespaces` → `put_mnt_ns`). No
//! other thread of the agent, and no other process, ever sees that mount.
//!
//! Privilege: system-wide (`pid = -1`) tracepoint events with raw samples
//! need `CAP_PERFMON` (or `CAP_SYS_ADMIN`, or `kernel.perf_event_paranoid`
//! ≤ -1), and reading the event id needs tracefs readable: mounted, or
//! mountable privately (`CAP_SYS_ADMIN`). Where either fails the agent keeps
//! its periodic loop and says why once ([`open`]'s error names the
//! capability). Nothing stays attached: the events live only as the agent's
//! file descriptors and mappings, which the kernel tears down on every exit
//! path, `kill -9` included (on a clean exit, disabled, in a child that holds
//! them until the agent has exited: [`EventSource::close_detached`]);
//! tracefs itself (its `enable` files, its ring) is never written, and the
//! private mount never outlives its thread. The format is read off the
//! control loop ([`PendingFormat`]).

use crate::perfring::PerfRing;
use crate::runclock::{perf_event_open, PerfEventAttr};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
const PERF_SAMPLE_RAW: u64 = 1 << 10;
/// `perf_event_attr` flag bits: disabled (0), use_clockid (25).
const FLAG_DISABLED: u64 = 1;
const FLAG_USE_CLOCKID: u64 = 1 << 25;
const PERF_RECORD_SAMPLE: u32 = 9;
/// `_IO('$', 0)`, `_IO('$', 1)`, `_IOW('$', 6, char *)`.
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;
/// Ring data pages per CPU (a power of two): idle switches are few, and the ring is drained
/// at each wake-up.
const RING_PAGES: usize = 4;

/// Where tracefs may be mounted.
pub const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Offset and size of field `name` in a tracefs event `format` file
/// (`field:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;`).
pub fn field_offset(format: &str, name: &str) -> Option<(usize, usize)> {
    for line in format.lines() {
        let Some(decl) = line.trim().strip_prefix("field:") else { continue };
        let mut parts = decl.split(';').map(str::trim);
        let ident = parts.next()?.split_whitespace().last()?;
        // `char prev_comm[16]` → `prev_comm`.
        if ident.split('[').next() != Some(name) {
            continue;
        }
        let mut off = None;
        let mut size = None;
        for p in parts {
            if let Some(v) = p.strip_prefix("offset:") {
                off = v.parse().ok();
            } else if let Some(v) = p.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        return Some((off?, size?));
    }
    None
}

/// A context switch on `cpu` at `time_ns` (`CLOCK_MONOTONIC`) from `prev` to `next` (0: the
/// idle task, the only ones the agent's filter lets through).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleSwitch {
    /// Linux CPU number.
    pub cpu: u32,
    /// When, ns of `CLOCK_MONOTONIC`.
    pub time_ns: u64,
    /// The thread that left the CPU.
    pub prev: i32,
    /// The thread that got it (0 = idle).
    pub next: i32,
}

impl IdleSwitch {
    /// The CPU went idle.
    pub fn to_idle(&self) -> bool {
        self.next == 0
    }
}

/// Parse the records of a sample stream with `sample_type = TIME | RAW` (one record after
/// another, as laid out in the ring): every `sched_switch` in it.
/// `offs` = (prev_pid, next_pid) offsets in the raw tracepoint record.
pub fn parse_records(bytes: &[u8], cpu: u32, offs: (usize, usize), out: &mut Vec<IdleSwitch>) {
    let rd32 = |b: &[u8], at: usize| b.get(at..at + 4).map(|s| u32::from_ne_bytes(s.try_into().unwrap()));
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let kind = rd32(bytes, at).unwrap_or(0);
        let size = u16::from_ne_bytes([bytes[at + 6], bytes[at + 7]]) as usize;
        if size < 8 || at + size > bytes.len() {
            return;
        }
        let rec = &bytes[at..at + size];
        at += size;
        if kind != PERF_RECORD_SAMPLE || rec.len() < 20 {
            continue;
        }
        let time_ns = u64::from_ne_bytes(rec[8..16].try_into().unwrap());
        let raw_len = rd32(rec, 16).unwrap_or(0) as usize;
        let Some(raw) = rec.get(20..20 + raw_len) else { continue };
        let (Some(prev), Some(next)) = (rd32(raw, offs.0), rd32(raw, offs.1)) else { continue };
        out.push(IdleSwitch { cpu, time_ns, prev: prev as i32, next: next as i32 });
    }
}

/// One CPU's event and its mapped ring.
struct Ring {
    cpu: u32,
    ring: PerfRing,
}

/// The idle-switch events of the fast CPUs.
pub struct EventSource {
    rings: Vec<Ring>,
    offs: (usize, usize),
    armed: bool,
    buf: Vec<u8>,
    /// Idle switches seen (drained).
    pub seen: u64,
}

fn tracefs_format(root: &Path) -> io::Result<(u64, String)> {
    let dir = root.join("events/sched/sched_switch");
    let id = std::fs::read_to_string(dir.join("id"))?;
    let id = id.trim().parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad event id"))?;
    Ok((id, std::fs::read_to_string(dir.join("format"))?))
}

/// The event id and format of `sched_switch`, or why they could not be read.
pub type Format = Result<(u64, String), String>;

/// Read `sched_switch`'s format from a tracefs mounted on `TRACEFS[0]` in a private mount
/// namespace of the calling thread, which must be a thread of its own (see the module notes):
/// `unshare` changes the thread's namespace for good. The result goes to `send` as soon as it
/// is read; the unmount comes after, and the namespace goes when the thread exits. The error
/// names the system call that failed and what it needs.
fn read_in_private_namespace(send: &dyn Fn(Format)) {
    let os = |what: &str| {
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => format!("{what}: {e}: needs CAP_SYS_ADMIN"),
            _ => format!("{what}: {e}"),
        }
    };
    let target = std::ffi::CString::new(TRACEFS[0]).unwrap();
    // SAFETY: unshare/mount/umount2 with valid NUL-terminated strings (or null where the
    // kernel allows it); they change only this thread's mount namespace.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return send(Err(os("unshare(CLONE_NEWNS)")));
        }
        let root = c"/";
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return send(Err(os("mount(/, MS_REC | MS_PRIVATE)")));
        }
        let fs = c"tracefs";
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        if libc::mount(fs.as_ptr(), target.as_ptr(), fs.as_ptr(), flags, std::ptr::null()) != 0 {
            // EBUSY: a tracefs is mounted there already (this namespace's copy of the host's,
            // mounted since it was looked for, e.g. by `perf sched record`): read that one.
            if io::Error::last_os_error().raw_os_error() != Some(libc::EBUSY) {
                return send(Err(os(&format!("mount(tracefs, {})", TRACEFS[0]))));
            }
            return send(
                tracefs_format(Path::new(TRACEFS[0]))
                    .map_err(|e| format!("{}/events/sched/sched_switch: {e}", TRACEFS[0])),
            );
        }
    }
    send(tracefs_format(Path::new(TRACEFS[0])).map_err(|e| format!("{}/events/sched/sched_switch: {e}", TRACEFS[0])));
    // SAFETY: as above; the namespace (and so the mount) also goes when the thread exits.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
}

/// `sched_switch`'s event id and format from a tracefs mounted on `TRACEFS[0]` in a private
/// mount namespace of a thread of its own (see the module notes), waiting for that thread to
/// end; the host's mount table is never changed.
pub fn private_tracefs_format() -> Format {
    std::thread::Builder::new()
        .name("ampsched-tracefs".into())
        .spawn(|| {
            let out = std::cell::RefCell::new(None);
            read_in_private_namespace(&|f| *out.borrow_mut() = Some(f));
            out.into_inner().unwrap_or_else(|| Err("the private tracefs reader sent nothing".into()))
        })
        .map_err(|e| format!("thread for the private tracefs mount: {e}"))?
        .join()
        .map_err(|_| "the private tracefs reader panicked".to_string())?
}

/// `sched_switch`'s event id and format: from a mounted tracefs, else from a private mount
/// made by the calling thread (a thread of its own), sent to `send`.
fn sched_switch_format(send: &dyn Fn(Format)) {
    let mut why = Vec::new();
    for root in TRACEFS {
        match tracefs_format(Path::new(root)) {
            Ok(f) => return send(Ok(f)),
            Err(e) => why.push(format!("{root}/events/sched/sched_switch: {e}")),
        }
    }
    read_in_private_namespace(&|f| {
        send(f.map_err(|e| {
            format!(
                "tracefs not readable ({}) and not mountable privately ({e}): run as root, or with CAP_SYS_ADMIN, \
                 or mount tracefs on {}",
                why.join("; "),
                TRACEFS[0]
            )
        }))
    });
}

/// `sched_switch`'s format being read by a thread of its own, off the control loop.
///
/// Why: the private mount, and above all the end of its namespace when the thread exits
/// (`put_mnt_ns` → the unmount waits for an RCU grace period), took 22-31 ms here, and up to
/// 290 ms at load 9: a loop that waited for it (it did, joining the thread) left the masks of
/// a contended period in force that long. The loop asks [`PendingFormat::poll`] each period
/// and stays periodic until the answer is in; the reader is never joined.
pub struct PendingFormat(std::sync::mpsc::Receiver<Format>);

impl PendingFormat {
    /// Start reading.
    pub fn start() -> PendingFormat {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new().name("ampsched-tracefs".into()).spawn({
            let tx = tx.clone();
            move || sched_switch_format(&|f| drop(tx.send(f)))
        });
        if let Err(e) = spawned {
            let _ = tx.send(Err(format!("thread for the tracefs reader: {e}")));
        }
        PendingFormat(rx)
    }

    /// The format once read (`None`: not yet).
    pub fn poll(&self) -> Option<Format> {
        match self.0.try_recv() {
            Ok(f) => Some(f),
            Err(std::sync::mpsc::TryRecvError::Empty) => None,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                Some(Err("the tracefs reader ended without an answer".into()))
            }
        }
    }

    /// Wait for the format.
    pub fn wait(self) -> Format {
        self.0.recv().unwrap_or_else(|_| Err("the tracefs reader ended without an answer".into()))
    }
}

/// Attach to `sched_switch` on each of `fast_cpus` (Linux numbers), filtered to switches to
/// the idle task that do not leave `self_tid`. Disabled until [`EventSource::arm`]. The error
/// says what is missing (tracefs, a capability, a kernel feature) for the one log line.
pub fn open(fast_cpus: &[u32], self_tid: i32, format: Format) -> Result<EventSource, String> {
    open_filtered(fast_cpus, &format!("next_pid == 0 && prev_pid != {self_tid}"), format)
}

/// [`open`] with any tracefs filter expression over `sched_switch`'s fields.
pub fn open_filtered(fast_cpus: &[u32], filter: &str, format: Format) -> Result<EventSource, String> {
    let (id, format) = format?;
    let (Some(prev), Some(next)) = (field_offset(&format, "prev_pid"), field_offset(&format, "next_pid")) else {
        return Err("sched_switch format has no prev_pid/next_pid field".into());
    };
    if prev.1 != 4 || next.1 != 4 {
        return Err(format!("sched_switch pid fields are {} and {} bytes, expected 4", prev.1, next.1));
    }
    let filter = std::ffi::CString::new(filter).map_err(|_| "a filter with a NUL byte".to_string())?;
    let mut rings = Vec::new();
    for &cpu in fast_cpus {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: id,
            sample_period: 1,
            sample_type: PERF_SAMPLE_TIME | PERF_SAMPLE_RAW,
            flags: FLAG_DISABLED | FLAG_USE_CLOCKID,
            wakeup_events: 1,
            clockid: libc::CLOCK_MONOTONIC,
            ..Default::default()
        };
        let fd = perf_event_open(&attr, -1, cpu as i32).map_err(|e| match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => format!(
                "perf_event_open(sched:sched_switch, cpu {cpu}): {e}: needs CAP_PERFMON (or CAP_SYS_ADMIN, or \
                 kernel.perf_event_paranoid = -1)"
            ),
            _ => format!("perf_event_open(sched:sched_switch, cpu {cpu}): {e}"),
        })?;
        // SAFETY: the fd is a perf event; the filter is a NUL-terminated string.
        if unsafe { libc::ioctl(fd.as_raw_fd(), IOC_SET_FILTER, filter.as_ptr()) } != 0 {
            return Err(format!("sched_switch filter refused: {}", io::Error::last_os_error()));
        }
        let ring = PerfRing::map(fd, RING_PAGES).map_err(|e| format!("mmap of the perf ring (cpu {cpu}): {e}"))?;
        rings.push(Ring { cpu, ring });
    }
    Ok(EventSource { rings, offs: (prev.0, next.0), armed: false, buf: Vec::new(), seen: 0 })
}

impl EventSource {
    /// Enable (`true`) or disable the events; a no-op when already so.
    pub fn arm(&mut self, on: bool) {
        if on == self.armed {
            return;
        }
        for r in &self.rings {
            // SAFETY: enable/disable ioctls on our own perf fd.
            unsafe { libc::ioctl(r.ring.fd(), if on { IOC_ENABLE } else { IOC_DISABLE }, 0) };
        }
        self.armed = on;
    }

    /// Whether the events are enabled.
    pub fn armed(&self) -> bool {
        self.armed
    }

    /// The event fds, for `poll`.
    pub fn fds(&self) -> impl Iterator<Item = i32> + '_ {
        self.rings.iter().map(|r| r.ring.fd())
    }

    /// Close the events without making the caller wait for the kernel to let go of them.
    ///
    /// Why: closing the last perf event of a tracepoint unregisters the kernel's probe and
    /// waits for every CPU to leave it (kernel/trace/trace_event_perf.c
    /// `perf_trace_event_unreg` → `tracepoint_synchronize_unregister`, RCU grace periods):
    /// 36 ms here at load 9 (`strace -T` of `close`), paid on the agent's way out, so added to
    /// the wall time of every job whose run opened the events — 3-4 % of a 1 s job. Here the
    /// events are disabled, then a forked child takes the last references (the fds and the
    /// ring mappings it inherits), closes every other file (the job's output pipes among
    /// them, so nobody reading them waits), waits for the agent to exit (EOF on a pipe only
    /// the agent holds open) and exits, and the kernel's wait happens in it. Where `fork`
    /// fails the events are closed here, as before.
    pub fn close_detached(mut self) {
        self.arm(false);
        let mut keep: Vec<i32> = self.fds().collect();
        let mut p = [0i32; 2];
        // SAFETY: a valid array of two fds for pipe2.
        if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return;
        }
        keep.push(p[0]);
        keep.sort_unstable();
        // SAFETY: the child only makes async-signal-safe system calls (close_range, close, read,
        // _exit) on memory it already has (`keep`), as required after fork in a threaded process.
        match unsafe { libc::fork() } {
            0 => unsafe {
                let mut from = 0u32;
                for &k in &keep {
                    if (k as u32) > from {
                        libc::syscall(libc::SYS_close_range, from, k as u32 - 1, 0);
                    }
                    from = k as u32 + 1;
                }
                libc::syscall(libc::SYS_close_range, from, u32::MAX, 0);
                let mut b = 0u8;
                while libc::read(p[0], (&mut b as *mut u8).cast(), 1) < 0 && *libc::__errno_location() == libc::EINTR {}
                libc::_exit(0);
            },
            // SAFETY: closing the read end, ours; the write end stays open until the agent
            // exits (its EOF tells the child the agent is gone).
            pid if pid > 0 => unsafe {
                libc::close(p[0]);
            },
            // SAFETY: fork failed: close both ends, ours.
            _ => unsafe {
                libc::close(p[0]);
                libc::close(p[1]);
            },
        }
    }

    /// Every idle switch recorded since the last call, ring by ring.
    pub fn drain(&mut self, out: &mut Vec<IdleSwitch>) {
        out.clear();
        for r in &mut self.rings {
            r.ring.drain(&mut self.buf);
            parse_records(&self.buf, r.cpu, self.offs, out);
        }
        self.seen += out.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's `sched_switch` format as tracefs prints it (Linux 6.x, x86-64).
    const FORMAT: &str = "name: sched_switch\nID: 372\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
        \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
        \tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
        \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
        \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
        \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
        \tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n";

    #[test]
    fn format_fields_are_found_by_name() {
        assert_eq!(field_offset(FORMAT, "prev_pid"), Some((24, 4)));
        assert_eq!(field_offset(FORMAT, "next_pid"), Some((56, 4)));
        assert_eq!(field_offset(FORMAT, "prev_comm"), Some((8, 16)));
        assert_eq!(field_offset(FORMAT, "nope"), None);
    }

    /// A sample record (TIME | RAW) of a switch from `prev` to `next` at `t`.
    fn record(t: u64, prev: i32, next: i32) -> Vec<u8> {
        let mut raw = vec![0u8; 64];
        raw[24..28].copy_from_slice(&prev.to_ne_bytes());
        raw[56..60].copy_from_slice(&next.to_ne_bytes());
        // Raw data is padded so the record stays 8-aligned: 4 (size) + 64 + 4 pad.
        let size = 8 + 8 + 4 + raw.len() + 4;
        let mut r = Vec::new();
        r.extend_from_slice(&PERF_RECORD_SAMPLE.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&(size as u16).to_ne_bytes());
        r.extend_from_slice(&t.to_ne_bytes());
        r.extend_from_slice(&(raw.len() as u32 + 4).to_ne_bytes());
        r.extend_from_slice(&raw);
        r.extend_from_slice(&[0; 4]);
        r
    }

    #[test]
    fn switches_are_parsed_and_other_records_skipped() {
        let mut b = record(1_000, 4242, 0);
        b.extend(record(2_000, 7, 4243));
        // A lost-records record (type 2) is skipped by its size.
        b.extend_from_slice(&2u32.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&24u16.to_ne_bytes());
        b.extend_from_slice(&[0; 16]);
        b.extend(record(3_000, 4243, 0));
        // A truncated tail is ignored.
        b.extend_from_slice(&[9, 0, 0]);
        let mut out = Vec::new();
        parse_records(&b, 0, (24, 56), &mut out);
        assert_eq!(
            out,
            vec![
                IdleSwitch { cpu: 0, time_ns: 1_000, prev: 4242, next: 0 },
                IdleSwitch { cpu: 0, time_ns: 2_000, prev: 7, next: 4243 },
                IdleSwitch { cpu: 0, time_ns: 3_000, prev: 4243, next: 0 }
            ]
        );
        assert!(out[0].to_idle() && !out[1].to_idle());
    }

    /// The machine's mount table, as this process sees it (mount ids and points).
    fn mounts() -> Vec<String> {
        let t = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        t.lines().map(|l| l.split(' ').take(5).collect::<Vec<_>>().join(" ")).collect()
    }

    #[test]
    fn a_private_tracefs_mount_reads_the_event_and_leaves_the_mount_table_as_it_was() {
        // Also where the host has tracefs mounted on the same path (`perf sched record` mounts
        // it): the private mount then meets EBUSY and reads the namespace's copy (checked by
        // hand with `mount -t tracefs nodev /sys/kernel/tracing`, 27 Nov 11:16).
        let before = mounts();
        // SAFETY: no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        match private_tracefs_format() {
            Ok((id, format)) => {
                assert!(id > 0);
                assert_eq!(field_offset(&format, "next_pid").map(|f| f.1), Some(4), "{format}");
                // The same id as a mounted tracefs gives, where one is mounted.
                if let Ok((mounted, _)) = tracefs_format(Path::new(TRACEFS[0])) {
                    assert_eq!(id, mounted);
                }
            }
            Err(e) if !root => assert!(e.contains("CAP_SYS_ADMIN"), "{e}"),
            Err(e) => panic!("as root the private mount must work: {e}"),
        }
        // Nothing mounted, nothing unmounted, in this process's (the host's) namespace.
        assert_eq!(mounts(), before);
    }

    #[test]
    fn attaches_and_sees_a_threads_switches_in_the_agents_clock_or_says_what_is_missing() {
        // SAFETY: no preconditions.
        let (root, tid) = (unsafe { libc::geteuid() } == 0, unsafe { libc::syscall(libc::SYS_gettid) } as i32);
        // The agent's own filter: attaches (or, unprivileged, names what is missing).
        match open(&[0], tid, PendingFormat::start().wait()) {
            Ok(mut ev) => {
                ev.arm(true);
                ev.arm(false);
            }
            // Unprivileged: the reason names the capability (tracefs: CAP_SYS_ADMIN to mount
            // it privately; the events: CAP_PERFMON).
            Err(e) if !root => {
                assert!(e.contains("CAP_PERFMON") || e.contains("CAP_SYS_ADMIN"), "{e}");
                return;
            }
            // As root tracefs is readable, mounted or mounted privately for the read.
            Err(e) => panic!("as root the events must attach: {e}"),
        }
        // A thread pinned to CPU 0 that sleeps 20 times: each sleep is a switch away from it on
        // CPU 0 (whatever else keeps CPU 0 busy), so a filter on its tid sees them, in order,
        // stamped with CLOCK_MONOTONIC between the agent's own readings before and after. Then,
        // with the events disarmed, it sleeps 20 more times and exits: none of that is seen.
        // (It lives on until the second round: a thread's last switch, at its exit, may come
        // after `join` has returned, since the joiner is woken at `mm_release` in `do_exit`.)
        let (tx, rx) = std::sync::mpsc::channel::<i32>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: a zeroed cpu_set_t with CPU 0 set, for the calling thread.
            unsafe {
                libc::CPU_SET(0, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
            tx.send(unsafe { libc::syscall(libc::SYS_gettid) } as i32).unwrap();
            for _ in 0..2 {
                go_rx.recv().unwrap();
                for _ in 0..20 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                tx.send(0).unwrap();
            }
        });
        let sleeper = rx.recv().unwrap();
        let mut ev = open_filtered(&[0], &format!("prev_pid == {sleeper}"), PendingFormat::start().wait()).unwrap();
        ev.arm(true);
        let t0 = crate::signals::monotonic().as_nanos() as u64;
        go_tx.send(()).unwrap();
        rx.recv().unwrap();
        let t1 = crate::signals::monotonic().as_nanos() as u64;
        let mut out = Vec::new();
        ev.drain(&mut out);
        assert!(out.len() >= 20, "20 sleeps, {} switches seen: {out:?}", out.len());
        assert!(out.iter().all(|s| s.cpu == 0 && s.prev == sleeper), "{out:?}");
        assert!(out.iter().all(|s| (t0..=t1).contains(&s.time_ns)), "{t0}..{t1}: {out:?}");
        assert!(out.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        // Disarmed: nothing more is recorded (a switch between the drain and the disarm, the
        // sleeper blocking on its channel, is drained first).
        ev.arm(false);
        ev.drain(&mut out);
        go_tx.send(()).unwrap();
        h.join().unwrap();
        ev.drain(&mut out);
        assert!(out.is_empty(), "{out:?}");
    }
}
