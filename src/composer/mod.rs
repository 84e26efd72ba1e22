//! The ensemble composer: which zoo models to ensemble so that validation accuracy is highest
//! while end-to-end latency stays within the budget (HOLMES section 3.3), or, the dual, so that
//! latency is lowest while accuracy reaches a floor (appendix A.6).
//!
//! [`search`] holds the algorithms (HOLMES, RD, AF, LF, NPO, exact) over a [`profiler`];
//! [`compose`] wires the zoo ([`entry`] per model) into it: accuracy profiles from the manifests' validation
//! predictions ([`metrics`](crate::core::metrics)), latency from stored model profiles
//! ([`profile`](crate::serving::engine::profile)) through one of two estimators, the [`netcalc`] queueing bound
//! or the [`des`] discrete-event simulation, or measured through the engine ([`measure`]).
//! [`report`] runs `holmes compose` and writes its table, JSON and [`plot`]. [`validated`]
//! serves the rule book's ensembles first; [`derived`] gives an ensemble without a rule one
//! transferred from them. [`service`] is the recomposition actor publishing what serves;
//! [`served`] adds the risk alarm rule [`rule`] chooses for it and publishes both as the one
//! served plan the board and the API read.

/// The tables the composer's tests use: the store's, the profiles', the ingest's costs and the
/// plans'.
#[cfg(test)]
pub(crate) const TEST_SCHEMA: crate::serving::store::Schema =
    crate::serving::store::Schema::new(&[
        crate::serving::store::MIGRATIONS,
        crate::serving::engine::profile::MIGRATIONS,
        crate::serving::ingest::cost::MIGRATIONS,
        plans::MIGRATIONS,
    ]);

pub(crate) mod compose;
pub(crate) mod derived;
pub(crate) mod des;
pub(crate) mod entry;
pub(crate) mod latency;
pub mod measure;
pub(crate) mod netcalc;
pub(crate) mod planning;
pub(crate) mod plans;
pub(crate) mod plot;
pub(crate) mod profiler;
pub(crate) mod report;
pub(crate) mod rule;
pub(crate) mod search;
pub(crate) mod served;
pub(crate) mod service;
pub(crate) mod validated;
