//! What the studies' analyses share: the `Study` and `Runs` types and the
//! helpers that turn results into rows and a section's setup paragraph.
//!
//! May import: `crate::experiment`, `crate::report`, the simulator's results.
//! Must never import a study or `reproduce` itself (which registers the
//! studies and runs them): the studies import this room.

use crate::experiment::Experiment;
use crate::report::{Report, Row, Section, Stat};
use ampsched_sim::results::{DomainResult, RunResult};

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
    /// Its ledger of published figures (`ledger.toml`, see `crate::ledger`).
    pub ledger: &'static str,
    /// Every metric its analysis can put in a summary row (a claim naming another is a load-time error).
    pub metrics: &'static [&'static str],
    /// Turn every experiment's runs into the report.
    pub analyse: fn(&[Runs]) -> Report,
}

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
        values: v.to_vec(),
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

fn machine_text(sc: &ampsched_sim::scenario::Scenario) -> String {
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
