//! The proxy monitor's alarms one by one (`holmes evaluate --folds --json`, `alarms`): where
//! each was raised, whether it was true, what set it off, the served risk before it and
//! Holmes's opinion with its reason, so that a reader can find the records behind a figure
//! (the true alarms doubted, the false ones confirmed) without a debugger.

use serde::Serialize;

/// One adjudicated proxy alarm: a monitor alarm (the classical detector's) or a spliced
/// event's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListedAlarm {
    /// `monitor` or `spliced`.
    pub source: &'static str,
    /// The record (for a spliced event, the record its copy was spliced from).
    pub record: String,
    /// When the alarm was raised, s from the record's start.
    pub at_s: f64,
    /// Whether the reference makes it true.
    pub truth: bool,
    /// What set it off: the annotations' cause for a monitor alarm, the event for a spliced
    /// one.
    pub set_off_by: String,
    /// The served risk over the windows before it.
    pub risk: f32,
    /// The opinion's probability.
    pub probability: f32,
    /// The point it was confirmed at (its fold's).
    pub confirm_at: f32,
    /// Whether it was confirmed (`probability` at or above `confirm_at`).
    pub confirmed: bool,
    /// The opinion's reason, as a nurse reads it.
    pub reason: String,
}

/// The true alarms of `alarms` the opinion doubted, as lines for a person (none: empty).
pub(crate) fn doubted_text(alarms: &[ListedAlarm]) -> String {
    let doubted: Vec<&ListedAlarm> = alarms.iter().filter(|a| a.truth && !a.confirmed).collect();
    if doubted.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "True alarms the opinion doubted ({} of {} true):\n",
        doubted.len(),
        alarms.iter().filter(|a| a.truth).count()
    );
    for a in doubted {
        out.push_str(&format!(
            "  {} {} at {:.1} s ({}): risk {:.2}, probability {:.2} < {:.2}: {}\n",
            a.source, a.record, a.at_s, a.set_off_by, a.risk, a.probability, a.confirm_at, a.reason
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alarm(truth: bool, probability: f32) -> ListedAlarm {
        ListedAlarm {
            source: "monitor",
            record: "vfdb/605".into(),
            at_s: 1730.0,
            truth,
            set_off_by: "SustainedVt".into(),
            risk: 0.1,
            probability,
            confirm_at: 0.4,
            confirmed: probability >= 0.4,
            reason: "noise on both leads".into(),
        }
    }

    #[test]
    fn the_true_alarms_doubted_are_listed_alone() {
        assert_eq!(doubted_text(&[alarm(true, 0.9), alarm(false, 0.1)]), "");
        let text = doubted_text(&[alarm(true, 0.2), alarm(true, 0.9), alarm(false, 0.1)]);
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.starts_with("True alarms the opinion doubted (1 of 2 true):"));
        assert!(text.contains("monitor vfdb/605 at 1730.0 s (SustainedVt): risk 0.10, probability 0.20 < 0.40: noise on both leads"), "{text}");
    }
}
