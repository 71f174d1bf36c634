//! RT loads (`[[machine.rt_load]]`, a SCHED_FIFO task pinned to a CPU):
//! the `linux` dispatcher runs them as RT tasks above its fair class; the
//! other dispatchers see their duty as noise on that CPU.
//!
//! The program is issue 14's: two threads, 12 rounds of 36 ms parallel work,
//! a blocking barrier, 36 ms serial work on thread 0, a barrier; 2 equal
//! CPUs, a 5 ms / 10 ms hog on CPU 1.

use ampsched_model::spec::PolicySpec;
use ampsched_sim::runner::{run_one, Job};
use ampsched_sim::{Library, RunResult, Scenario};

const HOG: &str = r#"
seed = 1
[machine]
classes = [{ name = "fast", speed = 1.0 }, { name = "slow", speed = 1.0 }]
cpus = [{ class = "fast", count = 1 }, { class = "slow", count = 1 }]
[[machine.rt_load]]
cpu = 1
spin_us = 5000
period_us = 10000
[[domain]]
name = "prog"
vcpus = 2
workload = { model = "phased", phases = 12, phase_ms = 36.0, serial_every = 1, serial_ms = 36.0 }
"#;

fn run(dispatcher: &str, placer: &str) -> RunResult {
    let sc = Scenario::parse(HOG, "rt_load.rs", "hog", &Library::builtin()).unwrap_or_else(|e| panic!("{e}"));
    let pol = |n: &str| Some(PolicySpec { name: n.into(), params: Default::default() });
    run_one(&Job { scenario: &sc, seed: 1, dispatcher: pol(dispatcher), placer: pol(placer) }).unwrap()
}

#[test]
fn without_an_rt_class_the_hog_is_half_of_cpu_1_as_noise() {
    // fair: CPU 1 runs at half rate. Every round each thread computes 36 ms
    // in parallel (the one on CPU 1 needs 72 ms) and thread 0 36 ms alone:
    // fair never moves a lone task, so the rounds take 72 + 36 or 72 + 72 ms
    // depending on where thread 0 sits; here 12 × 108 = 1.296 s.
    let r = run("fair", "none");
    assert!(r.all_done);
    assert_eq!(r.end_ns, 1_296_000_000);
    // CPU 1's noise is half of its wall time.
    let c1 = &r.cpus[1];
    let total = c1.busy_ns + c1.idle_ns + c1.noise_ns;
    assert!((c1.noise_ns as f64 / total as f64 - 0.5).abs() < 0.01, "{c1:?}");
}

#[test]
fn linux_runs_the_hog_as_an_rt_task_and_moves_work_off_its_cpu() {
    // linux: no noise anywhere (the hog is an RT task, its windows show as
    // CPU 1 idle to the simulator); the capacity-aware balancer moves the
    // lone thread off CPU 1, so CPU 0 does most of the 1.296 s of work and
    // the program ends well before fair's 1.296 s.
    let r = run("linux", "none");
    assert!(r.all_done);
    assert!(r.cpus.iter().all(|c| c.noise_ns == 0));
    assert!(r.cpus[0].busy_ns > 3 * r.cpus[1].busy_ns, "{:?}", r.cpus);
    assert!(r.end_ns < 1_200_000_000, "{}", r.end_ns);
    let counter = |n: &str| r.dispatcher_counters.iter().find(|c| c.0 == n).map(|c| c.1).unwrap();
    assert!(counter("rt_preempts") > 0.0);
    assert!(counter("active_balances") + counter("pulls") + counter("newidle_pulls") > 0.0);
    // Deterministic: the same seed gives the same run.
    assert_eq!(r.end_ns, run("linux", "none").end_ns);
}

#[test]
fn a_bad_rt_load_is_an_error_naming_the_field() {
    let bad = HOG.replace("spin_us = 5000", "spin_us = 10000");
    let Err(e) = Scenario::parse(&bad, "rt_load.rs", "hog", &Library::builtin()) else { panic!("accepted") };
    let msg = e.to_string();
    assert!(msg.contains("machine.rt_load[0].spin_us") && msg.contains("[1, 9999]"), "{msg}");
}
