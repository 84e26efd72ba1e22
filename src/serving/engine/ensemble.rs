//! An ensemble ready to serve: its members loaded from the zoo and validated, described for the
//! store and the API ([`ModelInfo`]), and placed on accelerators by the planner ([`prepare`]).
//! The daemon at start-up and the composer's switches both go through [`prepare`].
//!
//! [`Ensemble`] also scores a window in place, member by member, with the engine's own input
//! selection ([`input_of_window`]) and combination ([`combine`], the members weighted as
//! [`pooled_weights`](super::pooling::pooled_weights) says), then the zoo's beat counter when
//! it serves one ([`BeatCounter::apply`]: its reading and judgement, which the engine's jobs
//! run apart, [`beats`](super::beats)): offline scoring (`holmes score`, `holmes evaluate`)
//! uses it. The counter a config serves, and its name, are [`counter`](super::counter)'s.
//!
//! How the members pool is part of what was validated: [`prepare`] reads it from the zoo's
//! alarm rule for the ensemble ([`pooling`](super::pooling)), so the engine pools as the rule
//! was chosen, and a rule without a share serves the plain mean.

use std::collections::HashMap;
use std::path::Path;

use burn::backend::Flex;
use serde::Serialize;

use super::accelerator::{self, Accelerator};
use super::counter::{BEATS_NAME, counter_ref};
use super::pooling::{pooled_weights, served_share};
use super::sources::Sources;
use super::{MemberSpec, input_of_window, plan};
use crate::config::Combine;
use crate::core::score::{MemberScore, ScoreStatus};
use crate::core::window::ClosedWindow;
use crate::signal::beats::{BeatCounter, Counted};
use crate::zoo::{Manifest, ZooError, ZooModel};

#[derive(Debug, thiserror::Error)]
pub enum EnsembleError {
    #[error("ensemble member {name:?} is not in {dir} ({found})")]
    MissingMember {
        name: String,
        dir: String,
        /// The models the folder holds, or that it holds none or does not exist.
        found: String,
    },
    #[error(
        "ensemble member {name:?} reads {secs} s of signal, longer than the ward's {window_secs}-s window (raise ward.window_secs or leave it out)"
    )]
    TooLong {
        name: String,
        secs: f64,
        window_secs: u32,
    },
    #[error(
        "a primary-lead share of {share} needs members reading the primary or the secondary ECG lead, at least one of each (and the share from 0.01 to 0.99)"
    )]
    Share { share: f64 },
    #[error(transparent)]
    Zoo(#[from] ZooError),
}

/// What a models folder holds, for [`EnsembleError::MissingMember`]: its models' names, or
/// that it holds none, cannot be read or does not exist (a relative folder is read from the
/// working directory, which the message then names).
fn found_in(dir: &std::path::Path) -> String {
    if !dir.is_dir() {
        let cwd = std::env::current_dir()
            .ok()
            .filter(|_| dir.is_relative())
            .map(|d| format!(", from {}", d.display()))
            .unwrap_or_default();
        return format!("no such folder{cwd}");
    }
    let names: Vec<String> = match crate::zoo::model_dirs(dir) {
        Ok(dirs) => dirs
            .iter()
            .filter_map(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
            .collect(),
        Err(e) => return format!("the folder cannot be read: {e}"),
    };
    if names.is_empty() {
        "it holds no models".into()
    } else {
        format!("models there: {}", names.join(", "))
    }
}

/// A served model, as `/api/models` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    pub name: String,
    pub version: u32,
    pub input: String,
    pub parameters: usize,
    pub macs_per_window: u64,
    pub sha256: String,
    pub val_roc_auc: Option<f64>,
    pub test_roc_auc: Option<f64>,
}

impl ModelInfo {
    /// The beat counter as a served model (it is part of the ensemble's identity).
    pub fn of_beats(c: &BeatCounter) -> ModelInfo {
        ModelInfo {
            name: BEATS_NAME.into(),
            version: 1,
            input: "ECG beats (both leads)".into(),
            parameters: c.file.classifier.parameters(),
            macs_per_window: c.macs_per_beat(),
            sha256: c.sha256.clone(),
            val_roc_auc: None,
            test_roc_auc: None,
        }
    }

    pub fn of(mf: &Manifest) -> ModelInfo {
        ModelInfo {
            name: mf.name.clone(),
            version: mf.version,
            input: mf.input.label(),
            parameters: mf.parameters,
            macs_per_window: mf.macs_per_window,
            sha256: mf.weights.sha256.clone(),
            val_roc_auc: mf.metrics.get("validation").map(|m| m.roc_auc),
            test_roc_auc: mf.metrics.get("test").map(|m| m.roc_auc),
        }
    }
}

/// The loaded members of an ensemble (on the CPU backend), and the beat counter served
/// beside them, if any.
pub struct Ensemble {
    pub members: Vec<ZooModel<Flex>>,
    pub beats: Option<BeatCounter>,
    /// The primary lead's share of the score, when the members pool by lead.
    primary_share: Option<f64>,
    /// Each member's weight (1 each for the plain mean).
    weights: Vec<f64>,
}

impl Ensemble {
    /// Its members as the zoo's alarm rules name them (name and weights' SHA-256), the beat
    /// counter last when it serves.
    pub(crate) fn member_refs(&self) -> Vec<crate::alarm::rules::MemberRef> {
        self.members
            .iter()
            .map(|m| crate::alarm::rules::MemberRef {
                name: m.manifest.name.clone(),
                sha256: m.manifest.weights.sha256.clone(),
            })
            .chain(self.beats.as_ref().map(counter_ref))
            .collect()
    }

    /// Its members described as served models, the beat counter last when it serves (as
    /// `/api/models` lists them).
    pub(crate) fn models(&self) -> Vec<ModelInfo> {
        self.members
            .iter()
            .map(|m| ModelInfo::of(&m.manifest))
            .chain(self.beats.as_ref().map(ModelInfo::of_beats))
            .collect()
    }

    /// The same members with `beats` counting beside them (or none).
    pub fn with_beats(self, beats: Option<BeatCounter>) -> Ensemble {
        Ensemble { beats, ..self }
    }

    /// The same members pooled with the primary lead's `share` (`lead_weights`), or by the
    /// plain mean (`None`); a share the members cannot pool by is an error.
    pub fn with_share(self, share: Option<f64>) -> Result<Ensemble, EnsembleError> {
        let weights = self.weights_for(share).ok_or(EnsembleError::Share {
            share: share.unwrap_or_default(),
        })?;
        Ok(Ensemble {
            primary_share: share,
            weights,
            ..self
        })
    }

    /// The primary lead's share the members pool with (`None`: the plain mean).
    pub fn primary_share(&self) -> Option<f64> {
        self.primary_share
    }

    /// Each member's weight in the pooling (1 each for the plain mean).
    pub(crate) fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Each member's weight were the members pooled with the primary lead's `share` (1 each
    /// for the plain mean), or `None` when they cannot pool by it ([`pooled_weights`]).
    pub(crate) fn weights_for(&self, share: Option<f64>) -> Option<Vec<f64>> {
        pooled_weights(&self.inputs(), share)
    }

    /// The members' inputs, in order.
    fn inputs(&self) -> Vec<crate::zoo::Input> {
        self.members.iter().map(|m| m.manifest.input).collect()
    }

    /// The same members pooled as the daemon pools them ([`prepare`]): by the lead share of
    /// their alarm rule in the zoo folder `dir` at this hop and window when `combine` weighs
    /// members, else by the plain mean. Blocking (reads the rules file).
    pub fn pooled_as_served(
        self,
        dir: &Path,
        combine: Combine,
        hop_secs: u32,
        window_secs: u32,
    ) -> Ensemble {
        let refs = self.member_refs();
        let share = served_share(dir, combine, &refs, &self.inputs(), hop_secs, window_secs);
        self.with_share(share)
            .expect("rule_share keeps only a share the members can pool by")
    }

    /// Loads the named members from the zoo folder for windows of `window_secs`; a missing or
    /// broken member, or one reading more than the window holds, is an error naming it.
    pub fn load(dir: &Path, names: &[String], window_secs: u32) -> Result<Ensemble, EnsembleError> {
        let device = Default::default();
        let mut members = Vec::with_capacity(names.len());
        for name in names {
            let d = dir.join(name);
            if !d.is_dir() {
                return Err(EnsembleError::MissingMember {
                    name: name.clone(),
                    dir: dir.display().to_string(),
                    found: found_in(dir),
                });
            }
            let m = ZooModel::load(&d, &device)?;
            let secs = m.manifest.input.secs();
            if secs > window_secs as f64 {
                return Err(EnsembleError::TooLong {
                    name: name.clone(),
                    secs,
                    window_secs,
                });
            }
            members.push(m);
        }
        Ok(Ensemble {
            weights: vec![1.0; members.len()],
            members,
            beats: None,
            primary_share: None,
        })
    }

    /// Scores one window in place: each member whose input is usable predicts, and the
    /// probabilities combine as the engine combines them (by the members' weights: the lead
    /// share's, or 1 each).
    pub fn score(&self, w: &ClosedWindow) -> WindowOutcome {
        self.score_batch(std::slice::from_ref(w))
            .pop()
            .expect("one outcome per window")
    }

    /// Scores windows in place, each member predicting on the windows it has an input for in
    /// batches of at most [`OFFLINE_BATCH`], and combines each window's probabilities as
    /// [`score`](Self::score) does. A member failing on a batch is absent from its windows.
    pub fn score_batch(&self, ws: &[ClosedWindow]) -> Vec<WindowOutcome> {
        let mut probs: Vec<Vec<Option<f32>>> = vec![vec![None; self.members.len()]; ws.len()];
        for (j, m) in self.members.iter().enumerate() {
            let usable: Vec<(usize, &[f32])> = ws
                .iter()
                .enumerate()
                .filter_map(|(i, w)| input_of_window(w, &m.manifest.input).map(|x| (i, x)))
                .collect();
            for chunk in usable.chunks(OFFLINE_BATCH) {
                let inputs: Vec<&[f32]> = chunk.iter().map(|&(_, x)| x).collect();
                match m.predict(&inputs) {
                    Ok(p) if p.len() == chunk.len() => {
                        for (&(i, _), p) in chunk.iter().zip(p) {
                            probs[i][j] = Some(p).filter(|p| p.is_finite());
                        }
                    }
                    Ok(p) => {
                        tracing::warn!(model = %m.name(), got = p.len(), want = chunk.len(), "Member returned the wrong number of scores")
                    }
                    Err(e) => {
                        tracing::warn!(model = %m.name(), error = %e, "Member failed on a batch")
                    }
                }
            }
        }
        probs
            .into_iter()
            .map(|row| {
                let present: Vec<(f64, f32)> = row
                    .iter()
                    .zip(&self.weights)
                    .filter_map(|(p, &w)| p.map(|p| (w, p)))
                    .collect();
                let members = self
                    .members
                    .iter()
                    .zip(&row)
                    .map(|(m, &prob)| MemberScore {
                        fault: None,
                        name: m.manifest.name.clone(),
                        version: m.manifest.version,
                        prob,
                    })
                    .collect();
                let score = combine(Combine::WeightedMean, &present);
                let status = match score {
                    Some(_) => ScoreStatus::Scored,
                    None => ScoreStatus::InsufficientSignal,
                };
                (status, score, members)
            })
            .zip(ws)
            .map(|((status, score, members), w)| {
                let counted = match &self.beats {
                    Some(c) => c.apply(w, score),
                    None => Counted {
                        score,
                        ..Counted::default()
                    },
                };
                WindowOutcome {
                    status,
                    score: counted.score,
                    raised: counted.raised,
                    run_risk: counted.run_risk,
                    members,
                    run_onset_ms: counted.run_onset_ms,
                    run_level: counted.run_level,
                }
            })
            .collect()
    }
}

/// Most windows one member predicts on at once offline.
pub const OFFLINE_BATCH: usize = 64;

/// A window's outcome offline.
#[derive(Debug, Clone)]
pub struct WindowOutcome {
    pub status: ScoreStatus,
    /// The ensemble's score, after the beat counter.
    pub score: Option<f32>,
    /// Whether the beat counter raised it to 1.
    pub raised: bool,
    /// The least score the counter's run evidence gave it ([`Counted::run_risk`]).
    pub run_risk: f32,
    /// Each member's.
    pub members: Vec<MemberScore>,
    /// Where the counter raised the score: the first beat of its VT run, ms on the window's
    /// timeline.
    pub run_onset_ms: Option<i64>,
    /// The counter's run level ([`Counted::run_level`]).
    pub run_level: Option<f32>,
}

/// The ensemble's score from its members' `(weight, probability)`: the mean probability
/// (HOLMES eq. 5), or the weighted mean; `None` when no member scored.
pub fn combine(how: Combine, present: &[(f64, f32)]) -> Option<f32> {
    let (mut sum, mut wsum) = (0.0f64, 0.0f64);
    for &(w, p) in present {
        let w = match how {
            Combine::Mean => 1.0,
            Combine::WeightedMean => w,
        };
        sum += w * p as f64;
        wsum += w;
    }
    (wsum > 0.0).then(|| (sum / wsum) as f32)
}

/// An ensemble ready to serve: its members validated, placed by the planner and described
/// for the store.
pub struct Prepared {
    /// The members, then the beat counter when one serves.
    pub models: Vec<ModelInfo>,
    /// The primary lead's share the members pool with (from the ensemble's alarm rule), or
    /// `None` for the plain mean.
    pub primary_share: Option<f64>,
    pub specs: Vec<MemberSpec>,
    /// `(name, version, sha256, input)` per member, for the store.
    pub described: Vec<(String, u32, String, String)>,
    /// The plan's cells as JSON.
    pub plan: String,
}

/// Loads and validates the named members (a missing or broken one is an error naming it),
/// reads their stored profiles and places them on `accelerators` for `beds` beds. Blocking.
pub(crate) fn prepare(
    src: Sources<'_>,
    names: &[String],
    accelerators: &[Accelerator],
    beds: usize,
) -> Result<Prepared, EnsembleError> {
    let dir = src.models_dir;
    let probe = Ensemble::load(dir, names, src.window_secs)?;
    let models: Vec<ModelInfo> = probe
        .members
        .iter()
        .map(|m| ModelInfo::of(&m.manifest))
        .collect();
    let inputs: Vec<_> = probe.members.iter().map(|m| m.manifest.input).collect();
    let mut refs = probe.member_refs();
    drop(probe);
    refs.extend(src.beats.map(counter_ref));
    let (combine, hop, window) = (src.engine.combine, src.hop_secs, src.window_secs);
    let primary_share = served_share(dir, combine, &refs, &inputs, hop, window);
    let pooling = pooled_weights(&inputs, primary_share).expect("checked by rule_share");
    let described = models
        .iter()
        .map(|m| (m.name.clone(), m.version, m.sha256.clone(), m.input.clone()))
        .collect();
    // The profiles measured earlier by `holmes profile` set the batch caps.
    let mut profiles = HashMap::new();
    for m in &models {
        for p in super::profile::load_profiles(src.db, &m.name, &m.sha256).unwrap_or_default() {
            profiles.insert((m.name.clone(), p.device.clone()), p);
        }
    }
    let weights: Vec<(String, u64)> = models
        .iter()
        .map(|m| (m.name.clone(), m.parameters as u64 * 4))
        .collect();
    let cells = plan::plan(&weights, accelerators, &profiles, src.engine, beds);
    let plan = serde_json::to_string(&cells).expect("a plan serialises");
    let specs = models
        .iter()
        .zip(inputs)
        .zip(cells)
        .zip(pooling)
        .map(|(((m, input), cell), weight)| MemberSpec {
            name: m.name.clone(),
            version: m.version,
            input,
            factory: accelerator::zoo_factory(&dir.join(&m.name), &cell.device, cell.batch_cap),
            workers: cell.workers,
            batch_cap: cell.batch_cap,
            weight,
            device: cell.device,
        })
        .collect();
    // The beat counter is listed with the members (the alarm rules name it), but is no model
    // of the engine's queues: it runs where a window's score combines.
    let models = models
        .into_iter()
        .chain(src.beats.map(ModelInfo::of_beats))
        .collect();
    Ok(Prepared {
        models,
        primary_share,
        specs,
        described,
        plan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combination_by_hand() {
        assert_eq!(combine(Combine::Mean, &[]), None);
        assert_eq!(combine(Combine::Mean, &[(3.0, 0.2), (1.0, 0.6)]), Some(0.4));
        let w = combine(Combine::WeightedMean, &[(3.0, 0.2), (1.0, 0.6)]).unwrap();
        assert!((w - 0.3).abs() < 1e-6);
    }

    #[test]
    fn a_missing_member_is_told_by_what_the_folder_holds() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("no-such-models");
        assert_eq!(found_in(&gone), "no such folder", "an absolute folder");
        assert!(
            found_in(std::path::Path::new("no-such-models")).starts_with("no such folder, from ")
        );
        assert_eq!(found_in(dir.path()), "it holds no models");
        std::fs::create_dir(dir.path().join("ecg-a")).unwrap();
        std::fs::write(dir.path().join("ecg-a/manifest.json"), "{}").unwrap();
        let found = found_in(dir.path());
        assert!(
            found.starts_with("models there: ") && found.contains("ecg-a"),
            "{found}"
        );
    }
}
