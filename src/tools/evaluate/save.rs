//! Keeping what `holmes evaluate --save-rule` chose on validation: the ensemble's alarm rule
//! (with the pooling it was chosen for) in the zoo's rules file, and with `--beats` the zoo's
//! beat counter beside it.

use super::{EvaluateError, Evaluation};
use crate::alarm::rules::{MemberRef, RuleBook, ValidatedRule, ValidationFigures};
use crate::serving::engine::ensemble::BEATS_NAME;
use crate::signal::beats::{BeatCounter, BeatsFile};

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
        },
    })
}
