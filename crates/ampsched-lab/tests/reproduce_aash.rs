//! `ampsched reproduce aash`: the experiment files load, the study's rows and
//! report are computed from the runs, and the same seeds give the same bytes.

use ampsched_lab::experiment::Experiment;
use ampsched_lab::reproduce::{self, aash, Options};
use ampsched_sim::Library;

fn fair_only() -> Options {
    Options { only: vec!["aash-fair".into()], seeds: Some(2), ..Options::default() }
}

#[test]
fn every_aash_experiment_file_loads_with_credit_as_baseline_and_three_seeds() {
    let lib = Library::builtin();
    assert_eq!(aash::FILES.len(), 9, "one file per row of the AASH table");
    for (file, text) in aash::FILES {
        let e = Experiment::parse(text, file, file.trim_end_matches(".toml"), &lib).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.baseline, "credit", "{file}");
        assert!(e.seeds.len() >= 3, "{file}: ≥ 3 seeds");
        assert!(e.cases.iter().all(|c| c.compare.iter().any(|p| p.label == "aash")), "{file} compares aash");
    }
}

#[test]
fn aash_fair_rows_show_aash_evens_out_the_fast_core() {
    let rep = reproduce::run("aash", &fair_only(), |_, _| {}).expect("runs");
    // One experiment section (besides the ledger's).
    assert_eq!(rep.sections.iter().filter(|s| s.id != "ledger").count(), 1);
    let cases = ["leslie3d", "libquantum", "calculix", "namd", "sjeng", "mcf", "sixtrack", "eon"];
    for case in cases {
        let get = |subject: &str, policy: &str, metric: &str| {
            rep.rows
                .iter()
                .find(|r| r.case == case && r.subject == subject && r.policy == policy && r.metric == metric)
                .unwrap_or_else(|| panic!("row {case}/{subject}/{policy}/{metric}"))
        };
        // Four identical VMs, one fast core: under credit one VM keeps the fast core (fast
        // share 1.0 for it, 0 for the others: spread 1.0); AASH rotates it round-robin, so
        // every VM spends about a quarter of its run time there (spread ≈ 0).
        let shares = |p: &str| -> Vec<f64> { (1..=4).map(|i| get(&format!("vm{i}"), p, "fast_share").mean).collect() };
        let spread =
            |v: Vec<f64>| v.iter().copied().fold(f64::MIN, f64::max) - v.iter().copied().fold(f64::MAX, f64::min);
        assert!(spread(shares("aash")) < 0.05, "{case}: aash fast shares {:?}", shares("aash"));
        assert!(spread(shares("credit")) > 0.5, "{case}: credit fast shares {:?}", shares("credit"));
        let sd_credit = get("all", "credit", "stdev_completion_s").mean;
        let sd_aash = get("all", "aash", "stdev_completion_s").mean;
        assert!(sd_aash < sd_credit / 10.0, "{case}: stdev aash {sd_aash} vs credit {sd_credit}");
        // Speedup rows exist only for the compared policy, with one value per seed.
        let sp = get("all", "aash", "speedup_pct");
        assert_eq!(sp.runs, 2);
        assert!(sp.min <= sp.mean && sp.mean <= sp.max);
        assert!(!rep.rows.iter().any(|r| r.policy == "credit" && r.metric == "speedup_pct"));
    }
    let html = rep.to_html();
    assert_eq!(html.matches("<figure").count(), 2, "stacked completion and stdev figures");
    // The experiment's table, after the ledger's (aash-fair's claims all ran).
    assert!(!rep.ledger.is_empty());
    assert_eq!(html.matches("<table>").count(), 2);
    assert!(html.contains("What the mechanisms did"));
}

#[test]
fn the_same_seeds_give_byte_identical_reports() {
    let a = reproduce::run(
        "aash",
        &Options { only: vec!["aash-lowpar-seq".into()], seeds: Some(1), ..Options::default() },
        |_, _| {},
    )
    .expect("runs");
    let b = reproduce::run(
        "aash",
        &Options { only: vec!["aash-lowpar-seq".into()], seeds: Some(1), jobs: 1, ..Options::default() },
        |_, _| {},
    )
    .expect("runs");
    assert_eq!(a.summary_json(), b.summary_json());
    assert_eq!(a.to_html(), b.to_html());
    assert_eq!(a.to_markdown(), b.to_markdown());
    // The low-parallelism section draws the three time series the study shows.
    for kind in ["active", "fast", "migrations"] {
        assert!(a.figures().any(|f| f.id == format!("aash-lowpar-seq-{kind}")), "{kind} series");
    }
}

#[test]
fn unknown_study_unmatched_only_and_unknown_case_are_clear_errors() {
    let e = reproduce::run("nope", &Options::default(), |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("unknown study `nope`") && e.contains("aash"), "{e}");
    let e = reproduce::run("aash", &Options { only: vec!["zzz".into()], ..Options::default() }, |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("matches no experiment") && e.contains("aash-fair"), "{e}");
    // A case name that no selected experiment has: named, with the cases there are.
    let o = Options { only: vec!["aash-fair".into()], cases: vec!["nope".into()], ..Options::default() };
    let e = reproduce::run("aash", &o, |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("--case `nope`") && e.contains("cases: "), "{e}");
}
