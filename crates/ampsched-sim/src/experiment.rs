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
//! Substitution works on the parsed document, so line numbers in errors still
//! point into the file.

use crate::library::Library;
use crate::scenario::{Scenario, ScenarioError};
use ampsched_model::spec::PolicySpec;
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

fn plain_err(file: &str, path: &str, msg: String) -> ScenarioError {
    ScenarioError { file: file.into(), line: None, col: None, path: path.into(), msg }
}

/// Parse a `--set name=value` override: the value is read as a TOML value
/// (`30`, `2.5`, `true`, `"x"`), else taken as a bare string.
pub fn parse_override(s: &str) -> Result<(String, toml::Value), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("`{s}`: expected NAME=VALUE"))?;
    let k = k.trim();
    if k.is_empty() {
        return Err(format!("`{s}`: empty variable name"));
    }
    let v = v.trim();
    let val = toml::from_str::<toml::Table>(&format!("v = {v}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(v.to_string()));
    Ok((k.to_string(), val))
}

fn to_edit(v: &toml::Value) -> toml_edit::Value {
    // Round-trip through text: the simplest exact conversion between the two crates' value types.
    let t = toml::Table::from_iter([("v".to_string(), v.clone())]);
    let doc: toml_edit::DocumentMut = toml::to_string(&t).expect("a value serialises").parse().expect("reparses");
    match doc.get("v") {
        Some(toml_edit::Item::Value(v)) => v.clone(),
        Some(toml_edit::Item::Table(t)) => toml_edit::Value::InlineTable(t.clone().into_inline_table()),
        // An array of tables (e.g. `cpus = [{ class = "fast", count = 2 }]`) serialises as `[[v]]`.
        Some(toml_edit::Item::ArrayOfTables(a)) => toml_edit::Value::Array(
            a.iter().map(|t| toml_edit::Value::InlineTable(t.clone().into_inline_table())).collect(),
        ),
        _ => toml_edit::Value::from(""),
    }
}

fn display(v: &toml_edit::Value) -> String {
    match v {
        toml_edit::Value::String(s) => s.value().clone(),
        other => other.to_string().trim().to_string(),
    }
}

/// Substitute `${name}` references in every string value of `text` (outside
/// `vars` tables) from the `[vars]` defaults overridden by `set`. Returns the
/// text unchanged when it declares no variables and uses none; a TOML syntax
/// error is left for the scenario parser to report.
pub fn substitute(text: &str, file: &str, set: &BTreeMap<String, toml::Value>) -> Result<String, ScenarioError> {
    if !text.contains("${") && set.is_empty() {
        return Ok(text.to_string());
    }
    let Ok(mut doc) = text.parse::<toml_edit::DocumentMut>() else { return Ok(text.to_string()) };
    let mut vars: BTreeMap<String, toml_edit::Value> = BTreeMap::new();
    if let Some(t) = doc.get("vars").and_then(|i| i.as_table_like()) {
        for (k, item) in t.iter() {
            if let Some(v) = item.as_value() {
                vars.insert(k.to_string(), v.clone());
            }
        }
    }
    for (k, v) in set {
        if !vars.contains_key(k) {
            let known: Vec<&str> = vars.keys().map(|s| s.as_str()).collect();
            return Err(plain_err(
                file,
                &format!("vars.{k}"),
                format!(
                    "unknown variable `{k}`; this file declares: {}",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ),
            ));
        }
        vars.insert(k.clone(), to_edit(v));
    }
    let mut err = None;
    for (k, item) in doc.iter_mut() {
        if k.get() != "vars" {
            walk_item(item, k.get(), &vars, &mut err);
        }
    }
    if let Some((path, name)) = err {
        let known: Vec<&str> = vars.keys().map(|s| s.as_str()).collect();
        return Err(plain_err(
            file,
            &path,
            format!(
                "unknown variable `${{{name}}}`; declare it in [vars] (declared: {})",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ),
        ));
    }
    Ok(doc.to_string())
}

type Vars = BTreeMap<String, toml_edit::Value>;

fn walk_item(item: &mut toml_edit::Item, path: &str, vars: &Vars, err: &mut Option<(String, String)>) {
    match item {
        toml_edit::Item::Value(v) => walk_value(v, path, vars, err),
        toml_edit::Item::Table(t) => {
            for (k, i) in t.iter_mut() {
                if k.get() != "vars" {
                    walk_item(i, &format!("{path}.{}", k.get()), vars, err);
                }
            }
        }
        toml_edit::Item::ArrayOfTables(a) => {
            for (n, t) in a.iter_mut().enumerate() {
                for (k, i) in t.iter_mut() {
                    if k.get() != "vars" {
                        walk_item(i, &format!("{path}[{n}].{}", k.get()), vars, err);
                    }
                }
            }
        }
        toml_edit::Item::None => {}
    }
}

fn walk_value(v: &mut toml_edit::Value, path: &str, vars: &Vars, err: &mut Option<(String, String)>) {
    match v {
        toml_edit::Value::String(s) => {
            let raw = s.value().clone();
            if !raw.contains("${") {
                return;
            }
            let whole = raw.strip_prefix("${").and_then(|r| r.strip_suffix('}')).filter(|n| !n.contains('}'));
            if let Some(name) = whole {
                match vars.get(name) {
                    Some(val) => {
                        let decor = v.decor().clone();
                        *v = val.clone();
                        *v.decor_mut() = decor;
                    }
                    None => *err = err.take().or(Some((path.to_string(), name.to_string()))),
                }
                return;
            }
            let mut out = String::new();
            let mut rest = raw.as_str();
            while let Some(i) = rest.find("${") {
                out.push_str(&rest[..i]);
                let after = &rest[i + 2..];
                let Some(j) = after.find('}') else {
                    out.push_str(&rest[i..]);
                    rest = "";
                    break;
                };
                let name = &after[..j];
                match vars.get(name) {
                    Some(val) => out.push_str(&display(val)),
                    None => *err = err.take().or(Some((path.to_string(), name.to_string()))),
                }
                rest = &after[j + 1..];
            }
            out.push_str(rest);
            let decor = v.decor().clone();
            *v = toml_edit::Value::from(out);
            *v.decor_mut() = decor;
        }
        toml_edit::Value::Array(a) => {
            for (n, x) in a.iter_mut().enumerate() {
                walk_value(x, &format!("{path}[{n}]"), vars, err);
            }
        }
        toml_edit::Value::InlineTable(t) => {
            for (k, x) in t.iter_mut() {
                if k.get() != "vars" {
                    walk_value(x, &format!("{path}.{}", k.get()), vars, err);
                }
            }
        }
        _ => {}
    }
}

impl Experiment {
    /// Load an experiment file.
    pub fn load(path: &Path, lib: &Library) -> Result<Experiment, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| plain_err(&file, "", format!("cannot read the experiment file: {e}")))?;
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
            return Err(plain_err(
                file,
                "experiment.baseline",
                format!("`{baseline}` is not a compared policy; labels: {}", labels.join(", ")),
            ));
        }
        let n = spec.seeds.unwrap_or(base.runs);
        if n == 0 {
            return Err(plain_err(file, "experiment.seeds", "must be ≥ 1".into()));
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
        toml::from_str(text).map_err(|e| plain_err(file, "experiment", e.message().trim().to_string()))?;
    let spec = outer.experiment.ok_or_else(|| {
        plain_err(file, "experiment", "this file has no [experiment] table (needed to reproduce it)".into())
    })?;
    if spec.compare.is_empty() {
        return Err(plain_err(file, "experiment.compare", "list at least one policy to run".into()));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, p) in spec.compare.iter().enumerate() {
        if !seen.insert(p.label.clone()) {
            return Err(plain_err(
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
    fn whole_references_keep_their_type_and_partial_ones_interpolate() {
        let mut set = BTreeMap::new();
        set.insert("tslice".to_string(), toml::Value::Integer(10));
        let out = substitute(FILE, "f.toml", &set).unwrap();
        assert!(out.contains("tslice_ms = 10"), "{out}");
        assert!(out.contains("name = \"vm-mcf\""));
        // the [vars] table itself and case vars are left alone
        assert!(out.contains("program = \"mcf\"") && out.contains("vars = { program = \"sixtrack\", tslice = 10 }"));
        // line numbers are kept
        assert_eq!(out.lines().count(), FILE.lines().count());
    }

    #[test]
    fn unknown_variables_are_errors_naming_the_field() {
        let e = substitute(&FILE.replace("${program}\", work_s", "${prog}\", work_s"), "f.toml", &BTreeMap::new())
            .unwrap_err();
        assert_eq!(e.path, "domain[0].workload.model");
        assert!(e.msg.contains("`${prog}`") && e.msg.contains("program, tslice"), "{}", e.msg);
        let mut set = BTreeMap::new();
        set.insert("nope".to_string(), toml::Value::Integer(1));
        assert!(substitute(FILE, "f.toml", &set).unwrap_err().msg.contains("unknown variable `nope`"));
    }

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

    #[test]
    fn overrides_parse_as_toml_values_or_strings() {
        assert_eq!(parse_override("a=3").unwrap().1, toml::Value::Integer(3));
        assert_eq!(parse_override("a=mcf").unwrap().1, toml::Value::String("mcf".into()));
        assert!(parse_override("novalue").is_err());
    }
}
