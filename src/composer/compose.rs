//! The zoo as the composer sees it and one search run: accuracy profiles (validation
//! predictions from the manifests), the fast latency estimators over stored profiles (the
//! [`netcalc`] bound or the [`des`] simulation, see [`LatencyModel`]), and [`run_goal`], which
//! runs one method for one [`Goal`] and scores its choice on validation and test. The table of
//! every method at every budget (HOLMES section 4.2.1) is [`report`](super::report)'s.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::entry::Entry;
pub(crate) use super::latency::{Beside, Estimator, LatencyModel};
use super::profiler::split_covering;
use super::search::{self, Bits, Goal, Profiler, Step};

use crate::config::HolmesParams;
use crate::core::metrics::{
    AtThreshold, at_threshold, ensemble_mean, pr_auc, roc_auc, youden_threshold,
};
use crate::zoo::{self, LeadSets, Predictions};

/// Why the zoo could not be loaded for composing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ComposeError {
    #[error(transparent)]
    Zoo(#[from] zoo::ZooError),
    #[error("profiling: {0}")]
    Profile(#[from] crate::serving::engine::EngineError),
    #[error("stored profiles: {0}")]
    Store(#[from] crate::serving::store::StoreError),
}

/// One split's predictions of every model, indexed by window for fast ensembling.
#[derive(Debug, Clone, Default)]
pub(crate) struct SplitIndex {
    labels: Vec<bool>,
    /// Per model: (window index, probability).
    preds: Vec<Vec<(u32, f32)>>,
}

impl SplitIndex {
    pub(crate) fn new<'a>(preds: impl Iterator<Item = &'a Predictions>) -> SplitIndex {
        let mut ids: std::collections::HashMap<&'a str, u32> = std::collections::HashMap::new();
        let mut labels = Vec::new();
        let mut out = Vec::new();
        for p in preds {
            let mut v = Vec::with_capacity(p.ids.len());
            for ((id, &l), &pr) in p.ids.iter().zip(&p.labels).zip(&p.probs) {
                let next = ids.len() as u32;
                let k = *ids.entry(id.as_str()).or_insert_with(|| {
                    labels.push(l != 0);
                    next
                });
                v.push((k, pr));
            }
            out.push(v);
        }
        SplitIndex { labels, preds: out }
    }

    /// ROC-AUC and PR-AUC of the mean-probability ensemble `b` (0 when undefined).
    pub(crate) fn score(&self, b: &[bool]) -> (f64, f64) {
        let (l, s) = self.ensemble(b);
        let (r, p) = (roc_auc(&l, &s), pr_auc(&l, &s));
        (
            if r.is_nan() { 0.0 } else { r },
            if p.is_nan() { 0.0 } else { p },
        )
    }

    /// Labels and mean-probability scores of ensemble `b` over the windows its members scored.
    pub(crate) fn ensemble(&self, b: &[bool]) -> (Vec<bool>, Vec<f32>) {
        let w: Vec<f64> = b.iter().map(|&x| if x { 1.0 } else { 0.0 }).collect();
        self.weighted(&w)
    }

    /// Labels and weighted-mean scores of the models weighing more than 0 in `w` (one weight
    /// per model), renormalised over the members that scored each window, as the engine pools.
    pub(crate) fn weighted(&self, w: &[f64]) -> (Vec<bool>, Vec<f32>) {
        let mut sum = vec![0.0f64; self.labels.len()];
        let mut wsum = vec![0.0f64; self.labels.len()];
        for (m, p) in self.preds.iter().enumerate() {
            if w[m] <= 0.0 {
                continue;
            }
            for &(k, pr) in p {
                sum[k as usize] += w[m] * pr as f64;
                wsum[k as usize] += w[m];
            }
        }
        let (mut l, mut s) = (Vec::new(), Vec::new());
        for k in 0..sum.len() {
            if wsum[k] > 0.0 {
                l.push(self.labels[k]);
                s.push((sum[k] / wsum[k]) as f32);
            }
        }
        (l, s)
    }
}

/// Largest batch [`load_zoo`] profiles when a model has no stored profile reaching it (the
/// engine's default batch cap).
pub(crate) const PROFILE_MAX_BATCH: usize = 8;

/// Loads every valid model of the zoo with its latency: from stored CPU profiles when they
/// reach batch [`PROFILE_MAX_BATCH`], else measured now (batch 1 to it, a few runs each) and
/// stored. Models reading more than the ward's `window_secs` are left out (the engine could
/// not feed them).
pub(crate) fn load_zoo(
    dir: &Path,
    db: &crate::serving::store::Db,
    window_secs: u32,
) -> Result<Vec<Entry>, ComposeError> {
    let (models, _bad) = zoo::load_dir::<burn::backend::Flex>(dir, &Default::default())?;
    let cpu = crate::serving::engine::accelerator::Accelerator::cpu();
    let mut out = Vec::new();
    for m in models {
        let mf = &m.manifest;
        if mf.input.secs() > window_secs as f64 {
            tracing::warn!(model = %mf.name, secs = mf.input.secs(), window_secs, "Model reads more than the ward's window; not composed");
            continue;
        }
        let stored =
            crate::serving::engine::profile::load_profiles(db, &mf.name, &mf.weights.sha256)?
                .into_iter()
                .find(|p| p.device == "cpu")
                .filter(|p| {
                    p.points.iter().any(|x| x.batch == 1)
                        && p.points.iter().any(|x| x.batch >= PROFILE_MAX_BATCH)
                });
        let profile = match stored {
            Some(p) => p,
            None => {
                let opts = crate::serving::engine::profile::ProfileOptions {
                    max_batch: PROFILE_MAX_BATCH,
                    ..crate::serving::engine::profile::QUICK
                };
                let p = crate::serving::engine::profile::profile_model(&m.dir, &cpu, &opts)?;
                crate::serving::engine::profile::store_profile(db, &p)?;
                p
            }
        };
        let latency_ms = profile
            .points
            .iter()
            .find(|x| x.batch == 1)
            .map_or(0.0, |x| x.p95_ms);
        out.push(Entry {
            name: mf.name.clone(),
            sha256: mf.weights.sha256.clone(),
            leads: LeadSets::of_input(&mf.input),
            input: mf.input,
            validation: mf
                .predictions
                .get("validation")
                .cloned()
                .unwrap_or_default(),
            test: mf.predictions.get("test").cloned().unwrap_or_default(),
            latency_ms,
            profile: Some(profile),
        });
    }
    Ok(out)
}

/// ROC-AUC and PR-AUC of the mean-probability ensemble `b` on a split (the slow reference
/// path, kept for checking [`SplitIndex::score`]).
pub(crate) fn accuracy(entries: &[Entry], b: &[bool], test: bool) -> (f64, f64) {
    let (l, s) = ensemble_mean(entries.iter().zip(b).filter(|x| *x.1).map(|(e, _)| {
        let p = if test { &e.test } else { &e.validation };
        (&p.ids[..], &p.labels[..], &p.probs[..])
    }));
    let (r, p) = (roc_auc(&l, &s), pr_auc(&l, &s));
    (
        if r.is_nan() { 0.0 } else { r },
        if p.is_nan() { 0.0 } else { p },
    )
}

/// The lead sets ensemble `b` scores.
pub(crate) fn lead_sets(entries: &[Entry], b: &[bool]) -> LeadSets {
    entries
        .iter()
        .zip(b)
        .filter(|x| *x.1)
        .map(|(e, _)| e.leads)
        .collect()
}

/// The lead sets the zoo can cover at all, each model at once: what every plan must cover.
pub(crate) fn zoo_lead_sets(entries: &[Entry]) -> LeadSets {
    entries.iter().map(|e| e.leads).collect()
}

/// The fastest ensemble covering what the zoo covers: the fastest model for each lead set not
/// yet covered (by batch-1 latency, as the members share the CPU); the fastest model alone when
/// the zoo covers no lead set.
pub(crate) fn fastest_covering(entries: &[Entry]) -> Bits {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by(|&a, &b| entries[a].latency_ms.total_cmp(&entries[b].latency_ms));
    let leads: Vec<LeadSets> = entries.iter().map(|e| e.leads).collect();
    let (mut chosen, _) = split_covering(&leads, &order);
    if chosen.is_empty() {
        chosen.extend(order.first());
    }
    let mut b = vec![false; entries.len()];
    chosen.into_iter().for_each(|i| b[i] = true);
    b
}

/// A method's distance to the exact search's answer for the same goal.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Gap {
    /// The exact answer's validation ROC-AUC minus this one's; in the dual, this latency
    /// minus the exact answer's (ms).
    pub(crate) value: f64,
    /// False when the exact search was cut short: its answer is the best it saw, not a proven
    /// optimum, so the true gap is at least `value`.
    pub(crate) proven: bool,
}

/// One method's result for one goal.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub(crate) method: String,
    pub(crate) goal: Goal,
    /// The latency budget; infinite (`null` in JSON) for the dual.
    pub(crate) budget_ms: f64,
    pub(crate) members: Vec<String>,
    /// The lead sets the chosen ensemble scores.
    pub(crate) lead_sets: LeadSets,
    pub(crate) val_roc_auc: f64,
    pub(crate) val_pr_auc: f64,
    pub(crate) test_roc_auc: f64,
    pub(crate) test_pr_auc: f64,
    /// Youden's threshold on the validation ensemble, applied unchanged to test.
    pub(crate) threshold: Option<f32>,
    pub(crate) val_f1: f64,
    pub(crate) val_accuracy: f64,
    pub(crate) test_f1: f64,
    pub(crate) test_accuracy: f64,
    /// The chosen ensemble's latency by the profiler the search used, ms.
    pub(crate) latency_ms: f64,
    pub(crate) profiler_calls: usize,
    pub(crate) seconds: f64,
    /// False when the exact search ran out of its node budget.
    pub(crate) complete: bool,
    /// How far from the exact search of the same goal, when one ran (set by the report).
    pub(crate) gap_to_exact: Option<Gap>,
    /// Every profiler call of the search, in order.
    pub(crate) trajectory: Vec<Step>,
}

/// Ensembles the exact search may profile before it gives up (the report then says so).
pub(crate) const EXACT_NODES: usize = 10_000;

/// Runs `method` at `budget_ms` with the given latency profiler.
pub(crate) fn run_with(
    entries: &[Entry],
    method: &str,
    budget_ms: f64,
    params: &HolmesParams,
    latency: &mut dyn FnMut(&[bool]) -> f64,
) -> Row {
    run_goal(
        entries,
        method,
        Goal::from(budget_ms),
        params,
        latency,
        &mut |_, _, _| {},
    )
}

/// Runs `method` for `goal` with the given latency profiler; `on_call(calls, accuracy,
/// latency)` hears of each profiler call. Every method must cover the lead sets the zoo
/// covers ([`Profiler::covering`]). The chosen ensemble is scored on validation and
/// test: ROC-AUC, PR-AUC, and F1 and accuracy at the validation ensemble's Youden threshold
/// (the same threshold on test). No feasible ensemble gives an empty one, scored 0.
pub(crate) fn run_goal(
    entries: &[Entry],
    method: &str,
    goal: Goal,
    params: &HolmesParams,
    latency: &mut dyn FnMut(&[bool]) -> f64,
    on_call: &mut dyn FnMut(usize, f64, f64),
) -> Row {
    let n = entries.len();
    let t = Instant::now();
    let val = SplitIndex::new(entries.iter().map(|e| &e.validation));
    let test = SplitIndex::new(entries.iter().map(|e| &e.test));
    let mut prof = Profiler::new(|b: &[bool]| val.score(b).0, &mut *latency)
        .covering(entries.iter().map(|e| e.leads).collect())
        .on_call(on_call);
    let mut complete = true;
    let chosen: Option<Bits> = match method {
        "rd" => search::rd(&mut prof, n, goal, params.seed),
        "af" => search::af(&mut prof, n, goal),
        "lf" => search::lf(&mut prof, n, goal),
        "npo" => search::npo(&mut prof, n, goal, params.budget_calls, params.seed),
        "holmes" => search::holmes(&mut prof, n, goal, params).0,
        "holmes-ucb" => {
            let ucb = HolmesParams {
                explore: 1.0,
                ..*params
            };
            search::holmes(&mut prof, n, goal, &ucb).0
        }
        "exact" => match search::exact(&mut prof, n, goal, EXACT_NODES) {
            Some(b) => b,
            None => {
                complete = false;
                prof.best(goal).map(|x| x.0)
            }
        },
        other => panic!("unknown method {other}"),
    };
    let calls = prof.calls();
    let trajectory = prof.trajectory(goal);
    let b = chosen.unwrap_or_else(|| vec![false; n]);
    let latency_ms = if b.iter().any(|&x| x) {
        prof.profile(&b).1
    } else {
        0.0
    };
    let (vr, vp) = val.score(&b);
    let (tr, tp) = test.score(&b);
    let (vl, vs) = val.ensemble(&b);
    let (tl, ts) = test.ensemble(&b);
    let threshold = youden_threshold(&vl, &vs);
    let at = |l: &[bool], s: &[f32]| match threshold {
        Some(t) => at_threshold(l, s, t),
        None => AtThreshold {
            threshold: f32::NAN,
            f1: f64::NAN,
            accuracy: f64::NAN,
            sensitivity: f64::NAN,
            specificity: f64::NAN,
        },
    };
    let (vm, tm) = (at(&vl, &vs), at(&tl, &ts));
    Row {
        method: method.to_owned(),
        goal,
        budget_ms: match goal {
            Goal::MaxAccuracy { budget_ms } => budget_ms,
            Goal::MinLatency { .. } => f64::INFINITY,
        },
        members: entries
            .iter()
            .zip(&b)
            .filter(|x| *x.1)
            .map(|(e, _)| e.name.clone())
            .collect(),
        lead_sets: lead_sets(entries, &b),
        val_roc_auc: vr,
        val_pr_auc: vp,
        test_roc_auc: tr,
        test_pr_auc: tp,
        threshold,
        val_f1: vm.f1,
        val_accuracy: vm.accuracy,
        test_f1: tm.f1,
        test_accuracy: tm.accuracy,
        latency_ms,
        profiler_calls: calls,
        seconds: t.elapsed().as_secs_f64(),
        complete,
        gap_to_exact: None,
        trajectory,
    }
}

/// Sets each row's gap to the exact search of its goal, when one ran and found an ensemble.
pub(crate) fn set_gaps(rows: &mut [Row]) {
    let exact: Vec<(Goal, f64, f64, bool)> = rows
        .iter()
        .filter(|r| r.method == "exact" && !r.members.is_empty())
        .map(|r| (r.goal, r.val_roc_auc, r.latency_ms, r.complete))
        .collect();
    for r in rows.iter_mut() {
        if let Some(&(g, a, l, proven)) = exact.iter().find(|o| o.0 == r.goal) {
            let value = match g {
                Goal::MaxAccuracy { .. } => a - r.val_roc_auc,
                Goal::MinLatency { .. } if r.members.is_empty() => f64::INFINITY,
                Goal::MinLatency { .. } => r.latency_ms - l,
            };
            r.gap_to_exact = Some(Gap { value, proven });
        }
    }
}

/// Budgets that cover the zoo's range under the latency estimate `latency`: twice the fastest
/// ECG-sized model (models under 1 ms, the vitals models, fit in any budget) or, when it is
/// slower, the fastest ensemble covering the lead sets, so that something is feasible; half of
/// everything at once (at least twice the first); and their geometric mean. `covering` is the
/// zoo's fastest ensemble covering the lead sets, one bit per model.
pub(crate) fn default_budgets_by(covering: &[bool], latency: &dyn Fn(&[bool]) -> f64) -> Vec<f64> {
    let n = covering.len();
    let singles: Vec<f64> = (0..n)
        .map(|i| {
            let mut b = vec![false; n];
            b[i] = true;
            latency(&b)
        })
        .collect();
    let single = singles
        .iter()
        .copied()
        .filter(|&l| l >= 1.0)
        .fold(f64::INFINITY, f64::min);
    let single = if single.is_finite() { single } else { 1.0 };
    // All members at once may overload the beds' schedule (an unbounded queue): then the top
    // is the largest stable ensemble, grown from the fastest model up.
    let mut all = latency(&vec![true; n]);
    if !all.is_finite() {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| singles[a].total_cmp(&singles[b]));
        let mut b = vec![false; n];
        all = 8.0 * single;
        for i in order {
            b[i] = true;
            match latency(&b) {
                l if l.is_finite() => all = l,
                _ => break,
            }
        }
    }
    let lo = match latency(covering) {
        l if l.is_finite() => l.max(2.0 * single),
        _ => 2.0 * single,
    };
    let hi = (all / 2.0).max(2.0 * lo);
    vec![lo, (lo * hi).sqrt(), hi]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zoo::Input;

    /// What the test zoos' models read (no ECG lead: they cover no lead set).
    const HEART_RATE: Input = Input::HeartRate {
        samples: 30,
        sample_rate_hz: 1,
    };

    #[test]
    fn indexed_scoring_matches_the_reference() {
        let p = |ids: &[&str], l: &[u8], pr: &[f32]| Predictions {
            ids: ids.iter().map(|s| s.to_string()).collect(),
            labels: l.to_vec(),
            probs: pr.to_vec(),
        };
        let e = |name: &str, v: Predictions| Entry {
            name: name.into(),
            sha256: String::new(),
            leads: LeadSets::default(),
            input: HEART_RATE,
            validation: v.clone(),
            test: v,
            latency_ms: 1.0,
            profile: None,
        };
        let entries = vec![
            e(
                "a",
                p(
                    &["w1", "w2", "w3", "w4"],
                    &[1, 0, 1, 0],
                    &[0.9, 0.4, 0.3, 0.2],
                ),
            ),
            e("b", p(&["w2", "w3", "w5"], &[0, 1, 1], &[0.1, 0.8, 0.7])),
        ];
        let idx = SplitIndex::new(entries.iter().map(|e| &e.validation));
        for b in [vec![true, false], vec![false, true], vec![true, true]] {
            let (r1, p1) = idx.score(&b);
            let (r2, p2) = accuracy(&entries, &b, false);
            assert!((r1 - r2).abs() < 1e-9 && (p1 - p2).abs() < 1e-9, "{b:?}");
        }
    }

    /// Three models over eight windows: `a` ranks them well, `b` less so, `c` badly.
    fn small_zoo() -> Vec<Entry> {
        let ids: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
        let labels = vec![0, 0, 0, 1, 0, 1, 1, 1];
        let e = |name: &str, probs: [f32; 8], latency_ms: f64| {
            let p = Predictions {
                ids: ids.clone(),
                labels: labels.clone(),
                probs: probs.to_vec(),
            };
            Entry {
                name: name.into(),
                sha256: String::new(),
                leads: LeadSets::default(),
                input: HEART_RATE,
                validation: p.clone(),
                test: p,
                latency_ms,
                profile: None,
            }
        };
        vec![
            e("a", [0.1, 0.2, 0.3, 0.6, 0.4, 0.7, 0.8, 0.9], 10.0),
            e("b", [0.2, 0.5, 0.1, 0.4, 0.6, 0.9, 0.3, 0.8], 5.0),
            e("c", [0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.6, 0.4], 1.0),
        ]
    }

    #[test]
    fn a_row_reports_youden_metrics_its_trajectory_and_its_gap() {
        let entries = small_zoo();
        let lat = |b: &[bool]| {
            b.iter()
                .zip(&entries)
                .filter(|x| *x.0)
                .map(|x| x.1.latency_ms)
                .sum()
        };
        let params = HolmesParams::default();
        let mut calls = 0;
        let mut rows: Vec<Row> = ["lf", "exact"]
            .iter()
            .map(|m| {
                let mut on_call = |_: usize, _: f64, _: f64| calls += 1;
                run_goal(
                    &entries,
                    m,
                    Goal::from(8.0),
                    &params,
                    &mut { lat },
                    &mut on_call,
                )
            })
            .collect();
        assert_eq!(calls, rows.iter().map(|r| r.profiler_calls).sum::<usize>());
        for r in &rows {
            assert_eq!(r.trajectory.len(), r.profiler_calls);
            assert!(r.latency_ms <= 8.0);
        }
        // Exact picks b alone (a alone is over the budget; c ranks badly, so adding it hurts).
        // Down b's
        // scores, 0.9+ 0.8+ 0.6- 0.5- 0.4+ 0.3+ 0.2- 0.1-, Youden's J is highest, 1/2, at 0.8
        // (TPR 1/2, FPR 0) and at 0.3 (TPR 1, FPR 1/2): the higher cut.
        let exact = &rows[1];
        assert_eq!(exact.members, vec!["b"]);
        assert_eq!(exact.threshold, Some(0.8));
        // At 0.8: TP 2, FP 0, FN 2, TN 4: F1 = 4/6, accuracy 6/8; test is the same split here.
        assert!((exact.val_f1 - 2.0 / 3.0).abs() < 1e-12 && exact.val_accuracy == 0.75);
        assert_eq!(
            (exact.test_f1, exact.test_accuracy),
            (exact.val_f1, exact.val_accuracy)
        );
        set_gaps(&mut rows);
        let (lf, exact) = (&rows[0], &rows[1]);
        assert_eq!(
            exact.gap_to_exact,
            Some(Gap {
                value: 0.0,
                proven: true
            })
        );
        let g = lf.gap_to_exact.unwrap();
        assert!(g.proven && (g.value - (exact.val_roc_auc - lf.val_roc_auc)).abs() < 1e-12);
        assert!(
            g.value > 0.0,
            "LF took c first, then b, and stopped: {:?}",
            lf.members
        );
    }

    #[test]
    fn every_method_composes_an_ensemble_that_covers_both_leads() {
        // a and b read the secondary lead, c the primary one (and ranks badly).
        let mut entries = small_zoo();
        let lead = |l| {
            LeadSets::of_input(&crate::zoo::Input::Ecg {
                lead: l,
                samples: 2500,
                sample_rate_hz: 250,
                bandpass: false,
            })
        };
        entries[0].leads = lead(crate::zoo::Lead::Secondary);
        entries[1].leads = lead(crate::zoo::Lead::Secondary);
        entries[2].leads = lead(crate::zoo::Lead::Primary);
        let lat = |b: &[bool]| -> f64 {
            b.iter()
                .zip(&small_zoo())
                .filter(|x| *x.0)
                .map(|x| x.1.latency_ms)
                .sum()
        };
        let params = HolmesParams::default();
        for m in crate::config::METHODS {
            let row = run_goal(
                &entries,
                m,
                Goal::from(15.0),
                &params,
                &mut { lat },
                &mut |_, _, _| {},
            );
            assert!(
                row.members.contains(&"c".to_owned()),
                "{m}: {:?}",
                row.members
            );
            assert_eq!(row.lead_sets, LeadSets::ALL, "{m}");
            assert!(row.trajectory.iter().all(|s| !s.feasible || s.covers_leads));
        }
        // Nothing fits: the fallback is the fastest model of each lead.
        assert_eq!(fastest_covering(&entries), vec![false, true, true]);
        assert_eq!(zoo_lead_sets(&entries), LeadSets::ALL);
        // A zoo that covers no lead set (vitals only): the fastest model alone.
        let vitals = small_zoo();
        assert_eq!(fastest_covering(&vitals), vec![false, false, true]);
        assert_eq!(zoo_lead_sets(&vitals), LeadSets::default());
    }

    #[test]
    fn estimators_agree_where_they_should() {
        let entries = small_zoo();
        let engine = crate::config::Config::default().engine;
        let mut m = LatencyModel::new(&entries, &engine, 64, 30.0, Beside::NONE, Estimator::Des);
        // 64 beds over 30 s leave 469 ms between windows: no queueing in the simulation. One
        // core: the members' times add up; three cores: the slowest decides.
        m.des.cores = 1;
        assert!((m.estimate(&[true, true, false]) - 15.0).abs() < 1e-9);
        assert!((m.service_ms(Estimator::Netcalc, &[true, true, false]) - 15.0).abs() < 1e-9);
        m.des.cores = 3;
        assert!((m.estimate(&[true, true, true]) - 10.0).abs() < 1e-9);
        // The bound charges the service time twice (latency plus a window at the rate).
        assert!((m.by(Estimator::Netcalc, &[true, false, false]) - 20.0).abs() < 1e-9);
        // What serves beside the members (a beat counter reading 3 ms a window) costs every
        // window: added to theirs on one core, run beside them on three.
        let pair = [true, true, false];
        let three = Beside {
            p95_ms: 3.0,
            p50_ms: 3.0,
        };
        let mut c = LatencyModel::new(&entries, &engine, 64, 30.0, three, Estimator::Des);
        assert!(c.by(Estimator::Netcalc, &pair) > m.by(Estimator::Netcalc, &pair));
        assert!((c.service_ms(Estimator::Netcalc, &pair) - 18.0).abs() < 1e-9);
        c.des.cores = 1;
        assert!((c.estimate(&pair) - 18.0).abs() < 1e-9);
        c.des.cores = 3;
        assert!((c.estimate(&pair) - 10.0).abs() < 1e-9);
    }
}
