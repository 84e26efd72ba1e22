//! `holmes train` and `holmes split`.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::training::dataset::{self, Dataset, Split, WindowSpec};
use crate::training::train::{self, Fold, TrainOptions};

#[derive(Debug, clap::Args)]
pub struct TrainArgs {
    /// Folder holding vfdb/, cudb/, mitdb/, svdb/ and nstdb/ [default: $HOLMES_DATA or ../shared/data/physionet]
    #[arg(long)]
    data: Option<PathBuf>,
    /// Zoo folder to write [default: models, or runs/folds-K/fold-k with --fold].
    #[arg(long)]
    out: Option<PathBuf>,
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
    /// Train for fold k (1-based) of patient-wise cross-validation over every record of the
    /// split: that fold held out, the next one for early stopping, the others learnt from
    /// (`holmes evaluate --folds K --fold-zoos` judges each fold with its zoo).
    #[arg(long, requires = "folds")]
    fold: Option<usize>,
    /// The number of folds K of --fold.
    #[arg(long, requires = "fold")]
    folds: Option<usize>,
}

#[derive(Debug, clap::Args)]
pub struct SplitArgs {
    #[arg(long)]
    data: Option<PathBuf>,
    #[arg(long, default_value = "config/split.toml")]
    out: PathBuf,
    /// Deal every record afresh instead of keeping the placements of the split in `--out`.
    #[arg(long)]
    fresh: bool,
}

pub(crate) fn train(a: TrainArgs) -> Result<()> {
    let TrainArgs {
        data,
        out,
        split,
        quick,
        only,
        force,
        fold,
        folds,
    } = a;
    let fold = match (fold, folds) {
        (Some(k), Some(n)) if n >= 3 && (1..=n).contains(&k) => Some(Fold { fold: k, of: n }),
        (Some(k), Some(n)) => anyhow::bail!("--fold {k} --folds {n}: needs 3 <= K and 1 <= k <= K"),
        _ => None,
    };
    let out = out.unwrap_or_else(|| match fold {
        Some(f) => f.default_out(),
        None => PathBuf::from("models"),
    });
    let opts = TrainOptions {
        data: data.unwrap_or_else(dataset::default_data_dir),
        out,
        split,
        quick,
        only,
        force,
        fold,
    };
    let (trained, kept) = train::run(&opts).context("training failed")?;
    println!(
        "trained {} model(s), kept {} existing in {}",
        trained.len(),
        kept.len(),
        opts.out.display()
    );
    Ok(())
}

pub(crate) fn split(a: SplitArgs) -> Result<()> {
    let SplitArgs { data, out, fresh } = a;
    let data = data.unwrap_or_else(dataset::default_data_dir);
    let previous = if fresh || !out.exists() {
        None
    } else {
        Some(Split::read_unchecked(&out)?)
    };
    let ds = Dataset::new(dataset::load_all(&data)?, WindowSpec::default());
    let split = Split::generate(&ds, previous.as_ref());
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
    Ok(())
}
