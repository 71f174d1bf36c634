//! `ampsched validate` on the real machine: one small rt-app workload run
//! for real (default Linux and under the agent with `aash`) and simulated.
//! Asserts structure — every thread present in both bodies, every run
//! completed, divergence finite, wake-up latencies present — never a timing.

use std::process::Command;

#[test]
#[ignore = "real machine: needs root, rt-app and 2+ CPUs; run with `cargo test -- --include-ignored` (CI does)"]
fn validate_runs_one_rtapp_workload_both_ways() {
    let dir = std::env::temp_dir().join(format!("ampsched-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("small.json");
    std::fs::write(
        &file,
        r#"{ "global": { "calibration": "CPU0", "log_size": "disable", "duration": 20 },
             "tasks": { "w": { "instance": 2, "loop": 1, "phases": { "p": { "loop": 5, "run": 5000, "barrier": "b" } } } } }"#,
    )
    .unwrap();
    let json = dir.join("out.json");
    let out = Command::new(env!("CARGO_BIN_EXE_ampsched"))
        .args(["validate", file.to_str().unwrap(), "--placer", "aash", "--reps", "1", "--force", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["partial"], false);
    let rows = v["rows"].as_array().unwrap();
    for config in ["default", "aash"] {
        for source in ["real", "sim"] {
            let r = rows.iter().find(|r| r["config"] == config && r["source"] == source).expect("row");
            let c = r["completion_s"].as_f64().unwrap();
            assert!(c.is_finite() && c > 0.0, "{config}/{source}: {c}");
            let mut names: Vec<&str> =
                r["threads"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
            names.sort();
            assert_eq!(names, vec!["w-0", "w-1"], "{config}/{source}");
            // Wake-up latencies: every thread woke at least once (its start);
            // the real side has them when measured from the trace.
            if source == "sim" || r["measured"] == "trace" {
                for t in r["threads"].as_array().unwrap() {
                    assert!(t["wakeups"].as_u64().unwrap() >= 1, "{config}/{source}: {t}");
                    assert!(t["wake_p99_us"].as_f64().unwrap() >= t["wake_p50_us"].as_f64().unwrap());
                }
            }
        }
    }
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("div_%") && !text.contains("NaN"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
