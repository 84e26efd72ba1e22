//! The `[fhir]` section: scores and alarms sent out to the hospital as FHIR R4 resources
//! (Observations) over HTTP(S), Holmes posting to one server's base URL with a bearer token.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The `[fhir]` config section (absent: the defaults, the link off).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FhirConfig {
    /// Queue and send resources (false: nothing is queued, the link is not started).
    pub enabled: bool,
    /// The server's base URL, `http://` or `https://` (resources go to `{base_url}/Observation`).
    pub base_url: String,
    /// A file holding the bearer token sent as `Authorization: Bearer ...`, read again at each
    /// connection (empty: no `Authorization` header).
    pub token_file: String,
    /// For `https://`: trust only the CA certificates in this PEM file (required for https; a
    /// public CA: the system's bundle, e.g. `/etc/ssl/certs/ca-certificates.crt`).
    pub tls_ca: Option<PathBuf>,
    /// Seconds between a bed's observation resources (its latest window's values).
    pub cadence_secs: f64,
    /// Seconds a request may take, from sending it to the end of the answer; past it the same
    /// resource (same identifier) is sent again.
    pub request_timeout_secs: f64,
    /// Seconds a TCP (and TLS) connection may take to open.
    pub connect_timeout_secs: f64,
    /// Back-off between resends and reconnections: from this many ms, doubling...
    pub retry_min_ms: u64,
    /// ...up to this many.
    pub retry_max_ms: u64,
    /// Longest answer body read from the server, bytes (a longer one costs the connection).
    pub max_response_bytes: usize,
    /// Observations still unsent after this many seconds are dropped and counted (alarms are
    /// never dropped).
    pub max_observation_age_secs: f64,
    /// Hours accepted and dropped resources stay in the outbox table (parked ones stay until
    /// an operator deletes them).
    pub keep_sent_hours: f64,
    /// Drafts waiting to enter the outbox (a full queue drops an observation, counted; an
    /// alarm waits for room).
    pub queue: usize,
    /// The system of every resource's `identifier` (its value: bed, kind and time), which
    /// makes a resend a conditional create of the same resource; unique per appliance.
    pub identifier_system: String,
    /// The system of the appliance's identifier in each resource's `device` reference.
    pub device_system: String,
    /// The appliance's identifier in that reference (customarily its EUI-64).
    pub device_id: String,
}

impl Default for FhirConfig {
    fn default() -> Self {
        FhirConfig {
            enabled: false,
            base_url: "http://127.0.0.1:8103/fhir/R4".into(),
            token_file: String::new(),
            tls_ca: None,
            cadence_secs: 60.0,
            request_timeout_secs: 10.0,
            connect_timeout_secs: 5.0,
            retry_min_ms: 1_000,
            retry_max_ms: 60_000,
            max_response_bytes: 1 << 20,
            max_observation_age_secs: 3_600.0,
            keep_sent_hours: 24.0,
            queue: 4_096,
            identifier_system: "urn:holmes:0000000000000000".into(),
            device_system: "urn:holmes:device".into(),
            device_id: "0000000000000000".into(),
        }
    }
}

/// A base URL taken apart: whether it is https, `host:port` to connect to, the `Host` header
/// and the path prefix of every request (no trailing `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BaseUrl {
    pub(crate) https: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) path: String,
}

impl BaseUrl {
    pub(crate) fn parse(url: &str) -> Result<BaseUrl, String> {
        let bad = |why: &str| format!("fhir.base_url {url:?}: {why}");
        let (https, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(bad("must start with http:// or https://"));
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.contains('@') || path.contains(['?', '#']) {
            return Err(bad("no user, query or fragment"));
        }
        let default = if https { 443 } else { 80 };
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => {
                let (h, after) = v6.split_once(']').ok_or_else(|| bad("an unclosed ["))?;
                (h, after.strip_prefix(':'))
            }
            None => match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            },
        };
        let port = match port {
            None => default,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad("the port must be 1 to 65535"))?,
        };
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(bad("no host"));
        }
        Ok(BaseUrl {
            https,
            host: host.into(),
            port,
            path: path.trim_end_matches('/').into(),
        })
    }

    /// `host:port`, to connect to.
    pub(crate) fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl FhirConfig {
    /// The checks `holmes validate` and start-up run (also with the link off).
    pub(crate) fn validate(&self) -> Result<(), String> {
        let base = BaseUrl::parse(&self.base_url)?;
        if base.https && self.tls_ca.is_none() {
            return Err(
                "fhir.base_url is https: set fhir.tls_ca to the CA certificates to trust".into(),
            );
        }
        if !base.https && self.tls_ca.is_some() {
            return Err("fhir.tls_ca is set but fhir.base_url is not https".into());
        }
        const DAY: f64 = 86_400.0;
        super::outbound::check_link_times(
            "fhir",
            &[
                ("cadence_secs", self.cadence_secs, DAY),
                ("request_timeout_secs", self.request_timeout_secs, 3_600.0),
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
        if self.max_response_bytes < 4096 {
            return Err("fhir.max_response_bytes must be at least 4096".into());
        }
        if self.queue == 0 {
            return Err("fhir.queue must be positive".into());
        }
        for (name, v) in [
            ("identifier_system", &self.identifier_system),
            ("device_system", &self.device_system),
        ] {
            let scheme = v.split_once(':').map_or("", |s| s.0);
            if scheme.is_empty() || v.contains(char::is_whitespace) || v.contains('|') {
                return Err(format!(
                    "fhir.{name} {v:?} must be a URI (urn:..., http://...) without spaces or |"
                ));
            }
        }
        if self.device_id.is_empty() {
            return Err("fhir.device_id must be set".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_bad_values_are_named() {
        assert_eq!(FhirConfig::default().validate(), Ok(()));
        let bad = |edit: fn(&mut FhirConfig)| {
            let mut c = FhirConfig::default();
            edit(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.base_url = "ftp://x".into()).contains("fhir.base_url"));
        assert!(bad(|c| c.base_url = "http://:80/fhir".into()).contains("no host"));
        assert!(bad(|c| c.base_url = "http://h:0/fhir".into()).contains("port"));
        assert!(bad(|c| c.base_url = "https://h/fhir".into()).contains("fhir.tls_ca"));
        assert!(bad(|c| c.tls_ca = Some("/ca.pem".into())).contains("not https"));
        assert!(bad(|c| c.cadence_secs = 0.0).contains("fhir.cadence_secs"));
        assert!(bad(|c| c.request_timeout_secs = f64::NAN).contains("request_timeout_secs"));
        assert!(bad(|c| c.retry_max_ms = 1).contains("retry_min_ms"));
        assert!(bad(|c| c.identifier_system = "holmes".into()).contains("identifier_system"));
        assert!(bad(|c| c.device_id = "".into()).contains("device_id"));
    }

    #[test]
    fn base_urls_come_apart() {
        let b = BaseUrl::parse("https://ehr.example:8443/fhir/R4/").unwrap();
        assert_eq!(
            b,
            BaseUrl {
                https: true,
                host: "ehr.example".into(),
                port: 8443,
                path: "/fhir/R4".into()
            }
        );
        let b = BaseUrl::parse("http://[::1]/r4").unwrap();
        assert_eq!((b.port, b.address().as_str()), (80, "[::1]:80"));
        assert!(BaseUrl::parse("http://u@h/r4").is_err());
        assert!(BaseUrl::parse("http://h/r4?x=1").is_err());
    }
}
