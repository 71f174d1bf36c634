//! `ampsched validate`: the thin CLI over `ampsched_lab::validate` — detects
//! the machine, installs the SIGINT/SIGTERM handler, writes the outputs.

use ampsched_agent::control::DEFAULT_PERIOD_MS;
use ampsched_agent::decide::agent_params;
use ampsched_agent::{discover, Overrides};
use ampsched_lab::validate::{self, Options, Slow, Workload};
use ampsched_model::spec::PolicySpec;
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Arguments of `ampsched validate`.
#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// rt-app JSON file, or a built-in `ampsched-workload` program
    /// `builtin:NAME[:threads=T,phases=P,phase_ms=W]` (NAME: barrier-block,
    /// barrier-spin, phased, phased-spin, spin); omit with --suite.
    workload: Option<String>,
    /// Run every *.json of this directory.
    #[arg(long)]
    suite: Option<PathBuf>,
    /// A placer to run under the agent besides default Linux; repeatable.
    #[arg(long = "placer")]
    placers: Vec<String>,
    /// Repetitions per configuration (and simulated seeds).
    #[arg(long, default_value_t = 3)]
    reps: u32,
    /// Slow a CPU with the SCHED_FIFO hog: CPU:SPIN_US/PERIOD_US (e.g. 1:5000/10000).
    #[arg(long)]
    slow: Option<String>,
    /// Write every run as JSON rows.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an HTML page with the side-by-side figure.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Run even on a busy machine.
    #[arg(long)]
    force: bool,
    /// Simulate only (no real runs).
    #[arg(long)]
    sim_only: bool,
    /// No real runs: simulate again against the real rows of an earlier
    /// `--json` file of this machine (its calibration, speed and unit).
    #[arg(long, value_name = "FILE")]
    resim: Option<PathBuf>,
    /// Simulate each placer's decisions put in force as decided every period, without the
    /// agent's body (contention gate, reaction to an idle fast CPU, back-off).
    #[arg(long)]
    sim_direct: bool,
    /// The simulated agent's reaction to an idle fast CPU, µs (default: the agent's measured
    /// median, 88 µs, docs/agent.md).
    #[arg(long, value_name = "US")]
    sim_reaction_us: Option<f64>,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Run `ampsched validate`.
pub fn validate(a: ValidateArgs) -> Result<(), String> {
    let workloads = match (&a.workload, &a.suite) {
        (Some(w), None) => vec![Workload::parse(w)?],
        (None, Some(d)) => validate::suite_files(d).map_err(|e| e.msg)?.into_iter().map(Workload::RtApp).collect(),
        _ => return Err("give a WORKLOAD file or --suite DIR (not both)".into()),
    };
    let slow = a.slow.as_deref().map(Slow::parse).transpose()?;
    if a.sim_direct && a.sim_reaction_us.is_some() {
        return Err("--sim-reaction-us is the agent body's: it has no effect with --sim-direct".into());
    }
    if a.reps == 0 {
        return Err("--reps must be ≥ 1".into());
    }
    let d = discover(Path::new("/"), &Overrides::default()).map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    // Each placer runs in the simulator with the parameters the agent gives it here.
    let mut sim_params = std::collections::BTreeMap::new();
    for p in &a.placers {
        let spec = PolicySpec { name: p.clone(), params: Default::default() };
        sim_params.insert(p.clone(), agent_params(&spec, DEFAULT_PERIOD_MS).map_err(|e| e.to_string())?);
    }
    let o = Options {
        workloads,
        placers: a.placers,
        reps: a.reps,
        slow,
        force: a.force,
        ampsched: exe.clone(),
        hog: dir.join("ampsched-hog"),
        workload_bin: dir.join("ampsched-workload"),
        sim_only: a.sim_only,
        sim_params,
        agent_body: !a.sim_direct,
        reaction_us: a.sim_reaction_us,
    };
    // SAFETY: installing handlers that only store to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let result = match &a.resim {
        Some(f) => {
            let text = std::fs::read_to_string(f).map_err(|e| format!("--resim: {}: {e}", f.display()))?;
            let recorded: validate::Outcome = serde_json::from_str(&text)
                .map_err(|e| format!("--resim: {}: not a validate --json file: {e}", f.display()))?;
            validate::resimulate(&o, &d.topo, &recorded)
        }
        None => validate::validate(&o, &d.topo, &STOP),
    };
    let out = match result {
        Ok(out) => out,
        Err(e) if e.input => return Err(e.msg),
        Err(e) => {
            eprintln!("ampsched: error: {}", e.msg);
            std::process::exit(1);
        }
    };
    print!("{}", validate::report(&out));
    if let Some(p) = &a.json {
        std::fs::write(p, validate::to_json(&out)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(p) = &a.html {
        std::fs::write(p, validate::to_html(&out)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if out.partial {
        std::process::exit(130);
    }
    Ok(())
}
