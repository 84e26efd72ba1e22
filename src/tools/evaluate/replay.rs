//! One record replayed as the daemon would see it: windows of the ward's length ending at
//! every hop, scored by the serving ensemble through its own input selection and combination
//! ([`Ensemble::score_batch`]), and by the classical detector on the first lead read (the
//! primary, or V where a monitor sending it alone is replayed); beside the scores, each hop's
//! window label and the record's reference episodes on the same timeline.

use crate::config::Combine;
use crate::core::window::SAMPLE_RATE_HZ;
use crate::serving::engine::ensemble::{Ensemble, OFFLINE_BATCH, combine};
use crate::signal::beats::{BeatClassifier, BeatMemory, RunEvidence, run_evidence};
use crate::signal::classical::{ClassicalError, baseline_scores};
use crate::signal::heart_rate::detect_qrs;
use crate::tools::score::record_window;
use crate::training::dataset::{EpisodeKind, LABEL_GRACE_SECS, Label, RecordData, label_at};

/// Milliseconds per sample at 250 Hz.
const MS_PER_SAMPLE: i64 = 1000 / SAMPLE_RATE_HZ as i64;

/// Which detectors to replay a record through.
#[derive(Clone, Copy)]
pub(crate) struct Detectors<'a> {
    pub ensemble: Option<&'a Ensemble>,
    pub classical: bool,
    /// Also count each hop's run of ventricular beats with this classifier.
    pub beats: Option<&'a BeatClassifier>,
    /// The window slot the first of the replayed leads fills (1 where a monitor sends the
    /// secondary lead alone, [`LeadSet::first_slot`](super::LeadSet::first_slot)).
    pub first_slot: usize,
}

/// A record's replay.
#[derive(Debug, Clone)]
pub(crate) struct Replay {
    pub key: String,
    /// Each hop's window end, ms from the record's start (ascending, one hop apart).
    pub ends_ms: Vec<i64>,
    /// The ensemble's score at each hop (`None`: no member had its input, or not replayed).
    pub ensemble: Vec<Option<f32>>,
    /// Where the served ensemble's beat counter raised its score: the run's first beat, ms
    /// (one per hop where the ensemble is replayed).
    pub ensemble_onsets: Vec<Option<i64>>,
    /// Each hop's member probabilities (in the ensemble's order), and whether the beat
    /// counter raised the hop's score to 1: what [`Replay::repool`] pools again.
    pub members: Vec<Vec<Option<f32>>>,
    pub raised: Vec<bool>,
    /// The least score the served counter's run evidence gave each hop (1 where it raised
    /// it; `Counted::run_risk`), which [`Replay::repool`] keeps.
    pub run_risks: Vec<f32>,
    /// The classical detector's score at each hop (empty when not replayed).
    pub classical: Vec<Option<f32>>,
    /// Each hop's run level, where its run began, and the agreement of the two QRS detectors
    /// on the primary lead's last 10 s ([`run_evidence`]; empty unless a beat classifier is
    /// replayed).
    pub beat_runs: Vec<RunEvidence>,
    /// The ensemble's score raised to 1 where a beat rule sees a VT run, and to the rule's run
    /// risk where a run holds only below its call ([`beats::apply`](super::beats::apply);
    /// empty until one is applied).
    pub with_beats: Vec<Option<f32>>,
    /// Where the beat rule raised `with_beats`: the run's first beat, ms.
    pub with_beats_onsets: Vec<Option<i64>>,
    /// Each hop's window label by its end.
    pub labels: Vec<Label>,
    /// Reference episodes `[onset, end)` in ms, overlapping ones of either kind merged, clipped
    /// to the monitored span (an episode under way when the first window closes starts then).
    pub reference: Vec<(i64, i64)>,
    /// The same episodes by kind, clipped alike (VT turning into VF is one merged reference
    /// episode but one of each kind here).
    pub by_kind: Vec<(EpisodeKind, (i64, i64))>,
    /// Monitored time outside the reference episodes, ms.
    pub monitored_ms: i64,
    /// The record is paced: EC57's figures leave it out.
    pub paced: bool,
    /// Stretches the annotators marked as noise on any lead, `[start, end)` in ms, merged.
    pub noise_ms: Vec<(i64, i64)>,
    /// Annotated ventricular ectopy, `[start, end)` in ms: a one-sample mark per ventricular
    /// beat, longer spans for ectopic rhythm labels (not merged: beats are counted).
    pub ectopy_ms: Vec<(i64, i64)>,
}

impl Replay {
    pub fn ensemble_scores(&self) -> &[Option<f32>] {
        &self.ensemble
    }

    pub fn classical_scores(&self) -> &[Option<f32>] {
        &self.classical
    }

    pub fn with_beats_scores(&self) -> &[Option<f32>] {
        &self.with_beats
    }

    pub fn ensemble_run_onsets(&self) -> &[Option<i64>] {
        &self.ensemble_onsets
    }

    pub fn with_beats_run_onsets(&self) -> &[Option<i64>] {
        &self.with_beats_onsets
    }

    /// For detectors that date no alarm.
    pub fn no_onsets(&self) -> &[Option<i64>] {
        &[]
    }

    /// Pools the ensemble's scores again from the members' probabilities with weights `w`
    /// (one per member), as the engine's weighted mean does; a hop the beat counter raised
    /// stays at 1, and none falls below what the counter's run evidence gave it.
    pub fn repool(&mut self, w: &[f64]) {
        for (((s, probs), &raised), &risk) in self
            .ensemble
            .iter_mut()
            .zip(&self.members)
            .zip(&self.raised)
            .zip(&self.run_risks)
        {
            if raised {
                continue;
            }
            let present: Vec<(f64, f32)> = probs
                .iter()
                .zip(w)
                .filter_map(|(p, &w)| p.map(|p| (w, p)))
                .collect();
            *s = combine(Combine::WeightedMean, &present).map(|v| v.max(risk));
        }
    }
}

/// Replays `rec` (whose `leads` may carry added noise) with windows of `window` samples every
/// `hop` samples, the first ending at the first multiple of `hop` that holds a whole window.
/// `leads[0]` fills the window slot `det.first_slot`. Heart rate comes from the QRS detector on
/// `leads[0]` (the primary lead, or V alone), as a monitor derives it (not from the reference
/// beats).
pub(crate) fn replay(
    rec: &RecordData,
    leads: &[Vec<f32>],
    window: usize,
    hop: usize,
    det: Detectors<'_>,
) -> Result<Replay, ClassicalError> {
    let len = leads.first().map_or(0, Vec::len);
    let first = window.div_ceil(hop).max(1) * hop;
    let ends: Vec<usize> = (first..=len).step_by(hop).collect();
    let ends_ms: Vec<i64> = ends.iter().map(|&e| e as i64 * MS_PER_SAMPLE).collect();

    let (mut ensemble, mut ensemble_onsets) = (Vec::new(), Vec::new());
    let (mut members, mut raised, mut run_risks) = (Vec::new(), Vec::new(), Vec::new());
    if let Some(ens) = det.ensemble {
        let beats = detect_qrs(&leads[0], SAMPLE_RATE_HZ as f64);
        ensemble.reserve(ends.len());
        for (k, chunk) in ends.chunks(OFFLINE_BATCH).enumerate() {
            let windows: Vec<_> = chunk
                .iter()
                .enumerate()
                .map(|(i, &end)| {
                    let index = (k * OFFLINE_BATCH + i) as u64;
                    record_window(leads, det.first_slot, &beats, end, window, index)
                })
                .collect();
            for o in ens.score_batch(&windows) {
                ensemble.push(o.score);
                ensemble_onsets.push(o.run_onset_ms);
                members.push(o.members.iter().map(|m| m.prob).collect());
                raised.push(o.raised);
                run_risks.push(o.run_risk);
            }
        }
    }
    let classical = if det.classical {
        let s = baseline_scores(&leads[0], hop, window)?;
        debug_assert_eq!(s.len(), ends.len());
        s.into_iter().map(|(_, v)| Some(v)).collect()
    } else {
        Vec::new()
    };

    let grace = (LABEL_GRACE_SECS * SAMPLE_RATE_HZ as f64).round() as i64;
    let beat_runs: Vec<RunEvidence> = match det.beats {
        Some(c) => {
            // Each beat classified once, as the ward's counter does.
            let mut memory = BeatMemory::default();
            ends.iter()
                .map(|&e| {
                    let w: Vec<&[f32]> = leads.iter().map(|l| &l[e - window..e]).collect();
                    let end_ms = e as i64 * MS_PER_SAMPLE;
                    run_evidence(c, &w, hop, true, Some((&mut memory, end_ms)))
                })
                .collect()
        }
        None => Vec::new(),
    };
    let labels = ends
        .iter()
        .map(|&e| label_at(&rec.episodes, e as i64, grace))
        .collect();

    let (span_start, span_end) = match (ends_ms.first(), ends_ms.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => (0, 0),
    };
    let clip = |onset: i64, end: i64| {
        let (a, b) = (
            (onset * MS_PER_SAMPLE).max(span_start),
            (end * MS_PER_SAMPLE).min(span_end),
        );
        (a < b).then_some((a, b))
    };
    let by_kind: Vec<(EpisodeKind, (i64, i64))> = rec
        .episodes
        .iter()
        .filter_map(|e| clip(e.onset, e.end).map(|iv| (e.kind, iv)))
        .collect();
    let reference = merge(by_kind.iter().map(|&(_, iv)| iv).collect());
    let in_episodes: i64 = reference.iter().map(|(a, b)| b - a).sum();
    let noise_ms = merge(
        rec.noise
            .iter()
            .flatten()
            .map(|&(a, b)| (a * MS_PER_SAMPLE, b * MS_PER_SAMPLE))
            .collect(),
    );
    let ectopy_ms = rec
        .ectopy
        .iter()
        .map(|&(a, b)| (a * MS_PER_SAMPLE, b * MS_PER_SAMPLE))
        .collect();
    Ok(Replay {
        key: rec.key.clone(),
        ends_ms,
        ensemble,
        ensemble_onsets,
        members,
        raised,
        run_risks,
        classical,
        beat_runs,
        with_beats: Vec::new(),
        with_beats_onsets: Vec::new(),
        labels,
        reference,
        by_kind,
        monitored_ms: (span_end - span_start - in_episodes).max(0),
        paced: rec.paced,
        noise_ms,
        ectopy_ms,
    })
}

/// Sorts intervals and merges those that overlap or touch.
fn merge(mut v: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    v.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::dataset::{Database, Episode};

    fn record(len_secs: usize, episodes: Vec<Episode>) -> RecordData {
        let n = len_secs * SAMPLE_RATE_HZ;
        let lead: Vec<f32> = (0..n)
            .map(|i| if i % 200 < 8 { 1.0 } else { 0.0 })
            .collect();
        RecordData {
            db: Database::Cudb,
            key: "cudb/cu99".into(),
            group: "cudb/cu99".into(),
            leads: vec![lead],
            episodes,
            noise: vec![Vec::new()],
            beats: Vec::new(),
            paced: false,
            ectopy: Vec::new(),
        }
    }

    fn ep(kind: EpisodeKind, onset_s: i64, end_s: i64) -> Episode {
        let hz = SAMPLE_RATE_HZ as i64;
        Episode {
            kind,
            onset: onset_s * hz,
            confirmed: onset_s * hz + 2 * hz,
            end: end_s * hz,
        }
    }

    #[test]
    fn the_timeline_clips_merges_and_counts_monitored_time() {
        // 120 s; windows of 30 s every 5 s: ends at 30, 35, ..., 120 s.
        let rec = record(
            120,
            vec![
                ep(EpisodeKind::Vf, 10, 40),
                ep(EpisodeKind::Vt, 60, 80),
                ep(EpisodeKind::Vf, 75, 90),
            ],
        );
        let hz = SAMPLE_RATE_HZ;
        let det = Detectors {
            ensemble: None,
            classical: true,
            beats: None,
            first_slot: 0,
        };
        let r = replay(&rec, &rec.leads, 30 * hz, 5 * hz, det).unwrap();
        assert_eq!(r.ends_ms.first(), Some(&30_000));
        assert_eq!(r.ends_ms.last(), Some(&120_000));
        assert_eq!(r.ends_ms.len(), 19);
        assert_eq!(r.classical.len(), 19);
        assert!(r.ensemble.is_empty());
        // The VF under way at the first window starts with it; VT into VF is one episode.
        assert_eq!(r.reference, vec![(30_000, 40_000), (60_000, 90_000)]);
        assert_eq!(r.by_kind.len(), 3);
        assert_eq!(r.monitored_ms, 90_000 - 40_000);
        // Labels by the window's end: 35 s is in the VF (confirmed at 12 s); 60 s is the VT's onset
        // (not yet in it), 65 s in it (confirmed at 62 s).
        assert_eq!(r.labels[1], Label::Positive);
        assert_eq!(r.labels[6], Label::Negative);
        assert_eq!(r.labels[7], Label::Positive);
        assert_eq!(r.labels[18], Label::Negative);
    }
}
