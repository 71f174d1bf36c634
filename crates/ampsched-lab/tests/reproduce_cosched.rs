//! `ampsched reproduce cosched`: the experiment files load with their cases,
//! reduced runs (a few cases, one seed) give the rows, sections and figures
//! the report promises with metrics that behave as the mechanisms say, and
//! the same seeds give the same bytes.

use ampsched_lab::experiment::Experiment;
use ampsched_lab::report::{Report, Row};
use ampsched_lab::reproduce::{self, cosched, Options};
use ampsched_sim::Library;

/// Run the cosched study on the experiment of `file`, only `cases`, one seed.
fn run_reduced(file: &str, cases: &[&str]) -> Report {
    assert!(cosched::FILES.iter().any(|f| f.0 == file), "a study file");
    let opts = Options {
        only: vec![file.trim_end_matches(".toml").into()],
        seeds: Some(1),
        cases: cases.iter().map(|c| c.to_string()).collect(),
        ..Options::default()
    };
    reproduce::run("cosched", &opts, |_, _| {}).expect("runs")
}

fn get<'a>(rows: &'a [Row], case: &str, subject: &str, policy: &str, metric: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.case == case && r.subject == subject && r.policy == policy && r.metric == metric)
        .unwrap_or_else(|| panic!("row {case}/{subject}/{policy}/{metric}"))
}

#[test]
fn cosched_files_load_with_their_cases_credit_baseline_and_three_seeds() {
    let lib = Library::builtin();
    for (file, text) in cosched::FILES {
        let e = Experiment::parse(text, file, file.trim_end_matches(".toml"), &lib).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.baseline, "credit", "{file}");
        assert!(e.seeds.len() >= 3, "{file}: ≥ 3 seeds");
        let names: Vec<&str> = e.cases.iter().map(|c| c.name.as_str()).collect();
        match *file {
            "cosched-lu.toml" => assert_eq!(names, ["solo-CON", "dual-CON", "dual-CON-busy"]),
            // 6 NPB kernels × solo/dual, and 2 busy cases.
            "cosched-npb.toml" => assert_eq!(names.len(), 14),
            "cosched-amp.toml" => assert_eq!(names, ["cg", "bt"]),
            other => panic!("unexpected file {other}"),
        }
        for c in &e.cases {
            let labels: Vec<&str> = c.compare.iter().map(|p| p.label.as_str()).collect();
            if *file == "cosched-amp.toml" {
                for l in ["credit", "pcs", "bcs", "aash", "aash+pcs", "aash+bcs"] {
                    assert!(labels.contains(&l), "{file} compares {l}");
                }
            } else {
                assert_eq!(labels, ["credit", "cs", "cds", "pcs", "bcs"], "{file}");
            }
        }
    }
    // BT in dual-CON is one 4-thread program spanning both domains.
    let npb = Experiment::parse(cosched::FILES[1].1, "cosched-npb.toml", "cosched-npb", &lib).unwrap();
    let bt = npb.cases.iter().find(|c| c.name == "bt-dual").unwrap();
    let doms = &bt.scenario.domains;
    let id = |n: &str| doms.iter().position(|d| d.name == n).unwrap() as u32;
    let (vm0, vm1) = (id("vm0"), id("vm1"));
    let groups: Vec<u32> =
        bt.scenario.tasks.iter().filter(|t| t.domain.0 == vm0 || t.domain.0 == vm1).map(|t| t.group).collect();
    assert_eq!(groups.len(), 4);
    assert!(groups.iter().all(|g| *g == groups[0]), "{groups:?}");
    // The testbed's dom0 runs in the background, over the Xen 4.0 rules every scheme follows.
    let dom0 = id("dom0");
    assert!(bt.scenario.tasks.iter().filter(|t| t.domain.0 == dom0).all(|t| t.background));
    assert!(bt
        .compare
        .iter()
        .all(|p| p.dispatcher.as_ref().is_some_and(|d| d.name == "xen40" || d.params.contains_key("rules"))));
    assert!(reproduce::study("cosched").is_ok());
}

#[test]
fn dual_con_lu_shows_cs_taking_turns_and_pcs_bcs_keeping_both_domains_running() {
    let rep = run_reduced("cosched-lu.toml", &["dual-CON"]);
    // One experiment section (besides the ledger's).
    assert_eq!(rep.sections.iter().filter(|s| s.id != "ledger").count(), 1);
    let r = &rep.rows;
    let all = |p: &str, m: &str| get(r, "dual-CON", "all", p, m).mean;
    // Two 2-vCPU CON domains on 4 pCPUs: credit runs both at once. CS signals every
    // pCPU on each CON pick, so the domains take turns: about twice as long.
    assert!(all("cs", "exec_s") > 1.5 * all("credit", "exec_s"));
    assert!(all("cs", "speedup_pct") < -50.0);
    // PCS (disjoint pCPUs) and BCS (no signals) keep both running: credit's time.
    for p in ["pcs", "bcs"] {
        assert!((all(p, "exec_s") / all("credit", "exec_s") - 1.0).abs() < 0.01, "{p}");
    }
    // The other metrics exist for every policy; credit does no co-scheduling.
    for p in ["credit", "cs", "cds", "pcs", "bcs"] {
        for m in ["exec_s", "fairness_diff_pct", "cosched_ops_per_s", "spin_waste_s"] {
            get(r, "dual-CON", "all", p, m);
        }
        get(r, "dual-CON", "vm0", p, "exec_s");
        get(r, "dual-CON", "vm1", p, "spin_waste_s");
    }
    assert_eq!(all("credit", "cosched_ops_per_s"), 0.0);
    assert!(all("cs", "cosched_ops_per_s") > 10.0);
    let ids: Vec<&str> = rep.figures().map(|f| f.id.as_str()).collect();
    for id in ["cosched-lu-exec", "cosched-lu-spin", "cosched-lu-dual-CON-ops", "cosched-lu-bcs-cdf"] {
        assert!(ids.contains(&id), "figure {id} in {ids:?}");
    }
}

#[test]
fn busy_bt_spanning_two_domains_spins_less_under_pcs_than_under_credit() {
    let rep = run_reduced("cosched-npb.toml", &["bt-dual-busy"]);
    let spin = |p: &str| get(&rep.rows, "bt-dual-busy", "all", p, "spin_waste_s").mean;
    // With busy HIT domains credit preempts BT's four threads independently and
    // the others spin at each barrier; PCS runs them together.
    assert!(spin("credit") > 10.0, "credit spun {}", spin("credit"));
    assert!(spin("pcs") < spin("credit"));
    // The HIT domains' execution time is reported too.
    get(&rep.rows, "bt-dual-busy", "HIT", "pcs", "exec_s");
}

#[test]
fn cosched_amp_rows_show_fast_exposure_inside_the_gangs() {
    let rep = run_reduced("cosched-amp.toml", &["bt"]);
    let gap = |d: &str, p: &str| get(&rep.rows, "bt", d, p, "fast_gap_pct").mean;
    // Credit leaves one vCPU on the fast core: its gang's fast time is all on that
    // vCPU (gap 100 %). AASH's round robin evens it out over the run.
    assert!(gap("vm0", "credit").max(gap("vm1", "credit")) > 99.0);
    for p in ["aash", "aash+pcs", "aash+bcs"] {
        assert!(gap("vm0", p).max(gap("vm1", p)) < 10.0, "{p}");
    }
    assert!(rep.figures().any(|f| f.id == "cosched-amp-fast-gap"));
}

#[test]
fn the_same_seeds_give_byte_identical_cosched_reports() {
    let a = run_reduced("cosched-lu.toml", &["dual-CON-busy"]);
    let b = run_reduced("cosched-lu.toml", &["dual-CON-busy"]);
    assert_eq!(a.summary_json(), b.summary_json());
    assert_eq!(a.to_html(), b.to_html());
}
