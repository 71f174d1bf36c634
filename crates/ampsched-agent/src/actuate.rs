//! Actuation: reading and setting a thread's hard affinity. The control loop
//! talks to an [`Actuator`]; [`LinuxActuator`] calls `sched_setaffinity`,
//! [`DryRun`] only reads (decisions are printed, nothing changes).
//!
//! Masks here are Linux CPU numbers (not topology ids). A vanished thread
//! (`ESRCH`) and a denied change (`EPERM`, `EINVAL` for a mask outside the
//! thread's cpuset) are reported as values, never panics.
//!
//! [`Remembering`] wraps the real actuator so that a change the kernel
//! refused (EPERM or EINVAL) for a (tid, mask) is not asked again while the
//! thread is as it was when refused: same start time (no tid reuse), same
//! owner (uid of `/proc/<tid>`) and same affinity. A repeated request is
//! answered [`ActError::Remembered`] without a system call and counted under
//! that reason in `ampsched_affinity_errors_total`.

use ampsched_model::{CpuId, CpuSet};
use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::MetadataExt;

/// Why an affinity call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActError {
    /// The thread no longer exists (ESRCH).
    Vanished,
    /// Not allowed (EPERM).
    Denied,
    /// The mask has no CPU the thread may use (EINVAL: cpuset or offline CPUs).
    Invalid,
    /// Another errno.
    Other(i32),
    /// Refused before for this thread and mask, and the thread has not changed since: not asked again.
    Remembered,
}

impl ActError {
    fn from_errno(e: i32) -> ActError {
        match e {
            libc::ESRCH => ActError::Vanished,
            libc::EPERM => ActError::Denied,
            libc::EINVAL => ActError::Invalid,
            e => ActError::Other(e),
        }
    }

    /// Short name used in logs and metrics labels.
    pub fn label(&self) -> &'static str {
        match self {
            ActError::Vanished => "esrch",
            ActError::Denied => "eperm",
            ActError::Invalid => "einval",
            ActError::Other(_) => "other",
            ActError::Remembered => "remembered",
        }
    }
}

impl fmt::Display for ActError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActError::Vanished => write!(f, "thread vanished (ESRCH)"),
            ActError::Denied => write!(f, "permission denied (EPERM)"),
            ActError::Invalid => write!(f, "mask not allowed for this thread (EINVAL)"),
            ActError::Other(e) => write!(f, "{}", std::io::Error::from_raw_os_error(*e)),
            ActError::Remembered => write!(f, "refused before and the thread has not changed since: not asked again"),
        }
    }
}

fn to_cpu_set(mask: &CpuSet) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut s: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for c in mask.iter().filter(|c| c.idx() < max) {
        // SAFETY: index checked against the set's size.
        unsafe { libc::CPU_SET(c.idx(), &mut s) };
    }
    s
}

/// The hard affinity of thread `tid` (0 = the calling thread), as Linux CPU numbers.
pub fn get_affinity(tid: i32) -> Result<CpuSet, ActError> {
    // SAFETY: zeroed cpu_set_t is valid; the kernel writes at most its size.
    let mut s: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut s) };
    if r != 0 {
        return Err(ActError::from_errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0)));
    }
    let max = (8 * std::mem::size_of::<libc::cpu_set_t>()).min(ampsched_model::cpuset::MAX_CPUS);
    // SAFETY: index below the set's size.
    Ok(CpuSet::from_cpus((0..max).filter(|c| unsafe { libc::CPU_ISSET(*c, &s) }).map(|c| CpuId(c as u32))))
}

/// Set the hard affinity of thread `tid` (0 = the calling thread), Linux CPU numbers.
pub fn set_affinity(tid: i32, mask: &CpuSet) -> Result<(), ActError> {
    if mask.is_empty() {
        return Err(ActError::Invalid);
    }
    let s = to_cpu_set(mask);
    // SAFETY: passing a valid cpu_set_t of the stated size.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &s) };
    if r != 0 {
        return Err(ActError::from_errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0)));
    }
    Ok(())
}

/// What the control loop uses to read and change affinities.
pub trait Actuator {
    /// Current affinity of a thread.
    fn get(&self, tid: i32) -> Result<CpuSet, ActError>;
    /// Change a thread's affinity.
    fn set(&mut self, tid: i32, mask: &CpuSet) -> Result<(), ActError>;
    /// True when changes are only printed.
    fn dry_run(&self) -> bool;
}

/// The real thing: `sched_getaffinity` / `sched_setaffinity`.
#[derive(Debug, Default)]
pub struct LinuxActuator;

impl Actuator for LinuxActuator {
    fn get(&self, tid: i32) -> Result<CpuSet, ActError> {
        get_affinity(tid)
    }
    fn set(&mut self, tid: i32, mask: &CpuSet) -> Result<(), ActError> {
        set_affinity(tid, mask)
    }
    fn dry_run(&self) -> bool {
        false
    }
}

/// Dry run: reads real affinities, records wanted changes, changes nothing.
#[derive(Debug, Default)]
pub struct DryRun {
    /// Changes that would have been made, in order.
    pub wanted: Vec<(i32, CpuSet)>,
}

impl Actuator for DryRun {
    fn get(&self, tid: i32) -> Result<CpuSet, ActError> {
        get_affinity(tid)
    }
    fn set(&mut self, tid: i32, mask: &CpuSet) -> Result<(), ActError> {
        self.wanted.push((tid, *mask));
        Ok(())
    }
    fn dry_run(&self) -> bool {
        true
    }
}

/// What a refused change is remembered against: when any part differs, the thread has changed
/// (new owner, new affinity or cpuset, or a new thread with the same tid) and may be asked again.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ThreadState {
    affinity: Result<CpuSet, ActError>,
    uid: Option<u32>,
    starttime: Option<u64>,
}

#[derive(Debug)]
struct Refusal {
    state: ThreadState,
    masks: Vec<CpuSet>,
}

/// An [`Actuator`] that does not repeat a refused (tid, mask) while the thread is unchanged.
#[derive(Debug)]
pub struct Remembering<A: Actuator> {
    inner: A,
    refused: HashMap<i32, Refusal>,
    /// Requests answered from memory, without a system call.
    pub skipped: u64,
}

impl<A: Actuator> Remembering<A> {
    /// Wrap `inner`.
    pub fn new(inner: A) -> Remembering<A> {
        Remembering { inner, refused: HashMap::new(), skipped: 0 }
    }

    fn state(&self, tid: i32) -> ThreadState {
        let dir = std::path::PathBuf::from(format!("/proc/{tid}"));
        ThreadState {
            affinity: self.inner.get(tid),
            uid: std::fs::metadata(&dir).ok().map(|m| m.uid()),
            starttime: std::fs::read_to_string(dir.join("stat"))
                .ok()
                .and_then(|s| crate::procfs::parse_stat(&s))
                .map(|s| s.starttime),
        }
    }
}

impl<A: Actuator> Actuator for Remembering<A> {
    fn get(&self, tid: i32) -> Result<CpuSet, ActError> {
        self.inner.get(tid)
    }
    fn set(&mut self, tid: i32, mask: &CpuSet) -> Result<(), ActError> {
        if self.refused.contains_key(&tid) {
            let now = self.state(tid);
            let r = &self.refused[&tid];
            if r.state == now {
                if r.masks.contains(mask) {
                    self.skipped += 1;
                    return Err(ActError::Remembered);
                }
            } else {
                self.refused.remove(&tid);
            }
        }
        let r = self.inner.set(tid, mask);
        match r {
            Err(ActError::Denied | ActError::Invalid) => {
                let state = self.state(tid);
                let e = self.refused.entry(tid).or_insert_with(|| Refusal { state: state.clone(), masks: Vec::new() });
                if e.state != state {
                    *e = Refusal { state, masks: Vec::new() };
                }
                e.masks.push(*mask);
            }
            Ok(()) | Err(ActError::Vanished) => {
                self.refused.remove(&tid);
            }
            Err(_) => {}
        }
        r
    }
    fn dry_run(&self) -> bool {
        self.inner.dry_run()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_thread_round_trip_and_errors() {
        // Run in a fresh thread so the test harness thread keeps its mask.
        std::thread::spawn(|| {
            let orig = get_affinity(0).unwrap();
            let first = orig.first().unwrap();
            set_affinity(0, &CpuSet::single(first)).unwrap();
            assert_eq!(get_affinity(0).unwrap(), CpuSet::single(first));
            set_affinity(0, &orig).unwrap();
            assert_eq!(get_affinity(0).unwrap(), orig);
            assert_eq!(set_affinity(0, &CpuSet::new()), Err(ActError::Invalid));
        })
        .join()
        .unwrap();
        // pid_max is at most 4 194 304: this tid cannot exist.
        assert_eq!(get_affinity(999_999_999), Err(ActError::Vanished));
        let mut d = DryRun::default();
        d.set(1, &CpuSet::single(CpuId(0))).unwrap();
        assert_eq!(d.wanted.len(), 1);
        assert_eq!(ActError::Denied.label(), "eperm");
    }

    /// Refuses every change; its reported affinity can be changed by the test.
    struct Refusing {
        calls: std::rc::Rc<std::cell::Cell<u32>>,
        affinity: std::rc::Rc<std::cell::Cell<CpuSet>>,
    }

    impl Actuator for Refusing {
        fn get(&self, _tid: i32) -> Result<CpuSet, ActError> {
            Ok(self.affinity.get())
        }
        fn set(&mut self, _tid: i32, _mask: &CpuSet) -> Result<(), ActError> {
            self.calls.set(self.calls.get() + 1);
            Err(ActError::Denied)
        }
        fn dry_run(&self) -> bool {
            false
        }
    }

    #[test]
    fn denied_change_is_not_asked_again_until_the_thread_changes() {
        let calls = std::rc::Rc::new(std::cell::Cell::new(0));
        let affinity = std::rc::Rc::new(std::cell::Cell::new(CpuSet::parse_list("0-1").unwrap()));
        let mut a = Remembering::new(Refusing { calls: calls.clone(), affinity: affinity.clone() });
        // This process's own pid: a live thread whose owner and start time are stable.
        let tid = std::process::id() as i32;
        let m0 = CpuSet::single(CpuId(0));
        let m1 = CpuSet::single(CpuId(1));
        assert_eq!(a.set(tid, &m0), Err(ActError::Denied));
        for _ in 0..5 {
            assert_eq!(a.set(tid, &m0), Err(ActError::Remembered));
        }
        // Another mask is a new question (asked once), then remembered as well.
        assert_eq!(a.set(tid, &m1), Err(ActError::Denied));
        assert_eq!(a.set(tid, &m1), Err(ActError::Remembered));
        assert_eq!((calls.get(), a.skipped), (2, 6));
        // The thread's affinity changed (by someone else): both are asked again.
        affinity.set(m1);
        assert_eq!(a.set(tid, &m0), Err(ActError::Denied));
        assert_eq!(a.set(tid, &m0), Err(ActError::Remembered));
        assert_eq!(calls.get(), 3);
        assert_eq!(ActError::Remembered.label(), "remembered");
    }
}
