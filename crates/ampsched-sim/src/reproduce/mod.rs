//! `ampsched reproduce STUDY`: run a study's experiment files (every case ×
//! compared policy × seed, all in parallel), then turn the results into
//! summary rows, tables, figures and computed commentary (see `report`).
//!
//! A study is a list of experiment files (shipped under `scenarios/<study>/`
//! and embedded in the binary, so `reproduce` works from any directory;
//! `--scenarios DIR` reads edited copies instead) and one analysis function
//! per experiment. The analysis only reads results: setups live in the files.

pub mod aash;
pub mod capability;
pub mod cosched;
pub mod study;

use crate::experiment::Experiment;
use crate::library::Library;
use crate::report::{Report, Row, Section, Stat};
use crate::results::{DomainResult, RunResult};
use crate::runner::{run_all, Job};
use crate::scenario::ScenarioError;
use std::fmt;
use std::path::{Path, PathBuf};

/// An experiment file shipped with a study: its file name and embedded text.
pub type EmbeddedFile = (&'static str, &'static str);

/// A registered study.
pub struct Study {
    /// Name on the command line.
    pub name: &'static str,
    /// Report title.
    pub title: &'static str,
    /// Its experiment files.
    pub files: &'static [EmbeddedFile],
    /// Turn every experiment's runs into the report.
    pub analyse: fn(&[Runs]) -> Report,
}

/// Every study `reproduce` knows.
pub const STUDIES: &[&Study] = &[&aash::STUDY, &capability::STUDY, &study::STUDY, &cosched::STUDY];

/// Look a study up by name.
pub fn study(name: &str) -> Result<&'static Study, ReproduceError> {
    STUDIES.iter().copied().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<&str> = STUDIES.iter().map(|s| s.name).collect();
        ReproduceError::Usage(format!("unknown study `{name}`; known: {}", names.join(", ")))
    })
}

/// Options of a reproduction.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Worker threads (0 = all cores).
    pub jobs: usize,
    /// Read the study's files from `DIR/<study>/` instead of the embedded copies.
    pub scenarios: Option<PathBuf>,
    /// Only the experiments whose name contains one of these strings (empty = all).
    pub only: Vec<String>,
    /// Override the number of seeds of every experiment.
    pub seeds: Option<u32>,
    /// Only the cases with these exact names (empty = all); an experiment left
    /// without a case is skipped.
    pub cases: Vec<String>,
}

/// What went wrong in a reproduction.
#[derive(Debug)]
pub enum ReproduceError {
    /// Bad command-line input.
    Usage(String),
    /// A bad experiment file.
    Scenario(ScenarioError),
    /// Writing the output failed.
    Io(PathBuf, std::io::Error),
}

impl fmt::Display for ReproduceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReproduceError::Usage(m) => write!(f, "{m}"),
            ReproduceError::Scenario(e) => write!(f, "{e}"),
            ReproduceError::Io(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for ReproduceError {}

/// The results of one experiment: `results[case][policy][seed]`.
pub struct Runs {
    /// The experiment.
    pub exp: Experiment,
    /// Results indexed by case, compared policy (file order) and seed.
    pub results: Vec<Vec<Vec<RunResult>>>,
}

impl Runs {
    /// Labels of the compared policies (of the first case).
    pub fn labels(&self) -> Vec<&str> {
        self.exp.cases.first().map(|c| c.compare.iter().map(|p| p.label.as_str()).collect()).unwrap_or_default()
    }
    /// Index of a policy label.
    pub fn policy(&self, label: &str) -> usize {
        self.labels().iter().position(|l| *l == label).expect("a compared policy")
    }
    /// Runs of case `c` under policy label `p`.
    pub fn of(&self, c: usize, p: &str) -> &[RunResult] {
        &self.results[c][self.policy(p)]
    }
}

fn load_all(study: &Study, opts: &Options, lib: &Library) -> Result<Vec<Experiment>, ReproduceError> {
    let mut out = Vec::new();
    let mut all_cases: Vec<String> = Vec::new();
    for (file, text) in study.files {
        let stem = file.trim_end_matches(".toml");
        if !opts.only.is_empty() && !opts.only.iter().any(|o| stem.contains(o.as_str())) {
            continue;
        }
        let mut exp = match &opts.scenarios {
            Some(dir) => Experiment::load(&dir.join(study.name).join(file), lib),
            None => Experiment::parse(text, &format!("scenarios/{}/{file}", study.name), stem, lib),
        }
        .map_err(ReproduceError::Scenario)?;
        if let Some(n) = opts.seeds {
            let first = exp.seeds.first().copied().unwrap_or(1);
            exp.seeds = (0..n as u64).map(|k| first + k).collect();
        }
        if !opts.cases.is_empty() {
            all_cases.extend(exp.cases.iter().map(|c| c.name.clone()));
            exp.cases.retain(|c| opts.cases.contains(&c.name));
            if exp.cases.is_empty() {
                continue;
            }
        }
        out.push(exp);
    }
    if let Some(bad) = opts.cases.iter().find(|c| !all_cases.contains(c)) {
        return Err(ReproduceError::Usage(format!(
            "--case `{bad}` is no case of the selected experiments of `{}`; cases: {}",
            study.name,
            all_cases.join(", ")
        )));
    }
    if out.is_empty() {
        let names: Vec<&str> = study.files.iter().map(|f| f.0.trim_end_matches(".toml")).collect();
        return Err(ReproduceError::Usage(format!(
            "--only {:?} matches no experiment of `{}`; experiments: {}",
            opts.only,
            study.name,
            names.join(", ")
        )));
    }
    Ok(out)
}

/// Run a study and build its report; `progress(done, total)` is called after each run.
pub fn run<F>(name: &str, opts: &Options, progress: F) -> Result<Report, ReproduceError>
where
    F: Fn(usize, usize) + Sync,
{
    let study = study(name)?;
    let lib = Library::builtin();
    let exps = load_all(study, opts, &lib)?;
    let mut jobs = Vec::new();
    for e in &exps {
        for c in &e.cases {
            for p in &c.compare {
                for &seed in &e.seeds {
                    jobs.push(Job {
                        scenario: &c.scenario,
                        seed,
                        dispatcher: p.dispatcher.clone(),
                        placer: p.placer.clone(),
                    });
                }
            }
        }
    }
    let mut results = run_all(&jobs, opts.jobs, progress).into_iter();
    let mut all = Vec::new();
    for e in exps {
        let mut per_case = Vec::new();
        for c in &e.cases {
            let mut per_policy = Vec::new();
            for _ in &c.compare {
                let mut per_seed = Vec::new();
                for _ in &e.seeds {
                    per_seed.push(results.next().expect("one result per job").map_err(ReproduceError::Scenario)?);
                }
                per_policy.push(per_seed);
            }
            per_case.push(per_policy);
        }
        all.push(Runs { exp: e, results: per_case });
    }
    let mut report = (study.analyse)(&all);
    report.title = study.title.to_string();
    Ok(report)
}

/// Run a study and write its report files into `out`.
pub fn run_to_dir<F>(name: &str, opts: &Options, out: &Path, progress: F) -> Result<Report, ReproduceError>
where
    F: Fn(usize, usize) + Sync,
{
    let report = run(name, opts, progress)?;
    report.write(out).map_err(|e| ReproduceError::Io(out.to_path_buf(), e))?;
    Ok(report)
}

// ---- helpers shared by the studies' analyses ----

/// Seconds from nanoseconds.
pub fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A domain's result by name.
pub fn domain<'a>(r: &'a RunResult, name: &str) -> &'a DomainResult {
    r.domains.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("domain `{name}` in run of {}", r.scenario))
}

/// A domain's completion time in seconds (the run's end when it did not finish).
pub fn completion_s(r: &RunResult, name: &str) -> f64 {
    secs(domain(r, name).completion_ns.unwrap_or(r.end_ns))
}

/// Migrations of every task of a run (within and across memory domains), summed.
pub fn migrations(r: &RunResult) -> f64 {
    r.tasks.iter().map(|t| t.migrations_local + t.migrations_remote).sum::<u64>() as f64
}

/// Per-seed speedup % of `runs` over `base` (same seed order): (1 − T / T_base) × 100.
pub fn speedups(base: &[f64], runs: &[f64]) -> Vec<f64> {
    base.iter().zip(runs).map(|(b, t)| if *b > 0.0 { (1.0 - t / b) * 100.0 } else { 0.0 }).collect()
}

/// Build a summary row from run values.
pub fn row(experiment: &str, case: &str, subject: &str, policy: &str, metric: &str, unit: &str, v: &[f64]) -> Row {
    let s = Stat::of(v);
    Row {
        experiment: experiment.into(),
        case: case.into(),
        subject: subject.into(),
        policy: policy.into(),
        metric: metric.into(),
        mean: s.mean,
        min: s.min,
        max: s.max,
        runs: s.n,
        unit: unit.into(),
    }
}

/// A parameter value as written in a scenario (`30`, `true`, `"0-3"` → `0-3`, lists in brackets).
pub fn param_text(v: &ampsched_model::spec::ParamValue) -> String {
    use ampsched_model::spec::ParamValue as P;
    match v {
        P::Bool(b) => b.to_string(),
        P::Int(i) => i.to_string(),
        P::Float(f) => f.to_string(),
        P::Str(s) => s.clone(),
        P::List(l) => format!("[{}]", l.iter().map(param_text).collect::<Vec<_>>().join(", ")),
    }
}

fn policy_text(p: &ampsched_model::spec::PolicySpec) -> String {
    let ps: Vec<String> = p.params.iter().map(|(k, v)| format!("{k}={}", param_text(v))).collect();
    if ps.is_empty() {
        p.name.clone()
    } else {
        format!("{} ({})", p.name, ps.join(", "))
    }
}

fn machine_text(sc: &crate::scenario::Scenario) -> String {
    let t = &sc.topo;
    let classes: Vec<String> = t
        .classes
        .iter()
        .enumerate()
        .map(|(i, cl)| format!("{} × {} (speed {})", t.cpus.iter().filter(|c| c.class == i).count(), cl.name, cl.speed))
        .collect();
    let md = t.cpus.iter().filter(|c| c.mem_domain == t.cpus[0].mem_domain).count();
    format!("{}; memory domains of {md} CPUs", classes.join(" + "))
}

/// An experiment's section opened by its setup: description, machine (or "per case"),
/// each compared policy (dispatcher + placer with parameters), baseline, cases and seeds.
pub fn section(runs: &Runs) -> Section {
    let e = &runs.exp;
    let mut s = Section::new(&e.name, &format!("{} — {}", e.name, e.title));
    let sc = &e.cases[0].scenario;
    let m0 = machine_text(sc);
    let machine = if e.cases.iter().all(|c| machine_text(&c.scenario) == m0) { m0 } else { "per case".into() };
    let pol: Vec<String> = e.cases[0]
        .compare
        .iter()
        .map(|p| {
            let d = policy_text(p.dispatcher.as_ref().unwrap_or(&sc.dispatcher));
            let pl = p.placer.as_ref().unwrap_or(&sc.placer);
            if pl.name == "none" {
                format!("{} = {d}", p.label)
            } else {
                format!("{} = {d} + placer {}", p.label, policy_text(pl))
            }
        })
        .collect();
    let cases = if e.cases.len() <= 20 {
        e.cases.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
    } else {
        format!("{} cases", e.cases.len())
    };
    s.para(format!(
        "Setup: {}. Machine: {machine}. Policies: {}; baseline {}. Cases: {cases}. Seeds: {} per case and policy ({}).",
        e.description,
        pol.join("; "),
        e.baseline,
        e.seeds.len(),
        e.seeds.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "),
    ));
    s
}
