//! `holmes zoo rules`: the zoo's rule book (`alarm_rules.json`, written by `holmes evaluate
//! --save-rule`) as a clinical engineer reads it before a ward serves it. Each validated
//! ensemble with its pooling, its alarm rule and what that rule reached on validation; whether
//! it still holds for the zoo as it now is (every member present, readable, with the weights
//! it was validated with, and, for an ensemble validated beside the beat counter, the zoo's
//! counter the same one); and whether it applies to the ward a config describes (its hop and
//! window, whether it counts beats beside its members, whether the engine pools by lead
//! share). The daemon looks a rule up by all of these, so a rule that fails any of them is
//! never served; this says which, and why.

use std::path::Path;

use serde::Serialize;

use crate::alarm::AlarmRule;
use crate::alarm::rules::{RuleBook, RulesError, ValidationFigures};
use crate::serving::engine::counter::BEATS_NAME;
use crate::signal::beats::{BeatCounter, BeatsError};
use crate::zoo::{MANIFEST_FILE, ZooError, read_checked};

/// What `holmes zoo rules` refuses.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RuleBookError {
    #[error("{0}: no such zoo folder")]
    NoZoo(std::path::PathBuf),
    #[error(transparent)]
    Rules(#[from] RulesError),
}

/// The ward a rule must fit to be served: what the daemon's lookup matches beyond the members.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Ward {
    pub(crate) hop_secs: u32,
    pub(crate) window_secs: u32,
    /// Whether the ward counts beats beside its members (`ensemble.count_beats` and a counter
    /// in the zoo).
    pub(crate) counts_beats: bool,
    /// Whether the engine pools members by weight (`engine.combine = "weighted_mean"`): a rule
    /// chosen for a lead share serves only then.
    pub(crate) weighs: bool,
}

/// One rule of the book, as listed.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RuleRow {
    /// The ensemble's models, sorted (the beat counter apart).
    pub(crate) members: Vec<String>,
    /// Whether it was validated with the beat counter beside the models.
    pub(crate) beat_counter: bool,
    pub(crate) hop_secs: u32,
    pub(crate) window_secs: u32,
    /// The primary lead's share of the score (`None`: the plain mean).
    pub(crate) primary_share: Option<f64>,
    pub(crate) rule: AlarmRule,
    pub(crate) validation: ValidationFigures,
    /// Whether the rule reached its target on validation (as the composer ranks it).
    pub(crate) reached: bool,
    /// Why the rule no longer holds for this zoo; empty where it does.
    pub(crate) problems: Vec<String>,
    /// Whether validating the ensemble again would mend every problem: each is a member
    /// retrained, or a beat counter other than the one it was validated with (`holmes
    /// evaluate --revalidate`). Not where a member is missing or does not read, or the zoo
    /// has no counter.
    pub(crate) revalidable: bool,
    /// Why the rule does not apply to the ward; empty where it does.
    pub(crate) not_for_ward: Vec<String>,
}

impl RuleRow {
    /// Whether the rule holds for the zoo as it is.
    pub(crate) fn holds(&self) -> bool {
        self.problems.is_empty()
    }

    /// Whether the ward could serve the rule: it holds and applies to the ward.
    pub(crate) fn servable(&self) -> bool {
        self.holds() && self.not_for_ward.is_empty()
    }
}

/// A zoo folder's model as the listing checks it: its name and weights' SHA-256 as its
/// manifest says, or why it does not read.
struct ZooModel {
    name: String,
    sha256: Result<String, String>,
}

/// The zoo's models: each folder's manifest, and whether its weights file is the one the
/// manifest names, as [`read_checked`] (what the daemon checks before it loads a model) finds
/// them; a folder that fails is named by the folder.
fn zoo_models(dir: &Path) -> Vec<ZooModel> {
    let dirs = crate::zoo::model_dirs(dir).unwrap_or_default();
    dirs.iter()
        .map(|d| {
            let folder = d
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            match read_checked(d) {
                Ok((m, _)) => ZooModel {
                    name: m.name,
                    sha256: Ok(m.weights.sha256),
                },
                Err(e) => {
                    let why = match e {
                        ZooError::Checksum { .. } => {
                            format!("{folder}'s weights are not the ones its manifest names")
                        }
                        ZooError::Io { ref path, .. } if !path.ends_with(MANIFEST_FILE) => {
                            format!("{folder}'s weights do not read ({e})")
                        }
                        e => format!("{folder}'s manifest does not read ({e})"),
                    };
                    ZooModel {
                        name: folder,
                        sha256: Err(why),
                    }
                }
            }
        })
        .collect()
}

/// The book in `dir` against the zoo in `dir`, its beat counter as read from there
/// (`counter`), and the `ward`. Blocking (reads the manifests and the weights).
pub(crate) fn rule_rows(
    dir: &Path,
    counter: &Result<Option<BeatCounter>, BeatsError>,
    ward: Ward,
) -> Result<Vec<RuleRow>, RuleBookError> {
    if !dir.is_dir() {
        return Err(RuleBookError::NoZoo(dir.to_owned()));
    }
    Ok(rows_of(&RuleBook::load(dir)?, dir, counter, ward))
}

/// [`rule_rows`] for a `book` already read from `dir`: one row per rule, in the book's order.
/// Blocking (reads the manifests and the weights).
pub(crate) fn rows_of(
    book: &RuleBook,
    dir: &Path,
    counter: &Result<Option<BeatCounter>, BeatsError>,
    ward: Ward,
) -> Vec<RuleRow> {
    let zoo = zoo_models(dir);
    // The zoo's counter: its file's SHA-256, or why there is none to match.
    let counter: Result<String, String> = match counter {
        Ok(Some(c)) => Ok(c.sha256.clone()),
        Ok(None) => Err("the zoo has no beat counter (beats.json)".into()),
        Err(e) => Err(format!("the zoo's beat counter does not read: {e}")),
    };
    book.rules
        .iter()
        .map(|r| {
            let mut problems = Vec::new();
            // Problems that validating again cannot mend.
            let mut lasting = 0;
            let mut members = Vec::new();
            let mut beat_counter = false;
            for m in &r.members {
                if m.name == BEATS_NAME {
                    beat_counter = true;
                    match &counter {
                        Ok(sha) if *sha == m.sha256 => {}
                        Ok(_) => problems.push(
                            "the zoo's beat counter is not the one it was validated with".into(),
                        ),
                        Err(why) => {
                            lasting += 1;
                            problems.push(why.clone());
                        }
                    }
                    continue;
                }
                members.push(m.name.clone());
                let named: Vec<&ZooModel> = zoo.iter().filter(|z| z.name == m.name).collect();
                if named.iter().any(|z| z.sha256.as_ref() == Ok(&m.sha256)) {
                    continue;
                }
                match named.first().map(|z| &z.sha256) {
                    Some(Ok(_)) => problems.push(format!("{} was retrained since", m.name)),
                    None => {
                        lasting += 1;
                        problems.push(format!("{} is not in the zoo", m.name));
                    }
                    Some(Err(why)) => {
                        lasting += 1;
                        problems.push(why.clone());
                    }
                }
            }
            let mut not_for_ward = Vec::new();
            if (r.hop_secs, r.window_secs) != (ward.hop_secs, ward.window_secs) {
                not_for_ward.push(format!(
                    "validated at a {} s hop and {} s window, the ward's are {} s and {} s",
                    r.hop_secs, r.window_secs, ward.hop_secs, ward.window_secs
                ));
            }
            match (beat_counter, ward.counts_beats) {
                (false, true) => not_for_ward.push(
                    "validated without the beat counter the ward counts beside its members".into(),
                ),
                (true, false) => not_for_ward
                    .push("validated with the beat counter, which the ward does not count".into()),
                _ => {}
            }
            if r.primary_share.is_some() && !ward.weighs {
                not_for_ward
                    .push("chosen for a lead share, and the engine pools by the plain mean".into());
            }
            RuleRow {
                members,
                beat_counter,
                hop_secs: r.hop_secs,
                window_secs: r.window_secs,
                primary_share: r.primary_share,
                rule: r.rule,
                reached: r.validation.reached(),
                validation: r.validation.clone(),
                revalidable: !problems.is_empty() && lasting == 0,
                problems,
                not_for_ward,
            }
        })
        .collect()
}

/// The rows as a table: one line per rule, its members on the next, then what keeps a rule
/// from serving.
pub(crate) fn to_text(rows: &[RuleRow], ward: Ward) -> String {
    let mut out = format!(
        "{:<3} {:>3} {:>4} {:<9} {:<9} {:>3} {:>9} {:>7} {:>5} {:>11} {:<6} {:<5} {}\n",
        "#",
        "hop",
        "win",
        "pooling",
        "on/off",
        "k/n",
        "episodes",
        "EC57 Se",
        "FA/h",
        "t med/p90 s",
        "target",
        "holds",
        "ward",
    );
    let yes = |b: bool| if b { "yes" } else { "NO" };
    for (i, r) in rows.iter().enumerate() {
        let v = &r.validation;
        let pooling = r
            .primary_share
            .map_or("mean".to_owned(), |s| format!("lead {s:.2}"));
        let secs =
            |ms: Option<i64>| ms.map_or("-".to_owned(), |ms| format!("{:.1}", ms as f64 / 1e3));
        let mut members = r.members.join(", ");
        if r.beat_counter {
            members.push_str(" + beat counter");
        }
        out.push_str(&format!(
            "{:<3} {:>3} {:>4} {:<9} {:<9} {:>3} {:>9} {:>7} {:>5} {:>11} {:<6} {:<5} {}\n    {}\n",
            i + 1,
            r.hop_secs,
            r.window_secs,
            pooling,
            format!("{:.2}/{:.2}", r.rule.on, r.rule.off),
            format!("{}/{}", r.rule.k, r.rule.n),
            format!("{}/{}", v.detected, v.episodes),
            v.ec57_sensitivity
                .map_or("-".to_owned(), |s| format!("{s:.3}")),
            v.false_alarms_per_hour
                .map_or("-".to_owned(), |f| format!("{f:.2}")),
            format!("{}/{}", secs(v.median_delay_ms), secs(v.p90_delay_ms)),
            if r.reached { "met" } else { "short" },
            yes(r.holds()),
            yes(r.servable()),
            members,
        ));
    }
    for (i, r) in rows.iter().enumerate() {
        if !r.holds() {
            out.push_str(&format!(
                "rule {} no longer holds: {}{}\n",
                i + 1,
                r.problems.join("; "),
                if r.revalidable {
                    " (holmes evaluate --revalidate validates it again)"
                } else {
                    ""
                }
            ));
        }
        if !r.not_for_ward.is_empty() {
            out.push_str(&format!(
                "rule {} is not for this ward: {}\n",
                i + 1,
                r.not_for_ward.join("; ")
            ));
        }
    }
    let held = rows.iter().filter(|r| r.holds()).count();
    let servable = rows.iter().filter(|r| r.servable()).count();
    out.push_str(&format!(
        "{held} of {} rules hold for this zoo; {servable} of them apply to this ward (hop {} s, \
         window {} s, {}, {})\n",
        rows.len(),
        ward.hop_secs,
        ward.window_secs,
        if ward.counts_beats {
            "the beat counter beside the members"
        } else {
            "no beat counter"
        },
        if ward.weighs {
            "pooled by weight"
        } else {
            "pooled by the plain mean"
        },
    ));
    let by_folds = rows
        .iter()
        .filter(|r| r.validation.chosen_by.is_some())
        .count();
    out.push_str(&format!(
        "Figures where `holmes evaluate` chose each rule: pooled out of fold over the held-out \
         parts where folds chose it ({by_folds} of {} rules), else on the split's validation \
         part: episodes detected (with the matcher's grace), gross EC57 episode sensitivity, \
         false alarms an hour as the rule search charges them, time to alarm (median/p90), and \
         whether the rule reached its target.\n",
        rows.len()
    ));
    out
}
