//! The measured latency profiler f_l(b, c): the ensemble runs through the real engine (its
//! queues, workers, accumulator and SQLite commit) one window at a time, giving the service
//! time T_s (p95); the queueing part T_q comes from the network-calculus bound for the beds'
//! staggered windows. Measurements are cached by the multiset of architectures, as HOLMES did
//! (the same architecture on another lead costs the same).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::netcalc;
use crate::config::{Config, StorageConfig};
use crate::core::window::ClosedWindow;
use crate::core::window::LeadSlot;
use crate::core::window::MAX_LEADS;
use crate::core::window::WindowQuality;
use crate::serving::engine::{Engine, MemberSpec, accelerator};
use crate::serving::store::{self, ServedEnsemble};
use crate::zoo::{Input, Manifest};

/// Why measuring an ensemble failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MeasureError {
    #[error(transparent)]
    Store(#[from] crate::serving::store::StoreError),
    #[error(transparent)]
    Engine(#[from] crate::serving::engine::EngineError),
}

/// Measures ensembles of the zoo in `dir`.
pub struct Measurer {
    dir: PathBuf,
    manifests: Vec<Manifest>,
    cfg: Config,
    repeats: usize,
    cache: HashMap<String, f64>,
    db: tempfile::TempDir,
}

impl Measurer {
    pub fn new(
        dir: &Path,
        manifests: Vec<Manifest>,
        cfg: Config,
        repeats: usize,
    ) -> std::io::Result<Measurer> {
        Ok(Measurer {
            dir: dir.to_owned(),
            manifests,
            cfg,
            repeats,
            cache: HashMap::new(),
            db: tempfile::tempdir()?,
        })
    }

    /// Cache key: the sorted architectures (with input kind) of the members.
    fn key(&self, b: &[bool]) -> String {
        let mut k: Vec<String> = self
            .manifests
            .iter()
            .zip(b)
            .filter(|x| *x.1)
            .map(|(m, _)| format!("{}:{:?}", m.input.modality(), m.architecture))
            .collect();
        k.sort();
        k.join("|")
    }

    /// Service time p95 (ms) of ensemble `b` through the engine, one window at a time.
    pub fn service_ms(&mut self, b: &[bool]) -> f64 {
        let key = self.key(b);
        if let Some(&v) = self.cache.get(&key) {
            return v;
        }
        let v = self.run(b).unwrap_or(f64::INFINITY);
        self.cache.insert(key, v);
        v
    }

    /// End-to-end latency (ms) for `beds` beds: measured T_s plus the queueing bound.
    pub fn latency_ms(&mut self, b: &[bool], beds: usize, hop_s: f64) -> f64 {
        let ts = self.service_ms(b) / 1000.0;
        if !ts.is_finite() || ts <= 0.0 {
            return if ts <= 0.0 { 0.0 } else { f64::INFINITY };
        }
        netcalc::delay_bound(&netcalc::staggered(beds, hop_s), hop_s, 1.0 / ts, ts) * 1000.0
    }

    fn run(&self, b: &[bool]) -> Result<f64, MeasureError> {
        let members: Vec<&Manifest> = self
            .manifests
            .iter()
            .zip(b)
            .filter(|x| *x.1)
            .map(|(m, _)| m)
            .collect();
        if members.is_empty() {
            return Ok(0.0);
        }
        let scfg = StorageConfig {
            db: self.db.path().join(format!("m{}.db", self.cache.len())),
            retention_days: 1,
            thin_after_days: 0,
            thin_keep_secs: 30,
            batch_rows: 64,
            flush_ms: 0,
            backlog_rows: 10_000,
            retry_min_ms: 100,
            retry_max_ms: 1000,
        };
        // A scratch database of the store's own tables.
        let (st, id, writer) = store::start(
            &scfg,
            &store::STORE,
            ServedEnsemble {
                members: &[],
                source: "composer",
                plan: "[]".into(),
                counter: None,
                primary_share: None,
            },
        )?;
        let specs = members
            .iter()
            .map(|m| MemberSpec {
                name: m.name.clone(),
                version: m.version,
                input: m.input,
                factory: accelerator::zoo_factory(&self.dir.join(&m.name), "cpu", 0),
                workers: 1,
                batch_cap: 1,
                weight: 1.0,
                device: "cpu".into(),
            })
            .collect();
        let mut ecfg = self.cfg.engine.clone();
        ecfg.slo_ms = 60_000;
        let engine = Engine::start(&ecfg, specs, st.clone(), id, None)?;
        let mut g = crate::signal::ecgsyn::EcgSyn::new(3, 80.0);
        let ecg: std::sync::Arc<[f32]> = (0..7500)
            .map(|_| g.next_sample())
            .collect::<Vec<_>>()
            .into();
        let slot = LeadSlot {
            coverage: 1.0,
            lead_off_secs: 0.0,
            usable: true,
        };
        let mut times = Vec::new();
        for i in 0..self.repeats + 1 {
            let before = st.health.committed_scores.load(Ordering::Relaxed);
            let t = Instant::now();
            let uses = |lead: usize| {
                members
                    .iter()
                    .any(|m| matches!(m.input, Input::Ecg { lead: l, .. } if l.index() == lead))
            };
            let mut leads: [Option<std::sync::Arc<[f32]>>; MAX_LEADS] = Default::default();
            for (l, x) in leads.iter_mut().enumerate() {
                if uses(l) {
                    *x = Some(ecg.clone());
                }
            }
            engine.submit(ClosedWindow {
                bed: "profile".into(),
                index: i as u64,
                start_ms: 0,
                end_ms: 30_000,
                ecg: leads,
                heart_rate: Some(vec![80.0f32; 30].into()),
                quality: WindowQuality {
                    leads: [Some(slot), Some(slot), None],
                    gap_samples: 0,
                    hr_coverage: 1.0,
                },
                last_sample_at: t,
            });
            while st.health.committed_scores.load(Ordering::Relaxed) == before {
                std::thread::sleep(Duration::from_micros(200));
            }
            if i > 0 {
                times.push(t.elapsed().as_secs_f64() * 1000.0); // the first is a warm-up
            }
        }
        engine.shutdown();
        st.close();
        let _ = writer.join();
        times.sort_by(f64::total_cmp);
        Ok(crate::core::stats::percentile(&times, 0.95))
    }
}
