//! `holmes evaluate --revalidate`: every rule of the zoo's rule book that no longer holds for
//! the zoo only because a member was retrained or the beat counter refitted
//! ([`RuleRow::revalidable`]) is chosen again (with `--folds K`, every rule the folds have not
//! chosen yet as well, by the folds: [`book_folds`](super::book_folds)); without `--folds` it
//! is validated again, as `holmes evaluate --part validation
//! --members ... --pooling choose --save-rule` would, with the target and time-to-alarm bound
//! the rule was chosen for: the same members, hop and window, the zoo's counter beside them
//! where the rule had one, the pooling (the plain mean where the engine does not weigh
//! members) and the alarm rule chosen on the validation part. The new rule replaces the old one
//! in the book, in one write. Where a rule that holds already covers the same members, hop,
//! window and counter as they are now, the old rule is only removed. A rule with a member
//! missing or unreadable, or counted with a counter the zoo no longer has, is left as it is.

use std::collections::HashSet;

use serde::Serialize;

use crate::alarm::AlarmRule;
use crate::alarm::rules::{RuleBook, ValidatedRule};
use crate::signal::beats::BeatCounter;
use crate::tools::rule_book::{self, RuleRow, Ward};
use crate::training::dataset::SplitName;

use super::book_folds::{Folded, choose_by_folds};
use super::save::validated_rule;
use super::{EvaluateError, EvaluateOptions, LeadSet, Pooling, evaluate};

/// What revalidation did with one rule that no longer held (or, by folds, that the folds had
/// not chosen yet).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Revalidated {
    /// The ensemble's models, sorted (the beat counter apart).
    pub(crate) members: Vec<String>,
    /// Whether it counts beats beside the models.
    pub(crate) beat_counter: bool,
    pub(crate) hop_secs: u32,
    pub(crate) window_secs: u32,
    /// Why the rule no longer held (empty: it held, and the folds chose it again).
    pub(crate) problems: Vec<String>,
    /// The rule and pooling it had.
    pub(crate) before: AlarmRule,
    pub(crate) before_share: Option<f64>,
    #[serde(flatten)]
    pub(crate) outcome: Outcome,
}

/// What became of a rule chosen again.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// Chosen again (on validation, or by the folds) and kept in place of the old.
    Validated(Revalidation),
    /// Removed: a rule that holds (or one validated again just before) covers the same
    /// members, hop, window and counter as they are now.
    Superseded,
    /// Left as it is: validating again cannot mend it (a member missing or unreadable, or no
    /// counter in the zoo).
    Left,
    /// Validating again failed; the old rule is kept.
    Failed { error: String },
}

/// A rule chosen again, on validation or by the folds.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Revalidation {
    pub(crate) rule: AlarmRule,
    pub(crate) primary_share: Option<f64>,
    /// Whether it reached the target (as the composer ranks it).
    pub(crate) reached: bool,
    pub(crate) detected: usize,
    pub(crate) episodes: usize,
    pub(crate) false_alarms_per_hour: Option<f64>,
    /// Where the folds chose it: the records folded, and each fold's rule (fold 1 first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) folded_records: Option<usize>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) folds: Vec<AlarmRule>,
}

/// An ensemble as revalidation saves it: model names, counter or not, hop, window.
type Key = (Vec<String>, bool, u32, u32);

fn key(r: &RuleRow) -> Key {
    (r.members.clone(), r.beat_counter, r.hop_secs, r.window_secs)
}

/// Validates again every rule of the book in `base.models_dir` that only a retrained member or
/// a refitted beat counter keeps from holding, with `base`'s data, split and record cap, and
/// keeps each new rule in place of the old one. `weighs`: whether the engine pools members by
/// weight (else the plain mean is the only pooling tried). A rule that fails to validate is
/// reported and kept; the others go on. With `folds` (K), each is chosen by K folds of the
/// held-out parts instead ([`choose_by_folds`]), and so is every rule that holds but was
/// chosen on validation; a rule the folds chose already is passed over, so that a run stopped
/// part-way resumes where it stopped. Blocking and CPU-heavy (the validation part twice per
/// rule: once to choose, once to report; with folds, the held-out parts once per rule).
pub(crate) fn revalidate(
    base: &EvaluateOptions,
    weighs: bool,
    folds: Option<usize>,
) -> Result<Vec<Revalidated>, EvaluateError> {
    let dir = &base.models_dir;
    let counter = BeatCounter::load(dir, base.hop_secs);
    // Whether a rule holds for the zoo does not depend on the ward (which only decides whether
    // it serves), so any ward will do here.
    let ward = Ward {
        hop_secs: base.hop_secs,
        window_secs: base.window_secs,
        counts_beats: false,
        weighs,
    };
    if !dir.is_dir() {
        return Err(EvaluateError::NoZoo(dir.clone()));
    }
    // The book read once: its rows are its rules, in its order. This command is its only
    // writer while it runs, so the copy in memory stays the file's, saved after each change.
    let mut book = RuleBook::load(dir)?;
    let rows = rule_book::rows_of(&book, dir, &counter, ward);
    let mut covered: HashSet<Key> = rows.iter().filter(|r| r.holds()).map(key).collect();
    let mut out = Vec::new();
    // The held-out records, read once where the folds choose (before any rule changes, so
    // that records that do not read stop the run with the book as it was).
    let folded = match folds {
        Some(k) => Some(Folded::read(base, k)?),
        None => None,
    };
    // In the book's order; by the folds, the rules that count beats first (the ward counts
    // them by default, and a long run may be stopped before the others).
    let mut pairs: Vec<_> = rows.into_iter().zip(book.rules.clone()).collect();
    if folds.is_some() {
        pairs.sort_by_key(|(row, _)| !row.beat_counter);
    }
    for (row, old) in pairs {
        // Chosen by these folds already: as many folds, over as many records (a rule a smaller
        // smoke run chose is chosen again).
        let by_folds = match (&old.validation.chosen_by, &folded) {
            (Some(c), Some(f)) => c.folds.len() == f.k && old.validation.records == f.recs.len(),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if row.holds() && (folds.is_none() || by_folds) {
            continue;
        }
        let (outcome, new) = if !row.holds() && !row.revalidable {
            (Outcome::Left, None)
        } else if !row.holds() && covered.contains(&key(&row)) {
            (Outcome::Superseded, None)
        } else {
            let chosen = match &folded {
                None => choose_again(base, weighs, &row, &old),
                Some(folded) => choose_by_folds(base, folded, weighs, &row, &old),
            };
            match chosen {
                Ok(new) => {
                    covered.insert(key(&row));
                    (Outcome::Validated(Revalidation::of(&new)), Some(new))
                }
                Err(e) => {
                    let error = e.to_string();
                    (Outcome::Failed { error }, None)
                }
            }
        };
        if matches!(outcome, Outcome::Validated(_) | Outcome::Superseded) {
            // The old rule goes, and the new one (if any) takes its place, in one write.
            book.remove(&old.members, old.hop_secs, old.window_secs);
            if let Some(new) = new {
                book.insert(new);
            }
            book.save(dir)?;
        }
        out.push(Revalidated {
            members: row.members,
            beat_counter: row.beat_counter,
            hop_secs: row.hop_secs,
            window_secs: row.window_secs,
            problems: row.problems,
            before: row.rule,
            before_share: row.primary_share,
            outcome,
        });
    }
    Ok(out)
}

/// `row`'s rule chosen again on validation, as the book would keep it.
fn choose_again(
    base: &EvaluateOptions,
    weighs: bool,
    row: &RuleRow,
    old: &ValidatedRule,
) -> Result<ValidatedRule, EvaluateError> {
    let e = evaluate(&options_for(base, weighs, row, old))?;
    validated_rule(&e, "ensemble", e.members.clone())
}

impl Revalidation {
    fn of(new: &ValidatedRule) -> Revalidation {
        let v = &new.validation;
        Revalidation {
            rule: new.rule,
            primary_share: new.primary_share,
            reached: v.reached(),
            detected: v.detected,
            episodes: v.episodes,
            false_alarms_per_hour: v.false_alarms_per_hour,
            folded_records: v.chosen_by.as_ref().map(|_| v.records),
            folds: v.chosen_by.as_ref().map_or(Vec::new(), |c| c.folds.clone()),
        }
    }
}

/// The evaluation that validates `row`'s ensemble again: the validation part, its members,
/// hop and window, the counter where it had one, the target and time-to-alarm bound `old` was
/// chosen for; pooling and rule chosen there; no noise stress test, classical detector or beat
/// fit.
fn options_for(
    base: &EvaluateOptions,
    weighs: bool,
    row: &RuleRow,
    old: &ValidatedRule,
) -> EvaluateOptions {
    EvaluateOptions {
        part: SplitName::Validation,
        members: row.members.clone(),
        pooling: if weighs {
            Pooling::Choose
        } else {
            Pooling::Mean
        },
        window_secs: row.window_secs,
        hop_secs: row.hop_secs,
        rule: None,
        target_sensitivity: old.validation.target_sensitivity,
        delay_limits: old.validation.delay_limits,
        noise_db: Vec::new(),
        classical: false,
        beats: false,
        leads: LeadSet::Both,
        count_beats: row.beat_counter,
        spliced: None,
        ..base.clone()
    }
}

/// The outcome as lines for a person.
pub(crate) fn text(done: &[Revalidated]) -> String {
    if done.is_empty() {
        return "no rule of the book to choose again: every one holds for the zoo (and with \
                --folds, these folds chose it)\n"
            .into();
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
            if r.problems.is_empty() {
                "chosen on the validation part".to_owned()
            } else {
                r.problems.join("; ")
            }
        ));
        out.push_str(&match &r.outcome {
            Outcome::Validated(a) => format!(
                "  {}: {} {} -> {} {}, {}/{} episodes, {} false alarms/h, target {}\n",
                match a.folded_records {
                    Some(n) => format!("chosen again by {} folds of {n} records", a.folds.len()),
                    None => "validated again".to_owned(),
                },
                pooling(r.before_share),
                rule(&r.before),
                pooling(a.primary_share),
                rule(&a.rule),
                a.detected,
                a.episodes,
                a.false_alarms_per_hour
                    .map_or("-".to_owned(), |f| format!("{f:.2}")),
                if a.reached { "met" } else { "NOT met" },
            ),
            Outcome::Superseded => {
                "  removed: a rule that holds covers these members as they are now\n".into()
            }
            Outcome::Left => "  left as it is: validating again cannot mend this\n".into(),
            Outcome::Failed { error } => format!("  NOT validated again, kept: {error}\n"),
        });
    }
    out
}
