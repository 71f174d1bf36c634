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
//! - `sleepy --threads T --secs S [--burst-us B] [--sleep-ms M]`: many threads
//!   that wake, spin briefly and sleep (agent overhead benchmark).
//!
//! Common: `--out FILE` (default stdout), `--sample-us U` (default 500).
//! A work unit is a fixed chain of 10 000 integer operations.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const UNIT: u64 = 10_000;

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

/// Per-thread sampler of where it runs.
struct Sampler {
    every: Duration,
    next: Instant,
    on_cpu: Vec<u64>,
}

impl Sampler {
    fn new(every: Duration) -> Sampler {
        Sampler { every, next: Instant::now() + every, on_cpu: vec![0; 64] }
    }
    fn tick(&mut self) {
        let now = Instant::now();
        if now >= self.next {
            let c = getcpu();
            if c >= self.on_cpu.len() {
                self.on_cpu.resize(c + 1, 0);
            }
            self.on_cpu[c] += 1;
            // Count run time only: after a long preemption or block, do not back-fill.
            self.next = if now - self.next > self.every { now + self.every } else { self.next + self.every };
        }
    }
    fn reset(&mut self) {
        self.next = Instant::now() + self.every;
    }
}

struct Args(Vec<String>);

impl Args {
    fn get<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        match self.0.iter().position(|a| a == name) {
            None => Ok(None),
            Some(i) => self.0.get(i + 1).and_then(|v| v.parse().ok()).map(Some).ok_or(format!("{name}: bad or missing value")),
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

fn trim(v: &mut Vec<u64>) {
    while v.len() > 1 && *v.last().unwrap() == 0 {
        v.pop();
    }
}

fn spin(a: &Args, sample: Duration) -> Result<serde_json::Value, String> {
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
                let mut s = Sampler::new(sample);
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
                (s.on_cpu, Instant::now())
            })
        })
        .collect();
    let mut on = Vec::new();
    let mut ends = Vec::new();
    for h in hs {
        let (v, end) = h.join().map_err(|_| "a worker panicked".to_string())?;
        merge(&mut on, &v);
        ends.push((end - t0).as_secs_f64());
    }
    trim(&mut on);
    Ok(serde_json::json!({"mode": "spin", "threads": threads, "elapsed_s": t0.elapsed().as_secs_f64(),
        "thread_elapsed_s": ends, "sample_us": sample.as_micros() as u64, "on_cpu": on,
        "samples": on.iter().sum::<u64>()}))
}

fn phased(a: &Args, sample: Duration) -> Result<serde_json::Value, String> {
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
    let on_all = Arc::new(Mutex::new(Vec::<u64>::new()));
    let spins = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|me| {
            let (cur, pair, on_all, spins) = (cur.clone(), pair.clone(), on_all.clone(), spins.clone());
            std::thread::spawn(move || {
                let mut s = Sampler::new(sample);
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
                merge(&mut on_all.lock().unwrap(), &s.on_cpu);
            })
        })
        .collect();
    for h in hs {
        h.join().map_err(|_| "a worker panicked".to_string())?;
    }
    let mut on = on_all.lock().unwrap().clone();
    trim(&mut on);
    Ok(serde_json::json!({"mode": "phased", "threads": threads, "phases": phases, "wait": if spin_wait {"spin"} else {"block"},
        "elapsed_s": t0.elapsed().as_secs_f64(), "sample_us": sample.as_micros() as u64, "on_cpu": on,
        "samples": on.iter().sum::<u64>()}))
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
        return Err("usage: ampsched-workload spin|phased|sleepy [options] (see the source's header)".into());
    };
    let a = Args(argv[1..].to_vec());
    let sample = Duration::from_micros(a.get("--sample-us")?.unwrap_or(500));
    let v = match mode.as_str() {
        "spin" => spin(&a, sample)?,
        "phased" => phased(&a, sample)?,
        "sleepy" => sleepy(&a)?,
        o => return Err(format!("unknown mode `{o}`; known: spin, phased, sleepy")),
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
