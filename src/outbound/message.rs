//! The HL7 v2.6 messages Holmes sends and the answers it reads, built and parsed with the
//! `hl7-parser` crate (which escapes every value; a bed id holding `|` or `^` stays one
//! value): IHE PCD-01 `ORU^R01` observation reports, IHE PCD-04 `ORU^R40` alarm reports and
//! keep-alives, the monitors' own alarms with Holmes's opinions as PCD-04 reports too
//! ([`monitor`]), and the receiver's `ACK` / `ORA^R41`.
//!
//! Codes: the heart rate, units, facets and sources are ISO/IEEE 11073-10101 (MDC) codes; the
//! risk score, the risk alarm, its state and the data quality have none, so they carry local
//! codes of the local coding system `99HOLMES` (HL7's `99` prefix for local tables; the
//! docs/OPERATIONS.md lists them). Times are UTC,
//! `YYYYMMDDHHMMSS.SSS+0000`; an alarm keeps its original times however late it is sent.

use std::sync::Arc;

use hl7_parser::builder::prelude::*;

pub(crate) mod monitor;
pub(crate) use monitor::MonitorAlarmReport;

use crate::board::alarms::AlarmKind;
use crate::config::Hl7Config;
use crate::core::patient::{Authority, Patient};

/// OBX-3 of the risk score (PCD-01) and the risk alarm's source (PCD-04).
pub(crate) const RISK_SCORE: &str = "HOLMES-RISK^VT/VF risk score^99HOLMES";
/// OBX-3 of the risk alarm's state in an observation report: `active` or `inactive`.
pub(crate) const RISK_ALARM_STATE: &str = "HOLMES-RISK-ALARM-STATE^VT/VF risk alarm state^99HOLMES";
/// OBX-3 of the window's data quality: the score's status (`scored`, `partial`,
/// `insufficient_signal`, `superseded`, `dropped`).
pub(crate) const DATA_QUALITY: &str = "HOLMES-DATA-QUALITY^Window data quality^99HOLMES";
pub(crate) const HEART_RATE: &str = "147842^MDC_ECG_HEART_RATE^MDC";
const BEATS_PER_MIN: &str = "264864^MDC_DIM_BEAT_PER_MIN^MDC";
const DIMENSIONLESS: &str = "262656^MDC_DIM_DIMLESS^MDC";
const AUTO_MEASUREMENT: &str = "AMEAS^auto-measurement^MDC";
const MONITORING: &str = "182777000^monitoring of patient^SCT";
pub(crate) const ALARM_EVENT: &str = "196616^MDC_EVT_ALARM^MDC";
const KEEP_ALIVE: &str = "HOLMES-KEEP-ALIVE^Keep-alive^99HOLMES";

#[derive(Debug, thiserror::Error)]
pub(crate) enum MessageError {
    #[error("the answer is not UTF-8")]
    NotText,
    #[error("the answer does not parse as HL7: {0}")]
    Parse(String),
    #[error("the answer is {0:?}, not an ACK or ORA^R41")]
    NotAnAck(String),
    #[error("the answer's MSA-1 is {0:?}, not AA, AE, AR, CA, CE or CR")]
    BadCode(String),
}

/// What one observation report says of a bed: its latest committed window.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Observation {
    pub(crate) bed: String,
    /// The window's end, on the bed's timeline (OBR-7, OBX-14).
    pub(crate) at_ms: i64,
    pub(crate) score: Option<f32>,
    pub(crate) heart_rate_bpm: Option<f32>,
    /// The bed's risk alarm is active.
    pub(crate) risk_alarm: bool,
    /// The score's status ([`DATA_QUALITY`]).
    pub(crate) quality: &'static str,
    /// The patient the bed is admitted with when the report is made, if any (PID-3).
    pub(crate) patient: Option<Arc<Patient>>,
}

/// An alarm report's phase (facet 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Start,
    /// Acknowledged, silenced, or its silence ran out.
    Continue,
    End,
}

impl Phase {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Phase::Start => "start",
            Phase::Continue => "continue",
            Phase::End => "end",
        }
    }
}

/// One alarm report (PCD-04).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AlarmReport {
    /// The dashboard's alarm id: OBR-2 and OBR-3, the same in every phase of one alarm.
    pub(crate) alarm_id: i64,
    pub(crate) bed: String,
    pub(crate) kind: AlarmKind,
    pub(crate) phase: Phase,
    /// When the ward raised it (OBR-7).
    pub(crate) raised_ms: i64,
    /// When this phase happened (OBX-14; OBR-8 at the end).
    pub(crate) at_ms: i64,
    /// `enabled`, `alert-acknowledged` or `audio-paused` (facet 5).
    pub(crate) inactivation: &'static str,
    /// The patient the bed is admitted with when the report is made, if any (PID-3).
    pub(crate) patient: Option<Arc<Patient>>,
}

/// What goes into the outbox; rendered once its MSH-10 is known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Draft {
    Observation(Observation),
    Alarm(AlarmReport),
    /// A monitor's own alarm, with Holmes's opinion on it.
    MonitorAlarm(MonitorAlarmReport),
}

impl Draft {
    pub(crate) fn bed(&self) -> &str {
        match self {
            Draft::Observation(o) => &o.bed,
            Draft::Alarm(a) => &a.bed,
            Draft::MonitorAlarm(m) => &m.bed,
        }
    }
}

/// Event code (facet 1), source (facet 2), priority and alert type of an alarm kind.
pub(crate) fn alarm_codes(
    kind: AlarmKind,
) -> (&'static str, &'static str, &'static str, &'static str) {
    const MDS: &str = "69965^MDC_DEV_MON_PHYSIO_MULTI_PARAM_MDS^MDC";
    match kind {
        AlarmKind::Risk => (
            "HOLMES-RISK-ALARM^VT/VF risk alarm^99HOLMES",
            RISK_SCORE,
            "PH",
            "SP",
        ),
        AlarmKind::LeadOff => (
            "HOLMES-LEAD-OFF^ECG lead off^99HOLMES",
            "131328^MDC_ECG_ELEC_POTL^MDC",
            "PL",
            "ST",
        ),
        AlarmKind::Stale => (
            "HOLMES-SIGNAL-STALE^Monitor data late^99HOLMES",
            MDS,
            "PL",
            "ST",
        ),
        AlarmKind::Lost => (
            "HOLMES-SIGNAL-LOST^Monitor signal lost^99HOLMES",
            MDS,
            "PM",
            "ST",
        ),
    }
}

/// `ms` since the epoch as an HL7 DTM in UTC.
pub(crate) use crate::core::time::hl7_dtm as hl7_time;

/// A field of `^`-separated components (each escaped on rendering).
fn coded(value: &str) -> FieldBuilder {
    let mut f = FieldBuilder::default();
    for (i, c) in value.split('^').enumerate() {
        f.set_component(i + 1, c);
    }
    f
}

/// A field of repetitions (`~`).
fn repeated(values: &[&str]) -> FieldBuilder {
    FieldBuilder::with_repeats(
        values
            .iter()
            .map(|v| RepeatBuilder::with_value((*v).to_owned()))
            .collect(),
    )
}

fn msh(cfg: &Hl7Config, kind: &str, control_id: &str, at_ms: i64, profile: &str) -> SegmentBuilder {
    SegmentBuilder::new("MSH")
        .with_field(3, coded(&cfg.sending_application))
        .with_field(4, coded(&cfg.sending_facility))
        .with_field(5, coded(&cfg.receiving_application))
        .with_field(6, coded(&cfg.receiving_facility))
        .with_field_value(7, hl7_time(at_ms))
        .with_field(9, coded(kind))
        .with_field_value(10, control_id)
        .with_field_value(11, "P")
        .with_field_value(12, "2.6")
        .with_field_value(15, "AL")
        .with_field_value(16, "NE")
        .with_field_value(18, "UNICODE UTF-8")
        .with_field(21, coded(profile))
}

/// The patient and the bed: PID-3 is the patient the bed's monitor said it is admitted with
/// (`id^^^authority^MR`: CX.1, CX.4 ([`assigning_authority`]) and the identifier type code,
/// medical record number), empty where it named none; PV1-3 is the bed (its third component, PL.3).
fn patient(bed: &str, who: Option<&Patient>) -> [SegmentBuilder; 2] {
    let mut pid = SegmentBuilder::new("PID").with_field_value(1, "1");
    if let Some(p) = who {
        pid = pid.with_field(
            3,
            FieldBuilder::default()
                .with_component(1, p.id.as_str())
                .with_component(4, assigning_authority(p))
                .with_component(5, "MR"),
        );
    }
    [
        pid,
        SegmentBuilder::new("PV1")
            .with_field_value(2, "I")
            .with_field(3, FieldBuilder::default().with_component(3, bed)),
    ]
}

/// CX.4, an HD: a namespace id (HD.1, `HOSP`) as it is; an OID (`urn:oid:1.2.3`) as the
/// universal id with its type, `&1.2.3&ISO`; any other URI as `&<uri>&URI`. The authority's
/// check keeps `&` and the other delimiters out, so the subcomponents hold.
fn assigning_authority(p: &Patient) -> ComponentBuilder {
    match p.authority_kind() {
        Authority::Namespace(n) => ComponentBuilder::from(n),
        Authority::Oid(oid) => ComponentBuilder::default()
            .with_subcomponent(2, oid)
            .with_subcomponent(3, "ISO"),
        Authority::Uri(uri) => ComponentBuilder::default()
            .with_subcomponent(2, uri)
            .with_subcomponent(3, "URI"),
    }
}

/// One OBX: set id, value type, code, sub-id (OBX-4), value, units, time, equipment.
struct Obx<'a> {
    set: usize,
    kind: &'a str,
    code: &'a str,
    sub: String,
    value: String,
    units: Option<&'a str>,
    flags: &'a [&'a str],
    at_ms: i64,
    method: bool,
}

fn obx(cfg: &Hl7Config, o: Obx<'_>) -> SegmentBuilder {
    let mut s = SegmentBuilder::new("OBX")
        .with_field_value(1, o.set)
        .with_field_value(2, o.kind)
        .with_field(3, coded(o.code))
        .with_field_value(4, o.sub)
        .with_field_value(5, o.value)
        .with_field_value(11, "R")
        .with_field_value(14, hl7_time(o.at_ms))
        .with_field(18, coded(&cfg.equipment_id));
    if let Some(u) = o.units {
        s = s.with_field(6, coded(u));
    }
    if !o.flags.is_empty() {
        s = s.with_field(8, repeated(o.flags));
    }
    if o.method {
        s = s.with_field(17, coded(AUTO_MEASUREMENT));
    }
    s
}

/// Renders `draft` as the message with MSH-10 `control_id`, sent at `created_ms` (MSH-7).
pub(crate) fn render(cfg: &Hl7Config, draft: &Draft, control_id: &str, created_ms: i64) -> String {
    match draft {
        Draft::Observation(o) => observation(cfg, o, control_id, created_ms),
        Draft::Alarm(a) => alarm(cfg, a, control_id, created_ms),
        Draft::MonitorAlarm(m) => monitor::render(cfg, m, control_id, created_ms),
    }
}

/// An IHE PCD-01 observation report.
/// An observation OBX: its OBX-4 sub-id's last part, value type, code, value, units and
/// whether it is measured.
type ObservationRow = (
    u8,
    &'static str,
    &'static str,
    String,
    Option<&'static str>,
    bool,
);

fn observation(cfg: &Hl7Config, o: &Observation, control_id: &str, created_ms: i64) -> String {
    let mut m = MessageBuilder::new(Separators::default()).with_segment(msh(
        cfg,
        "ORU^R01^ORU_R01",
        control_id,
        created_ms,
        &cfg.pcd01_profile,
    ));
    for s in patient(&o.bed, o.patient.as_deref()) {
        m.push_segment(s);
    }
    let app = &cfg.sending_application;
    m.push_segment(
        SegmentBuilder::new("OBR")
            .with_field_value(1, "1")
            .with_field(2, coded(&format!("{control_id}^{app}")))
            .with_field(3, coded(&format!("{control_id}^{app}")))
            .with_field(4, coded(MONITORING))
            .with_field_value(7, hl7_time(o.at_ms)),
    );
    // Each metric has a fixed OBX-4 sub-id (score .1, heart rate .2, alarm state .3, quality
    // .4), present or not, so a receiver can key on it.
    let mut rows: Vec<ObservationRow> = Vec::new();
    if let Some(s) = o.score {
        rows.push((
            1,
            "NM",
            RISK_SCORE,
            format!("{s:.3}"),
            Some(DIMENSIONLESS),
            true,
        ));
    }
    if let Some(hr) = o.heart_rate_bpm {
        rows.push((
            2,
            "NM",
            HEART_RATE,
            format!("{hr:.0}"),
            Some(BEATS_PER_MIN),
            true,
        ));
    }
    let state = if o.risk_alarm { "active" } else { "inactive" };
    rows.push((3, "ST", RISK_ALARM_STATE, state.to_owned(), None, false));
    rows.push((4, "ST", DATA_QUALITY, o.quality.to_owned(), None, false));
    for (i, (sub, kind, code, value, units, method)) in rows.into_iter().enumerate() {
        m.push_segment(obx(
            cfg,
            Obx {
                set: i + 1,
                kind,
                code,
                sub: format!("1.1.1.{sub}"),
                value,
                units,
                flags: &[],
                at_ms: o.at_ms,
                method,
            },
        ));
    }
    m.to_string()
}

/// The head of an IHE PCD-04 `ORU^R40` with MSH-10 `control_id`, made at `created_ms`: the MSH,
/// then the PID and PV1 of `bed` and its patient.
pub(super) fn pcd04_head(
    cfg: &Hl7Config,
    bed: &str,
    who: Option<&Patient>,
    control_id: &str,
    created_ms: i64,
) -> MessageBuilder {
    let mut m = MessageBuilder::new(Separators::default()).with_segment(msh(
        cfg,
        "ORU^R40^ORU_R40",
        control_id,
        created_ms,
        &cfg.pcd04_profile,
    ));
    for s in patient(bed, who) {
        m.push_segment(s);
    }
    m
}

/// An IHE PCD-04 alarm report: one OBR for the alarm, seven facets under OBX-4 `1.1.1.1.n`.
fn alarm(cfg: &Hl7Config, a: &AlarmReport, control_id: &str, created_ms: i64) -> String {
    let mut m = pcd04_head(cfg, &a.bed, a.patient.as_deref(), control_id, created_ms);
    let app = &cfg.sending_application;
    let id = format!("{}^{app}", a.alarm_id);
    let mut obr = SegmentBuilder::new("OBR")
        .with_field_value(1, "1")
        .with_field(2, coded(&id))
        .with_field(3, coded(&id))
        .with_field(4, coded(ALARM_EVENT))
        .with_field_value(7, hl7_time(a.raised_ms));
    if a.phase == Phase::End {
        obr = obr.with_field_value(8, hl7_time(a.at_ms));
    }
    m.push_segment(obr);
    let (event, source, priority, kind) = alarm_codes(a.kind);
    let state = if a.phase == Phase::End {
        "inactive"
    } else {
        "active"
    };
    let flags = [priority, kind];
    let none: &[&str] = &[];
    let facets: [(&str, &str, &[&str]); 7] = [
        (event, a.kind.as_str(), &flags[..]),
        (source, "", none),
        (cfg.facet_phase.as_str(), a.phase.as_str(), none),
        (cfg.facet_state.as_str(), state, none),
        (cfg.facet_inactivation.as_str(), a.inactivation, none),
        (cfg.facet_priority.as_str(), priority, none),
        (cfg.facet_type.as_str(), kind, none),
    ];
    for (i, (code, value, flags)) in facets.into_iter().enumerate() {
        m.push_segment(obx(
            cfg,
            Obx {
                set: i + 1,
                kind: "ST",
                code,
                sub: format!("1.1.1.1.{}", i + 1),
                value: value.to_owned(),
                units: None,
                flags,
                at_ms: a.at_ms,
                method: false,
            },
        ));
    }
    m.to_string()
}

/// A keep-alive: an `ORU^R40` with no patient, bed or alarm, one OBR coded [`KEEP_ALIVE`].
pub(crate) fn keep_alive(cfg: &Hl7Config, control_id: &str, at_ms: i64) -> String {
    MessageBuilder::new(Separators::default())
        .with_segment(msh(
            cfg,
            "ORU^R40^ORU_R40",
            control_id,
            at_ms,
            &cfg.pcd04_profile,
        ))
        .with_segment(
            SegmentBuilder::new("OBR")
                .with_field_value(1, "1")
                .with_field(4, coded(KEEP_ALIVE))
                .with_field_value(7, hl7_time(at_ms)),
        )
        .to_string()
}

/// How the receiver answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// AA or CA: delivered.
    Accepted,
    /// AE, AR, CE or CR: a final refusal of that message.
    Refused,
}

/// A receiver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ack {
    /// MSA-1 as sent (`AA`, `AE`, ...).
    pub(crate) code: String,
    pub(crate) verdict: Verdict,
    /// MSA-2: the MSH-10 it answers.
    pub(crate) control_id: String,
    /// The receiver's reason: MSA-3 and ERR-3 / ERR-8, where given.
    pub(crate) reason: String,
}

/// Reads an `ACK` or `ORA^R41` (segments may end in `\r`, `\n` or both).
pub(crate) fn parse_ack(frame: &[u8]) -> Result<Ack, MessageError> {
    let text = std::str::from_utf8(frame).map_err(|_| MessageError::NotText)?;
    let text = text.trim_end_matches(['\r', '\n']);
    let msg = hl7_parser::parse_message_with_lenient_newlines(text)
        .map_err(|e| MessageError::Parse(e.to_string()))?;
    let get = |q: &str| {
        msg.query(q)
            .map(|r| msg.separators.decode(r.raw_value()).to_string())
            .unwrap_or_default()
    };
    let kind = get("MSH.9.1");
    if kind != "ACK" && !(kind == "ORA" && get("MSH.9.2") == "R41") {
        return Err(MessageError::NotAnAck(get("MSH.9")));
    }
    let code = get("MSA.1");
    let verdict = match code.as_str() {
        "AA" | "CA" => Verdict::Accepted,
        "AE" | "AR" | "CE" | "CR" => Verdict::Refused,
        _ => return Err(MessageError::BadCode(code)),
    };
    let reason = [get("MSA.3"), get("ERR.3"), get("ERR.8")]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    Ok(Ack {
        code,
        verdict,
        control_id: get("MSA.2"),
        reason,
    })
}

/// What the documents' sample messages were rendered from, and the documents' code blocks, for
/// the tests that hold the two together.
#[cfg(test)]
pub(crate) mod samples {
    use super::{AlarmKind, AlarmReport, Observation, Phase};

    /// The samples' time (2025-11-27 08:00:00 UTC), a bed's observation then, and the start of
    /// its risk alarm 55.31 s later.
    pub(crate) fn drafts() -> (i64, Observation, AlarmReport) {
        let t0 = 1_764_230_400_000;
        let o = Observation {
            bed: "bed-7".into(),
            at_ms: t0,
            score: Some(0.041),
            heart_rate_bpm: Some(72.0),
            risk_alarm: false,
            quality: "scored",
            patient: None,
        };
        let a = AlarmReport {
            alarm_id: 57,
            bed: "bed-7".into(),
            kind: AlarmKind::Risk,
            phase: Phase::Start,
            raised_ms: t0 + 55_310,
            at_ms: t0 + 55_310,
            inactivation: "enabled",
            patient: None,
        };
        (t0, o, a)
    }

    /// The documents' monitor alarm: bed-7's monitor's VT alarm `A-1743` at the risk alarm's
    /// time, confirmed by Holmes 0.59 s later.
    pub(crate) fn monitor_alarm() -> super::MonitorAlarmReport {
        use crate::core::monitor_alarm::{MonitorAlarmKind, Opinion};
        let (t0, _, _) = drafts();
        super::MonitorAlarmReport {
            key: 12,
            bed: "bed-7".into(),
            id: "A-1743".into(),
            kind: MonitorAlarmKind::Vt,
            phase: Phase::Start,
            onset_ms: t0 + 55_310,
            end_ms: None,
            opinion: Some(Opinion {
                kind: MonitorAlarmKind::Vt,
                confirmed: true,
                probability: 0.87,
                reason: "7 ventricular beats at 165/min on II and V".into(),
            }),
            not_judged: None,
            judged_ms: Some(t0 + 55_900),
            patient: None,
        }
    }

    /// The ```lang code blocks of a document of the checkout, in order.
    pub(crate) fn blocks(doc: &str, lang: &str) -> Vec<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(doc);
        let text = std::fs::read_to_string(path).unwrap();
        text.split(&format!("```{lang}\n"))
            .skip(1)
            .filter_map(|b| b.split("```").next())
            .map(str::to_owned)
            .collect()
    }
}

#[cfg(test)]
mod tests;
