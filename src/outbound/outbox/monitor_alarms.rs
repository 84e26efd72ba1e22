//! The monitors' own alarms in a link's [outbox](super): each phase (start, end) of a stored
//! monitor alarm is queued once (its rows are `kind = 'monitor_alarm'`, `alarm_id` the store's
//! number for the alarm, `phase`), however often it is handed over; and the alarms the feed
//! never queued are found in the store's table and queued: those the store committed while
//! the feed was behind its broadcast (found as soon as the feed says so) and those a run
//! stored in its last moments, after its links had stopped or before it was killed (found at
//! the next start, where that run's link was on).
//!
//! How far back it looks: from the start of the run the link served in (the store's
//! lifecycle rows), never past the `keep_sent_hours` a sent message is kept (an older alarm's
//! rows may have been pruned, and it would go again). A link turned on after a run without
//! it sends nothing of that run: those alarms were never for it.

use rusqlite::{Connection, OptionalExtension, params};

use super::{Draft, OutboxError, Phase, State};
use crate::core::time::now_ms;
use crate::outbound::message::MonitorAlarmReport;
use crate::serving::store::{lifecycle, monitor_alarms};

/// An outbox row's `kind` for a monitor's alarm.
pub(super) const KIND: &str = "monitor_alarm";

/// Whether `table` already holds phase `phase` of monitor alarm `key`.
pub(super) fn queued(c: &Connection, table: &str, key: i64, phase: &str) -> rusqlite::Result<bool> {
    c.query_row(
        &format!(
            "SELECT EXISTS (SELECT 1 FROM {table} WHERE kind = ?1 AND alarm_id = ?2 AND phase = ?3)"
        ),
        params![KIND, key, phase],
        |r| r.get(0),
    )
}

impl State {
    /// Where to look for monitor alarms the feed never queued at start-up: from the previous
    /// run's start where that run's link queued anything, else from this run's start; `None`
    /// without a lifecycle (a database the store never ran on).
    pub(super) fn missed_since_at_start(&self) -> Result<Option<i64>, OutboxError> {
        let starts = lifecycle::starts(&self.db.lock(), 2).map_err(|e| self.err(e))?;
        let (Some(&this), previous) = (starts.first(), starts.get(1).copied()) else {
            return Ok(None);
        };
        let Some(previous) = previous else {
            return Ok(Some(this));
        };
        let served: Option<i64> = self
            .db
            .lock()
            .query_row(
                &format!(
                    "SELECT 1 FROM {} WHERE created_ms >= ?1 AND created_ms < ?2 LIMIT 1",
                    self.names().table
                ),
                params![previous, this],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(Some(if served.is_some() { previous } else { this }))
    }

    /// The reports of the monitor alarms received since `since_ms` (and within
    /// `keep_sent_hours`) whose start or end this outbox does not hold, in the order the store
    /// took them, each naming the patient its bed is admitted with now.
    pub(super) fn missed_monitor_alarms(&self, since_ms: i64) -> Result<Vec<Draft>, OutboxError> {
        let kept = now_ms() - (self.spec.keep_sent_hours * 3.6e6) as i64;
        let alarms = monitor_alarms::received_since(&self.db.lock(), since_ms.max(kept))
            .map_err(|e| self.err(e))?;
        let table = self.names().table;
        let mut out = Vec::new();
        for a in alarms {
            let patient = self.admissions.get(&a.bed);
            let mut phases = vec![Phase::Start];
            if a.end_ms.is_some() {
                phases.push(Phase::End);
            }
            for phase in phases {
                if !queued(&self.db.lock(), table, a.key, phase.as_str())
                    .map_err(|e| self.err(e))?
                {
                    out.push(Draft::MonitorAlarm(MonitorAlarmReport::of(
                        &a,
                        phase,
                        patient.clone(),
                    )));
                }
            }
        }
        if !out.is_empty() {
            tracing::info!(
                reports = out.len(),
                link = self.names().link,
                "Queued monitor alarm reports the feed had not"
            );
        }
        Ok(out)
    }

    /// Queues the monitor alarms of this run that the feed missed (it fell behind the store).
    pub(super) fn catch_up(&mut self) -> Result<(), OutboxError> {
        let Some(&this) = lifecycle::starts(&self.db.lock(), 1)
            .map_err(|e| self.err(e))?
            .first()
        else {
            return Ok(());
        };
        let missed = self.missed_monitor_alarms(this)?;
        self.insert(&missed)
    }
}
