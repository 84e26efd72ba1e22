//! The bottom layer: the data that crosses from one stage to the next, and helpers every layer
//! shares. It imports nothing of the application, so every module above may use it and none of
//! its types drags a stage along.
//!
//! - [`window`]: the signal's constants (250 Hz, lead slots) and a closed window with its
//!   quality, as the ward hands it to the engine.
//! - [`event`]: technical events and where they come from ([`event::Origin`]).
//! - [`score`]: a window's outcome (status, score, members), as the engine hands it to the store.
//! - [`patient`]: the patient a monitor says its bed is admitted with, and each bed's current one
//!   ([`patient::Admissions`], written by the monitors' connections, read by the outbound feeds).
//! - [`monitor_alarm`]: a bedside monitor's own arrhythmia alarm and Holmes's opinion on it.
//! - [`metrics`]: ROC-AUC, PR-AUC, thresholds and the mean-probability ensemble of predictions.
//! - [`tls`]: TLS configurations from PEM files (one-way or mutual) and the server handshake.
//! - [`stats`], [`time`], [`hash`], [`svg`]: percentiles, wall-clock milliseconds, SHA-256,
//!   text escaped for the reports' SVG figures.

pub(crate) mod event;
pub(crate) mod hash;
pub(crate) mod metrics;
pub mod monitor_alarm;
pub mod patient;
pub(crate) mod score;
pub mod stats;
pub(crate) mod svg;
pub mod time;
pub(crate) mod tls;
pub mod window;
