//! Recomposition while serving: an actor that keeps the served ensemble composed for the
//! current zoo, bed count and hardware (HOLMES section 3.3 run online).
//!
//! It composes ([`planning`](super::planning)) at start-up when no stored plan
//! ([`plans`](super::plans)) fits, and again in
//! the background when the zoo changes (the [`reload`](crate::serving::engine::reload) watcher's
//! generation), when the connected beds cross a multiple of `beds_step` and hold there, or
//! when the measured end-to-end p95 breaks the budget (then with the estimate calibrated by
//! what was measured). The previous plan serves while a composition runs; the switch is the
//! engine's atomic [`Engine::switch`]. A ladder of cheaper rungs, composed with each plan for
//! fractions of the budget, lets it step down at once under a sudden overload (InferLine's
//! reactive controller, Cocktail's shrinking) and back up after a quiet period.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::planning::{ComposerError, bucket, compose_plan, hardware, initial_beds};
use super::plans::{self, Plan};
use crate::config::Config;
use crate::core::event::{Event, EventKind, Origin};
use crate::core::time::now_ms;
use crate::serving::engine::Engine;
use crate::serving::engine::accelerator::Accelerator;
use crate::serving::engine::ensemble::{self, ModelInfo};
use crate::serving::engine::sources;
use crate::serving::store::{self, Db, ServedEnsemble, StoreHandle};
use crate::serving::ward::Ward;

/// What the daemon serves and what the composer is doing, for the API.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Serving {
    pub(crate) models: Vec<ModelInfo>,
    /// The primary lead's share the members pool with, from their alarm rule (`None`: the
    /// plain mean).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) primary_share: Option<f64>,
    /// `config` (the configured members) or `plan` (a composed plan, see `plan`).
    pub(crate) source: String,
    pub(crate) plan: Option<Plan>,
    /// Rung of the plan's ladder serving now (0: the plan itself).
    pub(crate) rung: usize,
    pub(crate) composing: bool,
    pub(crate) compositions: u64,
    pub(crate) last_error: Option<String>,
    /// The latest switches, newest last (bounded).
    pub(crate) switches: Vec<Switch>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Switch {
    pub(crate) at_ms: i64,
    pub(crate) reason: String,
    pub(crate) plan_version: Option<i64>,
    pub(crate) rung: usize,
    pub(crate) ensemble_id: i64,
    pub(crate) members: Vec<String>,
}

const MAX_SWITCHES: usize = 20;

/// Everything the actor works with.
pub(crate) struct Context {
    pub(crate) cfg: Config,
    /// The ward's database (plans, profiles, the ingest's cost, the audit log).
    pub(crate) db: Db,
    pub(crate) engine: Engine,
    pub(crate) store: StoreHandle,
    pub(crate) ward: Ward,
    pub(crate) devices: Arc<Vec<Accelerator>>,
    /// What serves now and what the composer is doing, published to the board and the API.
    pub(crate) serving: watch::Sender<Serving>,
    pub(crate) zoo_generation: watch::Receiver<u64>,
    /// Recompositions asked for by a user (the reason, e.g. who asked).
    pub(crate) requests: tokio::sync::mpsc::Receiver<String>,
    pub(crate) shutdown: CancellationToken,
}

/// How often the actor looks at the bed count and the p95.
const CHECK: Duration = Duration::from_secs(2);

/// Runs the composer until shutdown. `composed` says whether a valid plan already serves.
pub(crate) async fn run(mut cx: Context, composed: bool) {
    let hw = hardware(&cx.devices);
    let cc = cx.cfg.composer.clone();
    let slo = cx.cfg.engine.slo_ms as f64;
    let mut pending: Option<String> = (!composed).then(|| "no stored plan fits".to_owned());
    let mut job: Option<tokio::task::JoinHandle<Result<Plan, ComposerError>>> = None;
    let mut job_reason = String::new();
    let mut calibration = 1.0f64;
    let mut last_switch = Instant::now();
    let mut last_breach: Option<Instant> = None;
    let mut beds_since: Option<(usize, Instant)> = None;
    let mut tick = tokio::time::interval(CHECK);
    loop {
        if job.is_none()
            && let Some(reason) = pending.take()
        {
            let beds = planned_beds(&cx);
            let (cfg, db, hw2) = (cx.cfg.clone(), cx.db.clone(), hw.clone());
            let counter = cx.engine.beats();
            tracing::info!(%reason, beds, "Composing the ensemble");
            set(&cx.serving, |s| s.composing = true);
            job_reason = reason;
            job = Some(tokio::task::spawn_blocking(move || {
                compose_plan(&cfg, &db, beds, &hw2, calibration, counter.as_deref())
            }));
        }
        tokio::select! {
            _ = cx.shutdown.cancelled() => break,
            res = async { job.as_mut().expect("guarded").await }, if job.is_some() => {
                job = None;
                set(&cx.serving, |s| { s.composing = false; s.compositions += 1; });
                match res.expect("composition does not panic") {
                    Ok(mut plan) => {
                        // SQLite off the tokio workers: the shared connection may be busy.
                        let (db, why) = (cx.db.clone(), job_reason.clone());
                        let (stored, saved) = tokio::task::spawn_blocking(move || {
                            let saved = plans::save(&db, &mut plan, &why);
                            (plan, saved)
                        })
                        .await
                        .expect("storing a plan does not panic");
                        plan = stored;
                        if let Err(e) = saved {
                            tracing::error!(error = %e, "Cannot store the composed plan");
                        }
                        tracing::info!(version = plan.version, members = ?plan.rungs[0].members,
                            val_roc_auc = plan.rungs[0].val_roc_auc, latency_ms = plan.rungs[0].latency_ms,
                            rungs = plan.rungs.len(), secs = plan.seconds, "Ensemble composed");
                        let reason = format!("plan {}: {}", plan.version, job_reason);
                        // Within a quiet period after a breach the ladder keeps its rung: a
                        // new plan does not undo a step down (the quiet period steps up).
                        let rung = match last_breach {
                            Some(t) if t.elapsed().as_secs_f64() < cc.quiet_secs => {
                                cx.serving.borrow().rung.min(plan.rungs.len() - 1)
                            }
                            _ => 0,
                        };
                        match apply(&cx, plan, rung, &reason).await {
                            Ok(()) => last_switch = Instant::now(),
                            Err(e) => fail(&cx, &e),
                        }
                    }
                    Err(e) => fail(&cx, &e),
                }
            }
            changed = cx.zoo_generation.changed() => {
                if changed.is_err() {
                    break;
                }
                pending = Some("the zoo changed".into());
            }
            Some(reason) = cx.requests.recv() => {
                pending = Some(reason);
            }
            _ = tick.tick() => {
                let now = Instant::now();
                // Beds: recompose when the connected count has held in another bucket.
                let connected = cx.ward.connected_beds();
                let want = bucket(connected, cc.beds_step);
                let have = planned_for(&cx);
                if connected > 0 && Some(want) != have {
                    let since = match beds_since {
                        Some((b, t)) if b == want => t,
                        _ => {
                            beds_since = Some((want, now));
                            now
                        }
                    };
                    if now.duration_since(since).as_secs_f64() >= cc.settle_secs && job.is_none() {
                        pending = Some(format!("{connected} beds connected (planned for {})", have.unwrap_or(0)));
                        beds_since = None;
                    }
                } else {
                    beds_since = None;
                }
                // Latency: step down at once on a breach, recompose with the estimate calibrated;
                // step back up after a quiet period.
                let span = Duration::from_secs_f64(cc.p95_window_secs).min(now.duration_since(last_switch));
                let p95 = cx.store.health.recent.lock().expect("lock").p95(span);
                let (plan, rung) = {
                    let s = cx.serving.borrow();
                    (s.plan.clone(), s.rung)
                };
                match (p95, plan) {
                    (Some((p, n)), Some(plan)) if n >= cc.p95_min_windows && p > slo => {
                        last_breach = Some(now);
                        let est = plan.rungs[rung].latency_ms.max(1e-3);
                        let cal = (p / est).clamp(1.0, 50.0);
                        tracing::warn!(p95_ms = p, budget_ms = slo, rung, "End-to-end p95 breaks the budget");
                        if rung + 1 < plan.rungs.len() {
                            let reason = format!("p95 {p:.0} ms > {slo:.0} ms: step down");
                            match apply(&cx, plan.clone(), rung + 1, &reason).await {
                                Ok(()) => last_switch = Instant::now(),
                                Err(e) => fail(&cx, &e),
                            }
                        }
                        if cal > plan.inputs.calibration * 1.1 && job.is_none() {
                            calibration = cal;
                            pending = Some(format!("p95 {p:.0} ms broke the {slo:.0} ms budget"));
                        }
                    }
                    (_, Some(plan)) if rung > 0 && last_breach.is_none_or(|t| now.duration_since(t).as_secs_f64() >= cc.quiet_secs) => {
                        let reason = format!("quiet for {:.0} s: step up", cc.quiet_secs);
                        match apply(&cx, plan, rung - 1, &reason).await {
                            Ok(()) => {
                                last_switch = Instant::now();
                                last_breach = Some(last_switch);
                            }
                            Err(e) => fail(&cx, &e),
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

fn set(serving: &watch::Sender<Serving>, f: impl FnOnce(&mut Serving)) {
    serving.send_modify(f);
}

fn fail(cx: &Context, e: &ComposerError) {
    tracing::error!(error = %e, "Composition failed; the current ensemble keeps serving");
    metrics::counter!("holmes_composer_failures_total").increment(1);
    set(&cx.serving, |s| s.last_error = Some(e.to_string()));
}

/// Beds the next composition plans for.
fn planned_beds(cx: &Context) -> usize {
    let connected = cx.ward.connected_beds();
    if connected == 0 {
        initial_beds(&cx.cfg)
    } else {
        bucket(connected, cx.cfg.composer.beds_step)
    }
}

fn planned_for(cx: &Context) -> Option<usize> {
    cx.serving.borrow().plan.as_ref().map(|p| p.inputs.beds)
}

/// Where [`ensemble::prepare`] finds the members, per the config, with the engine's counter.
fn sources<'a>(
    cfg: &'a Config,
    db: &'a Db,
    beats: Option<&'a crate::signal::beats::BeatCounter>,
) -> sources::Sources<'a> {
    sources::Sources {
        models_dir: &cfg.ensemble.models_dir,
        db,
        engine: &cfg.engine,
        window_secs: cfg.ward.window_secs,
        hop_secs: cfg.ward.hop_secs,
        beats,
    }
}

/// Serves rung `rung` of `plan`: members validated and placed, the ensemble recorded, the
/// engine switched. On failure the current ensemble keeps serving.
pub(crate) async fn apply(
    cx: &Context,
    plan: Plan,
    rung: usize,
    reason: &str,
) -> Result<(), ComposerError> {
    let serving_now: Vec<String> = cx.engine.members().into_iter().map(|m| m.0).collect();
    let members = plan.rungs[rung].members.clone();
    // The same members stay unless their alarm rule now pools them otherwise.
    let same_pooling = members == serving_now
        && {
            let (cfg, db) = (cx.cfg.clone(), cx.db.clone());
            let (m2, beats) = (members.clone(), cx.engine.beats());
            let share = tokio::task::spawn_blocking(move || {
                crate::serving::engine::pooling::share_for(
                    sources(&cfg, &db, beats.as_deref()),
                    &m2,
                )
            })
            .await
            .expect("reading manifests does not panic");
            match share {
                Ok(share) => share == cx.serving.borrow().primary_share,
                // A rules file that does not read changes nothing: what serves stays (the
                // dashboard keeps its rule too, and the zoo status says why).
                Err(e) => {
                    tracing::warn!(error = %e, "The zoo's alarm rules do not read; the serving ensemble stays as it pools");
                    true
                }
            }
        };
    if same_pooling {
        set(&cx.serving, |s| {
            s.plan = Some(plan);
            s.rung = rung;
            s.source = "plan".into();
        });
        return Ok(());
    }
    let (cfg, db, devices, engine, store) = (
        cx.cfg.clone(),
        cx.db.clone(),
        cx.devices.clone(),
        cx.engine.clone(),
        cx.store.clone(),
    );
    let (beds, version, m2) = (plan.inputs.beds, plan.version, members.clone());
    let beats = engine.beats();
    let (models, primary_share, id) = tokio::task::spawn_blocking(move || {
        let p = ensemble::prepare(sources(&cfg, &db, beats.as_deref()), &m2, &devices, beds)
            .map_err(|e| ComposerError::Switch(e.to_string()))?;
        let id = store::register_ensemble(
            &db,
            &ServedEnsemble {
                members: &p.described,
                source: &format!("plan {version} rung {rung}"),
                plan: p.plan.clone(),
                counter: beats.as_deref().map(|b| b.sha256.as_str()),
                primary_share: p.primary_share,
            },
        )?;
        engine
            .switch(p.specs, store, id)
            .map_err(|e| ComposerError::Switch(e.to_string()))?;
        Ok::<_, ComposerError>((p.models, p.primary_share, id))
    })
    .await
    .expect("switching does not panic")?;
    tracing::info!(%reason, plan = version, rung, ensemble_id = id, members = ?members, primary_share = ?primary_share, "Serving a new ensemble");
    metrics::counter!("holmes_plan_switches_total").increment(1);
    let detail = json!({"reason": reason, "plan": version, "rung": rung, "ensemble_id": id, "members": members, "primary_share": primary_share});
    crate::serving::store::audit::AuditLog::new(&cx.db).record(
        Some(crate::serving::store::audit::SYSTEM),
        crate::serving::store::audit::Action::PlanSwitched,
        detail.clone(),
    );
    cx.store.event(Event::system(
        Origin::Composer,
        EventKind::PlanChange,
        detail,
    ));
    set(&cx.serving, |s| {
        s.models = models;
        s.primary_share = primary_share;
        s.plan = Some(plan);
        s.rung = rung;
        s.source = "plan".into();
        s.last_error = None;
        s.switches.push(Switch {
            at_ms: now_ms(),
            reason: reason.to_owned(),
            plan_version: Some(version),
            rung,
            ensemble_id: id,
            members,
        });
        let excess = s.switches.len().saturating_sub(MAX_SWITCHES);
        s.switches.drain(..excess);
    });
    Ok(())
}
