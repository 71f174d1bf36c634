//! `ampsched-workload`: small real workloads for the agent's tests and
//! benchmark. Each reports, as one JSON line, its elapsed time and where it
//! ran *from its own view*: every `--sample-us` of its own run time a thread
//! records `sched_getcpu()`, so `on_cpu[c] × sample_us` estimates its run
//! time on CPU `c`.
//!
//! - `spin [--threads T] (--secs S | --units N)`: CPU-bound threads.
//! - `phased [--threads T] --phases P (--phase-ms W | --phase-units N) [--wait block|spin]`:
//!   sequential phases; phase k runs on thread k mod T while the others wait
//!   (blocked on a condition variable, or spinning on an atomic). Samples are
//!   taken by the working thread only.
//! - `barrier [--threads T] --phases P --phase-units N [--wait block|spin]`:
//!   SPMD phases: every thread works N units, then all meet at a barrier
//!   (blocking, or spinning on an atomic). A phase lasts as long as its slowest
//!   thread, so a thread left on a slow CPU delays them all.
//! - `sleepy --threads T --secs S [--burst-us B] [--sleep-ms M]`: many threads
//!   that wake, spin briefly and sleep (agent overhead benchmark).
//!
//! Common: `--out FILE` (default stdout).
//! A work unit is a fixed chain of 2 000 integer operations.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const UNIT: u64 = 2_000;

fn work(units: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..units * UNIT {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    std::hint::black_box(x)
}

fn getcpu() -> usize {
    // SAFETY: no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    c.max(0) as usize
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Per-thread record of where it runs: after every small chunk of work the
/// thread reads its own CPU time and `sched_getcpu()` and charges the CPU time
/// since the previous sample to that CPU.
struct Sampler {
    last: Duration,
    on_cpu_ns: Vec<u64>,
    samples: Vec<u64>,
}

impl Sampler {
    fn new() -> Sampler {
        Sampler { last: thread_cpu(), on_cpu_ns: vec![0; 64], samples: vec![0; 64] }
    }
    fn tick(&mut self) {
        let now = thread_cpu();
        let c = getcpu();
        if c >= self.on_cpu_ns.len() {
            self.on_cpu_ns.resize(c + 1, 0);
            self.samples.resize(c + 1, 0);
        }
        self.on_cpu_ns[c] += now.saturating_sub(self.last).as_nanos() as u64;
        self.samples[c] += 1;
        self.last = now;
    }
    /// Forget the time since the last sample (it was spent waiting, not working).
    fn reset(&mut self) {
        self.last = thread_cpu();
    }
    /// Add this thread's samples to the workload's (per CPU: run ns, samples).
    fn add_to(&self, all: &Mutex<(Vec<u64>, Vec<u64>)>) {
        let mut g = all.lock().unwrap();
        merge(&mut g.0, &self.on_cpu_ns);
        merge(&mut g.1, &self.samples);
    }
}

/// Wait for the workers, then hand back their merged samples (per CPU: run ns, samples).
fn join_samples(
    hs: Vec<std::thread::JoinHandle<()>>,
    all: &Mutex<(Vec<u64>, Vec<u64>)>,
) -> Result<(Vec<u64>, Vec<u64>), String> {
    for h in hs {
        h.join().map_err(|_| "a worker panicked".to_string())?;
    }
    Ok(all.lock().unwrap().clone())
}

struct Args(Vec<String>);

impl Args {
    fn get<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        match self.0.iter().position(|a| a == name) {
            None => Ok(None),
            Some(i) => {
                self.0.get(i + 1).and_then(|v| v.parse().ok()).map(Some).ok_or(format!("{name}: bad or missing value"))
            }
        }
    }
    fn str(&self, name: &str) -> Option<String> {
        self.0.iter().position(|a| a == name).and_then(|i| self.0.get(i + 1).cloned())
    }
}

fn merge(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

fn trim(v: &mut Vec<u64>, len: usize) {
    v.resize(len.max(1), 0);
}

fn report(
    mode: &str,
    threads: usize,
    elapsed: Duration,
    mut on: Vec<u64>,
    mut n: Vec<u64>,
    extra: serde_json::Value,
) -> serde_json::Value {
    let used = n.iter().rposition(|x| *x > 0).map(|i| i + 1).unwrap_or(1);
    trim(&mut on, used);
    trim(&mut n, used);
    let total: u64 = on.iter().sum();
    let mut v = serde_json::json!({"mode": mode, "threads": threads, "elapsed_s": elapsed.as_secs_f64(),
        "on_cpu_s": on.iter().map(|x| *x as f64 / 1e9).collect::<Vec<_>>(),
        "run_s": total as f64 / 1e9, "samples": n});
    if let (serde_json::Value::Object(m), serde_json::Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v
}

fn spin(a: &Args) -> Result<serde_json::Value, String> {
    let threads: usize = a.get("--threads")?.unwrap_or(1);
    let secs: Option<f64> = a.get("--secs")?;
    let units: Option<u64> = a.get("--units")?;
    if secs.is_none() == units.is_none() {
        return Err("spin: give exactly one of --secs, --units".into());
    }
    let t0 = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = Sampler::new();
                let end = secs.map(|x| Instant::now() + Duration::from_secs_f64(x));
                let mut done = 0u64;
                loop {
                    work(1);
                    done += 1;
                    s.tick();
                    match (end, units) {
                        (Some(e), _) if Instant::now() >= e => break,
                        (_, Some(u)) if done >= u => break,
                        _ => {}
                    }
                }
                (s.on_cpu_ns, s.samples, Instant::now())
            })
        })
        .collect();
    let (mut on, mut n) = (Vec::new(), Vec::new());
    let mut ends = Vec::new();
    for h in hs {
        let (v, k, end) = h.join().map_err(|_| "a worker panicked".to_string())?;
        merge(&mut on, &v);
        merge(&mut n, &k);
        ends.push((end - t0).as_secs_f64());
    }
    Ok(report("spin", threads, t0.elapsed(), on, n, serde_json::json!({"thread_elapsed_s": ends})))
}

fn phased(a: &Args) -> Result<serde_json::Value, String> {
    let threads: usize = a.get("--threads")?.unwrap_or(4);
    let phases: usize = a.get("--phases")?.ok_or("phased: --phases is required")?;
    let phase_ms: Option<f64> = a.get("--phase-ms")?;
    let phase_units: Option<u64> = a.get("--phase-units")?;
    if phase_ms.is_none() == phase_units.is_none() {
        return Err("phased: give exactly one of --phase-ms, --phase-units".into());
    }
    let spin_wait = match a.str("--wait").as_deref() {
        None | Some("block") => false,
        Some("spin") => true,
        Some(o) => return Err(format!("--wait: block or spin, got {o}")),
    };
    let cur = Arc::new(AtomicUsize::new(0));
    let pair = Arc::new((Mutex::new(0usize), Condvar::new()));
    let on_all = Arc::new(Mutex::new((Vec::<u64>::new(), Vec::<u64>::new())));
    let spins = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|me| {
            let (cur, pair, on_all, spins) = (cur.clone(), pair.clone(), on_all.clone(), spins.clone());
            std::thread::spawn(move || {
                let mut s = Sampler::new();
                let mut k = me;
                while k < phases {
                    // Wait for phase k.
                    if spin_wait {
                        let mut n = 0u64;
                        while cur.load(Ordering::Acquire) != k {
                            std::hint::spin_loop();
                            n += 1;
                        }
                        spins.fetch_add(n, Ordering::Relaxed);
                    } else {
                        let (m, cv) = &*pair;
                        let mut g = m.lock().unwrap();
                        while *g != k {
                            g = cv.wait(g).unwrap();
                        }
                    }
                    s.reset();
                    match (phase_ms, phase_units) {
                        (Some(ms), _) => {
                            let end = Instant::now() + Duration::from_secs_f64(ms / 1e3);
                            while Instant::now() < end {
                                work(1);
                                s.tick();
                            }
                        }
                        (_, Some(u)) => {
                            for _ in 0..u {
                                work(1);
                                s.tick();
                            }
                        }
                        _ => unreachable!(),
                    }
                    // Hand over.
                    if spin_wait {
                        cur.store(k + 1, Ordering::Release);
                    } else {
                        let (m, cv) = &*pair;
                        *m.lock().unwrap() = k + 1;
                        cv.notify_all();
                    }
                    k += threads;
                }
                s.add_to(&on_all);
            })
        })
        .collect();
    let (on, n) = join_samples(hs, &on_all)?;
    let extra = serde_json::json!({"phases": phases, "wait": if spin_wait {"spin"} else {"block"}});
    Ok(report("phased", threads, t0.elapsed(), on, n, extra))
}

fn barrier(a: &Args) -> Result<serde_json::Value, String> {
    let threads: usize = a.get("--threads")?.unwrap_or(2);
    let phases: u64 = a.get("--phases")?.ok_or("barrier: --phases is required")?;
    let units: u64 = a.get("--phase-units")?.ok_or("barrier: --phase-units is required")?;
    let spin_wait = match a.str("--wait").as_deref() {
        None | Some("block") => false,
        Some("spin") => true,
        Some(o) => return Err(format!("--wait: block or spin, got {o}")),
    };
    if threads == 0 {
        return Err("barrier: --threads must be ≥ 1".into());
    }
    // Spinning barrier: arrivals counted; the last arrival of phase k opens phase k + 1.
    let arrived = Arc::new(AtomicUsize::new(0));
    let phase = Arc::new(AtomicU64::new(0));
    let blocking = Arc::new(std::sync::Barrier::new(threads));
    let on_all = Arc::new(Mutex::new((Vec::<u64>::new(), Vec::<u64>::new())));
    let waited = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let (arrived, phase, blocking, on_all, waited) =
                (arrived.clone(), phase.clone(), blocking.clone(), on_all.clone(), waited.clone());
            std::thread::spawn(move || {
                let mut s = Sampler::new();
                for k in 0..phases {
                    s.reset();
                    for _ in 0..units {
                        work(1);
                        s.tick();
                    }
                    let w0 = Instant::now();
                    if spin_wait {
                        if arrived.fetch_add(1, Ordering::AcqRel) + 1 == threads {
                            arrived.store(0, Ordering::Relaxed);
                            phase.store(k + 1, Ordering::Release);
                        } else {
                            while phase.load(Ordering::Acquire) <= k {
                                std::hint::spin_loop();
                            }
                        }
                    } else {
                        blocking.wait();
                    }
                    waited.fetch_add(w0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
                s.add_to(&on_all);
            })
        })
        .collect();
    let (on, n) = join_samples(hs, &on_all)?;
    let extra = serde_json::json!({"phases": phases, "wait": if spin_wait {"spin"} else {"block"},
                                   "barrier_wait_s": waited.load(Ordering::Relaxed) as f64 / 1e9});
    Ok(report("barrier", threads, t0.elapsed(), on, n, extra))
}

fn sleepy(a: &Args) -> Result<serde_json::Value, String> {
    let threads: usize = a.get("--threads")?.unwrap_or(64);
    let secs: f64 = a.get("--secs")?.ok_or("sleepy: --secs is required")?;
    let burst = Duration::from_micros(a.get("--burst-us")?.unwrap_or(200));
    let nap = Duration::from_secs_f64(a.get::<f64>("--sleep-ms")?.unwrap_or(50.0) / 1e3);
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(secs);
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                while Instant::now() < end {
                    let b = Instant::now();
                    while b.elapsed() < burst {
                        work(1);
                    }
                    std::thread::sleep(nap);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().map_err(|_| "a worker panicked".to_string())?;
    }
    Ok(serde_json::json!({"mode": "sleepy", "threads": threads, "elapsed_s": t0.elapsed().as_secs_f64()}))
}

fn run() -> Result<(), String> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(mode) = argv.first().cloned() else {
        return Err("usage: ampsched-workload spin|phased|barrier|sleepy [options] (see the source's header)".into());
    };
    let a = Args(argv[1..].to_vec());
    let v = match mode.as_str() {
        "spin" => spin(&a)?,
        "phased" => phased(&a)?,
        "barrier" => barrier(&a)?,
        "sleepy" => sleepy(&a)?,
        o => return Err(format!("unknown mode `{o}`; known: spin, phased, barrier, sleepy")),
    };
    match a.str("--out") {
        Some(p) => std::fs::write(&p, format!("{v}\n")).map_err(|e| format!("{p}: {e}"))?,
        None => println!("{v}"),
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("ampsched-workload: error: {e}");
        std::process::exit(2);
    }
}
