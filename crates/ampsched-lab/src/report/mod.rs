//! Reproduction reports: summary rows (`summary.json`), and a report as
//! Markdown (`report.md`, figures as SVG files beside it) and as one
//! self-contained HTML page (`report.html`, figures inline, a table of
//! contents, readable on a phone). Everything is rendered from data only, so
//! the same results give byte-identical files.

pub mod svg;

use serde::Serialize;
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

    /// `report.md` text (template `templates/report.md.j2`); figures are referenced as `figures/<id>.svg`.
    pub fn to_markdown(&self) -> String {
        render("report.md.j2", self.context(false))
    }

    /// `report.html` text (template `templates/report.html.j2`): one self-contained page
    /// (inline SVG, inline CSS, no scripts or external resources).
    pub fn to_html(&self) -> String {
        render("report.html.j2", self.context(true))
    }

    /// What the templates see: the report as plain data; with `svg`, each figure's
    /// chart drawn (for inlining, without its fixed size so CSS scales it).
    fn context(&self, svg: bool) -> Context<'_> {
        let sections = self
            .sections
            .iter()
            .map(|s| SectionCtx {
                id: &s.id,
                title: &s.title,
                blocks: s
                    .blocks
                    .iter()
                    .map(|b| match b {
                        Block::Para(text) => BlockCtx::Para { text },
                        Block::Table(t) => BlockCtx::Table { caption: &t.caption, header: &t.header, rows: &t.rows },
                        Block::Figure(f) => BlockCtx::Figure {
                            id: &f.id,
                            caption: &f.caption,
                            reading: f.chart.reading(),
                            svg: if svg { f.chart.to_svg_inline() } else { String::new() },
                        },
                    })
                    .collect(),
            })
            .collect();
        Context { title: &self.title, intro: &self.intro, sections, css: CSS, wrap_cell: WRAP_CELL }
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
        std::fs::create_dir_all(&figs).map_err(|source| WriteError {
            path: figs.clone(),
            what: "figures directory",
            source,
        })?;
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

/// The page's style sheet, inlined into `report.html`.
const CSS: &str = include_str!("templates/report.css");

/// The report templates (`templates/*.j2`, compiled into the binary), loaded once.
/// Whitespace: a line holding only a `{% … %}` tag leaves nothing in the output
/// (`trim_blocks`, `lstrip_blocks`), so the templates read as the files they make.
fn templates() -> &'static minijinja::Environment<'static> {
    static ENV: std::sync::OnceLock<minijinja::Environment<'static>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = minijinja::Environment::new();
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .keep_trailing_newline(true)
                .build()
                .expect("default delimiters"),
        );
        env.set_auto_escape_callback(|name| {
            if name.ends_with(".html.j2") {
                minijinja::AutoEscape::Html
            } else {
                minijinja::AutoEscape::None
            }
        });
        // HTML escaping as the SVG charts do it (`svg::esc`: `< > & "`), so text reads
        // the same in the page and in its figures.
        env.set_formatter(|out, state, value| {
            if matches!(state.auto_escape(), minijinja::AutoEscape::Html) && !value.is_safe() {
                out.write_str(&esc(&value.to_string())).map_err(minijinja::Error::from)
            } else {
                minijinja::escape_formatter(out, state, value)
            }
        });
        env.add_template("report.md.j2", include_str!("templates/report.md.j2")).expect("report.md.j2 parses");
        env.add_template("report.html.j2", include_str!("templates/report.html.j2")).expect("report.html.j2 parses");
        env
    })
}

/// Render template `name` with `ctx`. The templates are part of the binary and the
/// context is plain data, so a failure is a bug (covered by the tests), not bad input.
fn render(name: &str, ctx: Context<'_>) -> String {
    let t = templates().get_template(name).expect("template is registered");
    t.render(minijinja::Value::from(minijinja::value::Serde(&ctx))).unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

#[derive(Serialize)]
struct Context<'a> {
    title: &'a str,
    intro: &'a [String],
    sections: Vec<SectionCtx<'a>>,
    css: &'static str,
    wrap_cell: usize,
}

#[derive(Serialize)]
struct SectionCtx<'a> {
    id: &'a str,
    title: &'a str,
    blocks: Vec<BlockCtx<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum BlockCtx<'a> {
    Para { text: &'a str },
    Table { caption: &'a str, header: &'a [String], rows: &'a [Vec<String>] },
    Figure { id: &'a str, caption: &'a str, reading: String, svg: String },
}

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
    fn templates_lay_out_the_report_exactly() {
        // The Markdown, whole: a blank line after every block, the table rule one `---|` per column.
        let md = "# R\n\nintro\n\n## Contents\n\n- [Experiment A](#exp-a)\n\n<a id=\"exp-a\"></a>\n\n\
                  ## Experiment A\n\nSetup: 4 CPUs <fast>.\n\n*times*\n\n| policy | s |\n|---|---|\n| credit | 1.00 |\n\n\
                  ![bars](figures/exp-a-bars.svg)\n\n*bars* How to read: one bar per series (legend colour) in each \
                  group; its height is the mean over seeds.\n\n";
        assert_eq!(sample().to_markdown(), md);
        // The HTML table: a cell longer than WRAP_CELL (24) characters may wrap (class w), text escaped.
        let mut r = sample();
        if let Block::Table(t) = &mut r.sections[0].blocks[1] {
            t.rows.push(vec!["a claim of 25 characters.".into(), "x & y".into()]);
        }
        let h = r.to_html();
        let table =
            "<div class=\"scroll\"><table>\n<caption>times</caption>\n<thead><tr><th>policy</th><th>s</th></tr>\
                     </thead>\n<tbody>\n<tr><td>credit</td><td>1.00</td></tr>\n<tr><td class=\"w\">a claim of 25 \
                     characters.</td><td>x &amp; y</td></tr>\n</tbody></table></div>\n<figure id=\"exp-a-bars\">\n<svg";
        assert!(h.contains(table), "{h}");
        assert!(h.starts_with("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"));
        assert!(h.ends_with("</figcaption>\n</figure>\n</section>\n</main>\n</body>\n</html>\n"), "{h}");
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
