//! `holmes evaluate --revalidate`: every rule of the zoo's rule book that no longer holds for
//! the zoo only because a member was retrained or the beat counter refitted
//! ([`RuleRow::revalidable`]) is validated again, as `holmes evaluate --part validation
//! --members ... --pooling choose --save-rule` would: the same members, hop and window, the
//! zoo's counter beside them where the rule had one, the pooling and the alarm rule chosen on
//! the validation part for the target; the new rule replaces the old one in the book. A rule
//! with a member missing or unreadable, or counted with a counter the zoo no longer has, is
//! left as it is, and said.

use serde::Serialize;

use crate::alarm::AlarmRule;
use crate::alarm::rules::RuleBook;
use crate::signal::beats::BeatCounter;
use crate::tools::rule_book::{self, RuleRow, Ward};
use crate::training::dataset::SplitName;

use super::{EvaluateError, EvaluateOptions, Pooling, evaluate, save_rule};

/// What revalidation did with one rule that no longer held.
#[derive(Debug, Clone, Serialize)]
pub struct Revalidated {
    /// The ensemble's models, sorted (the beat counter apart).
    pub members: Vec<String>,
    /// Whether it counts beats beside the models.
    pub beat_counter: bool,
    pub hop_secs: u32,
    pub window_secs: u32,
    /// Why the rule no longer held.
    pub problems: Vec<String>,
    /// The rule and pooling it had.
    pub before: AlarmRule,
    pub before_share: Option<f64>,
    /// What validating again chose, or why the rule was left (`None` where it was).
    pub after: Option<Revalidation>,
}

/// A rule chosen again on validation and kept in the book.
#[derive(Debug, Clone, Serialize)]
pub struct Revalidation {
    pub rule: AlarmRule,
    pub primary_share: Option<f64>,
    /// Whether it reached the target (as the composer ranks it).
    pub reached: bool,
    pub detected: usize,
    pub episodes: usize,
    pub false_alarms_per_hour: Option<f64>,
}

/// Validates again every rule of the book in `base.models_dir` that only a retrained member or
/// a refitted beat counter keeps from holding, each with `base`'s data, split, target, delay
/// limits and record cap, and saves each new rule in place of the old one. Blocking and
/// CPU-heavy (the validation part once per rule).
pub fn revalidate(base: &EvaluateOptions) -> Result<Vec<Revalidated>, EvaluateError> {
    let dir = &base.models_dir;
    let counter = BeatCounter::load(dir, base.hop_secs);
    // Whether a rule holds for the zoo does not depend on the ward (which only decides whether
    // it serves), so any ward will do here.
    let ward = Ward {
        hop_secs: base.hop_secs,
        window_secs: base.window_secs,
        counts_beats: false,
        weighs: true,
    };
    let rows = rule_book::rule_rows(dir, &counter, ward).map_err(|e| match e {
        rule_book::RuleBookError::Rules(r) => EvaluateError::Rules(r),
        rule_book::RuleBookError::NoZoo(path) => EvaluateError::Io {
            path,
            source: std::io::ErrorKind::NotFound.into(),
        },
    })?;
    let book = RuleBook::load(dir)?;
    let mut out = Vec::new();
    for (row, old) in rows.into_iter().zip(book.rules) {
        if row.holds() {
            continue;
        }
        let after = if row.revalidable {
            let saved = save_rule(&evaluate(&options_for(base, &row))?, dir)?;
            // The new rule names the members' weights as they are now; the old one goes.
            let mut book = RuleBook::load(dir)?;
            book.remove(&old.members, old.hop_secs, old.window_secs);
            book.save(dir)?;
            let v = &saved.validation;
            Some(Revalidation {
                rule: saved.rule,
                primary_share: saved.primary_share,
                reached: v.reached(),
                detected: v.detected,
                episodes: v.episodes,
                false_alarms_per_hour: v.false_alarms_per_hour,
            })
        } else {
            None
        };
        out.push(Revalidated {
            members: row.members,
            beat_counter: row.beat_counter,
            hop_secs: row.hop_secs,
            window_secs: row.window_secs,
            problems: row.problems,
            before: row.rule,
            before_share: row.primary_share,
            after,
        });
    }
    Ok(out)
}

/// The evaluation that validates `row`'s ensemble again: the validation part, its members,
/// hop and window, the counter where it had one, pooling and rule chosen there; no noise
/// stress test, classical detector, gate, stack or beat fit.
fn options_for(base: &EvaluateOptions, row: &RuleRow) -> EvaluateOptions {
    EvaluateOptions {
        part: SplitName::Validation,
        members: row.members.clone(),
        pooling: Pooling::Choose,
        window_secs: row.window_secs,
        hop_secs: row.hop_secs,
        rule: None,
        noise_db: Vec::new(),
        classical: false,
        sqi_gate: None,
        sqi_stack: false,
        beats: false,
        count_beats: row.beat_counter,
        ..base.clone()
    }
}

/// The outcome as lines for a person.
pub fn text(done: &[Revalidated]) -> String {
    if done.is_empty() {
        return "every rule of the book holds for the zoo; none to validate again\n".into();
    }
    let mut out = String::new();
    let pooling = |s: Option<f64>| s.map_or("mean".to_owned(), |s| format!("lead {s:.2}"));
    let rule = |r: &AlarmRule| format!("{:.2}/{:.2} {}/{}", r.on, r.off, r.k, r.n);
    for r in done {
        let mut members = r.members.join(", ");
        if r.beat_counter {
            members.push_str(" + beat counter");
        }
        out.push_str(&format!(
            "{members} (hop {} s, window {} s): {}\n",
            r.hop_secs,
            r.window_secs,
            r.problems.join("; ")
        ));
        match &r.after {
            Some(a) => out.push_str(&format!(
                "  validated again: {} {} -> {} {}, {}/{} episodes, {} false alarms/h, target {}\n",
                pooling(r.before_share),
                rule(&r.before),
                pooling(a.primary_share),
                rule(&a.rule),
                a.detected,
                a.episodes,
                a.false_alarms_per_hour
                    .map_or("-".to_owned(), |f| format!("{f:.2}")),
                if a.reached { "met" } else { "NOT met" },
            )),
            None => out.push_str("  left as it is: validating again cannot mend this\n"),
        }
    }
    out
}
