//! The patient a bed is admitted with, as its monitor names them (the hello's `patient`, or a
//! `patient` message), and the beds' current identities ([`Admissions`]): the monitors'
//! connections write them, the outbound feeds read them when they make a report, and the ward
//! forgets a bed's when it evicts the bed; the daemon's are kept across restarts by a
//! [`Journal`] (the store's `admissions` table).
//!
//! Holmes does not look patients up: an identity is an identifier value and the namespace
//! that assigned it (HL7 CX.1 and CX.4, FHIR `Identifier.value` and `system`), passed through
//! as the monitor gave it. Neither may hold a control character or an HL7 delimiter
//! (`|^~\&`), so the value is written into PID-3 as it is, and an authority that is a URI
//! into CX.4's subcomponents ([`Authority`]) without breaking them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Most characters of an identifier value or of its authority.
pub const MAX_PATIENT_CHARS: usize = 64;

/// Characters an identifier may not hold: HL7 v2's delimiters.
const DELIMITERS: [char; 5] = ['|', '^', '~', '\\', '&'];

/// A patient's identifier and the authority (namespace) that assigned it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patient {
    /// The identifier's value (a medical record number, say).
    pub id: String,
    /// Who assigned it: a namespace id (`HOSP`) or a URI (`urn:oid:1.2.3`,
    /// `https://hospital.example/mrn`).
    pub authority: String,
}

/// Why a patient identity is refused. The messages name the field, never its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatientError {
    #[error("patient.{0} is empty")]
    Empty(&'static str),
    #[error("patient.{0} is longer than {MAX_PATIENT_CHARS} characters")]
    TooLong(&'static str),
    #[error("patient.{0} holds a control character")]
    Control(&'static str),
    #[error("patient.{0} holds an HL7 delimiter (| ^ ~ \\ &)")]
    Delimiter(&'static str),
    #[error("patient.{0} begins or ends with white space")]
    Padded(&'static str),
}

impl Patient {
    /// Checks both parts: 1 to [`MAX_PATIENT_CHARS`] printable characters, no HL7 delimiter,
    /// no white space at either end.
    pub fn check(&self) -> Result<(), PatientError> {
        for (field, v) in [("id", &self.id), ("authority", &self.authority)] {
            if v.is_empty() {
                return Err(PatientError::Empty(field));
            }
            if v.chars().count() > MAX_PATIENT_CHARS {
                return Err(PatientError::TooLong(field));
            }
            if v.chars().any(char::is_control) {
                return Err(PatientError::Control(field));
            }
            if v.contains(DELIMITERS) {
                return Err(PatientError::Delimiter(field));
            }
            if v.trim() != v {
                return Err(PatientError::Padded(field));
            }
        }
        Ok(())
    }
}

/// What an authority is, as HL7 v2's HD (CX.4) tells it: an ISO OID (`urn:oid:1.2.3`), any
/// other URI, or a local namespace id (`HOSP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Authority<'a> {
    /// `urn:oid:` and an OID (digits in arcs separated by dots): the OID alone.
    Oid(&'a str),
    /// Any other absolute URI ([`is_uri`]), whole.
    Uri(&'a str),
    /// Anything else: a namespace id.
    Namespace(&'a str),
}

impl Patient {
    /// The kind of this identity's authority.
    pub(crate) fn authority_kind(&self) -> Authority<'_> {
        let a = self.authority.as_str();
        let oid = a
            .get(..8)
            .filter(|p| p.eq_ignore_ascii_case("urn:oid:"))
            .map(|_| &a[8..])
            .filter(|o| {
                o.split('.')
                    .all(|arc| !arc.is_empty() && arc.bytes().all(|b| b.is_ascii_digit()))
            });
        match oid {
            Some(o) => Authority::Oid(o),
            None if is_uri(a) => Authority::Uri(a),
            None => Authority::Namespace(a),
        }
    }
}

/// Whether `s` is an absolute URI: a scheme (a letter, then letters, digits, `+`, `-` or
/// `.`), a colon, something after it, and no white space.
pub(crate) fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut c = scheme.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic())
        && c.all(|x| x.is_ascii_alphanumeric() || matches!(x, '+' | '-' | '.'))
        && !rest.is_empty()
        && !s.contains(char::is_whitespace)
}

/// A bed's identity changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// The bed is now admitted with `now`; `previous` is who it had before, if anyone.
    Admitted {
        previous: Option<Arc<Patient>>,
        now: Arc<Patient>,
    },
    /// The bed had `previous` and now has no one.
    Discharged { previous: Arc<Patient> },
}

/// Where the beds' identities are kept beyond the process (the store's `admissions` table):
/// told each change as it is made, in the order they are made (under the admissions' lock),
/// so it must not block.
pub(crate) trait Journal: Send + Sync + std::fmt::Debug {
    /// `bed` is admitted with `patient` from now on (None: with no one).
    fn keep(&self, bed: &str, patient: Option<&Patient>);
}

/// The current identity of each bed that has one. Cheap to clone; its memory is bounded by
/// the beds the ward holds (an evicted bed's entry is forgotten) and, after a restart, those
/// an earlier run held.
#[derive(Debug, Clone, Default)]
pub(crate) struct Admissions {
    beds: Arc<Mutex<HashMap<String, Arc<Patient>>>>,
    /// Told every change, where the identities outlive the process (None in tests).
    journal: Option<Arc<dyn Journal>>,
}

impl Admissions {
    /// The identities an earlier run kept in `journal`, which is told every change from now
    /// on.
    pub(crate) fn restored(beds: HashMap<String, Patient>, journal: Arc<dyn Journal>) -> Self {
        Admissions {
            beds: Arc::new(Mutex::new(
                beds.into_iter().map(|(b, p)| (b, Arc::new(p))).collect(),
            )),
            journal: Some(journal),
        }
    }

    fn keep(&self, bed: &str, patient: Option<&Patient>) {
        if let Some(j) = &self.journal {
            j.keep(bed, patient);
        }
    }

    /// The patient `bed` is admitted with now, if any.
    pub(crate) fn get(&self, bed: &str) -> Option<Arc<Patient>> {
        self.beds.lock().expect("admissions lock").get(bed).cloned()
    }

    /// Admits `bed` with `patient` (None: discharges it); the change, if it is one.
    pub(crate) fn set(&self, bed: &str, patient: Option<Patient>) -> Option<Change> {
        let mut beds = self.beds.lock().expect("admissions lock");
        match patient {
            Some(p) => {
                if beds.get(bed).is_some_and(|q| **q == p) {
                    return None;
                }
                self.keep(bed, Some(&p));
                let now = Arc::new(p);
                let previous = beds.insert(bed.to_owned(), now.clone());
                Some(Change::Admitted { previous, now })
            }
            None => {
                let previous = beds.remove(bed)?;
                self.keep(bed, None);
                Some(Change::Discharged { previous })
            }
        }
    }

    /// Forgets `bed`'s identity (the ward evicted the bed); the patient it had.
    pub(crate) fn forget(&self, bed: &str) -> Option<Arc<Patient>> {
        let mut beds = self.beds.lock().expect("admissions lock");
        let previous = beds.remove(bed)?;
        self.keep(bed, None);
        Some(previous)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, authority: &str) -> Patient {
        Patient {
            id: id.into(),
            authority: authority.into(),
        }
    }

    #[test]
    fn identities_with_delimiters_control_characters_or_bad_lengths_are_refused() {
        assert_eq!(p("MRN-00417", "HOSP").check(), Ok(()));
        assert_eq!(p("4711", "urn:oid:1.2.840.99.1").check(), Ok(()));
        assert_eq!(p("Zoë-7", "https://h.example/mrn").check(), Ok(()));
        assert_eq!(p("", "HOSP").check(), Err(PatientError::Empty("id")));
        assert_eq!(p("1", "").check(), Err(PatientError::Empty("authority")));
        let long = "x".repeat(MAX_PATIENT_CHARS + 1);
        assert_eq!(p(&long, "H").check(), Err(PatientError::TooLong("id")));
        assert!(p(&"é".repeat(MAX_PATIENT_CHARS), "H").check().is_ok());
        for bad in ["a|b", "a^b", "a~b", "a\\b", "a&b"] {
            assert_eq!(p(bad, "H").check(), Err(PatientError::Delimiter("id")));
            assert_eq!(
                p("1", bad).check(),
                Err(PatientError::Delimiter("authority"))
            );
        }
        for bad in ["a\rb", "a\nb", "\u{7f}", "a\u{0}", "\u{85}"] {
            assert_eq!(p(bad, "H").check(), Err(PatientError::Control("id")));
        }
        assert_eq!(p(" 1", "H").check(), Err(PatientError::Padded("id")));
        assert_eq!(p("1", "H ").check(), Err(PatientError::Padded("authority")));
        // The message names the field, never the value.
        let e = p("secret|1", "H").check().unwrap_err().to_string();
        assert!(!e.contains("secret"), "{e}");
    }

    #[test]
    fn an_authority_is_an_oid_another_uri_or_a_namespace() {
        let kind = |a: &str| {
            let p = p("1", a);
            format!("{:?}", p.authority_kind())
        };
        assert_eq!(kind("urn:oid:1.2.840.99.7"), r#"Oid("1.2.840.99.7")"#);
        assert_eq!(kind("URN:OID:2.16.840"), r#"Oid("2.16.840")"#);
        assert_eq!(kind("urn:oid:1..2"), r#"Uri("urn:oid:1..2")"#);
        assert_eq!(kind("urn:oid:1.2x"), r#"Uri("urn:oid:1.2x")"#);
        assert_eq!(kind("urn:oid:"), r#"Uri("urn:oid:")"#);
        assert_eq!(
            kind("https://h.example/mrn"),
            r#"Uri("https://h.example/mrn")"#
        );
        assert_eq!(kind("HOSP"), r#"Namespace("HOSP")"#);
        assert_eq!(kind("1x:y"), r#"Namespace("1x:y")"#);
        for (s, uri) in [
            ("https://h.example/mrn", true),
            ("urn:oid:1.2.3", true),
            ("HOSP", false),
            ("1x:y", false),
            ("urn:", false),
            ("urn:a b", false),
            (":x", false),
        ] {
            assert_eq!(is_uri(s), uri, "{s}");
        }
        // An authority that would break CX.4's subcomponents (or any other HL7 structure)
        // never gets this far: the check refuses every delimiter, `&` included.
        for a in [
            "urn:oid:1.2&3",
            "https://h.example/?a=1&b=2",
            "H^X",
            "a|b",
            "a~b",
            "a\\b",
        ] {
            assert_eq!(
                p("1", a).check(),
                Err(PatientError::Delimiter("authority")),
                "{a}"
            );
        }
    }

    #[test]
    fn a_bed_changes_identity_only_when_the_patient_differs() {
        let a = Admissions::default();
        assert_eq!(a.set("b1", None), None);
        let first = a.set("b1", Some(p("1", "H"))).unwrap();
        assert!(matches!(first, Change::Admitted { previous: None, .. }));
        assert_eq!(a.set("b1", Some(p("1", "H"))), None);
        match a.set("b1", Some(p("1", "OTHER"))).unwrap() {
            Change::Admitted { previous, now } => {
                assert_eq!(previous.as_deref(), Some(&p("1", "H")));
                assert_eq!(*now, p("1", "OTHER"));
            }
            c => panic!("{c:?}"),
        }
        assert_eq!(a.get("b1").as_deref(), Some(&p("1", "OTHER")));
        assert_eq!(a.get("b2"), None);
        assert_eq!(
            a.set("b1", None),
            Some(Change::Discharged {
                previous: Arc::new(p("1", "OTHER"))
            })
        );
        assert_eq!(a.get("b1"), None);
        a.set("b3", Some(p("3", "H")));
        assert_eq!(a.forget("b3").as_deref(), Some(&p("3", "H")));
        assert_eq!(a.get("b3"), None);
        assert_eq!(a.forget("b3"), None);
    }

    /// Records what it is told.
    #[derive(Debug, Default)]
    struct Log(Mutex<Vec<(String, Option<Patient>)>>);

    impl Journal for Log {
        fn keep(&self, bed: &str, patient: Option<&Patient>) {
            self.0.lock().unwrap().push((bed.into(), patient.cloned()));
        }
    }

    #[test]
    fn restored_admissions_tell_their_journal_each_change_and_nothing_else() {
        let log = Arc::new(Log::default());
        let a = Admissions::restored(
            HashMap::from([("b1".to_string(), p("1", "H"))]),
            log.clone(),
        );
        assert_eq!(a.get("b1").as_deref(), Some(&p("1", "H")));
        assert_eq!(a.set("b1", Some(p("1", "H"))), None);
        a.set("b2", None);
        a.forget("b9");
        a.set("b2", Some(p("2", "H")));
        a.set("b1", None);
        a.forget("b2");
        assert_eq!((a.get("b1"), a.get("b2")), (None, None));
        assert_eq!(
            *log.0.lock().unwrap(),
            vec![
                ("b2".to_string(), Some(p("2", "H"))),
                ("b1".to_string(), None),
                ("b2".to_string(), None),
            ]
        );
    }
}
