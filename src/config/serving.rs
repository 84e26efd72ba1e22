//! The sections of the daemon's data path: server and TLS, monitor authentication, ward,
//! leads, ingest, quality, ensemble, engine and storage.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Address the HTTP API and the monitor WebSocket listen on.
    pub listen: SocketAddr,
    /// Most connections open at once (monitors, pages, API clients); further ones are answered
    /// 503 and closed.
    pub max_connections: usize,
    /// Seconds a client has to send a request's headers before its connection is closed.
    pub header_read_timeout_secs: f64,
    /// Seconds a client has, after the headers, to send a request's body: a slower one is
    /// answered 408 and its connection closed.
    pub body_read_timeout_secs: f64,
    /// Largest request body, bytes (every route takes a small JSON body or none); a larger one
    /// is answered 413 unread.
    pub(crate) max_body_bytes: usize,
    /// Share of `max_connections` kept for monitors' WebSockets (`/ws/monitor`): pages and API
    /// clients hold at most the rest.
    pub monitor_share: f64,
    /// Serve plain HTTP on a non-loopback address (without `tls`); false refuses to start so.
    #[serde(default)]
    pub allow_plain_http_on_network: bool,
    /// HTTPS and `wss://` with this certificate (absent: plain HTTP).
    #[serde(default)]
    pub tls: Option<TlsConfig>,
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
    /// Most beds a gateway (a registered device bound to no bed) holds in the ward at once;
    /// a hello for one more is refused (4006) unless one of its beds is idle.
    pub max_beds_per_gateway: usize,
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
    /// Seconds of signal buffered per channel and bed (at least window + grace + 2, and 18).
    pub(crate) buffer_secs: u32,
    /// How the beds' window closings are spread over the hop: `"wall_clock"` (the default),
    /// `"timeline"` or `"off"`; `true` reads as `"wall_clock"` and `false` as `"off"`.
    pub stagger: Stagger,
    /// Hand closed windows to the engine (false: ingest only; windows close and are counted
    /// but nothing is scored; for capacity tests, never on a ward).
    pub(crate) scoring: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeadsConfig {
    /// Lead names for the primary role, in order of preference (case-insensitive): the sent
    /// lead listed first takes it.
    pub(crate) primary: Vec<String>,
    /// Lead names for the secondary role, in order of preference; a role no listed lead
    /// takes goes to a remaining lead of either list.
    pub(crate) secondary: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestConfig {
    /// Largest WebSocket message accepted, bytes.
    pub max_frame_bytes: usize,
    /// Most samples per lead in one frame.
    pub(crate) max_samples_per_frame: usize,
    /// Samples with a larger magnitude (mV) are discarded as out of range.
    pub(crate) max_abs_mv: f32,
    /// Commands queued from a connection to its bed's aggregator.
    pub(crate) bed_queue: usize,
    /// Bad frames per connection per minute before the connection is closed.
    pub(crate) max_errors_per_minute: u32,
    /// Seconds without any message before a connection is closed.
    pub idle_timeout_secs: f64,
    /// Seconds a new monitor connection has to send its hello before it is closed (4000).
    pub hello_timeout_secs: f64,
    /// Messages per second a connection may send (bursts of one second's worth); beyond it
    /// the server stops reading that connection until it is back under the rate.
    pub max_messages_per_sec: u32,
    /// Plausible range `[low, high]` per vital (by name, in the unit the name implies); a
    /// reading outside it, or not finite, counts as absent and is answered `bad_vitals`.
    /// Vitals not listed need only be finite.
    pub(crate) vital_ranges: BTreeMap<String, [f64; 2]>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QualityConfig {
    /// Fraction of a lead's samples that must have arrived for it to be scored.
    pub(crate) min_coverage: f64,
    /// Largest lead-off fraction of the window for a usable lead.
    pub(crate) max_lead_off_fraction: f64,
    /// Fraction of heart-rate seconds needed for the vitals members.
    pub(crate) min_vitals_coverage: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnsembleConfig {
    /// Zoo folder.
    pub models_dir: PathBuf,
    /// Member model names.
    pub members: Vec<String>,
    /// Count ventricular beats beside the members when the zoo holds a beat counter
    /// (`beats.json`): a window whose beats end in a VT run scores 1 (a run only below the
    /// counter's call, at least 0.2 times its level). True when absent.
    #[serde(default = "default_true")]
    pub count_beats: bool,
}

fn default_true() -> bool {
    true
}

fn default_thin_after_days() -> u32 {
    2
}

fn default_thin_keep_secs() -> u32 {
    30
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// SQLite database file.
    pub db: PathBuf,
    /// Days of scores, events and monitor alarms kept.
    pub retention_days: u32,
    /// Scores older than this many days are thinned to one window per bed per
    /// `thin_keep_secs` (a risk alarm's onset window stays); 0: never thinned. 2 when absent.
    #[serde(default = "default_thin_after_days")]
    pub thin_after_days: u32,
    /// After thinning, one window per bed is kept per this many seconds of its timeline.
    #[serde(default = "default_thin_keep_secs")]
    pub thin_keep_secs: u32,
    /// Most rows per write transaction.
    pub batch_rows: usize,
    /// Longest wait (ms) for more rows once the queued ones are taken (0: none).
    pub flush_ms: u64,
    /// Rows held in memory while the database cannot be written (disk full, read-only); when
    /// full, the oldest are dropped and counted.
    pub backlog_rows: usize,
    /// First wait (ms) before retrying a failed write; doubles up to `retry_max_ms`.
    pub retry_min_ms: u64,
    /// Longest wait (ms) between retries of a failed write.
    pub retry_max_ms: u64,
}

/// `[server.tls]`: serve HTTPS and `wss://` with this certificate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM file with the server's certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM file with the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Plain HTTP off loopback, refused: what [`check_transport`] says.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "refusing plain HTTP on {addr}: monitors' tokens and the ward's data would cross the \
     network unencrypted. Configure [server.tls] cert and key, listen on a loopback \
     address (127.0.0.1 or ::1), or set server.allow_plain_http_on_network = true"
)]
pub struct PlainHttpOnNetwork {
    pub(crate) addr: SocketAddr,
}

/// Whether the server may listen on `addr` with `tls` (None: plain HTTP): plain HTTP only on a
/// loopback address, unless `allow_plain_on_network` (a TLS-terminating proxy in front).
pub(crate) fn check_transport(
    addr: SocketAddr,
    tls: Option<&TlsConfig>,
    allow_plain_on_network: bool,
) -> Result<(), PlainHttpOnNetwork> {
    if tls.is_none() && !addr.ip().is_loopback() && !allow_plain_on_network {
        return Err(PlainHttpOnNetwork { addr });
    }
    Ok(())
}

/// How a bed's window ends are placed within the hop ([`WardConfig::stagger`]). Each bed has
/// a slot, a fraction of the hop: configured beds by their order, others by the golden-ratio
/// sequence (evenly spread for any count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stagger {
    /// The slot is a moment of the wall clock: a hop before a bed's first window ends, its
    /// window ends are placed so that they close at its slot past each whole hop of the
    /// daemon's clock, from when its samples were taken (placed again, only forward, after a
    /// backlog). Beds close evenly spread however their monitors' starts fall.
    WallClock,
    /// The slot is a place on the bed's own sample timeline, counted from its monitor's first
    /// sample: deterministic (a lone configured bed's windows end at whole hops), but beds
    /// whose monitors started at different moments can close together on the wall clock.
    Timeline,
    /// Every bed's windows end at whole hops of its own timeline: with monitors started
    /// together, every window closes at once (the worst-case burst, for benchmarks).
    Off,
}

impl<'de> Deserialize<'de> for Stagger {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Stagger;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(r#""wall_clock", "timeline", "off", or a boolean"#)
            }
            fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Stagger, E> {
                Ok(if b { Stagger::WallClock } else { Stagger::Off })
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Stagger, E> {
                match s {
                    "wall_clock" => Ok(Stagger::WallClock),
                    "timeline" => Ok(Stagger::Timeline),
                    "off" => Ok(Stagger::Off),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(s), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// How member probabilities combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// Mean probability (HOLMES eq. 5), whatever the ensemble's alarm rule says; only a rule
    /// chosen for the plain mean then serves.
    Mean,
    /// Weighted mean by each member's weight: the ensemble's alarm rule says how its members
    /// pool (the primary lead's share), else every member weighs 1 (the mean).
    WeightedMean,
}

/// Engine settings (the `[engine]` config section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// End-to-end budget: last sample of a window to commit of its score, ms.
    pub slo_ms: u64,
    /// Windows waiting per model queue at most.
    pub queue_capacity: usize,
    /// Most windows per batch (the plan may lower it per model).
    pub batch_cap: usize,
    /// Worker threads per model (the plan may change it).
    pub workers_per_model: usize,
    /// How member probabilities combine.
    pub combine: Combine,
    /// Device for models without a pin: `auto` (first GPU, else the CPU), `cpu` or `cuda:N`.
    pub device: String,
    /// Per-model device pins, e.g. `{ "ecg-primary-30s-w32-d4" = "cuda:0" }`.
    #[serde(default)]
    pub pin: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stagger_reads_its_modes_and_the_old_booleans() {
        #[derive(Deserialize)]
        struct W {
            stagger: Stagger,
        }
        let read = |t: &str| toml::from_str::<W>(t).map(|w| w.stagger);
        assert_eq!(
            read("stagger = \"wall_clock\"").unwrap(),
            Stagger::WallClock
        );
        assert_eq!(read("stagger = \"timeline\"").unwrap(), Stagger::Timeline);
        assert_eq!(read("stagger = \"off\"").unwrap(), Stagger::Off);
        assert_eq!(read("stagger = true").unwrap(), Stagger::WallClock);
        assert_eq!(read("stagger = false").unwrap(), Stagger::Off);
        let e = read("stagger = \"evenly\"").unwrap_err().to_string();
        assert!(e.contains("wall_clock") && e.contains("evenly"), "{e}");
    }

    #[test]
    fn plain_http_stays_on_loopback_unless_allowed() {
        let tls = TlsConfig {
            cert: "c.pem".into(),
            key: "k.pem".into(),
        };
        let lo: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let lo6: SocketAddr = "[::1]:8080".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let lan: SocketAddr = "10.1.2.3:8443".parse().unwrap();
        assert!(check_transport(lo, None, false).is_ok());
        assert!(check_transport(lo6, None, false).is_ok());
        let e = check_transport(any, None, false).unwrap_err().to_string();
        assert!(
            e.contains("0.0.0.0:8080") && e.contains("[server.tls]"),
            "{e}"
        );
        assert!(check_transport(lan, None, false).is_err());
        assert!(check_transport(lan, None, true).is_ok());
        assert!(check_transport(lan, Some(&tls), false).is_ok());
    }
}
