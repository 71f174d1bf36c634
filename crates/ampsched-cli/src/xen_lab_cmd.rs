//! `ampsched xen-lab`: the real-Xen lab (docs/xen.md) from the `ampsched`
//! command. Thin: it finds `scripts/xen-lab/lab.py` (the lab's one driver:
//! scenario checks, package fetch, hypervisor build, QEMU boots, the
//! comparison with the simulator), runs it with `python3`, forwards SIGINT
//! and SIGTERM to it (lab.py then kills QEMU and its helpers), and exits with
//! its status: 0 ok, 1 a smoke check failed, 2 bad input or a missing
//! package, named by lab.py before anything boots.
//!
//! The lab's comparison runs the simulator: it is given this very binary
//! (`AMPSCHED_BIN`), so `ampsched xen-lab compare` and `ampsched sim` agree.

use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

/// Arguments of `ampsched xen-lab`.
#[derive(Args, Debug)]
pub struct XenLabArgs {
    #[command(subcommand)]
    cmd: XenLabCmd,
    /// The lab's directory (default: `scripts/xen-lab` of the checkout, found from
    /// `$AMPSCHED_XEN_LAB`, the current directory upwards, or where this binary was built).
    #[arg(long, global = true)]
    lab: Option<PathBuf>,
}

/// The lab's steps (each runs `scripts/xen-lab/lab.py STEP …`).
#[derive(Subcommand, Debug)]
enum XenLabCmd {
    /// CI smoke: build, boot, check the patched scheduler runs and a two-domain scenario's structure (no timing).
    Smoke {
        /// Output directory (default: a new temporary one).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Fetch the Xen source and binaries by package name and build the patched hypervisor.
    Build,
    /// Build and assemble the dom0 and guest images (everything a run needs).
    Prepare,
    /// Check a lab scenario and print the script dom0 would run (no boot).
    Check {
        /// Lab scenario (TOML, see scripts/xen-lab/scenarios/).
        scenario: PathBuf,
    },
    /// Boot Xen under QEMU, run a lab scenario, write summary.json.
    Run {
        /// Lab scenario (TOML).
        scenario: PathBuf,
        /// Output directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Boots (each one run).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        runs: u32,
        /// Override the scenario's scheduler: credit | aash.
        #[arg(long)]
        sched: Option<String>,
        /// Override the scenario's co-scheduling: none | cs | cds | pcs | bcs.
        #[arg(long)]
        cosched: Option<String>,
        /// Override the scenario's glibc rseq registration in the guests: on | off.
        #[arg(long)]
        rseq: Option<String>,
        /// Override the scenario's QEMU TCG threading: multi | single.
        #[arg(long)]
        tcg: Option<String>,
        /// Override the scenario's guest type: pv | pvh.
        #[arg(long)]
        guest: Option<String>,
    },
    /// Measure each emulated pCPU's speed from inside a guest.
    Calibrate {
        /// Output directory.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run the comparison cases in the lab and in the simulator; write comparison.json.
    Compare {
        /// Output directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// A calibration.json from `calibrate` (default: calibrate first).
        #[arg(long)]
        calibration: Option<PathBuf>,
        /// Only these cases (credit-weights, aash-fair, aash-aware, lu-solo-con).
        #[arg(long, num_args = 1..)]
        only: Vec<String>,
        /// Simulator seeds per case.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
        seeds: u32,
        /// Reuse the lab boots already in --out (redo the simulator side only).
        #[arg(long)]
        reuse: bool,
        /// Boot the cases only, no simulator (then --reuse for the rows).
        #[arg(long)]
        lab_only: bool,
        /// Shortest run burst given to the simulator's host noise, ms (lab.py's default when omitted; >= 0).
        #[arg(long, value_parser = non_negative_ms)]
        min_burst_ms: Option<f64>,
    },
    /// Print a comparison.json as the markdown table of docs/xen.md.
    Table {
        /// comparison.json from `compare`.
        comparison: PathBuf,
    },
}

impl XenLabCmd {
    /// lab.py's argument list for this step.
    fn lab_args(&self) -> Vec<String> {
        fn out(v: &mut Vec<String>, o: &Option<PathBuf>) {
            if let Some(o) = o {
                v.extend(["--out".into(), o.display().to_string()]);
            }
        }
        let mut v: Vec<String> = Vec::new();
        match self {
            XenLabCmd::Smoke { out: o } => {
                v.push("smoke".into());
                out(&mut v, o);
            }
            XenLabCmd::Build => v.push("build".into()),
            XenLabCmd::Prepare => v.push("prepare".into()),
            XenLabCmd::Check { scenario } => v.extend(["check".into(), scenario.display().to_string()]),
            XenLabCmd::Run { scenario, out: o, runs, sched, cosched, rseq, tcg, guest } => {
                v.extend(["run".into(), scenario.display().to_string(), "--runs".into(), runs.to_string()]);
                out(&mut v, o);
                let overrides =
                    [("--sched", sched), ("--cosched", cosched), ("--rseq", rseq), ("--tcg", tcg), ("--guest", guest)];
                for (flag, val) in overrides {
                    if let Some(x) = val {
                        v.extend([flag.into(), x.clone()]);
                    }
                }
            }
            XenLabCmd::Calibrate { out: o } => {
                v.push("calibrate".into());
                out(&mut v, o);
            }
            XenLabCmd::Compare { out: o, calibration, only, seeds, reuse, lab_only, min_burst_ms } => {
                v.push("compare".into());
                out(&mut v, o);
                if let Some(c) = calibration {
                    v.extend(["--calibration".into(), c.display().to_string()]);
                }
                if !only.is_empty() {
                    v.push("--only".into());
                    v.extend(only.iter().cloned());
                }
                v.extend(["--seeds".into(), seeds.to_string()]);
                if let Some(ms) = min_burst_ms {
                    v.extend(["--min-burst-ms".into(), ms.to_string()]);
                }
                for (flag, on) in [("--reuse", reuse), ("--lab-only", lab_only)] {
                    if *on {
                        v.push(flag.into());
                    }
                }
            }
            XenLabCmd::Table { comparison } => v.extend(["table".into(), comparison.display().to_string()]),
        }
        v
    }
}

/// `--min-burst-ms`: a finite number of ms, at least 0.
fn non_negative_ms(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{s}: a duration in ms, at least 0 (e.g. 0 or 0.5)")),
    }
}

/// The lab directory: `--lab`, `$AMPSCHED_XEN_LAB`, `scripts/xen-lab` above the
/// current directory, or the checkout this binary was built from.
fn find_lab(given: Option<&Path>) -> Result<PathBuf, String> {
    let has_driver = |d: &Path| d.join("lab.py").is_file();
    if let Some(d) = given.map(Path::to_path_buf).or_else(|| std::env::var_os("AMPSCHED_XEN_LAB").map(PathBuf::from)) {
        return if has_driver(&d) {
            Ok(d)
        } else {
            Err(format!("{}: not the Xen lab (no lab.py there); give the checkout's scripts/xen-lab", d.display()))
        };
    }
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let found = cwd
        .ancestors()
        .chain(std::iter::once(built.as_path()))
        .map(|a| a.join("scripts/xen-lab"))
        .find(|d| has_driver(d));
    found.ok_or_else(|| {
        format!(
            "scripts/xen-lab/lab.py not found above {} nor in the checkout this binary was built from; \
             run from the ampsched checkout or give --lab DIR (or AMPSCHED_XEN_LAB)",
            cwd.display()
        )
    })
}

/// `python3` with `tomllib` (3.11+), which lab.py needs.
fn check_python() -> Result<(), String> {
    let r = Command::new("python3").args(["-c", "import tomllib"]).output();
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err("python3 not found: the Xen lab needs python3 ≥ 3.11 (apt-get install python3)".into())
        }
        Err(e) => Err(format!("python3: {e}")),
        Ok(o) if !o.status.success() => {
            let err = String::from_utf8_lossy(&o.stderr);
            if err.contains("tomllib") {
                Err("python3 has no tomllib: the Xen lab needs python3 ≥ 3.11 (Debian 12's python3)".into())
            } else {
                Err(format!("python3 does not run: {}", err.trim()))
            }
        }
        Ok(_) => Ok(()),
    }
}

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

/// Run `ampsched xen-lab STEP …`: lab.py's exit status becomes ours.
pub fn xen_lab(a: XenLabArgs) -> Result<(), String> {
    let lab = find_lab(a.lab.as_deref())?;
    check_python()?;
    let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let mut child = Command::new("python3")
        .arg(lab.join("lab.py"))
        .args(a.cmd.lab_args())
        .env("AMPSCHED_BIN", exe)
        .spawn()
        .map_err(|e| format!("python3 {}: {e}", lab.join("lab.py").display()))?;
    // SIGINT from a terminal reaches lab.py too (same process group); a SIGTERM sent to
    // this process alone is passed on, so lab.py's own cleanup kills QEMU.
    // SAFETY: the handler only stores into an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    let mut forwarded = false;
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| format!("waiting for lab.py: {e}"))? {
            break s;
        }
        if !forwarded && SIGNAL.load(Ordering::SeqCst) != 0 {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            forwarded = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    match status.code() {
        Some(0) => Ok(()),
        // lab.py has printed its own message (bad scenario, missing package, failed check).
        Some(c) => std::process::exit(c),
        None => std::process::exit(130),
    }
}
