//! `holmes user add`: dashboard users.

use anyhow::{Context, Result};
use clap::Subcommand;

use super::{ConfigArgs, cli_actor};

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
        #[command(flatten)]
        config: ConfigArgs,
    },
}

pub(crate) fn run(cmd: UserCommand) -> Result<()> {
    let UserCommand::Add {
        name,
        role,
        replace,
        config,
    } = cmd;
    let path = config.load()?.storage.db;
    let db = crate::serving::store::Db::open(&path, &crate::appliance::schema::WARD)?;
    let role: crate::dashboard::auth::Role = role.parse()?;
    let mut password = String::new();
    std::io::stdin()
        .read_line(&mut password)
        .context("reading the password from standard input")?;
    let password = password.trim_end_matches(['\n', '\r']);
    crate::dashboard::auth::Users::new(db.clone())?.add(&name, role, password, replace)?;
    crate::serving::store::audit::AuditLog::new(&db).write(
        Some(&cli_actor()),
        crate::serving::store::audit::Action::UserAdded,
        &serde_json::json!({"user": name, "role": role.as_str()}),
    )?;
    println!(
        "user {name} ({}) added to {}",
        role.as_str(),
        path.display()
    );
    Ok(())
}
