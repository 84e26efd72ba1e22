//! The beds' patient identities kept across restarts: the `admissions` table, one row a bed
//! with its current patient (none once discharged or evicted), written on every change of the
//! ward's [`Admissions`] and read back at start-up, so the first report after a restart (the
//! end of an alarm a stopped run left open, an observation before the monitor's next hello)
//! carries the patient its bed had.
//!
//! Each change is written off the tokio workers (on the blocking pool; on the calling thread
//! outside a runtime) through the ward's shared connection ([`Db`]), as the audit log is. Writes may land
//! out of order, so each carries the change's sequence number and a row is only replaced by a
//! later one. The identifiers stay in the database, beside the audit rows that already name
//! them, and out of the log.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use rusqlite::{Connection, params};

use crate::core::patient::{Admissions, Journal, Patient};
use crate::core::time::now_ms;
use crate::serving::store::{Db, StoreError};

/// The `admissions` table of one database, as the ward's admissions' [`Journal`].
#[derive(Debug)]
pub(crate) struct AdmissionsTable {
    db: Db,
    /// The next change's number: above every row's.
    next: AtomicI64,
}

/// Reads the identities an earlier run kept in `db` (migrated) and returns them as the
/// ward's admissions, each later change written back. Rows of beds with no patient are
/// deleted first (nothing else writes yet). Blocking.
pub(crate) fn restore(db: &Db) -> Result<Admissions, StoreError> {
    let conn = db.lock();
    let err = |source| db.err(source);
    conn.execute("DELETE FROM admissions WHERE patient_id IS NULL", [])
        .map_err(err)?;
    let last: i64 = conn
        .query_row("SELECT coalesce(max(seq), 0) FROM admissions", [], |r| {
            r.get(0)
        })
        .map_err(err)?;
    let mut st = conn
        .prepare("SELECT bed, patient_id, authority FROM admissions")
        .map_err(err)?;
    let beds = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                Patient {
                    id: r.get(1)?,
                    authority: r.get(2)?,
                },
            ))
        })
        .map_err(err)?
        .collect::<Result<HashMap<_, _>, _>>()
        .map_err(err)?;
    drop(st);
    drop(conn);
    let table = AdmissionsTable {
        db: db.clone(),
        next: AtomicI64::new(last + 1),
    };
    Ok(Admissions::restored(beds, Arc::new(table)))
}

impl Journal for AdmissionsTable {
    fn keep(&self, bed: &str, patient: Option<&Patient>) {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let (db, bed, patient) = (self.db.clone(), bed.to_owned(), patient.cloned());
        let write = move || {
            let done = write(&db.lock(), seq, &bed, patient.as_ref(), db.path());
            if let Err(e) = done {
                // Neither the bed nor the identifier.
                tracing::error!(error = %e, "Cannot keep a bed's patient; a restart may forget it");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(write);
            }
            Err(_) => write(),
        }
    }
}

/// Writes change `seq` of `bed` unless a later one is there already.
fn write(
    conn: &Connection,
    seq: i64,
    bed: &str,
    patient: Option<&Patient>,
    db: &Path,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO admissions (bed, patient_id, authority, seq, at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (bed) DO UPDATE SET
            patient_id = excluded.patient_id, authority = excluded.authority,
            seq = excluded.seq, at_ms = excluded.at_ms
         WHERE excluded.seq > admissions.seq",
        params![
            bed,
            patient.map(|p| &p.id),
            patient.map(|p| &p.authority),
            seq,
            now_ms()
        ],
    )
    .map_err(|source| StoreError::Sqlite {
        path: db.to_owned(),
        source,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str) -> Patient {
        Patient {
            id: id.into(),
            authority: "urn:oid:1.2.3".into(),
        }
    }

    fn db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("a.db"), &super::super::STORE).unwrap();
        (dir, db)
    }

    #[test]
    fn identities_outlive_a_restart_and_discharges_and_evictions_do_not() {
        let (_dir, db) = db();
        // Outside a runtime each change is written at once.
        let first = restore(&db).unwrap();
        assert_eq!(first.get("bed-1"), None);
        first.set("bed-1", Some(p("A1")));
        first.set("bed-2", Some(p("B2")));
        first.set("bed-3", Some(p("C3")));
        first.set("bed-1", Some(p("A9")));
        first.set("bed-2", None);
        first.forget("bed-3");
        let second = restore(&db).unwrap();
        assert_eq!(second.get("bed-1").as_deref(), Some(&p("A9")));
        assert_eq!(second.get("bed-2"), None);
        assert_eq!(second.get("bed-3"), None);
        // The next run writes after the rows it read, and its discharge holds too.
        second.set("bed-1", None);
        second.set("bed-4", Some(p("D4")));
        let third = restore(&db).unwrap();
        assert_eq!(third.get("bed-1"), None);
        assert_eq!(third.get("bed-4").as_deref(), Some(&p("D4")));
        // Only the admitted beds' rows are left.
        let conn = db.lock();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM admissions", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn an_earlier_change_written_late_does_not_undo_a_later_one() {
        let (_dir, db) = db();
        {
            let conn = db.lock();
            let path = db.path();
            write(&conn, 7, "bed-1", None, path).unwrap();
            write(&conn, 6, "bed-1", Some(&p("A1")), path).unwrap();
            write(&conn, 8, "bed-2", Some(&p("B2")), path).unwrap();
            write(&conn, 5, "bed-2", None, path).unwrap();
        }
        let a = restore(&db).unwrap();
        assert_eq!(a.get("bed-1"), None);
        assert_eq!(a.get("bed-2").as_deref(), Some(&p("B2")));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn changes_made_on_a_runtime_are_written_off_it_in_order() {
        let (_dir, db) = db();
        let a = tokio::task::spawn_blocking({
            let db = db.clone();
            move || restore(&db).unwrap()
        })
        .await
        .unwrap();
        for i in 0..50 {
            a.set("bed-1", Some(p(&format!("P{i}"))));
        }
        a.set("bed-2", Some(p("B2")));
        a.set("bed-2", None);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let db = db.clone();
            let b = tokio::task::spawn_blocking(move || {
                db.lock().query_row(
                    "SELECT count(*) FROM admissions WHERE bed = 'bed-2' AND patient_id IS NULL",
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .unwrap()
            })
            .await
            .unwrap();
            if b == 1 {
                break;
            }
            assert!(std::time::Instant::now() < until, "never written");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // Every write of bed-1 was queued before bed-2's last; give the pool a moment more.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let got = tokio::task::spawn_blocking(move || restore(&db).unwrap())
            .await
            .unwrap();
        assert_eq!(got.get("bed-1").as_deref(), Some(&p("P49")));
        assert_eq!(got.get("bed-2"), None);
    }
}
