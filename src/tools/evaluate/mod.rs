//! `holmes evaluate`: the event-level evaluation of the serving ensemble, and of a classical
//! baseline detector beside it, on the records of one part of the split.
//!
//! 1. Each record is replayed ([`replay`]) as the daemon sees a bed: windows of the ward's
//!    length ending at every hop, scored by the ensemble through the engine's own input
//!    selection and combination, and by the classical detector
//!    ([`baseline_scores`](crate::signal::classical::baseline_scores)) on the first lead read
//!    (the primary; V where `--leads secondary` reads V alone).
//! 2. The **alarm rule** of each detector is chosen on the validation part (clean records):
//!    the on-threshold and persistence that reach the target episode sensitivity with the
//!    fewest false alarms, within a median and p90 time to alarm ([`choose_threshold`],
//!    `DelayLimits`), unless a rule is given; for an ensemble scored beside the beat counter,
//!    only among the rules that clear above a run short of the call
//!    ([`beats::beside_counter`]).
//! 3. The rule runs over the reported part's score series ([`condition`], with the
//!    alarm module's state machine), and the alarms are compared with the reference episodes
//!    ([`episodes`]): EC57 episode and duration sensitivity and positive predictivity, time to
//!    alarm (all episodes, VT, VF), false alarms per monitored hour and what the reference says
//!    at each ([`causes`]: noise-marked, ventricular ectopy, just before or after an episode,
//!    other), a per-record table; and window ROC-AUC / PR-AUC over the hops (windows between an episode's onset and its
//!    confirmation left out, as in training).
//! 4. The same under the **noise stress test**: the test part's electrode-motion noise
//!    (`em`, a stretch of time no model trained or was chosen on) added to every lead as `nst`
//!    does, at each SNR asked.
//!
//! 5. With `--beats`, the ensemble beside a **count of ventricular beats** ([`beats`]): a beat
//!    classifier fitted on the train part's annotated beats, and a beat rule (the probability
//!    at which a beat is called ventricular, and a bSQI gate) chosen on validation together
//!    with the alarm rule; where the window ends in a run of five called beats faster than
//!    100/min, the ensemble's score is raised to 1 (where the run holds only at a lower call
//!    probability, to at least 0.2 times it).
//!
//! 6. With `--revalidate`, instead of all this: every rule of the zoo's rule book that a
//!    retrained member or a refitted beat counter keeps from holding is chosen again on the
//!    validation part, for the target it was chosen for, and replaces the old one
//!    ([`revalidate`]).
//!
//! What it reports is in `results` ([`Evaluation`]); [`report`] prints the tables and writes
//! the report folder (JSON and SVG figures).

mod beats;
mod book_folds;
mod causes;
mod challenge;
mod condition;
mod confirm_point;
mod cross_db;
pub mod episodes;
mod fold;
mod folds;
mod folds_retrained;
mod folds_text;
mod leads;
mod listing;
mod monitor_alarms;
#[cfg(test)]
mod noise_check;
mod pooling_search;
mod replay;
pub mod report;
mod results;
mod revalidate;
mod save;
mod served_points;
mod spliced;
mod spliced_alarms;
mod textbook;
mod triggers;

use std::path::PathBuf;

use crate::alarm::rules::RulesError;
use crate::alarm::{
    AlarmError, AlarmRule, DelayLimits, MatchOptions, ThresholdChoice, ThresholdSearch,
    ValidationRecord, choose_threshold,
};
use crate::core::window::SAMPLE_RATE_HZ;
use crate::serving::engine::ensemble::{Ensemble, EnsembleError};
use crate::signal::adjudicate::CONFIRM_AT;
use crate::signal::beats::{BeatCounter, BeatsError};
use crate::signal::classical::ClassicalError;
use crate::training::beats::Fitting;
use crate::training::dataset::{
    self, Database, DatasetError, NoiseBank, RecordData, Split, SplitName,
};
use episodes::EpisodeError;
use replay::{Detectors, Replay, replay};

pub(crate) use condition::condition;
use condition::gross_figures;

pub use beats::{BeatReport, BeatTrial};
pub use causes::FalseAlarmCauses;
pub use cross_db::{CrossDatabase, cross_database, text as cross_database_text};
pub use folds::{CrossValidation, cross_validate};
pub use folds_retrained::cross_validate_retrained;
pub use folds_text::text as cross_validation_text;
pub use leads::LeadSet;
pub use monitor_alarms::MonitorAlarms;
pub use pooling_search::{Pooling, PoolingTrial};
use pooling_search::{choose_pooling, pooled, pooling_trials_on, repool, share_of};
pub use results::{Condition, DetectorResult, Evaluation, RecordRow, WindowMetrics};
pub(crate) use revalidate::{
    Outcome as RevalidationOutcome, revalidate, text as revalidation_text,
};
pub use save::{save_folds_rule, save_rule};
pub use served_points::FoldsMedian;
pub use spliced::{Band, DETECT_WITHIN_SECS, SplicedFigures, SplicedReport};
pub use spliced_alarms::Count;

/// Why an evaluation could not run.
#[derive(Debug, thiserror::Error)]
pub enum EvaluateError {
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(transparent)]
    Ensemble(#[from] EnsembleError),
    #[error(transparent)]
    Alarm(#[from] AlarmError),
    #[error(transparent)]
    Episodes(#[from] EpisodeError),
    #[error(transparent)]
    Classical(#[from] ClassicalError),
    #[error(transparent)]
    Rules(#[from] RulesError),
    #[error(transparent)]
    Beats(#[from] BeatsError),
    #[error(transparent)]
    Zoo(#[from] crate::zoo::ZooError),
    #[error("no rule was chosen on validation (a rule was given), so none can be saved")]
    NothingToSave,
    #[error("the folds' points cannot be kept: {0}")]
    FoldsNotKept(String),
    #[error("{0}: no such zoo folder")]
    NoZoo(PathBuf),
    #[error(
        "{model}: not trained for fold {fold} of {folds} (train it with holmes train --fold {fold} --folds {folds})"
    )]
    FoldZoo {
        model: PathBuf,
        fold: usize,
        folds: usize,
    },
    #[error("the split has no records of part {0} in the data folder{1}")]
    EmptyPart(&'static str, &'static str),
    #[error(
        "the {0} part has no annotated ventricular and other beats to fit the beat classifier on"
    )]
    NoBeats(&'static str),
    #[error(
        "hop of {hop} s and window of {window} s: both must be positive, the hop at most the window"
    )]
    Timing { hop: u32, window: u32 },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What to evaluate and how.
#[derive(Debug, Clone)]
pub struct EvaluateOptions {
    /// The PhysioNet folder (vfdb/, cudb/, mitdb/, svdb/, nstdb/).
    pub data: PathBuf,
    /// The split file.
    pub split: PathBuf,
    /// The part reported (test, by default).
    pub part: SplitName,
    /// The zoo folder and the ensemble's members.
    pub models_dir: PathBuf,
    pub members: Vec<String>,
    /// How the members pool: as their rule in the zoo says (the daemon's way), the plain
    /// mean, or a given primary-lead share; a rule chosen here is saved with it.
    pub pooling: Pooling,
    /// The ward's window and hop, s.
    pub window_secs: u32,
    pub hop_secs: u32,
    /// The ensemble's alarm rule; `None` chooses it on the validation part.
    pub rule: Option<AlarmRule>,
    /// The episode sensitivity the rule is chosen for.
    pub target_sensitivity: f64,
    /// The time to alarm the rule must keep on validation; `None`: any.
    pub delay_limits: Option<DelayLimits>,
    /// Electrode-motion SNRs of the noise stress test, dB (none: no stress test).
    pub noise_db: Vec<f32>,
    /// Also evaluate the classical detector.
    pub classical: bool,
    /// Keep only the this many shortest records of each part (a smoke check).
    pub max_records: Option<usize>,
    /// Also evaluate the ensemble beside a count of ventricular beats, its beat classifier
    /// fitted on the train part (the ensemble itself then scores without the zoo's counter).
    pub beats: bool,
    /// How the beat classifier is fitted wherever one is (`--beats`, cross-database,
    /// cross-validation): its fits from consecutive seeds, each at its own epoch, and the
    /// batches of each epoch.
    pub beat_fitting: Fitting,
    /// The leads read of every record, as a monitor sending them gives them: on the
    /// validation part (the rules chosen so) and the reported part alike (with `beats`, the
    /// classifier is fitted so too).
    pub leads: LeadSet,
    /// Score with the zoo's beat counter, as the daemon does, when the zoo holds one
    /// (`ensemble.count_beats`).
    pub count_beats: bool,
    /// Also splice short runs, salvos and bigeminy of each reported patient's own
    /// ventricular beats into its sinus rhythm, drawn from this seed ([`spliced`]), and judge
    /// the served ensemble and the classical detector on them.
    pub spliced: Option<u64>,
}

impl EvaluateOptions {
    /// The ward's window and hop, s: both positive, the hop at most the window.
    fn timing(&self) -> Result<(u32, u32), EvaluateError> {
        let (window, hop) = (self.window_secs, self.hop_secs);
        if hop == 0 || window == 0 || hop > window {
            return Err(EvaluateError::Timing { hop, window });
        }
        Ok((window, hop))
    }

    /// The alarm rule search every detector's rule is chosen by: the target, the threshold
    /// grid and persistences, the time-to-alarm bound, at the hop.
    fn search(&self, matching: MatchOptions) -> ThresholdSearch {
        ThresholdSearch {
            target_sensitivity: self.target_sensitivity,
            off_ratio: OFF_RATIO,
            on_grid: ThresholdSearch::even_grid(ON_STEPS),
            persistence: PERSISTENCE.to_vec(),
            hop_ms: self.hop_secs as i64 * 1000,
            matching,
            delay_limits: self.delay_limits,
        }
    }
}

/// Candidate persistences `(k, n)` the rule search tries.
const PERSISTENCE: [(u32, u32); 4] = [(1, 1), (2, 2), (2, 3), (3, 4)];
/// The clear threshold as a share of the on-threshold.
const OFF_RATIO: f32 = 0.5;
/// On-thresholds tried: 0.02, 0.04, ..., 0.98.
const ON_STEPS: u32 = 50;

/// Runs the evaluation. Blocking and CPU-heavy (every record of the part, once per noise
/// level, plus the validation part when a rule is to be chosen).
pub fn evaluate(opts: &EvaluateOptions) -> Result<Evaluation, EvaluateError> {
    let (window, hop) = opts.timing()?;
    // The zoo's counter names the served rule whose pooling `served` reads; with `--beats` a
    // new counter is fitted and the ensemble scores without the zoo's.
    let counter = if opts.count_beats {
        BeatCounter::load(&opts.models_dir, hop)?
    } else {
        None
    };
    let ens = Ensemble::load(&opts.models_dir, &opts.members, window)?.with_beats(counter);
    let ens = pooled(ens, opts.pooling, &opts.models_dir, hop, window)?;
    let ens = if opts.beats {
        ens.with_beats(None)
    } else {
        ens
    };
    let split = Split::read(&opts.split)?;
    let fs = SAMPLE_RATE_HZ;
    let (win, hop_n) = (window as usize * fs, hop as usize * fs);
    let hop_ms = hop as i64 * 1000;
    let mut classifier = if opts.beats {
        Some(beats::fit(opts, &split, win)?)
    } else {
        None
    };
    let matching = MatchOptions::default();

    // The rules: given, or chosen on the clean validation records.
    let choose_pooling_here = opts.pooling == Pooling::Choose;
    let needs_validation =
        opts.rule.is_none() || opts.classical || opts.beats || choose_pooling_here;
    let (val_recs, mut val_replays) = if needs_validation {
        let recs = load_part(opts, &split, SplitName::Validation)?;
        let det = Detectors {
            ensemble: (opts.rule.is_none() || opts.beats || choose_pooling_here).then_some(&ens),
            classical: opts.classical,
            beats: classifier.as_ref().map(|c| &c.classifier),
            first_slot: opts.leads.first_slot(),
        };
        let reps = recs
            .iter()
            .map(|r| replay(r, &r.leads, win, hop_n, det))
            .collect::<Result<Vec<_>, _>>()?;
        (recs, reps)
    } else {
        (Vec::new(), Vec::new())
    };
    let search = opts.search(matching);
    // Beside the zoo's counter, the ensemble's rules clear above a run short of the call.
    let ens_search = match ens.beats {
        Some(_) => beats::beside_counter(&search),
        None => search.clone(),
    };
    // The pooling, when chosen: tried on validation, the replays then pooled as chosen.
    let (ens, pooling_trials) = if choose_pooling_here {
        let trials = pooling_trials_on(&mut val_replays, &ens, &ens_search)?;
        let share = share_of(&trials, choose_pooling(&trials, opts.target_sensitivity));
        let ens = ens.with_share(share)?;
        repool(&mut val_replays, ens.weights());
        (ens, trials)
    } else {
        (ens, Vec::new())
    };
    let det = Detectors {
        ensemble: Some(&ens),
        classical: opts.classical,
        beats: classifier.as_ref().map(|c| &c.classifier),
        first_slot: opts.leads.first_slot(),
    };
    let ens_choice = match opts.rule {
        Some(_) => None,
        None => Some(choose_rule(
            &val_replays,
            Replay::ensemble_scores,
            &ens_search,
        )?),
    };
    let ens_rule = opts
        .rule
        .or(ens_choice.as_ref().map(|c| c.rule))
        .expect("given or chosen");
    let ens_val_ec57 = match &ens_choice {
        Some(c) => Some(gross_figures(
            &val_replays,
            Replay::ensemble_scores,
            Replay::ensemble_run_onsets,
            c.rule,
            hop_ms,
            matching,
        )?),
        None => None,
    };
    let beats_choice = if opts.beats {
        Some(beats::choose(&mut val_replays, &search)?)
    } else {
        None
    };
    let cls_choice = if opts.classical {
        Some(choose_rule(
            &val_replays,
            Replay::classical_scores,
            &search,
        )?)
    } else {
        None
    };
    // The opinion on monitor alarms reads with the fitted classifier with `--beats`, else
    // the served counter's; its operating point is the served counter's where the folds chose
    // one for it (`--folds --save-rule`), else chosen on the validation part's proxy alarms
    // (the classical detector's, and the spliced events' with `--spliced`).
    let served_classifier = classifier
        .as_ref()
        .map(|c| &c.classifier)
        .or(ens.beats.as_ref().map(|b| &b.file.classifier));
    let folds_point = match &classifier {
        Some(_) => None,
        None => ens.beats.as_ref().and_then(|b| b.file.opinion.clone()),
    };
    let served_pick: fn(&Replay) -> &[Option<f32>] = match beats_choice {
        Some(_) => Replay::with_beats_scores,
        None => Replay::ensemble_scores,
    };
    let confirm_point = match (served_classifier, &cls_choice) {
        _ if folds_point.is_some() => None,
        (Some(c), Some(cc)) => confirm_point::on_validation(
            &confirm_point::Validation {
                recs: &val_recs,
                replays: &val_replays,
                det: Detectors {
                    classical: false,
                    beats: None,
                    ..det
                },
                pick: served_pick,
                monitor: cc.rule,
                spliced_seed: opts.spliced,
                window: win,
                hop: hop_n,
            },
            c,
            matching,
        )?,
        _ => None,
    };
    let confirm_at = match (&folds_point, &confirm_point) {
        (Some(f), _) => f.confirm_at,
        (None, Some(p)) => p.point,
        (None, None) => CONFIRM_AT,
    };
    let validation_records: Vec<String> = val_recs.iter().map(|r| r.key.clone()).collect();
    drop(val_replays);
    drop(val_recs);

    // The reported part: clean, then each noise level.
    let recs = load_part(opts, &split, opts.part)?;
    let bank = if opts.noise_db.is_empty() {
        None
    } else {
        let mut banks = NoiseBank::load(&opts.data, &[SplitName::Test])?;
        banks.pop()
    };
    let mut ens_conditions = Vec::new();
    let mut cls_conditions = Vec::new();
    let mut beats_conditions = Vec::new();
    let mut monitor = None;
    // Its opinions (truth, probability, confirmed), to pool with the spliced events'.
    let mut monitor_decided = Vec::new();
    let levels = std::iter::once(None).chain(opts.noise_db.iter().map(|&d| Some(d)));
    let mut textbook = textbook::Tally::default();
    for snr in levels {
        let mut reps = Vec::with_capacity(recs.len());
        // The stressed leads, where noise is added (the textbook monitor reads them too).
        let mut stressed: Vec<Option<Vec<Vec<f32>>>> = Vec::with_capacity(recs.len());
        for r in &recs {
            let leads = match (snr, &bank) {
                (Some(db), Some(bank)) => {
                    let mut leads = r.leads.clone();
                    bank.stress(&mut leads, opts.leads.first_slot(), &r.beats, db);
                    Some(leads)
                }
                _ => None,
            };
            reps.push(replay(
                r,
                leads.as_ref().unwrap_or(&r.leads),
                win,
                hop_n,
                det,
            )?);
            stressed.push(leads);
            tracing::debug!(record = %r.key, snr_db = ?snr, "Record replayed");
        }
        ens_conditions.push(condition(
            &reps,
            Replay::ensemble_scores,
            Replay::ensemble_run_onsets,
            ens_rule,
            hop_ms,
            snr,
            matching,
        )?);
        if let Some((beat_rule, c, _, _)) = &beats_choice {
            beats::apply(&mut reps, *beat_rule);
            beats_conditions.push(condition(
                &reps,
                Replay::with_beats_scores,
                Replay::with_beats_run_onsets,
                c.rule,
                hop_ms,
                snr,
                matching,
            )?);
        }
        if let (Some(c), None) = (&cls_choice, snr) {
            // The served ensemble; with `--beats`, the one beside the fitted counter.
            let pick: fn(&Replay) -> &[Option<f32>] = match beats_choice {
                Some(_) => Replay::with_beats_scores,
                None => Replay::ensemble_scores,
            };
            let served = beats_choice
                .as_ref()
                .map_or(ens_rule, |(_, bc, _, _)| bc.rule);
            let records: Vec<&RecordData> = recs.iter().collect();
            let judged = monitor_alarms::judge(
                &reps,
                &records,
                served_classifier,
                pick,
                (c.rule, served),
                hop_ms,
                matching,
            )?;
            let judged: Vec<_> = judged.into_iter().map(|j| j.at(confirm_at)).collect();
            monitor_decided = monitor_alarms::decided(&judged);
            let mut m = monitor_alarms::figures(&judged, confirm_at);
            if let Some(a) = &mut m.adjudication {
                a.point_chosen_on = confirm_point.clone();
                a.folds_points = folds_point.as_ref().map_or(Vec::new(), |f| f.folds.clone());
            }
            monitor = Some(m);
        }
        if cls_choice.is_some() {
            let played: Vec<textbook::Played<'_>> = recs
                .iter()
                .zip(&stressed)
                .zip(&reps)
                .map(|((record, s), replay)| textbook::Played {
                    record,
                    leads: s.as_ref().unwrap_or(&record.leads),
                    replay,
                })
                .collect();
            let adjudicator = served_classifier.map(|c| (c, confirm_at));
            textbook.add(&played, served_pick, adjudicator, snr, matching)?;
        }
        if let Some(c) = &cls_choice {
            cls_conditions.push(condition(
                &reps,
                Replay::classical_scores,
                Replay::no_onsets,
                c.rule,
                hop_ms,
                snr,
                matching,
            )?);
        }
        tracing::info!(snr_db = ?snr, "Condition evaluated");
    }

    let (spliced, spliced_svg) = match opts.spliced {
        Some(seed) => {
            let parts = spliced::splice_part(&recs, seed);
            let report = spliced::evaluate(
                &parts,
                seed,
                win,
                hop_n,
                Detectors {
                    beats: served_classifier,
                    ..det
                },
                (ens_rule, cls_choice.as_ref().map(|c| c.rule)),
                confirm_at,
            )?;
            tracing::info!(
                records = report.records.len(),
                events = report.events,
                "Spliced runs evaluated"
            );
            (Some(report), spliced::figure_svg(&recs, &parts))
        }
        None => (None, None),
    };
    let proxy_pooled = spliced.as_ref().map_or(Vec::new(), |r| {
        spliced_alarms::pooled(&monitor_decided, &r.alarms)
    });

    let mut detectors = vec![DetectorResult {
        detector: "ensemble",
        rule: ens_rule,
        chosen_on_validation: ens_choice,
        ec57_on_validation: ens_val_ec57,
        conditions: ens_conditions,
    }];
    if let Some(c) = cls_choice {
        detectors.push(DetectorResult {
            detector: "classical",
            rule: c.rule,
            chosen_on_validation: Some(c),
            ec57_on_validation: None,
            conditions: cls_conditions,
        });
    }
    let beat_trials = match beats_choice {
        Some((beat_rule, c, trials, figures)) => {
            detectors.push(DetectorResult {
                detector: "ensemble+beats",
                rule: c.rule,
                chosen_on_validation: Some(c),
                ec57_on_validation: Some(figures),
                conditions: beats_conditions,
            });
            if let Some(r) = &mut classifier {
                r.rule = Some(beat_rule);
            }
            trials
        }
        None => Vec::new(),
    };
    Ok(Evaluation {
        part: opts.part.as_str(),
        leads: opts.leads,
        records: recs.iter().map(|r| r.key.clone()).collect(),
        validation_records,
        members: ens.member_refs(),
        primary_share: ens.primary_share(),
        pooling_trials,
        window_secs: window,
        hop_secs: hop,
        matching,
        target_sensitivity: opts.target_sensitivity,
        delay_limits: opts.delay_limits,
        detectors,
        beats: classifier,
        beat_trials,
        monitor_alarms: monitor,
        spliced,
        proxy_pooled,
        textbook_monitor: textbook.figures(confirm_at),
        spliced_svg,
    })
}

/// The rule of one detector's scores (`pick`) chosen on the replayed validation records.
pub(crate) fn choose_rule(
    reps: &[Replay],
    pick: fn(&Replay) -> &[Option<f32>],
    search: &ThresholdSearch,
) -> Result<ThresholdChoice, AlarmError> {
    let series: Vec<Vec<(i64, Option<f32>)>> = reps
        .iter()
        .map(|r| {
            r.ends_ms
                .iter()
                .copied()
                .zip(pick(r).iter().copied())
                .collect()
        })
        .collect();
    let records: Vec<ValidationRecord<'_>> = reps
        .iter()
        .zip(&series)
        .map(|(r, s)| ValidationRecord {
            scores: s,
            episodes: &r.reference,
            monitored_ms: r.monitored_ms,
        })
        .collect();
    choose_threshold(&records, search)
}

/// The records of `part` present under the data folder, in key order (or the
/// `max_records` shortest of them).
fn load_part(
    opts: &EvaluateOptions,
    split: &Split,
    part: SplitName,
) -> Result<Vec<RecordData>, EvaluateError> {
    load_part_of(opts, split, part, |_| true)
}

/// [`load_part`] of the databases `keep` keeps, with the leads `opts.leads` reads.
fn load_part_of(
    opts: &EvaluateOptions,
    split: &Split,
    part: SplitName,
    keep: fn(Database) -> bool,
) -> Result<Vec<RecordData>, EvaluateError> {
    let keys: Vec<(Database, String)> = dataset::record_keys(&opts.data)?
        .into_iter()
        .filter(|(db, name)| keep(*db) && split.of(&format!("{}/{name}", db.name())) == Some(part))
        .collect();
    if keys.is_empty() {
        return Err(EvaluateError::EmptyPart(part.as_str(), ""));
    }
    let mut recs = dataset::load_keys(&opts.data, &keys)?;
    opts.leads.select(&mut recs);
    if recs.is_empty() {
        return Err(EvaluateError::EmptyPart(
            part.as_str(),
            " with a second lead",
        ));
    }
    if let Some(n) = opts.max_records {
        recs.sort_by_key(|r| (r.len(), r.key.clone()));
        recs.truncate(n.max(1));
        recs.sort_by(|a, b| a.key.cmp(&b.key));
    }
    Ok(recs)
}
