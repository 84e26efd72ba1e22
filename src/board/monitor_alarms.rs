//! What each bed's tile shows of its monitor's own alarms: the newest few received within the
//! trend's span, as received (kind, onset, ended or not) and, for a VT or VF alarm, Holmes's
//! opinion (`confirmed` or doubted, the probability, the one-line reason) or why there is
//! none. The [`board`](super) fills it from the store at start-up and keeps it from the
//! store's broadcast of monitor alarms (each row as committed, raised and ended); the bed view
//! reads the full list and each alarm's strip from the API.

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

use crate::serving::store::{MonitorAlarmChange, MonitorAlarmView, StoreReader};

/// A tile's monitor alarms at most.
pub(crate) const SHOWN: usize = 3;
/// The ward's newest alarms read from the store to start the book from.
const SEED: i64 = 4096;

/// A monitor alarm as a tile shows it (a light copy of the API's row: no provenance).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TileMonitorAlarm {
    /// Holmes's number for the alarm (its strip: `/api/monitor_alarms/{key}/strip`).
    pub(crate) key: i64,
    /// The monitor's id of the alarm.
    pub(crate) id: String,
    pub(crate) kind: String,
    /// Whether Holmes gives an opinion on alarms of this kind.
    pub(crate) judged: bool,
    /// Onset and end, the monitor's clock (ms).
    pub(crate) onset_ms: i64,
    pub(crate) end_ms: Option<i64>,
    /// When it was received, wall clock (ms).
    pub(crate) received_ms: i64,
    pub(crate) confirmed: Option<bool>,
    pub(crate) probability: Option<f64>,
    pub(crate) reason: Option<String>,
    /// Why a kind Holmes judges has no opinion.
    pub(crate) not_judged: Option<String>,
}

impl From<&MonitorAlarmView> for TileMonitorAlarm {
    fn from(a: &MonitorAlarmView) -> TileMonitorAlarm {
        TileMonitorAlarm {
            key: a.key,
            id: a.id.clone(),
            kind: a.kind.clone(),
            judged: a.kind().judged(),
            onset_ms: a.onset_ms,
            end_ms: a.end_ms,
            received_ms: a.received_ms,
            confirmed: a.confirmed,
            probability: a.probability,
            reason: a.reason.clone(),
            not_judged: a.not_judged().map(str::to_owned),
        }
    }
}

/// Each bed's newest monitor alarms, newest first.
#[derive(Debug, Default)]
pub(crate) struct MonitorAlarmBook {
    beds: HashMap<String, VecDeque<TileMonitorAlarm>>,
}

impl MonitorAlarmBook {
    /// A book of `alarms` (any order).
    pub(crate) fn of(alarms: &[MonitorAlarmView]) -> MonitorAlarmBook {
        let mut b = MonitorAlarmBook::default();
        let mut sorted: Vec<&MonitorAlarmView> = alarms.iter().collect();
        sorted.sort_by_key(|a| (a.received_ms, a.key));
        for a in sorted {
            b.put(a);
        }
        b
    }

    /// The book as the store holds it (the ward's newest alarms), or empty when it cannot be
    /// read (the broadcast fills it from then on).
    pub(crate) async fn read(reader: &StoreReader) -> MonitorAlarmBook {
        let r = reader.clone();
        match tokio::task::spawn_blocking(move || r.monitor_alarms(None, SEED)).await {
            Ok(Ok(rows)) => MonitorAlarmBook::of(&rows),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "Cannot read the monitor alarms for the dashboard");
                MonitorAlarmBook::default()
            }
            Err(e) => {
                tracing::error!(error = %e, "Reading the monitor alarms for the dashboard failed");
                MonitorAlarmBook::default()
            }
        }
    }

    /// Takes a committed change: a new alarm goes first, an ended one is replaced in place.
    pub(crate) fn note(&mut self, c: &MonitorAlarmChange) {
        self.put(&c.alarm);
    }

    fn put(&mut self, a: &MonitorAlarmView) {
        let q = self.beds.entry(a.bed.clone()).or_default();
        let tile = TileMonitorAlarm::from(a);
        if let Some(old) = q.iter_mut().find(|x| x.key == a.key) {
            *old = tile;
            return;
        }
        // Newest received first (a row committed late, after a storage fault, takes its place).
        let at = q
            .iter()
            .position(|x| (x.received_ms, x.key) < (a.received_ms, a.key))
            .unwrap_or(q.len());
        q.insert(at, tile);
        q.truncate(SHOWN);
    }

    /// `bed`'s alarms received at or after `since_ms`, newest first.
    pub(crate) fn recent(&self, bed: &str, since_ms: i64) -> Vec<TileMonitorAlarm> {
        self.beds
            .get(bed)
            .map(|q| {
                q.iter()
                    .filter(|a| a.received_ms >= since_ms)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::store::MonitorAlarmPhase;

    fn view(key: i64, bed: &str, kind: &str, received_ms: i64) -> MonitorAlarmView {
        MonitorAlarmView {
            key,
            bed: bed.into(),
            id: format!("a-{key}"),
            kind: kind.into(),
            onset_ms: received_ms - 100,
            end_ms: None,
            received_ms,
            judged_ms: None,
            confirmed: None,
            probability: None,
            reason: None,
            provenance: serde_json::json!({"not_judged": "too little signal"}),
        }
    }

    #[test]
    fn a_tile_keeps_its_newest_alarms_and_an_end_replaces_its_alarm() {
        let mut b = MonitorAlarmBook::of(&[
            view(2, "b1", "vt", 200),
            view(1, "b1", "asystole", 100),
            view(3, "b2", "vf", 300),
        ]);
        let keys = |v: Vec<TileMonitorAlarm>| v.iter().map(|a| a.key).collect::<Vec<_>>();
        assert_eq!(keys(b.recent("b1", 0)), [2, 1]);
        let first = &b.recent("b1", 0)[0];
        assert!(first.judged && first.confirmed.is_none());
        assert_eq!(first.not_judged.as_deref(), Some("too little signal"));
        assert!(!b.recent("b1", 0)[1].judged);
        for k in 4..=6 {
            b.note(&MonitorAlarmChange {
                phase: MonitorAlarmPhase::Raised,
                alarm: view(k, "b1", "vt", 100 * k),
            });
        }
        assert_eq!(keys(b.recent("b1", 0)), [6, 5, 4]);
        assert_eq!(keys(b.recent("b1", 450)), [6, 5]);
        let mut ended = view(5, "b1", "vt", 500);
        ended.end_ms = Some(900);
        b.note(&MonitorAlarmChange {
            phase: MonitorAlarmPhase::Ended,
            alarm: ended,
        });
        assert_eq!(keys(b.recent("b1", 0)), [6, 5, 4]);
        assert_eq!(b.recent("b1", 0)[1].end_ms, Some(900));
        assert_eq!(keys(b.recent("b2", 0)), [3]);
        assert!(b.recent("b9", 0).is_empty());
    }
}
