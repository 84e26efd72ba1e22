//! The ward database's schema: every table owner's migrations, in the one order the runner
//! (`serving::store::migrate`) applies them at start-up. A module that owns tables keeps their
//! steps beside its code; this list only names the owners.

use crate::serving::store::Schema;

/// Every table of the ward's database.
pub const WARD: Schema = Schema::new(&[
    crate::serving::store::MIGRATIONS,
    crate::serving::engine::profile::MIGRATIONS,
    crate::serving::ingest::devices::MIGRATIONS,
    crate::serving::ingest::cost::MIGRATIONS,
    crate::serving::ingest::pcd04::MIGRATIONS,
    crate::composer::plans::MIGRATIONS,
    crate::dashboard::auth::MIGRATIONS,
    crate::outbound::outbox::MIGRATIONS,
]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_has_a_step_and_a_fresh_file_gets_every_table() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::serving::store::Db::open(&dir.path().join("w.db"), &WARD).unwrap();
        let version: i64 = db
            .lock()
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, 17);
        let mut tables: Vec<String> = db
            .lock()
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        tables.sort();
        assert_eq!(
            tables,
            [
                "admissions",
                "alarms",
                "audit",
                "beds",
                "devices",
                "ensembles",
                "events",
                "fhir_outbox",
                "hl7_outbox",
                "ingest_profiles",
                "models",
                "monitor_alarms",
                "pcd04_inbox",
                "plans",
                "profiles",
                "scores",
                "sessions",
                "store_meta",
                "users",
            ]
        );
    }
}
