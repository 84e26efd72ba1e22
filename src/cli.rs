//! Command-line interface: argument definitions and the dispatch to library entry points.
//! `main.rs` only parses and calls [`run`].

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::dataset::{self, Dataset, Split, WindowSpec};
use crate::train::{self, TrainOptions};
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
