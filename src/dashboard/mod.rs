//! The ward dashboard, served by the same binary: the page (files from `web/`, embedded at
//! build time), its live feed, alarms, and the users who act on them.
//!
//! [`board`] keeps the ward's tiles and alarms and publishes snapshots, each tile with its
//! monitor's recent alarms and Holmes's opinions ([`monitor_alarms`]); [`alarms`] is the
//! alarm state machine and its table; [`rule`] chooses the risk alarm rule for the serving
//! ensemble; [`recorder`] stores each alarm change, then [`handover`] hands it to the consumers
//! above (the outbound links) without waiting; [`auth`] holds users and sessions, `throttle` the
//! sign-in back-off; [`web`] holds the routes (generic over the app's state through
//! [`DashboardState`]): the page, the feed (server-sent events), sign-in and alarm actions, the
//! read guard, the same-origin check on state-changing requests and the security headers.
//! The page reads the same public API as every other client (`docs/API.md`).

pub(crate) mod alarms;
pub mod auth;
pub(crate) mod board;
pub(crate) mod handover;
pub(crate) mod monitor_alarms;
pub(crate) mod origin;
mod recorder;
pub(crate) mod rule;
mod throttle;
pub(crate) mod web;

pub(crate) use web::{DashboardState, routes};
