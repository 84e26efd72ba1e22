//! The served plan: what serves now (the composer's [`Serving`]: members, pooling, rung) and
//! the risk alarm rule it serves with ([`rule`](super::rule)), chosen in one place and
//! published as one value on a `watch` channel. The board raises and clears alarms by its
//! rule and shows it, `/api/health` reports it; nothing above chooses a rule again.
//!
//! One task chooses: at start-up, whenever the composer publishes other members (or another
//! pooling), and at every zoo generation (a member retrained in place is hot-swapped without
//! a switch of ensemble, and its rule may no longer hold). The rule book is read each time,
//! so a rule saved while the daemon runs serves at once.

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::rule::{self, ServedRule};
use super::service::Serving;
use crate::alarm::rules::MemberRef;
use crate::config::DashboardConfig;

/// What serves and the rule it serves with.
#[derive(Debug, Clone)]
pub(crate) struct ServedPlan {
    pub(crate) serving: Serving,
    pub(crate) rule: ServedRule,
}

/// Chooses the rule for what serves now, publishes the plan, and keeps it as the composer and
/// the zoo change; stops with `shutdown` or when the composer's channel closes and the zoo's
/// does too (the last plan then stays published).
pub(crate) async fn start(
    cfg: DashboardConfig,
    rules: RuleSource,
    mut serving: watch::Receiver<Serving>,
    mut zoo_generation: watch::Receiver<u64>,
    shutdown: CancellationToken,
    tracker: &tokio_util::task::TaskTracker,
) -> watch::Receiver<ServedPlan> {
    let now = serving.borrow_and_update().clone();
    let mut served = key_of(&served_now(&now));
    let first = rules.choose(&cfg, served_now(&now), None).await;
    let (tx, rx) = watch::channel(ServedPlan {
        serving: now,
        rule: first,
    });
    tracker.spawn(async move {
        let (mut serving_open, mut zoo_open) = (true, true);
        while serving_open || zoo_open {
            let again = tokio::select! {
                _ = shutdown.cancelled() => break,
                r = serving.changed(), if serving_open => {
                    // Without a composer nothing publishes: the start-up rule serves for good.
                    serving_open = r.is_ok();
                    let now = served_now(&serving.borrow_and_update());
                    let other = key_of(&now) != served;
                    served = key_of(&now);
                    serving_open && other
                }
                r = zoo_generation.changed(), if zoo_open => {
                    zoo_open = r.is_ok();
                    zoo_open
                }
            };
            let now = serving.borrow().clone();
            let rule = if again {
                let current = tx.borrow().rule;
                rules.choose(&cfg, served_now(&now), Some(current)).await
            } else {
                tx.borrow().rule
            };
            // The rung and the composer's state change without a change of rule: published too.
            tx.send_replace(ServedPlan { serving: now, rule });
        }
    });
    rx
}

/// The zoo's rule book and the ward's hop and window a rule must match.
#[derive(Debug, Clone)]
pub(crate) struct RuleSource {
    pub(crate) models_dir: std::path::PathBuf,
    pub(crate) hop_secs: u32,
    pub(crate) window_secs: u32,
}

impl RuleSource {
    /// The rule for `models` pooled with `share` (read from the zoo's book now, so a rule saved
    /// while the daemon runs serves at once): the book's, else one derived from the zoo's validated ensembles
    /// (the manifests are read only then), else the fallback, with a warning. When the book
    /// cannot be read, `current` (the rule serving now) stays, else the fallback serves.
    async fn choose(
        &self,
        cfg: &DashboardConfig,
        (models, share): Served,
        current: Option<ServedRule>,
    ) -> ServedRule {
        let fallback = ServedRule::fallback(cfg, self.hop_secs);
        let (dir, derive) = (self.models_dir.clone(), cfg.derive_risk_alarm);
        let (hop, window) = (self.hop_secs, self.window_secs);
        let listed = models.clone();
        let read = tokio::task::spawn_blocking(move || {
            let models = with_current_weights(&dir, models);
            let chosen = rule::choose_in(&dir, derive, &models, share, hop, window, fallback)?;
            Ok::<_, crate::alarm::rules::RulesError>((chosen, models))
        })
        .await;
        let kept = current.unwrap_or(fallback);
        let (chosen, models) = match read {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                tracing::error!(error = %e, on = kept.rule.on, validated = kept.validated, "Cannot read the zoo's alarm rules; the rule serving now stays");
                warn_if_held_by_short_runs(&kept, &listed);
                return kept;
            }
            Err(e) => {
                tracing::error!(error = %e, "Reading the zoo's alarm rules failed; the rule serving now stays");
                warn_if_held_by_short_runs(&kept, &listed);
                return kept;
            }
        };
        let members = models
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join("+");
        let r = chosen.rule;
        let (hop_secs, window_secs) = (self.hop_secs, self.window_secs);
        let basis = rule::basis(&chosen);
        // One message either way: info for a validated rule, warn for a derived or fallback one.
        macro_rules! served {
            ($level:expr) => {
                tracing::event!(
                    $level,
                    members,
                    hop_secs,
                    window_secs,
                    primary_share = ?share,
                    on = r.on,
                    off = r.off,
                    k = r.k,
                    n = r.n,
                    basis,
                    "Risk alarm rule"
                )
            };
        }
        if chosen.validated {
            served!(tracing::Level::INFO);
        } else {
            served!(tracing::Level::WARN);
        }
        warn_if_held_by_short_runs(&chosen, &models);
        chosen
    }
}

/// `models` with each weights hash as the zoo's manifest says now: the watcher hot-swaps a
/// member whose folder changed and loads, so a retrained member serves other weights than the
/// ensemble was published with. A manifest that does not read leaves the hash as it was (the
/// engine then keeps serving the loaded weights).
fn with_current_weights(
    dir: &std::path::Path,
    mut models: Vec<crate::serving::engine::ensemble::ModelInfo>,
) -> Vec<crate::serving::engine::ensemble::ModelInfo> {
    for m in &mut models {
        if let Ok(mf) = crate::zoo::Manifest::read(&dir.join(&m.name)) {
            m.sha256 = mf.weights.sha256;
        }
    }
    models
}

/// Warns when `r`, served beside the beat counter among `models`, clears at or below what a
/// window with a VT run short of the counter's call scores ([`rule::held_by_short_runs`]).
fn warn_if_held_by_short_runs(
    r: &ServedRule,
    models: &[crate::serving::engine::ensemble::ModelInfo],
) {
    if rule::held_by_short_runs(r, models) {
        tracing::warn!(
            off = r.rule.off,
            short_run_max = crate::signal::beats::RUN_RISK_MAX,
            basis = rule::basis(r),
            "The risk alarm rule clears at or below what a window with a VT run short of the beat counter's call scores: such a window can hold the alarm on; [dashboard] risk_alarm_off above 0.2 (for the fallback) avoids that"
        );
    }
}

/// The serving models and the primary lead's share they pool with.
type Served = (
    Vec<crate::serving::engine::ensemble::ModelInfo>,
    Option<f64>,
);

fn served_now(s: &crate::composer::service::Serving) -> Served {
    (s.models.clone(), s.primary_share)
}

/// What a rule is looked up by: the members (sorted) and their pooling.
fn key_of((models, share): &Served) -> (Vec<MemberRef>, Option<f64>) {
    (rule::sorted_members(models), *share)
}
