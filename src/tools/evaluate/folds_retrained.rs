//! Cross-validation over every record with the members retrained per fold (`holmes evaluate
//! --folds K --fold-zoos DIR`): the records of all three parts of the split are dealt by
//! patient group into K folds ([`fold_split`], as `holmes train --fold k --folds K` dealt
//! them), and fold `k` is judged with the zoo `DIR/fold-k`, whose members learnt from the
//! other folds but the next one. On that next fold the beat classifier (fitted here on the
//! learnt folds' beats) keeps its epoch, and the beat rule and the alarm rule are chosen; fold
//! `k` is then judged as [`folds`](super::folds) judges it. Nothing about a fold is learnt or
//! chosen on it, and every episode of the data set is judged once.

use std::path::Path;

use crate::core::window::SAMPLE_RATE_HZ;
use crate::serving::engine::ensemble::Ensemble;
use crate::training::beats::BeatRows;
use crate::training::dataset::{NoiseBank, Spliced, Split, SplitName, fold_split};
use crate::zoo::Manifest;

use super::folds::{
    CrossValidation, FIT_HOP_SECS, Fold, Held, Judgements, STRESS_DB, Scope, fit_epochs,
    judge_fold, plain_index, report, spliced_copies,
};
use super::replay::{Detectors, Replay, replay};
use super::{EvaluateError, EvaluateOptions, load_part, pooled};

/// Runs the cross-validation with each fold's own zoo under `zoos` (`fold-1` ... `fold-K`).
/// Blocking and CPU-heavy: every record replayed twice (judged and chosen on) plus its stress
/// condition and spliced copy, and K beat classifier fits.
pub fn cross_validate_retrained(
    opts: &EvaluateOptions,
    k: usize,
    zoos: &Path,
) -> Result<CrossValidation, EvaluateError> {
    let (window, hop) = opts.timing()?;
    let fs = SAMPLE_RATE_HZ;
    let (win, hop_n) = (window as usize * fs, hop as usize * fs);
    // Every fold's zoo is checked before any record is read.
    for f in 1..=k {
        check_zoo(&zoos.join(format!("fold-{f}")), &opts.members, f, k)?;
    }
    let split = Split::read(&opts.split)?;
    let mut recs = Vec::new();
    for part in SplitName::ALL {
        recs.extend(load_part(opts, &split, part)?);
    }
    recs.sort_by(|a, b| a.key.cmp(&b.key));
    let bank = if opts.noise_db.is_empty() {
        None
    } else {
        NoiseBank::load(&opts.data, &[SplitName::Test])?.pop()
    };
    let search = opts.search(crate::alarm::MatchOptions::default());
    let spliced = spliced_copies(&recs, opts);

    let mut judged = Judgements::default();
    for f in 0..k {
        let fold_split = fold_split(&recs, k, f);
        let in_part = |name: SplitName| -> Vec<usize> {
            (0..recs.len())
                .filter(|&i| fold_split.of(&recs[i].key) == Some(name))
                .collect()
        };
        let (learnt, chosen, held) = (
            in_part(SplitName::Train),
            in_part(SplitName::Validation),
            in_part(SplitName::Test),
        );
        let dir = zoos.join(format!("fold-{}", f + 1));
        let ens = Ensemble::load(&dir, &opts.members, window)?.with_beats(None);
        let ens = pooled(ens, opts.pooling, &dir, hop, window)?;
        // On the clean records the classical detector too: the monitor whose alarms are
        // adjudicated.
        let det = Detectors {
            ensemble: Some(&ens),
            classical: false,
            beats: None,
            first_slot: opts.leads.first_slot(),
        };
        let with_monitor = Detectors {
            classical: true,
            ..det
        };

        // The beat classifier's epochs, fitted on the learnt folds' beats.
        let epochs = fit_epochs(
            learnt.iter().map(|&i| &recs[i]),
            win,
            "learnt folds'",
            opts.beat_fitting,
        )?;
        let mut chosen_rows = BeatRows::default();
        for &i in &chosen {
            chosen_rows.add_record(&recs[i], win, FIT_HOP_SECS * fs);
        }

        let chosen_reps: Vec<Replay> = chosen
            .iter()
            .map(|&i| replay(&recs[i], &recs[i].leads, win, hop_n, with_monitor))
            .collect::<Result<_, _>>()?;
        // The plain spliced copies of the records chosen on: their proxy alarms help choose
        // the opinion's point.
        let chosen_spliced: Vec<(&Spliced, Replay)> = chosen
            .iter()
            .filter_map(|&i| plain_index(&spliced[i]).map(|c| &spliced[i][c]))
            .map(|sp| Ok((sp, replay(&sp.record, &sp.record.leads, win, hop_n, det)?)))
            .collect::<Result<_, EvaluateError>>()?;
        let stressed_leads: Vec<Option<Vec<Vec<f32>>>> = held
            .iter()
            .map(|&i| {
                bank.as_ref().map(|b| {
                    let mut leads = recs[i].leads.clone();
                    b.stress(
                        &mut leads,
                        opts.leads.first_slot(),
                        &recs[i].beats,
                        STRESS_DB,
                    );
                    leads
                })
            })
            .collect();
        let mut held_reps = Vec::with_capacity(held.len());
        for (j, &i) in held.iter().enumerate() {
            let r = &recs[i];
            let clean = replay(r, &r.leads, win, hop_n, with_monitor)?;
            let stressed = match &stressed_leads[j] {
                Some(l) => Some(replay(r, l, win, hop_n, det)?),
                None => None,
            };
            let spliced_rep: Vec<Replay> = spliced[i]
                .iter()
                .map(|sp| replay(&sp.record, &sp.record.leads, win, hop_n, det))
                .collect::<Result<_, _>>()?;
            held_reps.push((clean, stressed, spliced_rep));
        }
        tracing::info!(
            fold = f + 1,
            learnt = learnt.len(),
            chosen_on = chosen.len(),
            judged = held.len(),
            "Fold replayed with its own zoo"
        );
        let fold = Fold {
            number: f + 1,
            fits: &epochs,
            chosen_rows: &chosen_rows,
            chosen_on: chosen
                .iter()
                .zip(&chosen_reps)
                .map(|(&i, r)| (r, &recs[i]))
                .collect(),
            chosen_spliced: chosen_spliced.iter().map(|(s, r)| (*s, r)).collect(),
            held: held
                .iter()
                .zip(&held_reps)
                .zip(&stressed_leads)
                .map(|((&i, (clean, stressed, sp)), leads)| Held {
                    record: &recs[i],
                    clean,
                    stressed: leads.as_deref().zip(stressed.as_ref()),
                    spliced: spliced[i].iter().zip(sp).collect(),
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
        Scope::EveryRecordRetrained,
    )
}

/// The zoo of fold `fold` of `k` holds each member, trained for that fold.
fn check_zoo(dir: &Path, members: &[String], fold: usize, k: usize) -> Result<(), EvaluateError> {
    if !dir.is_dir() {
        return Err(EvaluateError::NoZoo(dir.to_owned()));
    }
    let mark = format!("cross-validation fold {fold} of {k}:");
    for m in members {
        let manifest = Manifest::read(&dir.join(m))?;
        if !manifest.training.data.contains(&mark) {
            return Err(EvaluateError::FoldZoo {
                model: dir.join(m).join(crate::zoo::MANIFEST_FILE),
                fold,
                folds: k,
            });
        }
    }
    Ok(())
}
