//! The database's schema, written by the modules that own its tables: each keeps the
//! migrations of its own tables beside its code (`MIGRATIONS`, a [`Migration`] per step it
//! took, numbered in the one sequence `PRAGMA user_version` counts); the daemon assembles every
//! owner's into one [`Schema`] (`appliance::schema`), and [`migrate`], the one runner, applies
//! the versions a file lacks in order, each version's parts in one transaction. This module
//! owns the store's own tables: beds, models, ensembles, scores, events, the ward's alarms and
//! audit log, the retention sweep's progress, admissions and the monitors' alarms.

use std::path::Path;

use rusqlite::Connection;

use super::StoreError;

/// One step of a table owner's schema: the statements it runs at `version`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    pub version: i64,
    pub sql: &'static str,
}

/// The migrations of a database: its owners' steps, applied version by version (a version's
/// parts in the order the owners are listed). A subset of the owners makes a database of
/// their tables alone (a test's).
#[derive(Debug, Clone, Copy)]
pub struct Schema {
    owners: &'static [&'static [Migration]],
}

impl Schema {
    pub(crate) const fn new(owners: &'static [&'static [Migration]]) -> Schema {
        Schema { owners }
    }

    /// The version the schema migrates to (`PRAGMA user_version`).
    pub(crate) fn version(&self) -> i64 {
        self.steps().map(|m| m.version).max().unwrap_or(0)
    }

    fn steps(&self) -> impl Iterator<Item = &'static Migration> + '_ {
        self.owners.iter().flat_map(|o| o.iter())
    }

    /// The statements of `version`, owner by owner.
    fn parts(&self, version: i64) -> impl Iterator<Item = &'static str> + '_ {
        self.steps()
            .filter(move |m| m.version == version)
            .map(|m| m.sql)
    }
}

/// The store's own tables alone (its tests', and the composer's scratch databases).
pub(crate) const STORE: Schema = Schema::new(&[MIGRATIONS]);

/// Brings the schema of the database at `path` up to date with `schema`.
pub(crate) fn migrate(c: &mut Connection, path: &Path, schema: &Schema) -> Result<(), StoreError> {
    let err = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let version: i64 = c
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(err)?;
    let known = schema.version();
    if version > known {
        return Err(StoreError::TooNew {
            path: path.to_owned(),
            found: version,
            known,
        });
    }
    for v in version + 1..=known {
        let tx = c.transaction().map_err(err)?;
        for sql in schema.parts(v) {
            tx.execute_batch(sql).map_err(err)?;
        }
        tx.pragma_update(None, "user_version", v).map_err(err)?;
        tx.commit().map_err(err)?;
    }
    Ok(())
}

/// The store's own tables, step by step.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: "CREATE TABLE beds (
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
    },
    // The serving engine: missing members and timing per score.
    Migration {
        version: 2,
        sql: "ALTER TABLE scores ADD COLUMN missing TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE scores ADD COLUMN timing TEXT;",
    },
    // Indexes for the retention sweep.
    Migration {
        version: 3,
        sql: "CREATE INDEX scores_committed ON scores (committed_ms);
    CREATE INDEX events_at ON events (at_ms);",
    },
    // The plan (device, workers, batch cap per member) that each ensemble row served with.
    Migration {
        version: 4,
        sql: "ALTER TABLE ensembles ADD COLUMN plan TEXT NOT NULL DEFAULT '[]';",
    },
    // The ward's alarms (the alarm book, `board`, raises and ends them; the outboxes send
    // them) and the audit log.
    Migration {
        version: 6,
        sql: "CREATE TABLE alarms (
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
    },
    // A risk alarm's onset on the bed's timeline and the rule it was raised under.
    Migration {
        version: 8,
        sql: "ALTER TABLE alarms ADD COLUMN onset_ms INTEGER;
    ALTER TABLE alarms ADD COLUMN rule TEXT;",
    },
    // Thinning looks up alarm onsets by bed and window end, and keeps its progress.
    Migration {
        version: 9,
        sql: "CREATE INDEX alarms_onset ON alarms (bed, onset_ms) WHERE onset_ms IS NOT NULL;
    CREATE TABLE store_meta (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    );",
    },
    // A risk alarm raised on a counted VT run keeps the run's first beat.
    Migration {
        version: 10,
        sql: "ALTER TABLE alarms ADD COLUMN run_onset_ms INTEGER;",
    },
    // Each bed's current patient, kept across restarts (`admissions`).
    Migration {
        version: 14,
        sql: "CREATE TABLE admissions (
        bed TEXT PRIMARY KEY,
        patient_id TEXT,
        authority TEXT,
        seq INTEGER NOT NULL,
        at_ms INTEGER NOT NULL
    );",
    },
    // The monitors' own arrhythmia alarms and Holmes's opinions on them (`monitor_alarms`):
    // one row per bed, monitor alarm id and onset (an alarm sent again is one row; an id a
    // monitor reuses for a later alarm is another), the opinion NULL where the kind is not
    // judged; expired with the events.
    Migration {
        version: 15,
        sql: "CREATE TABLE monitor_alarms (
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
    },
    // The strip each opinion read (every lead's 16 s before the onset, in microvolts; NULL
    // for a kind not judged).
    Migration {
        version: 16,
        sql: "ALTER TABLE monitor_alarms ADD COLUMN strip TEXT;",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    const A: &[Migration] = &[
        Migration {
            version: 1,
            sql: "CREATE TABLE a (x INTEGER);",
        },
        Migration {
            version: 3,
            sql: "ALTER TABLE a ADD COLUMN y INTEGER;",
        },
    ];
    const A_FIRST: &[Migration] = &[A[0]];
    const B: &[Migration] = &[Migration {
        version: 3,
        sql: "CREATE TABLE b (z INTEGER); INSERT INTO b SELECT x FROM a;",
    }];

    fn version(c: &Connection) -> i64 {
        c.pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn each_version_runs_its_owners_parts_in_order_and_only_once() {
        let p = Path::new(":memory:");
        let mut c = Connection::open_in_memory().unwrap();
        migrate(&mut c, p, &Schema::new(&[A])).unwrap();
        assert_eq!(version(&c), 3);
        c.execute_batch("INSERT INTO a VALUES (1, 2)").unwrap();
        // B's part of version 3 is not run on a file already at 3.
        migrate(&mut c, p, &Schema::new(&[A, B])).unwrap();
        assert!(c.prepare("SELECT z FROM b").is_err());
        // On a fresh file, A's part of version 3 runs before B's.
        let mut d = Connection::open_in_memory().unwrap();
        migrate(&mut d, p, &Schema::new(&[A, B])).unwrap();
        assert_eq!(version(&d), 3);
        assert!(d.prepare("SELECT y FROM a").is_ok() && d.prepare("SELECT z FROM b").is_ok());
        // A file newer than the schema is refused.
        let e = migrate(&mut d, p, &Schema::new(&[A_FIRST])).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::TooNew {
                    found: 3,
                    known: 1,
                    ..
                }
            ),
            "{e}"
        );
    }
}
