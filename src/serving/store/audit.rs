//! The audit log: who did what, and when, to the appliance's security and clinical settings.
//! One row per action in the `audit` table (`at_ms`, `user` = the actor, `action`, `detail`
//! as JSON), written through [`AuditLog`] only.
//!
//! Writers: the dashboard's handlers (sign-ins, refused sign-ins and their back-off, plan
//! controls), the board (alarm acknowledgements and silences), the monitors' connections (a
//! hello that found no place in the ward, a bed's patient admitted or discharged), the command
//! line (`holmes user add`, `holmes device add` / `revoke`), the zoo watcher (models loaded,
//! refused, removed) and the composer (plan switches). Rows never carry secrets: a device's
//! token or a user's password stays out.

use std::path::{Path, PathBuf};

use rusqlite::params;

use crate::core::time::now_ms;
use crate::serving::store::{Db, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("audit log {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

/// The actor of actions the appliance takes by itself (zoo hot reload, the composer).
pub(crate) const SYSTEM: &str = "system";

/// What was done. The stored name is [`Action::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// A user signed in to the dashboard.
    SignIn,
    /// A sign-in failed (unknown user or wrong password); the name tried is in the detail.
    SignInRefused,
    /// Failed sign-ins shut a user name or a client address out for a while (the detail says
    /// which, and for how many seconds).
    SignInBackoff,
    AlarmAcknowledged,
    AlarmSilenced,
    /// An engineer asked the composer to recompose.
    RecomposeRequested,
    UserAdded,
    /// A monitor's device token was issued (the detail names the device, never the token).
    DeviceAdded,
    DeviceRevoked,
    /// A monitor's hello found no place in the ward (full, or its gateway at its cap of beds);
    /// the actor is the device.
    BedRefused,
    /// The zoo watcher loaded a new or changed model folder.
    ModelLoaded,
    /// The zoo watcher refused a model folder (it failed validation).
    ModelRefused,
    ModelRemoved,
    /// The zoo's alarm rules file (`alarm_rules.json`) was written, replaced or removed.
    AlarmRulesChanged,
    /// The composer switched the served ensemble (a new plan, or a rung of the ladder).
    PlanSwitched,
    /// The HL7 receiver refused a message (AE/AR, CE/CR): it is parked, not sent again; the
    /// detail names the message (its MSH-10, kind), the receiver's code and reason.
    Hl7MessageParked,
    /// A monitor said its bed is admitted with a patient other than the one it had (in its
    /// hello or a `patient` message); the actor is the device, the detail names the bed, the
    /// patient (identifier and authority) and the one before it, if any.
    PatientAdmitted,
    /// A monitor said its bed has no patient any more (a hello without one, or a `patient`
    /// message of `null`) where it had one; the detail names the bed and that patient.
    PatientDischarged,
    /// The FHIR server refused a resource (a 4xx other than 401, 403, 404, 408 and 429): it
    /// is parked, not sent again; the detail names the outbox row, kind, the HTTP status and
    /// the OperationOutcome's reason.
    FhirResourceParked,
}

impl Action {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::SignIn => "sign_in",
            Action::SignInRefused => "sign_in_refused",
            Action::SignInBackoff => "sign_in_backoff",
            Action::AlarmAcknowledged => "alarm_acknowledged",
            Action::AlarmSilenced => "alarm_silenced",
            Action::RecomposeRequested => "recompose",
            Action::UserAdded => "user_added",
            Action::DeviceAdded => "device_added",
            Action::DeviceRevoked => "device_revoked",
            Action::BedRefused => "bed_refused",
            Action::ModelLoaded => "model_loaded",
            Action::ModelRefused => "model_refused",
            Action::ModelRemoved => "model_removed",
            Action::Hl7MessageParked => "hl7_message_parked",
            Action::FhirResourceParked => "fhir_resource_parked",
            Action::PatientAdmitted => "patient_admitted",
            Action::PatientDischarged => "patient_discharged",
            Action::AlarmRulesChanged => "alarm_rules_changed",
            Action::PlanSwitched => "plan_switched",
        }
    }
}

/// The audit log of one database. Cheap to clone; it writes through the ward's shared
/// connection ([`Db`]), not the store writer's queue (which is for scores and may drop under
/// load; audit rows must not).
#[derive(Debug, Clone)]
pub(crate) struct AuditLog {
    db: Db,
}

impl AuditLog {
    pub(crate) fn new(db: &Db) -> AuditLog {
        AuditLog { db: db.clone() }
    }

    /// Appends one row now. Blocking: for the command line and threads of our own.
    pub(crate) fn write(
        &self,
        actor: Option<&str>,
        action: Action,
        detail: &serde_json::Value,
    ) -> Result<(), AuditError> {
        self.db
            .lock()
            .execute(
                "INSERT INTO audit (at_ms, user, action, detail) VALUES (?1, ?2, ?3, ?4)",
                params![now_ms(), actor, action.as_str(), detail.to_string()],
            )
            .map_err(|source| AuditError::Sqlite {
                path: self.db.path().to_owned(),
                source,
            })?;
        Ok(())
    }

    /// Appends one row without blocking an async worker: inside a tokio runtime the write
    /// runs on the blocking pool, elsewhere on the calling thread. A failure is logged (the
    /// action itself has already happened).
    pub(crate) fn record(&self, actor: Option<&str>, action: Action, detail: serde_json::Value) {
        let (log, actor) = (self.clone(), actor.map(str::to_owned));
        let write = move || {
            if let Err(e) = log.write(actor.as_deref(), action, &detail) {
                tracing::error!(error = %e, action = action.as_str(), "Cannot write the audit log");
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

/// The rows of the audit log, oldest first, as `(actor, action, detail)`; for tests and tools.
pub fn read_all(db: &Path) -> Result<Vec<(Option<String>, String, String)>, AuditError> {
    let conn = crate::serving::store::open(db)?;
    let err = |source| AuditError::Sqlite {
        path: db.to_owned(),
        source,
    };
    let mut st = conn
        .prepare("SELECT user, action, detail FROM audit ORDER BY id")
        .map_err(err)?;
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map_err(err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_appended_from_threads_and_runtimes() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        let log = AuditLog::new(&Db::open(&db, &super::super::STORE).unwrap());
        log.record(
            Some("nina"),
            Action::SignIn,
            serde_json::json!({"from": "test"}),
        );
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            log.record(None, Action::ModelRemoved, serde_json::json!({}));
        });
        drop(rt);
        let mut rows = read_all(&db).unwrap();
        for _ in 0..100 {
            if rows.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            rows = read_all(&db).unwrap();
        }
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].0.as_deref(), Some("nina"));
        assert_eq!(rows[0].1, "sign_in");
        assert_eq!(rows[1].1, "model_removed");
    }
}
