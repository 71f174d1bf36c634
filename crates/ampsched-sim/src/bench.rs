//! The fixed benchmark cases of `ampsched bench` (issue: simulator foundation).
//!
//! Four machines from 4 to 256 CPUs under the credit dispatcher for 60 s of
//! simulated time. The figures (wall time, simulated seconds per wall second,
//! events per wall second, peak memory) are printed, never asserted.

use crate::library::Library;
use crate::scenario::{Scenario, ScenarioError};

/// A benchmark case.
pub struct Case {
    /// Short name (S, M, L, XL).
    pub name: &'static str,
    /// What it is.
    pub about: &'static str,
    /// Scenario text.
    pub toml: String,
}

/// The barrier-synchronised "M program": 5 ms phases, a sequential section every 10 phases.
const M_PROGRAM: &str = r#"workload = { model = "phased", phases = 100000, phase_ms = 5.0, serial_every = 10, serial_ms = 5.0, wait = "block" }"#;

fn machine(n_fast: u32, n_slow: u32, md_size: u32) -> String {
    format!(
        "[machine]\nmem_domain_size = {md_size}\ncpus = [{{ class = \"fast\", count = {n_fast} }}, {{ class = \"slow\", count = {n_slow} }}]\n"
    )
}

fn vms(n: u32, vcpus: u32, workload: &str) -> String {
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!("[[domain]]\nname = \"vm{i}\"\nvcpus = {vcpus}\n{workload}\n"));
    }
    s
}

/// The four cases.
pub fn cases() -> Vec<Case> {
    let head = "stop = { duration_s = 60 }\nstats_interval_ms = 1000\n";
    vec![
        Case {
            name: "S",
            about: "4 CPUs (1 fast, 3 slow), 4 single-vCPU VMs, CPU-bound",
            toml: format!("{head}{}{}", machine(1, 3, 4), vms(4, 1, r#"workload = { model = "cpu-bound" }"#)),
        },
        Case {
            name: "M",
            about: "8 CPUs (1 fast, 7 slow), 4 VMs × 4 vCPUs, barrier phases",
            toml: format!("{head}{}{}", machine(1, 7, 4), vms(4, 4, M_PROGRAM)),
        },
        Case {
            name: "L",
            about: "64 CPUs (16 fast, 48 slow, 8 memory domains), 32 VMs × 8 vCPUs, M program",
            toml: format!("{head}{}{}", machine(16, 48, 8), vms(32, 8, M_PROGRAM)),
        },
        Case {
            name: "XL",
            about: "256 CPUs (64 fast, 192 slow, 32 memory domains), 128 VMs × 8 vCPUs, M program",
            toml: format!("{head}{}{}", machine(64, 192, 8), vms(128, 8, M_PROGRAM)),
        },
    ]
}

/// Load a case as a scenario.
pub fn scenario(case: &Case, lib: &Library) -> Result<Scenario, ScenarioError> {
    Scenario::parse(&case.toml, &format!("<bench {}>", case.name), &format!("bench-{}", case.name), lib)
}

/// Peak resident memory of this process so far, bytes (Linux `VmHWM`), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// CPU time consumed by the calling thread so far, ns (Linux
/// `/proc/thread-self/schedstat`), if known: a figure that stays meaningful
/// when other work shares the machine, unlike wall time.
pub fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}
