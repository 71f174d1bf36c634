//! The ledger of `ampsched reproduce`: every study's shipped claims load and
//! name real experiments, cases and policies; a reduced run gives ledger rows
//! in the report, `summary.json` and the Markdown; a claim naming something
//! the study does not produce is an error naming the claim.

use ampsched_lab::ledger;
use ampsched_lab::reproduce::{self, Options, ReproduceError, STUDIES};
use std::path::PathBuf;

/// A scratch copy of study `name`'s experiment files with `ledger` as its ledger file.
fn scratch(name: &str, tag: &str, ledger: &str) -> PathBuf {
    let study = reproduce::study(name).unwrap();
    let dir = std::env::temp_dir().join(format!("ampsched-ledger-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join(name)).unwrap();
    for (file, text) in study.files {
        std::fs::write(dir.join(name).join(file), text).unwrap();
    }
    std::fs::write(dir.join(name).join("ledger.toml"), ledger).unwrap();
    dir
}

const CLAIM: &str = "[[claim]]\nclaim = \"two-speed loop\"\npublished_text = \"≈ 0 %\"\n\
                     experiment = \"study-configs\"\ncase = \"loops-static:2f-2s/8\"\npolicy = \"fair\"\n\
                     kind = \"approx\"\npublished = 0.0\n";

#[test]
fn every_shipped_ledger_parses_and_names_the_studys_experiments() {
    for s in STUDIES {
        let claims = ledger::parse(s.ledger, s.name).unwrap_or_else(|e| panic!("{e}"));
        assert!(!claims.is_empty(), "{}: a ledger with claims", s.name);
        let names: Vec<&str> = s.files.iter().map(|f| f.0.trim_end_matches(".toml")).collect();
        ledger::validate(&claims, s.name, &names, &[], &[]).unwrap_or_else(|e| panic!("{e}"));
        ledger::validate_metrics(&claims, s.name, s.metrics).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn a_reduced_run_puts_the_ledger_first_and_in_the_summary() {
    let opts = Options {
        only: vec!["study-configs".into()],
        seeds: Some(1),
        cases: vec!["loops-static:2f-2s/8".into(), "loops-static:0f-4s/8".into()],
        ..Options::default()
    };
    let rep = reproduce::run("study", &opts, |_, _| {}).expect("runs");
    // Only the static claim has both of its cases in this run: the dynamic one is left out.
    assert_eq!(rep.ledger.len(), 1, "{:?}", rep.ledger);
    let l = &rep.ledger[0];
    assert_eq!(l.experiment, "study-configs");
    // One seed: mean = min = max.
    assert!(l.ours_mean == l.ours_min && l.ours_mean == l.ours_max);
    // ≈ 0: band −5..5, and within_band agrees with the mean.
    assert_eq!(l.band, "-5.00..5.00");
    assert_eq!(l.within_band, (-5.0..=5.0).contains(&l.ours_mean));
    assert_eq!(rep.sections[0].id, "ledger");
    let v: serde_json::Value = serde_json::from_str(&rep.summary_json()).unwrap();
    assert_eq!(v["ledger"][0]["claim"], l.claim.as_str());
    assert!(rep.to_markdown().contains("calibration claims within band"));
    assert!(ledger::text(&rep.ledger).ends_with(&format!("{}\n", ledger::count_line(&rep.ledger))));
}

#[test]
fn a_claim_on_a_missing_case_is_an_error_at_load_naming_it() {
    let bad = CLAIM.replace("loops-static:2f-2s/8", "loops-static:9f") + "metric = \"completion_s\"\n";
    let dir = scratch("study", "case", &bad);
    let opts = Options { scenarios: Some(dir.clone()), ..Options::default() };
    let e = reproduce::run("study", &opts, |_, _| panic!("no run starts")).expect_err("an error");
    assert!(matches!(e, ReproduceError::Ledger(_)));
    let m = e.to_string();
    assert!(m.contains("claim `two-speed loop`") && m.contains("case `loops-static:9f`"), "{m}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_claim_on_a_missing_metric_is_an_error_at_load_naming_it() {
    let dir = scratch("study", "metric", &format!("{CLAIM}metric = \"no_such_metric\"\n"));
    let opts = Options {
        scenarios: Some(dir.clone()),
        only: vec!["study-configs".into()],
        seeds: Some(1),
        cases: vec!["loops-static:2f-2s/8".into()],
        ..Options::default()
    };
    let m = reproduce::run("study", &opts, |_, _| panic!("no run starts")).expect_err("an error").to_string();
    assert!(m.contains("claim `two-speed loop`") && m.contains("metric `no_such_metric`"), "{m}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn every_listed_metric_is_one_the_analysis_writes() {
    // A study's `metrics` list must not name a metric its analysis no longer writes
    // (the list is what the load-time check trusts): each appears as a literal in its source.
    let sources = [
        ("aash", include_str!("../src/reproduce/aash.rs")),
        ("capability", include_str!("../src/reproduce/capability.rs")),
        ("cosched", include_str!("../src/reproduce/cosched.rs")),
        ("study", include_str!("../src/reproduce/study.rs")),
    ];
    for s in STUDIES {
        let src = sources.iter().find(|x| x.0 == s.name).expect("a source per study").1;
        // The source without the `metrics: &[…]` line itself.
        let body: String = src.lines().filter(|l| !l.trim_start().starts_with("metrics: &[")).collect();
        for m in s.metrics {
            let lit = format!("\"{m}\"");
            assert!(body.contains(&lit), "{}: metric `{m}` is listed but never written", s.name);
        }
    }
}
