//! The ledger: the reproduction against the papers' published figures.
//!
//! Each study ships a claims file, `scenarios/<study>/ledger.toml`, with one
//! `[[claim]]` per published figure of the calibration set
//! (`docs/design/calibration.md`). A claim names the summary row it is
//! measured by (experiment, case, subject, policy, metric) and, when the
//! figure is a comparison, the row it is compared with (`versus`: the same
//! row with some of its keys changed) and how (`compare = "diff"`: a − b,
//! or `"pct"`: (a / b − 1) × 100). Values are paired seed by seed, so a
//! claim has one value per seed; the ledger row shows their mean and
//! min..max and whether the claim holds.
//!
//! The bands are the calibration page's rules:
//! - `kind = "approx"`, `published = x` ("≈ x"): the mean lies within
//!   ±max(5, 0.35 |x|) of x;
//! - `kind = "range"`, `published = [a, b]` ("a-b"): the ≈ rule applied to
//!   each end, i.e. the mean lies in [a − max(5, 0.35 |a|), b + max(5, 0.35 |b|)];
//! - `kind = "positive"` / `"negative"` (a direction: "faster", "lower"):
//!   the mean has that sign and so do at least 2/3 of the seeds;
//! - `kind = "at-most"` / `"at-least"`, `published = x` ("never above x"):
//!   every seed is on the right side of x.
//!
//! A claim is checked when the study is loaded: its experiment must be one
//! of the study's files, its case one of the experiment's cases and its
//! policies compared policies of it; after the analysis, its rows (subject
//! and metric) must exist. Either failure is an error naming the claim, so a
//! ledger cannot silently lose a row when an experiment changes.

use crate::experiment::Experiment;
pub use crate::report::LedgerRow;
use crate::report::{cell, Row, Section, Table};
use serde::Deserialize;

/// The kind of a published figure, which decides its band.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// "≈ x": within ±max(5, 35 % of |x|).
    Approx,
    /// "a-b": the ≈ rule applied to each end of the range.
    Range,
    /// A direction claim: positive in the mean and in ≥ 2/3 of the seeds.
    Positive,
    /// A direction claim: negative in the mean and in ≥ 2/3 of the seeds.
    Negative,
    /// "never above x": every seed ≤ x.
    AtMost,
    /// "never below x": every seed ≥ x.
    AtLeast,
}

/// How a claim's row is compared with its `versus` row, seed by seed.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Compare {
    /// a − b.
    #[default]
    Diff,
    /// (a / b − 1) × 100.
    Pct,
}

/// The row a claim is compared with: the claim's own keys, with these changed.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Versus {
    /// Another case.
    pub case: Option<String>,
    /// Another subject.
    pub subject: Option<String>,
    /// Another policy.
    pub policy: Option<String>,
    /// Another metric.
    pub metric: Option<String>,
}

/// A published value: one number or a range.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Published {
    /// One number.
    One(f64),
    /// A range `[low, high]`.
    Range([f64; 2]),
}

/// One claim of a ledger file.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// What the paper says, in a few words (unique within the file).
    pub claim: String,
    /// The published figure as the paper states it (e.g. `≈ +31 %`).
    pub published_text: String,
    /// Experiment name.
    pub experiment: String,
    /// Case name.
    pub case: String,
    /// Subject of the row (default `all`).
    #[serde(default = "all")]
    pub subject: String,
    /// Policy label.
    pub policy: String,
    /// Metric name.
    pub metric: String,
    /// Kind of figure (decides the band).
    pub kind: Kind,
    /// The published value (approx, range, at-most, at-least; none for a direction).
    pub published: Option<Published>,
    /// Compare with another row, seed by seed.
    pub versus: Option<Versus>,
    /// How to compare with `versus` (default `diff`).
    #[serde(default)]
    pub compare: Compare,
}

fn all() -> String {
    "all".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LedgerFile {
    #[serde(default)]
    claim: Vec<Claim>,
}

impl Claim {
    /// The band of this claim as (low, high) bounds on the mean, when it is an interval.
    fn interval(&self) -> Option<(f64, f64)> {
        let tol = |x: f64| 5f64.max(0.35 * x.abs());
        match (self.kind, &self.published) {
            (Kind::Approx, Some(Published::One(x))) => Some((x - tol(*x), x + tol(*x))),
            (Kind::Range, Some(Published::Range([a, b]))) => Some((a - tol(*a), b + tol(*b))),
            _ => None,
        }
    }

    fn check_shape(&self) -> Result<(), String> {
        let ok = match (self.kind, &self.published) {
            (Kind::Approx | Kind::AtMost | Kind::AtLeast, Some(Published::One(_))) => true,
            (Kind::Range, Some(Published::Range([a, b]))) => a <= b,
            (Kind::Positive | Kind::Negative, None) => true,
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "kind `{:?}` needs {}",
                self.kind,
                match self.kind {
                    Kind::Approx | Kind::AtMost | Kind::AtLeast => "`published = <number>`",
                    Kind::Range => "`published = [low, high]` with low ≤ high",
                    Kind::Positive | Kind::Negative => "no `published` value (a direction claim)",
                }
            ))
        }
    }

    /// The band as text.
    pub fn band_text(&self) -> String {
        match (self.kind, &self.published) {
            (Kind::Positive, _) => "> 0 in mean and ≥ 2/3 of seeds".into(),
            (Kind::Negative, _) => "< 0 in mean and ≥ 2/3 of seeds".into(),
            (Kind::AtMost, Some(Published::One(x))) => format!("≤ {} in every seed", cell(*x, 2)),
            (Kind::AtLeast, Some(Published::One(x))) => format!("≥ {} in every seed", cell(*x, 2)),
            _ => match self.interval() {
                Some((lo, hi)) => format!("{}..{}", cell(lo, 2), cell(hi, 2)),
                None => String::new(),
            },
        }
    }

    /// Whether per-seed values `v` (non-empty) are within the band.
    pub fn within(&self, v: &[f64]) -> bool {
        let n = v.len();
        if n == 0 {
            return false;
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        // "at least 2/3 of the seeds": count × 3 ≥ 2n.
        let two_thirds = |k: usize| 3 * k >= 2 * n;
        match (self.kind, &self.published) {
            (Kind::Positive, _) => mean > 0.0 && two_thirds(v.iter().filter(|x| **x > 0.0).count()),
            (Kind::Negative, _) => mean < 0.0 && two_thirds(v.iter().filter(|x| **x < 0.0).count()),
            (Kind::AtMost, Some(Published::One(x))) => v.iter().all(|y| y <= x),
            (Kind::AtLeast, Some(Published::One(x))) => v.iter().all(|y| y >= x),
            _ => self.interval().is_some_and(|(lo, hi)| mean >= lo && mean <= hi),
        }
    }

    fn versus_keys(&self) -> Option<(&str, &str, &str, &str)> {
        self.versus.as_ref().map(|v| {
            (
                v.case.as_deref().unwrap_or(&self.case),
                v.subject.as_deref().unwrap_or(&self.subject),
                v.policy.as_deref().unwrap_or(&self.policy),
                v.metric.as_deref().unwrap_or(&self.metric),
            )
        })
    }
}

/// Parse a ledger file; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Vec<Claim>, String> {
    let f: LedgerFile = toml::from_str(text).map_err(|e| format!("{file}: {}", e.message()))?;
    let mut seen: Vec<&str> = Vec::new();
    for c in &f.claim {
        if seen.contains(&c.claim.as_str()) {
            return Err(format!("{file}: claim `{}` appears twice; each claim must be unique", c.claim));
        }
        seen.push(&c.claim);
        c.check_shape().map_err(|e| format!("{file}: claim `{}`: {e}", c.claim))?;
    }
    Ok(f.claim)
}

/// Check claims against the study: every experiment must be one of `names`; for the experiments
/// in `loaded` (with `all_cases[i]` every case of `loaded[i]` before any `--case` filter), the
/// case and the policies must exist.
pub fn validate(
    claims: &[Claim],
    file: &str,
    names: &[&str],
    loaded: &[Experiment],
    all_cases: &[Vec<String>],
) -> Result<(), String> {
    for c in claims {
        let bad = |what: String| Err(format!("{file}: claim `{}`: {what}", c.claim));
        if !names.contains(&c.experiment.as_str()) {
            return bad(format!("experiment `{}` is not one of the study's: {}", c.experiment, names.join(", ")));
        }
        let Some(i) = loaded.iter().position(|e| e.name == c.experiment) else { continue };
        let e = &loaded[i];
        let cases = &all_cases[i];
        let labels: Vec<&str> =
            e.cases.first().map(|k| k.compare.iter().map(|p| p.label.as_str()).collect()).unwrap_or_default();
        let vs = c.versus_keys();
        for case in [Some(c.case.as_str()), vs.map(|v| v.0)].into_iter().flatten() {
            if !cases.iter().any(|k| k == case) {
                return bad(format!("case `{case}` is not a case of `{}`: {}", e.name, cases.join(", ")));
            }
        }
        for p in [Some(c.policy.as_str()), vs.map(|v| v.2)].into_iter().flatten() {
            if !labels.contains(&p) {
                return bad(format!("policy `{p}` is not compared in `{}`: {}", e.name, labels.join(", ")));
            }
        }
    }
    Ok(())
}

/// Check that every claim (and its `versus` row) names a metric of `metrics`, the
/// metrics the study's analysis produces: a renamed or removed metric fails at
/// load time, before any run, naming the claim.
pub fn validate_metrics(claims: &[Claim], file: &str, metrics: &[&str]) -> Result<(), String> {
    for c in claims {
        for m in [Some(c.metric.as_str()), c.versus_keys().map(|v| v.3)].into_iter().flatten() {
            if !metrics.contains(&m) {
                return Err(format!(
                    "{file}: claim `{}`: metric `{m}` is not one the study produces: {}",
                    c.claim,
                    metrics.join(", ")
                ));
            }
        }
    }
    Ok(())
}

fn find<'a>(rows: &'a [Row], e: &str, k: (&str, &str, &str, &str)) -> Option<&'a Row> {
    rows.iter().find(|r| r.experiment == e && r.case == k.0 && r.subject == k.1 && r.policy == k.2 && r.metric == k.3)
}

/// Evaluate the claims on a report's rows. A claim whose experiment or case did not run
/// (filtered out with `--only`/`--case`) is left out; one whose row is missing is an error.
pub fn evaluate(claims: &[Claim], file: &str, rows: &[Row], ran: &[Experiment]) -> Result<Vec<LedgerRow>, String> {
    let mut out = Vec::new();
    for c in claims {
        let Some(e) = ran.iter().find(|e| e.name == c.experiment) else { continue };
        let vs = c.versus_keys();
        let needed = [Some(c.case.as_str()), vs.map(|v| v.0)];
        if needed.iter().flatten().any(|k| !e.cases.iter().any(|x| x.name == *k)) {
            continue;
        }
        let missing = |k: (&str, &str, &str, &str)| {
            format!(
                "{file}: claim `{}`: experiment `{}` produces no row case `{}`, subject `{}`, policy `{}`, metric `{}`",
                c.claim, c.experiment, k.0, k.1, k.2, k.3
            )
        };
        let own = (c.case.as_str(), c.subject.as_str(), c.policy.as_str(), c.metric.as_str());
        let a = find(rows, &c.experiment, own).ok_or_else(|| missing(own))?;
        let v: Vec<f64> = match vs {
            None => a.values.clone(),
            Some(k) => {
                let b = find(rows, &c.experiment, k).ok_or_else(|| missing(k))?;
                if a.values.len() != b.values.len() {
                    return Err(format!(
                        "{file}: claim `{}`: its rows have {} and {} seed values; a comparison needs the same seeds",
                        c.claim,
                        a.values.len(),
                        b.values.len()
                    ));
                }
                a.values
                    .iter()
                    .zip(&b.values)
                    .map(|(x, y)| match c.compare {
                        Compare::Diff => x - y,
                        Compare::Pct => (x / y - 1.0) * 100.0,
                    })
                    .collect()
            }
        };
        let s = crate::report::Stat::of(&v);
        out.push(LedgerRow {
            claim: c.claim.clone(),
            experiment: c.experiment.clone(),
            published: c.published_text.clone(),
            ours_mean: s.mean,
            ours_min: s.min,
            ours_max: s.max,
            band: c.band_text(),
            within_band: c.within(&v),
        });
    }
    Ok(out)
}

/// "N of M calibration claims within band".
pub fn count_line(rows: &[LedgerRow]) -> String {
    format!("{} of {} calibration claims within band", rows.iter().filter(|r| r.within_band).count(), rows.len())
}

/// The ledger as a table: claim, published, ours (mean, min..max), band, pass/fail.
pub fn table(rows: &[LedgerRow]) -> Table {
    Table {
        caption: count_line(rows),
        header: ["claim", "experiment", "published", "ours (mean)", "ours (min..max)", "band", "within band"]
            .map(String::from)
            .to_vec(),
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    r.claim.clone(),
                    r.experiment.clone(),
                    r.published.clone(),
                    cell(r.ours_mean, 2),
                    format!("{}..{}", cell(r.ours_min, 2), cell(r.ours_max, 2)),
                    r.band.clone(),
                    if r.within_band { "pass" } else { "FAIL" }.into(),
                ]
            })
            .collect(),
    }
}

/// The ledger as aligned plain text for a terminal, ending with the count line.
pub fn text(rows: &[LedgerRow]) -> String {
    let t = table(rows);
    let mut all = vec![t.header.clone()];
    all.extend(t.rows.iter().cloned());
    let widths: Vec<usize> =
        (0..t.header.len()).map(|i| all.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut o = String::new();
    for r in &all {
        let cells: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        o.push_str(cells.join("  ").trim_end());
        o.push('\n');
    }
    o.push_str(&t.caption);
    o.push('\n');
    o
}

/// The ledger's report section.
pub fn section(rows: &[LedgerRow]) -> Section {
    let mut s = Section::new("ledger", "Ledger: the reproduction against the published figures");
    s.para(
        "One row per published figure of the calibration set (docs/design/calibration.md), from the claims \
         file scenarios/<study>/ledger.toml. Bands: ≈ x means within ±max(5, 35 % of |x|); a range a-b applies \
         that rule to each end; a direction (faster, lower) needs the sign in the mean and in at least 2/3 of \
         the seeds; never above x needs every seed at or below x. Comparisons pair the seeds.",
    );
    s.table(table(rows));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(kind: Kind, published: Option<Published>) -> Claim {
        Claim {
            claim: "c".into(),
            published_text: "p".into(),
            experiment: "e".into(),
            case: "k".into(),
            subject: "all".into(),
            policy: "p".into(),
            metric: "m".into(),
            kind,
            published,
            versus: None,
            compare: Compare::Diff,
        }
    }

    #[test]
    fn approx_band_is_the_larger_of_5_points_and_35_percent() {
        // ≈ 31: 35 % of 31 = 10.85 > 5, so 20.15..41.85.
        let c = claim(Kind::Approx, Some(Published::One(31.0)));
        assert_eq!(c.band_text(), "20.15..41.85");
        assert!(c.within(&[20.2, 20.2]) && !c.within(&[20.0, 20.1]));
        // ≈ 0: 35 % of 0 = 0 < 5, so −5..5.
        let z = claim(Kind::Approx, Some(Published::One(0.0)));
        assert!(z.within(&[4.9, -4.9]) && !z.within(&[5.1]));
    }

    #[test]
    fn range_band_widens_each_end_by_the_approx_rule() {
        // 60-70: 60 − max(5, 21) = 39; 70 + max(5, 24.5) = 94.5.
        let c = claim(Kind::Range, Some(Published::Range([60.0, 70.0])));
        assert_eq!(c.band_text(), "39.00..94.50");
        assert!(c.within(&[39.0]) && c.within(&[94.5]) && !c.within(&[95.0]));
    }

    #[test]
    fn direction_needs_the_mean_and_two_thirds_of_the_seeds() {
        let c = claim(Kind::Positive, None);
        // 2 of 3 seeds positive (3 × 2 ≥ 2 × 3) and mean (5 + 1 − 2)/3 > 0: holds.
        assert!(c.within(&[5.0, 1.0, -2.0]));
        // 1 of 3 positive: 3 × 1 < 6, fails although the mean (9 − 1 − 1)/3 > 0.
        assert!(!c.within(&[9.0, -1.0, -1.0]));
        // 2 of 3 positive but mean (1 + 1 − 5)/3 < 0: fails.
        assert!(!c.within(&[1.0, 1.0, -5.0]));
        assert!(claim(Kind::Negative, None).within(&[-1.0, -2.0, 0.5]));
    }

    #[test]
    fn bounds_hold_in_every_seed() {
        let c = claim(Kind::AtLeast, Some(Published::One(-4.0)));
        assert!(c.within(&[-3.9, 0.0]) && !c.within(&[-4.1, 10.0]));
        assert!(claim(Kind::AtMost, Some(Published::One(4.0))).within(&[4.0, 1.0]));
    }

    #[test]
    fn versus_pairs_seeds_and_missing_rows_name_the_claim() {
        let row = |policy: &str, values: Vec<f64>| Row {
            experiment: "e".into(),
            case: "k".into(),
            subject: "all".into(),
            policy: policy.into(),
            metric: "m".into(),
            mean: 0.0,
            min: 0.0,
            max: 0.0,
            runs: values.len() as u32,
            unit: "s".into(),
            values,
        };
        let rows = vec![row("a", vec![10.0, 30.0]), row("b", vec![20.0, 20.0])];
        let mut c = claim(Kind::Negative, None);
        c.policy = "a".into();
        c.versus = Some(Versus { policy: Some("b".into()), ..Default::default() });
        c.compare = Compare::Pct;
        let ex = |name: &str| {
            let text = "[machine]\ncpus = [{ class = \"c\" }]\nclasses = [{ name = \"c\", speed = 1.0 }]\n\
                        [[domain]]\nname = \"d\"\nvcpus = 1\nworkload = { model = \"mcf\" }\n\
                        [experiment]\ncompare = [{ label = \"a\" }, { label = \"b\" }]\n\
                        [[experiment.case]]\nname = \"k\"\n";
            Experiment::parse(text, "t.toml", name, &ampsched_sim::library::Library::builtin()).unwrap()
        };
        let ran = vec![ex("e")];
        // seed 1: (10/20 − 1) × 100 = −50; seed 2: (30/20 − 1) × 100 = +50; mean 0 → not negative.
        let l = evaluate(&[c.clone()], "l.toml", &rows, &ran).unwrap();
        assert_eq!((l[0].ours_mean, l[0].ours_min, l[0].ours_max, l[0].within_band), (0.0, -50.0, 50.0, false));
        let e = validate_metrics(&[c.clone()], "l.toml", &["n"]).unwrap_err();
        assert!(e.contains("claim `c`") && e.contains("metric `m`") && e.contains(": n"), "{e}");
        assert!(validate_metrics(&[c.clone()], "l.toml", &["m"]).is_ok());
        c.metric = "gone".into();
        let e = evaluate(&[c.clone()], "l.toml", &rows, &ran).unwrap_err();
        assert!(e.contains("claim `c`") && e.contains("metric `gone`"), "{e}");
        c.case = "nope".into();
        let e = validate(&[c.clone()], "l.toml", &["e"], &ran, &[vec!["k".into()]]).unwrap_err();
        assert!(e.contains("claim `c`") && e.contains("case `nope`"), "{e}");
        c.experiment = "x".into();
        let e = validate(&[c], "l.toml", &["e"], &ran, &[vec!["k".into()]]).unwrap_err();
        assert!(e.contains("experiment `x`"), "{e}");
    }

    #[test]
    fn parse_rejects_a_direction_with_a_value_and_duplicate_claims() {
        let base = "[[claim]]\nclaim = \"x\"\npublished_text = \"faster\"\nexperiment = \"e\"\ncase = \"k\"\n\
                    policy = \"p\"\nmetric = \"m\"\nkind = \"positive\"\n";
        assert_eq!(parse(base, "l.toml").unwrap().len(), 1);
        let e = parse(&format!("{base}published = 3\n"), "l.toml").unwrap_err();
        assert!(e.contains("claim `x`") && e.contains("no `published`"), "{e}");
        let e = parse(&format!("{base}{base}"), "l.toml").unwrap_err();
        assert!(e.contains("twice"), "{e}");
    }
}
