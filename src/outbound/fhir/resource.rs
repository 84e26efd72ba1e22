//! The FHIR R4 resources Holmes sends, built with `serde_json`, and the server's
//! `OperationOutcome` read back. All are `Observation`s:
//!
//! - heart rate: category `vital-signs`, code LOINC `8867-4` and MDC
//!   `urn:iso:std:iso:11073:10101|147842`, `valueQuantity` in UCUM `/min`;
//! - the risk score: category `survey` (R4's category for scored assessments such as Apgar
//!   or early warning scores; R4 has no `device` category), code `HOLMES-RISK` of the local
//!   code system [`HOLMES`], a dimensionless `valueQuantity` (UCUM `1`) or a
//!   `dataAbsentReason` where the window had no score; components: the risk alarm's state
//!   and the window's data quality;
//! - an alarm's start, change and end: R4 has no alarm resource, so an Observation coded MDC
//!   `196616` (MDC_EVT_ALARM) plus the alarm's local kind code, its facets (phase, state,
//!   inactivation state, priority, alert type) as components, `effectivePeriod` from the
//!   raise to the end. An Observation rather than a `Communication`: it records what the
//!   ward saw, searchable by code beside the vitals, and asks nobody to act; routing an
//!   alarm to a person is the alarm-management system's job;
//! - a monitor's own alarm and Holmes's opinion on it: [`monitor`].
//!
//! Every resource names the appliance in `device` (a logical reference by identifier) and
//! the bed in the extension [`BED_EXTENSION`]; where the bed's monitor names the patient the
//! bed is admitted with, `subject` is a logical reference by that identifier (see
//! [`subject`]), else there is none. Its
//! `identifier` (system `fhir.identifier_system`, value bed / kind / time) is what a
//! conditional create (`If-None-Exist`) matches, so a resend is never a second resource.

use serde_json::{Value, json};

use crate::config::FhirConfig;
use crate::core::patient::{Patient, is_uri};
use crate::outbound::message::{ALARM_EVENT, AlarmReport, Draft, Observation, Phase, alarm_codes};

mod monitor;

/// The local code system of Holmes's own codes (the risk score, its alarm, the data quality,
/// the alarm kinds).
pub(crate) const HOLMES: &str = "urn:holmes:fhir:codes";
/// The extension holding the bed a resource is about (a string).
pub(crate) const BED_EXTENSION: &str = "urn:holmes:fhir:bed";
pub(crate) const LOINC: &str = "http://loinc.org";
pub(crate) const MDC: &str = "urn:iso:std:iso:11073:10101";
pub(crate) const UCUM: &str = "http://unitsofmeasure.org";
const CATEGORY: &str = "http://terminology.hl7.org/CodeSystem/observation-category";
const ABSENT: &str = "http://terminology.hl7.org/CodeSystem/data-absent-reason";
/// The prefix of an identifier system made of an authority that is not a URI.
pub(crate) const AUTHORITY_PREFIX: &str = "urn:holmes:fhir:authority:";

/// How many resources a draft becomes: an alarm one; an observation its risk score, and its
/// heart rate where the window has one; a monitor's alarm its phase, and with its start the
/// opinion where its kind is judged.
pub(crate) fn parts(d: &Draft) -> usize {
    match d {
        Draft::Observation(o) => 1 + usize::from(o.heart_rate_bpm.is_some()),
        Draft::Alarm(_) => 1,
        Draft::MonitorAlarm(m) => monitor::parts(m),
    }
}

/// Resource `part` of `d` (see [`parts`]), issued at `created_ms`.
pub(crate) fn render(cfg: &FhirConfig, d: &Draft, part: usize, created_ms: i64) -> String {
    let v = match (d, part) {
        (Draft::Observation(o), 0) => risk(cfg, o, created_ms),
        (Draft::Observation(o), _) => heart_rate(cfg, o, created_ms),
        (Draft::Alarm(a), _) => alarm(cfg, a, created_ms),
        (Draft::MonitorAlarm(m), part) => monitor::render(cfg, m, part, created_ms),
    };
    v.to_string()
}

/// `ms` since the epoch as a FHIR `instant` in UTC.
pub(crate) fn instant(ms: i64) -> String {
    let [y, m, d, h, mi, s, milli] = crate::core::time::utc_fields(ms);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z")
}

/// A coding from an HL7 v2 `code^display^system` of [`message`](crate::outbound::message)
/// (systems `MDC` and the local `99HOLMES`).
fn coding(v2: &str) -> Value {
    let mut it = v2.split('^');
    let (code, display, system) = (
        it.next().unwrap_or(""),
        it.next().unwrap_or(""),
        it.next().unwrap_or(""),
    );
    let system = if system == "MDC" { MDC } else { HOLMES };
    json!({"system": system, "code": code, "display": display})
}

/// The patient as a logical reference: `{"identifier": {"system", "value"}}`. FHIR wants an
/// identifier's system to be a URI: an authority that is one (`urn:oid:...`, `https://...`)
/// is the system as it is; any other (a namespace id such as `HOSP`, as HL7 v2's CX.4 holds)
/// becomes [`AUTHORITY_PREFIX`] and the authority percent-encoded, and is also given whole as
/// the identifier's `assigner.display`.
pub(crate) fn subject(p: &Patient) -> Value {
    if is_uri(&p.authority) {
        json!({"identifier": {"system": p.authority, "value": p.id}})
    } else {
        json!({"identifier": {
            "system": format!("{AUTHORITY_PREFIX}{}", percent(&p.authority)),
            "value": p.id,
            "assigner": {"display": p.authority}
        }})
    }
}

/// What every resource carries: type, identifier, status, times, device, bed, and the
/// patient as `subject` where the bed has one.
fn base(
    cfg: &FhirConfig,
    bed: &str,
    patient: Option<&Patient>,
    kind: &str,
    at_ms: i64,
    created_ms: i64,
) -> Value {
    let mut r = json!({
        "resourceType": "Observation",
        "identifier": [{"system": cfg.identifier_system, "value": format!("{bed}/{kind}/{at_ms}")}],
        "status": "final",
        "issued": instant(created_ms),
        "device": {
            "identifier": {"system": cfg.device_system, "value": cfg.device_id},
            "display": "Holmes"
        },
        "extension": [{"url": BED_EXTENSION, "valueString": bed}],
    });
    if let Some(p) = patient {
        r["subject"] = subject(p);
    }
    r
}

fn category(system: &str, code: &str, display: &str) -> Value {
    json!([{"coding": [{"system": system, "code": code, "display": display}]}])
}

fn heart_rate(cfg: &FhirConfig, o: &Observation, created_ms: i64) -> Value {
    let mut r = base(
        cfg,
        &o.bed,
        o.patient.as_deref(),
        "heart-rate",
        o.at_ms,
        created_ms,
    );
    let hr = o.heart_rate_bpm.unwrap_or(f32::NAN);
    r["category"] = category(CATEGORY, "vital-signs", "Vital Signs");
    r["code"] = json!({
        "coding": [
            {"system": LOINC, "code": "8867-4", "display": "Heart rate"},
            {"system": MDC, "code": "147842", "display": "MDC_ECG_HEART_RATE"}
        ],
        "text": "Heart rate"
    });
    r["effectiveDateTime"] = instant(o.at_ms).into();
    r["valueQuantity"] = json!({
        "value": (f64::from(hr) * 10.0).round() / 10.0,
        "unit": "/min", "system": UCUM, "code": "/min"
    });
    r
}

fn risk(cfg: &FhirConfig, o: &Observation, created_ms: i64) -> Value {
    let mut r = base(
        cfg,
        &o.bed,
        o.patient.as_deref(),
        "risk",
        o.at_ms,
        created_ms,
    );
    r["category"] = category(CATEGORY, "survey", "Survey");
    r["code"] = json!({
        "coding": [{"system": HOLMES, "code": "HOLMES-RISK", "display": "VT/VF risk score"}],
        "text": "VT/VF risk score"
    });
    r["effectiveDateTime"] = instant(o.at_ms).into();
    match o.score {
        Some(s) => {
            r["valueQuantity"] = json!({
                "value": (f64::from(s) * 1000.0).round() / 1000.0,
                "unit": "1", "system": UCUM, "code": "1"
            })
        }
        None => {
            r["dataAbsentReason"] = json!({
                "coding": [{"system": ABSENT, "code": "unknown", "display": "Unknown"}],
                "text": o.quality
            })
        }
    }
    r["component"] = json!([
        {
            "code": {"coding": [{"system": HOLMES, "code": "HOLMES-RISK-ALARM-STATE", "display": "VT/VF risk alarm state"}]},
            "valueCodeableConcept": {"coding": [{"system": HOLMES, "code": if o.risk_alarm { "active" } else { "inactive" }}]}
        },
        {
            "code": {"coding": [{"system": HOLMES, "code": "HOLMES-DATA-QUALITY", "display": "Window data quality"}]},
            "valueCodeableConcept": {"coding": [{"system": HOLMES, "code": o.quality}]}
        }
    ]);
    r
}

fn alarm(cfg: &FhirConfig, a: &AlarmReport, created_ms: i64) -> Value {
    let kind = format!("alarm/{}/{}", a.alarm_id, a.phase.as_str());
    let mut r = base(
        cfg,
        &a.bed,
        a.patient.as_deref(),
        &kind,
        a.at_ms,
        created_ms,
    );
    let (event, _source, priority, alert_type) = alarm_codes(a.kind);
    let state = if a.phase == Phase::End {
        "inactive"
    } else {
        "active"
    };
    r["category"] = category(HOLMES, "alarm", "Alarm event");
    r["code"] =
        json!({"coding": [coding(ALARM_EVENT), coding(event)], "text": event.split('^').nth(1)});
    let mut period = json!({"start": instant(a.raised_ms)});
    if a.phase == Phase::End {
        period["end"] = instant(a.at_ms).into();
    }
    r["effectivePeriod"] = period;
    let facet = |code: &str, display: &str, value: &str| {
        json!({
            "code": {"coding": [{"system": MDC, "code": code, "display": display}]},
            "valueString": value
        })
    };
    r["component"] = json!([
        facet("68481", "MDC_ATTR_EVENT_PHASE", a.phase.as_str()),
        facet("68482", "MDC_ATTR_ALARM_STATE", state),
        facet("68483", "MDC_ATTR_ALARM_INACTIVATION_STATE", a.inactivation),
        facet("68484", "MDC_ATTR_ALARM_PRIORITY", priority),
        facet("68485", "MDC_ATTR_ALERT_TYPE", alert_type),
        {
            "code": {"coding": [{"system": HOLMES, "code": "HOLMES-ALARM-ID", "display": "Alarm id"}]},
            "valueString": a.alarm_id.to_string()
        },
        {
            "code": {"coding": [{"system": HOLMES, "code": "HOLMES-ALARM-PHASE-TIME", "display": "Time of this phase"}]},
            "valueDateTime": instant(a.at_ms)
        }
    ]);
    r
}

/// What a request needs of a resource body: its type and the conditional-create query of its
/// identifier (`identifier=system|value`, percent-encoded, the value's `,`, `|`, `$` and `\`
/// escaped as FHIR search asks).
pub(crate) fn request_of(body: &str) -> Option<(String, String)> {
    let v: Value = serde_json::from_str(body).ok()?;
    let kind = v["resourceType"].as_str()?.to_owned();
    let id = &v["identifier"][0];
    let (system, value) = (id["system"].as_str()?, id["value"].as_str()?);
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, ',' | '|' | '$' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    Some((
        kind,
        format!("identifier={}|{}", percent(system), percent(&escaped)),
    ))
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn percent(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The reason an `OperationOutcome` gives (its issues' severity, code, diagnostics or details
/// and location), else the start of the body; at most 1,000 characters.
pub(crate) fn outcome_reason(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let issues: Vec<String> = serde_json::from_str::<Value>(&text)
        .ok()
        .filter(|v| v["resourceType"] == "OperationOutcome")
        .and_then(|v| v["issue"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|i| {
            let what = i["diagnostics"]
                .as_str()
                .or(i["details"]["text"].as_str())
                .unwrap_or("");
            let at = i["expression"][0].as_str().unwrap_or("");
            format!(
                "{} {}: {what}{}",
                i["severity"].as_str().unwrap_or("error"),
                i["code"].as_str().unwrap_or(""),
                if at.is_empty() {
                    String::new()
                } else {
                    format!(" ({at})")
                }
            )
        })
        .collect();
    let reason = if issues.is_empty() {
        format!("HTTP {status}, no OperationOutcome: {}", text.trim())
    } else {
        format!("HTTP {status}: {}", issues.join("; "))
    };
    reason.chars().take(1000).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::alarms::AlarmKind;

    fn obs(hr: Option<f32>, score: Option<f32>) -> Draft {
        Draft::Observation(Observation {
            bed: "bed-7".into(),
            at_ms: 1_700_000_000_000,
            score,
            heart_rate_bpm: hr,
            risk_alarm: true,
            quality: "scored",
            patient: None,
        })
    }

    /// The ```json blocks of a document, each line or the whole block one resource.
    fn samples(doc: &str) -> Vec<Value> {
        let mut out = Vec::new();
        for block in crate::outbound::message::samples::blocks(doc, "json") {
            let block = block.as_str();
            match serde_json::from_str::<Value>(block) {
                Ok(v) => out.push(v),
                Err(_) => out.extend(block.lines().map(|l| serde_json::from_str(l).unwrap())),
            }
        }
        out
    }

    #[test]
    fn the_sample_resources_of_the_readme_and_operations_are_what_holmes_renders() {
        let cfg = FhirConfig {
            identifier_system: "urn:holmes:0050c2fffe12a3b4".into(),
            device_id: "0050C2FFFE12A3B4".into(),
            ..FhirConfig::default()
        };
        let (t0, o, a) = crate::outbound::message::samples::drafts();
        let (o, a) = (Draft::Observation(o), Draft::Alarm(a));
        let v = |s: String| serde_json::from_str::<Value>(&s).unwrap();
        let hr = v(render(&cfg, &o, 1, t0 + 1_250));
        let risk = v(render(&cfg, &o, 0, t0 + 1_250));
        let start = v(render(&cfg, &a, 0, t0 + 55_320));
        assert_eq!(samples("README.md"), vec![hr.clone()]);
        assert_eq!(samples("docs/OPERATIONS.md"), vec![hr, risk, start]);
    }

    #[test]
    fn observations_carry_their_codes_units_and_identifiers() {
        let cfg = FhirConfig::default();
        let d = obs(Some(72.04), Some(0.91234));
        assert_eq!(parts(&d), 2);
        let risk: Value = serde_json::from_str(&render(&cfg, &d, 0, 5)).unwrap();
        let hr: Value = serde_json::from_str(&render(&cfg, &d, 1, 5)).unwrap();
        assert_eq!(hr["code"]["coding"][0]["code"], "8867-4");
        assert_eq!(hr["code"]["coding"][1]["system"], MDC);
        assert_eq!(hr["code"]["coding"][1]["code"], "147842");
        assert_eq!(hr["valueQuantity"]["value"], 72.0);
        assert_eq!(hr["valueQuantity"]["code"], "/min");
        assert_eq!(hr["category"][0]["coding"][0]["code"], "vital-signs");
        assert_eq!(hr["effectiveDateTime"], "2023-11-14T22:13:20.000Z");
        assert_eq!(
            hr["identifier"][0]["value"],
            "bed-7/heart-rate/1700000000000"
        );
        assert!(hr.get("subject").is_none(), "no patient is known");
        assert_eq!(risk["valueQuantity"]["value"], 0.912);
        assert_eq!(
            risk["component"][0]["valueCodeableConcept"]["coding"][0]["code"],
            "active"
        );
        assert_eq!(risk["extension"][0]["valueString"], "bed-7");
        // No score, no heart rate: one resource, its value absent for a reason.
        let d = obs(None, None);
        assert_eq!(parts(&d), 1);
        let r: Value = serde_json::from_str(&render(&cfg, &d, 0, 5)).unwrap();
        assert!(r.get("valueQuantity").is_none());
        assert_eq!(r["dataAbsentReason"]["text"], "scored");
    }

    #[test]
    fn an_alarm_phase_is_an_alarm_event_observation_with_its_facets() {
        let cfg = FhirConfig::default();
        let d = Draft::Alarm(AlarmReport {
            alarm_id: 9,
            bed: "b|1".into(),
            kind: AlarmKind::Lost,
            phase: Phase::End,
            raised_ms: 1_000,
            at_ms: 61_000,
            inactivation: "alert-acknowledged",
            patient: None,
        });
        let body = render(&cfg, &d, 0, 70_000);
        let r: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(r["code"]["coding"][0]["code"], "196616");
        assert_eq!(r["code"]["coding"][1]["code"], "HOLMES-SIGNAL-LOST");
        assert_eq!(r["effectivePeriod"]["end"], "1970-01-01T00:01:01.000Z");
        let facets: Vec<&str> = r["component"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["valueString"].as_str())
            .collect();
        assert_eq!(
            facets,
            ["end", "inactive", "alert-acknowledged", "PM", "ST", "9"]
        );
        let (kind, query) = request_of(&body).unwrap();
        assert_eq!(kind, "Observation");
        assert_eq!(
            query,
            "identifier=urn%3Aholmes%3A0000000000000000|b%5C%7C1%2Falarm%2F9%2Fend%2F61000"
        );
    }

    #[test]
    fn an_admitted_beds_resources_name_the_patient_by_identifier() {
        let cfg = FhirConfig::default();
        let who = |authority: &str| {
            Some(std::sync::Arc::new(Patient {
                id: "MRN 00417".into(),
                authority: authority.into(),
            }))
        };
        let mut d = obs(Some(72.0), Some(0.5));
        if let Draft::Observation(o) = &mut d {
            o.patient = who("urn:oid:1.2.840.99.7");
        }
        for part in 0..2 {
            let r: Value = serde_json::from_str(&render(&cfg, &d, part, 5)).unwrap();
            assert_eq!(
                r["subject"],
                json!({"identifier": {"system": "urn:oid:1.2.840.99.7", "value": "MRN 00417"}})
            );
        }
        let a = Draft::Alarm(AlarmReport {
            alarm_id: 3,
            bed: "bed-7".into(),
            kind: AlarmKind::Risk,
            phase: Phase::Start,
            raised_ms: 1_000,
            at_ms: 1_000,
            inactivation: "enabled",
            patient: who("St Mary's/MRN"),
        });
        let r: Value = serde_json::from_str(&render(&cfg, &a, 0, 5)).unwrap();
        assert_eq!(
            r["subject"]["identifier"],
            json!({
                "system": "urn:holmes:fhir:authority:St%20Mary%27s%2FMRN",
                "value": "MRN 00417",
                "assigner": {"display": "St Mary's/MRN"}
            })
        );
    }

    #[test]
    fn an_operation_outcome_gives_the_reason() {
        let body = br#"{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"structure","details":{"text":"Invalid additional property"},"expression":["Observation.bogus"]}]}"#;
        assert_eq!(
            outcome_reason(400, body),
            "HTTP 400: error structure: Invalid additional property (Observation.bogus)"
        );
        assert_eq!(
            outcome_reason(422, b"nope"),
            "HTTP 422, no OperationOutcome: nope"
        );
    }
}
