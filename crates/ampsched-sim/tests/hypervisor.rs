//! The hypervisor's own costs from a scenario (`engine::hv`): a machine's
//! vCPU wake-up latency (`[machine] wake_latency_us`) and a co-scheduler's
//! signal cost (`signal_us`), with their bad inputs.

use ampsched_model::spec::{ParamValue, PolicySpec};
use ampsched_sim::runner::{run_one, Job};
use ampsched_sim::{Library, RunResult, Scenario};

/// Four speed-1 pCPUs without noise; one domain of 2 vCPUs meeting at a
/// blocking barrier 10 times, vCPU 0 computing 1 ms per phase, vCPU 1 2 ms.
fn scenario(machine: &str) -> String {
    format!(
        r#"
seed = 1
[machine]
classes = [{{ name = "cpu", speed = 1.0 }}]
cpus = [{{ class = "cpu", count = 4 }}]
{machine}
[[domain]]
name = "vm"
vcpus = 2
cosched = "con"
tasks = [
  {{ program = [{{ loop = {{ count = 10, body = [{{ compute = {{ ms = 1 }} }}, {{ barrier = {{ id = 0, wait = "block" }} }}] }} }}] }},
  {{ program = [{{ loop = {{ count = 10, body = [{{ compute = {{ ms = 2 }} }}, {{ barrier = {{ id = 0, wait = "block" }} }}] }} }}] }},
]
"#
    )
}

fn parse(text: &str) -> Result<Scenario, String> {
    Scenario::parse(text, "hypervisor.rs", "hv", &Library::builtin()).map_err(|e| e.to_string())
}

fn run(text: &str, policy: &str, params: &[(&str, f64)]) -> RunResult {
    let sc = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let mut p = ampsched_model::spec::Params::new();
    for (k, v) in params {
        p.insert((*k).into(), ParamValue::Float(*v));
    }
    let d = Some(PolicySpec { name: policy.into(), params: p });
    run_one(&Job { scenario: &sc, seed: 1, dispatcher: d, placer: None }).unwrap()
}

fn done_us(r: &RunResult) -> Vec<u64> {
    r.tasks.iter().map(|t| t.completion_ns.expect("done") / 1_000).collect()
}

#[test]
fn each_barrier_release_reaches_the_blocked_vcpu_one_latency_late() {
    // vCPU 0 arrives first every phase and blocks; vCPU 1's arrival releases
    // it. Without a latency both end at 10 × 2 ms = 20 ms. With 25 µs vCPU 0
    // resumes 25 µs after each release, arrives 1.025 ms later, still before
    // vCPU 1 (2 ms): vCPU 1 never waits, so it ends at 20 ms, and vCPU 0's
    // last release (at 20 ms) reaches it at 20.025 ms.
    let r = run(&scenario(""), "credit", &[]);
    assert_eq!(done_us(&r), vec![20_000, 20_000]);
    let r = run(&scenario("wake_latency_us = 25"), "credit", &[]);
    assert_eq!(done_us(&r), vec![20_025, 20_000]);
}

#[test]
fn a_signal_costs_each_pcpu_it_reaches() {
    // Under PCS a normal pick of a CON vCPU signals the pCPUs holding its
    // siblings. Here vCPU 1 (2 ms a phase) is the critical path: each phase
    // ends with its arrival releasing vCPU 0, whose pick on its own pCPU
    // signals vCPU 1's pCPU, where vCPU 1 has just started its next phase
    // (and at the start, the first pick signals the other): 10 signals.
    // Free, both end at 10 × 2 ms = 20 ms. At 50 µs a signal, vCPU 1 pays
    // 50 µs in each phase: 10 × 2.05 ms = 20.5 ms, and vCPU 0's last release
    // comes with it.
    let free = run(&scenario(""), "pcs", &[]);
    let paid = run(&scenario(""), "pcs", &[("signal_us", 50.0)]);
    let signals = |r: &RunResult| r.dispatcher_counters.iter().find(|c| c.0 == "cosched_signals").map(|c| c.1);
    assert_eq!((signals(&free), signals(&paid)), (Some(10.0), Some(10.0)));
    assert_eq!(done_us(&free), vec![20_000, 20_000]);
    assert_eq!(done_us(&paid), vec![20_500, 20_500]);
    // `aash+pcs` signals through the same PCS rules (AASH only places: on
    // equal CPUs every pCPU is fast), so it pays alike.
    let free = run(&scenario(""), "aash+pcs", &[]);
    let paid = run(&scenario(""), "aash+pcs", &[("signal_us", 50.0)]);
    assert_eq!((signals(&free), signals(&paid)), (Some(10.0), Some(10.0)));
    assert_eq!(done_us(&free), vec![20_000, 20_000]);
    assert_eq!(done_us(&paid), vec![20_500, 20_500]);
}

#[test]
fn bad_latency_and_signal_cost_are_refused_with_their_field_named() {
    let e = parse(&scenario("wake_latency_us = -1")).unwrap_err();
    assert!(e.contains("wake_latency_us") && e.contains("-1") && e.contains("µs"), "{e}");
    let e = parse(&scenario("wake_latency_us = 20000")).unwrap_err();
    assert!(e.contains("wake_latency_us") && e.contains("10000"), "{e}");
    let sc = parse(&scenario("")).unwrap();
    let mut p = ampsched_model::spec::Params::new();
    p.insert("signal_us".into(), ParamValue::Float(-5.0));
    let d = Some(PolicySpec { name: "cs".into(), params: p });
    let e = run_one(&Job { scenario: &sc, seed: 1, dispatcher: d, placer: None }).unwrap_err().to_string();
    assert!(e.contains("signal_us"), "{e}");
    let mut p = ampsched_model::spec::Params::new();
    p.insert("signal_us".into(), ParamValue::Float(20_000.0));
    let d = Some(PolicySpec { name: "aash+pcs".into(), params: p });
    let e = run_one(&Job { scenario: &sc, seed: 1, dispatcher: d, placer: None }).unwrap_err().to_string();
    assert!(e.contains("signal_us") && e.contains("10000"), "{e}");
}
