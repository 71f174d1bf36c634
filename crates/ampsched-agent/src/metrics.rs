//! The opt-in metrics endpoint: Prometheus text format over plain HTTP on a
//! loopback address only (127.0.0.0/8 or ::1). The control loop renders the
//! text once per period and [`MetricsServer::publish`]es it; a small thread
//! answers `GET /metrics` with the latest text. Any other address is refused
//! before anything starts.

use crate::AgentError;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Parse a metrics address and refuse anything but loopback.
pub fn parse_loopback(addr: &str) -> Result<SocketAddr, AgentError> {
    let a: SocketAddr = addr.parse().map_err(|_| {
        AgentError::new(format!("metrics address `{addr}`: expected IP:PORT such as 127.0.0.1:9464 or [::1]:9464"))
    })?;
    if !a.ip().is_loopback() {
        return Err(AgentError::new(format!(
            "metrics address `{addr}`: refusing a non-loopback address; the endpoint is served on 127.0.0.0/8 or [::1] only"
        )));
    }
    Ok(a)
}

/// A running metrics endpoint.
pub struct MetricsServer {
    addr: SocketAddr,
    text: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Bind `addr` (loopback only) and start serving an empty page.
    pub fn start(addr: &str) -> Result<MetricsServer, AgentError> {
        let a = parse_loopback(addr)?;
        let l =
            TcpListener::bind(a).map_err(|e| AgentError::new(format!("metrics address {a}: cannot listen: {e}")))?;
        let addr = l.local_addr().map_err(|e| AgentError::new(format!("metrics: {e}")))?;
        let text = Arc::new(Mutex::new(String::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, s) = (text.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("ampsched-metrics".into())
            .spawn(move || serve(l, t, s))
            .map_err(|e| AgentError::new(format!("metrics: cannot start the server thread: {e}")))?;
        Ok(MetricsServer { addr, text, stop, handle: Some(handle) })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replace the served text.
    pub fn publish(&self, text: String) {
        if let Ok(mut g) = self.text.lock() {
            *g = text;
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept call.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(l: TcpListener, text: Arc<Mutex<String>>, stop: Arc<AtomicBool>) {
    for conn in l.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut c) = conn else { continue };
        c.set_read_timeout(Some(Duration::from_millis(500))).ok();
        c.set_write_timeout(Some(Duration::from_millis(500))).ok();
        let mut buf = [0u8; 1024];
        let n = c.read(&mut buf).unwrap_or(0);
        let req = String::from_utf8_lossy(&buf[..n]);
        let path = req.split_whitespace().nth(1).unwrap_or("");
        let (status, body) = if req.starts_with("GET ") && (path == "/metrics" || path == "/") {
            ("200 OK", text.lock().map(|g| g.clone()).unwrap_or_default())
        } else {
            ("404 Not Found", "only GET /metrics is served\n".to_string())
        };
        let _ = write!(
            c,
            "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

/// Escape a Prometheus label value.
pub fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only() {
        assert!(parse_loopback("127.0.0.1:9464").is_ok());
        assert!(parse_loopback("[::1]:9464").is_ok());
        let e = parse_loopback("0.0.0.0:9464").unwrap_err().to_string();
        assert!(e.contains("refusing a non-loopback address"), "{e}");
        assert!(parse_loopback("localhost").unwrap_err().to_string().contains("expected IP:PORT"));
        assert_eq!(label("a\"b"), "a\\\"b");
    }

    #[test]
    fn serves_the_published_text() {
        let s = MetricsServer::start("127.0.0.1:0").unwrap();
        s.publish("ampsched_up 1\n".into());
        let mut c = TcpStream::connect(s.local_addr()).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.0 200 OK"), "{out}");
        assert!(out.ends_with("ampsched_up 1\n"), "{out}");
        let mut c = TcpStream::connect(s.local_addr()).unwrap();
        c.write_all(b"GET /other HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.0 404"), "{out}");
    }
}
