//! `ampsched._ampsched`: the Python bindings of ampsched (PyO3, built by maturin).
//!
//! Translation only (docs/design/architecture.md, rule 9): scenario text or path in,
//! the simulator's `ampsched.sim/1` JSON (and Perfetto trace bytes) out.
//! Policy parameters cross as JSON text and become `Params`; every Rust error
//! becomes an `AmpschedError` (a `ValueError`) in one place, `to_py`. The
//! DataFrames and sweeps are Python (`python/ampsched`); `ampsched.plots` turns
//! DataFrames into chart specs that cross as JSON and are drawn by the reports'
//! renderer (`ampsched-charts`), so figures have one plotting path.

#![warn(missing_docs)]

use ampsched_model::spec::{Params, PolicySpec};
use ampsched_policy::{DISPATCHERS, PLACERS};
use ampsched_sim::admission::Estimate;
use ampsched_sim::runner::{run_one, run_traced, Job};
use ampsched_sim::trace::TraceOptions;
use ampsched_sim::{Library, Scenario, SimOutput, SCHEMA};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::Path;

create_exception!(ampsched, AmpschedError, PyValueError, "A bad scenario, policy, parameter or file.");

/// The one place where Rust errors become Python exceptions.
fn to_py(e: impl std::fmt::Display) -> PyErr {
    AmpschedError::new_err(e.to_string())
}

/// A policy override: `name` (or the file's) with the file's parameters when the
/// name is the file's, overlaid by `params_json` (a JSON object).
fn policy(name: Option<String>, params_json: Option<String>, file: &PolicySpec) -> PyResult<Option<PolicySpec>> {
    if name.is_none() && params_json.is_none() {
        return Ok(None);
    }
    let name = name.unwrap_or_else(|| file.name.clone());
    let mut params = if name == file.name { file.params.clone() } else { Params::new() };
    if let Some(j) = params_json {
        let extra: Params =
            serde_json::from_str(&j).map_err(|e| to_py(format!("policy parameters for {name}: {e}")))?;
        params.extend(extra);
    }
    Ok(Some(PolicySpec { name, params }))
}

/// Simulate a scenario (TOML text, or a file path when `is_path`) for `runs`
/// seeds from `seed` (defaults: the file's). Returns the `ampsched.sim/1` JSON
/// and, with `trace`, one Perfetto trace (bytes) per run. A run estimated
/// past the admission limits (`ampsched_sim::admission`) is refused unless
/// `allow_large`.
#[pyfunction]
#[pyo3(signature = (scenario, is_path, dispatcher=None, dispatcher_params=None, placer=None, placer_params=None, seed=None, runs=None, trace=false, trace_period_ms=10.0, allow_large=false))]
#[allow(clippy::too_many_arguments)]
fn simulate<'py>(
    py: Python<'py>,
    scenario: String,
    is_path: bool,
    dispatcher: Option<String>,
    dispatcher_params: Option<String>,
    placer: Option<String>,
    placer_params: Option<String>,
    seed: Option<u64>,
    runs: Option<u32>,
    trace: bool,
    trace_period_ms: f64,
    allow_large: bool,
) -> PyResult<(String, Vec<Bound<'py, PyBytes>>)> {
    let lib = Library::builtin();
    let sc = if is_path {
        Scenario::load(Path::new(&scenario), &lib)
    } else {
        Scenario::parse(&scenario, "<scenario>", "scenario", &lib)
    }
    .map_err(to_py)?;
    let d = policy(dispatcher, dispatcher_params, &sc.dispatcher)?;
    let p = policy(placer, placer_params, &sc.placer)?;
    let first = seed.unwrap_or(sc.seed);
    let n = runs.unwrap_or(sc.runs);
    if n == 0 {
        return Err(to_py("runs must be ≥ 1"));
    }
    if !(trace_period_ms.is_finite() && trace_period_ms > 0.0) {
        return Err(to_py(format!("trace_period_ms must be > 0, got {trace_period_ms}")));
    }
    // The runs go one after the other: one at a time.
    let est = Estimate::new(&sc, d.as_ref(), p.as_ref(), n as u64, 1).map_err(to_py)?;
    est.admit(allow_large, "allow_large=True").map_err(|e| to_py(format!("{}: {e}", sc.file)))?;
    let opts = TraceOptions { sample_period: ampsched_model::Nanos::from_ms_f64(trace_period_ms) };
    let out = py.detach(|| -> Result<(String, Vec<Vec<u8>>), String> {
        let mut results = Vec::new();
        let mut traces = Vec::new();
        for i in 0..n as u64 {
            let job = Job { scenario: &sc, seed: first + i, dispatcher: d.clone(), placer: p.clone() };
            if trace {
                let (r, t) = run_traced(&job, opts).map_err(|e| e.to_string())?;
                results.push(r);
                traces.push(t);
            } else {
                results.push(run_one(&job).map_err(|e| e.to_string())?);
            }
        }
        let doc = SimOutput { schema: SCHEMA, runs: results };
        Ok((serde_json::to_string(&doc).map_err(|e| e.to_string())?, traces))
    });
    let (json, traces) = out.map_err(to_py)?;
    Ok((json, traces.iter().map(|t| PyBytes::new(py, t)).collect()))
}

/// Every dispatcher and placer with its parameters, as JSON:
/// `[{"kind", "name", "doc", "params": [{"name", "type", "default", "unit", "range", "doc"}]}]`.
#[pyfunction]
fn policies_json() -> String {
    let mut out = Vec::new();
    for (kind, list) in [("dispatcher", DISPATCHERS), ("placer", PLACERS)] {
        for p in list {
            let params: Vec<_> = p
                .params
                .iter()
                .map(|d| {
                    serde_json::json!({"name": d.name, "type": d.type_name(), "default": d.default_text(),
                        "unit": d.unit, "range": d.range_text(), "doc": d.doc})
                })
                .collect();
            out.push(serde_json::json!({"kind": kind, "name": p.name, "doc": p.doc, "params": params}));
        }
    }
    serde_json::Value::Array(out).to_string()
}

/// The workload model library as JSON: `[{"name", "suite", "template", "description", "source"}]`.
#[pyfunction]
fn models_json() -> String {
    let lib = Library::builtin();
    let out: Vec<_> = lib
        .entries()
        .iter()
        .map(|m| {
            serde_json::json!({"name": m.name, "suite": m.suite, "template": m.template,
                               "description": m.description, "source": m.source})
        })
        .collect();
    serde_json::Value::Array(out).to_string()
}

/// A chart spec (`ampsched_charts::Chart` as JSON, built by `ampsched.plots`).
fn chart(spec_json: &str) -> PyResult<ampsched_charts::Chart> {
    serde_json::from_str(spec_json).map_err(|e| to_py(format!("chart spec: {e}")))
}

/// Draw a chart spec (JSON) as SVG with the reports' renderer (`ampsched-charts`).
#[pyfunction]
fn chart_svg(spec_json: &str) -> PyResult<String> {
    chart(spec_json)?.try_svg().map_err(|e| to_py(format!("chart: {e}")))
}

/// The caption sentence saying how to read a chart spec (JSON).
#[pyfunction]
fn chart_reading(spec_json: &str) -> PyResult<String> {
    Ok(chart(spec_json)?.reading())
}

/// The native module.
#[pymodule]
fn _ampsched(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(policies_json, m)?)?;
    m.add_function(wrap_pyfunction!(models_json, m)?)?;
    m.add_function(wrap_pyfunction!(chart_svg, m)?)?;
    m.add_function(wrap_pyfunction!(chart_reading, m)?)?;
    m.add("AmpschedError", m.py().get_type::<AmpschedError>())?;
    m.add("SCHEMA", SCHEMA)?;
    Ok(())
}
