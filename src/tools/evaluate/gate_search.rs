//! The choice of a signal-quality gate on the validation part (`--sqi-gate choose`): every
//! one of [`SqiGate::candidates`], and no gate as the baseline, tried on the replayed
//! validation records with the alarm rule chosen behind it for the target sensitivity; the
//! one with the fewest false alarms at the target wins. Each trial keeps what the gate
//! silenced and the time to alarm by episode kind, since a gate that hears VF as noise delays
//! or misses it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::episodes::TimeToAlarm;
use super::gate::SqiGate;
use super::replay::Replay;
use super::{EvaluateError, choose_rule, condition};
use crate::alarm::{AlarmRule, ThresholdChoice, ThresholdSearch};
use crate::training::dataset::Label;

/// One signal-quality gate tried on the validation part, with the rule chosen behind it.
#[derive(Debug, Clone, Serialize)]
pub struct GateTrial {
    /// `None`: no gate, the baseline.
    pub gate: Option<SqiGate>,
    pub choice: ThresholdChoice,
    /// Shares of the validation hops labelled positive and negative that the gate silenced.
    pub gated_positive: f64,
    pub gated_negative: f64,
    /// Time to alarm by episode kind on validation under the chosen rule.
    pub by_kind: BTreeMap<&'static str, TimeToAlarm>,
}

/// Tries no gate and then each of [`SqiGate::candidates`] on the validation replays: the
/// rule chosen behind it (or the given one), what it reached, the hops it silenced and the
/// time to alarm by kind.
pub(crate) fn gate_trials_on(
    reps: &mut [Replay],
    search: &ThresholdSearch,
    given: Option<AlarmRule>,
) -> Result<Vec<GateTrial>, EvaluateError> {
    let gates = std::iter::once(None).chain(SqiGate::candidates().into_iter().map(Some));
    let mut out = Vec::new();
    for gate in gates {
        let (mut pos, mut neg, mut pos_gated, mut neg_gated) = (0usize, 0usize, 0usize, 0usize);
        for r in reps.iter_mut() {
            r.gated = match &gate {
                Some(g) => g.apply(&r.ensemble, &r.sqi),
                None => r.ensemble.clone(),
            };
            for ((l, s), g) in r.labels.iter().zip(&r.ensemble).zip(&r.gated) {
                let silenced = s.is_some() && g.is_none();
                match l {
                    Label::Positive => (pos, pos_gated) = (pos + 1, pos_gated + silenced as usize),
                    Label::Negative => (neg, neg_gated) = (neg + 1, neg_gated + silenced as usize),
                    Label::Unsure => {}
                }
            }
        }
        let mut choice = choose_rule(reps, Replay::gated_scores, search)?;
        if let Some(rule) = given {
            // Only the figures of the given rule are wanted: the search over it alone.
            let one = ThresholdSearch {
                on_grid: vec![rule.on],
                off_ratio: if rule.on > 0.0 {
                    rule.off / rule.on
                } else {
                    0.0
                },
                persistence: vec![(rule.k, rule.n)],
                ..search.clone()
            };
            choice = choose_rule(reps, Replay::gated_scores, &one)?;
        }
        let c = condition(
            reps,
            Replay::gated_scores,
            Replay::ensemble_run_onsets,
            choice.rule,
            search.hop_ms,
            None,
            search.matching,
        )?;
        let share = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        tracing::info!(gate = ?gate.as_ref().map(ToString::to_string), fa = choice.false_alarms, detected = choice.detected, "Gate tried on validation");
        out.push(GateTrial {
            gate,
            choice,
            gated_positive: share(pos_gated, pos),
            gated_negative: share(neg_gated, neg),
            by_kind: c.by_kind,
        });
    }
    Ok(out)
}

/// The trial (a gate, never the baseline) that reaches the target with the fewest false
/// alarms; ties go to more detected episodes, then to fewer positive hops silenced, then to
/// the earlier candidate. When none reaches the target, the one detecting most. `None`
/// without a gated trial.
pub(crate) fn choose_gate(trials: &[GateTrial]) -> Option<usize> {
    trials
        .iter()
        .enumerate()
        .filter(|(_, t)| t.gate.is_some())
        .min_by(|(i, a), (j, b)| {
            a.choice
                .rank()
                .cmp(&b.choice.rank())
                .then(a.gated_positive.total_cmp(&b.gated_positive))
                .then(i.cmp(j))
        })
        .map(|(i, _)| i)
}
