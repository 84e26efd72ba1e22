//! `holmes validate`: checks a config, the zoo and the database path without starting
//! anything — no listener, no writer, no workers — so a service manager can refuse to start
//! (`ExecStartPre=`) and an engineer can check an edit before a restart.
//!
//! Checks, each problem reported on one line: the config parses (unknown keys and bad values
//! named with their line) and passes [`Config::validate`]; every model folder in the zoo
//! loads and passes its smoke check (manifest, checksum, weights, a forward pass); every
//! configured ensemble member is one of them; the beat counter the config serves, the TLS
//! certificate and key of `[server.tls]` and, with `[hl7]`, `[fhir]` or `[sdc]` on, its `tls_ca`
//! (and `[sdc]`'s certificate) load (the daemon refuses to start on any that does not) and `[fhir]`'s token file reads; the database's folder is writable or can be
//! created, and an existing database is writable and not newer than this build.
//!
//! Warnings, which do not fail it: the risk alarm rule the configured members would start on
//! is not one validated for them (the daemon serves a derived rule or the fallback, marked
//! not validated), or the zoo's `alarm_rules.json` does not read.

use std::path::{Path, PathBuf};

use crate::composer::rule::{basis, for_ensemble};
use crate::config::{Config, DEFAULT_TOML};
use crate::serving::engine::counter::served_counter;
use crate::serving::engine::ensemble::Ensemble;
use crate::signal::beats::BEATS_FILE;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ValidateError {
    #[error("validation failed: {0} problem(s)")]
    Problems(usize),
}

/// What the checks found: problems (each one line), warnings (each one line; they do not
/// fail the check) and, when there are no problems, a summary.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) problems: Vec<String>,
    pub(crate) warnings: Vec<String>,
    pub(crate) summary: Vec<String>,
}

/// Runs the checks, prints one line per warning and problem (stderr) or the summary (stdout).
pub(crate) fn main(config: Option<&Path>, models: Option<&Path>) -> Result<(), ValidateError> {
    let report = check(config, models);
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    for p in &report.problems {
        eprintln!("error: {p}");
    }
    if !report.problems.is_empty() {
        return Err(ValidateError::Problems(report.problems.len()));
    }
    for line in &report.summary {
        println!("{line}");
    }
    Ok(())
}

/// The checks, without printing.
pub(crate) fn check(config: Option<&Path>, models: Option<&Path>) -> Report {
    let mut r = Report::default();
    let (text, origin) = match config {
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) => (t, p.display().to_string()),
            Err(e) => {
                r.problems.push(format!("{}: {e}", p.display()));
                return r;
            }
        },
        None => (DEFAULT_TOML.to_owned(), "embedded defaults".to_owned()),
    };
    let mut cfg: Config = match toml::from_str(&text) {
        Ok(c) => c,
        Err(e) => {
            let at = e
                .span()
                .map(|s| format!(" line {}:", text[..s.start].lines().count().max(1)))
                .unwrap_or_default();
            let msg = e.message().replace('\n', " ");
            r.problems.push(format!("{origin}:{at} {}", msg.trim()));
            return r;
        }
    };
    let valid = cfg.validate();
    if let Err(reason) = &valid {
        r.problems.push(format!("{origin}: {reason}"));
    }
    if let Some(m) = models {
        cfg.ensemble.models_dir = m.to_owned();
    }
    r.summary.push(format!("config: {origin} is valid"));
    let members_load = check_zoo(&cfg, &mut r);
    // The alarm is judged on a config the daemon would start with.
    check_alarm(&cfg, members_load && valid.is_ok(), &mut r);
    check_tls(&cfg, &mut r);
    check_hl7(&cfg, &mut r);
    check_fhir(&cfg, &mut r);
    check_sdc(&cfg, &mut r);
    check_database(&cfg.storage.db, &mut r);
    r
}

/// Every model folder loads and passes its smoke check; every member is one of them. Returns
/// whether every member loads.
fn check_zoo(cfg: &Config, r: &mut Report) -> bool {
    let dir = &cfg.ensemble.models_dir;
    let dirs = match crate::zoo::model_dirs(dir) {
        Ok(d) => d,
        Err(e) => {
            r.problems.push(format!("ensemble.models_dir: {e}"));
            return false;
        }
    };
    let device = Default::default();
    let mut good = Vec::new();
    let mut broken = Vec::new();
    for d in &dirs {
        let name = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match crate::zoo::ZooModel::<burn::backend::Flex>::load(d, &device) {
            Ok(_) => good.push(name),
            Err(e) => {
                r.problems.push(format!("model {name}: {e}"));
                broken.push(name);
            }
        }
    }
    let mut members_load = true;
    for m in &cfg.ensemble.members {
        members_load &= good.contains(m);
        if broken.contains(m) {
            r.problems.push(format!(
                "ensemble.members: {m} is in {} but does not load (see above)",
                dir.display()
            ));
        } else if !good.contains(m) {
            r.problems.push(format!(
                "ensemble.members: {m} is not in the zoo {}",
                dir.display()
            ));
        }
    }
    r.summary.push(format!(
        "zoo: {} model(s) in {} load and pass their smoke check; ensemble members: {}",
        good.len(),
        dir.display(),
        cfg.ensemble.members.join(", ")
    ));
    members_load
}

/// The beat counter the config serves loads; the risk alarm rule the configured members
/// (`members_load`: they all do, and the config is valid) would start on, pooled and counted
/// as served, is one validated for them, else a warning says what serves instead.
fn check_alarm(cfg: &Config, members_load: bool, r: &mut Report) {
    let dir = &cfg.ensemble.models_dir;
    let counter = match served_counter(cfg) {
        Ok(c) => c,
        Err(e) => {
            r.problems
                .push(format!("beat counter: {e} (the daemon would not start)"));
            return;
        }
    };
    r.summary.push(match &counter {
        _ if !cfg.ensemble.count_beats => "beat counter: off (ensemble.count_beats)".to_owned(),
        None => format!(
            "beat counter: none in {} (no {BEATS_FILE}); scores come from the members alone",
            dir.display()
        ),
        Some(c) => format!(
            "beat counter: {BEATS_FILE} (a beat called ventricular at {}, bSQI gate {})",
            c.file.rule.call_at, c.file.rule.min_bsqi
        ),
    });
    if !members_load {
        return;
    }
    let ens = match Ensemble::load(dir, &cfg.ensemble.members, cfg.ward.window_secs) {
        Ok(e) => e.with_beats(counter).pooled_as_served(
            dir,
            cfg.engine.combine,
            cfg.ward.hop_secs,
            cfg.ward.window_secs,
        ),
        Err(e) => {
            r.problems.push(format!("ensemble.members: {e}"));
            return;
        }
    };
    match for_ensemble(cfg, &ens) {
        Ok(s) if s.validated => r.summary.push(format!(
            "risk alarm of the configured members: {}; {}",
            s.rule.words(),
            basis(&s)
        )),
        Ok(s) => r.warnings.push(format!(
            "risk alarm of the configured members: {}; {}; `holmes zoo rules` lists the ensembles validated for this zoo{}",
            s.rule.words(),
            basis(&s),
            if cfg.composer.enabled {
                " (the composer may serve another ensemble instead: a plan stored for this ward, or a validated one that fits)"
            } else {
                ""
            }
        )),
        Err(e) => r.warnings.push(format!(
            "the zoo's alarm rules do not read ({e}): risk alarms would start on the config's fallback, not validated"
        )),
    }
}

/// The SDC consumer, where it is on: with `tls_ca`, the CA and Holmes's certificate load
/// (the daemon refuses to start otherwise).
fn check_sdc(cfg: &Config, r: &mut Report) {
    let s = &cfg.sdc;
    if !s.enabled {
        return;
    }
    let tls = match (&s.tls_ca, s.identity(cfg.server.tls.as_ref())) {
        (Some(ca), Some(me)) => match super::parts::sdc_tls(ca.clone(), me) {
            Ok(_) => " over mutual TLS",
            Err(e) => {
                r.problems
                    .push(format!("sdc: {e} (the daemon would not start)"));
                return;
            }
        },
        _ => "",
    };
    r.summary.push(format!(
        "sdc: {} device(s), reports taken at {}{tls}",
        s.devices.len(),
        s.notify_listen
    ));
}

/// `[server.tls]`'s certificate and key read and make a server configuration.
fn check_tls(cfg: &Config, r: &mut Report) {
    let Some(tls) = &cfg.server.tls else {
        return;
    };
    match crate::http::tls::server_config(tls) {
        Ok(_) => r
            .summary
            .push(format!("tls: HTTPS and wss:// with {}", tls.cert.display())),
        Err(e) => r
            .problems
            .push(format!("server.tls: {e} (the daemon would not start)")),
    }
}

/// The HL7 link, where it is on: its CA file loads (the daemon refuses to start otherwise).
/// The `[hl7]` values themselves are checked with the rest of the config.
fn check_hl7(cfg: &Config, r: &mut Report) {
    let h = &cfg.hl7;
    if !h.enabled {
        return;
    }
    let tls = match &h.tls_ca {
        Some(ca) => match crate::outbound::client_config("hl7", ca) {
            Ok(_) => " over TLS",
            Err(e) => {
                r.problems.push(format!("{e} (the daemon would not start)"));
                return;
            }
        },
        None => "",
    };
    r.summary.push(format!(
        "hl7: PCD-01 every {} s and PCD-04 alarms to {}{tls}",
        h.cadence_secs, h.receiver
    ));
}

/// The FHIR link, where it is on: its CA file loads and its token file reads (the daemon
/// refuses to start without the CA; without the token it starts and the link shows the
/// error). The `[fhir]` values themselves are checked with the rest of the config.
fn check_fhir(cfg: &Config, r: &mut Report) {
    let f = &cfg.fhir;
    if !f.enabled {
        return;
    }
    let tls = match &f.tls_ca {
        Some(ca) => match crate::outbound::client_config("fhir", ca) {
            Ok(_) => " over TLS",
            Err(e) => {
                r.problems.push(format!("{e} (the daemon would not start)"));
                return;
            }
        },
        None => "",
    };
    if !f.token_file.is_empty()
        && let Err(e) = std::fs::read_to_string(&f.token_file)
    {
        r.problems.push(format!(
            "fhir.token_file {}: {e} (the link could not authenticate)",
            f.token_file
        ));
        return;
    }
    let token = if f.token_file.is_empty() {
        ", no bearer token"
    } else {
        ", with a bearer token"
    };
    r.summary.push(format!(
        "fhir: Observations every {} s and alarm events to {}{tls}{token}",
        f.cadence_secs, f.base_url
    ));
}

/// The database is writable, or its folder is (or can be created); an existing database's
/// schema is not newer than this build.
fn check_database(db: &Path, r: &mut Report) {
    let parent = match db.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    // The nearest folder that exists: the database's own, or the ancestor it will be made in.
    let mut existing = parent.clone();
    while !existing.is_dir() {
        match existing.parent() {
            Some(p) if !p.as_os_str().is_empty() => existing = p.to_owned(),
            _ => {
                existing = PathBuf::from(".");
                break;
            }
        }
    }
    // SQLite writes the -wal and -shm files beside the database: the folder must be writable.
    if let Err(e) = tempfile::Builder::new()
        .prefix(".holmes-validate")
        .tempfile_in(&existing)
    {
        let what = if existing == parent {
            "is not writable"
        } else {
            "cannot be created"
        };
        r.problems.push(format!(
            "storage.db: the folder {} {what}: {e}",
            parent.display()
        ));
        return;
    }
    if db.is_dir() {
        r.problems
            .push(format!("storage.db: {} is a folder", db.display()));
        return;
    }
    if !db.exists() {
        r.summary.push(format!(
            "database: {} will be created (its folder is writable)",
            db.display()
        ));
        return;
    }
    if let Err(e) = std::fs::OpenOptions::new().write(true).open(db) {
        r.problems
            .push(format!("storage.db: {} is not writable: {e}", db.display()));
        return;
    }
    let version = crate::serving::store::open_read_only(db)
        .and_then(|c| c.pragma_query_value(None, "user_version", |row| row.get::<_, i64>(0)));
    match version {
        Ok(v) if v > super::schema::WARD.version() => r.problems.push(format!(
            "storage.db: {} has schema version {v}, newer than this build knows ({})",
            db.display(),
            super::schema::WARD.version()
        )),
        Ok(v) => r.summary.push(format!(
            "database: {} is writable (schema version {v} of {})",
            db.display(),
            super::schema::WARD.version()
        )),
        Err(e) => r.problems.push(format!(
            "storage.db: {} is not a readable SQLite database: {e}",
            db.display()
        )),
    }
}
