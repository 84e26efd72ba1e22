//! `holmes bench`: the daemon and a load of simulated monitors in one process, on loopback,
//! bounded in time; reports ingest rates, window outcomes and end-to-end latency percentiles
//! (last sample to commit) from the scores the daemon stored, plus the process's CPU time and
//! peak resident memory.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::Config;
use crate::sim::{Faults, SimOptions, Source};
use crate::store::StoreReader;

/// Options of one benchmark run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub beds: usize,
    /// Ensemble members (zoo model names).
    pub members: Vec<String>,
    /// Wall-clock seconds of load.
    pub duration: Duration,
    pub source: Source,
    /// Signal seconds per wall second (1 for a real load; more only for smoke tests).
    pub speed: f64,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub beds: usize,
    pub members: Vec<String>,
    pub seconds: f64,
    pub frames_per_sec: f64,
    pub samples_per_sec: f64,
    pub windows: usize,
    pub scored: usize,
    pub partial: usize,
    pub superseded: usize,
    pub dropped: usize,
    pub insufficient: usize,
    pub latency_ms_p50: f64,
    pub latency_ms_p95: f64,
    pub latency_ms_p99: f64,
    pub latency_ms_max: f64,
    /// Process CPU seconds per wall second (2.0 = both cores busy).
    pub cpu_cores_used: f64,
    pub peak_rss_mb: f64,
    pub slo_ms: u64,
}

fn cpu_seconds() -> f64 {
    // utime + stime of this process, in clock ticks (100 Hz on Linux).
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit(')').next()?.split_whitespace().collect::<Vec<_>>();
            Some((rest.get(11)?.parse::<f64>().ok()? + rest.get(12)?.parse::<f64>().ok()?) / 100.0)
        })
        .unwrap_or(0.0)
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Runs one benchmark with `base` as the configuration (database and beds are set here).
pub async fn run(mut base: Config, opts: BenchOptions) -> anyhow::Result<BenchReport> {
    let dir = tempfile::tempdir()?;
    base.storage.db = dir.path().join("bench.db");
    base.ensemble.members = opts.members.clone();
    // The benchmark measures the members it was given.
    base.composer.enabled = false;
    base.ward.beds = (1..=opts.beds).map(|i| format!("bed-{i}")).collect();
    base.ward.max_beds = base.ward.max_beds.max(opts.beds);
    // The simulated monitors sign in as one gateway device, checked as in service.
    let token = crate::devices::DeviceDb::open(&base.storage.db)?.add("bench", None)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let running = crate::server::start(base.clone(), listener).await?;
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let sim = SimOptions {
        url: format!("ws://{}/ws/monitor", running.addr),
        beds: opts.beds,
        source: opts.source.clone(),
        duration: opts.duration,
        speed: opts.speed,
        token,
        device: Some("bench".into()),
        ca: None,
        bed_prefix: "bed-".into(),
        faults: Faults::default(),
        records: Vec::new(),
        seed: 11,
    };
    let report = crate::sim::run(sim).await?;
    // Let the last windows commit.
    tokio::time::sleep(Duration::from_millis(base.engine.slo_ms * 3 + 500)).await;
    let (cpu, secs) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    let reader = StoreReader::open(&base.storage.db)?;
    let mut rows = Vec::new();
    for i in 1..=opts.beds {
        let r = reader.clone();
        let bed = format!("bed-{i}");
        rows.extend(
            tokio::task::spawn_blocking(move || r.scores(&bed, i64::MIN, i64::MAX, 1_000_000))
                .await??,
        );
    }
    running.shutdown.cancel();
    running.stopped().await;
    let count = |s: &str| rows.iter().filter(|r| r.status == s).count();
    let mut lat: Vec<f64> = rows
        .iter()
        .filter(|r| r.score.is_some())
        .map(|r| r.latency_ms)
        .collect();
    lat.sort_by(f64::total_cmp);
    let frames = report
        .frames_sent
        .load(std::sync::atomic::Ordering::Relaxed) as f64;
    Ok(BenchReport {
        beds: opts.beds,
        members: opts.members,
        seconds: secs,
        frames_per_sec: frames / secs,
        // Each samples frame carries 25 samples on each of two leads; about a tenth of frames
        // are vitals.
        samples_per_sec: frames * 10.0 / 11.0 * 50.0 / secs,
        windows: rows.len(),
        scored: count("scored"),
        partial: count("partial"),
        superseded: count("superseded"),
        dropped: count("dropped"),
        insufficient: count("insufficient_signal"),
        latency_ms_p50: pct(&lat, 0.5),
        latency_ms_p95: pct(&lat, 0.95),
        latency_ms_p99: pct(&lat, 0.99),
        latency_ms_max: lat.last().copied().unwrap_or(f64::NAN),
        cpu_cores_used: cpu / secs,
        peak_rss_mb: peak_rss_mb(),
        slo_ms: base.engine.slo_ms,
    })
}
