//! `ampsched reproduce capability` and `ampsched reproduce study`: the
//! experiment files load, and reduced copies of them (a few cases, one seed)
//! give the rows, sections and figures the reports promise, with metrics that
//! behave as the mechanisms say.

use ampsched_lab::experiment::Experiment;
use ampsched_lab::reproduce::{self, capability, study, Options};
use ampsched_sim::Library;

/// The mean of row `case/subject/policy/metric` of a report.
fn mean(rep: &ampsched_lab::report::Report, case: &str, subject: &str, policy: &str, metric: &str) -> f64 {
    rep.rows
        .iter()
        .find(|r| r.case == case && r.subject == subject && r.policy == policy && r.metric == metric)
        .unwrap_or_else(|| panic!("row {case}/{subject}/{policy}/{metric}"))
        .mean
}

/// One seed of the embedded experiments named like `only`, restricted to `cases`.
fn opts(only: &str, cases: &[&str]) -> Options {
    Options {
        only: vec![only.into()],
        seeds: Some(1),
        cases: cases.iter().map(|c| c.to_string()).collect(),
        ..Options::default()
    }
}

#[test]
fn capability_and_study_files_load_with_their_cases() {
    let lib = Library::builtin();
    for (file, text) in capability::FILES.iter().chain(study::FILES) {
        let e = Experiment::parse(text, file, file.trim_end_matches(".toml"), &lib).unwrap_or_else(|e| panic!("{e}"));
        assert!(e.seeds.len() >= 3, "{file}: ≥ 3 seeds");
        let n = e.cases.len();
        match *file {
            // 3 asymmetries × tasks 1..12
            "cap-chores.toml" => assert_eq!(n, 36),
            // 3 asymmetries × 7 NPB kernels
            "cap-npb.toml" => assert_eq!(n, 21),
            "cap-npb-competitive.toml" => assert_eq!(n, 3),
            // 6 workloads (loops static/dynamic, pipeline, make, server light/heavy) × 9 configurations, ≥ 5 seeds
            "study-configs.toml" => {
                assert_eq!(n, 54);
                assert!(e.seeds.len() >= 5);
            }
            other => panic!("unexpected file {other}"),
        }
    }
    assert!(reproduce::study("capability").is_ok() && reproduce::study("study").is_ok());
}

#[test]
fn capability_lowers_stdev_chore_on_static_asymmetry_at_4_tasks() {
    let rep = reproduce::run("capability", &opts("cap-chores", &["static/4", "natural/4"]), |_, _| {}).expect("runs");
    // One experiment section (besides the ledger's).
    assert_eq!(rep.sections.iter().filter(|s| s.id != "ledger").count(), 1);
    let get = |case: &str, policy: &str, metric: &str| mean(&rep, case, "chores", policy, metric);
    for p in ["runqueue", "cap-0.01s", "cap-0.1s", "cap-1s", "cap-10s"] {
        for m in ["avg_chore", "stdev_chore", "migrations", "run_spread_pct"] {
            get("static/4", p, m);
        }
    }
    // Static: 1 × 2.2 + 3 × 1.1, one task per CPU and no runqueue-balancer moves (4 tasks on 4 CPUs):
    // the task on the fast CPU counts ≈ 100 s × 2.2 / 1 ms ≈ 219 000 chores, the others ≈ 109 500,
    // so stdev ≈ 54 750. Capability at 1 s rotates the fast CPU among the tasks: far smaller.
    let rq = get("static/4", "runqueue", "stdev_chore");
    assert!(rq > 50_000.0, "runqueue stdev {rq}");
    assert!(get("static/4", "cap-1s", "stdev_chore") * 10.0 < rq);
    assert_eq!(get("static/4", "runqueue", "migrations"), 0.0);
    // Natural (symmetric) machine: capability keeps avg_chore within 0.1 % of runqueue.
    let (a, b) = (get("natural/4", "runqueue", "avg_chore"), get("natural/4", "cap-1s", "avg_chore"));
    assert!((a - b).abs() / a < 0.001, "{a} vs {b}");
    // Two asymmetries × avg and stdev charts.
    assert_eq!(rep.figures().count(), 4);
}

#[test]
fn fast_first_speeds_up_static_loops_and_the_study_plots_runs_against_compute_power() {
    let cases = ["loops-static:0f-4s/8", "loops-static:2f-2s/8", "loops-static:4f-0s"];
    let rep = reproduce::run("study", &opts("study", &cases), |_, _| {}).expect("runs");
    let get = |case: &str, policy: &str, metric: &str| mean(&rep, case, "all", policy, metric);
    // Compute power n + m/k: 2 + 2/8 = 2.25.
    assert!((get("loops-static:2f-2s/8", "fair", "compute_power") - 2.25).abs() < 1e-9);
    // The reference configuration has speedup 0 % against itself.
    assert!(get("loops-static:0f-4s/8", "fair", "speedup_pct").abs() < 1e-9);
    // Static loops on 2f-2s/8 without the fix run at the slow CPUs' pace (each thread's 100 ms share of a
    // 400 ms loop takes 800 ms at 1/8 speed), the same as 0f-4s/8: speedup ≈ 0 %. Fast-first moves the
    // slow threads' work onto the fast CPUs as they go idle: clearly faster.
    let fair = get("loops-static:2f-2s/8", "fair", "speedup_pct");
    let ff = get("loops-static:2f-2s/8", "fast-first", "speedup_pct");
    assert!(fair.abs() < 2.0, "fair {fair}");
    assert!(ff > 20.0, "fast-first {ff}");
    assert!(
        get("loops-static:2f-2s/8", "fast-first", "throughput") > get("loops-static:2f-2s/8", "fair", "throughput")
    );
    // 4f-0s: 8× the power of 0f-4s/8, but the loops are memory-bound (swim, m = 0.67) and the
    // four CPUs share one memory bus (docs/design/asymmetry-study.md). 0f-4s/8: each thread's
    // 100 ms share at a 1/8 duty cycle costs (0.33 + 0.67) · 8 = 8 → 800 ms per loop, asking the
    // bus 4 × 0.67 / 8 = 0.335 of its time (not full). 4f-0s: four threads ask 4 × 0.67 = 2.68,
    // the bus holds each to 1/4: cost 0.67 / (1/4) = 2.68 → 268 ms per loop. Speedup 800 / 268
    // = 2.985×: the bus, not the cores, bounds the fast machine.
    let x = get("loops-static:4f-0s", "fair", "speedup_x");
    assert!((x - 2.985).abs() < 0.1, "{x}");
    assert_eq!(rep.figures().count(), 1);
}

#[test]
fn server_throughput_follows_the_arrival_rate_until_the_machine_saturates() {
    let cases = ["server-light:4f-0s", "server-light:0f-4s/8"];
    let rep = reproduce::run("study", &opts("study", &cases), |_, _| {}).expect("runs");
    let get = |case: &str, metric: &str| mean(&rep, case, "all", "fair", metric);
    // Light load: a closed loop of 12 clients thinking 100 ms, 10 ms requests (mem 0.1), 20 s runs.
    // 4f-0s serves 4 / 10 ms = 400 req/s, far above the load, so R ≈ 10 ms and
    // X = N / (Z + R) = 12 / 0.110 s ≈ 109 req/s; at most 12 / 0.1 s = 120 (R ≥ 0). ±10 %: [98, 120].
    let fast = get("server-light:4f-0s", "throughput");
    assert!((98.0..=120.0).contains(&fast), "4f-0s: {fast} req/s");
    // 0f-4s/8: the study's slow cores are clock-modulated fast ones (a 1/8 duty cycle slows the
    // memory stalls too), so a request takes 10 ms × (0.9 + 0.1) × 8 = 80 ms and 4 CPUs serve
    // 4 / 80 ms = 50 req/s. The loop saturates the CPUs beyond N* = 4 × (Z + S) / S = 4 × 180 / 80
    // = 9 clients < 12, so throughput is within [45, 50] (the CPUs idle only while too few clients
    // are awake).
    let slow = get("server-light:0f-4s/8", "throughput");
    assert!((45.0..=50.0).contains(&slow), "0f-4s/8: {slow} req/s");
    // Scalability in throughput: 4f-0s has 8× the compute power but only ≈ 109 / 50 ≈ 2.2× the
    // throughput under light load (the clients, not the machine, bound it).
    let x = get("server-light:4f-0s", "speedup_x");
    assert!((1.9..=2.5).contains(&x), "{x}");
}

#[test]
fn competitive_npb_finishes_every_run_and_cache_differs_from_fifo() {
    let cases = ["natural", "static", "dynamic"];
    let rep = reproduce::run("capability", &opts("cap-npb-competitive", &cases), |_, _| {}).expect("runs");
    let get = |case: &str, policy: &str, metric: &str| mean(&rep, case, "all", policy, metric);
    // Every run of every case finishes before max_s (finished = 1 for each case and policy).
    for case in ["natural", "static", "dynamic"] {
        for p in ["runqueue", "cap-fifo", "cap-cache"] {
            assert_eq!(get(case, p, "finished"), 1.0, "{case}/{p}");
        }
    }
    // Natural machine, 4 × 2.2 with m = 0.05: a CPU does 1 / (0.95 / 2.2 + 0.05) = 2.0755 s of speed-1 work per
    // second. Work (models/library.toml): ep 20 s + six phased kernels of 4 threads × 19.0-19.8 s plus thread 0's
    // serial share (bt 79.40, cg 79.40, ft 79.40, is 77.02, lu 79.41, mg 78.52 s) = 493.1 s → 493.1 / (4 × 2.0755)
    // = 59.4 s at best. With the throttled spin (1 µs) waiters block and the runqueue balancer keeps the CPUs
    // busy: within 10 % of that bound (with 150 ms spins the first version of this case took several hundred
    // seconds).
    let t = get("natural", "runqueue", "completion_s");
    assert!((59.4..=65.4).contains(&t), "natural runqueue {t} s");
    // Dynamic: MPI ranks poll with sched_yield (oversubscribed Open MPI). CPU 0 loses 0.8 × 50 / 100 = 40 % to
    // IRQs, so the machine does at best (3 + 0.6) × 2.0755 = 7.47 s of work per second: 493.1 / 7.47 = 66.0 s.
    // A poller gives a working rank on its CPU the turn once its vruntime catches up, so the runs stay within 2× of
    // that bound (pure spinning, each poller burning its whole slice, took ≈ 1 100 s with the library's earlier,
    // finer barriers; ≈ 103 s with NPB's own counts, the capability arms ≈ 99 s).
    let t = get("dynamic", "runqueue", "completion_s");
    assert!((66.0..=132.0).contains(&t), "dynamic runqueue {t} s");
    // The seven kernels' working sets differ (1024 .. 110080 KiB): cache selection moves other tasks than FIFO,
    // so the static runs differ in time or in migrations.
    let (tf, tc) = (get("static", "cap-fifo", "completion_s"), get("static", "cap-cache", "completion_s"));
    let (mf, mc) = (get("static", "cap-fifo", "migrations"), get("static", "cap-cache", "migrations"));
    assert!(tf != tc || mf != mc, "fifo {tf} s / {mf} migrations = cache {tc} s / {mc}");
}

#[test]
fn static_npb_barrier_kernels_gain_nothing_from_rotation_while_ep_gains() {
    // `--only cap-npb` also selects cap-npb-competitive, which has neither case: it is skipped.
    let rep = reproduce::run("capability", &opts("cap-npb", &["static/ep", "static/cg"]), |_, _| {}).expect("runs");
    // One experiment section (besides the ledger's).
    assert_eq!(rep.sections.iter().filter(|s| s.id != "ledger").count(), 1);
    let get = |case: &str, policy: &str, metric: &str| mean(&rep, case, "all", policy, metric);
    // One thread per CPU on 1 × 2.2 + 3 × 1.1: under the runqueue balancer no thread moves, so three threads
    // never see the fast CPU (slowest thread's fast share 0 %); capability rotates the fast CPU among them.
    for k in ["static/ep", "static/cg"] {
        assert!(get(k, "runqueue", "min_fast_share_pct") < 1.0, "{k}");
        assert!(get(k, "cap-fifo", "min_fast_share_pct") > 5.0, "{k}");
    }
    // cg: 125 barriers per 6.9 ms iteration; at each one 3 of the 4 threads are on slow CPUs, so rotation
    // cannot shorten a phase: |gain| < 1 %. ep: one region; rates r = 1 / (0.95 / s + 0.05): 2.0755 fast,
    // 1.0945 slow; with fast share f the slowest thread runs at 1.0945 + f × 0.981, so any f > 0.05 gives
    // ≥ 1 − 1.0945 / 1.1436 = 4.3 % (3 % asserted, rotation starts after the launch interval).
    assert!(get("static/cg", "cap-fifo", "speedup_pct").abs() < 1.0);
    assert!(get("static/ep", "cap-fifo", "speedup_pct") > 3.0);
    let para: String = rep
        .sections
        .last()
        .expect("a section")
        .blocks
        .iter()
        .filter_map(|b| if let ampsched_lab::report::Block::Para(s) = b { Some(s.as_str()) } else { None })
        .collect();
    assert!(para.contains("cg") && para.contains("barrier-bound") && para.contains("single region"), "{para}");
}
