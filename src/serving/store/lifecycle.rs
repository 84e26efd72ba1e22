//! The server's lifecycle in the events table, under the pseudo-bed `server`: a
//! `server_start` row when the writer opens the database, a `server_stop` row in the writer's
//! last transaction of a graceful shutdown (followed by a WAL checkpoint that truncates the
//! log). A start that finds a `server_start` as the latest lifecycle row knows the previous
//! run ended without its stop (killed, crashed, power lost): it records `unclean_shutdown`
//! under `server` and under every bed scored in that run, with the bed's last committed
//! window, so each bed's timeline shows the gap.
//!
//! Written only by the store's writer (start-up, close), read by the outbound links'
//! outboxes ([`starts`]); rows under `server` are exempt from retention so the latest start
//! is always found.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;

use crate::core::event::{EventKind, Origin};
use crate::core::time::now_ms;

/// The previous run, when it did not shut down cleanly.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UncleanShutdown {
    pub(crate) previous_start_ms: i64,
    /// The last score committed by that run (its start when none was).
    pub(crate) last_commit_ms: i64,
    /// Beds scored by that run.
    pub(crate) beds: usize,
}

fn insert(c: &Connection, bed: &str, kind: EventKind, at: i64, detail: &serde_json::Value) {
    // A failed lifecycle row must not stop the daemon; it is logged.
    if let Err(e) = c.execute(
        "INSERT INTO events (bed, at_ms, kind, detail) VALUES (?1, ?2, ?3, ?4)",
        params![bed, at, kind.as_str(), detail.to_string()],
    ) {
        tracing::warn!(error = %e, kind = kind.as_str(), "Cannot record a lifecycle event");
    }
}

/// The times (ms) of the latest `n` starts, newest first: this run's, once the writer has
/// opened the database, then the runs' before it (the outbound links read how far back their
/// run, and the one before, reach).
pub(crate) fn starts(c: &Connection, n: usize) -> rusqlite::Result<Vec<i64>> {
    let mut st = c.prepare(
        "SELECT at_ms FROM events WHERE bed = ?1 AND kind = ?2 ORDER BY id DESC LIMIT ?3",
    )?;
    let rows = st.query_map(
        params![
            Origin::Server.as_str(),
            EventKind::ServerStart.as_str(),
            n as i64
        ],
        |r| r.get(0),
    )?;
    rows.collect()
}

/// Records this start; returns the previous run's unclean end, if it had one.
pub(crate) fn record_start(c: &Connection) -> rusqlite::Result<Option<UncleanShutdown>> {
    let now = now_ms();
    let last: Option<(String, i64)> = c
        .query_row(
            "SELECT kind, at_ms FROM events WHERE bed = ?1 AND kind IN (?2, ?3)
             ORDER BY id DESC LIMIT 1",
            params![
                Origin::Server.as_str(),
                EventKind::ServerStart.as_str(),
                EventKind::ServerStop.as_str()
            ],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let unclean = match last {
        Some((kind, previous_start_ms)) if kind == EventKind::ServerStart.as_str() => {
            let mut q = c.prepare(
                "SELECT bed, MAX(window_end_ms), MAX(committed_ms), COUNT(*) FROM scores
                 WHERE committed_ms >= ?1 GROUP BY bed",
            )?;
            let beds: Vec<(String, i64, i64, i64)> = q
                .query_map([previous_start_ms], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?
                .collect::<Result<_, _>>()?;
            let last_commit_ms = beds.iter().map(|b| b.2).max().unwrap_or(previous_start_ms);
            for (bed, last_window_end_ms, last_commit, scores) in &beds {
                insert(
                    c,
                    bed,
                    EventKind::UncleanShutdown,
                    now,
                    &json!({"last_window_end_ms": last_window_end_ms, "last_commit_ms": last_commit,
                            "scores_in_run": scores, "restart_ms": now}),
                );
            }
            insert(
                c,
                Origin::Server.as_str(),
                EventKind::UncleanShutdown,
                now,
                &json!({"previous_start_ms": previous_start_ms, "last_commit_ms": last_commit_ms,
                        "beds": beds.len(), "restart_ms": now}),
            );
            Some(UncleanShutdown {
                previous_start_ms,
                last_commit_ms,
                beds: beds.len(),
            })
        }
        _ => None,
    };
    insert(
        c,
        Origin::Server.as_str(),
        EventKind::ServerStart,
        now,
        &json!({"pid": std::process::id(), "version": env!("CARGO_PKG_VERSION")}),
    );
    Ok(unclean)
}

/// The stop row, written inside the writer's last transaction.
pub(crate) fn record_stop(tx: &Connection) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO events (bed, at_ms, kind, detail) VALUES (?1, ?2, ?3, ?4)",
        params![
            Origin::Server.as_str(),
            now_ms(),
            EventKind::ServerStop.as_str(),
            json!({"pid": std::process::id()}).to_string()
        ],
    )
    .map(|_| ())
}

/// Moves every WAL frame into the database and truncates the log to zero bytes, so a stopped
/// appliance leaves one self-contained database file.
pub(crate) fn checkpoint(c: &Connection) {
    let r = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    });
    match r {
        Ok((0, _, _)) => tracing::info!("Database checkpointed; write-ahead log truncated"),
        Ok((_, log, done)) => {
            tracing::warn!(log, done, "Checkpoint blocked by a reader; the WAL is kept")
        }
        Err(e) => tracing::warn!(error = %e, "Checkpoint failed; the WAL is kept"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_after_a_start_without_stop_is_unclean_and_names_the_beds() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.db");
        let mut c = super::super::open(&p).unwrap();
        super::super::migrate(&mut c, &p, &super::super::STORE).unwrap();
        assert_eq!(record_start(&c).unwrap(), None, "first start");
        c.execute(
            "INSERT INTO scores (bed, window_index, window_start_ms, window_end_ms, status,
                members, quality, latency_ms, committed_ms) VALUES ('bed-1', 0, 0, 30000,
                'scored', '[]', '{}', 1.0, ?1)",
            [now_ms()],
        )
        .unwrap();
        let u = record_start(&c).unwrap().expect("no stop: unclean");
        assert_eq!(u.beds, 1);
        let bed_rows: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM events WHERE bed = 'bed-1' AND kind = 'unclean_shutdown'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(bed_rows, 1);
        record_stop(&c).unwrap();
        assert_eq!(record_start(&c).unwrap(), None, "clean stop before");
    }
}
