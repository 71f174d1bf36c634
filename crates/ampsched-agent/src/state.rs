//! The state file: every thread's original affinity, written atomically
//! (temporary file, rename) before the agent first changes that thread, so
//! that `ampsched restore` can undo the agent's changes after a crash or
//! `kill -9`. A clean exit restores and removes the file.
//!
//! Not fsynced: the file has to outlive the agent, not the machine. A
//! process that dies (`kill -9`, a panic) leaves its written pages in the
//! page cache, and `rename` replaces the old file in one step for every
//! reader (rename(2): "atomically"), so `restore` reads either the old list
//! or the new one. An fsync only adds durability across a crash of the
//! kernel or a power loss, after which no thread the file names exists and
//! no affinity is left to restore; on the development machine (ext4 on a
//! virtio disk) it took 8 ms a write (p50 of 20, 27 Nov 19:11), blocking the
//! control loop at each first change of a new thread — for `make -j2`, each
//! compiler's — with the period's masks and reactions waiting behind it.
//!
//! A thread is identified by (pid, tid, start time): `restore` reads
//! `/proc/<pid>/task/<tid>/stat`, so a tid that is no longer a thread of the
//! recorded process, or was reused by a new thread after the old one exited,
//! is never touched.
//!
//! The file is private to the user running the agent (docs/security.md): it
//! lives in a per-user directory created at mode 0700, is created with
//! `O_EXCL | O_NOFOLLOW` at mode 0600 and renamed into place, and a state
//! file owned by someone else or writable by others is refused by both the
//! agent and `restore`.

use crate::actuate::{set_affinity, ActError};
use crate::procfs::read_task_stat;
use crate::AgentError;
use ampsched_model::CpuSet;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Schema tag of the state file.
pub const STATE_SCHEMA: &str = "ampsched.agent-state/1";

/// One changed thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateEntry {
    /// Thread id.
    pub tid: i32,
    /// Its process id.
    pub pid: i32,
    /// Target name.
    pub target: String,
    /// Start time (clock ticks after boot) from `stat`.
    pub starttime: u64,
    /// Affinity before the agent's first change, Linux CPU numbers.
    pub original: CpuSet,
}

/// The file's contents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    /// Always [`STATE_SCHEMA`].
    pub schema: String,
    /// Process id of the agent that wrote it.
    pub agent_pid: i32,
    /// Changed threads, in the order they were first changed.
    pub entries: Vec<StateEntry>,
}

/// Default state file: `/run/ampsched/state.json` for root; for another user
/// `$XDG_RUNTIME_DIR/ampsched/state.json`, or `/tmp/ampsched-UID/state.json`
/// when that variable is unset. Either directory is created at mode 0700 and
/// checked (see [`check_dir`]) before a file is written in it, so another
/// user can neither plant a file there nor redirect a write with a symlink.
pub fn default_path() -> PathBuf {
    let uid = euid();
    if uid == 0 {
        return PathBuf::from("/run/ampsched/state.json");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("ampsched").join("state.json"),
        None => std::env::temp_dir().join(format!("ampsched-{uid}")).join("state.json"),
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Check that `dir` is a real directory (not a symlink) owned by the caller
/// (or root) and that nobody else can add or replace files in it: not
/// writable by group or others, unless sticky (as `/tmp`, where only a
/// file's owner may rename or delete it).
pub fn check_dir(dir: &Path) -> Result<(), AgentError> {
    let m = std::fs::symlink_metadata(dir)
        .map_err(|e| AgentError::new(format!("{}: cannot inspect the state directory: {e}", dir.display())))?;
    if !m.file_type().is_dir() {
        return Err(AgentError::new(format!(
            "{}: the state directory is not a directory (a symlink?): refusing it",
            dir.display()
        )));
    }
    let me = euid();
    if m.uid() != me && m.uid() != 0 {
        return Err(AgentError::new(format!(
            "{}: the state directory belongs to uid {}, not to you (uid {me}): refusing it",
            dir.display(),
            m.uid()
        )));
    }
    if m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0 {
        return Err(AgentError::new(format!(
            "{}: the state directory is writable by other users (mode {:o}) and not sticky: refusing it",
            dir.display(),
            m.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Create `dir` (and missing parents) with mode 0700 when absent, then [`check_dir`] it.
fn ensure_dir(dir: &Path) -> Result<(), AgentError> {
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| AgentError::new(format!("{}: cannot create the state directory: {e}", dir.display())))?;
    }
    check_dir(dir)
}

/// Write `s` to `path` atomically: a new file in the same (checked) directory,
/// created with `O_EXCL | O_NOFOLLOW` at mode 0600 (a planted file or symlink
/// makes the create fail instead of being followed), then `rename` over `path`
/// (which replaces a symlink there rather than following it). No fsync (module
/// doc: the file must outlive the agent, not the machine).
pub fn write_atomic(path: &Path, s: &StateFile) -> Result<(), AgentError> {
    let e = |what: &str, err: std::io::Error| {
        AgentError::new(format!("{}: cannot {what} the state file: {err}", path.display()))
    };
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    ensure_dir(&dir)?;
    let name = path.file_name().ok_or_else(|| AgentError::new(format!("{}: not a file name", path.display())))?;
    let text = serde_json::to_string_pretty(s).map_err(|x| AgentError::new(format!("state file: {x}")))?;
    let mut opened = None;
    for n in 0..16u32 {
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".tmp{}.{n}", std::process::id()));
        let tmp = dir.join(tmp_name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => {
                opened = Some((f, tmp));
                break;
            }
            Err(x) if x.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(x) => return Err(e("create a temporary file for", x)),
        }
    }
    let (mut f, tmp) = opened.ok_or_else(|| {
        AgentError::new(format!(
            "{}: cannot create a temporary file for the state file: 16 names already taken in {}",
            path.display(),
            dir.display()
        ))
    })?;
    let written = f.write_all(text.as_bytes()).and_then(|_| f.write_all(b"\n"));
    if let Err(x) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e("write", x));
    }
    if let Err(x) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e("rename into", x));
    }
    Ok(())
}

/// Read a state file; `Ok(None)` when it does not exist. The file is opened
/// without following a symlink and refused unless it is a regular file owned
/// by the caller (or root) and not writable by group or others: a file
/// planted by another user is never believed.
pub fn read(path: &Path) -> Result<Option<StateFile>, AgentError> {
    let f = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(AgentError::new(format!("{}: the state file is a symlink: refusing it", path.display())))
        }
        Err(e) => return Err(AgentError::new(format!("{}: cannot read the state file: {e}", path.display()))),
    };
    let m =
        f.metadata().map_err(|e| AgentError::new(format!("{}: cannot inspect the state file: {e}", path.display())))?;
    let me = euid();
    if !m.file_type().is_file() {
        return Err(AgentError::new(format!("{}: the state file is not a regular file: refusing it", path.display())));
    }
    if m.uid() != me && m.uid() != 0 {
        return Err(AgentError::new(format!(
            "{}: the state file belongs to uid {}, not to you (uid {me}): refusing it (another user may have planted \
             it); remove it or pass a different --state",
            path.display(),
            m.uid()
        )));
    }
    if m.mode() & 0o022 != 0 {
        return Err(AgentError::new(format!(
            "{}: the state file is writable by other users (mode {:o}): refusing it",
            path.display(),
            m.mode() & 0o7777
        )));
    }
    let mut text = String::new();
    // A real state file is a few hundred bytes per thread; 64 MiB is far beyond any.
    f.take(STATE_MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| AgentError::new(format!("{}: cannot read the state file: {e}", path.display())))?;
    if text.len() as u64 > STATE_MAX_BYTES {
        return Err(AgentError::new(format!(
            "{}: the state file is larger than {STATE_MAX_BYTES} bytes: not an ampsched state file",
            path.display()
        )));
    }
    let s: StateFile = serde_json::from_str(&text)
        .map_err(|e| AgentError::new(format!("{}: not an ampsched state file: {e}", path.display())))?;
    if s.schema != STATE_SCHEMA {
        return Err(AgentError::new(format!("{}: schema `{}`, expected `{STATE_SCHEMA}`", path.display(), s.schema)));
    }
    Ok(Some(s))
}

/// Largest state file [`read`] accepts, bytes.
pub const STATE_MAX_BYTES: u64 = 64 << 20;

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

fn is_agent(pid: i32) -> bool {
    pid_alive(pid)
        && pid != std::process::id() as i32
        && std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "ampsched")
}

/// Refuse to start when a state file is present: another agent owns it, or a
/// crashed agent left changes that `restore` must undo first.
pub fn check_free(path: &Path) -> Result<(), AgentError> {
    match read(path)? {
        None => Ok(()),
        Some(s) if is_agent(s.agent_pid) => Err(AgentError::new(format!(
            "{}: another agent (pid {}) is using this state file; stop it or pass a different --state",
            path.display(),
            s.agent_pid
        ))),
        Some(s) => Err(AgentError::new(format!(
            "{}: left by an agent (pid {}) that did not exit cleanly; {} thread(s) may still carry its affinities: \
             run `ampsched restore --state {}` first",
            path.display(),
            s.agent_pid,
            s.entries.len(),
            path.display()
        ))),
    }
}

/// What `restore` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Threads put back.
    pub restored: Vec<i32>,
    /// Threads that no longer exist (nothing to do).
    pub gone: Vec<i32>,
    /// Tids now used by another thread (left alone).
    pub reused: Vec<i32>,
    /// Threads whose restore failed, with the reason.
    pub failed: Vec<(i32, ActError)>,
}

/// Put back every original affinity in the state file at `path`; remove the
/// file when nothing failed. `proc_root` is normally `/proc`.
pub fn restore(path: &Path, proc_root: &Path) -> Result<RestoreReport, AgentError> {
    let s =
        read(path)?.ok_or_else(|| AgentError::new(format!("{}: no state file: nothing to restore", path.display())))?;
    if is_agent(s.agent_pid) {
        return Err(AgentError::new(format!(
            "{}: the agent (pid {}) is still running: stop it (SIGTERM restores), do not restore under it",
            path.display(),
            s.agent_pid
        )));
    }
    let mut r = RestoreReport::default();
    for e in &s.entries {
        match read_task_stat(proc_root, e.pid, e.tid) {
            None => r.gone.push(e.tid),
            Some(st) if st.starttime != e.starttime => r.reused.push(e.tid),
            Some(_) => match set_affinity(e.tid, &e.original) {
                Ok(()) => r.restored.push(e.tid),
                Err(ActError::Vanished) => r.gone.push(e.tid),
                Err(x) => r.failed.push((e.tid, x)),
            },
        }
    }
    if r.failed.is_empty() {
        std::fs::remove_file(path).map_err(|e| {
            AgentError::new(format!("{}: restored, but cannot remove the state file: {e}", path.display()))
        })?;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ampsched_model::CpuId;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn round_trip_and_refusals() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/state.json");
        assert!(read(&p).unwrap().is_none());
        check_free(&p).unwrap();
        let s = StateFile {
            schema: STATE_SCHEMA.into(),
            // pid 1 is alive (init) but is not an agent.
            agent_pid: 1,
            entries: vec![StateEntry {
                tid: 999_999_999,
                pid: 999_999_999,
                target: "x".into(),
                starttime: 5,
                original: CpuSet::single(CpuId(0)),
            }],
        };
        write_atomic(&p, &s).unwrap();
        assert_eq!(read(&p).unwrap().unwrap(), s);
        let e = check_free(&p).unwrap_err().to_string();
        assert!(e.contains("did not exit cleanly") && e.contains("ampsched restore --state"), "{e}");
        // restore: the thread does not exist → gone; the file is removed.
        let r = restore(&p, Path::new("/proc")).unwrap();
        assert_eq!(r.gone, vec![999_999_999]);
        assert!(!p.exists());
        let e = restore(&p, Path::new("/proc")).unwrap_err().to_string();
        assert!(e.contains("nothing to restore"), "{e}");
        std::fs::write(&p, "{}").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("not an ampsched state file"));
    }

    fn one_entry() -> StateFile {
        StateFile {
            schema: STATE_SCHEMA.into(),
            agent_pid: 999_999_999,
            entries: vec![StateEntry {
                tid: 999_999_998,
                pid: 999_999_998,
                target: "x".into(),
                starttime: 5,
                original: CpuSet::single(CpuId(0)),
            }],
        }
    }

    #[test]
    fn state_file_is_created_0600_and_never_through_a_planted_symlink() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim.txt");
        std::fs::write(&victim, "precious").unwrap();
        let p = d.path().join("state.json");
        // Symlinks planted at the final name and at the first temporary name.
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        let tmp0 = d.path().join(format!(".state.json.tmp{}.0", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp0).unwrap();
        write_atomic(&p, &one_entry()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert!(m.file_type().is_file(), "the symlink was replaced, not followed");
        assert_eq!(m.mode() & 0o777, 0o600);
        assert_eq!(read(&p).unwrap().unwrap(), one_entry());
        // A symlink as the state file is refused on reading.
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("is a symlink"));
    }

    #[test]
    fn state_dir_is_created_private_and_checked() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ampsched-1000/state.json");
        write_atomic(&p, &one_entry()).unwrap();
        let m = std::fs::metadata(p.parent().unwrap()).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700);
        // A directory others can write to (not sticky) is refused; a sticky one (like /tmp) is not.
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = write_atomic(&open.join("state.json"), &one_entry()).unwrap_err().to_string();
        assert!(e.contains("writable by other users") && e.contains("777"), "{e}");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        write_atomic(&open.join("state.json"), &one_entry()).unwrap();
        // A symlink to a directory is refused.
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&open, &link).unwrap();
        let e = write_atomic(&link.join("state.json"), &one_entry()).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
    }

    #[test]
    fn forged_state_file_of_another_user_or_writable_by_others_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        write_atomic(&p, &one_entry()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        for e in [read(&p).unwrap_err(), check_free(&p).unwrap_err(), restore(&p, Path::new("/proc")).unwrap_err()] {
            assert!(e.to_string().contains("writable by other users"), "{e}");
        }
        assert!(p.exists(), "a refused file is left in place");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        if euid() == 0 {
            // As root (CI) the file can be given to another user: uid 65534 (nobody).
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
            let e = restore(&p, Path::new("/proc")).unwrap_err().to_string();
            assert!(e.contains("belongs to uid 65534, not to you"), "{e}");
        }
    }

    #[test]
    fn restore_puts_back_only_threads_whose_pid_tid_and_start_time_match() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        let pid = std::process::id() as i32;
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
            let orig = crate::actuate::get_affinity(0).unwrap();
            crate::actuate::set_affinity(0, &CpuSet::single(orig.first().unwrap())).unwrap();
            tx.send((tid, orig)).unwrap();
            done_rx.recv().unwrap();
            crate::actuate::get_affinity(0).unwrap()
        });
        let (tid, orig) = rx.recv().unwrap();
        let st = read_task_stat(Path::new("/proc"), pid, tid).unwrap();
        let entry = |pid: i32, starttime: u64| StateEntry { tid, pid, target: "t".into(), starttime, original: orig };
        let s = StateFile {
            schema: STATE_SCHEMA.into(),
            agent_pid: 999_999_999,
            // pid 1 has no thread `tid` (gone); a wrong start time is a reused tid; the right identity is restored.
            entries: vec![entry(1, st.starttime), entry(pid, st.starttime + 1), entry(pid, st.starttime)],
        };
        write_atomic(&p, &s).unwrap();
        let r = restore(&p, Path::new("/proc")).unwrap();
        assert_eq!((r.gone, r.reused, r.restored), (vec![tid], vec![tid], vec![tid]));
        done_tx.send(()).unwrap();
        assert_eq!(h.join().unwrap(), orig);
    }
}
