//! The sections that steer the daemon rather than carry its data: the composer (and HOLMES's
//! search parameters), the dashboard, and running as a system service.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The composer's search methods (`composer.method`, `holmes compose --method`).
pub const METHODS: [&str; 7] = ["rd", "af", "lf", "npo", "holmes", "holmes-ucb", "exact"];

/// The `[composer]` config section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ComposerConfig {
    /// Compose the served ensemble from the zoo; false serves `ensemble.members` as given.
    pub enabled: bool,
    /// Search method: holmes, holmes-ucb, exact, rd, af, lf or npo.
    pub method: String,
    /// Serve an ensemble the zoo's `alarm_rules.json` validates (with its own alarm rule) when
    /// one covers the zoo's lead sets and fits the budget: one that reached its target first,
    /// `ensemble.members` among those, then the fewest false alarms the book records (out of
    /// fold, or on validation); the search otherwise.
    pub prefer_validated: bool,
    /// HOLMES's search parameters (N profiler calls, M candidates, K profiled per round, p, q,
    /// mutation degree, trees, exploration, seed); the paper's defaults.
    pub(crate) search: HolmesParams,
    /// Fraction of `engine.slo_ms` the composed ensemble's estimated latency may use.
    pub budget_fraction: f64,
    /// Most of a core the ward may take for an ensemble to be composed: its windows' least
    /// work (the members' and the beat counter's p50 work a window at full batches x windows
    /// a second) plus the monitors' streams (the ingest's CPU a bed, measured by `holmes
    /// profile --ingest`, else `assumed_ingest_ms`). The latency bounds see no queue below a
    /// full second, but bursts and other work on the same cores do. Calibrated on the 2-core
    /// bench (`BENCHMARKS.md`).
    pub max_utilisation: f64,
    /// The ingest's CPU a bed each second, ms, assumed until `holmes profile --ingest`
    /// measures it on this machine.
    pub assumed_ingest_ms: f64,
    /// Budgets of the cheaper ladder rungs, as fractions of the plan's budget.
    pub ladder: Vec<f64>,
    /// Beds assumed before monitors connect (at least `ward.beds`).
    pub initial_beds: usize,
    /// Recompose when the connected beds cross a multiple of this...
    pub beds_step: usize,
    /// ...and have held there this many seconds.
    pub settle_secs: f64,
    /// Seconds of committed scores the p95 watch looks at.
    pub(crate) p95_window_secs: f64,
    /// Fewest scored windows in that span before the p95 counts.
    pub p95_min_windows: usize,
    /// Seconds without a breach before stepping back up one rung.
    pub(crate) quiet_secs: f64,
}

impl Default for ComposerConfig {
    fn default() -> Self {
        ComposerConfig {
            enabled: true,
            method: "holmes".into(),
            prefer_validated: true,
            search: HolmesParams::default(),
            budget_fraction: 0.7,
            max_utilisation: 0.95,
            assumed_ingest_ms: 0.4,
            ladder: vec![0.5, 0.25, 0.1],
            initial_beds: 16,
            beds_step: 16,
            settle_secs: 10.0,
            p95_window_secs: 60.0,
            p95_min_windows: 20,
            quiet_secs: 300.0,
        }
    }
}

impl ComposerConfig {
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !METHODS.contains(&self.method.as_str()) {
            return Err(format!(
                "composer.method {:?} is not one of {}",
                self.method,
                METHODS.join(", ")
            ));
        }
        if !(self.max_utilisation > 0.0 && self.max_utilisation <= 1.0) {
            return Err("composer.max_utilisation must lie in (0, 1]".into());
        }
        if !(self.assumed_ingest_ms >= 0.0 && self.assumed_ingest_ms.is_finite()) {
            return Err(
                "composer.assumed_ingest_ms must be a finite number of ms, at least 0".into(),
            );
        }
        if !(self.budget_fraction > 0.0 && self.budget_fraction <= 1.0)
            || self.ladder.iter().any(|f| !(*f > 0.0 && *f < 1.0))
        {
            return Err(
                "composer.budget_fraction must lie in (0, 1] and ladder steps in (0, 1)".into(),
            );
        }
        let sp = &self.search;
        if self.beds_step == 0 || sp.budget_calls == 0 || sp.candidates == 0 || sp.top_k == 0 {
            return Err(
                "composer.beds_step and composer.search's budget_calls, candidates and \
                        top_k must be positive"
                    .into(),
            );
        }
        if !(0.0..=1.0).contains(&sp.p) || !(0.0..=1.0).contains(&sp.q) {
            return Err("composer.search.p and q must lie in [0, 1]".into());
        }
        Ok(())
    }
}

/// HOLMES's parameters (paper defaults where it gives them; the rest from its code).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HolmesParams {
    /// Profiler-call budget N.
    pub(crate) budget_calls: usize,
    /// Candidates explored per iteration M.
    pub(crate) candidates: usize,
    /// Candidates profiled per iteration K.
    pub(crate) top_k: usize,
    /// Share of candidates from genetic operators p (the rest are random).
    pub(crate) p: f64,
    /// Share of genetic candidates from mutation q (the rest by recombination).
    pub(crate) q: f64,
    /// Bits a mutation flips.
    pub(crate) mutation_degree: usize,
    /// Trees per surrogate forest.
    pub(crate) trees: usize,
    /// Rank candidates by mean + `explore` x spread across the trees (0: the paper's greedy).
    pub(crate) explore: f64,
    pub(crate) seed: u64,
}

impl Default for HolmesParams {
    fn default() -> Self {
        HolmesParams {
            budget_calls: 100,
            candidates: 1000,
            top_k: 10,
            p: 0.5,
            q: 0.5,
            mutation_degree: 6,
            trees: 20,
            explore: 0.0,
            seed: 42,
        }
    }
}

/// The `[dashboard]` config section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DashboardConfig {
    /// Open the read-only ward view and the read API without signing in.
    pub public_ward_view: bool,
    /// Only the fallback: the risk alarm serves the rule validated for the serving ensemble
    /// (the zoo's `alarm_rules.json`, written by `holmes evaluate --save-rule`). For an
    /// ensemble without one, a bed's risk alarm is raised when a window's score reaches this
    /// (no persistence), and the rule is shown as not validated...
    pub risk_alarm_on: f64,
    /// ...and clears when a window's score falls below this (hysteresis). Fallback only, as
    /// `risk_alarm_on`. With the beat counter, keep it above 0.2: a window with a VT run only
    /// below the counter's call scores up to 0.198 (a value at or below that serves as set,
    /// and the daemon warns).
    pub risk_alarm_off: f64,
    /// For an ensemble without a validated rule, first derive one from the rules the zoo
    /// validated for its other ensembles at the ward's hop and window (the same share of
    /// positive validation windows at or above the threshold; shown as derived, not
    /// validated); the two thresholds above serve only when nothing can be derived.
    pub derive_risk_alarm: bool,
    /// A lead-off alarm is raised when more than this fraction of a window was lead-off.
    pub(crate) lead_off_alarm: f64,
    /// Longest silence a user may set on an alarm, seconds.
    pub(crate) max_silence_secs: u64,
    /// Hours a sign-in lasts.
    pub(crate) session_hours: f64,
    /// Hours of score history in each tile's trend.
    pub(crate) trend_hours: f64,
    /// Tile order: `bed` (by bed id) or `risk` (highest score first).
    pub(crate) sort: String,
    /// Labels shown instead of bed ids, e.g. `{ "bed-1" = "Bay 1, window" }`.
    pub(crate) labels: BTreeMap<String, String>,
    /// Most live-feed (`/api/stream`) clients at once; more are answered 503.
    pub max_stream_clients: usize,
    /// Alarm changes waiting for the alarm writer (stored, then handed to the outbound
    /// links); a full queue makes the board wait.
    pub(crate) alarm_write_queue: usize,
    /// Failed sign-ins per user name, and per client address, before back-off.
    pub login_free_failures: u32,
    /// The first back-off, seconds; it doubles with each further failure.
    pub login_backoff_secs: f64,
    /// The longest back-off, seconds; a name or address quiet this long after its back-off
    /// starts afresh.
    pub login_backoff_max_secs: f64,
    /// Names and addresses whose failed sign-ins are remembered at most (the stalest are
    /// forgotten first).
    pub(crate) login_tracked: usize,
    /// Origins besides the server's own (the request's `Host`) allowed to send state-changing
    /// requests, e.g. a TLS proxy's `https://ward.example`.
    pub allowed_origins: Vec<String>,
}

impl Default for DashboardConfig {
    fn default() -> Self {
        DashboardConfig {
            public_ward_view: false,
            risk_alarm_on: 0.7,
            risk_alarm_off: 0.5,
            derive_risk_alarm: true,
            lead_off_alarm: 0.5,
            max_silence_secs: 600,
            session_hours: 12.0,
            trend_hours: 4.0,
            sort: "bed".into(),
            labels: BTreeMap::new(),
            max_stream_clients: 64,
            alarm_write_queue: 1024,
            login_free_failures: 5,
            login_backoff_secs: 1.0,
            login_backoff_max_secs: 300.0,
            login_tracked: 10_000,
            allowed_origins: Vec::new(),
        }
    }
}

impl DashboardConfig {
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !(0.0 <= self.risk_alarm_off
            && self.risk_alarm_off <= self.risk_alarm_on
            && self.risk_alarm_on <= 1.0)
        {
            return Err("dashboard: 0 <= risk_alarm_off <= risk_alarm_on <= 1".into());
        }
        if !(0.0..=1.0).contains(&self.lead_off_alarm) {
            return Err("dashboard.lead_off_alarm must lie in [0, 1]".into());
        }
        if self.session_hours <= 0.0
            || self.trend_hours <= 0.0
            || self.max_silence_secs == 0
            || self.max_stream_clients == 0
            || self.alarm_write_queue == 0
        {
            return Err(
                "dashboard.session_hours, trend_hours, max_silence_secs, max_stream_clients \
                 and alarm_write_queue must be positive"
                    .into(),
            );
        }
        let (first, max) = (self.login_backoff_secs, self.login_backoff_max_secs);
        if !(first > 0.0 && first.is_finite() && max >= first && max.is_finite())
            || self.login_tracked == 0
        {
            return Err(
                "dashboard: 0 < login_backoff_secs <= login_backoff_max_secs, and \
                 login_tracked positive"
                    .into(),
            );
        }
        if let Some(o) = self.allowed_origins.iter().find(|o| !is_origin(o)) {
            return Err(format!(
                "dashboard.allowed_origins: {o:?} is not an origin (scheme://host[:port])"
            ));
        }
        if !["bed", "risk"].contains(&self.sort.as_str()) {
            return Err(format!("dashboard.sort {:?} is not bed or risk", self.sort));
        }
        Ok(())
    }
}

/// `scheme://host[:port]` with no path: what a browser sends as `Origin`.
fn is_origin(o: &str) -> bool {
    o.split_once("://").is_some_and(|(scheme, rest)| {
        ["http", "https"].contains(&scheme) && !rest.is_empty() && !rest.contains(['/', '?', '#'])
    })
}

/// Running as a system service (the `[service]` config section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceConfig {
    /// Longest graceful shutdown, seconds: from SIGTERM to the database flushed. Past it the
    /// process exits non-zero without waiting further. Keep it below the unit's
    /// `TimeoutStopSec=`.
    pub shutdown_timeout_secs: f64,
    /// Seconds the engine may hold queued windows without finishing a batch, or the store
    /// writer may go without a turn of its loop, before the watchdog pings stop (systemd then
    /// restarts the service once `WatchdogSec=` passes without a ping).
    pub(crate) watchdog_stall_secs: f64,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            shutdown_timeout_secs: 20.0,
            watchdog_stall_secs: 30.0,
        }
    }
}

impl ServiceConfig {
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !(self.shutdown_timeout_secs > 0.0 && self.shutdown_timeout_secs.is_finite()) {
            return Err("service.shutdown_timeout_secs must be positive".into());
        }
        if !(self.watchdog_stall_secs > 0.0 && self.watchdog_stall_secs.is_finite()) {
            return Err("service.watchdog_stall_secs must be positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, DEFAULT_TOML};

    #[test]
    fn the_embedded_config_states_the_defaults() {
        assert_eq!(Config::default().composer, ComposerConfig::default());
        let bad = DEFAULT_TOML.replace("top_k = 10", "top_k = 0");
        let e = Config::parse(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("top_k"), "{e}");
    }

    #[test]
    fn the_documented_service_section_is_the_default() {
        assert_eq!(Config::default().service, ServiceConfig::default());
        let bad = ServiceConfig {
            shutdown_timeout_secs: 0.0,
            ..Default::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .contains("shutdown_timeout_secs")
        );
    }
}
