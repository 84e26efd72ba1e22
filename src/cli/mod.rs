//! The command line: one file per subcommand, each holding its clap arguments and its call
//! into the library; [`run`] dispatches. `main.rs` only parses and calls it. This is the only
//! module that uses clap and `anyhow`.

mod bench;
mod compose;
mod demo;
mod device;
mod evaluate;
mod profile;
mod score;
mod serve;
mod simulate;
mod train;
mod user;
mod zoo;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::config::Config;

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
        command: user::UserCommand,
    },
    /// Monitors' device tokens (stored hashed; see `auth.require_device_tokens`).
    Device {
        #[command(subcommand)]
        command: device::DeviceCommand,
    },
    /// Train the model zoo from PhysioNet records (resumable: finished models are kept).
    Train(train::TrainArgs),
    /// Generate the deterministic patient-wise split file from the data.
    Split(train::SplitArgs),
    /// Inspect the model zoo.
    Zoo {
        #[command(subcommand)]
        command: zoo::ZooCommand,
    },
    /// Run the daemon: monitors stream in over /ws/monitor, scores go to SQLite and the API.
    Serve(serve::ServeArgs),
    /// Check a config, the zoo (models, beat counter, the alarm rule it would start on), TLS files
    /// and the database path without starting anything.
    Validate(serve::ValidateArgs),
    /// Play N bedside monitors against a running daemon.
    Simulate(simulate::SimulateArgs),
    /// Compose the ensemble: the best validation ROC-AUC within the latency budget (or the
    /// lowest latency reaching an accuracy floor); writes a report folder.
    Compose(compose::ComposeCli),
    /// Load benchmark: the daemon (a child process) under N simulated monitors on loopback.
    Bench(bench::BenchCli),
    /// Measure each model's latency per batch size on each device; store the profiles.
    Profile(profile::ProfileArgs),
    /// The zoo's convolutions against ONNX Runtime: reference models in the plain and the
    /// fast inference path (see `scripts/bench_cpu.py` for the interleaved ORT comparison).
    BenchCpu(bench::BenchCpuCli),
    /// Score a recording offline, window by window, exactly as the daemon would.
    Score(score::ScoreArgs),
    /// Event-level evaluation on a split's records: alarms (rule chosen on validation), EC57
    /// episode figures, time to alarm, false alarms per hour, noise stress test, a classical
    /// baseline; tables, --json, or a report folder.
    Evaluate(evaluate::EvaluateArgs),
    /// The daemon on the embedded defaults plus simulated beds, in one process.
    Demo(demo::DemoArgs),
}

/// `--config` and `--db`: the arguments every subcommand that reads the configuration or the
/// database shares.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// Config file [default: the embedded defaults, config/holmes.toml].
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Database [default: the config's storage.db].
    #[arg(long)]
    pub db: Option<PathBuf>,
}

impl ConfigArgs {
    /// The config file (or the embedded defaults) with `--db` applied.
    pub fn load(&self) -> Result<Config> {
        let mut cfg = Config::load(self.config.as_deref())?;
        if let Some(d) = &self.db {
            cfg.storage.db = d.clone();
        }
        Ok(cfg)
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::User { command } => user::run(command),
        Command::Device { command } => device::run(command),
        Command::Train(a) => train::train(a),
        Command::Split(a) => train::split(a),
        Command::Zoo { command } => zoo::run(command),
        Command::Serve(a) => serve::serve(a),
        Command::Validate(a) => serve::validate(a),
        Command::Simulate(a) => simulate::run(a),
        Command::Compose(a) => compose::run(a),
        Command::Bench(a) => bench::bench(a),
        Command::BenchCpu(a) => bench::bench_cpu(a),
        Command::Profile(a) => profile::run(a),
        Command::Score(a) => score::run(a),
        Command::Evaluate(a) => evaluate::run(a),
        Command::Demo(a) => demo::run(a),
    }
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

/// The actor the audit log records for the command line: `cli:<login>`.
fn cli_actor() -> String {
    let user = std::env::var("SUDO_USER")
        .or_else(|_| std::env::var("USER"))
        .unwrap_or_else(|_| "unknown".into());
    format!("cli:{user}")
}
