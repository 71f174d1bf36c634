//! Deterministic SVG charts for the reproduction reports: grouped or stacked
//! bars with error bars, line/step series, and point clouds. Output depends
//! only on the data (fixed number formatting, no clocks, no randomness), so
//! reports are byte-identical for the same results.

use std::fmt::Write;

/// Width of every chart in SVG user units (scaled to the page by CSS).
const W: f64 = 720.0;
/// Height of every chart.
const H: f64 = 380.0;
/// Margins: left (y labels), right, top (title and legend), bottom (x labels).
const ML: f64 = 70.0;
const MR: f64 = 20.0;
const MT: f64 = 52.0;
const MB: f64 = 80.0;
/// Okabe–Ito colour-blind-safe palette.
const PALETTE: [&str; 8] = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"];

/// The colour of series `i`.
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Sideways distance between the markers of neighbouring series in a scatter (SVG units).
const DODGE: f64 = 6.0;

/// Marker shapes, one per series after the colour: a point stays identifiable
/// by shape in grey print and for readers who cannot tell the colours apart.
const SHAPES: usize = 5;

/// Series `i`'s marker centred on (x, y): circle, square, triangle, diamond,
/// inverted triangle; filled with the series colour, outlined in dark grey so
/// overlapping markers keep their edges.
pub fn marker(i: usize, x: f64, y: f64) -> String {
    let c = colour(i);
    let style = format!("fill=\"{c}\" fill-opacity=\"0.85\" stroke=\"#222\" stroke-width=\"0.8\"");
    match i % SHAPES {
        0 => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\" {style}/>"),
        1 => format!("<rect x=\"{:.1}\" y=\"{:.1}\" width=\"7\" height=\"7\" {style}/>", x - 3.5, y - 3.5),
        2 => format!(
            "<path d=\"M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" {style}/>",
            y - 4.5,
            x + 4.5,
            y + 3.5,
            x - 4.5,
            y + 3.5
        ),
        3 => format!(
            "<path d=\"M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z\" {style}/>",
            y - 5.0,
            x + 5.0,
            y + 5.0,
            x - 5.0
        ),
        _ => format!(
            "<path d=\"M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" {style}/>",
            y + 4.5,
            x + 4.5,
            y - 3.5,
            x - 4.5,
            y - 3.5
        ),
    }
}

/// Escape text for SVG/HTML.
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
    if v == 0.0 || !v.is_finite() {
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

/// "Nice" axis ticks covering `[lo, hi]`, about `n` of them.
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let (lo, hi) = if hi > lo { (lo, hi) } else { (lo - 1.0, lo + 1.0) };
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let start = (lo / step).floor() as i64;
    let end = (hi / step).ceil() as i64;
    (start..=end).map(|k| k as f64 * step).collect()
}

/// One bar series: a value per category, with an optional error interval (absolute low, high).
#[derive(Clone, Debug)]
pub struct BarSeries {
    /// Legend name.
    pub name: String,
    /// Value per category.
    pub values: Vec<f64>,
    /// Error interval per category (absolute bounds), drawn as whiskers.
    pub err: Option<Vec<(f64, f64)>>,
}

/// Grouped (side by side) or stacked bars over categories.
#[derive(Clone, Debug)]
pub struct BarChart {
    /// Title above the plot.
    pub title: String,
    /// Category labels along x.
    pub categories: Vec<String>,
    /// Series (one colour each).
    pub series: Vec<BarSeries>,
    /// Stack series on top of each other instead of side by side.
    pub stacked: bool,
    /// Y axis label (with unit).
    pub y_label: String,
    /// Draw a dashed reference line at this y (e.g. 1.0 for normalised time).
    pub reference: Option<f64>,
}

/// A line or point series.
#[derive(Clone, Debug)]
pub struct LineSeries {
    /// Legend name.
    pub name: String,
    /// Points (x, y), in x order for lines.
    pub points: Vec<(f64, f64)>,
}

/// How a line chart draws its series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineStyle {
    /// Straight segments with point markers.
    Lines,
    /// Horizontal-then-vertical steps (time series per interval, CDFs).
    Steps,
    /// Markers only (scatter).
    Points,
}

/// Lines, steps or points over a numeric x axis.
#[derive(Clone, Debug)]
pub struct LineChart {
    /// Title above the plot.
    pub title: String,
    /// Series (one colour each).
    pub series: Vec<LineSeries>,
    /// Drawing style.
    pub style: LineStyle,
    /// X axis label (with unit).
    pub x_label: String,
    /// Y axis label (with unit).
    pub y_label: String,
    /// Start the y axis at zero.
    pub y_from_zero: bool,
    /// Use a logarithmic x axis (all x > 0).
    pub log_x: bool,
}

/// A chart of either kind.
#[derive(Clone, Debug)]
pub enum Chart {
    /// Bars.
    Bar(BarChart),
    /// Lines/steps/points.
    Line(LineChart),
}

impl Chart {
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
                    let _ = write!(r, "; the dashed red line marks {}", fmt_num(v));
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

    /// Render to a standalone SVG document.
    pub fn to_svg(&self) -> String {
        match self {
            Chart::Bar(b) => bar_svg(b),
            Chart::Line(l) => line_svg(l),
        }
    }

    /// Render for inlining into a page: the standalone SVG without its fixed
    /// width and height, so CSS scales it to the page (the view box keeps its shape).
    pub fn to_svg_inline(&self) -> String {
        self.to_svg().replacen(" width=\"720\" height=\"380\"", "", 1)
    }
}

struct Frame {
    out: String,
    y_lo: f64,
    y_hi: f64,
}

impl Frame {
    fn new(title: &str, y_label: &str, y_lo: f64, y_hi: f64) -> Frame {
        let mut out = String::new();
        let _ = write!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" \
             role=\"img\" aria-label=\"{t}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <title>{t}</title>\n<rect width=\"{W}\" height=\"{H}\" fill=\"#ffffff\"/>\n\
             <text x=\"{cx}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">{t}</text>\n",
            t = esc(title),
            cx = W / 2.0
        );
        let ticks = ticks(y_lo, y_hi, 6);
        let (y_lo, y_hi) = (ticks[0].min(y_lo), ticks[ticks.len() - 1].max(y_hi));
        let mut f = Frame { out, y_lo, y_hi };
        for t in &ticks {
            let y = f.y(*t);
            let _ = writeln!(
                f.out,
                "<line x1=\"{ML}\" x2=\"{x2}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e0e0e0\"/>\
                 <text x=\"{tx}\" y=\"{ty:.1}\" text-anchor=\"end\">{l}</text>",
                x2 = W - MR,
                tx = ML - 6.0,
                ty = y + 4.0,
                l = fmt_num(*t)
            );
        }
        let _ = writeln!(
            f.out,
            "<text transform=\"translate(16,{cy}) rotate(-90)\" text-anchor=\"middle\">{l}</text>\n\
             <line x1=\"{ML}\" x2=\"{ML}\" y1=\"{MT}\" y2=\"{yb}\" stroke=\"#333\"/>",
            cy = MT + (H - MT - MB) / 2.0,
            l = esc(y_label),
            yb = H - MB
        );
        f
    }

    fn y(&self, v: f64) -> f64 {
        let span = (self.y_hi - self.y_lo).max(f64::MIN_POSITIVE);
        H - MB - (v - self.y_lo) / span * (H - MT - MB)
    }

    fn legend(&mut self, names: &[&str]) {
        self.legend_with(names, false);
    }

    /// The legend; `markers`: each series' point marker instead of a colour swatch.
    fn legend_with(&mut self, names: &[&str], markers: bool) {
        if names.len() < 2 {
            return;
        }
        let mut x = ML;
        let y = 38.0;
        for (i, n) in names.iter().enumerate() {
            let swatch = if markers {
                marker(i, x + 5.0, y - 4.0)
            } else {
                format!("<rect x=\"{x:.1}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>", y - 9.0, colour(i))
            };
            let _ = writeln!(self.out, "{swatch}<text x=\"{tx:.1}\" y=\"{y}\">{n}</text>", tx = x + 14.0, n = esc(n));
            x += 24.0 + 7.0 * n.chars().count() as f64;
        }
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

fn finite(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

fn bar_svg(b: &BarChart) -> String {
    let n = b.categories.len().max(1);
    let mut lo: f64 = 0.0;
    let mut hi: f64 = 0.0;
    for c in 0..b.categories.len() {
        if b.stacked {
            let (mut pos, mut neg) = (0.0, 0.0);
            for s in &b.series {
                let v = finite(s.values.get(c).copied().unwrap_or(0.0));
                if v >= 0.0 {
                    pos += v
                } else {
                    neg += v
                }
            }
            hi = hi.max(pos);
            lo = lo.min(neg);
        }
        for s in &b.series {
            let v = finite(s.values.get(c).copied().unwrap_or(0.0));
            let (el, eh) = s.err.as_ref().and_then(|e| e.get(c).copied()).unwrap_or((v, v));
            if !b.stacked {
                hi = hi.max(v).max(finite(eh));
                lo = lo.min(v).min(finite(el));
            }
        }
    }
    if let Some(r) = b.reference {
        hi = hi.max(r);
        lo = lo.min(r);
    }
    if hi == lo {
        hi = lo + 1.0;
    }
    let mut f = Frame::new(&b.title, &b.y_label, lo, hi * 1.05);
    let plot_w = W - ML - MR;
    let slot = plot_w / n as f64;
    let k = if b.stacked { 1 } else { b.series.len().max(1) };
    let bar_w = (slot * 0.8) / k as f64;
    let zero = f.y(0.0);
    for (c, cat) in b.categories.iter().enumerate() {
        let x0 = ML + slot * c as f64 + slot * 0.1;
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
            let (ya, yb) = (f.y(base + v), f.y(base));
            let (top, h) = (ya.min(yb), (ya - yb).abs());
            let _ = writeln!(
                f.out,
                "<rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{col}\">\
                 <title>{cat}, {name}: {val}</title></rect>",
                w = bar_w * 0.92,
                col = colour(i),
                cat = esc(cat),
                name = esc(&s.name),
                val = fmt_num(v)
            );
            if let Some((el, eh)) = s.err.as_ref().and_then(|e| e.get(c).copied()) {
                let cx = x + bar_w * 0.46;
                let (y1, y2) = (f.y(base + finite(el)), f.y(base + finite(eh)));
                let _ = writeln!(
                    f.out,
                    "<path d=\"M{cx:.1} {y1:.1}V{y2:.1}M{a:.1} {y1:.1}H{b2:.1}M{a:.1} {y2:.1}H{b2:.1}\" \
                     stroke=\"#222\" fill=\"none\"/>",
                    a = cx - 3.0,
                    b2 = cx + 3.0
                );
            }
        }
        let lx = ML + slot * (c as f64 + 0.5);
        let ly = H - MB + 14.0;
        if n > 6 {
            let _ = writeln!(
                f.out,
                "<text transform=\"translate({lx:.1},{ly:.1}) rotate(-35)\" text-anchor=\"end\">{t}</text>",
                t = esc(cat)
            );
        } else {
            let _ =
                writeln!(f.out, "<text x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"middle\">{t}</text>", t = esc(cat));
        }
    }
    let _ = writeln!(
        f.out,
        "<line x1=\"{ML}\" x2=\"{x2}\" y1=\"{zero:.1}\" y2=\"{zero:.1}\" stroke=\"#333\"/>",
        x2 = W - MR
    );
    if let Some(r) = b.reference {
        let y = f.y(r);
        let _ = writeln!(
            f.out,
            "<line x1=\"{ML}\" x2=\"{x2}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#900\" stroke-dasharray=\"5 4\"/>",
            x2 = W - MR
        );
    }
    let names: Vec<&str> = b.series.iter().map(|s| s.name.as_str()).collect();
    f.legend(&names);
    f.finish()
}

fn line_svg(l: &LineChart) -> String {
    let xs = l.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).filter(|x| x.is_finite());
    let tx = |x: f64| if l.log_x { x.max(f64::MIN_POSITIVE).log10() } else { x };
    let (mut x_lo, mut x_hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for x in xs {
        x_lo = x_lo.min(tx(x));
        x_hi = x_hi.max(tx(x));
    }
    let (mut y_lo, mut y_hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for p in l.series.iter().flat_map(|s| s.points.iter()).filter(|p| p.1.is_finite()) {
        y_lo = y_lo.min(p.1);
        y_hi = y_hi.max(p.1);
    }
    if !x_lo.is_finite() {
        (x_lo, x_hi) = (0.0, 1.0);
    }
    if !y_lo.is_finite() {
        (y_lo, y_hi) = (0.0, 1.0);
    }
    if l.y_from_zero {
        y_lo = y_lo.min(0.0);
    }
    if x_hi <= x_lo {
        x_hi = x_lo + 1.0;
    }
    if y_hi <= y_lo {
        y_hi = y_lo + 1.0;
    }
    let pad = (y_hi - y_lo) * 0.05;
    let mut f = Frame::new(&l.title, &l.y_label, if l.y_from_zero { y_lo } else { y_lo - pad }, y_hi + pad);
    let xt: Vec<f64> = if l.log_x {
        (x_lo.floor() as i64..=x_hi.ceil() as i64).map(|e| e as f64).collect()
    } else {
        ticks(x_lo, x_hi, 8)
    };
    let (x_lo, x_hi) = (xt[0].min(x_lo), xt[xt.len() - 1].max(x_hi));
    let px = |x: f64| ML + (tx(x) - x_lo) / (x_hi - x_lo) * (W - ML - MR);
    let pxt = |t: f64| ML + (t - x_lo) / (x_hi - x_lo) * (W - ML - MR);
    let yb = H - MB;
    for t in &xt {
        let x = pxt(*t);
        let label = if l.log_x { fmt_num(10f64.powf(*t)) } else { fmt_num(*t) };
        let _ = writeln!(
            f.out,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{MT}\" y2=\"{yb}\" stroke=\"#f0f0f0\"/>\
             <text x=\"{x:.1}\" y=\"{ly}\" text-anchor=\"middle\">{label}</text>",
            ly = yb + 16.0
        );
    }
    let _ = writeln!(
        f.out,
        "<line x1=\"{ML}\" x2=\"{x2}\" y1=\"{yb}\" y2=\"{yb}\" stroke=\"#333\"/>\
         <text x=\"{cx}\" y=\"{ly}\" text-anchor=\"middle\">{xl}</text>",
        x2 = W - MR,
        cx = ML + (W - ML - MR) / 2.0,
        ly = yb + 36.0,
        xl = esc(&l.x_label)
    );
    // Lines first, then every series' markers on top of all lines, so no line
    // (e.g. a reference) covers a point. In a scatter, series are dodged
    // sideways (`DODGE` units apart, centred on the true x) so points of different
    // series at the same x and y stay visible side by side.
    let n = l.series.len();
    let mut markers = String::new();
    for (i, s) in l.series.iter().enumerate() {
        let pts: Vec<(f64, f64)> =
            s.points.iter().filter(|p| p.0.is_finite() && p.1.is_finite()).map(|p| (px(p.0), f.y(p.1))).collect();
        if pts.is_empty() {
            continue;
        }
        let c = colour(i);
        if l.style != LineStyle::Points && pts.len() > 1 {
            let mut d = format!("M{:.1} {:.1}", pts[0].0, pts[0].1);
            for w in pts.windows(2) {
                if l.style == LineStyle::Steps {
                    let _ = write!(d, "H{:.1}V{:.1}", w[1].0, w[1].1);
                } else {
                    let _ = write!(d, "L{:.1} {:.1}", w[1].0, w[1].1);
                }
            }
            let _ = writeln!(f.out, "<path d=\"{d}\" stroke=\"{c}\" stroke-width=\"2\" fill=\"none\"/>");
        }
        if l.style != LineStyle::Steps || pts.len() == 1 {
            let dodge = if l.style == LineStyle::Points { (i as f64 - (n as f64 - 1.0) / 2.0) * DODGE } else { 0.0 };
            for (x, y) in &pts {
                let _ = writeln!(markers, "{}", marker(i, x + dodge, *y));
            }
        }
    }
    f.out.push_str(&markers);
    let names: Vec<&str> = l.series.iter().map(|s| s.name.as_str()).collect();
    f.legend_with(&names, l.style != LineStyle::Steps);
    f.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        // range 0..7.3 in ~6 steps: raw step 1.22 → nice step 2 → 0, 2, 4, 6, 8
        assert_eq!(ticks(0.0, 7.3, 6), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        // a range of identical values still gets an axis
        assert!(ticks(5.0, 5.0, 6).len() >= 2);
    }

    #[test]
    fn numbers_are_short_and_stable() {
        assert_eq!(fmt_num(2.50), "2.5");
        assert_eq!(fmt_num(120.0), "120");
        assert_eq!(fmt_num(0.125), "0.125");
        assert_eq!(fmt_num(-3.0), "-3");
    }

    #[test]
    fn bar_chart_draws_one_rect_per_value_and_escapes_text() {
        let c = Chart::Bar(BarChart {
            title: "a<b".into(),
            categories: vec!["x".into(), "y".into()],
            series: vec![
                BarSeries { name: "credit".into(), values: vec![1.0, 2.0], err: Some(vec![(0.9, 1.1), (1.8, 2.2)]) },
                BarSeries { name: "aash".into(), values: vec![-1.0, 3.0], err: None },
            ],
            stacked: false,
            y_label: "s".into(),
            reference: Some(1.0),
        })
        .to_svg();
        // 2 categories × 2 series = 4 bars, plus the background rect and 2 legend swatches
        assert_eq!(c.matches("<rect").count(), 1 + 4 + 2);
        assert!(c.contains("a&lt;b") && !c.contains("a<b"));
        assert_eq!(c.matches("stroke-dasharray").count(), 1);
    }

    #[test]
    fn scatter_points_are_outlined_shaped_drawn_over_lines_and_dodged() {
        // Two series with a point each at the same (x, y): a circle and a square,
        // both outlined, 6 units apart around the true x (dodge ±3).
        let same = |name: &str| LineSeries { name: name.into(), points: vec![(1.0, 2.0)] };
        let chart = |style| {
            Chart::Line(LineChart {
                title: "t".into(),
                series: vec![same("fair"), same("fast-first")],
                style,
                x_label: "x".into(),
                y_label: "y".into(),
                y_from_zero: true,
                log_x: false,
            })
        };
        let c = chart(LineStyle::Points).to_svg();
        let cx: Vec<f64> = c
            .lines()
            .filter(|l| l.starts_with("<circle") && !l.contains("<text"))
            .map(|l| l.split("cx=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .collect();
        // the circle (series 0) sits 3 left of x = 1 and the square (series 1) 3 right,
        // its corner 3.5 left of its centre: corner − circle centre = 6 − 3.5 = 2.5
        let sq: f64 = c
            .lines()
            .filter(|l| l.starts_with("<rect") && l.contains("stroke=\"#222\"") && !l.contains("<text"))
            .map(|l| l.split(" x=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .next()
            .unwrap();
        assert_eq!(cx.len(), 1);
        assert!((sq - cx[0] - 2.5).abs() < 0.11, "circle {} square corner {sq}", cx[0]);
        assert_eq!(c.matches("stroke=\"#222\" stroke-width=\"0.8\"").count(), 2 + 2, "2 points + 2 legend markers");
        // With lines, markers come after every path (drawn on top).
        let line = |name: &str| LineSeries { name: name.into(), points: vec![(1.0, 2.0), (2.0, 3.0)] };
        let l = Chart::Line(LineChart {
            series: vec![line("a"), line("b")],
            style: LineStyle::Lines,
            ..match chart(LineStyle::Lines) {
                Chart::Line(l) => l,
                Chart::Bar(_) => unreachable!(),
            }
        })
        .to_svg();
        let last_line = l.rfind("stroke-width=\"2\"").expect("two lines");
        assert!(last_line < l.find("<circle").expect("markers"));
        assert!(chart(LineStyle::Points).reading().contains("side by side"));
    }

    #[test]
    fn step_chart_is_one_path_per_series() {
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
        assert_eq!(c.matches("<path").count(), 1);
        assert!(c.contains("H") && c.ends_with("</svg>\n"));
    }
}
