//! A minimal QMP client: find a QEMU VM's vCPU threads through its monitor
//! socket (`-qmp unix:PATH,server,wait=off`).
//!
//! Protocol (QEMU's qmp-spec): the server greets with `{"QMP": {...}}`; the
//! client sends `{"execute":"qmp_capabilities"}` and gets `{"return":{}}`;
//! then `{"execute":"query-cpus-fast"}` returns one object per vCPU with
//! `cpu-index` and `thread-id`. Asynchronous `{"event":…}` lines may arrive
//! at any time and are skipped. A socket that does not greet like QEMU within
//! the timeout is rejected with a clear error; nothing is sent to it after
//! the greeting check fails.

use crate::AgentError;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How long to wait for each QMP answer.
pub const QMP_TIMEOUT: Duration = Duration::from_secs(2);

/// One vCPU thread as QMP reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VcpuThread {
    /// vCPU index in the guest.
    pub cpu_index: u32,
    /// Host thread id.
    pub thread_id: i32,
}

fn read_msg(r: &mut BufReader<UnixStream>, path: &Path, what: &str) -> Result<Value, AgentError> {
    loop {
        let mut line = String::new();
        let n = r.read_line(&mut line).map_err(|e| {
            AgentError::new(format!(
                "{}: no {what} within {:?} ({e}): not a QEMU QMP socket?",
                path.display(),
                QMP_TIMEOUT
            ))
        })?;
        if n == 0 {
            return Err(AgentError::new(format!("{}: connection closed while waiting for {what}", path.display())));
        }
        let v: Value = serde_json::from_str(line.trim()).map_err(|_| {
            let shown: String = line.trim().chars().take(80).collect();
            AgentError::new(format!("{}: not a QEMU QMP socket: expected JSON, got `{shown}`", path.display()))
        })?;
        if v.get("event").is_some() {
            continue;
        }
        return Ok(v);
    }
}

fn command(r: &mut BufReader<UnixStream>, w: &mut UnixStream, path: &Path, cmd: &str) -> Result<Value, AgentError> {
    writeln!(w, "{{\"execute\":\"{cmd}\"}}")
        .map_err(|e| AgentError::new(format!("{}: cannot send {cmd}: {e}", path.display())))?;
    let v = read_msg(r, path, &format!("answer to {cmd}"))?;
    if let Some(e) = v.get("error") {
        return Err(AgentError::new(format!("{}: QEMU refused {cmd}: {e}", path.display())));
    }
    v.get("return")
        .cloned()
        .ok_or_else(|| AgentError::new(format!("{}: unexpected answer to {cmd}: {v}", path.display())))
}

/// Parse the `return` value of `query-cpus-fast`.
pub fn parse_cpus_fast(v: &Value) -> Result<Vec<VcpuThread>, String> {
    let list = v.as_array().ok_or("query-cpus-fast did not return a list")?;
    let mut out = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let idx = c.get("cpu-index").and_then(Value::as_u64).ok_or(format!("entry {i} has no cpu-index"))?;
        let tid = c.get("thread-id").and_then(Value::as_i64).ok_or(format!("entry {i} has no thread-id"))?;
        out.push(VcpuThread { cpu_index: idx as u32, thread_id: tid as i32 });
    }
    out.sort_by_key(|v| v.cpu_index);
    Ok(out)
}

/// No VM listens at `path`: no such file, or a stale socket left by a QEMU that exited.
fn absent(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused)
}

/// Like [`query_vcpus`], but `Ok(None)` when no VM listens at `path` (not started yet, or
/// exited): the daemon waits for such a VM instead of failing.
pub fn probe_vcpus(path: &Path) -> Result<Option<Vec<VcpuThread>>, AgentError> {
    match UnixStream::connect(path) {
        Err(e) if absent(&e) => Ok(None),
        Err(e) => Err(AgentError::new(format!("{}: cannot connect to the QMP socket: {e}", path.display()))),
        Ok(w) => query_on(w, path).map(Some),
    }
}

/// Ask the QMP socket at `path` for the VM's vCPU threads.
pub fn query_vcpus(path: &Path) -> Result<Vec<VcpuThread>, AgentError> {
    let w = UnixStream::connect(path)
        .map_err(|e| AgentError::new(format!("{}: cannot connect to the QMP socket: {e}", path.display())))?;
    query_on(w, path)
}

fn query_on(w: UnixStream, path: &Path) -> Result<Vec<VcpuThread>, AgentError> {
    let mut w = w;
    w.set_read_timeout(Some(QMP_TIMEOUT)).ok();
    w.set_write_timeout(Some(QMP_TIMEOUT)).ok();
    let mut r =
        BufReader::new(w.try_clone().map_err(|e| AgentError::new(format!("{}: socket error: {e}", path.display())))?);
    let greeting = read_msg(&mut r, path, "QMP greeting")?;
    if greeting.get("QMP").is_none() {
        return Err(AgentError::new(format!(
            "{}: not a QEMU QMP socket: the greeting has no \"QMP\" member: {greeting}",
            path.display()
        )));
    }
    command(&mut r, &mut w, path, "qmp_capabilities")?;
    let ret = command(&mut r, &mut w, path, "query-cpus-fast")?;
    parse_cpus_fast(&ret).map_err(|e| AgentError::new(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn serve(path: &Path, script: Vec<&'static str>) -> std::thread::JoinHandle<Vec<String>> {
        let l = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let mut got = Vec::new();
            for (i, line) in script.iter().enumerate() {
                if i > 0 {
                    let mut req = String::new();
                    if r.read_line(&mut req).unwrap_or(0) == 0 {
                        break;
                    }
                    got.push(req.trim().to_string());
                }
                writeln!(w, "{line}").unwrap();
            }
            got
        })
    }

    #[test]
    fn a_qemu_like_server_yields_vcpu_threads() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("qmp.sock");
        let h = serve(
            &p,
            vec![
                r#"{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}}, "capabilities": []}}"#,
                r#"{"return": {}}"#,
                // an event in between is skipped; vCPUs come back out of order
                "{\"event\": \"RESUME\"}\n{\"return\": [{\"cpu-index\": 1, \"thread-id\": 502}, {\"cpu-index\": 0, \"thread-id\": 501}]}",
            ],
        );
        let v = query_vcpus(&p).unwrap();
        assert_eq!(v, vec![VcpuThread { cpu_index: 0, thread_id: 501 }, VcpuThread { cpu_index: 1, thread_id: 502 }]);
        assert_eq!(h.join().unwrap(), vec![r#"{"execute":"qmp_capabilities"}"#, r#"{"execute":"query-cpus-fast"}"#]);
    }

    #[test]
    fn a_socket_that_is_not_qemu_is_rejected() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("other.sock");
        let h = serve(&p, vec!["220 smtp.example ESMTP ready"]);
        let e = query_vcpus(&p).unwrap_err().to_string();
        assert!(e.contains("not a QEMU QMP socket"), "{e}");
        h.join().unwrap();
        let e = query_vcpus(&d.path().join("missing.sock")).unwrap_err().to_string();
        assert!(e.contains("cannot connect"), "{e}");
        assert!(parse_cpus_fast(&serde_json::json!([{"cpu-index": 0}])).is_err());
    }
}
