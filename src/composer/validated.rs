//! Composing among validated ensembles. The zoo's `alarm_rules.json` (written by `holmes
//! evaluate --save-rule` and `--revalidate`) holds, per ensemble, hop and window, the alarm
//! rule and the figures it reached where it was chosen: out of fold by patient-wise folds, or
//! on the validation part. An ensemble the search invents has no such rule: the ward would
//! alarm on the configured fallback, marked "not validated". So when the book holds ensembles
//! of this zoo (same names and weights) for the ward's hop and window, validated with the
//! beat counter the engine serves (or without one when it serves none), and
//! `composer.prefer_validated` is on, the composer serves one of them: among those covering
//! every lead set the zoo covers whose estimated latency fits the rung's budget, one whose rule
//! reached its target episode sensitivity (by the rule search's count and, where the book
//! records it, by EC57's overlap) before one that fell short; among those, the configured
//! members (`ensemble.members`) where they are one, then the fewest false alarms per hour the
//! book records, then the higher validation ROC-AUC (of its score pooled as its rule was
//! chosen), then the cheaper. When none fits a rung, the search composes that rung as it
//! would without rules.

use super::compose::{SplitIndex, accuracy, lead_sets, zoo_lead_sets};
use super::derived::split_counter;
use super::entry::Entry;
use super::search::Bits;
use crate::alarm::rules::RuleBook;
use crate::core::metrics::roc_auc;
use crate::serving::engine::pooling::pooled_weights_among;
use crate::zoo::Input;

/// An ensemble of the zoo the rule book validates.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    /// Its members, as a choice over the zoo's entries.
    pub(crate) bits: Bits,
    /// Whether its rule reached the target episode sensitivity where it was chosen.
    pub(crate) reached: bool,
    /// False alarms per monitored hour at its rule where it was chosen (infinite when not
    /// recorded).
    pub(crate) false_alarms_per_hour: f64,
    /// Validation ROC-AUC of its score pooled as its rule was chosen (the primary lead's
    /// share, else the mean), on the manifests' windows.
    pub(crate) val_roc_auc: f64,
}

/// What [`choose`] picked for one budget.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chosen {
    pub(crate) bits: Bits,
    pub(crate) latency_ms: f64,
    pub(crate) val_roc_auc: f64,
}

/// The book's ensembles at this hop and window whose members are all in `entries` with the
/// same weights, validated with the beat counter the engine serves (`counter`, its weights'
/// SHA-256) or, when it serves none, without one: a rule validated without the counter does
/// not hold for members served with it, nor the other way round. A rule chosen for a lead
/// share is one only when the engine weighs members (`weighs`, `engine.combine =
/// "weighted_mean"`): else its ensemble would be served by the plain mean, which the rule was
/// not chosen for.
pub(crate) fn candidates(
    entries: &[Entry],
    book: &RuleBook,
    hop_secs: u32,
    window_secs: u32,
    weighs: bool,
    counter: Option<&str>,
) -> Vec<Candidate> {
    book.rules
        .iter()
        .filter(|r| r.hop_secs == hop_secs && r.window_secs == window_secs)
        .filter(|r| weighs || r.primary_share.is_none())
        .filter_map(|r| {
            let (theirs, models) = split_counter(&r.members);
            if theirs.map(|m| m.sha256.as_str()) != counter {
                return None;
            }
            let mut bits = vec![false; entries.len()];
            for m in &models {
                let i = entries
                    .iter()
                    .position(|e| e.name == m.name && e.sha256 == m.sha256)?;
                bits[i] = true;
            }
            let v = &r.validation;
            Some(Candidate {
                val_roc_auc: match r.primary_share {
                    Some(share) => pooled_roc_auc(entries, &bits, share)?,
                    None => accuracy(entries, &bits, false).0,
                },
                bits,
                reached: v.reached(),
                false_alarms_per_hour: v.false_alarms_per_hour.unwrap_or(f64::INFINITY),
            })
        })
        .collect()
}

/// Validation ROC-AUC of ensemble `bits` pooled with the primary lead's `share`; `None` when
/// its members cannot pool by it.
fn pooled_roc_auc(entries: &[Entry], bits: &[bool], share: f64) -> Option<f64> {
    let inputs: Vec<Input> = entries.iter().map(|e| e.input).collect();
    let w = pooled_weights_among(&inputs, bits, Some(share))?;
    let (labels, scores) = SplitIndex::new(entries.iter().map(|e| &e.validation)).weighted(&w);
    let auc = roc_auc(&labels, &scores);
    Some(if auc.is_nan() { 0.0 } else { auc })
}

/// The candidate to serve within `budget_ms` by the estimate `latency` (the ward's, with what
/// serves beside the members), if any fits. Of those that cover the zoo's lead sets and fit:
/// one whose rule reached its target before one that fell short; among those, the `preferred`
/// ensemble (the configured members) where it is one, then the fewest validation false alarms
/// an hour, the higher validation ROC-AUC, the cheaper. The figures the book records of
/// validated ensembles differ by a few false alarms on validation's 44 records, less than they
/// move from one part to another (`docs/EXPERIMENTS.md`, 2026-11-26), so the book's other ensembles
/// replace the configured one only where it does not fit or fell short of its target.
pub(crate) fn choose(
    entries: &[Entry],
    candidates: &[Candidate],
    preferred: Option<&[bool]>,
    budget_ms: f64,
    latency: &dyn Fn(&[bool]) -> f64,
) -> Option<Chosen> {
    let required = zoo_lead_sets(entries);
    candidates
        .iter()
        .filter(|c| lead_sets(entries, &c.bits).covers(required))
        .map(|c| (c, latency(&c.bits)))
        .filter(|&(_, lat)| lat <= budget_ms)
        .min_by(|(a, la), (b, lb)| {
            let is_preferred = |c: &Candidate| preferred == Some(c.bits.as_slice());
            b.reached
                .cmp(&a.reached)
                .then(is_preferred(b).cmp(&is_preferred(a)))
                .then(a.false_alarms_per_hour.total_cmp(&b.false_alarms_per_hour))
                .then(b.val_roc_auc.total_cmp(&a.val_roc_auc))
                .then(la.total_cmp(lb))
        })
        .map(|(c, lat)| Chosen {
            bits: c.bits.clone(),
            latency_ms: lat,
            val_roc_auc: c.val_roc_auc,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alarm::AlarmRule;
    use crate::alarm::rules::{MemberRef, ValidatedRule, ValidationFigures};
    use crate::zoo::{Lead, LeadSets, Predictions};

    fn entry(name: &str, lead: Option<Lead>, latency_ms: f64) -> Entry {
        let leads = match lead {
            Some(Lead::Primary) => LeadSets {
                primary_only: true,
                secondary_only: false,
                both: true,
            },
            Some(Lead::Secondary) => LeadSets {
                primary_only: false,
                secondary_only: true,
                both: true,
            },
            _ => LeadSets::default(),
        };
        Entry {
            name: name.into(),
            sha256: format!("sha-{name}"),
            leads,
            input: match lead {
                Some(lead) => Input::Ecg {
                    lead,
                    samples: 7500,
                    sample_rate_hz: 250,
                    bandpass: false,
                },
                None => Input::HeartRate {
                    samples: 30,
                    sample_rate_hz: 1,
                },
            },
            validation: Predictions {
                ids: vec!["w1".into(), "w2".into()],
                labels: vec![0, 1],
                probs: vec![0.2, 0.8],
            },
            test: Predictions::default(),
            latency_ms,
            profile: None,
        }
    }

    fn rule(names: &[&str], hop: u32, fa: Option<f64>) -> ValidatedRule {
        ValidatedRule {
            members: names
                .iter()
                .map(|n| MemberRef {
                    name: (*n).into(),
                    sha256: format!("sha-{n}"),
                })
                .collect(),
            hop_secs: hop,
            window_secs: 30,
            rule: AlarmRule {
                on: 0.5,
                off: 0.25,
                k: 1,
                n: 1,
            },
            primary_share: None,
            validation: ValidationFigures {
                records: 4,
                target_sensitivity: 0.95,
                episodes: 10,
                detected: 10,
                false_alarms_per_hour: fa,
                delay_limits: None,
                met_target: None,
                median_delay_ms: None,
                p90_delay_ms: None,
                ec57_sensitivity: None,
                chosen_by: None,
            },
        }
    }

    #[test]
    fn the_fewest_false_alarms_that_fit_and_cover_serve() {
        let entries = vec![
            entry("p-small", Some(Lead::Primary), 1.0),
            entry("s-small", Some(Lead::Secondary), 1.0),
            entry("p-big", Some(Lead::Primary), 50.0),
            entry("s-big", Some(Lead::Secondary), 50.0),
        ];
        let mut book = RuleBook::default();
        book.insert(rule(&["p-small", "s-small"], 5, Some(3.0)));
        book.insert(rule(&["p-big", "s-big"], 5, Some(1.0)));
        // Covers only the primary lead: never served while the zoo covers both.
        book.insert(rule(&["p-small"], 5, Some(0.1)));
        // Another hop, and a member whose weights changed: not candidates.
        book.insert(rule(&["p-small", "s-small"], 2, Some(0.0)));
        let mut stale = rule(&["p-big", "s-small"], 5, Some(0.0));
        stale.members[0].sha256 = "other".into();
        book.insert(stale);

        let c = candidates(&entries, &book, 5, 30, true, None);
        assert_eq!(c.len(), 3, "{c:?}");
        let engine = crate::config::Config::default().engine;
        let model = |beside: f64| {
            use crate::composer::compose::{Estimator, LatencyModel};
            use crate::composer::latency::Beside;
            let beside = Beside {
                p95_ms: beside,
                p50_ms: beside,
            };
            LatencyModel::new(&entries, &engine, 16, 5.0, beside, Estimator::Netcalc)
        };
        let alone = model(0.0);
        let lat = |b: &[bool]| alone.estimate(b);
        let big = [false, false, true, true];
        let small = [true, true, false, false];
        // A generous budget: the quieter big pair.
        let got = choose(&entries, &c, None, 1e9, &lat).unwrap();
        assert_eq!(got.bits, big);
        assert!(got.latency_ms > 0.0 && got.val_roc_auc > 0.99);
        // A budget only the small pair fits.
        let small_lat = lat(&small);
        let big_lat = lat(&big);
        assert!(small_lat < big_lat);
        let got = choose(&entries, &c, None, small_lat, &lat).unwrap();
        assert_eq!(got.bits, small);
        // Nothing fits: none.
        assert_eq!(choose(&entries, &c, None, small_lat / 2.0, &lat), None);
        // The configured members serve where the book validates them and they fit, however
        // many more false alarms they had on validation; where they do not fit, the best of
        // the rest.
        let got = choose(&entries, &c, Some(&small), 1e9, &lat).unwrap();
        assert_eq!(got.bits, small);
        let got = choose(&entries, &c, Some(&big), small_lat, &lat).unwrap();
        assert_eq!(got.bits, small);
        // Configured members that cover too little (the primary lead alone, validated) or
        // that the book does not validate: the best by validation. (Configured members whose
        // rule fell short of its target: below.)
        let primary = [true, false, false, false];
        let got = choose(&entries, &c, Some(&primary), 1e9, &lat).unwrap();
        assert_eq!(got.bits, big);
        let unvalidated = [true, false, false, true];
        let got = choose(&entries, &c, Some(&unvalidated), 1e9, &lat).unwrap();
        assert_eq!(got.bits, big);
        // What serves beside the members (the beat counter) costs every window: within the
        // budget the big pair just fits alone, a counter beside it leaves room for the small
        // pair only.
        let ts = |b: &[bool]| -> f64 {
            entries
                .iter()
                .zip(b)
                .filter(|x| *x.1)
                .map(|x| x.0.latency_ms)
                .sum()
        };
        let beside = (ts(&big) - ts(&small)) / 2.0;
        assert!(beside > 0.0);
        assert_eq!(choose(&entries, &c, None, big_lat, &lat).unwrap().bits, big);
        let counted = model(beside);
        let got = choose(&entries, &c, None, big_lat, &|b| counted.estimate(b)).unwrap();
        assert_eq!(got.bits, small);
        assert!(
            got.latency_ms > small_lat,
            "the counter's cost is in the estimate"
        );
        // A rule that fell short of its target sensitivity ranks after one that reached it,
        // however few its false alarms.
        let mut book = RuleBook::default();
        let mut short = rule(&["p-big", "s-big"], 5, Some(0.5));
        short.validation.detected = 9;
        book.insert(short);
        book.insert(rule(&["p-small", "s-small"], 5, Some(3.0)));
        let c = candidates(&entries, &book, 5, 30, true, None);
        assert_eq!(choose(&entries, &c, None, 1e9, &lat).unwrap().bits, small);
        // So too when the configured members are the ones that fell short.
        assert_eq!(
            choose(&entries, &c, Some(&big), 1e9, &lat).unwrap().bits,
            small
        );
        // A rule chosen for a lead share: a candidate only where the engine weighs members.
        let mut book = RuleBook::default();
        let mut pooled = rule(&["p-big", "s-big"], 5, Some(0.5));
        pooled.primary_share = Some(0.9);
        book.insert(pooled);
        book.insert(rule(&["p-small", "s-small"], 5, Some(3.0)));
        let c = candidates(&entries, &book, 5, 30, true, None);
        assert_eq!(choose(&entries, &c, None, 1e9, &lat).unwrap().bits, big);
        let c = candidates(&entries, &book, 5, 30, false, None);
        assert_eq!(c.len(), 1);
        assert_eq!(choose(&entries, &c, None, 1e9, &lat).unwrap().bits, small);
        // With the beat counter served, only rules validated with that counter are
        // candidates (the counter is no zoo entry: the members are chosen, it serves beside).
        let mut book = RuleBook::default();
        let mut counted = rule(&["p-big", "s-big", "beats"], 5, Some(2.0));
        counted.members[2].sha256 = "c1".into();
        book.insert(counted);
        book.insert(rule(&["p-small", "s-small"], 5, Some(0.5)));
        let c = candidates(&entries, &book, 5, 30, true, Some("c1"));
        assert_eq!(c.len(), 1);
        assert_eq!(choose(&entries, &c, None, 1e9, &lat).unwrap().bits, big);
        assert!(candidates(&entries, &book, 5, 30, true, Some("c2")).is_empty());
        let c = candidates(&entries, &book, 5, 30, true, None);
        assert_eq!(choose(&entries, &c, None, 1e9, &lat).unwrap().bits, small);
        // No rule recorded a false-alarm rate: it ranks after any that did.
        let mut book = RuleBook::default();
        book.insert(rule(&["p-big", "s-big"], 5, None));
        book.insert(rule(&["p-small", "s-small"], 5, Some(9.0)));
        let c = candidates(&entries, &book, 5, 30, true, None);
        assert_eq!(choose(&entries, &c, None, 1e9, &lat).unwrap().bits, small);
    }

    #[test]
    fn a_share_rule_ranks_by_its_pooled_score_and_needs_both_leads() {
        // The primary lead's model ranks the two windows right, the secondary's wrong: their
        // mean ties them (ROC-AUC 0.5); pooled 0.9 to the primary lead, the right order (1).
        let mut p = entry("p", Some(Lead::Primary), 1.0);
        let mut s = entry("s", Some(Lead::Secondary), 1.0);
        p.validation.probs = vec![0.2, 0.8];
        s.validation.probs = vec![0.8, 0.2];
        let entries = vec![p, s];
        let mut book = RuleBook::default();
        book.insert(rule(&["p", "s"], 5, Some(1.0)));
        let plain = candidates(&entries, &book, 5, 30, true, None);
        assert_eq!(plain.len(), 1);
        assert!((plain[0].val_roc_auc - 0.5).abs() < 1e-9, "{plain:?}");
        let mut shared = rule(&["p", "s"], 5, Some(1.0));
        shared.primary_share = Some(0.9);
        let mut book = RuleBook::default();
        book.insert(shared);
        let pooled = candidates(&entries, &book, 5, 30, true, None);
        assert_eq!(pooled.len(), 1);
        assert!((pooled[0].val_roc_auc - 1.0).abs() < 1e-9, "{pooled:?}");
        // A share rule for one lead's members cannot pool by it: no candidate.
        let mut one_lead = rule(&["p"], 5, Some(0.5));
        one_lead.primary_share = Some(0.9);
        let mut book = RuleBook::default();
        book.insert(one_lead);
        assert!(candidates(&entries, &book, 5, 30, true, None).is_empty());
    }
}
