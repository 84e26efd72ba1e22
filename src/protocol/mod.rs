//! The monitor protocol on `/ws/monitor`: message types, parsing and close codes.
//! `docs/PROTOCOL.md` is the prose version with examples.
//!
//! [`ingest`](crate::serving::ingest) parses every client message through [`parse_client`] and answers
//! with [`ServerMsg`]; nothing else touches the wire format. Beside it, HL7's framing
//! ([`mllp`], which the outbound links send through too), a gateway's IHE PCD-04 alarm
//! reports as they come in ([`pcd04`]) and IEEE 11073 SDC as a consumer speaks it ([`sdc`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

pub(crate) mod mllp;
pub(crate) mod pcd04;
pub(crate) mod sdc;

pub use crate::core::monitor_alarm::MonitorAlarmKind;
pub use crate::core::patient::{MAX_PATIENT_CHARS, Patient};

/// Protocol version a hello must name.
pub(crate) const PROTOCOL_VERSION: u32 = 1;

/// The largest sequence number a samples or vitals frame may carry (2^63 - 1: the next one is
/// still a `u64`, and every sequence number fits SQLite's signed integers).
pub const MAX_SEQ: u64 = i64::MAX as u64;

/// WebSocket close codes for fatal problems (4000-4999 are the application's).
pub(crate) mod close {
    /// The first message was not a valid hello.
    pub(crate) const BAD_HELLO: u16 = 4000;
    /// The hello's token is not accepted.
    pub(crate) const UNAUTHORIZED: u16 = 4001;
    /// Another device holds this bed.
    pub(crate) const BED_IN_USE: u16 = 4003;
    /// The bed is not configured and unknown beds are refused.
    pub(crate) const UNKNOWN_BED: u16 = 4004;
    /// Too many bad frames in a minute.
    pub(crate) const TOO_MANY_ERRORS: u16 = 4008;
    /// The same device connected again; this older connection is closed.
    pub(crate) const SUPERSEDED: u16 = 4009;
    /// Nothing arrived for `ingest.idle_timeout_secs` (a half-open link).
    pub(crate) const IDLE: u16 = 4010;
    /// The ward is full (`ward.max_beds`, less the places kept for registered monitors).
    pub(crate) const WARD_FULL: u16 = 4005;
    /// The device (a gateway) holds its maximum of beds (`auth.max_beds_per_gateway`).
    pub(crate) const DEVICE_FULL: u16 = 4006;
    /// The server is shutting down (standard "going away").
    pub(crate) const GOING_AWAY: u16 = 1001;
    /// A message exceeded the size limit (standard).
    pub(crate) const TOO_BIG: u16 = 1009;
    /// A text message was not UTF-8 (standard "invalid frame payload data").
    pub(crate) const INVALID_PAYLOAD: u16 = 1007;
}

/// An ECG channel announced in the hello.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcgChannel {
    /// Lead name as the monitor calls it (II, V, MLII, ...).
    pub lead: String,
    /// Samples per second.
    pub hz: f64,
}

/// A vitals channel announced in the hello.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VitalsChannel {
    /// `hr`, `spo2`, `nibp_sys`, `nibp_dia`, `resp`, `temp`, ...
    pub name: String,
    pub unit: String,
}

/// One vitals reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VitalValue {
    pub name: String,
    /// The value, or null when the monitor has none (e.g. probe off).
    pub value: Option<f64>,
    /// Status flags such as `lead_off`, `probe_off`, `artifact`.
    #[serde(default)]
    pub status: Vec<String>,
}

/// Messages from a monitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientMsg {
    /// First message of every connection.
    Hello {
        protocol: u32,
        bed: String,
        device: String,
        token: String,
        ecg: Vec<EcgChannel>,
        #[serde(default)]
        vitals: Vec<VitalsChannel>,
        /// The patient the bed is admitted with; absent: none (the bed is not admitted, or
        /// no longer).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        patient: Option<Patient>,
    },
    /// The bed's patient changed: admitted (`patient` an object) or discharged (`null`); the
    /// field is required, so a message without it discharges no one.
    Patient {
        #[serde(deserialize_with = "nullable")]
        patient: Option<Patient>,
    },
    /// A short run of ECG samples per lead, in mV; `t_ms` is the device time of the first.
    Samples {
        seq: u64,
        t_ms: i64,
        leads: BTreeMap<String, Vec<Option<f32>>>,
        /// Leads the monitor reports as off during this frame.
        #[serde(default)]
        lead_off: Vec<String>,
    },
    /// Vitals readings at device time `t_ms`.
    Vitals {
        seq: u64,
        t_ms: i64,
        values: Vec<VitalValue>,
    },
    /// The monitor raised one of its own arrhythmia alarms; `t_ms` is its onset in device time
    /// (the samples' clock). Holmes gives an opinion on VT and VF alarms from the samples up to
    /// the onset; other kinds are stored as received.
    Alarm {
        /// The monitor's id of the alarm, unique for the bed ([`MAX_ALARM_ID_CHARS`] printable
        /// characters at most).
        id: String,
        /// `vt`, `vf` (`vfl` reads as `vf`), `asystole`, `brady`, `tachy` or `other`, in any
        /// case.
        #[serde(deserialize_with = "alarm_kind")]
        kind: MonitorAlarmKind,
        t_ms: i64,
    },
    /// The monitor's alarm `id` ended at device time `t_ms`.
    AlarmEnd { id: String, t_ms: i64 },
    /// The monitor is leaving on purpose (no gap is expected after this).
    Bye {},
}

/// The longest alarm id a monitor may send, characters.
pub const MAX_ALARM_ID_CHARS: usize = 64;

/// An alarm kind by [`MonitorAlarmKind`]'s `FromStr` (any case, `vfl` for `vf`).
fn alarm_kind<'de, D: Deserializer<'de>>(d: D) -> Result<MonitorAlarmKind, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

/// An alarm id: 1 to [`MAX_ALARM_ID_CHARS`] characters, none of them a control character.
fn check_alarm_id(id: &str) -> Result<(), String> {
    let n = id.chars().count();
    if n == 0 || n > MAX_ALARM_ID_CHARS {
        return Err(format!(
            "an alarm id has 1 to {MAX_ALARM_ID_CHARS} characters (this one {n})"
        ));
    }
    if id.chars().any(char::is_control) {
        return Err("an alarm id holds no control characters".into());
    }
    Ok(())
}

/// Messages to a monitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ServerMsg {
    /// The hello was accepted. `next_seq` is the sample sequence number the bed expects next
    /// (after a reconnect, the monitor resends from there if it still has the frames).
    Welcome {
        bed: String,
        next_samples_seq: u64,
        next_vitals_seq: u64,
        window_secs: u32,
        hop_secs: u32,
    },
    /// Everything up to and including this sample sequence number is in the bed's buffer.
    Ack { samples_seq: u64 },
    /// One frame had a problem; the connection carries on.
    Error {
        #[serde(skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
        code: ErrorCode,
        message: String,
    },
}

/// Per-frame error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ErrorCode {
    /// Not JSON, or not a known message.
    Malformed,
    /// A second hello on a connection.
    UnexpectedHello,
    /// A lead not announced in the hello, or lengths that differ between leads.
    BadShape,
    /// Some samples were null, non-finite or out of range; they were discarded (a gap).
    BadSamples,
    /// Some vitals readings were non-finite or outside their plausible range
    /// (`ingest.vital_ranges`); they count as absent, the rest of the frame is kept.
    BadVitals,
    /// This sequence number was already received; the frame was ignored.
    Duplicate,
    /// The frame arrived after its window closed; it was dropped and counted.
    TooLate,
    /// The bed's queue is full; the frame was dropped and counted.
    Overloaded,
    /// The connection sends more than `ingest.max_messages_per_sec`; the server reads it
    /// more slowly (sent once per episode, no frame is lost).
    RateLimited,
}

/// First byte of a binary samples frame.
pub(crate) const BINARY_MAGIC: u8 = 0xEC;
/// Binary frame layout version.
pub(crate) const BINARY_VERSION: u8 = 1;
/// Bytes before the samples.
pub const BINARY_HEADER: usize = 24;
/// Sample value meaning "missing".
pub(crate) const BINARY_MISSING: i16 = i16::MIN;

/// A binary samples frame: leads in the hello's ECG order, samples in mV.
#[derive(Debug, Clone, PartialEq)]
pub struct BinarySamples {
    pub seq: u64,
    pub t_ms: i64,
    /// `leads[i]` is the hello's i-th ECG channel.
    pub leads: Vec<Vec<Option<f32>>>,
    /// Lead-off flag per lead, same order.
    pub lead_off: Vec<bool>,
}

/// Encodes a binary samples frame (see `docs/PROTOCOL.md`): little-endian header
/// `magic u8, version u8, lead_off u16, seq u64, t_ms i64, n u16, leads u8, 0u8`, then each
/// lead's `n` samples as i16 microvolts, `-32768` for missing.
pub fn encode_binary(f: &BinarySamples) -> Vec<u8> {
    let n = f.leads.first().map_or(0, Vec::len);
    let mut b = Vec::with_capacity(BINARY_HEADER + 2 * n * f.leads.len());
    b.push(BINARY_MAGIC);
    b.push(BINARY_VERSION);
    let off = f
        .lead_off
        .iter()
        .enumerate()
        .fold(0u16, |m, (i, &o)| m | (u16::from(o) << i));
    b.extend(off.to_le_bytes());
    b.extend(f.seq.to_le_bytes());
    b.extend(f.t_ms.to_le_bytes());
    b.extend((n as u16).to_le_bytes());
    b.push(f.leads.len() as u8);
    b.push(0);
    for lead in &f.leads {
        for v in lead {
            let q = match v {
                Some(x) => (x * 1000.0).round().clamp(-32767.0, 32767.0) as i16,
                None => BINARY_MISSING,
            };
            b.extend(q.to_le_bytes());
        }
    }
    b
}

/// Decodes a binary samples frame whose hello announced `leads` ECG channels.
pub fn parse_binary(b: &[u8], leads: usize) -> Result<BinarySamples, String> {
    if b.len() < BINARY_HEADER {
        return Err(format!(
            "binary frame of {} bytes is shorter than its {BINARY_HEADER}-byte header",
            b.len()
        ));
    }
    if b[0] != BINARY_MAGIC || b[1] != BINARY_VERSION {
        return Err(format!(
            "binary frame starts {:#04x} {:#04x}, expected {BINARY_MAGIC:#04x} {BINARY_VERSION:#04x}",
            b[0], b[1]
        ));
    }
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let off = u16_at(2);
    let seq = u64::from_le_bytes(b[4..12].try_into().expect("8 bytes"));
    let t_ms = i64::from_le_bytes(b[12..20].try_into().expect("8 bytes"));
    let n = u16_at(20) as usize;
    let l = b[22] as usize;
    check_seq(seq)?;
    if l != leads {
        return Err(format!(
            "binary frame carries {l} leads, the hello announced {leads}"
        ));
    }
    let want = BINARY_HEADER + 2 * n * l;
    if b.len() != want {
        return Err(format!(
            "binary frame of {} bytes, its header implies {want}",
            b.len()
        ));
    }
    let mut out = Vec::with_capacity(l);
    for k in 0..l {
        let base = BINARY_HEADER + 2 * n * k;
        out.push(
            (0..n)
                .map(|j| {
                    let q = u16_at(base + 2 * j) as i16;
                    (q != BINARY_MISSING).then(|| q as f32 / 1000.0)
                })
                .collect(),
        );
    }
    Ok(BinarySamples {
        seq,
        t_ms,
        leads: out,
        lead_off: (0..l).map(|i| off >> i & 1 == 1).collect(),
    })
}

/// Deepest JSON nesting a client message may have (the deepest valid one has 4 levels).
pub(crate) const MAX_JSON_DEPTH: usize = 8;

/// Whether `text` nests arrays and objects deeper than `max`, checked in one pass without
/// parsing (so a deeply nested message is refused before the parser recurses into it).
fn nests_deeper_than(text: &str, max: usize) -> bool {
    let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
    for b in text.bytes() {
        if in_str {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// A field that must be present and may be `null` (serde would read a missing `Option` as
/// `None`).
fn nullable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Patient>, D::Error> {
    Option::<Patient>::deserialize(d)
}

/// A samples frame read straight into its fields: [`ClientMsg`]'s tag makes serde read a whole
/// message into a tree of values before it knows the variant, which cost a quarter of the
/// ingest's time at the recommended ten frames a second (2026-12-07). Whatever it accepts,
/// [`ClientMsg`] reads alike (the same fields, types and unknown-field refusal); whatever it
/// refuses goes through [`ClientMsg`], whose error the monitor is answered with.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SamplesText {
    #[serde(rename = "type")]
    _kind: SamplesTag,
    seq: u64,
    t_ms: i64,
    leads: BTreeMap<String, Vec<Option<f32>>>,
    #[serde(default)]
    lead_off: Vec<String>,
}

/// The one tag [`SamplesText`] reads.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum SamplesTag {
    Samples,
}

/// Parses a text message from a monitor: its shape, sequence numbers within `0..=MAX_SEQ`, a
/// patient identity that [`Patient::check`] accepts.
pub fn parse_client(text: &str) -> Result<ClientMsg, String> {
    if nests_deeper_than(text, MAX_JSON_DEPTH) {
        return Err(format!("JSON nested deeper than {MAX_JSON_DEPTH} levels"));
    }
    if let Ok(f) = serde_json::from_str::<SamplesText>(text) {
        check_seq(f.seq)?;
        return Ok(ClientMsg::Samples {
            seq: f.seq,
            t_ms: f.t_ms,
            leads: f.leads,
            lead_off: f.lead_off,
        });
    }
    let msg: ClientMsg = serde_json::from_str(text).map_err(|e| e.to_string())?;
    match &msg {
        ClientMsg::Samples { seq, .. } | ClientMsg::Vitals { seq, .. } => check_seq(*seq)?,
        ClientMsg::Hello {
            patient: Some(p), ..
        }
        | ClientMsg::Patient { patient: Some(p) } => p.check().map_err(|e| e.to_string())?,
        ClientMsg::Alarm { id, .. } | ClientMsg::AlarmEnd { id, .. } => check_alarm_id(id)?,
        ClientMsg::Hello { patient: None, .. }
        | ClientMsg::Patient { patient: None }
        | ClientMsg::Bye {} => {}
    }
    Ok(msg)
}

/// A sequence number within `0..=MAX_SEQ`.
fn check_seq(seq: u64) -> Result<(), String> {
    if seq > MAX_SEQ {
        return Err(format!(
            "seq {seq} is above the largest sequence number, {MAX_SEQ}"
        ));
    }
    Ok(())
}

impl ServerMsg {
    pub(crate) fn to_text(&self) -> String {
        serde_json::to_string(self).expect("server messages serialise")
    }

    pub(crate) fn error(
        seq: Option<u64>,
        code: ErrorCode,
        message: impl Into<String>,
    ) -> ServerMsg {
        ServerMsg::Error {
            seq,
            code,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_samples_frame_reads_the_same_through_its_own_path_as_through_the_message_enum() {
        // Each frame parsed both ways: what the samples path accepts, the enum accepts alike;
        // what it refuses falls through to the enum, whose answer stands.
        let frames = [
            r#"{"type":"samples","seq":42,"t_ms":17,"leads":{"II":[0.1,null,-0.2],"V":[1,2,3e-3]},"lead_off":["V"]}"#,
            r#"{"seq":1,"t_ms":-5,"leads":{"II":[]},"type":"samples"}"#,
            r#"{"type":"samples","seq":9223372036854775807,"t_ms":0,"leads":{}}"#,
            r#"{"type":"samples","seq":9223372036854775808,"t_ms":0,"leads":{}}"#,
            r#"{"type":"samples","seq":1,"t_ms":0,"leads":{"II":[1e39]}}"#,
            r#"{"type":"samples","seq":1,"t_ms":0,"leads":{"II":[0.5]},"extra":1}"#,
            r#"{"type":"samples","seq":1,"seq":2,"t_ms":0,"leads":{}}"#,
            r#"{"type":"samples","type":"samples","seq":1,"t_ms":0,"leads":{}}"#,
            r#"{"type":"samples","seq":1.5,"t_ms":0,"leads":{}}"#,
            r#"{"type":"samples","seq":-1,"t_ms":0,"leads":{}}"#,
            r#"{"type":"samples","seq":"1","t_ms":0,"leads":{}}"#,
            r#"{"type":"samples","seq":1,"t_ms":0,"leads":{"II":[true]}}"#,
            r#"{"type":"samples","seq":1,"t_ms":0,"leads":{"II":[0.1]},"lead_off":null}"#,
            r#"{"type":"samples","seq":1,"t_ms":0}"#,
            r#"{"type":"Samples","seq":1,"t_ms":0,"leads":{}}"#,
            r#"{"type":"vitals","seq":7,"t_ms":5,"values":[]}"#,
            r#"{"type":"bye"}"#,
            r#"{"type":"samples","seq":1,"t_ms":0,"leads":{"II":[0.1]}} trailing"#,
            r#"[{"type":"samples"}]"#,
        ];
        let mut fast = 0;
        for text in frames {
            let through_enum = serde_json::from_str::<ClientMsg>(text)
                .map_err(|e| e.to_string())
                .and_then(|m| match m {
                    ClientMsg::Samples { seq, .. } => check_seq(seq).map(|()| m),
                    m => Ok(m),
                });
            if serde_json::from_str::<SamplesText>(text).is_ok() {
                fast += 1;
                assert!(
                    serde_json::from_str::<ClientMsg>(text).is_ok(),
                    "{text}: only the samples path reads it"
                );
            }
            assert_eq!(parse_client(text), through_enum, "{text}");
        }
        assert_eq!(fast, 5, "frames the samples path reads");
    }

    #[test]
    fn parses_the_documented_examples() {
        let hello = r#"{"type":"hello","protocol":1,"bed":"icu-3","device":"mon-17","token":"t",
            "ecg":[{"lead":"II","hz":250},{"lead":"V","hz":250}],
            "vitals":[{"name":"hr","unit":"bpm"}]}"#;
        assert!(
            matches!(parse_client(hello).unwrap(), ClientMsg::Hello { ref ecg, .. } if ecg.len() == 2)
        );
        let s = r#"{"type":"samples","seq":42,"t_ms":1700000000000,"leads":{"II":[0.1,null,-0.2]},"lead_off":["V"]}"#;
        match parse_client(s).unwrap() {
            ClientMsg::Samples {
                seq,
                leads,
                lead_off,
                ..
            } => {
                assert_eq!(seq, 42);
                assert_eq!(leads["II"], vec![Some(0.1), None, Some(-0.2)]);
                assert_eq!(lead_off, vec!["V".to_string()]);
            }
            m => panic!("{m:?}"),
        }
        let v = r#"{"type":"vitals","seq":7,"t_ms":5,"values":[{"name":"spo2","value":null,"status":["probe_off"]}]}"#;
        assert!(matches!(parse_client(v).unwrap(), ClientMsg::Vitals { .. }));
        assert!(parse_client(r#"{"type":"samples","seq":1}"#).is_err());
        assert!(parse_client(r#"{"type":"nonsense"}"#).is_err());
    }

    #[test]
    fn a_patient_is_read_from_the_hello_and_the_patient_message_and_checked() {
        let hello = |patient: &str| {
            format!(
                r#"{{"type":"hello","protocol":1,"bed":"icu-3","device":"mon-17","token":"t",
                "ecg":[{{"lead":"II","hz":250}}]{patient}}}"#
            )
        };
        let mrn = Patient {
            id: "MRN-00417".into(),
            authority: "HOSP".into(),
        };
        match parse_client(&hello(
            r#","patient":{"id":"MRN-00417","authority":"HOSP"}"#,
        )) {
            Ok(ClientMsg::Hello { patient, .. }) => assert_eq!(patient, Some(mrn.clone())),
            m => panic!("{m:?}"),
        }
        assert!(matches!(
            parse_client(&hello("")),
            Ok(ClientMsg::Hello { patient: None, .. })
        ));
        for (bad, why) in [
            (r#","patient":{"id":"a|b","authority":"HOSP"}"#, "delimiter"),
            (r#","patient":{"id":"1","authority":"H^X"}"#, "delimiter"),
            (
                r#","patient":{"id":"1
2","authority":"HOSP"}"#,
                "control",
            ),
            (r#","patient":{"id":"","authority":"HOSP"}"#, "empty"),
            (r#","patient":{"id":"1"}"#, "missing field"),
            (
                r#","patient":{"id":"1","authority":"H","name":"x"}"#,
                "unknown field",
            ),
            (r#","patient":"MRN-00417""#, "invalid type"),
        ] {
            let e = parse_client(&hello(bad)).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let admit = r#"{"type":"patient","patient":{"id":"MRN-00417","authority":"HOSP"}}"#;
        assert_eq!(
            parse_client(admit).unwrap(),
            ClientMsg::Patient {
                patient: Some(mrn.clone())
            }
        );
        assert_eq!(
            parse_client(r#"{"type":"patient","patient":null}"#).unwrap(),
            ClientMsg::Patient { patient: None }
        );
        // Discharging takes an explicit null.
        assert!(parse_client(r#"{"type":"patient"}"#).is_err());
        let long = format!(
            r#"{{"type":"patient","patient":{{"id":"{}","authority":"H"}}}}"#,
            "x".repeat(MAX_PATIENT_CHARS + 1)
        );
        assert!(parse_client(&long).unwrap_err().contains("longer than 64"));
        // A round trip keeps the identity, and a hello without one says nothing of it.
        let text = serde_json::to_string(&parse_client(admit).unwrap()).unwrap();
        assert_eq!(parse_client(&text).unwrap(), parse_client(admit).unwrap());
        let text = serde_json::to_string(&parse_client(&hello("")).unwrap()).unwrap();
        assert!(!text.contains("patient"), "{text}");
    }

    #[test]
    fn binary_frames_round_trip_and_reject_bad_shapes() {
        let f = BinarySamples {
            seq: 9,
            t_ms: -5,
            leads: vec![vec![Some(1.234), None], vec![Some(-0.001), Some(40.0)]],
            lead_off: vec![false, true],
        };
        let b = encode_binary(&f);
        assert_eq!(b.len(), BINARY_HEADER + 8);
        let g = parse_binary(&b, 2).unwrap();
        assert_eq!(
            (g.seq, g.t_ms, g.lead_off.clone()),
            (9, -5, vec![false, true])
        );
        assert_eq!(g.leads[0], vec![Some(1.234), None]);
        assert_eq!(g.leads[1], vec![Some(-0.001), Some(32.767)]);
        assert!(parse_binary(&b, 3).unwrap_err().contains("announced 3"));
        assert!(
            parse_binary(&b[..b.len() - 1], 2)
                .unwrap_err()
                .contains("implies")
        );
        assert!(
            parse_binary(&[0u8; 30], 2)
                .unwrap_err()
                .contains("expected")
        );
    }

    #[test]
    fn a_monitors_alarm_and_its_end_are_read_and_checked() {
        let m = parse_client(r#"{"type":"alarm","id":"A17","kind":"VT","t_ms":1700000123456}"#);
        assert_eq!(
            m,
            Ok(ClientMsg::Alarm {
                id: "A17".into(),
                kind: MonitorAlarmKind::Vt,
                t_ms: 1_700_000_123_456
            })
        );
        let m = parse_client(r#"{"type":"alarm","id":"9","kind":"vfl","t_ms":5}"#).unwrap();
        assert!(matches!(
            m,
            ClientMsg::Alarm {
                kind: MonitorAlarmKind::Vf,
                ..
            }
        ));
        assert_eq!(
            parse_client(r#"{"type":"alarm_end","id":"A17","t_ms":7}"#),
            Ok(ClientMsg::AlarmEnd {
                id: "A17".into(),
                t_ms: 7
            })
        );
        let e = parse_client(r#"{"type":"alarm","id":"A","kind":"afib","t_ms":5}"#).unwrap_err();
        assert!(e.contains("unknown alarm kind \"afib\""), "{e}");
        let e = parse_client(r#"{"type":"alarm","id":"","kind":"vt","t_ms":5}"#).unwrap_err();
        assert!(e.contains("1 to 64 characters"), "{e}");
        let long = "x".repeat(65);
        let text = format!(r#"{{"type":"alarm_end","id":"{long}","t_ms":5}}"#);
        assert!(parse_client(&text).is_err());
        let e = parse_client(r#"{"type":"alarm","id":"a\u0007","kind":"vt","t_ms":5}"#);
        assert!(e.unwrap_err().contains("control"));
        assert!(parse_client(r#"{"type":"alarm","id":"A","kind":"vt"}"#).is_err());
    }

    #[test]
    fn sequence_numbers_above_max_seq_are_refused() {
        let at = |seq: u64| format!(r#"{{"type":"vitals","seq":{seq},"t_ms":0,"values":[]}}"#);
        assert!(parse_client(&at(MAX_SEQ)).is_ok());
        let e = parse_client(&at(MAX_SEQ + 1)).unwrap_err();
        assert!(e.contains("largest sequence number"), "{e}");
        let f = BinarySamples {
            seq: u64::MAX,
            t_ms: 0,
            leads: vec![vec![Some(0.1)]],
            lead_off: vec![false],
        };
        let e = parse_binary(&encode_binary(&f), 1).unwrap_err();
        assert!(e.contains("largest sequence number"), "{e}");
    }

    #[test]
    fn server_messages_are_tagged_json() {
        let t = ServerMsg::error(Some(3), ErrorCode::Duplicate, "seen").to_text();
        assert_eq!(
            t,
            r#"{"type":"error","seq":3,"code":"duplicate","message":"seen"}"#
        );
    }
}
