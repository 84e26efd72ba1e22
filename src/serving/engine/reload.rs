//! Zoo lifecycle while serving: `models/` is watched; when a model folder is added, changed or
//! removed, the change is validated (loaded and warmed on this thread) and, for ensemble
//! members, swapped into the engine atomically (workers switch between batches, so windows in
//! flight finish on the old version). A model that fails validation is reported and the old
//! version keeps serving; a removed member keeps serving from memory until the ensemble changes.
//! The zoo's alarm rules file is watched too (a rule saved by `holmes evaluate --save-rule`
//! while the daemon runs). Every change bumps a zoo generation that the composer (which
//! prefers validated ensembles) and the dashboard (which serves their rules) watch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use burn::backend::Flex;
use notify::{RecursiveMode, Watcher};
use serde::Serialize;
use serde_json::json;
use tokio::sync::watch;

use super::Engine;
use crate::core::event::{Event, EventKind, Origin};
use crate::core::time::now_ms;
use crate::serving::store::StoreHandle;
use crate::serving::store::audit::{Action, AuditLog};
use crate::zoo::{self, MANIFEST_FILE, WEIGHTS_FILE, ZooModel};

/// What the zoo looks like to the server, for `GET /api/models`.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ZooStatus {
    /// Valid models in the folder: name -> version.
    pub(crate) available: BTreeMap<String, u32>,
    /// Refused folders and failed reloads, newest last (bounded).
    pub(crate) failures: Vec<ZooFailure>,
    /// Folders in the zoo now that do not load, by name, with the reason: a model folder
    /// stays here until it loads or is removed (`/api/health` lists each as a problem).
    pub(crate) refused: BTreeMap<String, String>,
    /// Members removed from the folder that keep serving from memory.
    pub(crate) serving_removed: Vec<String>,
    /// Bumped on every change; the composer recomposes when it moves.
    pub(crate) generation: u64,
    /// Why the zoo's alarm rules file does not read, when it does not (the rule serving
    /// stays; `/api/health` lists it as a problem).
    pub(crate) rules_error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ZooFailure {
    pub(crate) at_ms: i64,
    pub(crate) error: String,
}

/// Fingerprint of a model folder: the bytes of its manifest and weights (a missing file reads
/// as empty: a folder without its manifest is a folder that does not load, not no folder).
fn fingerprint(dir: &Path) -> String {
    let mut bytes = std::fs::read(dir.join(MANIFEST_FILE)).unwrap_or_default();
    bytes.push(0);
    bytes.extend(std::fs::read(dir.join(WEIGHTS_FILE)).unwrap_or_default());
    zoo::sha256_hex(&bytes)
}

/// Fingerprint of the zoo's alarm rules file (an absent file reads as empty).
fn rules_fingerprint(dir: &Path) -> String {
    zoo::sha256_hex(&std::fs::read(dir.join(crate::alarm::rules::RULES_FILE)).unwrap_or_default())
}

/// The model folders in `dir` by name, with their fingerprints.
fn folders(dir: &Path) -> BTreeMap<String, String> {
    zoo::model_dirs(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|d| {
            let name = d.file_name()?.to_string_lossy().into_owned();
            Some((name, fingerprint(&d)))
        })
        .collect()
}

const MAX_FAILURES: usize = 50;

/// Watches `dir` and keeps `engine` and the shared status up to date. The returned watcher
/// must be kept alive; the thread stops when it is dropped.
pub(crate) fn watch_zoo(
    dir: PathBuf,
    engine: Engine,
    store: StoreHandle,
    audit: AuditLog,
    status: Arc<Mutex<ZooStatus>>,
    generation: watch::Sender<u64>,
) -> notify::Result<notify::RecommendedWatcher> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        // Reading the zoo (our own scans included) raises open and close-after-read events;
        // reacting to them would rescan forever. A finished write still counts.
        if let Ok(e) = &ev
            && is_read_only(&e.kind)
        {
            return;
        }
        let _ = tx.send(ev);
    })?;
    watcher.watch(&dir, RecursiveMode::Recursive)?;
    let mut seen = Seen {
        folders: folders(&dir),
        rules: rules_fingerprint(&dir),
    };
    let sinks = Sinks { store, audit };
    scan(&dir, &engine, &sinks, &status, &generation, &mut seen, true);
    std::thread::Builder::new()
        .name("holmes-zoo-watch".into())
        .spawn(move || {
            while rx.recv().is_ok() {
                // Debounce: a copy is many events; act once it settles.
                while rx.recv_timeout(Duration::from_millis(300)).is_ok() {}
                scan(
                    &dir,
                    &engine,
                    &sinks,
                    &status,
                    &generation,
                    &mut seen,
                    false,
                );
            }
        })
        .map_err(|e| notify::Error::generic(&e.to_string()))?;
    Ok(watcher)
}

/// An event that changes nothing on disk: a file opened, read, or closed after reading.
fn is_read_only(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    matches!(kind, notify::EventKind::Access(a) if !matches!(a, AccessKind::Close(AccessMode::Write)))
}

/// What the last scan saw: each model folder's fingerprint, and the rules file's.
struct Seen {
    folders: BTreeMap<String, String>,
    rules: String,
}

/// Where the watcher reports changes: technical events (the `zoo` bed) and the audit log.
struct Sinks {
    store: StoreHandle,
    audit: AuditLog,
}

fn scan(
    dir: &Path,
    engine: &Engine,
    store: &Sinks,
    status: &Mutex<ZooStatus>,
    generation: &watch::Sender<u64>,
    seen: &mut Seen,
    initial: bool,
) {
    let members: Vec<(String, u32)> = engine.members();
    let now = folders(dir);
    let mut changed = false;
    let rules = rules_fingerprint(dir);
    let rules_error = crate::alarm::rules::RuleBook::load(dir)
        .err()
        .map(|e| e.to_string());
    if let Some(e) = &rules_error {
        tracing::error!(error = %e, "The zoo's alarm rules do not read");
    }
    // A rules file that does not read changes nothing that serves (the status says why); the
    // change counts once it reads again.
    if rules != seen.rules && !initial && rules_error.is_none() {
        changed = true;
        tracing::info!("The zoo's alarm rules changed");
        event(
            store,
            crate::alarm::rules::RULES_FILE,
            "rules_changed",
            json!({}),
        );
    }
    seen.rules = rules;
    let mut available = BTreeMap::new();
    let mut refused = BTreeMap::new();
    let mut failures = Vec::new();
    for (name, fp) in &now {
        let folder = dir.join(name);
        let is_new = seen.folders.get(name) != Some(fp);
        match ZooModel::<Flex>::load(&folder, &Default::default()) {
            Ok(m) => {
                available.insert(name.clone(), m.manifest.version);
                if is_new && !initial {
                    changed = true;
                    if members.iter().any(|(n, _)| n == name) {
                        let (device, cap) = engine
                            .placement_of(name)
                            .unwrap_or_else(|| ("cpu".into(), 0));
                        engine.reload(
                            name,
                            m.manifest.version,
                            super::accelerator::zoo_factory(&folder, &device, cap),
                        );
                        tracing::info!(model = %name, version = m.manifest.version, "Ensemble member reloaded");
                    } else {
                        tracing::info!(model = %name, version = m.manifest.version, "Model added to the zoo");
                    }
                    event(
                        store,
                        name,
                        "loaded",
                        json!({"version": m.manifest.version}),
                    );
                }
            }
            Err(e) => {
                refused.insert(name.clone(), e.to_string());
                if is_new || initial {
                    tracing::error!(model = %name, error = %e, "Model refused; the previous version (if any) keeps serving");
                    event(store, name, "refused", json!({"error": e.to_string()}));
                    metrics::counter!("holmes_model_reload_failures_total").increment(1);
                    failures.push(ZooFailure {
                        at_ms: now_ms(),
                        error: e.to_string(),
                    });
                    changed |= !initial;
                }
            }
        }
    }
    let removed: Vec<String> = seen
        .folders
        .keys()
        .filter(|n| !now.contains_key(*n))
        .cloned()
        .collect();
    for name in &removed {
        changed = true;
        tracing::warn!(model = %name, "Model removed from the zoo");
        event(store, name, "removed", json!({}));
    }
    let mut st = status.lock().expect("zoo status lock");
    st.available = available;
    st.refused = refused;
    st.rules_error = rules_error;
    st.failures.extend(failures);
    let excess = st.failures.len().saturating_sub(MAX_FAILURES);
    st.failures.drain(..excess);
    st.serving_removed = members
        .iter()
        .map(|m| m.0.clone())
        .filter(|n| !now.contains_key(n))
        .collect();
    if changed {
        st.generation += 1;
        let _ = generation.send(st.generation);
    }
    drop(st);
    seen.folders = now;
}

/// Records a change as a technical event and in the audit log (this thread is ours, so the
/// audit row is written here).
fn event(sinks: &Sinks, model: &str, what: &str, detail: serde_json::Value) {
    let action = match what {
        "loaded" => Action::ModelLoaded,
        "refused" => Action::ModelRefused,
        "rules_changed" => Action::AlarmRulesChanged,
        _ => Action::ModelRemoved,
    };
    let detail = json!({"model": model, "change": what, "detail": detail});
    sinks.audit.record(
        Some(crate::serving::store::audit::SYSTEM),
        action,
        detail.clone(),
    );
    sinks
        .store
        .event(Event::system(Origin::Zoo, EventKind::ZooChange, detail));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_not_changes_but_finished_writes_are() {
        use notify::EventKind;
        use notify::event::{AccessKind, AccessMode, CreateKind};
        assert!(is_read_only(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(is_read_only(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(!is_read_only(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(!is_read_only(&EventKind::Create(CreateKind::File)));
    }
}
