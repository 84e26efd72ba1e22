//! `holmes zoo list`: the zoo's models with their metrics; `holmes zoo rules`: its rule book,
//! and which rules still hold for it.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

use crate::config::{Combine, Config};
use crate::signal::beats::BeatCounter;
use crate::tools::rule_book;
use crate::zoo;

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
    /// The validated ensembles of the zoo's alarm_rules.json: pooling, alarm rule, validation
    /// figures, whether each still holds for the zoo (members' weights, beat counter) and
    /// whether it applies to the configured ward (hop, window, beat counter, pooling).
    Rules {
        /// Zoo folder [default: the config's ensemble.models_dir].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Config file for the ward [default: embedded defaults].
        #[arg(long)]
        config: Option<PathBuf>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(cmd: ZooCommand) -> Result<()> {
    match cmd {
        ZooCommand::List { dir, json } => {
            let listing = zoo::list::<burn::backend::Flex>(&dir, &Default::default())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&listing)?);
            } else {
                print!("{}", listing.to_text());
            }
        }
        ZooCommand::Rules { dir, config, json } => {
            let cfg = Config::load(config.as_deref())?;
            let dir = dir.unwrap_or_else(|| cfg.ensemble.models_dir.clone());
            let counter = BeatCounter::load(&dir, cfg.ward.hop_secs);
            let ward = rule_book::Ward {
                hop_secs: cfg.ward.hop_secs,
                window_secs: cfg.ward.window_secs,
                counts_beats: cfg.ensemble.count_beats && matches!(counter, Ok(Some(_))),
                weighs: cfg.engine.combine == Combine::WeightedMean,
            };
            let rows = rule_book::rule_rows(&dir, &counter, ward)?;
            if json {
                // Serialised directly, not through a `Value`, so that thresholds print as the
                // f32 they are (0.42, not 0.41999998688697815).
                #[derive(serde::Serialize)]
                struct Listing<'a> {
                    ward: rule_book::Ward,
                    rules: &'a [rule_book::RuleRow],
                }
                let listing = Listing { ward, rules: &rows };
                println!("{}", serde_json::to_string_pretty(&listing)?);
            } else {
                print!("{}", rule_book::to_text(&rows, ward));
            }
        }
    }
    Ok(())
}
