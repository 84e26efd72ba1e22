//! Command-line interface: argument definitions and the dispatch to library entry points.
//! `main.rs` only parses and calls [`run`].

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::config::Config;
use crate::tools::sim::{Faults, SimOptions, Source};
use crate::training::dataset::{self, Dataset, Split, WindowSpec};
use crate::training::train::{self, TrainOptions};
use crate::zoo;

/// Holmes: bedside ECG/vitals ensemble serving.
#[derive(Debug, Parser)]
#[command(name = "holmes", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Dashboard users.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Monitors' device tokens (stored hashed; see `auth.require_device_tokens`).
    Device {
        #[command(subcommand)]
        command: crate::serving::ingest::devices::DeviceCommand,
    },
    /// Train the model zoo from PhysioNet records (resumable: finished models are kept).
    Train {
        /// Folder holding vfdb/, cudb/ and mitdb/ [default: $HOLMES_DATA or ../shared/data/physionet]
        #[arg(long)]
        data: Option<PathBuf>,
        /// Zoo folder to write.
        #[arg(long, default_value = "models")]
        out: PathBuf,
        /// The committed patient-wise split.
        #[arg(long, default_value = "config/split.toml")]
        split: PathBuf,
        /// Train a tiny zoo in a few minutes (for tests and smoke checks).
        #[arg(long)]
        quick: bool,
        /// Train only models whose name contains this (repeatable).
        #[arg(long)]
        only: Vec<String>,
        /// Retrain models that already exist.
        #[arg(long)]
        force: bool,
    },
    /// Generate the deterministic patient-wise split file from the data.
    Split {
        #[arg(long)]
        data: Option<PathBuf>,
        #[arg(long, default_value = "config/split.toml")]
        out: PathBuf,
    },
    /// Inspect the model zoo.
    Zoo {
        #[command(subcommand)]
        command: ZooCommand,
    },
    /// Run the daemon: monitors stream in over /ws/monitor, scores go to SQLite and the API.
    Serve(ServeArgs),
    /// Check a config, the zoo and the database path without starting anything.
    Validate(crate::appliance::validate::ValidateArgs),
    /// Play N bedside monitors against a running daemon.
    Simulate(SimulateArgs),
    /// Compose the ensemble: the best validation ROC-AUC within the latency budget (or the
    /// lowest latency reaching an accuracy floor); writes a report folder.
    Compose(crate::composer::report::ComposeArgs),
    /// Load benchmark: the daemon (a child process) under N simulated monitors on loopback.
    Bench(crate::tools::bench::BenchArgs),
    /// Measure each model's latency per batch size on each device; store the profiles.
    Profile {
        /// Models to profile: names, or empty for the ensemble's members.
        #[arg(long)]
        models: Vec<String>,
        /// Profile every model in the zoo.
        #[arg(long)]
        all: bool,
        /// Largest batch (the bed count the appliance serves).
        #[arg(long, default_value_t = 64)]
        max_batch: usize,
        /// Timed runs per batch size at least.
        #[arg(long, default_value_t = 5)]
        repeats: usize,
        /// Config file (models folder, database, ensemble) [default: embedded defaults].
        #[arg(long)]
        config: Option<PathBuf>,
        /// Database to store the profiles in [default: the config's].
        #[arg(long)]
        db: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The zoo's convolutions against ONNX Runtime: reference models in the plain and the
    /// fast inference path (see `scripts/bench_cpu.py` for the interleaved ORT comparison).
    BenchCpu(crate::tools::cpu_bench::BenchCpuArgs),
    /// Score a recording offline, window by window, exactly as the daemon would.
    Score {
        /// WFDB record path without extension, e.g. ../shared/data/physionet/vfdb/418
        #[arg(long)]
        record: PathBuf,
        /// First second to score.
        #[arg(long, default_value_t = 0.0)]
        from: f64,
        /// Last second to score [default: the end].
        #[arg(long)]
        to: Option<f64>,
        /// Config file for the ensemble and windows [default: embedded defaults].
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The daemon on the embedded defaults plus simulated beds, in one process.
    Demo {
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
    },
}

/// Flags of `holmes serve`; each overrides the config file.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Config file [default: the embedded defaults, config/holmes.toml].
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    #[arg(long)]
    pub db: Option<PathBuf>,
    #[arg(long)]
    pub models: Option<PathBuf>,
}

/// Flags of `holmes simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Daemon WebSocket URL.
    #[arg(long, default_value = "ws://127.0.0.1:8080/ws/monitor")]
    pub url: String,
    #[arg(long, default_value_t = 8)]
    pub beds: usize,
    /// PhysioNet folder to replay [default: $HOLMES_DATA or ../shared/data/physionet].
    #[arg(long, conflicts_with = "synthetic")]
    pub source: Option<PathBuf>,
    /// Synthetic ECG (McSharry's dynamical model) instead of recordings.
    #[arg(long)]
    pub synthetic: bool,
    /// Wall-clock seconds to run.
    #[arg(long, default_value_t = 120.0)]
    pub duration: f64,
    /// Signal seconds per wall-clock second.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Device token presented in the hello (from `holmes device add`).
    #[arg(long, default_value = "demo")]
    pub token: String,
    /// Device name in every hello (the token's device, as a gateway for all the beds)
    /// [default: sim-<bed> per bed].
    #[arg(long)]
    pub device: Option<String>,
    /// PEM file of the CA (or self-signed certificate) to trust for a wss:// URL [default:
    /// the system's roots].
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// Probability a frame is dropped.
    #[arg(long, default_value_t = 0.0)]
    pub drop: f64,
    /// Probability a frame is sent twice.
    #[arg(long, default_value_t = 0.0)]
    pub duplicate: f64,
    /// Probability a corrupt copy precedes a frame.
    #[arg(long, default_value_t = 0.0)]
    pub corrupt: f64,
    /// Bed name prefix.
    #[arg(long, default_value = "bed-")]
    pub prefix: String,
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Adds a dashboard user; the password is read from standard input (one line).
    Add {
        name: String,
        /// nurse (acknowledges and silences alarms), engineer (also zoo and plan controls) or
        /// admin.
        #[arg(long, default_value = "nurse")]
        role: String,
        /// Replace an existing user of that name.
        #[arg(long)]
        replace: bool,
        #[arg(long)]
        config: Option<PathBuf>,
        /// Database [default: the config's].
        #[arg(long)]
        db: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ZooCommand {
    /// Table of models with their metrics, and the ensemble of all of them.
    List {
        /// Zoo folder.
        #[arg(long, default_value = "models")]
        dir: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Train {
            data,
            out,
            split,
            quick,
            only,
            force,
        } => {
            let opts = TrainOptions {
                data: data.unwrap_or_else(dataset::default_data_dir),
                out,
                split,
                quick,
                only,
                force,
            };
            let (trained, kept) = train::run(&opts).context("training failed")?;
            println!(
                "trained {} model(s), kept {} existing in {}",
                trained.len(),
                kept.len(),
                opts.out.display()
            );
        }
        Command::Split { data, out } => {
            let data = data.unwrap_or_else(dataset::default_data_dir);
            let ds = Dataset::new(dataset::load_all(&data)?, WindowSpec::default());
            let split = Split::generate(&ds);
            split.check().map_err(anyhow::Error::msg)?;
            split.write(&out)?;
            print!("{}", split.summary(&ds));
            println!(
                "wrote {} ({} train, {} validation, {} test records)",
                out.display(),
                split.train.len(),
                split.validation.len(),
                split.test.len()
            );
        }
        Command::Score {
            record,
            from,
            to,
            config,
            json,
        } => {
            let cfg = Config::load(config.as_deref())?;
            let dir = record.parent().unwrap_or(std::path::Path::new("."));
            let name = record
                .file_name()
                .context("--record needs a record path")?
                .to_string_lossy()
                .into_owned();
            let signals = dataset::read_signals(dir, &name)?;
            let ens = crate::serving::engine::ensemble::Ensemble::load(
                &cfg.ensemble.models_dir,
                &cfg.ensemble.members,
            )?;
            let rows = crate::tools::score::score_signals(
                &ens,
                &signals,
                cfg.ward.window_secs,
                cfg.ward.hop_secs,
                from,
                to,
            );
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                println!(
                    "{:>8} {:>8}  {:<20} {:>6}  members",
                    "from_s", "to_s", "status", "risk"
                );
                for r in rows {
                    let members: Vec<String> = r
                        .members
                        .iter()
                        .map(|m| {
                            format!(
                                "{}={}",
                                m.name,
                                m.prob.map_or("-".into(), |p| format!("{p:.3}"))
                            )
                        })
                        .collect();
                    println!(
                        "{:>8.1} {:>8.1}  {:<20} {:>6}  {}",
                        r.start_secs,
                        r.end_secs,
                        r.status.as_str(),
                        r.score.map_or("-".into(), |s| format!("{s:.3}")),
                        members.join(" ")
                    );
                }
            }
        }
        Command::Compose(a) => {
            let cfg = Config::load(a.config.as_deref())?;
            crate::composer::report::main(&cfg, &a)?;
        }
        Command::Bench(args) => crate::tools::bench::main(args)?,
        Command::BenchCpu(args) => crate::tools::cpu_bench::run(&args)?,
        Command::Profile {
            models,
            all,
            max_batch,
            repeats,
            config,
            db,
            json,
        } => {
            let cfg = Config::load(config.as_deref())?;
            let db = db.unwrap_or(cfg.storage.db.clone());
            let names: Vec<String> = if all {
                zoo::model_dirs(&cfg.ensemble.models_dir)?
                    .iter()
                    .filter_map(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect()
            } else if models.is_empty() {
                cfg.ensemble.members.clone()
            } else {
                models
            };
            let opts = crate::serving::engine::profile::ProfileOptions {
                max_batch,
                warmup: 2,
                min_repeats: repeats,
                max_repeats: repeats.max(30),
                budget: std::time::Duration::from_secs(2),
            };
            let mut out = Vec::new();
            for dev in crate::serving::engine::accelerator::discover() {
                for name in &names {
                    let p = crate::serving::engine::profile::profile_model(
                        &cfg.ensemble.models_dir.join(name),
                        &dev,
                        &opts,
                    )?;
                    crate::serving::engine::profile::store_profile(&db, &p)?;
                    if !json {
                        println!("{} on {} ({}):", p.model, p.device, p.hardware);
                        for pt in &p.points {
                            println!(
                                "  batch {:>4}: p50 {:>9.2} ms  p95 {:>9.2} ms  p99 {:>9.2} ms  ({} runs)  {:>8.1} windows/s",
                                pt.batch,
                                pt.p50_ms,
                                pt.p95_ms,
                                pt.p99_ms,
                                pt.repeats,
                                pt.batch as f64 * 1000.0 / pt.p50_ms
                            );
                        }
                        let [a, b, c] = p.quadratic;
                        println!("  fit: p50(b) = {a:.4} b^2 + {b:.3} b + {c:.3} ms");
                    }
                    out.push(p);
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("stored in {}", db.display());
            }
        }
        Command::Serve(a) => {
            let mut cfg = Config::load(a.config.as_deref())?;
            if let Some(l) = a.listen {
                cfg.server.listen = l;
            }
            if let Some(d) = a.db {
                cfg.storage.db = d;
            }
            if let Some(m) = a.models {
                cfg.ensemble.models_dir = m;
            }
            block_on(async { Ok(crate::appliance::serve(cfg).await?) })?;
        }
        Command::Validate(a) => crate::appliance::validate::main(&a)?,
        Command::Simulate(a) => {
            let opts = sim_options(&a);
            let report = runtime()?.block_on(crate::tools::sim::run(opts))?;
            println!(
                "simulation over: {} frames sent, {} connections, {} errors received",
                report
                    .frames_sent
                    .load(std::sync::atomic::Ordering::Relaxed),
                report.connects.load(std::sync::atomic::Ordering::Relaxed),
                report
                    .errors_received
                    .load(std::sync::atomic::Ordering::Relaxed)
            );
        }
        Command::Demo {
            beds,
            duration,
            speed,
            db,
            listen,
        } => {
            let mut cfg = Config::default();
            cfg.server.listen = listen;
            cfg.storage.db = db;
            // The demo's ward view opens without signing in, and its simulated monitors need
            // no device tokens (it listens on loopback).
            cfg.dashboard.public_ward_view = true;
            cfg.auth.require_device_tokens = false;
            block_on(demo(cfg, beds, duration, speed))?;
        }
        Command::User {
            command:
                UserCommand::Add {
                    name,
                    role,
                    replace,
                    config,
                    db,
                },
        } => {
            let cfg = Config::load(config.as_deref())?;
            let db = db.unwrap_or(cfg.storage.db);
            let role: crate::dashboard::auth::Role = role.parse()?;
            let mut password = String::new();
            std::io::stdin()
                .read_line(&mut password)
                .context("reading the password from standard input")?;
            let password = password.trim_end_matches(['\n', '\r']);
            crate::dashboard::auth::Users::open(&db)?.add(&name, role, password, replace)?;
            crate::serving::store::audit::AuditLog::new(&db).write(
                Some(&crate::serving::ingest::devices::cli_actor()),
                crate::serving::store::audit::Action::UserAdded,
                &serde_json::json!({"user": name, "role": role.as_str()}),
            )?;
            println!("user {name} ({}) added to {}", role.as_str(), db.display());
        }
        Command::Device { command } => crate::serving::ingest::devices::run(command)?,
        Command::Zoo {
            command: ZooCommand::List { dir, json },
        } => {
            let listing = zoo::list::<burn::backend::Flex>(&dir, &Default::default())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&listing)?);
            } else {
                print!("{}", listing.to_text());
            }
        }
    }
    Ok(())
}

/// Runs the daemon's future to completion, then gives blocking work still running (a
/// composition's profiling, say) a moment before the process exits without it: the future
/// has already flushed the database by then.
fn block_on<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    let rt = runtime()?;
    let out = rt.block_on(f);
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    out
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn sim_options(a: &SimulateArgs) -> SimOptions {
    let source = if a.synthetic {
        Source::Synthetic
    } else {
        Source::Records(a.source.clone().unwrap_or_else(dataset::default_data_dir))
    };
    SimOptions {
        url: a.url.clone(),
        beds: a.beds,
        source,
        duration: std::time::Duration::from_secs_f64(a.duration),
        speed: a.speed,
        token: a.token.clone(),
        device: a.device.clone(),
        ca: a.ca.clone(),
        bed_prefix: a.prefix.clone(),
        faults: Faults {
            drop: a.drop,
            duplicate: a.duplicate,
            corrupt: a.corrupt,
        },
        records: Vec::new(),
        seed: 1,
        ramp: std::time::Duration::ZERO,
        storm_at: None,
    }
}

/// SIGTERM or ctrl-c, whichever comes first.
pub(crate) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
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
    let opts = SimOptions {
        url: format!("ws://{addr}/ws/monitor"),
        beds,
        source,
        duration: run_for,
        speed,
        token: "demo".into(),
        device: None,
        ca: None,
        bed_prefix: "bed-".into(),
        faults: Faults::default(),
        records: Vec::new(),
        seed: 1,
        ramp: std::time::Duration::ZERO,
        storm_at: None,
    };
    let sim = tokio::spawn(crate::tools::sim::run(opts));
    let reader = crate::serving::store::StoreReader::open(&cfg.storage.db)?;
    let mut seen = std::collections::HashMap::<String, i64>::new();
    let stop = tokio::time::sleep(run_for);
    tokio::pin!(stop);
    let signal = shutdown_signal();
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
