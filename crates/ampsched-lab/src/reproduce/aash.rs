//! The AASH study (docs/design/aash.md; docs/design/experiments.md, AASH table): nine experiments,
//! credit against AASH (and, where it isolates a mechanism, AASH with that
//! mechanism off). Every figure and sentence below is computed from the runs.
//!
//! The baseline is credit as the paper's testbed ran it: Xen 3.x/4.0 rules (the `xen40`
//! profile) with the testbed's dom0 in the background (`xen-dom0`, one vCPU per pCPU). A dom0
//! wake-up on a pCPU running a guest vCPU preempts it there and tickles every idle pCPU, which
//! steals the preempted vCPU (`__runq_tickle`, `csched_load_balance`): that is how an idle
//! fast pCPU of the real machine got a guest vCPU back under credit. Without dom0 a guest whose
//! vCPUs never block keeps its creation placement, and the fast pCPU idles once its vCPU is
//! done. dom0 is left out of every per-VM figure here (`vms`, `of_vm`), as in the paper.

use super::{completion_s, row, secs, speedups, EmbeddedFile, Runs, Study};
use crate::report::svg::{BarChart, BarSeries, Chart, LineChart, LineSeries, LineStyle};
use crate::report::{cell, cell_pm, Report, Row, Section, Stat, Table};
use ampsched_sim::results::{DomainResult, RunResult};

/// The study's experiment files, embedded.
pub const FILES: &[EmbeddedFile] = &[
    ("aash-overhead.toml", include_str!("../../../../scenarios/aash/aash-overhead.toml")),
    ("aash-fair.toml", include_str!("../../../../scenarios/aash/aash-fair.toml")),
    ("aash-single-vm.toml", include_str!("../../../../scenarios/aash/aash-single-vm.toml")),
    ("aash-aware.toml", include_str!("../../../../scenarios/aash/aash-aware.toml")),
    ("aash-mixed-guests.toml", include_str!("../../../../scenarios/aash/aash-mixed-guests.toml")),
    ("aash-lowpar-seq.toml", include_str!("../../../../scenarios/aash/aash-lowpar-seq.toml")),
    ("aash-lowpar-par.toml", include_str!("../../../../scenarios/aash/aash-lowpar-par.toml")),
    ("aash-lowpar-both.toml", include_str!("../../../../scenarios/aash/aash-lowpar-both.toml")),
    ("aash-priority.toml", include_str!("../../../../scenarios/aash/aash-priority.toml")),
];

/// `ampsched reproduce aash`.
pub const STUDY: Study = Study {
    name: "aash",
    title: "AASH: an asymmetry-aware scheduler for hypervisors — reproduction",
    files: FILES,
    ledger: include_str!("../../../../scenarios/aash/ledger.toml"),
    metrics: &[
        "completion_s",
        "fast_idle_slow_busy_s",
        "fast_share",
        "max_migrations_per_slice",
        "mean_completion_s",
        "mean_speedup_pct",
        "mean_task_completion_s",
        "migrations",
        "normalised_completion",
        "speedup_pct",
        "stdev_completion_s",
        "task_mean_speedup_pct",
    ],
    analyse,
};

/// The name of the fastest class in a run (`fast` in the study's files).
fn fast_class(r: &RunResult) -> Option<usize> {
    r.classes.iter().position(|c| c == "fast")
}

/// The run's VMs: its domains but a background one (the testbed's dom0), which the paper's
/// figures never count.
fn vms(r: &RunResult) -> impl Iterator<Item = &DomainResult> {
    r.domains.iter().filter(|d| !d.background)
}

/// Whether a task is a VM's (not the background domain's).
fn of_vm(r: &RunResult, t: &ampsched_sim::results::TaskResult) -> bool {
    r.domains.get(t.domain as usize).is_some_and(|d| !d.background)
}

/// Migrations of every VM task of a run (within and across memory domains), summed.
fn vm_migrations(r: &RunResult) -> f64 {
    r.tasks.iter().filter(|t| of_vm(r, t)).map(|t| t.migrations_local + t.migrations_remote).sum::<u64>() as f64
}

/// Share of a domain's CPU time spent on fast CPUs.
fn fast_share(d: &DomainResult, fast: Option<usize>) -> f64 {
    let total = d.cpu_ns.total();
    match fast {
        Some(f) if total > 0 => d.cpu_ns.values[f] as f64 / total as f64,
        _ => 0.0,
    }
}

/// What a subject of an experiment is: a domain, one task of a domain, or the whole run.
#[derive(Clone)]
enum Subject {
    All,
    Domain(String),
    Task { domain: u32, vcpu: u32, label: String },
}

impl Subject {
    fn label(&self) -> String {
        match self {
            Subject::All => "all".into(),
            Subject::Domain(n) => n.clone(),
            Subject::Task { label, .. } => label.clone(),
        }
    }
    fn completion(&self, r: &RunResult) -> f64 {
        match self {
            Subject::All => secs(r.end_ns),
            Subject::Domain(n) => completion_s(r, n),
            Subject::Task { domain, vcpu, .. } => {
                let t = r.tasks.iter().find(|t| t.domain == *domain && t.vcpu == *vcpu).expect("task");
                secs(t.completion_ns.unwrap_or(r.end_ns))
            }
        }
    }
    fn fast_share(&self, r: &RunResult) -> f64 {
        let f = fast_class(r);
        match self {
            Subject::All => {
                let (mut fast, mut all) = (0u64, 0u64);
                for d in vms(r) {
                    all += d.cpu_ns.total();
                    fast += f.map(|i| d.cpu_ns.values[i]).unwrap_or(0);
                }
                if all > 0 {
                    fast as f64 / all as f64
                } else {
                    0.0
                }
            }
            Subject::Domain(n) => fast_share(super::domain(r, n), f),
            Subject::Task { domain, vcpu, .. } => {
                let t = r.tasks.iter().find(|t| t.domain == *domain && t.vcpu == *vcpu).expect("task");
                let total = t.cpu_ns.total();
                match f {
                    Some(i) if total > 0 => t.cpu_ns.values[i] as f64 / total as f64,
                    _ => 0.0,
                }
            }
        }
    }
    /// Migrations per vCPU per timeslice of run time (`slice_ns`): a task's own count scaled to
    /// its CPU time; a domain's summed over its vCPUs and scaled to their summed CPU time (the
    /// mean per vCPU); the whole run's is its busiest vCPU's (`max_migrations_per_slice`).
    fn migrations_per_slice(&self, r: &RunResult, slice_ns: f64) -> f64 {
        let per = |f: &dyn Fn(&ampsched_sim::results::TaskResult) -> bool| {
            let (m, ns) =
                r.tasks.iter().filter(|t| f(t)).fold((0u64, 0u64), |a, t| {
                    (a.0 + t.migrations_local + t.migrations_remote, a.1 + t.cpu_ns.total())
                });
            if ns > 0 {
                m as f64 * slice_ns / ns as f64
            } else {
                0.0
            }
        };
        match self {
            Subject::All => max_migrations_per_slice(r, slice_ns),
            Subject::Domain(n) => {
                let id = super::domain(r, n).id;
                per(&|t| t.domain == id)
            }
            Subject::Task { domain, vcpu, .. } => per(&|t| t.domain == *domain && t.vcpu == *vcpu),
        }
    }
    /// (blocked s, remote migrations) of the subject in one run.
    fn blocked_remote(&self, r: &RunResult) -> (f64, f64) {
        let sum = |f: &dyn Fn(&ampsched_sim::results::TaskResult) -> bool| {
            let ts = r.tasks.iter().filter(|t| f(t));
            ts.fold((0.0, 0.0), |a, t| (a.0 + secs(t.blocked_ns), a.1 + t.migrations_remote as f64))
        };
        match self {
            Subject::All => sum(&|t| of_vm(r, t)),
            Subject::Domain(n) => {
                let id = super::domain(r, n).id;
                sum(&|t| t.domain == id)
            }
            Subject::Task { domain, vcpu, .. } => sum(&|t| t.domain == *domain && t.vcpu == *vcpu),
        }
    }
    fn migrations(&self, r: &RunResult) -> f64 {
        match self {
            Subject::All => vm_migrations(r),
            Subject::Domain(n) => {
                let d = super::domain(r, n);
                (d.migrations_local + d.migrations_remote) as f64
            }
            Subject::Task { domain, vcpu, .. } => {
                let t = r.tasks.iter().find(|t| t.domain == *domain && t.vcpu == *vcpu).expect("task");
                (t.migrations_local + t.migrations_remote) as f64
            }
        }
    }
}

/// The subjects of case `c`: each domain, or each task when a domain runs different programs per vCPU.
fn subjects(runs: &Runs, c: usize, per_task: bool) -> Vec<Subject> {
    let sc = &runs.exp.cases[c].scenario;
    let mut out = Vec::new();
    for (di, d) in sc.spec.domains.iter().enumerate() {
        if d.background == Some(true) {
            continue;
        }
        match (&d.tasks, per_task) {
            (Some(ts), true) => {
                for (v, t) in ts.iter().enumerate() {
                    let model = t.model.clone().unwrap_or_else(|| "program".into());
                    out.push(Subject::Task {
                        domain: di as u32,
                        vcpu: v as u32,
                        label: format!("{model} ({}.v{v})", d.name),
                    });
                }
            }
            _ => out.push(Subject::Domain(d.name.clone())),
        }
    }
    out
}

/// The timeslice (ns) policy `label` runs case `c` with: its `tslice_ms`, else the scenario
/// dispatcher's, else credit's default of 30 ms.
fn tslice_ns(runs: &Runs, c: usize, label: &str) -> f64 {
    let case = &runs.exp.cases[c];
    let own = case.compare.iter().find(|p| p.label == label).and_then(|p| p.dispatcher.as_ref());
    let ms = [own, Some(&case.scenario.dispatcher)]
        .into_iter()
        .flatten()
        .find_map(|d| match d.params.get("tslice_ms") {
            Some(ampsched_model::spec::ParamValue::Int(i)) => Some(*i as f64),
            Some(ampsched_model::spec::ParamValue::Float(f)) => Some(*f),
            _ => None,
        })
        .unwrap_or(30.0);
    ms * 1e6
}

/// The largest number of migrations per timeslice of run time of any vCPU that ran at least
/// one slice: AASH moves a vCPU between classes at most about once per accounting period
/// (aash.md: grants change at accounting and expiry), so values well above 1 mean churn.
fn max_migrations_per_slice(r: &RunResult, slice_ns: f64) -> f64 {
    r.tasks
        .iter()
        .filter(|t| of_vm(r, t) && t.cpu_ns.total() as f64 >= slice_ns)
        .map(|t| (t.migrations_local + t.migrations_remote) as f64 * slice_ns / t.cpu_ns.total() as f64)
        .fold(0.0, f64::max)
}

/// The mean of the domains' completion times in one run (s): what the AASH paper compares
/// when it says the mean completion of its four identical VMs is about the same under both
/// schedulers, as opposed to the run's end (the slowest VM).
fn mean_completion_s(r: &RunResult) -> f64 {
    Stat::of(&vms(r).map(|d| completion_s(r, &d.name)).collect::<Vec<_>>()).mean
}

/// The mean of the VMs' tasks' completion times in one run (s): with one program per task (the
/// aware guest's four programs, the single VM's N copies of a sequential program) the
/// workload's mean program completion, whose inverse is its throughput. The AASH paper's
/// "mean speedup" of an aware set averages its programs (its memory-bound programs, the last
/// to finish, lose under AASH while the set gains 11-16 %, so it is not the run's end), and
/// its N copies "≈ 0" is the throughput AASH cannot raise when every vCPU is always busy:
/// fair sharing only evens out which copy gets the fast core, which moves the run's end (the
/// last copy) but not the mean.
fn mean_task_completion_s(r: &RunResult) -> f64 {
    let done: Vec<f64> =
        r.tasks.iter().filter(|t| of_vm(r, t)).map(|t| secs(t.completion_ns.unwrap_or(r.end_ns))).collect();
    Stat::of(&done).mean
}

/// Per-subject, per-policy metrics of one case.
struct CaseStats {
    subject: String,
    policy: String,
    completion: Stat,
    speedup: Option<Stat>,
    fast_share: Stat,
    migrations: Stat,
    /// Migrations per vCPU per timeslice of run time (the run's busiest vCPU for `all`).
    per_slice: Stat,
}

/// Rows and stats of every subject of case `c` (plus `all`), for every policy.
fn case_stats(runs: &Runs, c: usize, per_task: bool, rows: &mut Vec<Row>) -> Vec<CaseStats> {
    let exp = &runs.exp;
    let case = exp.cases[c].name.clone();
    let mut subs = subjects(runs, c, per_task);
    subs.push(Subject::All);
    let base = runs.of(c, &exp.baseline);
    let mut out = Vec::new();
    for s in &subs {
        let label = s.label();
        let tb: Vec<f64> = base.iter().map(|r| s.completion(r)).collect();
        for p in runs.labels() {
            let rs = runs.of(c, p);
            let t: Vec<f64> = rs.iter().map(|r| s.completion(r)).collect();
            let fs: Vec<f64> = rs.iter().map(|r| s.fast_share(r)).collect();
            let mg: Vec<f64> = rs.iter().map(|r| s.migrations(r)).collect();
            let slice = tslice_ns(runs, c, p);
            let mps: Vec<f64> = rs.iter().map(|r| s.migrations_per_slice(r, slice)).collect();
            rows.push(row(&exp.name, &case, &label, p, "completion_s", "s", &t));
            rows.push(row(&exp.name, &case, &label, p, "fast_share", "fraction", &fs));
            rows.push(row(&exp.name, &case, &label, p, "migrations", "count", &mg));
            let speedup = if p != exp.baseline {
                let sp = speedups(&tb, &t);
                rows.push(row(&exp.name, &case, &label, p, "speedup_pct", "%", &sp));
                Some(Stat::of(&sp))
            } else {
                None
            };
            if matches!(s, Subject::All) {
                // Fairness: the stdev of the domains' completion times within a run, then over runs.
                let sd: Vec<f64> = rs
                    .iter()
                    .map(|r| Stat::of(&vms(r).map(|d| completion_s(r, &d.name)).collect::<Vec<_>>()).stdev)
                    .collect();
                rows.push(row(&exp.name, &case, &label, p, "stdev_completion_s", "s", &sd));
                // The papers' "mean completion": the domains' completion times averaged within a
                // run (the `all` completion above is the run's end, the last domain's).
                let mean_of = |r: &RunResult| mean_completion_s(r);
                let mc: Vec<f64> = rs.iter().map(mean_of).collect();
                rows.push(row(&exp.name, &case, &label, p, "mean_completion_s", "s", &mc));
                if p != exp.baseline {
                    let mb: Vec<f64> = base.iter().map(mean_of).collect();
                    rows.push(row(&exp.name, &case, &label, p, "mean_speedup_pct", "%", &speedups(&mb, &mc)));
                }
                let tc: Vec<f64> = rs.iter().map(mean_task_completion_s).collect();
                rows.push(row(&exp.name, &case, &label, p, "mean_task_completion_s", "s", &tc));
                if p != exp.baseline {
                    let tb: Vec<f64> = base.iter().map(mean_task_completion_s).collect();
                    rows.push(row(&exp.name, &case, &label, p, "task_mean_speedup_pct", "%", &speedups(&tb, &tc)));
                }
                let fisb: Vec<f64> = rs.iter().map(|r| secs(r.fast_idle_slow_busy_ns)).collect();
                rows.push(row(&exp.name, &case, &label, p, "fast_idle_slow_busy_s", "s", &fisb));
                rows.push(row(&exp.name, &case, &label, p, "max_migrations_per_slice", "count", &mps));
            }
            out.push(CaseStats {
                subject: label.clone(),
                policy: p.to_string(),
                completion: Stat::of(&t),
                speedup,
                fast_share: Stat::of(&fs),
                migrations: Stat::of(&mg),
                per_slice: Stat::of(&mps),
            });
        }
    }
    out
}

fn stats_table(caption: &str, case: Option<&str>, st: &[CaseStats]) -> Table {
    let mut header = vec![];
    if case.is_some() {
        header.push("case".to_string());
    }
    header.extend(
        [
            "subject",
            "policy",
            "completion (s)",
            "speedup vs baseline (%)",
            "fast-CPU share",
            "migrations",
            "migrations per vCPU per slice",
        ]
        .map(String::from),
    );
    let rows = st
        .iter()
        .map(|s| {
            let mut r = vec![];
            if let Some(c) = case {
                r.push(c.to_string());
            }
            r.extend([
                s.subject.clone(),
                s.policy.clone(),
                cell_pm(&s.completion, 2),
                s.speedup
                    .map(|x| format!("{} [{}, {}]", cell(x.mean, 1), cell(x.min, 1), cell(x.max, 1)))
                    .unwrap_or("–".into()),
                format!("{:.1} %", s.fast_share.mean * 100.0),
                cell(s.migrations.mean, 0),
                cell(s.per_slice.mean, 2),
            ]);
            r
        })
        .collect();
    Table { caption: caption.into(), header, rows }
}

fn find<'a>(st: &'a [CaseStats], subject: &str, policy: &str) -> &'a CaseStats {
    st.iter().find(|s| s.subject == subject && s.policy == policy).expect("stats of a subject and policy")
}

fn analyse(all: &[Runs]) -> Report {
    let mut rep = Report {
        intro: vec![
            "Each section is one row of the AASH table in docs/design/experiments.md: the setup, a table of mean ± stdev over seeds \
             (speedup: mean [min, max] of per-seed speedups against the baseline on the same seed), the figures the \
             study draws, and a paragraph computed from the metrics. Workload models come from models/library.toml \
             and are not tuned to any result; summary.json holds every figure."
                .into(),
        ],
        ..Report::default()
    };
    for runs in all {
        let sec = match runs.exp.name.as_str() {
            "aash-overhead" => overhead(runs, &mut rep.rows),
            "aash-fair" => fair(runs, &mut rep.rows),
            n if n.starts_with("aash-lowpar") || n == "aash-priority" => timeseries_exp(runs, &mut rep.rows),
            "aash-aware" | "aash-mixed-guests" => per_program(runs, &mut rep.rows, true),
            _ => per_program(runs, &mut rep.rows, false),
        };
        rep.sections.push(sec);
    }
    rep
}

/// aash-overhead: normalised completion per program and against the timeslice.
fn overhead(runs: &Runs, rows: &mut Vec<Row>) -> Section {
    let mut s = super::section(runs);
    let mut table_rows = Vec::new();
    // (case, tslice_ms, program, normalised completion per seed)
    let mut points: Vec<(String, f64, String, Stat, Stat)> = Vec::new();
    for (c, case) in runs.exp.cases.iter().enumerate() {
        let st = case_stats(runs, c, false, rows);
        let base: Vec<f64> = runs.of(c, "credit").iter().map(|r| secs(r.end_ns)).collect();
        let aash: Vec<f64> = runs.of(c, "aash").iter().map(|r| secs(r.end_ns)).collect();
        let norm: Vec<f64> = base.iter().zip(&aash).map(|(b, a)| a / b).collect();
        rows.push(row(&runs.exp.name, &case.name, "all", "aash", "normalised_completion", "ratio", &norm));
        let (program, tslice) = match case.name.split_once('@') {
            Some((p, t)) => (p.to_string(), t.trim_end_matches("ms").parse().unwrap_or(30.0)),
            None => (case.name.clone(), 30.0),
        };
        let mig = find(&st, "all", "aash").migrations;
        points.push((case.name.clone(), tslice, program, Stat::of(&norm), mig));
        table_rows.push(vec![
            case.name.clone(),
            cell_pm(&find(&st, "all", "credit").completion, 2),
            cell_pm(&find(&st, "all", "aash").completion, 2),
            format!("{:.4}", Stat::of(&norm).mean),
            cell(find(&st, "all", "credit").migrations.mean, 0),
            cell(mig.mean, 0),
        ]);
    }
    s.table(Table {
        caption: "Completion of the 8 copies (makespan), normalised to credit on the same seed".into(),
        header: ["case", "credit (s)", "aash (s)", "aash / credit", "migrations credit", "migrations aash"]
            .map(String::from)
            .to_vec(),
        rows: table_rows,
    });
    let at30: Vec<&(String, f64, String, Stat, Stat)> = points.iter().filter(|p| !p.0.contains('@')).collect();
    s.figure(
        "aash-overhead-normalised",
        "Completion time under AASH normalised to credit (1.0 = no overhead), 30 ms timeslice; whiskers: min/max over seeds",
        Chart::Bar(BarChart {
            title: "Overhead: normalised completion (all cores slow)".into(),
            categories: at30.iter().map(|p| p.0.clone()).collect(),
            series: vec![BarSeries {
                name: "aash / credit".into(),
                values: at30.iter().map(|p| p.3.mean).collect(),
                err: Some(at30.iter().map(|p| (p.3.min, p.3.max)).collect()),
            }],
            stacked: false,
            y_label: "normalised completion".into(),
            reference: Some(1.0),
        }),
    );
    let mut progs: Vec<String> = points.iter().filter(|p| p.0.contains('@')).map(|p| p.2.clone()).collect();
    progs.dedup();
    let series: Vec<LineSeries> = progs
        .iter()
        .map(|pr| {
            let mut pts: Vec<(f64, f64)> = points.iter().filter(|p| &p.2 == pr).map(|p| (p.1, p.3.mean)).collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            LineSeries { name: pr.clone(), points: pts }
        })
        .collect();
    s.figure(
        "aash-overhead-timeslice",
        "Normalised completion against the timeslice (= accounting period, the rotation period)",
        Chart::Line(LineChart {
            title: "Overhead against the timeslice".into(),
            series: series.clone(),
            style: LineStyle::Lines,
            x_label: "timeslice (ms, log scale)".into(),
            y_label: "aash / credit".into(),
            y_from_zero: false,
            log_x: true,
        }),
    );
    // Commentary.
    let worst = at30.iter().max_by(|a, b| a.3.mean.total_cmp(&b.3.mean)).expect("cases");
    let best = at30.iter().min_by(|a, b| a.3.mean.total_cmp(&b.3.mean)).expect("cases");
    let mut text = format!(
        "What the mechanisms did: with no real fast core, AASH's rotation only costs. At a 30 ms timeslice the \
         normalised completion ranged from {:.4} ({}) to {:.4} ({}), i.e. an overhead of {:.2} % at most; AASH made \
         {:.0} migrations on average in {} against {:.0} under credit.",
        best.3.mean,
        best.0,
        worst.3.mean,
        worst.0,
        (worst.3.mean - 1.0) * 100.0,
        worst.4.mean,
        worst.0,
        runs.of(runs.exp.cases.iter().position(|c| c.name == worst.0).unwrap_or(0), "credit")
            .iter()
            .map(vm_migrations)
            .sum::<f64>()
            / runs.exp.seeds.len() as f64,
    );
    for sr in &series {
        if let (Some(first), Some(last)) = (sr.points.first(), sr.points.last()) {
            text.push_str(&format!(
                " For {}, shortening the timeslice from {:.0} to {:.0} ms moves the ratio from {:.4} to {:.4}{}.",
                sr.name,
                last.0,
                first.0,
                last.1,
                first.1,
                if first.1 > last.1 { ": more frequent rotation means more refills" } else { "" }
            ));
        }
    }
    s.para(text);
    s
}

/// aash-fair: stacked per-VM completion, stdev across VMs.
fn fair(runs: &Runs, rows: &mut Vec<Row>) -> Section {
    let mut s = super::section(runs);
    let labels = runs.labels();
    let mut all_st = Vec::new();
    let mut cats = Vec::new();
    let vms: Vec<String> = runs.exp.cases[0]
        .scenario
        .spec
        .domains
        .iter()
        .filter(|d| d.background != Some(true))
        .map(|d| d.name.clone())
        .collect();
    let mut stacked: Vec<Vec<f64>> = vec![Vec::new(); vms.len()];
    let mut sd_series: Vec<Vec<f64>> = vec![Vec::new(); labels.len()];
    let mut sd_err: Vec<Vec<(f64, f64)>> = vec![Vec::new(); labels.len()];
    let mut share_range = Vec::new();
    for (c, case) in runs.exp.cases.iter().enumerate() {
        let st = case_stats(runs, c, false, rows);
        for (pi, p) in labels.iter().enumerate() {
            cats.push(format!("{} {}", case.name, p));
            for (v, vm) in vms.iter().enumerate() {
                stacked[v].push(find(&st, vm, p).completion.mean);
            }
            let sd = rows
                .iter()
                .rev()
                .find(|r| r.case == case.name && r.policy == *p && r.metric == "stdev_completion_s")
                .expect("stdev row");
            sd_series[pi].push(sd.mean);
            sd_err[pi].push((sd.min, sd.max));
            let shares: Vec<f64> = vms.iter().map(|vm| find(&st, vm, p).fast_share.mean).collect();
            share_range.push((
                case.name.clone(),
                p.to_string(),
                shares.iter().copied().fold(f64::INFINITY, f64::min),
                shares.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                sd.mean,
            ));
        }
        all_st.push((case.name.clone(), st));
    }
    let mut t =
        Table { caption: "Per-VM completion, fast-CPU share and migrations".into(), header: vec![], rows: vec![] };
    for (case, st) in &all_st {
        let sub = stats_table("", Some(case), st);
        t.header = sub.header;
        t.rows.extend(sub.rows);
    }
    s.table(t);
    s.figure(
        "aash-fair-stacked",
        "Per-VM completion times stacked, per program and policy: equal segments mean a fair share of the fast core",
        Chart::Bar(BarChart {
            title: "Per-VM completion (stacked)".into(),
            categories: cats,
            series: vms
                .iter()
                .zip(stacked)
                .map(|(vm, v)| BarSeries { name: vm.clone(), values: v, err: None })
                .collect(),
            stacked: true,
            y_label: "completion (s), summed over VMs".into(),
            reference: None,
        }),
    );
    s.figure(
        "aash-fair-stdev",
        "Standard deviation of the four VMs' completion times (lower is fairer); whiskers: min/max over seeds",
        Chart::Bar(BarChart {
            title: "Fairness: stdev of completion across VMs".into(),
            categories: runs.exp.cases.iter().map(|c| c.name.clone()).collect(),
            series: labels
                .iter()
                .enumerate()
                .map(|(i, p)| BarSeries {
                    name: p.to_string(),
                    values: sd_series[i].clone(),
                    err: Some(sd_err[i].clone()),
                })
                .collect(),
            stacked: false,
            y_label: "stdev of completion (s)".into(),
            reference: None,
        }),
    );
    let mean_sd = |p: &str| Stat::of(&share_range.iter().filter(|r| r.1 == p).map(|r| r.4).collect::<Vec<_>>()).mean;
    let spread = |p: &str| {
        let v: Vec<f64> = share_range.iter().filter(|r| r.1 == p).map(|r| (r.3 - r.2) * 100.0).collect();
        Stat::of(&v).mean
    };
    let b = runs.exp.baseline.as_str();
    s.para(format!(
        "What the mechanisms did: the fast core's time was split between the four VMs with a spread (largest minus \
         smallest fast-CPU share) of {:.1} percentage points on average under {b} and {:.1} under aash; the stdev \
         of the VMs' completion times averaged {:.2} s under {b} and {:.2} s under aash ({}).",
        spread(b),
        spread("aash"),
        mean_sd(b),
        mean_sd("aash"),
        if mean_sd("aash") < mean_sd(b) {
            "round-robin fast credits even out who gets the fast core"
        } else {
            "the rotation did not make the VMs' completion times closer here"
        }
    ));
    s
}

/// Experiments reported per program (or per VM): speedup bars and a table.
fn per_program(runs: &Runs, rows: &mut Vec<Row>, per_task: bool) -> Section {
    let mut s = super::section(runs);
    let labels = runs.labels();
    let others: Vec<&str> = labels.iter().copied().filter(|l| *l != runs.exp.baseline).collect();
    let mut cats = Vec::new();
    let mut vals: Vec<Vec<f64>> = vec![Vec::new(); others.len()];
    let mut errs: Vec<Vec<(f64, f64)>> = vec![Vec::new(); others.len()];
    let mut t = Table { caption: "Completion, speedup, fast-CPU share and migrations".into(), ..Table::default() };
    let multi = runs.exp.cases.len() > 1;
    let mut best: Option<(String, f64)> = None;
    let mut worst: Option<(String, f64)> = None;
    let mut shares = Vec::new();
    let mut slower = Vec::new();
    for (c, case) in runs.exp.cases.iter().enumerate() {
        let st = case_stats(runs, c, per_task, rows);
        let last = *others.last().expect("a compared policy");
        for subj in subjects(runs, c, per_task) {
            let sp = find(&st, &subj.label(), last).speedup.expect("speedup").mean;
            if sp < -1.0 {
                let avg = |p: &str| {
                    let rs = runs.of(c, p);
                    let n = rs.len() as f64;
                    let (b, rm) =
                        rs.iter().map(|r| subj.blocked_remote(r)).fold((0.0, 0.0), |a, x| (a.0 + x.0, a.1 + x.1));
                    (b / n, rm / n, Stat::of(&rs.iter().map(|r| subj.migrations(r)).collect::<Vec<_>>()).mean)
                };
                let (bb, _, mb) = avg(&runs.exp.baseline);
                let (ba, ra, ma) = avg(last);
                let name = if multi { format!("{} in {}", subj.label(), case.name) } else { subj.label() };
                slower.push(format!(
                    "{name} ({sp:.1} %): {ma:.0} migrations per run under {last} ({ra:.0} across memory domains, \
                     each a refill of L2 + LLC from DRAM) against {mb:.0} under {}, and {ba:.1} s blocked at \
                     synchronisation against {bb:.1} s{}",
                    runs.exp.baseline,
                    if ba > bb * 1.1 { " (threads waiting at barriers for migrated, refilling siblings)" } else { "" }
                ));
            }
        }
        let sub = stats_table("", Some(&case.name), &st);
        t.header = sub.header;
        t.rows.extend(sub.rows);
        for subj in subjects(runs, c, per_task).iter().map(|s| s.label()).chain(std::iter::once("all".to_string())) {
            if subj == "all" && subjects(runs, c, per_task).len() == 1 {
                continue;
            }
            cats.push(if multi { format!("{} {}", case.name, subj) } else { subj.clone() });
            for (i, p) in others.iter().enumerate() {
                let sp = find(&st, &subj, p).speedup.expect("speedup");
                vals[i].push(sp.mean);
                errs[i].push((sp.min, sp.max));
            }
            if subj != "all" {
                let last = others.last().expect("a compared policy");
                let sp = find(&st, &subj, last).speedup.expect("speedup").mean;
                let name = if multi { format!("{} in {}", subj, case.name) } else { subj.clone() };
                if best.as_ref().is_none_or(|b| sp > b.1) {
                    best = Some((name.clone(), sp));
                }
                if worst.as_ref().is_none_or(|w| sp < w.1) {
                    worst = Some((name.clone(), sp));
                }
                shares.push((
                    name,
                    find(&st, &subj, &runs.exp.baseline).fast_share.mean,
                    find(&st, &subj, last).fast_share.mean,
                ));
            }
        }
    }
    s.table(t);
    s.figure(
        format!("{}-speedup", runs.exp.name),
        format!("Speedup over {} (%, same seed); whiskers: min/max over seeds", runs.exp.baseline),
        Chart::Bar(BarChart {
            title: format!("{}: speedup over {}", runs.exp.name, runs.exp.baseline),
            categories: cats,
            series: others
                .iter()
                .enumerate()
                .map(|(i, p)| BarSeries { name: p.to_string(), values: vals[i].clone(), err: Some(errs[i].clone()) })
                .collect(),
            stacked: false,
            y_label: "speedup (%)".into(),
            reference: None,
        }),
    );
    let last = others.last().copied().unwrap_or("aash");
    let mut text = String::from("What the mechanisms did: ");
    if let (Some(b), Some(w)) = (best, worst) {
        text.push_str(&format!(
            "under {last} the largest speedup was {:.1} % ({}) and the smallest {:.1} % ({}). ",
            b.1, b.0, w.1, w.0
        ));
    }
    let moved: Vec<String> =
        shares.iter().map(|(n, a, b)| format!("{n} {:.0} % → {:.0} %", a * 100.0, b * 100.0)).collect();
    text.push_str(&format!(
        "Fast-CPU share of each subject's run time, {} → {last}: {}.",
        runs.exp.baseline,
        moved.join("; ")
    ));
    if !slower.is_empty() {
        text.push_str(&format!(" Where {last} was slower: {}.", slower.join("; ")));
    }
    s.para(text);
    s
}

/// Low-parallelism and priority experiments: speedups plus time series.
fn timeseries_exp(runs: &Runs, rows: &mut Vec<Row>) -> Section {
    let mut s = per_program(runs, rows, false);
    let labels = runs.labels();
    let show: Vec<&str> = [runs.exp.baseline.as_str(), labels.last().copied().unwrap_or("aash")].to_vec();
    for (c, case) in runs.exp.cases.iter().enumerate() {
        let tag = if runs.exp.cases.len() > 1 { format!(" ({})", case.name) } else { String::new() };
        let id =
            if runs.exp.cases.len() > 1 { format!("{}-{}", runs.exp.name, case.name) } else { runs.exp.name.clone() };
        let mut active = Vec::new();
        let mut fast = Vec::new();
        let mut migr = Vec::new();
        for p in &show {
            let r = &runs.of(c, p)[0];
            let f = fast_class(r);
            let ivl = secs(r.stats_interval_ns);
            for d in vms(r) {
                let name = format!("{} / {p}", d.name);
                active.push(LineSeries {
                    name: name.clone(),
                    points: d.series.iter().map(|pt| (secs(pt.t_ns), pt.active_avg)).collect(),
                });
                fast.push(LineSeries {
                    name: name.clone(),
                    points: d
                        .series
                        .iter()
                        .map(|pt| (secs(pt.t_ns), f.map(|i| secs(pt.class_ns[i])).unwrap_or(0.0) / ivl))
                        .collect(),
                });
                migr.push(LineSeries {
                    name,
                    points: d.series.iter().map(|pt| (secs(pt.t_ns), pt.migrations as f64)).collect(),
                });
            }
        }
        let seed = runs.exp.seeds[0];
        for (kind, series, y, what) in [
            ("active", active, "active vCPUs (time average)", "Active vCPUs per VM"),
            ("fast", fast, "fast-CPU time / interval", "Fast-CPU time per VM"),
            ("migrations", migr, "migrations per interval", "Migrations per VM"),
        ] {
            s.figure(
                format!("{id}-{kind}"),
                format!("{what} per statistics interval, seed {seed}{tag}"),
                Chart::Line(LineChart {
                    title: format!("{what}{tag}"),
                    series,
                    style: LineStyle::Steps,
                    x_label: "time (s)".into(),
                    y_label: y.into(),
                    y_from_zero: true,
                    log_x: false,
                }),
            );
        }
    }
    // Which VM held the fast core while another had a single active vCPU.
    let last = labels.last().copied().unwrap_or("aash");
    let mut text = String::new();
    for (c, case) in runs.exp.cases.iter().enumerate() {
        let sh = |p: &str| -> Vec<String> {
            let rs = runs.of(c, p);
            let f = fast_class(&rs[0]);
            vms(&rs[0])
                .map(|d| {
                    let v: Vec<f64> = rs.iter().map(|r| fast_share(super::domain(r, &d.name), f)).collect();
                    let fast_s: Vec<f64> = rs
                        .iter()
                        .map(|r| f.map(|i| secs(super::domain(r, &d.name).cpu_ns.values[i])).unwrap_or(0.0))
                        .collect();
                    format!(
                        "{} {:.1} s ({:.0} % of its run time)",
                        d.name,
                        Stat::of(&fast_s).mean,
                        Stat::of(&v).mean * 100.0
                    )
                })
                .collect()
        };
        text.push_str(&format!(
            "{}Fast-CPU time per VM under {}: {}; under {last}: {}. ",
            if runs.exp.cases.len() > 1 { format!("{}: ", case.name) } else { String::new() },
            runs.exp.baseline,
            sh(&runs.exp.baseline).join(", "),
            sh(last).join(", ")
        ));
    }
    s.para(format!("Time series: {text}"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ampsched_sim::library::Library;
    use ampsched_sim::scenario::Scenario;
    use ampsched_sim::Sim;

    /// One fast core (speed 2) and one slow core (speed 1) under credit, two 1-vCPU VMs `a`
    /// (pinned to the fast core) and `b` (the slow one) of 100 ms of work each, `extra`
    /// domains before them; run with seed 1.
    fn two_pinned_vms(extra: &str) -> RunResult {
        let dom = |n: &str, cpu: u32| {
            format!(
                "[[domain]]\nname = \"{n}\"\nvcpus = 1\naffinity = \"{cpu}\"\n\
                 workload = {{ program = [{{ compute = {{ ms = 100 }} }}] }}\n"
            )
        };
        let text = format!(
            "[machine]\nclasses = [{{ name = \"fast\", speed = 2.0 }}, {{ name = \"slow\", speed = 1.0 }}]\n\
             cpus = [{{ class = \"fast\", count = 1 }}, {{ class = \"slow\", count = 1 }}]\n\
             [dispatcher]\nname = \"credit\"\n{extra}{}{}",
            dom("a", 0),
            dom("b", 1)
        );
        let sc = Scenario::parse(&text, "t.toml", "t", &Library::builtin()).unwrap();
        Sim::new(sc.config(1, None, None).unwrap()).run()
    }

    #[test]
    fn mean_task_completion_averages_the_vms_programs_and_leaves_out_the_background() {
        // Worked example: one fast core (speed 2) and one slow core (speed 1); two 1-vCPU VMs
        // each run a 100 ms program, a pinned to the fast core (done at 50 ms), b to the slow
        // one (100 ms), beside a background domain on the slow core that wakes every 100 ms
        // for 20 µs and never finishes (model xen-dom0). The programs' mean completion is
        // (50 + 100) / 2 = 75 ms, the background's task (unfinished: it would count as the
        // run's end) left out.
        let r = two_pinned_vms(
            "[[domain]]\nname = \"dom0\"\nvcpus = 1\naffinity = \"1\"\nbackground = true\n\
             workload = { model = \"xen-dom0\" }\n",
        );
        assert_eq!(r.tasks.iter().filter(|t| of_vm(&r, t)).count(), 2);
        assert!((mean_task_completion_s(&r) - 0.075).abs() < 1e-3, "{}", mean_task_completion_s(&r));
    }

    #[test]
    fn mean_completion_averages_the_vms_where_the_run_end_takes_the_last() {
        // Worked example: one fast core (speed 2) and one slow core (speed 1), two 1-vCPU VMs of
        // 100 ms of work each, pinned one per core, no noise: VM a finishes at 50 ms, VM b at
        // 100 ms. The run ends at 100 ms (the slowest VM); the mean completion is
        // (50 + 100) / 2 = 75 ms.
        let r = two_pinned_vms("");
        let mut done: Vec<f64> = r.domains.iter().map(|d| completion_s(&r, &d.name)).collect();
        done.sort_by(f64::total_cmp);
        assert!((done[0] - 0.050).abs() < 1e-3 && (done[1] - 0.100).abs() < 1e-3, "{done:?}");
        assert!((secs(r.end_ns) - 0.100).abs() < 1e-3);
        assert!((mean_completion_s(&r) - 0.075).abs() < 1e-3, "{}", mean_completion_s(&r));
    }
}
