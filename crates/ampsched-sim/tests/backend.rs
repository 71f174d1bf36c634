//! The I/O back end from a scenario (`[machine.io_backend]`, `engine::backend`):
//! a guest's I/O served by dom0's vCPU, and the bad inputs.

use ampsched_model::spec::PolicySpec;
use ampsched_sim::runner::{run_one, Job};
use ampsched_sim::{Library, RunResult, Scenario};

/// Two speed-1 pCPUs without noise: dom0 (background, one vCPU, idle or
/// `dom0_work`) and one guest vCPU computing 1 ms, doing a 2 ms I/O, computing 1 ms.
fn scenario(backend: &str, dom0_work: &str) -> String {
    format!(
        r#"
seed = 1
[machine]
classes = [{{ name = "cpu", speed = 1.0 }}]
cpus = [{{ class = "cpu", count = 2 }}]
{backend}
[[domain]]
name = "dom0"
vcpus = 1
background = true
workload = {{ program = [{dom0_work}] }}

[[domain]]
name = "vm"
vcpus = 1
workload = {{ program = [{{ compute = {{ ms = 1 }} }}, {{ io = {{ ms = 2 }} }}, {{ compute = {{ ms = 1 }} }}] }}
"#
    )
}

const BACKEND: &str = "io_backend = { domain = \"dom0\", request_us = 40, response_us = 60 }";

fn parse(text: &str) -> Result<Scenario, String> {
    Scenario::parse(text, "backend.rs", "backend", &Library::builtin()).map_err(|e| e.to_string())
}

fn run(text: &str) -> RunResult {
    let sc = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let d = Some(PolicySpec { name: "credit".into(), params: Default::default() });
    run_one(&Job { scenario: &sc, seed: 1, dispatcher: d, placer: None }).unwrap()
}

fn guest_done_us(r: &RunResult) -> u64 {
    r.tasks[1].completion_ns.expect("done") / 1_000
}

#[test]
fn an_io_through_dom0_costs_its_request_and_response_work() {
    // Without a back end the I/O is a 2 ms sleep: 1 + 2 + 1 = 4 ms. With one,
    // dom0's idle vCPU takes the other pCPU: 40 µs of request work, the 2 ms
    // device, 60 µs of response work: 4.100 ms.
    assert_eq!(guest_done_us(&run(&scenario("", ""))), 4000);
    assert_eq!(guest_done_us(&run(&scenario(BACKEND, ""))), 4100);
    // With the machine's 10 µs wake-up latency each of the three event-channel
    // wake-ups is 10 µs late (dom0's vCPU for the request, again for the
    // device's completion, then the guest's vCPU): 4.130 ms.
    let late = format!("wake_latency_us = 10\n{BACKEND}");
    assert_eq!(guest_done_us(&run(&scenario(&late, ""))), 4130);
    // Same scenario and seed: the same result.
    let (a, b) = (run(&scenario(&late, "")), run(&scenario(&late, "")));
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
}

#[test]
fn a_backend_that_is_missing_or_not_background_is_refused() {
    let e = parse(&scenario("io_backend = { domain = \"dom1\", request_us = 1, response_us = 1 }", "")).unwrap_err();
    assert!(e.contains("machine.io_backend.domain") && e.contains("`dom1`") && e.contains("dom0"), "{e}");
    let e = parse(&scenario("io_backend = { domain = \"vm\", request_us = 1, response_us = 1 }", "")).unwrap_err();
    assert!(e.contains("`vm` is not a background domain") && e.contains("dom0"), "{e}");
    let e = parse(&scenario(
        "io_backend = { domain = \"dom0\", request_us = 1, response_us = 1 }",
        "{ barrier = { id = 0, wait = \"block\" } }",
    ))
    .unwrap_err();
    assert!(e.contains("domain[0].workload") && e.contains("may only compute, sleep"), "{e}");
    let e = parse(&scenario("io_backend = { domain = \"dom0\", request_us = -1, response_us = 1 }", "")).unwrap_err();
    assert!(e.contains("request_us") && e.contains("-1"), "{e}");
    let e = parse(&scenario("io_backend = { domain = \"dom0\", request_us = 1 }", "")).unwrap_err();
    assert!(e.contains("response_us"), "{e}");
}

#[test]
fn the_cosched_npb_testbed_serves_ft_and_mg_io_through_dom0() {
    // The shipped scenario: dom0 (domain 0) is the back end at 15 + 15 µs; its
    // FT case gives vm0's thread 0 500 requests of 0.5 ms per sequential section.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/cosched/cosched-npb.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let ft: toml::Value = toml::from_str("v = { model = \"npb-ft\", io_ms = 250, io_requests = 500 }").unwrap();
    let set = std::collections::BTreeMap::from([("vm0_work".to_string(), ft["v"].clone())]);
    let sc = Scenario::parse_with(&text, path, "cosched-npb", &Library::builtin(), &set).unwrap();
    let b = sc.topo.io_backend.expect("an I/O back end");
    assert_eq!((b.domain.0, b.request.0, b.response.0), (0, 15_000, 15_000));
    let vm0 = sc.domains.iter().position(|d| d.name == "vm0").unwrap() as u32;
    let t0 = sc.tasks.iter().find(|t| t.domain.0 == vm0).unwrap();
    let io: Vec<_> = t0.program.ops.iter().filter(|op| matches!(op, ampsched_model::Op::Io { .. })).collect();
    assert_eq!(io, [&ampsched_model::Op::Io { dur: ampsched_model::Nanos(500_000) }; 2]);
    // Its default case (BT) does no I/O.
    let sc = Scenario::parse(&text, path, "cosched-npb", &Library::builtin()).unwrap();
    assert!(sc.tasks.iter().all(|t| !t.program.ops.iter().any(|op| matches!(op, ampsched_model::Op::Io { .. }))));
}
