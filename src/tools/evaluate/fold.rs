//! One fold of the cross-validation ([`folds`](super::folds)): the beat counter's epoch, beat
//! rule, alarm rule and the opinion's point chosen on the records of the other folds, then its
//! own records judged under them (clean, at 6 dB, its spliced events, its proxy monitor's
//! alarms and Holmes's opinion on each).

use serde::Serialize;

use crate::alarm::matching::AlarmTiming;
use crate::alarm::{AlarmRule, ThresholdSearch};
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::adjudicate::CONFIRM_AT;
use crate::signal::beats::{BeatClassifier, BeatMemory, BeatRule, run_evidence};
use crate::training::beats::BeatRows;
use crate::training::dataset::{EpisodeKind, RecordData, Spliced};

use super::challenge::choose_point;
use super::episodes::RecordComparison;
use super::monitor_alarms;
use super::replay::Replay;
use super::spliced_alarms::{self, EventAlarm};
use super::textbook::{Played, Tally};
use super::{EvaluateError, FalseAlarmCauses, beats, choose_rule, condition};

/// The noise level of the stress condition, dB.
pub(super) const STRESS_DB: f32 = 6.0;

/// What one fold chose on the others, and what it reached on itself.
#[derive(Debug, Clone, Serialize)]
pub struct FoldRow {
    pub fold: usize,
    pub records: Vec<String>,
    /// Each of the beat classifier's fits: the epoch kept (1-based).
    pub epochs: Vec<usize>,
    pub beat_rule: BeatRule,
    pub alarm_rule: AlarmRule,
    /// The opinion's point, chosen for the challenge-style score on the proxy monitor's alarms
    /// of the records the rules were chosen on ([`CONFIRM_AT`] where they raised none).
    pub confirm_at: f32,
    /// On the other folds: episodes, detected, false alarms (as the rule search counts).
    pub chosen_on_episodes: usize,
    pub chosen_on_detected: usize,
    pub chosen_on_false_alarms: usize,
    /// On this fold, clean: episodes, detected within the grace, false alarms.
    pub episodes: usize,
    pub detected: usize,
    pub false_alarms: usize,
    /// On this fold at 6 dB electrode motion: false alarms (none without the stress test).
    pub stressed_false_alarms: Option<usize>,
}

/// One fold to judge: the beat classifier's fits epoch by epoch, the records its rules are
/// chosen on (and their beats, which choose each fit's epoch), and the records it is judged
/// on, each replayed by the ensemble this fold is judged with.
pub(super) struct Fold<'a, 'r, 's> {
    /// 1-based.
    pub number: usize,
    /// Each fit's classifier after each epoch.
    pub fits: &'r [Vec<BeatClassifier>],
    pub chosen_rows: &'r BeatRows,
    pub chosen_on: Vec<(&'a Replay, &'a RecordData)>,
    /// The plain spliced copies of the records chosen on, replayed: their proxy alarms join
    /// the monitor's in choosing the opinion's point (as on the validation part).
    pub chosen_spliced: Vec<(&'a Spliced, &'a Replay)>,
    pub held: Vec<Held<'a, 's>>,
}

/// A record of the judged fold: clean, under the stress condition, and with its spliced
/// copies (plain, then shaped runs), where asked.
pub(super) struct Held<'a, 's> {
    pub record: &'a RecordData,
    pub clean: &'a Replay,
    pub stressed: Option<(&'a [Vec<f32>], &'a Replay)>,
    pub spliced: Vec<(&'s Spliced, &'a Replay)>,
}

/// What folds reached, one or gathered: each fold's row; their held records judged clean and
/// stressed; their spliced events under their rules; their proxy monitor's alarms with
/// Holmes's opinion on each, at their fold's point; and a textbook monitor's alarms on their
/// held records, clean and stressed.
#[derive(Default)]
pub(super) struct Judgements<'a> {
    pub per_fold: Vec<FoldRow>,
    pub clean: Vec<Judged>,
    pub stressed: Vec<Judged>,
    pub spliced: Vec<(&'a Spliced, Replay, AlarmRule)>,
    pub monitor: Vec<monitor_alarms::Judged>,
    pub spliced_opinions: Vec<EventAlarm>,
    pub textbook: Tally,
}

impl<'a> Judgements<'a> {
    /// Adds another fold's (or folds') judgements.
    pub fn add(&mut self, j: Judgements<'a>) {
        self.per_fold.extend(j.per_fold);
        self.clean.extend(j.clean);
        self.stressed.extend(j.stressed);
        self.monitor.extend(j.monitor);
        self.spliced.extend(j.spliced);
        self.spliced_opinions.extend(j.spliced_opinions);
        self.textbook.extend(j.textbook);
    }
}

/// Chooses a fold's epoch of each fit (the one that ranks `chosen_rows` best by PR-AUC), beat
/// rule and alarm rule on `chosen_on`, and judges its held records under them.
pub(super) fn judge_fold<'s>(
    fold: &Fold<'_, '_, 's>,
    search: &ThresholdSearch,
    win: usize,
    hop_n: usize,
) -> Result<Judgements<'s>, EvaluateError> {
    let hop_ms = search.hop_ms;
    let (epochs, kept): (Vec<usize>, Vec<BeatClassifier>) = fold
        .fits
        .iter()
        .map(|epochs| best_epoch(epochs, fold.chosen_rows))
        .map(|(e, c)| (e, c.clone()))
        .unzip();
    let classifier = &BeatClassifier::mean_of(kept);
    let with_runs = |r: &Replay, leads: &[Vec<f32>]| {
        let mut r = r.clone();
        r.beat_runs = runs(classifier, leads, &r, win, hop_n);
        r
    };
    let mut chosen_on: Vec<Replay> = fold
        .chosen_on
        .iter()
        .map(|(r, rec)| with_runs(r, &rec.leads))
        .collect();
    let (beat_rule, choice, _, _) = beats::choose(&mut chosen_on, search)?;
    // A replay given the fold's runs and called under its beat rule.
    let ruled = |rep: &Replay, leads: &[Vec<f32>]| {
        let mut r = with_runs(rep, leads);
        beats::apply(std::slice::from_mut(&mut r), beat_rule);
        r
    };
    // The monitor's rule, where the classical detector was replayed.
    let monitor_rule = if chosen_on.iter().all(|r| !r.classical.is_empty()) {
        Some(choose_rule(&chosen_on, Replay::classical_scores, search)?.rule)
    } else {
        None
    };
    // The opinion's point, on the monitor's alarms of the same records under the same rules.
    let confirm_at = match monitor_rule {
        Some(m) => {
            beats::apply(&mut chosen_on, beat_rule);
            let records: Vec<&RecordData> = fold.chosen_on.iter().map(|(_, r)| *r).collect();
            let alarms = monitor_alarms::judge(
                &chosen_on,
                &records,
                Some(classifier),
                Replay::with_beats_scores,
                (m, choice.rule),
                hop_ms,
                search.matching,
            )?;
            let mut labelled = monitor_alarms::labelled(&alarms);
            labelled.extend(
                spliced_opinions(&fold.chosen_spliced, classifier, &ruled)
                    .iter()
                    .map(|a| (a.truth(), a.probability())),
            );
            choose_point(&labelled).unwrap_or(CONFIRM_AT)
        }
        None => CONFIRM_AT,
    };
    drop(chosen_on);
    let judge = |reps: &[Replay], snr: Option<f32>| -> Result<Vec<Judged>, EvaluateError> {
        let c = condition(
            reps,
            Replay::with_beats_scores,
            Replay::with_beats_run_onsets,
            choice.rule,
            hop_ms,
            snr,
            search.matching,
        )?;
        Ok(c.records
            .into_iter()
            .zip(reps)
            .map(|(row, rep)| Judged {
                record: row.record,
                comparison: row.comparison,
                kinds: rep.by_kind.clone(),
                causes: row.false_alarm_causes,
            })
            .collect())
    };
    let mut held_clean: Vec<Replay> = fold
        .held
        .iter()
        .map(|h| with_runs(h.clean, &h.record.leads))
        .collect();
    beats::apply(&mut held_clean, beat_rule);
    let clean = judge(&held_clean, None)?;
    let monitor = match monitor_rule {
        Some(m) => monitor_alarms::judge(
            &held_clean,
            &fold.held.iter().map(|h| h.record).collect::<Vec<_>>(),
            Some(classifier),
            Replay::with_beats_scores,
            (m, choice.rule),
            hop_ms,
            search.matching,
        )?
        .into_iter()
        .map(|j| j.at(confirm_at))
        .collect(),
        None => Vec::new(),
    };
    let mut held_noisy: Vec<Replay> = fold
        .held
        .iter()
        .filter_map(|h| h.stressed.map(|(leads, r)| with_runs(r, leads)))
        .collect();
    beats::apply(&mut held_noisy, beat_rule);
    let stressed = if held_noisy.is_empty() {
        Vec::new()
    } else {
        judge(&held_noisy, Some(STRESS_DB))?
    };
    let mut textbook = Tally::default();
    let opinion = Some((classifier, confirm_at));
    let played: Vec<Played<'_>> = fold
        .held
        .iter()
        .zip(&held_clean)
        .map(|(h, replay)| Played {
            record: h.record,
            leads: &h.record.leads,
            replay,
        })
        .collect();
    textbook.add(
        &played,
        Replay::with_beats_scores,
        opinion,
        None,
        search.matching,
    )?;
    let played: Vec<Played<'_>> = fold
        .held
        .iter()
        .filter_map(|h| h.stressed.map(|(leads, _)| (h.record, leads)))
        .zip(&held_noisy)
        .map(|((record, leads), replay)| Played {
            record,
            leads,
            replay,
        })
        .collect();
    if !played.is_empty() {
        let snr = Some(STRESS_DB);
        textbook.add(
            &played,
            Replay::with_beats_scores,
            opinion,
            snr,
            search.matching,
        )?;
    }
    let spliced: Vec<(&'s Spliced, Replay, AlarmRule)> = fold
        .held
        .iter()
        .flat_map(|h| h.spliced.iter())
        .map(|&(sp, rep)| (sp, ruled(rep, &sp.record.leads), choice.rule))
        .collect();
    let spliced_opinions = {
        let pairs: Vec<(&Spliced, &Replay)> = spliced.iter().map(|(sp, r, _)| (*sp, r)).collect();
        spliced_alarms::opinions(&pairs, Replay::with_beats_scores, classifier)
            .into_iter()
            .map(|a| a.at(confirm_at))
            .collect()
    };
    let timings: Vec<AlarmTiming> = clean
        .iter()
        .flat_map(|j| j.comparison.timings.iter().map(|t| t.timing))
        .collect();
    tracing::info!(
        fold = fold.number,
        epochs = ?epochs,
        call_at = beat_rule.call_at,
        on = choice.rule.on,
        confirm_at,
        "Fold judged"
    );
    let row = FoldRow {
        fold: fold.number,
        records: fold.held.iter().map(|h| h.record.key.clone()).collect(),
        epochs,
        beat_rule,
        alarm_rule: choice.rule,
        confirm_at,
        chosen_on_episodes: choice.episodes,
        chosen_on_detected: choice.detected,
        chosen_on_false_alarms: choice.false_alarms,
        episodes: timings.len(),
        detected: timings
            .iter()
            .filter(|&&t| t != AlarmTiming::Missed)
            .count(),
        false_alarms: clean.iter().map(|j| j.comparison.false_alarms).sum(),
        stressed_false_alarms: (!stressed.is_empty())
            .then(|| stressed.iter().map(|j| j.comparison.false_alarms).sum()),
    };
    Ok(Judgements {
        per_fold: vec![row],
        clean,
        stressed,
        spliced,
        monitor,
        spliced_opinions,
        textbook,
    })
}

/// The proxy monitor's alarms at the events of `spliced`, each replay given the fold's runs
/// and beat rule by `ruled`, and Holmes's opinion on each.
fn spliced_opinions(
    spliced: &[(&Spliced, &Replay)],
    classifier: &BeatClassifier,
    ruled: &dyn Fn(&Replay, &[Vec<f32>]) -> Replay,
) -> Vec<EventAlarm> {
    let reps: Vec<Replay> = spliced
        .iter()
        .map(|&(sp, rep)| ruled(rep, &sp.record.leads))
        .collect();
    let pairs: Vec<(&Spliced, &Replay)> = spliced.iter().map(|&(sp, _)| sp).zip(&reps).collect();
    spliced_alarms::opinions(&pairs, Replay::with_beats_scores, classifier)
}

/// The epoch (1-based) of a fit's `epochs` that ranks `rows` best by PR-AUC (the earliest of
/// equals), and its classifier.
fn best_epoch<'c>(epochs: &'c [BeatClassifier], rows: &BeatRows) -> (usize, &'c BeatClassifier) {
    epochs
        .iter()
        .enumerate()
        .map(|(e, c)| (e, c, rows.pr_auc(c)))
        .fold(
            None,
            |best: Option<(usize, &BeatClassifier, f64)>, x| match best {
                Some(b) if b.2 >= x.2 => Some(b),
                _ => Some(x),
            },
        )
        .map(|(e, c, _)| (e + 1, c))
        .expect("one epoch at least")
}

/// A record judged on its fold.
#[derive(Clone)]
pub(super) struct Judged {
    pub record: String,
    /// Its comparison with the reference.
    pub comparison: RecordComparison,
    /// Its reference episodes by kind (to give each episode's timing its kind).
    pub kinds: Vec<(EpisodeKind, (i64, i64))>,
    /// What the annotations say at each of its false alarms.
    pub causes: FalseAlarmCauses,
}

/// Each hop's run evidence under classifier `c`, on `leads` as the replay `r` saw them.
fn runs(
    c: &BeatClassifier,
    leads: &[Vec<f32>],
    r: &Replay,
    window: usize,
    hop: usize,
) -> Vec<crate::signal::beats::RunEvidence> {
    // Each beat classified once, as the ward's counter does.
    let mut memory = BeatMemory::default();
    r.ends_ms
        .iter()
        .map(|&t| {
            let e = (t * SAMPLE_RATE_HZ as i64 / 1000) as usize;
            let w: Vec<&[f32]> = leads.iter().map(|l| &l[e - window..e]).collect();
            run_evidence(c, &w, hop, true, Some((&mut memory, t)))
        })
        .collect()
}
