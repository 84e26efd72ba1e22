//! The read side of the [`store`](super): a connection of its own (WAL lets it read while the
//! writer writes) for the API's queries.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, params};
use serde::Serialize;

use super::monitor_alarms::{AlarmStrip, MonitorAlarmView};
use super::{StoreError, open};

/// A stored score, as the API returns it.
#[derive(Debug, Clone, Serialize)]
pub struct ScoreRow {
    pub(crate) bed: String,
    pub window_index: i64,
    pub(crate) window_start_ms: i64,
    pub(crate) window_end_ms: i64,
    pub status: String,
    pub score: Option<f64>,
    pub members: serde_json::Value,
    pub(crate) ensemble_id: Option<i64>,
    pub(crate) quality: serde_json::Value,
    pub latency_ms: f64,
    pub committed_ms: i64,
    /// Members that missed this window (partial scores).
    pub missing: serde_json::Value,
    /// Queue wait, batch size and compute time per member, and combination time.
    pub timing: serde_json::Value,
}

/// Read side for the API: its own connection (WAL lets it read while the writer writes).
#[derive(Clone)]
pub struct StoreReader {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
}

const SCORE_COLS: &str = "bed, window_index, window_start_ms, window_end_ms, status, score, members, ensemble_id, quality, latency_ms, committed_ms, missing, timing";

fn score_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ScoreRow> {
    let js = |s: String| serde_json::from_str(&s).unwrap_or(serde_json::Value::Null);
    Ok(ScoreRow {
        bed: r.get(0)?,
        window_index: r.get(1)?,
        window_start_ms: r.get(2)?,
        window_end_ms: r.get(3)?,
        status: r.get(4)?,
        score: r.get(5)?,
        members: js(r.get(6)?),
        ensemble_id: r.get(7)?,
        quality: js(r.get(8)?),
        latency_ms: r.get(9)?,
        committed_ms: r.get(10)?,
        missing: js(r.get(11)?),
        timing: r
            .get::<_, Option<String>>(12)?
            .map_or(serde_json::Value::Null, js),
    })
}

impl StoreReader {
    pub fn open(path: &Path) -> Result<StoreReader, StoreError> {
        Ok(StoreReader {
            conn: Arc::new(Mutex::new(open(path)?)),
            path: path.to_owned(),
        })
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Per bed, the device time (ms) at which its latest stored window ends: where a restarted
    /// daemon's ward resumes, so a monitor resending its buffer is not scored twice.
    pub(crate) fn scored_until(
        &self,
    ) -> Result<std::collections::HashMap<String, i64>, StoreError> {
        let c = self.conn.lock().expect("lock");
        let mut st = c
            .prepare("SELECT bed, max(window_end_ms) FROM scores GROUP BY bed")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Whether the database holds anything of `bed`: its hello, scores or events (a bed an
    /// earlier run served is known before its monitor reconnects).
    pub(crate) fn knows_bed(&self, bed: &str) -> Result<bool, StoreError> {
        let c = self.conn.lock().expect("lock");
        c.query_row(
            "SELECT EXISTS (SELECT 1 FROM beds WHERE bed = ?1)
                 OR EXISTS (SELECT 1 FROM scores WHERE bed = ?1)
                 OR EXISTS (SELECT 1 FROM events WHERE bed = ?1)",
            params![bed],
            |r| r.get(0),
        )
        .map_err(|e| self.err(e))
    }

    /// The newest score of every bed.
    pub(crate) fn latest_scores(&self) -> Result<Vec<ScoreRow>, StoreError> {
        let c = self.conn.lock().expect("lock");
        let sql = format!(
            "SELECT {SCORE_COLS} FROM scores WHERE id IN (SELECT max(id) FROM scores GROUP BY bed)"
        );
        let mut st = c.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = st.query_map([], score_row).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// A bed's scores with window ends in `[since, until]`, oldest first, at most `limit`.
    pub fn scores(
        &self,
        bed: &str,
        since: i64,
        until: i64,
        limit: i64,
    ) -> Result<Vec<ScoreRow>, StoreError> {
        let c = self.conn.lock().expect("lock");
        let sql = format!(
            "SELECT {SCORE_COLS} FROM scores WHERE bed = ?1 AND window_end_ms >= ?2 AND window_end_ms <= ?3
             ORDER BY window_end_ms, id LIMIT ?4"
        );
        let mut st = c.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = st
            .query_map(params![bed, since, until, limit], score_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// The newest monitor alarms, newest first, of `bed` or of every bed, at most `limit`.
    pub fn monitor_alarms(
        &self,
        bed: Option<&str>,
        limit: i64,
    ) -> Result<Vec<MonitorAlarmView>, StoreError> {
        let c = self.conn.lock().expect("lock");
        super::monitor_alarms::newest(&c, bed, limit).map_err(|e| self.err(e))
    }

    /// The strip monitor alarm `key`'s opinion read, with its bed (`None`: no such alarm, or
    /// none kept for it).
    pub fn monitor_alarm_strip(
        &self,
        key: i64,
    ) -> Result<Option<(String, AlarmStrip)>, StoreError> {
        let c = self.conn.lock().expect("lock");
        super::monitor_alarms::strip(&c, key).map_err(|e| self.err(e))
    }

    /// A bed's technical events, oldest first.
    pub fn events(
        &self,
        bed: &str,
        limit: i64,
    ) -> Result<Vec<(i64, String, serde_json::Value)>, StoreError> {
        let c = self.conn.lock().expect("lock");
        let mut st = c
            .prepare("SELECT at_ms, kind, detail FROM events WHERE bed = ?1 ORDER BY id LIMIT ?2")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map(params![bed, limit], |r| {
                let d: String = r.get(2)?;
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    serde_json::from_str(&d).unwrap_or(serde_json::Value::Null),
                ))
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}
