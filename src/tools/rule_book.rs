//! `holmes zoo rules`: the zoo's rule book (`alarm_rules.json`, written by `holmes evaluate
//! --save-rule`) as a clinical engineer reads it before a ward serves it. Each validated
//! ensemble with its pooling, its alarm rule and what that rule reached on validation, and
//! whether it still holds for the zoo as it now is: every member present with the weights it
//! was validated with, and, for an ensemble validated beside the beat counter, the zoo's
//! counter the same one. A rule that no longer holds is never served (the daemon looks rules
//! up by the members' weights and the counter's); this says which, and why.

use std::path::Path;

use serde::Serialize;

use crate::alarm::AlarmRule;
use crate::alarm::rules::{RuleBook, RulesError, ValidationFigures};
use crate::composer::derived::read_zoo;
use crate::serving::engine::ensemble::BEATS_NAME;
use crate::signal::beats::BeatCounter;

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
}

impl RuleRow {
    /// Whether the rule holds for the zoo as it is.
    pub(crate) fn current(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The book in `dir` against the zoo in `dir`. Blocking (reads the manifests and the counter).
pub(crate) fn rule_rows(dir: &Path) -> Result<Vec<RuleRow>, RulesError> {
    let book = RuleBook::load(dir)?;
    let zoo = read_zoo(dir);
    // The zoo's counter: its weights' SHA-256, or why there is none to match.
    let counter: Result<String, String> = match BeatCounter::load(dir, 5) {
        Ok(Some(c)) => Ok(c.sha256),
        Ok(None) => Err("the zoo has no beat counter (beats.json)".into()),
        Err(e) => Err(format!("the zoo's beat counter does not read: {e}")),
    };
    Ok(book
        .rules
        .iter()
        .map(|r| {
            let mut problems = Vec::new();
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
                        Err(why) => problems.push(why.clone()),
                    }
                    continue;
                }
                members.push(m.name.clone());
                match zoo.iter().find(|z| z.member.name == m.name) {
                    None => problems.push(format!("{} is not in the zoo", m.name)),
                    Some(z) if z.member.sha256 != m.sha256 => {
                        problems.push(format!("{} was retrained since", m.name))
                    }
                    Some(_) => {}
                }
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
                problems,
            }
        })
        .collect())
}

/// The rows as a table: one line per rule, its members last, then what no longer holds.
pub(crate) fn to_text(rows: &[RuleRow]) -> String {
    let mut out = format!(
        "{:<3} {:>3} {:>4} {:<8} {:<9} {:>3} {:>9} {:>7} {:>5} {:>11} {:<6} {:<7} members\n",
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
    );
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
            "{:<3} {:>3} {:>4} {:<8} {:<9} {:>3} {:>9} {:>7} {:>5} {:>11} {:<6} {:<7} {}\n",
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
            if r.current() { "yes" } else { "NO" },
            members,
        ));
    }
    for (i, r) in rows.iter().enumerate().filter(|(_, r)| !r.current()) {
        out.push_str(&format!(
            "rule {} no longer holds: {}\n",
            i + 1,
            r.problems.join("; ")
        ));
    }
    let held = rows.iter().filter(|r| r.current()).count();
    out.push_str(&format!(
        "{held} of {} rules hold for this zoo\n",
        rows.len()
    ));
    out.push_str(
        "On the split's validation part, where `holmes evaluate` chose each rule: episodes \
         detected (with the matcher's grace), gross EC57 episode sensitivity, false alarms an \
         hour as the rule search charges them, time to alarm (median/p90), and whether the \
         rule reached its target.\n",
    );
    out
}
