//! One zoo model as the composer sees it ([`Entry`]): its identity, the lead sets it scores,
//! its validation and test predictions and its stored latency profile. Built by
//! [`compose`](super::compose) from the zoo; read by the latency estimators
//! ([`latency`](super::latency)), the searches' profilers and the validated ensembles.

use crate::serving::engine::profile::Profile;
use crate::zoo::{Input, LeadSets, Predictions};

/// One zoo model as the composer sees it.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) name: String,
    /// The weights' SHA-256 (how the zoo's alarm rules name a member).
    pub(crate) sha256: String,
    /// The lead sets it scores (none for a vitals model).
    pub(crate) leads: LeadSets,
    /// What it reads (how it pools by lead).
    pub(crate) input: Input,
    pub(crate) validation: Predictions,
    pub(crate) test: Predictions,
    /// Service time of one window on the CPU (p95 at batch 1), ms.
    pub(crate) latency_ms: f64,
    /// The stored CPU profile (batch sizes measured, fitted curve), when there is one.
    pub(crate) profile: Option<Profile>,
}
