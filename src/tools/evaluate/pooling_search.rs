//! The choice of how the members pool (`--pooling choose`): the plain mean and each primary
//! lead share of [`SHARES`] tried on the replayed validation records, each with its alarm rule
//! chosen for the target sensitivity. A pooling qualifies when its rule reached the target
//! and, by EC57's own overlap (the figure the target is stated in), its gross episode
//! sensitivity on validation is still at the target; among those, the rule search's ranking
//! decides (fewest false alarms, then most episodes detected), the plain mean first on a tie.
//! With none qualifying, the plain mean serves. The replays keep each member's probability per
//! hop, so trying a pooling re-pools them without scoring again ([`Replay::repool`]).

use serde::Serialize;

use super::replay::Replay;
use super::{EvaluateError, choose_rule, condition};
use crate::alarm::{ThresholdChoice, ThresholdSearch};
use crate::serving::engine::ensemble::Ensemble;
use crate::serving::engine::pooling::lead_weights;

/// The primary lead's shares tried beside the plain mean.
pub(crate) const SHARES: [f64; 6] = [0.3, 0.4, 0.6, 0.7, 0.8, 0.9];

/// One pooling tried on the validation part, with the rule chosen for it.
#[derive(Debug, Clone, Serialize)]
pub struct PoolingTrial {
    /// The primary lead's share (`None`: the plain mean).
    pub primary_share: Option<f64>,
    pub choice: ThresholdChoice,
    /// Gross episode sensitivity and positive predictivity by EC57's overlap under the rule.
    pub ec57_se: Option<f64>,
    pub ec57_pp: Option<f64>,
}

/// Each member's weight under `share` (1 each for the plain mean), or `None` when the members
/// cannot pool by it (then the share is not tried).
fn weights(ens: &Ensemble, share: Option<f64>) -> Option<Vec<f64>> {
    match share {
        None => Some(vec![1.0; ens.members.len()]),
        Some(s) => {
            let inputs: Vec<_> = ens.members.iter().map(|m| m.manifest.input).collect();
            lead_weights(&inputs, s)
        }
    }
}

/// Tries the plain mean and each share the members can pool by on the validation replays
/// (which are left pooled by the last one tried: [`repool`] them with the choice).
pub(crate) fn pooling_trials_on(
    reps: &mut [Replay],
    ens: &Ensemble,
    search: &ThresholdSearch,
) -> Result<Vec<PoolingTrial>, EvaluateError> {
    let shares = std::iter::once(None).chain(SHARES.iter().map(|&s| Some(s)));
    let mut out = Vec::new();
    for share in shares {
        let Some(w) = weights(ens, share) else {
            continue;
        };
        repool(reps, &w);
        let choice = choose_rule(reps, Replay::ensemble_scores, search)?;
        let c = condition(
            reps,
            Replay::ensemble_scores,
            Replay::ensemble_run_onsets,
            choice.rule,
            search.hop_ms,
            None,
            search.matching,
        )?;
        let g = c.summary.gross_figures;
        tracing::info!(?share, fa = choice.false_alarms, detected = choice.detected, ec57_se = ?g.se, "Pooling tried on validation");
        out.push(PoolingTrial {
            primary_share: share,
            choice,
            ec57_se: g.se,
            ec57_pp: g.pp,
        });
    }
    Ok(out)
}

/// Re-pools every replay's ensemble scores with the members' weights `w`.
pub(crate) fn repool(reps: &mut [Replay], w: &[f64]) {
    for r in reps {
        r.repool(w);
    }
}

/// The trial to serve: among those whose rule reached the target and whose EC57 episode
/// sensitivity is at least `target`, the best by the rule search's ranking (the earlier on a
/// tie, the plain mean first); with none, the plain mean's. `None` without trials.
pub(crate) fn choose_pooling(trials: &[PoolingTrial], target: f64) -> Option<usize> {
    let qualifies =
        |t: &PoolingTrial| t.choice.met_target && t.ec57_se.is_some_and(|se| se >= target - 1e-9);
    trials
        .iter()
        .enumerate()
        .filter(|(_, t)| qualifies(t))
        .min_by(|(i, a), (j, b)| a.choice.rank().cmp(&b.choice.rank()).then(i.cmp(j)))
        .map(|(i, _)| i)
        .or_else(|| trials.iter().position(|t| t.primary_share.is_none()))
}

/// The primary lead's share of trial `i` (`None`: the plain mean, or no trial).
pub(crate) fn share_of(trials: &[PoolingTrial], i: Option<usize>) -> Option<f64> {
    i.and_then(|i| trials[i].primary_share)
}

/// The weights of `share` for `ens` (1 each for the plain mean or a share it cannot take).
pub(crate) fn weights_for(ens: &Ensemble, share: Option<f64>) -> Vec<f64> {
    weights(ens, share).unwrap_or_else(|| vec![1.0; ens.members.len()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alarm::AlarmRule;

    fn trial(share: Option<f64>, met: bool, fa: usize, det: usize, se: f64) -> PoolingTrial {
        PoolingTrial {
            primary_share: share,
            choice: ThresholdChoice {
                rule: AlarmRule {
                    on: 0.5,
                    off: 0.25,
                    k: 1,
                    n: 1,
                },
                met_target: met,
                episodes: 88,
                detected: det,
                sensitivity: Some(det as f64 / 88.0),
                false_alarms: fa,
                monitored_hours: 17.9,
                false_alarms_per_hour: Some(fa as f64 / 17.9),
                median_delay_ms: None,
                p90_delay_ms: None,
            },
            ec57_se: Some(se),
            ec57_pp: None,
        }
    }

    #[test]
    fn the_quietest_pooling_that_keeps_ec57s_sensitivity_serves() {
        let trials = vec![
            trial(None, true, 19, 85, 0.955),
            // Fewer false alarms, but below the target by EC57's overlap: not served.
            trial(Some(0.7), true, 13, 84, 0.943),
            trial(Some(0.8), true, 17, 85, 0.955),
            trial(Some(0.9), true, 16, 85, 0.955),
            // Quieter still, but its rule fell short of the target.
            trial(Some(0.3), false, 5, 80, 0.95),
        ];
        assert_eq!(choose_pooling(&trials, 0.95), Some(3));
        assert_eq!(share_of(&trials, Some(3)), Some(0.9));
        // A tie goes to the earlier trial: the plain mean first.
        let tie = vec![
            trial(None, true, 16, 85, 0.955),
            trial(Some(0.9), true, 16, 85, 0.955),
        ];
        assert_eq!(choose_pooling(&tie, 0.95), Some(0));
        // None qualifies: the plain mean.
        let none = vec![
            trial(Some(0.9), false, 1, 80, 0.9),
            trial(None, false, 9, 82, 0.93),
        ];
        assert_eq!(choose_pooling(&none, 0.95), Some(1));
        assert_eq!(share_of(&none, Some(1)), None);
        assert_eq!(choose_pooling(&[], 0.95), None);
    }
}
