//! Spliced short runs (`holmes evaluate --spliced`): each record of the reported part that
//! holds annotated ventricular beats gets runs of its own patient's ventricular beats spliced
//! into its sinus rhythm ([`splice`]: 5-30 beats at 100-250/min), and salvos of 2-4 beats and
//! bigeminy as hard negatives, deterministic from a seed. The spliced records are replayed
//! through the served ensemble (with the zoo's beat counter where it serves) and the classical
//! detector, each under the rule chosen on validation, and each event judged:
//!
//! - a **run** is detected when an alarm is raised at a hop from its first beat to
//!   [`DETECT_WITHIN_SECS`] after its fifth (the label's confirmation); an alarm already on
//!   at its first beat is counted apart, not as a detection;
//! - a **salvo** or **bigeminy** draws a false alarm when one is raised from its first
//!   ventricular beat to [`DETECT_WITHIN_SECS`] after it ends.
//!
//! Beside them, each record gets a second spliced copy with shaped runs only (under way at
//! the alarm, slow, bursts, after a flat start: `training::dataset::RunShape`), drawn from
//! the seed's own variant; these are counted by shape and leave the plain events' figures
//! as they were.
//!
//! The patients are held out (the reported part), so these are figures on runs no model or
//! rule was fitted on, in numbers no annotated database holds.

use serde::Serialize;

use crate::alarm::{AlarmRule, alarm_episodes};
use crate::core::metrics::roc_auc;
use crate::core::stats::percentile;
use crate::core::stats::wilson_interval;
use crate::core::svg::escape as esc;
use crate::core::window::SAMPLE_RATE_HZ;
use crate::training::dataset::{RecordData, RunShape, SpliceKind, SpliceMix, Spliced, splice};

use super::EvaluateError;
use super::replay::{Detectors, Replay, replay};
use super::spliced_alarms::{self, Count, EventAlarm, ShapeRow, SplicedAdjudication};

/// A run counts as detected when an alarm is raised this long after its fifth beat at most,
/// s.
pub const DETECT_WITHIN_SECS: i64 = 10;
/// Rate bands of the report, beats/min (the last one closed).
const RATE_BANDS: [(f64, f64); 3] = [(100.0, 150.0), (150.0, 200.0), (200.0, 250.0)];
/// Length bands of the report, beats.
const LENGTH_BANDS: [(usize, usize); 3] = [(5, 7), (8, 12), (13, 30)];

/// One band of the run table: lengths and rates.
#[derive(Debug, Clone, Serialize)]
pub struct Band {
    pub beats: (usize, usize),
    pub rate_bpm: (f64, f64),
    #[serde(flatten)]
    pub count: Count,
}

/// What one detector did on the spliced events.
#[derive(Debug, Clone, Serialize)]
pub struct SplicedFigures {
    /// Runs of 5-7 beats, of 8 or more, salvos of 2-4 beats (alarms on them are false), and
    /// bigeminy (alike).
    pub runs_5_7: Count,
    pub runs_8_plus: Count,
    pub salvos_2_4: Count,
    pub bigeminy: Count,
    /// Runs by length and rate.
    pub bands: Vec<Band>,
    /// Shaped runs detected, by shape (`paced`: the runs in paced records; the plain runs
    /// too).
    pub shapes: Vec<ShapeRow>,
    /// Runs whose first beat found an alarm already on (not counted detected).
    pub already_on: usize,
    /// From the fifth beat to the alarm, of the detected runs, s: median and p90.
    pub time_to_alarm_median_secs: Option<f64>,
    pub time_to_alarm_p90_secs: Option<f64>,
    /// How well the scores rank the runs above the salvos and bigeminy: the ROC-AUC of each
    /// event's highest score over the windows ending in the span its alarm is judged in (a
    /// run's first beat to [`DETECT_WITHIN_SECS`] after its fifth; a salvo's or bigeminy's
    /// first ventricular beat to as long after it ends). `None` without both kinds.
    pub ranking_roc_auc: Option<f64>,
}

/// The spliced-runs report: the served ensemble's figures at the top level (`runs_5_7`,
/// `runs_8_plus`, `salvos_2_4`, ...), the classical baseline's beside them.
#[derive(Debug, Clone, Serialize)]
pub struct SplicedReport {
    pub seed: u64,
    /// Records spliced, and the events placed in them.
    pub records: Vec<String>,
    pub events: usize,
    #[serde(flatten)]
    pub ensemble: SplicedFigures,
    pub ensemble_rule: AlarmRule,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classical: Option<SplicedFigures>,
    /// A proxy monitor's alarm at each event, and Holmes's opinions on them (where a beat
    /// classifier serves).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjudication: Option<SplicedAdjudication>,
    /// The proxy alarms behind `adjudication`, for pooling with the monitor's.
    #[serde(skip)]
    pub(crate) alarms: Vec<EventAlarm>,
}

/// One record's copies spliced from `seed` (where it can be spliced): its plain copy, then its
/// copy with shaped runs.
pub(crate) fn splice_copies(r: &RecordData, seed: u64) -> Vec<Spliced> {
    [
        splice(r, seed, SpliceMix::EVALUATION),
        splice(r, seed ^ SHAPES_SEED, SpliceMix::SHAPES),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The shaped runs' copies are drawn from `seed` xor this.
const SHAPES_SEED: u64 = 0x5348_4150_4553;

/// The part's records spliced from `seed` (those that can be): each record's plain copy, then
/// each record's copy with shaped runs, for the report and its figure.
pub(crate) fn splice_part(recs: &[RecordData], seed: u64) -> Vec<Spliced> {
    let shaped = recs
        .iter()
        .filter_map(|r| splice(r, seed ^ SHAPES_SEED, SpliceMix::SHAPES));
    splice_plain(recs, seed).into_iter().chain(shaped).collect()
}

/// The part's records' plain copies alone: runs, salvos and bigeminy in the proportions of
/// [`SpliceMix::EVALUATION`] (the operating point is chosen on these, where true alarms do
/// not outnumber false ones as the shaped runs would make them).
pub(crate) fn splice_plain(recs: &[RecordData], seed: u64) -> Vec<Spliced> {
    recs.iter()
        .filter_map(|r| splice(r, seed, SpliceMix::EVALUATION))
        .collect()
}

/// Replays the spliced records through `det` and judges every event under each detector's
/// rule (`rules`: the ensemble's, and the classical detector's where it is replayed); with
/// `det`'s beat classifier, Holmes's opinions on a proxy monitor's alarms at the events too,
/// confirmed at `confirm_at` ([`spliced_alarms`]).
pub(crate) fn evaluate(
    spliced: &[Spliced],
    seed: u64,
    window: usize,
    hop: usize,
    det: Detectors<'_>,
    rules: (AlarmRule, Option<AlarmRule>),
    confirm_at: f32,
) -> Result<SplicedReport, EvaluateError> {
    let (ensemble_rule, classical_rule) = rules;
    // `det`'s classifier forms the opinions on the proxy monitor's alarms, confirmed at
    // `confirm_at`; the replay counts no beats of its own (the ensemble's counter serves
    // inside it).
    let adjudicator = det.beats.map(|c| (c, confirm_at));
    let hop_ms = (hop * 1000 / SAMPLE_RATE_HZ) as i64;
    let det = Detectors {
        classical: det.classical && classical_rule.is_some(),
        beats: None,
        ..det
    };
    let mut reps = Vec::with_capacity(spliced.len());
    for s in spliced {
        reps.push(replay(&s.record, &s.record.leads, window, hop, det)?);
    }
    let ensemble = figures(
        spliced,
        &reps,
        Replay::ensemble_scores,
        ensemble_rule,
        hop_ms,
    )?;
    let classical = match classical_rule {
        Some(rule) if det.classical => Some(figures(
            spliced,
            &reps,
            Replay::classical_scores,
            rule,
            hop_ms,
        )?),
        _ => None,
    };
    let (adjudication, alarms) = adjudicator.map_or((None, Vec::new()), |(c, confirm_at)| {
        let pairs: Vec<(&Spliced, &Replay)> = spliced.iter().zip(&reps).collect();
        let alarms: Vec<EventAlarm> = spliced_alarms::opinions(&pairs, Replay::ensemble_scores, c)
            .into_iter()
            .map(|a| a.at(confirm_at))
            .collect();
        (Some(spliced_alarms::figures(&alarms, confirm_at)), alarms)
    });
    Ok(SplicedReport {
        seed,
        records: {
            // Each record once (its shaped copy follows its plain one).
            let mut keys: Vec<String> = Vec::new();
            for s in spliced {
                if !keys.contains(&s.record.key) {
                    keys.push(s.record.key.clone());
                }
            }
            keys
        },
        events: spliced.iter().map(|s| s.events.len()).sum(),
        ensemble,
        ensemble_rule,
        classical,
        adjudication,
        alarms,
    })
}

/// Judges every event of the spliced records by the alarms `rule` raises on `pick`'s scores.
fn figures(
    spliced: &[Spliced],
    reps: &[Replay],
    pick: fn(&Replay) -> &[Option<f32>],
    rule: AlarmRule,
    hop_ms: i64,
) -> Result<SplicedFigures, EvaluateError> {
    let judged: Vec<(&Spliced, &Replay, AlarmRule)> = spliced
        .iter()
        .zip(reps)
        .map(|(s, r)| (s, r, rule))
        .collect();
    figures_under(&judged, pick, hop_ms)
}

/// [`figures`] with a rule of its own for each spliced record (each fold's, in
/// cross-validation).
pub(crate) fn figures_under(
    judged: &[(&Spliced, &Replay, AlarmRule)],
    pick: fn(&Replay) -> &[Option<f32>],
    hop_ms: i64,
) -> Result<SplicedFigures, EvaluateError> {
    let ms = |samples: i64| samples * 1000 / SAMPLE_RATE_HZ as i64;
    let within = DETECT_WITHIN_SECS * 1000;
    let mut f = SplicedFigures {
        runs_5_7: Count::default(),
        runs_8_plus: Count::default(),
        salvos_2_4: Count::default(),
        bigeminy: Count::default(),
        bands: LENGTH_BANDS
            .iter()
            .flat_map(|&beats| {
                RATE_BANDS.iter().map(move |&rate_bpm| Band {
                    beats,
                    rate_bpm,
                    count: Count::default(),
                })
            })
            .collect(),
        shapes: Vec::new(),
        already_on: 0,
        time_to_alarm_median_secs: None,
        time_to_alarm_p90_secs: None,
        ranking_roc_auc: None,
    };
    let mut delays = Vec::new();
    // Runs detected by shape, and in paced records.
    let mut by_shape: Vec<(&'static str, Count)> = spliced_alarms::SHAPE_ROWS
        .into_iter()
        .map(|s| (s, Count::default()))
        .collect();
    let mut count_shape = |name: &str, detected: bool| {
        if let Some((_, c)) = by_shape.iter_mut().find(|(s, _)| *s == name) {
            c.add(detected);
        }
    };
    // Each event's highest score in its span, and whether it is a run.
    let (mut ranked, mut is_run) = (Vec::new(), Vec::new());
    for &(s, r, rule) in judged {
        let series: Vec<(i64, Option<f32>)> = r
            .ends_ms
            .iter()
            .copied()
            .zip(pick(r).iter().copied())
            .collect();
        let alarms = alarm_episodes(rule, hop_ms, &series)?;
        let highest_in = |a: i64, b: i64| {
            series
                .iter()
                .filter(|&&(t, _)| t >= a && t <= b)
                .filter_map(|&(_, v)| v)
                .fold(0.0f32, f32::max)
        };
        for e in &s.events {
            let first = ms(e.ventricular[0]);
            if e.shape != RunShape::Plain {
                // A shaped run: counted by its shape alone.
                let fifth = ms(e.ventricular[4]);
                let on_before = alarms.iter().any(|&(a, b)| a < first && b >= first);
                let detected = !on_before
                    && alarms
                        .iter()
                        .any(|&(raised, _)| raised >= first && raised <= fifth + within);
                count_shape(e.shape.as_str(), detected);
                if s.record.paced {
                    count_shape("paced", detected);
                }
                continue;
            }
            let span_end = match e.kind {
                SpliceKind::Run => ms(e.ventricular[4]) + within,
                SpliceKind::Salvo | SpliceKind::Bigeminy => ms(e.end) + within,
            };
            ranked.push(highest_in(first, span_end));
            is_run.push(e.kind == SpliceKind::Run);
            let raised_in = |a: i64, b: i64| {
                alarms
                    .iter()
                    .map(|&(raised, _)| raised)
                    .find(|&t| t >= a && t <= b)
            };
            match e.kind {
                SpliceKind::Run => {
                    let fifth = ms(e.ventricular[4]);
                    let on_before = alarms.iter().any(|&(a, b)| a < first && b >= first);
                    let raised = raised_in(first, fifth + within);
                    let detected = raised.is_some() && !on_before;
                    count_shape("plain", detected);
                    if s.record.paced {
                        count_shape("paced", detected);
                    }
                    f.already_on += usize::from(on_before);
                    if let (Some(t), false) = (raised, on_before) {
                        delays.push((t - fifth) as f64 / 1000.0);
                    }
                    if e.beats <= 7 {
                        f.runs_5_7.add(detected);
                    } else {
                        f.runs_8_plus.add(detected);
                    }
                    if let Some(b) = f.bands.iter_mut().find(|b| {
                        (b.beats.0..=b.beats.1).contains(&e.beats)
                            && e.rate_bpm >= b.rate_bpm.0
                            && (e.rate_bpm < b.rate_bpm.1 || b.rate_bpm.1 == RATE_BANDS[2].1)
                    }) {
                        b.count.add(detected);
                    }
                }
                SpliceKind::Salvo | SpliceKind::Bigeminy => {
                    let end = ms(e.end);
                    let alarmed = raised_in(first, end + within).is_some();
                    if e.kind == SpliceKind::Salvo {
                        f.salvos_2_4.add(alarmed);
                    } else {
                        f.bigeminy.add(alarmed);
                    }
                }
            }
        }
    }
    if !delays.is_empty() {
        delays.sort_by(f64::total_cmp);
        f.time_to_alarm_median_secs = Some(percentile(&delays, 0.5));
        f.time_to_alarm_p90_secs = Some(percentile(&delays, 0.9));
    }
    let auc = roc_auc(&is_run, &ranked);
    f.ranking_roc_auc = auc.is_finite().then_some(auc);
    f.shapes = by_shape
        .into_iter()
        .map(|(shape, count)| ShapeRow {
            shape,
            interval: wilson_interval(count.detected, count.runs),
            count,
        })
        .collect();
    Ok(f)
}

/// The figure docs/OPERATIONS.md shows: a real VT run of the part (the first beat-labelled one)
/// above a spliced run of similar length, both leads, 8 s each; `None` without either.
pub(crate) fn figure_svg(recs: &[RecordData], spliced: &[Spliced]) -> Option<String> {
    let fs = SAMPLE_RATE_HZ as i64;
    let real = recs
        .iter()
        .filter(|r| r.db.labels_ventricular_beats())
        .find_map(|r| {
            r.episodes
                .iter()
                .find(|e| {
                    e.kind == crate::training::dataset::EpisodeKind::Vt && e.end - e.onset < 8 * fs
                })
                .map(|e| (r, e.onset, e.end))
        });
    let (real_rec, real_on, real_end) = real?;
    let beats_in = |r: &RecordData, a: i64, b: i64| {
        crate::training::dataset::ventricular_beats(r)
            .iter()
            .filter(|&&v| v >= a && v < b)
            .count()
    };
    let n_real = beats_in(real_rec, real_on, real_end).max(5);
    let (sp, ev) = spliced
        .iter()
        .flat_map(|s| s.events.iter().map(move |e| (s, e)))
        .filter(|(_, e)| e.kind == SpliceKind::Run && e.shape == RunShape::Plain)
        .min_by_key(|(_, e)| e.beats.abs_diff(n_real))?;
    let panel = |r: &RecordData, on: i64, title: String| {
        let start = (on - 3 * fs).max(0) as usize;
        let stop = (start + 8 * fs as usize).min(r.len());
        (
            title,
            r.leads
                .iter()
                .map(|l| l[start..stop].to_vec())
                .collect::<Vec<_>>(),
        )
    };
    let panels = [
        panel(
            real_rec,
            real_on,
            format!(
                "{}: annotated VT run, {} beats, at {:.0} s",
                real_rec.key,
                n_real,
                real_on as f64 / fs as f64
            ),
        ),
        panel(
            &sp.record,
            ev.ventricular[0],
            format!(
                "{}: spliced run of the patient's own ventricular beats, {} beats at {:.0}/min",
                sp.record.key, ev.beats, ev.rate_bpm
            ),
        ),
    ];
    Some(traces_svg(&panels))
}

/// The report's table: each detector's runs by length and rate, and its alarms on the hard
/// negatives.
pub(crate) fn text(r: &SplicedReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nspliced events (seed {}): {} in {} records of held-out patients; a run is detected by \
         an alarm raised from its first beat to {DETECT_WITHIN_SECS} s after its fifth",
        r.seed,
        r.events,
        r.records.len()
    );
    let rows = std::iter::once(("ensemble", &r.ensemble))
        .chain(r.classical.as_ref().map(|c| ("classical", c)));
    for (name, f) in rows {
        let frac = |c: &Count| {
            format!(
                "{}/{} ({})",
                c.detected,
                c.runs,
                if c.runs == 0 {
                    "-".to_owned()
                } else {
                    format!("{:.2}", c.detected as f64 / c.runs as f64)
                }
            )
        };
        let _ = writeln!(
            s,
            "  {name}: runs of 5-7 beats {}, of 8+ {}; alarms on salvos of 2-4 {}, on bigeminy {}; \
             already on at a run's start {}; fifth beat to alarm median {} s, p90 {} s; runs ranked \
             above salvos and bigeminy by their highest score, ROC-AUC {}",
            frac(&f.runs_5_7),
            frac(&f.runs_8_plus),
            frac(&f.salvos_2_4),
            frac(&f.bigeminy),
            f.already_on,
            f.time_to_alarm_median_secs
                .map_or("-".into(), |v| format!("{v:.1}")),
            f.time_to_alarm_p90_secs
                .map_or("-".into(), |v| format!("{v:.1}")),
            f.ranking_roc_auc.map_or("-".into(), |v| format!("{v:.3}")),
        );
        let shaped: Vec<String> = f
            .shapes
            .iter()
            .filter(|r| r.shape != "plain" && r.count.runs > 0)
            .map(|r| format!("{} {}", r.shape, frac(&r.count)))
            .collect();
        if !shaped.is_empty() {
            let _ = writeln!(s, "    shaped runs detected: {}", shaped.join(", "));
        }
        for b in &f.bands {
            let _ = writeln!(
                s,
                "    {:>2}-{:<2} beats at {:>3.0}-{:<3.0}/min: {}",
                b.beats.0,
                b.beats.1,
                b.rate_bpm.0,
                b.rate_bpm.1,
                frac(&b.count)
            );
        }
    }
    if let Some(a) = &r.adjudication {
        s.push_str(&spliced_alarms::text(a));
    }
    s
}

/// Panels of ECG traces (each a title and its leads), stacked.
fn traces_svg(panels: &[(String, Vec<Vec<f32>>)]) -> String {
    let (w, lead_h, title_h) = (900.0f64, 90.0f64, 22.0f64);
    let height: f64 = panels
        .iter()
        .map(|(_, leads)| title_h + lead_h * leads.len() as f64 + 10.0)
        .sum();
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    s.push('\n');
    s.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
    s.push('\n');
    let mut y0 = 0.0;
    for (title, leads) in panels {
        s.push_str(&format!(
            "<text x=\"8\" y=\"{:.1}\">{}</text>\n",
            y0 + 15.0,
            esc(title)
        ));
        y0 += title_h;
        for (k, lead) in leads.iter().enumerate() {
            let mid = y0 + lead_h / 2.0;
            // Each lead scaled so that its 0.5-99.5 % range fills the band.
            let (lo, hi) = {
                let mut v: Vec<f64> = lead.iter().map(|&x| x as f64).collect();
                v.sort_by(f64::total_cmp);
                (percentile(&v, 0.005), percentile(&v, 0.995))
            };
            let (centre, px_per_mv) = ((lo + hi) / 2.0, (lead_h - 8.0) / (hi - lo).max(0.1));
            let n = lead.len().max(2) as f64;
            let pts: Vec<String> = lead
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let y = (mid - (v as f64 - centre) * px_per_mv).clamp(y0, y0 + lead_h);
                    format!("{:.1},{:.1}", 40.0 + (w - 50.0) * i as f64 / (n - 1.0), y)
                })
                .collect();
            s.push_str(&format!(
                "<text x=\"8\" y=\"{:.1}\">{}</text>\n<polyline fill=\"none\" stroke=\"black\" stroke-width=\"0.8\" points=\"{}\"/>\n",
                mid + 4.0,
                if k == 0 { "1st" } else { "2nd" },
                pts.join(" ")
            ));
            y0 += lead_h;
        }
        y0 += 10.0;
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_panels_are_well_formed_svg() {
        let panels = vec![(
            "a <b> & c".to_owned(),
            vec![vec![0.0, 1.0, -1.0], vec![0.5; 3]],
        )];
        let svg = traces_svg(&panels);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("a &lt;b&gt; &amp; c"));
        assert_eq!(svg.matches("<polyline").count(), 2);
    }
}
