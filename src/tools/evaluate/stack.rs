//! Signal-quality indices as model inputs, measured cheaply (`holmes evaluate --sqi-stack`):
//! a logistic regression stacked on the serving ensemble, fed each hop's ensemble score (as a
//! logit) and both leads' indices ([`WindowSqi`], from the replay), fitted on the **train**
//! part's replayed hops. Its probability is one more score series, whose alarm rule is chosen
//! on validation as the ensemble's is. A one-lead record gives its lead's indices for both.
//! The same regression on the score alone is the control: a monotone map of the score, it
//! changes alarms only through where the rule's threshold grid falls on it.
//!
//! The fit is [`Logistic`]: Newton's method on standardised
//! features with a small ridge penalty; a dozen features need no more.

use serde::Serialize;

use crate::core::logistic::Logistic;
use crate::signal::quality::WindowSqi;
use crate::training::dataset::Label;

use super::replay::Replay;

/// Features per hop: the ensemble's logit, then four indices of each of two leads.
const FEATURES: usize = 1 + 2 * 4;
/// Ridge penalty on the standardised weights (not the intercept), per hop.
const RIDGE: f64 = 1e-4;
/// Scores are clamped this far from 0 and 1 before the logit.
const EPS: f32 = 1e-4;

/// A fitted stack: feature standardisation and weights.
#[derive(Debug, Clone, Serialize)]
pub struct Stack {
    /// Whether the indices are inputs (otherwise the ensemble's logit alone).
    pub with_sqi: bool,
    /// Feature names, in order.
    pub features: Vec<&'static str>,
    /// The regression over those features.
    #[serde(flatten)]
    pub model: Logistic,
    /// Train hops fitted on, and the positives among them.
    pub hops: usize,
    pub positives: usize,
}

/// The hop's features, or `None` without an ensemble score or indices.
fn features(score: Option<f32>, sqi: &[Option<WindowSqi>]) -> Option<[f64; FEATURES]> {
    let s = score?.clamp(EPS, 1.0 - EPS);
    let first = (*sqi.first()?)?;
    let second = sqi.get(1).copied().flatten().unwrap_or(first);
    let mut x = [0.0; FEATURES];
    x[0] = (s / (1.0 - s)).ln() as f64;
    for (k, q) in [first, second].iter().enumerate() {
        let at = 1 + 4 * k;
        x[at] = q.bsqi as f64;
        x[at + 1] = (q.flat_fraction + q.clipped_fraction) as f64;
        x[at + 2] = (q.kurtosis as f64).max(0.0).ln_1p();
        x[at + 3] = q.psqi as f64;
    }
    Some(x)
}

impl Stack {
    /// Fits the stack on the labelled, scored hops of `reps` (unsure hops left out), on the
    /// score and the indices, or on the score alone.
    pub(crate) fn fit(reps: &[Replay], with_sqi: bool) -> Stack {
        let used = if with_sqi { FEATURES } else { 1 };
        let mut xs: Vec<[f64; FEATURES]> = Vec::new();
        let mut ys: Vec<f64> = Vec::new();
        for r in reps {
            for ((l, &s), q) in r.labels.iter().zip(&r.ensemble).zip(&r.sqi) {
                let y = match l {
                    Label::Positive => 1.0,
                    Label::Negative => 0.0,
                    Label::Unsure => continue,
                };
                if let Some(x) = features(s, q) {
                    xs.push(x);
                    ys.push(y);
                }
            }
        }
        let used_xs: Vec<&[f64]> = xs.iter().map(|x| &x[..used]).collect();
        let model = Logistic::fit(&used_xs, &ys, RIDGE);
        Stack {
            with_sqi,
            features: [
                "ensemble logit",
                "bsqi 1",
                "flat+clipped 1",
                "ln(1+kurtosis) 1",
                "psqi 1",
                "bsqi 2",
                "flat+clipped 2",
                "ln(1+kurtosis) 2",
                "psqi 2",
            ][..used]
                .to_vec(),
            model,
            hops: ys.len(),
            positives: ys.iter().filter(|&&y| y > 0.5).count(),
        }
    }

    /// The stack's probability at each hop of `r` (`None` where the ensemble had no score).
    pub(crate) fn scores(&self, r: &Replay) -> Vec<Option<f32>> {
        r.ensemble
            .iter()
            .zip(&r.sqi)
            .map(|(&s, q)| {
                let x = features(s, q)?;
                Some(self.model.probability(&x[..self.model.mean.len()]) as f32)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replay of `n` hops: positives score 0.6 and negatives 0.4 (no separation by
    /// score), but positives have a low bSQI on the first lead.
    fn replay(n: usize) -> Replay {
        let q = |bsqi| {
            Some(WindowSqi {
                bsqi,
                flat_fraction: 0.0,
                clipped_fraction: 0.0,
                kurtosis: 5.0,
                psqi: 0.5,
            })
        };
        let pos = |i: usize| i.is_multiple_of(3);
        Replay {
            key: "x".into(),
            ends_ms: (0..n as i64).map(|i| i * 5_000).collect(),
            ensemble: (0..n)
                .map(|i| Some(if i % 2 == 0 { 0.6 } else { 0.4 }))
                .collect(),
            ensemble_onsets: Vec::new(),
            classical: Vec::new(),
            sqi: (0..n)
                .map(|i| vec![q(if pos(i) { 0.3 } else { 0.9 }), q(0.9)])
                .collect(),
            gated: Vec::new(),
            stacked: Vec::new(),
            beat_runs: Vec::new(),
            members: Vec::new(),
            raised: Vec::new(),
            with_beats: Vec::new(),
            with_beats_onsets: Vec::new(),
            labels: (0..n)
                .map(|i| {
                    if pos(i) {
                        Label::Positive
                    } else {
                        Label::Negative
                    }
                })
                .collect(),
            reference: Vec::new(),
            by_kind: Vec::new(),
            monitored_ms: 0,
            paced: false,
            noise_ms: Vec::new(),
            ectopy_ms: Vec::new(),
        }
    }

    #[test]
    fn the_stack_learns_what_the_indices_add_and_the_control_cannot() {
        let r = replay(600);
        let with = Stack::fit(std::slice::from_ref(&r), true);
        let without = Stack::fit(std::slice::from_ref(&r), false);
        assert_eq!((with.hops, with.positives), (600, 200));
        assert_eq!(without.model.weights.len(), 2);
        assert_eq!(with.model.weights.len(), FEATURES + 1);
        let auc = |s: &Stack| {
            let v = s.scores(&r);
            let (mut pos, mut neg) = (Vec::new(), Vec::new());
            for (l, x) in r.labels.iter().zip(v) {
                match l {
                    Label::Positive => pos.push(x.unwrap()),
                    _ => neg.push(x.unwrap()),
                }
            }
            let wins = pos
                .iter()
                .flat_map(|p| neg.iter().map(move |n| (p > n) as u32 as f64))
                .sum::<f64>();
            wins / (pos.len() * neg.len()) as f64
        };
        assert!(auc(&with) > 0.99, "the first lead's bSQI separates");
        assert!(auc(&without) < 0.6, "the score does not");
        assert!(
            with.model.weights[2] < 0.0,
            "low bSQI, higher risk: {:?}",
            with.model.weights
        );
    }

    #[test]
    fn features_need_a_score_and_a_lead_and_copy_a_lone_lead() {
        let q = WindowSqi {
            bsqi: 0.8,
            flat_fraction: 0.1,
            clipped_fraction: 0.05,
            kurtosis: 4.0,
            psqi: 0.5,
        };
        assert!(features(None, &[Some(q)]).is_none());
        assert!(features(Some(0.5), &[None]).is_none());
        let x = features(Some(0.5), &[Some(q)]).unwrap();
        assert!(x[0].abs() < 1e-9, "logit of 0.5");
        assert_eq!(x[1..5], x[5..9]);
        assert!((x[2] - 0.15).abs() < 1e-6);
    }
}
