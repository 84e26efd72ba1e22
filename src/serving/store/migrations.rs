//! The store's schema: migrations applied in order at start-up, keyed by `PRAGMA
//! user_version`.

use std::path::Path;

use rusqlite::Connection;

use super::StoreError;

/// The DDL of an outbound link's outbox table (`outbound::outbox`, one queue code for both
/// links), one shape for every link: a row per message until the receiver takes it, `id` fixed
/// when it is queued and never reused (AUTOINCREMENT), and the index of the pending rows. The
/// text is the one migrations 12 and 13 were first written with.
macro_rules! outbox_table {
    ($table:literal) => {
        concat!(
            "CREATE TABLE ",
            $table,
            " (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        bed TEXT NOT NULL,
        alarm_id INTEGER,
        phase TEXT,
        created_ms INTEGER NOT NULL,
        body TEXT NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        done_ms INTEGER,
        ack_code TEXT,
        reason TEXT
    );
    CREATE INDEX ",
            $table,
            "_pending ON ",
            $table,
            " (id) WHERE state = 'pending';"
        )
    };
}

/// Schema migrations, applied in order; `PRAGMA user_version` counts those applied.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    "CREATE TABLE beds (
        bed TEXT PRIMARY KEY,
        device TEXT,
        first_seen_ms INTEGER NOT NULL,
        last_seen_ms INTEGER NOT NULL
    );
    CREATE TABLE models (
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        input TEXT NOT NULL,
        first_loaded_ms INTEGER NOT NULL,
        PRIMARY KEY (name, version)
    );
    CREATE TABLE ensembles (
        id INTEGER PRIMARY KEY,
        members TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        source TEXT NOT NULL
    );
    CREATE TABLE scores (
        id INTEGER PRIMARY KEY,
        bed TEXT NOT NULL,
        window_index INTEGER NOT NULL,
        window_start_ms INTEGER NOT NULL,
        window_end_ms INTEGER NOT NULL,
        status TEXT NOT NULL,
        score REAL,
        members TEXT NOT NULL,
        ensemble_id INTEGER,
        quality TEXT NOT NULL,
        latency_ms REAL NOT NULL,
        committed_ms INTEGER NOT NULL
    );
    CREATE INDEX scores_bed_end ON scores (bed, window_end_ms);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        bed TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        kind TEXT NOT NULL,
        detail TEXT NOT NULL
    );
    CREATE INDEX events_bed_at ON events (bed, at_ms);",
    // 2: the serving engine: missing members and timing per score; model profiles.
    "ALTER TABLE scores ADD COLUMN missing TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE scores ADD COLUMN timing TEXT;
    CREATE TABLE profiles (
        hardware TEXT NOT NULL,
        device TEXT NOT NULL,
        model TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        burn_version TEXT NOT NULL,
        batch INTEGER NOT NULL,
        p50_ms REAL NOT NULL,
        p95_ms REAL NOT NULL,
        p99_ms REAL NOT NULL,
        repeats INTEGER NOT NULL,
        measured_ms INTEGER NOT NULL,
        PRIMARY KEY (hardware, device, model, sha256, burn_version, batch)
    );",
    // 3: indexes for the retention sweep.
    "CREATE INDEX scores_committed ON scores (committed_ms);
    CREATE INDEX events_at ON events (at_ms);",
    // 4: the plan (device, workers, batch cap per member) that each ensemble row served with.
    "ALTER TABLE ensembles ADD COLUMN plan TEXT NOT NULL DEFAULT '[]';",
    // 5: composed plans, versioned by id, with the inputs they were composed for.
    "CREATE TABLE plans (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        reason TEXT NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX plans_key ON plans (key, id);",
    // 6: the dashboard: users, sessions, alarms and the audit log.
    "CREATE TABLE users (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL,
        password_hash TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE sessions (
        token_sha256 TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL
    );
    CREATE TABLE alarms (
        id INTEGER PRIMARY KEY,
        bed TEXT NOT NULL,
        kind TEXT NOT NULL,
        raised_ms INTEGER NOT NULL,
        value REAL,
        cleared_ms INTEGER,
        acked_by TEXT,
        acked_ms INTEGER,
        silenced_by TEXT,
        silenced_ms INTEGER,
        silenced_until_ms INTEGER
    );
    CREATE INDEX alarms_bed ON alarms (bed, raised_ms);
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY,
        at_ms INTEGER NOT NULL,
        user TEXT,
        action TEXT NOT NULL,
        detail TEXT NOT NULL
    );",
    // 7: monitors' device tokens, stored as SHA-256 hashes (see `devices`).
    "CREATE TABLE devices (
        name TEXT PRIMARY KEY,
        token_sha256 TEXT NOT NULL UNIQUE,
        bed TEXT,
        created_ms INTEGER NOT NULL,
        revoked_ms INTEGER
    );",
    // 8: a risk alarm's onset on the bed's timeline and the rule it was raised under.
    "ALTER TABLE alarms ADD COLUMN onset_ms INTEGER;
    ALTER TABLE alarms ADD COLUMN rule TEXT;",
    // 9: thinning looks up alarm onsets by bed and window end, and keeps its progress.
    "CREATE INDEX alarms_onset ON alarms (bed, onset_ms) WHERE onset_ms IS NOT NULL;
    CREATE TABLE store_meta (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    );",
    // 10: a risk alarm raised on a counted VT run keeps the run's first beat.
    "ALTER TABLE alarms ADD COLUMN run_onset_ms INTEGER;",
    // 11: the ingest's measured CPU per hardware and bed count (`holmes profile --ingest`).
    "CREATE TABLE ingest_profiles (
        hardware TEXT NOT NULL,
        beds INTEGER NOT NULL,
        seconds REAL NOT NULL,
        cpu_cores REAL NOT NULL,
        measured_ms INTEGER NOT NULL,
        PRIMARY KEY (hardware, beds)
    );",
    // 12: the HL7 outbox (`outbound::outbox`): each message until the receiver acknowledges
    // it; `id` is its MSH-10.
    outbox_table!("hl7_outbox"),
    // 13: the FHIR outbox (`outbound::outbox` for `outbound::fhir`): each resource until the
    // server accepts it; `body` is the resource, whose identifier makes a resend idempotent.
    outbox_table!("fhir_outbox"),
    // 14: each bed's current patient, kept across restarts (`admissions`).
    "CREATE TABLE admissions (
        bed TEXT PRIMARY KEY,
        patient_id TEXT,
        authority TEXT,
        seq INTEGER NOT NULL,
        at_ms INTEGER NOT NULL
    );",
    // 15: the monitors' own arrhythmia alarms and Holmes's opinions on them
    // (`monitor_alarms`): one row per bed, monitor alarm id and onset (an alarm sent again is
    // one row; an id a monitor reuses for a later alarm is another), the opinion NULL where
    // the kind is not judged; expired with the events.
    "CREATE TABLE monitor_alarms (
        id INTEGER PRIMARY KEY,
        bed TEXT NOT NULL,
        alarm_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        onset_ms INTEGER NOT NULL,
        received_ms INTEGER NOT NULL,
        end_ms INTEGER,
        confirmed INTEGER,
        probability REAL,
        reason TEXT,
        judged_ms INTEGER,
        provenance TEXT,
        UNIQUE (bed, alarm_id, onset_ms)
    );
    CREATE INDEX monitor_alarms_by_time ON monitor_alarms (received_ms);
    CREATE INDEX monitor_alarms_by_bed ON monitor_alarms (bed, received_ms);",
    // 16: the strip each opinion read (`monitor_alarms.strip`: every lead's 16 s before the
    // onset, in microvolts; NULL for a kind not judged), and the outboxes' index of an
    // alarm's messages by kind and phase (a monitor alarm's phase is queued once).
    "ALTER TABLE monitor_alarms ADD COLUMN strip TEXT;
    CREATE INDEX hl7_outbox_by_alarm ON hl7_outbox (kind, alarm_id, phase);
    CREATE INDEX fhir_outbox_by_alarm ON fhir_outbox (kind, alarm_id, phase);",
];

/// The schema version this build migrates to (`PRAGMA user_version`).
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the schema up to date.
pub(crate) fn migrate(c: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let err = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let version: i64 = c
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(err)?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(StoreError::TooNew {
            path: path.to_owned(),
            found: version,
            known,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = c.transaction().map_err(err)?;
        tx.execute_batch(sql).map_err(err)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)
            .map_err(err)?;
        tx.commit().map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns (name, type, not null, default, key) and indexes (name, unique, partial)
    /// of `table`.
    fn shape(c: &Connection, table: &str) -> (Vec<String>, Vec<String>) {
        let rows = |sql: String, n: usize| -> Vec<String> {
            let mut st = c.prepare(&sql).unwrap();
            st.query_map([], |r| {
                let cells: Vec<String> = (0..n)
                    .map(|i| r.get_ref(i).map(|v| format!("{v:?}")).unwrap_or_default())
                    .collect();
                Ok(cells.join(" "))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect()
        };
        let columns = rows(
            format!(
                "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('{table}')"
            ),
            5,
        );
        let indexes = rows(
            format!(
                "SELECT replace(name, '{table}', 'T'), \"unique\", partial FROM pragma_index_list('{table}') ORDER BY name"
            ),
            3,
        );
        (columns, indexes)
    }

    #[test]
    fn the_links_outboxes_are_one_table_shape() {
        let mut c = Connection::open_in_memory().unwrap();
        migrate(&mut c, Path::new(":memory:")).unwrap();
        let hl7 = shape(&c, "hl7_outbox");
        assert_eq!(hl7.0.len(), 12, "{hl7:?}");
        assert_eq!(hl7, shape(&c, "fhir_outbox"));
    }
}
