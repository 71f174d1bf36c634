//! SIGINT, SIGTERM and SIGHUP handling: the handler only records the signal
//! (async-signal-safe); the control loop notices it after its sleep is
//! interrupted (`clock_nanosleep` returns `EINTR`), restores every affinity
//! and exits.
//!
//! SIGCHLD (a launched command ended) also interrupts the sleep, so the loop
//! notices a finished job at once instead of at the next period (`ampsched
//! run` would otherwise add up to a period to the job's wall time); it is
//! recorded apart ([`child_exited`]) and never stops the agent by itself.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

static PENDING: AtomicI32 = AtomicI32::new(0);
static CHILD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    PENDING.store(sig, Ordering::SeqCst);
}

extern "C" fn on_child(_sig: libc::c_int) {
    CHILD.store(true, Ordering::SeqCst);
}

fn handle(sig: libc::c_int, f: extern "C" fn(libc::c_int)) {
    // SAFETY: a zeroed sigaction with a plain handler that only stores to an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = f as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = if sig == libc::SIGCHLD { libc::SA_NOCLDSTOP } else { 0 };
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Install the handlers (without `SA_RESTART`, so sleeps are interrupted), and
/// ignore SIGPIPE: a closed log pipe or metrics client must not kill the agent
/// before it restores (launched commands get the default back: Rust's spawn resets it).
pub fn install() {
    // SAFETY: setting a disposition to SIG_IGN.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        handle(sig, on_signal);
    }
    handle(libc::SIGCHLD, on_child);
}

/// Whether a child ended since the last call (clears the flag).
pub fn child_exited() -> bool {
    CHILD.swap(false, Ordering::SeqCst)
}

/// The last signal received, if any (not cleared).
pub fn pending() -> Option<i32> {
    match PENDING.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
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

/// Sleep until the monotonic time `deadline`; returns early (false) when a stop signal
/// arrives (or arrived before the call: one received during QMP I/O must not wait out a
/// period), and early (true) when a child ended ([`child_exited`] then says so).
pub fn sleep_until(deadline: Duration) -> bool {
    if pending().is_some() {
        return false;
    }
    let ts = libc::timespec { tv_sec: deadline.as_secs() as libc::time_t, tv_nsec: deadline.subsec_nanos() as _ };
    loop {
        // SAFETY: valid timespec; absolute monotonic sleep.
        let r = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        match r {
            0 => return true,
            libc::EINTR if pending().is_some() => return false,
            libc::EINTR if CHILD.load(Ordering::SeqCst) => return true,
            libc::EINTR => continue,
            _ => return true,
        }
    }
}

/// Why [`wait_until`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The deadline passed.
    Deadline,
    /// A stop signal arrived (now or before the call).
    Stop,
    /// A launched command ended ([`child_exited`] says so too).
    Child,
    /// One of the file descriptors is readable.
    Ready,
}

/// [`sleep_until`] that also returns when one of `fds` becomes readable (`ppoll`).
pub fn wait_until(deadline: Duration, fds: &[i32]) -> Wake {
    if fds.is_empty() {
        return match sleep_until(deadline) {
            false => Wake::Stop,
            true if CHILD.load(Ordering::SeqCst) => Wake::Child,
            true => Wake::Deadline,
        };
    }
    let mut pfds: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
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
        let r = unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, &ts, std::ptr::null()) };
        if r > 0 {
            return Wake::Ready;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            if pending().is_some() {
                return Wake::Stop;
            }
            if CHILD.load(Ordering::SeqCst) {
                return Wake::Child;
            }
        }
    }
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
        let t1 = monotonic();
        assert_eq!(wait_until(t1 + Duration::from_millis(5), &[p[0]]), Wake::Deadline);
        assert!(monotonic() >= t1 + Duration::from_millis(5));
        // SAFETY: writing one byte from a valid buffer to our pipe; then closing both ends.
        unsafe {
            libc::write(p[1], b"x".as_ptr() as *const libc::c_void, 1);
        }
        assert_eq!(wait_until(monotonic() + Duration::from_secs(5), &[p[0]]), Wake::Ready);
        unsafe {
            libc::close(p[0]);
            libc::close(p[1]);
        }
    }
}
