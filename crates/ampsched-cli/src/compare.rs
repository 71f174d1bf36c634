//! What `ampsched sim` prints for several runs: one table of means over the
//! seeds (± the sample standard deviation where the seeds differ) instead of
//! one table per seed, and, with `--compare PLACER` (or `ampsched demo`), the
//! scenario's own policies and the same runs with another placer side by
//! side, with two lines saying what changed most.
//!
//! Fairness is Jain's index (Jain, Chiu and Hawe, DEC-TR-301, 1984:
//! J = (Σx)² / (n·Σx²), 1 when all equal, 1/n when one gets everything) of
//! the vCPUs' fast-CPU shares (fast-class run time / run time): AASH's goal
//! is that every vCPU gets the same share of the fast cores (Bao et al.).

use ampsched_sim::RunResult;
use std::fmt::Write;

/// Mean and sample standard deviation (0 for one value).
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// `mean` to `dp` places, with `± sd` when the seeds differ at that precision.
fn show(xs: &[f64], dp: usize) -> String {
    if xs.is_empty() {
        return "-".into();
    }
    let (m, sd) = mean_sd(xs);
    if format!("{sd:.dp$}").trim_start_matches(['0', '.']).is_empty() {
        format!("{m:.dp$}")
    } else {
        format!("{m:.dp$} ± {sd:.dp$}")
    }
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Completion times (s) of domain `d` over the runs; empty when a run did not finish it.
fn completion(runs: &[RunResult], d: usize) -> Vec<f64> {
    let v: Vec<f64> = runs.iter().filter_map(|r| r.domains[d].completion_ns.map(secs)).collect();
    if v.len() == runs.len() {
        v
    } else {
        Vec::new()
    }
}

/// Fast-class share (%) of domain `d`'s run time over the runs.
fn fast_share(runs: &[RunResult], d: usize, fast: &str) -> Vec<f64> {
    runs.iter()
        .map(|r| {
            let c = &r.domains[d].cpu_ns;
            100.0 * c.get(fast) as f64 / c.total().max(1) as f64
        })
        .collect()
}

/// Jain's index of the fast shares of the vCPUs that ran, per run.
fn jain(runs: &[RunResult], fast: &str) -> Vec<f64> {
    runs.iter()
        .map(|r| {
            let x: Vec<f64> = r
                .tasks
                .iter()
                .filter(|t| t.cpu_ns.total() > 0)
                .map(|t| t.cpu_ns.get(fast) as f64 / t.cpu_ns.total() as f64)
                .collect();
            jain_index(&x)
        })
        .collect()
}

/// Jain's index of `x`: (Σx)² / (n·Σx²); 1 when every value is 0.
fn jain_index(x: &[f64]) -> f64 {
    let (s, s2) = (x.iter().sum::<f64>(), x.iter().map(|v| v * v).sum::<f64>());
    if s2 == 0.0 {
        1.0
    } else {
        s * s / (x.len() as f64 * s2)
    }
}

fn seeds(runs: &[RunResult]) -> String {
    match runs {
        [one] => format!("seed {}", one.seed),
        [first, .., last] => format!("{} seeds {}-{}", runs.len(), first.seed, last.seed),
        [] => "no runs".into(),
    }
}

/// One table for several runs of one configuration: means over the seeds.
pub fn summary(runs: &[RunResult]) -> String {
    let r0 = &runs[0];
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} — dispatcher {}, placer {}, {} (mean ± sd where the seeds differ)",
        r0.scenario,
        r0.dispatcher,
        r0.placer,
        seeds(runs)
    );
    let mut head = format!("{:<16} {:>16}", "domain", "completion_s");
    for c in &r0.classes {
        head.push_str(&format!(" {:>16}", format!("{c}_s")));
    }
    head.push_str(&format!(" {:>16}", "wait_s"));
    let _ = writeln!(o, "{head}");
    for (d, dom) in r0.domains.iter().enumerate() {
        let mut line = format!("{:<16} {:>16}", dom.name, show(&completion(runs, d), 3));
        for c in &r0.classes {
            let v: Vec<f64> = runs.iter().map(|r| secs(r.domains[d].cpu_ns.get(c))).collect();
            line.push_str(&format!(" {:>16}", show(&v, 3)));
        }
        let w: Vec<f64> = runs.iter().map(|r| secs(r.domains[d].wait_ns)).collect();
        line.push_str(&format!(" {:>16}", show(&w, 3)));
        let _ = writeln!(o, "{line}");
    }
    let _ = writeln!(o, "{:<6} {:<8} {:>16} {:>16}", "cpu", "class", "busy_s", "idle_s");
    for (i, c) in r0.cpus.iter().enumerate() {
        let busy: Vec<f64> = runs.iter().map(|r| secs(r.cpus[i].busy_ns)).collect();
        let idle: Vec<f64> = runs.iter().map(|r| secs(r.cpus[i].idle_ns)).collect();
        let _ = writeln!(o, "{:<6} {:<8} {:>16} {:>16}", c.id, c.class, show(&busy, 3), show(&idle, 3));
    }
    let fi: Vec<f64> = runs.iter().map(|r| secs(r.fast_idle_slow_busy_ns)).collect();
    let _ = writeln!(o, "fast CPU idle while a slow CPU is busy: {} s", show(&fi, 3));
    o.push_str(&periodic(runs));
    o
}

/// rt-app's view of periodic threads (those reaching `timer` events): periods,
/// deadline misses (negative slack) and slack (period end − work end), ms;
/// empty when no thread is periodic.
pub fn periodic(runs: &[RunResult]) -> String {
    let r0 = &runs[0];
    let mut o = String::new();
    for (i, t) in r0.tasks.iter().enumerate() {
        if t.periodic.is_none() {
            continue;
        }
        if o.is_empty() {
            let _ = writeln!(
                o,
                "{:<16} {:>10} {:>16} {:>16} {:>16}",
                "periodic thread", "periods", "deadline misses", "slack_min_ms", "slack_mean_ms"
            );
        }
        let p: Vec<_> = runs.iter().filter_map(|r| r.tasks.get(i).and_then(|t| t.periodic.as_ref())).collect();
        let col = |f: &dyn Fn(&ampsched_sim::results::Periodic) -> f64, dp| {
            show(&p.iter().map(|x| f(x)).collect::<Vec<_>>(), dp)
        };
        let name = t.name.clone().unwrap_or_else(|| format!("{}/v{}", r0.domains[t.domain as usize].name, t.vcpu));
        let _ = writeln!(
            o,
            "{:<16} {:>10} {:>16} {:>16} {:>16}",
            name,
            col(&|x| x.periods as f64, 0),
            col(&|x| x.deadline_misses as f64, 0),
            col(&|x| x.slack_min_ns as f64 / 1e6, 3),
            col(&|x| x.slack_mean_ns as f64 / 1e6, 3)
        );
    }
    o
}

/// The scenario's own policies (`base`) and another placer (`other`) on the
/// same seeds; `fast` is the fastest CPU class.
pub fn compare(base: &[RunResult], other: &[RunResult], fast: &str) -> String {
    let (b0, o0) = (&base[0], &other[0]);
    let (bl, ol) = (format!("placer {}", b0.placer), format!("placer {}", o0.placer));
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} — dispatcher {}: {} vs {}, {} (mean ± sd where the seeds differ)",
        b0.scenario,
        b0.dispatcher,
        b0.placer,
        o0.placer,
        seeds(base)
    );
    let w = 18;
    let _ = writeln!(o, "{:<34} {:>w$} {:>w$}", "", bl, ol);
    let mut changes = Vec::new();
    for (d, dom) in b0.domains.iter().enumerate() {
        let (cb, co) = (completion(base, d), completion(other, d));
        let _ = writeln!(o, "{:<34} {:>w$} {:>w$}", format!("{} completion s", dom.name), show(&cb, 3), show(&co, 3));
        if !cb.is_empty() && !co.is_empty() {
            changes.push((dom.name.clone(), mean_sd(&cb).0, mean_sd(&co).0));
        }
    }
    for (d, dom) in b0.domains.iter().enumerate() {
        let (sb, so) = (fast_share(base, d, fast), fast_share(other, d, fast));
        let _ =
            writeln!(o, "{:<34} {:>w$} {:>w$}", format!("{} on {fast} CPUs %", dom.name), show(&sb, 1), show(&so, 1));
    }
    let fb: Vec<f64> = base.iter().map(|r| secs(r.fast_idle_slow_busy_ns)).collect();
    let fo: Vec<f64> = other.iter().map(|r| secs(r.fast_idle_slow_busy_ns)).collect();
    let _ = writeln!(o, "{:<34} {:>w$} {:>w$}", "fast idle while slow busy s", show(&fb, 3), show(&fo, 3));
    let (jb, jo) = (jain(base, fast), jain(other, fast));
    let _ = writeln!(o, "{:<34} {:>w$} {:>w$}", "fairness of fast share (Jain)", show(&jb, 3), show(&jo, 3));
    let _ = writeln!(o);
    let (mb, mo) = (mean_sd(&fb).0, mean_sd(&fo).0);
    let _ = writeln!(
        o,
        "Look at: the fast CPU idles while a slow CPU is busy for {mb:.3} s with {} and {mo:.3} s with {} \
         (time the fastest core is wasted).",
        b0.placer, o0.placer
    );
    let _ = writeln!(o, "Then: {}.", completion_story(&changes, &o0.placer));
    o
}

/// The largest speed-up and the largest slow-down in completion, in words.
fn completion_story(changes: &[(String, f64, f64)], other: &str) -> String {
    let pct = |(_, b, o): &&(String, f64, f64)| (o - b) / b.max(1e-9);
    let sooner = changes.iter().filter(|c| pct(c) < -0.005).min_by(|a, b| pct(a).total_cmp(&pct(b)));
    let later = changes.iter().filter(|c| pct(c) > 0.005).max_by(|a, b| pct(a).total_cmp(&pct(b)));
    let say = |c: &(String, f64, f64), word: &str| {
        format!("{} finishes {:.0}% {word} ({:.3} s → {:.3} s)", c.0, (pct(&c) * 100.0).abs(), c.1, c.2)
    };
    match (sooner, later) {
        (Some(s), Some(l)) => format!("with {other}, {}; {}", say(s, "sooner"), say(l, "later")),
        (Some(s), None) => format!("with {other}, {}; no domain finishes later", say(s, "sooner")),
        (None, Some(l)) => format!("with {other}, no domain finishes sooner; {}", say(l, "later")),
        (None, None) => format!("with {other}, every domain finishes within 0.5% of the baseline"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_spreads_and_jain() {
        // 1, 2, 3: mean 2, sample variance (1 + 0 + 1) / 2 = 1, sd 1.
        assert_eq!(show(&[1.0, 2.0, 3.0], 3), "2.000 ± 1.000");
        // Identical seeds print the value once, without a spread.
        assert_eq!(show(&[4.2, 4.2, 4.2], 3), "4.200");
        assert_eq!(show(&[], 3), "-");
        // Shares 0.5 and 0.5: (1)² / (2 · 0.5) = 1; shares 1 and 0: 1 / (2 · 1) = 0.5.
        assert_eq!((jain_index(&[0.5, 0.5]), jain_index(&[1.0, 0.0])), (1.0, 0.5));
        // 1, 2, 3: 36 / (3 · 14) = 0.857.
        assert!((jain_index(&[1.0, 2.0, 3.0]) - 36.0 / 42.0).abs() < 1e-12);
    }

    #[test]
    fn the_story_names_the_biggest_changes() {
        let c = vec![("web".to_string(), 4.2, 4.4), ("batch".to_string(), 5.0, 3.41), ("x".to_string(), 2.0, 2.0)];
        // batch: (3.41 − 5.0) / 5.0 = −31.8% → "32% sooner"; web: 0.2 / 4.2 = +4.8% → "5% later".
        assert_eq!(
            completion_story(&c, "aash"),
            "with aash, batch finishes 32% sooner (5.000 s → 3.410 s); web finishes 5% later (4.200 s → 4.400 s)"
        );
        assert_eq!(completion_story(&c[2..], "aash"), "with aash, every domain finishes within 0.5% of the baseline");
    }
}
