//! The monitor protocol on `/ws/monitor`: message types, parsing and close codes.
//! `docs/PROTOCOL.md` is the prose version with examples.
//!
//! [`ingest`](crate::ingest) parses every client message through [`parse_client`] and answers
//! with [`ServerMsg`]; nothing else touches the wire format.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Protocol version a hello must name.
pub const PROTOCOL_VERSION: u32 = 1;

/// WebSocket close codes for fatal problems (4000-4999 are the application's).
pub mod close {
    /// The first message was not a valid hello.
    pub const BAD_HELLO: u16 = 4000;
    /// The hello's token is not accepted.
    pub const UNAUTHORIZED: u16 = 4001;
    /// Another device holds this bed.
    pub const BED_IN_USE: u16 = 4003;
    /// The bed is not configured and unknown beds are refused.
    pub const UNKNOWN_BED: u16 = 4004;
    /// Too many bad frames in a minute.
    pub const TOO_MANY_ERRORS: u16 = 4008;
    /// The same device connected again; this older connection is closed.
    pub const SUPERSEDED: u16 = 4009;
    /// The server is shutting down (standard "going away").
    pub const GOING_AWAY: u16 = 1001;
    /// A message exceeded the size limit (standard).
    pub const TOO_BIG: u16 = 1009;
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
    /// The monitor is leaving on purpose (no gap is expected after this).
    Bye {},
}

/// Messages to a monitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMsg {
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
pub enum ErrorCode {
    /// Not JSON, or not a known message.
    Malformed,
    /// A second hello on a connection.
    UnexpectedHello,
    /// A lead not announced in the hello, or lengths that differ between leads.
    BadShape,
    /// Some samples were null, non-finite or out of range; they were discarded (a gap).
    BadSamples,
    /// This sequence number was already received; the frame was ignored.
    Duplicate,
    /// The frame arrived after its window closed; it was dropped and counted.
    TooLate,
    /// The bed's queue is full; the frame was dropped and counted.
    Overloaded,
}

/// Parses a text message from a monitor.
pub fn parse_client(text: &str) -> Result<ClientMsg, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

impl ServerMsg {
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("server messages serialise")
    }

    pub fn error(seq: Option<u64>, code: ErrorCode, message: impl Into<String>) -> ServerMsg {
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
    fn server_messages_are_tagged_json() {
        let t = ServerMsg::error(Some(3), ErrorCode::Duplicate, "seen").to_text();
        assert_eq!(
            t,
            r#"{"type":"error","seq":3,"code":"duplicate","message":"seen"}"#
        );
    }
}
