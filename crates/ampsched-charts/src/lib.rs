//! The one plotting path of ampsched: every figure of the reproduction reports
//! (`ampsched reproduce`) and of the Python package (`ampsched.plots`) is a
//! [`Chart`] drawn here as SVG with the `plotters` crate (SVG backend only).
//!
//! A chart is plain data (serde: the Python side sends it as JSON), drawn as
//! grouped or stacked bars with min–max whiskers and an optional dashed
//! reference line, or as lines, steps or point clouds over a linear or
//! logarithmic x axis. What makes the figures readable (issue 20 D6):
//! - colours from the Okabe–Ito colour-blind-safe palette, and one marker
//!   shape per series besides its colour, so a point is identifiable in grey
//!   print and by readers who cannot tell the colours apart;
//! - markers filled at 85 % opacity and outlined in dark grey, drawn after
//!   every line (no line covers a point), and in a scatter the series are set
//!   side by side (`DODGE` pixels apart, centred on the true x) so points of
//!   different series at the same x and y cannot hide each other;
//! - the legend in its own band above the plot, never over the data;
//! - [`Chart::reading`]: one sentence for the caption saying how to read it.
//!
//! Output depends only on the data: no clocks, no randomness, no font files
//! (plotters' built-in text estimate lays labels out; the browser draws them),
//! integer pixel coordinates; so reports are byte-identical for the same results.

#![warn(missing_docs)]

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::{Deserialize, Serialize};

/// Width of every chart in SVG user units (scaled to the page by CSS).
pub const W: u32 = 720;
/// Height of a chart whose x labels fit horizontally (bars with long or many
/// category labels grow by the room their upright labels need).
pub const H: u32 = 380;
/// Okabe–Ito colour-blind-safe palette.
const PALETTE: [(u8, u8, u8); 8] = [
    (0x00, 0x72, 0xB2),
    (0xE6, 0x9F, 0x00),
    (0x00, 0x9E, 0x73),
    (0xD5, 0x5E, 0x00),
    (0xCC, 0x79, 0xA7),
    (0x56, 0xB4, 0xE9),
    (0xF0, 0xE4, 0x42),
    (0x00, 0x00, 0x00),
];
/// Sideways distance between the markers of neighbouring series in a scatter (pixels).
const DODGE: f64 = 6.0;
/// Marker shapes, one per series after the colour: circle, square, triangle, diamond, inverted triangle.
const SHAPES: usize = 5;
/// Marker outline.
const OUTLINE: RGBColor = RGBColor(0x22, 0x22, 0x22);
/// Font of labels and legend (plotters' size 15 is 12 SVG units).
const FONT: (&str, u32) = ("sans-serif", 15);
/// Approximate width of a label character at `FONT` (pixels), for layout.
const CHAR_PX: f64 = 7.0;

/// The colour of series `i` (`#RRGGBB`).
pub fn colour(i: usize) -> String {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    format!("#{r:02X}{g:02X}{b:02X}")
}

fn rgb(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

/// Escape text for SVG/HTML (`<`, `>`, `&`, `"`).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

/// A number for a tick label: up to 3 significant decimals, trailing zeros dropped.
pub fn fmt_num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || v.abs() < 1e-12 {
        return "0".into();
    }
    let a = v.abs();
    let s = if a >= 1e5 {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// One bar series: a value per category, with an optional error interval (absolute low, high).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BarSeries {
    /// Legend name.
    pub name: String,
    /// Value per category.
    pub values: Vec<f64>,
    /// Error interval per category (absolute bounds), drawn as whiskers.
    #[serde(default)]
    pub err: Option<Vec<(f64, f64)>>,
}

/// Grouped (side by side) or stacked bars over categories.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BarChart {
    /// Title above the plot.
    pub title: String,
    /// Category labels along x.
    pub categories: Vec<String>,
    /// Series (one colour each).
    pub series: Vec<BarSeries>,
    /// Stack series on top of each other instead of side by side.
    #[serde(default)]
    pub stacked: bool,
    /// Y axis label (with unit).
    #[serde(default)]
    pub y_label: String,
    /// Draw a dashed reference line at this y (e.g. 1.0 for normalised time).
    #[serde(default)]
    pub reference: Option<f64>,
}

/// A line or point series.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LineSeries {
    /// Legend name.
    pub name: String,
    /// Points (x, y), in x order for lines.
    pub points: Vec<(f64, f64)>,
}

/// How a line chart draws its series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LineStyle {
    /// Straight segments with point markers.
    Lines,
    /// Horizontal-then-vertical steps (time series per interval, CDFs).
    Steps,
    /// Markers only (scatter).
    Points,
}

/// Lines, steps or points over a numeric x axis.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LineChart {
    /// Title above the plot.
    pub title: String,
    /// Series (one colour and marker shape each).
    pub series: Vec<LineSeries>,
    /// Drawing style.
    pub style: LineStyle,
    /// X axis label (with unit).
    #[serde(default)]
    pub x_label: String,
    /// Y axis label (with unit).
    #[serde(default)]
    pub y_label: String,
    /// Start the y axis at zero.
    #[serde(default)]
    pub y_from_zero: bool,
    /// Use a logarithmic x axis (all x > 0).
    #[serde(default)]
    pub log_x: bool,
}

/// A chart of either kind (JSON: `{"kind": "bar", …}` or `{"kind": "line", …}`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Chart {
    /// Bars.
    Bar(BarChart),
    /// Lines/steps/points.
    Line(LineChart),
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

impl Chart {
    /// The chart's title.
    pub fn title(&self) -> &str {
        match self {
            Chart::Bar(b) => &b.title,
            Chart::Line(l) => &l.title,
        }
    }

    /// How to read the chart, one sentence for its caption (what the marks,
    /// whiskers and reference line mean).
    pub fn reading(&self) -> String {
        match self {
            Chart::Bar(b) => {
                let mut r = if b.stacked {
                    "How to read: each bar stacks one segment per series (legend), the total is the bar's height"
                        .to_string()
                } else {
                    "How to read: one bar per series (legend colour) in each group; its height is the mean over seeds"
                        .to_string()
                };
                if b.series.iter().any(|s| s.err.is_some()) {
                    r.push_str("; the black whiskers span the smallest to the largest seed");
                }
                if let Some(v) = b.reference {
                    r.push_str(&format!("; the dashed red line marks {}", fmt_num(v)));
                }
                r.push('.');
                r
            }
            Chart::Line(l) => match l.style {
                LineStyle::Points => "How to read: one marker shape and colour per series (legend); markers of \
                                      different series at the same x are set side by side, so none hides another."
                    .into(),
                LineStyle::Lines => {
                    "How to read: one line per series (legend), a marker at each measured point.".into()
                }
                LineStyle::Steps => "How to read: one step line per series (legend); each flat step is one \
                                     interval's value."
                    .into(),
            },
        }
    }

    /// Render to a standalone SVG document (`W` wide). A chart plotters cannot
    /// lay out is drawn as a box saying so and why, never silently left out.
    pub fn to_svg(&self) -> String {
        self.try_svg().unwrap_or_else(|e| {
            format!(
                "<svg width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" xmlns=\"http://www.w3.org/2000/svg\">\n\
                 <rect width=\"{W}\" height=\"{H}\" fill=\"#FFFFFF\" stroke=\"#990000\"/>\n\
                 <text x=\"20\" y=\"40\" font-family=\"sans-serif\" font-size=\"14\">{}: cannot be drawn: {}</text>\n</svg>\n",
                esc(self.title()),
                esc(&e)
            )
        })
    }

    /// Render for inlining into a page: the standalone SVG without its fixed
    /// width and height, so CSS scales it to the page (the view box keeps its shape).
    pub fn to_svg_inline(&self) -> String {
        let s = self.to_svg();
        match (s.strip_prefix("<svg width=\""), s.find(" viewBox=")) {
            (Some(_), Some(v)) => format!("<svg{}", &s[v..]),
            _ => s,
        }
    }

    /// Render, or say why plotters could not.
    pub fn try_svg(&self) -> Result<String, String> {
        let names: Vec<&str> = match self {
            Chart::Bar(b) => b.series.iter().map(|s| s.name.as_str()).collect(),
            Chart::Line(l) => l.series.iter().map(|s| s.name.as_str()).collect(),
        };
        let markers = matches!(self, Chart::Line(l) if l.style != LineStyle::Steps);
        let legend = legend_layout(&names);
        let label_room = match self {
            Chart::Bar(b) => bar_label_room(b),
            Chart::Line(_) => None,
        };
        let h = H + label_room.map_or(0, |r| r.saturating_sub(30));
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (W, h)).into_drawing_area();
            let draw = || -> Res<()> {
                root.fill(&WHITE)?;
                let body = root.titled(self.title(), (FONT.0, 18).into_font().style(FontStyle::Bold))?;
                let rows = legend.last().map_or(0, |l| l.row + 1) as u32;
                let (band, body) = body.split_vertically(rows * 18 + 4);
                for item in &legend {
                    let (x, y) = (item.x, 9 + 18 * item.row as i32);
                    if markers {
                        draw_marker(&band, item.series, (x + 5, y), 0)?;
                    } else {
                        band.draw(&Rectangle::new([(x, y - 5), (x + 10, y + 5)], rgb(item.series).filled()))?;
                    }
                    band.draw(&Text::new(
                        names[item.series].to_string(),
                        (x + 14, y),
                        FONT.into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center)),
                    ))?;
                }
                match self {
                    Chart::Bar(b) => bar(&root, &body, b, label_room),
                    Chart::Line(l) => line(&body, l),
                }?;
                root.present()?;
                Ok(())
            };
            draw().map_err(|e| e.to_string())?;
        }
        // Accessible name and a tooltip for the whole figure.
        let t = esc(self.title());
        Ok(out.replacen(
            "xmlns=\"http://www.w3.org/2000/svg\">\n",
            &format!("xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"{t}\">\n<title>{t}</title>\n"),
            1,
        ))
    }
}

/// Where a legend entry goes: series index, x in pixels, row.
struct LegendItem {
    series: usize,
    x: i32,
    row: usize,
}

/// Legend entries left to right, wrapped into rows within the chart's width; none for one series.
fn legend_layout(names: &[&str]) -> Vec<LegendItem> {
    if names.len() < 2 {
        return Vec::new();
    }
    let (mut x, mut row) = (70.0, 0);
    let mut out = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let w = 24.0 + CHAR_PX * n.chars().count() as f64;
        if x + w > f64::from(W) - 10.0 && x > 70.0 {
            (x, row) = (70.0, row + 1);
        }
        out.push(LegendItem { series: i, x: x as i32, row });
        x += w;
    }
    out
}

/// Series `i`'s marker centred on `at`, `dx` pixels to the side: filled with
/// the series colour at 85 % opacity and outlined in dark grey, so overlapping
/// markers keep their edges.
fn draw_marker<CT: CoordTranslate>(area: &DrawingArea<SVGBackend<'_>, CT>, i: usize, at: CT::From, dx: i32) -> Res<()> {
    let fill = rgb(i).mix(0.85).filled();
    let line = ShapeStyle { color: OUTLINE.to_rgba(), filled: false, stroke_width: 1 };
    if i.is_multiple_of(SHAPES) {
        area.draw(&(EmptyElement::at(at) + Circle::new((dx, 0), 4, fill) + Circle::new((dx, 0), 4, line)))?;
        return Ok(());
    }
    let shape: &[(i32, i32)] = match i % SHAPES {
        1 => &[(-4, -4), (4, -4), (4, 4), (-4, 4)],
        2 => &[(0, -5), (5, 4), (-5, 4)],
        3 => &[(0, -5), (5, 0), (0, 5), (-5, 0)],
        _ => &[(0, 5), (5, -4), (-5, -4)],
    };
    let pts: Vec<(i32, i32)> = shape.iter().map(|(x, y)| (x + dx, *y)).collect();
    let mut closed = pts.clone();
    closed.push(pts[0]);
    area.draw(&(EmptyElement::at(at) + Polygon::new(pts, fill) + PathElement::new(closed, line)))?;
    Ok(())
}

fn finite(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

/// Pixels below the axis that upright category labels need, or `None` when
/// the labels fit side by side (at most 6 categories, each within its slot).
fn bar_label_room(b: &BarChart) -> Option<u32> {
    let n = b.categories.len().max(1);
    let slot = f64::from(W - 100) / n as f64;
    let longest = b.categories.iter().map(|c| c.chars().count()).max().unwrap_or(0);
    if n <= 6 && longest as f64 * CHAR_PX < slot - 4.0 {
        None
    } else {
        Some((14.0 + CHAR_PX * longest.min(28) as f64) as u32)
    }
}

/// The y range a bar chart needs: values (stacked sums), whiskers, the reference and zero.
fn bar_range(b: &BarChart) -> (f64, f64) {
    let (mut lo, mut hi): (f64, f64) = (0.0, 0.0);
    for c in 0..b.categories.len() {
        let (mut pos, mut neg) = (0.0, 0.0);
        for s in &b.series {
            let v = finite(s.values.get(c).copied().unwrap_or(0.0));
            let base = if !b.stacked {
                0.0
            } else if v >= 0.0 {
                pos
            } else {
                neg
            };
            if b.stacked {
                if v >= 0.0 {
                    pos += v
                } else {
                    neg += v
                }
            }
            let (el, eh) = s.err.as_ref().and_then(|e| e.get(c).copied()).unwrap_or((v, v));
            for y in [base + v, base + finite(el), base + finite(eh)] {
                hi = hi.max(y);
                lo = lo.min(y);
            }
        }
    }
    if let Some(r) = b.reference {
        hi = hi.max(r);
        lo = lo.min(r);
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.05;
    (if lo < 0.0 { lo - pad } else { lo }, hi + pad)
}

fn bar(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    body: &DrawingArea<SVGBackend<'_>, Shift>,
    b: &BarChart,
    label_room: Option<u32>,
) -> Res<()> {
    let n = b.categories.len().max(1);
    let (lo, hi) = bar_range(b);
    let mut chart = ChartBuilder::on(body)
        .margin_right(20)
        .margin_top(6)
        .x_label_area_size(label_room.unwrap_or(30))
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..n as f64, lo..hi)?;
    let fmt = |v: &f64| fmt_num(*v);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(7)
        .y_label_formatter(&fmt)
        .y_desc(b.y_label.as_str())
        .bold_line_style(RGBColor(0xE0, 0xE0, 0xE0))
        .light_line_style(RGBColor(0xF4, 0xF4, 0xF4))
        .axis_style(RGBColor(0x33, 0x33, 0x33))
        .label_style(FONT)
        .axis_desc_style(FONT)
        .draw()?;
    let k = if b.stacked { 1 } else { b.series.len().max(1) };
    let bar_w = 0.8 / k as f64;
    let whisker = ShapeStyle { color: OUTLINE.to_rgba(), filled: false, stroke_width: 1 };
    for c in 0..b.categories.len() {
        let x0 = c as f64 + 0.1;
        let (mut pos, mut neg) = (0.0, 0.0);
        for (i, s) in b.series.iter().enumerate() {
            let v = finite(s.values.get(c).copied().unwrap_or(0.0));
            let (base, x) = if b.stacked {
                let base = if v >= 0.0 { pos } else { neg };
                if v >= 0.0 {
                    pos += v
                } else {
                    neg += v
                }
                (base, x0)
            } else {
                (0.0, x0 + bar_w * i as f64)
            };
            let (top, bottom) = ((base + v).max(base), (base + v).min(base));
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x, top), (x + bar_w * 0.92, bottom)],
                rgb(i).filled(),
            )))?;
            if let Some((el, eh)) = s.err.as_ref().and_then(|e| e.get(c).copied()) {
                let cx = x + bar_w * 0.46;
                let (y1, y2) = (base + finite(el), base + finite(eh));
                let d = bar_w * 0.12;
                chart.draw_series([
                    PathElement::new(vec![(cx, y1), (cx, y2)], whisker),
                    PathElement::new(vec![(cx - d, y1), (cx + d, y1)], whisker),
                    PathElement::new(vec![(cx - d, y2), (cx + d, y2)], whisker),
                ])?;
            }
        }
    }
    if lo < 0.0 {
        let axis = ShapeStyle { color: RGBColor(0x33, 0x33, 0x33).to_rgba(), filled: false, stroke_width: 1 };
        chart.draw_series(std::iter::once(PathElement::new(vec![(0.0, 0.0), (n as f64, 0.0)], axis)))?;
    }
    if let Some(r) = b.reference {
        let red = ShapeStyle { color: RGBColor(0x99, 0x00, 0x00).to_rgba(), filled: false, stroke_width: 1 };
        chart.draw_series(DashedLineSeries::new(vec![(0.0, r), (n as f64, r)], 5, 4, red))?;
    }
    // Category labels under their groups: side by side, or upright when many or long.
    for (c, cat) in b.categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(c as f64 + 0.5, lo));
        let label: String = if cat.chars().count() > 28 {
            cat.chars().take(27).chain(std::iter::once('…')).collect()
        } else {
            cat.clone()
        };
        let style = if label_room.is_some() {
            FONT.into_font().transform(FontTransform::Rotate270).color(&BLACK).pos(Pos::new(HPos::Right, VPos::Center))
        } else {
            FONT.into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top))
        };
        root.draw(&Text::new(label, (px, py + 6), style))?;
    }
    Ok(())
}

/// Axis ranges of a line chart: x (in log10 units when `log_x`) and y.
fn line_ranges(l: &LineChart) -> ((f64, f64), (f64, f64)) {
    let ok = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite() && (!l.log_x || p.0 > 0.0);
    let pts: Vec<(f64, f64)> = l.series.iter().flat_map(|s| s.points.iter().filter(ok).copied()).collect();
    let (mut x_lo, mut x_hi) = pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |a, p| (a.0.min(p.0), a.1.max(p.0)));
    let (mut y_lo, mut y_hi) = pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |a, p| (a.0.min(p.1), a.1.max(p.1)));
    if !x_lo.is_finite() {
        (x_lo, x_hi) = if l.log_x { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if !y_lo.is_finite() {
        (y_lo, y_hi) = (0.0, 1.0);
    }
    if l.y_from_zero {
        y_lo = y_lo.min(0.0);
    }
    if x_hi <= x_lo {
        (x_lo, x_hi) = if l.log_x { (x_lo / 2.0, x_hi * 2.0) } else { (x_lo - 0.5, x_hi + 0.5) };
    } else if l.log_x {
        // A little room so the end markers are not cut by the frame.
        (x_lo, x_hi) = (x_lo / 1.15, x_hi * 1.15);
    } else {
        let pad = (x_hi - x_lo) * 0.03;
        (x_lo, x_hi) = (x_lo - pad, x_hi + pad);
    }
    if y_hi <= y_lo {
        y_hi = y_lo + 1.0;
    }
    let pad = (y_hi - y_lo) * 0.05;
    ((x_lo, x_hi), (if l.y_from_zero && y_lo >= 0.0 { y_lo } else { y_lo - pad }, y_hi + pad))
}

fn line(body: &DrawingArea<SVGBackend<'_>, Shift>, l: &LineChart) -> Res<()> {
    let ((x_lo, x_hi), (y_lo, y_hi)) = line_ranges(l);
    let mut builder = ChartBuilder::on(body);
    builder.margin_right(20).margin_top(6).x_label_area_size(44).y_label_area_size(64);
    if l.log_x {
        let chart = builder.build_cartesian_2d((x_lo..x_hi).log_scale(), y_lo..y_hi)?;
        line_series(chart, l)
    } else {
        let chart = builder.build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)?;
        line_series(chart, l)
    }
}

fn line_series<X>(mut chart: ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, RangedCoordf64>>, l: &LineChart) -> Res<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let fmt = |v: &f64| fmt_num(*v);
    chart
        .configure_mesh()
        .x_labels(8)
        .y_labels(7)
        .x_label_formatter(&fmt)
        .y_label_formatter(&fmt)
        .x_desc(l.x_label.as_str())
        .y_desc(l.y_label.as_str())
        .bold_line_style(RGBColor(0xE0, 0xE0, 0xE0))
        .light_line_style(RGBColor(0xF4, 0xF4, 0xF4))
        .axis_style(RGBColor(0x33, 0x33, 0x33))
        .label_style(FONT)
        .axis_desc_style(FONT)
        .draw()?;
    let usable = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite() && (!l.log_x || p.0 > 0.0);
    // Lines first, then every series' markers on top of all lines, so no line
    // (e.g. a reference) covers a point.
    for (i, s) in l.series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = s.points.iter().filter(usable).copied().collect();
        if l.style == LineStyle::Points || pts.len() < 2 {
            continue;
        }
        let path: Vec<(f64, f64)> = if l.style == LineStyle::Steps {
            let mut v = vec![pts[0]];
            for w in pts.windows(2) {
                v.push((w[1].0, w[0].1));
                v.push(w[1]);
            }
            v
        } else {
            pts
        };
        chart.draw_series(plotters::series::LineSeries::new(path, rgb(i).stroke_width(2)))?;
    }
    let n = l.series.len();
    for (i, s) in l.series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = s.points.iter().filter(usable).copied().collect();
        if l.style == LineStyle::Steps && pts.len() > 1 {
            continue;
        }
        let dx =
            if l.style == LineStyle::Points { ((i as f64 - (n as f64 - 1.0) / 2.0) * DODGE).round() as i32 } else { 0 };
        for p in pts {
            draw_marker(chart.plotting_area(), i, p, dx)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bars(stacked: bool) -> Chart {
        Chart::Bar(BarChart {
            title: "a<b".into(),
            categories: vec!["x".into(), "y".into()],
            series: vec![
                BarSeries { name: "credit".into(), values: vec![1.0, 2.0], err: Some(vec![(0.9, 1.1), (1.8, 2.2)]) },
                BarSeries { name: "aash".into(), values: vec![2.0, 4.0], err: None },
            ],
            stacked,
            y_label: "s".into(),
            reference: Some(1.0),
        })
    }

    /// `(x, y, width, height)` of every `<rect` filled with `fill`.
    fn rects(svg: &str, fill: &str) -> Vec<(i32, i32, i32, i32)> {
        let attr = |l: &str, a: &str| -> i32 {
            l.split(&format!(" {a}=\"")).nth(1).unwrap().split('"').next().unwrap().parse().unwrap()
        };
        svg.lines()
            .filter(|l| l.starts_with("<rect") && l.contains(&format!("fill=\"{fill}\"")))
            .map(|l| (attr(l, "x"), attr(l, "y"), attr(l, "width"), attr(l, "height")))
            .collect()
    }

    #[test]
    fn numbers_are_short_and_stable() {
        assert_eq!(fmt_num(2.50), "2.5");
        assert_eq!(fmt_num(120.0), "120");
        assert_eq!(fmt_num(0.125), "0.125");
        assert_eq!(fmt_num(-3.0), "-3");
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }

    #[test]
    fn grouped_bars_are_as_tall_as_their_values_and_text_is_escaped() {
        let c = bars(false).to_svg();
        // Series 0 (#0072B2): its legend swatch (drawn first), then 2 bars; series 1 (#E69F00) likewise.
        let (blue, orange) = (rects(&c, "#0072B2"), rects(&c, "#E69F00"));
        assert_eq!((blue.len(), orange.len()), (3, 3), "{c}");
        let (blue, orange) = (&blue[1..], &orange[1..]);
        // On an axis from 0, bar heights are proportional to the values:
        // credit x = 1, aash x = 2, aash y = 4 → heights 1 : 2 : 4 (±1 px rounding).
        let (h1, h2, h4) = (blue[0].3 as f64, orange[0].3 as f64, orange[1].3 as f64);
        assert!((h2 / h1 - 2.0).abs() < 0.05 && (h4 / h1 - 4.0).abs() < 0.1, "{h1} {h2} {h4}");
        // Bars of one group stand side by side, not over each other.
        assert!(orange[0].0 >= blue[0].0 + blue[0].2, "{blue:?} {orange:?}");
        assert!(c.contains("a&lt;b") && !c.contains("a<b"));
        assert!(c.contains("role=\"img\" aria-label=\"a&lt;b\""));
        // The reference line (dashed, dark red) and 2 whiskers of 3 strokes each.
        assert!(c.contains("stroke=\"#990000\""));
        assert_eq!(c.matches("stroke=\"#222222\"").count(), 2 * 3, "{c}");
    }

    #[test]
    fn stacked_bars_sit_on_each_other() {
        let c = bars(true).to_svg();
        let (blue, orange) = (&rects(&c, "#0072B2")[1..], &rects(&c, "#E69F00")[1..]);
        // Category x: credit 0..1 below aash 1..3: the orange segment's bottom
        // (y + height) is the blue segment's top (±1 px), and it is twice as tall.
        assert_eq!(blue[0].0, orange[0].0, "same x");
        assert!((orange[0].1 + orange[0].3 - blue[0].1).abs() <= 1, "{blue:?} {orange:?}");
        assert!((orange[0].3 as f64 / blue[0].3 as f64 - 2.0).abs() < 0.05);
    }

    #[test]
    fn scatter_points_are_outlined_shaped_drawn_over_lines_and_dodged() {
        // Two series with a point each at the same (x, y): a circle and a square,
        // both outlined, 6 px apart around the true x (dodge ±3).
        let same = |name: &str| LineSeries { name: name.into(), points: vec![(1.0, 2.0)] };
        let chart = |style, series| {
            Chart::Line(LineChart {
                title: "t".into(),
                series,
                style,
                x_label: "x".into(),
                y_label: "y".into(),
                y_from_zero: true,
                log_x: false,
            })
        };
        let c = chart(LineStyle::Points, vec![same("fair"), same("fast-first")]).to_svg();
        let circles: Vec<i32> = c
            .lines()
            .filter(|l| l.starts_with("<circle") && l.contains("fill=\"#0072B2\""))
            .map(|l| l.split("cx=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .collect();
        // the square's polygon: corners at centre ± 4
        let square: Vec<i32> = c
            .lines()
            .filter(|l| l.starts_with("<polygon") && l.contains("fill=\"#E69F00\""))
            .map(|l| l.split("points=\"").nth(1).unwrap().split(',').next().unwrap().parse().unwrap())
            .collect();
        // [legend marker, plotted point] each; the plotted circle sits 3 px left of x and
        // the square's centre 3 px right: left corner − circle centre = (+3 − 4) − (−3) = 2.
        assert_eq!((circles.len(), square.len()), (2, 2), "{c}");
        assert_eq!(square[1] - circles[1], 2, "circle {circles:?} square corner {square:?}");
        // Every marker has its dark outline: 2 circles and 2 squares (legend and plot).
        assert_eq!(c.matches("stroke=\"#222222\"").count(), 4, "{c}");
        // With lines, every marker comes after every line (drawn on top).
        let line = |name: &str| LineSeries { name: name.into(), points: vec![(1.0, 2.0), (2.0, 3.0)] };
        let l = chart(LineStyle::Lines, vec![line("a"), line("b")]).to_svg();
        let after = &l[l.rfind("stroke-width=\"2\"").expect("two lines")..];
        // after the last line: series a's 2 circles (fill + outline each), series b's 2 squares
        assert_eq!((after.matches("<circle").count(), after.matches("<polygon").count()), (4, 2), "{l}");
    }

    #[test]
    fn step_chart_is_one_path_per_series_with_a_corner_per_interval() {
        let c = Chart::Line(LineChart {
            title: "t".into(),
            series: vec![LineSeries { name: "vm".into(), points: vec![(0.0, 1.0), (1.0, 2.0), (2.0, 0.0)] }],
            style: LineStyle::Steps,
            x_label: "time (s)".into(),
            y_label: "vCPUs".into(),
            y_from_zero: true,
            log_x: false,
        })
        .to_svg();
        let paths: Vec<&str> = c.lines().filter(|l| l.contains("stroke=\"#0072B2\"")).collect();
        assert_eq!(paths.len(), 1, "{c}");
        // 3 points → start + (corner, point) per interval = 1 + 2 × 2 = 5 vertices
        let pts = paths[0].split("points=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(pts.split_whitespace().count(), 5, "{pts}");
        assert!(c.ends_with("</svg>\n"));
    }

    #[test]
    fn a_log_axis_labels_powers_of_ten_and_long_categories_stand_upright() {
        let c = Chart::Line(LineChart {
            title: "t".into(),
            series: vec![LineSeries { name: "a".into(), points: vec![(1.0, 1.0), (10.0, 2.0), (100.0, 3.0)] }],
            style: LineStyle::Lines,
            x_label: "ms".into(),
            y_label: "s".into(),
            y_from_zero: false,
            log_x: true,
        })
        .to_svg();
        assert!(c.contains(">\n10\n</text>") && c.contains(">\n100\n</text>"), "{c}");
        let many = Chart::Bar(BarChart {
            title: "t".into(),
            categories: (0..8).map(|i| format!("program-{i}")).collect(),
            series: vec![BarSeries { name: "a".into(), values: vec![1.0; 8], err: None }],
            stacked: false,
            y_label: "s".into(),
            reference: None,
        });
        let s = many.to_svg();
        // 8 upright category labels and the y axis title
        assert_eq!(s.matches("rotate(270").count(), 8 + 1);
        // Upright labels make the figure taller, not the plot smaller.
        assert!(s.starts_with("<svg width=\"720\" height=\"") && !s.starts_with("<svg width=\"720\" height=\"380\""));
        assert!(many.to_svg_inline().starts_with("<svg viewBox=\"0 0 720 "));
    }

    #[test]
    fn the_same_chart_is_the_same_svg_and_json_round_trips() {
        let c = bars(false);
        assert_eq!(c.to_svg(), c.to_svg());
        let j = serde_json::to_string(&c).unwrap();
        assert!(j.starts_with("{\"kind\":\"bar\""), "{j}");
        let back: Chart = serde_json::from_str(&j).unwrap();
        assert_eq!(back, c);
        // Python sends the optional fields only when set.
        let min: Chart = serde_json::from_str(
            r#"{"kind":"line","title":"t","style":"points","series":[{"name":"a","points":[[1,2]]}]}"#,
        )
        .unwrap();
        assert!(min.to_svg().contains("<circle"));
    }
}
