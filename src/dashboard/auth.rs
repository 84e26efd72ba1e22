//! Users and sessions of the dashboard: passwords stored as argon2 hashes, sessions as the
//! SHA-256 of a random token that lives only in the browser's cookie (`HttpOnly`, `Secure`,
//! `SameSite=Strict`). Nurses acknowledge and silence alarms; engineers also see zoo and plan
//! controls; admins manage users. The first user comes from `holmes user add`.

use std::path::PathBuf;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use rand::RngCore;
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::core::time::now_ms;
use crate::serving::store::{Db, Migration};

/// The users' and sessions' tables (`serving::store::schema`).
pub(crate) const MIGRATIONS: &[Migration] = &[Migration {
    version: 6,
    sql: "CREATE TABLE users (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL,
        password_hash TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE sessions (
        token_sha256 TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL
    );",
}];

/// The session cookie's name.
pub(crate) const COOKIE: &str = "holmes_session";

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("user {0:?} already exists")]
    Exists(String),
    #[error("a user name is 1 to 64 letters, digits, '.', '-' or '_'")]
    BadName,
    #[error("a password has at least 8 characters")]
    WeakPassword,
    #[error("unknown role {0:?} (nurse, engineer or admin)")]
    BadRole(String),
    #[error("password hashing: {0}")]
    Hash(String),
    #[error(transparent)]
    Store(#[from] crate::serving::store::StoreError),
    #[error("user database {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Nurse,
    Engineer,
    Admin,
}

impl Role {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::Nurse => "nurse",
            Role::Engineer => "engineer",
            Role::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = AuthError;
    fn from_str(s: &str) -> Result<Role, AuthError> {
        match s {
            "nurse" => Ok(Role::Nurse),
            "engineer" => Ok(Role::Engineer),
            "admin" => Ok(Role::Admin),
            other => Err(AuthError::BadRole(other.to_owned())),
        }
    }
}

/// A signed-in user.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) role: Role,
}

/// The users and sessions tables of one database.
pub struct Users {
    db: Db,
}

/// A user's stored role and password hash, or (unknown name) no role and a dummy hash.
pub(crate) struct Credentials {
    name: String,
    role: Option<String>,
    hash: String,
}

impl Credentials {
    /// The user, if `password` matches: one argon2 verification (slow by design), the same
    /// for an unknown name, so how long a refusal takes says nothing of who exists.
    pub(crate) fn check(self, password: &str) -> Result<Option<User>, AuthError> {
        let parsed = PasswordHash::new(&self.hash).map_err(|e| AuthError::Hash(e.to_string()))?;
        let matches = Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        match self.role {
            Some(role) if matches => Ok(Some(User {
                name: self.name,
                role: role.parse()?,
            })),
            _ => Ok(None),
        }
    }
}

impl Users {
    /// The table in the database `db` (the daemon's shared connection, or one the command
    /// line opened).
    pub fn new(db: Db) -> Result<Users, AuthError> {
        // Made now, so the first unknown name does not take twice as long as the rest.
        dummy_hash()?;
        Ok(Users { db })
    }

    fn err(&self, source: rusqlite::Error) -> AuthError {
        AuthError::Sqlite {
            path: self.db.path().to_owned(),
            source,
        }
    }

    /// Adds a user (refusing an existing name unless `replace`).
    pub fn add(
        &self,
        name: &str,
        role: Role,
        password: &str,
        replace: bool,
    ) -> Result<(), AuthError> {
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return Err(AuthError::BadName);
        }
        if password.chars().count() < 8 {
            return Err(AuthError::WeakPassword);
        }
        let hash = hash_password(password)?;
        let sql = if replace {
            "INSERT OR REPLACE INTO users (name, role, password_hash, created_ms) VALUES (?1, ?2, ?3, ?4)"
        } else {
            "INSERT INTO users (name, role, password_hash, created_ms) VALUES (?1, ?2, ?3, ?4)"
        };
        match self
            .db
            .lock()
            .execute(sql, params![name, role.as_str(), hash, now_ms()])
        {
            Ok(_) => Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                Err(AuthError::Exists(name.to_owned()))
            }
            Err(e) => Err(self.err(e)),
        }
    }

    /// What a sign-in is checked against, read from the database: quick, so a caller can
    /// hold a lock on the users for this and release it for the slow [`Credentials::check`].
    pub(crate) fn credentials(&self, name: &str) -> Result<Credentials, AuthError> {
        let row: Option<(String, String)> = self
            .db
            .lock()
            .query_row(
                "SELECT role, password_hash FROM users WHERE name = ?1",
                params![name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        // An unknown name costs one argon2 verification too, against a dummy hash made with
        // the same parameters: how long a refusal takes says nothing of who exists.
        let (role, hash) = match row {
            Some((role, hash)) => (Some(role), hash),
            None => (None, dummy_hash()?.to_owned()),
        };
        Ok(Credentials {
            name: name.to_owned(),
            role,
            hash,
        })
    }

    /// Starts a session; returns the token for the cookie.
    pub(crate) fn start_session(&self, user: &str, hours: f64) -> Result<String, AuthError> {
        let mut raw = [0u8; 32];
        rand::rng().fill_bytes(&mut raw);
        let token: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let now = now_ms();
        self.db.lock()
            .execute(
                "INSERT INTO sessions (token_sha256, user, created_ms, expires_ms) VALUES (?1, ?2, ?3, ?4)",
                params![crate::core::hash::sha256_hex(token.as_bytes()), user, now, now + (hours * 3.6e6) as i64],
            )
            .map_err(|e| self.err(e))?;
        Ok(token)
    }

    /// The user of a live session.
    pub(crate) fn session(&self, token: &str) -> Result<Option<User>, AuthError> {
        let row: Option<(String, String)> = self
            .db
            .lock()
            .query_row(
                "SELECT u.name, u.role FROM sessions s JOIN users u ON u.name = s.user
                 WHERE s.token_sha256 = ?1 AND s.expires_ms > ?2",
                params![crate::core::hash::sha256_hex(token.as_bytes()), now_ms()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        row.map(|(name, role)| {
            Ok(User {
                name,
                role: role.parse()?,
            })
        })
        .transpose()
    }

    pub(crate) fn end_session(&self, token: &str) -> Result<(), AuthError> {
        self.db
            .lock()
            .execute(
                "DELETE FROM sessions WHERE token_sha256 = ?1 OR expires_ms <= ?2",
                params![crate::core::hash::sha256_hex(token.as_bytes()), now_ms()],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }
}

/// An argon2 hash of `password` with a fresh random salt (the crate's default parameters).
fn hash_password(password: &str) -> Result<String, AuthError> {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| AuthError::Hash(e.to_string()))?;
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| AuthError::Hash(e.to_string()))?
        .to_string())
}

/// The hash an unknown user's password is checked against: made once, of a random password
/// nobody knows, with the parameters of real users' hashes.
fn dummy_hash() -> Result<&'static str, AuthError> {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    if let Some(h) = DUMMY.get() {
        return Ok(h);
    }
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    let secret: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let h = hash_password(&secret)?;
    Ok(DUMMY.get_or_init(|| h))
}

/// The session token in a `Cookie` header, if any.
pub(crate) fn token_from_cookies(header: &str) -> Option<&str> {
    header
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hashed_and_sessions_expire() {
        let dir = tempfile::tempdir().unwrap();
        let u = Users::new(
            Db::open(
                &dir.path().join("u.db"),
                &crate::serving::store::Schema::new(&[
                    crate::serving::store::MIGRATIONS,
                    super::MIGRATIONS,
                ]),
            )
            .unwrap(),
        )
        .unwrap();
        assert!(matches!(
            u.add("nina", Role::Nurse, "short", false),
            Err(AuthError::WeakPassword)
        ));
        assert!(matches!(
            u.add("ni na", Role::Nurse, "long enough", false),
            Err(AuthError::BadName)
        ));
        u.add("nina", Role::Nurse, "correct horse", false).unwrap();
        assert!(matches!(
            u.add("nina", Role::Nurse, "correct horse", false),
            Err(AuthError::Exists(_))
        ));
        let stored: String =
            u.db.lock()
                .query_row("SELECT password_hash FROM users", [], |r| r.get(0))
                .unwrap();
        assert!(stored.starts_with("$argon2") && !stored.contains("correct horse"));
        assert_eq!(
            u.credentials("nina").unwrap().check("wrong horse").unwrap(),
            None
        );
        let user = u
            .credentials("nina")
            .unwrap()
            .check("correct horse")
            .unwrap()
            .unwrap();
        assert_eq!(user.role, Role::Nurse);
        let token = u.start_session("nina", 1.0).unwrap();
        assert_eq!(u.session(&token).unwrap(), Some(user));
        assert_eq!(u.session("forged").unwrap(), None);
        let old = u.start_session("nina", -1.0).unwrap();
        assert_eq!(u.session(&old).unwrap(), None, "expired");
        u.end_session(&token).unwrap();
        assert_eq!(u.session(&token).unwrap(), None);
        assert_eq!(
            token_from_cookies("a=1; holmes_session=abc; b=2"),
            Some("abc")
        );
    }
}
