//! The monitors' own alarms in the [`store`](super) (table `monitor_alarms`, one row per bed,
//! monitor alarm id and onset): the row the adjudicator hands the writer
//! ([`MonitorAlarmRow`]: what the monitor sent, Holmes's opinion with its provenance, and the
//! strip the opinion read), how the writer inserts it and records its end, what the writer
//! tells its listeners once a change is committed ([`MonitorAlarmChange`], on the store's
//! broadcast of monitor alarms: the dashboard's board and the outbound links' feeds), and the
//! reads of the API and of the links ([`MonitorAlarmView`], [`AlarmStrip`]).
//!
//! The strip is kept as the opinion read it: each lead's [`LOOKBACK_SECS`] up to the onset at
//! 250 Hz, holes filled, as whole microvolts (`{"fs", "names", "uv"}` in the `strip` column),
//! so the page can show it however long after the alarm.
//!
//! [`LOOKBACK_SECS`]: crate::core::monitor_alarm::LOOKBACK_SECS

use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::core::monitor_alarm::{MonitorAlarmKind, Opinion};
use crate::core::window::SAMPLE_RATE_HZ;

/// A monitor's alarm as the store keeps it: what the monitor sent, and Holmes's opinion with
/// its provenance (`None` where the kind is not judged, or nothing could judge it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MonitorAlarmRow {
    pub(crate) bed: Arc<str>,
    pub(crate) id: String,
    pub(crate) kind: MonitorAlarmKind,
    pub(crate) onset_ms: i64,
    pub(crate) received_ms: i64,
    pub(crate) opinion: Option<Opinion>,
    /// When the opinion was formed, wall clock (ms).
    pub(crate) judged_ms: Option<i64>,
    /// What formed it (counter, operating point, look-back, coverage), as JSON.
    pub(crate) provenance: serde_json::Value,
    /// Each lead the opinion read, by name: the look-back up to the onset (mV, holes filled);
    /// empty for a kind Holmes does not judge.
    pub(crate) strip: Vec<(String, Vec<f32>)>,
}

/// A monitor's alarm and Holmes's opinion on it, as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MonitorAlarmView {
    /// Holmes's number for the alarm (the row's), which its strip is read by.
    pub key: i64,
    pub bed: String,
    /// The monitor's id of the alarm.
    pub id: String,
    pub kind: String,
    /// Onset and end, device time (ms); the end where the monitor sent it.
    pub onset_ms: i64,
    pub end_ms: Option<i64>,
    /// When it was received and when its opinion was formed, wall clock (ms).
    pub received_ms: i64,
    pub judged_ms: Option<i64>,
    /// The opinion: `None` where the kind is not judged.
    pub confirmed: Option<bool>,
    pub probability: Option<f64>,
    pub reason: Option<String>,
    pub provenance: serde_json::Value,
}

impl MonitorAlarmView {
    /// The kind as the store names it (an unknown name, which the store never writes, as
    /// `other`).
    pub(crate) fn kind(&self) -> MonitorAlarmKind {
        self.kind.parse().unwrap_or(MonitorAlarmKind::Other)
    }

    /// Holmes's opinion, where one was formed.
    pub(crate) fn opinion(&self) -> Option<Opinion> {
        Some(Opinion {
            kind: self.kind(),
            confirmed: self.confirmed?,
            probability: self.probability? as f32,
            reason: self.reason.clone()?,
        })
    }

    /// Why a kind Holmes judges has no opinion (its provenance's `not_judged`).
    pub(crate) fn not_judged(&self) -> Option<&str> {
        self.provenance["not_judged"].as_str()
    }
}

/// What changed of a monitor's alarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MonitorAlarmPhase {
    /// Its row was stored (with its opinion, or without one).
    Raised,
    /// The monitor ended it.
    Ended,
}

/// A monitor alarm's row as the writer committed it: broadcast once the transaction holding it
/// commits (a row held through a storage fault, once it is written).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MonitorAlarmChange {
    pub(crate) phase: MonitorAlarmPhase,
    pub(crate) alarm: MonitorAlarmView,
}

/// The strip an opinion read, as the API returns it: the lead slots' shape of the live strip
/// (`fs`, `end_ms`, `leads` in mV), its end the alarm's onset, with the monitor's lead names.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlarmStrip {
    pub fs: i64,
    /// The onset (device time, ms): the strip ends there.
    pub end_ms: i64,
    pub names: Vec<String>,
    pub leads: Vec<Vec<f32>>,
}

/// The `strip` column.
#[derive(Debug, Serialize, Deserialize)]
struct StoredStrip {
    fs: i64,
    names: Vec<String>,
    /// Whole microvolts.
    uv: Vec<Vec<i32>>,
}

/// The `strip` column of `leads` (NULL without leads).
fn encode(leads: &[(String, Vec<f32>)]) -> Option<String> {
    if leads.is_empty() {
        return None;
    }
    let s = StoredStrip {
        fs: SAMPLE_RATE_HZ as i64,
        names: leads.iter().map(|(n, _)| n.clone()).collect(),
        uv: leads
            .iter()
            .map(|(_, x)| {
                x.iter()
                    .map(|v| {
                        let uv = (f64::from(*v) * 1000.0).round();
                        if uv.is_finite() {
                            uv.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
                        } else {
                            0
                        }
                    })
                    .collect()
            })
            .collect(),
    };
    Some(serde_json::to_string(&s).expect("a strip serialises"))
}

const COLS: &str = "id, bed, alarm_id, kind, onset_ms, end_ms, received_ms, judged_ms, confirmed,
    probability, reason, provenance";

fn view(r: &rusqlite::Row<'_>) -> rusqlite::Result<MonitorAlarmView> {
    let p: Option<String> = r.get(11)?;
    Ok(MonitorAlarmView {
        key: r.get(0)?,
        bed: r.get(1)?,
        id: r.get(2)?,
        kind: r.get(3)?,
        onset_ms: r.get(4)?,
        end_ms: r.get(5)?,
        received_ms: r.get(6)?,
        judged_ms: r.get(7)?,
        confirmed: r.get(8)?,
        probability: r.get(9)?,
        reason: r.get(10)?,
        provenance: p
            .and_then(|p| serde_json::from_str(&p).ok())
            .unwrap_or(serde_json::Value::Null),
    })
}

/// Inserts `a`; its row as committed, or `None` where the bed already holds that alarm (a
/// monitor resending it after a reconnect).
pub(super) fn insert(
    c: &Connection,
    a: &MonitorAlarmRow,
) -> rusqlite::Result<Option<MonitorAlarmView>> {
    let o = a.opinion.as_ref();
    let n = c.execute(
        "INSERT OR IGNORE INTO monitor_alarms (bed, alarm_id, kind, onset_ms, received_ms,
            confirmed, probability, reason, judged_ms, provenance, strip)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            &*a.bed,
            a.id,
            a.kind.as_str(),
            a.onset_ms,
            a.received_ms,
            o.map(|o| o.confirmed),
            o.map(|o| o.probability),
            o.map(|o| o.reason.as_str()),
            a.judged_ms,
            a.provenance.to_string(),
            encode(&a.strip),
        ],
    )?;
    if n == 0 {
        return Ok(None);
    }
    // The row as SQLite holds it (the probability a REAL), as every reader sees it.
    c.query_row(
        &format!("SELECT {COLS} FROM monitor_alarms WHERE id = ?1"),
        [c.last_insert_rowid()],
        view,
    )
    .optional()
}

/// Ends the newest alarm `id` of `bed` that began by `end_ms`; its row as ended, or `None`
/// where the bed holds no such alarm.
pub(super) fn end(
    c: &Connection,
    bed: &str,
    id: &str,
    end_ms: i64,
) -> rusqlite::Result<Option<MonitorAlarmView>> {
    c.query_row(
        &format!(
            "UPDATE monitor_alarms SET end_ms = ?3 WHERE id = (
                SELECT id FROM monitor_alarms WHERE bed = ?1 AND alarm_id = ?2
                AND onset_ms <= ?3 ORDER BY onset_ms DESC, id DESC LIMIT 1)
             RETURNING {COLS}"
        ),
        params![bed, id, end_ms],
        view,
    )
    .optional()
}

/// The newest monitor alarms, newest first, of `bed` or of every bed, at most `limit`.
pub(super) fn newest(
    c: &Connection,
    bed: Option<&str>,
    limit: i64,
) -> rusqlite::Result<Vec<MonitorAlarmView>> {
    let sql = match bed {
        Some(_) => format!(
            "SELECT {COLS} FROM monitor_alarms WHERE bed = ?1
             ORDER BY received_ms DESC, id DESC LIMIT ?2"
        ),
        None => format!(
            "SELECT {COLS} FROM monitor_alarms WHERE ?1 IS NULL
             ORDER BY received_ms DESC, id DESC LIMIT ?2"
        ),
    };
    let mut st = c.prepare(&sql)?;
    let rows = st.query_map(params![bed, limit], view)?;
    rows.collect()
}

/// Every monitor alarm received at or after `since_ms` (wall clock), oldest first: what the
/// outbound links look through for alarms their feed never queued.
pub(crate) fn received_since(
    c: &Connection,
    since_ms: i64,
) -> rusqlite::Result<Vec<MonitorAlarmView>> {
    let mut st = c.prepare(&format!(
        "SELECT {COLS} FROM monitor_alarms WHERE received_ms >= ?1 ORDER BY id"
    ))?;
    let rows = st.query_map([since_ms], view)?;
    rows.collect()
}

/// Whether monitor alarm `id` of `bed` with this onset is stored: `None` not, `Some(end)` with
/// its end where one is stored. What a gateway's inbox reads to hand on again, after a
/// restart, what it took but the store never got.
pub(crate) fn stored_end(
    c: &Connection,
    bed: &str,
    id: &str,
    onset_ms: i64,
) -> rusqlite::Result<Option<Option<i64>>> {
    c.query_row(
        "SELECT end_ms FROM monitor_alarms WHERE bed = ?1 AND alarm_id = ?2 AND onset_ms = ?3",
        params![bed, id, onset_ms],
        |r| r.get(0),
    )
    .optional()
}

/// The strip alarm `key`'s opinion read, with the alarm's bed; `None` for no such alarm, or
/// one stored without a strip (a kind Holmes does not judge).
pub(super) fn strip(c: &Connection, key: i64) -> rusqlite::Result<Option<(String, AlarmStrip)>> {
    let row: Option<(String, i64, Option<String>)> = c
        .query_row(
            "SELECT bed, onset_ms, strip FROM monitor_alarms WHERE id = ?1",
            [key],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    Ok(row.and_then(|(bed, onset_ms, text)| {
        let s: StoredStrip = serde_json::from_str(&text?).ok()?;
        let leads =
            s.uv.iter()
                .map(|x| x.iter().map(|&v| v as f32 / 1000.0).collect())
                .collect();
        Some((
            bed,
            AlarmStrip {
                fs: s.fs,
                end_ms: onset_ms,
                names: s.names,
                leads,
            },
        ))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.db");
        let mut c = super::super::open(&p).unwrap();
        super::super::migrate(&mut c, &p, &super::super::STORE).unwrap();
        (dir, c)
    }

    fn row(id: &str, onset_ms: i64) -> MonitorAlarmRow {
        MonitorAlarmRow {
            bed: "b1".into(),
            id: id.into(),
            kind: MonitorAlarmKind::Vt,
            onset_ms,
            received_ms: 1_000 + onset_ms,
            opinion: Some(Opinion {
                kind: MonitorAlarmKind::Vt,
                confirmed: true,
                probability: 0.75,
                reason: "6 ventricular beats at 170/min on II".into(),
            }),
            judged_ms: Some(1_200 + onset_ms),
            provenance: serde_json::json!({"coverage": 1.0}),
            strip: vec![
                ("II".into(), vec![0.0012, -1.5, 2.25]),
                ("V".into(), vec![f32::NAN, 0.5, 40_000_000.0]),
            ],
        }
    }

    #[test]
    fn a_row_is_committed_once_ended_once_per_end_and_its_strip_read_back_in_millivolts() {
        let (_d, c) = db();
        let a = insert(&c, &row("vt-1", 5_000)).unwrap().unwrap();
        assert_eq!(
            (a.bed.as_str(), a.id.as_str(), a.kind()),
            ("b1", "vt-1", MonitorAlarmKind::Vt)
        );
        assert_eq!(
            a.opinion().unwrap().reason,
            "6 ventricular beats at 170/min on II"
        );
        assert_eq!(a.probability, Some(0.75));
        assert_eq!(a.end_ms, None);
        // Sent again (a reconnect): nothing new.
        assert_eq!(insert(&c, &row("vt-1", 5_000)).unwrap(), None);
        // The same id for a later alarm is another row; an end goes to the newest begun by it.
        let later = insert(&c, &row("vt-1", 9_000)).unwrap().unwrap();
        assert_ne!(later.key, a.key);
        let ended = end(&c, "b1", "vt-1", 8_000).unwrap().unwrap();
        assert_eq!((ended.key, ended.end_ms), (a.key, Some(8_000)));
        assert_eq!(end(&c, "b1", "vt-9", 8_000).unwrap(), None);
        assert_eq!(end(&c, "b1", "vt-1", 4_000).unwrap(), None);
        let (bed, s) = strip(&c, a.key).unwrap().unwrap();
        assert_eq!(bed, "b1");
        assert_eq!((s.fs, s.end_ms), (250, 5_000));
        assert_eq!(s.names, ["II", "V"]);
        // Whole microvolts; what is not a number, nothing.
        assert_eq!(s.leads[0], [0.001, -1.5, 2.25]);
        assert_eq!(s.leads[1][..2], [0.0, 0.5]);
        assert!(
            (s.leads[1][2] - 2_147_483.6).abs() < 1.0,
            "{:?}",
            s.leads[1]
        );
        // A kind not judged keeps no strip.
        let mut asystole = row("a-1", 6_000);
        asystole.kind = MonitorAlarmKind::Asystole;
        asystole.opinion = None;
        asystole.strip.clear();
        let a2 = insert(&c, &asystole).unwrap().unwrap();
        assert_eq!((a2.confirmed, a2.opinion()), (None, None));
        assert_eq!(strip(&c, a2.key).unwrap(), None);
        assert_eq!(strip(&c, 999).unwrap(), None);
        // Newest first; oldest first since a time.
        let keys = |v: Vec<MonitorAlarmView>| v.into_iter().map(|a| a.key).collect::<Vec<_>>();
        assert_eq!(
            keys(newest(&c, None, 10).unwrap()),
            [later.key, a2.key, a.key]
        );
        assert_eq!(keys(newest(&c, Some("b2"), 10).unwrap()), Vec::<i64>::new());
        assert_eq!(
            keys(received_since(&c, 7_000).unwrap()),
            [later.key, a2.key]
        );
    }
}
