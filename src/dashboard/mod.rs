//! The ward dashboard, served by the same binary: the page (files from `web/`, embedded at
//! build time), its live feed, and the users who act on alarms. What it shows is the
//! [`board`](crate::board)'s (tiles, alarms, monitors' alarms with opinions) and the served
//! plan's rule; the dashboard chooses nothing.
//!
//! [`auth`] holds users and sessions, `throttle` the sign-in back-off; [`web`] holds the routes
//! (generic over the app's state through [`DashboardState`]): the page, the feed (server-sent
//! events), sign-in and alarm actions, the read guard, the same-origin check on
//! state-changing requests ([`origin`]) and the security headers. The page reads the same
//! public API as every other client (`docs/API.md`).

pub mod auth;
pub(crate) mod origin;
mod throttle;
pub(crate) mod web;

pub(crate) use web::{DashboardState, routes};
