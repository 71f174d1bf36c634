//! The shared memory bus (`[machine.memory_bus]`, `engine::bus`): co-running
//! memory-bound tasks that ask more of the bus than it carries slow each
//! other's memory-bound share, and the engine re-plans the running tasks'
//! completions whenever the set of co-runners changes.

use ampsched_model::spec::PolicySpec;
use ampsched_sim::runner::{run_one, Job};
use ampsched_sim::{Library, RunResult, Scenario};

/// Four speed-1 CPUs; one task of 1 s of work and three of 2 s, each half
/// memory-bound (no working set: no migration cost), one per CPU.
fn scenario(bus: &str) -> String {
    format!(
        r#"
seed = 1
[machine]
classes = [{{ name = "fast", speed = 1.0 }}]
cpus = [{{ class = "fast", count = 4 }}]
{bus}
[[domain]]
name = "short"
vcpus = 1
workload = {{ model = "cpu-bound", work_s = 1.0, mem = 0.5, ws_kb = 0 }}
[[domain]]
name = "long"
vcpus = 3
workload = {{ model = "cpu-bound", work_s = 2.0, mem = 0.5, ws_kb = 0 }}
"#
    )
}

fn run(text: &str) -> RunResult {
    let sc = Scenario::parse(text, "memory_bus.rs", "bus", &Library::builtin()).unwrap_or_else(|e| panic!("{e}"));
    let fair = Some(PolicySpec { name: "fair".into(), params: Default::default() });
    run_one(&Job { scenario: &sc, seed: 1, dispatcher: fair, placer: None }).unwrap()
}

fn completions(r: &RunResult) -> Vec<u64> {
    r.tasks.iter().map(|t| t.completion_ns.expect("done")).collect()
}

#[test]
fn four_half_memory_bound_tasks_share_a_bus_one_of_them_could_fill() {
    // Without a bus each task runs alone at cost (1 − 0.5)/1 + 0.5 = 1: done at 1 s and 2 s.
    let free = run(&scenario(""));
    assert_eq!(completions(&free), vec![1_000_000_000, 2_000_000_000, 2_000_000_000, 2_000_000_000]);
    // A bus one core can fill (core_gbps = gbps): each task asks 0.5 / 1 = 1/2 of it.
    // Four ask 2 > 1: max-min fair level L = 1/4, cost 0.5 / (1/4) = 2 CPU ns per
    // ns of work. The short task's 1 s of work ends at 2 s; by then each long one has
    // done 1 s. Three left ask 3/2 > 1: L = 1/3, cost 0.5 / (1/3) = 1.5, and their
    // last 1 s of work takes 1.5 s: done at 3.5 s. Throughout, the tasks' use of
    // the bus adds up to exactly 1 (4 × 1/4, then 3 × 1/3): it is full.
    // (The engine settles a compute at every slice and tick; at a cost of 1.5 each
    // piece's work is rounded down by under 2^-32 ns, which the plan's whole-ns
    // rounding may turn into 1 ns.)
    let bus = run(&scenario("memory_bus = { gbps = 3.2 }"));
    let c = completions(&bus);
    assert_eq!(c[0], 2_000_000_000);
    assert!(c[1..].iter().all(|&t| t.abs_diff(3_500_000_000) <= 1), "{c:?}");
    // A core that draws half the bus asks 1/4: four fit exactly, nobody is slowed.
    let half = run(&scenario("memory_bus = { gbps = 3.2, core_gbps = 1.6 }"));
    assert_eq!(completions(&half), completions(&free));
    assert_eq!(half.events, free.events);
}

#[test]
fn a_bad_bus_is_refused_with_its_field_named() {
    let text = scenario("memory_bus = { gbps = 0 }");
    let e = Scenario::parse(&text, "memory_bus.rs", "bus", &Library::builtin()).unwrap_err().to_string();
    assert!(e.contains("memory_bus.gbps") && e.contains("GB/s"), "{e}");
    let text = scenario("memory_bus = { gbps = 3.2, lanes = 2 }");
    let e = Scenario::parse(&text, "memory_bus.rs", "bus", &Library::builtin()).unwrap_err().to_string();
    assert!(e.contains("lanes"), "{e}");
}

#[test]
fn a_clock_modulated_core_slows_its_memory_stalls_and_asks_the_bus_less() {
    // One task of 1 s of work, half memory-bound, alone on a 1/8-speed core.
    let one = |machine: &str| {
        let text = format!(
            r#"
seed = 1
[machine]
classes = [{{ name = "fast", speed = 1.0 }}, {{ name = "slow", speed = 0.125 }}]
cpus = [{{ class = "fast", count = 1 }}, {{ class = "slow", count = 1 }}]
{machine}
[[domain]]
name = "t"
vcpus = 1
affinity = "1"
workload = {{ model = "cpu-bound", work_s = 1.0, mem = 0.5, ws_kb = 0 }}
"#
        );
        completions(&run(&text))[0]
    };
    // A 1/8-clocked core: the memory-bound half takes its time at any clock,
    // 0.5 · 8 + 0.5 = 4.5 s.
    assert_eq!(one(""), 4_500_000_000);
    // The fast core's clock modulated to a 1/8 duty cycle: the stopped clock
    // issues no memory requests either, (0.5 + 0.5) · 8 = 8 s. On a bus it asks
    // 0.5 / 8 = 1/16 of it: alone, never held.
    assert_eq!(one("clock_modulation = true"), 8_000_000_000);
    assert_eq!(one("clock_modulation = true\nmemory_bus = { gbps = 3.2 }"), 8_000_000_000);
}
