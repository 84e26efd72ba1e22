//! What `holmes evaluate` shows: a text table for people at the terminal, and a report folder
//! holding the evaluation as JSON and two self-contained SVG figures (time to alarm as a
//! cumulative distribution, and the window ROC curve), as the composer's report does.

use std::fmt::Write;
use std::path::Path;

use super::episodes::time_to_alarm;
use super::{Condition, EvaluateError, Evaluation, LeadSet};
use crate::alarm::matching::AlarmTiming;
use crate::core::svg::escape as esc;

/// The evaluation as text: the rule per detector, one line per condition, then the clean
/// per-record table of the ensemble.
pub fn text(e: &Evaluation) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} part{}: {} records ({:.1} h monitored outside episodes); windows of {} s every {} s; members: {} ({})",
        e.part,
        match e.leads {
            LeadSet::Both => String::new(),
            set => format!(", {}", set.words()),
        },
        e.records.len(),
        e.detectors
            .first()
            .and_then(|d| d.conditions.first())
            .map_or(0.0, |c| c.summary.monitored_ms as f64 / 3.6e6),
        e.window_secs,
        e.hop_secs,
        e.members
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        match e.primary_share {
            Some(w) => format!("the primary lead's members carry {w} of the score"),
            None => "their mean".into(),
        }
    );
    for d in &e.detectors {
        let _ = write!(s, "\n{}: alarm {}", d.detector, d.rule.words());
        match &d.chosen_on_validation {
            Some(c) => {
                let bound = match e.delay_limits {
                    Some(l) => format!(
                        " within a time to alarm of {:.0} s median, {:.0} s p90",
                        l.median_ms as f64 / 1000.0,
                        l.p90_ms as f64 / 1000.0
                    ),
                    None => String::new(),
                };
                let secs = |ms: Option<i64>| opt(ms.map(|m| m as f64 / 1000.0), 1);
                let _ = writeln!(
                    s,
                    " (chosen on {} validation records for episode Se {:.2}{bound}: reached {}, \
                     FA/h {}, time to alarm {} / {} s{})",
                    e.validation_records.len(),
                    e.target_sensitivity,
                    opt(c.sensitivity, 3),
                    opt(c.false_alarms_per_hour, 2),
                    secs(c.median_delay_ms),
                    secs(c.p90_delay_ms),
                    if c.met_target { "" } else { "; target not met" }
                );
            }
            None => {
                let _ = writeln!(s, " (given)");
            }
        }
        let _ = writeln!(
            s,
            "  {:<10} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>5}/{:<5} {:>7} {:>7} {:>7} {:>7} {:>7}",
            "condition",
            "ROC",
            "PR",
            "ESe",
            "E+P",
            "DSe",
            "D+P",
            "det",
            "epis",
            "med s",
            "p90 s",
            "max s",
            "FA",
            "FA/h"
        );
        for c in &d.conditions {
            line(&mut s, c);
        }
        for c in d.conditions.iter().take(1) {
            let sum = &c.summary;
            let paced: Vec<&str> = c
                .records
                .iter()
                .filter(|r| r.comparison.paced)
                .map(|r| r.record.as_str())
                .collect();
            let paced = if paced.is_empty() {
                "none".to_owned()
            } else {
                paced.join(", ")
            };
            let unpaced_label = format!("whole records, paced records left out ({paced})");
            let ec57_label = format!("EC57's record set (paced left out: {paced}) from 5:00");
            for (period, g, f, i) in [
                (
                    "whole records",
                    &sum.gross,
                    &sum.gross_figures,
                    &sum.gross_intervals,
                ),
                (
                    "EC57's test period (from 5:00)",
                    &sum.test_period,
                    &sum.test_period_figures,
                    &sum.test_period_intervals,
                ),
                (
                    &unpaced_label,
                    &sum.unpaced,
                    &sum.unpaced_figures,
                    &sum.unpaced_intervals,
                ),
                (
                    &ec57_label,
                    &sum.ec57,
                    &sum.ec57_figures,
                    &sum.ec57_intervals,
                ),
            ] {
                let _ = writeln!(
                    s,
                    "  clean, {period}: ESe {} = {}/{} (95 % Wilson interval {}), E+P {} = {}/{} ({})",
                    opt(f.se, 3),
                    g.tp_s,
                    g.tp_s + g.fn_,
                    interval(i.se),
                    opt(f.pp, 3),
                    g.tp_p,
                    g.tp_p + g.fp,
                    interval(i.pp)
                );
            }
            for (kind, t) in &c.by_kind {
                let _ = writeln!(
                    s,
                    "  clean {kind}: {} episodes, {} raised, {} already on, {} missed; time to alarm median {} s, p90 {} s, max {} s",
                    t.episodes,
                    t.raised,
                    t.already_on,
                    t.missed,
                    opt(t.median_s, 1),
                    opt(t.p90_s, 1),
                    opt(t.max_s, 1)
                );
                if let Some(k) = c.ec57_by_kind.get(kind) {
                    let _ = writeln!(
                        s,
                        "  clean {kind}, by EC57's overlap: ESe {} = {}/{} (95 % Wilson interval {})",
                        opt(k.se, 3),
                        k.detected,
                        k.episodes,
                        interval(k.interval)
                    );
                }
            }
        }
        for c in &d.conditions {
            let f = &c.false_alarm_causes;
            let _ = writeln!(
                s,
                "  {} false alarms: {} = {}",
                c.snr_db.map_or("clean".into(), |db| format!("em {db} dB")),
                f.total(),
                f.words()
            );
        }
    }
    pooling_trials(&mut s, e);
    if let Some(m) = &e.monitor_alarms {
        s.push_str(&super::monitor_alarms::text(m));
    }
    if let Some(sp) = &e.spliced {
        s.push_str(&super::spliced::text(sp));
    }
    s.push_str(&super::spliced_alarms::pooled_text(&e.proxy_pooled));
    s.push_str(&super::textbook::text(&e.textbook_monitor));
    if let Some(c) = e.detectors.first().and_then(|d| d.conditions.first()) {
        let _ = writeln!(
            s,
            "\nensemble, clean, per record:\n  {:<14} {:>6} {:>5} {:>5} {:>5} {:>5} {:>8} {:>7}",
            "record", "hours", "epis", "det", "alarm", "FA", "FA/h", "med s"
        );
        for r in &c.records {
            let x = &r.comparison;
            let timings: Vec<AlarmTiming> = x.timings.iter().map(|t| t.timing).collect();
            let median = time_to_alarm(&timings).median_s;
            let _ = writeln!(
                s,
                "  {:<14} {:>6.2} {:>5} {:>5} {:>5} {:>5} {:>8} {:>7}",
                r.record,
                x.monitored_ms as f64 / 3.6e6,
                x.counts.tp_s + x.counts.fn_,
                x.counts.tp_s,
                x.counts.tp_p + x.counts.fp,
                x.false_alarms,
                opt(x.false_alarms_per_hour, 2),
                opt(median, 1)
            );
        }
    }
    s
}

/// The poolings tried on validation: each one's rule, what the search counted and EC57's
/// episode figures under it.
fn pooling_trials(s: &mut String, e: &Evaluation) {
    if e.pooling_trials.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\npoolings tried on validation (the primary lead's share; episodes detected and false alarms as the rule search counts them; EC57 ESe and E+P):\n  {:<8} {:>5} {:>3} {:>3} {:>5}/{:<5} {:>4} {:>6} {:>6}",
        "share", "on", "k", "n", "det", "epis", "FA", "ESe", "E+P"
    );
    for t in &e.pooling_trials {
        let c = &t.choice;
        let _ = writeln!(
            s,
            "  {:<8} {:>5.2} {:>3} {:>3} {:>5}/{:<5} {:>4} {:>6} {:>6}",
            t.primary_share.map_or("mean".to_owned(), |w| w.to_string()),
            c.rule.on,
            c.rule.k,
            c.rule.n,
            c.detected,
            c.episodes,
            c.false_alarms,
            opt(t.ec57_se, 3),
            opt(t.ec57_pp, 3)
        );
    }
}

fn line(s: &mut String, c: &Condition) {
    let name = c
        .snr_db
        .map_or("clean".to_owned(), |d| format!("em {d} dB"));
    let f = &c.summary.gross_figures;
    let t = &c.summary.time_to_alarm;
    let _ = writeln!(
        s,
        "  {:<10} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>5}/{:<5} {:>7} {:>7} {:>7} {:>7} {:>7}",
        name,
        opt(c.windows.roc_auc, 4),
        opt(c.windows.pr_auc, 4),
        opt(f.se, 3),
        opt(f.pp, 3),
        opt(f.dse, 3),
        opt(f.dpp, 3),
        t.raised + t.already_on,
        t.episodes,
        opt(t.median_s, 1),
        opt(t.p90_s, 1),
        opt(t.max_s, 1),
        c.summary.false_alarms,
        opt(c.summary.false_alarms_per_hour, 2)
    );
}

fn interval(v: Option<[f64; 2]>) -> String {
    v.map_or("-".into(), |[lo, hi]| format!("{lo:.3}-{hi:.3}"))
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// Writes `evaluation.json`, `time_to_alarm.svg` and `roc.svg` into `dir` (created), and
/// `spliced.svg` (a spliced run beside a real one) with `--spliced`.
pub fn write_folder(e: &Evaluation, dir: &Path) -> Result<(), EvaluateError> {
    let io = |source| EvaluateError::Io {
        path: dir.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let json = serde_json::to_string_pretty(e).expect("an evaluation serialises");
    std::fs::write(dir.join("evaluation.json"), json).map_err(io)?;
    std::fs::write(dir.join("time_to_alarm.svg"), time_to_alarm_svg(e)).map_err(io)?;
    std::fs::write(dir.join("roc.svg"), roc_svg(e)).map_err(io)?;
    if let Some(svg) = &e.spliced_svg {
        std::fs::write(dir.join("spliced.svg"), svg).map_err(io)?;
    }
    Ok(())
}

/// Colours of the curves, in order.
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];

/// Curves to draw: the clean condition and the 6 dB stress level of each detector, when
/// present.
fn drawn(e: &Evaluation) -> Vec<(String, &Condition)> {
    let mut out = Vec::new();
    for d in &e.detectors {
        for c in &d.conditions {
            if c.snr_db.is_none() || c.snr_db == Some(6.0) {
                let what = c.snr_db.map_or("clean".into(), |x| format!("em {x} dB"));
                out.push((format!("{} ({what})", d.detector), c));
            }
        }
    }
    out
}

/// The share of episodes alarmed within t seconds of onset, against t (0 to 30 s); episodes
/// missed never reach it, those already on count at 0.
fn time_to_alarm_svg(e: &Evaluation) -> String {
    let series = drawn(e)
        .into_iter()
        .map(|(name, c)| {
            let timings: Vec<AlarmTiming> = c
                .records
                .iter()
                .flat_map(|r| r.comparison.timings.iter().map(|t| t.timing))
                .collect();
            let n = timings.len().max(1) as f64;
            let mut delays: Vec<f64> = timings
                .iter()
                .filter_map(|t| match *t {
                    AlarmTiming::Raised { delay_ms } => Some(delay_ms as f64 / 1000.0),
                    AlarmTiming::AlreadyOn => Some(0.0),
                    AlarmTiming::Missed => None,
                })
                .collect();
            delays.sort_by(f64::total_cmp);
            let mut pts = vec![(0.0, 0.0)];
            for (i, &d) in delays.iter().enumerate() {
                let d = d.min(30.0);
                pts.push((d, i as f64 / n));
                pts.push((d, (i + 1) as f64 / n));
            }
            pts.push((30.0, delays.len() as f64 / n));
            (name, pts)
        })
        .collect::<Vec<_>>();
    chart(
        "Time to alarm from episode onset",
        "seconds after onset",
        "share of episodes alarmed",
        30.0,
        &[6.0, 10.0],
        &series,
    )
}

fn roc_svg(e: &Evaluation) -> String {
    let series: Vec<(String, Vec<(f64, f64)>)> = drawn(e)
        .into_iter()
        .map(|(name, c)| {
            let auc = opt(c.windows.roc_auc, 3);
            (format!("{name}, AUC {auc}"), c.windows.roc_curve.clone())
        })
        .collect();
    chart(
        "Window ROC (hops labelled by their end)",
        "false positive rate",
        "true positive rate",
        1.0,
        &[],
        &series,
    )
}

/// The ROC curve of `scores` against `labels`, thinned to at most about 400 points.
pub fn roc_curve(labels: &[bool], scores: &[f32]) -> Vec<(f64, f64)> {
    let pos = labels.iter().filter(|&&l| l).count();
    let neg = labels.len() - pos;
    if pos == 0 || neg == 0 {
        return Vec::new();
    }
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let (mut tp, mut fp) = (0usize, 0usize);
    let mut pts = vec![(0.0, 0.0)];
    let every = (idx.len() / 400).max(1);
    for (i, &k) in idx.iter().enumerate() {
        if labels[k] {
            tp += 1;
        } else {
            fp += 1;
        }
        let last_of_tie = idx.get(i + 1).is_none_or(|&n| scores[n] != scores[k]);
        if last_of_tie && (i % every == 0 || i + 1 == idx.len()) {
            pts.push((fp as f64 / neg as f64, tp as f64 / pos as f64));
        }
    }
    pts
}

/// A line chart: x from 0 to `x_max`, y from 0 to 1, dashed vertical marks at `marks`.
fn chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    x_max: f64,
    marks: &[f64],
    series: &[(String, Vec<(f64, f64)>)],
) -> String {
    let (w, h, l, r, t, b) = (640.0, 420.0, 60.0, 20.0, 40.0, 50.0);
    let legend_h = 18.0 * series.len() as f64;
    let (pw, ph) = (w - l - r, h - t - b);
    let x = |v: f64| l + v / x_max * pw;
    let y = |v: f64| t + (1.0 - v) * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{}" font-family="sans-serif" font-size="12">"#,
        h + legend_h
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    for i in 0..=5 {
        let f = i as f64 / 5.0;
        let _ = writeln!(
            s,
            r##"<line x1="{l}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{f:.1}</text>"##,
            l + pw,
            l - 6.0,
            y(f) + 4.0,
            yy = y(f)
        );
        let xv = f * x_max;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            x(xv),
            t + ph + 16.0,
            if x_max >= 10.0 {
                format!("{xv:.0}")
            } else {
                format!("{xv:.1}")
            }
        );
    }
    for &m in marks {
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{t}" y2="{}" stroke="#888" stroke-dasharray="4 3"/>"##,
            t + ph,
            xx = x(m)
        );
    }
    let _ = writeln!(
        s,
        r#"<rect x="{l}" y="{t}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        l + pw / 2.0,
        t + ph + 36.0,
        esc(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        t + ph / 2.0,
        esc(y_label)
    );
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|&(a, v)| format!("{:.1},{:.1}", x(a.min(x_max)), y(v.clamp(0.0, 1.0))))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="1.8" points="{}"/>"#,
            path.join(" ")
        );
        let ly = h + 18.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{l}" x2="{}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            l + 24.0,
            l + 30.0,
            ly + 4.0,
            esc(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roc_curve_by_hand() {
        let labels = [true, false, true, false];
        let scores = [0.9, 0.8, 0.3, 0.1];
        assert_eq!(
            roc_curve(&labels, &scores),
            vec![(0.0, 0.0), (0.0, 0.5), (0.5, 0.5), (0.5, 1.0), (1.0, 1.0)]
        );
        assert!(roc_curve(&[true], &[0.5]).is_empty());
    }

    #[test]
    fn charts_are_well_formed_svg() {
        let svg = chart(
            "a <b>",
            "x",
            "y",
            30.0,
            &[6.0],
            &[("one & two".into(), vec![(0.0, 0.0), (40.0, 2.0)])],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("a &lt;b&gt;") && svg.contains("one &amp; two"));
        // Points beyond the axes are clamped to them.
        assert!(svg.contains(&format!("{:.1},{:.1}", 620.0, 40.0)));
    }
}
