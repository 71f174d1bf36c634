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
