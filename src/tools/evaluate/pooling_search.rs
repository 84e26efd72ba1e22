//! The choice of how the members pool (`--pooling choose`): the plain mean and each primary
//! lead share of [`SHARES`] tried on the replayed validation records, each with its alarm rule
//! chosen for the target sensitivity. A pooling qualifies when its rule reached the target
//! and, by EC57's own overlap (the figure the target is stated in), its gross episode
//! sensitivity on validation is still at the target; among those, the rule search's ranking
//! decides (fewest false alarms, then most episodes detected), the plain mean first on a tie.
//! With none qualifying, the plain mean serves. The replays keep each member's probability per
//! hop, so trying a pooling re-pools them without scoring again ([`Replay::repool`]).

use serde::Serialize;

use super::condition::gross_figures;
use super::replay::Replay;
use super::{EvaluateError, choose_rule};
use crate::alarm::rules::valid_share;
use crate::alarm::{ThresholdChoice, ThresholdSearch};
use crate::config::Combine;
use crate::serving::engine::ensemble::{Ensemble, EnsembleError};

/// How `holmes evaluate` pools the ensemble's members (`--pooling`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pooling {
    /// As the daemon does ([`Ensemble::pooled_as_served`]).
    AsServed,
    /// The plain mean.
    Mean,
    /// The primary lead's share ([`lead_weights`](crate::serving::engine::pooling::lead_weights)).
    PrimaryShare(f64),
    /// Chosen on the validation part among the plain mean and a grid of shares (`holmes
    /// evaluate --pooling choose`).
    Choose,
}

impl std::str::FromStr for Pooling {
    type Err = String;

    /// `served`, `mean`, `choose`, or a share from 0.01 to 0.99 (e.g. `0.9`).
    fn from_str(s: &str) -> Result<Pooling, String> {
        match s {
            "served" => Ok(Pooling::AsServed),
            "mean" => Ok(Pooling::Mean),
            "choose" => Ok(Pooling::Choose),
            _ => match s.parse::<f64>() {
                Ok(x) if valid_share(x) => Ok(Pooling::PrimaryShare(x)),
                _ => Err(format!(
                    "{s:?}: served, mean, choose, or the primary lead's share from 0.01 to 0.99"
                )),
            },
        }
    }
}

/// `ens` pooled as `pooling` says: [`Pooling::AsServed`] reads the zoo's rule (the engine
/// weighing members, as by default); a choice starts from the plain mean and is re-pooled
/// once made. Blocking.
pub(crate) fn pooled(
    ens: Ensemble,
    pooling: Pooling,
    dir: &std::path::Path,
    hop_secs: u32,
    window_secs: u32,
) -> Result<Ensemble, EnsembleError> {
    match pooling {
        Pooling::AsServed => {
            Ok(ens.pooled_as_served(dir, Combine::WeightedMean, hop_secs, window_secs))
        }
        Pooling::Mean | Pooling::Choose => ens.with_share(None),
        Pooling::PrimaryShare(s) => ens.with_share(Some(s)),
    }
}

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
        // A share the members cannot pool by is not tried.
        let Some(w) = ens.weights_for(share) else {
            continue;
        };
        repool(reps, &w);
        let choice = choose_rule(reps, Replay::ensemble_scores, search)?;
        let g = gross_figures(
            reps,
            Replay::ensemble_scores,
            Replay::ensemble_run_onsets,
            choice.rule,
            search.hop_ms,
            search.matching,
        )?;
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

    #[test]
    fn pooling_reads_served_mean_or_a_share() {
        assert_eq!("served".parse(), Ok(Pooling::AsServed));
        assert_eq!("mean".parse(), Ok(Pooling::Mean));
        assert_eq!("0.9".parse(), Ok(Pooling::PrimaryShare(0.9)));
        assert_eq!("choose".parse(), Ok(Pooling::Choose));
        for bad in ["1", "0", "-0.2", "nan", "weighted"] {
            let e = bad.parse::<Pooling>().unwrap_err();
            assert!(e.contains("0.01 to 0.99"), "{bad}: {e}");
        }
    }
}
