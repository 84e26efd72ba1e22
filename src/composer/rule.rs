//! Which risk alarm rule the ward serves: the rule chosen on validation for the serving
//! ensemble (its members by name and weights, the ward's hop and window), read from the zoo's
//! [`RuleBook`]; when the book has none, one derived from the book's validated ensembles of this
//! zoo at the window level ([`derived_rule`]), marked not validated but derived; when nothing
//! can be derived (no rule of this zoo for the hop and window), a fallback from `[dashboard]
//! risk_alarm_on/off` with no persistence (k = n = 1), served but marked not validated. The served plan
//! ([`served`](super::served)) chooses again at start-up, whenever the composer publishes
//! another ensemble and at every zoo generation; `/api/health` and the system page show the
//! choice, `holmes score` and `holmes validate` choose the same way ([`for_ensemble`]).

use serde::Serialize;

use crate::alarm::AlarmRule;
use crate::alarm::rules::{MemberRef, RuleBook, RulesError};
use crate::composer::derived::{ZooMember, derived_rule, read_zoo};
use crate::config::{Config, DashboardConfig};
use crate::serving::engine::counter::BEATS_NAME;
use crate::serving::engine::ensemble::{Ensemble, ModelInfo};
use crate::signal::beats;

/// The rule serving now, as `/api/health` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct ServedRule {
    #[serde(flatten)]
    pub(crate) rule: AlarmRule,
    /// Chosen on validation for the serving ensemble at this hop and window; `false`: the
    /// configured fallback.
    pub(crate) validated: bool,
    /// Not validated but derived from the rules validated for other ensembles of this zoo
    /// ([`derived_rule`]); shown only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) derived: bool,
    /// The hop the rule counts in (`ward.hop_secs`).
    pub(crate) hop_secs: u32,
}

impl ServedRule {
    /// The configured thresholds, no persistence: what serves when the zoo has no rule for
    /// the ensemble.
    pub(crate) fn fallback(cfg: &DashboardConfig, hop_secs: u32) -> ServedRule {
        ServedRule {
            rule: AlarmRule {
                on: cfg.risk_alarm_on as f32,
                off: cfg.risk_alarm_off as f32,
                k: 1,
                n: 1,
            },
            validated: false,
            derived: false,
            hop_secs,
        }
    }

    /// The hop in ms, for [`AlarmState`](crate::alarm::AlarmState).
    pub(crate) fn hop_ms(&self) -> i64 {
        i64::from(self.hop_secs) * 1000
    }
}

/// The rule a ward on `cfg` serves `ens` with (its members and counter, pooled as served):
/// [`choose_in`] with the config's derivation switch and fallback, as the board chooses when
/// `ens` serves. Blocking (reads the rules file, and the manifests where it derives a rule).
pub(crate) fn for_ensemble(cfg: &Config, ens: &Ensemble) -> Result<ServedRule, RulesError> {
    choose_in(
        &cfg.ensemble.models_dir,
        cfg.dashboard.derive_risk_alarm,
        &ens.models(),
        ens.primary_share(),
        cfg.ward.hop_secs,
        cfg.ward.window_secs,
        ServedRule::fallback(&cfg.dashboard, cfg.ward.hop_secs),
    )
}

/// The serving members as rules name them.
pub(crate) fn members_of(models: &[ModelInfo]) -> Vec<MemberRef> {
    models
        .iter()
        .map(|m| MemberRef {
            name: m.name.clone(),
            sha256: m.sha256.clone(),
        })
        .collect()
}

/// The serving members as rules name them, sorted (a change of these is a change of
/// ensemble, and maybe of rule).
pub(crate) fn sorted_members(models: &[ModelInfo]) -> Vec<MemberRef> {
    let mut m = members_of(models);
    m.sort();
    m
}

/// The rule for `models` pooled with `primary_share` at this hop and window: the book's
/// (validated) when it was chosen for that pooling; else, for the plain mean, one derived from
/// the book's validated ensembles of this zoo ([`derived_rule`], not validated: it reads the
/// members' plain mean); else `fallback`. `zoo`: the zoo's members with their validation
/// predictions.
pub(crate) fn choose(
    book: &RuleBook,
    zoo: &[ZooMember],
    models: &[ModelInfo],
    primary_share: Option<f64>,
    hop_secs: u32,
    window_secs: u32,
    fallback: ServedRule,
) -> ServedRule {
    let members = members_of(models);
    if let Some(v) = book.lookup_pooled(&members, primary_share, hop_secs, window_secs) {
        return ServedRule {
            rule: v.rule,
            validated: true,
            derived: false,
            hop_secs,
        };
    }
    let derived = primary_share
        .is_none()
        .then(|| derived_rule(zoo, book, &members, hop_secs, window_secs))
        .flatten();
    match derived {
        Some(rule) => ServedRule {
            rule,
            validated: false,
            derived: true,
            hop_secs,
        },
        None => fallback,
    }
}

/// [`choose`] with the zoo folder `dir` read for it: its rule book, and the manifests'
/// validation predictions only when the book has no rule for `models` and `derive` is on.
/// Blocking.
pub(crate) fn choose_in(
    dir: &std::path::Path,
    derive: bool,
    models: &[ModelInfo],
    primary_share: Option<f64>,
    hop_secs: u32,
    window_secs: u32,
    fallback: ServedRule,
) -> Result<ServedRule, RulesError> {
    let book = RuleBook::load(dir)?;
    let missing = book
        .lookup_pooled(&members_of(models), primary_share, hop_secs, window_secs)
        .is_none();
    let zoo = if derive && missing && primary_share.is_none() {
        read_zoo(dir)
    } else {
        Vec::new()
    };
    Ok(choose(
        &book,
        &zoo,
        models,
        primary_share,
        hop_secs,
        window_secs,
        fallback,
    ))
}

/// Why a rule serves, in words for the log and `holmes score`.
pub(crate) fn basis(r: &ServedRule) -> &'static str {
    if r.validated {
        "validated for this ensemble, hop and window (the zoo's alarm_rules.json)"
    } else if r.derived {
        "NOT validated: derived from the rules validated for other ensembles of this zoo (same share of positive validation windows)"
    } else {
        "NOT validated: the config's fallback (no rule for this ensemble, hop and window, and none to derive from)"
    }
}

/// Whether `r`, served beside the beat counter (among `models`), clears at or below what a
/// window with a VT run short of the counter's call scores ([`beats::RUN_RISK_MAX`]): such a window
/// can then hold the alarm on. No rule the rule book holds or a search saves does, nor any
/// derived one (their tests check it); the configured fallback can (a ward may alarm on every
/// window on purpose), and so can a hand-edited book. The rule serves as chosen; the board
/// warns each time it chooses one.
pub(crate) fn held_by_short_runs(r: &ServedRule, models: &[ModelInfo]) -> bool {
    beats::held_by_short_runs(r.rule.off) && models.iter().any(|m| m.name == BEATS_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alarm::rules::{ValidatedRule, ValidationFigures};

    fn model(name: &str, sha: &str) -> ModelInfo {
        ModelInfo {
            name: name.into(),
            version: 1,
            input: "ecg II".into(),
            parameters: 1,
            macs_per_window: 1,
            sha256: sha.into(),
            val_roc_auc: None,
            test_roc_auc: None,
        }
    }

    #[test]
    fn the_books_rule_serves_validated_else_the_fallback() {
        let rule = AlarmRule {
            on: 0.6,
            off: 0.3,
            k: 2,
            n: 3,
        };
        let mut book = RuleBook::default();
        book.insert(ValidatedRule {
            members: members_of(&[model("b", "2"), model("a", "1")]),
            hop_secs: 2,
            window_secs: 10,
            rule,
            primary_share: None,
            validation: ValidationFigures {
                records: 1,
                target_sensitivity: 0.95,
                episodes: 1,
                detected: 1,
                false_alarms_per_hour: None,
                delay_limits: None,
                met_target: None,
                median_delay_ms: None,
                p90_delay_ms: None,
                ec57_sensitivity: None,
                chosen_by: None,
            },
        });
        let fb = ServedRule::fallback(&DashboardConfig::default(), 2);
        assert_eq!(
            fb.rule,
            AlarmRule {
                on: 0.7,
                off: 0.5,
                k: 1,
                n: 1
            }
        );
        assert!(!fb.validated);
        let ab = [model("a", "1"), model("b", "2")];
        // No zoo predictions to derive from: the book's rule or the fallback.
        let got = choose(&book, &[], &ab, None, 2, 10, fb);
        assert_eq!((got.rule, got.validated, got.hop_secs), (rule, true, 2));
        // Another hop, or a retrained member (other weights): the fallback.
        assert_eq!(choose(&book, &[], &ab, None, 5, 10, fb), fb);
        assert_eq!(
            choose(
                &book,
                &[],
                &[model("a", "1"), model("b", "9")],
                None,
                2,
                10,
                fb
            ),
            fb
        );
        // With the zoo's predictions, a member without a rule gets one derived from a+b's.
        let preds = |probs: &[f32]| crate::zoo::Predictions {
            ids: vec!["w1".into(), "w2".into(), "w3".into()],
            labels: vec![1, 1, 0],
            probs: probs.to_vec(),
        };
        let zoo: Vec<ZooMember> = [
            ("a", "1", [0.9, 0.7, 0.1]),
            ("b", "2", [0.8, 0.5, 0.2]),
            ("c", "3", [0.5, 0.3, 0.1]),
        ]
        .iter()
        .map(|(n, s, p)| ZooMember {
            member: MemberRef {
                name: (*n).into(),
                sha256: (*s).into(),
            },
            input: crate::zoo::Input::HeartRate {
                samples: 30,
                sample_rate_hz: 1,
            },
            validation: preds(p),
        })
        .collect();
        let c = choose(&book, &zoo, &[model("c", "3")], None, 2, 10, fb);
        // a+b keep both positives (means 0.85 and 0.6) at 0.6: c keeps both at its 0.3.
        assert!(!c.validated && c.derived, "{c:?}");
        assert_eq!((c.rule.on, c.rule.k, c.rule.n), (0.3, 2, 3));
        assert!((c.rule.off - 0.15).abs() < 1e-6, "{c:?}");
        assert_eq!(choose(&book, &zoo, &ab, None, 2, 10, fb), got);
        assert_eq!(choose(&book, &zoo, &[model("c", "3")], None, 5, 10, fb), fb);
        assert_eq!(serde_json::to_value(c).unwrap()["derived"], true);
        // A rule chosen for one pooling does not serve another, nor is one derived for it.
        assert_eq!(choose(&book, &zoo, &ab, Some(0.9), 2, 10, fb), fb);
        let mut pooled = book.clone();
        let mut r = pooled.lookup(&members_of(&ab), 2, 10).unwrap().clone();
        r.primary_share = Some(0.9);
        pooled.insert(r);
        assert_eq!(choose(&pooled, &zoo, &ab, Some(0.9), 2, 10, fb), got);
        let c_pooled = choose(&pooled, &zoo, &[model("c", "3")], Some(0.9), 2, 10, fb);
        assert_eq!(c_pooled, fb);
        let json = serde_json::to_value(got).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"on": 0.6_f32, "off": 0.3_f32, "k": 2, "n": 3, "validated": true, "hop_secs": 2})
        );
    }

    #[test]
    fn a_rule_clearing_under_short_runs_beside_the_counter_is_told_apart() {
        let zeros = DashboardConfig {
            risk_alarm_on: 0.0,
            risk_alarm_off: 0.0,
            ..DashboardConfig::default()
        };
        let low = ServedRule::fallback(&zeros, 5);
        let plain = ServedRule::fallback(&DashboardConfig::default(), 5);
        let with_counter = [model("a", "1"), model(BEATS_NAME, "c")];
        let members_alone = [model("a", "1")];
        assert!(held_by_short_runs(&low, &with_counter));
        // Above the highest score a short run gives, or without the counter: no warning.
        assert!(!held_by_short_runs(&plain, &with_counter));
        assert!(!held_by_short_runs(&low, &members_alone));
        // Whatever its basis (a hand-edited book, say).
        let validated = ServedRule {
            validated: true,
            ..low
        };
        assert!(held_by_short_runs(&validated, &with_counter));
        // The bound: clearing at it is held on by such a run; at the derived rules' floor
        // (0.2, just above it), not.
        let clearing_at = |off: f32| ServedRule {
            rule: AlarmRule { off, ..plain.rule },
            ..plain
        };
        assert!(held_by_short_runs(
            &clearing_at(beats::RUN_RISK_MAX),
            &with_counter
        ));
        assert!(!held_by_short_runs(&clearing_at(0.2), &with_counter));
    }
}
