//! The capability-balancing study (docs/design/capability.md; docs/design/experiments.md, capability
//! table): the chore counter under natural, static and dynamic asymmetry
//! against the task count and the balance interval, and the NPB kernels one
//! at a time and all at once, always the runqueue balancer alone (`fair`
//! dispatcher, no placer) against the same plus the capability balancer.
//!
//! Metrics (summary rows; `subject` is the domain, or `all`):
//! - `avg_chore` (chores): mean over the tasks of a run of their chore counts
//!   (`computes_done`), then mean/min/max over seeds — efficiency;
//! - `stdev_chore` (chores): sample stdev of the tasks' chore counts within a
//!   run (0 with one task) — fairness, lower is better;
//! - `migrations` (count): every task's migrations, summed over the run;
//! - `run_spread_pct` (%): (max − min) / mean of the per-seed value
//!   (avg_chore, or elapsed time for NPB) across seeds — predictability;
//! - `speedup_pct` (%): per seed against the baseline on the same seed; for
//!   chores the gain in avg_chore, (avg / avg_base − 1) × 100, for NPB the
//!   time saved, (1 − T / T_base) × 100;
//! - `completion_s` (s) and `finished` (fraction of runs that finished before
//!   `max_s`; an unfinished run counts its stop time, a lower bound);
//! - NPB also `cpu_idle_pct` (%, subject `fast`/`slow`/`all`): idle share of
//!   the CPUs of that class over the run, and `min_fast_share_pct` (%): the
//!   smallest share of its CPU time any thread spent on the fastest class.
//!
//! Every figure and sentence is computed from the runs.

use super::{migrations, row, secs, speedups, EmbeddedFile, Runs, Study};
use crate::experiment::Case;
use crate::report::svg::{BarChart, BarSeries, Chart, LineChart, LineSeries, LineStyle};
use crate::report::{cell, cell_pm, Report, Row, Section, Stat, Table};
use ampsched_model::program::Op;
use ampsched_sim::results::RunResult;

/// The study's experiment files, embedded.
pub const FILES: &[EmbeddedFile] = &[
    ("cap-chores.toml", include_str!("../../../../scenarios/capability/cap-chores.toml")),
    ("cap-npb.toml", include_str!("../../../../scenarios/capability/cap-npb.toml")),
    ("cap-npb-competitive.toml", include_str!("../../../../scenarios/capability/cap-npb-competitive.toml")),
];

/// `ampsched reproduce capability`.
pub const STUDY: Study = Study {
    name: "capability",
    title: "Capability balancing of parallel applications on asymmetric CPUs — reproduction",
    files: FILES,
    ledger: include_str!("../../../../scenarios/capability/ledger.toml"),
    metrics: &[
        "avg_chore",
        "chores",
        "completion_s",
        "cpu_idle_pct",
        "finished",
        "migrations",
        "min_fast_share_pct",
        "run_spread_pct",
        "speedup_pct",
        "stdev_chore",
    ],
    analyse,
};

fn analyse(all: &[Runs]) -> Report {
    let mut rep = Report {
        intro: vec![
            "Each section is one row of the capability table in docs/design/experiments.md: the setup, tables of mean ± stdev \
             over seeds, the study's figures and a paragraph computed from the metrics. Baseline: the runqueue \
             balancer alone (the `fair` dispatcher models an asymmetry-unaware OS). Chore counts are the tasks' \
             completed 1 ms work quanta in 100 s; NPB models come from models/library.toml and are not tuned to \
             any result; summary.json holds every figure."
                .into(),
        ],
        ..Report::default()
    };
    for runs in all {
        let sec = if runs.exp.name.starts_with("cap-chores") {
            chores(runs, &mut rep.rows)
        } else {
            npb(runs, &mut rep.rows)
        };
        rep.sections.push(sec);
    }
    rep
}

/// Chore counts of every task of a run.
fn chore_counts(r: &RunResult) -> Vec<f64> {
    r.tasks.iter().filter(|t| !t.idle).map(|t| t.computes_done as f64).collect()
}

/// (max − min) / mean × 100 of per-seed values (0 when the mean is 0).
pub fn spread_pct(v: &[f64]) -> f64 {
    let s = Stat::of(v);
    if s.mean.abs() > 0.0 {
        (s.max - s.min) / s.mean * 100.0
    } else {
        0.0
    }
}

/// Split a case name `asymmetry/rest`.
fn split_case(name: &str) -> (&str, &str) {
    name.split_once('/').unwrap_or((name, ""))
}

/// Asymmetries in first-appearance order.
fn asymmetries(runs: &Runs) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &runs.exp.cases {
        let a = split_case(&c.name).0.to_string();
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

/// Per case and policy: (avg_chore, stdev_chore, migrations, speedup) stats.
struct ChoreStats {
    asym: String,
    tasks: f64,
    policy: String,
    avg: Stat,
    sd: Stat,
    mig: Stat,
    gain: Option<Stat>,
}

fn chores(runs: &Runs, rows: &mut Vec<Row>) -> Section {
    let mut s = super::section(runs);
    let e = &runs.exp;
    let labels = runs.labels();
    let mut st: Vec<ChoreStats> = Vec::new();
    for (c, case) in e.cases.iter().enumerate() {
        let (asym, n) = split_case(&case.name);
        let tasks = n.parse::<f64>().unwrap_or(0.0);
        let subject = case.scenario.spec.domains.first().map(|d| d.name.clone()).unwrap_or_else(|| "all".into());
        let base_avg: Vec<f64> = runs.of(c, &e.baseline).iter().map(|r| Stat::of(&chore_counts(r)).mean).collect();
        for p in &labels {
            let rs = runs.of(c, p);
            let avg: Vec<f64> = rs.iter().map(|r| Stat::of(&chore_counts(r)).mean).collect();
            let sd: Vec<f64> = rs.iter().map(|r| Stat::of(&chore_counts(r)).stdev).collect();
            let mig: Vec<f64> = rs.iter().map(migrations).collect();
            rows.push(row(&e.name, &case.name, &subject, p, "avg_chore", "chores", &avg));
            rows.push(row(&e.name, &case.name, &subject, p, "stdev_chore", "chores", &sd));
            rows.push(row(&e.name, &case.name, &subject, p, "migrations", "count", &mig));
            rows.push(row(&e.name, &case.name, &subject, p, "run_spread_pct", "%", &[spread_pct(&avg)]));
            let gain = (*p != e.baseline).then(|| {
                let g: Vec<f64> = base_avg
                    .iter()
                    .zip(&avg)
                    .map(|(b, a)| if *b > 0.0 { (a / b - 1.0) * 100.0 } else { 0.0 })
                    .collect();
                rows.push(row(&e.name, &case.name, &subject, p, "speedup_pct", "%", &g));
                Stat::of(&g)
            });
            st.push(ChoreStats {
                asym: asym.to_string(),
                tasks,
                policy: p.to_string(),
                avg: Stat::of(&avg),
                sd: Stat::of(&sd),
                mig: Stat::of(&mig),
                gain,
            });
        }
    }
    let get = |a: &str, n: f64, p: &str| st.iter().find(|x| x.asym == a && x.tasks == n && x.policy == p);
    let mut text = String::from("What the mechanisms did: ");
    for asym in asymmetries(runs) {
        let mine: Vec<&ChoreStats> = st.iter().filter(|x| x.asym == asym).collect();
        let series = |f: &dyn Fn(&ChoreStats) -> f64| -> Vec<LineSeries> {
            labels
                .iter()
                .map(|p| LineSeries {
                    name: p.to_string(),
                    points: mine.iter().filter(|x| x.policy == *p).map(|x| (x.tasks, f(x))).collect(),
                })
                .collect()
        };
        for (kind, what, y, f) in [
            (
                "avg",
                "avg_chore (efficiency, higher is better)",
                "chores per task",
                &(|x: &ChoreStats| x.avg.mean) as &dyn Fn(&ChoreStats) -> f64,
            ),
            ("stdev", "stdev_chore (fairness, lower is better)", "stdev of chores across tasks", &|x: &ChoreStats| {
                x.sd.mean
            }),
        ] {
            s.figure(
                format!("{}-{asym}-{kind}", e.name),
                format!("{asym} asymmetry: {what} against the task count, per balance interval; mean over seeds"),
                Chart::Line(LineChart {
                    title: format!("{asym}: {what}"),
                    series: series(f),
                    style: LineStyle::Lines,
                    x_label: "tasks".into(),
                    y_label: y.into(),
                    y_from_zero: true,
                    log_x: false,
                }),
            );
        }
        s.table(Table {
            caption: format!("{asym} asymmetry: avg_chore, stdev_chore and migrations (mean ± stdev over seeds)"),
            header: ["tasks", "policy", "avg_chore", "stdev_chore", "migrations", "avg_chore gain vs baseline (%)"]
                .map(String::from)
                .to_vec(),
            rows: mine
                .iter()
                .map(|x| {
                    vec![
                        cell(x.tasks, 0),
                        x.policy.clone(),
                        cell_pm(&x.avg, 0),
                        cell_pm(&x.sd, 1),
                        cell(x.mig.mean, 0),
                        x.gain
                            .map(|g| format!("{} [{}, {}]", cell(g.mean, 2), cell(g.min, 2), cell(g.max, 2)))
                            .unwrap_or("–".into()),
                    ]
                })
                .collect(),
        });
        // Commentary: the runqueue balancer against the capability balancer at each multiple of 4 tasks
        // (where a count balancer does nothing), the best interval by mean stdev, and the cost of 0.01 s.
        let b = e.baseline.as_str();
        let caps: Vec<&str> = labels.iter().copied().filter(|l| *l != b).collect();
        let mean_over = |p: &str, f: &dyn Fn(&ChoreStats) -> f64| {
            Stat::of(&mine.iter().filter(|x| x.policy == p && x.tasks > 1.0).map(|x| f(x)).collect::<Vec<_>>()).mean
        };
        let best = caps
            .iter()
            .copied()
            .min_by(|x, y| mean_over(x, &|s| s.sd.mean).total_cmp(&mean_over(y, &|s| s.sd.mean)))
            .unwrap_or(b);
        let mut parts = Vec::new();
        for n in [4.0, 8.0, 12.0] {
            if let (Some(rq), Some(cp)) = (get(&asym, n, b), get(&asym, n, best)) {
                parts.push(format!(
                    "{n:.0} tasks: stdev {:.1} → {:.1} chores, avg {:.0} → {:.0}, migrations {:.0} → {:.0}",
                    rq.sd.mean, cp.sd.mean, rq.avg.mean, cp.avg.mean, rq.mig.mean, cp.mig.mean
                ));
            }
        }
        let gains: Vec<String> = caps
            .iter()
            .map(|p| {
                let g = Stat::of(
                    &mine.iter().filter(|x| x.policy == *p).filter_map(|x| x.gain.map(|g| g.mean)).collect::<Vec<_>>(),
                );
                format!("{p} {:+.2} %", g.mean)
            })
            .collect();
        text.push_str(&format!(
            "{asym} asymmetry — the interval with the lowest mean stdev_chore (2..12 tasks) was {best} \
             ({:.1} chores against {:.1} under {b}); {b} → {best}: {}. Mean avg_chore change over all task \
             counts: {}. ",
            mean_over(best, &|s| s.sd.mean),
            mean_over(b, &|s| s.sd.mean),
            parts.join("; "),
            gains.join(", "),
        ));
    }
    s.para(text);
    s
}

fn npb(runs: &Runs, rows: &mut Vec<Row>) -> Section {
    let mut s = super::section(runs);
    let e = &runs.exp;
    let labels = runs.labels();
    let others: Vec<&str> = labels.iter().copied().filter(|l| *l != e.baseline).collect();
    let mut t = Table {
        caption: "Elapsed time (all kernels of the case done), speedup over the baseline on the same seed, \
                  migrations (each one pays a cache refill of the task's working set)"
            .into(),
        header: ["case", "policy", "elapsed (s)", "finished", "speedup (%)", "run spread (%)", "migrations"]
            .map(String::from)
            .to_vec(),
        rows: vec![],
    };
    let mut cats = Vec::new();
    let mut vals: Vec<Vec<f64>> = vec![Vec::new(); others.len()];
    let mut errs: Vec<Vec<(f64, f64)>> = vec![Vec::new(); others.len()];
    let mut notes = Vec::new();
    let mut unfinished = Vec::new();
    let mut static_notes = Vec::new();
    let mut per_pol: Vec<(String, Vec<f64>, f64)> = labels.iter().map(|p| (p.to_string(), vec![], 0.0)).collect();
    for (c, case) in e.cases.iter().enumerate() {
        let tb: Vec<f64> = runs.of(c, &e.baseline).iter().map(|r| secs(r.end_ns)).collect();
        cats.push(case.name.clone());
        for (pi, p) in labels.iter().enumerate() {
            let rs = runs.of(c, p);
            let t_s: Vec<f64> = rs.iter().map(|r| secs(r.end_ns)).collect();
            let fin: Vec<f64> = rs.iter().map(|r| if r.all_done { 1.0 } else { 0.0 }).collect();
            let mig: Vec<f64> = rs.iter().map(migrations).collect();
            rows.push(row(&e.name, &case.name, "all", p, "completion_s", "s", &t_s));
            rows.push(row(&e.name, &case.name, "all", p, "finished", "fraction", &fin));
            rows.push(row(&e.name, &case.name, "all", p, "migrations", "count", &mig));
            rows.push(row(&e.name, &case.name, "all", p, "run_spread_pct", "%", &[spread_pct(&t_s)]));
            let topo = &case.scenario.topo;
            let fast = &topo.classes[topo.fast_class].name;
            let idle: Vec<f64> = rs.iter().map(|r| idle_pct(r, None)).collect();
            rows.push(row(&e.name, &case.name, "all", p, "cpu_idle_pct", "%", &idle));
            if topo.classes.len() > 1 {
                for k in &topo.classes {
                    let v: Vec<f64> = rs.iter().map(|r| idle_pct(r, Some(&k.name))).collect();
                    rows.push(row(&e.name, &case.name, &k.name, p, "cpu_idle_pct", "%", &v));
                }
            }
            let share: Vec<f64> = rs.iter().map(|r| min_fast_share(r, fast)).collect();
            rows.push(row(&e.name, &case.name, "all", p, "min_fast_share_pct", "%", &share));
            for d in &rs[0].domains {
                let v: Vec<f64> = rs.iter().map(|r| super::completion_s(r, &d.name)).collect();
                rows.push(row(&e.name, &case.name, &d.name, p, "completion_s", "s", &v));
            }
            let sp = if *p != e.baseline {
                let sp = speedups(&tb, &t_s);
                rows.push(row(&e.name, &case.name, "all", p, "speedup_pct", "%", &sp));
                let k = others.iter().position(|o| o == p).expect("a compared policy");
                let st = Stat::of(&sp);
                vals[k].push(st.mean);
                errs[k].push((st.min, st.max));
                per_pol[pi].1.extend(sp.iter().copied());
                Some(st)
            } else {
                None
            };
            per_pol[pi].2 += Stat::of(&mig).mean;
            if fin.contains(&0.0) {
                let spin = |rs: &[RunResult]| {
                    Stat::of(
                        &rs.iter().map(|r| r.tasks.iter().map(|t| secs(t.spin_ns)).sum::<f64>()).collect::<Vec<_>>(),
                    )
                    .mean
                };
                unfinished.push(format!(
                    "{} under {p} ({} of {} runs; {:.0} s spent spinning per run against {:.0} s under {} in {:.0} s)",
                    case.name,
                    fin.iter().filter(|f| **f == 0.0).count(),
                    fin.len(),
                    spin(rs),
                    spin(runs.of(c, &e.baseline)),
                    e.baseline,
                    Stat::of(&tb).mean
                ));
            }
            t.rows.push(vec![
                case.name.clone(),
                p.to_string(),
                cell_pm(&Stat::of(&t_s), 2),
                format!("{:.0} %", Stat::of(&fin).mean * 100.0),
                sp.map(|x| format!("{} [{}, {}]", cell(x.mean, 1), cell(x.min, 1), cell(x.max, 1)))
                    .unwrap_or("–".into()),
                cell(spread_pct(&t_s), 1),
                cell(Stat::of(&mig).mean, 0),
            ]);
        }
    }
    s.table(t);
    s.figure(
        format!("{}-speedup", e.name),
        format!("Speedup over {} (%, same seed); whiskers: min/max over seeds", e.baseline),
        Chart::Bar(BarChart {
            title: format!("{}: speedup over {}", e.name, e.baseline),
            categories: cats,
            series: others
                .iter()
                .enumerate()
                .map(|(i, p)| BarSeries { name: p.to_string(), values: vals[i].clone(), err: Some(errs[i].clone()) })
                .collect(),
            stacked: false,
            y_label: "speedup (%)".into(),
            reference: Some(0.0),
        }),
    );
    for (p, sp, mig) in &per_pol {
        if *p == e.baseline {
            notes.push(format!("{p} made {mig:.0} migrations per run summed over the cases"));
        } else {
            let st = Stat::of(sp);
            notes.push(format!(
                "{p}: mean speedup {:.1} % (from {:.1} to {:.1} % over cases and seeds), {mig:.0} migrations per run \
                 summed over the cases",
                st.mean, st.min, st.max
            ));
        }
    }
    let mut text = format!("What the mechanisms did: {}.", notes.join("; "));
    if others.len() == 2 {
        let (a, b) = (
            &per_pol[labels.iter().position(|l| *l == others[0]).unwrap_or(0)],
            &per_pol[labels.iter().position(|l| *l == others[1]).unwrap_or(0)],
        );
        let mixed = e.cases.iter().any(|c| working_sets(c).len() > 1);
        text.push_str(&format!(
            " {} against {}: {:.1} % vs {:.1} % mean speedup and {:.0} vs {:.0} migrations (refills){}.",
            a.0,
            b.0,
            Stat::of(&a.1).mean,
            Stat::of(&b.1).mean,
            a.2,
            b.2,
            if mixed {
                ": the threads' working sets differ (per-kernel estimates), so cache selection moves the \
                 smallest-working-set tasks while FIFO moves the longest-resident ones; every working set exceeds \
                 the L2, so a migration costs the same refill under both and the difference is in which tasks move"
            } else {
                ": within a case every thread has the same working set (one kernel at a time), so the cache policy \
                 has nothing to choose between and picks as FIFO does"
            }
        ));
    }
    for (c, case) in e.cases.iter().enumerate() {
        if let Some(x) = barrier_bound(runs, c, case) {
            static_notes.push(x);
        }
    }
    if !static_notes.is_empty() {
        text.push_str(&format!(
            " Static asymmetry, one thread per CPU: at every barrier the phase ends when its slowest thread does, and \
             at any moment only as many threads as there are fast CPUs run fast, so some thread is on a slow CPU at \
             every barrier; rotating threads through the fast CPU cannot raise the slowest, and a kernel made of \
             barrier-separated phases shorter than the balance interval is predicted to gain 0 %. A single parallel \
             region (one barrier at the end) instead gains from rotation: each thread runs at the mean rate of the \
             CPUs, not at the slow rate, predicted gain 1 − r_slow / r_mean (rates r = 1 / ((1 − m) / speed + m) with \
             the kernel's memory-stall fraction m), or, when rotation covers only part of the run, the rate its \
             slowest thread reached: r_slow + f × (r_fast − r_slow) with f its share of time on the fast CPU. Per \
             kernel, gain of {} over {} and which prediction it meets: {}.",
            others[0],
            e.baseline,
            static_notes.join("; ")
        ));
    }
    let mut comp = Vec::new();
    for (c, case) in e.cases.iter().enumerate() {
        if case.scenario.tasks.len() > case.scenario.topo.cpus.len() {
            comp.push(oversubscribed(runs, c, case, &others));
        }
    }
    if !comp.is_empty() {
        text.push_str(&format!(
            " All kernels at once ({} threads on {} CPUs): capability pins every thread and swaps one for one, so \
             each CPU keeps the count it was launched with and no CPU can take work from another when its own \
             threads all wait; the runqueue balancer moves threads freely (its migrations) and keeps CPUs busy. \
             Where waiters block, time lost shows as idle CPUs; where they busy-poll (MPI), as spinning. Per case, elapsed time, CPU idle share (all; fast CPU where there is one) and spinning, {} → {}: {}.",
            e.cases[0].scenario.tasks.len(),
            e.cases[0].scenario.topo.cpus.len(),
            e.baseline,
            others.join(" / "),
            comp.join("; ")
        ));
    }
    if !unfinished.is_empty() {
        text.push_str(&format!(
            " Runs that did not finish before max_s (elapsed = the stop time, a lower bound): {}. Spinning waiters \
             burn the time of the CPUs their pinned siblings wait for.",
            unfinished.join(", ")
        ));
    }
    s.para(text);
    s
}

/// Distinct working sets (KiB) of the compute ops of a case's tasks, ascending.
fn working_sets(case: &Case) -> Vec<u32> {
    let mut ws: Vec<u32> = case
        .scenario
        .tasks
        .iter()
        .flat_map(|t| t.program.ops.iter())
        .filter_map(|op| match op {
            Op::Compute { ws_kb, .. } | Op::ParFor { ws_kb, .. } => Some(*ws_kb),
            _ => None,
        })
        .collect();
    ws.sort_unstable();
    ws.dedup();
    ws
}

/// Memory-stall fraction of a case's first compute op (0 without one).
fn mem_of(case: &Case) -> f64 {
    case.scenario
        .tasks
        .iter()
        .flat_map(|t| t.program.ops.iter())
        .find_map(|op| match op {
            Op::Compute { mem, .. } | Op::ParFor { mem, .. } => Some(*mem),
            _ => None,
        })
        .unwrap_or(0.0)
}

/// Smallest share (%) of its CPU time any thread of a run spent on the fastest class.
fn min_fast_share(r: &RunResult, fast: &str) -> f64 {
    r.tasks
        .iter()
        .filter(|t| !t.idle && t.cpu_ns.total() > 0)
        .map(|t| t.cpu_ns.get(fast) as f64 / t.cpu_ns.total() as f64 * 100.0)
        .fold(f64::INFINITY, f64::min)
}

/// Idle share (%) of the CPUs of class `class` (all CPUs for `None`) over a run.
fn idle_pct(r: &RunResult, class: Option<&str>) -> f64 {
    let cs: Vec<_> = r.cpus.iter().filter(|c| class.is_none_or(|k| c.class == k)).collect();
    let total = cs.len() as f64 * r.end_ns as f64;
    if total > 0.0 {
        cs.iter().map(|c| c.idle_ns as f64).sum::<f64>() / total * 100.0
    } else {
        0.0
    }
}

/// For a case with one thread per CPU on CPUs of different speeds: the measured gain of the first compared
/// policy against the two predictions (barrier-bound 0 %, single region 1 − r_slow / r_mean), and the
/// slowest thread's fast-CPU share under the baseline and that policy.
fn barrier_bound(runs: &Runs, c: usize, case: &Case) -> Option<String> {
    let topo = &case.scenario.topo;
    let threads = case.scenario.tasks.len();
    let slow = topo.cpus.iter().map(|x| x.speed).fold(f64::INFINITY, f64::min);
    let fastest = topo.cpus.iter().map(|x| x.speed).fold(0.0, f64::max);
    if threads != topo.cpus.len() || fastest <= slow {
        return None;
    }
    let e = &runs.exp;
    let p = runs.labels().into_iter().find(|l| *l != e.baseline)?;
    let m = mem_of(case);
    let rate = |s: f64| 1.0 / ((1.0 - m) / s + m);
    let fast_cpus = topo.cpus.iter().filter(|x| x.speed >= fastest).count();
    let tb: Vec<f64> = runs.of(c, &e.baseline).iter().map(|r| secs(r.end_ns)).collect();
    let tp: Vec<f64> = runs.of(c, p).iter().map(|r| secs(r.end_ns)).collect();
    let gain = Stat::of(&speedups(&tb, &tp)).mean;
    let fast = &topo.classes[topo.fast_class].name;
    let share = |l: &str| Stat::of(&runs.of(c, l).iter().map(|r| min_fast_share(r, fast)).collect::<Vec<_>>()).mean;
    let f = share(p) / 100.0;
    // A single region ends when the slowest thread does; with a share f of its time on the fast CPU it runs
    // at r_slow + f × (r_fast − r_slow) instead of r_slow.
    let region = (1.0 - rate(slow) / (rate(slow) + f * (rate(fastest) - rate(slow)))) * 100.0;
    let nearer = if gain.abs() <= (gain - region).abs() { "barrier-bound" } else { "single region" };
    Some(format!(
        "{} {gain:+.1} % (slowest thread's fast share {:.0} % → {:.0} %, even rotation {:.0} %; single-region \
         prediction at that share {region:+.1} %, barrier-bound 0 %: {nearer}; {:.1} balance intervals long)",
        split_case(&case.name).1,
        share(&e.baseline),
        f * 100.0,
        fast_cpus as f64 / topo.cpus.len() as f64 * 100.0,
        Stat::of(&tb).mean / secs(interval_ns(runs, c, p)).max(1e-9),
    ))
}

/// The placer period of policy `label` in case `c` (0 without a placer).
fn interval_ns(runs: &Runs, c: usize, label: &str) -> u64 {
    runs.exp.cases[c]
        .compare
        .iter()
        .find(|x| x.label == label)
        .and_then(|x| x.placer.as_ref())
        .and_then(|pl| pl.params.get("interval_ms"))
        .and_then(|v| v.as_f64())
        .map(|ms| (ms * 1e6) as u64)
        .unwrap_or(0)
}

/// One oversubscribed case in words: elapsed, idle shares and spinning per policy.
fn oversubscribed(runs: &Runs, c: usize, case: &Case, others: &[&str]) -> String {
    let e = &runs.exp;
    let topo = &case.scenario.topo;
    let fast = (topo.classes.len() > 1).then(|| topo.classes[topo.fast_class].name.as_str());
    let mean = |l: &str, f: &dyn Fn(&RunResult) -> f64| Stat::of(&runs.of(c, l).iter().map(f).collect::<Vec<_>>()).mean;
    let describe = |l: &str| {
        format!(
            "{:.1} s, idle {:.1} %{}, spin {:.0} s",
            mean(l, &|r| secs(r.end_ns)),
            mean(l, &|r| idle_pct(r, None)),
            fast.map(|k| format!(" (fast {:.1} %)", mean(l, &|r| idle_pct(r, Some(k))))).unwrap_or_default(),
            mean(l, &|r| r.tasks.iter().map(|t| secs(t.spin_ns)).sum::<f64>()),
        )
    };
    let mut parts = vec![describe(&e.baseline)];
    parts.extend(others.iter().map(|l| describe(l)));
    format!("{} {}", case.name, parts.join(" → "))
}
