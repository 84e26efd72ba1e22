//! What set off each proxy monitor alarm ([`trigger_of`]), read from the record's reference
//! annotations, so that the proxy's mix of true and false alarms can be held against an
//! ICU's (about three VT alarms in four false, most of them noise and artifact).
//!
//! A true alarm (raised during a reference episode, as [`monitor_alarms`](super::monitor_alarms)
//! judges it) is set off by **VF**, by **sustained VT** (an episode of
//! [`SUSTAINED_SECS`] or more), or by a **VT run** of 5-7 or 8+ annotated ventricular beats (in
//! a database that labels beats; otherwise a run of unlabelled length). A false alarm is set
//! off by **noise** where a lead is noise-marked in the [`LOOKBACK_SECS`] before it, else by
//! **ventricular ectopy** (annotated ventricular beats short of a run) there, else by a **fast
//! rhythm** (annotated beats at 100/min or more over the look-back: supraventricular, the
//! reference labelling no ventricular beat in it), else **other**. The annotations hold no
//! aberrant supraventricular beats as such: those fall under fast rhythm or other.

use serde::Serialize;

use crate::alarm::MatchOptions;
use crate::core::monitor_alarm::LOOKBACK_SECS;
use crate::core::window::SAMPLE_RATE_HZ;
use crate::training::dataset::{EpisodeKind, RecordData, ventricular_beats};

/// A VT episode this long or longer is sustained, s.
pub const SUSTAINED_SECS: i64 = 30;

/// What set off a monitor alarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Vf,
    SustainedVt,
    VtRun5To7,
    VtRun8Plus,
    VtRunUnlabelled,
    Noise,
    VentricularEctopy,
    FastRhythm,
    Other,
}

impl Trigger {
    /// Every trigger, in the report's order.
    pub const ALL: [Trigger; 9] = [
        Trigger::Vf,
        Trigger::SustainedVt,
        Trigger::VtRun5To7,
        Trigger::VtRun8Plus,
        Trigger::VtRunUnlabelled,
        Trigger::Noise,
        Trigger::VentricularEctopy,
        Trigger::FastRhythm,
        Trigger::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Vf => "vf",
            Trigger::SustainedVt => "sustained_vt",
            Trigger::VtRun5To7 => "vt_run_5_7",
            Trigger::VtRun8Plus => "vt_run_8_plus",
            Trigger::VtRunUnlabelled => "vt_run_unlabelled",
            Trigger::Noise => "noise",
            Trigger::VentricularEctopy => "ventricular_ectopy",
            Trigger::FastRhythm => "fast_rhythm",
            Trigger::Other => "other",
        }
    }
}

/// The alarms one trigger set off, how many are true, and how many the opinion confirmed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TriggerRow {
    pub trigger: &'static str,
    pub alarms: usize,
    pub true_alarms: usize,
    /// Confirmed by Holmes's opinion (`None` where no opinion was formed).
    pub confirmed: Option<usize>,
}

/// What set off an alarm raised at `t_ms` on `rec` (see the module doc); `truth` as the alarm
/// was judged (raised during an episode, by `matching`).
pub(crate) fn trigger_of(
    rec: &RecordData,
    t_ms: i64,
    truth: bool,
    matching: MatchOptions,
) -> Trigger {
    let fs = SAMPLE_RATE_HZ as i64;
    let t = t_ms * fs / 1000;
    let (tol, grace) = (
        matching.onset_tolerance_ms * fs / 1000,
        matching.grace_ms * fs / 1000,
    );
    if truth {
        let during =
            |e: &&crate::training::dataset::Episode| t >= e.onset - tol && t < e.end + grace;
        if rec
            .episodes
            .iter()
            .filter(during)
            .any(|e| e.kind == EpisodeKind::Vf)
        {
            return Trigger::Vf;
        }
        let Some(vt) = rec
            .episodes
            .iter()
            .filter(during)
            .find(|e| e.kind == EpisodeKind::Vt)
        else {
            return Trigger::Other;
        };
        if vt.end - vt.onset >= SUSTAINED_SECS * fs {
            return Trigger::SustainedVt;
        }
        if !rec.db.labels_ventricular_beats() {
            return Trigger::VtRunUnlabelled;
        }
        let beats = ventricular_beats(rec)
            .iter()
            .filter(|&&v| v >= vt.onset && v < vt.end)
            .count();
        return if beats <= 7 {
            Trigger::VtRun5To7
        } else {
            Trigger::VtRun8Plus
        };
    }
    let from = t - LOOKBACK_SECS as i64 * fs;
    if rec
        .noise
        .iter()
        .any(|spans| spans.iter().any(|&(a, b)| a < t && b > from))
    {
        return Trigger::Noise;
    }
    if rec.db.labels_ventricular_beats()
        && ventricular_beats(rec).iter().any(|&v| v >= from && v < t)
    {
        return Trigger::VentricularEctopy;
    }
    let beats = rec.beats.iter().filter(|&&b| b >= from && b < t).count();
    if beats as i64 * 60 >= 100 * LOOKBACK_SECS as i64 {
        return Trigger::FastRhythm;
    }
    Trigger::Other
}

/// The rows of the report: every trigger that set off an alarm, of `alarms` (trigger, truth,
/// confirmed where an opinion was formed).
pub(crate) fn rows(alarms: &[(Trigger, bool, Option<bool>)]) -> Vec<TriggerRow> {
    Trigger::ALL
        .iter()
        .filter_map(|&trigger| {
            let of: Vec<_> = alarms.iter().filter(|a| a.0 == trigger).collect();
            (!of.is_empty()).then(|| TriggerRow {
                trigger: trigger.as_str(),
                alarms: of.len(),
                true_alarms: of.iter().filter(|a| a.1).count(),
                confirmed: of
                    .iter()
                    .any(|a| a.2.is_some())
                    .then(|| of.iter().filter(|a| a.2 == Some(true)).count()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::dataset::{Database, Episode};

    const FS: i64 = SAMPLE_RATE_HZ as i64;

    /// Two minutes at 75/min, a 6-beat VT run at 60 s (labelled beats), a VF episode at 100 s.
    fn record() -> RecordData {
        let mut beats: Vec<i64> = (0..150).map(|k| k * FS * 4 / 5).collect();
        let run: Vec<i64> = (0..6).map(|k| 60 * FS + k * FS * 2 / 5).collect();
        beats.extend(&run);
        beats.sort_unstable();
        RecordData {
            db: Database::Mitdb,
            key: "mitdb/x".into(),
            group: "mitdb/x".into(),
            leads: vec![vec![0.0; 120 * FS as usize]],
            episodes: vec![
                Episode {
                    kind: EpisodeKind::Vt,
                    onset: run[0],
                    confirmed: run[4],
                    end: run[5] + FS / 2,
                },
                Episode {
                    kind: EpisodeKind::Vf,
                    onset: 100 * FS,
                    confirmed: 104 * FS,
                    end: 110 * FS,
                },
            ],
            noise: vec![vec![(20 * FS, 25 * FS)]],
            beats,
            paced: false,
            ectopy: run.iter().map(|&v| (v, v + 1)).collect(),
        }
    }

    const M: MatchOptions = MatchOptions {
        onset_tolerance_ms: 1000,
        grace_ms: 2000,
    };

    #[test]
    fn true_alarms_are_set_off_by_their_episode_and_false_ones_by_what_came_before() {
        let r = record();
        assert_eq!(trigger_of(&r, 62_500, true, M), Trigger::VtRun5To7);
        assert_eq!(trigger_of(&r, 105_000, true, M), Trigger::Vf);
        // Noise marked at 20-25 s lies in the 16 s before 30 s.
        assert_eq!(trigger_of(&r, 30_000, false, M), Trigger::Noise);
        // The run's beats lie in the 16 s before 70 s, where the alarm is not the run's.
        assert_eq!(trigger_of(&r, 70_000, false, M), Trigger::VentricularEctopy);
        assert_eq!(trigger_of(&r, 90_000, false, M), Trigger::Other);
        let mut fast = r.clone();
        fast.beats = (0..300).map(|k| k * FS / 2).collect();
        assert_eq!(trigger_of(&fast, 90_000, false, M), Trigger::FastRhythm);
        let mut long = r.clone();
        long.episodes[0].end = long.episodes[0].onset + 40 * FS;
        assert_eq!(trigger_of(&long, 62_500, true, M), Trigger::SustainedVt);
        let mut unlabelled = r;
        unlabelled.db = Database::Cudb;
        assert_eq!(
            trigger_of(&unlabelled, 62_500, true, M),
            Trigger::VtRunUnlabelled
        );
    }

    #[test]
    fn rows_count_alarms_truth_and_confirmations_by_trigger() {
        let rows = rows(&[
            (Trigger::Noise, false, Some(true)),
            (Trigger::Noise, false, Some(false)),
            (Trigger::Vf, true, Some(true)),
        ]);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].trigger, "vf");
        assert_eq!(
            (rows[1].alarms, rows[1].true_alarms, rows[1].confirmed),
            (2, 0, Some(1))
        );
        assert_eq!(
            super::rows(&[(Trigger::Other, false, None)])[0].confirmed,
            None
        );
    }
}
