//! `holmes serve` and `holmes validate`.

use std::path::PathBuf;

use anyhow::Result;

use super::ConfigArgs;

/// Flags of `holmes serve`; each overrides the config file.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    config: ConfigArgs,
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Zoo folder [default: the config's ensemble.models_dir].
    #[arg(long)]
    models: Option<PathBuf>,
}

/// Flags of `holmes validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Config file [default: the embedded defaults, config/holmes.toml].
    #[arg(long)]
    config: Option<PathBuf>,
    /// Zoo folder [default: the config's ensemble.models_dir].
    #[arg(long)]
    models: Option<PathBuf>,
}

pub(crate) fn serve(a: ServeArgs) -> Result<()> {
    let mut cfg = a.config.load()?;
    if let Some(l) = a.listen {
        cfg.server.listen = l;
    }
    if let Some(m) = a.models {
        cfg.ensemble.models_dir = m;
    }
    super::block_on(async { Ok(crate::appliance::serve(cfg).await?) })
}

pub(crate) fn validate(a: ValidateArgs) -> Result<()> {
    Ok(crate::appliance::validate::main(
        a.config.as_deref(),
        a.models.as_deref(),
    )?)
}
