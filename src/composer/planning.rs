//! Composing a plan for the ward ([`compose_plan`]): what a plan is keyed by (the zoo, the
//! beds, this machine, the SLO and the search method, the hop and window, the rules file, the
//! beat counter, the utilisation cap, the ingest's price and the configured members;
//! [`PlanInputs`]), the stored plan that fits them, and a new one composed from the zoo's
//! profiles: each rung of the ladder the validated ensemble that [`validated::choose`] picks,
//! else the search's; and, where rung 0 is not the configured members, why not
//! ([`Plan::configured_note`]).

use std::path::Path;
use std::time::Instant;

use super::entry::Entry;
use super::plans::{self, PLAN_FORMAT, Plan, PlanInputs, Rung};
use super::{compose, latency, validated};
use crate::alarm::rules::{RULES_FILE, RuleBook};
use crate::config::Config;
use crate::core::time::now_ms;
use crate::serving::engine::accelerator::Accelerator;
use crate::serving::store::Db;
use crate::signal::beats::BeatCounter;
use crate::zoo::Manifest;

/// What composing (and switching to) a plan can fail on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ComposerError {
    #[error("reading the zoo: {0}")]
    Zoo(String),
    #[error("the zoo has no valid model to compose from")]
    EmptyZoo,
    #[error(transparent)]
    Store(#[from] crate::serving::store::StoreError),
    #[error("switching the served ensemble: {0}")]
    Switch(String),
}

/// The machine as a plan key sees it: the CPU and every device found.
pub(crate) fn hardware(devices: &[Accelerator]) -> String {
    let ids: Vec<String> = devices
        .iter()
        .map(|d| format!("{}={}", d.id, d.name))
        .collect();
    format!(
        "{} [{}]",
        crate::serving::engine::profile::hardware(),
        ids.join(", ")
    )
}

/// `name@sha256` of every model folder with a readable manifest, sorted.
pub(crate) fn zoo_fingerprint(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = crate::zoo::model_dirs(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|d| {
            let m = Manifest::read(&d).ok()?;
            Some(format!("{}@{}", m.name, m.weights.sha256))
        })
        .collect();
    out.sort();
    out
}

/// The ingest's CPU a bed each second on this machine, ms, as `holmes profile --ingest` last
/// measured it; where it never did, `composer.assumed_ingest_ms`, with a warning.
fn ingest_ms(cfg: &Config, db: &Db) -> f64 {
    let assumed = cfg.composer.assumed_ingest_ms;
    match crate::serving::ingest::cost::latest(db) {
        Ok(Some(c)) => c.ms_per_bed_second(),
        Ok(None) => {
            tracing::warn!(
                assumed_ms = assumed,
                "The ingest's CPU was never measured on this machine (holmes profile --ingest); \
                 the composer assumes composer.assumed_ingest_ms a bed each second"
            );
            assumed
        }
        Err(e) => {
            tracing::warn!(error = %e, assumed_ms = assumed, "Cannot read the ingest's measured CPU; assuming composer.assumed_ingest_ms");
            assumed
        }
    }
}

/// `beds` rounded up to the bed step (at least one step).
pub(crate) fn bucket(beds: usize, step: usize) -> usize {
    beds.max(1).div_ceil(step) * step
}

/// Beds to plan for before monitors connect.
pub(crate) fn initial_beds(cfg: &Config) -> usize {
    bucket(
        cfg.ward.beds.len().max(cfg.composer.initial_beds),
        cfg.composer.beds_step,
    )
}

fn inputs(
    cfg: &Config,
    db: &Db,
    beds: usize,
    hardware: &str,
    calibration: f64,
    counter: Option<&BeatCounter>,
) -> PlanInputs {
    let c = &cfg.composer;
    PlanInputs {
        zoo: zoo_fingerprint(&cfg.ensemble.models_dir),
        beds,
        hardware: hardware.to_owned(),
        slo_ms: cfg.engine.slo_ms,
        budget_ms: cfg.engine.slo_ms as f64 * c.budget_fraction / calibration.max(1.0),
        method: c.method.clone(),
        calibration,
        hop_secs: cfg.ward.hop_secs,
        window_secs: cfg.ward.window_secs,
        rules: if c.prefer_validated {
            std::fs::read(cfg.ensemble.models_dir.join(RULES_FILE))
                .map(|b| crate::core::hash::sha256_hex(&b))
                .unwrap_or_default()
        } else {
            String::new()
        },
        counter: counter.map(|c| c.sha256.clone()).unwrap_or_default(),
        max_utilisation: c.max_utilisation,
        ingest_ms: ingest_ms(cfg, db),
        preferred: if c.prefer_validated {
            let mut m = cfg.ensemble.members.clone();
            m.sort();
            m
        } else {
            Vec::new()
        },
    }
}

/// The stored plan for the current zoo, the initial `beds` ([`initial_beds`]) and the
/// hardware of `devices`, when the composer is on. Blocking. `counter`: the beat counter
/// served beside the members, if any.
pub(crate) fn stored_plan(
    cfg: &Config,
    db: &Db,
    devices: &[Accelerator],
    beds: usize,
    counter: Option<&BeatCounter>,
) -> Option<Plan> {
    if !cfg.composer.enabled {
        return None;
    }
    let key = inputs(cfg, db, beds, &hardware(devices), 1.0, counter).key();
    match plans::latest(db, &key) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "Cannot read stored plans");
            None
        }
    }
}

/// Composes a plan for `beds` beds: rung 0 within the budget, then one rung per ladder step,
/// each covering every lead set the zoo can cover (the searches' constraint). `counter`: the
/// beat counter served beside the members, if any: validated ensembles are those validated
/// with it, and its reading of each window is priced in every latency estimate. Blocking
/// (profiles models and the counter without a stored profile, then searches).
pub(crate) fn compose_plan(
    cfg: &Config,
    db: &Db,
    beds: usize,
    hardware: &str,
    calibration: f64,
    counter: Option<&BeatCounter>,
) -> Result<Plan, ComposerError> {
    let t = Instant::now();
    let inputs = inputs(cfg, db, beds, hardware, calibration, counter);
    let beside = match counter {
        Some(c) => latency::counter_cost(db, c, cfg.ward.window_secs)
            .map_err(|e| ComposerError::Zoo(format!("the beat counter's profile: {e}")))?,
        None => latency::Beside::NONE,
    };
    let counter = counter.map(|c| c.sha256.as_str());
    let entries = compose::load_zoo(&cfg.ensemble.models_dir, db, cfg.ward.window_secs)
        .map_err(|e| ComposerError::Zoo(format!("{e:#}")))?;
    if entries.is_empty() {
        return Err(ComposerError::EmptyZoo);
    }
    let hop = cfg.ward.hop_secs as f64;
    // The members' batch caps as the engine's CPU plan sets them for this ward, what each
    // window costs beside them, and what the monitors' streams cost.
    let model = compose::LatencyModel::new(
        &entries,
        &cfg.engine,
        beds,
        hop,
        beside,
        compose::Estimator::Netcalc,
    )
    .with_ingest(inputs.ingest_ms)
    .with_max_utilisation(cfg.composer.max_utilisation);
    let mut latency = |b: &[bool]| model.estimate(b);
    let params = cfg.composer.search;
    let coverable = compose::zoo_lead_sets(&entries);
    if !coverable.is_full() {
        let missing = coverable.missing().join(", ");
        tracing::warn!(%missing, "The zoo has no model for some lead sets: beds whose monitor sends only those get no score");
    }
    let candidates = if cfg.composer.prefer_validated {
        match RuleBook::load(&cfg.ensemble.models_dir) {
            Ok(book) => {
                let weighs = cfg.engine.combine == crate::config::Combine::WeightedMean;
                let (hop, window) = (cfg.ward.hop_secs, cfg.ward.window_secs);
                validated::candidates(&entries, &book, hop, window, weighs, counter)
            }
            Err(e) => {
                tracing::warn!(error = %e, "The zoo's alarm rules do not read; composing without them");
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    // The configured members, where the zoo holds them all (none when validated ensembles
    // are not preferred).
    let preferred: Option<Vec<bool>> = (!inputs.preferred.is_empty()
        && inputs
            .preferred
            .iter()
            .all(|m| entries.iter().any(|e| &e.name == m)))
    .then(|| {
        entries
            .iter()
            .map(|e| inputs.preferred.contains(&e.name))
            .collect()
    });
    let mut rungs: Vec<Rung> = Vec::new();
    // Whether rung 0 is the search's (or the fallback's) rather than a validated ensemble.
    let mut searched = true;
    let mut calls = 0;
    for f in std::iter::once(1.0).chain(cfg.composer.ladder.iter().copied()) {
        let budget = inputs.budget_ms * f;
        let chosen = validated::choose(
            &entries,
            &candidates,
            preferred.as_deref(),
            budget,
            &latency,
        );
        let validated = chosen.is_some();
        let rung = match chosen {
            Some(c) => Rung {
                members: names_of(&entries, &c.bits),
                lead_sets: compose::lead_sets(&entries, &c.bits),
                budget_ms: budget,
                val_roc_auc: c.val_roc_auc,
                latency_ms: c.latency_ms,
                utilisation: model.utilisation(&c.bits),
            },
            None => {
                let row =
                    compose::run_with(&entries, &inputs.method, budget, &params, &mut latency);
                calls += row.profiler_calls;
                let bits: Vec<bool> = entries
                    .iter()
                    .map(|e| row.members.contains(&e.name))
                    .collect();
                Rung {
                    members: row.members,
                    lead_sets: row.lead_sets,
                    budget_ms: budget,
                    val_roc_auc: row.val_roc_auc,
                    latency_ms: row.latency_ms,
                    utilisation: model.utilisation(&bits),
                }
            }
        };
        if rung.members.is_empty() || rungs.iter().any(|r| r.members == rung.members) {
            continue;
        }
        if rungs.is_empty() {
            searched = !validated;
        }
        rungs.push(rung);
    }
    if rungs.is_empty() {
        // Nothing fits: serve the fastest covering ensemble rather than nothing, and say so.
        let b = compose::fastest_covering(&entries);
        let members = names_of(&entries, &b);
        tracing::warn!(
            ?members,
            budget_ms = inputs.budget_ms,
            "No ensemble covering the lead sets fits the budget; serving the fastest one"
        );
        rungs.push(Rung {
            members,
            lead_sets: compose::lead_sets(&entries, &b),
            budget_ms: inputs.budget_ms,
            val_roc_auc: compose::accuracy(&entries, &b, false).0,
            latency_ms: latency(&b),
            utilisation: model.utilisation(&b),
        });
    }
    let configured_note = configured_note(
        &Configured {
            entries: &entries,
            candidates: &candidates,
            preferred: preferred.as_deref(),
            names: &cfg.ensemble.members,
            validated_preferred: cfg.composer.prefer_validated,
        },
        &rungs[0].members,
        searched,
        &model,
        inputs.budget_ms,
        cfg.composer.max_utilisation,
    );
    if let Some(why) = &configured_note {
        tracing::warn!(beds, %why, served = ?rungs[0].members, "The configured members (ensemble.members) do not serve");
    }
    Ok(Plan {
        format: PLAN_FORMAT,
        version: 0,
        inputs,
        rungs,
        configured_note,
        profiler_calls: calls,
        seconds: t.elapsed().as_secs_f64(),
        created_ms: now_ms(),
    })
}

/// The configured members as the composer saw them.
struct Configured<'a> {
    entries: &'a [Entry],
    /// The book's ensembles validated for this ward (none when not preferred).
    candidates: &'a [validated::Candidate],
    /// The configured members as a choice over `entries` (none where the zoo lacks one, or
    /// where validated ensembles are not preferred).
    preferred: Option<&'a [bool]>,
    /// `ensemble.members`.
    names: &'a [String],
    /// `composer.prefer_validated`.
    validated_preferred: bool,
}

/// Why the configured members are not `served` (rung 0), in words a clinical engineer can act
/// on, every reason that holds: validated ensembles are not preferred, the zoo lacks one of
/// them, they leave a lead set unscored, the ward would take more of a core with them than
/// `cap` or their estimate breaks the (calibrated) `budget_ms`, no ensemble or no rule of the
/// zoo's book is validated for them, or their rule fell short of its target; then what serves
/// instead (`searched`: the search's ensemble, else a validated one). None where they serve.
fn configured_note(
    c: &Configured,
    served: &[String],
    searched: bool,
    model: &compose::LatencyModel,
    budget_ms: f64,
    cap: f64,
) -> Option<String> {
    let mut want: Vec<&String> = c.names.iter().collect();
    want.sort();
    want.dedup();
    let mut have: Vec<&String> = served.iter().collect();
    have.sort();
    if want == have {
        return None;
    }
    if !c.validated_preferred {
        return Some(
            "composer.prefer_validated is off: the search composes the most accurate ensemble \
             within the budget, without starting from them"
                .into(),
        );
    }
    let Some(bits) = c.preferred else {
        let lacking: Vec<&str> = c
            .names
            .iter()
            .filter(|m| !c.entries.iter().any(|e| &e.name == *m))
            .map(String::as_str)
            .collect();
        return Some(format!(
            "the zoo has no usable model named {}",
            lacking.join(", ")
        ));
    };
    let mut reasons = Vec::new();
    let unscored = compose::lead_sets(c.entries, bits).uncovered(compose::zoo_lead_sets(c.entries));
    if !unscored.is_empty() {
        reasons.push(format!(
            "they leave monitors sending {} unscored, which the zoo's models can score",
            unscored.join(" or ")
        ));
    }
    let u = model.utilisation(bits);
    if u > cap {
        reasons.push(format!(
            "with them the ward of {} beds would take {u:.3} of a core, over \
             composer.max_utilisation {cap}",
            model.beds
        ));
    } else {
        let latency = model.estimate(bits);
        if latency > budget_ms {
            reasons.push(format!(
                "their estimated latency at {} beds, {latency:.0} ms, is over the budget of \
                 {budget_ms:.0} ms (engine.slo_ms x composer.budget_fraction, over the \
                 calibration)",
                model.beds
            ));
        }
    }
    match c.candidates.iter().find(|k| k.bits == bits) {
        None if c.candidates.is_empty() => reasons.push(
            "no ensemble of the zoo is validated for this hop, window, beat counter and \
             engine.combine (alarm_rules.json)"
                .to_owned(),
        ),
        None => reasons.push(
            "no rule in the zoo's alarm_rules.json validates them for this hop, window, beat \
             counter and engine.combine"
                .to_owned(),
        ),
        Some(k) if !k.reached => {
            reasons.push("their rule fell short of its target sensitivity on validation".to_owned())
        }
        Some(_) => {}
    }
    if reasons.is_empty() {
        reasons.push("the composer chose another validated ensemble".to_owned());
    }
    let instead = if searched {
        "the search serves the most accurate ensemble it found within the budget"
    } else {
        "a validated ensemble serves, with its rule"
    };
    Some(format!("{}; {instead}", reasons.join("; ")))
}

/// The names of the entries `b` chooses, in zoo order.
fn names_of(entries: &[Entry], b: &[bool]) -> Vec<String> {
    entries
        .iter()
        .zip(b)
        .filter(|x| *x.1)
        .map(|(e, _)| e.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ingest_is_priced_as_measured_else_as_assumed() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("h.db"), &crate::composer::TEST_SCHEMA).unwrap();
        let mut cfg = Config::default();
        cfg.composer.assumed_ingest_ms = 0.5;
        assert_eq!(ingest_ms(&cfg, &db), 0.5, "never measured");
        let measured = crate::serving::ingest::cost::IngestCost {
            hardware: crate::serving::engine::profile::hardware(),
            beds: 1000,
            seconds: 60.0,
            cpu_cores: 0.39,
        };
        crate::serving::ingest::cost::store(&db, &measured).unwrap();
        assert!((ingest_ms(&cfg, &db) - 0.39).abs() < 1e-12);
    }

    #[test]
    fn beds_round_up_to_the_step() {
        assert_eq!(bucket(0, 16), 16);
        assert_eq!(bucket(16, 16), 16);
        assert_eq!(bucket(17, 16), 32);
        assert_eq!(bucket(64, 16), 64);
    }
}
