//! Composed plans, persisted: each plan is a versioned row of the `plans` table with the
//! inputs it was composed for (zoo checksums, bed count, hardware, budget, method), the
//! chosen ensemble and its ladder of cheaper rungs. The [`service`](super::service) looks a
//! plan up by its key at start-up and writes one after every composition; `GET /api/ensemble`
//! shows the one serving.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::core::time::now_ms;
use crate::serving::store::{Db, Migration, StoreError};
use crate::zoo::LeadSets;

/// The plans' table: composed plans, versioned by id, with the inputs they were composed for
/// (`serving::store::schema`).
pub(crate) const MIGRATIONS: &[Migration] = &[Migration {
    version: 5,
    sql: "CREATE TABLE plans (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        reason TEXT NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX plans_key ON plans (key, id);",
}];

/// Format of a plan's JSON body: 2 records each rung's lead sets (plans of format 1 were
/// composed without the lead constraint and are composed again).
pub(crate) const PLAN_FORMAT: u32 = 2;

/// What a plan was composed for; a plan is valid while its key matches the daemon's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PlanInputs {
    /// `name@sha256` of every valid zoo model, sorted.
    pub(crate) zoo: Vec<String>,
    /// Beds planned for (a multiple of the composer's bed step).
    pub(crate) beds: usize,
    /// This machine (CPU model and GPUs).
    pub(crate) hardware: String,
    pub(crate) slo_ms: u64,
    /// Latency budget the search used (slo x budget fraction / calibration), ms.
    pub(crate) budget_ms: f64,
    pub(crate) method: String,
    /// Measured / estimated latency of the plan that served before (1: none measured).
    pub(crate) calibration: f64,
    /// The ward's hop and window, s (the latency estimate and the alarm rules depend on them).
    #[serde(default)]
    pub(crate) hop_secs: u32,
    #[serde(default)]
    pub(crate) window_secs: u32,
    /// SHA-256 of the zoo's `alarm_rules.json` when the composer prefers validated ensembles
    /// (empty otherwise, or without the file): a new rule can change the plan.
    #[serde(default)]
    pub(crate) rules: String,
    /// SHA-256 of the beat counter served beside the members (empty: none): it decides which
    /// rules are validated for an ensemble, and its reading is priced in every estimate.
    #[serde(default)]
    pub(crate) counter: String,
    /// `composer.max_utilisation` (0 in plans stored before it existed).
    #[serde(default)]
    pub(crate) max_utilisation: f64,
    /// The ingest's CPU a bed each second the utilisation priced, ms: measured on this machine,
    /// else assumed (absent from plans stored before the ingest was priced, which are composed
    /// again).
    #[serde(default)]
    pub(crate) ingest_ms: f64,
    /// The configured members (`ensemble.members`, sorted) when the composer prefers
    /// validated ensembles (empty otherwise): among the book's ensembles that reached their
    /// target and fit, they serve first. In the key only when not empty, so a plan stored
    /// before it was recorded is composed again where validated ensembles are preferred.
    #[serde(default)]
    pub(crate) preferred: Vec<String>,
}

impl PlanInputs {
    /// The lookup key: everything but the calibration and the derived budget.
    pub(crate) fn key(&self) -> String {
        let text = format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|ingest {}{}",
            self.zoo.join(","),
            self.beds,
            self.hardware,
            self.slo_ms,
            self.method,
            self.hop_secs,
            self.window_secs,
            self.rules,
            self.counter,
            self.max_utilisation,
            self.ingest_ms,
            if self.preferred.is_empty() {
                String::new()
            } else {
                format!("|preferred {}", self.preferred.join(","))
            }
        );
        crate::core::hash::sha256_hex(text.as_bytes())
    }
}

/// One rung of the ladder: an ensemble and what the composer expects of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Rung {
    pub(crate) members: Vec<String>,
    /// The lead sets its members score: all three unless the zoo cannot cover one.
    pub(crate) lead_sets: LeadSets,
    pub(crate) budget_ms: f64,
    pub(crate) val_roc_auc: f64,
    /// Estimated end-to-end latency, ms (unbounded on the fallback rung when nothing fits:
    /// stored as null).
    #[serde(with = "unbounded")]
    pub(crate) latency_ms: f64,
    /// The share of a core the ward takes with it: its windows' least work (at full batches)
    /// and the monitors' streams ([`LatencyModel::utilisation`](super::latency::LatencyModel::utilisation);
    /// `composer.max_utilisation` caps it; 0 in plans stored before it was kept).
    #[serde(default)]
    pub(crate) utilisation: f64,
}

/// An estimate that may be unbounded, in JSON (which has no infinity): null.
mod unbounded {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        match v.is_finite() {
            true => s.serialize_f64(*v),
            false => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
    }
}

/// A composed plan: rung 0 is the ensemble to serve, the rest the cheaper ladder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Plan {
    pub(crate) format: u32,
    /// Row id of the stored plan (0 until stored): the plan's version.
    #[serde(default)]
    pub(crate) version: i64,
    pub(crate) inputs: PlanInputs,
    pub(crate) rungs: Vec<Rung>,
    /// Why the configured members (`ensemble.members`) are not rung 0, in words for the log
    /// and the system page (absent where they are, and in plans stored before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) configured_note: Option<String>,
    pub(crate) profiler_calls: usize,
    pub(crate) seconds: f64,
    pub(crate) created_ms: i64,
}

/// Stores `plan` as a new version; returns it.
pub(crate) fn save(db: &Db, plan: &mut Plan, reason: &str) -> Result<i64, StoreError> {
    let c = db.lock();
    let err = |source| db.err(source);
    let body = serde_json::to_string(plan).expect("a plan serialises");
    c.execute(
        "INSERT INTO plans (key, created_ms, reason, body) VALUES (?1, ?2, ?3, ?4)",
        params![plan.inputs.key(), now_ms(), reason, body],
    )
    .map_err(err)?;
    plan.version = c.last_insert_rowid();
    Ok(plan.version)
}

/// The newest stored plan with this key, if any (an unreadable body counts as none).
pub(crate) fn latest(db: &Db, key: &str) -> Result<Option<Plan>, StoreError> {
    let c = db.lock();
    let err = |source| db.err(source);
    let row: Option<(i64, String)> = c
        .query_row(
            "SELECT id, body FROM plans WHERE key = ?1 ORDER BY id DESC LIMIT 1",
            params![key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(err)?;
    Ok(row.and_then(|(id, body)| {
        let mut p: Plan = serde_json::from_str(&body).ok()?;
        (p.format == PLAN_FORMAT && !p.rungs.is_empty()).then(|| {
            p.version = id;
            p
        })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_versioned_and_found_by_their_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("p.db"), &crate::composer::TEST_SCHEMA).unwrap();
        let inputs = PlanInputs {
            zoo: vec!["a@1".into(), "b@2".into()],
            beds: 16,
            hardware: "cpu".into(),
            slo_ms: 200,
            budget_ms: 140.0,
            method: "holmes".into(),
            calibration: 1.0,
            hop_secs: 5,
            window_secs: 30,
            rules: String::new(),
            counter: String::new(),
            max_utilisation: 0.85,
            ingest_ms: 0.4,
            preferred: Vec::new(),
        };
        let mut p = Plan {
            format: PLAN_FORMAT,
            version: 0,
            inputs: inputs.clone(),
            rungs: vec![Rung {
                members: vec!["a".into()],
                lead_sets: LeadSets::ALL,
                budget_ms: 140.0,
                val_roc_auc: 0.9,
                latency_ms: 3.0,
                utilisation: 0.5,
            }],
            configured_note: Some("over the cap".into()),
            profiler_calls: 5,
            seconds: 0.1,
            created_ms: 1,
        };
        let v1 = save(&db, &mut p, "test").unwrap();
        let v2 = save(&db, &mut p, "again").unwrap();
        assert!(v2 > v1);
        let found = latest(&db, &inputs.key()).unwrap().unwrap();
        assert_eq!(found.version, v2);
        assert_eq!(found.rungs, p.rungs);
        assert_eq!(found.configured_note.as_deref(), Some("over the cap"));
        let other = PlanInputs {
            beds: 32,
            ..inputs.clone()
        };
        assert!(latest(&db, &other.key()).unwrap().is_none());
        // Another hop, another rules file or another beat counter: another key.
        let other = PlanInputs {
            hop_secs: 2,
            ..inputs.clone()
        };
        assert_ne!(other.key(), inputs.key());
        let counted = PlanInputs {
            counter: "cd".into(),
            ..inputs.clone()
        };
        assert_ne!(counted.key(), inputs.key());
        let headroom = PlanInputs {
            max_utilisation: 0.9,
            ..inputs.clone()
        };
        assert_ne!(headroom.key(), inputs.key());
        // The ingest measured again (or first measured): priced anew.
        let measured = PlanInputs {
            ingest_ms: 0.39,
            ..inputs.clone()
        };
        assert_ne!(measured.key(), inputs.key());
        let other = PlanInputs {
            rules: "ab".into(),
            ..inputs.clone()
        };
        assert_ne!(other.key(), inputs.key());
        // Other configured members: another preference.
        let preferred = PlanInputs {
            preferred: vec!["a".into()],
            ..inputs.clone()
        };
        assert_ne!(preferred.key(), inputs.key());
        // A fallback rung whose estimate is unbounded is stored and read back as such.
        let mut unbounded = Plan {
            inputs: headroom.clone(),
            ..p.clone()
        };
        unbounded.rungs[0].latency_ms = f64::INFINITY;
        save(&db, &mut unbounded, "nothing fits").unwrap();
        let found = latest(&db, &headroom.key()).unwrap().unwrap();
        assert!(found.rungs[0].latency_ms.is_infinite());
        // A plan of format 1 (composed without the lead constraint) is composed again.
        let mut old = Plan {
            format: 1,
            inputs: other.clone(),
            ..p
        };
        save(&db, &mut old, "format 1").unwrap();
        assert!(latest(&db, &other.key()).unwrap().is_none());
    }
}
