//! The alarm rules validated for ensembles, kept with the zoo: `<zoo>/alarm_rules.json`,
//! written by `holmes evaluate --save-rule` after choosing a rule on the validation split
//! ([`choose_threshold`](super::choose_threshold)). A rule belongs to one ensemble (its members
//! by name *and* weights: a retrained member invalidates it), one hop and one window, so a new
//! zoo or ensemble brings its own; the daemon looks up the rule of the ensemble it serves and
//! says when it has none. A rule also says how its ensemble's members pool (the primary lead's
//! share, [`ValidatedRule::primary_share`]): the daemon pools them so, and a rule serves only
//! the pooling it was chosen for.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::AlarmRule;
use super::threshold::DelayLimits;

/// The file's name in the zoo folder.
pub const RULES_FILE: &str = "alarm_rules.json";
/// The file format this code writes and reads.
const FORMAT: u32 = 1;

/// Why the rules file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: format {found}, this version reads format {FORMAT}")]
    Format { path: PathBuf, found: u32 },
    #[error("rule for {members}: the primary lead's share must lie from 0.01 to 0.99, not {share}")]
    Share { members: String, share: f64 },
    #[error("rule for {members}: {source}")]
    Invalid {
        members: String,
        #[source]
        source: super::AlarmError,
    },
}

/// A member as a rule names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberRef {
    pub name: String,
    /// SHA-256 of the member's weights (its manifest's `weights.sha256`).
    pub sha256: String,
}

/// What a rule reached where it was chosen: on the validation records, or pooled out of fold
/// over the folds that chose it ([`ChosenBy`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidationFigures {
    pub records: usize,
    pub target_sensitivity: f64,
    pub episodes: usize,
    pub detected: usize,
    pub false_alarms_per_hour: Option<f64>,
    /// The time-to-alarm bounds the rule was chosen within (absent: none, or a rule saved
    /// before rules were bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_limits: Option<DelayLimits>,
    /// Whether the search reached its target (sensitivity within the bounds); absent in rules
    /// saved before it was recorded, where `detected` against the target tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub met_target: Option<bool>,
    /// Median and p90 time to alarm of the raised episodes, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_delay_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_delay_ms: Option<i64>,
    /// Gross episode sensitivity under the rule by EC57's overlap (the
    /// alarm, dated as `holmes evaluate` annotates it, must share time with the episode; the
    /// rule search's count also takes an alarm raised just after a short episode). Absent in
    /// rules saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ec57_sensitivity: Option<f64>,
    /// How the rule was chosen where not on the validation part: `holmes evaluate --folds K
    /// --save-rule` (the served rule) and `--revalidate --folds K` (the others) keep the
    /// median of the folds' rules, each chosen on the other folds, and say so here with each
    /// fold's rule (the figures above are then the folds' pooled out-of-fold results, each
    /// fold under its own rule). Absent: chosen on validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen_by: Option<ChosenBy>,
}

/// How a kept rule was chosen over folds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChosenBy {
    /// In words, for a reader of the rules file.
    pub how: String,
    /// Each fold's rule, fold 1 first.
    pub folds: Vec<AlarmRule>,
    /// Each fold's pooling, where the folds chose it too: the primary lead's share (`null`:
    /// the plain mean), fold 1 first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shares: Vec<Option<f64>>,
    /// Where the folds chose the pooling: each fold's rule for the pooling kept (the one most
    /// folds chose), chosen on its other folds, fold 1 first; the kept rule is their median.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub median_of: Vec<AlarmRule>,
}

impl ValidationFigures {
    /// Whether the rule reached its target where it was chosen: as recorded, or for an older
    /// rule or one chosen by folds,
    /// its detected episodes against the target sensitivity; and, where recorded, by EC57's
    /// overlap too (the issue's target is EC57's).
    pub fn reached(&self) -> bool {
        let by_count = self.episodes > 0
            && self.detected as f64 >= self.target_sensitivity * self.episodes as f64 - 1e-9;
        let by_ec57 = self
            .ec57_sensitivity
            .is_none_or(|se| se >= self.target_sensitivity - 1e-9);
        self.met_target.unwrap_or(by_count) && by_ec57
    }
}

/// One ensemble's validated rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidatedRule {
    /// The ensemble's members, sorted by name.
    pub members: Vec<MemberRef>,
    /// The hop and window the scores were replayed at, s.
    pub hop_secs: u32,
    pub window_secs: u32,
    pub rule: AlarmRule,
    /// How the members' probabilities pool: the primary ECG lead's members carry this share
    /// of the score together and the secondary lead's the rest, each lead's members sharing
    /// its part equally (renormalised over the members that scored, so a monitor sending one
    /// lead gets that lead's mean); from 0.01 to 0.99. Absent: every member weighs the same
    /// (the plain mean).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_share: Option<f64>,
    pub validation: ValidationFigures,
}

/// Whether `share` is a usable primary-lead share: from 0.01 to 0.99, so that neither lead's
/// members weigh (next to) nothing (NaN is not one).
pub fn valid_share(share: f64) -> bool {
    (0.01..=0.99).contains(&share)
}

/// The rules file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleBook {
    pub format: u32,
    pub rules: Vec<ValidatedRule>,
}

impl RuleBook {
    /// Reads `<dir>/alarm_rules.json`; no file is an empty book.
    pub fn load(dir: &Path) -> Result<RuleBook, RulesError> {
        let path = dir.join(RULES_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(RuleBook {
                    format: FORMAT,
                    rules: Vec::new(),
                });
            }
            Err(source) => return Err(RulesError::Io { path, source }),
        };
        let mut book: RuleBook =
            serde_json::from_str(&text).map_err(|source| RulesError::Parse {
                path: path.clone(),
                source,
            })?;
        if book.format != FORMAT {
            return Err(RulesError::Format {
                path,
                found: book.format,
            });
        }
        for r in &mut book.rules {
            r.rule.validate().map_err(|source| RulesError::Invalid {
                members: names(&r.members),
                source,
            })?;
            if let Some(share) = r.primary_share.filter(|&s| !valid_share(s)) {
                return Err(RulesError::Share {
                    members: names(&r.members),
                    share,
                });
            }
            // A hand-edited file may list an ensemble's members in any order, or twice.
            r.members.sort();
            r.members.dedup();
        }
        // One rule per ensemble, hop and window: the last one listed, as `insert` keeps.
        let mut rules: Vec<ValidatedRule> = Vec::with_capacity(book.rules.len());
        for r in std::mem::take(&mut book.rules) {
            rules.retain(|x| {
                !(x.members == r.members
                    && x.hop_secs == r.hop_secs
                    && x.window_secs == r.window_secs)
            });
            rules.push(r);
        }
        book.rules = rules;
        Ok(book)
    }

    /// Writes the book to `<dir>/alarm_rules.json` (through a temporary file and a rename, so a
    /// reader never sees half a file).
    pub fn save(&self, dir: &Path) -> Result<(), RulesError> {
        let path = dir.join(RULES_FILE);
        let tmp = dir.join(format!("{RULES_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self).expect("rules serialise") + "\n";
        let io = |source| RulesError::Io {
            path: path.clone(),
            source,
        };
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }

    /// Adds `rule`, replacing one for the same members, hop and window.
    pub fn insert(&mut self, mut rule: ValidatedRule) {
        rule.members.sort();
        self.format = FORMAT;
        self.rules.retain(|r| {
            !(r.members == rule.members
                && r.hop_secs == rule.hop_secs
                && r.window_secs == rule.window_secs)
        });
        self.rules.push(rule);
    }

    /// Removes the rule for exactly these members (by name and weights) at this hop and window,
    /// if the book has one.
    pub fn remove(&mut self, members: &[MemberRef], hop_secs: u32, window_secs: u32) {
        let mut want = members.to_vec();
        want.sort();
        self.rules.retain(|r| {
            !(r.members == want && r.hop_secs == hop_secs && r.window_secs == window_secs)
        });
    }

    /// The rule validated for exactly these members (by name and weights) at this hop and
    /// window.
    pub fn lookup(
        &self,
        members: &[MemberRef],
        hop_secs: u32,
        window_secs: u32,
    ) -> Option<&ValidatedRule> {
        let mut want = members.to_vec();
        want.sort();
        self.rules
            .iter()
            .find(|r| r.members == want && r.hop_secs == hop_secs && r.window_secs == window_secs)
    }

    /// The rule validated for these members pooled with `primary_share` ([`lookup`](Self::lookup)
    /// where a rule chosen for another pooling does not count).
    pub fn lookup_pooled(
        &self,
        members: &[MemberRef],
        primary_share: Option<f64>,
        hop_secs: u32,
        window_secs: u32,
    ) -> Option<&ValidatedRule> {
        self.lookup(members, hop_secs, window_secs)
            .filter(|r| r.primary_share == primary_share)
    }
}

fn names(m: &[MemberRef]) -> String {
    m.iter()
        .map(|m| m.name.as_str())
        .collect::<Vec<_>>()
        .join("+")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, sha: &str) -> MemberRef {
        MemberRef {
            name: name.into(),
            sha256: sha.into(),
        }
    }

    fn validated(members: Vec<MemberRef>, hop: u32, on: f32) -> ValidatedRule {
        ValidatedRule {
            members,
            hop_secs: hop,
            window_secs: 30,
            rule: AlarmRule {
                on,
                off: on / 2.0,
                k: 2,
                n: 3,
            },
            primary_share: None,
            validation: ValidationFigures {
                records: 44,
                target_sensitivity: 0.95,
                episodes: 40,
                detected: 39,
                false_alarms_per_hour: Some(0.5),
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
    fn rules_are_found_by_members_weights_hop_and_window() {
        let dir = tempfile::tempdir().unwrap();
        assert!(RuleBook::load(dir.path()).unwrap().rules.is_empty());
        let mut book = RuleBook::default();
        book.insert(validated(vec![member("b", "2"), member("a", "1")], 5, 0.6));
        book.insert(validated(vec![member("a", "1")], 5, 0.7));
        // The same ensemble again replaces its rule.
        book.insert(validated(vec![member("a", "1"), member("b", "2")], 5, 0.8));
        book.save(dir.path()).unwrap();
        let book = RuleBook::load(dir.path()).unwrap();
        assert_eq!(book.rules.len(), 2);
        let ab = [member("a", "1"), member("b", "2")];
        assert_eq!(book.lookup(&ab, 5, 30).unwrap().rule.on, 0.8);
        // Another hop, window, or retrained member has no rule.
        assert!(book.lookup(&ab, 2, 30).is_none());
        assert!(book.lookup(&ab, 5, 10).is_none());
        assert!(
            book.lookup(&[member("a", "1"), member("b", "3")], 5, 30)
                .is_none()
        );
        // Removing takes exactly that ensemble's rule at that hop and window, in any order.
        let mut book = book;
        book.remove(&[member("b", "2"), member("a", "1")], 2, 30);
        book.remove(&[member("a", "1"), member("b", "3")], 5, 30);
        assert_eq!(book.rules.len(), 2);
        book.remove(&[member("b", "2"), member("a", "1")], 5, 30);
        assert_eq!(book.rules.len(), 1);
        assert!(book.lookup(&ab, 5, 30).is_none());
        assert_eq!(
            book.lookup(&[member("a", "1")], 5, 30).unwrap().rule.on,
            0.7
        );
    }

    #[test]
    fn a_hand_written_file_may_list_members_in_any_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut rule = validated(vec![member("b", "2"), member("a", "1")], 5, 0.6);
        rule.members = vec![member("b", "2"), member("a", "1")];
        let text = serde_json::json!({"format": FORMAT, "rules": [rule]}).to_string();
        std::fs::write(dir.path().join(RULES_FILE), text).unwrap();
        let book = RuleBook::load(dir.path()).unwrap();
        let got = book.lookup(&[member("b", "2"), member("a", "1")], 5, 30);
        assert_eq!(got.map(|r| r.rule.on), Some(0.6));
        // The same ensemble twice (one member listed twice): the last one listed stands.
        let mut again = validated(
            vec![member("a", "1"), member("b", "2"), member("a", "1")],
            5,
            0.8,
        );
        again.members = vec![member("a", "1"), member("b", "2"), member("a", "1")];
        let text = serde_json::json!({"format": FORMAT, "rules": [rule, again]}).to_string();
        std::fs::write(dir.path().join(RULES_FILE), text).unwrap();
        let book = RuleBook::load(dir.path()).unwrap();
        assert_eq!(book.rules.len(), 1);
        let got = book.lookup(&[member("a", "1"), member("b", "2")], 5, 30);
        assert_eq!(got.map(|r| r.rule.on), Some(0.8));
    }

    #[test]
    fn a_bad_file_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RULES_FILE);
        std::fs::write(&path, r#"{"format": 9, "rules": []}"#).unwrap();
        let e = RuleBook::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("format 9") && e.contains(RULES_FILE), "{e}");
        let mut book = RuleBook::default();
        let mut bad = validated(vec![member("a", "1")], 5, 0.6);
        bad.rule.off = 0.9;
        book.insert(bad);
        book.save(dir.path()).unwrap();
        let e = RuleBook::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("rule for a"), "{e}");
        // A share of the whole score (or none, or next to none) for one lead is no pooling of
        // both.
        for share in [0.0, 1.0, -0.5, 1.5, 5e-324, 0.995] {
            let mut bad = validated(vec![member("a", "1")], 5, 0.6);
            bad.primary_share = Some(share);
            let mut book = RuleBook::default();
            book.insert(bad);
            book.save(dir.path()).unwrap();
            let e = RuleBook::load(dir.path()).unwrap_err().to_string();
            assert!(e.contains("primary lead's share"), "{share}: {e}");
        }
    }

    #[test]
    fn a_share_is_kept_and_an_old_rule_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let mut book = RuleBook::default();
        let mut r = validated(vec![member("a", "1"), member("b", "2")], 5, 0.6);
        r.primary_share = Some(0.9);
        book.insert(r);
        book.insert(validated(vec![member("c", "3")], 5, 0.6));
        book.save(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(RULES_FILE)).unwrap();
        // A rule without a share is written as before the field existed.
        assert_eq!(text.matches("primary_share").count(), 1, "{text}");
        let book = RuleBook::load(dir.path()).unwrap();
        let ab = [member("a", "1"), member("b", "2")];
        assert_eq!(book.lookup(&ab, 5, 30).unwrap().primary_share, Some(0.9));
        assert_eq!(
            book.lookup(&[member("c", "3")], 5, 30)
                .unwrap()
                .primary_share,
            None
        );
    }

    #[test]
    fn a_rule_reaches_its_target_by_the_search_and_by_ec57s_overlap_where_recorded() {
        let mut v = validated(vec![member("a", "1")], 5, 0.6).validation;
        // An old rule: 39 of 40 detected against 0.95.
        assert!(v.reached());
        v.detected = 37;
        assert!(!v.reached(), "37/40 < 0.95");
        // The search's own verdict stands over the count.
        v.met_target = Some(true);
        assert!(v.reached());
        // EC57's overlap, where recorded, must reach the target too.
        v.ec57_sensitivity = Some(0.955);
        assert!(v.reached());
        v.ec57_sensitivity = Some(0.942);
        assert!(!v.reached(), "short by EC57's overlap");
        v.met_target = Some(false);
        v.ec57_sensitivity = Some(1.0);
        assert!(!v.reached(), "the search fell short");
    }
}
