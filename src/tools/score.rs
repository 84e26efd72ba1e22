//! `holmes score`: a recording scored window by window through the daemon's own scoring path:
//! the same window type, the serving ensemble as the engine loads it, its input selection and
//! its combination ([`Ensemble::score`]).

use std::sync::Arc;

use crate::core::score::{MemberScore, ScoreStatus};
use crate::core::window::{ClosedWindow, LeadSlot, MAX_LEADS, SAMPLE_RATE_HZ, WindowQuality};
use crate::serving::engine::ensemble::Ensemble;
use crate::signal::heart_rate::heart_rate_at;

/// One window of a recording scored offline (`holmes score`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct OfflineScore {
    pub start_secs: f64,
    pub end_secs: f64,
    pub status: ScoreStatus,
    pub score: Option<f32>,
    pub members: Vec<MemberScore>,
}

/// Scores a recording window by window through exactly the daemon's path: windows of
/// `window_secs` every `hop_secs` from `from_secs` to `to_secs`, the record's first and second
/// signals as the primary and secondary leads, heart rate per second from its beats.
pub fn score_signals(
    ens: &Ensemble,
    s: &crate::training::dataset::Signals,
    window_secs: u32,
    hop_secs: u32,
    from_secs: f64,
    to_secs: Option<f64>,
) -> Vec<OfflineScore> {
    let fs = SAMPLE_RATE_HZ;
    let len = s.leads[0].len();
    let stop = to_secs.map_or(len, |t| ((t * fs as f64) as usize).min(len));
    let (win, hop) = (window_secs as usize * fs, hop_secs as usize * fs);
    let mut out = Vec::new();
    let mut start = (from_secs.max(0.0) * fs as f64) as usize;
    let mut index = 0;
    while start + win <= stop {
        let end = start + win;
        let mut ecg: [Option<Arc<[f32]>>; MAX_LEADS] = Default::default();
        let mut leads: [Option<LeadSlot>; MAX_LEADS] = Default::default();
        for (slot, lead) in s.leads.iter().enumerate().take(MAX_LEADS) {
            ecg[slot] = Some(lead[start..end].into());
            leads[slot] = Some(LeadSlot {
                coverage: 1.0,
                lead_off_secs: 0.0,
                usable: true,
            });
        }
        let t0 = start as f64 / fs as f64;
        let hr: Vec<f32> = (1..=window_secs)
            .map(|k| heart_rate_at(&s.beats, fs as f64, t0 + k as f64))
            .collect();
        let w = ClosedWindow {
            bed: Arc::from("offline"),
            index,
            start_ms: (t0 * 1000.0) as i64,
            end_ms: (end as f64 * 1000.0 / fs as f64) as i64,
            ecg,
            heart_rate: Some(hr.into()),
            quality: WindowQuality {
                leads,
                gap_samples: 0,
                hr_coverage: 1.0,
            },
            last_sample_at: std::time::Instant::now(),
        };
        let (status, score, members) = ens.score(&w);
        out.push(OfflineScore {
            start_secs: t0,
            end_secs: end as f64 / fs as f64,
            status,
            score,
            members,
        });
        start += hop;
        index += 1;
    }
    out
}
