//! Alarms: a risk alarm per bed when its score crosses the configured threshold (with
//! hysteresis), kept apart from technical alarms (lead off, stale, lost). Nurses acknowledge
//! or silence them for a while (both recorded with who and when); an alarm clears itself when
//! its condition resolves. [`Alarms`] is the pure state machine the [`board`](super::board)
//! drives; [`AlarmDb`] persists every transition for the per-bed history.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use crate::serving::ward::BedStatus;

#[derive(Debug, thiserror::Error)]
pub(crate) enum AlarmError {
    #[error("no active alarm {0}")]
    Unknown(i64),
    #[error("silence for 1 to {max} seconds, not {asked}")]
    BadSilence { asked: u64, max: u64 },
    #[error(transparent)]
    Store(#[from] crate::serving::store::StoreError),
    /// The action took effect on the ward but its row or audit entry could not be written
    /// (e.g. the disk is full); the user is told, the action stands.
    #[error("alarm {alarm} changed on the ward but the change could not be recorded: {reason}")]
    NotRecorded { alarm: i64, reason: String },
    #[error("alarm database {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

/// What an alarm is about. `Risk` is the clinical (decision-support) alarm; the rest are
/// technical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AlarmKind {
    Risk,
    LeadOff,
    Stale,
    Lost,
}

impl AlarmKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AlarmKind::Risk => "risk",
            AlarmKind::LeadOff => "lead_off",
            AlarmKind::Stale => "stale",
            AlarmKind::Lost => "lost",
        }
    }

    pub(crate) fn technical(self) -> bool {
        self != AlarmKind::Risk
    }
}

/// One alarm, active or (once `cleared_ms` is set) resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Alarm {
    pub(crate) id: i64,
    pub(crate) bed: String,
    pub(crate) kind: AlarmKind,
    pub(crate) technical: bool,
    pub(crate) raised_ms: i64,
    /// The score (risk) or lead-off fraction (lead off) that raised it.
    pub(crate) value: Option<f64>,
    pub(crate) acked_by: Option<String>,
    pub(crate) acked_ms: Option<i64>,
    pub(crate) silenced_by: Option<String>,
    pub(crate) silenced_ms: Option<i64>,
    pub(crate) silenced_until_ms: Option<i64>,
    pub(crate) cleared_ms: Option<i64>,
}

/// One alarm as a bed's history lists it (`GET /api/beds/{bed}/alarms`), read back from the
/// `alarms` table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AlarmRow {
    id: i64,
    kind: String,
    raised_ms: i64,
    value: Option<f64>,
    cleared_ms: Option<i64>,
    acked_by: Option<String>,
    acked_ms: Option<i64>,
    silenced_by: Option<String>,
    silenced_ms: Option<i64>,
    silenced_until_ms: Option<i64>,
}

/// A change to persist and show.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Transition {
    Raised(Alarm),
    Changed(Alarm),
}

/// Thresholds of the alarms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Thresholds {
    pub(crate) risk_on: f64,
    pub(crate) risk_off: f64,
    pub(crate) lead_off: f64,
    pub(crate) max_silence_secs: u64,
}

/// The active alarms of the ward.
#[derive(Debug)]
pub(crate) struct Alarms {
    t: Thresholds,
    next_id: i64,
    active: HashMap<(String, AlarmKind), Alarm>,
}

impl Alarms {
    /// `last_id`: the highest alarm id already stored.
    pub(crate) fn new(t: Thresholds, last_id: i64) -> Alarms {
        Alarms {
            t,
            next_id: last_id + 1,
            active: HashMap::new(),
        }
    }

    /// Active alarms, risk first, then oldest first.
    pub(crate) fn active(&self) -> Vec<Alarm> {
        let mut v: Vec<Alarm> = self.active.values().cloned().collect();
        v.sort_by_key(|a| (a.technical, a.raised_ms, a.id));
        v
    }

    fn set(
        &mut self,
        bed: &str,
        kind: AlarmKind,
        on: bool,
        value: Option<f64>,
        now: i64,
    ) -> Option<Transition> {
        let key = (bed.to_owned(), kind);
        match (on, self.active.contains_key(&key)) {
            (true, false) => {
                let a = Alarm {
                    id: self.next_id,
                    bed: bed.to_owned(),
                    kind,
                    technical: kind.technical(),
                    raised_ms: now,
                    value,
                    acked_by: None,
                    acked_ms: None,
                    silenced_by: None,
                    silenced_ms: None,
                    silenced_until_ms: None,
                    cleared_ms: None,
                };
                self.next_id += 1;
                self.active.insert(key, a.clone());
                Some(Transition::Raised(a))
            }
            (false, true) => {
                let mut a = self.active.remove(&key).expect("present");
                a.cleared_ms = Some(now);
                Some(Transition::Changed(a))
            }
            _ => None,
        }
    }

    /// A bed's new score and the primary lead's lead-off fraction in that window.
    pub(crate) fn on_score(
        &mut self,
        bed: &str,
        score: Option<f64>,
        lead_off: Option<f64>,
        now: i64,
    ) -> Vec<Transition> {
        let mut out = Vec::new();
        if let Some(s) = score {
            let active = self.active.contains_key(&(bed.to_owned(), AlarmKind::Risk));
            // Hysteresis: raise at risk_on, clear only below risk_off.
            let on = if active {
                s >= self.t.risk_off
            } else {
                s >= self.t.risk_on
            };
            out.extend(self.set(bed, AlarmKind::Risk, on, Some(s), now));
        }
        if let Some(f) = lead_off {
            out.extend(self.set(bed, AlarmKind::LeadOff, f > self.t.lead_off, Some(f), now));
        }
        out
    }

    /// A bed's data status: stale and lost are technical alarms (lost replaces stale).
    pub(crate) fn on_status(&mut self, bed: &str, status: BedStatus, now: i64) -> Vec<Transition> {
        let (stale, lost) = match status {
            BedStatus::Live => (false, false),
            BedStatus::Stale => (true, false),
            BedStatus::Lost => (false, true),
        };
        let mut out = Vec::new();
        out.extend(self.set(bed, AlarmKind::Stale, stale, None, now));
        out.extend(self.set(bed, AlarmKind::Lost, lost, None, now));
        out
    }

    fn find(&mut self, id: i64) -> Result<&mut Alarm, AlarmError> {
        self.active
            .values_mut()
            .find(|a| a.id == id)
            .ok_or(AlarmError::Unknown(id))
    }

    pub(crate) fn acknowledge(
        &mut self,
        id: i64,
        user: &str,
        now: i64,
    ) -> Result<Transition, AlarmError> {
        let a = self.find(id)?;
        a.acked_by = Some(user.to_owned());
        a.acked_ms = Some(now);
        Ok(Transition::Changed(a.clone()))
    }

    pub(crate) fn silence(
        &mut self,
        id: i64,
        user: &str,
        secs: u64,
        now: i64,
    ) -> Result<Transition, AlarmError> {
        let max = self.t.max_silence_secs;
        if secs == 0 || secs > max {
            return Err(AlarmError::BadSilence { asked: secs, max });
        }
        let a = self.find(id)?;
        a.silenced_by = Some(user.to_owned());
        a.silenced_ms = Some(now);
        a.silenced_until_ms = Some(now + secs as i64 * 1000);
        Ok(Transition::Changed(a.clone()))
    }

    /// Silences that ran out end (the alarm sounds again).
    pub(crate) fn expire(&mut self, now: i64) -> Vec<Transition> {
        let mut out = Vec::new();
        for a in self.active.values_mut() {
            if a.silenced_until_ms.is_some_and(|u| u <= now) {
                a.silenced_until_ms = None;
                out.push(Transition::Changed(a.clone()));
            }
        }
        out
    }
}

/// The `alarms` table.
pub(crate) struct AlarmDb {
    conn: Connection,
    path: PathBuf,
}

impl AlarmDb {
    pub(crate) fn open(path: &Path) -> Result<AlarmDb, AlarmError> {
        let conn = crate::serving::store::open(path)?;
        Ok(AlarmDb {
            conn,
            path: path.to_owned(),
        })
    }

    fn err(&self, source: rusqlite::Error) -> AlarmError {
        AlarmError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// The highest stored alarm id (0: none). Alarms left active by a previous run are closed
    /// as of `now` (the board re-raises what still holds).
    pub(crate) fn resume(&self, now: i64) -> Result<i64, AlarmError> {
        self.conn
            .execute(
                "UPDATE alarms SET cleared_ms = ?1 WHERE cleared_ms IS NULL",
                params![now],
            )
            .map_err(|e| self.err(e))?;
        let id: Option<i64> = self
            .conn
            .query_row("SELECT max(id) FROM alarms", [], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?
            .flatten();
        Ok(id.unwrap_or(0))
    }

    pub(crate) fn apply(&self, t: &Transition) -> Result<(), AlarmError> {
        let a = match t {
            Transition::Raised(a) | Transition::Changed(a) => a,
        };
        self.conn
            .execute(
                "INSERT INTO alarms (id, bed, kind, raised_ms, value, cleared_ms, acked_by, acked_ms,
                                     silenced_by, silenced_ms, silenced_until_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                 ON CONFLICT (id) DO UPDATE SET cleared_ms = ?6, acked_by = ?7, acked_ms = ?8,
                     silenced_by = ?9, silenced_ms = ?10, silenced_until_ms = ?11",
                params![
                    a.id,
                    a.bed,
                    a.kind.as_str(),
                    a.raised_ms,
                    a.value,
                    a.cleared_ms,
                    a.acked_by,
                    a.acked_ms,
                    a.silenced_by,
                    a.silenced_ms,
                    a.silenced_until_ms
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// A bed's alarms, newest first.
    pub(crate) fn history(&self, bed: &str, limit: usize) -> Result<Vec<AlarmRow>, AlarmError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT id, kind, raised_ms, value, cleared_ms, acked_by, acked_ms, silenced_by,
                        silenced_ms, silenced_until_ms
                 FROM alarms WHERE bed = ?1 ORDER BY raised_ms DESC, id DESC LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map(params![bed, limit as i64], |r| {
                Ok(AlarmRow {
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    raised_ms: r.get(2)?,
                    value: r.get(3)?,
                    cleared_ms: r.get(4)?,
                    acked_by: r.get(5)?,
                    acked_ms: r.get(6)?,
                    silenced_by: r.get(7)?,
                    silenced_ms: r.get(8)?,
                    silenced_until_ms: r.get(9)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alarms() -> Alarms {
        Alarms::new(
            Thresholds {
                risk_on: 0.7,
                risk_off: 0.5,
                lead_off: 0.5,
                max_silence_secs: 600,
            },
            0,
        )
    }

    #[test]
    fn risk_alarm_has_hysteresis_and_clears_itself() {
        let mut a = alarms();
        assert!(a.on_score("b1", Some(0.69), None, 1).is_empty());
        let t = a.on_score("b1", Some(0.71), None, 2);
        assert!(
            matches!(&t[..], [Transition::Raised(x)] if x.kind == AlarmKind::Risk && x.id == 1)
        );
        // Between the thresholds: stays raised.
        assert!(a.on_score("b1", Some(0.6), None, 3).is_empty());
        assert_eq!(a.active().len(), 1);
        let t = a.on_score("b1", Some(0.4), None, 4);
        assert!(matches!(&t[..], [Transition::Changed(x)] if x.cleared_ms == Some(4)));
        assert!(a.active().is_empty());
    }

    #[test]
    fn technical_alarms_are_apart_and_lost_replaces_stale() {
        let mut a = alarms();
        a.on_score("b1", Some(0.9), Some(0.8), 1);
        let kinds: Vec<_> = a.active().iter().map(|x| (x.kind, x.technical)).collect();
        assert_eq!(
            kinds,
            [(AlarmKind::Risk, false), (AlarmKind::LeadOff, true)]
        );
        a.on_status("b1", BedStatus::Stale, 2);
        a.on_status("b1", BedStatus::Lost, 3);
        let tech: Vec<_> = a
            .active()
            .iter()
            .filter(|x| x.technical)
            .map(|x| x.kind)
            .collect();
        assert_eq!(tech, [AlarmKind::LeadOff, AlarmKind::Lost]);
        a.on_status("b1", BedStatus::Live, 4);
        assert!(a.active().iter().all(|x| x.kind != AlarmKind::Lost));
    }

    #[test]
    fn acknowledge_and_silence_record_who_and_when() {
        let mut a = alarms();
        a.on_score("b1", Some(0.9), None, 1);
        let id = a.active()[0].id;
        a.acknowledge(id, "nina", 5).unwrap();
        assert!(matches!(
            a.silence(id, "nina", 0, 6),
            Err(AlarmError::BadSilence { .. })
        ));
        a.silence(id, "nina", 60, 6).unwrap();
        let x = &a.active()[0];
        assert_eq!((x.acked_by.as_deref(), x.acked_ms), (Some("nina"), Some(5)));
        assert_eq!(x.silenced_until_ms, Some(60_006));
        assert!(a.expire(60_005).is_empty());
        assert_eq!(a.expire(60_006).len(), 1);
        assert!(matches!(
            a.acknowledge(99, "nina", 7),
            Err(AlarmError::Unknown(99))
        ));
    }

    #[test]
    fn history_lists_a_beds_alarms_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("alarms.db");
        let mut c = crate::serving::store::open(&path).unwrap();
        crate::serving::store::migrate(&mut c, &path).unwrap();
        let db = AlarmDb::open(&path).unwrap();
        let mut a = alarms();
        for t in a.on_score("b1", Some(0.9), None, 1) {
            db.apply(&t).unwrap();
        }
        db.apply(&a.acknowledge(1, "nina", 5).unwrap()).unwrap();
        for t in a.on_score("b1", Some(0.9), Some(0.8), 7) {
            db.apply(&t).unwrap();
        }
        let rows = serde_json::to_value(db.history("b1", 10).unwrap()).unwrap();
        assert_eq!(
            rows,
            serde_json::json!([
                {"id": 2, "kind": "lead_off", "raised_ms": 7, "value": 0.8, "cleared_ms": null,
                 "acked_by": null, "acked_ms": null, "silenced_by": null, "silenced_ms": null,
                 "silenced_until_ms": null},
                {"id": 1, "kind": "risk", "raised_ms": 1, "value": 0.9, "cleared_ms": null,
                 "acked_by": "nina", "acked_ms": 5, "silenced_by": null, "silenced_ms": null,
                 "silenced_until_ms": null},
            ])
        );
        assert!(db.history("b2", 10).unwrap().is_empty());
    }
}
