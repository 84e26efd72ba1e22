//! A window's outcome as the engine commits it and the store keeps it: status, the combined
//! score and each member's part.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::window::WindowQuality;

/// How a window ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreStatus {
    /// Scored by every applicable member.
    Scored,
    /// Committed at the deadline without some members (named in `missing`).
    Partial,
    /// Replaced in the queue by the same bed's newer window; not scored.
    Superseded,
    /// Below the quality floor: recorded, not scored.
    InsufficientSignal,
    /// No member could run (every applicable member's queue was full): recorded, not scored.
    Dropped,
}

impl ScoreStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ScoreStatus::Scored => "scored",
            ScoreStatus::Partial => "partial",
            ScoreStatus::Superseded => "superseded",
            ScoreStatus::InsufficientSignal => "insufficient_signal",
            ScoreStatus::Dropped => "dropped",
        }
    }
}

/// One member's contribution to a score.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct MemberScore {
    pub(crate) name: String,
    pub(crate) version: u32,
    /// Probability, or `None` when the member's input was not usable in this window.
    pub(crate) prob: Option<f32>,
    /// Why a member that ran has no probability: `panic`, `error`, `wrong_outputs` or
    /// `non_finite` (the member is also named in the score's `missing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fault: Option<String>,
}

/// A window's outcome, ready to store.
#[derive(Debug, Clone)]
pub(crate) struct ScoreRecord {
    pub(crate) bed: Arc<str>,
    pub(crate) window_index: u64,
    pub(crate) start_ms: i64,
    pub(crate) end_ms: i64,
    pub(crate) status: ScoreStatus,
    pub(crate) score: Option<f32>,
    /// Where the beat counter raised `score`: the first beat of its VT run, ms on the bed's
    /// timeline.
    pub(crate) run_onset_ms: Option<i64>,
    pub(crate) members: Vec<MemberScore>,
    /// Members that should have scored this window and did not (partial scores), and `beats`
    /// where the beat counter serves and did not read it.
    pub(crate) missing: Vec<String>,
    pub(crate) ensemble_id: i64,
    pub(crate) quality: WindowQuality,
    /// The heart rate the monitor reported over the window, the median of its 1 Hz values,
    /// beats/min (`None`: too few readings arrived).
    pub(crate) heart_rate_bpm: Option<f32>,
    /// Queue, compute and combination times (engine scores).
    pub(crate) timing: Option<serde_json::Value>,
    pub(crate) last_sample_at: Instant,
}

/// The median of a window's heart-rate readings (`None` when there are none or none is
/// finite).
pub(crate) fn median_heart_rate(hr: Option<&[f32]>) -> Option<f32> {
    let mut v: Vec<f32> = hr?.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f32::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_heart_rate_of_odd_even_and_empty_windows() {
        use super::median_heart_rate as m;
        assert_eq!(m(Some(&[80.0, 60.0, 70.0])), Some(70.0));
        assert_eq!(m(Some(&[80.0, 60.0, f32::NAN, 70.0, 90.0])), Some(75.0));
        assert_eq!(m(Some(&[])), None);
        assert_eq!(m(None), None);
    }
}
