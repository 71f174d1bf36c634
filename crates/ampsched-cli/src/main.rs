//! The `ampsched` command. Thin: parse arguments, call the library crates, print.

use ampsched_lab::reproduce;
use ampsched_model::spec::{Params, PolicySpec};
use ampsched_policy::{DISPATCHERS, PLACERS};
use ampsched_sim::bench;
use ampsched_sim::runner::{run_all, run_one, Job};
use ampsched_sim::scenario::vars::parse_override;
use ampsched_sim::{Library, Scenario, SimOutput, SCHEMA};
use clap::{Parser, Subcommand};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

mod agent_cmd;

/// Asymmetry-aware scheduling for heterogeneous multicores: simulate, deploy, analyse.
#[derive(Parser)]
#[command(name = "ampsched", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Simulate a scenario file and print a table (and JSON with --json).
    Sim {
        /// Scenario file (TOML).
        scenario: PathBuf,
        /// Dispatcher to use instead of the file's (the file's parameters are kept only for the same name).
        #[arg(long)]
        dispatcher: Option<String>,
        /// Placer to use instead of the file's.
        #[arg(long)]
        placer: Option<String>,
        /// First seed (default: the file's, else 1).
        #[arg(long)]
        seed: Option<u64>,
        /// Number of runs, seeds seed..seed+runs (default: the file's, else 1).
        #[arg(long)]
        runs: Option<u32>,
        /// Write the results as JSON (schema ampsched.sim/1) to this file ("-" = stdout).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Worker threads for several runs (0 = all cores).
        #[arg(long, default_value_t = 0)]
        jobs: usize,
        /// Print no table.
        #[arg(long)]
        quiet: bool,
        /// Set a scenario variable (`[vars]`), e.g. --set program=mcf; repeatable.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Write a Perfetto trace (open it in ui.perfetto.dev); several runs write FILE.seedN (one per seed).
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
    },
    /// Reproduce a study: run its experiment files and write summary.json, report.md, report.html and figures.
    Reproduce {
        /// Study: aash, capability, study or cosched.
        study: String,
        /// Output directory (default: results/<study>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Worker threads (0 = all cores).
        #[arg(long, default_value_t = 0)]
        jobs: usize,
        /// Read the experiment files from DIR/<study>/ instead of the built-in copies.
        #[arg(long, value_name = "DIR")]
        scenarios: Option<PathBuf>,
        /// Only experiments whose name contains this; repeatable.
        #[arg(long)]
        only: Vec<String>,
        /// Seeds per case and policy (default: each file's).
        #[arg(long)]
        seeds: Option<u32>,
        /// Only the case with this exact name (e.g. `static/4`); repeatable.
        #[arg(long = "case", value_name = "NAME")]
        cases: Vec<String>,
    },
    /// List every dispatcher and placer with its parameters and defaults.
    Policies,
    /// List the workload model library and the templates' parameters.
    Models,
    /// Benchmark the simulator on fixed cases (prints figures).
    Bench {
        /// Only these cases (S, M, L, XL); default all.
        #[arg(long)]
        case: Vec<String>,
        /// Run one case in this process and print one JSON line (used by the parent).
        #[arg(long, hide = true)]
        child: bool,
    },
    /// Show this machine's CPUs, their classes and capacities, and where each figure came from.
    Topology(agent_cmd::TopologyArgs),
    /// Launch a command and manage its threads with a placer until it exits (exits with its status).
    Run(agent_cmd::RunArgs),
    /// Run the agent daemon on the targets of a configuration file.
    Agent(agent_cmd::AgentArgs),
    /// Put back every affinity the agent changed (after a crash or kill -9).
    Restore(agent_cmd::RestoreArgs),
}

fn policy_override(name: Option<String>, file: &PolicySpec) -> Option<PolicySpec> {
    name.map(|n| {
        let params = if n == file.name { file.params.clone() } else { Params::new() };
        PolicySpec { name: n, params }
    })
}

fn progress_bar(enabled: bool) -> impl Fn(usize, usize) + Sync {
    move |done, total| {
        if !enabled {
            return;
        }
        let width = 30;
        let filled = done * width / total.max(1);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r[{}{}] {done}/{total} runs", "#".repeat(filled), " ".repeat(width - filled));
        if done == total {
            let _ = writeln!(err);
        }
        let _ = err.flush();
    }
}

/// The options of `ampsched sim`.
struct SimArgs {
    path: PathBuf,
    dispatcher: Option<String>,
    placer: Option<String>,
    seed: Option<u64>,
    runs: Option<u32>,
    json: Option<PathBuf>,
    jobs: usize,
    quiet: bool,
    set: Vec<String>,
    trace: Option<PathBuf>,
}

fn cmd_sim(a: SimArgs) -> Result<(), String> {
    let SimArgs { path, dispatcher, placer, seed, runs, json, jobs, quiet, set, trace } = a;
    let lib = Library::builtin();
    let mut vars = BTreeMap::new();
    for s in &set {
        let (k, v) = parse_override(s).map_err(|e| format!("--set {e}"))?;
        vars.insert(k, v);
    }
    let sc = Scenario::load_with(&path, &lib, &vars).map_err(|e| e.to_string())?;
    let d = policy_override(dispatcher, &sc.dispatcher);
    let p = policy_override(placer, &sc.placer);
    let first = seed.unwrap_or(sc.seed);
    let n = runs.unwrap_or(sc.runs);
    if n == 0 {
        return Err("--runs must be ≥ 1".into());
    }
    // Validate overrides once before starting (clear error, no partial output).
    sc.config(first, d.as_ref(), p.as_ref()).map_err(|e| format!("{} (from the command line)", e.msg))?;
    let jobs_v: Vec<Job> = (0..n as u64)
        .map(|i| Job { scenario: &sc, seed: first + i, dispatcher: d.clone(), placer: p.clone() })
        .collect();
    let results = if let Some(t) = &trace {
        traced_runs(&jobs_v, t)?
    } else if jobs_v.len() == 1 {
        vec![run_one(&jobs_v[0])]
    } else {
        run_all(&jobs_v, jobs, progress_bar(std::io::stderr().is_terminal()))
    };
    let runs: Vec<_> = results.into_iter().collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    if !quiet {
        for r in &runs {
            println!("{}", r.table());
        }
    }
    if let Some(out) = json {
        let doc = SimOutput { schema: SCHEMA, runs };
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        if out.as_os_str() == "-" {
            println!("{text}");
        } else {
            std::fs::write(&out, text + "\n").map_err(|e| format!("{}: cannot write: {e}", out.display()))?;
        }
    }
    Ok(())
}

fn cmd_reproduce(study: String, out: Option<PathBuf>, opts: reproduce::Options) -> Result<(), String> {
    let out = out.unwrap_or_else(|| PathBuf::from("results").join(&study));
    let t0 = Instant::now();
    let report = reproduce::run_to_dir(&study, &opts, &out, progress_bar(std::io::stderr().is_terminal()))
        .map_err(|e| e.to_string())?;
    println!(
        "{}: {} experiments, {} summary rows, {} figures in {:.1} s -> {}",
        study,
        report.sections.len(),
        report.rows.len(),
        report.figures().count(),
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
    let mut out = Vec::new();
    for j in jobs {
        let (r, bytes) = match ampsched_sim::runner::run_traced(j, Default::default()) {
            Ok(x) => x,
            Err(e) => return Err(e.to_string()),
        };
        let file = if jobs.len() == 1 {
            path.to_path_buf()
        } else {
            let mut name = path.file_name().unwrap_or_default().to_os_string();
            name.push(format!(".seed{}", j.seed));
            path.with_file_name(name)
        };
        std::fs::write(&file, bytes).map_err(|e| format!("{}: cannot write the trace: {e}", file.display()))?;
        out.push(Ok(r));
    }
    Ok(out)
}

fn cmd_policies() {
    for (kind, list) in [("dispatcher", DISPATCHERS), ("placer", PLACERS)] {
        for p in list {
            println!("{kind} {:<12} {}", p.name, p.doc);
            for d in p.params {
                println!("    {:<22} default {:<16} {}", d.name, d.default, d.doc);
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

fn cmd_bench(only: Vec<String>, child: bool) -> Result<(), String> {
    let cases = bench::cases();
    for c in &only {
        if !cases.iter().any(|k| k.name.eq_ignore_ascii_case(c)) {
            return Err(format!("unknown bench case `{c}`; known: S, M, L, XL"));
        }
    }
    let selected: Vec<_> =
        cases.iter().filter(|c| only.is_empty() || only.iter().any(|o| o.eq_ignore_ascii_case(c.name))).collect();
    if child {
        let lib = Library::builtin();
        for case in selected {
            let sc = bench::scenario(case, &lib).map_err(|e| e.to_string())?;
            let job = Job { scenario: &sc, seed: 1, dispatcher: None, placer: None };
            // Short cases are repeated for at least 1 s of wall time; the median run counts.
            let mut walls = Vec::new();
            let started = Instant::now();
            // CPU time over all repetitions (one reading each side, so short runs are not
            // dominated by the reading itself): the mean per run.
            let c0 = bench::thread_cpu_ns();
            let r = loop {
                let t0 = Instant::now();
                let r = run_one(&job).map_err(|e| e.to_string())?;
                walls.push(t0.elapsed().as_secs_f64());
                if started.elapsed().as_secs_f64() >= 1.0 || walls.len() >= 200 {
                    break r;
                }
            };
            let cpu_total = c0.zip(bench::thread_cpu_ns()).map(|(a, b)| b.saturating_sub(a) as f64 / 1e9);
            walls.sort_by(f64::total_cmp);
            let wall = walls[walls.len() / 2];
            let cpu = cpu_total.map(|c| c / walls.len() as f64).unwrap_or(wall);
            let peak = bench::peak_rss_bytes().unwrap_or(0);
            println!(
                "{{\"case\":\"{}\",\"wall_s\":{wall},\"cpu_s\":{cpu},\"sim_s\":{},\"events\":{},\"peak_bytes\":{peak}}}",
                case.name,
                r.end_ns as f64 / 1e9,
                r.events
            );
        }
        return Ok(());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?;
    println!(
        "{:<4} {:>9} {:>12} {:>14} {:>14} {:>10}  case",
        "case", "wall_s", "sim_s/wall_s", "events/wall_s", "events/cpu_s", "peak_MB"
    );
    for case in selected {
        // Each case in a fresh process so its peak memory is its own.
        let out = std::process::Command::new(&exe)
            .args(["bench", "--child", "--case", case.name])
            .output()
            .map_err(|e| format!("cannot run bench child: {e}"))?;
        if !out.status.success() {
            return Err(format!("bench case {} failed: {}", case.name, String::from_utf8_lossy(&out.stderr)));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("bench child output: {e}"))?;
        let wall = v["wall_s"].as_f64().unwrap_or(0.0);
        let cpu = v["cpu_s"].as_f64().unwrap_or(wall);
        let sim = v["sim_s"].as_f64().unwrap_or(0.0);
        let ev = v["events"].as_f64().unwrap_or(0.0);
        let peak = v["peak_bytes"].as_f64().unwrap_or(0.0) / 1e6;
        println!(
            "{:<4} {:>9.2} {:>12.1} {:>14.0} {:>14.0} {:>10.1}  {}",
            case.name,
            wall,
            sim / wall,
            ev / wall,
            ev / cpu,
            peak,
            case.about
        );
    }
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
        Cmd::Sim { scenario, dispatcher, placer, seed, runs, json, jobs, quiet, set, trace } => {
            cmd_sim(SimArgs { path: scenario, dispatcher, placer, seed, runs, json, jobs, quiet, set, trace })
        }
        Cmd::Reproduce { study, out, jobs, scenarios, only, seeds, cases } => {
            cmd_reproduce(study, out, reproduce::Options { jobs, scenarios, only, seeds, cases })
        }
        Cmd::Policies => {
            cmd_policies();
            Ok(())
        }
        Cmd::Models => {
            cmd_models();
            Ok(())
        }
        Cmd::Bench { case, child } => cmd_bench(case, child),
        Cmd::Topology(a) => agent_cmd::topology(a),
        Cmd::Run(a) => agent_cmd::run(a),
        Cmd::Agent(a) => agent_cmd::agent(a),
        Cmd::Restore(a) => agent_cmd::restore(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ampsched: error: {e}");
            ExitCode::from(2)
        }
    }
}
