//! Arguments and glue for the real-machine commands `topology`, `run`,
//! `agent` and `restore` (the logic lives in `ampsched-agent`).

use ampsched_agent::config::{self, AgentConfig, Target, TargetKind, DEFAULT_WEIGHT};
use ampsched_agent::control::{DEFAULT_PERIOD_MS, DEFAULT_RESCAN_MS};
use ampsched_agent::sampler::CpuSampler;
use ampsched_agent::{discover, report, state, Agent, AgentOptions, Discovered, Outcome, Overrides};
use ampsched_model::spec::{ParamValue, Params, PolicySpec, PriorityClass};
use ampsched_model::CpuSet;
use clap::Args;
use std::path::{Path, PathBuf};

/// `ampsched topology`.
#[derive(Args)]
pub struct TopologyArgs {
    /// Declare these Linux CPUs fast (e.g. "0" or "0-3"); the rest are slow.
    #[arg(long, value_name = "CPUS")]
    fast: Option<String>,
    /// Take `fast`, `capacity` and `calibrate` from this agent configuration.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Measure each CPU with a short calibration probe (≈ 0.1 s per CPU).
    #[arg(long)]
    calibrate: bool,
    /// Measure effective capacity over this window, ms (0 = skip).
    #[arg(long, default_value_t = 200)]
    window_ms: u64,
    /// Print JSON (schema ampsched.topology/1).
    #[arg(long)]
    json: bool,
    /// Filesystem root to read /sys from (for testing against fixtures).
    #[arg(long, default_value = "/", hide = true)]
    root: PathBuf,
}

/// Options shared by `run` and `agent`.
#[derive(Args)]
pub struct CommonArgs {
    /// Print decisions (JSON lines), change nothing.
    #[arg(long)]
    dry_run: bool,
    /// State file recording original affinities (default /run/ampsched/state.json as root).
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Serve Prometheus metrics on this loopback address, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Append the JSON-lines decision log here ("-" = stdout).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Write a Perfetto trace of the decisions here (open in ui.perfetto.dev).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Record the placer's input here, one snapshot a line (JSON; replayable through any placer).
    #[arg(long, value_name = "FILE")]
    record_samples: Option<PathBuf>,
    /// Declare these Linux CPUs fast (overrides discovery and the config).
    #[arg(long, value_name = "CPUS")]
    fast: Option<String>,
    /// Control period in ms (default 30, or the config's period_ms).
    #[arg(long, value_name = "MS")]
    period: Option<f64>,
    /// Run the calibration probe to find CPU capacities.
    #[arg(long)]
    calibrate: bool,
    /// Print loop figures (CPU time per period, …) as JSON on stderr at exit.
    #[arg(long)]
    stats: bool,
}

/// `ampsched run`.
#[derive(Args)]
pub struct RunArgs {
    /// Placer: aash, capability, fast-first or none (see `ampsched policies`).
    #[arg(long, default_value = "aash")]
    placer: String,
    /// A placer parameter, KEY=VALUE (repeatable), e.g. --param low_parallelism=false.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    params: Vec<String>,
    /// Aware program: the thread indexes (0 = main thread, in creation order) it considers fast.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    fast_threads: Vec<u32>,
    #[command(flatten)]
    common: CommonArgs,
    /// The command to launch and manage, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

/// `ampsched agent`.
#[derive(Args)]
pub struct AgentArgs {
    /// Configuration file (TOML; see examples/agent/agent.toml).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Use this placer instead of the config's (its parameters are dropped).
    #[arg(long)]
    placer: Option<String>,
    #[command(flatten)]
    common: CommonArgs,
}

/// `ampsched restore`.
#[derive(Args)]
pub struct RestoreArgs {
    /// State file written by the agent (default /run/ampsched/state.json as root).
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
}

fn parse_cpus(s: &str, what: &str) -> Result<CpuSet, String> {
    CpuSet::parse_list(s).map_err(|e| format!("{what}: {e} (a CPU list such as \"0\" or \"0-3,8\")"))
}

fn param_value(v: &str) -> ParamValue {
    match v {
        "true" => ParamValue::Bool(true),
        "false" => ParamValue::Bool(false),
        _ => v
            .parse::<i64>()
            .map(ParamValue::Int)
            .or_else(|_| v.parse::<f64>().map(ParamValue::Float))
            .unwrap_or_else(|_| ParamValue::Str(v.to_string())),
    }
}

fn machine(root: &Path, fast: Option<&str>, cfg: &AgentConfig, calibrate: bool) -> Result<Discovered, String> {
    let mut ov = Overrides { capacity: cfg.capacity.clone(), fast: cfg.fast, calibrated: None };
    if let Some(f) = fast {
        ov.fast = Some(parse_cpus(f, "--fast")?);
    }
    if calibrate || cfg.calibrate {
        let online = ampsched_agent::discovery::online_cpus(root).map_err(|e| e.to_string())?;
        let ids: Vec<u32> = online.iter().map(|c| c.0).collect();
        ov.calibrated = Some(ampsched_agent::discovery::calibrate(&ids, 5, 20).map_err(|e| e.to_string())?);
    }
    discover(root, &ov).map_err(|e| e.to_string())
}

/// Print the CPUs, classes, capacities and their sources.
pub fn topology(a: TopologyArgs) -> Result<(), String> {
    let cfg = match &a.config {
        Some(p) => config::load(p).map_err(|e| e.to_string())?,
        None => AgentConfig::default(),
    };
    let d = machine(&a.root, a.fast.as_deref(), &cfg, a.calibrate)?;
    let figures = if a.window_ms > 0 {
        let mut s = CpuSampler::new(&a.root.join("proc"), &d.linux_ids).map_err(|e| e.to_string())?;
        s.sample(&|_| false);
        std::thread::sleep(std::time::Duration::from_millis(a.window_ms));
        Some(s.sample(&|_| false))
    } else {
        None
    };
    let window = figures.as_deref().map(|f| (f, a.window_ms as f64));
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report::topology_json(&d, window)).map_err(|e| e.to_string())?);
    } else {
        print!("{}", report::topology_text(&d, window));
    }
    Ok(())
}

fn start(
    c: &CommonArgs,
    cfg: &AgentConfig,
    placer: PolicySpec,
    targets: Vec<Target>,
    stop_with_first: bool,
) -> Result<Outcome, String> {
    let d = machine(Path::new("/"), c.fast.as_deref(), cfg, c.calibrate)?;
    if d.topo.classes.len() < 2 && placer.name != "none" {
        eprintln!("ampsched: warning: every CPU has the same capacity; declare fast CPUs with --fast (or `fast` in the config)");
    }
    let opts = AgentOptions {
        discovered: d,
        placer,
        period_ms: c.period.or(cfg.period_ms).unwrap_or(DEFAULT_PERIOD_MS),
        rescan_ms: cfg.rescan_ms.unwrap_or(DEFAULT_RESCAN_MS),
        dry_run: c.dry_run,
        state_path: c.state.clone().or(cfg.state.clone()).unwrap_or_else(state::default_path),
        metrics: c.metrics.clone().or(cfg.metrics.clone()),
        log: c.log.clone().or(cfg.log.clone()),
        targets,
        proc_root: PathBuf::from("/proc"),
        stop_with_first_command: stop_with_first,
        trace: c.trace.clone().or(cfg.trace.clone()),
        record_samples: c.record_samples.clone(),
    };
    let agent = Agent::new(opts).map_err(|e| e.to_string())?;
    if let Some(a) = agent.metrics_addr() {
        eprintln!("ampsched: metrics on http://{a}/metrics");
    }
    let out = agent.run().map_err(|e| e.to_string())?;
    if c.stats {
        eprintln!("ampsched: stats {}", out.stats.to_json());
    }
    if out.restore_failures > 0 {
        return Err(format!("{} thread(s) could not be restored (see above)", out.restore_failures));
    }
    Ok(out)
}

/// Launch a command, manage its threads until it exits, exit with its status.
pub fn run(a: RunArgs) -> Result<(), String> {
    let mut params = Params::new();
    for p in &a.params {
        let (k, v) = p.split_once('=').ok_or_else(|| format!("--param `{p}`: expected KEY=VALUE"))?;
        params.insert(k.trim().to_string(), param_value(v.trim()));
    }
    let target = Target {
        name: Path::new(&a.cmd[0]).file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
        kind: TargetKind::Command(a.cmd.clone()),
        children: true,
        weight: DEFAULT_WEIGHT,
        priority: PriorityClass::Normal,
        fast_vcpus: if a.fast_threads.is_empty() { None } else { Some(a.fast_threads.clone()) },
    };
    let placer = PolicySpec { name: a.placer.clone(), params };
    let out = start(&a.common, &AgentConfig::default(), placer, vec![target], true)?;
    let code = match out.first_command {
        Some(s) => {
            use std::os::unix::process::ExitStatusExt;
            s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
        }
        None => out.signal.map(|s| 128 + s).unwrap_or(0),
    };
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}

/// Run the daemon from a configuration file.
pub fn agent(a: AgentArgs) -> Result<(), String> {
    let cfg = config::load(&a.config).map_err(|e| e.to_string())?;
    let placer = match (&a.placer, &cfg.placer) {
        (Some(n), _) => PolicySpec { name: n.clone(), params: Params::new() },
        (None, Some(p)) => p.clone(),
        (None, None) => PolicySpec { name: "aash".into(), params: Params::new() },
    };
    start(&a.common, &cfg, placer, cfg.targets.clone(), false)?;
    Ok(())
}

/// Put back every affinity recorded in a state file.
pub fn restore(a: RestoreArgs) -> Result<(), String> {
    let path = a.state.unwrap_or_else(state::default_path);
    if !path.exists() {
        println!("{}: no state file: nothing to restore", path.display());
        return Ok(());
    }
    let r = state::restore(&path, Path::new("/proc")).map_err(|e| e.to_string())?;
    println!(
        "restored {} thread(s); {} had exited; {} tid(s) now belong to other threads (left alone)",
        r.restored.len(),
        r.gone.len(),
        r.reused.len()
    );
    if !r.failed.is_empty() {
        let list: Vec<String> = r.failed.iter().map(|(t, e)| format!("{t}: {e}")).collect();
        return Err(format!(
            "{} thread(s) not restored ({}); {} kept",
            r.failed.len(),
            list.join("; "),
            path.display()
        ));
    }
    Ok(())
}
