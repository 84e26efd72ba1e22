//! Cross-database beats (`holmes evaluate --cross-database`): the beat classifier fitted
//! without one database and judged beat by beat on it, the closest thing here to another
//! hospital's monitors (mitdb and svdb were recorded with other equipment, at other rates,
//! from other patients).
//!
//! Three folds: svdb held out (fitted on mitdb and nstdb, whose records are mitdb patients),
//! mitdb held out (fitted on svdb alone), and qtdb, which no part of the split holds (fitted
//! on mitdb, svdb and nstdb: every database with beat labels; its excerpts come from four
//! other databases, of patients in no other folder). Within the databases fitted on, every fifth patient
//! group (in key order) is kept apart to choose the fit's epoch, so nothing of the held-out
//! database chooses anything (with fewer than five groups, as `--max-records` leaves, the
//! last one). The held-out database's paced records are left out, as the
//! inter-patient protocol does (de Chazal et al. 2004).
//!
//! Each beat is classified once, in the first ward window whose QRS detector finds it (windows
//! of the ward's length ending at every hop; a beat near a window's end waits for the next
//! window), as the counter first sees it. Detected beats are matched to the annotated ones
//! within 150 ms, one to one, as EC57's beat-by-beat comparison does. Ventricular beats are
//! those the label counts (`V`, `E`, `r`, `F`). Reported: the QRS detector's sensitivity
//! (all beats, ventricular beats: a missed wide beat breaks a run) and positive predictivity,
//! and, at each call probability, ventricular-beat sensitivity (of all annotated ventricular
//! beats: a missed detection counts as missed) and positive predictivity (of all ventricular
//! calls: a call on a false detection counts as false), of the classifier's own probabilities
//! and of the counter's, which calls each beat with the window's beats alike to it
//! ([`Described::alike_median`]).

use serde::Serialize;

use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::beats::{BeatClassifier, Described};
use crate::training::beats::BeatRows;
use crate::training::dataset::{self, Database, RecordData, ventricular_beats};

use super::{EvaluateError, EvaluateOptions};

/// A detected and an annotated beat this close are the same beat, s (EC57).
const MATCH_SECS: f64 = 0.15;
/// Beats for the fit come from windows this far apart, s (as `--beats` fits).
const FIT_HOP_SECS: usize = 15;
/// Every this many patient groups of the databases fitted on, one chooses the fit's epoch.
const EPOCH_GROUP_EVERY: usize = 5;
/// Call probabilities reported.
const CALLS: [f32; 5] = [0.5, 0.8, 0.9, 0.95, 0.98];
/// Two detections of one complex: the later within this long of the earlier, s.
const SAME_BEAT_SECS: f64 = 0.2;

/// The published inter-patient anchor: de Chazal, O'Dwyer & Reilly, IEEE TBME 51(7), 2004,
/// linear discriminants on mitdb's DS1 / DS2 split, ventricular ectopic beats.
pub const ANCHOR: (&str, f64, f64) = (
    "de Chazal et al. 2004, mitdb DS1 -> DS2 (within one database)",
    0.777,
    0.819,
);

/// The QRS detector against the annotated beats.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct QrsFigures {
    pub annotated: usize,
    pub detected: usize,
    pub ventricular: usize,
    pub ventricular_detected: usize,
    pub detections: usize,
    /// Detections matching no annotated beat.
    pub false_detections: usize,
}

/// Ventricular calls at one probability.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CallFigures {
    pub call_at: f32,
    pub true_positive: usize,
    pub false_negative: usize,
    pub false_positive: usize,
    pub sensitivity: f64,
    pub positive_predictivity: f64,
}

/// One database held out.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOut {
    pub held_out: &'static str,
    pub fitted_on: Vec<&'static str>,
    /// Beats fitted on (each window's beats with both leads and with one alone), ventricular
    /// among them.
    pub fit_beats: usize,
    pub fit_ventricular: usize,
    /// The held-out records judged (paced ones left out, and named).
    pub records: usize,
    pub paced_left_out: Vec<String>,
    pub qrs: QrsFigures,
    /// The classifier's own calls.
    pub calls: Vec<CallFigures>,
    /// The counter's: each beat called with the beats alike to it in the window that first
    /// described it.
    pub counter_calls: Vec<CallFigures>,
}

/// The folds and the anchor.
#[derive(Debug, Clone, Serialize)]
pub struct CrossDatabase {
    pub anchor: &'static str,
    pub anchor_sensitivity: f64,
    pub anchor_positive_predictivity: f64,
    pub window_secs: u32,
    pub hop_secs: u32,
    pub folds: Vec<HeldOut>,
}

/// Runs the three folds. Blocking and CPU-heavy (every record of mitdb, svdb, nstdb and
/// qtdb, three fits).
pub fn cross_database(opts: &EvaluateOptions) -> Result<CrossDatabase, EvaluateError> {
    let mut keys: Vec<(Database, String)> = dataset::record_keys(&opts.data)?
        .into_iter()
        .filter(|(db, _)| db.labels_ventricular_beats())
        .collect();
    // qtdb where the data folder has it.
    match dataset::record_keys_of(&opts.data, &Database::HELD_OUT) {
        Ok(held) => keys.extend(held),
        Err(dataset::DatasetError::NoData(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let mut recs = dataset::load_keys(&opts.data, &keys)?;
    if let Some(n) = opts.max_records {
        // A smoke check: the n shortest records of each database.
        recs.sort_by_key(|r| (r.db, r.len(), r.key.clone()));
        let mut kept: Vec<RecordData> = Vec::new();
        for r in recs {
            if kept.iter().filter(|k| k.db == r.db).count() < n.max(2) {
                kept.push(r);
            }
        }
        recs = kept;
    }
    let fs = SAMPLE_RATE_HZ;
    let (window, hop) = (opts.window_secs as usize * fs, opts.hop_secs as usize * fs);
    let folds = [
        (Database::Svdb, vec![Database::Mitdb, Database::Nstdb]),
        (Database::Mitdb, vec![Database::Svdb]),
        (
            Database::Qtdb,
            vec![Database::Mitdb, Database::Svdb, Database::Nstdb],
        ),
    ];
    let mut out = Vec::new();
    for (held, fitted) in folds {
        if !recs.iter().any(|r| r.db == held) {
            continue;
        }
        let fit_recs: Vec<&RecordData> = recs.iter().filter(|r| fitted.contains(&r.db)).collect();
        let mut groups: Vec<&str> = fit_recs.iter().map(|r| r.group.as_str()).collect();
        groups.sort_unstable();
        groups.dedup();
        // Every fifth group, or the last where there are fewer (a smoke check).
        let mut epoch_groups: Vec<&str> = groups
            .iter()
            .copied()
            .skip(EPOCH_GROUP_EVERY - 1)
            .step_by(EPOCH_GROUP_EVERY)
            .collect();
        if epoch_groups.is_empty() && groups.len() > 1 {
            epoch_groups.extend(groups.last());
        }
        let (mut fit_rows, mut epoch_rows) = (BeatRows::default(), BeatRows::default());
        for (i, r) in fit_recs.iter().enumerate() {
            if epoch_groups.contains(&r.group.as_str()) {
                epoch_rows.add_record(r, window, FIT_HOP_SECS * fs);
            } else {
                fit_rows.add_record(r, window, FIT_HOP_SECS * fs);
                fit_rows.add_augmented(r, window, FIT_HOP_SECS * fs, i as u64);
            }
        }
        if !fit_rows.ys.iter().any(|&y| y) || !epoch_rows.ys.iter().any(|&y| y) {
            return Err(EvaluateError::NoBeats("cross-database"));
        }
        let classifier = fit_rows.fit(&epoch_rows, opts.beat_fitting);
        let (mut qrs, mut matched, mut counted) = (QrsFigures::default(), Vec::new(), Vec::new());
        let mut paced_left_out = Vec::new();
        let mut records = 0;
        for r in recs.iter().filter(|r| r.db == held) {
            if r.paced {
                paced_left_out.push(r.key.clone());
                continue;
            }
            records += 1;
            let (own, alike) = beat_calls(r, &classifier, window, hop);
            matched.extend(judge(r, &own, &mut qrs));
            counted.extend(judge(r, &alike, &mut QrsFigures::default()));
        }
        let figures = |m: &[Matched]| -> Vec<CallFigures> {
            CALLS.iter().map(|&at| call_figures(m, at)).collect()
        };
        tracing::info!(
            held_out = held.name(),
            beats = fit_rows.ys.len(),
            "Cross-database fold judged"
        );
        out.push(HeldOut {
            held_out: held.name(),
            fitted_on: fitted.iter().map(|d| d.name()).collect(),
            fit_beats: fit_rows.ys.len(),
            fit_ventricular: fit_rows.ys.iter().filter(|&&y| y).count(),
            records,
            paced_left_out,
            qrs,
            calls: figures(&matched),
            counter_calls: figures(&counted),
        });
    }
    Ok(CrossDatabase {
        anchor: ANCHOR.0,
        anchor_sensitivity: ANCHOR.1,
        anchor_positive_predictivity: ANCHOR.2,
        window_secs: opts.window_secs,
        hop_secs: opts.hop_secs,
        folds: out,
    })
}

/// Beats found in a record, in time order: `(R peak, probability)`.
type Calls = Vec<(i64, f64)>;

/// Every beat the QRS detector finds in a record, classified once, in the first window (of
/// `window` samples, ending every `hop`) that describes it: `(R peak, probability)`, the
/// classifier's own and, apart, the counter's (the median over the beats alike to it in that
/// window, [`Described::alike_median`], each of them with its own probability).
pub(crate) fn beat_calls(
    rec: &RecordData,
    c: &BeatClassifier,
    window: usize,
    hop: usize,
) -> (Calls, Calls) {
    let same = (SAME_BEAT_SECS * SAMPLE_RATE_HZ as f64) as i64;
    let len = rec.len();
    let (mut own, mut alike): (Calls, Calls) = (Vec::new(), Vec::new());
    let mut end = window.min(len);
    while end <= len && end > 0 {
        let start = end.saturating_sub(window);
        let leads: Vec<&[f32]> = rec.leads.iter().map(|l| &l[start..end]).collect();
        if let Some(d) = Described::of(&leads) {
            // A beat an earlier window classified keeps its probability.
            let known = |at: i64| {
                let i = own.partition_point(|&(t, _)| t < at - same);
                own[i..]
                    .iter()
                    .take_while(|&&(t, _)| t <= at + same)
                    .map(|&(_, p)| p)
                    .next()
            };
            let p: Vec<f64> = d
                .samples()
                .iter()
                .enumerate()
                .map(|(k, &r)| {
                    known((start + r) as i64).unwrap_or_else(|| c.probability(&d.features(k)))
                })
                .collect();
            let q = d.alike_median(&p);
            for (k, &r) in d.samples().iter().enumerate() {
                let at = (start + r) as i64;
                if own.last().is_none_or(|&(t, _)| at > t + same) {
                    own.push((at, p[k]));
                    alike.push((at, q[k]));
                }
            }
        }
        if end == len {
            break;
        }
        end = (end + hop).min(len);
    }
    (own, alike)
}

/// A detection matched to an annotated beat: whether that beat is ventricular (`None`: a
/// false detection), and the detection's probability (`None`: the beat was missed).
type Matched = (Option<bool>, Option<f64>);

/// Matches `calls` to the record's annotated beats within [`MATCH_SECS`], one to one, nearest
/// first; adds to the QRS figures, and gives every annotated beat and every unmatched
/// detection.
fn judge(rec: &RecordData, calls: &[(i64, f64)], qrs: &mut QrsFigures) -> Vec<Matched> {
    let tol = (MATCH_SECS * SAMPLE_RATE_HZ as f64) as i64;
    let v: std::collections::HashSet<i64> = ventricular_beats(rec).into_iter().collect();
    let mut taken = vec![false; calls.len()];
    let mut out = Vec::with_capacity(rec.beats.len() + calls.len() / 10);
    for &b in &rec.beats {
        let i = calls.partition_point(|&(t, _)| t < b - tol);
        let best = (i..calls.len())
            .take_while(|&j| calls[j].0 <= b + tol)
            .filter(|&j| !taken[j])
            .min_by_key(|&j| (calls[j].0 - b).abs());
        let is_v = v.contains(&b);
        qrs.annotated += 1;
        qrs.ventricular += usize::from(is_v);
        match best {
            Some(j) => {
                taken[j] = true;
                qrs.detected += 1;
                qrs.ventricular_detected += usize::from(is_v);
                out.push((Some(is_v), Some(calls[j].1)));
            }
            None => out.push((Some(is_v), None)),
        }
    }
    qrs.detections += calls.len();
    for (j, &(_, p)) in calls.iter().enumerate() {
        if !taken[j] {
            qrs.false_detections += 1;
            out.push((None, Some(p)));
        }
    }
    out
}

fn call_figures(matched: &[Matched], call_at: f32) -> CallFigures {
    let (mut tp, mut fn_, mut fp) = (0, 0, 0);
    for &(truth, p) in matched {
        let called = p.is_some_and(|p| p >= call_at as f64);
        match (truth, called) {
            (Some(true), true) => tp += 1,
            (Some(true), false) => fn_ += 1,
            (Some(false) | None, true) => fp += 1,
            _ => {}
        }
    }
    CallFigures {
        call_at,
        true_positive: tp,
        false_negative: fn_,
        false_positive: fp,
        sensitivity: tp as f64 / (tp + fn_).max(1) as f64,
        positive_predictivity: tp as f64 / (tp + fp).max(1) as f64,
    }
}

/// The figures as lines for a person.
pub fn text(c: &CrossDatabase) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "cross-database ventricular beats (windows of {} s every {} s; each beat called once, \
         matched within 150 ms)\nanchor: {}: Se {:.3}, +P {:.3}",
        c.window_secs, c.hop_secs, c.anchor, c.anchor_sensitivity, c.anchor_positive_predictivity
    );
    for f in &c.folds {
        let q = &f.qrs;
        let _ = writeln!(
            s,
            "\n{} held out (fitted on {}: {} beats, {} ventricular); {} records{}\n  \
             QRS detector: Se {:.4} ({}/{}), on ventricular beats {:.4} ({}/{}), +P {:.4}",
            f.held_out,
            f.fitted_on.join("+"),
            f.fit_beats,
            f.fit_ventricular,
            f.records,
            if f.paced_left_out.is_empty() {
                String::new()
            } else {
                format!(" (paced left out: {})", f.paced_left_out.join(", "))
            },
            q.detected as f64 / q.annotated.max(1) as f64,
            q.detected,
            q.annotated,
            q.ventricular_detected as f64 / q.ventricular.max(1) as f64,
            q.ventricular_detected,
            q.ventricular,
            (q.detections - q.false_detections) as f64 / q.detections.max(1) as f64,
        );
        for (whose, calls) in [("classifier", &f.calls), ("counter", &f.counter_calls)] {
            for k in calls {
                let _ = writeln!(
                    s,
                    "  {whose} calls at {:.2}: ventricular Se {:.3} +P {:.3} (TP {}, FN {}, FP {})",
                    k.call_at,
                    k.sensitivity,
                    k.positive_predictivity,
                    k.true_positive,
                    k.false_negative,
                    k.false_positive
                );
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_count_missed_beats_and_calls_on_false_detections() {
        let matched: Vec<Matched> = vec![
            (Some(true), Some(0.99)),  // ventricular, called
            (Some(true), Some(0.6)),   // ventricular, called at 0.5 only
            (Some(true), None),        // ventricular, missed by the detector
            (Some(false), Some(0.95)), // sinus, called
            (Some(false), Some(0.1)),  // sinus
            (None, Some(0.97)),        // a false detection, called
        ];
        let f = call_figures(&matched, 0.9);
        assert_eq!(
            (f.true_positive, f.false_negative, f.false_positive),
            (1, 2, 2)
        );
        let f = call_figures(&matched, 0.5);
        assert_eq!(
            (f.true_positive, f.false_negative, f.false_positive),
            (2, 1, 2)
        );
        assert!((f.sensitivity - 2.0 / 3.0).abs() < 1e-9);
        assert!((f.positive_predictivity - 0.5).abs() < 1e-9);
    }
}
