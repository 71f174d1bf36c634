//! Capacity contention in a shared LLC (`[machine] llc_contention`,
//! `engine::llc`): tasks computing at once under one LLC slow each other's
//! memory-bound share by what their working sets evict, and the engine
//! re-plans the co-runners whenever one starts or stops computing.

use ampsched_model::spec::PolicySpec;
use ampsched_sim::runner::{run_one, Job};
use ampsched_sim::{Library, RunResult, Scenario};

/// Two speed-1 CPUs, `per` CPUs per memory domain, a 2 MiB LLC whose misses
/// cost 3 times a hit (6 over 2 GB/s); tasks "a" (1 s of work) and "b"
/// (2 s), each half memory-bound with a working set of `ws` KiB.
fn scenario(machine: &str, per: u32, ws: u32) -> String {
    format!(
        r#"
seed = 1
[machine]
classes = [{{ name = "cpu", speed = 1.0 }}]
cpus = [{{ class = "cpu", count = 2 }}]
mem_domain_size = {per}
cache = {{ l2_kb = 512, llc_kb = 2048, llc_refill_gbps = 6.0, dram_refill_gbps = 2.0 }}
{machine}
[[domain]]
name = "a"
vcpus = 1
workload = {{ model = "cpu-bound", work_s = 1.0, mem = 0.5, ws_kb = {ws} }}
[[domain]]
name = "b"
vcpus = 1
workload = {{ model = "cpu-bound", work_s = 2.0, mem = 0.5, ws_kb = {ws} }}
"#
    )
}

fn parse(text: &str) -> Result<Scenario, String> {
    Scenario::parse(text, "llc.rs", "llc", &Library::builtin()).map_err(|e| e.to_string())
}

fn run(text: &str) -> RunResult {
    let sc = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let fair = Some(PolicySpec { name: "fair".into(), params: Default::default() });
    run_one(&Job { scenario: &sc, seed: 1, dispatcher: fair, placer: None }).unwrap()
}

fn done_ms(r: &RunResult) -> Vec<u64> {
    r.tasks.iter().map(|t| t.completion_ns.expect("done") / 1_000_000).collect()
}

#[test]
fn two_working_sets_that_fill_the_llc_twice_slow_each_other_while_both_compute() {
    // Without contention each runs alone at cost 1: done at 1 s and 2 s.
    assert_eq!(done_ms(&run(&scenario("", 2, 2048))), vec![1000, 2000]);
    // Contention on one 2 MiB LLC: claims 4096 KiB, each keeps half, h_s = 1/2,
    // h_a = 1, k = (1/2 + 1/2 · 3) / 1 = 2: cost 0.5 + 0.5 · 2 = 1.5 while both
    // compute. "a" ends its 1 s of work at 1.5 s; by then "b" has done 1 s,
    // and alone (cost 1) it ends its last 1 s at 2.5 s.
    let on = run(&scenario("llc_contention = true", 2, 2048));
    assert_eq!(done_ms(&on), vec![1500, 2500]);
    // Each CPU its own LLC (memory domains of 1 CPU): nothing shared, 1 s and 2 s.
    assert_eq!(done_ms(&run(&scenario("llc_contention = true", 1, 2048))), vec![1000, 2000]);
    // Working sets inside the private L2 (512 KiB) never reach the LLC.
    assert_eq!(done_ms(&run(&scenario("llc_contention = true", 2, 512))), vec![1000, 2000]);
}

#[test]
fn llc_contention_with_the_bus_or_clock_modulation_is_refused() {
    for other in ["memory_bus = { gbps = 3.2 }", "clock_modulation = true"] {
        let e = parse(&scenario(&format!("llc_contention = true\n{other}"), 2, 2048)).unwrap_err();
        assert!(e.contains("llc_contention") && e.contains("not modelled"), "{e}");
    }
    // Not a boolean: the parser names the line and column (the `[machine]` line 8).
    let e = parse(&scenario("llc_contention = 1", 2, 2048)).unwrap_err();
    assert!(e.contains("llc.rs:8:") && e.contains("expected a boolean"), "{e}");
}
