//! A bedside monitor's own arrhythmia alarm, as the monitor (or its gateway) reports it, and
//! Holmes's opinion on it: the question an ICU asks of a VT or VF alarm is not "is there VT?"
//! in the abstract but "is this monitor's alarm real?". The types cross from the protocol to
//! the adjudicator (`signal::adjudicate`), the store, the page and the links, so they live
//! here, below all of them.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Seconds of every lead read before a monitor alarm's onset: where its opinion looks (a
/// monitor alarms within seconds of what it saw; VT rules of 4-6 beats span 2-4 s).
pub const LOOKBACK_SECS: usize = 16;
/// The served risk is read over the windows ending this long before a monitor alarm's onset,
/// and at it, s (as the external measurement of the served alarm reads it).
pub const RISK_LOOKBACK_SECS: i64 = 14;

/// The kind of a monitor's arrhythmia alarm. Holmes gives an opinion on [`Vt`](Self::Vt) and
/// [`Vf`](Self::Vf) alarms ([`judged`](Self::judged)); the others are stored and shown as
/// received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MonitorAlarmKind {
    /// Ventricular tachycardia (a run of ventricular beats).
    Vt,
    /// Ventricular fibrillation or flutter.
    Vf,
    /// Asystole.
    Asystole,
    /// Extreme bradycardia.
    Brady,
    /// Extreme tachycardia.
    Tachy,
    /// Any other arrhythmia alarm the monitor raises.
    Other,
}

/// Every kind, in the order [`MonitorAlarmKind::as_str`] names them.
pub const MONITOR_ALARM_KINDS: [MonitorAlarmKind; 6] = [
    MonitorAlarmKind::Vt,
    MonitorAlarmKind::Vf,
    MonitorAlarmKind::Asystole,
    MonitorAlarmKind::Brady,
    MonitorAlarmKind::Tachy,
    MonitorAlarmKind::Other,
];

impl MonitorAlarmKind {
    /// The kind's name on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            MonitorAlarmKind::Vt => "vt",
            MonitorAlarmKind::Vf => "vf",
            MonitorAlarmKind::Asystole => "asystole",
            MonitorAlarmKind::Brady => "brady",
            MonitorAlarmKind::Tachy => "tachy",
            MonitorAlarmKind::Other => "other",
        }
    }

    /// Whether Holmes gives an opinion on alarms of this kind.
    pub fn judged(self) -> bool {
        matches!(self, MonitorAlarmKind::Vt | MonitorAlarmKind::Vf)
    }
}

impl fmt::Display for MonitorAlarmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An alarm kind that is none of [`MONITOR_ALARM_KINDS`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown alarm kind {0:?}: one of vt, vf, asystole, brady, tachy, other")]
pub struct UnknownKind(pub String);

impl FromStr for MonitorAlarmKind {
    type Err = UnknownKind;

    /// A kind by its name, in any case; `vfl` (ventricular flutter) reads as `vf`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        if lower == "vfl" {
            return Ok(MonitorAlarmKind::Vf);
        }
        MONITOR_ALARM_KINDS
            .into_iter()
            .find(|k| k.as_str() == lower)
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

/// Holmes's opinion on a monitor's VT or VF alarm, read from the samples up to its onset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Opinion {
    /// The alarm's kind, as the monitor sent it.
    pub kind: MonitorAlarmKind,
    /// Whether the ECG before the alarm holds what the alarm claims, at the served operating
    /// point (`probability` at or above it).
    pub confirmed: bool,
    /// How likely the alarm is true, 0..=1 (a ranking; calibrated only as far as the
    /// operating point's choice says).
    pub probability: f32,
    /// What a nurse reads in one glance: the evidence, or what made it unreadable.
    pub reason: String,
}

/// A monitor's alarm as a bed hands it on once the samples up to its onset are in (or it has
/// waited long enough for them): what the adjudicator reads and the store keeps.
#[derive(Debug, Clone)]
pub struct MonitorAlarm {
    pub bed: Arc<str>,
    /// The monitor's id of the alarm.
    pub id: String,
    pub kind: MonitorAlarmKind,
    /// The onset, device time (ms; the bed's timeline).
    pub onset_ms: i64,
    /// When the message was received, wall clock (ms since the epoch) and as an instant.
    pub received_ms: i64,
    pub arrived: Instant,
    /// Each lead the monitor sends, by its name: the [`LOOKBACK_SECS`] up to the onset at
    /// 250 Hz, holes filled (empty for a kind Holmes does not judge).
    pub leads: Vec<(String, Vec<f32>)>,
    /// The share of those samples that arrived.
    pub coverage: f32,
}

/// What a bed hands on of its monitor's alarms.
#[derive(Debug, Clone)]
pub enum MonitorAlarmEvent {
    Raised(MonitorAlarm),
    /// The monitor's alarm `id` ended at `end_ms` (device time).
    Ended {
        bed: Arc<str>,
        id: String,
        end_ms: i64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_read_by_name_in_any_case_and_flutter_is_fibrillation() {
        for k in MONITOR_ALARM_KINDS {
            assert_eq!(k.as_str().parse::<MonitorAlarmKind>(), Ok(k));
            assert_eq!(
                serde_json::to_string(&k).unwrap(),
                format!("\"{}\"", k.as_str())
            );
        }
        assert_eq!("VT".parse(), Ok(MonitorAlarmKind::Vt));
        assert_eq!("VFL".parse(), Ok(MonitorAlarmKind::Vf));
        let e = "afib".parse::<MonitorAlarmKind>().unwrap_err();
        assert!(e.to_string().contains("\"afib\""), "{e}");
        assert!(MonitorAlarmKind::Vt.judged() && MonitorAlarmKind::Vf.judged());
        assert!(!MonitorAlarmKind::Asystole.judged());
    }
}
