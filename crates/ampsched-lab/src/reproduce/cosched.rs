//! The co-scheduling study (docs/design/cosched.md; docs/design/experiments.md, co-scheduling table):
//! SPLASH-2 LU and the NAS Parallel Benchmarks in one or two concurrent
//! (`CON`) domains under credit, CS, CDS, PCS and BCS, and the step beyond
//! the paper, co-scheduling on asymmetric cores (`cosched-amp`: AASH composed
//! with PCS/BCS). Every figure and sentence below is computed from the runs.
//!
//! Metrics (summary rows; subject = a `CON` domain, or `all`):
//! - `exec_s`: a `CON` domain's execution time (`all`: the last one's);
//! - `speedup_pct`: (1 − T / T_credit) × 100 on the same seed;
//! - `fairness_diff_pct` (`all`, two `CON` domains): |T₀ − T₁| / min(T₀, T₁) ×
//!   100, how much longer the slower domain took (also `fairness_diff_s`);
//! - `cosched_ops_per_s` (`all`): co-scheduling operations (CS/CDS signals,
//!   PCS operations, BCS raises) per second of the `CON` domains' execution
//!   (`exec_s` of `all`; background activity may run on after them);
//! - `spin_waste_s`: CPU time the domain's vCPUs spent spin-waiting;
//! - `cosched-amp` only: `fast_share` (the domain's share of run time on the
//!   fast core) and `fast_gap_pct` (within a gang: |F₀ − F₁| / (F₀ + F₁) ×
//!   100 of its two vCPUs' fast-core times; 0 = equal exposure).

use super::{completion_s, row, secs, speedups, EmbeddedFile, Runs, Study};
use crate::report::svg::{BarChart, BarSeries, Chart, LineChart, LineSeries, LineStyle};
use crate::report::{cell, cell_pm, Report, Row, Section, Stat, Table};
use ampsched_model::program::{Op, Program};
use ampsched_model::spec::CoschedType;
use ampsched_sim::results::RunResult;

/// The study's experiment files, embedded.
pub const FILES: &[EmbeddedFile] = &[
    ("cosched-lu.toml", include_str!("../../../../scenarios/cosched/cosched-lu.toml")),
    ("cosched-npb.toml", include_str!("../../../../scenarios/cosched/cosched-npb.toml")),
    ("cosched-amp.toml", include_str!("../../../../scenarios/cosched/cosched-amp.toml")),
];

/// `ampsched reproduce cosched`.
pub const STUDY: Study = Study {
    name: "cosched",
    title: "Co-scheduling of concurrent VMs: CS, CDS, PCS, BCS, and co-scheduling on asymmetric cores — reproduction",
    files: FILES,
    ledger: include_str!("../../../../scenarios/cosched/ledger.toml"),
    metrics: &[
        "cosched_ops_per_s",
        "exec_s",
        "fairness_diff_pct",
        "fairness_diff_s",
        "fast_gap_pct",
        "fast_share",
        "speedup_pct",
        "spin_waste_s",
    ],
    analyse,
};

/// Points kept of a CDF curve (quantiles), to keep the SVG small.
const CDF_POINTS: usize = 200;

/// A counter's value at the end of a run (0 when the dispatcher has none).
fn counter(r: &RunResult, name: &str) -> f64 {
    r.dispatcher_counters.iter().find(|(k, _)| k == name).map(|x| x.1).unwrap_or(0.0)
}

/// Co-scheduling operations per second over time: (interval end s, ops/s).
fn ops_series(r: &RunResult) -> Vec<(f64, f64)> {
    let Some(k) = r.dispatcher_counters.iter().position(|(n, _)| n == "cosched_ops") else { return Vec::new() };
    let mut out = Vec::new();
    let (mut t0, mut v0) = (0u64, 0.0);
    for p in &r.counter_series {
        let dt = secs(p.t_ns - t0);
        if dt > 0.0 {
            out.push((secs(p.t_ns), (p.values[k] - v0) / dt));
        }
        (t0, v0) = (p.t_ns, p.values[k]);
    }
    out
}

/// The sibling start-time differences of a run, ms.
fn skews_ms(r: &RunResult) -> Vec<f64> {
    r.dispatcher_samples
        .iter()
        .find(|(k, _)| k == "sibling_start_diff_ns")
        .map(|(_, v)| v.iter().map(|&x| x as f64 / 1e6).collect())
        .unwrap_or_default()
}

/// An empirical CDF of `v` as at most `CDF_POINTS` (x, fraction ≤ x) steps.
fn cdf(mut v: Vec<f64>) -> Vec<(f64, f64)> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(CDF_POINTS).max(1);
    let mut out: Vec<(f64, f64)> = (step - 1..n).step_by(step).map(|i| (v[i], (i + 1) as f64 / n as f64)).collect();
    if out.last().map(|p| p.1) != Some(1.0) {
        out.push((v[n - 1], 1.0));
    }
    out
}

/// The value of `v` (sorted copy) at quantile `q`.
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * q).round() as usize]
}

/// Wall time a program spends sleeping (loops unrolled; a random sleep counts its mean).
fn sleep_time(p: &Program) -> u64 {
    fn walk(ops: &[Op], i: &mut usize, stop: usize) -> u64 {
        let mut sum = 0u64;
        while *i < stop {
            match &ops[*i] {
                Op::Sleep { dur } | Op::Io { dur } => sum += dur.0,
                Op::SleepExp { mean } => sum += mean.0,
                Op::LoopStart { count, end } => {
                    let end = *end as usize;
                    *i += 1;
                    sum += walk(ops, i, end) * *count as u64;
                    *i = end;
                }
                _ => {}
            }
            *i += 1;
        }
        sum
    }
    let mut i = 0;
    walk(&p.ops, &mut i, p.ops.len())
}

/// Is this a task with work of its own — computing more than it sleeps — rather
/// than background activity (an idle guest's or dom0's timer ticks) or nothing?
fn has_work(p: &Program) -> bool {
    p.total_work().0 > sleep_time(p)
}

/// Names of the `HIT` domains of case `c` that have work (not only background activity).
fn busy_hit_domains(runs: &Runs, c: usize) -> Vec<String> {
    let sc = &runs.exp.cases[c].scenario;
    sc.domains
        .iter()
        .filter(|d| d.cosched == CoschedType::Hit && d.tasks.iter().any(|t| has_work(&sc.tasks[t.idx()].program)))
        .map(|d| d.name.clone())
        .collect()
}

/// Does case `c` give its `HIT` domains work (the "-busy" cases beyond the paper)?
fn busy(runs: &Runs, c: usize) -> bool {
    !busy_hit_domains(runs, c).is_empty()
}

/// Names of the `CON` domains of case `c`.
fn con_domains(runs: &Runs, c: usize) -> Vec<String> {
    runs.exp.cases[c]
        .scenario
        .domains
        .iter()
        .filter(|d| d.cosched == CoschedType::Con)
        .map(|d| d.name.clone())
        .collect()
}

/// One case's metrics for one policy, over seeds.
struct PolicyCase {
    policy: String,
    /// Per `CON` domain: (name, exec, speedup (None for the baseline), spin).
    doms: Vec<(String, Stat, Option<Stat>, Stat)>,
    exec_all: Stat,
    fairness_pct: Option<Stat>,
    ops_per_s: Stat,
    spin_all: Stat,
    /// The busy HIT domains' execution time (the last one's), if any.
    hit_exec: Option<Stat>,
    /// cosched-amp: per domain (name, fast share, fast gap %).
    fast: Vec<(String, Stat, Stat)>,
}

/// Metrics of every policy in case `c`; pushes the summary rows.
fn case_metrics(runs: &Runs, c: usize, rows: &mut Vec<Row>) -> Vec<PolicyCase> {
    let exp = &runs.exp;
    let case = &exp.cases[c].name;
    let doms = con_domains(runs, c);
    let base = runs.of(c, &exp.baseline);
    let exec_of = |rs: &[RunResult], d: &str| rs.iter().map(|r| completion_s(r, d)).collect::<Vec<f64>>();
    let all_of = |rs: &[RunResult]| {
        rs.iter().map(|r| doms.iter().map(|d| completion_s(r, d)).fold(0.0, f64::max)).collect::<Vec<f64>>()
    };
    let mut out = Vec::new();
    for p in runs.labels() {
        let rs = runs.of(c, p);
        let is_base = p == exp.baseline;
        let mut per = Vec::new();
        let mut fast = Vec::new();
        for d in &doms {
            let t = exec_of(rs, d);
            rows.push(row(&exp.name, case, d, p, "exec_s", "s", &t));
            let sp = (!is_base).then(|| {
                let sp = speedups(&exec_of(base, d), &t);
                rows.push(row(&exp.name, case, d, p, "speedup_pct", "%", &sp));
                Stat::of(&sp)
            });
            let spin: Vec<f64> = rs.iter().map(|r| secs(super::domain(r, d).spin_ns)).collect();
            rows.push(row(&exp.name, case, d, p, "spin_waste_s", "s", &spin));
            per.push((d.clone(), Stat::of(&t), sp, Stat::of(&spin)));
            if let Some(fi) = rs.first().and_then(|r| r.classes.iter().position(|c| c == "fast")) {
                let share: Vec<f64> = rs
                    .iter()
                    .map(|r| {
                        let dr = super::domain(r, d);
                        dr.cpu_ns.values[fi] as f64 / dr.cpu_ns.total().max(1) as f64
                    })
                    .collect();
                let gap: Vec<f64> = rs
                    .iter()
                    .map(|r| {
                        let id = super::domain(r, d).id;
                        let f: Vec<u64> =
                            r.tasks.iter().filter(|t| t.domain == id).map(|t| t.cpu_ns.values[fi]).collect();
                        let (lo, hi) = (f.iter().min().copied().unwrap_or(0), f.iter().max().copied().unwrap_or(0));
                        let sum: u64 = f.iter().sum();
                        if sum > 0 {
                            (hi - lo) as f64 / sum as f64 * 100.0
                        } else {
                            0.0
                        }
                    })
                    .collect();
                rows.push(row(&exp.name, case, d, p, "fast_share", "fraction", &share));
                rows.push(row(&exp.name, case, d, p, "fast_gap_pct", "%", &gap));
                fast.push((d.clone(), Stat::of(&share), Stat::of(&gap)));
            }
        }
        let all = all_of(rs);
        rows.push(row(&exp.name, case, "all", p, "exec_s", "s", &all));
        if !is_base {
            let sp = speedups(&all_of(base), &all);
            rows.push(row(&exp.name, case, "all", p, "speedup_pct", "%", &sp));
        }
        let fairness_pct = (doms.len() == 2).then(|| {
            let (a, b) = (exec_of(rs, &doms[0]), exec_of(rs, &doms[1]));
            let ds: Vec<f64> = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).collect();
            let pct: Vec<f64> = a.iter().zip(&b).map(|(x, y)| (x - y).abs() / x.min(*y).max(1e-9) * 100.0).collect();
            rows.push(row(&exp.name, case, "all", p, "fairness_diff_s", "s", &ds));
            rows.push(row(&exp.name, case, "all", p, "fairness_diff_pct", "%", &pct));
            Stat::of(&pct)
        });
        // Per second of the CON domains' execution: background activity (idle guests, dom0)
        // may outlive them, and no co-scheduling happens once they are done.
        let ops: Vec<f64> = rs.iter().zip(&all).map(|(r, t)| counter(r, "cosched_ops") / t.max(1e-9)).collect();
        rows.push(row(&exp.name, case, "all", p, "cosched_ops_per_s", "1/s", &ops));
        let spin: Vec<f64> =
            rs.iter().map(|r| doms.iter().map(|d| secs(super::domain(r, d).spin_ns)).sum::<f64>()).collect();
        rows.push(row(&exp.name, case, "all", p, "spin_waste_s", "s", &spin));
        let hits = busy_hit_domains(runs, c);
        let hit_exec = (!hits.is_empty()).then(|| {
            let t: Vec<f64> = rs.iter().map(|r| hits.iter().map(|d| completion_s(r, d)).fold(0.0, f64::max)).collect();
            rows.push(row(&exp.name, case, "HIT", p, "exec_s", "s", &t));
            Stat::of(&t)
        });
        out.push(PolicyCase {
            policy: p.to_string(),
            doms: per,
            exec_all: Stat::of(&all),
            fairness_pct,
            ops_per_s: Stat::of(&ops),
            spin_all: Stat::of(&spin),
            hit_exec,
            fast,
        });
    }
    out
}

fn analyse(all: &[Runs]) -> Report {
    let mut rep = Report {
        intro: vec![
            "Each section is one experiment: the setup, a table of mean ± stdev over seeds (speedup: mean [min, max] of \
             per-seed speedups against credit on the same seed), execution-time bars per scheme and configuration, \
             spin waste, co-scheduling operations per second over time, the CDF of the start-time difference between \
             sibling vCPUs (what a co-scheduling request waited for its sibling to start), and a paragraph computed \
             from the metrics. Workload models come from models/library.toml and are not tuned to any result; \
             summary.json holds every figure."
                .into(),
            "Reading the numbers: credit and every scheme follow Xen 4.0's rules (the papers patched Xen \
             4.0.1's credit scheduler), and dom0 runs in the background (it wakes about ten times a second per \
             vCPU for 20 µs and counts in no figure). The paper's testbed runs only the CON domains (the HIT \
             domains are idle), so the 2 or 4 busy vCPUs never outnumber the 4 pCPUs and credit preempts a \
             sibling only for dom0's short wake-ups: there is almost no lock-holder preemption to remove, and \
             what the schemes change is what their own signals and priorities do to the other CON domain. \
             The testbed's hypervisor costs are on in cosched-lu and cosched-npb (docs/design/cosched.md): a \
             woken vCPU runs 10 µs after the event that woke it, each co-scheduling signal stalls the pCPU it \
             reaches for 10 µs, and vCPUs computing at once share the 2 MiB last-level cache. \
             In cosched-npb, FT and MG do I/O (an estimate: 2 s of device time per run in 0.5 ms requests) \
             through dom0's back ends: 15 µs of dom0 CPU before each request and 15 µs after it, on a dom0 \
             vCPU that competes with the guests' for the pCPUs (crates/ampsched-sim/src/engine/backend). \
             The time-slot example and the contended scenario of tests/cosched.rs show the other side: with \
             more vCPUs than pCPUs, spinning siblings waste most of the CPU under credit and co-scheduling \
             removes it."
                .into(),
        ],
        ..Report::default()
    };
    for runs in all {
        let sec = if runs.exp.name == "cosched-amp" { amp(runs, &mut rep.rows) } else { paper(runs, &mut rep.rows) };
        rep.sections.push(sec);
    }
    rep
}

/// Table rows of one case (every policy, every CON domain).
fn table_rows(case: &str, m: &[PolicyCase]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for pc in m {
        for (d, exec, sp, spin) in &pc.doms {
            out.push(vec![
                case.to_string(),
                d.clone(),
                pc.policy.clone(),
                cell_pm(exec, 2),
                sp.map(|x| format!("{} [{}, {}]", cell(x.mean, 1), cell(x.min, 1), cell(x.max, 1)))
                    .unwrap_or("–".into()),
                cell(spin.mean, 2),
                pc.fairness_pct.map(|f| cell(f.mean, 1)).unwrap_or("–".into()),
                cell(pc.ops_per_s.mean, 0),
            ]);
        }
    }
    out
}

const HEADER: [&str; 8] = [
    "case",
    "domain",
    "policy",
    "exec (s)",
    "speedup vs credit (%)",
    "spin waste (s)",
    "CON domains' difference (%)",
    "co-sched ops/s",
];

/// Execution-time bars per scheme × configuration (a category per case and CON domain).
fn exec_bars(runs: &Runs, ms: &[Vec<PolicyCase>]) -> Chart {
    let labels = runs.labels();
    let mut cats = Vec::new();
    let mut vals = vec![Vec::new(); labels.len()];
    let mut errs = vec![Vec::new(); labels.len()];
    for (c, case) in runs.exp.cases.iter().enumerate() {
        for (di, d) in con_domains(runs, c).iter().enumerate() {
            cats.push(format!("{} {d}", case.name));
            for (pi, pc) in ms[c].iter().enumerate() {
                let s = pc.doms[di].1;
                vals[pi].push(s.mean);
                errs[pi].push((s.min, s.max));
            }
        }
    }
    Chart::Bar(BarChart {
        title: format!("{}: execution time per CON domain", runs.exp.name),
        categories: cats,
        series: labels
            .iter()
            .enumerate()
            .map(|(i, p)| BarSeries { name: p.to_string(), values: vals[i].clone(), err: Some(errs[i].clone()) })
            .collect(),
        stacked: false,
        y_label: "execution time (s)".into(),
        reference: None,
    })
}

/// Spin-waste bars per scheme × case (all CON domains together).
fn spin_bars(runs: &Runs, ms: &[Vec<PolicyCase>]) -> Chart {
    let labels = runs.labels();
    Chart::Bar(BarChart {
        title: format!("{}: CPU time spent spinning", runs.exp.name),
        categories: runs.exp.cases.iter().map(|c| c.name.clone()).collect(),
        series: labels
            .iter()
            .enumerate()
            .map(|(i, p)| BarSeries {
                name: p.to_string(),
                values: ms.iter().map(|m| m[i].spin_all.mean).collect(),
                err: Some(ms.iter().map(|m| (m[i].spin_all.min, m[i].spin_all.max)).collect()),
            })
            .collect(),
        stacked: false,
        y_label: "spin waste, all CON domains (s)".into(),
        reference: None,
    })
}

/// Co-scheduling operations per second over time, first seed, one line per scheme.
fn ops_chart(runs: &Runs, c: usize) -> Option<Chart> {
    let series: Vec<LineSeries> = runs
        .labels()
        .iter()
        .map(|p| LineSeries { name: p.to_string(), points: ops_series(&runs.of(c, p)[0]) })
        .filter(|s| !s.points.is_empty())
        .collect();
    (!series.is_empty()).then(|| {
        Chart::Line(LineChart {
            title: format!("{} {}: co-scheduling operations per second", runs.exp.name, runs.exp.cases[c].name),
            series,
            style: LineStyle::Steps,
            x_label: "time (s)".into(),
            y_label: "operations / s".into(),
            y_from_zero: true,
            log_x: false,
        })
    })
}

/// Per case of a CDF: (case, samples, median ms, 90th percentile ms).
type CdfInfo = Vec<(String, usize, f64, f64)>;

/// CDF of sibling start-time differences under `policy`, per case in `cases` (all seeds pooled).
fn cdf_chart(runs: &Runs, policy: &str, cases: &[usize]) -> Option<(Chart, CdfInfo)> {
    let mut series = Vec::new();
    let mut info = Vec::new();
    for &c in cases {
        let v: Vec<f64> = runs.of(c, policy).iter().flat_map(skews_ms).collect();
        if v.is_empty() {
            continue;
        }
        info.push((runs.exp.cases[c].name.clone(), v.len(), quantile(&v, 0.5), quantile(&v, 0.9)));
        series.push(LineSeries { name: runs.exp.cases[c].name.clone(), points: cdf(v) });
    }
    (!series.is_empty()).then(|| {
        (
            Chart::Line(LineChart {
                title: format!("{}: {policy} sibling start-time difference", runs.exp.name),
                series,
                style: LineStyle::Steps,
                x_label: "start-time difference (ms)".into(),
                y_label: "fraction of sibling starts ≤ x".into(),
                y_from_zero: true,
                log_x: false,
            }),
            info,
        )
    })
}

fn find<'a>(m: &'a [PolicyCase], p: &str) -> Option<&'a PolicyCase> {
    m.iter().find(|x| x.policy == p)
}

/// cosched-lu and cosched-npb: the paper's experiments.
fn paper(runs: &Runs, rows: &mut Vec<Row>) -> Section {
    let mut s = super::section(runs);
    let ms: Vec<Vec<PolicyCase>> = (0..runs.exp.cases.len()).map(|c| case_metrics(runs, c, rows)).collect();
    let mut t = Table {
        caption: "Execution time, speedup, spin waste, fairness and co-scheduling frequency".into(),
        header: HEADER.map(String::from).to_vec(),
        rows: Vec::new(),
    };
    for (c, case) in runs.exp.cases.iter().enumerate() {
        t.rows.extend(table_rows(&case.name, &ms[c]));
    }
    s.table(t);
    s.figure(
        format!("{}-exec", runs.exp.name),
        "Execution time per CON domain, per scheme and configuration; whiskers: min/max over seeds",
        exec_bars(runs, &ms),
    );
    s.figure(
        format!("{}-spin", runs.exp.name),
        "CPU time the CON domains' vCPUs spent spinning; whiskers: min/max over seeds",
        spin_bars(runs, &ms),
    );
    let n = runs.exp.cases.len();
    let solo: Vec<usize> = (0..n).filter(|&c| con_domains(runs, c).len() == 1 && !busy(runs, c)).collect();
    let dual: Vec<usize> = (0..n).filter(|&c| con_domains(runs, c).len() > 1 && !busy(runs, c)).collect();
    let contended: Vec<usize> = (0..n).filter(|&c| busy(runs, c)).collect();
    // Operations over time: every two-domain case, and the solo case of a one-benchmark experiment.
    let shown: Vec<usize> = (0..n).filter(|&c| !solo.contains(&c) || solo.len() == 1).collect();
    for &c in &shown {
        if let Some(ch) = ops_chart(runs, c) {
            s.figure(
                format!("{}-{}-ops", runs.exp.name, runs.exp.cases[c].name),
                format!(
                    "Co-scheduling operations per second in each statistics interval, {}, seed {}",
                    runs.exp.cases[c].name, runs.exp.seeds[0]
                ),
                ch,
            );
        }
    }
    let with_two: Vec<usize> = dual.iter().chain(&contended).copied().collect();
    let mut cdf_text = String::new();
    if let Some((ch, info)) = cdf_chart(runs, "bcs", &with_two) {
        s.figure(
            format!("{}-bcs-cdf", runs.exp.name),
            "CDF of the start-time difference between a BCS-raised sibling and the vCPU whose pick raised it \
             (two-domain cases, all seeds; a sibling already running is not counted)",
            ch,
        );
        let parts: Vec<String> = info
            .iter()
            .map(|(n, k, med, p90)| format!("{n}: median {med:.2} ms, 90th percentile {p90:.2} ms ({k} starts)"))
            .collect();
        cdf_text = format!(
            "BCS sibling start-time differences (raised while waiting, started at their pCPU's next decision; PCS \
             starts them at the instant of the request): {}.",
            parts.join("; ")
        );
    }
    s.para(commentary(runs, &ms, &solo, &dual, &contended));
    if !cdf_text.is_empty() {
        s.para(cdf_text);
    }
    s
}

/// Execution time of case `c`'s CON domains under `p` relative to credit (T / T_credit), mean over seeds.
fn ratio(m: &[PolicyCase], p: &str) -> f64 {
    let base = find(m, "credit").map(|x| x.exec_all.mean).unwrap_or(0.0);
    let t = find(m, p).map(|x| x.exec_all.mean).unwrap_or(0.0);
    if base > 0.0 {
        t / base
    } else {
        1.0
    }
}

/// "a–b" range of `ratio` over `cases` for policy `p`, as "×lo…×hi".
fn ratio_range(ms: &[Vec<PolicyCase>], cases: &[usize], p: &str) -> String {
    let v: Vec<f64> = cases.iter().map(|&c| ratio(&ms[c], p)).collect();
    let (lo, hi) =
        (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    if (hi - lo).abs() < 0.0005 {
        format!("×{lo:.3}")
    } else {
        format!("×{lo:.3}…×{hi:.3}")
    }
}

/// The computed paragraphs of a paper experiment (as one paragraph).
fn commentary(runs: &Runs, ms: &[Vec<PolicyCase>], solo: &[usize], dual: &[usize], busy: &[usize]) -> String {
    let schemes = ["cs", "cds", "pcs", "bcs"];
    let ranges = |cases: &[usize]| -> String {
        schemes.iter().map(|p| format!("{p} {}", ratio_range(ms, cases, p))).collect::<Vec<_>>().join(", ")
    };
    let mut text = String::from("What the mechanisms did (execution time of the CON domains relative to credit): ");
    if !solo.is_empty() {
        text.push_str(&format!(
            "with one CON domain and idle HIT domains, {}: the domain's vCPUs are never descheduled, so a \
             co-scheduling signal only re-picks a vCPU that already runs. ",
            ranges(solo)
        ));
    }
    if !dual.is_empty() {
        let worst = dual
            .iter()
            .copied()
            .max_by(|&a, &b| ratio(&ms[a], "cs").total_cmp(&ratio(&ms[b], "cs")))
            .expect("a dual case");
        let cs = find(&ms[worst], "cs");
        text.push_str(&format!(
            "With two CON domains, {}. CS and CDS are worst in {} (×{:.2}, the two domains {:.1} % apart, {:.0} \
             operations/s): a signal to every pCPU preempts the other CON domain wherever it runs, so only one \
             domain is co-scheduled at a time and the two take turns of about a timeslice. PCS signals only the \
             pCPUs holding the domain's vCPUs — disjoint for the two scattered domains — and BCS signals nobody, \
             so both keep both domains running. ",
            ranges(dual),
            runs.exp.cases[worst].name,
            ratio(&ms[worst], "cs"),
            cs.and_then(|x| x.fairness_pct).map(|f| f.mean).unwrap_or(0.0),
            cs.map(|x| x.ops_per_s.mean).unwrap_or(0.0),
        ));
        let spun: Vec<String> = dual
            .iter()
            .filter_map(|&c| {
                let cs = find(&ms[c], "cs")?.spin_all.mean;
                let cr = find(&ms[c], "credit")?.spin_all.mean;
                (cs > cr + 1.0)
                    .then(|| format!("{} {cr:.1} s under credit → {cs:.1} s under cs", runs.exp.cases[c].name))
            })
            .collect();
        if !spun.is_empty() {
            text.push_str(&format!(
                "Taking turns is paid in spinning where one program spans both domains: {}. ",
                spun.join("; ")
            ));
        }
    }
    for &c in busy {
        let m = &ms[c];
        let per: Vec<String> = ["credit", "cs", "cds", "pcs", "bcs"]
            .iter()
            .filter_map(|p| {
                let x = find(m, p)?;
                Some(format!(
                    "{p} ×{:.2}, {:.1} s spun, HIT {:.1} s",
                    ratio(m, p),
                    x.spin_all.mean,
                    x.hit_exec.map(|h| h.mean).unwrap_or(0.0)
                ))
            })
            .collect();
        let best = schemes.iter().min_by(|a, b| ratio(m, a).total_cmp(&ratio(m, b))).copied().unwrap_or("credit");
        let credit_spin = find(m, "credit").map(|x| x.spin_all.mean).unwrap_or(0.0);
        let why = if credit_spin > 1.0 {
            format!(
                "credit preempts each sibling independently, and the CON domains spun {credit_spin:.1} s waiting \
                 for descheduled siblings"
            )
        } else {
            "the program's threads block instead of spinning, so credit wastes nothing at barriers and a \
             co-scheduler can only lose by holding pCPUs"
                .to_string()
        };
        text.push_str(&format!(
            "Beyond the paper, {} (busy HIT domains, vCPUs outnumber pCPUs): {}. Here {why}; the best scheme was \
             {best} (×{:.2}), and the HIT domains' execution time shows whom the co-scheduler took the time from. ",
            runs.exp.cases[c].name,
            per.join("; "),
            ratio(m, best),
        ));
    }
    text.trim_end().to_string()
}

/// cosched-amp: co-scheduling on asymmetric cores.
fn amp(runs: &Runs, rows: &mut Vec<Row>) -> Section {
    let mut s = super::section(runs);
    let ms: Vec<Vec<PolicyCase>> = (0..runs.exp.cases.len()).map(|c| case_metrics(runs, c, rows)).collect();
    let mut header = HEADER.map(String::from).to_vec();
    header.extend(["fast-core share".to_string(), "fast gap in gang (%)".to_string()]);
    let mut t =
        Table { caption: "Execution time, fairness, spin waste and fast-core exposure".into(), header, rows: vec![] };
    for (c, case) in runs.exp.cases.iter().enumerate() {
        for (mut r, (pc, di)) in table_rows(&case.name, &ms[c])
            .into_iter()
            .zip(ms[c].iter().flat_map(|pc| (0..pc.doms.len()).map(move |di| (pc, di))))
        {
            let (share, gap) = pc.fast.get(di).map(|f| (f.1.mean, f.2.mean)).unwrap_or((0.0, 0.0));
            r.push(format!("{:.1} %", share * 100.0));
            r.push(cell(gap, 1));
            t.rows.push(r);
        }
    }
    s.table(t);
    s.figure(
        format!("{}-exec", runs.exp.name),
        "Execution time per CON domain, per policy and program; whiskers: min/max over seeds",
        exec_bars(runs, &ms),
    );
    s.figure(
        format!("{}-spin", runs.exp.name),
        "CPU time the gangs' vCPUs spent spinning; whiskers: min/max over seeds",
        spin_bars(runs, &ms),
    );
    let labels = runs.labels();
    let gaps = Chart::Bar(BarChart {
        title: format!("{}: fast-core exposure gap inside each gang", runs.exp.name),
        categories: runs
            .exp
            .cases
            .iter()
            .enumerate()
            .flat_map(|(c, case)| con_domains(runs, c).into_iter().map(move |d| format!("{} {d}", case.name)))
            .collect(),
        series: labels
            .iter()
            .enumerate()
            .map(|(i, p)| BarSeries {
                name: p.to_string(),
                values: ms.iter().flat_map(|m| m[i].fast.iter().map(|f| f.2.mean)).collect(),
                err: Some(ms.iter().flat_map(|m| m[i].fast.iter().map(|f| (f.2.min, f.2.max))).collect()),
            })
            .collect(),
        stacked: false,
        y_label: "|F0 − F1| / (F0 + F1) (%)".into(),
        reference: None,
    });
    s.figure(
        format!("{}-fast-gap", runs.exp.name),
        "Difference between the two vCPUs of a gang in fast-core time (0 = equal exposure)",
        gaps,
    );
    for c in 0..runs.exp.cases.len() {
        if let Some(ch) = ops_chart(runs, c) {
            s.figure(
                format!("{}-{}-ops", runs.exp.name, runs.exp.cases[c].name),
                format!(
                    "Co-scheduling operations per second in each statistics interval, {}, seed {}",
                    runs.exp.cases[c].name, runs.exp.seeds[0]
                ),
                ch,
            );
        }
    }
    let all_cases: Vec<usize> = (0..runs.exp.cases.len()).collect();
    if let Some((ch, _)) = cdf_chart(runs, "aash+bcs", &all_cases) {
        s.figure(
            format!("{}-bcs-cdf", runs.exp.name),
            "CDF of the start-time difference between raised siblings and the vCPU that raised them, aash+bcs, all seeds",
            ch,
        );
    }
    // Computed commentary.
    let mut text = String::from("What the mechanisms did: ");
    for (c, case) in runs.exp.cases.iter().enumerate() {
        let m = &ms[c];
        let get = |p: &str| find(m, p);
        let exec = |p: &str| get(p).map(|x| x.exec_all.mean).unwrap_or(0.0);
        let fair = |p: &str| get(p).and_then(|x| x.fairness_pct).map(|f| f.mean).unwrap_or(0.0);
        let spin = |p: &str| get(p).map(|x| x.spin_all.mean).unwrap_or(0.0);
        // The larger of the two gangs' fast-time gaps, and the largest fast share.
        let gap = |p: &str| get(p).map(|x| x.fast.iter().map(|f| f.2.mean).fold(0.0, f64::max)).unwrap_or(0.0);
        let share = |p: &str| get(p).map(|x| x.fast.iter().map(|f| f.1.mean).fold(0.0, f64::max)).unwrap_or(0.0);
        let best = labels.iter().min_by(|a, b| exec(a).total_cmp(&exec(b))).map(|p| p.to_string()).unwrap_or_default();
        let handovers = runs.of(c, "aash+pcs").iter().map(|r| counter(r, "gang_handovers")).sum::<f64>()
            / runs.exp.seeds.len().max(1) as f64;
        let rot = (1.0 - exec("aash+pcs") / exec("aash+pcs-norot").max(1e-9)) * 100.0;
        text.push_str(&format!(
            "{}: a gang runs at the speed of its slowest vCPU, and with one fast core no gang can be all fast, so \
             the makespan moved little (credit {:.2} s, aash {:.2} s, aash+pcs {:.2} s, aash+bcs {:.2} s; fastest \
             {best}). Credit left one vCPU of one gang on the fast core ({:.0} % of that gang's run time; fast-time \
             gap inside it {:.0} %, the two gangs {:.1} % apart, {:.1} s spun, much of it by the fast vCPU waiting at \
             barriers); aash shared the fast core between the gangs (gangs {:.1} % apart, largest gap {:.0} %, {:.1} s \
             spun). Over a whole run AASH's round robin already equalises the vCPUs' fast time; the gang rotation \
             of aash+pcs ({:.0} handovers per run) equalises it within each period{}. ",
            case.name,
            exec("credit"),
            exec("aash"),
            exec("aash+pcs"),
            exec("aash+bcs"),
            share("credit") * 100.0,
            gap("credit"),
            fair("credit"),
            spin("credit"),
            fair("aash"),
            gap("aash"),
            spin("aash"),
            handovers,
            rotation_effect(rot),
        ));
    }
    s.para(text.trim_end().to_string());
    s
}

/// What the gang rotation did to the makespan, `rot` % faster than without it.
fn rotation_effect(rot: f64) -> String {
    if rot.abs() < 0.25 {
        format!(
            ", which made no measurable difference ({rot:+.2} % against aash+pcs without rotation): running part \
             of each barrier phase fast is offset by a cache refill per handover"
        )
    } else if rot > 0.0 {
        format!(
            ", which lets both vCPUs of a gang run part of each barrier phase fast: {rot:.2} % faster than \
             aash+pcs without rotation, despite a cache refill per handover"
        )
    } else {
        format!(
            ", but its cache refill per handover cost more than running part of each barrier phase fast gained: \
             {:.2} % slower than aash+pcs without rotation",
            -rot
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_of_a_few_values() {
        // 4 values: each step at one of them, fractions 1/4 … 1.
        let c = cdf(vec![3.0, 1.0, 2.0, 2.0]);
        assert_eq!(c, vec![(1.0, 0.25), (2.0, 0.5), (2.0, 0.75), (3.0, 1.0)]);
        // 1000 values keep ≤ CDF_POINTS + 1 points, ending at (max, 1).
        let c = cdf((0..1000).map(f64::from).collect());
        assert!(c.len() <= CDF_POINTS + 1);
        assert_eq!(c.last(), Some(&(999.0, 1.0)));
        assert!(cdf(Vec::new()).is_empty());
    }

    #[test]
    fn quantiles() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert_eq!(quantile(&v, 1.0), 5.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}
