//! Scenario variables: `[vars]` defaults, `${name}` references, `--set` overrides.
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
//! `ampsched sim --set program=mcf` overrides a default. Substitution works on the parsed document (`toml_edit`), so line numbers
//! in later errors still point into the file. Experiment files (`ampsched-lab`)
//! use the same substitution for their cases.
//!
//! May import: `scenario::error` (for `ScenarioError`) and TOML crates. Must
//! never import the rest of `scenario`, the engine or anything above: scenario
//! loading calls this module, not the reverse.

use super::error::ScenarioError;
use std::collections::BTreeMap;

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
            return Err(ScenarioError::plain(
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
        return Err(ScenarioError::plain(
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

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[vars]
program = "mcf"
tslice = 30
[dispatcher]
name = "credit"
tslice_ms = "${tslice}"
[[domain]]
name = "vm-${program}"
workload = { model = "${program}", work_s = 1.0 }
[[experiment.case]]
vars = { program = "sixtrack", tslice = 10 }
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
    fn overrides_parse_as_toml_values_or_strings() {
        assert_eq!(parse_override("a=3").unwrap().1, toml::Value::Integer(3));
        assert_eq!(parse_override("a=mcf").unwrap().1, toml::Value::String("mcf".into()));
        assert!(parse_override("novalue").is_err());
    }
}
