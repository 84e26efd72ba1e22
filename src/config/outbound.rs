//! The `[hl7]` section: scores and alarms sent out to the hospital as HL7 v2.6 messages
//! (IHE PCD-01 observations, PCD-04 alarms) over MLLP, Holmes connecting out to one receiver.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The `[hl7]` config section (absent: the defaults, the link off).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Hl7Config {
    /// Queue and send messages (false: nothing is queued, the link is not started).
    pub enabled: bool,
    /// The receiver (an interface engine or gateway), `host:port`; Holmes connects out.
    pub receiver: String,
    /// Connect over TLS, trusting only the CA certificates in this PEM file (absent: plain TCP).
    pub tls_ca: Option<PathBuf>,
    /// The name the receiver's certificate must carry (absent: the host of `receiver`).
    pub tls_server_name: Option<String>,
    /// Seconds between a bed's PCD-01 observation reports (its latest window's values).
    pub cadence_secs: f64,
    /// Seconds without traffic after which a keep-alive ORU^R40 is sent (and must be
    /// acknowledged, else the link reconnects).
    pub keepalive_secs: f64,
    /// Seconds the receiver has to acknowledge a message before it is sent again (same MSH-10).
    pub ack_timeout_secs: f64,
    /// Seconds a TCP (and TLS) connection may take to open.
    pub connect_timeout_secs: f64,
    /// Back-off between resends and reconnections: from this many ms, doubling...
    pub retry_min_ms: u64,
    /// ...up to this many.
    pub retry_max_ms: u64,
    /// Longest MLLP frame accepted from the receiver (and sent), bytes: a longer one closes
    /// the connection.
    pub max_frame_bytes: usize,
    /// Observations still unsent after this many seconds are dropped and counted (alarms are
    /// never dropped).
    pub max_observation_age_secs: f64,
    /// Hours acknowledged and dropped messages stay in the outbox table (parked ones stay until
    /// an operator deletes them).
    pub keep_sent_hours: f64,
    /// Messages waiting to enter the outbox (a full queue drops an observation, counted; an
    /// alarm waits for room).
    pub queue: usize,
    /// MSH-3, the sending application.
    pub sending_application: String,
    /// MSH-4, the sending facility.
    pub sending_facility: String,
    /// MSH-5, the receiving application.
    pub receiving_application: String,
    /// MSH-6, the receiving facility.
    pub receiving_facility: String,
    /// OBX-18, the equipment identifier (customarily the appliance's EUI-64).
    pub equipment_id: String,
    /// MSH-21 of observation reports (PCD-01), `id^namespace^universal id^type`.
    pub pcd01_profile: String,
    /// MSH-21 of alarm reports (PCD-04); vendors' samples differ.
    pub pcd04_profile: String,
    /// OBX-3 of an alarm's facets, `code^name^system` (vendors' code numbers differ): the
    /// event phase...
    pub facet_phase: String,
    /// ...the alarm state...
    pub facet_state: String,
    /// ...the inactivation state (acknowledged or silenced on the dashboard)...
    pub facet_inactivation: String,
    /// ...the priority...
    pub facet_priority: String,
    /// ...and the alert type (physiological or technical).
    pub facet_type: String,
}

impl Default for Hl7Config {
    fn default() -> Self {
        Hl7Config {
            enabled: false,
            receiver: "127.0.0.1:2575".into(),
            tls_ca: None,
            tls_server_name: None,
            cadence_secs: 60.0,
            keepalive_secs: 30.0,
            ack_timeout_secs: 10.0,
            connect_timeout_secs: 5.0,
            retry_min_ms: 1_000,
            retry_max_ms: 60_000,
            max_frame_bytes: 1 << 20,
            max_observation_age_secs: 3_600.0,
            keep_sent_hours: 24.0,
            queue: 4_096,
            sending_application: "HOLMES".into(),
            sending_facility: "WARD".into(),
            receiving_application: "".into(),
            receiving_facility: "".into(),
            equipment_id: "HOLMES^^0000000000000000^EUI-64".into(),
            pcd01_profile: "IHE_PCD_001^IHE PCD^1.3.6.1.4.1.19376.1.6.1.1.1^ISO".into(),
            pcd04_profile: "IHE_PCD_ACM_001^IHE PCD^1.3.6.1.4.1.19376.1.6.4.4^ISO".into(),
            facet_phase: "68481^MDC_ATTR_EVENT_PHASE^MDC".into(),
            facet_state: "68482^MDC_ATTR_ALARM_STATE^MDC".into(),
            facet_inactivation: "68483^MDC_ATTR_ALARM_INACTIVATION_STATE^MDC".into(),
            facet_priority: "68484^MDC_ATTR_ALARM_PRIORITY^MDC".into(),
            facet_type: "68485^MDC_ATTR_ALERT_TYPE^MDC".into(),
        }
    }
}

impl Hl7Config {
    /// The checks `holmes validate` and start-up run (also with the link off, so a config
    /// is not found wrong only when someone turns it on).
    pub(crate) fn validate(&self) -> Result<(), String> {
        let (host, port) = self
            .receiver
            .rsplit_once(':')
            .ok_or_else(|| format!("hl7.receiver {:?} is not host:port", self.receiver))?;
        if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(format!(
                "hl7.receiver {:?} is not host:port (port 1 to 65535)",
                self.receiver
            ));
        }
        // Bounded above too, so every one makes a Duration (and a ms count) without overflow.
        const DAY: f64 = 86_400.0;
        check_link_times(
            "hl7",
            &[
                ("cadence_secs", self.cadence_secs, DAY),
                ("keepalive_secs", self.keepalive_secs, DAY),
                ("ack_timeout_secs", self.ack_timeout_secs, 3_600.0),
                ("connect_timeout_secs", self.connect_timeout_secs, 3_600.0),
                (
                    "max_observation_age_secs",
                    self.max_observation_age_secs,
                    365.0 * DAY,
                ),
                ("keep_sent_hours", self.keep_sent_hours, 10.0 * 365.0 * 24.0),
            ],
            (self.retry_min_ms, self.retry_max_ms),
        )?;
        // A default PCD-04 alarm report is about 1.2 KB; room for long bed names and codes.
        if self.max_frame_bytes < 64 * 1024 {
            return Err("hl7.max_frame_bytes must be at least 65536 (64 KiB)".into());
        }
        if self.queue == 0 {
            return Err("hl7.queue must be positive".into());
        }
        if self.sending_application.is_empty() || self.equipment_id.is_empty() {
            return Err("hl7.sending_application and hl7.equipment_id must be set".into());
        }
        for (name, v) in [
            ("pcd01_profile", &self.pcd01_profile),
            ("pcd04_profile", &self.pcd04_profile),
        ] {
            if v.split('^').count() != 4 || v.split('^').any(str::is_empty) {
                return Err(format!(
                    "hl7.{name} {v:?} must be id^namespace^universal id^type"
                ));
            }
        }
        for (name, v) in [
            ("facet_phase", &self.facet_phase),
            ("facet_state", &self.facet_state),
            ("facet_inactivation", &self.facet_inactivation),
            ("facet_priority", &self.facet_priority),
            ("facet_type", &self.facet_type),
        ] {
            if v.split('^').count() != 3 || v.split('^').any(str::is_empty) {
                return Err(format!("hl7.{name} {v:?} must be code^name^system"));
            }
        }
        if self.tls_server_name.is_some() && self.tls_ca.is_none() {
            return Err("hl7.tls_server_name is set but hl7.tls_ca is not".into());
        }
        Ok(())
    }
}

/// A link section's times (name, value, bound) are each positive and within their bound, so
/// every one makes a `Duration` (and a ms count) without overflow; and its back-off runs
/// `0 < retry_min_ms <= retry_max_ms`.
pub(crate) fn check_link_times(
    section: &str,
    times: &[(&str, f64, f64)],
    (retry_min_ms, retry_max_ms): (u64, u64),
) -> Result<(), String> {
    for &(name, v, max) in times {
        if !(v.is_finite() && v > 0.0 && v <= max) {
            return Err(format!(
                "{section}.{name} must be positive and at most {max}, not {v}"
            ));
        }
    }
    if retry_min_ms == 0 || retry_max_ms < retry_min_ms {
        return Err(format!("{section}: 0 < retry_min_ms <= retry_max_ms"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_bad_values_are_named() {
        assert_eq!(Hl7Config::default().validate(), Ok(()));
        let bad = |edit: fn(&mut Hl7Config)| {
            let mut c = Hl7Config::default();
            edit(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.receiver = "nohost".into()).contains("hl7.receiver"));
        assert!(bad(|c| c.receiver = "h:0".into()).contains("hl7.receiver"));
        assert!(bad(|c| c.cadence_secs = 0.0).contains("hl7.cadence_secs"));
        assert!(bad(|c| c.ack_timeout_secs = 1e30).contains("hl7.ack_timeout_secs"));
        assert!(bad(|c| c.keep_sent_hours = f64::INFINITY).contains("hl7.keep_sent_hours"));
        assert!(bad(|c| c.retry_max_ms = 1).contains("retry_min_ms"));
        assert!(bad(|c| c.max_frame_bytes = 60_000).contains("hl7.max_frame_bytes"));
        assert!(bad(|c| c.facet_phase = "68481".into()).contains("hl7.facet_phase"));
        assert!(bad(|c| c.pcd04_profile = "a^b^c".into()).contains("hl7.pcd04_profile"));
        assert!(bad(|c| c.tls_server_name = Some("x".into())).contains("tls_ca"));
    }
}
