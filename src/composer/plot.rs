//! The composer's figure (HOLMES figures 6, 7 and 11): validation ROC-AUC against latency for
//! every ensemble the searches profiled, their Pareto front, the latency budgets (or accuracy
//! floors) and each method's chosen ensemble, as a self-contained SVG written by hand.
//!
//! [`figure`] collects the points and markers from the rows of [`compose`](super::compose);
//! [`report`](super::report) writes the SVG as `pareto.svg`.

use std::collections::HashMap;
use std::fmt::Write;

use crate::core::svg::escape as esc;

use super::compose::Row;
use super::search::Goal;

/// One profiled ensemble: `(latency ms, accuracy)`.
pub(crate) type Point = (f64, f64);

/// A method's chosen ensemble for one goal.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Marker {
    pub(crate) method: String,
    /// The goal it answers, e.g. `120 ms` or `AUC 0.95`.
    pub(crate) goal: String,
    pub(crate) latency_ms: f64,
    pub(crate) accuracy: f64,
}

/// What to draw.
#[derive(Debug, Clone, Default)]
pub(crate) struct Figure {
    pub(crate) points: Vec<Point>,
    /// Latency budgets: vertical lines.
    pub(crate) budgets_ms: Vec<f64>,
    /// Accuracy floors of the dual: horizontal lines.
    pub(crate) floors: Vec<f64>,
    pub(crate) markers: Vec<Marker>,
    /// The methods in legend order (their colour and shape follow it).
    pub(crate) methods: Vec<String>,
    pub(crate) title: String,
}

/// Indices of the Pareto-optimal points (no other point is at least as fast and at least as
/// accurate, and better in one), fastest first. Of equal points the first is kept; points
/// with a non-finite coordinate are left out.
pub(crate) fn pareto_front(points: &[Point]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].0.is_finite() && points[i].1.is_finite())
        .collect();
    // Fastest first; of equal latency the most accurate first; then input order.
    idx.sort_by(|&a, &b| {
        let (pa, pb) = (points[a], points[b]);
        pa.0.total_cmp(&pb.0)
            .then(pb.1.total_cmp(&pa.1))
            .then(a.cmp(&b))
    });
    let mut front = Vec::new();
    let mut best = f64::NEG_INFINITY;
    for i in idx {
        if points[i].1 > best {
            best = points[i].1;
            front.push(i);
        }
    }
    front
}

const W: f64 = 860.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728", "#8c564b", "#111111", "#e377c2",
];

/// An axis: data to pixels, linear or log10.
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    px0: f64,
    px1: f64,
}

impl Axis {
    fn new(lo: f64, hi: f64, log: bool, px0: f64, px1: f64) -> Axis {
        let (lo, hi) = if log {
            (lo.log10(), hi.log10())
        } else {
            (lo, hi)
        };
        let (lo, hi) = if hi - lo < 1e-12 {
            (lo - 0.5, hi + 0.5)
        } else {
            (lo, hi)
        };
        Axis {
            lo,
            hi,
            log,
            px0,
            px1,
        }
    }

    fn px(&self, v: f64) -> f64 {
        let v = if self.log { v.max(1e-300).log10() } else { v };
        self.px0 + (v - self.lo) / (self.hi - self.lo) * (self.px1 - self.px0)
    }

    /// Tick values: decades (and 2, 5 between) on a log axis, round steps on a linear one.
    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut t = Vec::new();
            for e in self.lo.floor() as i32..=self.hi.ceil() as i32 {
                for m in [1.0, 2.0, 5.0] {
                    let v = m * 10f64.powi(e);
                    let l = v.log10();
                    if l >= self.lo - 1e-9 && l <= self.hi + 1e-9 {
                        t.push(v);
                    }
                }
            }
            t
        } else {
            let raw = (self.hi - self.lo) / 6.0;
            let mag = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 5.0, 10.0]
                .iter()
                .map(|m| m * mag)
                .find(|s| *s >= raw)
                .unwrap_or(10.0 * mag);
            let mut v = (self.lo / step).ceil() * step;
            let mut t = Vec::new();
            while v <= self.hi + 1e-9 {
                t.push(v);
                v += step;
            }
            t
        }
    }
}

fn label(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .into()
    } else {
        format!("{v:.4}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .into()
    }
}

/// A marker shape (0: circle, 1: square, 2: diamond, 3: triangle, 4: star, ...) at `(x, y)`.
fn shape(k: usize, x: f64, y: f64, colour: &str) -> String {
    let r = 7.0;
    let style = format!("fill=\"{colour}\" stroke=\"#000\" stroke-width=\"1\"");
    match k % 5 {
        0 => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r}\" {style}/>"),
        1 => format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{}\" height=\"{}\" {style}/>",
            x - r * 0.85,
            y - r * 0.85,
            r * 1.7,
            r * 1.7
        ),
        2 => format!(
            "<path d=\"M{x:.1} {:.1} L{:.1} {y:.1} L{x:.1} {:.1} L{:.1} {y:.1} Z\" {style}/>",
            y - r,
            x + r,
            y + r,
            x - r
        ),
        3 => format!(
            "<path d=\"M{x:.1} {:.1} L{:.1} {:.1} L{:.1} {:.1} Z\" {style}/>",
            y - r,
            x + r,
            y + r * 0.8,
            x - r,
            y + r * 0.8
        ),
        _ => {
            let pts: Vec<String> = (0..10)
                .map(|i| {
                    let a = std::f64::consts::PI * (i as f64 / 5.0 - 0.5);
                    let rr = if i % 2 == 0 { r * 1.3 } else { r * 0.55 };
                    format!("{:.1},{:.1}", x + rr * a.cos(), y + rr * a.sin())
                })
                .collect();
            format!("<polygon points=\"{}\" {style}/>", pts.join(" "))
        }
    }
}

/// One panel: its pixel box and axes.
struct Panel {
    x: Axis,
    y: Axis,
    /// `""` for the main panel, `"zoom-"` for the close-up (prefixes the element classes).
    class: &'static str,
    clip: &'static str,
}

impl Panel {
    fn top(&self) -> f64 {
        self.y.px1
    }
    fn bottom(&self) -> f64 {
        self.y.px0
    }
}

/// Draws one panel: grid and ticks, points, the Pareto front, constraints and markers.
fn draw_panel(s: &mut String, f: &Figure, points: &[Point], front: &[usize], p: &Panel) {
    let (x, y, c) = (&p.x, &p.y, p.class);
    let (x0, x1, y0, y1) = (x.px0, x.px1, p.bottom(), p.top());
    let _ = writeln!(
        s,
        "<clipPath id=\"{}\"><rect x=\"{x0}\" y=\"{y1}\" width=\"{}\" height=\"{}\"/></clipPath>",
        p.clip,
        x1 - x0,
        y0 - y1
    );
    let _ = writeln!(s, "<g class=\"{c}axes\" stroke=\"#000\">");
    for t in x.ticks() {
        let px = x.px(t);
        let _ = writeln!(
            s,
            "<line x1=\"{px:.1}\" y1=\"{y0}\" x2=\"{px:.1}\" y2=\"{y1}\" stroke=\"#eee\"/><text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\" stroke=\"none\">{}</text>",
            y0 + 16.0,
            label(t)
        );
    }
    for t in y.ticks() {
        let py = y.px(t);
        let _ = writeln!(
            s,
            "<line x1=\"{x0}\" y1=\"{py:.1}\" x2=\"{x1}\" y2=\"{py:.1}\" stroke=\"#eee\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" stroke=\"none\">{}</text>",
            x0 - 6.0,
            py + 4.0,
            label(t)
        );
    }
    let _ = writeln!(s, "<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\"/>");
    let _ = writeln!(s, "<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\"/>");
    let _ = writeln!(
        s,
        "<text transform=\"translate(18 {:.1}) rotate(-90)\" text-anchor=\"middle\" stroke=\"none\">validation ROC-AUC{}</text>",
        (y0 + y1) / 2.0,
        if c.is_empty() { "" } else { " (close-up)" }
    );
    let _ = writeln!(s, "</g>");
    let _ = writeln!(s, "<g clip-path=\"url(#{})\">", p.clip);
    // Every profiled ensemble in range, once per pixel (thousands overlap).
    let _ = writeln!(
        s,
        "<g class=\"{c}points\" fill=\"#888\" fill-opacity=\"0.35\">"
    );
    let (lo, hi) = (y.lo, y.hi);
    let mut drawn = std::collections::HashSet::new();
    for pt in points.iter().filter(|pt| pt.1 >= lo && pt.1 <= hi) {
        let (px, py) = (x.px(pt.0), y.px(pt.1));
        if drawn.insert((px.round() as i64, py.round() as i64)) {
            let _ = writeln!(
                s,
                "<circle class=\"{c}point\" cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"2.2\"/>"
            );
        }
    }
    let _ = writeln!(s, "</g>");
    // The Pareto front as a staircase: nothing above-left of it was found.
    let mut stairs = Vec::new();
    for (k, &i) in front.iter().enumerate() {
        let (px, py) = (x.px(points[i].0), y.px(points[i].1));
        if k > 0 {
            stairs.push(format!("{px:.1},{:.1}", y.px(points[front[k - 1]].1)));
        }
        stairs.push(format!("{px:.1},{py:.1}"));
    }
    if let Some(&last) = front.last() {
        stairs.push(format!("{x1:.1},{:.1}", y.px(points[last].1)));
    }
    let _ = writeln!(
        s,
        "<polyline class=\"{c}pareto\" points=\"{}\" fill=\"none\" stroke=\"#2ca02c\" stroke-width=\"1.8\"/>",
        stairs.join(" ")
    );
    for &i in front {
        let _ = writeln!(
            s,
            "<circle class=\"{c}pareto-point\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#2ca02c\"/>",
            x.px(points[i].0),
            y.px(points[i].1)
        );
    }
    // Constraints.
    for &b in f.budgets_ms.iter().filter(|b| b.is_finite()) {
        let px = x.px(b);
        let _ = writeln!(
            s,
            "<g class=\"{c}budget\"><line x1=\"{px:.1}\" y1=\"{y0}\" x2=\"{px:.1}\" y2=\"{y1}\" stroke=\"#d62728\" stroke-dasharray=\"6 4\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#d62728\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\" text-anchor=\"end\" transform=\"rotate(-90 {:.1} {:.1})\">budget {b:.1} ms</text></g>",
            px - 4.0,
            y1 + 4.0,
            px - 4.0,
            y1 + 4.0,
        );
    }
    for &a in &f.floors {
        let py = y.px(a);
        let _ = writeln!(
            s,
            "<g class=\"{c}floor\"><line x1=\"{x0}\" y1=\"{py:.1}\" x2=\"{x1}\" y2=\"{py:.1}\" stroke=\"#d62728\" stroke-dasharray=\"6 4\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#d62728\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\">ROC-AUC {}</text></g>",
            x0 + 4.0,
            py - 4.0,
            label(a)
        );
    }
    // Each method's choice.
    let slot = |m: &str| f.methods.iter().position(|x| x == m).unwrap_or(0);
    for m in &f.markers {
        if !(m.latency_ms.is_finite() && m.latency_ms > 0.0) {
            continue;
        }
        let k = slot(&m.method);
        let _ = writeln!(
            s,
            "<g class=\"{c}marker\" data-method=\"{}\" data-goal=\"{}\"><title>{} for {}: ROC-AUC {:.4}, {:.1} ms</title>{}</g>",
            esc(&m.method),
            esc(&m.goal),
            esc(&m.method),
            esc(&m.goal),
            m.accuracy,
            m.latency_ms,
            shape(
                k,
                x.px(m.latency_ms),
                y.px(m.accuracy),
                COLOURS[k % COLOURS.len()]
            )
        );
    }
    let _ = writeln!(s, "</g>");
}

/// The figure as an SVG document: every point in the main panel and, when the chosen
/// ensembles sit in a narrow band of it, a close-up of that band below. The latency axis is
/// logarithmic when the points span more than a factor of 20; points with an unbounded
/// latency are left out, and points that round to the pixel of one already drawn are not
/// drawn again.
pub(crate) fn svg(f: &Figure) -> String {
    let finite: Vec<Point> = f
        .points
        .iter()
        .copied()
        .filter(|p| p.0.is_finite() && p.1.is_finite() && p.0 > 0.0)
        .collect();
    let front = pareto_front(&finite);
    let bounds = |v: &mut dyn Iterator<Item = f64>| {
        v.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        })
    };
    let markers: Vec<&Marker> = f
        .markers
        .iter()
        .filter(|m| m.latency_ms.is_finite() && m.latency_ms > 0.0)
        .collect();
    let (xlo, xhi) = bounds(
        &mut finite
            .iter()
            .map(|p| p.0)
            .chain(f.budgets_ms.iter().copied().filter(|b| b.is_finite()))
            .chain(markers.iter().map(|m| m.latency_ms)),
    );
    let (xlo, xhi) = if xlo.is_finite() {
        (xlo, xhi)
    } else {
        (1.0, 10.0)
    };
    let (ylo, yhi) = bounds(
        &mut finite
            .iter()
            .map(|p| p.1)
            .chain(f.floors.iter().copied())
            .chain(markers.iter().map(|m| m.accuracy)),
    );
    let (ylo, yhi) = if ylo.is_finite() {
        (ylo, yhi)
    } else {
        (0.0, 1.0)
    };
    let log = xlo > 0.0 && xhi / xlo > 20.0;
    let (xlo, xhi) = if log {
        (xlo / 1.25, xhi * 1.25)
    } else {
        let pad = (xhi - xlo).max(1e-9) * 0.05;
        ((xlo - pad).max(0.0), xhi + pad)
    };
    // The close-up: the chosen ensembles, the floors and the front's top within the budgets.
    let (zlo, zhi) = bounds(
        &mut markers
            .iter()
            .map(|m| m.accuracy)
            .chain(f.floors.iter().copied()),
    );
    let zpad = (zhi - zlo).max(2e-3) * 0.25;
    let (zlo, zhi) = (zlo - zpad, zhi + zpad);
    let zoom = zlo.is_finite() && (zhi - zlo) < 0.4 * (yhi - ylo);
    let main_h = 440.0;
    let zoom_h = if zoom { 300.0 } else { 0.0 };
    let h = TOP + main_h + BOTTOM + if zoom { zoom_h + BOTTOM } else { 0.0 };
    let ypad = (yhi - ylo).max(1e-3) * 0.05;
    let x = || Axis::new(xlo, xhi, log, LEFT, W - RIGHT);
    let main = Panel {
        x: x(),
        y: Axis::new(ylo - ypad, yhi + ypad, false, TOP + main_h, TOP),
        class: "",
        clip: "main",
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h}\" viewBox=\"0 0 {W} {h}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(s, "<title>{}</title>", esc(&f.title));
    let _ = writeln!(s, "<rect width=\"{W}\" height=\"{h}\" fill=\"#fff\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{LEFT}\" y=\"24\" font-size=\"15\">{}</text>",
        esc(&f.title)
    );
    draw_panel(&mut s, f, &finite, &front, &main);
    let mut label_y = TOP + main_h + 40.0;
    if zoom {
        let top = TOP + main_h + BOTTOM;
        let panel = Panel {
            x: x(),
            y: Axis::new(zlo, zhi, false, top + zoom_h, top),
            class: "zoom-",
            clip: "zoom",
        };
        draw_panel(&mut s, f, &finite, &front, &panel);
        label_y = top + zoom_h + 40.0;
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{label_y:.1}\" text-anchor=\"middle\">latency, ms{}</text>",
        (LEFT + W - RIGHT) / 2.0,
        if log { " (log scale)" } else { "" }
    );
    // The legend.
    let _ = writeln!(s, "<g class=\"legend\">");
    let lx = W - RIGHT + 24.0;
    for (k, m) in f.methods.iter().enumerate() {
        let ly = TOP + 20.0 + 22.0 * k as f64;
        let _ = writeln!(
            s,
            "{}<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            shape(k, lx, ly, COLOURS[k % COLOURS.len()]),
            lx + 16.0,
            ly + 4.0,
            esc(m)
        );
    }
    let ly = TOP + 20.0 + 22.0 * f.methods.len() as f64;
    let _ = writeln!(
        s,
        "<circle cx=\"{lx:.1}\" cy=\"{ly:.1}\" r=\"2.2\" fill=\"#888\"/><text x=\"{:.1}\" y=\"{:.1}\">profiled ensemble</text>",
        lx + 16.0,
        ly + 4.0
    );
    let _ = writeln!(
        s,
        "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#2ca02c\" stroke-width=\"1.8\"/><text x=\"{:.1}\" y=\"{:.1}\">Pareto front</text>",
        lx - 7.0,
        ly + 22.0,
        lx + 7.0,
        ly + 22.0,
        lx + 16.0,
        ly + 26.0
    );
    let _ = writeln!(s, "</g>\n</svg>");
    s
}

/// The figure of search results: every ensemble profiled by any search (once), the goals'
/// budgets or floors, and each row's chosen ensemble.
pub(crate) fn figure(rows: &[Row], goals: &[Goal], title: String) -> Figure {
    let mut seen: HashMap<&str, (f64, f64)> = HashMap::new();
    for step in rows.iter().flat_map(|row| &row.trajectory) {
        seen.entry(step.members.as_str())
            .or_insert((step.latency_ms, step.accuracy));
    }
    let mut points: Vec<(f64, f64)> = seen.into_values().collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut methods: Vec<String> = Vec::new();
    for row in rows {
        if !methods.contains(&row.method) {
            methods.push(row.method.clone());
        }
    }
    Figure {
        points,
        budgets_ms: goals
            .iter()
            .filter_map(|g| match g {
                Goal::MaxAccuracy { budget_ms } => Some(*budget_ms),
                Goal::MinLatency { .. } => None,
            })
            .collect(),
        floors: goals
            .iter()
            .filter_map(|g| match g {
                Goal::MinLatency { min_accuracy } => Some(*min_accuracy),
                Goal::MaxAccuracy { .. } => None,
            })
            .collect(),
        markers: rows
            .iter()
            .filter(|row| !row.members.is_empty())
            .map(|row| Marker {
                method: row.method.clone(),
                goal: row.goal.to_string(),
                latency_ms: row.latency_ms,
                accuracy: row.val_roc_auc,
            })
            .collect(),
        methods,
        title,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pareto_front_of_a_hand_made_set() {
        let p = [
            (10.0, 0.80),          // 0: front (fastest)
            (20.0, 0.85),          // 1: front
            (15.0, 0.70),          // 2: dominated by 0
            (30.0, 0.85),          // 3: dominated by 1 (same accuracy, slower)
            (40.0, 0.90),          // 4: front
            (20.0, 0.85),          // 5: equal to 1: the first is kept
            (5.0, 0.60),           // 6: front (fastest of all)
            (50.0, 0.89),          // 7: dominated by 4
            (f64::INFINITY, 0.99), // 8: unbounded latency, left out
            (12.0, 0.80),          // 9: dominated by 0 (same accuracy, slower)
        ];
        assert_eq!(pareto_front(&p), vec![6, 0, 1, 4]);
        assert!(pareto_front(&[]).is_empty());
        // Equal latency: the more accurate only.
        assert_eq!(pareto_front(&[(1.0, 0.5), (1.0, 0.7)]), vec![1]);
    }

    #[test]
    fn the_svg_has_points_front_budgets_and_one_marker_per_method() {
        let methods: Vec<String> = ["holmes", "rd", "exact"].map(String::from).to_vec();
        let f = Figure {
            points: vec![(1.0, 0.7), (3.0, 0.8), (100.0, 0.9), (50.0, 0.6)],
            budgets_ms: vec![10.0, 80.0],
            floors: vec![],
            markers: methods
                .iter()
                .map(|m| Marker {
                    method: m.clone(),
                    goal: "10 ms".into(),
                    latency_ms: 3.0,
                    accuracy: 0.8,
                })
                .collect(),
            methods: methods.clone(),
            title: "a <test> & more".into(),
        };
        let s = svg(&f);
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(s.trim_end().ends_with("</svg>"));
        assert!(s.contains("a &lt;test&gt; &amp; more") && !s.contains("<test>"));
        assert_eq!(s.matches("class=\"point\"").count(), 4);
        assert_eq!(s.matches("class=\"pareto-point\"").count(), 3);
        assert_eq!(s.matches("<polyline class=\"pareto\"").count(), 1);
        assert_eq!(s.matches("class=\"budget\"").count(), 2);
        assert!(s.contains("budget 80.0 ms") && s.contains("(log scale)"));
        for m in &methods {
            let marker = format!("class=\"marker\" data-method=\"{m}\"");
            assert_eq!(s.matches(&marker).count(), 1, "{m}");
        }
        // The chosen ensembles sit in a narrow band: a close-up repeats them.
        assert_eq!(s.matches("class=\"zoom-marker\"").count(), 3);
        assert_eq!(s.matches("class=\"zoom-point\"").count(), 1);
        // Tags balance (a cheap well-formedness check).
        let opens = s.matches("<g").count();
        assert_eq!(opens, s.matches("</g>").count());
        assert_eq!(s.matches('<').count(), s.matches('>').count());
    }
}
