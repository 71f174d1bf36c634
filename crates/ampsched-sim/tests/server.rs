//! The throughput server (issue 5): Poisson request arrivals from the run's
//! seed (`sleep_exp`), a worker pool behind a bounded backlog, light and
//! heavy load. Worked arithmetic above each assertion.

use ampsched_sim::runner::{run_one, Job};
use ampsched_sim::{Library, RunResult, Scenario};

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "server.rs", "server", &Library::builtin()).unwrap_or_else(|e| panic!("{e}"))
}

fn run(sc: &Scenario, seed: u64) -> RunResult {
    run_one(&Job { scenario: sc, seed, dispatcher: None, placer: None }).unwrap()
}

/// `cpus` CPUs at speed 1.0 under `fair`, a 5-thread server (1 generator +
/// 4 workers) of 10 ms requests at `rate` per second, for `secs` seconds.
fn server(cpus: u32, rate: u32, secs: u32) -> Scenario {
    scenario(&format!(
        r#"
stop = {{ duration_s = {secs} }}
[machine]
classes = [{{ name = "cpu", speed = 1.0 }}]
cpus = [{{ class = "cpu", count = {cpus} }}]
[dispatcher]
name = "fair"
[[domain]]
name = "web"
vcpus = 5
workload = {{ model = "server", rate_per_s = {rate}, request_ms = 10 }}
"#
    ))
}

/// Requests served: the workers' completed computes (one per request).
fn served(r: &RunResult) -> u64 {
    r.tasks.iter().map(|t| t.computes_done).sum()
}

#[test]
fn light_load_throughput_is_the_arrival_rate() {
    // 4 CPUs serve 4 × 100 = 400 req/s; 100 req/s arrive (25 % load), so
    // throughput = the arrival rate. In 60 s: 6000 requests expected; the
    // Poisson count has stdev √6000 ≈ 77, so ±5 % (300) is ≈ 3.9 σ. At most
    // 4 requests are in service at the stop.
    let sc = server(4, 100, 60);
    let mut counts = Vec::new();
    for seed in 1..=3 {
        let r = run(&sc, seed);
        let n = served(&r);
        assert!((5_700..=6_300).contains(&n), "seed {seed}: {n} requests in 60 s");
        // The generator only sleeps and pushes: no compute of its own.
        assert_eq!(r.tasks[0].computes_done, 0);
        counts.push(n);
    }
    // Arrivals come from the run's seed: different seeds, different runs.
    assert!(counts[0] != counts[1] || counts[1] != counts[2], "{counts:?}");
    // Same seed → byte-identical results.
    let a = serde_json::to_string(&run(&sc, 7)).unwrap();
    let b = serde_json::to_string(&run(&sc, 7)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn heavy_load_saturates_at_the_machine_capacity() {
    // 1 CPU serves 1000 / 10 = 100 req/s; 200 req/s arrive (200 % load):
    // the backlog never empties after the first request, the CPU never
    // idles, and throughput = capacity: 60 s × 100 = 6000 requests, less
    // the ≤ 4 in service at the stop (fair time-slices the 4 workers, each
    // holding a request) and the wait for the first arrival (mean 5 ms =
    // half a request): within [5990, 6000].
    let r = run(&server(1, 200, 60), 1);
    let n = served(&r);
    assert!((5_990..=6_000).contains(&n), "{n}");
    // Idle only until the first arrival (mean 5 ms; < 100 ms with
    // probability 1 − e^−20).
    assert!(r.cpus[0].idle_ns < 100_000_000, "idle {} ns", r.cpus[0].idle_ns);
    // Same machine at 50 req/s (50 % load): throughput back to the rate,
    // 3000 ± 5 σ (5 × √3000 ≈ 274).
    let n = served(&run(&server(1, 50, 60), 1));
    assert!((2_726..=3_274).contains(&n), "{n}");
}

#[test]
fn sleep_exp_op_draws_a_mean_inter_arrival_and_rejects_a_zero_mean() {
    // One thread: 2000 × [sleep_exp 5 ms; compute 1 ms] on an otherwise idle
    // CPU: mean cycle 5 + 1 = 6 ms → ≈ 12 s; the sum of 2000 exp(5 ms) has
    // stdev 5 ms × √2000 ≈ 224 ms, so [11.1, 12.9] s is ±4 σ.
    let sc = scenario(
        r#"
stop = { max_s = 100 }
[machine]
classes = [{ name = "cpu", speed = 1.0 }]
cpus = [{ class = "cpu", count = 1 }]
[dispatcher]
name = "fair"
[[domain]]
name = "d"
vcpus = 1
workload = { program = [{ loop = { count = 2000, body = [{ sleep_exp = { mean_ms = 5 } }, { compute = { ms = 1 } }] } }] }
"#,
    );
    let r = run(&sc, 1);
    assert!(r.all_done);
    let s = r.end_ns as f64 / 1e9;
    assert!((11.1..=12.9).contains(&s), "{s} s");
    // A zero mean is refused with the field's path and the value.
    let Err(bad) = Scenario::parse(&sc_text_with_mean("0"), "bad.toml", "bad", &Library::builtin()) else {
        panic!("mean 0 must be refused")
    };
    let msg = bad.to_string();
    assert!(msg.contains("sleep_exp.mean_ms") && msg.contains("> 0"), "{msg}");
}

fn sc_text_with_mean(mean: &str) -> String {
    format!(
        r#"
[machine]
classes = [{{ name = "cpu", speed = 1.0 }}]
cpus = [{{ class = "cpu", count = 1 }}]
[[domain]]
name = "d"
vcpus = 1
workload = {{ program = [{{ sleep_exp = {{ mean_ms = {mean} }} }}] }}
"#
    )
}
