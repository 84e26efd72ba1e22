//! The signal's constants and a closed window: what the ward hands to the engine, and what
//! offline scoring and evaluation build from a recording, so both go through one scoring path.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

/// The appliance's ECG sampling rate, Hz: monitors stream at it, and every training record is
/// brought to it.
pub(crate) const SAMPLE_RATE_HZ: usize = 250;
/// ECG lead slots a window carries (primary, secondary, third).
pub(crate) const MAX_LEADS: usize = 3;

/// Quality of one lead slot in a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LeadSlot {
    /// Fraction of the window's samples that arrived.
    pub coverage: f64,
    /// Seconds flagged lead-off.
    pub lead_off_secs: f64,
    /// Coverage and lead-off within the quality floor.
    pub usable: bool,
}

/// Data quality of a closed window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowQuality {
    /// Per lead slot (primary, secondary, third); `None` when the monitor has no such lead.
    pub leads: [Option<LeadSlot>; MAX_LEADS],
    /// Largest number of missing samples on any announced lead.
    pub gap_samples: usize,
    /// Fraction of the window's seconds with a heart-rate reading.
    pub hr_coverage: f64,
}

/// A window ready for scoring, materialised once and shared by every ensemble member.
#[derive(Debug, Clone)]
pub struct ClosedWindow {
    pub bed: Arc<str>,
    /// Window number on the bed's timeline.
    pub index: u64,
    /// Device time of the first sample and of the end (exclusive), ms.
    pub start_ms: i64,
    pub end_ms: i64,
    /// Usable leads' samples (mV, holes interpolated), by slot.
    pub ecg: [Option<Arc<[f32]>>; MAX_LEADS],
    /// One heart-rate value per second of the window, when enough arrived.
    pub heart_rate: Option<Arc<[f32]>>,
    pub quality: WindowQuality,
    /// When the window's last sample arrived (or the window was closed without it): the
    /// start of its end-to-end latency.
    pub last_sample_at: Instant,
}
