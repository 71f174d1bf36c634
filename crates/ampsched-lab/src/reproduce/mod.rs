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
pub mod common;
pub mod cosched;
pub mod study;

pub use common::{
    completion_s, domain, migrations, param_text, row, secs, section, speedups, EmbeddedFile, Runs, Study,
};

use crate::experiment::Experiment;
use crate::ledger;
use crate::report::{Report, WriteError};
use ampsched_sim::library::Library;
use ampsched_sim::runner::{run_all, Job};
use ampsched_sim::scenario::ScenarioError;
use std::fmt;
use std::path::{Path, PathBuf};

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
    /// Reading an input file failed.
    Io(PathBuf, std::io::Error),
    /// The output directory or a report file cannot be written (checked before the runs, too).
    Write(WriteError),
    /// A bad ledger file or claim (the message names the claim).
    Ledger(String),
}

impl fmt::Display for ReproduceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReproduceError::Usage(m) => write!(f, "{m}"),
            ReproduceError::Scenario(e) => write!(f, "{e}"),
            ReproduceError::Io(p, e) => write!(f, "{}: cannot read: {e}", p.display()),
            ReproduceError::Write(e) => write!(f, "{e}"),
            ReproduceError::Ledger(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for ReproduceError {}

/// The study's ledger claims (from `--scenarios DIR/<study>/ledger.toml` when that file exists),
/// and the file name errors give.
fn load_ledger(study: &Study, opts: &Options) -> Result<(Vec<ledger::Claim>, String), ReproduceError> {
    let embedded = format!("scenarios/{}/ledger.toml", study.name);
    let (text, file) = match &opts.scenarios {
        Some(dir) if dir.join(study.name).join("ledger.toml").exists() => {
            let p = dir.join(study.name).join("ledger.toml");
            let t = std::fs::read_to_string(&p).map_err(|e| ReproduceError::Io(p.clone(), e))?;
            (t, p.display().to_string())
        }
        _ => (study.ledger.to_string(), embedded),
    };
    let claims = ledger::parse(&text, &file).map_err(ReproduceError::Ledger)?;
    Ok((claims, file))
}

fn load_all(
    study: &Study,
    opts: &Options,
    lib: &Library,
    claims: &[ledger::Claim],
    ledger_file: &str,
) -> Result<Vec<Experiment>, ReproduceError> {
    let mut out = Vec::new();
    let mut all_cases: Vec<String> = Vec::new();
    let names: Vec<&str> = study.files.iter().map(|f| f.0.trim_end_matches(".toml")).collect();
    ledger::validate(claims, ledger_file, &names, &[], &[]).map_err(ReproduceError::Ledger)?;
    ledger::validate_metrics(claims, ledger_file, study.metrics).map_err(ReproduceError::Ledger)?;
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
        let cases: Vec<String> = exp.cases.iter().map(|c| c.name.clone()).collect();
        ledger::validate(claims, ledger_file, &names, std::slice::from_ref(&exp), std::slice::from_ref(&cases))
            .map_err(ReproduceError::Ledger)?;
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
    let (claims, ledger_file) = load_ledger(study, opts)?;
    let exps = load_all(study, opts, &lib, &claims, &ledger_file)?;
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
    let ran: Vec<Experiment> = all.into_iter().map(|r| r.exp).collect();
    report.ledger = ledger::evaluate(&claims, &ledger_file, &report.rows, &ran).map_err(ReproduceError::Ledger)?;
    if !report.ledger.is_empty() {
        report.sections.insert(0, ledger::section(&report.ledger));
    }
    Ok(report)
}

/// Run a study and write its report files into `out`. `out` is created and
/// checked writable before anything runs, so a bad `--out` costs no run.
pub fn run_to_dir<F>(name: &str, opts: &Options, out: &Path, progress: F) -> Result<Report, ReproduceError>
where
    F: Fn(usize, usize) + Sync,
{
    study(name)?;
    Report::prepare_dir(out).map_err(ReproduceError::Write)?;
    let report = run(name, opts, progress)?;
    report.write(out).map_err(ReproduceError::Write)?;
    Ok(report)
}
