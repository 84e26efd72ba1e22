//! A risk alarm rule for an ensemble the zoo's rule book has none for (a ladder rung the search
//! composed, a hand-picked member list), transferred from the book's validated ensembles at
//! the window level, so such an ensemble does not alarm on the configured fallback (0.7, far
//! above the thresholds validation chooses, 0.02-0.10 on this zoo).
//!
//! Each validated ensemble of this zoo at the ward's hop and window keeps some share of the
//! positive validation windows at or above its on-threshold (its members' probabilities over
//! the manifests' validation windows, pooled as its rule pools them: the plain mean, or by its
//! lead share). The derived rule takes the median of those shares (and the
//! off/on ratio and persistence of the ensemble that has it, the more sensitive of the middle
//! two for an even count) and sets its on-threshold where
//! the new ensemble keeps the same share of its positive validation windows. It is not an
//! event-level validation: the ward serves it marked not validated, as derived. An ensemble
//! served with the zoo's beat counter borrows only from rules validated with the same counter
//! (the shares are the members' alone; the counter raises scores beside them), and clears no
//! lower than 0.2, above what a run short of the counter's call scores (a rule derived lower
//! is scaled up to it, its off/on ratio kept: 0.4 / 0.2 at the usual half). The ensemble
//! the rule is derived for pools by the plain mean (the dashboard derives for no other).

use super::compose::SplitIndex;
use crate::alarm::AlarmRule;
use crate::alarm::rules::{MemberRef, RuleBook};
use crate::serving::engine::counter::BEATS_NAME;
use crate::serving::engine::pooling::pooled_weights_among;
use crate::signal::beats::{RUN_RISK, RUN_RISK_MAX, held_by_short_runs};
use crate::zoo::{Input, Predictions};

/// A zoo member as a derivation reads it: its name and weights, its input (which lead), and
/// its validation predictions (from its manifest).
#[derive(Debug, Clone)]
pub(crate) struct ZooMember {
    pub(crate) member: MemberRef,
    pub(crate) input: Input,
    pub(crate) validation: Predictions,
}

/// The zoo's members with their validation predictions, from the manifests in `dir` (a folder
/// whose manifest does not read is left out). Blocking.
pub(crate) fn read_zoo(dir: &std::path::Path) -> Vec<ZooMember> {
    crate::zoo::model_dirs(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|d| {
            let mf = crate::zoo::Manifest::read(&d).ok()?;
            Some(ZooMember {
                member: MemberRef {
                    name: mf.name.clone(),
                    sha256: mf.weights.sha256.clone(),
                },
                input: mf.input,
                validation: mf
                    .predictions
                    .get("validation")
                    .cloned()
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// The lowest on-threshold derived: a rule at 0 would alarm on every window.
const MIN_ON: f32 = 1e-3;
/// The lowest clear threshold derived for an ensemble with the beat counter: [`RUN_RISK`]
/// itself, so above [`RUN_RISK_MAX`], the highest score of a run short of the counter's call
/// (RUN_RISK times a call probability below 1). 0.2 is also the lowest clear threshold the
/// validated rules with the counter chose, with an on-threshold of 0.4.
const COUNTER_MIN_OFF: f32 = RUN_RISK;
const _: () = assert!(RUN_RISK_MAX < COUNTER_MIN_OFF);

/// The members' positions in `zoo` as a choice, or `None` when one is missing or has other
/// weights.
/// The beat counter among `members` (it has no validation predictions of its own), and the
/// zoo's models.
pub(crate) fn split_counter(members: &[MemberRef]) -> (Option<&MemberRef>, Vec<MemberRef>) {
    let counter = members.iter().find(|m| m.name == BEATS_NAME);
    let models = members
        .iter()
        .filter(|m| m.name != BEATS_NAME)
        .cloned()
        .collect();
    (counter, models)
}

fn bits_of(zoo: &[ZooMember], members: &[MemberRef]) -> Option<Vec<bool>> {
    let mut bits = vec![false; zoo.len()];
    for m in members {
        bits[zoo.iter().position(|z| &z.member == m)?] = true;
    }
    Some(bits)
}

/// Each zoo model's weight in ensemble `bits` pooled with the primary lead's `share` (the
/// plain mean when `None`), or `None` when its members cannot pool by it.
fn weights_of(zoo: &[ZooMember], bits: &[bool], share: Option<f64>) -> Option<Vec<f64>> {
    let inputs: Vec<Input> = zoo.iter().map(|z| z.input).collect();
    pooled_weights_among(&inputs, bits, share)
}

/// Positive windows' scores of the ensemble weighing `w`, highest first.
fn positives(index: &SplitIndex, w: &[f64]) -> Vec<f32> {
    let (labels, scores) = index.weighted(w);
    let mut p: Vec<f32> = labels
        .iter()
        .zip(&scores)
        .filter(|(l, _)| **l)
        .map(|(_, &s)| s)
        .collect();
    p.sort_by(|a, b| b.total_cmp(a));
    p
}

/// The rule derived for `members` at this hop and window, or `None` when the book holds no
/// validated ensemble of this zoo there, or the members' windows hold no positive.
pub(crate) fn derived_rule(
    zoo: &[ZooMember],
    book: &RuleBook,
    members: &[MemberRef],
    hop_secs: u32,
    window_secs: u32,
) -> Option<AlarmRule> {
    let (counter, models) = split_counter(members);
    let target = bits_of(zoo, &models)?;
    let index = SplitIndex::new(zoo.iter().map(|z| &z.validation));
    let mut refs: Vec<(f64, AlarmRule)> = book
        .rules
        .iter()
        .filter(|r| r.hop_secs == hop_secs && r.window_secs == window_secs)
        .filter_map(|r| {
            // Only ensembles with the same beat counter (or none) lend their rules, scored as
            // their rule pools them.
            let (theirs, their_models) = split_counter(&r.members);
            if theirs != counter {
                return None;
            }
            let w = weights_of(zoo, &bits_of(zoo, &their_models)?, r.primary_share)?;
            let pos = positives(&index, &w);
            (!pos.is_empty()).then(|| {
                let kept = pos.iter().filter(|&&s| s >= r.rule.on).count();
                (kept as f64 / pos.len() as f64, r.rule)
            })
        })
        .collect();
    if refs.is_empty() {
        return None;
    }
    refs.sort_by(|a, b| a.0.total_cmp(&b.0));
    // The median share (the two middle ones' mean for an even count); the off/on ratio and
    // persistence of the upper middle reference, the more sensitive of the two.
    let mid = refs.len() / 2;
    let (upper, like) = refs[mid];
    let share = if refs.len().is_multiple_of(2) {
        (refs[mid - 1].0 + upper) / 2.0
    } else {
        upper
    };
    let pos = positives(&index, &weights_of(zoo, &target, None)?);
    if pos.is_empty() {
        return None;
    }
    let kept = ((share * pos.len() as f64).ceil() as usize).clamp(1, pos.len());
    let on = pos[kept - 1].clamp(MIN_ON, 1.0);
    let mut rule = AlarmRule {
        on,
        off: on * (like.off / like.on.max(f32::MIN_POSITIVE)).clamp(0.0, 1.0),
        k: like.k,
        n: like.n,
    };
    // With the counter, the rule clears above the scores of runs short of its call, as every
    // rule validated with it does, so such a run neither raises nor holds the alarm: scaled
    // up, its off/on ratio kept, to clear at COUNTER_MIN_OFF.
    if counter.is_some() && held_by_short_runs(rule.off) {
        let ratio = rule.off / rule.on;
        rule.off = COUNTER_MIN_OFF;
        rule.on = if ratio > 0.0 {
            (COUNTER_MIN_OFF / ratio).clamp(COUNTER_MIN_OFF, 1.0)
        } else {
            1.0
        };
    }
    rule.validate().ok().map(|()| rule)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alarm::rules::{ValidatedRule, ValidationFigures};

    fn member(name: &str, ids: &[&str], labels: &[u8], probs: &[f32]) -> ZooMember {
        ZooMember {
            member: MemberRef {
                name: name.into(),
                sha256: format!("sha-{name}"),
            },
            input: ecg(crate::zoo::Lead::Primary),
            validation: Predictions {
                ids: ids.iter().map(|s| s.to_string()).collect(),
                labels: labels.to_vec(),
                probs: probs.to_vec(),
            },
        }
    }

    fn ecg(lead: crate::zoo::Lead) -> Input {
        Input::Ecg {
            lead,
            samples: 1250,
            sample_rate_hz: 250,
            bandpass: false,
        }
    }

    fn validated(members: &[&ZooMember], rule: AlarmRule) -> ValidatedRule {
        ValidatedRule {
            members: members.iter().map(|m| m.member.clone()).collect(),
            hop_secs: 5,
            window_secs: 30,
            rule,
            primary_share: None,
            validation: ValidationFigures {
                records: 1,
                target_sensitivity: 0.95,
                episodes: 1,
                detected: 1,
                false_alarms_per_hour: Some(1.0),
                delay_limits: None,
                met_target: None,
                median_delay_ms: None,
                p90_delay_ms: None,
                ec57_sensitivity: None,
                chosen_by: None,
            },
        }
    }

    const IDS: [&str; 6] = ["w1", "w2", "w3", "w4", "w5", "w6"];
    const LABELS: [u8; 6] = [1, 1, 1, 1, 0, 0];

    /// "a", validated at 0.25: it keeps 3 of its 4 positive windows (0.9, 0.6, 0.3); "b"
    /// scores lower: keeping 3 of 4 positives needs its third-highest, 0.15; and a's rule.
    fn pair() -> (ZooMember, ZooMember, AlarmRule) {
        let a = member("a", &IDS, &LABELS, &[0.9, 0.6, 0.3, 0.1, 0.05, 0.2]);
        let b = member("b", &IDS, &LABELS, &[0.5, 0.4, 0.15, 0.02, 0.01, 0.1]);
        let like = AlarmRule {
            on: 0.25,
            off: 0.125,
            k: 2,
            n: 3,
        };
        (a, b, like)
    }

    #[test]
    fn the_on_threshold_keeps_the_validated_share_of_positive_windows() {
        let (ids, labels) = (IDS, LABELS);
        let (a, b, like) = pair();
        let mut book = RuleBook::default();
        book.insert(validated(&[&a], like));
        let zoo = [a.clone(), b.clone()];
        let got = derived_rule(&zoo, &book, std::slice::from_ref(&b.member), 5, 30).unwrap();
        assert_eq!(got.on, 0.15);
        assert!((got.off - 0.075).abs() < 1e-6, "{got:?}");
        assert_eq!((got.k, got.n), (2, 3));
        // Its own ensemble gets its own threshold back (the share is met at it).
        let own = derived_rule(&zoo, &book, std::slice::from_ref(&a.member), 5, 30).unwrap();
        assert_eq!(own.on, 0.3);
        // Another hop or window, a member the zoo lacks, other weights: nothing derived.
        assert!(derived_rule(&zoo, &book, std::slice::from_ref(&b.member), 2, 30).is_none());
        assert!(derived_rule(&zoo, &book, std::slice::from_ref(&b.member), 5, 10).is_none());
        let stranger = MemberRef {
            name: "b".into(),
            sha256: "other".into(),
        };
        assert!(derived_rule(&zoo, &book, &[stranger], 5, 30).is_none());
        // A rule chosen for a lead share lends its share of positives as it pools: a (primary)
        // with c (secondary) at 0.75 scores the positives 0.7, 0.5, 0.3, 0.2 and keeps 3 of 4
        // at 0.3 (their plain mean, 0.5, 0.4, 0.3, 0.3, would keep all 4), so b's threshold is
        // again its third-highest positive.
        let mut c = member("c", &ids, &labels, &[0.1, 0.2, 0.3, 0.5, 0.0, 0.0]);
        c.input = ecg(crate::zoo::Lead::Secondary);
        let zoo3 = [a.clone(), b.clone(), c.clone()];
        let mut pooled = RuleBook::default();
        let mut r = validated(&[&a, &c], AlarmRule { on: 0.3, ..like });
        r.primary_share = Some(0.75);
        pooled.insert(r.clone());
        let got = derived_rule(&zoo3, &pooled, std::slice::from_ref(&b.member), 5, 30).unwrap();
        assert_eq!(got.on, 0.15);
        r.primary_share = None;
        pooled.insert(r);
        let got = derived_rule(&zoo3, &pooled, std::slice::from_ref(&b.member), 5, 30).unwrap();
        assert_eq!(got.on, 0.02);
        // A share its members cannot take (one lead) lends nothing.
        let mut pooled = RuleBook::default();
        let mut r = validated(&[&a], like);
        r.primary_share = Some(0.9);
        pooled.insert(r);
        assert!(derived_rule(&zoo, &pooled, std::slice::from_ref(&b.member), 5, 30).is_none());
        assert!(
            derived_rule(
                &zoo,
                &RuleBook::default(),
                std::slice::from_ref(&b.member),
                5,
                30
            )
            .is_none()
        );
    }

    #[test]
    fn a_rule_derived_with_the_counter_clears_above_a_run_short_of_its_call() {
        let (a, b, like) = pair();
        let counter = MemberRef {
            name: BEATS_NAME.into(),
            sha256: "sha-beats".into(),
        };
        let mut book = RuleBook::default();
        let mut r = validated(&[&a], like);
        r.members.push(counter.clone());
        book.insert(r);
        let zoo = [a.clone(), b.clone()];
        // Without the counter b derives 0.15 / 0.075 (above); with it, the rule is scaled up to
        // clear at 0.2, above every score a run short of the call gives, its ratio kept.
        let got = derived_rule(&zoo, &book, &[b.member.clone(), counter.clone()], 5, 30).unwrap();
        assert_eq!(got.off, COUNTER_MIN_OFF);
        assert!((got.on - 0.4).abs() < 1e-5, "{got:?}");
        assert!(got.off > RUN_RISK_MAX);
        // A rule that already clears above it keeps its thresholds.
        let high = member("h", &IDS, &LABELS, &[0.95, 0.9, 0.8, 0.7, 0.1, 0.1]);
        let zoo = [a, high.clone()];
        let got = derived_rule(&zoo, &book, &[high.member, counter], 5, 30).unwrap();
        assert_eq!((got.on, got.off), (0.8, 0.4));
    }

    #[test]
    fn every_rule_of_the_zoo_with_its_counter_clears_above_a_run_short_of_the_call() {
        // The zoo's rules were chosen on these scores; their clear thresholds are above every
        // score a run short of the counter's call gives, so under them such a run neither
        // raises an alarm nor holds one on (the promise `RUN_RISK` makes).
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
        let counter = crate::signal::beats::BeatCounter::load(&dir, 5)
            .unwrap()
            .expect("the zoo serves a counter");
        let book = RuleBook::load(&dir).unwrap();
        let with_counter: Vec<_> = book
            .rules
            .iter()
            .filter(|r| r.members.iter().any(|m| m.sha256 == counter.sha256))
            .collect();
        assert!(with_counter.len() >= 5, "{} rules", with_counter.len());
        for r in with_counter {
            assert!(
                r.rule.off > RUN_RISK_MAX,
                "{:?}: off {}",
                r.members,
                r.rule.off
            );
        }
    }

    #[test]
    fn the_median_reference_sets_the_share() {
        let ids: Vec<String> = (0..10).map(|i| format!("w{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let labels = [1u8; 10];
        let probs: Vec<f32> = (0..10).map(|i| 1.0 - i as f32 / 10.0).collect();
        let a = member("a", &ids, &labels, &probs);
        let b = member("b", &ids, &labels, &probs);
        let c = member("c", &ids, &labels, &probs);
        let rule = |on: f32| AlarmRule {
            on,
            off: on / 2.0,
            k: 1,
            n: 1,
        };
        let mut book = RuleBook::default();
        // Shares kept: a 0.2 (on 0.85), b 0.5 (on 0.55), c 0.9 (on 0.15).
        book.insert(validated(&[&a], rule(0.85)));
        book.insert(validated(&[&b], rule(0.55)));
        book.insert(validated(&[&c], rule(0.15)));
        let zoo = [a.clone(), b.clone(), c.clone()];
        let both = [a.member.clone(), c.member.clone()];
        let got = derived_rule(&zoo, &book, &both, 5, 30).unwrap();
        // The median share, 0.5: the fifth-highest of a+c's (identical) scores.
        assert!((got.on - 0.6).abs() < 1e-6, "{got:?}");
        // With a fourth reference keeping 0.8 (on 0.25), the median is the middle two's mean,
        // (0.5 + 0.8) / 2 = 0.65: seven of ten windows kept, on at the seventh-highest.
        let d = member("d", &ids, &labels, &probs);
        book.insert(validated(&[&d], rule(0.25)));
        let zoo = [a.clone(), b, c.clone(), d];
        let got = derived_rule(&zoo, &book, &both, 5, 30).unwrap();
        assert!((got.on - 0.4).abs() < 1e-6, "{got:?}");
    }
}
