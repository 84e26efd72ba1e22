//! The rule book's rules chosen by patient-wise cross-validation (`holmes evaluate
//! --revalidate --folds K`), as issue 66 asks of every served threshold: the rules the
//! composer serves when it steps down from the served ensemble, chosen until now on the
//! validation part alone.
//!
//! The validation and test parts (which no member trained on) are dealt by patient group into
//! K folds, as `--folds` deals them. An ensemble's members, with the zoo's beat counter as it
//! serves (its classifier and beat rule) where the rule counts beats, score every record once.
//! For each fold, on the other folds: each pooling the members can serve by is tried with the
//! alarm rule chosen for it (only the plain mean where the engine does not weigh members), and
//! the pooling chosen as `--pooling choose` chooses on validation; the fold is then judged
//! under its own pooling and rule, and those out-of-fold results, pooled, are the figures the
//! book keeps. The book keeps the pooling most folds chose (on a tie the plain mean where it
//! is among the tied, else the smallest share) and the median of the rules each fold chose
//! for that pooling on its other folds, with each fold's own rule and pooling and the rules
//! the median is of.

use crate::alarm::rules::{ChosenBy, ValidatedRule};
use crate::alarm::{AlarmRule, MatchOptions};
use crate::core::window::SAMPLE_RATE_HZ;
use crate::serving::engine::ensemble::Ensemble;
use crate::signal::beats::BeatCounter;
use crate::tools::rule_book::RuleRow;
use crate::training::dataset::{RecordData, Split, SplitName, deal};

use super::episodes::{RecordComparison, summarize};
use super::pooling_search::{PoolingTrial, choose_pooling, pooling_trials_on, repool};
use super::replay::{Detectors, Replay, replay};
use super::save::out_of_fold_figures;
use super::served_points::median_rule;
use super::{EvaluateError, EvaluateOptions, beats, condition, load_part};

/// The records folded: the validation and test parts, as `--folds` reads them, and each
/// one's fold (0-based).
pub(crate) struct Folded {
    pub(crate) recs: Vec<RecordData>,
    pub(crate) fold_of: Vec<usize>,
    pub(crate) k: usize,
}

impl Folded {
    /// Reads the held-out parts of `base`'s split and deals them into `k` folds (at least 2).
    pub(crate) fn read(base: &EvaluateOptions, k: usize) -> Result<Folded, EvaluateError> {
        let k = k.max(2);
        let split = Split::read(&base.split)?;
        let mut recs = load_part(base, &split, SplitName::Validation)?;
        recs.extend(load_part(base, &split, SplitName::Test)?);
        let fold_of = deal(&recs, k);
        Ok(Folded { recs, fold_of, k })
    }
}

/// `row`'s rule (`old` as the book holds it) chosen again by the folds of `folded`, for the
/// target and time-to-alarm bound `old` was chosen for, as the book would keep it. `weighs`:
/// whether the engine pools members by weight (else the plain mean is the only pooling).
/// Blocking and CPU-heavy: every folded record scored once by the ensemble.
pub(crate) fn choose_by_folds(
    base: &EvaluateOptions,
    folded: &Folded,
    weighs: bool,
    row: &RuleRow,
    old: &ValidatedRule,
) -> Result<ValidatedRule, EvaluateError> {
    let (window, hop) = (row.window_secs, row.hop_secs);
    let counter = if row.beat_counter {
        BeatCounter::load(&base.models_dir, hop)?
    } else {
        None
    };
    let ens = Ensemble::load(&base.models_dir, &row.members, window)?
        .with_beats(counter)
        .with_share(None)?;
    let opts = EvaluateOptions {
        window_secs: window,
        hop_secs: hop,
        target_sensitivity: old.validation.target_sensitivity,
        delay_limits: old.validation.delay_limits,
        ..base.clone()
    };
    let matching = MatchOptions::default();
    let search = match ens.beats {
        Some(_) => beats::beside_counter(&opts.search(matching)),
        None => opts.search(matching),
    };
    let fs = SAMPLE_RATE_HZ;
    let (win, hop_n, hop_ms) = (window as usize * fs, hop as usize * fs, hop as i64 * 1000);
    let det = Detectors {
        ensemble: Some(&ens),
        classical: false,
        beats: None,
        first_slot: base.leads.first_slot(),
    };
    let reps = folded
        .recs
        .iter()
        .map(|r| replay(r, &r.leads, win, hop_n, det))
        .collect::<Result<Vec<_>, _>>()?;

    let weights = |share: Option<f64>| {
        ens.weights_for(share)
            .expect("a pooling tried is one the members pool by")
    };
    let mut folds: Vec<Vec<PoolingTrial>> = Vec::with_capacity(folded.k);
    let mut own: Vec<(Option<f64>, AlarmRule)> = Vec::with_capacity(folded.k);
    let mut comparisons: Vec<RecordComparison> = Vec::new();
    for f in 0..folded.k {
        let of = |keep: bool| -> Vec<Replay> {
            reps.iter()
                .zip(&folded.fold_of)
                .filter(|&(_, &g)| (g == f) == keep)
                .map(|(r, _)| r.clone())
                .collect()
        };
        let mut others = of(false);
        let trials = if weighs {
            pooling_trials_on(&mut others, &ens, &search)?
        } else {
            let choice = super::choose_rule(&others, Replay::ensemble_scores, &search)?;
            vec![PoolingTrial {
                primary_share: None,
                choice,
                ec57_se: None,
                ec57_pp: None,
            }]
        };
        let chosen = choose_pooling(&trials, opts.target_sensitivity).unwrap_or(0);
        let (share, rule) = (trials[chosen].primary_share, trials[chosen].choice.rule);
        let mut held = of(true);
        repool(&mut held, &weights(share));
        let c = condition(
            &held,
            Replay::ensemble_scores,
            Replay::ensemble_run_onsets,
            rule,
            hop_ms,
            None,
            matching,
        )?;
        comparisons.extend(c.records.into_iter().map(|r| r.comparison));
        tracing::info!(
            fold = f + 1,
            ?share,
            on = rule.on,
            "Fold's pooling and rule chosen"
        );
        own.push((share, rule));
        folds.push(trials);
    }

    let share = most_chosen(&own.iter().map(|o| o.0).collect::<Vec<_>>());
    let rules: Vec<AlarmRule> = folds
        .iter()
        .filter_map(|t| t.iter().find(|t| t.primary_share == share))
        .map(|t| t.choice.rule)
        .collect();
    let rule = median_rule(&rules).expect("every fold tried the pooling most folds chose");
    // The members and counter as the zoo holds them now (a rule chosen again because one was
    // retrained or refitted names the new weights).
    let mut members = ens.member_refs();
    members.sort();
    let chosen_by = ChosenBy {
        how: format!(
            "the median of {} folds' rules for the pooling most of them chose, each chosen on \
             the other folds (patient-wise cross-validation over the {} held-out records); the \
             figures are the folds' pooled out-of-fold results, each fold under its own pooling \
             and rule",
            folded.k,
            folded.recs.len()
        ),
        folds: own.iter().map(|o| o.1).collect(),
        shares: if weighs {
            own.iter().map(|o| o.0).collect()
        } else {
            Vec::new()
        },
        median_of: if weighs { rules } else { Vec::new() },
    };
    Ok(ValidatedRule {
        members,
        hop_secs: hop,
        window_secs: window,
        rule,
        primary_share: share,
        validation: out_of_fold_figures(
            &summarize(&comparisons),
            (opts.target_sensitivity, opts.delay_limits),
            chosen_by,
        ),
    })
}

/// The pooling most folds chose; on a tie the plain mean where it is among the most chosen,
/// else the smallest share among them.
fn most_chosen(shares: &[Option<f64>]) -> Option<f64> {
    let count = |s: Option<f64>| shares.iter().filter(|&&x| x == s).count();
    let most = shares.iter().map(|&s| count(s)).max().unwrap_or(0);
    let mut tied: Vec<Option<f64>> = shares
        .iter()
        .copied()
        .filter(|&s| count(s) == most)
        .collect();
    // `None` sorts first: the plain mean wins a tie.
    tied.sort_by(|a, b| a.partial_cmp(b).expect("shares are numbers"));
    tied.first().copied().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pooling_most_folds_chose_serves_the_plain_mean_on_a_tie() {
        assert_eq!(most_chosen(&[Some(0.8), None, Some(0.8)]), Some(0.8));
        assert_eq!(most_chosen(&[Some(0.8), None, Some(0.4), None]), None);
        assert_eq!(most_chosen(&[Some(0.8), Some(0.4)]), Some(0.4));
        assert_eq!(most_chosen(&[None]), None);
        assert_eq!(most_chosen(&[]), None);
    }
}
