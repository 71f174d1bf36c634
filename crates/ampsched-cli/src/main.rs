//! The `ampsched` command. Thin: parse arguments, call the library crates, print.

use ampsched_lab::reproduce;
use ampsched_model::spec::{Params, PolicySpec};
use ampsched_model::Nanos;
use ampsched_policy::{DISPATCHERS, PLACERS};
use ampsched_sim::admission::Estimate;
use ampsched_sim::bench;
use ampsched_sim::runner::{run_all, run_one, run_watched, Job};
use ampsched_sim::scenario::vars::parse_override;
use ampsched_sim::{Library, Scenario, SimOutput, SCHEMA};
use clap::{Parser, Subcommand};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

mod agent_cmd;
mod compare;
mod validate_cmd;
mod xen_lab_cmd;

/// The quickstart scenario, built in so `ampsched demo` runs from any directory.
const QUICKSTART: &str = include_str!("../../../scenarios/examples/quickstart.toml");

const EXAMPLES: &str = "Examples:
  ampsched demo                                   the quickstart: credit alone vs credit + aash, side by side
  ampsched sim scenarios/examples/quickstart.toml --compare aash
  ampsched sim scenarios/aash/aash-fair.toml --set program=mcf --runs 5 --json out.json
  ampsched sim scenarios/rtapp/periodic.toml --trace periodic.perfetto-trace
  ampsched reproduce aash --out results/aash      then open results/aash/report.html
  ampsched policies                               every dispatcher and placer with its parameters";

const SIM_EXAMPLES: &str = "Examples:
  ampsched sim scenarios/examples/quickstart.toml                  3 seeds: one table of means
  ampsched sim scenarios/examples/quickstart.toml --compare aash   the file's placer vs aash
  ampsched sim scenarios/examples/quickstart.toml --seed 7 --runs 10 --per-run
  ampsched sim scenarios/aash/aash-fair.toml --set program=mcf --json -";

const DEMO_EXAMPLES: &str = "Examples:
  ampsched demo               the quickstart with credit alone and with aash, one comparison table
  ampsched demo --jobs 1      the same on one worker thread";

const REPRODUCE_EXAMPLES: &str = "Examples:
  ampsched reproduce aash --out results/aash      then open results/aash/report.html
  ampsched reproduce aash --ledger                 just the published figures against ours
  ampsched reproduce study --only configs --seeds 1  one experiment, one seed per case
  ampsched reproduce cosched --scenarios scenarios edited copies of scenarios/cosched/*.toml";

const POLICIES_EXAMPLES: &str = "Examples:
  ampsched policies                               then e.g. ampsched sim FILE --dispatcher xen40";

const MODELS_EXAMPLES: &str = "Examples:
  ampsched models                                 then e.g. workload = { model = \"mcf\" } in a scenario";

const BENCH_EXAMPLES: &str = "Examples:
  ampsched bench                                  every case (S, M, L, XL)
  ampsched bench --case S --case M                the small ones";

const TOPOLOGY_EXAMPLES: &str = "Examples:
  ampsched topology                               classes from the kernel's cpu_capacity / max frequency
  ampsched topology --fast 0-3 --json             declare CPUs 0-3 fast; JSON (ampsched.topology/1)
  ampsched topology --calibrate                   measure each CPU (about 0.1 s per CPU)";

const RUN_EXAMPLES: &str = "Examples:
  ampsched run --dry-run -- make -j4              print the decisions, change nothing
  ampsched run --placer aash -- rt-app scenarios/rtapp/periodic.json
  ampsched run --placer aash --fast 0 --trace run.perfetto-trace -- ./my-program";

const AGENT_EXAMPLES: &str = "Examples:
  ampsched agent --config examples/agent/agent.toml --dry-run
  ampsched agent --config examples/agent/agent.toml --metrics 127.0.0.1:9464";

const RESTORE_EXAMPLES: &str = "Examples:
  ampsched restore                                after a crash: the default state file (as root)
  ampsched restore --state /tmp/ampsched-state.json";

const VALIDATE_EXAMPLES: &str = "Examples:
  ampsched validate scenarios/rtapp/periodic.json --sim-only
  ampsched validate scenarios/rtapp/periodic.json --placer aash --reps 3 --html validate.html
  ampsched validate builtin:barrier-block --placer aash --slow 1:5000/10000   a built-in ampsched-workload program
  ampsched validate --suite scenarios/validate --slow 1:5000/10000 --json rows.json
  ampsched validate --suite scenarios/validate --slow 1:5000/10000 --resim rows.json   the simulator again vs those real runs";

const XEN_LAB_EXAMPLES: &str = "Examples:
  ampsched xen-lab smoke                          build, boot, check (CI's smoke test)
  ampsched xen-lab check scripts/xen-lab/scenarios/aash-fair.toml
  ampsched xen-lab run scripts/xen-lab/scenarios/aash-fair.toml --out results/xen";

/// A count or seed given on the command line: an integer ≥ 0 (negative
/// values reach here instead of being taken for flags, so the error says the range).
fn non_negative<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    match s.parse::<i128>() {
        Ok(v) if v < 0 => Err(format!("must be ≥ 0, got {v}")),
        _ => s.parse::<T>().map_err(|_| format!("must be an integer ≥ 0, got `{s}`")),
    }
}

/// Like `non_negative`, and at least 1.
fn positive(s: &str) -> Result<u32, String> {
    match non_negative::<u32>(s)? {
        0 => Err("must be ≥ 1, got 0".into()),
        v => Ok(v),
    }
}

/// Asymmetry-aware scheduling for heterogeneous multicores: simulate, deploy, analyse.
#[derive(Parser)]
#[command(name = "ampsched", version, about, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the quickstart (1 fast + 3 slow CPUs, three VMs) with credit alone and with the aash placer, side by side.
    #[command(after_help = DEMO_EXAMPLES)]
    Demo {
        /// Worker threads (0 = all cores).
        #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = non_negative::<usize>)]
        jobs: usize,
    },
    /// Simulate a scenario file and print a table (and JSON with --json).
    #[command(after_help = SIM_EXAMPLES)]
    Sim(SimArgs),
    /// Reproduce a study: run its experiment files and write summary.json, report.md, report.html and figures.
    #[command(after_help = REPRODUCE_EXAMPLES)]
    Reproduce {
        /// Study: aash, capability, study or cosched.
        study: String,
        /// Output directory (default: results/<study>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Worker threads, ≥ 0 (0 = all cores).
        #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = non_negative::<usize>)]
        jobs: usize,
        /// Read the experiment files from DIR/<study>/ instead of the built-in copies.
        #[arg(long, value_name = "DIR")]
        scenarios: Option<PathBuf>,
        /// Only experiments whose name contains this; repeatable.
        #[arg(long)]
        only: Vec<String>,
        /// Seeds per case and policy, ≥ 1 (default: each file's).
        #[arg(long, allow_negative_numbers = true, value_parser = positive)]
        seeds: Option<u32>,
        /// Only the case with this exact name (e.g. `static/4`); repeatable.
        #[arg(long = "case", value_name = "NAME")]
        cases: Vec<String>,
        /// Print just the ledger (each published figure against ours, and the count within band).
        #[arg(long)]
        ledger: bool,
    },
    /// List every dispatcher and placer with its parameters and defaults.
    #[command(after_help = POLICIES_EXAMPLES)]
    Policies,
    /// List the workload model library and the templates' parameters.
    #[command(after_help = MODELS_EXAMPLES)]
    Models,
    /// Benchmark the simulator on fixed cases (prints figures).
    #[command(after_help = BENCH_EXAMPLES)]
    Bench {
        /// Only these cases (S, M, L, XL, R60, R600); default S, M, L, XL.
        #[arg(long)]
        case: Vec<String>,
        /// Run one case in this process and print one JSON line (used by the parent).
        #[arg(long, hide = true)]
        child: bool,
        /// Also run a bare event loop on each case's machine and events, and print the ratio.
        #[arg(long)]
        bound: bool,
    },
    /// Show this machine's CPUs, their classes and capacities, and where each figure came from.
    #[command(after_help = TOPOLOGY_EXAMPLES)]
    Topology(agent_cmd::TopologyArgs),
    /// Launch a command and manage its threads with a placer until it exits (exits with its status).
    #[command(after_help = RUN_EXAMPLES)]
    Run(agent_cmd::RunArgs),
    /// Run the agent daemon on the targets of a configuration file.
    #[command(after_help = AGENT_EXAMPLES)]
    Agent(agent_cmd::AgentArgs),
    /// Put back every affinity the agent changed (after a crash or kill -9).
    #[command(after_help = RESTORE_EXAMPLES)]
    Restore(agent_cmd::RestoreArgs),
    /// Run an rt-app workload for real (default Linux, then under the agent per placer) and simulated with the linux dispatcher; compare.
    #[command(after_help = VALIDATE_EXAMPLES)]
    Validate(validate_cmd::ValidateArgs),
    /// Real Xen with the repo's credit patches under QEMU: smoke, build, run, compare with the simulator (docs/xen.md).
    #[command(after_help = XEN_LAB_EXAMPLES)]
    XenLab(xen_lab_cmd::XenLabArgs),
}

fn policy_override(name: Option<String>, file: &PolicySpec) -> Option<PolicySpec> {
    name.map(|n| {
        let params = if n == file.name { file.params.clone() } else { Params::new() };
        PolicySpec { name: n, params }
    })
}

/// A progress bar on stderr (indicatif: bar, runs done, elapsed time, ETA)
/// when `enabled`; created at the first report, when the total is known.
fn progress_bar(enabled: bool) -> impl Fn(usize, usize) + Sync {
    let bar = std::sync::OnceLock::new();
    move |done, total| {
        if !enabled {
            return;
        }
        let pb = bar.get_or_init(|| {
            let style =
                indicatif::ProgressStyle::with_template("[{bar:30}] {pos}/{len} runs, {elapsed} elapsed, ETA {eta}")
                    .expect("a valid template")
                    .progress_chars("#>-");
            indicatif::ProgressBar::new(total as u64).with_style(style)
        });
        pb.set_position(done as u64);
        if done == total {
            pb.finish();
        }
    }
}

/// A progress bar over simulated time for one long run (stderr, when
/// `enabled`): shown once the run has taken a second, so short runs print nothing.
fn sim_time_bar(enabled: bool) -> impl FnMut(Nanos, Nanos) + Send + 'static {
    let start = std::time::Instant::now();
    let mut bar: Option<indicatif::ProgressBar> = None;
    move |now, end| {
        if !enabled || (bar.is_none() && start.elapsed().as_secs_f64() < 1.0) {
            return;
        }
        let pb = bar.get_or_insert_with(|| {
            let style = indicatif::ProgressStyle::with_template(
                "[{bar:30}] {pos}/{len} s simulated, {elapsed} elapsed, ETA {eta}",
            )
            .expect("a valid template")
            .progress_chars("#>-");
            // Cleared when the run ends (the watcher is dropped with the simulator).
            indicatif::ProgressBar::new(end.0 / 1_000_000_000)
                .with_style(style)
                .with_finish(indicatif::ProgressFinish::AndClear)
        });
        pb.set_position(now.0 / 1_000_000_000);
    }
}

// The options of `ampsched sim` (the variant's doc comment is its help text).
#[derive(clap::Args)]
struct SimArgs {
    /// Scenario file (TOML).
    scenario: PathBuf,
    /// Dispatcher to use instead of the file's (the file's parameters are kept only for the same name).
    #[arg(long)]
    dispatcher: Option<String>,
    /// Placer to use instead of the file's.
    #[arg(long)]
    placer: Option<String>,
    /// First seed, ≥ 0 (default: the file's, else 1).
    #[arg(long, allow_negative_numbers = true, value_parser = non_negative::<u64>)]
    seed: Option<u64>,
    /// Number of runs, ≥ 1, on seeds seed, seed+1, …, seed+runs−1 (default: the file's, else 1).
    #[arg(long, allow_negative_numbers = true, value_parser = positive)]
    runs: Option<u32>,
    /// Write the results as JSON (schema ampsched.sim/1) to this file ("-" = stdout).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Worker threads for several runs, ≥ 0 (0 = all cores).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = non_negative::<usize>)]
    jobs: usize,
    /// Print no table.
    #[arg(long)]
    quiet: bool,
    /// Several runs: print each run's table instead of one table of means over the seeds.
    #[arg(long)]
    per_run: bool,
    /// Also run the same seeds with this placer and print both side by side (e.g. aash).
    #[arg(long, value_name = "PLACER")]
    compare: Option<String>,
    /// Set a scenario variable (`[vars]`), e.g. --set program=mcf; repeatable.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Write a Perfetto trace (open it in ui.perfetto.dev); several runs write FILE.seedN (one per seed).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Run even when the estimated size is past the limits (2e9 events, 4 GiB; see docs/security.md).
    #[arg(long)]
    allow_large: bool,
}

/// Create `path` now, so an unwritable output is found before a long run
/// (the file is written when the run ends).
fn open_output(path: &std::path::Path, what: &str) -> Result<std::fs::File, String> {
    std::fs::File::create(path).map_err(|e| format!("{}: cannot write the {what}: {e}", path.display()))
}

fn cmd_sim(a: SimArgs) -> Result<(), String> {
    let lib = Library::builtin();
    let mut vars = BTreeMap::new();
    for s in &a.set {
        let (k, v) = parse_override(s).map_err(|e| format!("--set {e}"))?;
        vars.insert(k, v);
    }
    let sc = Scenario::load_with(&a.scenario, &lib, &vars).map_err(|e| e.to_string())?;
    for w in &sc.warnings {
        eprintln!("ampsched: {w}");
    }
    sim_scenario(&sc, a)
}

/// `ampsched demo`: the built-in quickstart, the file's policies vs the aash placer.
fn cmd_demo(jobs: usize) -> Result<(), String> {
    let lib = Library::builtin();
    let sc = Scenario::parse(QUICKSTART, "scenarios/examples/quickstart.toml", "quickstart", &lib)
        .map_err(|e| e.to_string())?;
    let a = SimArgs {
        scenario: PathBuf::from("scenarios/examples/quickstart.toml"),
        dispatcher: None,
        placer: None,
        seed: None,
        runs: None,
        json: None,
        jobs,
        quiet: false,
        per_run: false,
        compare: Some("aash".into()),
        set: Vec::new(),
        trace: None,
        allow_large: false,
    };
    sim_scenario(&sc, a)
}

fn sim_scenario(sc: &Scenario, a: SimArgs) -> Result<(), String> {
    let SimArgs { dispatcher, placer, seed, runs, json, jobs, quiet, per_run, compare, trace, allow_large, .. } = a;
    let d = policy_override(dispatcher, &sc.dispatcher);
    let p = policy_override(placer, &sc.placer);
    let first = seed.unwrap_or(sc.seed);
    let n = runs.unwrap_or(sc.runs);
    if n == 0 {
        return Err("--runs must be ≥ 1".into());
    }
    // Validate overrides and outputs once before starting (clear error, no partial output).
    sc.config(first, d.as_ref(), p.as_ref()).map_err(|e| format!("{} (from the command line)", e.msg))?;
    let other = compare.map(|name| PolicySpec { name, params: Params::new() });
    if let Some(o) = &other {
        if trace.is_some() {
            return Err("--compare and --trace: trace one placer at a time (use --placer)".into());
        }
        sc.config(first, d.as_ref(), Some(o)).map_err(|e| format!("--compare: {}", e.msg))?;
    }
    // Admission: the size of every run of this command, before any starts.
    let total = n as u64 * if other.is_some() { 2 } else { 1 };
    let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
    let at_once = if trace.is_some() {
        1
    } else if jobs == 0 {
        cores
    } else {
        jobs
    };
    let est = Estimate::new(sc, d.as_ref(), p.as_ref(), total, at_once as u64).map_err(|e| e.to_string())?;
    est.admit(allow_large, "--allow-large").map_err(|e| format!("{}: {e}", sc.file))?;
    let json_file = match &json {
        Some(out) if out.as_os_str() != "-" => Some(open_output(out, "JSON results")?),
        _ => None,
    };
    let jobs_for = |placer: Option<PolicySpec>| -> Vec<Job> {
        (0..n as u64)
            .map(|i| Job { scenario: sc, seed: first + i, dispatcher: d.clone(), placer: placer.clone() })
            .collect()
    };
    let mut jobs_v = jobs_for(p);
    if let Some(o) = &other {
        jobs_v.extend(jobs_for(Some(o.clone())));
    }
    let results = if let Some(t) = &trace {
        traced_runs(&jobs_v, t)?
    } else if jobs_v.len() == 1 {
        vec![run_watched(&jobs_v[0], sim_time_bar(std::io::stderr().is_terminal()))]
    } else {
        run_all(&jobs_v, jobs, progress_bar(std::io::stderr().is_terminal()))
    };
    let runs: Vec<_> = results.into_iter().collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    if !quiet {
        let (base, with) = runs.split_at(n as usize);
        if !with.is_empty() {
            println!("{}", compare::compare(base, with, &sc.topo.classes[sc.topo.fast_class].name));
        } else if per_run || base.len() == 1 {
            for r in base {
                println!("{}{}", r.table(), compare::periodic(std::slice::from_ref(r)));
            }
        } else {
            println!("{}", compare::summary(base));
        }
    }
    if let Some(out) = json {
        // Streamed to the file (or stdout) as it is serialised: never the whole document in memory.
        let doc = SimOutput { schema: SCHEMA, runs };
        let write = |w: &mut dyn Write| -> std::io::Result<()> {
            let mut w = std::io::BufWriter::new(w);
            serde_json::to_writer_pretty(&mut w, &doc)?;
            w.write_all(b"\n")?;
            w.flush()
        };
        match json_file {
            Some(mut f) => write(&mut f).map_err(|e| format!("{}: cannot write: {e}", out.display()))?,
            None => write(&mut std::io::stdout().lock()).map_err(|e| format!("stdout: cannot write: {e}"))?,
        }
    }
    Ok(())
}

fn cmd_reproduce(study: String, out: Option<PathBuf>, opts: reproduce::Options, ledger: bool) -> Result<(), String> {
    let out = out.unwrap_or_else(|| PathBuf::from("results").join(&study));
    let t0 = Instant::now();
    let report = reproduce::run_to_dir(&study, &opts, &out, progress_bar(std::io::stderr().is_terminal()))
        .map_err(|e| e.to_string())?;
    if ledger {
        print!("{}", ampsched_lab::ledger::text(&report.ledger));
        println!("{study}: reproduced in {:.1} s", t0.elapsed().as_secs_f64());
        return Ok(());
    }
    println!(
        "{}: {} experiments, {} summary rows, {} figures, {} in {:.1} s -> {}",
        study,
        report.sections.len() - usize::from(!report.ledger.is_empty()),
        report.rows.len(),
        report.figures().count(),
        ampsched_lab::ledger::count_line(&report.ledger),
        t0.elapsed().as_secs_f64(),
        out.join("report.html").display()
    );
    Ok(())
}

/// Run jobs one by one, each with a Perfetto trace written next to `path` (`path` itself for one run).
fn traced_runs(
    jobs: &[Job],
    path: &std::path::Path,
) -> Result<Vec<Result<ampsched_sim::RunResult, ampsched_sim::ScenarioError>>, String> {
    // Every trace file is created before the first run, so an unwritable one stops nothing half-way.
    let mut files = Vec::new();
    for j in jobs {
        let file = if jobs.len() == 1 {
            path.to_path_buf()
        } else {
            let mut name = path.file_name().unwrap_or_default().to_os_string();
            name.push(format!(".seed{}", j.seed));
            path.with_file_name(name)
        };
        let f = open_output(&file, "trace")?;
        files.push((file, f));
    }
    let mut out = Vec::new();
    for (j, (file, f)) in jobs.iter().zip(files) {
        // Streamed to the file as the run goes: memory stays bounded whatever the duration.
        let w = Box::new(std::io::BufWriter::with_capacity(1 << 16, f));
        let (r, written) = ampsched_sim::runner::run_traced_to(j, Default::default(), w).map_err(|e| e.to_string())?;
        written.map_err(|e| format!("{}: cannot write the trace: {e}", file.display()))?;
        out.push(Ok(r));
    }
    Ok(out)
}

fn cmd_policies() {
    for (kind, list) in [("dispatcher", DISPATCHERS), ("placer", PLACERS)] {
        for p in list {
            println!("{kind} {:<12} {}", p.name, p.doc);
            for d in p.params {
                let ty = if d.unit.is_empty() { d.type_name() } else { format!("{} ({})", d.type_name(), d.unit) };
                let range = d.range_text();
                let range = if range.is_empty() { range } else { format!(" [{range}]") };
                println!("    {:<22} {:<16} default {:<16} {}{range}", d.name, ty, d.default_text(), d.doc);
            }
        }
    }
}

fn cmd_models() {
    let lib = Library::builtin();
    println!("{:<16} {:<14} {:<12} description (source)", "model", "suite", "template");
    for m in lib.entries() {
        println!("{:<16} {:<14} {:<12} {} ({})", m.name, m.suite, m.template, m.description, m.source);
    }
    println!();
    println!("templates (any parameter can be overridden in a scenario's workload table):");
    for t in Library::templates() {
        println!("  {:<12} {}", t.name, t.doc);
        for (name, default, doc) in &t.params {
            println!("      {:<18} default {:<10} {}", name, default, doc);
        }
    }
}

fn cmd_bench(only: Vec<String>, child: bool, bound: bool) -> Result<(), String> {
    let cases = bench::cases();
    for c in &only {
        if !cases.iter().any(|k| k.name.eq_ignore_ascii_case(c)) {
            let known: Vec<&str> = cases.iter().map(|k| k.name).collect();
            return Err(format!("unknown bench case `{c}`; known: {}", known.join(", ")));
        }
    }
    let selected: Vec<_> = cases
        .iter()
        .filter(|c| if only.is_empty() { c.default } else { only.iter().any(|o| o.eq_ignore_ascii_case(c.name)) })
        .collect();
    if child {
        let lib = Library::builtin();
        for case in selected {
            let sc = bench::scenario(case, &lib).map_err(|e| e.to_string())?;
            let job = Job { scenario: &sc, seed: 1, dispatcher: None, placer: None };
            // Short cases are repeated for at least 1 s of wall time; the median run counts.
            // With the bound, each repetition runs the simulator then the bare loop, so both
            // see the same machine conditions.
            let mut walls = Vec::new();
            let started = Instant::now();
            // CPU time over all repetitions (one reading each side of each part).
            let (mut cpu_sim, mut cpu_bound) = (0u64, 0u64);
            let mut bf = bench::BoundFigures::default();
            let r = loop {
                let t0 = Instant::now();
                let c0 = bench::thread_cpu_ns();
                let r = run_one(&job).map_err(|e| e.to_string())?;
                let c1 = bench::thread_cpu_ns();
                walls.push(t0.elapsed().as_secs_f64());
                cpu_sim += c0.zip(c1).map(|(a, b)| b.saturating_sub(a)).unwrap_or(0);
                if bound {
                    let tslice = ampsched_policy::credit::DEFAULT_TSLICE.0;
                    let spec = bench::BoundSpec {
                        cpus: r.cpus.len() as u32,
                        tasks: r.tasks.iter().filter(|t| !t.idle).count() as u32,
                        tick_ns: tslice / 3,
                        slice_ns: tslice,
                        account_ns: tslice,
                        work_ns: case.work_ns,
                        events: r.events,
                        superseded: r.engine.superseded,
                    };
                    let c2 = bench::thread_cpu_ns();
                    bf = std::hint::black_box(bench::bound(&spec));
                    let c3 = bench::thread_cpu_ns();
                    cpu_bound += c2.zip(c3).map(|(a, b)| b.saturating_sub(a)).unwrap_or(0);
                }
                if started.elapsed().as_secs_f64() >= 1.0 || walls.len() >= 200 {
                    break r;
                }
            };
            let n = walls.len() as f64;
            walls.sort_by(f64::total_cmp);
            let wall = walls[walls.len() / 2];
            let cpu = if cpu_sim > 0 { cpu_sim as f64 / 1e9 / n } else { wall };
            let peak = bench::peak_rss_bytes().unwrap_or(0);
            println!(
                "{{\"case\":\"{}\",\"wall_s\":{wall},\"cpu_s\":{cpu},\"sim_s\":{},\"events\":{},\"superseded\":{},\"queue_peak\":{},\"peak_bytes\":{peak},\"bound_cpu_s\":{},\"bound_events\":{},\"bound_superseded\":{}}}",
                case.name,
                r.end_ns as f64 / 1e9,
                r.events,
                r.engine.superseded,
                r.engine.queue_peak,
                cpu_bound as f64 / 1e9 / n,
                bf.events,
                bf.superseded
            );
        }
        return Ok(());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?;
    print!(
        "{:<4} {:>7} {:>7} {:>11} {:>9} {:>8} {:>6} {:>7} {:>8}",
        "case", "wall_s", "cpu_s", "sim_s/cpu_s", "Mev/wall", "ns/ev", "stale%", "q_peak", "peak_MB"
    );
    if bound {
        print!(" {:>8} {:>6} {:>6}", "bound_ns", "stale%", "ratio");
    }
    println!("  case");
    for case in selected {
        // Each case in a fresh process so its peak memory is its own.
        let mut args = vec!["bench", "--child", "--case", case.name];
        if bound {
            args.push("--bound");
        }
        let out = std::process::Command::new(&exe)
            .args(&args)
            .output()
            .map_err(|e| format!("cannot run bench child: {e}"))?;
        if !out.status.success() {
            return Err(format!("bench case {} failed: {}", case.name, String::from_utf8_lossy(&out.stderr)));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("bench child output: {e}"))?;
        let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
        let (wall, cpu, sim, ev) = (f("wall_s"), f("cpu_s"), f("sim_s"), f("events"));
        let ns = cpu * 1e9 / ev.max(1.0);
        print!(
            "{:<4} {:>7.2} {:>7.2} {:>11.1} {:>9.2} {:>8.1} {:>6.1} {:>7.0} {:>8.1}",
            case.name,
            wall,
            cpu,
            sim / cpu,
            ev / wall / 1e6,
            ns,
            100.0 * f("superseded") / ev.max(1.0),
            f("queue_peak"),
            f("peak_bytes") / 1e6
        );
        if bound {
            let bev = f("bound_events").max(1.0);
            let bns = f("bound_cpu_s") * 1e9 / bev;
            print!(" {:>8.1} {:>6.1} {:>6.2}", bns, 100.0 * f("bound_superseded") / bev, bns / ns);
        }
        println!("  {}", case.about);
    }
    println!(
        "(ns/ev: CPU ns per event, superseded ones included; stale%: share superseded; q_peak: most queue entries{})",
        if bound {
            "; bound: a bare event loop on the same machine and events, ratio = bound ns / ns (1 = at the bound)"
        } else {
            ""
        }
    );
    Ok(())
}

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`ampsched models | head`), like other Unix tools.
    // SAFETY: resetting a signal disposition at start-up, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Demo { jobs } => cmd_demo(jobs),
        Cmd::Sim(a) => cmd_sim(a),
        Cmd::Reproduce { study, out, jobs, scenarios, only, seeds, cases, ledger } => {
            cmd_reproduce(study, out, reproduce::Options { jobs, scenarios, only, seeds, cases }, ledger)
        }
        Cmd::Policies => {
            cmd_policies();
            Ok(())
        }
        Cmd::Models => {
            cmd_models();
            Ok(())
        }
        Cmd::Bench { case, child, bound } => cmd_bench(case, child, bound),
        Cmd::Topology(a) => agent_cmd::topology(a),
        Cmd::Run(a) => agent_cmd::run(a),
        Cmd::Agent(a) => agent_cmd::agent(a),
        Cmd::Restore(a) => agent_cmd::restore(a),
        Cmd::Validate(a) => validate_cmd::validate(a),
        Cmd::XenLab(a) => xen_lab_cmd::xen_lab(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ampsched: error: {e}");
            ExitCode::from(2)
        }
    }
}
