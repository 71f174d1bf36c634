//! `ampsched-hog`: a real-time duty-cycle hog that emulates a slow core.
//!
//! Pinned to one CPU, SCHED_FIFO, it spins `--spin-ms` then sleeps
//! `--sleep-ms` (default 5 / 5: the CPU is left at about half speed for normal
//! threads). It stops by itself after `--secs` (default 600) so a crashed
//! test can never leave it running for long; tests stop it by PID first.
//!
//! Usage: `ampsched-hog [--cpu N] [--spin-ms X] [--sleep-ms Y] [--prio P] [--secs S]`

use std::time::{Duration, Instant};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => {
            args.get(i + 1).and_then(|v| v.parse().ok()).ok_or_else(|| format!("{name}: expected a number after it"))
        }
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("ampsched-hog [--cpu N] [--spin-ms X] [--sleep-ms Y] [--prio P] [--secs S]");
        return Ok(());
    }
    let cpu: usize = arg(&args, "--cpu", 1)?;
    let spin = Duration::from_secs_f64(arg::<f64>(&args, "--spin-ms", 5.0)? / 1e3);
    let sleep = Duration::from_secs_f64(arg::<f64>(&args, "--sleep-ms", 5.0)? / 1e3);
    let prio: i32 = arg(&args, "--prio", 10)?;
    let secs: f64 = arg(&args, "--secs", 600.0)?;
    // SAFETY: plain libc calls on the calling thread with valid arguments.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!("cannot pin to CPU {cpu}: {}", std::io::Error::last_os_error()));
        }
        let p = libc::sched_param { sched_priority: prio };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) != 0 {
            return Err(format!(
                "cannot become SCHED_FIFO {prio} (root or CAP_SYS_NICE needed): {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    println!("ampsched-hog pid {} cpu {cpu} spin {:?} sleep {:?}", std::process::id(), spin, sleep);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut x = 0u64;
    while Instant::now() < end {
        let t = Instant::now();
        while t.elapsed() < spin {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        std::thread::sleep(sleep);
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("ampsched-hog: error: {e}");
        std::process::exit(2);
    }
}
