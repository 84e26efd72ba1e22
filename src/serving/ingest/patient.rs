//! A bed's patient identity as its monitor gives it: the hello's `patient` and each `patient`
//! message set the ward's [`Admissions`] entry of the bed, and each change writes one audit
//! row (the actor is the device; the detail names the bed, the patient and the one before).
//! The identifier goes to the audit table, the clinical trail (and, through the admissions'
//! journal, to the store's `admissions` table), and never into the log.

use serde_json::json;

use crate::core::patient::{Admissions, Change, Patient};
use crate::serving::store::audit::{Action, AuditLog};

/// Where one connection's admissions go: its bed, its device, the ward's identities and the
/// audit log.
pub(super) struct Bedside<'a> {
    pub(super) bed: &'a str,
    pub(super) device: &'a str,
    pub(super) admissions: Admissions,
    pub(super) audit: &'a AuditLog,
}

impl Bedside<'_> {
    /// The bed is admitted with `patient` from now on (None: no one); a change is audited.
    pub(super) fn admit(&self, patient: Option<Patient>) {
        let Some(change) = self.admissions.set(self.bed, patient) else {
            return;
        };
        let (action, detail) = match change {
            Change::Admitted { previous, now } => (
                Action::PatientAdmitted,
                json!({"bed": self.bed, "patient": *now, "previous": previous.as_deref()}),
            ),
            Change::Discharged { previous } => (
                Action::PatientDischarged,
                json!({"bed": self.bed, "patient": *previous}),
            ),
        };
        // Neither the bed nor the identifier: only that it happened.
        tracing::debug!(device = ?self.device, action = action.as_str(), "A bed's patient changed");
        self.audit.record(Some(self.device), action, detail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_change_of_a_beds_patient_writes_one_audit_row() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        let audit = AuditLog::new(
            &crate::serving::store::Db::open(&db, &crate::serving::store::STORE).unwrap(),
        );
        let side = Bedside {
            bed: "bed-7",
            device: "mon-17",
            admissions: Admissions::default(),
            audit: &audit,
        };
        let p = |id: &str| Patient {
            id: id.into(),
            authority: "HOSP".into(),
        };
        // Outside a runtime the rows are written at once.
        side.admit(None);
        side.admit(Some(p("A1")));
        side.admit(Some(p("A1")));
        side.admit(Some(p("B2")));
        side.admit(None);
        side.admit(None);
        let rows = crate::serving::store::audit::read_all(&db).unwrap();
        let got: Vec<(Option<&str>, &str, serde_json::Value)> = rows
            .iter()
            .map(|(u, a, d)| (u.as_deref(), a.as_str(), serde_json::from_str(d).unwrap()))
            .collect();
        let a1 = json!({"id": "A1", "authority": "HOSP"});
        let b2 = json!({"id": "B2", "authority": "HOSP"});
        assert_eq!(
            got,
            vec![
                (
                    Some("mon-17"),
                    "patient_admitted",
                    json!({"bed": "bed-7", "patient": a1, "previous": null})
                ),
                (
                    Some("mon-17"),
                    "patient_admitted",
                    json!({"bed": "bed-7", "patient": b2, "previous": a1})
                ),
                (
                    Some("mon-17"),
                    "patient_discharged",
                    json!({"bed": "bed-7", "patient": b2})
                ),
            ]
        );
        assert_eq!(side.admissions.get("bed-7"), None);
    }
}
