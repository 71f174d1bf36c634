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
}
