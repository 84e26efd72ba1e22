//! Patient-wise cross-validation of the operating points (`holmes evaluate --folds K`): the
//! records the served members never trained on (the validation and test parts) are dealt by
//! patient group into K folds, and for each fold the beat counter's epoch, its beat rule and
//! the alarm rule are chosen on the **other** folds only, then judged on that fold. The
//! event figures are pooled over every fold, so they rest on every episode of those records
//! rather than on a dozen, each with its 95 % Wilson interval, per database and per kind
//! (VT, VF), clean and under 6 dB electrode motion; how far each operating point moved from
//! fold to fold is reported beside them.
//!
//! Patient groups are dealt so that the folds hold about as many episodes and groups each
//! (the groups with most episodes first, each to the fold with fewest so far). The members score every
//! record once (they were trained on the train part, which no fold holds); the beat
//! classifier is fitted once on the train part's beats, as `--beats` fits it, and each fold
//! keeps the epoch that ranks the other folds' beats best (PR-AUC). Retraining the members per
//! fold, so that the train part's records can be folded in too, is not done here.
//!
//! With `--spliced`, each record that can be spliced (`training::dataset::splice`) is also
//! replayed with runs, salvos and bigeminy of its own patient's beats, and each fold's spliced
//! events are judged under the rules chosen for it (on the other folds' real records: chosen
//! with the spliced runs too, every fold fell back to its most sensitive rule, 2026-11-27).
//!
//! The 6 dB condition adds the test part's stretches of recorded electrode motion to every
//! record as `nst` does (clean for 5 min, then 2 min noisy, 2 min clean); the rules are those
//! chosen on the other folds' clean records.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::alarm::matching::AlarmTiming;
use crate::alarm::{AlarmRule, MatchOptions};
use crate::core::stats::wilson_interval;
use crate::core::window::SAMPLE_RATE_HZ;
use crate::serving::engine::ensemble::Ensemble;
use crate::signal::adjudicate::CONFIRM_AT;
use crate::signal::beats::BeatClassifier;
use crate::training::beats::{BeatRows, Fitting};
use crate::training::dataset::{EpisodeKind, NoiseBank, RecordData, Split, SplitName};
use crate::training::dataset::{RunShape, Spliced, deal};

use super::episodes::{RecordComparison, Summary, TimeToAlarm, summarize, time_to_alarm};
pub use super::fold::FoldRow;
use super::fold::Judged;
pub(super) use super::fold::{Fold, Held, Judgements, STRESS_DB, judge_fold};
use super::monitor_alarms::{self, MonitorAlarms};
use super::replay::{Detectors, Replay, replay};
use super::spliced::{SplicedFigures, figures_under, splice_copies};
use super::spliced_alarms::{self, ProxyPooled, SplicedAdjudication};
use super::{EvaluateError, EvaluateOptions, FalseAlarmCauses, load_part, load_part_of, pooled};

/// Beats for the fit come from windows this far apart, s (as `--beats` fits).
pub(super) const FIT_HOP_SECS: usize = 15;
/// A proportion with its 95 % Wilson interval.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Proportion {
    pub of: usize,
    pub count: usize,
    pub value: Option<f64>,
    pub interval: Option<[f64; 2]>,
}

impl Proportion {
    fn new(count: usize, of: usize) -> Proportion {
        Proportion {
            of,
            count,
            value: (of > 0).then(|| count as f64 / of as f64),
            interval: wilson_interval(count, of),
        }
    }
}

/// Pooled figures of one condition over some records.
#[derive(Debug, Clone, Serialize)]
pub struct Pooled {
    /// Episodes an alarm was raised for (or already on at) within the matcher's grace.
    pub detected: Proportion,
    /// The same by kind (`vt`, `vf`).
    pub detected_by_kind: BTreeMap<&'static str, Proportion>,
    /// EC57's gross figures, their intervals, EC57's record set, false alarms, time to alarm.
    pub summary: Summary,
    /// Time to alarm by kind.
    pub time_to_alarm_by_kind: BTreeMap<&'static str, TimeToAlarm>,
    /// What the annotations say at each false alarm.
    pub false_alarm_causes: FalseAlarmCauses,
}

/// The cross-validation's report.
#[derive(Debug, Clone, Serialize)]
pub struct CrossValidation {
    pub folds: usize,
    pub scope: Scope,
    pub members: Vec<String>,
    pub window_secs: u32,
    pub hop_secs: u32,
    pub target_sensitivity: f64,
    pub matching: MatchOptions,
    pub per_fold: Vec<FoldRow>,
    /// All records, clean; then each database apart.
    pub clean: Pooled,
    pub clean_by_database: BTreeMap<String, Pooled>,
    /// All records under 6 dB electrode motion (absent with `--no-noise`).
    pub stressed: Option<Pooled>,
    /// With `--spliced`: the seed, and each fold's spliced events judged under its rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub splice_seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spliced: Option<SplicedFigures>,
    /// The classical detector's clean alarms standing for a monitor's, each fold's under its
    /// rule chosen on the other folds, judged with the served score and alarm before each
    /// (`monitor_alarms`); absent where the folds replayed no classical detector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitor_alarms: Option<MonitorAlarms>,
    /// With `--spliced`: the proxy monitor's alarm at each spliced event, and Holmes's opinion
    /// on each at its fold's point.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spliced_adjudication: Option<SplicedAdjudication>,
    /// The monitor's alarms and the spliced events' pooled (plain events, then with the shaped
    /// runs), each opinion at its fold's point: the proxy's figures against the targets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proxy_pooled: Vec<ProxyPooled>,
    /// A textbook monitor's alarms (N = 4, 5, 6 wide beats) on every fold's records, clean
    /// and at 6 dB, each opinion at its fold's point.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub textbook_monitor: Vec<super::textbook::TextbookMonitor>,
    /// The served points the folds choose: the median of their beat and alarm rules
    /// (`--save-rule` keeps them).
    pub served: Option<super::served_points::FoldsMedian>,
    /// Every adjudicated proxy alarm, the monitor's then the spliced events', one by one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alarms: Vec<super::listing::ListedAlarm>,
}

/// Runs the cross-validation. Blocking and CPU-heavy: the validation and test parts replayed
/// once clean and once at 6 dB, the beat classifier's fits fitted once, K rule searches.
pub fn cross_validate(opts: &EvaluateOptions, k: usize) -> Result<CrossValidation, EvaluateError> {
    let k = k.max(2);
    let (window, hop) = opts.timing()?;
    let fs = SAMPLE_RATE_HZ;
    let (win, hop_n) = (window as usize * fs, hop as usize * fs);
    let split = Split::read(&opts.split)?;
    let ens = Ensemble::load(&opts.models_dir, &opts.members, window)?.with_beats(None);
    let ens = pooled(ens, opts.pooling, &opts.models_dir, hop, window)?;

    let mut recs = load_part(opts, &split, SplitName::Validation)?;
    recs.extend(load_part(opts, &split, SplitName::Test)?);
    let fold_of = deal(&recs, k);
    let spliced = spliced_copies(&recs, opts);

    // The classifier's epochs, fitted on the train part's beats.
    let labelled = |db: crate::training::dataset::Database| db.labels_ventricular_beats();
    let train = load_part_of(opts, &split, SplitName::Train, labelled)?;
    let epochs = fit_epochs(train.iter(), win, "train", opts.beat_fitting)?;
    let record_rows: Vec<BeatRows> = recs
        .iter()
        .map(|r| {
            let mut rows = BeatRows::default();
            rows.add_record(r, win, FIT_HOP_SECS * fs);
            rows
        })
        .collect();

    // The members' scores, clean and stressed, once; on the clean records the classical
    // detector's too, the monitor whose alarms are adjudicated.
    let det = Detectors {
        ensemble: Some(&ens),
        classical: false,
        beats: None,
        first_slot: opts.leads.first_slot(),
    };
    let stressed_leads: Option<Vec<Vec<Vec<f32>>>> = if opts.noise_db.is_empty() {
        None
    } else {
        let bank = NoiseBank::load(&opts.data, &[SplitName::Test])?.pop();
        bank.map(|bank| {
            recs.iter()
                .map(|r| {
                    let mut leads = r.leads.clone();
                    bank.stress(&mut leads, opts.leads.first_slot(), &r.beats, STRESS_DB);
                    leads
                })
                .collect()
        })
    };
    let mut clean = Vec::with_capacity(recs.len());
    let mut stressed = Vec::new();
    let mut spliced_clean: Vec<Vec<Replay>> = Vec::with_capacity(recs.len());
    let with_monitor = Detectors {
        classical: true,
        ..det
    };
    for (i, r) in recs.iter().enumerate() {
        clean.push(replay(r, &r.leads, win, hop_n, with_monitor)?);
        spliced_clean.push(
            spliced[i]
                .iter()
                .map(|sp| replay(&sp.record, &sp.record.leads, win, hop_n, det))
                .collect::<Result<_, _>>()?,
        );
        if let Some(s) = &stressed_leads {
            stressed.push(replay(r, &s[i], win, hop_n, det)?);
        }
    }
    tracing::info!(
        records = recs.len(),
        folds = k,
        "Records replayed for cross-validation"
    );

    let search = opts.search(MatchOptions::default());
    let mut judged = Judgements::default();
    for f in 0..k {
        let held: Vec<usize> = (0..recs.len()).filter(|&i| fold_of[i] == f).collect();
        let others: Vec<usize> = (0..recs.len()).filter(|&i| fold_of[i] != f).collect();
        let mut other_rows = BeatRows::default();
        for &i in &others {
            other_rows.extend(&record_rows[i]);
        }
        let fold = Fold {
            number: f + 1,
            fits: &epochs,
            chosen_rows: &other_rows,
            chosen_on: others.iter().map(|&i| (&clean[i], &recs[i])).collect(),
            chosen_spliced: others
                .iter()
                .filter_map(|&i| {
                    plain_index(&spliced[i]).map(|c| (&spliced[i][c], &spliced_clean[i][c]))
                })
                .collect(),
            held: held
                .iter()
                .map(|&i| Held {
                    record: &recs[i],
                    clean: &clean[i],
                    stressed: stressed_leads.as_ref().map(|s| (&s[i][..], &stressed[i])),
                    spliced: spliced[i].iter().zip(&spliced_clean[i]).collect(),
                })
                .collect(),
        };
        let j = judge_fold(&fold, &search, win, hop_n)?;
        judged.add(j);
    }
    report(
        opts,
        k,
        (window, hop),
        search.matching,
        &recs,
        judged,
        Scope::HeldOutParts,
    )
}

/// Each record's spliced copies (runs, salvos and bigeminy of its patient's own beats; then
/// the shaped runs), where `--spliced` asks and the record can be spliced.
pub(super) fn spliced_copies(recs: &[RecordData], opts: &EvaluateOptions) -> Vec<Vec<Spliced>> {
    recs.iter()
        .map(|r| {
            opts.spliced
                .map_or(Vec::new(), |seed| splice_copies(r, seed))
        })
        .collect()
}

/// Where the plain copy is among a record's spliced `copies` (the one without shaped runs).
pub(super) fn plain_index(copies: &[Spliced]) -> Option<usize> {
    copies
        .iter()
        .position(|s| s.events.iter().all(|e| e.shape == RunShape::Plain))
}

/// Each of the beat classifier's fits (consecutive seeds, as `fitting` says), epoch by epoch, fitted on
/// the beats of `recs` and of their augmented copies (as `--beats` fits); `part` names them in
/// the error when they hold no ventricular beat.
pub(super) fn fit_epochs<'r>(
    recs: impl Iterator<Item = &'r RecordData>,
    win: usize,
    part: &'static str,
    fitting: Fitting,
) -> Result<Vec<Vec<BeatClassifier>>, EvaluateError> {
    let hop = FIT_HOP_SECS * SAMPLE_RATE_HZ;
    let mut rows = BeatRows::default();
    for (i, r) in recs.enumerate() {
        rows.add_record(r, win, hop);
        rows.add_augmented(r, win, hop, i as u64);
    }
    if !rows.ys.iter().any(|&y| y) {
        return Err(EvaluateError::NoBeats(part));
    }
    Ok((0..fitting.fits.max(1) as u64)
        .map(|seed| rows.fit_epochs(seed, fitting.batches))
        .collect())
}

/// Which records a cross-validation folds, and how its members were trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The validation and test parts; the members trained once on the train part.
    HeldOutParts,
    /// Every record; the members trained for each fold on the folds it does not judge or
    /// choose on (`holmes train --fold`).
    EveryRecordRetrained,
}

/// The report of folds judged over `recs`.
pub(super) fn report(
    opts: &EvaluateOptions,
    k: usize,
    (window, hop): (u32, u32),
    matching: MatchOptions,
    recs: &[RecordData],
    judged: Judgements<'_>,
    scope: Scope,
) -> Result<CrossValidation, EvaluateError> {
    let hop_ms = hop as i64 * 1000;
    let mut by_db: BTreeMap<String, Pooled> = BTreeMap::new();
    let mut dbs: Vec<String> = recs.iter().map(|r| r.db.name().to_owned()).collect();
    dbs.sort();
    dbs.dedup();
    for db in dbs {
        let prefix = format!("{db}/");
        let subset: Vec<_> = judged
            .clean
            .iter()
            .filter(|j| j.record.starts_with(&prefix))
            .cloned()
            .collect();
        by_db.insert(db, pool(&subset));
    }
    let spliced_figures = if opts.spliced.is_some() {
        let events: Vec<(&Spliced, &Replay, AlarmRule)> = judged
            .spliced
            .iter()
            .map(|(sp, r, rule)| (*sp, r, *rule))
            .collect();
        Some(figures_under(&events, Replay::with_beats_scores, hop_ms)?)
    } else {
        None
    };
    let mut per_fold = judged.per_fold;
    per_fold.sort_by_key(|f| f.fold);
    let served = super::served_points::folds_median(
        &per_fold
            .iter()
            .map(|r| (r.beat_rule, r.alarm_rule, r.confirm_at))
            .collect::<Vec<_>>(),
    );
    let monitor = (!judged.monitor.is_empty()).then(|| {
        let mut m =
            monitor_alarms::figures(&judged.monitor, served.map_or(CONFIRM_AT, |s| s.confirm_at));

        if let Some(a) = &mut m.adjudication {
            a.folds_points = per_fold.iter().map(|r| r.confirm_at).collect();
        }
        m
    });
    let served_point = served.map_or(CONFIRM_AT, |s| s.confirm_at);
    let spliced_adjudication = (!judged.spliced_opinions.is_empty())
        .then(|| spliced_alarms::figures(&judged.spliced_opinions, served_point));
    let proxy_pooled = spliced_alarms::pooled(
        &monitor_alarms::decided(&judged.monitor),
        &judged.spliced_opinions,
    );
    let textbook_monitor = judged.textbook.figures(served_point);
    let alarms = judged
        .monitor
        .iter()
        .filter_map(|j| j.listed())
        .chain(judged.spliced_opinions.iter().map(|a| a.listed()))
        .collect();
    Ok(CrossValidation {
        folds: k,
        scope,
        members: opts.members.clone(),
        window_secs: window,
        hop_secs: hop,
        target_sensitivity: opts.target_sensitivity,
        matching,
        clean: pool(&judged.clean),
        clean_by_database: by_db,
        stressed: (!judged.stressed.is_empty()).then(|| pool(&judged.stressed)),
        splice_seed: opts.spliced,
        spliced: spliced_figures,
        monitor_alarms: monitor,
        spliced_adjudication,
        proxy_pooled,
        textbook_monitor,
        served,
        per_fold,
        alarms,
    })
}

/// Pools record comparisons: EC57's summary, detection within the grace overall and by kind,
/// time to alarm by kind (each reference episode's kind is that of the episode it begins with).
fn pool(rows: &[Judged]) -> Pooled {
    let comparisons: Vec<RecordComparison> = rows.iter().map(|j| j.comparison.clone()).collect();
    let mut by_kind: BTreeMap<&'static str, Vec<AlarmTiming>> = BTreeMap::new();
    let mut all = Vec::new();
    let mut causes = FalseAlarmCauses::default();
    for Judged {
        comparison: c,
        kinds,
        causes: why,
        ..
    } in rows
    {
        causes.add(why);
        for t in &c.timings {
            all.push(t.timing);
            let kind = kinds
                .iter()
                .min_by_key(|(_, (a, _))| (a - t.onset_ms).abs())
                .map_or(EpisodeKind::Vt, |(k, _)| *k);
            let name = match kind {
                EpisodeKind::Vt => "vt",
                EpisodeKind::Vf => "vf",
            };
            by_kind.entry(name).or_default().push(t.timing);
        }
    }
    let detected = |v: &[AlarmTiming]| {
        Proportion::new(
            v.iter().filter(|&&t| t != AlarmTiming::Missed).count(),
            v.len(),
        )
    };
    Pooled {
        detected: detected(&all),
        detected_by_kind: by_kind.iter().map(|(k, v)| (*k, detected(v))).collect(),
        summary: summarize(&comparisons),
        false_alarm_causes: causes,
        time_to_alarm_by_kind: by_kind
            .iter()
            .map(|(k, v)| (*k, time_to_alarm(v)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proportion_carries_its_interval() {
        let p = Proportion::new(9, 10);
        assert_eq!(p.value, Some(0.9));
        let [a, b] = p.interval.unwrap();
        assert!(a < 0.9 && b > 0.9 && b <= 1.0);
        assert!(Proportion::new(0, 0).value.is_none());
    }
}
