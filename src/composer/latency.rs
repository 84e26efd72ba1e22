//! The fast latency estimators of an ensemble over stored profiles: the members' batch-1
//! service times added up plus the [`netcalc`] queueing bound ([`latency_estimate`]), or the
//! [`des`] discrete-event simulation of the engine, both behind [`LatencyModel`].

use std::collections::HashMap;

use serde::Serialize;

use super::compose::Entry;
use super::{des, netcalc};
use crate::config::EngineConfig;
use crate::serving::engine::profile::Profile;

/// Estimated end-to-end latency (ms) of ensemble `b` for `beds` beds staggered over `hop_s`:
/// the members share the CPU, so a window takes the sum of their service times, and queueing
/// adds the network-calculus bound.
pub(crate) fn latency_estimate(entries: &[Entry], b: &[bool], beds: usize, hop_s: f64) -> f64 {
    let ts: f64 = entries
        .iter()
        .zip(b)
        .filter(|x| *x.1)
        .map(|(e, _)| e.latency_ms)
        .sum();
    netcalc_ms(ts, beds, hop_s)
}

/// The network-calculus latency (ms) of a service time `ts_ms` for the staggered ward.
fn netcalc_ms(ts_ms: f64, beds: usize, hop_s: f64) -> f64 {
    let ts = ts_ms / 1000.0;
    if ts <= 0.0 {
        return 0.0;
    }
    netcalc::delay_bound(&netcalc::staggered(beds, hop_s), hop_s, 1.0 / ts, ts) * 1000.0
}

/// The fast latency estimators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Estimator {
    /// The members' batch-1 service times added up (they share the CPU) plus the
    /// network-calculus queueing bound ([`latency_estimate`]).
    Netcalc,
    /// The discrete-event simulation of the members' queues, batches and shared cores
    /// ([`des`]).
    Des,
}

impl Estimator {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Estimator::Netcalc => "netcalc",
            Estimator::Des => "des",
        }
    }
}

impl std::str::FromStr for Estimator {
    type Err = String;

    fn from_str(s: &str) -> Result<Estimator, String> {
        match s {
            "netcalc" => Ok(Estimator::Netcalc),
            "des" => Ok(Estimator::Des),
            _ => Err(format!("unknown estimator {s:?} (netcalc or des)")),
        }
    }
}

/// Estimated latency of any ensemble of one zoo for one ward, by either [`Estimator`].
#[derive(Debug, Clone)]
pub(crate) struct LatencyModel {
    pub(crate) estimator: Estimator,
    pub(crate) beds: usize,
    pub(crate) hop_s: f64,
    pub(crate) des: des::DesParams,
    /// Per zoo model: batch-1 p95 service time (ms) and its simulated member.
    batch1_ms: Vec<f64>,
    members: Vec<des::Member>,
}

impl LatencyModel {
    /// Workers and batch caps come from the engine's default CPU plan for `beds` beds
    /// ([`plan`](crate::serving::engine::plan)), batch times from the entries' profiles
    /// ([`des::batch_curve`] over the p95 points; batch 1 alone without a profile).
    pub(crate) fn new(
        entries: &[Entry],
        engine: &EngineConfig,
        beds: usize,
        hop_s: f64,
        estimator: Estimator,
    ) -> LatencyModel {
        let profiles: HashMap<(String, String), Profile> = entries
            .iter()
            .filter_map(|e| e.profile.clone())
            .map(|p| ((p.model.clone(), "cpu".to_owned()), p))
            .collect();
        let weights: Vec<(String, u64)> = entries.iter().map(|e| (e.name.clone(), 0)).collect();
        let mut cfg = engine.clone();
        cfg.device = "cpu".into();
        let cells = crate::serving::engine::plan::plan(
            &weights,
            &[crate::serving::engine::accelerator::Accelerator::cpu()],
            &profiles,
            &cfg,
            beds,
        );
        let members = entries
            .iter()
            .zip(&cells)
            .map(|(e, cell)| {
                let points: Vec<(usize, f64)> = match &e.profile {
                    Some(p) => p.points.iter().map(|x| (x.batch, x.p95_ms)).collect(),
                    None => vec![(1, e.latency_ms)],
                };
                let fitted = |b: usize| e.profile.as_ref().map_or(0.0, |p| p.predict(b));
                des::Member {
                    batch_ms: des::batch_curve(&points, fitted, cell.batch_cap),
                    workers: cell.workers,
                }
            })
            .collect();
        LatencyModel {
            estimator,
            beds,
            hop_s,
            des: des::DesParams::new(beds, hop_s),
            batch1_ms: entries.iter().map(|e| e.latency_ms).collect(),
            members,
        }
    }

    /// Latency (ms) of ensemble `b` by the chosen estimator.
    pub(crate) fn estimate(&self, b: &[bool]) -> f64 {
        self.by(self.estimator, b)
    }

    /// Latency (ms) of ensemble `b` by `estimator`.
    pub(crate) fn by(&self, estimator: Estimator, b: &[bool]) -> f64 {
        match estimator {
            Estimator::Netcalc => netcalc_ms(self.sum_ms(b), self.beds, self.hop_s),
            Estimator::Des => des::p95_ms(&self.chosen(b), &self.des),
        }
    }

    /// The service-time part of `estimator` (ms): one window alone, no queueing. The sum of
    /// the members' batch-1 times, or their simulated concurrent run.
    pub(crate) fn service_ms(&self, estimator: Estimator, b: &[bool]) -> f64 {
        match estimator {
            Estimator::Netcalc => self.sum_ms(b),
            Estimator::Des => des::simulate(&self.chosen(b), &[0.0], self.des.cores)[0],
        }
    }

    fn sum_ms(&self, b: &[bool]) -> f64 {
        self.batch1_ms
            .iter()
            .zip(b)
            .filter(|x| *x.1)
            .map(|x| x.0)
            .sum()
    }

    fn chosen(&self, b: &[bool]) -> Vec<des::Member> {
        self.members
            .iter()
            .zip(b)
            .filter(|x| *x.1)
            .map(|x| x.0.clone())
            .collect()
    }
}
