//! `holmes demo`: the daemon on the embedded defaults plus simulated beds, in one process.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::config::Config;
use crate::tools::sim::{SimOptions, Source};
use crate::training::dataset;

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Simulated beds.
    #[arg(long, default_value_t = 8)]
    beds: usize,
    /// Wall-clock seconds to run (default: until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    /// Signal seconds per wall-clock second.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// SQLite file for the demo.
    #[arg(long, default_value = "holmes-demo.db")]
    db: PathBuf,
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
}

pub(crate) fn run(a: DemoArgs) -> Result<()> {
    let mut cfg = Config::default();
    cfg.server.listen = a.listen;
    cfg.storage.db = a.db;
    // The demo's ward view opens without signing in, and its simulated monitors need no
    // device tokens (it listens on loopback).
    cfg.dashboard.public_ward_view = true;
    cfg.auth.require_device_tokens = false;
    super::block_on(demo(cfg, a.beds, a.duration, a.speed))
}

async fn demo(cfg: Config, beds: usize, duration: Option<f64>, speed: f64) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(cfg.server.listen)
        .await
        .with_context(|| format!("binding {}", cfg.server.listen))?;
    let running = crate::appliance::server::start(cfg.clone(), listener).await?;
    let addr = running.addr;
    let data = dataset::default_data_dir();
    let source = if data.join("vfdb").join("RECORDS").exists() {
        Source::Records(data)
    } else {
        Source::Synthetic
    };
    println!(
        "Holmes demo: {beds} simulated beds ({})",
        match &source {
            Source::Records(d) => format!("replaying PhysioNet records from {}", d.display()),
            Source::Synthetic => "synthetic ECG".to_string(),
        }
    );
    println!("  ward dashboard:         http://{addr}/");
    println!("  beds and latest scores: http://{addr}/api/beds");
    println!("  scores of one bed:      http://{addr}/api/beds/bed-1/scores");
    println!("  ensemble and models:    http://{addr}/api/ensemble  http://{addr}/api/models");
    println!("  readiness:              http://{addr}/health/ready");
    println!("  database:               {}", cfg.storage.db.display());
    println!(
        "First scores arrive one window ({} s of signal) after the beds connect.",
        cfg.ward.window_secs
    );
    let run_for = std::time::Duration::from_secs_f64(duration.unwrap_or(365.0 * 86_400.0));
    let mut opts = SimOptions::new(format!("ws://{addr}/ws/monitor"), beds, source);
    opts.duration = run_for;
    opts.speed = speed;
    let sim = tokio::spawn(crate::tools::sim::run(opts));
    let reader = crate::serving::store::StoreReader::open(&cfg.storage.db)?;
    let mut seen = std::collections::HashMap::<String, i64>::new();
    let stop = tokio::time::sleep(run_for);
    tokio::pin!(stop);
    let signal = crate::appliance::shutdown_signal();
    tokio::pin!(signal);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = &mut signal => break,
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
                let r = reader.clone();
                let latest = tokio::task::spawn_blocking(move || r.latest_scores()).await??;
                for row in latest {
                    if seen.get(&row.bed) != Some(&row.window_end_ms) {
                        seen.insert(row.bed.clone(), row.window_end_ms);
                        match row.score {
                            Some(s) => println!("{:>8}  window {:>3}  risk {:.3}  ({:.0} ms)", row.bed, row.window_index, s, row.latency_ms),
                            None => println!("{:>8}  window {:>3}  {}", row.bed, row.window_index, row.status),
                        }
                    }
                }
            }
        }
    }
    sim.abort();
    running.shutdown.cancel();
    running.stopped().await;
    Ok(())
}
