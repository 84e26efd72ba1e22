//! Configuration: one TOML file, strict (`deny_unknown_fields`), with the defaults embedded
//! from `config/holmes.toml` so the binary runs from a bare checkout.
//!
//! Read at start-up by [`cli`](crate::cli); handed to every subsystem as its own section.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The embedded defaults.
pub const DEFAULT_TOML: &str = include_str!("../config/holmes.toml");

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
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
    pub leads: LeadsConfig,
    pub ingest: IngestConfig,
    pub quality: QualityConfig,
    pub ensemble: EnsembleConfig,
    pub engine: crate::engine::EngineConfig,
    pub storage: StorageConfig,
    /// Composition of the served ensemble (absent: the defaults).
    #[serde(default)]
    pub composer: crate::composer::service::ComposerConfig,
    /// The ward dashboard (absent: the defaults).
    #[serde(default)]
    pub dashboard: crate::dashboard::DashboardConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Address the HTTP API and the monitor WebSocket listen on.
    pub listen: SocketAddr,
    /// Serve plain HTTP on a non-loopback address (without `tls`); false refuses to start so.
    #[serde(default)]
    pub allow_plain_http_on_network: bool,
    /// HTTPS and `wss://` with this certificate (absent: plain HTTP).
    #[serde(default)]
    pub tls: Option<crate::tls::TlsConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Monitors must present a token issued by `holmes device add` for the device they name
    /// (false: any hello is accepted, as the demo and the bench run).
    pub require_device_tokens: bool,
    /// Seconds between re-reads of the devices table: a revoked device is refused, and its
    /// live connections closed, within this time.
    pub devices_refresh_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WardConfig {
    /// Window length, seconds of the bed's sample timeline.
    pub window_secs: u32,
    /// Seconds between window closings per bed.
    pub hop_secs: u32,
    /// Wall-clock seconds a due window waits for missing samples before closing with a gap.
    pub grace_secs: f64,
    /// Beds known in advance, in phase order.
    pub beds: Vec<String>,
    /// Admit beds not in `beds` (false: refuse them at hello).
    pub admit_unknown_beds: bool,
    /// Most beds held; a hello for a further bed is refused.
    pub max_beds: usize,
    /// Seconds without data before a bed is stale.
    pub stale_secs: f64,
    /// Seconds without data before a bed is lost.
    pub lost_secs: f64,
    /// Seconds of signal buffered per channel and bed.
    pub buffer_secs: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeadsConfig {
    /// Lead names that take the primary role (case-insensitive, first match wins).
    pub primary: Vec<String>,
    /// Lead names that take the secondary role.
    pub secondary: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestConfig {
    /// Largest WebSocket message accepted, bytes.
    pub max_frame_bytes: usize,
    /// Most samples per lead in one frame.
    pub max_samples_per_frame: usize,
    /// Samples with a larger magnitude (mV) are discarded as out of range.
    pub max_abs_mv: f32,
    /// Commands queued from a connection to its bed's aggregator.
    pub bed_queue: usize,
    /// Bad frames per connection per minute before the connection is closed.
    pub max_errors_per_minute: u32,
    /// Seconds without any message before a connection is closed.
    pub idle_timeout_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QualityConfig {
    /// Fraction of a lead's samples that must have arrived for it to be scored.
    pub min_coverage: f64,
    /// Largest lead-off fraction of the window for a usable lead.
    pub max_lead_off_fraction: f64,
    /// Fraction of heart-rate seconds needed for the vitals members.
    pub min_vitals_coverage: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnsembleConfig {
    /// Zoo folder.
    pub models_dir: PathBuf,
    /// Member model names.
    pub members: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// SQLite database file.
    pub db: PathBuf,
    /// Days of scores and events kept.
    pub retention_days: u32,
    /// Most rows per write transaction.
    pub batch_rows: usize,
    /// Longest wait (ms) for more rows once the queued ones are taken (0: none).
    pub flush_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config::parse(DEFAULT_TOML, "embedded defaults").expect("embedded defaults are valid")
    }
}

impl Config {
    /// Parses and validates TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
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
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        Config::parse(&text, &path.display().to_string())
    }

    /// Cross-field checks.
    pub fn validate(&self) -> Result<(), String> {
        let w = &self.ward;
        if w.window_secs == 0 || w.hop_secs == 0 {
            return Err("ward.window_secs and ward.hop_secs must be positive".into());
        }
        if (w.buffer_secs as f64) < w.window_secs as f64 + w.grace_secs + 2.0 {
            return Err("ward.buffer_secs must cover window_secs + grace_secs + 2".into());
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
        crate::tls::check_transport(sv.listen, sv.tls.as_ref(), sv.allow_plain_http_on_network)
            .map_err(|e| format!("server.listen: {e}"))?;
        if !(0.05..=3600.0).contains(&self.auth.devices_refresh_secs) {
            return Err("auth.devices_refresh_secs must lie in [0.05, 3600]".into());
        }
        self.composer.validate()?;
        self.dashboard.validate()?;
        if self.storage.batch_rows == 0 {
            return Err("storage.batch_rows must be positive".into());
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
        assert_eq!((c.ward.window_secs, c.ward.hop_secs), (30, 30));
        // Secure by default: registered devices only, plain HTTP on loopback only.
        assert!(c.auth.require_device_tokens);
        assert!(!c.server.allow_plain_http_on_network && c.server.tls.is_none());
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
    }
}
