//! `holmes compose`: the ensemble within the latency budget, and its report folder.

use std::path::PathBuf;

use anyhow::Result;

use super::ConfigArgs;
use crate::composer::compose::Estimator;
use crate::composer::report::ComposeArgs;

/// Flags of `holmes compose`.
#[derive(Debug, Clone, clap::Args)]
pub struct ComposeCli {
    /// Latency budget(s) in ms [default: the config's slo_ms; with --method all, three
    /// budgets covering the zoo's range].
    #[arg(long)]
    pub(crate) budget_ms: Vec<f64>,
    /// Solve the dual (HOLMES appendix A.6) instead: the lowest latency whose validation
    /// ROC-AUC is at least this (repeatable).
    #[arg(long, conflicts_with = "budget_ms")]
    pub(crate) min_accuracy: Vec<f64>,
    /// Beds served.
    #[arg(long, default_value_t = 64)]
    pub(crate) beds: usize,
    /// holmes, holmes-ucb, rd, af, lf, npo, exact, or all.
    #[arg(long, default_value = "holmes")]
    pub(crate) method: String,
    /// Profiler-call budget of HOLMES and NPO.
    #[arg(long, default_value_t = 100)]
    pub(crate) calls: usize,
    /// Fast latency estimate: the sum of service times plus the network-calculus bound (the
    /// default: it was the closer to the measured engine, see BENCHMARKS.md), or the
    /// discrete-event simulation of the engine's queues, batches and shared cores.
    #[arg(long, default_value = "netcalc")]
    pub(crate) estimator: Estimator,
    /// Batches the simulation runs at full speed at once [default: this machine's cores].
    #[arg(long)]
    pub(crate) cores: Option<usize>,
    /// Measure each profiled ensemble through the real engine (slow) instead of the fast
    /// estimate; also reports how far both estimators were.
    #[arg(long)]
    pub(crate) measured: bool,
    #[command(flatten)]
    pub(crate) config: ConfigArgs,
    /// Folder for report.json, report.md and pareto.svg.
    #[arg(long, default_value = "compose-report")]
    pub(crate) report: PathBuf,
    /// Print the report as JSON (and no progress bar).
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run(a: ComposeCli) -> Result<()> {
    let cfg = a.config.load()?;
    let args = ComposeArgs {
        budget_ms: a.budget_ms,
        min_accuracy: a.min_accuracy,
        beds: a.beds,
        method: a.method,
        calls: a.calls,
        estimator: a.estimator,
        cores: a.cores,
        measured: a.measured,
        report: a.report,
        json: a.json,
    };
    let db = crate::serving::store::Db::open(&cfg.storage.db, &crate::appliance::schema::WARD)?;
    crate::composer::report::main(&cfg, &db, &args)?;
    Ok(())
}
