//! The state file: every thread's original affinity, written atomically
//! (temporary file, fsync, rename) before the agent first changes that
//! thread, so that `ampsched restore` can undo the agent's changes after a
//! crash or `kill -9`. A clean exit restores and removes the file.
//!
//! A thread is identified by (tid, start time): a tid reused by a new thread
//! after the old one exited is never touched by `restore`.

use crate::actuate::{set_affinity, ActError};
use crate::procfs::read_task_stat;
use crate::AgentError;
use ampsched_model::CpuSet;
use serde::{Deserialize, Serialize};
use std::io::Write;
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

/// Default state file: `/run/ampsched/state.json` for root, else in `$XDG_RUNTIME_DIR` or `/tmp`.
pub fn default_path() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return PathBuf::from("/run/ampsched/state.json");
    }
    let dir = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"));
    dir.join(format!("ampsched-state-{uid}.json"))
}

/// Write `s` to `path` atomically (create the directory if needed).
pub fn write_atomic(path: &Path, s: &StateFile) -> Result<(), AgentError> {
    let e = |what: &str, err: std::io::Error| {
        AgentError::new(format!("{}: cannot {what} the state file: {err}", path.display()))
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|x| e("create the directory of", x))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let text = serde_json::to_string_pretty(s).map_err(|x| AgentError::new(format!("state file: {x}")))?;
    let mut f = std::fs::File::create(&tmp).map_err(|x| e("write", x))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.write_all(b"\n"))
        .and_then(|_| f.sync_all())
        .map_err(|x| e("write", x))?;
    std::fs::rename(&tmp, path).map_err(|x| e("rename into", x))?;
    Ok(())
}

/// Read a state file; `Ok(None)` when it does not exist.
pub fn read(path: &Path) -> Result<Option<StateFile>, AgentError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(AgentError::new(format!("{}: cannot read the state file: {e}", path.display()))),
    };
    let s: StateFile = serde_json::from_str(&text)
        .map_err(|e| AgentError::new(format!("{}: not an ampsched state file: {e}", path.display())))?;
    if s.schema != STATE_SCHEMA {
        return Err(AgentError::new(format!("{}: schema `{}`, expected `{STATE_SCHEMA}`", path.display(), s.schema)));
    }
    Ok(Some(s))
}

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
        assert!(read(&p).unwrap_err().to_string().contains("not an ampsched state file"));
    }
}
