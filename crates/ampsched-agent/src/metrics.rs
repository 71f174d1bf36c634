//! The opt-in metrics endpoint: Prometheus metrics over HTTP on a loopback
//! address only (127.0.0.0/8 or ::1). The control loop renders the text once
//! per period and [`MetricsServer::publish`]es it; the server answers
//! `GET /metrics` with the latest text. Any other address is refused before
//! anything starts.
//!
//! The server is hyper's HTTP/1 connection handler on a current-thread tokio
//! runtime in its own thread: every connection is its own task, so idle or
//! slow clients do not delay a scrape (the old one-connection-at-a-time loop
//! let 40 idle connections delay a scrape by 20 s). Each connection must send
//! its request headers within [`HEADER_TIMEOUT`] and is closed after
//! [`CONN_LIFETIME`] whatever it does; at most [`MAX_CONNECTIONS`] are open at
//! once (more are closed on accept).

use crate::AgentError;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Time a connection has to send its request headers (each request, on a kept-alive connection).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest a connection stays open.
pub const CONN_LIFETIME: Duration = Duration::from_secs(30);
/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 256;

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
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Bind `addr` (loopback only) and start serving an empty page.
    pub fn start(addr: &str) -> Result<MetricsServer, AgentError> {
        let a = parse_loopback(addr)?;
        let l = std::net::TcpListener::bind(a)
            .map_err(|e| AgentError::new(format!("metrics address {a}: cannot listen: {e}")))?;
        let addr = l.local_addr().map_err(|e| AgentError::new(format!("metrics: {e}")))?;
        l.set_nonblocking(true).map_err(|e| AgentError::new(format!("metrics: {e}")))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| AgentError::new(format!("metrics: cannot start the server runtime: {e}")))?;
        let text = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let t = text.clone();
        let handle = std::thread::Builder::new()
            .name("ampsched-metrics".into())
            .spawn(move || {
                // The accept loop and every connection are tasks; when the stop signal comes
                // (or the sender is dropped), block_on returns and dropping the runtime ends them.
                rt.spawn(serve(l, t));
                let _ = rt.block_on(rx);
            })
            .map_err(|e| AgentError::new(format!("metrics: cannot start the server thread: {e}")))?;
        Ok(MetricsServer { addr, text, stop: Some(tx), handle: Some(handle) })
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
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Content type of the served text (OpenMetrics, as prometheus-client encodes it).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn answer(req: &Request<hyper::body::Incoming>, text: &Mutex<String>) -> Response<Full<Bytes>> {
    let (status, ctype, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics" | "/") => {
            (StatusCode::OK, CONTENT_TYPE, text.lock().map(|g| g.clone()).unwrap_or_default())
        }
        _ => (StatusCode::NOT_FOUND, "text/plain", "only GET /metrics is served\n".to_string()),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

async fn serve(l: std::net::TcpListener, text: Arc<Mutex<String>>) {
    let Ok(l) = tokio::net::TcpListener::from_std(l) else { return };
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
    loop {
        let stream = match l.accept().await {
            Ok((s, _)) => s,
            // Out of file descriptors and the like: wait a little instead of spinning.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Over the limit: the connection is closed at once (dropped).
        let Ok(permit) = slots.clone().try_acquire_owned() else { continue };
        let text = text.clone();
        let served = http.serve_connection(
            TokioIo::new(stream),
            hyper::service::service_fn(move |req| {
                let r = answer(&req, &text);
                async move { Ok::<_, std::convert::Infallible>(r) }
            }),
        );
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONN_LIFETIME, served).await;
            drop(permit);
        });
    }
}

/// The kind of a metric family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up; exposed with the `_total` suffix (its name must end in `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
}

/// Label pairs of one sample.
pub type Labels = Vec<(String, String)>;

/// One period's metrics, encoded in the OpenMetrics text format by the
/// prometheus-client crate (escaping, `# HELP`/`# TYPE`, `_total`, `# EOF`).
#[derive(Debug, Default)]
pub struct Exposition {
    reg: prometheus_client::registry::Registry,
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Add a family: `name` (a counter's may end in `_total`, added back by the encoder),
    /// one sentence of help, and one value per label set.
    pub fn add(&mut self, name: &str, kind: Kind, help: &str, rows: Vec<(Labels, f64)>) {
        use prometheus_client::metrics::family::Family;
        use std::sync::atomic::AtomicU64;
        // The encoder appends the period itself, and writes label values as given: escape them.
        let help = help.trim_end_matches('.');
        let rows = rows.into_iter().map(|(l, v)| (l.into_iter().map(|(k, x)| (k, label(&x))).collect::<Labels>(), v));
        let rows: Vec<(Labels, f64)> = rows.collect();
        if let [(l, v)] = rows.as_slice() {
            if l.is_empty() {
                // A single unlabelled value: a plain metric (no `{}` after the name).
                match kind {
                    Kind::Counter => {
                        let c = prometheus_client::metrics::counter::Counter::<f64, AtomicU64>::default();
                        c.inc_by(*v);
                        self.reg.register(name.strip_suffix("_total").unwrap_or(name), help, c);
                    }
                    Kind::Gauge => {
                        let g = prometheus_client::metrics::gauge::Gauge::<f64, AtomicU64>::default();
                        g.set(*v);
                        self.reg.register(name, help, g);
                    }
                }
                return;
            }
        }
        match kind {
            Kind::Counter => {
                let f = Family::<Labels, prometheus_client::metrics::counter::Counter<f64, AtomicU64>>::default();
                for (l, v) in rows {
                    f.get_or_create(&l).inc_by(v);
                }
                self.reg.register(name.strip_suffix("_total").unwrap_or(name), help, f);
            }
            Kind::Gauge => {
                let f = Family::<Labels, prometheus_client::metrics::gauge::Gauge<f64, AtomicU64>>::default();
                for (l, v) in rows {
                    f.get_or_create(&l).set(v);
                }
                self.reg.register(name, help, f);
            }
        }
    }

    /// The text to serve.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut s, &self.reg);
        s
    }
}

/// Escape a Prometheus label value.
pub fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    #[test]
    fn loopback_only() {
        assert!(parse_loopback("127.0.0.1:9464").is_ok());
        assert!(parse_loopback("[::1]:9464").is_ok());
        let e = parse_loopback("0.0.0.0:9464").unwrap_err().to_string();
        assert!(e.contains("refusing a non-loopback address"), "{e}");
        assert!(parse_loopback("localhost").unwrap_err().to_string().contains("expected IP:PORT"));
        assert_eq!(label("a\"b"), "a\\\"b");
    }

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn exposition_is_openmetrics_text_from_prometheus_client() {
        let mut e = Exposition::new();
        let lab = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        e.add("ampsched_changes_total", Kind::Counter, "Changes made.", vec![(lab("target", "a\"b"), 3.0)]);
        e.add("ampsched_threads", Kind::Gauge, "Threads.", vec![(lab("target", "x"), 2.0), (lab("target", "y"), 0.5)]);
        e.add("ampsched_periods_total", Kind::Counter, "Periods.", vec![(Vec::new(), 7.0)]);
        let t = e.encode();
        assert!(t.contains("# HELP ampsched_changes Changes made.\n# TYPE ampsched_changes counter\n"), "{t}");
        // The label value's quote is escaped (prometheus-client writes values as given).
        assert!(t.contains("ampsched_changes_total{target=\"a\\\"b\"} 3.0\n"), "{t}");
        assert!(t.contains("ampsched_threads{target=\"y\"} 0.5\n"), "{t}");
        assert!(t.contains("\nampsched_periods_total 7.0\n"), "{t}");
        assert!(t.ends_with("# EOF\n"), "{t}");
    }

    #[test]
    fn serves_the_published_text() {
        let s = MetricsServer::start("127.0.0.1:0").unwrap();
        s.publish("ampsched_up 1\n".into());
        let out = get(s.local_addr(), "/metrics");
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert!(out.contains("application/openmetrics-text"), "{out}");
        assert!(out.ends_with("ampsched_up 1\n"), "{out}");
        let out = get(s.local_addr(), "/other");
        assert!(out.starts_with("HTTP/1.1 404"), "{out}");
        // An HTTP/1.0 client (no Host, closes after the answer) gets an HTTP/1.0 answer.
        let mut c = TcpStream::connect(s.local_addr()).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.0 200 OK") && out.ends_with("ampsched_up 1\n"), "{out}");
    }

    #[test]
    fn metrics_idle_connections_do_not_delay_a_scrape() {
        let s = MetricsServer::start("127.0.0.1:0").unwrap();
        s.publish("ampsched_up 1\n".into());
        // 40 idle connections (and one that sent half a request) stay open while a scrape is
        // served; the one-at-a-time server answered it only after every idle one timed out.
        let mut idle: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(s.local_addr()).unwrap()).collect();
        idle[0].write_all(b"GET /metr").unwrap();
        let out = get(s.local_addr(), "/metrics");
        assert!(out.ends_with("ampsched_up 1\n"), "{out}");
        // An idle connection is closed by the server once the header timeout passes: the read
        // ends (EOF or reset) instead of hanging until this test's own 20 s read timeout.
        let c = &mut idle[1];
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut buf = [0u8; 64];
        let r = c.read(&mut buf);
        assert!(
            !matches!(&r, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
            "{r:?}"
        );
    }
}
