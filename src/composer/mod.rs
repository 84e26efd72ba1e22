//! The ensemble composer: which zoo models to ensemble so that validation accuracy is highest
//! while end-to-end latency stays within the budget (HOLMES section 3.3), or, the dual, so that
//! latency is lowest while accuracy reaches a floor (appendix A.6).
//!
//! [`search`] holds the algorithms (HOLMES, RD, AF, LF, NPO, exact) over a [`profiler`];
//! [`netcalc`] the queueing bound of the latency estimate, [`des`] a discrete-event simulation. Accuracy profiles come from the zoo
//! manifests' validation predictions ([`evaluation`](crate::evaluation)); latency from stored
//! model profiles ([`profile`](crate::profile)).

pub mod compose;
pub mod des;
pub mod measure;
pub mod netcalc;
pub mod plot;
pub mod profiler;
pub mod search;
