//! `holmes score`: a recording scored offline, window by window, as the daemon would.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::config::Config;
use crate::training::dataset;

#[derive(Debug, clap::Args)]
pub struct ScoreArgs {
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
}

pub fn run(a: ScoreArgs) -> Result<()> {
    let ScoreArgs {
        record,
        from,
        to,
        config,
        json,
    } = a;
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
        cfg.ward.window_secs,
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
    Ok(())
}
