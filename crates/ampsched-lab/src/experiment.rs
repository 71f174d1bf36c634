//! Experiment files: a scenario plus the comparison a study makes on it.
//!
//! A scenario file may declare variables and use them anywhere:
//!
//! ```toml
//! [vars]
//! program = "leslie3d"        # default value
//! tslice = 30
//!
//! [dispatcher]
//! name = "credit"
//! tslice_ms = "${tslice}"     # a whole-string reference keeps the value's type (30, not "30")
//! ```
//!
//! and an `[experiment]` table naming what to compare and over which cases:
//!
//! ```toml
//! [experiment]
//! title = "Fair sharing of one fast core"
//! baseline = "credit"
//! seeds = 3
//! compare = [{ label = "credit", dispatcher = { name = "credit" } },
//!            { label = "aash",   dispatcher = { name = "aash" } }]
//! [[experiment.case]]
//! name = "mcf"
//! vars = { program = "mcf" }
//! ```
//!
//! `ampsched sim` runs such a file with the variables' defaults (or
//! `--set name=value`); `ampsched reproduce` runs every case × policy × seed.
//! Variables are substituted by `ampsched_sim::scenario::vars` (the same code
//! scenario loading uses), so line numbers in errors still point into the file.

use ampsched_model::spec::PolicySpec;
use ampsched_sim::scenario::vars::substitute;
use ampsched_sim::{Library, Scenario, ScenarioError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// One policy configuration an experiment compares.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRun {
    /// Short label used in tables and `summary.json` (`policy` column).
    pub label: String,
    /// Dispatcher (default: the scenario's).
    pub dispatcher: Option<PolicySpec>,
    /// Placer (default: the scenario's).
    pub placer: Option<PolicySpec>,
}

/// One case of an experiment: a name and variable values.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    /// Case name (`case` column), e.g. a program or a set.
    pub name: String,
    /// Variable values for this case (others keep their defaults).
    #[serde(default)]
    pub vars: toml::Table,
}

/// The `[experiment]` table.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSpec {
    /// Human title (default: the scenario's description).
    pub title: Option<String>,
    /// Label of the policy others are compared against (default: the first).
    pub baseline: Option<String>,
    /// Seeds per case and policy (default: the scenario's `runs`).
    pub seeds: Option<u32>,
    /// Policies to compare.
    pub compare: Vec<PolicyRun>,
    /// Cases (default: one case, `default`, with the variables' defaults).
    #[serde(default, rename = "case")]
    pub cases: Vec<CaseSpec>,
}

#[derive(Deserialize)]
struct Outer {
    experiment: Option<ExperimentSpec>,
}

/// A loaded case: its scenario (variables substituted) and the policies to run on it.
#[derive(Clone)]
pub struct Case {
    /// Case name.
    pub name: String,
    /// The scenario with this case's variables.
    pub scenario: Scenario,
    /// Policies (with this case's variables substituted into their parameters).
    pub compare: Vec<PolicyRun>,
}

/// A loaded experiment file.
#[derive(Clone)]
pub struct Experiment {
    /// Experiment id (the scenario name).
    pub name: String,
    /// Title.
    pub title: String,
    /// Description (the scenario's).
    pub description: String,
    /// Baseline policy label.
    pub baseline: String,
    /// Seeds every case × policy runs with.
    pub seeds: Vec<u64>,
    /// Cases in file order.
    pub cases: Vec<Case>,
}

impl Experiment {
    /// Load an experiment file.
    pub fn load(path: &Path, lib: &Library) -> Result<Experiment, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError::plain(&file, "", format!("cannot read the experiment file: {e}")))?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
        Experiment::parse(&text, &file, &stem, lib)
    }

    /// Parse experiment text (`file` names it in errors).
    pub fn parse(text: &str, file: &str, default_name: &str, lib: &Library) -> Result<Experiment, ScenarioError> {
        // The defaults first: the file must be a valid scenario on its own.
        let base = Scenario::parse_with(text, file, default_name, lib, &BTreeMap::new())?;
        let spec = experiment_spec(&substitute(text, file, &BTreeMap::new())?, file)?;
        let cases = if spec.cases.is_empty() {
            vec![CaseSpec { name: "default".into(), vars: toml::Table::new() }]
        } else {
            spec.cases.clone()
        };
        let mut out = Vec::new();
        for (i, c) in cases.iter().enumerate() {
            let set: BTreeMap<String, toml::Value> = c.vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            let here = |mut e: ScenarioError| {
                e.msg = format!("{} (in experiment.case[{i}] `{}`)", e.msg, c.name);
                e
            };
            let scenario = Scenario::parse_with(text, file, default_name, lib, &set).map_err(here)?;
            let compare = experiment_spec(&substitute(text, file, &set).map_err(here)?, file).map_err(here)?.compare;
            for (j, p) in compare.iter().enumerate() {
                scenario
                    .config(0, p.dispatcher.as_ref(), p.placer.as_ref())
                    .map_err(|mut e| {
                        e.path = format!("experiment.compare[{j}].{}", e.path);
                        e
                    })
                    .map_err(here)?;
            }
            out.push(Case { name: c.name.clone(), scenario, compare });
        }
        let labels: Vec<&str> = spec.compare.iter().map(|p| p.label.as_str()).collect();
        let baseline =
            spec.baseline.clone().unwrap_or_else(|| labels.first().map(|s| s.to_string()).unwrap_or_default());
        if !labels.contains(&baseline.as_str()) {
            return Err(ScenarioError::plain(
                file,
                "experiment.baseline",
                format!("`{baseline}` is not a compared policy; labels: {}", labels.join(", ")),
            ));
        }
        let n = spec.seeds.unwrap_or(base.runs);
        if n == 0 {
            return Err(ScenarioError::plain(file, "experiment.seeds", "must be ≥ 1".into()));
        }
        Ok(Experiment {
            name: base.name.clone(),
            title: spec.title.clone().unwrap_or_else(|| base.description.clone()),
            description: base.description.clone(),
            baseline,
            seeds: (0..n as u64).map(|k| base.seed + k).collect(),
            cases: out,
        })
    }
}

fn experiment_spec(text: &str, file: &str) -> Result<ExperimentSpec, ScenarioError> {
    let outer: Outer =
        toml::from_str(text).map_err(|e| ScenarioError::plain(file, "experiment", e.message().trim().to_string()))?;
    let spec = outer.experiment.ok_or_else(|| {
        ScenarioError::plain(file, "experiment", "this file has no [experiment] table (needed to reproduce it)".into())
    })?;
    if spec.compare.is_empty() {
        return Err(ScenarioError::plain(file, "experiment.compare", "list at least one policy to run".into()));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, p) in spec.compare.iter().enumerate() {
        if !seen.insert(p.label.clone()) {
            return Err(ScenarioError::plain(
                file,
                &format!("experiment.compare[{i}].label"),
                format!("`{}` is used twice", p.label),
            ));
        }
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
name = "t"
[vars]
program = "mcf"
tslice = 30
[machine]
classes = [{ name = "fast", speed = 2.0 }, { name = "slow", speed = 1.0 }]
cpus = [{ class = "fast", count = 1 }, { class = "slow", count = 1 }]
[dispatcher]
name = "credit"
tslice_ms = "${tslice}"
[[domain]]
name = "vm-${program}"
vcpus = 1
workload = { model = "${program}", work_s = 1.0 }
[experiment]
seeds = 2
compare = [{ label = "credit", dispatcher = { name = "credit", tslice_ms = "${tslice}" } }, { label = "aash", dispatcher = { name = "aash" } }]
[[experiment.case]]
name = "sixtrack"
vars = { program = "sixtrack", tslice = 10 }
[[experiment.case]]
name = "default"
"#;

    #[test]
    fn experiment_cases_get_their_own_scenarios_and_policy_parameters() {
        let lib = Library::builtin();
        let e = Experiment::parse(FILE, "f.toml", "t", &lib).unwrap();
        assert_eq!(e.seeds, vec![1, 2]);
        assert_eq!(e.baseline, "credit");
        assert_eq!(e.cases.len(), 2);
        assert_eq!(e.cases[0].scenario.domains[0].name, "vm-sixtrack");
        assert_eq!(e.cases[1].scenario.domains[0].name, "vm-mcf");
        let p = &e.cases[0].compare[0].dispatcher.as_ref().unwrap().params["tslice_ms"];
        assert_eq!(p.as_f64(), Some(10.0));
    }
}
