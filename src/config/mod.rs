//! Configuration, pure data: one TOML file, strict (`deny_unknown_fields`), with the defaults
//! embedded from `config/holmes.toml` so the binary runs from a bare checkout. Every section is
//! defined here ([`serving`]: the daemon's data path; [`control`]: composer, dashboard,
//! service; [`outbound`]: HL7 to the hospital; [`fhir`]: FHIR R4 to the hospital; [`devices`]:
//! monitors' alarms in from a gateway), with its own checks; nothing here imports a subsystem.
//!
//! Read at start-up by the command line; each subsystem is handed its own section.

mod control;
mod devices;
mod fhir;
mod outbound;
mod serving;

pub use control::METHODS;
pub(crate) use control::{ComposerConfig, DashboardConfig, HolmesParams, ServiceConfig};
pub use devices::{Pcd04InConfig, SdcConfig, SdcDevice};
pub(crate) use fhir::BaseUrl;
pub use fhir::FhirConfig;
pub use outbound::Hl7Config;
pub(crate) use serving::{
    AuthConfig, EnsembleConfig, IngestConfig, LeadsConfig, PlainHttpOnNetwork, QualityConfig,
    ServerConfig, WardConfig, check_transport,
};
pub use serving::{Combine, EngineConfig, Stagger, StorageConfig, TlsConfig};

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The embedded defaults.
pub const DEFAULT_TOML: &str = include_str!("../../config/holmes.toml");

/// The shortest ward buffer, s: a monitor's alarm is read over the 16 s before its onset
/// (`core::monitor_alarm::LOOKBACK_SECS`, which a ward test holds to it) after waiting up to a
/// second for them.
pub(crate) const MIN_ALARM_BUFFER_SECS: u32 = 18;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: {reason}")]
    Parse { origin: String, reason: String },
    #[error("{origin}: {reason}")]
    Invalid { origin: String, reason: String },
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub auth: AuthConfig,
    pub ward: WardConfig,
    pub(crate) leads: LeadsConfig,
    pub ingest: IngestConfig,
    pub(crate) quality: QualityConfig,
    pub ensemble: EnsembleConfig,
    pub engine: EngineConfig,
    pub storage: StorageConfig,
    /// Composition of the served ensemble (absent: the defaults).
    #[serde(default)]
    pub composer: ComposerConfig,
    /// The ward dashboard (absent: the defaults).
    #[serde(default)]
    pub dashboard: DashboardConfig,
    /// Running as a system service: shutdown bound, watchdog (absent: the defaults).
    #[serde(default)]
    pub service: ServiceConfig,
    /// Scores and alarms out to the hospital over HL7 v2 / MLLP (absent: the defaults, off).
    #[serde(default)]
    pub hl7: Hl7Config,
    /// Scores and alarms out to the hospital as FHIR R4 resources (absent: the defaults, off).
    #[serde(default)]
    pub fhir: FhirConfig,
    /// Monitors' alarms in from a gateway as IHE PCD-04 reports over MLLP (absent: the
    /// defaults, off).
    #[serde(default)]
    pub pcd04_in: Pcd04InConfig,
    /// Bedside monitors' ECG and alarms over IEEE 11073 SDC (absent: the defaults, off).
    #[serde(default)]
    pub sdc: SdcConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config::parse(DEFAULT_TOML, "embedded defaults").expect("embedded defaults are valid")
    }
}

impl Config {
    /// Parses and validates TOML text; `origin` names it in errors.
    pub(crate) fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        if let Ok(t) = text.parse::<toml::Table>()
            && t.get("auth").and_then(|a| a.get("device_tokens")).is_some()
        {
            return Err(ConfigError::Invalid {
                origin: origin.to_owned(),
                reason: "auth.device_tokens is gone: plain tokens in the config are replaced by \
                         per-device tokens stored hashed. Issue one per monitor with `holmes \
                         device add NAME`, then delete the list (auth.require_device_tokens = \
                         false accepts any token, for a demo)"
                    .into(),
            });
        }
        let c: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.to_owned(),
            reason: e.to_string(),
        })?;
        c.validate().map_err(|reason| ConfigError::Invalid {
            origin: origin.to_owned(),
            reason,
        })?;
        Ok(c)
    }

    /// Reads a config file.
    pub(crate) fn read(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        Config::parse(&text, &path.display().to_string())
    }

    /// The config file given, or the embedded defaults.
    pub(crate) fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        match path {
            Some(p) => Config::read(p),
            None => Ok(Config::default()),
        }
    }

    /// Cross-field checks.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let w = &self.ward;
        if w.window_secs == 0 || w.hop_secs == 0 {
            return Err("ward.window_secs and ward.hop_secs must be positive".into());
        }
        if (w.buffer_secs as f64) < w.window_secs as f64 + w.grace_secs + 2.0 {
            return Err("ward.buffer_secs must cover window_secs + grace_secs + 2".into());
        }
        if w.buffer_secs < MIN_ALARM_BUFFER_SECS {
            return Err(format!(
                "ward.buffer_secs must be at least {MIN_ALARM_BUFFER_SECS}: a monitor's alarm \
                 is read over the 16 s before it, after waiting up to a second"
            ));
        }
        if !(w.stale_secs > 0.0 && w.lost_secs > w.stale_secs) {
            return Err("ward.lost_secs must exceed ward.stale_secs > 0".into());
        }
        if self.ensemble.members.is_empty() {
            return Err("ensemble.members is empty".into());
        }
        let e = &self.engine;
        if e.slo_ms == 0
            || e.queue_capacity == 0
            || e.batch_cap == 0
            || e.workers_per_model == 0
            || self.ingest.bed_queue == 0
        {
            return Err(
                "engine.slo_ms, queue_capacity, batch_cap, workers_per_model and \
                        ingest.bed_queue must be positive"
                    .into(),
            );
        }
        let sv = &self.server;
        check_transport(sv.listen, sv.tls.as_ref(), sv.allow_plain_http_on_network)
            .map_err(|e| format!("server.listen: {e}"))?;
        if !(0.05..=3600.0).contains(&self.auth.devices_refresh_secs) {
            return Err("auth.devices_refresh_secs must lie in [0.05, 3600]".into());
        }
        if self.auth.max_beds_per_gateway == 0 {
            return Err("auth.max_beds_per_gateway must be positive".into());
        }
        self.composer.validate()?;
        self.dashboard.validate()?;
        self.service.validate()?;
        self.hl7.validate()?;
        self.fhir.validate()?;
        self.pcd04_in.validate()?;
        self.sdc.validate()?;
        if self.sdc.enabled
            && self.sdc.tls_ca.is_some()
            && self.sdc.identity(sv.tls.as_ref()).is_none()
        {
            return Err(
                "sdc.tls_ca asks for TLS: name Holmes's certificate and key in [sdc.tls] or \
                 [server.tls]"
                    .into(),
            );
        }
        let st = &self.storage;
        if st.batch_rows == 0 || st.backlog_rows == 0 {
            return Err("storage.batch_rows and storage.backlog_rows must be positive".into());
        }
        if st.retry_min_ms == 0 || st.retry_max_ms < st.retry_min_ms {
            return Err("storage: 0 < retry_min_ms <= retry_max_ms".into());
        }
        if st.thin_after_days > 0 && st.thin_keep_secs == 0 {
            return Err("storage.thin_keep_secs must be positive when thinning is on".into());
        }
        let i = &self.ingest;
        if !(i.hello_timeout_secs > 0.0 && i.idle_timeout_secs > 0.0) || i.max_messages_per_sec == 0
        {
            return Err(
                "ingest.hello_timeout_secs, idle_timeout_secs and max_messages_per_sec must be \
                 positive"
                    .into(),
            );
        }
        if let Some((name, _)) = i
            .vital_ranges
            .iter()
            .find(|(_, [lo, hi])| !(lo.is_finite() && hi.is_finite() && lo <= hi))
        {
            return Err(format!(
                "ingest.vital_ranges.{name} must be [low, high], finite, low <= high"
            ));
        }
        let (t, b) = (
            self.server.header_read_timeout_secs,
            self.server.body_read_timeout_secs,
        );
        if self.server.max_connections == 0
            || self.server.max_body_bytes == 0
            || !(t.is_finite() && t > 0.0 && b.is_finite() && b > 0.0)
        {
            return Err(
                "server.max_connections, max_body_bytes, header_read_timeout_secs and \
                 body_read_timeout_secs must be positive"
                    .into(),
            );
        }
        if !(0.0..1.0).contains(&self.server.monitor_share) {
            return Err("server.monitor_share must lie in [0, 1)".into());
        }
        for (name, v) in [
            ("quality.min_coverage", self.quality.min_coverage),
            (
                "quality.max_lead_off_fraction",
                self.quality.max_lead_off_fraction,
            ),
            (
                "quality.min_vitals_coverage",
                self.quality.min_vitals_coverage,
            ),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{name} must lie in [0, 1]"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_defaults_parse() {
        let c = Config::default();
        assert_eq!((c.ward.window_secs, c.ward.hop_secs), (30, 5));
        // Secure by default: registered devices only, plain HTTP on loopback only.
        assert!(c.auth.require_device_tokens);
        assert!(!c.server.allow_plain_http_on_network && c.server.tls.is_none());
    }

    /// Every option the config has (serialised from the defaults, so a field added with
    /// `#[serde(default)]` counts too) appears in `config/holmes.toml`, in a paragraph with a
    /// comment: a new option cannot ship undocumented.
    #[test]
    fn every_option_is_in_the_documented_example() {
        fn walk(have: &toml::Value, doc: Option<&toml::Value>, path: &str, out: &mut Vec<String>) {
            let toml::Value::Table(t) = have else { return };
            for (k, v) in t {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                let d = doc.and_then(|d| d.get(k));
                if d.is_none() {
                    out.push(p.clone());
                }
                walk(v, d, &p, out);
            }
        }
        let documented: toml::Value = toml::from_str(DEFAULT_TOML).unwrap();
        let all = toml::Value::try_from(Config::default()).unwrap();
        let mut missing = Vec::new();
        walk(&all, Some(&documented), "", &mut missing);
        assert!(
            missing.is_empty(),
            "missing from config/holmes.toml: {missing:?}"
        );
        for para in DEFAULT_TOML.split("\n\n") {
            let sets = para.lines().any(|l| {
                let l = l.trim_start();
                !l.starts_with('#') && !l.starts_with('[') && l.contains('=')
            });
            let commented = para.lines().any(|l| l.trim_start().starts_with('#'));
            assert!(!sets || commented, "an option without a comment:\n{para}");
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let bad = DEFAULT_TOML.replace("[auth]", "[auth]\nsurprise = 1");
        let e = Config::parse(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("x.toml") && e.contains("surprise"), "{e}");
        let old = DEFAULT_TOML.replace("[auth]", "[auth]\ndevice_tokens = [\"s3cret\"]");
        let e = Config::parse(&old, "x.toml").unwrap_err().to_string();
        assert!(
            e.contains("holmes device add") && !e.contains("s3cret"),
            "{e}"
        );
        let open = DEFAULT_TOML.replace("127.0.0.1:8080", "0.0.0.0:8080");
        let e = Config::parse(&open, "x.toml").unwrap_err().to_string();
        assert!(e.contains("refusing plain HTTP"), "{e}");
        let bad = DEFAULT_TOML.replace("min_coverage = 0.8", "min_coverage = 1.5");
        let e = Config::parse(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("quality.min_coverage"), "{e}");
        for u in ["0.0", "1.5"] {
            let bad =
                DEFAULT_TOML.replace("max_utilisation = 0.95", &format!("max_utilisation = {u}"));
            let e = Config::parse(&bad, "x.toml").unwrap_err().to_string();
            assert!(e.contains("composer.max_utilisation"), "{e}");
        }
        let bad = DEFAULT_TOML.replace("stagger = \"wall_clock\"", "stagger = \"evenly\"");
        let e = Config::parse(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("x.toml") && e.contains("evenly"), "{e}");
    }
}
