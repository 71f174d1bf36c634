//! The asymmetry study (docs/design/asymmetry-study.md; docs/design/experiments.md, study table):
//! the nine nf-ms/k configurations × workload kinds, the asymmetry-unaware OS
//! (`fair`) with and without the fast-first fix, several seeds per cell.
//!
//! Cases are named `workload:config` (e.g. `encoder:1f-3s/8`). Metrics
//! (summary rows, `subject` = `all`):
//! - `completion_s` (s): the run's elapsed time;
//! - `compute_power` (fast cores): Σ CPU speed / fastest class speed 1.0
//!   = n + m/k;
//! - `speedup_pct` (%): (1 − T / T_0f-4s/8) × 100 per seed against the mean
//!   elapsed time of the same workload and policy on 0f-4s/8 (the README's
//!   speedup_pct form); `speedup_x`: T_0f-4s/8 / T (the paper's "speedup over
//!   the all-slow configuration", plotted against compute power);
//! - `throughput` (computes/s): compute segments completed per second (loop
//!   chunks, encoder slices, build jobs; for the servers, requests
//!   served per second);
//! - `run_spread_pct` (%): (max − min) / mean elapsed time across seeds
//!   (predictability);
//!
//! Duration-bounded cases (the throughput servers, `stop.duration_s`) have
//! no completion time of their own: their figure of merit is throughput,
//! so `speedup_x` = X / X_0f-4s/8, `speedup_pct` = (1 − X_0f-4s/8 / X) × 100
//! (the same form with time per request) and `run_spread_pct` is taken over
//! throughput.
//! - `migrations` (count).
//!
//! Every figure and sentence is computed from the runs.

use super::capability::spread_pct;
use super::{migrations, row, secs, EmbeddedFile, Runs, Study};
use crate::report::svg::{Chart, LineChart, LineSeries, LineStyle};
use crate::report::{cell, cell_pm, Report, Row, Section, Stat, Table};
use ampsched_sim::results::RunResult;

/// The study's experiment files, embedded.
pub const FILES: &[EmbeddedFile] =
    &[("study-configs.toml", include_str!("../../../../scenarios/study/study-configs.toml"))];

/// `ampsched reproduce study`.
pub const STUDY: Study = Study {
    name: "study",
    title: "The impact of performance asymmetry: predictability and scalability — reproduction",
    files: FILES,
    ledger: include_str!("../../../../scenarios/study/ledger.toml"),
    metrics: &[
        "completion_s",
        "compute_power",
        "migrations",
        "run_spread_pct",
        "speedup_pct",
        "speedup_x",
        "throughput",
    ],
    analyse,
};

/// The all-slow reference configuration speedups are taken against.
const REFERENCE: &str = "0f-4s/8";

fn analyse(all: &[Runs]) -> Report {
    let mut rep = Report {
        intro: vec![
            "Each workload is run on the nine nf-ms/k configurations (n fast cores at speed 1, m slow cores at 1/k) \
             under the asymmetry-unaware OS balancer (`fair`) and with the fast-first fix, several seeds each. \
             Predictability: the spread of a configuration's runs; scalability: speedup over 0f-4s/8 against total \
             compute power n + m/k. Workload models are not tuned to any result; summary.json holds every figure."
                .into(),
        ],
        ..Report::default()
    };
    for runs in all {
        rep.sections.push(configs(runs, &mut rep.rows));
    }
    rep
}

/// Total compute power of a run's machine: Σ speed (fast = 1.0).
fn compute_power(runs: &Runs, c: usize) -> f64 {
    let topo = &runs.exp.cases[c].scenario.topo;
    topo.cpus.iter().map(|cpu| topo.classes[cpu.class].speed).sum()
}

fn throughput(r: &RunResult) -> f64 {
    let n: u64 = r.tasks.iter().map(|t| t.computes_done).sum();
    let t = secs(r.end_ns);
    if t > 0.0 {
        n as f64 / t
    } else {
        0.0
    }
}

/// A case that runs for a fixed time (its figure of merit is throughput).
fn duration_bounded(runs: &Runs, c: usize) -> bool {
    matches!(runs.exp.cases[c].scenario.stop, ampsched_sim::scenario::Stop::Duration(_))
}

/// Performance of one run, higher is better: throughput for a
/// duration-bounded case, else 1 / elapsed time.
fn perf(runs: &Runs, c: usize, r: &RunResult) -> f64 {
    if duration_bounded(runs, c) {
        throughput(r)
    } else {
        let t = secs(r.end_ns);
        if t > 0.0 {
            1.0 / t
        } else {
            0.0
        }
    }
}

fn configs(runs: &Runs, rows: &mut Vec<Row>) -> Section {
    let e = &runs.exp;
    let mut s = super::section(runs);
    let labels = runs.labels();
    let mut workloads: Vec<String> = Vec::new();
    for c in &e.cases {
        let w = c.name.split_once(':').map(|x| x.0).unwrap_or(&c.name).to_string();
        if !workloads.contains(&w) {
            workloads.push(w);
        }
    }
    let mut text = String::from("What the mechanisms did: ");
    for w in &workloads {
        let cases: Vec<(usize, String)> = e
            .cases
            .iter()
            .enumerate()
            .filter(|(_, c)| c.name.split_once(':').map(|x| x.0) == Some(w.as_str()))
            .map(|(i, c)| (i, c.name.split_once(':').map(|x| x.1).unwrap_or("").to_string()))
            .collect();
        let reference = cases.iter().find(|(_, n)| n == REFERENCE).map(|x| x.0);
        let mut t = Table {
            caption: if cases.iter().any(|(c, _)| duration_bounded(runs, *c)) {
                format!(
                    "{w}: fixed-length runs (elapsed = the run length); run spread and speedup over {REFERENCE} \
                     are of throughput (requests/s)"
                )
            } else {
                format!("{w}: elapsed time (mean ± stdev), run spread, speedup over {REFERENCE}, throughput")
            },
            header: [
                "config",
                "compute power",
                "policy",
                "elapsed (s)",
                "run spread (%)",
                "speedup over 0f-4s/8 (×)",
                "throughput (computes/s)",
                "migrations",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![],
        };
        let mut series: Vec<LineSeries> = Vec::new();
        let mut worst_spread: Vec<(String, String, f64)> = Vec::new();
        let mut gains: Vec<(String, f64, f64)> = Vec::new();
        for p in &labels {
            let pref =
                reference.map(|r| Stat::of(&runs.of(r, p).iter().map(|x| perf(runs, r, x)).collect::<Vec<_>>()).mean);
            let mut pts = Vec::new();
            for (c, conf) in &cases {
                let rs = runs.of(*c, p);
                let cp = compute_power(runs, *c);
                let t_s: Vec<f64> = rs.iter().map(|r| secs(r.end_ns)).collect();
                let thr: Vec<f64> = rs.iter().map(throughput).collect();
                let mig: Vec<f64> = rs.iter().map(migrations).collect();
                let case = &e.cases[*c].name;
                rows.push(row(&e.name, case, "all", p, "completion_s", "s", &t_s));
                rows.push(row(&e.name, case, "all", p, "compute_power", "fast cores", &[cp]));
                rows.push(row(&e.name, case, "all", p, "throughput", "computes/s", &thr));
                rows.push(row(&e.name, case, "all", p, "migrations", "count", &mig));
                let bounded = duration_bounded(runs, *c);
                let spread = spread_pct(if bounded { &thr } else { &t_s });
                rows.push(row(&e.name, case, "all", p, "run_spread_pct", "%", &[spread]));
                worst_spread.push((conf.clone(), p.to_string(), spread));
                let sx: Vec<f64> = match pref {
                    Some(pr) => {
                        let sx: Vec<f64> =
                            rs.iter().map(|r| if pr > 0.0 { perf(runs, *c, r) / pr } else { 0.0 }).collect();
                        let sp: Vec<f64> =
                            sx.iter().map(|x| if *x > 0.0 { (1.0 - 1.0 / x) * 100.0 } else { 0.0 }).collect();
                        rows.push(row(&e.name, case, "all", p, "speedup_x", "ratio", &sx));
                        rows.push(row(&e.name, case, "all", p, "speedup_pct", "%", &sp));
                        pts.extend(sx.iter().map(|y| (cp, *y)));
                        sx
                    }
                    None => vec![],
                };
                t.rows.push(vec![
                    conf.clone(),
                    cell(cp, 3),
                    p.to_string(),
                    cell_pm(&Stat::of(&t_s), 2),
                    cell(spread, 1),
                    if sx.is_empty() { "–".into() } else { cell_pm(&Stat::of(&sx), 2) },
                    cell(Stat::of(&thr).mean, 1),
                    cell(Stat::of(&mig).mean, 0),
                ]);
                if *p != e.baseline {
                    // As times: elapsed, or time per request (1 / throughput).
                    let pb =
                        Stat::of(&runs.of(*c, &e.baseline).iter().map(|x| perf(runs, *c, x)).collect::<Vec<_>>()).mean;
                    let pf = Stat::of(&rs.iter().map(|x| perf(runs, *c, x)).collect::<Vec<_>>()).mean;
                    if pb > 0.0 && pf > 0.0 {
                        gains.push((conf.clone(), 1.0 / pb, 1.0 / pf));
                    }
                }
            }
            series.push(LineSeries { name: p.to_string(), points: pts });
        }
        if let Some(r) = reference {
            // Linear scaling from the reference: compute power / the reference's power.
            let base_cp = compute_power(runs, r);
            let mut ideal: Vec<(f64, f64)> =
                cases.iter().map(|(c, _)| (compute_power(runs, *c), compute_power(runs, *c) / base_cp)).collect();
            ideal.sort_by(|a, b| a.0.total_cmp(&b.0));
            ideal.dedup();
            series.push(LineSeries { name: "linear in compute power".into(), points: ideal });
        }
        s.table(t);
        s.figure(
            format!("{}-{w}-scalability", e.name),
            format!(
                "{w}: every run as a point, speedup over {REFERENCE} (mean of the same policy) against total compute \
                 power; a vertical spread of points = unpredictable runs"
            ),
            Chart::Line(LineChart {
                title: format!("{w}: speedup vs compute power"),
                series,
                style: LineStyle::Points,
                x_label: "total compute power n + m/k (fast cores)".into(),
                y_label: format!("speedup over {REFERENCE} (×)"),
                y_from_zero: true,
                log_x: false,
            }),
        );
        let spread_of = |p: &str| {
            worst_spread.iter().filter(|x| x.1 == p).max_by(|a, b| a.2.total_cmp(&b.2)).cloned().unwrap_or_default()
        };
        let best_gain = gains
            .iter()
            .map(|(c, tb, tf)| (c.clone(), if *tb > 0.0 { (1.0 - tf / tb) * 100.0 } else { 0.0 }))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or_default();
        let ff = labels.iter().copied().find(|l| *l != e.baseline).unwrap_or("fast-first");
        let (wb, wf) = (spread_of(&e.baseline), spread_of(ff));
        text.push_str(&format!(
            "{w} — the widest run spread was {:.1} % ({}) under {} and {:.1} % ({}) under {ff}; fast-first saved \
             most on {} ({:.1} % of the {}). ",
            wb.2,
            wb.0,
            e.baseline,
            wf.2,
            wf.0,
            best_gain.0,
            best_gain.1,
            if cases.iter().any(|(c, _)| duration_bounded(runs, *c)) { "time per request" } else { "elapsed time" }
        ));
    }
    s.para(text);
    s
}
