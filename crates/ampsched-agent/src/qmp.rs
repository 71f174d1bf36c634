//! A minimal QMP client: find a QEMU VM's vCPU threads through its monitor
//! socket (`-qmp unix:PATH,server,wait=off`).
//!
//! Protocol (QEMU's qmp-spec): the server greets with `{"QMP": {...}}`; the
//! client sends `{"execute":"qmp_capabilities"}` and gets `{"return":{}}`;
//! then `{"execute":"query-cpus-fast"}` returns one object per vCPU with
//! `cpu-index` and `thread-id`. Asynchronous `{"event":…}` lines may arrive
//! at any time and are skipped. A socket that does not greet like QEMU is
//! rejected with a clear error; nothing is sent to it after the greeting
//! check fails.
//!
//! What a hostile or broken socket cannot do (docs/security.md): hold the
//! agent longer than [`QMP_TIMEOUT`] for the whole exchange (one deadline
//! for connect, greeting and both commands, not a timeout per read); grow
//! its memory past [`QMP_MAX_MESSAGE`] per message; delay a SIGTERM (the
//! waits poll the socket in 50 ms slices and stop when a signal is pending);
//! or make it manage another process: every thread id returned must be a
//! thread of the process that owns the socket (`SO_PEERCRED`, then
//! `/proc/<pid>/task/<tid>`), else nothing of that VM is managed.

use crate::signals;
use crate::AgentError;
use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Overall deadline of one query: connect, greeting and both commands together.
pub const QMP_TIMEOUT: Duration = Duration::from_secs(2);

/// Largest QMP message accepted, bytes. `query-cpus-fast` costs about 200
/// bytes per vCPU (QEMU's qmp-spec example), so 1 MiB covers 5 000 vCPUs.
pub const QMP_MAX_MESSAGE: usize = 1 << 20;

/// How often a wait for the socket looks at pending signals.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// One vCPU thread as QMP reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VcpuThread {
    /// vCPU index in the guest.
    pub cpu_index: u32,
    /// Host thread id.
    pub thread_id: i32,
}

/// A VM found through its QMP socket: the QEMU process that owns the socket
/// (its peer credentials) and its vCPU threads, each checked to be a thread of that process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QmpVm {
    /// Process id of the peer of the socket (`SO_PEERCRED`).
    pub pid: i32,
    /// vCPU threads, by vCPU index.
    pub vcpus: Vec<VcpuThread>,
}

/// One QMP connection with an overall deadline (monotonic time) and a message cap.
struct Conn<'a> {
    s: UnixStream,
    path: &'a Path,
    deadline: Duration,
    buf: Vec<u8>,
}

impl Conn<'_> {
    fn err(&self, msg: String) -> AgentError {
        AgentError::new(format!("{}: {msg}", self.path.display()))
    }

    /// Wait until the socket is readable (or writable), the deadline passes or a signal is pending.
    fn wait(&self, events: libc::c_short, what: &str) -> Result<(), AgentError> {
        loop {
            if let Some(sig) = signals::pending() {
                return Err(self.err(format!("interrupted by signal {sig} while waiting for {what}")));
            }
            let now = signals::monotonic();
            if now >= self.deadline {
                return Err(
                    self.err(format!("no {what} within {QMP_TIMEOUT:?}: not a QEMU QMP socket, or QEMU is hung"))
                );
            }
            let slice = (self.deadline - now).min(SIGNAL_POLL);
            let mut fd = libc::pollfd { fd: self.s.as_raw_fd(), events, revents: 0 };
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut fd, 1, slice.as_millis().max(1) as libc::c_int) };
            if r > 0 {
                return Ok(());
            }
            if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return Err(self.err(format!("poll: {}", std::io::Error::last_os_error())));
            }
        }
    }

    /// The next line (without the newline), at most [`QMP_MAX_MESSAGE`] bytes.
    fn line(&mut self, what: &str) -> Result<String, AgentError> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let rest = self.buf.split_off(i + 1);
                let line = std::mem::replace(&mut self.buf, rest);
                return Ok(String::from_utf8_lossy(&line[..i]).into_owned());
            }
            if self.buf.len() > QMP_MAX_MESSAGE {
                return Err(self.err(format!(
                    "the {what} is longer than {QMP_MAX_MESSAGE} bytes: not a QEMU QMP socket, refusing it"
                )));
            }
            self.wait(libc::POLLIN, what)?;
            let mut chunk = [0u8; 16384];
            match self.s.read(&mut chunk) {
                Ok(0) => return Err(self.err(format!("connection closed while waiting for {what}"))),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => {}
                Err(e) => return Err(self.err(format!("cannot read the {what}: {e}"))),
            }
        }
    }

    /// The next message that is not an asynchronous event.
    fn msg(&mut self, what: &str) -> Result<Value, AgentError> {
        loop {
            let line = self.line(what)?;
            let v = parse_message(&line).map_err(|e| self.err(e))?;
            if v.get("event").is_none() {
                return Ok(v);
            }
        }
    }

    fn send(&mut self, text: &[u8], what: &str) -> Result<(), AgentError> {
        let mut off = 0;
        while off < text.len() {
            self.wait(libc::POLLOUT, &format!("room to send {what}"))?;
            match self.s.write(&text[off..]) {
                Ok(n) => off += n,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => {}
                Err(e) => return Err(self.err(format!("cannot send {what}: {e}"))),
            }
        }
        Ok(())
    }

    fn command(&mut self, cmd: &str) -> Result<Value, AgentError> {
        self.send(format!("{{\"execute\":\"{cmd}\"}}\n").as_bytes(), cmd)?;
        let v = self.msg(&format!("answer to {cmd}"))?;
        if let Some(e) = v.get("error") {
            return Err(self.err(format!("QEMU refused {cmd}: {e}")));
        }
        v.get("return")
            .cloned()
            .ok_or_else(|| self.err(format!("unexpected answer to {cmd}: {}", shown(&v.to_string()))))
    }
}

fn shown(s: &str) -> String {
    let t: String = s.trim().chars().take(80).collect();
    if t.len() < s.trim().len() {
        format!("{t}…")
    } else {
        t
    }
}

/// Parse one QMP line as JSON (a clear error naming what came instead).
pub fn parse_message(line: &str) -> Result<Value, String> {
    serde_json::from_str(line.trim())
        .map_err(|_| format!("not a QEMU QMP socket: expected JSON, got `{}`", shown(line)))
}

/// Parse the `return` value of `query-cpus-fast`.
pub fn parse_cpus_fast(v: &Value) -> Result<Vec<VcpuThread>, String> {
    let list = v.as_array().ok_or("query-cpus-fast did not return a list")?;
    let mut out = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let idx = c.get("cpu-index").and_then(Value::as_u64).ok_or(format!("entry {i} has no cpu-index"))?;
        let tid = c.get("thread-id").and_then(Value::as_i64).ok_or(format!("entry {i} has no thread-id"))?;
        let idx = u32::try_from(idx).map_err(|_| format!("entry {i}: cpu-index {idx} is out of range"))?;
        let tid = i32::try_from(tid)
            .ok()
            .filter(|t| *t > 0)
            .ok_or(format!("entry {i}: thread-id {tid} is not a thread id (1..=2147483647)"))?;
        out.push(VcpuThread { cpu_index: idx, thread_id: tid });
    }
    out.sort_by_key(|v| v.cpu_index);
    Ok(out)
}

/// The process at the other end of a Unix socket (`SO_PEERCRED`), `None` when unknown.
pub fn peer_pid(s: &UnixStream) -> Option<i32> {
    let mut c = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a ucred buffer of the stated length.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut c as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0 && c.pid > 0).then_some(c.pid)
}

/// Refuse any thread id that is not a thread of `pid` (`<proc_root>/<pid>/task/<tid>` must exist):
/// a socket must not make the agent manage threads of another process.
pub fn check_threads(proc_root: &Path, pid: i32, vcpus: &[VcpuThread]) -> Result<(), String> {
    for v in vcpus {
        if !proc_root.join(pid.to_string()).join("task").join(v.thread_id.to_string()).exists() {
            return Err(format!(
                "vCPU {} thread-id {} is not a thread of process {pid}, which owns the socket: refusing to manage \
                 anything for this VM",
                v.cpu_index, v.thread_id
            ));
        }
    }
    Ok(())
}

/// No VM listens at `path`: no such file, or a stale socket left by a QEMU that exited.
fn absent(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused)
}

/// Like [`query_vcpus`], but `Ok(None)` when no VM listens at `path` (not started yet, or
/// exited): the daemon waits for such a VM instead of failing.
pub fn probe_vcpus(path: &Path) -> Result<Option<QmpVm>, AgentError> {
    match UnixStream::connect(path) {
        Err(e) if absent(&e) => Ok(None),
        Err(e) => Err(AgentError::new(format!("{}: cannot connect to the QMP socket: {e}", path.display()))),
        Ok(w) => query_on(w, path).map(Some),
    }
}

/// Ask the QMP socket at `path` for the VM's vCPU threads, within [`QMP_TIMEOUT`] in all.
pub fn query_vcpus(path: &Path) -> Result<QmpVm, AgentError> {
    let w = UnixStream::connect(path)
        .map_err(|e| AgentError::new(format!("{}: cannot connect to the QMP socket: {e}", path.display())))?;
    query_on(w, path)
}

fn query_on(s: UnixStream, path: &Path) -> Result<QmpVm, AgentError> {
    let deadline = signals::monotonic() + QMP_TIMEOUT;
    s.set_nonblocking(true).map_err(|e| AgentError::new(format!("{}: socket error: {e}", path.display())))?;
    let pid = peer_pid(&s).ok_or_else(|| {
        AgentError::new(format!("{}: cannot tell which process owns the QMP socket (SO_PEERCRED)", path.display()))
    })?;
    let mut c = Conn { s, path, deadline, buf: Vec::new() };
    let greeting = c.msg("QMP greeting")?;
    if greeting.get("QMP").is_none() {
        return Err(c.err(format!(
            "not a QEMU QMP socket: the greeting has no \"QMP\" member: {}",
            shown(&greeting.to_string())
        )));
    }
    c.command("qmp_capabilities")?;
    let ret = c.command("query-cpus-fast")?;
    let vcpus = parse_cpus_fast(&ret).map_err(|e| c.err(e))?;
    check_threads(Path::new("/proc"), pid, &vcpus).map_err(|e| c.err(e))?;
    Ok(QmpVm { pid, vcpus })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixListener;

    fn gettid() -> i32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    }

    const GREETING: &str =
        r#"{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}}, "capabilities": []}}"#;

    /// A fake QEMU in this process (so the socket's owner is this process): answers each request
    /// with the next line of `script`; `{tid}` in a line becomes the serving thread's id.
    fn serve(path: &Path, script: Vec<String>) -> std::thread::JoinHandle<(Vec<String>, i32)> {
        let l = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let tid = gettid();
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
                if writeln!(w, "{}", line.replace("{tid}", &tid.to_string())).is_err() {
                    break;
                }
            }
            // Live until the client hangs up, so this thread exists while its id is checked.
            let mut rest = String::new();
            let _ = r.read_to_string(&mut rest);
            (got, tid)
        })
    }

    #[test]
    fn a_qemu_like_server_yields_vcpu_threads() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("qmp.sock");
        let me = gettid();
        let h = serve(
            &p,
            vec![
                GREETING.into(),
                r#"{"return": {}}"#.into(),
                // an event in between is skipped; vCPUs come back out of order
                format!("{{\"event\": \"RESUME\"}}\n{{\"return\": [{{\"cpu-index\": 1, \"thread-id\": {me}}}, {{\"cpu-index\": 0, \"thread-id\": {{tid}}}}]}}"),
            ],
        );
        let vm = query_vcpus(&p).unwrap();
        let (got, server) = h.join().unwrap();
        assert_eq!(vm.pid, std::process::id() as i32);
        assert_eq!(
            vm.vcpus,
            vec![VcpuThread { cpu_index: 0, thread_id: server }, VcpuThread { cpu_index: 1, thread_id: me }]
        );
        assert_eq!(got, vec![r#"{"execute":"qmp_capabilities"}"#, r#"{"execute":"query-cpus-fast"}"#]);
    }

    #[test]
    fn a_socket_that_is_not_qemu_is_rejected() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("other.sock");
        let h = serve(&p, vec!["220 smtp.example ESMTP ready".into()]);
        let e = query_vcpus(&p).unwrap_err().to_string();
        assert!(e.contains("not a QEMU QMP socket"), "{e}");
        h.join().unwrap();
        let e = query_vcpus(&d.path().join("missing.sock")).unwrap_err().to_string();
        assert!(e.contains("cannot connect"), "{e}");
        assert!(parse_cpus_fast(&serde_json::json!([{"cpu-index": 0}])).is_err());
        let e = parse_cpus_fast(&serde_json::json!([{"cpu-index": 0, "thread-id": -4}])).unwrap_err();
        assert!(e.contains("thread-id -4 is not a thread id"), "{e}");
    }

    #[test]
    fn qmp_thread_ids_not_of_the_socket_owner_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("qmp.sock");
        // pid 1's thread: a thread of another process than this one, which owns the socket.
        let h = serve(
            &p,
            vec![
                GREETING.into(),
                r#"{"return": {}}"#.into(),
                r#"{"return": [{"cpu-index": 0, "thread-id": {tid}}, {"cpu-index": 1, "thread-id": 1}]}"#.into(),
            ],
        );
        let e = query_vcpus(&p).unwrap_err().to_string();
        h.join().unwrap();
        let me = std::process::id();
        assert!(e.contains(&format!("vCPU 1 thread-id 1 is not a thread of process {me}")), "{e}");
        assert!(e.contains("refusing to manage anything"), "{e}");
    }

    /// Serve raw bytes from `chunks`, waiting `gap` between them, ignoring requests.
    fn drip(path: &Path, chunks: Vec<Vec<u8>>, gap: Duration) -> std::thread::JoinHandle<usize> {
        let l = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut sent = 0;
            for c in chunks {
                if s.write_all(&c).is_err() {
                    break;
                }
                sent += 1;
                std::thread::sleep(gap);
            }
            sent
        })
    }

    #[test]
    fn qmp_slow_drip_hits_the_overall_deadline() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("drip.sock");
        // A valid greeting, one byte every 100 ms: each read is far within the deadline, the
        // whole greeting (95 bytes, 9.5 s) is not; a timeout per read would accept it.
        let chunks: Vec<Vec<u8>> = format!("{GREETING}\n").bytes().map(|b| vec![b]).collect();
        let n = chunks.len();
        let h = drip(&p, chunks, Duration::from_millis(100));
        let e = query_vcpus(&p).unwrap_err().to_string();
        assert!(e.contains("no QMP greeting within 2s"), "{e}");
        assert!(h.join().unwrap() < n, "the agent gave up before the greeting was complete");
    }

    #[test]
    fn qmp_endless_reply_is_capped() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("flood.sock");
        // 4 MiB without a newline, in 64 KiB writes, as fast as the reader takes it.
        let h = drip(&p, vec![vec![b'x'; 64 << 10]; 64], Duration::ZERO);
        let e = query_vcpus(&p).unwrap_err().to_string();
        assert!(e.contains(&format!("longer than {QMP_MAX_MESSAGE} bytes")), "{e}");
        // The reader stopped within one read of the cap: at most 1 MiB + 16 KiB read, while the
        // socket buffers (a few hundred KiB) hold the rest: not all 64 chunks were taken.
        assert!(h.join().unwrap() < 64);
    }
}
