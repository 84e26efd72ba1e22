//! What the store keeps of its history, swept hourly by the writer: scores and events older
//! than `retention_days` are deleted; scores older than `thin_after_days` are thinned to one
//! window per bed per `thin_keep_secs` of its timeline (the first scored one of each span,
//! else the first), except a window at which a risk alarm was raised (its onset), which stays
//! until it expires. At the 5-s hop a bed commits 17,280 windows a day, six times the rows of
//! the former 30-s hop; thinned at 30 s, history past the first days costs what it did then.
//!
//! Thinning walks forward through commit time an hour per statement (each its own
//! transaction, so the dashboard's own writes get the lock in between), at most a day per
//! sweep, and keeps how far it got in `store_meta`, so a restart does not read the history
//! again and the first sweep after an upgrade does not take the whole history at once.

use rusqlite::{Connection, OptionalExtension, params};

use crate::config::StorageConfig;
use crate::core::event::Origin;

/// What to keep, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Policy {
    /// Scores, events and monitor alarms older than this are deleted.
    pub(super) keep_ms: i64,
    /// Scores older than this are thinned (`None`: never).
    pub(super) thin_after_ms: Option<i64>,
    /// One window per bed per this span of its timeline stays after thinning.
    pub(super) thin_span_ms: i64,
}

impl Policy {
    pub(super) fn of(cfg: &StorageConfig) -> Policy {
        const DAY_MS: i64 = 86_400_000;
        Policy {
            keep_ms: i64::from(cfg.retention_days) * DAY_MS,
            thin_after_ms: (cfg.thin_after_days > 0)
                .then(|| i64::from(cfg.thin_after_days) * DAY_MS),
            thin_span_ms: i64::from(cfg.thin_keep_secs.max(1)) * 1000,
        }
    }
}

/// What one sweep removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Swept {
    pub(super) expired_scores: usize,
    pub(super) expired_events: usize,
    pub(super) expired_monitor_alarms: usize,
    pub(super) thinned_scores: usize,
}

/// Commit time thinned per statement, ms.
const CHUNK_MS: i64 = 3_600_000;
/// Statements per sweep at most: a day of history an hour.
const MAX_CHUNKS: usize = 24;
/// `store_meta` key of thinning's progress: scores committed before it are thinned.
const THINNED_UNTIL: &str = "thinned_until_ms";

/// Deletes what `policy` no longer keeps as of `now_ms`.
pub(super) fn sweep(conn: &Connection, policy: Policy, now_ms: i64) -> rusqlite::Result<Swept> {
    let cutoff = now_ms - policy.keep_ms;
    let mut swept = Swept {
        expired_scores: conn.execute("DELETE FROM scores WHERE committed_ms < ?1", [cutoff])?,
        expired_events: conn.execute(
            "DELETE FROM events WHERE at_ms < ?1 AND bed <> ?2",
            params![cutoff, Origin::Server.as_str()],
        )?,
        expired_monitor_alarms: conn.execute(
            "DELETE FROM monitor_alarms WHERE received_ms < ?1",
            [cutoff],
        )?,
        thinned_scores: 0,
    };
    let Some(after) = policy.thin_after_ms else {
        return Ok(swept);
    };
    let until = now_ms - after;
    let mut from: i64 = conn
        .query_row(
            "SELECT value FROM store_meta WHERE key = ?1",
            [THINNED_UNTIL],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(cutoff)
        .max(cutoff);
    for _ in 0..MAX_CHUNKS {
        if from >= until {
            break;
        }
        let to = (from + CHUNK_MS).min(until);
        swept.thinned_scores += conn.execute(
            "DELETE FROM scores
             WHERE committed_ms >= ?1 AND committed_ms < ?2
               AND id NOT IN (
                   SELECT coalesce(min(CASE WHEN score IS NOT NULL THEN id END), min(id))
                   FROM scores
                   WHERE committed_ms >= ?1 AND committed_ms < ?2
                   GROUP BY bed, window_end_ms / ?3)
               AND NOT EXISTS (
                   SELECT 1 FROM alarms a
                   WHERE a.bed = scores.bed AND a.onset_ms = scores.window_end_ms)",
            params![from, to, policy.thin_span_ms],
        )?;
        conn.execute(
            "INSERT INTO store_meta (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = ?2",
            params![THINNED_UNTIL, to],
        )?;
        from = to;
    }
    Ok(swept)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;
    const DAY: i64 = 24 * HOUR;

    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let mut c = crate::serving::store::open(&path).unwrap();
        crate::serving::store::migrate(&mut c, &path, &crate::serving::store::STORE).unwrap();
        (dir, c)
    }

    /// A scored window of `bed` ending at `end_ms`, committed at `end_ms`.
    fn score(c: &Connection, bed: &str, end_ms: i64) {
        c.execute(
            "INSERT INTO scores (bed, window_index, window_start_ms, window_end_ms, status, score,
                                 members, quality, latency_ms, committed_ms)
             VALUES (?1, ?2, ?3, ?4, 'scored', 0.1, '[]', '{}', 1.0, ?4)",
            params![bed, end_ms / 5000, end_ms - 30_000, end_ms],
        )
        .unwrap();
    }

    fn ends(c: &Connection, bed: &str, from: i64, to: i64) -> Vec<i64> {
        let mut st = c
            .prepare(
                "SELECT window_end_ms FROM scores WHERE bed = ?1 AND window_end_ms >= ?2
                 AND window_end_ms < ?3 ORDER BY window_end_ms",
            )
            .unwrap();
        st.query_map(params![bed, from, to], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn old_scores_thin_to_one_per_span_alarm_onsets_stay_and_expired_ones_go() {
        let (_d, c) = db();
        let now = 40 * DAY;
        let policy = Policy {
            keep_ms: 30 * DAY,
            thin_after_ms: Some(2 * DAY),
            thin_span_ms: 30_000,
        };
        // Two beds, a window every 5 s over a minute, at four ages: past retention, thinned
        // age, and recent; bed b also at the thinned age.
        for base in [now - 31 * DAY, now - 10 * DAY, now - DAY] {
            for k in 0..12 {
                score(&c, "a", base + k * 5_000);
            }
        }
        for k in 0..12 {
            score(&c, "b", now - 10 * DAY + k * 5_000);
        }
        // Bed d's first window of each span went unscored: a scored one stays instead.
        for k in 0..12 {
            score(&c, "d", now - 10 * DAY + k * 5_000);
        }
        c.execute(
            "UPDATE scores SET score = NULL, status = 'insufficient_signal' WHERE bed = 'd'
             AND window_end_ms IN (?1, ?2)",
            params![now - 10 * DAY, now - 10 * DAY + 30_000],
        )
        .unwrap();
        // A risk alarm raised at a window that thinning would drop.
        let onset = now - 10 * DAY + 35_000;
        c.execute(
            "INSERT INTO alarms (bed, kind, raised_ms, onset_ms) VALUES ('a', 'risk', ?1, ?1)",
            [onset],
        )
        .unwrap();
        let first = sweep(&c, policy, now).unwrap();
        // A day of history a sweep: the first reaches the oldest day only.
        assert_eq!((first.expired_scores, first.thinned_scores), (12, 0));
        let thinned: usize = (0..40)
            .map(|_| sweep(&c, policy, now).unwrap().thinned_scores)
            .sum();
        let got = Swept {
            thinned_scores: thinned,
            ..first
        };
        assert_eq!(got.expired_scores, 12);
        // 12 windows in two 30-s spans per bed: 2 kept each, bed a also its alarm's onset.
        assert_eq!(got.thinned_scores, (12 - 3) + (12 - 2) + (12 - 2));
        let old = now - 10 * DAY;
        assert_eq!(
            ends(&c, "a", old, old + DAY),
            vec![old, old + 30_000, onset]
        );
        assert_eq!(ends(&c, "b", old, old + DAY), vec![old, old + 30_000]);
        assert_eq!(
            ends(&c, "d", old, old + DAY),
            vec![old + 5_000, old + 35_000]
        );
        // Recent windows are all there.
        assert_eq!(ends(&c, "a", now - DAY, now).len(), 12);
        // Progress is kept in the database: rows committed before it (here: put there after
        // the fact) are not read again, by this or a restarted writer.
        for k in 0..12 {
            score(&c, "c", old + k * 5_000);
        }
        assert_eq!(sweep(&c, policy, now + HOUR).unwrap(), Swept::default());
        assert_eq!(ends(&c, "c", old, old + DAY).len(), 12);
        // Without thinning, only expiry.
        let p = Policy {
            thin_after_ms: None,
            ..policy
        };
        assert_eq!(sweep(&c, p, now + 2 * HOUR).unwrap(), Swept::default());
    }
}
