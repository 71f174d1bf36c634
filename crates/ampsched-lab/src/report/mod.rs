//! Reproduction reports: summary rows (`summary.json`), and a report as
//! Markdown (`report.md`, figures as SVG files beside it) and as one
//! self-contained HTML page (`report.html`, figures inline, a table of
//! contents, readable on a phone). Everything is rendered from data only, so
//! the same results give byte-identical files.

pub mod svg;

use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use svg::{esc, Chart};

/// Schema tag written at the top of `summary.json`.
pub const SUMMARY_SCHEMA: &str = "ampsched.summary/1";

/// One figure of a reproduction: a metric of a subject under a policy in one case of one experiment.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Row {
    /// Experiment id (scenario name), e.g. `aash-fair`.
    pub experiment: String,
    /// Workload or set within the experiment, e.g. `FFT-W`, `set1`.
    pub case: String,
    /// Program or VM the figure is about, or `all`.
    pub subject: String,
    /// Policy label, e.g. `credit`, `aash`.
    pub policy: String,
    /// Metric name, e.g. `completion_s`, `speedup_pct`.
    pub metric: String,
    /// Mean over runs.
    pub mean: f64,
    /// Smallest run value.
    pub min: f64,
    /// Largest run value.
    pub max: f64,
    /// Number of runs (seeds).
    pub runs: u32,
    /// Unit of the values (`s`, `%`, `count`, `fraction`, …).
    pub unit: String,
    /// The run values, one per seed in seed order (not written to `summary.json`; the ledger
    /// pairs them seed by seed).
    #[serde(skip)]
    pub values: Vec<f64>,
}

/// Mean, extremes and sample standard deviation of a set of run values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    /// Mean.
    pub mean: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// Sample standard deviation (n − 1; 0 for one value).
    pub stdev: f64,
    /// Number of values.
    pub n: u32,
}

impl Stat {
    /// Statistics of `v` (all zero when empty).
    pub fn of(v: &[f64]) -> Stat {
        if v.is_empty() {
            return Stat { mean: 0.0, min: 0.0, max: 0.0, stdev: 0.0, n: 0 };
        }
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = if v.len() > 1 { v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0) } else { 0.0 };
        Stat {
            mean,
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            stdev: var.sqrt(),
            n: v.len() as u32,
        }
    }
}

/// A table: a caption, a header and string cells.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// Caption shown above the table.
    pub caption: String,
    /// Column names.
    pub header: Vec<String>,
    /// Rows of cells (same length as the header).
    pub rows: Vec<Vec<String>>,
}

/// A figure: a chart written as `<id>.svg` and embedded in the HTML page.
#[derive(Clone, Debug)]
pub struct Figure {
    /// File stem and HTML anchor (unique within the report).
    pub id: String,
    /// Caption under the chart.
    pub caption: String,
    /// The chart.
    pub chart: Chart,
}

/// A block of a section, in reading order.
#[derive(Clone, Debug)]
pub enum Block {
    /// A paragraph of plain text.
    Para(String),
    /// A table.
    Table(Table),
    /// A figure.
    Figure(Figure),
}

/// One experiment's section.
#[derive(Clone, Debug, Default)]
pub struct Section {
    /// Anchor id.
    pub id: String,
    /// Heading.
    pub title: String,
    /// Blocks in order.
    pub blocks: Vec<Block>,
}

impl Section {
    /// A section with a heading and no blocks.
    pub fn new(id: &str, title: &str) -> Section {
        Section { id: id.into(), title: title.into(), blocks: Vec::new() }
    }
    /// Append a paragraph.
    pub fn para(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Para(text.into()));
    }
    /// Append a table.
    pub fn table(&mut self, t: Table) {
        self.blocks.push(Block::Table(t));
    }
    /// Append a figure.
    pub fn figure(&mut self, id: impl Into<String>, caption: impl Into<String>, chart: Chart) {
        self.blocks.push(Block::Figure(Figure { id: id.into(), caption: caption.into(), chart }));
    }
}

/// A whole report: title, introduction, sections, and the summary rows.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Page title.
    pub title: String,
    /// Introductory paragraphs.
    pub intro: Vec<String>,
    /// Sections (one per experiment).
    pub sections: Vec<Section>,
    /// Summary rows (`summary.json`).
    pub rows: Vec<Row>,
    /// The ledger against the published figures (`summary.json` → `ledger`).
    pub ledger: Vec<LedgerRow>,
}

#[derive(Serialize)]
struct SummaryFile<'a> {
    schema: &'static str,
    title: &'a str,
    ledger: &'a [LedgerRow],
    rows: &'a [Row],
}

impl Report {
    /// Every figure of the report, in order.
    pub fn figures(&self) -> impl Iterator<Item = &Figure> {
        self.sections.iter().flat_map(|s| s.blocks.iter()).filter_map(|b| match b {
            Block::Figure(f) => Some(f),
            _ => None,
        })
    }

    /// `summary.json` text.
    pub fn summary_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(&SummaryFile {
            schema: SUMMARY_SCHEMA,
            title: &self.title,
            ledger: &self.ledger,
            rows: &self.rows,
        })
        .expect("rows serialise");
        s.push('\n');
        s
    }

    /// `report.md` text; figures are referenced as `figures/<id>.svg`.
    pub fn to_markdown(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "# {}\n", self.title);
        for p in &self.intro {
            let _ = writeln!(o, "{p}\n");
        }
        let _ = writeln!(o, "## Contents\n");
        for s in &self.sections {
            let _ = writeln!(o, "- [{}](#{})", s.title, s.id);
        }
        o.push('\n');
        for s in &self.sections {
            let _ = writeln!(o, "<a id=\"{}\"></a>\n\n## {}\n", s.id, s.title);
            for b in &s.blocks {
                match b {
                    Block::Para(p) => {
                        let _ = writeln!(o, "{p}\n");
                    }
                    Block::Table(t) => {
                        if !t.caption.is_empty() {
                            let _ = writeln!(o, "*{}*\n", t.caption);
                        }
                        let _ = writeln!(o, "| {} |", t.header.join(" | "));
                        let _ = writeln!(o, "|{}", "---|".repeat(t.header.len()));
                        for r in &t.rows {
                            let _ = writeln!(o, "| {} |", r.join(" | "));
                        }
                        o.push('\n');
                    }
                    Block::Figure(f) => {
                        let _ = writeln!(
                            o,
                            "![{}](figures/{}.svg)\n\n*{}* {}\n",
                            f.caption,
                            f.id,
                            f.caption,
                            f.chart.reading()
                        );
                    }
                }
            }
        }
        o
    }

    /// `report.html` text: one self-contained page (inline SVG, inline CSS, no scripts or external resources).
    pub fn to_html(&self) -> String {
        let mut o = String::new();
        let _ = write!(
            o,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n\
             <style>\n{}</style>\n</head>\n<body>\n<main>\n<h1>{}</h1>\n",
            esc(&self.title),
            CSS,
            esc(&self.title)
        );
        for p in &self.intro {
            let _ = writeln!(o, "<p>{}</p>", esc(p));
        }
        let _ = writeln!(o, "<nav aria-label=\"Contents\"><h2>Contents</h2><ol>");
        for s in &self.sections {
            let _ = writeln!(o, "<li><a href=\"#{}\">{}</a></li>", esc(&s.id), esc(&s.title));
        }
        let _ = writeln!(o, "</ol></nav>");
        for s in &self.sections {
            let _ = writeln!(o, "<section id=\"{}\">\n<h2>{}</h2>", esc(&s.id), esc(&s.title));
            for b in &s.blocks {
                match b {
                    Block::Para(p) => {
                        let _ = writeln!(o, "<p>{}</p>", esc(p));
                    }
                    Block::Table(t) => {
                        let _ = writeln!(o, "<div class=\"scroll\"><table>");
                        if !t.caption.is_empty() {
                            let _ = writeln!(o, "<caption>{}</caption>", esc(&t.caption));
                        }
                        o.push_str("<thead><tr>");
                        for h in &t.header {
                            let _ = write!(o, "<th>{}</th>", esc(h));
                        }
                        o.push_str("</tr></thead>\n<tbody>\n");
                        for r in &t.rows {
                            o.push_str("<tr>");
                            for c in r {
                                // Prose (a claim, a published figure as the paper words it) wraps;
                                // numbers and short labels stay on one line.
                                let class = if c.chars().count() > WRAP_CELL { " class=\"w\"" } else { "" };
                                let _ = write!(o, "<td{class}>{}</td>", esc(c));
                            }
                            o.push_str("</tr>\n");
                        }
                        o.push_str("</tbody></table></div>\n");
                    }
                    Block::Figure(f) => {
                        let svg = f.chart.to_svg();
                        // The standalone SVG carries fixed width/height; inline, let CSS scale it.
                        let svg = svg.replacen(" width=\"720\" height=\"380\"", "", 1);
                        let _ = writeln!(
                            o,
                            "<figure id=\"{}\">\n{}<figcaption>{}<br><span class=\"read\">{}</span></figcaption>\n</figure>",
                            esc(&f.id),
                            svg,
                            esc(&f.caption),
                            esc(&f.chart.reading())
                        );
                    }
                }
            }
            o.push_str("</section>\n");
        }
        o.push_str("</main>\n</body>\n</html>\n");
        o
    }

    /// Make sure `dir` can take the report before anything is run: create it and
    /// its `figures/` folder, and create and remove a probe file in each. The error
    /// names the path and what was being written.
    pub fn prepare_dir(dir: &Path) -> Result<(), WriteError> {
        let err = |path: &Path, what: &'static str| {
            let path = path.to_path_buf();
            move |source| WriteError { path, what, source }
        };
        if dir.exists() && !dir.is_dir() {
            let source = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "it exists and is not a directory");
            return Err(WriteError { path: dir.to_path_buf(), what: "report directory", source });
        }
        std::fs::create_dir_all(dir).map_err(err(dir, "report directory"))?;
        let figs = dir.join("figures");
        std::fs::create_dir_all(&figs).map_err(err(&figs, "figures directory"))?;
        for d in [dir, figs.as_path()] {
            let probe = d.join(".ampsched-write-check");
            std::fs::write(&probe, b"").map_err(err(&probe, "report files"))?;
            std::fs::remove_file(&probe).map_err(err(&probe, "report files"))?;
        }
        Ok(())
    }

    /// Write `summary.json`, `report.md`, `report.html` and `figures/*.svg` into `dir` (created if missing).
    pub fn write(&self, dir: &Path) -> Result<(), WriteError> {
        let put = |path: PathBuf, what: &'static str, text: String| {
            std::fs::write(&path, text).map_err(|source| WriteError { path, what, source })
        };
        let figs = dir.join("figures");
        std::fs::create_dir_all(&figs)
            .map_err(|source| WriteError { path: figs.clone(), what: "figures directory", source })?;
        for f in self.figures() {
            put(figs.join(format!("{}.svg", f.id)), "figure", f.chart.to_svg())?;
        }
        put(dir.join("summary.json"), "summary", self.summary_json())?;
        put(dir.join("report.md"), "Markdown report", self.to_markdown())?;
        put(dir.join("report.html"), "HTML report", self.to_html())?;
        Ok(())
    }
}

/// Writing a report's file failed: which file, what it is, and why.
#[derive(Debug)]
pub struct WriteError {
    /// The file or directory being written.
    pub path: PathBuf,
    /// What it is (`report directory`, `figure`, `HTML report`, …).
    pub what: &'static str,
    /// The operating system's reason.
    pub source: std::io::Error,
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: cannot write the {}: {}", self.path.display(), self.what, self.source)
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Table cells longer than this many characters may wrap (prose, not numbers).
const WRAP_CELL: usize = 24;

const CSS: &str = "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;\
background:#fafafa;line-height:1.5}\n\
main{max-width:60rem;margin:0 auto;padding:1rem}\n\
h1{font-size:1.6rem}h2{font-size:1.3rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}\n\
nav ol{padding-left:1.4rem}\n\
.scroll{overflow-x:auto;max-width:100%;margin:1rem 0}\n\
table{border-collapse:collapse;font-size:.9rem;background:#fff}\n\
caption{text-align:left;font-style:italic;padding:.3rem 0}\n\
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}\n\
th{white-space:normal;overflow-wrap:anywhere;vertical-align:bottom;min-width:4rem}\n\
td{white-space:nowrap}\n\
td.w{white-space:normal;min-width:12rem;text-align:left}\n\
th:first-child,td:first-child{text-align:left}\n\
figure{margin:1rem 0;background:#fff;border:1px solid #e5e5e5;padding:.5rem}\n\
figure svg{width:100%;height:auto;display:block}\n\
figcaption{font-size:.9rem;color:#555}\n\
figcaption .read{color:#333}\n";

/// Format a value for a table cell with a fixed number of decimals.
pub fn cell(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "–".into()
    }
}

/// Format "mean ± stdev" for a table cell.
pub fn cell_pm(s: &Stat, decimals: usize) -> String {
    format!("{} ± {}", cell(s.mean, decimals), cell(s.stdev, decimals))
}

/// One row of the ledger (`summary.json` → `ledger`), built by `crate::ledger`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LedgerRow {
    /// The claim.
    pub claim: String,
    /// Experiment name.
    pub experiment: String,
    /// The published figure as stated.
    pub published: String,
    /// Mean of our values over seeds.
    pub ours_mean: f64,
    /// Smallest seed value.
    pub ours_min: f64,
    /// Largest seed value.
    pub ours_max: f64,
    /// The band, as text.
    pub band: String,
    /// Whether our values are within the band.
    pub within_band: bool,
}

#[cfg(test)]
mod tests {
    use super::svg::{BarChart, BarSeries};
    use super::*;

    fn sample() -> Report {
        let mut s = Section::new("exp-a", "Experiment A");
        s.para("Setup: 4 CPUs <fast>.");
        s.table(Table {
            caption: "times".into(),
            header: vec!["policy".into(), "s".into()],
            rows: vec![vec!["credit".into(), "1.00".into()]],
        });
        s.figure(
            "exp-a-bars",
            "bars",
            Chart::Bar(BarChart {
                title: "t".into(),
                categories: vec!["a".into()],
                series: vec![BarSeries { name: "credit".into(), values: vec![1.0], err: None }],
                stacked: false,
                y_label: "s".into(),
                reference: None,
            }),
        );
        Report {
            title: "R".into(),
            intro: vec!["intro".into()],
            sections: vec![s],
            rows: vec![Row {
                experiment: "exp-a".into(),
                case: "a".into(),
                subject: "all".into(),
                policy: "credit".into(),
                metric: "completion_s".into(),
                mean: 1.0,
                min: 1.0,
                max: 1.0,
                runs: 1,
                unit: "s".into(),
                values: vec![1.0],
            }],
            ledger: Vec::new(),
        }
    }

    #[test]
    fn stat_of_three_values() {
        // mean (1+2+6)/3 = 3; sample variance ((4+1+9)/2) = 7
        let s = Stat::of(&[1.0, 2.0, 6.0]);
        assert_eq!((s.mean, s.min, s.max, s.n), (3.0, 1.0, 6.0, 3));
        assert!((s.stdev - 7f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn html_is_self_contained_with_toc_tables_and_inline_figures() {
        let h = sample().to_html();
        assert!(h.contains("<nav") && h.contains("href=\"#exp-a\""));
        assert_eq!(h.matches("<table>").count(), 1);
        assert_eq!(h.matches("<figure").count(), 1);
        assert_eq!(h.matches("<svg").count(), 1);
        assert!(h.contains("&lt;fast&gt;"), "text is escaped");
        assert!(
            !h.contains("http://")
                || h.matches("http://").count() == h.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
        );
        assert!(!h.contains("<script"));
    }

    #[test]
    fn markdown_links_figure_files_and_summary_has_schema() {
        let r = sample();
        assert!(r.to_markdown().contains("![bars](figures/exp-a-bars.svg)"));
        let v: serde_json::Value = serde_json::from_str(&r.summary_json()).unwrap();
        assert_eq!(v["schema"], SUMMARY_SCHEMA);
        assert_eq!(v["rows"][0]["metric"], "completion_s");
    }
}
