//! `holmes zoo list`: the zoo's models with their metrics; `holmes zoo rules`: its rule book,
//! and which rules still hold for it.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

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
    /// figures, and whether each still holds for the zoo (members' weights, beat counter).
    Rules {
        /// Zoo folder.
        #[arg(long, default_value = "models")]
        dir: PathBuf,
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
        ZooCommand::Rules { dir, json } => {
            let rows = rule_book::rule_rows(&dir)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print!("{}", rule_book::to_text(&rows));
            }
        }
    }
    Ok(())
}
