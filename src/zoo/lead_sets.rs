//! Which lead sets an ensemble can score. A monitor sends lead II (the primary role), a V lead
//! (the secondary role) or both ([`LeadsConfig`](crate::config::LeadsConfig) maps its lead
//! names to the roles), and the ward leaves a lead that is unusable in a window out of it. The
//! engine runs a member on a window only when the window holds the member's input, so a bed
//! gets a score only if some member reads a lead its monitor sends.
//!
//! The [`composer`](crate::composer) keeps covering every lead set a constraint of its
//! searches; the engine reports what the ensemble serving now covers, for `/api/health` and
//! the system page.

use serde::{Deserialize, Serialize};

use super::{Input, Lead};

/// The three lead sets a monitor can send, each with whether an ensemble scores it.
///
/// An ECG member covers the sets that contain its lead: a primary-lead member scores monitors
/// sending lead II alone or both leads, a secondary-lead member monitors sending V alone or
/// both. A heart-rate (vitals) member counts for none: a monitor need not send a heart rate,
/// and the ward drops it from a window when too little of it arrived, so it cannot stand in
/// for an ECG lead. A third-lead member counts for none either: the ward fills only the
/// primary and secondary roles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeadSets {
    /// Monitors that send lead II (the primary role) alone.
    pub primary_only: bool,
    /// Monitors that send a V lead (the secondary role) alone.
    pub secondary_only: bool,
    /// Monitors that send both.
    pub both: bool,
}

impl LeadSets {
    /// Every lead set: what a plan must cover.
    pub(crate) const ALL: LeadSets = LeadSets {
        primary_only: true,
        secondary_only: true,
        both: true,
    };

    /// The lead sets a member reading `input` scores.
    pub(crate) fn of_input(input: &Input) -> LeadSets {
        match input {
            Input::Ecg {
                lead: Lead::Primary,
                ..
            } => LeadSets {
                primary_only: true,
                secondary_only: false,
                both: true,
            },
            Input::Ecg {
                lead: Lead::Secondary,
                ..
            } => LeadSets {
                primary_only: false,
                secondary_only: true,
                both: true,
            },
            Input::Ecg {
                lead: Lead::Third, ..
            }
            | Input::HeartRate { .. } => LeadSets::default(),
        }
    }

    /// Whether every lead set `required` covers is covered here too.
    pub(crate) fn covers(self, required: LeadSets) -> bool {
        (self.primary_only || !required.primary_only)
            && (self.secondary_only || !required.secondary_only)
            && (self.both || !required.both)
    }

    /// Whether every lead set is covered.
    pub(crate) fn is_full(self) -> bool {
        self == LeadSets::ALL
    }

    /// The lead sets not covered, in words (`lead II only`, `lead V only`, `both leads`).
    pub(crate) fn missing(self) -> Vec<&'static str> {
        self.uncovered(LeadSets::ALL)
    }

    /// The lead sets `required` covers that are not covered here, in words (as
    /// [`missing`](Self::missing)).
    pub(crate) fn uncovered(self, required: LeadSets) -> Vec<&'static str> {
        [
            (self.primary_only || !required.primary_only, "lead II only"),
            (
                self.secondary_only || !required.secondary_only,
                "lead V only",
            ),
            (self.both || !required.both, "both leads"),
        ]
        .into_iter()
        .filter(|(covered, _)| !covered)
        .map(|(_, name)| name)
        .collect()
    }
}

/// The union: what an ensemble of members covering these covers.
impl FromIterator<LeadSets> for LeadSets {
    fn from_iter<I: IntoIterator<Item = LeadSets>>(iter: I) -> LeadSets {
        iter.into_iter().fold(LeadSets::default(), |a, b| LeadSets {
            primary_only: a.primary_only || b.primary_only,
            secondary_only: a.secondary_only || b.secondary_only,
            both: a.both || b.both,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ecg(lead: Lead) -> Input {
        Input::Ecg {
            lead,
            samples: 2500,
            sample_rate_hz: 250,
            bandpass: false,
        }
    }

    const HR: Input = Input::HeartRate {
        samples: 30,
        sample_rate_hz: 1,
    };

    fn of(inputs: &[Input]) -> LeadSets {
        inputs.iter().map(LeadSets::of_input).collect()
    }

    #[test]
    fn an_ensemble_covers_the_lead_sets_of_its_ecg_members() {
        let primary_only = of(&[ecg(Lead::Primary), ecg(Lead::Primary)]);
        assert_eq!(
            primary_only,
            LeadSets {
                primary_only: true,
                secondary_only: false,
                both: true
            }
        );
        assert_eq!(primary_only.missing(), vec!["lead V only"]);
        // Against what a zoo of primary-lead models covers, nothing is missing.
        assert!(primary_only.uncovered(primary_only).is_empty());
        assert_eq!(
            LeadSets::default().uncovered(primary_only),
            vec!["lead II only", "both leads"]
        );
        let secondary_only = of(&[ecg(Lead::Secondary)]);
        assert_eq!(
            secondary_only,
            LeadSets {
                primary_only: false,
                secondary_only: true,
                both: true
            }
        );
        assert_eq!(secondary_only.missing(), vec!["lead II only"]);
        // Heart rate and the third lead stand in for no ECG lead a monitor sends.
        let vitals = of(&[HR, ecg(Lead::Third)]);
        assert_eq!(vitals, LeadSets::default());
        assert_eq!(
            vitals.missing(),
            vec!["lead II only", "lead V only", "both leads"]
        );
        assert_eq!(of(&[]), LeadSets::default());
        let mixed = of(&[ecg(Lead::Secondary), HR, ecg(Lead::Primary)]);
        assert!(mixed.is_full() && mixed.missing().is_empty());
        assert!(!of(&[ecg(Lead::Primary), HR]).is_full());
    }

    #[test]
    fn coverage_is_compared_set_by_set() {
        let (p, s) = (of(&[ecg(Lead::Primary)]), of(&[ecg(Lead::Secondary)]));
        assert!(LeadSets::ALL.covers(p) && LeadSets::ALL.covers(LeadSets::ALL));
        assert!(p.covers(p) && p.covers(LeadSets::default()));
        assert!(!p.covers(s) && !s.covers(p) && !p.covers(LeadSets::ALL));
        assert!(LeadSets::default().covers(LeadSets::default()));
    }

    #[test]
    fn it_reads_as_three_named_flags() {
        let v = serde_json::to_value(of(&[ecg(Lead::Primary)])).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"primary_only": true, "secondary_only": false, "both": true})
        );
        let back: LeadSets = serde_json::from_value(v).unwrap();
        assert_eq!(back, of(&[ecg(Lead::Primary)]));
    }
}
