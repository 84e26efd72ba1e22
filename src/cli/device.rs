//! `holmes device add | revoke | list`: monitors' device tokens.

use anyhow::Result;
use clap::Subcommand;
use serde_json::json;

use super::{ConfigArgs, cli_actor};
use crate::serving::ingest::devices::DeviceDb;
use crate::serving::store::Db;
use crate::serving::store::audit::{Action, AuditLog};

/// `holmes device ...`.
#[derive(Debug, Subcommand)]
pub enum DeviceCommand {
    /// Issues a token for a monitor (or gateway) and prints it once on standard output; only
    /// its hash is stored.
    Add {
        /// The device name the monitor sends in its hello's `device`.
        name: String,
        /// Bind the device to this bed: its hellos for other beds are refused.
        #[arg(long)]
        bed: Option<String>,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Revokes a device's token: new hellos are refused and a running daemon closes its
    /// connections within `auth.devices_refresh_secs`.
    Revoke {
        name: String,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Lists the devices (no tokens).
    List {
        #[command(flatten)]
        config: ConfigArgs,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `holmes device ...`.
pub(crate) fn run(cmd: DeviceCommand) -> Result<()> {
    match cmd {
        DeviceCommand::Add { name, bed, config } => {
            let path = config.load()?.storage.db;
            let db = Db::open(&path, &crate::appliance::schema::WARD)?;
            let token = DeviceDb::new(db.clone()).add(&name, bed.as_deref())?;
            AuditLog::new(&db).write(
                Some(&cli_actor()),
                Action::DeviceAdded,
                &json!({"device": name, "bed": bed}),
            )?;
            eprintln!(
                "device {name} added to {}; its token (shown only now; put it in the monitor's \
                 configuration):",
                path.display()
            );
            println!("{token}");
        }
        DeviceCommand::Revoke { name, config } => {
            let path = config.load()?.storage.db;
            let db = Db::open(&path, &crate::appliance::schema::WARD)?;
            DeviceDb::new(db.clone()).revoke(&name)?;
            AuditLog::new(&db).write(
                Some(&cli_actor()),
                Action::DeviceRevoked,
                &json!({"device": name}),
            )?;
            println!("device {name} revoked in {}", path.display());
        }
        DeviceCommand::List { config, json } => {
            let db = Db::open(&config.load()?.storage.db, &crate::appliance::schema::WARD)?;
            let devices = DeviceDb::new(db).list()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&devices)?);
            } else {
                println!(
                    "{:<32} {:<16} {:<20} status",
                    "device", "bed", "created (UTC)"
                );
                for d in devices {
                    println!(
                        "{:<32} {:<16} {:<20} {}",
                        d.name,
                        d.bed.as_deref().unwrap_or("any"),
                        utc(d.created_ms),
                        d.revoked_ms
                            .map_or("active".into(), |t| format!("revoked {}", utc(t)))
                    );
                }
            }
        }
    }
    Ok(())
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS` (UTC).
fn utc(ms: i64) -> String {
    let [y, m, d, h, mi, s, _] = crate::core::time::utc_fields(ms);
    format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_700_000_000_000), "2023-11-14 22:13:20");
    }
}
