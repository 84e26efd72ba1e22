//! `holmes zoo list`: the zoo's models with their metrics.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

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
}

pub(crate) fn run(cmd: ZooCommand) -> Result<()> {
    let ZooCommand::List { dir, json } = cmd;
    let listing = zoo::list::<burn::backend::Flex>(&dir, &Default::default())?;
    if json {
        println!("{}", serde_json::to_string_pretty(&listing)?);
    } else {
        print!("{}", listing.to_text());
    }
    Ok(())
}
