//! `holmes profile`: measures each model on each accelerator at batch sizes 1, 2, 4, ... (warm-up,
//! repeats, p50/p95/p99), stores the profiles in SQLite keyed by hardware, device, model
//! checksum and burn version, and fits IPA's quadratic batch-latency curve
//! `l(b) = a*b^2 + b*b + c` for the sizes not measured. The beat counter served beside the
//! members is profiled too ([`profile_counter`]: one window's reading on the CPU, as its stage
//! runs it).
//!
//! Read by the planner ([`plan`](super::plan)), the composer and the API (`GET /api/models`).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::params;
use serde::Serialize;

use crate::core::stats::percentile;
use crate::core::time::now_ms;
use crate::core::window::{ClosedWindow, SAMPLE_RATE_HZ, WindowQuality};
use crate::serving::engine::accelerator::{self, Accelerator};
use crate::serving::engine::counter::BEATS_NAME;
use crate::serving::store::{Db, Migration, StoreError};
use crate::signal::beats::BeatCounter;
use crate::zoo::{Input, ZooModel};

/// The profiles' table (`holmes profile`), step by step (`serving::store::schema`).
pub(crate) const MIGRATIONS: &[Migration] = &[Migration {
    version: 2,
    sql: "CREATE TABLE profiles (
        hardware TEXT NOT NULL,
        device TEXT NOT NULL,
        model TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        burn_version TEXT NOT NULL,
        batch INTEGER NOT NULL,
        p50_ms REAL NOT NULL,
        p95_ms REAL NOT NULL,
        p99_ms REAL NOT NULL,
        repeats INTEGER NOT NULL,
        measured_ms INTEGER NOT NULL,
        PRIMARY KEY (hardware, device, model, sha256, burn_version, batch)
    );",
}];

/// The burn release the profiles were measured with (part of their key).
pub(crate) const BURN_VERSION: &str = "0.21";

/// The `burn_version` column of a profile's key on `device` (`cpu`, `cuda:N`): the burn
/// release and the inference path (`plain`, [`crate::zoo::InferencePath`], or
/// `fast+directN`: the CPU's fast path, whose convolutions are the direct kernels of revision
/// N, [`DIRECT_KERNEL_REVISION`]; a GPU always runs the plain path), so profiles of one path,
/// or of a kernel since made faster, never stand in for another: the composer measures what
/// it finds unprofiled.
pub(crate) fn engine_version(device: &str) -> String {
    use crate::zoo::InferencePath;
    let fast = device == "cpu" && InferencePath::from_env() == InferencePath::Fast;
    if fast {
        format!("{BURN_VERSION}/fast+direct{DIRECT_KERNEL_REVISION}")
    } else {
        format!("{BURN_VERSION}/plain")
    }
}

/// The direct kernels' revision in the profiles' key: raised when their speed changes (2: the
/// kernel of 2026-12-07, twice as fast; 3: each layer written as the next reads it, no copies
/// between layers, 2026-12-07 evening; before 2 the key read `fast+direct`).
pub(crate) const DIRECT_KERNEL_REVISION: u32 = 3;

/// One measured (model, device, batch) point.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Point {
    pub(crate) batch: usize,
    pub(crate) p50_ms: f64,
    pub(crate) p95_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) repeats: usize,
}

/// A model's profile on one device, with its fitted curve.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Profile {
    pub(crate) model: String,
    pub(crate) sha256: String,
    pub(crate) device: String,
    pub(crate) hardware: String,
    pub(crate) points: Vec<Point>,
    /// `[a, b, c]` of `p50(batch) = a*batch^2 + b*batch + c`, ms.
    pub(crate) quadratic: [f64; 3],
}

impl Profile {
    /// Fitted p50 latency (ms) at `batch`.
    pub(crate) fn predict(&self, batch: usize) -> f64 {
        let [a, b, c] = self.quadratic;
        let x = batch as f64;
        a * x * x + b * x + c
    }
}

/// A short description of this machine's CPU, the hardware part of a profile's key.
pub(crate) fn hardware() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model} x{cores}")
}

/// Least-squares fit of `y = a x^2 + b x + c` (a line or a constant with fewer points).
pub(crate) fn fit_quadratic(xs: &[f64], ys: &[f64]) -> [f64; 3] {
    let n = xs.len();
    if n == 0 {
        return [0.0; 3];
    }
    if n < 3 {
        let mean = ys.iter().sum::<f64>() / n as f64;
        if n == 1 {
            return [0.0, 0.0, mean];
        }
        let b = (ys[1] - ys[0]) / (xs[1] - xs[0]);
        return [0.0, b, ys[0] - b * xs[0]];
    }
    // Normal equations for [a, b, c].
    let s = |p: i32| xs.iter().map(|x| x.powi(p)).sum::<f64>();
    let t = |p: i32| xs.iter().zip(ys).map(|(x, y)| x.powi(p) * y).sum::<f64>();
    let m = [
        [s(4), s(3), s(2)],
        [s(3), s(2), s(1)],
        [s(2), s(1), n as f64],
    ];
    let v = [t(2), t(1), t(0)];
    solve3(m, v).unwrap_or([0.0, 0.0, ys.iter().sum::<f64>() / n as f64])
}

fn solve3(m: [[f64; 3]; 3], v: [f64; 3]) -> Option<[f64; 3]> {
    let det = |m: [[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det(m);
    if d.abs() < 1e-12 {
        return None;
    }
    let mut out = [0.0; 3];
    for (k, o) in out.iter_mut().enumerate() {
        let mut mk = m;
        for r in 0..3 {
            mk[r][k] = v[r];
        }
        *o = det(mk) / d;
    }
    Some(out)
}

/// Options of one profiling run.
#[derive(Debug, Clone)]
pub(crate) struct ProfileOptions {
    /// Largest batch size measured (powers of two up to it, and it).
    pub(crate) max_batch: usize,
    /// Warm-up runs per batch size.
    pub(crate) warmup: usize,
    /// Timed runs per batch size at least...
    pub(crate) min_repeats: usize,
    /// ...and at most, within `budget` per size.
    pub(crate) max_repeats: usize,
    pub(crate) budget: Duration,
}

/// A quick measurement, for what the composer finds unprofiled.
pub(crate) const QUICK: ProfileOptions = ProfileOptions {
    max_batch: 8,
    warmup: 1,
    min_repeats: 5,
    max_repeats: 20,
    budget: Duration::from_millis(500),
};

/// Batch sizes profiled: 1, 2, 4, ... below `max`, then `max`.
pub(crate) fn batch_sizes(max: usize) -> Vec<usize> {
    let mut v: Vec<usize> = std::iter::successors(Some(1usize), |b| Some(b * 2))
        .take_while(|&b| b < max)
        .collect();
    v.push(max.max(1));
    v
}

/// Profiles the model in `dir` on `dev`.
pub(crate) fn profile_model(
    dir: &Path,
    dev: &Accelerator,
    opts: &ProfileOptions,
) -> Result<Profile, crate::serving::engine::EngineError> {
    let mut model = (accelerator::zoo_factory(dir, &dev.id, 0))()?;
    let manifest = ZooModel::<burn::backend::Flex>::load(dir, &Default::default())
        .map_err(|e| crate::serving::engine::EngineError::Model {
            name: dir.display().to_string(),
            reason: e.to_string(),
        })?
        .manifest;
    let len = manifest.input.samples();
    // A realistic input: a synthetic ECG or heart-rate series (latency does not depend on it).
    let mut g = crate::signal::ecgsyn::EcgSyn::new(7, 75.0);
    let x: Vec<f32> = match manifest.input {
        Input::Ecg { .. } => (0..len).map(|_| g.next_sample()).collect(),
        Input::HeartRate { .. } => vec![75.0; len],
    };
    let name = manifest.name.clone();
    let run = |m: &mut Box<dyn crate::serving::engine::InferModel>, inputs: &[&[f32]]| {
        m.predict_batch(inputs).map(|_| ()).map_err(|reason| {
            crate::serving::engine::EngineError::Model {
                name: name.clone(),
                reason,
            }
        })
    };
    let mut points = Vec::new();
    for b in batch_sizes(opts.max_batch) {
        let inputs: Vec<&[f32]> = vec![&x[..]; b];
        points.push(time_point(b, opts, || run(&mut model, &inputs))?);
    }
    let xs: Vec<f64> = points.iter().map(|p| p.batch as f64).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.p50_ms).collect();
    Ok(Profile {
        model: manifest.name,
        sha256: manifest.weights.sha256,
        device: dev.id.clone(),
        hardware: hardware(),
        quadratic: fit_quadratic(&xs, &ys),
        points,
    })
}

/// Times `run` (a batch of `batch`) as `opts` says: warm-up runs, then timed runs, into a
/// measured point; the first error stops it.
fn time_point<E>(
    batch: usize,
    opts: &ProfileOptions,
    mut run: impl FnMut() -> Result<(), E>,
) -> Result<Point, E> {
    for _ in 0..opts.warmup {
        run()?;
    }
    let mut times = Vec::new();
    let started = Instant::now();
    while times.len() < opts.min_repeats
        || (times.len() < opts.max_repeats && started.elapsed() < opts.budget)
    {
        let t = Instant::now();
        run()?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok(Point {
        batch,
        p50_ms: percentile(&times, 0.5),
        p95_ms: percentile(&times, 0.95),
        p99_ms: percentile(&times, 0.99),
        repeats: times.len(),
    })
}

/// The name the beat counter's profile is stored under for a ward window of `window_secs` (it
/// reads the whole window, so its cost depends on it) and the counter code's revision
/// ([`COUNTER_REVISION`]): `beats@30s+r2`.
pub(crate) fn counter_profile_name(window_secs: u32) -> String {
    format!("{BEATS_NAME}@{window_secs}s+r{COUNTER_REVISION}")
}

/// The beat counter's code revision in its profile's name: raised when its speed changes, so
/// that the composer measures it again rather than pricing the old code's time (2: the
/// counter of 2026-12-07, 0.79x of the time; before it the name read `beats@30s`).
pub(crate) const COUNTER_REVISION: u32 = 2;

/// Profiles the beat counter's reading of one window of `window_secs` (the ward's window, which
/// it reads whole) on the CPU: a synthetic ECG on two leads at 150/min (its cost grows with the
/// beats, and the windows that matter are fast). Batch 1 only: its stage reads one window at a
/// time. Stored under [`counter_profile_name`] and the counter's checksum.
pub(crate) fn profile_counter(
    counter: &BeatCounter,
    window_secs: u32,
    opts: &ProfileOptions,
) -> Profile {
    // Windows of one synthetic bed a hop apart, read in turn as the ward reads them: the
    // counter classifies only the beats new at each hop (its memory), and once in every
    // STEPS + 1 reads, where the turn starts over, all of them.
    const STEPS: usize = 24;
    let len = window_secs as usize * SAMPLE_RATE_HZ;
    let hop = counter.hop_samples().max(1);
    let mut g = crate::signal::ecgsyn::EcgSyn::new(7, 150.0);
    let lead: Vec<f32> = (0..len + STEPS * hop).map(|_| g.next_sample()).collect();
    let ms = |samples: usize| (samples * 1000 / SAMPLE_RATE_HZ) as i64;
    let windows: Vec<ClosedWindow> = (0..=STEPS)
        .map(|k| {
            let (start, end) = (k * hop, k * hop + len);
            let x: Arc<[f32]> = lead[start..end].into();
            ClosedWindow {
                bed: "profile".into(),
                index: k as u64,
                start_ms: ms(start),
                end_ms: ms(end),
                ecg: [Some(x.clone()), Some(x), None],
                heart_rate: None,
                quality: WindowQuality {
                    leads: [None, None, None],
                    gap_samples: 0,
                    hr_coverage: 0.0,
                },
                last_sample_at: Instant::now(),
            }
        })
        .collect();
    let mut turn = windows.iter().cycle();
    let read = || {
        let w = turn.next().expect("a cycle of windows");
        std::hint::black_box(counter.read(w));
        Ok::<_, std::convert::Infallible>(())
    };
    let Ok(point) = time_point(1, opts, read);
    Profile {
        model: counter_profile_name(window_secs),
        sha256: counter.sha256.clone(),
        device: "cpu".to_owned(),
        hardware: hardware(),
        quadratic: [0.0, point.p50_ms, 0.0],
        points: vec![point],
    }
}

/// Stores a profile (replacing earlier measurements with the same key).
pub(crate) fn store_profile(db: &Db, p: &Profile) -> Result<(), StoreError> {
    let err = |source| db.err(source);
    let mut c = db.lock();
    let tx = c.transaction().map_err(err)?;
    for pt in &p.points {
        tx.execute(
            "INSERT OR REPLACE INTO profiles (hardware, device, model, sha256, burn_version, batch, p50_ms, p95_ms, p99_ms, repeats, measured_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![p.hardware, p.device, p.model, p.sha256, engine_version(&p.device), pt.batch as i64, pt.p50_ms, pt.p95_ms, pt.p99_ms, pt.repeats as i64, now_ms()],
        )
        .map_err(err)?;
    }
    tx.commit().map_err(err)
}

/// The stored profiles of a model (by checksum) on this hardware and burn version.
pub(crate) fn load_profiles(
    db: &Db,
    model: &str,
    sha256: &str,
) -> Result<Vec<Profile>, StoreError> {
    let err = |source| db.err(source);
    let c = db.lock();
    let hw = hardware();
    let mut st = c
        .prepare(
            "SELECT device, batch, p50_ms, p95_ms, p99_ms, repeats, burn_version FROM profiles
             WHERE hardware = ?1 AND model = ?2 AND sha256 = ?3 ORDER BY device, batch",
        )
        .map_err(err)?;
    let rows = st
        .query_map(params![hw, model, sha256], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(6)?,
                Point {
                    batch: r.get::<_, i64>(1)? as usize,
                    p50_ms: r.get(2)?,
                    p95_ms: r.get(3)?,
                    p99_ms: r.get(4)?,
                    repeats: r.get::<_, i64>(5)? as usize,
                },
            ))
        })
        .map_err(err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let mut out: Vec<Profile> = Vec::new();
    for (dev, _, pt) in rows
        .into_iter()
        .filter(|(dev, version, _)| *version == engine_version(dev))
    {
        match out.last_mut() {
            Some(p) if p.device == dev => p.points.push(pt),
            _ => out.push(Profile {
                model: model.to_owned(),
                sha256: sha256.to_owned(),
                device: dev,
                hardware: hw.clone(),
                points: vec![pt],
                quadratic: [0.0; 3],
            }),
        }
    }
    for p in &mut out {
        let xs: Vec<f64> = p.points.iter().map(|x| x.batch as f64).collect();
        let ys: Vec<f64> = p.points.iter().map(|x| x.p50_ms).collect();
        p.quadratic = fit_quadratic(&xs, &ys);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quadratic_fit_recovers_a_curve() {
        let xs = [1.0, 2.0, 4.0, 8.0, 16.0];
        let ys: Vec<f64> = xs.iter().map(|x| 0.5 * x * x + 3.0 * x + 2.0).collect();
        let [a, b, c] = fit_quadratic(&xs, &ys);
        assert!(
            (a - 0.5).abs() < 1e-6 && (b - 3.0).abs() < 1e-6 && (c - 2.0).abs() < 1e-6,
            "{a} {b} {c}"
        );
        assert_eq!(batch_sizes(64), vec![1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(batch_sizes(12), vec![1, 2, 4, 8, 12]);
    }

    /// A profile measured with an earlier direct kernel (stored under its key) is not read
    /// back: the composer measures the model again rather than pricing the old kernel's time.
    #[test]
    fn profiles_of_an_earlier_kernel_do_not_stand_in() {
        let dir = tempfile::tempdir().unwrap();
        const SCHEMA: crate::serving::store::Schema =
            crate::serving::store::Schema::new(&[crate::serving::store::MIGRATIONS, MIGRATIONS]);
        let db = Db::open(&dir.path().join("p.db"), &SCHEMA).unwrap();
        let point = |p50_ms| Point {
            batch: 8,
            p50_ms,
            p95_ms: p50_ms,
            p99_ms: p50_ms,
            repeats: 5,
        };
        let p = Profile {
            model: "m".into(),
            sha256: "abc".into(),
            device: "cpu".into(),
            hardware: hardware(),
            points: vec![point(2.0)],
            quadratic: [0.0; 3],
        };
        store_profile(&db, &p).unwrap();
        // The same model's profile as the kernel before revision 2 stored it.
        db.lock()
            .execute(
                "UPDATE profiles SET burn_version = ?1",
                params![format!("{BURN_VERSION}/fast+direct")],
            )
            .unwrap();
        let fast = crate::zoo::InferencePath::from_env() == crate::zoo::InferencePath::Fast;
        if fast {
            assert!(load_profiles(&db, "m", "abc").unwrap().is_empty());
        }
        store_profile(
            &db,
            &Profile {
                points: vec![point(1.0)],
                ..p
            },
        )
        .unwrap();
        let read = load_profiles(&db, "m", "abc").unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].points[0].p50_ms, 1.0);
    }
}
