//! The fast latency estimators of an ensemble over stored profiles, behind [`LatencyModel`]:
//! the [`netcalc`] queueing bound over the members' service times added up, one window at a
//! time or in the batches the engine forms at a ward's rate, whichever bound is lower; or the
//! [`des`] discrete-event simulation of the engine. Every window also costs what is served
//! beside its members, whatever they are: the beat counter's reading ([`counter_cost`], from
//! its stored profile), priced in every estimate. A cap on the ward's **utilisation** (the CPU
//! its windows' least work and its monitors' streams take each second) bounds them all.

use std::collections::HashMap;

use serde::Serialize;

use super::entry::Entry;
use super::{des, netcalc};
use crate::config::EngineConfig;
use crate::serving::engine::profile::{self, Profile};
use crate::signal::beats::BeatCounter;

/// What each window costs beside its members (the beat counter's reading), ms: its service
/// time (p95) for the latency bounds, its work (p50) for the utilisation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Beside {
    pub(crate) p95_ms: f64,
    pub(crate) p50_ms: f64,
}

impl Beside {
    /// Nothing served beside the members.
    pub(crate) const NONE: Beside = Beside {
        p95_ms: 0.0,
        p50_ms: 0.0,
    };
}

/// The beat counter's cost a window, from its stored CPU profile: measured now and stored when
/// this machine has none for it.
pub(crate) fn counter_cost(
    db: &crate::serving::store::Db,
    counter: &BeatCounter,
    window_secs: u32,
) -> Result<Beside, crate::serving::store::StoreError> {
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
    Ok(p.points.first().map_or(Beside::NONE, |x| Beside {
        p95_ms: x.p95_ms,
        p50_ms: x.p50_ms,
    }))
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
    /// Per zoo model: its least work a window, at full batches (the p50 batch time at its cap
    /// over the cap; its batch-1 time without a profile, no batching gain assumed), ms.
    work_ms: Vec<f64>,
    /// What every window costs beside its members (the beat counter), and its simulated
    /// stage (one window at a time on a thread of its own), when it costs anything.
    beside: Beside,
    beside_member: Option<des::Member>,
    /// The ingest's CPU a bed each second, ms ([`with_ingest`](Self::with_ingest)).
    ingest_ms_per_bed_s: f64,
    /// Most of a core the ward may take ([`with_max_utilisation`](Self::with_max_utilisation));
    /// none: as the estimator says.
    max_utilisation: Option<f64>,
}

impl LatencyModel {
    /// Workers and batch caps come from the engine's default CPU plan for `beds` beds
    /// ([`plan`](crate::serving::engine::plan)), batch times from the entries' profiles
    /// ([`des::batch_curve`] over the p95 points; batch 1 alone without a profile), the work
    /// a window from the p50 points; `beside` is what each window costs beside the members
    /// ([`counter_cost`]).
    pub(crate) fn new(
        entries: &[Entry],
        engine: &EngineConfig,
        beds: usize,
        hop_s: f64,
        beside: Beside,
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
        let curve = |e: &Entry, cap: usize, at: fn(&profile::Point) -> f64| {
            let points: Vec<(usize, f64)> = match &e.profile {
                Some(p) => p.points.iter().map(|x| (x.batch, at(x))).collect(),
                None => vec![(1, e.latency_ms)],
            };
            let fitted = |b: usize| e.profile.as_ref().map_or(0.0, |p| p.predict(b));
            des::batch_curve(&points, fitted, cap)
        };
        let members = entries
            .iter()
            .zip(&cells)
            .map(|(e, cell)| des::Member {
                batch_ms: curve(e, cell.batch_cap, |x| x.p95_ms),
                workers: cell.workers,
            })
            .collect();
        let work_ms = entries
            .iter()
            .zip(&cells)
            .map(|(e, cell)| {
                let c = curve(e, cell.batch_cap, |x| x.p50_ms);
                c.last().copied().unwrap_or(0.0) / c.len().max(1) as f64
            })
            .collect();
        LatencyModel {
            estimator,
            beds,
            hop_s,
            des: des::DesParams::new(beds, hop_s),
            batch1_ms: entries.iter().map(|e| e.latency_ms).collect(),
            members,
            work_ms,
            beside,
            beside_member: (beside.p95_ms > 0.0).then(|| des::Member {
                batch_ms: vec![beside.p95_ms],
                workers: 1,
            }),
            ingest_ms_per_bed_s: 0.0,
            max_utilisation: None,
        }
    }

    /// Prices the ingest in the utilisation: `ms` of CPU a bed each second, as `holmes profile
    /// --ingest` measured it on this machine ([`IngestCost`](crate::serving::ingest::cost::IngestCost)).
    pub(crate) fn with_ingest(mut self, ms_per_bed_s: f64) -> LatencyModel {
        self.ingest_ms_per_bed_s = ms_per_bed_s.max(0.0);
        self
    }

    /// An ensemble whose ward would take more than `u` of a core (`composer.max_utilisation`,
    /// [`utilisation`](Self::utilisation)) is estimated unbounded. The bounds assume evenly
    /// staggered arrivals and the profiled work alone, so they see no queue until the work
    /// fills the second; the ingest, bursts and other work on the same cores do.
    pub(crate) fn with_max_utilisation(mut self, u: f64) -> LatencyModel {
        self.max_utilisation = Some(u);
        self
    }

    /// The cores the ward takes with ensemble `b`: its windows' work each second at full
    /// batches, its least (the members' and what serves beside them, from p50 points: a rate
    /// is a mean, not a tail; batches smaller than the cap cost more a window), and its
    /// monitors' streams ([`with_ingest`](Self::with_ingest)). The batches' wall time on the
    /// CPU's shared pool and the ingest's CPU time add up to cores as on the 2-core machine the
    /// cap was calibrated on.
    pub(crate) fn utilisation(&self, b: &[bool]) -> f64 {
        let per_window = chosen_sum(&self.work_ms, b) + self.beside.p50_ms;
        self.beds as f64 * (per_window / self.hop_s + self.ingest_ms_per_bed_s) / 1000.0
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
        chosen_sum(&self.batch1_ms, b) + self.beside.p95_ms
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
            .chain(self.beside_member.clone())
            .collect()
    }
}

/// The sum of `per_model` over the models ensemble `b` chooses.
fn chosen_sum(per_model: &[f64], b: &[bool]) -> f64 {
    per_model.iter().zip(b).filter(|x| *x.1).map(|x| x.0).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_is_priced_from_its_stored_profile_else_measured_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::serving::store::Db::open(
            &dir.path().join("p.db"),
            &crate::composer::TEST_SCHEMA,
        )
        .unwrap();
        let models = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
        let c = BeatCounter::load(&models, 5)
            .unwrap()
            .expect("the zoo has a beat counter");
        let first = counter_cost(&db, &c, 30).unwrap();
        assert!(first.p95_ms > 0.0 && first.p50_ms > 0.0 && first.p50_ms <= first.p95_ms);
        // Measured on a 30-s window and stored under the counter's name, window and checksum.
        let stored = profile::load_profiles(&db, "beats@30s+r2", &c.sha256).unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].device, "cpu");
        assert_eq!(stored[0].points.len(), 1);
        assert_eq!(stored[0].points[0].p95_ms, first.p95_ms);
        assert_eq!(stored[0].points[0].p50_ms, first.p50_ms);
        // Read back, not measured again.
        assert_eq!(counter_cost(&db, &c, 30).unwrap(), first);
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
            latency_ms: 6.0,
            ..profiled(
                vec![point(1, 6.0), point(8, 12.0)],
                [0.0, 6.0 / 7.0, 36.0 / 7.0],
            )
        };
        let entries = [e];
        let engine = crate::config::Config::default().engine;
        let m = LatencyModel::new(
            &entries,
            &engine,
            1024,
            5.0,
            Beside::NONE,
            Estimator::Netcalc,
        );
        assert!(m.one_at_a_time_ms(&[true]).is_infinite());
        let batched = m.estimate(&[true]);
        // Two rounds of one 12-ms batch, then a window's share at 1.5 ms.
        assert!((24.0..30.0).contains(&batched), "{batched}");
        // With the counter beside it (1 ms a window, one at a time), more.
        let one_ms = Beside {
            p95_ms: 1.0,
            p50_ms: 1.0,
        };
        let counted = LatencyModel::new(&entries, &engine, 1024, 5.0, one_ms, Estimator::Netcalc);
        assert!(counted.estimate(&[true]) > batched);
        // 204.8 windows a second at 2.5 ms a window take 0.51 of a core: within a cap of
        // 0.6, past one of 0.5.
        assert!((counted.utilisation(&[true]) - 0.512).abs() < 1e-9);
        let within = counted.clone().with_max_utilisation(0.6);
        assert_eq!(within.estimate(&[true]), counted.estimate(&[true]));
        let past = counted.clone().with_max_utilisation(0.5);
        assert!(past.estimate(&[true]).is_infinite());
        assert!(past.by(Estimator::Des, &[true]).is_infinite());
        // The monitors' streams at 0.1 ms a bed each second add 0.1024 of a core, whatever
        // the members: now past the cap of 0.6.
        let fed = counted.clone().with_ingest(0.1);
        assert!((fed.utilisation(&[true]) - 0.6144).abs() < 1e-9);
        assert!((fed.utilisation(&[false]) - (0.2048 + 0.1024)).abs() < 1e-9);
        assert!(
            fed.with_max_utilisation(0.6)
                .estimate(&[true])
                .is_infinite()
        );
    }

    #[test]
    fn the_utilisation_reads_the_p50_work_and_the_latency_the_tail() {
        use crate::serving::engine::profile::Point;
        // p50 4 ms alone and 8 ms a batch of eight; p95 twice that.
        let point = |batch: usize, p50: f64| Point {
            batch,
            p50_ms: p50,
            p95_ms: 2.0 * p50,
            p99_ms: 2.0 * p50,
            repeats: 5,
        };
        let e = profiled(
            vec![point(1, 4.0), point(8, 8.0)],
            [0.0, 4.0 / 7.0, 24.0 / 7.0],
        );
        let engine = crate::config::Config::default().engine;
        let beside = Beside {
            p95_ms: 0.6,
            p50_ms: 0.3,
        };
        let m = LatencyModel::new(&[e], &engine, 1024, 5.0, beside, Estimator::Netcalc);
        // 204.8 windows a second at 1 ms (8 ms / 8) + 0.3 ms.
        assert!((m.utilisation(&[true]) - 0.26624).abs() < 1e-9);
        // The bounds read the tail: the counter's p95 beside the member's batch-1 time.
        assert!((m.service_ms(Estimator::Netcalc, &[true]) - 8.6).abs() < 1e-9);
        // Without a profile the work is the batch-1 time: no batching gain assumed.
        let b = LatencyModel::new(
            &[m_entry()],
            &engine,
            1024,
            5.0,
            Beside::NONE,
            Estimator::Netcalc,
        );
        assert!((b.utilisation(&[true]) - 204.8 * 8.0 / 1000.0).abs() < 1e-9);
    }

    /// [`m_entry`] with a CPU profile of these points and fitted curve.
    fn profiled(points: Vec<crate::serving::engine::profile::Point>, quadratic: [f64; 3]) -> Entry {
        Entry {
            profile: Some(Profile {
                model: "m".into(),
                sha256: String::new(),
                device: "cpu".into(),
                hardware: String::new(),
                points,
                quadratic,
            }),
            ..m_entry()
        }
    }

    /// A heart-rate model "m" of 8 ms a window, without a profile.
    fn m_entry() -> Entry {
        Entry {
            name: "m".into(),
            sha256: String::new(),
            leads: crate::zoo::LeadSets::default(),
            input: crate::zoo::Input::HeartRate {
                samples: 30,
                sample_rate_hz: 1,
            },
            validation: Default::default(),
            test: Default::default(),
            latency_ms: 8.0,
            profile: None,
        }
    }
}
