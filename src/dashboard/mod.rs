//! The ward dashboard, served by the same binary: the page (files from `web/`, embedded at
//! build time), its live feed, alarms, and the users who act on them.
//!
//! [`board`] keeps the ward's tiles and alarms and publishes snapshots; [`alarms`] is the
//! alarm state machine and its table; [`auth`] holds users and sessions; [`web`] serves the
//! page, the feed (server-sent events), sign-in and alarm actions, and the security headers.
//! The page reads the same public API as every other client (`docs/API.md`).

pub mod alarms;
pub mod auth;
pub mod board;
pub mod web;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `[dashboard]` config section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DashboardConfig {
    /// Open the read-only ward view and the read API without signing in.
    pub public_ward_view: bool,
    /// A bed's risk alarm is raised when its score reaches this...
    pub risk_alarm_on: f64,
    /// ...and clears when the score falls below this (hysteresis).
    pub risk_alarm_off: f64,
    /// A lead-off alarm is raised when more than this fraction of a window was lead-off.
    pub lead_off_alarm: f64,
    /// Longest silence a user may set on an alarm, seconds.
    pub max_silence_secs: u64,
    /// Hours a sign-in lasts.
    pub session_hours: f64,
    /// Hours of score history in each tile's trend.
    pub trend_hours: f64,
    /// Tile order: `bed` (by bed id) or `risk` (highest score first).
    pub sort: String,
    /// Labels shown instead of bed ids, e.g. `{ "bed-1" = "Bay 1, window" }`.
    pub labels: BTreeMap<String, String>,
    /// Most live-feed (`/api/stream`) clients at once; more are answered 503.
    pub max_stream_clients: usize,
}

impl Default for DashboardConfig {
    fn default() -> Self {
        DashboardConfig {
            public_ward_view: false,
            risk_alarm_on: 0.7,
            risk_alarm_off: 0.5,
            lead_off_alarm: 0.5,
            max_silence_secs: 600,
            session_hours: 12.0,
            trend_hours: 4.0,
            sort: "bed".into(),
            labels: BTreeMap::new(),
            max_stream_clients: 64,
        }
    }
}

impl DashboardConfig {
    pub fn validate(&self) -> Result<(), String> {
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
        {
            return Err(
                "dashboard.session_hours, trend_hours, max_silence_secs and \
                 max_stream_clients must be positive"
                    .into(),
            );
        }
        if !["bed", "risk"].contains(&self.sort.as_str()) {
            return Err(format!("dashboard.sort {:?} is not bed or risk", self.sort));
        }
        Ok(())
    }
}
