//! IHE PCD-04 in: a gateway's (or central station's) `ORU^R40` alarm report read into the
//! monitor alarms it carries ([`read`]), and the acknowledgement Holmes answers it with
//! ([`ack`]). Sans-IO: the listener (`serving::ingest::pcd04`) frames, keeps and hands on.
//!
//! What is read (IHE PCD TF-2, ACM; `docs/DEVICES.md` says it for a clinical engineer):
//! - **MSH**: MSH-9 must be `ORU^R40` (else AR, error 200), MSH-10 the control id (else AR,
//!   101), MSH-11 `P` or empty (else AR, 202: training and debugging reports raise no alarm).
//!   MSH-15 `AL`, `ER` or `SU` (IHE asks `AL`) asks for an enhanced-mode commit answer
//!   (`CA`/`CE`/`CR`); otherwise the answer is in original mode (`AA`/`AE`/`AR`).
//! - **The bed**: PV1-3, its bed component (PL.3), else its point of care (PL.1).
//! - **Each alarm**: an OBR and the OBXs after it (a report may carry several). Its id is
//!   OBR-3's entity id, or where the report follows up an earlier one OBR-29's (the filler's
//!   entity id, else the placer's); its onset OBR-7.
//! - **The facets** (one OBX each, OBX-4 `<mds>.<vmd>.<chan>.<metric>.<facet>`; vendors' OBX-3
//!   codes differ, so a facet is known by its OBX-4 suffix or its MDC name): the event
//!   identification (`.1`), whose OBX-3 code or name gives the kind ([`kind_of`]), the phase
//!   (`.3`, `MDC_ATTR_EVENT_PHASE`) and the state (`.4`, `MDC_ATTR_ALARM_STATE`). Phase `end`
//!   or state `inactive` ends the alarm, at OBR-8, else the phase facet's OBX-14, else MSH-7;
//!   an end before the onset is refused.
//! - A report with neither a bed nor an event facet carries no alarm (a keep-alive or a
//!   watchdog): acknowledged, nothing kept.
//!
//! Times are HL7 DTM to the second at least (`YYYYMMDDHHMMSS[.S[S[S[S]]]][+/-ZZZZ]`); one without
//! an offset takes MSH-7's, else UTC. A refusal's reason is at most [`MAX_REASON_CHARS`].

use hl7_parser::Message;
use hl7_parser::builder::prelude::*;
use hl7_parser::message::Segment;

use crate::core::monitor_alarm::MonitorAlarmKind;

/// Longest bed and alarm id taken (as the WebSocket protocol's).
const MAX_ID_CHARS: usize = 64;
/// Longest reason an answer gives (ERR-8), characters.
pub(crate) const MAX_REASON_CHARS: usize = 240;

/// How Holmes answered a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckCode {
    /// Taken (AA, or CA in enhanced mode).
    Accept,
    /// Its content is wrong: a field missing or unreadable (AE / CE). Sent again unchanged,
    /// it is refused again.
    Error,
    /// Not a report Holmes takes at all: another message type or processing id, a broken
    /// header (AR / CR).
    Reject,
    /// Holmes could not keep it now; send it again (AR / CE).
    Retry,
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
    pub(crate) fn error(
        hl7_error: &'static str,
        location: &str,
        reason: impl Into<String>,
    ) -> Refusal {
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

    /// The report could not be kept: the sender should send it again.
    pub(crate) fn retry(reason: impl Into<String>) -> Refusal {
        Refusal {
            code: AckCode::Retry,
            ..Refusal::error("207", "MSH", reason)
        }
    }
}

/// What an answer echoes of the report's header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Header {
    /// MSH-10, answered in MSA-2.
    pub(crate) control_id: String,
    /// MSH-15 asks for a commit answer (enhanced mode).
    pub(crate) enhanced: bool,
    /// MSH-3 and MSH-4, the sender, by component: the answer's MSH-5 and MSH-6.
    pub(crate) sender: (Vec<String>, Vec<String>),
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
    /// One alarm or more (an OBR each), in the report's order.
    Alarms(Vec<GatewayAlarm>),
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
    let components = |q: &str| {
        (1..=3)
            .map(|c| get(&format!("{q}.{c}")))
            .collect::<Vec<_>>()
    };
    let header = Header {
        control_id: get("MSH.10"),
        enhanced: ["AL", "ER", "SU"].contains(&get("MSH.15").as_str()),
        sender: (components("MSH.3"), components("MSH.4")),
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
    let processing = get("MSH.11.1");
    if !(processing.is_empty() || processing == "P") {
        let r = Refusal::reject(
            "202",
            "MSH^1^11",
            format!("processing id {processing:?}: this listener takes production reports (P)"),
        );
        return (Some(header), Err(r));
    }
    (Some(header), report(&msg))
}

/// A field's, component's or subcomponent's value by query (`MSH.9.1`), escapes decoded;
/// empty where absent.
fn value(msg: &Message<'_>, q: &str) -> String {
    msg.query(q)
        .map(|r| msg.separators.decode(r.raw_value()).to_string())
        .unwrap_or_default()
}

/// Field `f`, component `c`, subcomponent `s` of `seg` (not MSH), escapes decoded; empty where
/// absent.
fn part(msg: &Message<'_>, seg: &Segment<'_>, f: usize, c: usize, s: usize) -> String {
    let raw = seg
        .field(f)
        .and_then(|x| x.component(c))
        .and_then(|x| x.subcomponent(s))
        .map(|x| x.value)
        .unwrap_or_default();
    msg.separators.decode(raw).to_string()
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

/// One alarm's segments: its OBR (its place among the OBRs, from 1) and the OBXs after it.
struct Group<'s, 'm> {
    seq: usize,
    obr: &'s Segment<'m>,
    obx: Vec<Obx>,
}

fn groups<'s, 'm>(msg: &'s Message<'m>) -> Vec<Group<'s, 'm>> {
    let mut out: Vec<Group<'s, 'm>> = Vec::new();
    for seg in msg.segments() {
        match seg.name {
            "OBR" => out.push(Group {
                seq: out.len() + 1,
                obr: seg,
                obx: Vec::new(),
            }),
            "OBX" => {
                if let Some(g) = out.last_mut() {
                    g.obx.push(Obx {
                        sub: part(msg, seg, 4, 1, 1),
                        code: part(msg, seg, 3, 1, 1),
                        name: part(msg, seg, 3, 2, 1),
                        value: part(msg, seg, 5, 1, 1),
                        at: part(msg, seg, 14, 1, 1),
                    });
                }
            }
            _ => {}
        }
    }
    out
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
    let groups = groups(msg);
    let with_event: Vec<(&Group<'_, '_>, &Obx)> = groups
        .iter()
        .filter_map(|g| event_facet(&g.obx).map(|e| (g, e)))
        .collect();
    if with_event.is_empty() {
        if bed.is_empty() {
            return Ok(Report::KeepAlive);
        }
        return Err(Refusal::error(
            "101",
            "OBX",
            "no event identification facet (an OBX whose OBX-4 ends in .1)",
        ));
    }
    if bed.is_empty() {
        return Err(Refusal::error("101", "PV1^1^3", "PV1-3 names no bed"));
    }
    check_id(&bed, "PV1^1^3", "the bed (PV1-3)")?;
    // A time without an offset is in MSH-7's; where MSH-7 has none either, UTC.
    let default_offset = offset_of(&get("MSH.7")).unwrap_or(0);
    let message_time = get("MSH.7");
    let mut alarms = Vec::with_capacity(with_event.len());
    for (g, event) in with_event {
        alarms.push(alarm(msg, g, event, &bed, default_offset, &message_time)?);
    }
    Ok(Report::Alarms(alarms))
}

/// The event identification facet among an alarm's OBXs.
fn event_facet(obx: &[Obx]) -> Option<&Obx> {
    obx.iter().find(|o| facet(o) == Some("1")).or_else(|| {
        obx.iter()
            .find(|o| o.name.starts_with("MDC_EVT_") || o.code == "196616")
    })
}

fn alarm(
    msg: &Message<'_>,
    g: &Group<'_, '_>,
    event: &Obx,
    bed: &str,
    default_offset: i64,
    message_time: &str,
) -> Result<GatewayAlarm, Refusal> {
    let at = |f: usize| format!("OBR^{}^{f}", g.seq);
    let id = [(29, 2), (29, 1), (3, 1)]
        .into_iter()
        .map(|(f, c)| part(msg, g.obr, f, c, 1))
        .find(|v| !v.is_empty())
        .unwrap_or_default();
    if id.is_empty() {
        return Err(Refusal::error("101", &at(3), "OBR-3 names no alarm"));
    }
    check_id(&id, &at(3), "the alarm id (OBR-3)")?;
    let obr7 = part(msg, g.obr, 7, 1, 1);
    let onset_ms = time(&obr7, default_offset, &at(7), "the alarm's start (OBR-7)")?;
    let phase = g
        .obx
        .iter()
        .find(|o| facet(o) == Some("3") || o.name == "MDC_ATTR_EVENT_PHASE" || o.code == "68481");
    let state = g
        .obx
        .iter()
        .find(|o| facet(o) == Some("4") || o.name == "MDC_ATTR_ALARM_STATE" || o.code == "68482");
    let ended = phase.is_some_and(|p| p.value.eq_ignore_ascii_case("end"))
        || state.is_some_and(|s| s.value.eq_ignore_ascii_case("inactive"));
    let end_ms = if ended {
        let (t, loc) = [
            (part(msg, g.obr, 8, 1, 1), at(8)),
            (
                phase.map(|p| p.at.clone()).unwrap_or_default(),
                "OBX^^14".into(),
            ),
            (message_time.to_owned(), "MSH^1^7".into()),
        ]
        .into_iter()
        .find(|(t, _)| !t.is_empty())
        .unwrap_or_default();
        let end = time(&t, default_offset, &loc, "the alarm's end (OBR-8)")?;
        if end < onset_ms {
            return Err(Refusal::error(
                "102",
                &loc,
                "the alarm's end is before its start (OBR-7)",
            ));
        }
        Some(end)
    } else {
        None
    };
    Ok(GatewayAlarm {
        bed: bed.to_owned(),
        id,
        kind: kind_of(&event.code, &event.name, &event.value),
        onset_ms,
        end_ms,
    })
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

/// A DTM's offset from UTC, minutes (`+HHMM` or `-HHMM` after the date); None where it has
/// none or it does not read.
fn offset_of(v: &str) -> Option<i64> {
    let at = v
        .char_indices()
        .skip(8)
        .find(|(_, c)| *c == '+' || *c == '-')?
        .0;
    let (sign, digits) = v[at..].split_at(1);
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (i64, i64) = (digits[..2].parse().ok()?, digits[2..].parse().ok()?);
    if h > 23 || m > 59 {
        return None;
    }
    Some(if sign == "-" {
        -(h * 60 + m)
    } else {
        h * 60 + m
    })
}

/// An HL7 DTM, to the second at least, as ms since the epoch; one without an offset is read at
/// `default_offset` minutes from UTC.
fn time(v: &str, default_offset: i64, location: &str, what: &str) -> Result<i64, Refusal> {
    let shown: String = v.chars().take(32).collect();
    let bad = |why: &str| {
        Refusal::error(
            "102",
            location,
            format!("{what} {shown:?} is not an HL7 time to the second ({why})"),
        )
    };
    if v.is_empty() {
        return Err(Refusal::error("101", location, format!("{what} is empty")));
    }
    let cut = v
        .char_indices()
        .skip(8)
        .find(|(_, c)| *c == '+' || *c == '-')
        .map_or(v.len(), |(i, _)| i);
    let (body, zone) = v.split_at(cut);
    let offset = if zone.is_empty() {
        default_offset
    } else {
        offset_of(v).ok_or_else(|| bad("its offset is not +HHMM or -HHMM"))?
    };
    let (whole, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.len() != 14 || !digits(whole) {
        return Err(bad("not YYYYMMDDHHMMSS"));
    }
    if frac.len() > 4 || !digits(frac) {
        return Err(bad("its fraction of a second is not 1-4 digits"));
    }
    let num = |r: std::ops::Range<usize>| whole[r].parse::<i64>().expect("digits");
    let fields = [
        num(0..4),
        num(4..6),
        num(6..8),
        num(8..10),
        num(10..12),
        num(12..14),
    ];
    let milli = format!("{frac:0<3}")[..3].parse::<i64>().expect("digits");
    let [y, mo, d, h, mi, s] = fields;
    let ms = crate::core::time::utc_ms([y, mo, d, h, mi, s, milli]);
    // Out-of-range fields (a 31 February, an hour 24) do not come back as themselves.
    if crate::core::time::utc_fields(ms) != [y, mo, d, h, mi, s, milli] {
        return Err(bad("no such date or time"));
    }
    Ok(ms - offset * 60_000)
}

/// The kind of a monitor alarm by its event facet's OBX-3 (11073-10101 code, MDC name, or a
/// vendor's) and, for a technical alarm coded `MDC_EVT_ALARM`, its value; names are read
/// word by word (`_`-separated), so `SV_TACHY` is no `V_TACHY`: VT (`MDC_EVT_ECG_V_TACHY`,
/// 199832), VF or flutter (`..._V_FIB...`, `..._V_FLUT...`, Philips' `NOM_EVT_ECG_V_FIB_TACHY`
/// 61444, Holmes's own `HOLMES-MONITOR-VF`), asystole (199684), bradycardia (extreme 199694,
/// sinus 199692, any `BRADY`) and tachycardia (extreme 199730, sinus 199870, supraventricular
/// and any other `TACHY`); any other alarm is `other`, stored and shown as received.
pub(crate) fn kind_of(code: &str, name: &str, value: &str) -> MonitorAlarmKind {
    let said = format!("{name} {value}").to_ascii_uppercase();
    let words: Vec<&str> = said
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let pair = |a: &str, b: &str| words.windows(2).any(|w| w[0] == a && w[1].starts_with(b));
    let word = |a: &str| words.contains(&a);
    let is = |codes: &[&str]| codes.contains(&code);
    if pair("V", "FIB") || pair("V", "FLUT") || is(&["61444", "HOLMES-MONITOR-VF"]) {
        MonitorAlarmKind::Vf
    } else if pair("V", "TACHY") || is(&["199832"]) {
        MonitorAlarmKind::Vt
    } else if word("ASYSTOLE") || is(&["199684"]) {
        MonitorAlarmKind::Asystole
    } else if word("BRADY") || is(&["199694", "199692"]) {
        MonitorAlarmKind::Brady
    } else if word("TACHY") || is(&["199730", "199870"]) {
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
        (AckCode::Reject | AckCode::Retry, false) => "AR",
        (AckCode::Accept, true) => "CA",
        (AckCode::Error | AckCode::Retry, true) => "CE",
        (AckCode::Reject, true) => "CR",
    };
    let kind = FieldBuilder::default()
        .with_component(1, "ACK")
        .with_component(2, "R40")
        .with_component(3, "ACK");
    let of = |parts: &[String]| {
        let mut f = FieldBuilder::default();
        for (i, c) in parts.iter().enumerate().filter(|(_, c)| !c.is_empty()) {
            f.set_component(i + 1, c.as_str());
        }
        f
    };
    let mut m = MessageBuilder::new(Separators::default())
        .with_segment(
            SegmentBuilder::new("MSH")
                .with_field_value(3, sender.0)
                .with_field_value(4, sender.1)
                .with_field(5, of(&h.sender.0))
                .with_field(6, of(&h.sender.1))
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
        let reason: String = r.reason.chars().take(MAX_REASON_CHARS).collect();
        m.push_segment(
            SegmentBuilder::new("ERR")
                .with_field(2, loc)
                .with_field(3, error)
                .with_field_value(4, "E")
                .with_field_value(8, reason.as_str()),
        );
    }
    m.to_string()
}

/// HL7 table 0357's words for the codes Holmes answers with.
fn hl7_error_text(code: &str) -> &'static str {
    match code {
        "101" => "Required field missing",
        "102" => "Data type error",
        "103" => "Table value not found",
        "200" => "Unsupported message type",
        "202" => "Unsupported processing id",
        _ => "Application internal error",
    }
}

#[cfg(test)]
#[path = "pcd04_tests.rs"]
mod tests;
