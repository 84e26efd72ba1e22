//! The signal-quality gate of `holmes evaluate --sqi-gate`: a hop whose ECG is judged
//! unreadable by its signal-quality indices ([`WindowSqi`], computed by the replay on each
//! lead's last [`SQI_WINDOW_SECS`]) may not raise the risk alarm.
//!
//! The gate works on the score series before the alarm rule sees it: a gated hop's score
//! becomes no score, which the rule reads as silence ([`crate::alarm`]'s "Silence"). So a
//! gated hop cannot raise an alarm, cannot clear an active one (silence never clears), and
//! dilutes the persistence count as a missing score does; an ungated hop is passed on as it
//! was. Which gate to use is chosen on the validation part by the evaluation
//! ([`super::gate_search`]); this module only says what a gate is and applies one.
//!
//! A gate is a list of bounds on one lead's indices, all of which must hold for that lead to
//! be unreadable (`bsqi<0.7,kurtosis>3`: the two QRS detectors disagree **and** the
//! amplitudes are peaked, not VF's sine-like spread), and a lead scope saying which leads must
//! be unreadable for the hop to be gated: every present lead (`leads=all`), any
//! (`leads=any`), or exactly one of two (`leads=one`: the leads disagree, the mark of a
//! lead-specific artefact rather than of a rhythm both leads see).

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::signal::quality::WindowSqi;

/// The span of a window's end the indices are computed on, s: the longest any serving member
/// reads.
pub const SQI_WINDOW_SECS: usize = 10;

/// One signal-quality index of a lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// Agreement of two QRS detectors.
    Bsqi,
    /// Flat plus clipped share of the samples.
    Flat,
    /// Kurtosis of the samples.
    Kurtosis,
    /// QRS-band share of the power.
    Psqi,
}

impl Index {
    const ALL: [Index; 4] = [Index::Bsqi, Index::Flat, Index::Kurtosis, Index::Psqi];

    fn name(self) -> &'static str {
        match self {
            Index::Bsqi => "bsqi",
            Index::Flat => "flat",
            Index::Kurtosis => "kurtosis",
            Index::Psqi => "psqi",
        }
    }

    fn of(self, q: &WindowSqi) -> f32 {
        match self {
            Index::Bsqi => q.bsqi,
            Index::Flat => q.flat_fraction + q.clipped_fraction,
            Index::Kurtosis => q.kurtosis,
            Index::Psqi => q.psqi,
        }
    }
}

/// One bound a lead's index must pass for the lead to count as unreadable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    pub index: Index,
    /// `true`: unreadable when the index is below `value`; `false`: above it.
    pub below: bool,
    pub value: f32,
}

impl Bound {
    fn holds(&self, q: &WindowSqi) -> bool {
        let v = self.index.of(q);
        if self.below {
            v < self.value
        } else {
            v > self.value
        }
    }
}

/// Which leads must be unreadable for the hop to be gated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every present lead.
    All,
    /// At least one present lead.
    Any,
    /// Exactly one of two present leads (a one-lead record is never gated).
    One,
}

/// A signal-quality gate; its text form (`bsqi<0.7,kurtosis>3,leads=all`) is what
/// `--sqi-gate` takes and what the report prints.
#[derive(Debug, Clone, PartialEq)]
pub struct SqiGate {
    /// All must hold for a lead to be unreadable; never empty.
    pub bounds: Vec<Bound>,
    pub scope: Scope,
}

impl SqiGate {
    /// Whether a hop whose leads have the indices `leads` (`None`: the lead is absent) is
    /// unreadable. A hop with no lead present is not gated: it has no score to gate.
    pub(crate) fn gates(&self, leads: &[Option<WindowSqi>]) -> bool {
        let present: Vec<&WindowSqi> = leads.iter().flatten().collect();
        let bad = present
            .iter()
            .filter(|q| self.bounds.iter().all(|b| b.holds(q)))
            .count();
        match self.scope {
            Scope::All => !present.is_empty() && bad == present.len(),
            Scope::Any => bad > 0,
            Scope::One => present.len() == 2 && bad == 1,
        }
    }

    /// The score series the alarm rule sees under the gate: each gated hop's score removed.
    /// `sqi[i]` holds hop `i`'s indices by lead.
    pub(crate) fn apply(
        &self,
        scores: &[Option<f32>],
        sqi: &[Vec<Option<WindowSqi>>],
    ) -> Vec<Option<f32>> {
        debug_assert_eq!(scores.len(), sqi.len());
        scores
            .iter()
            .zip(sqi)
            .map(|(&s, q)| if self.gates(q) { None } else { s })
            .collect()
    }

    /// The gates the validation search tries: bSQI alone at each scope, flat or clipped
    /// leads, low kurtosis, low pSQI, and bSQI with a kurtosis or pSQI bound that spares
    /// VF's sine-like, narrow-band chaos.
    pub(crate) fn candidates() -> Vec<SqiGate> {
        let b = |index, below, value| Bound {
            index,
            below,
            value,
        };
        let gate = |bounds: Vec<Bound>, scope| SqiGate { bounds, scope };
        let mut out = Vec::new();
        for v in [0.5, 0.6, 0.7, 0.8, 0.9] {
            out.push(gate(vec![b(Index::Bsqi, true, v)], Scope::All));
        }
        for v in [0.5, 0.7, 0.9] {
            out.push(gate(vec![b(Index::Bsqi, true, v)], Scope::Any));
            out.push(gate(vec![b(Index::Bsqi, true, v)], Scope::One));
        }
        for v in [0.05, 0.2, 0.5] {
            out.push(gate(vec![b(Index::Flat, false, v)], Scope::All));
            out.push(gate(vec![b(Index::Flat, false, v)], Scope::Any));
        }
        for v in [2.0, 3.0, 4.0] {
            out.push(gate(vec![b(Index::Kurtosis, true, v)], Scope::All));
        }
        for v in [0.2, 0.35, 0.5] {
            out.push(gate(vec![b(Index::Psqi, true, v)], Scope::All));
        }
        for bv in [0.5, 0.7, 0.9] {
            for kv in [3.0, 5.0] {
                out.push(gate(
                    vec![b(Index::Bsqi, true, bv), b(Index::Kurtosis, false, kv)],
                    Scope::All,
                ));
            }
            out.push(gate(
                vec![b(Index::Bsqi, true, bv), b(Index::Psqi, false, 0.35)],
                Scope::All,
            ));
        }
        out
    }
}

impl fmt::Display for SqiGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in &self.bounds {
            let op = if b.below { '<' } else { '>' };
            write!(f, "{}{op}{},", b.index.name(), b.value)?;
        }
        let scope = match self.scope {
            Scope::All => "all",
            Scope::Any => "any",
            Scope::One => "one",
        };
        write!(f, "leads={scope}")
    }
}

impl Serialize for SqiGate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Why a gate's text form was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateParseError {
    #[error(
        "{0:?}: a gate term is INDEX<VALUE or INDEX>VALUE (INDEX: bsqi, flat, kurtosis, psqi) or leads=all|any|one"
    )]
    Term(String),
    #[error("a gate needs at least one bound, e.g. bsqi<0.7")]
    NoBound,
}

impl FromStr for SqiGate {
    type Err = GateParseError;

    /// Parses `bsqi<0.7,kurtosis>3,leads=all` (terms in any order; the scope defaults to
    /// `all`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut bounds = Vec::new();
        let mut scope = Scope::All;
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let bad = || GateParseError::Term(term.to_owned());
            if let Some(v) = term.strip_prefix("leads=") {
                scope = match v {
                    "all" => Scope::All,
                    "any" => Scope::Any,
                    "one" => Scope::One,
                    _ => return Err(bad()),
                };
                continue;
            }
            let (at, below) = match (term.find('<'), term.find('>')) {
                (Some(i), None) => (i, true),
                (None, Some(i)) => (i, false),
                _ => return Err(bad()),
            };
            let index = Index::ALL
                .into_iter()
                .find(|x| x.name() == &term[..at])
                .ok_or_else(bad)?;
            let value: f32 = term[at + 1..].parse().map_err(|_| bad())?;
            if !value.is_finite() {
                return Err(bad());
            }
            bounds.push(Bound {
                index,
                below,
                value,
            });
        }
        if bounds.is_empty() {
            return Err(GateParseError::NoBound);
        }
        Ok(SqiGate { bounds, scope })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alarm::{AlarmRule, alarm_episodes};

    const HOP: i64 = 5_000;

    fn sqi(bsqi: f32, kurtosis: f32) -> Option<WindowSqi> {
        Some(WindowSqi {
            bsqi,
            flat_fraction: 0.0,
            clipped_fraction: 0.0,
            kurtosis,
            psqi: 0.5,
        })
    }

    fn series(scores: &[Option<f32>]) -> Vec<(i64, Option<f32>)> {
        scores
            .iter()
            .enumerate()
            .map(|(i, &s)| (i as i64 * HOP, s))
            .collect()
    }

    const RULE: AlarmRule = AlarmRule {
        on: 0.7,
        off: 0.35,
        k: 2,
        n: 3,
    };

    #[test]
    fn the_text_form_round_trips_and_refuses_nonsense() {
        for text in ["bsqi<0.7,leads=all", "bsqi<0.5,kurtosis>3,leads=one"] {
            let g: SqiGate = text.parse().unwrap();
            assert_eq!(g.to_string(), text);
        }
        let g: SqiGate = "flat>0.2".parse().unwrap();
        assert_eq!(g.scope, Scope::All);
        assert_eq!(g.to_string(), "flat>0.2,leads=all");
        assert_eq!("leads=any".parse::<SqiGate>(), Err(GateParseError::NoBound));
        for bad in [
            "bsqi=0.7",
            "snr<3",
            "bsqi<x",
            "bsqi<0.7,leads=some",
            "bsqi<>1",
        ] {
            assert!(bad.parse::<SqiGate>().is_err(), "{bad}");
        }
        for g in SqiGate::candidates() {
            assert_eq!(g.to_string().parse::<SqiGate>().unwrap(), g);
        }
    }

    #[test]
    fn the_scope_says_which_leads_must_be_unreadable() {
        let g = |scope| SqiGate {
            bounds: vec![Bound {
                index: Index::Bsqi,
                below: true,
                value: 0.7,
            }],
            scope,
        };
        let (good, bad) = (sqi(0.9, 8.0), sqi(0.3, 8.0));
        assert!(g(Scope::All).gates(&[bad, bad]));
        assert!(!g(Scope::All).gates(&[bad, good]));
        assert!(g(Scope::All).gates(&[bad, None]), "a one-lead record");
        assert!(!g(Scope::All).gates(&[None, None]));
        assert!(g(Scope::Any).gates(&[good, bad]));
        assert!(!g(Scope::Any).gates(&[good, good]));
        assert!(g(Scope::One).gates(&[good, bad]));
        assert!(!g(Scope::One).gates(&[bad, bad]));
        assert!(!g(Scope::One).gates(&[bad, None]));
    }

    #[test]
    fn every_bound_must_hold_for_a_lead_to_be_unreadable() {
        let g: SqiGate = "bsqi<0.7,kurtosis>3".parse().unwrap();
        assert!(g.gates(&[sqi(0.3, 8.0)]), "noisy and peaked: an artefact");
        assert!(!g.gates(&[sqi(0.3, 2.0)]), "noisy but sine-like: VF kept");
        assert!(!g.gates(&[sqi(0.9, 8.0)]));
    }

    #[test]
    fn a_gated_hop_cannot_raise_the_alarm() {
        let g: SqiGate = "bsqi<0.7".parse().unwrap();
        let scores = [Some(0.9), Some(0.9), Some(0.9), Some(0.1)];
        let q = vec![vec![sqi(0.3, 8.0)]; 4];
        let gated = g.apply(&scores, &q);
        assert_eq!(gated, vec![None; 4]);
        assert!(
            alarm_episodes(RULE, HOP, &series(&gated))
                .unwrap()
                .is_empty()
        );
        // The same high scores on readable hops raise at the second.
        let eps = alarm_episodes(RULE, HOP, &series(&scores)).unwrap();
        assert_eq!(eps, vec![(HOP, 3 * HOP)]);
    }

    #[test]
    fn a_gated_hop_cannot_clear_an_active_alarm() {
        let g: SqiGate = "bsqi<0.7".parse().unwrap();
        // Raised on two readable hops, then unreadable low scores, then readable low ones.
        let scores = [
            Some(0.9),
            Some(0.9),
            Some(0.1),
            Some(0.1),
            Some(0.1),
            Some(0.1),
        ];
        let (good, bad) = (sqi(0.9, 8.0), sqi(0.3, 8.0));
        let q = vec![
            vec![good],
            vec![good],
            vec![bad],
            vec![bad],
            vec![good],
            vec![good],
        ];
        let gated = g.apply(&scores, &q);
        let eps = alarm_episodes(RULE, HOP, &series(&gated)).unwrap();
        assert_eq!(eps, vec![(HOP, 5 * HOP)], "held through the gated hops");
        // Ungated, the low scores clear it two hops sooner.
        let eps = alarm_episodes(RULE, HOP, &series(&scores)).unwrap();
        assert_eq!(eps, vec![(HOP, 3 * HOP)]);
    }

    #[test]
    fn readable_hops_pass_unchanged() {
        let g: SqiGate = "bsqi<0.7,leads=any".parse().unwrap();
        let scores = [Some(0.2), None, Some(0.9), Some(0.8), Some(0.1)];
        let q = vec![vec![sqi(0.95, 8.0), sqi(0.8, 6.0)]; 5];
        let gated = g.apply(&scores, &q);
        assert_eq!(gated, scores);
        assert_eq!(
            alarm_episodes(RULE, HOP, &series(&gated)).unwrap(),
            alarm_episodes(RULE, HOP, &series(&scores)).unwrap()
        );
    }
}
