//! Issue 18 D2 (admission and progress): runs are sized before they start
//! and refused past the documented limits; a long run reports progress; the
//! statistics a run keeps stay bounded whatever its duration; input files
//! that are devices or huge are refused before being read; too many domains
//! or vCPUs and too deep nesting are located parse errors.

use ampsched_sim::admission::{Estimate, MAX_EVENTS, MAX_MEMORY_BYTES};
use ampsched_sim::engine::MAX_SERIES_POINTS;
use ampsched_sim::runner::{run_one, run_watched, Job};
use ampsched_sim::{Library, Scenario};
use std::path::Path;
use std::sync::{Arc, Mutex};

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "test.toml", "test", &Library::builtin()).unwrap_or_else(|e| panic!("{e}"))
}

fn big(cpus: u32, vcpus: u32, domains: u32, secs: f64) -> String {
    let mut s = format!(
        "stop = {{ duration_s = {secs} }}\n[machine]\ncpus = [{{ class = \"fast\", count = {} }}, {{ class = \"slow\", count = {} }}]\n",
        cpus / 4,
        cpus - cpus / 4
    );
    for i in 0..domains {
        s.push_str(&format!("[[domain]]\nname = \"vm{i}\"\nvcpus = {vcpus}\nworkload = {{ model = \"cpu-bound\" }}\n"));
    }
    s
}

#[test]
fn admission_refuses_runs_past_the_limits_naming_the_estimate_and_limit() {
    // The case: 1024 CPUs, 10 000 vCPUs (10 domains × 1000), 1e6 s.
    let sc = scenario(&big(1024, 1000, 10, 1e6));
    let est = Estimate::new(&sc, None, None, 1, 2).unwrap();
    // 1e6 s × 2 × (1024 + 10 000) / 10 ms (credit's tick) = 2.2e12 events, plus 1e6 statistics intervals.
    let expect = 1e6 * 2.0 * 11_024.0 / 0.01 + 1e6;
    assert!((est.events - expect).abs() / expect < 1e-9, "{est:?}");
    let err = est.admit(false, "--allow-large").unwrap_err();
    assert!(err.contains("2.2e12 events > the limit of 2e9"), "{err}");
    assert!(err.contains("1024 CPUs, 10000 tasks, 1000000 s simulated, 10 ms tick"), "{err}");
    assert!(err.contains("--allow-large"), "{err}");
    assert!(est.admit(true, "--allow-large").is_ok(), "allowed explicitly");
    // 2 CPUs for 1e7 s (5.9 GB and 78 s before): 1e7 × 2 × (2 + 2) / 0.01 = 8e9 events.
    let sc = scenario(&big(4, 1, 2, 1e7));
    let est = Estimate::new(&sc, None, None, 1, 1).unwrap();
    assert!(est.events > MAX_EVENTS && est.admit(false, "--allow-large").is_err(), "{est:?}");
    // Its memory does not grow with the duration: the series keep at most MAX_SERIES_POINTS.
    let short = Estimate::new(&scenario(&big(4, 1, 2, 1e5)), None, None, 1, 1).unwrap();
    assert_eq!(est.memory_bytes, short.memory_bytes, "memory past the series cap is the same for 1e5 s and 1e7 s");
    assert!(est.memory_bytes < 64e6, "{}", est.memory_bytes);
}

#[test]
fn admission_counts_every_run_and_refuses_on_memory() {
    let sc = scenario(&big(8, 4, 2, 60.0));
    let one = Estimate::new(&sc, None, None, 1, 1).unwrap();
    let many = Estimate::new(&sc, None, None, 1000, 2).unwrap();
    assert!((many.events - 1000.0 * one.events).abs() < 1.0);
    assert!(one.admit(false, "--allow-large").is_ok());
    // 64 CPUs, 4 domains × 4096 vCPUs, 10 000 runs: each run's results are
    // kept for the summary, (64 + 16 384 + 4) × 512 B ≈ 8 MiB each: ≈ 78 GiB.
    let sc = scenario(&big(64, 4096, 4, 1.0));
    let est = Estimate::new(&sc, None, None, 10_000, 2).unwrap();
    assert!(est.memory_bytes > MAX_MEMORY_BYTES, "{est:?}");
    let err = est.admit(false, "allow_large=True").unwrap_err();
    assert!(err.contains("GiB of memory > the limit of 4 GiB") && err.contains("allow_large=True"), "{err}");
}

#[test]
fn admission_accepts_every_scenario_of_the_repository() {
    let lib = Library::builtin();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut n = 0;
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        let Ok(files) = std::fs::read_dir(&dir) else { continue };
        for f in files {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            if f.extension().is_none_or(|e| e != "toml") || name == "ledger.toml" {
                continue;
            }
            let Ok(sc) = Scenario::load(&f, &lib) else { continue }; // experiment files (ampsched-lab) are not scenarios
            let est = Estimate::new(&sc, None, None, sc.runs as u64, 2).unwrap();
            assert!(est.admit(false, "--allow-large").is_ok(), "{}: {est}", f.display());
            n += 1;
        }
    }
    assert!(n >= 5, "only {n} scenarios found");
}

#[test]
fn long_single_run_reports_progress_to_the_end() {
    // 4 CPUs, 4 busy vCPUs, 600 s: about 340 k events (34 k per 60 s), five reports of one per 65 536.
    let sc = scenario(&big(4, 2, 2, 600.0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let r = run_watched(&Job { scenario: &sc, seed: 1, dispatcher: None, placer: None }, move |now, end| {
        s2.lock().unwrap().push((now.0, end.0));
    })
    .unwrap();
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty(), "no progress reported over {} events", r.events);
    assert!(seen.len() >= 4, "{} reports over {} events", seen.len(), r.events);
    assert!(seen.iter().all(|&(_, end)| end == 600_000_000_000));
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "progress goes forward");
    // Same results as an unwatched run.
    let plain = run_one(&Job { scenario: &sc, seed: 1, dispatcher: None, placer: None }).unwrap();
    assert_eq!(serde_json::to_string(&r).unwrap(), serde_json::to_string(&plain).unwrap());
}

#[test]
fn statistics_series_stay_bounded_whatever_the_duration() {
    // 1 ms statistics for 30 s: 30 000 intervals. At 10 000 points the series
    // halves (stride 2), again at 20 s of points (stride 4): 7 500 points of 4 ms.
    let sc = scenario(&format!("stats_interval_ms = 1\n{}", big(4, 2, 2, 30.0)));
    let r = run_one(&Job { scenario: &sc, seed: 1, dispatcher: None, placer: None }).unwrap();
    assert_eq!(r.stats_interval_ns, 4_000_000);
    for d in &r.domains {
        assert!(d.series.len() <= MAX_SERIES_POINTS);
        assert_eq!(d.series.len(), 7_500);
        assert!(d.series.iter().enumerate().all(|(i, p)| p.t_ns == (i as u64 + 1) * 4_000_000), "uniform points");
        // Nothing lost in the merges: the points add up to the domain's CPU time.
        let sum: u64 = d.series.iter().map(|p| p.class_ns.iter().sum::<u64>()).sum();
        assert_eq!(sum, d.cpu_ns.total(), "domain {}", d.id);
    }
    assert_eq!(r.counter_series.len(), 7_500);
    // The same run sampled every 4 ms to begin with has the same time points.
    let sc4 = scenario(&format!("stats_interval_ms = 4\n{}", big(4, 2, 2, 30.0)));
    let r4 = run_one(&Job { scenario: &sc4, seed: 1, dispatcher: None, placer: None }).unwrap();
    let t = |r: &ampsched_sim::RunResult| r.domains[0].series.iter().map(|p| p.t_ns).collect::<Vec<_>>();
    assert_eq!(t(&r), t(&r4));
}

#[test]
fn input_file_that_is_a_device_or_not_a_file_is_refused_before_reading() {
    let lib = Library::builtin();
    for p in ["/dev/zero", "/dev/null", "/"] {
        let e = Scenario::load(Path::new(p), &lib).unwrap_err().to_string();
        assert!(e.contains(p) && e.contains("not a regular file"), "{e}");
    }
    let dir = std::env::temp_dir().join(format!("ampsched-admission-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("s.toml");
    std::fs::write(
        &f,
        "[machine]\ncpus = [{ class = \"slow\" }]\n[[domain]]\nname = \"a\"\nvcpus = 1\nworkload = { rtapp = \"/dev/zero\" }\n",
    )
    .unwrap();
    let e = Scenario::load(&f, &lib).unwrap_err().to_string();
    assert!(e.contains("cannot read rt-app file /dev/zero: not a regular file"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn many_domains_or_vcpus_are_refused_while_parsing_with_the_field() {
    let lib = Library::builtin();
    let doms = |n: usize, vcpus: u32| {
        let mut s = String::from("[machine]\ncpus = [{ class = \"slow\" }]\n");
        for i in 0..n {
            s.push_str(&format!("[[domain]]\nname = \"d{i}\"\nvcpus = {vcpus}\n"));
        }
        s
    };
    // 257 × 4096 = 1 052 672 vCPUs > 2^20 = 1 048 576: the 257th domain (index 256) tips it.
    let e = Scenario::parse(&doms(257, 4096), "many.toml", "m", &lib).unwrap_err().to_string();
    assert!(e.contains("many.toml:") && e.contains("domain[256].vcpus"), "{e}");
    assert!(e.contains("1052672") && e.contains("at most 1048576"), "{e}");
    let e = Scenario::parse(&doms(4097, 1), "many.toml", "m", &lib).unwrap_err().to_string();
    assert!(e.contains("4097 domains: at most 4096"), "{e}");
    assert!(Scenario::parse(&doms(256, 4096), "ok.toml", "m", &lib).is_ok());
}

#[test]
fn deep_toml_nesting_is_a_located_error_naming_the_limit() {
    // 30 000 nested arrays (issue 18's rt-app case, as TOML): toml_edit stops at 80 levels.
    let text = format!("a = {}{}\n", "[".repeat(30_000), "]".repeat(30_000));
    let e = Scenario::parse(&text, "deep.toml", "d", &Library::builtin()).unwrap_err().to_string();
    assert!(e.starts_with("deep.toml:1:"), "{e}");
    assert!(e.contains("nested deeper than 80 levels"), "{e}");
}
