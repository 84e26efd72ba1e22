//! Monitors' device tokens: `holmes device add | revoke | list`, the `devices` table (one row
//! per device: name, the SHA-256 of its token, an optional bed binding, created, revoked), and
//! [`DeviceAuth`], the check of a hello's token that [`ingest`](crate::serving::ingest) runs before a
//! connection may attach to a bed.
//!
//! A token is 256 random bits, shown once when issued and stored only as its SHA-256 (a hash
//! that cannot be reversed for a token that was never guessable; no salt or slow hash needed,
//! unlike a password). The daemon keeps the table in memory, re-read every
//! `auth.devices_refresh_secs` on the blocking pool (and at once when a hello brings a token
//! it does not know, so a freshly issued token works without waiting); after each re-read the
//! [`ward`](crate::serving::ward) closes the connections of devices no longer active. Issuing and
//! revoking go to the [`audit`](crate::serving::store::audit) log.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rand::RngCore;
use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::AuthConfig;
use crate::core::time::now_ms;
use crate::protocol::close;
use crate::serving::store::{Db, Migration};
use crate::serving::ward::{Claim, Ward};

/// The devices' table: monitors' tokens, stored as SHA-256 hashes (`serving::store::schema`).
pub(crate) const MIGRATIONS: &[Migration] = &[Migration {
    version: 7,
    sql: "CREATE TABLE devices (
        name TEXT PRIMARY KEY,
        token_sha256 TEXT NOT NULL UNIQUE,
        bed TEXT,
        created_ms INTEGER NOT NULL,
        revoked_ms INTEGER
    );",
}];

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("device {0:?} already has an active token (revoke it first)")]
    Exists(String),
    #[error("no device {0:?}")]
    Unknown(String),
    #[error("device {0:?} is already revoked")]
    AlreadyRevoked(String),
    #[error("a device name is 1 to 128 letters, digits, '.', '-', '_' or ':'")]
    BadName,
    #[error("a bed is 1 to 64 characters")]
    BadBed,
    #[error(transparent)]
    Store(#[from] crate::serving::store::StoreError),
    #[error(transparent)]
    Audit(#[from] crate::serving::store::audit::AuditError),
    #[error("devices table {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

/// A registered device, as `holmes device list` shows it (never its token).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Device {
    pub(crate) name: String,
    /// The only bed this device may send for (None: any bed, e.g. a gateway).
    pub(crate) bed: Option<String>,
    pub(crate) created_ms: i64,
    pub(crate) revoked_ms: Option<i64>,
}

/// The `devices` table of one database.
pub(crate) struct DeviceDb {
    db: Db,
}

fn token_hash(token: &str) -> String {
    crate::core::hash::sha256_hex(token.as_bytes())
}

impl DeviceDb {
    /// The table in the ward's database `db`.
    pub(crate) fn new(db: Db) -> DeviceDb {
        DeviceDb { db }
    }

    fn err(&self, source: rusqlite::Error) -> DeviceError {
        DeviceError::Sqlite {
            path: self.db.path().to_owned(),
            source,
        }
    }

    /// Issues a token for a new device (or one whose token was revoked: its row is replaced).
    /// Returns the token; only its hash is stored.
    pub(crate) fn add(&self, name: &str, bed: Option<&str>) -> Result<String, DeviceError> {
        if name.is_empty()
            || name.len() > 128
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-:".contains(c))
        {
            return Err(DeviceError::BadName);
        }
        if bed.is_some_and(|b| b.is_empty() || b.len() > 64) {
            return Err(DeviceError::BadBed);
        }
        let mut raw = [0u8; 32];
        rand::rng().fill_bytes(&mut raw);
        let token: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let n = self
            .db
            .lock()
            .execute(
                "INSERT INTO devices (name, token_sha256, bed, created_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (name) DO UPDATE SET token_sha256 = ?2, bed = ?3, created_ms = ?4,
                     revoked_ms = NULL
                 WHERE revoked_ms IS NOT NULL",
                params![name, token_hash(&token), bed, now_ms()],
            )
            .map_err(|e| self.err(e))?;
        if n == 0 {
            return Err(DeviceError::Exists(name.to_owned()));
        }
        Ok(token)
    }

    /// Revokes a device's token.
    pub(crate) fn revoke(&self, name: &str) -> Result<(), DeviceError> {
        let revoked: Option<Option<i64>> = self
            .db
            .lock()
            .query_row(
                "SELECT revoked_ms FROM devices WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        match revoked {
            None => Err(DeviceError::Unknown(name.to_owned())),
            Some(Some(_)) => Err(DeviceError::AlreadyRevoked(name.to_owned())),
            Some(None) => {
                self.db
                    .lock()
                    .execute(
                        "UPDATE devices SET revoked_ms = ?2 WHERE name = ?1",
                        params![name, now_ms()],
                    )
                    .map_err(|e| self.err(e))?;
                Ok(())
            }
        }
    }

    /// Every device by name, with its token hash.
    fn rows(&self) -> Result<Vec<(String, Device)>, DeviceError> {
        let c = self.db.lock();
        let mut st = c
            .prepare(
                "SELECT token_sha256, name, bed, created_ms, revoked_ms FROM devices ORDER BY name",
            )
            .map_err(|e| self.err(e))?;
        st.query_map([], |r| {
            Ok((
                r.get(0)?,
                Device {
                    name: r.get(1)?,
                    bed: r.get(2)?,
                    created_ms: r.get(3)?,
                    revoked_ms: r.get(4)?,
                },
            ))
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.err(e))
    }

    /// Every device, by name.
    pub(crate) fn list(&self) -> Result<Vec<Device>, DeviceError> {
        Ok(self.rows()?.into_iter().map(|(_, d)| d).collect())
    }
}

/// Why a hello's token was not accepted (logged; the monitor only hears "token not
/// accepted").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    UnknownToken,
    Revoked,
    /// The token belongs to another device name than the hello's.
    OtherDevice {
        registered: String,
    },
    /// The device is bound to another bed.
    OtherBed,
}

impl Refusal {
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Refusal::UnknownToken => "unknown token",
            Refusal::Revoked => "device revoked",
            Refusal::OtherDevice { .. } => "token issued to another device",
            Refusal::OtherBed => "device bound to another bed",
        }
    }
}

struct Known {
    /// Token hash to device (revoked ones too, to say so in the log).
    by_hash: HashMap<String, Device>,
    /// When the read behind this snapshot began.
    read_at: Instant,
}

struct AuthInner {
    required: bool,
    refresh: Duration,
    /// A gateway's cap of beds (`auth.max_beds_per_gateway`).
    gateway_beds: usize,
    db: Arc<Mutex<DeviceDb>>,
    known: RwLock<Known>,
    /// Held while the table is re-read, so concurrent misses share one read.
    reading: tokio::sync::Mutex<()>,
}

/// The daemon's check of hello tokens. Cheap to clone.
#[derive(Clone)]
pub(crate) struct DeviceAuth {
    inner: Arc<AuthInner>,
}

impl DeviceAuth {
    /// Reads the devices table of `db`. Blocking.
    pub(crate) fn open(db: &Db, cfg: &AuthConfig) -> Result<DeviceAuth, DeviceError> {
        let read_at = Instant::now();
        let db = DeviceDb::new(db.clone());
        let by_hash = db.rows()?.into_iter().collect();
        Ok(DeviceAuth {
            inner: Arc::new(AuthInner {
                required: cfg.require_device_tokens,
                refresh: Duration::from_secs_f64(cfg.devices_refresh_secs),
                gateway_beds: cfg.max_beds_per_gateway,
                db: Arc::new(Mutex::new(db)),
                known: RwLock::new(Known { by_hash, read_at }),
                reading: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// Re-reads the table on the blocking pool, unless a read that began at or after `since`
    /// has already finished (concurrent callers share one read). Returns the active device
    /// names.
    async fn reload(&self, since: Instant) -> Result<HashSet<String>, DeviceError> {
        let _reading = self.inner.reading.lock().await;
        let active = |k: &HashMap<String, Device>| {
            k.values()
                .filter(|d| d.revoked_ms.is_none())
                .map(|d| d.name.clone())
                .collect()
        };
        {
            let k = self.inner.known.read().expect("devices lock");
            if k.read_at >= since {
                return Ok(active(&k.by_hash));
            }
        }
        let read_at = Instant::now();
        let db = self.inner.db.clone();
        let rows = tokio::task::spawn_blocking(move || db.lock().expect("devices lock").rows())
            .await
            .expect("reading the devices table does not panic")?;
        let by_hash: HashMap<String, Device> = rows.into_iter().collect();
        let names = active(&by_hash);
        *self.inner.known.write().expect("devices lock") = Known { by_hash, read_at };
        Ok(names)
    }

    fn cached(&self, hash: &str) -> Option<Device> {
        let k = self.inner.known.read().expect("devices lock");
        k.by_hash.get(hash).cloned()
    }

    /// The beds bound to active devices, as last read.
    pub(crate) fn bound_beds(&self) -> HashSet<String> {
        let k = self.inner.known.read().expect("devices lock");
        k.by_hash
            .values()
            .filter(|d| d.revoked_ms.is_none())
            .filter_map(|d| d.bed.clone())
            .collect()
    }

    /// Checks a hello: its token must belong to an active device of that name, bound to no
    /// bed or to this one. Says what the registration means for the ward: a bound device's
    /// bed is reserved; a gateway (bound to no bed) has a cap of beds. Always Ok, claiming
    /// nothing, when `auth.require_device_tokens` is off.
    pub(crate) async fn admit(
        &self,
        device: &str,
        bed: &str,
        token: &str,
    ) -> Result<Claim, Refusal> {
        if !self.inner.required {
            return Ok(Claim::default());
        }
        let hash = token_hash(token);
        let asked = Instant::now();
        let mut found = self.cached(&hash);
        if found.is_none() {
            // Perhaps issued since the last read: read again (shared with concurrent misses).
            if let Err(e) = self.reload(asked).await {
                tracing::error!(error = %e, "Cannot read the devices table");
            }
            found = self.cached(&hash);
        }
        let d = found.ok_or(Refusal::UnknownToken)?;
        if d.revoked_ms.is_some() {
            return Err(Refusal::Revoked);
        }
        if d.name != device {
            return Err(Refusal::OtherDevice { registered: d.name });
        }
        match d.bed {
            Some(b) if b != bed => Err(Refusal::OtherBed),
            Some(_) => Ok(Claim {
                bound: true,
                max_beds: None,
                configured: false,
            }),
            None => Ok(Claim {
                bound: false,
                max_beds: Some(self.inner.gateway_beds),
                configured: false,
            }),
        }
    }

    /// Tells the ward which beds are bound to registered devices (their places are reserved),
    /// then re-reads the table every `auth.devices_refresh_secs`, telling it again and closing
    /// (4001) the connections of devices that are no longer active. Nothing to do when tokens
    /// are not required (bindings are then not enforced either).
    pub(crate) fn spawn_watch(
        &self,
        ward: Ward,
        shutdown: CancellationToken,
        tracker: &TaskTracker,
    ) {
        if !self.inner.required {
            return;
        }
        ward.set_bound_beds(self.bound_beds());
        let auth = self.clone();
        tracker.spawn(async move {
            let mut tick = tokio::time::interval(auth.inner.refresh);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tick.tick() => {}
                }
                match auth.reload(Instant::now()).await {
                    Ok(active) => {
                        ward.set_bound_beds(auth.bound_beds());
                        for (device, n) in ward.kick_devices(
                            |d| !active.contains(d),
                            close::UNAUTHORIZED,
                            "device token revoked",
                        ) {
                            tracing::warn!(%device, connections = n, "Revoked device disconnected");
                        }
                    }
                    Err(e) => tracing::error!(error = %e, "Cannot read the devices table"),
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_stored_hashed_and_revocable() {
        let dir = tempfile::tempdir().unwrap();
        let db = DeviceDb::new(
            Db::open(
                &dir.path().join("d.db"),
                &crate::serving::ingest::TEST_SCHEMA,
            )
            .unwrap(),
        );
        assert!(matches!(
            db.add("bad name", None),
            Err(DeviceError::BadName)
        ));
        let t = db.add("mon-17", Some("icu-3")).unwrap();
        assert_eq!(t.len(), 64);
        assert!(matches!(
            db.add("mon-17", None),
            Err(DeviceError::Exists(_))
        ));
        let stored: String = db
            .db
            .lock()
            .query_row("SELECT token_sha256 FROM devices", [], |r| r.get(0))
            .unwrap();
        assert_eq!(stored, token_hash(&t));
        assert_ne!(stored, t);
        db.revoke("mon-17").unwrap();
        assert!(matches!(
            db.revoke("mon-17"),
            Err(DeviceError::AlreadyRevoked(_))
        ));
        assert!(matches!(db.revoke("nope"), Err(DeviceError::Unknown(_))));
        // A revoked name may be issued again, with a new token.
        let t2 = db.add("mon-17", None).unwrap();
        assert_ne!(t, t2);
        let l = db.list().unwrap();
        assert_eq!(
            (l.len(), l[0].revoked_ms, l[0].bed.clone()),
            (1, None, None)
        );
    }

    #[tokio::test]
    async fn hellos_are_checked_against_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.db");
        let cfg = AuthConfig {
            require_device_tokens: true,
            devices_refresh_secs: 1.0,
            max_beds_per_gateway: 7,
        };
        let db = DeviceDb::new(Db::open(&path, &crate::serving::ingest::TEST_SCHEMA).unwrap());
        let bound = db.add("mon-1", Some("icu-1")).unwrap();
        let auth = DeviceAuth::open(
            &Db::open(&path, &crate::serving::ingest::TEST_SCHEMA).unwrap(),
            &cfg,
        )
        .unwrap();
        let bed = Claim {
            bound: true,
            max_beds: None,
            configured: false,
        };
        assert_eq!(auth.admit("mon-1", "icu-1", &bound).await, Ok(bed));
        assert_eq!(
            auth.admit("mon-1", "icu-2", &bound).await,
            Err(Refusal::OtherBed)
        );
        assert_eq!(
            auth.admit("mon-9", "icu-1", &bound).await,
            Err(Refusal::OtherDevice {
                registered: "mon-1".into()
            })
        );
        assert_eq!(
            auth.admit("mon-1", "icu-1", "guess").await,
            Err(Refusal::UnknownToken)
        );
        // Issued after the daemon read the table: a miss reads it again.
        let gw = db.add("gateway", None).unwrap();
        let gateway = Claim {
            bound: false,
            max_beds: Some(7),
            configured: false,
        };
        assert_eq!(auth.admit("gateway", "any-bed", &gw).await, Ok(gateway));
        let bound_beds: Vec<String> = auth.bound_beds().into_iter().collect();
        assert_eq!(bound_beds, ["icu-1"]);
        db.revoke("gateway").unwrap();
        auth.reload(Instant::now()).await.unwrap();
        assert_eq!(
            auth.admit("gateway", "any-bed", &gw).await,
            Err(Refusal::Revoked)
        );
        let open = DeviceAuth::open(
            &Db::open(&path, &crate::serving::ingest::TEST_SCHEMA).unwrap(),
            &AuthConfig {
                require_device_tokens: false,
                ..cfg
            },
        )
        .unwrap();
        assert_eq!(open.admit("x", "y", "z").await, Ok(Claim::default()));
    }
}
