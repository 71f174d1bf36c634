//! SIGINT, SIGTERM and SIGHUP through `signal-hook`: each signal records its
//! number ([`pending`], `signal_hook::flag::register_usize`) and writes a
//! byte to a self-pipe (`signal_hook::low_level::pipe`), whose read end is in
//! every wait of the control loop ([`wait_until`], `ppoll`). A signal that
//! arrives at any moment, even between the loop's check and its wait, leaves
//! the pipe readable, so the wait returns at once; the loop then restores
//! every affinity and exits. (The self-pipe is the classic cure for that
//! race, D. J. Bernstein's "self-pipe trick"; signal-hook implements it
//! async-signal-safely.)
//!
//! A launched command's end is learnt from its pidfd (`pidfd_open(2)`,
//! readable once the process has exited, `inventory`), also in the same
//! wait, so `ampsched run` ends the moment its job does; no SIGCHLD handler.
//!
//! A finished job is not reaped the moment it ends ([`exit_status`] reads its status with
//! `waitid(WNOWAIT)`, which leaves it a zombie; `inventory` reaps it a period later, or
//! the init process does after `ampsched run` exits). Reaping at once was expensive: the
//! `wait4` that reaps a job's leader flushes the job's `/proc` dentries
//! (kernel/exit.c `release_task` → fs/proc/base.c `proc_flush_pid` →
//! `proc_invalidate_siblings_dcache` → fs/dcache.c `shrink_dcache_parent`), which loops
//! over `d_walk` while a dentry it finds is still being killed by another task — the job's
//! last thread, in its own `release_task`, whose notification of the leader's parent
//! (`do_notify_parent`) wakes the agent. The loop's thread runs at nice -20 (`control`),
//! preempts that thread on its CPU (a thread the placer pinned there can go nowhere else)
//! and spins in `shrink_dcache_parent` (its `cond_resched` does not yield to a nice 0
//! thread) until its slice is spent. Measured (27 Nov 13:18-13:30, `perf sched record` and
//! `perf record -g` of `sysbench cpu --threads=2` under `aash`, CPU 1 slowed by the hog,
//! load 7-9): 38-87 ms of the agent's CPU in `kernel_wait4` → `d_walk` after the job's
//! leader became a zombie, in one run the last worker (pinned to CPU 0) runnable and not
//! run for 87 ms, then exiting in 15 µs: 4-8 % of a 1.1 s job's wall time, under every
//! placer (`none` included). Lowering the thread to nice 19 for the `wait4`
//! ([`reap_politely`]) did not always help (one run of three still spun 38 ms: a reweighted
//! entity keeps its lag, `reweight_entity`). The same busy-wait under `SCHED_FIFO` took
//! 0.95 s (module doc of `control`).
//!
//! SIGPIPE gets an empty handler: a closed log pipe or metrics client must
//! not kill the agent before it restores; unlike `SIG_IGN`, a handler is
//! reset to the default at `execve`, so launched commands get the default.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The stop signals and their self-pipe (read end, write end).
struct Hooks {
    pending: Arc<AtomicUsize>,
    wake: (OwnedFd, OwnedFd),
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Install the handlers (once per process; later calls do nothing). Panics only when the
/// process cannot make a pipe or register a handler at start-up (out of file descriptors).
pub fn install() {
    HOOKS.get_or_init(|| {
        let mut p = [0i32; 2];
        // SAFETY: `p` is a valid array of two ints; the fds returned are ours.
        let wake = unsafe {
            assert_eq!(libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK), 0, "pipe2");
            (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1]))
        };
        let pending = Arc::new(AtomicUsize::new(0));
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // Registered in this order, so the number is stored before the pipe wakes the loop.
            signal_hook::flag::register_usize(sig, Arc::clone(&pending), sig as usize).expect("register signal");
            signal_hook::low_level::pipe::register_raw(sig, wake.1.as_raw_fd()).expect("register signal pipe");
        }
        // SAFETY: the handler does nothing, which is async-signal-safe.
        unsafe { signal_hook::low_level::register(libc::SIGPIPE, || {}) }.expect("register SIGPIPE");
        Hooks { pending, wake }
    });
}

/// The last stop signal received, if any (not cleared).
pub fn pending() -> Option<i32> {
    match HOOKS.get().map(|h| h.pending.load(Ordering::SeqCst)) {
        None | Some(0) => None,
        Some(s) => Some(s as i32),
    }
}

/// Monotonic time since an arbitrary origin.
pub fn monotonic() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time consumed by the calling thread.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time consumed by the whole process (all threads).
pub fn process_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Why [`wait_until`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The deadline passed.
    Deadline,
    /// A stop signal arrived (now or before the call).
    Stop,
    /// One of the file descriptors is readable (their `revents` say which).
    Ready,
}

/// Sleep until the monotonic time `deadline`, a stop signal ([`Wake::Stop`], also one that
/// arrived before the call), or one of `fds` readable (`POLLIN`, or hung up: a pidfd of an
/// exited process). `fds[i].revents` are set on [`Wake::Ready`].
pub fn wait_until(deadline: Duration, fds: &mut [libc::pollfd]) -> Wake {
    let mut all: Vec<libc::pollfd> = Vec::with_capacity(fds.len() + 1);
    all.extend(HOOKS.get().map(|h| libc::pollfd { fd: h.wake.0.as_raw_fd(), events: libc::POLLIN, revents: 0 }));
    let own = all.len();
    all.extend(fds.iter().map(|p| libc::pollfd { revents: 0, ..*p }));
    loop {
        if pending().is_some() {
            return Wake::Stop;
        }
        let left = deadline.saturating_sub(monotonic());
        if left.is_zero() {
            return Wake::Deadline;
        }
        let ts = libc::timespec { tv_sec: left.as_secs() as libc::time_t, tv_nsec: left.subsec_nanos() as _ };
        // SAFETY: valid pollfd array of its length and a valid timespec; no signal mask change.
        let r = unsafe { libc::ppoll(all.as_mut_ptr(), all.len() as libc::nfds_t, &ts, std::ptr::null()) };
        if r > 0 && all[own..].iter().any(|p| p.revents != 0) {
            for (f, p) in fds.iter_mut().zip(&all[own..]) {
                f.revents = p.revents;
            }
            return Wake::Ready;
        }
        // Otherwise: a signal (the pipe, or EINTR), looked at above; or the timeout.
    }
}

/// Sleep until the monotonic time `deadline`; false when a stop signal arrives (or arrived
/// before the call).
pub fn sleep_until(deadline: Duration) -> bool {
    wait_until(deadline, &mut []) != Wake::Stop
}

/// A pidfd of process `pid` (`pidfd_open(2)`, Linux 5.3+): readable once the process has
/// exited, so a [`wait_until`] on it learns of the exit without polling or SIGCHLD. The pid
/// must be a child not yet reaped (so it cannot have been reused).
pub fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether `fd` is readable now (a zero-timeout `poll`): for a pidfd, the process exited.
pub fn readable(fd: &OwnedFd) -> bool {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, zero timeout.
    unsafe { libc::poll(&mut p, 1, 0) == 1 && p.revents & libc::POLLIN != 0 }
}

/// The exit status of child `pid` if it has exited, leaving it unreaped (a zombie):
/// `waitid(P_PID, pid, WEXITED | WNOHANG | WNOWAIT)` (module doc). `None` while it runs.
pub fn exit_status(pid: i32) -> std::io::Result<Option<std::process::ExitStatus>> {
    use std::os::unix::process::ExitStatusExt;
    // SAFETY: a zeroed siginfo_t filled by waitid; si_pid stays 0 when nothing is waitable.
    let mut si: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a siginfo_t; the pid is our child (caller's contract).
    let r =
        unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut si, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the fields of a SIGCHLD siginfo, which waitid fills.
    let (spid, code, status) = unsafe { (si.si_pid(), si.si_code, si.si_status()) };
    if spid == 0 {
        return Ok(None);
    }
    // The wait(2) status word: exit code in bits 8-15, or the signal (0x80: core dumped).
    let raw = match code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        libc::CLD_DUMPED => (status & 0x7f) | 0x80,
        _ => status & 0x7f,
    };
    Ok(Some(std::process::ExitStatus::from_raw(raw)))
}

/// The lowest nice, taken by the calling thread while it reaps (module doc).
pub const REAP_NICE: i32 = 19;

/// Reap `child` if it has exited, without waiting, at nice [`REAP_NICE`] (module doc: the
/// reaping `wait4` can busy-wait for the job's dying threads, which should run first).
/// With a pidfd, `wait4` is called only once the pidfd is readable (the process exited);
/// without one, at every call. The caller's nice is put back afterwards (lowering it needs
/// no privilege; raising it back is allowed to a thread that had it, else it stays lower).
pub fn reap_politely(
    child: &mut std::process::Child,
    pidfd: Option<&OwnedFd>,
) -> std::io::Result<Option<std::process::ExitStatus>> {
    if pidfd.is_some_and(|f| !readable(f)) {
        return Ok(None);
    }
    let tid = gettid() as libc::id_t;
    // SAFETY: getpriority/setpriority on our own thread id (Linux applies PRIO_PROCESS to one
    // thread); errno is cleared first since -1 is a valid nice.
    let before = unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, tid);
        (*libc::__errno_location() == 0).then_some(n)
    };
    let lowered = before.is_some_and(|n| n < REAP_NICE)
        // SAFETY: as above.
        && unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, REAP_NICE) } == 0;
    let r = child.try_wait();
    if let (true, Some(n)) = (lowered, before) {
        // SAFETY: as above.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, n) };
    }
    r
}

/// Thread id of the caller.
pub fn gettid() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_advance_and_sleep_waits() {
        let t0 = monotonic();
        assert!(sleep_until(t0 + Duration::from_millis(5)));
        assert!(monotonic() >= t0 + Duration::from_millis(5));
        let c0 = thread_cpu();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(thread_cpu() > c0 && process_cpu() >= thread_cpu());
        // A readable pipe wakes the wait at once; without one it waits out the deadline.
        let mut p = [0i32; 2];
        // SAFETY: valid array of two ints.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        let mut fds = [libc::pollfd { fd: p[0], events: libc::POLLIN, revents: 0 }];
        let t1 = monotonic();
        assert_eq!(wait_until(t1 + Duration::from_millis(5), &mut fds), Wake::Deadline);
        assert!(monotonic() >= t1 + Duration::from_millis(5));
        // SAFETY: writing one byte from a valid buffer to our pipe; then closing both ends.
        unsafe {
            libc::write(p[1], b"x".as_ptr() as *const libc::c_void, 1);
        }
        assert_eq!(wait_until(monotonic() + Duration::from_secs(5), &mut fds), Wake::Ready);
        assert_ne!(fds[0].revents & libc::POLLIN, 0);
        unsafe {
            libc::close(p[0]);
            libc::close(p[1]);
        }
        // A child's pidfd wakes the wait when the child exits, not before.
        let mut c = std::process::Command::new("sleep").arg("0.05").spawn().unwrap();
        let pidfd = pidfd_open(c.id() as i32).unwrap();
        let mut fds = [libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        assert_eq!(wait_until(monotonic() + Duration::from_secs(30), &mut fds), Wake::Ready);
        assert!(c.try_wait().unwrap().is_some(), "readable only once the child has exited");
    }

    /// The calling thread's nice.
    fn nice() -> i32 {
        // SAFETY: getpriority of our own thread; errno cleared first (-1 is a nice).
        unsafe {
            *libc::__errno_location() = 0;
            libc::getpriority(libc::PRIO_PROCESS, gettid() as libc::id_t)
        }
    }

    #[test]
    fn an_exit_status_is_read_without_reaping_the_child() {
        use std::os::unix::process::ExitStatusExt;
        // `sh -c 'exit 3'`: running → None; exited → status 3, and it stays a zombie (a
        // second read gives the same status; reaping it then gives it once more).
        let mut c = std::process::Command::new("sh").args(["-c", "sleep 0.05; exit 3"]).spawn().unwrap();
        let pid = c.id() as i32;
        assert!(exit_status(pid).unwrap().is_none());
        let pidfd = pidfd_open(pid).unwrap();
        let mut fds = [libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        assert_eq!(wait_until(monotonic() + Duration::from_secs(30), &mut fds), Wake::Ready);
        assert_eq!(exit_status(pid).unwrap().and_then(|s| s.code()), Some(3));
        assert_eq!(exit_status(pid).unwrap().and_then(|s| s.code()), Some(3), "not reaped");
        assert_eq!(c.try_wait().unwrap().and_then(|s| s.code()), Some(3));
        // A child killed by a signal: the signal, no exit code.
        let mut c = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let pidfd = pidfd_open(c.id() as i32).unwrap();
        c.kill().unwrap();
        let mut fds = [libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        assert_eq!(wait_until(monotonic() + Duration::from_secs(30), &mut fds), Wake::Ready);
        let st = exit_status(c.id() as i32).unwrap().unwrap();
        assert_eq!((st.code(), st.signal()), (None, Some(libc::SIGKILL)));
        c.wait().unwrap();
    }

    #[test]
    fn a_child_is_reaped_only_once_its_pidfd_says_it_exited_and_the_nice_is_put_back() {
        // On a thread of its own (nice is per thread). `sleep 5`: running, its pidfd is not
        // readable, so no `wait4` — the status stays unknown and the child unreaped (a later
        // plain `try_wait` still finds it running). Killed: readable, reaped with its signal.
        std::thread::spawn(|| {
            let start = nice();
            let mut c = std::process::Command::new("sleep").arg("5").spawn().unwrap();
            let pidfd = pidfd_open(c.id() as i32).unwrap();
            assert!(!readable(&pidfd));
            assert!(reap_politely(&mut c, Some(&pidfd)).unwrap().is_none());
            assert!(c.try_wait().unwrap().is_none(), "still running, not reaped");
            c.kill().unwrap();
            let mut fds = [libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
            assert_eq!(wait_until(monotonic() + Duration::from_secs(30), &mut fds), Wake::Ready);
            let st = reap_politely(&mut c, Some(&pidfd)).unwrap().expect("exited: reaped");
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(st.signal(), Some(libc::SIGKILL));
            // The thread's nice is what it was before (lowered to 19 only for the wait4).
            assert_eq!(nice(), start);
            // Without a pidfd every call tries: `true` exits and is reaped.
            let mut c = std::process::Command::new("true").spawn().unwrap();
            let st = loop {
                if let Some(s) = reap_politely(&mut c, None).unwrap() {
                    break s;
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            assert!(st.success());
            assert_eq!(nice(), start);
        })
        .join()
        .unwrap();
    }
}
