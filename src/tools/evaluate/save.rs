//! Keeping what `holmes evaluate --save-rule` chose: on validation, the ensemble's alarm rule
//! (with the pooling it was chosen for) in the zoo's rules file, and with `--beats` the zoo's
//! beat counter beside it; over folds (`--folds K --save-rule`), the median of the folds' beat
//! and alarm rules ([`FoldsMedian`]), each chosen on the other folds, as the served counter's
//! beat rule and the served ensemble's alarm rule, each recording how it was chosen.

use super::episodes::Summary;
use super::folds::{CrossValidation, Scope};
use super::served_points::FoldsMedian;
use super::{EvaluateError, Evaluation};
use crate::alarm::rules::{ChosenBy, MemberRef, RuleBook, ValidatedRule, ValidationFigures};
use crate::serving::engine::counter::BEATS_NAME;
use crate::signal::beats::{BeatCounter, BeatsChosenBy, BeatsFile, OpinionPoint};

/// Keeps the ensemble's rule chosen on validation in the zoo's rules file
/// ([`RuleBook`]), for the daemon to serve this ensemble with at this hop and window, pooled
/// as it was evaluated ([`Evaluation::primary_share`]). With a
/// beat classifier fitted (`--beats`), it is the zoo's beat counter that is kept
/// ([`BeatsFile`]: the classifier and its beat rule), and the rule chosen with it, for the
/// members and the counter.
pub fn save_rule(e: &Evaluation, models_dir: &std::path::Path) -> Result<(), EvaluateError> {
    let (detector, members) = match &e.beats {
        Some(b) => {
            let rule = b.rule.ok_or(EvaluateError::NothingToSave)?;
            BeatsFile {
                classifier: b.classifier.clone(),
                rule,
                chosen_by: None,
                opinion: None,
            }
            .save(models_dir)?;
            let c = BeatCounter::load(models_dir, e.hop_secs)?.expect("just written");
            let mut m = e.members.clone();
            m.push(MemberRef {
                name: BEATS_NAME.into(),
                sha256: c.sha256,
            });
            ("ensemble+beats", m)
        }
        None => ("ensemble", e.members.clone()),
    };
    let rule = validated_rule(e, detector, members)?;
    let mut book = RuleBook::load(models_dir)?;
    book.insert(rule);
    book.save(models_dir)?;
    Ok(())
}

/// The rule `detector` (`ensemble`, or `ensemble+beats` with a counter fitted) was chosen on
/// validation in `e`, for `members`, with what it reached there: what the book keeps.
pub(crate) fn validated_rule(
    e: &Evaluation,
    detector: &str,
    mut members: Vec<MemberRef>,
) -> Result<ValidatedRule, EvaluateError> {
    members.sort();
    let d = e
        .detectors
        .iter()
        .find(|d| d.detector == detector)
        .expect("the ensemble is always evaluated, and with the beats when they were fitted");
    let c = d
        .chosen_on_validation
        .as_ref()
        .ok_or(EvaluateError::NothingToSave)?;
    Ok(ValidatedRule {
        members,
        hop_secs: e.hop_secs,
        window_secs: e.window_secs,
        rule: c.rule,
        primary_share: e.primary_share,
        validation: ValidationFigures {
            records: e.validation_records.len(),
            target_sensitivity: e.target_sensitivity,
            episodes: c.episodes,
            detected: c.detected,
            false_alarms_per_hour: c.false_alarms_per_hour,
            delay_limits: e.delay_limits,
            met_target: Some(c.met_target),
            median_delay_ms: c.median_delay_ms,
            p90_delay_ms: c.p90_delay_ms,
            ec57_sensitivity: d.ec57_on_validation.and_then(|f| f.se),
            chosen_by: None,
        },
    })
}

/// Keeps the folds' median (`cv.served`) as what serves: the zoo's beat counter keeps its
/// classifier with the median beat rule, and the rule book the median alarm rule for the
/// served members and that counter, both saying how they were chosen. Only for folds over
/// the held-out records (the served members score them; fold zoos' members do not serve).
pub fn save_folds_rule(
    cv: &CrossValidation,
    models_dir: &std::path::Path,
) -> Result<FoldsMedian, EvaluateError> {
    let not_kept = |why: String| EvaluateError::FoldsNotKept(why);
    let chosen = cv
        .served
        .ok_or_else(|| not_kept("no fold was judged".into()))?;
    if cv.scope != Scope::HeldOutParts {
        return Err(not_kept(
            "the fold zoos' members are not the served ones; fold the held-out parts with the served members".into(),
        ));
    }
    let how = format!(
        "the median of {} folds' rules, each chosen on the other folds (patient-wise \
         cross-validation over the {} held-out records); the figures are the folds' pooled \
         out-of-fold results, each fold under its own rule",
        cv.folds, cv.clean.summary.records
    );
    let mut counter = BeatCounter::load(models_dir, cv.hop_secs)?
        .ok_or_else(|| not_kept(format!("{} holds no beat counter", models_dir.display())))?;
    counter.file.rule = chosen.beat_rule;
    counter.file.chosen_by = Some(BeatsChosenBy {
        how: how.clone(),
        folds: cv.per_fold.iter().map(|r| r.beat_rule).collect(),
    });
    counter.file.opinion = Some(OpinionPoint {
        confirm_at: chosen.confirm_at,
        how: format!(
            "the median of {} folds' points, each chosen for the challenge-style score on the \
             proxy monitor's alarms of the other folds (patient-wise cross-validation over the \
             {} held-out records)",
            cv.folds, cv.clean.summary.records
        ),
        folds: cv.per_fold.iter().map(|r| r.confirm_at).collect(),
    });
    counter.file.save(models_dir)?;
    let counter = BeatCounter::load(models_dir, cv.hop_secs)?.expect("just written");
    let mut members = Vec::new();
    for name in &cv.members {
        let m = crate::zoo::Manifest::read(&models_dir.join(name))
            .map_err(|e| not_kept(e.to_string()))?;
        members.push(MemberRef {
            name: name.clone(),
            sha256: m.weights.sha256,
        });
    }
    members.push(MemberRef {
        name: BEATS_NAME.into(),
        sha256: counter.sha256,
    });
    members.sort();
    let rule = ValidatedRule {
        members,
        hop_secs: cv.hop_secs,
        window_secs: cv.window_secs,
        rule: chosen.alarm_rule,
        primary_share: None,
        validation: out_of_fold_figures(
            &cv.clean.summary,
            (
                cv.target_sensitivity,
                Some(crate::alarm::DelayLimits::BEDSIDE),
            ),
            ChosenBy {
                how,
                folds: cv.per_fold.iter().map(|r| r.alarm_rule).collect(),
                shares: Vec::new(),
                median_of: Vec::new(),
            },
        ),
    };
    let mut book = RuleBook::load(models_dir)?;
    book.insert(rule);
    book.save(models_dir)?;
    Ok(chosen)
}

/// What the book keeps of a rule the folds chose (`chosen_by`): the folds' pooled out-of-fold
/// results `s` (episodes detected within the matcher's grace, false alarms an hour, time to
/// alarm, EC57's sensitivity), and the target and time-to-alarm bounds it was chosen for.
pub(crate) fn out_of_fold_figures(
    s: &Summary,
    (target_sensitivity, delay_limits): (f64, Option<crate::alarm::DelayLimits>),
    chosen_by: ChosenBy,
) -> ValidationFigures {
    let hours = s.monitored_ms as f64 / 3.6e6;
    let ms = |v: Option<f64>| v.map(|x| (x * 1000.0).round() as i64);
    let t = &s.time_to_alarm;
    ValidationFigures {
        records: s.records,
        target_sensitivity,
        episodes: t.episodes,
        detected: t.episodes - t.missed,
        false_alarms_per_hour: (hours > 0.0).then(|| s.false_alarms as f64 / hours),
        delay_limits,
        met_target: None,
        median_delay_ms: ms(t.median_s),
        p90_delay_ms: ms(t.p90_s),
        ec57_sensitivity: s.ec57_figures.se,
        chosen_by: Some(chosen_by),
    }
}
