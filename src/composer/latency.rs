//! The fast latency estimators of an ensemble over stored profiles, behind [`LatencyModel`]:
//! the [`netcalc`] queueing bound over the members' service times added up, one window at a
//! time or in the batches the engine forms at a ward's rate, whichever bound is lower; or the
//! [`des`] discrete-event simulation of the engine. Every window also costs what is served
//! beside its members, whatever they are: the beat counter's reading ([`counter_ms`], from its
//! stored profile), priced in every estimate.

use std::collections::HashMap;

use serde::Serialize;

use super::compose::Entry;
use super::{des, netcalc};
use crate::config::EngineConfig;
use crate::serving::engine::profile::{self, Profile};
use crate::signal::beats::BeatCounter;

/// The beat counter's service time a window (p95 of its stored CPU profile, ms): measured now
/// and stored when this machine has none for it.
pub(crate) fn counter_ms(
    db: &std::path::Path,
    counter: &BeatCounter,
    window_secs: u32,
) -> Result<f64, crate::serving::store::StoreError> {
    let name = profile::counter_profile_name(window_secs);
    let stored = profile::load_profiles(db, &name, &counter.sha256)?
        .into_iter()
        .find(|p| p.device == "cpu");
    let p = match stored {
        Some(p) => p,
        None => {
            let p = profile::profile_counter(counter, window_secs, &profile::QUICK);
            profile::store_profile(db, &p)?;
            p
        }
    };
    Ok(p.points.first().map_or(0.0, |x| x.p95_ms))
}

/// The network-calculus latency (ms) of a service time `ts_ms` for the staggered ward.
fn netcalc_ms(ts_ms: f64, beds: usize, hop_s: f64) -> f64 {
    let ts = ts_ms / 1000.0;
    if ts <= 0.0 {
        return 0.0;
    }
    netcalc::delay_bound(&netcalc::staggered(beds, hop_s), hop_s, 1.0 / ts, ts) * 1000.0
}

/// The network-calculus latency (ms) when each member serves full batches: a round of the
/// members' batches takes `round_ms` and serves `per_window_ms` of work a window. A window
/// waits for the round in progress and is served in the next, so the service curve is
/// rate-latency with latency two rounds and rate one window per `per_window_ms`.
fn netcalc_batched_ms(round_ms: f64, per_window_ms: f64, beds: usize, hop_s: f64) -> f64 {
    if per_window_ms <= 0.0 {
        return 0.0;
    }
    let (t, mu) = (2.0 * round_ms / 1000.0, 1000.0 / per_window_ms);
    netcalc::delay_bound(&netcalc::staggered(beds, hop_s), hop_s, mu, t) * 1000.0
}

/// The fast latency estimators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Estimator {
    /// The network-calculus queueing bound over the members' service times added up (they
    /// share the CPU): one window at a time or in full batches at the engine's batch caps,
    /// whichever bound is lower.
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
    /// What every window costs beside its members (the beat counter), ms, and its simulated
    /// stage (one window at a time on a thread of its own), when it costs anything.
    beside_ms: f64,
    beside: Option<des::Member>,
    /// Most of a second's service the ward's windows may take at full batches
    /// ([`with_max_utilisation`](Self::with_max_utilisation)); none: as the estimator says.
    max_utilisation: Option<f64>,
}

impl LatencyModel {
    /// Workers and batch caps come from the engine's default CPU plan for `beds` beds
    /// ([`plan`](crate::serving::engine::plan)), batch times from the entries' profiles
    /// ([`des::batch_curve`] over the p95 points; batch 1 alone without a profile);
    /// `beside_ms` is what each window costs beside the members ([`counter_ms`]).
    pub(crate) fn new(
        entries: &[Entry],
        engine: &EngineConfig,
        beds: usize,
        hop_s: f64,
        beside_ms: f64,
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
            beside_ms,
            beside: (beside_ms > 0.0).then(|| des::Member {
                batch_ms: vec![beside_ms],
                workers: 1,
            }),
            max_utilisation: None,
        }
    }

    /// An ensemble whose windows, served at full batches, would take more than `u` of each
    /// second (`composer.max_utilisation`) is estimated unbounded. The bounds assume evenly
    /// staggered arrivals and the profiled work alone, so they see no queue until the work
    /// fills the second; bursts, the ingest and other work on the same cores do.
    pub(crate) fn with_max_utilisation(mut self, u: f64) -> LatencyModel {
        self.max_utilisation = Some(u);
        self
    }

    /// The share of each second the ward's windows take when ensemble `b` serves them at
    /// full batches (its least work a window), with what serves beside the members.
    pub(crate) fn utilisation(&self, b: &[bool]) -> f64 {
        self.beds as f64 / self.hop_s * self.batched_ms(b).1 / 1000.0
    }

    /// Latency (ms) of ensemble `b` by the chosen estimator.
    pub(crate) fn estimate(&self, b: &[bool]) -> f64 {
        self.by(self.estimator, b)
    }

    /// Latency (ms) of ensemble `b` by `estimator`.
    pub(crate) fn by(&self, estimator: Estimator, b: &[bool]) -> f64 {
        if self
            .max_utilisation
            .is_some_and(|u| self.utilisation(b) > u)
        {
            return f64::INFINITY;
        }
        match estimator {
            Estimator::Netcalc => {
                let (round, per_window) = self.batched_ms(b);
                let batched = netcalc_batched_ms(round, per_window, self.beds, self.hop_s);
                self.one_at_a_time_ms(b).min(batched)
            }
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

    /// The network-calculus bound with windows served one at a time: the members and what
    /// serves beside them share the CPU, so a window takes the sum of their batch-1 times.
    fn one_at_a_time_ms(&self, b: &[bool]) -> f64 {
        netcalc_ms(self.sum_ms(b), self.beds, self.hop_s)
    }

    fn sum_ms(&self, b: &[bool]) -> f64 {
        self.batch1_ms
            .iter()
            .zip(b)
            .filter(|x| *x.1)
            .map(|x| x.0)
            .sum::<f64>()
            + self.beside_ms
    }

    /// One round of full batches of the chosen members and what serves beside them (each at
    /// its batch cap, the service times of its curve), ms, and its work a window.
    fn batched_ms(&self, b: &[bool]) -> (f64, f64) {
        self.chosen(b)
            .iter()
            .map(|m| {
                let t = m.batch_ms.last().copied().unwrap_or(0.0);
                (t, t / m.batch_ms.len().max(1) as f64)
            })
            .fold((0.0, 0.0), |a, x| (a.0 + x.0, a.1 + x.1))
    }

    fn chosen(&self, b: &[bool]) -> Vec<des::Member> {
        self.members
            .iter()
            .zip(b)
            .filter(|x| *x.1)
            .map(|x| x.0.clone())
            .chain(self.beside.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_is_priced_from_its_stored_profile_else_measured_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("p.db");
        let models = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
        let c = BeatCounter::load(&models, 5)
            .unwrap()
            .expect("the zoo has a beat counter");
        let first = counter_ms(&db, &c, 30).unwrap();
        assert!(first > 0.0);
        // Measured on a 30-s window and stored under the counter's name, window and checksum.
        let stored = profile::load_profiles(&db, "beats@30s", &c.sha256).unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].device, "cpu");
        assert_eq!(stored[0].points.len(), 1);
        assert_eq!(stored[0].points[0].p95_ms, first);
        // Read back, not measured again.
        assert_eq!(counter_ms(&db, &c, 30).unwrap(), first);
    }

    #[test]
    fn at_a_wards_rate_the_batches_bound_the_latency() {
        use crate::serving::engine::profile::Point;
        // 6 ms a window alone, 12 ms a batch of eight: 1,024 beds at the 5-s hop (205 windows
        // a second) outrun it one window at a time, not in batches.
        let point = |batch: usize, ms: f64| Point {
            batch,
            p50_ms: ms,
            p95_ms: ms,
            p99_ms: ms,
            repeats: 5,
        };
        let e = Entry {
            name: "m".into(),
            sha256: String::new(),
            leads: crate::zoo::LeadSets::default(),
            input: crate::zoo::Input::HeartRate {
                samples: 30,
                sample_rate_hz: 1,
            },
            validation: Default::default(),
            test: Default::default(),
            latency_ms: 6.0,
            profile: Some(Profile {
                model: "m".into(),
                sha256: String::new(),
                device: "cpu".into(),
                hardware: String::new(),
                points: vec![point(1, 6.0), point(8, 12.0)],
                quadratic: [0.0, 6.0 / 7.0, 36.0 / 7.0],
            }),
        };
        let entries = [e];
        let engine = crate::config::Config::default().engine;
        let m = LatencyModel::new(&entries, &engine, 1024, 5.0, 0.0, Estimator::Netcalc);
        assert!(m.one_at_a_time_ms(&[true]).is_infinite());
        let batched = m.estimate(&[true]);
        // Two rounds of one 12-ms batch, then a window's share at 1.5 ms.
        assert!((24.0..30.0).contains(&batched), "{batched}");
        // With the counter beside it (1 ms a window, one at a time), more.
        let counted = LatencyModel::new(&entries, &engine, 1024, 5.0, 1.0, Estimator::Netcalc);
        assert!(counted.estimate(&[true]) > batched);
        // 204.8 windows a second at 2.5 ms a window take 0.51 of each second: within a
        // headroom of 0.6, past one of 0.5.
        assert!((counted.utilisation(&[true]) - 0.512).abs() < 1e-9);
        let within = counted.clone().with_max_utilisation(0.6);
        assert_eq!(within.estimate(&[true]), counted.estimate(&[true]));
        let past = counted.with_max_utilisation(0.5);
        assert!(past.estimate(&[true]).is_infinite());
        assert!(past.by(Estimator::Des, &[true]).is_infinite());
    }
}
