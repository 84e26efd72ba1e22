//! What the ingest costs the daemon's CPU, measured on this hardware (`holmes profile
//! --ingest`: the daemon under simulated monitors with scoring off) and stored beside the
//! models' profiles. The composer prices it in a ward's utilisation: the CPU the monitors'
//! streams take grows with the beds, whatever the ensemble.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::core::time::now_ms;
use crate::serving::engine::profile::hardware;
use crate::serving::store::{Db, Migration, StoreError};

/// The ingest's measured CPU per hardware and bed count (`holmes profile --ingest`), step by
/// step (`serving::store::schema`).
pub(crate) const MIGRATIONS: &[Migration] = &[Migration {
    version: 11,
    sql: "CREATE TABLE ingest_profiles (
        hardware TEXT NOT NULL,
        beds INTEGER NOT NULL,
        seconds REAL NOT NULL,
        cpu_cores REAL NOT NULL,
        measured_ms INTEGER NOT NULL,
        PRIMARY KEY (hardware, beds)
    );",
}];

/// One measurement: the daemon's CPU while `beds` monitors streamed into it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct IngestCost {
    pub(crate) hardware: String,
    pub(crate) beds: usize,
    /// Wall seconds measured over.
    pub(crate) seconds: f64,
    /// Daemon CPU seconds per wall second.
    pub(crate) cpu_cores: f64,
}

impl IngestCost {
    /// CPU milliseconds a bed's streams take each second.
    pub(crate) fn ms_per_bed_second(&self) -> f64 {
        if self.beds == 0 {
            return 0.0;
        }
        self.cpu_cores * 1000.0 / self.beds as f64
    }
}

/// Stores a measurement (replacing an earlier one on this hardware at the same bed count).
pub(crate) fn store(db: &Db, c: &IngestCost) -> Result<(), StoreError> {
    let err = |source| db.err(source);
    let conn = db.lock();
    conn.execute(
        "INSERT OR REPLACE INTO ingest_profiles (hardware, beds, seconds, cpu_cores, measured_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![c.hardware, c.beds as i64, c.seconds, c.cpu_cores, now_ms()],
    )
    .map_err(err)?;
    Ok(())
}

/// The latest measurement on this hardware, if any (at whatever bed count it was made: the
/// per-bed figure holds the daemon's fixed cost too, so one made at few beds prices more).
pub(crate) fn latest(db: &Db) -> Result<Option<IngestCost>, StoreError> {
    let err = |source| db.err(source);
    let conn = db.lock();
    let hw = hardware();
    let row = conn
        .query_row(
            "SELECT beds, seconds, cpu_cores FROM ingest_profiles WHERE hardware = ?1
             ORDER BY measured_ms DESC, beds DESC LIMIT 1",
            params![hw],
            |r| {
                Ok(IngestCost {
                    hardware: hw.clone(),
                    beds: r.get::<_, i64>(0)? as usize,
                    seconds: r.get(1)?,
                    cpu_cores: r.get(2)?,
                })
            },
        )
        .optional()
        .map_err(err)?;
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_measurement_on_this_hardware_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(
            &dir.path().join("h.db"),
            &crate::serving::ingest::TEST_SCHEMA,
        )
        .unwrap();
        assert_eq!(latest(&db).unwrap(), None, "nothing measured");
        let first = IngestCost {
            hardware: hardware(),
            beds: 512,
            seconds: 30.0,
            cpu_cores: 0.2,
        };
        store(&db, &first).unwrap();
        assert_eq!(latest(&db).unwrap(), Some(first.clone()));
        assert!((first.ms_per_bed_second() - 0.390_625).abs() < 1e-12);
        // Another machine's figure is not this one's.
        let other = IngestCost {
            hardware: "another CPU x64".into(),
            beds: 1024,
            ..first.clone()
        };
        store(&db, &other).unwrap();
        assert_eq!(latest(&db).unwrap(), Some(first.clone()));
        // Measured again at another bed count, later: the later one is read.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let larger = IngestCost {
            beds: 1024,
            cpu_cores: 0.4,
            ..first.clone()
        };
        store(&db, &larger).unwrap();
        assert_eq!(latest(&db).unwrap(), Some(larger));
        // Measured again at the first bed count: the new figure replaces the old, and is the
        // latest.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let again = IngestCost {
            cpu_cores: 0.25,
            ..first
        };
        store(&db, &again).unwrap();
        assert_eq!(latest(&db).unwrap(), Some(again));
    }
}
