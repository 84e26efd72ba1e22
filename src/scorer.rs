//! The ensemble as loaded from the zoo, and window-by-window scoring of a recording
//! (`holmes score`): the same members, preprocessing and combination (mean probability,
//! HOLMES eq. 5) as the live [`engine`](crate::engine), one window at a time.

use std::path::Path;
use std::sync::Arc;

use burn::backend::Flex;

use crate::store::{MemberScore, ScoreStatus};
use crate::ward::ClosedWindow;
use crate::zoo::{Input, ZooError, ZooModel};

#[derive(Debug, thiserror::Error)]
pub enum ScorerError {
    #[error("ensemble member {name:?} is not in {dir} (models there: {available})")]
    MissingMember {
        name: String,
        dir: String,
        available: String,
    },
    #[error(transparent)]
    Zoo(#[from] ZooError),
}

/// The loaded members of the serving ensemble.
pub struct Ensemble {
    pub id: i64,
    pub members: Vec<ZooModel<Flex>>,
}

impl Ensemble {
    /// Loads the named members from the zoo folder; a missing or broken member is an error
    /// naming it.
    pub fn load(dir: &Path, names: &[String], id: i64) -> Result<Ensemble, ScorerError> {
        let device = Default::default();
        let mut members = Vec::with_capacity(names.len());
        for name in names {
            let d = dir.join(name);
            if !d.is_dir() {
                let available = crate::zoo::model_dirs(dir)
                    .map(|v| {
                        v.iter()
                            .filter_map(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                return Err(ScorerError::MissingMember {
                    name: name.clone(),
                    dir: dir.display().to_string(),
                    available,
                });
            }
            members.push(ZooModel::load(&d, &device)?);
        }
        Ok(Ensemble { id, members })
    }

    /// Scores one window: each member whose input is usable predicts; the score is their mean.
    pub fn score(&self, w: &ClosedWindow) -> (ScoreStatus, Option<f32>, Vec<MemberScore>) {
        let mut members = Vec::with_capacity(self.members.len());
        let mut sum = 0.0f64;
        let mut n = 0usize;
        for m in &self.members {
            let input: Option<&[f32]> = match m.manifest.input {
                Input::Ecg { lead, .. } => w.ecg[lead.index()].as_deref(),
                Input::HeartRate { .. } => w.heart_rate.as_deref(),
            };
            let prob = input.and_then(|x| match m.predict(&[x]) {
                Ok(p) => p.first().copied().filter(|p| p.is_finite()),
                Err(e) => {
                    tracing::warn!(model = %m.name(), error = %e, "Member failed on a window");
                    None
                }
            });
            if let Some(p) = prob {
                sum += p as f64;
                n += 1;
            }
            members.push(MemberScore {
                fault: None,
                name: m.manifest.name.clone(),
                version: m.manifest.version,
                prob,
            });
        }
        if n == 0 {
            (ScoreStatus::InsufficientSignal, None, members)
        } else {
            (ScoreStatus::Scored, Some((sum / n as f64) as f32), members)
        }
    }
}

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
    s: &crate::dataset::Signals,
    window_secs: u32,
    hop_secs: u32,
    from_secs: f64,
    to_secs: Option<f64>,
) -> Vec<OfflineScore> {
    use crate::dataset::{MAX_LEADS, TARGET_HZ, heart_rate_at};
    use crate::ward::{LeadSlot, WindowQuality};
    let fs = TARGET_HZ;
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
