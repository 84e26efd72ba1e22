//! The daemon's SQLite connections, each opened here and nowhere else: [`open`] (WAL, normal
//! sync, a busy timeout), [`open_read_only`] for tools reading a finished run, and [`Db`], the
//! one connection the ward's own tables share. At start-up the daemon opens three: the store
//! writer's (scores, events, monitor alarms in batches), the API's reader
//! ([`StoreReader`](super::StoreReader)) and one [`Db`] handed to every other part (alarms,
//! devices, users, outboxes, plans, profiles, costs, admissions, audit); each opening is
//! counted in `/metrics` (`holmes_sqlite_connections_opened_total`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::Connection;

use super::{Schema, StoreError, migrate};

/// Opens a read-write connection to the database at `path`: WAL, normal sync, and a busy
/// timeout of 5 s beside the other connections.
pub(crate) fn open(path: &Path) -> Result<Connection, StoreError> {
    let err = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let c = Connection::open(path).map_err(err)?;
    c.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
    c.pragma_update(None, "synchronous", "NORMAL")
        .map_err(err)?;
    c.busy_timeout(Duration::from_secs(5)).map_err(err)?;
    metrics::counter!("holmes_sqlite_connections_opened_total").increment(1);
    Ok(c)
}

/// A read-only connection to the database at `path` (tools reading a finished run, `holmes
/// validate` reading the schema version), waiting out a writer as [`open`]'s do.
pub(crate) fn open_read_only(path: &Path) -> rusqlite::Result<Connection> {
    let c = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    c.busy_timeout(Duration::from_secs(5))?;
    metrics::counter!("holmes_sqlite_connections_opened_total").increment(1);
    Ok(c)
}

/// The connection the ward's own tables share, its schema brought up to date when opened.
/// Clones share it. A caller holds [`Db::lock`] for one statement or transaction, never
/// across an `.await` nor while taking another lock; every use is short and off the tokio
/// workers (a dedicated thread or `spawn_blocking`).
#[derive(Clone)]
pub struct Db {
    conn: Arc<Mutex<Connection>>,
    path: Arc<PathBuf>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.path).finish()
    }
}

impl Db {
    /// Opens (creating and migrating to `schema`) the database at `path`.
    pub fn open(path: &Path, schema: &Schema) -> Result<Db, StoreError> {
        let mut c = open(path)?;
        migrate(&mut c, path, schema)?;
        Ok(Db {
            conn: Arc::new(Mutex::new(c)),
            path: Arc::new(path.to_owned()),
        })
    }

    /// The connection, for one statement or transaction. A panic while it was held leaves
    /// SQLite consistent (an open transaction rolls back when dropped), so a poisoned lock
    /// is taken over.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The database's file, for errors.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The error of a failed statement on this database.
    pub(crate) fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.to_path_buf(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_migrated_connection() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("h.db"), &super::super::STORE).unwrap();
        let other = db.clone();
        db.lock()
            .execute_batch("CREATE TEMP TABLE t (x INTEGER); INSERT INTO t VALUES (7)")
            .unwrap();
        // A temporary table is seen only by the connection that made it.
        let x: i64 = other
            .lock()
            .query_row("SELECT x FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(x, 7);
        let version: i64 = other
            .lock()
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, super::super::STORE.version());
    }
}
