//! How an ensemble's members pool into its score. A zoo alarm rule may say that the primary
//! ECG lead's members carry a share of the score together and the secondary lead's the rest
//! ([`ValidatedRule::primary_share`](crate::alarm::rules::ValidatedRule::primary_share)),
//! chosen on validation with the rule: the engine ([`prepare`](super::ensemble::prepare)) and
//! the offline tools pool so, and a rule without a share serves the plain mean.

use std::path::Path;

use super::counter::counter_ref;
use super::sources::Sources;
use crate::alarm::rules::{MemberRef, RuleBook, RulesError, valid_share};
use crate::config::Combine;
use crate::zoo::{Input, Lead, Manifest};

/// Each member's weight when the primary ECG lead's members carry `share` of the score
/// together and the secondary lead's the rest, each lead's members sharing its part equally.
/// `None` when a member reads anything else (a third lead, the heart rate), a lead has no
/// member, or the share is not a usable one ([`valid_share`]). The combination renormalises
/// over the members that scored, so a monitor sending one lead gets that lead's mean.
pub fn lead_weights(inputs: &[Input], share: f64) -> Option<Vec<f64>> {
    if !valid_share(share) {
        return None;
    }
    let lead = |i: &Input| match i {
        Input::Ecg { lead, .. } if matches!(lead, Lead::Primary | Lead::Secondary) => Some(*lead),
        _ => None,
    };
    let leads: Vec<Lead> = inputs.iter().map(lead).collect::<Option<_>>()?;
    let primary = leads.iter().filter(|&&l| l == Lead::Primary).count();
    let secondary = leads.len() - primary;
    if primary == 0 || secondary == 0 {
        return None;
    }
    Some(
        leads
            .iter()
            .map(|&l| match l {
                Lead::Primary => share / primary as f64,
                _ => (1.0 - share) / secondary as f64,
            })
            .collect(),
    )
}

/// Each member's weight pooled with the primary lead's `share` ([`lead_weights`]), or 1 each
/// for the plain mean (`None`); `None` when they cannot pool by the share.
pub(crate) fn pooled_weights(inputs: &[Input], share: Option<f64>) -> Option<Vec<f64>> {
    match share {
        None => Some(vec![1.0; inputs.len()]),
        Some(s) => lead_weights(inputs, s),
    }
}

/// [`pooled_weights`] of the models `chosen` among a zoo reading `inputs`, 0 for the rest.
pub(crate) fn pooled_weights_among(
    inputs: &[Input],
    chosen: &[bool],
    share: Option<f64>,
) -> Option<Vec<f64>> {
    let picked: Vec<Input> = inputs
        .iter()
        .zip(chosen)
        .filter(|x| *x.1)
        .map(|x| *x.0)
        .collect();
    let mut w = pooled_weights(&picked, share)?.into_iter();
    Some(
        chosen
            .iter()
            .map(|&c| if c { w.next().unwrap_or(0.0) } else { 0.0 })
            .collect(),
    )
}

/// The primary lead's share the zoo's alarm rule for `members` (the beat counter among them
/// when it serves) at this hop and window pools with, when `combine` weighs members and the
/// members can pool by it; `Ok(None)`: the plain mean. A rules file that does not read is the
/// error (the caller decides: a switch keeps what serves, a start pools by the plain mean).
/// Blocking.
pub(crate) fn rule_share(
    dir: &Path,
    combine: Combine,
    members: &[MemberRef],
    inputs: &[Input],
    hop_secs: u32,
    window_secs: u32,
) -> Result<Option<f64>, RulesError> {
    if combine != Combine::WeightedMean {
        return Ok(None);
    }
    let book = RuleBook::load(dir)?;
    let Some(share) = book
        .lookup(members, hop_secs, window_secs)
        .and_then(|r| r.primary_share)
    else {
        return Ok(None);
    };
    if lead_weights(inputs, share).is_none() {
        tracing::warn!(
            share,
            "The ensemble's alarm rule pools by a lead share its members cannot take; they pool by the plain mean"
        );
        return Ok(None);
    }
    Ok(Some(share))
}

/// [`rule_share`] where a rules file that does not read pools by the plain mean, said in the
/// log: what an ensemble being prepared or scored offline does. Blocking.
pub(crate) fn served_share(
    dir: &Path,
    combine: Combine,
    members: &[MemberRef],
    inputs: &[Input],
    hop_secs: u32,
    window_secs: u32,
) -> Option<f64> {
    rule_share(dir, combine, members, inputs, hop_secs, window_secs).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "The zoo's alarm rules do not read; the members pool by the plain mean");
        None
    })
}

/// The primary lead's share the named members would pool with if prepared now (their
/// manifests read, not their weights): the composer compares it with the serving one before
/// skipping a switch to the same members, so a rule saved with another pooling takes effect.
/// `Ok(None)` also when a manifest does not read (preparing then says why); a rules file that
/// does not read is the error. Blocking.
pub(crate) fn share_for(src: Sources<'_>, names: &[String]) -> Result<Option<f64>, RulesError> {
    let mut refs = Vec::with_capacity(names.len() + 1);
    let mut inputs = Vec::with_capacity(names.len());
    for name in names {
        let Ok(mf) = Manifest::read(&src.models_dir.join(name)) else {
            return Ok(None);
        };
        refs.push(MemberRef {
            name: mf.name.clone(),
            sha256: mf.weights.sha256.clone(),
        });
        inputs.push(mf.input);
    }
    refs.extend(src.beats.map(counter_ref));
    rule_share(
        src.models_dir,
        src.engine.combine,
        &refs,
        &inputs,
        src.hop_secs,
        src.window_secs,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Combine;
    use crate::serving::engine::ensemble::combine;

    fn ecg(lead: Lead) -> Input {
        Input::Ecg {
            lead,
            samples: 1250,
            sample_rate_hz: 250,
            bandpass: false,
        }
    }

    #[test]
    fn lead_weights_share_each_lead_among_its_members() {
        let (p, s) = (ecg(Lead::Primary), ecg(Lead::Secondary));
        let w = lead_weights(&[p, s, p, s], 0.9).unwrap();
        assert_eq!(w.len(), 4);
        for (got, want) in w.iter().zip([0.45, 0.05, 0.45, 0.05]) {
            assert!((got - want).abs() < 1e-12, "{w:?}");
        }
        // Uneven leads: each lead's part is split among its own members.
        let w = lead_weights(&[p, s, s], 0.6).unwrap();
        assert!(
            (w[0] - 0.6).abs() < 1e-12 && (w[1] - 0.2).abs() < 1e-12,
            "{w:?}"
        );
        // All members present: the weights sum to one, so the score is the weighted mean.
        let present: Vec<(f64, f32)> = w
            .iter()
            .zip([1.0, 0.0, 0.5])
            .map(|(&w, p)| (w, p))
            .collect();
        let got = combine(Combine::WeightedMean, &present).unwrap();
        assert!((got - 0.7).abs() < 1e-6, "{got}");
        // Only the primary lead scored: its mean, whatever the share.
        let got = combine(Combine::WeightedMean, &[(w[0], 0.3)]).unwrap();
        assert!((got - 0.3).abs() < 1e-6);
        // A lead with no member, another input, or a share that is no share: none.
        assert_eq!(lead_weights(&[p, p], 0.9), None);
        assert_eq!(lead_weights(&[p, ecg(Lead::Third)], 0.9), None);
        let hr = Input::HeartRate {
            samples: 30,
            sample_rate_hz: 1,
        };
        assert_eq!(lead_weights(&[p, s, hr], 0.9), None);
        for bad in [0.0, 1.0, f64::NAN, 1.5, 5e-324, 0.995] {
            assert_eq!(lead_weights(&[p, s], bad), None, "{bad}");
        }
    }
}
