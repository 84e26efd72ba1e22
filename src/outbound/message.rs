//! The HL7 v2.6 messages Holmes sends and the answers it reads, built and parsed with the
//! `hl7-parser` crate (which escapes every value; a bed id holding `|` or `^` stays one
//! value): IHE PCD-01 `ORU^R01` observation reports, IHE PCD-04 `ORU^R40` alarm reports and
//! keep-alives, and the receiver's `ACK` / `ORA^R41`.
//!
//! Codes: the heart rate, units, facets and sources are ISO/IEEE 11073-10101 (MDC) codes; the
//! risk score, the risk alarm, its state and the data quality have none, so they carry local
//! codes of the local coding system `99HOLMES` (HL7's `99` prefix for local tables; the
//! docs/OPERATIONS.md lists them). Times are UTC,
//! `YYYYMMDDHHMMSS.SSS+0000`; an alarm keeps its original times however late it is sent.

use hl7_parser::builder::prelude::*;

use crate::config::Hl7Config;
use crate::dashboard::alarms::AlarmKind;

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
}

/// What goes into the outbox; rendered once its MSH-10 is known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Draft {
    Observation(Observation),
    Alarm(AlarmReport),
}

impl Draft {
    pub(crate) fn bed(&self) -> &str {
        match self {
            Draft::Observation(o) => &o.bed,
            Draft::Alarm(a) => &a.bed,
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
pub(crate) fn hl7_time(ms: i64) -> String {
    let [y, m, d, h, mi, s, milli] = crate::core::time::utc_fields(ms);
    format!("{y:04}{m:02}{d:02}{h:02}{mi:02}{s:02}.{milli:03}+0000")
}

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

/// The patient and the bed: Holmes knows no patient identity (no admissions), so PID carries
/// none; PV1-3 is the bed (its third component, PL.3).
fn patient(bed: &str) -> [SegmentBuilder; 2] {
    [
        SegmentBuilder::new("PID").with_field_value(1, "1"),
        SegmentBuilder::new("PV1")
            .with_field_value(2, "I")
            .with_field(3, FieldBuilder::default().with_component(3, bed)),
    ]
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
    for s in patient(&o.bed) {
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

/// An IHE PCD-04 alarm report: one OBR for the alarm, seven facets under OBX-4 `1.1.1.1.n`.
fn alarm(cfg: &Hl7Config, a: &AlarmReport, control_id: &str, created_ms: i64) -> String {
    let mut m = MessageBuilder::new(Separators::default()).with_segment(msh(
        cfg,
        "ORU^R40^ORU_R40",
        control_id,
        created_ms,
        &cfg.pcd04_profile,
    ));
    for s in patient(&a.bed) {
        m.push_segment(s);
    }
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
        };
        let a = AlarmReport {
            alarm_id: 57,
            bed: "bed-7".into(),
            kind: AlarmKind::Risk,
            phase: Phase::Start,
            raised_ms: t0 + 55_310,
            at_ms: t0 + 55_310,
            inactivation: "enabled",
        };
        (t0, o, a)
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
mod tests {
    use super::*;

    fn field<'m>(m: &'m hl7_parser::Message<'m>, q: &str) -> String {
        m.query(q)
            .map(|r| m.separators.decode(r.raw_value()).to_string())
            .unwrap_or_default()
    }

    use super::samples::{blocks, drafts};

    /// The ```text blocks of a document that hold `kind` (an MSH-9), as segments.
    fn samples(doc: &str, kind: &str) -> Vec<Vec<String>> {
        blocks(doc, "text")
            .into_iter()
            .filter(|b| b.contains(kind))
            .map(|b| b.lines().map(str::to_owned).collect())
            .collect()
    }

    #[test]
    fn the_sample_messages_of_the_readme_and_operations_are_what_holmes_renders() {
        let cfg = Hl7Config {
            receiving_application: "GATEWAY".into(),
            receiving_facility: "HOSP".into(),
            equipment_id: "HOLMES^^0050C2FFFE12A3B4^EUI-64".into(),
            ..Hl7Config::default()
        };
        let (t0, o, a) = drafts();
        let segments = |m: String| -> Vec<String> {
            m.split('\r')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let r01 = segments(render(&cfg, &Draft::Observation(o), "1042", t0 + 1_250));
        let r40 = segments(render(&cfg, &Draft::Alarm(a), "1043", t0 + 55_320));
        for doc in ["README.md", "docs/OPERATIONS.md"] {
            assert_eq!(samples(doc, "ORU^R01"), vec![r01.clone()], "{doc}'s PCD-01");
            assert_eq!(samples(doc, "ORU^R40"), vec![r40.clone()], "{doc}'s PCD-04");
        }
    }

    #[test]
    fn times_are_utc_with_milliseconds() {
        assert_eq!(hl7_time(0), "19700101000000.000+0000");
        // 2024-02-29 23:59:59.123 UTC.
        assert_eq!(hl7_time(1_709_251_199_123), "20240229235959.123+0000");
    }

    #[test]
    fn an_observation_report_carries_the_codes_the_bed_and_the_equipment() {
        let cfg = Hl7Config::default();
        let o = Observation {
            bed: "bed|1^a".into(),
            at_ms: 1_709_251_199_123,
            score: Some(0.8126),
            heart_rate_bpm: Some(72.4),
            risk_alarm: true,
            quality: "scored",
        };
        let text = render(&cfg, &Draft::Observation(o), "17", 1_709_251_200_000);
        let m = hl7_parser::parse_message(&text).unwrap();
        assert_eq!(field(&m, "MSH.9"), "ORU^R01^ORU_R01");
        assert_eq!(field(&m, "MSH.10"), "17");
        assert_eq!(field(&m, "MSH.12"), "2.6");
        assert_eq!(field(&m, "MSH.21.3"), "1.3.6.1.4.1.19376.1.6.1.1.1");
        // The bed id is escaped into one component and decodes back whole.
        assert_eq!(field(&m, "PV1.3.3"), "bed|1^a");
        assert_eq!(field(&m, "PID.3"), "");
        assert_eq!(field(&m, "OBR.7"), "20240229235959.123+0000");
        let obx: Vec<_> = m.segments().filter(|s| s.name == "OBX").collect();
        assert_eq!(obx.len(), 4);
        assert_eq!(field(&m, "OBX[1].3.1"), "HOLMES-RISK");
        assert_eq!(field(&m, "OBX[1].5"), "0.813");
        assert_eq!(field(&m, "OBX[2].3"), HEART_RATE);
        assert_eq!(field(&m, "OBX[2].5"), "72");
        assert_eq!(field(&m, "OBX[2].6.2"), "MDC_DIM_BEAT_PER_MIN");
        assert_eq!(field(&m, "OBX[2].18.3"), "0000000000000000");
        assert_eq!(field(&m, "OBX[3].5"), "active");
        assert_eq!(field(&m, "OBX[4].5"), "scored");
        assert_eq!(field(&m, "OBX[4].4"), "1.1.1.4");
    }

    #[test]
    fn an_unscored_window_reports_no_score_and_says_why() {
        let cfg = Hl7Config::default();
        let o = Observation {
            bed: "b".into(),
            at_ms: 0,
            score: None,
            heart_rate_bpm: None,
            risk_alarm: false,
            quality: "insufficient_signal",
        };
        let text = render(&cfg, &Draft::Observation(o), "1", 0);
        let m = hl7_parser::parse_message(&text).unwrap();
        assert_eq!(m.segments().filter(|s| s.name == "OBX").count(), 2);
        assert_eq!(field(&m, "OBX[1].5"), "inactive");
        assert_eq!(field(&m, "OBX[2].5"), "insufficient_signal");
        // Sub-ids are the metrics' own, not their positions.
        assert_eq!(field(&m, "OBX[1].4"), "1.1.1.3");
        assert_eq!(field(&m, "OBX[2].4"), "1.1.1.4");
    }

    #[test]
    fn an_alarm_report_has_seven_facets_with_the_configured_codes() {
        let cfg = Hl7Config {
            facet_phase: "68165^MDC_ATTR_EVENT_PHASE^MDC".into(),
            ..Hl7Config::default()
        };
        let a = AlarmReport {
            alarm_id: 9,
            bed: "b7".into(),
            kind: AlarmKind::Lost,
            phase: Phase::End,
            raised_ms: 1_000,
            at_ms: 61_000,
            inactivation: "alert-acknowledged",
        };
        let text = render(&cfg, &Draft::Alarm(a), "33", 70_000);
        let m = hl7_parser::parse_message(&text).unwrap();
        assert_eq!(field(&m, "MSH.9"), "ORU^R40^ORU_R40");
        assert_eq!(field(&m, "MSH.21.3"), "1.3.6.1.4.1.19376.1.6.4.4");
        assert_eq!(field(&m, "OBR.2"), "9^HOLMES");
        assert_eq!(field(&m, "OBR.7"), hl7_time(1_000));
        assert_eq!(field(&m, "OBR.8"), hl7_time(61_000));
        let facets: Vec<(String, String, String)> = (1..=7)
            .map(|i| {
                (
                    field(&m, &format!("OBX[{i}].4")),
                    field(&m, &format!("OBX[{i}].3.1")),
                    field(&m, &format!("OBX[{i}].5")),
                )
            })
            .collect();
        let want = [
            ("1.1.1.1.1", "HOLMES-SIGNAL-LOST", "lost"),
            ("1.1.1.1.2", "69965", ""),
            ("1.1.1.1.3", "68165", "end"),
            ("1.1.1.1.4", "68482", "inactive"),
            ("1.1.1.1.5", "68483", "alert-acknowledged"),
            ("1.1.1.1.6", "68484", "PM"),
            ("1.1.1.1.7", "68485", "ST"),
        ];
        for (got, want) in facets.iter().zip(want) {
            assert_eq!((got.0.as_str(), got.1.as_str(), got.2.as_str()), want);
        }
        assert_eq!(field(&m, "OBX[1].8"), "PM~ST");
        assert_eq!(field(&m, "OBX[3].14"), hl7_time(61_000));
    }

    #[test]
    fn acks_of_both_modes_and_the_receivers_reason_are_read() {
        let ack = |msa: &str| {
            format!(
                "MSH|^~\\&|R|F|HOLMES|WARD|20260101||ACK^R01^ACK|9|P|2.6\r{msa}\rERR|||207^Application internal error^HL70357|E||||disk \\F\\ full\r"
            )
        };
        let a = parse_ack(ack("MSA|AA|17").as_bytes()).unwrap();
        assert_eq!(
            (a.verdict, a.control_id.as_str()),
            (Verdict::Accepted, "17")
        );
        let a = parse_ack(ack("MSA|CR|18|bad").as_bytes()).unwrap();
        assert_eq!((a.verdict, a.code.as_str()), (Verdict::Refused, "CR"));
        assert_eq!(
            a.reason,
            "bad; 207^Application internal error^HL70357; disk | full"
        );
        let ora = "MSH|^~\\&|R|F|||20260101||ORA^R41^ORA_R41|9|P|2.6\nMSA|AE|19\n";
        let a = parse_ack(ora.as_bytes()).unwrap();
        assert_eq!((a.verdict, a.control_id.as_str()), (Verdict::Refused, "19"));
        assert!(matches!(
            parse_ack(ack("MSA|XX|1").as_bytes()),
            Err(MessageError::BadCode(_))
        ));
        let oru = render(
            &Hl7Config::default(),
            &Draft::Observation(Observation {
                bed: "b".into(),
                at_ms: 0,
                score: None,
                heart_rate_bpm: None,
                risk_alarm: false,
                quality: "scored",
            }),
            "1",
            0,
        );
        assert!(matches!(
            parse_ack(oru.as_bytes()),
            Err(MessageError::NotAnAck(_))
        ));
        assert!(parse_ack(b"garbage").is_err());
        assert!(matches!(
            parse_ack(&[0xff, 0xfe]),
            Err(MessageError::NotText)
        ));
    }
}
