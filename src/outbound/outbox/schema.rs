//! The outboxes' tables (`hl7_outbox`, `fhir_outbox`): one shape for every link, a row per
//! message until the receiver takes it, `id` fixed when it is queued and never reused
//! (AUTOINCREMENT; the HL7 message's MSH-10), the index of the pending rows, and the index of
//! an alarm's messages by kind and phase (a monitor alarm's phase is queued once).

use crate::serving::store::Migration;

/// The DDL of one link's outbox table; the text is the one its migration was first written
/// with.
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

/// The outboxes' steps.
pub(crate) const MIGRATIONS: &[Migration] = &[
    // The HL7 outbox: each message until the receiver acknowledges it.
    Migration {
        version: 12,
        sql: outbox_table!("hl7_outbox"),
    },
    // The FHIR outbox (`outbound::fhir`): each resource until the server accepts it; `body`
    // is the resource, whose identifier makes a resend idempotent.
    Migration {
        version: 13,
        sql: outbox_table!("fhir_outbox"),
    },
    Migration {
        version: 16,
        sql: "CREATE INDEX hl7_outbox_by_alarm ON hl7_outbox (kind, alarm_id, phase);
    CREATE INDEX fhir_outbox_by_alarm ON fhir_outbox (kind, alarm_id, phase);",
    },
];

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use crate::serving::store::{Db, Schema};

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
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("o.db"), &Schema::new(&[super::MIGRATIONS])).unwrap();
        let c = db.lock();
        let hl7 = shape(&c, "hl7_outbox");
        assert_eq!(hl7.0.len(), 12, "{hl7:?}");
        assert_eq!(hl7.1.len(), 2, "{hl7:?}");
        assert_eq!(hl7, shape(&c, "fhir_outbox"));
    }
}
