//! IHE PCD-04 in: a gateway's (or central station's) `ORU^R40` alarm report read into the
//! monitor alarm it carries ([`read`]), and the acknowledgement Holmes answers it with
//! ([`ack`]). Sans-IO: the listener (`serving::ingest::pcd04`) frames, keeps and hands on.
//!
//! What is read (IHE PCD TF-2, ACM; `docs/DEVICES.md` says it for a clinical engineer):
//! - **MSH**: MSH-9 must be `ORU^R40` (else AR, error 200), MSH-10 the control id (else AR,
//!   101); MSH-15 set (`AL`, as IHE asks) asks for an enhanced-mode answer (`CA`/`CE`/`CR`),
//!   unset for an original-mode one (`AA`/`AE`/`AR`).
//! - **The bed**: PV1-3, its bed component (PL.3), else its point of care (PL.1).
//! - **The alarm**: its id is OBR-3's entity id, or OBR-29's where the report follows up an
//!   earlier one; its onset OBR-7.
//! - **The facets** (one OBX each, OBX-4 `<mds>.<vmd>.<chan>.<metric>.<facet>`; vendors' OBX-3
//!   codes differ, so a facet is known by its OBX-4 suffix or its MDC name): the event
//!   identification (`.1`), whose OBX-3 code or name gives the kind ([`kind_of`]), the phase
//!   (`.3`, `MDC_ATTR_EVENT_PHASE`) and the state (`.4`, `MDC_ATTR_ALARM_STATE`). Phase `end`
//!   or state `inactive` ends the alarm, at OBR-8, else the phase facet's OBX-14, else MSH-7.
//! - A report with neither a bed nor an event facet carries no alarm (a keep-alive or a
//!   watchdog): acknowledged, nothing kept.
//!
//! Times are HL7 DTM to the second at least; one without an offset is read as UTC.

use hl7_parser::Message;
use hl7_parser::builder::prelude::*;

use crate::core::monitor_alarm::MonitorAlarmKind;

/// Longest bed and alarm id taken (as the WebSocket protocol's).
const MAX_ID_CHARS: usize = 64;

/// How Holmes answered a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckCode {
    /// Taken (AA, or CA in enhanced mode).
    Accept,
    /// Its content is wrong: a field missing or unreadable (AE / CE).
    Error,
    /// Not a report Holmes takes at all: another message type, a broken header (AR / CR).
    Reject,
}

/// A report refused, and why: HL7 table 0357's code, where (ERR-2, `SEG^seq^field`) and what
/// a reader is told (ERR-8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) code: AckCode,
    pub(crate) hl7_error: &'static str,
    pub(crate) location: String,
    pub(crate) reason: String,
}

impl Refusal {
    fn error(hl7_error: &'static str, location: &str, reason: impl Into<String>) -> Refusal {
        Refusal {
            code: AckCode::Error,
            hl7_error,
            location: location.to_owned(),
            reason: reason.into(),
        }
    }

    fn reject(hl7_error: &'static str, location: &str, reason: impl Into<String>) -> Refusal {
        Refusal {
            code: AckCode::Reject,
            ..Refusal::error(hl7_error, location, reason)
        }
    }
}

/// What an answer echoes of the report's header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Header {
    /// MSH-10, answered in MSA-2.
    pub(crate) control_id: String,
    /// MSH-15 was set: answer in enhanced mode.
    pub(crate) enhanced: bool,
    /// MSH-3 and MSH-4, the sender: the answer's MSH-5 and MSH-6.
    pub(crate) sender: (String, String),
}

/// A monitor's alarm as a gateway reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GatewayAlarm {
    pub(crate) bed: String,
    pub(crate) id: String,
    pub(crate) kind: MonitorAlarmKind,
    /// OBR-7, ms since the epoch.
    pub(crate) onset_ms: i64,
    /// Where the report ends the alarm: when, ms since the epoch.
    pub(crate) end_ms: Option<i64>,
}

/// What a report carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Report {
    /// No alarm (a keep-alive, a watchdog): acknowledged, nothing kept.
    KeepAlive,
    Alarm(GatewayAlarm),
}

/// Reads one MLLP frame's text: the header an answer needs (None where MSH is unreadable),
/// and the report or why it is refused.
pub(crate) fn read(text: &str) -> (Option<Header>, Result<Report, Refusal>) {
    let text = text.trim_end_matches(['\r', '\n']);
    let msg = match hl7_parser::parse_message_with_lenient_newlines(text) {
        Ok(m) => m,
        Err(e) => {
            let r = Refusal::reject("102", "MSH", format!("not an HL7 v2 message: {e}"));
            return (None, Err(r));
        }
    };
    let get = |q: &str| value(&msg, q);
    let header = Header {
        control_id: get("MSH.10"),
        enhanced: !get("MSH.15").is_empty(),
        sender: (get("MSH.3"), get("MSH.4")),
    };
    if header.control_id.is_empty() {
        let r = Refusal::reject(
            "101",
            "MSH^1^10",
            "MSH-10, the message control id, is empty",
        );
        return (Some(header), Err(r));
    }
    if get("MSH.9.1") != "ORU" || get("MSH.9.2") != "R40" {
        let r = Refusal::reject(
            "200",
            "MSH^1^9",
            format!(
                "message type {:?}: this listener takes IHE PCD-04 ORU^R40 alarm reports",
                get("MSH.9")
            ),
        );
        return (Some(header), Err(r));
    }
    (Some(header), report(&msg))
}

/// A field's, component's or subcomponent's value by query (`OBR.3.1`), escapes decoded;
/// empty where absent.
fn value(msg: &Message<'_>, q: &str) -> String {
    msg.query(q)
        .map(|r| msg.separators.decode(r.raw_value()).to_string())
        .unwrap_or_default()
}

/// One OBX: its sub-id (OBX-4), code (OBX-3.1) and name (OBX-3.2), value (OBX-5, first
/// component) and time (OBX-14).
struct Obx {
    sub: String,
    code: String,
    name: String,
    value: String,
    at: String,
}

fn obxs(msg: &Message<'_>) -> Vec<Obx> {
    let field = |s: &hl7_parser::message::Segment<'_>, f: usize, c: usize| {
        let raw = s
            .field(f)
            .and_then(|x| x.component(c))
            .map(|x| x.raw_value())
            .unwrap_or_default();
        msg.separators.decode(raw).to_string()
    };
    msg.segments()
        .filter(|s| s.name == "OBX")
        .map(|s| Obx {
            sub: field(s, 4, 1),
            code: field(s, 3, 1),
            name: field(s, 3, 2),
            value: field(s, 5, 1),
            at: field(s, 14, 1),
        })
        .collect()
}

/// The facet an OBX is: the last part of a five-part OBX-4.
fn facet(o: &Obx) -> Option<&str> {
    let parts: Vec<&str> = o.sub.split('.').collect();
    (parts.len() == 5).then(|| parts[4])
}

fn report(msg: &Message<'_>) -> Result<Report, Refusal> {
    let get = |q: &str| value(msg, q);
    let bed = Some(get("PV1.3.3"))
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| get("PV1.3.1"));
    let obx = obxs(msg);
    let event = obx.iter().find(|o| facet(o) == Some("1")).or_else(|| {
        obx.iter()
            .find(|o| o.name.starts_with("MDC_EVT_") || o.code == "196616")
    });
    let Some(event) = event else {
        if bed.is_empty() {
            return Ok(Report::KeepAlive);
        }
        return Err(Refusal::error(
            "101",
            "OBX",
            "no event identification facet (an OBX whose OBX-4 ends in .1)",
        ));
    };
    if bed.is_empty() {
        return Err(Refusal::error("101", "PV1^1^3", "PV1-3 names no bed"));
    }
    check_id(&bed, "PV1^1^3", "the bed (PV1-3)")?;
    let id = Some(get("OBR.29.1"))
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| get("OBR.3.1"));
    if id.is_empty() {
        return Err(Refusal::error("101", "OBR^1^3", "OBR-3 names no alarm"));
    }
    check_id(&id, "OBR^1^3", "the alarm id (OBR-3)")?;
    let onset_ms = time(&get("OBR.7"), "OBR^1^7", "the alarm's start (OBR-7)")?;
    let phase = obx
        .iter()
        .find(|o| facet(o) == Some("3") || o.name == "MDC_ATTR_EVENT_PHASE" || o.code == "68481");
    let state = obx
        .iter()
        .find(|o| facet(o) == Some("4") || o.name == "MDC_ATTR_ALARM_STATE" || o.code == "68482");
    let ended = phase.is_some_and(|p| p.value.eq_ignore_ascii_case("end"))
        || state.is_some_and(|s| s.value.eq_ignore_ascii_case("inactive"));
    let end_ms = if ended {
        let (at, loc) = [
            (get("OBR.8"), "OBR^1^8"),
            (phase.map(|p| p.at.clone()).unwrap_or_default(), "OBX^^14"),
            (get("MSH.7"), "MSH^1^7"),
        ]
        .into_iter()
        .find(|(t, _)| !t.is_empty())
        .unwrap_or_default();
        Some(time(&at, loc, "the alarm's end (OBR-8)")?)
    } else {
        None
    };
    Ok(Report::Alarm(GatewayAlarm {
        bed,
        id,
        kind: kind_of(&event.code, &event.name, &event.value),
        onset_ms,
        end_ms,
    }))
}

fn check_id(v: &str, location: &str, what: &str) -> Result<(), Refusal> {
    if v.chars().count() > MAX_ID_CHARS || v.chars().any(char::is_control) {
        return Err(Refusal::error(
            "102",
            location,
            format!("{what} must be 1-{MAX_ID_CHARS} characters without control characters"),
        ));
    }
    Ok(())
}

/// An HL7 DTM, to the second at least, as ms since the epoch (UTC where it has no offset).
fn time(v: &str, location: &str, what: &str) -> Result<i64, Refusal> {
    let bad = |why: &str| {
        Refusal::error(
            "102",
            location,
            format!("{what} {v:?} is not an HL7 time to the second ({why})"),
        )
    };
    if v.is_empty() {
        return Err(Refusal::error("101", location, format!("{what} is empty")));
    }
    let t = hl7_parser::datetime::parse_timestamp(v, false).map_err(|e| bad(&e.to_string()))?;
    let (Some(mo), Some(d), Some(h), Some(mi), Some(s)) =
        (t.month, t.day, t.hour, t.minute, t.second)
    else {
        return Err(bad("too coarse"));
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return Err(bad("out of range"));
    }
    let milli = i64::from(t.microsecond.unwrap_or(0) / 1000);
    let fields = [t.year, mo.into(), d.into(), h.into(), mi.into(), s.into()].map(i64::from);
    let [y, mo, d, h, mi, s] = fields;
    let local = crate::core::time::utc_ms([y, mo, d, h, mi, s, milli]);
    let offset = t.offset.map_or(0, |o| {
        let m = i64::from(o.hours.unsigned_abs()) * 60 + i64::from(o.minutes);
        if o.hours < 0 { -m } else { m }
    });
    Ok(local - offset * 60_000)
}

/// The kind of a monitor alarm by its event facet's OBX-3 (11073-10101 code, MDC name, or a
/// vendor's) and, for a technical alarm coded `MDC_EVT_ALARM`, its value: VT
/// (`MDC_EVT_ECG_V_TACHY`, 199832), VF or flutter (`..._V_FIB...`, `..._V_FLUT...`, Philips'
/// `NOM_EVT_ECG_V_FIB_TACHY` 61444, Holmes's own `HOLMES-MONITOR-VF`), asystole (199684),
/// extreme or sinus bradycardia and tachycardia (199694, 199692; 199730, 199870); any other
/// alarm is `other`, stored and shown as received.
pub(crate) fn kind_of(code: &str, name: &str, value: &str) -> MonitorAlarmKind {
    let said = format!("{code} {name} {value}").to_ascii_uppercase();
    let has = |s: &str| said.contains(s);
    let is = |codes: &[&str]| codes.contains(&code);
    if has("V_FIB") || has("V_FLUT") || is(&["61444", "HOLMES-MONITOR-VF"]) {
        MonitorAlarmKind::Vf
    } else if has("V_TACHY") || is(&["199832"]) {
        MonitorAlarmKind::Vt
    } else if has("ASYSTOLE") || is(&["199684"]) {
        MonitorAlarmKind::Asystole
    } else if has("BRADY") || is(&["199694", "199692"]) {
        MonitorAlarmKind::Brady
    } else if has("TACHY") || is(&["199730", "199870"]) {
        MonitorAlarmKind::Tachy
    } else {
        MonitorAlarmKind::Other
    }
}

/// The answer to a report with `header` (None: unreadable), taken (`Ok`) or refused:
/// `ACK^R40^ACK` from `sender` (MSH-3, MSH-4), MSA-1 in the report's mode, MSA-2 its control
/// id, and for a refusal an ERR with the location, code and reason.
pub(crate) fn ack(
    header: Option<&Header>,
    outcome: Result<(), &Refusal>,
    sender: (&str, &str),
    control_id: &str,
    at_ms: i64,
) -> String {
    let h = header.cloned().unwrap_or_default();
    let code = match outcome {
        Ok(()) => AckCode::Accept,
        Err(r) => r.code,
    };
    let msa1 = match (code, h.enhanced) {
        (AckCode::Accept, false) => "AA",
        (AckCode::Error, false) => "AE",
        (AckCode::Reject, false) => "AR",
        (AckCode::Accept, true) => "CA",
        (AckCode::Error, true) => "CE",
        (AckCode::Reject, true) => "CR",
    };
    let kind = FieldBuilder::default()
        .with_component(1, "ACK")
        .with_component(2, "R40")
        .with_component(3, "ACK");
    let mut m = MessageBuilder::new(Separators::default())
        .with_segment(
            SegmentBuilder::new("MSH")
                .with_field_value(3, sender.0)
                .with_field_value(4, sender.1)
                .with_field_value(5, h.sender.0.as_str())
                .with_field_value(6, h.sender.1.as_str())
                .with_field_value(7, crate::core::time::hl7_dtm(at_ms))
                .with_field(9, kind)
                .with_field_value(10, control_id)
                .with_field_value(11, "P")
                .with_field_value(12, "2.6"),
        )
        .with_segment(
            SegmentBuilder::new("MSA")
                .with_field_value(1, msa1)
                .with_field_value(2, h.control_id.as_str()),
        );
    if let Err(r) = outcome {
        let mut loc = FieldBuilder::default();
        for (i, part) in r.location.split('^').enumerate() {
            loc.set_component(i + 1, part);
        }
        let error = FieldBuilder::default()
            .with_component(1, r.hl7_error)
            .with_component(2, hl7_error_text(r.hl7_error))
            .with_component(3, "HL70357");
        m.push_segment(
            SegmentBuilder::new("ERR")
                .with_field(2, loc)
                .with_field(3, error)
                .with_field_value(4, "E")
                .with_field_value(8, r.reason.as_str()),
        );
    }
    m.to_string()
}

/// HL7 table 0357's words for the codes Holmes answers with.
fn hl7_error_text(code: &str) -> &'static str {
    match code {
        "101" => "Required field missing",
        "102" => "Data type error",
        "200" => "Unsupported message type",
        _ => "Application internal error",
    }
}

#[cfg(test)]
#[path = "pcd04_tests.rs"]
mod tests;
