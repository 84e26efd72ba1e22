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
    /// Queue, compute and combination times (engine scores).
    pub(crate) timing: Option<serde_json::Value>,
    pub(crate) last_sample_at: Instant,
}
