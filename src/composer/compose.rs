//! `holmes compose`: the zoo's accuracy profiles (validation predictions from the manifests),
//! a fast latency estimate from stored profiles and the network-calculus bound, and a table of
//! every method at every budget (HOLMES section 4.2.1).

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::netcalc;
use super::search::{self, Bits, HolmesParams, Profiler};
use crate::evaluation::{ensemble_mean, pr_auc, roc_auc};
use crate::zoo::{self, Predictions};

/// One zoo model as the composer sees it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub validation: Predictions,
    pub test: Predictions,
    /// Service time of one window on the CPU (p95 at batch 1), ms.
    pub latency_ms: f64,
}

/// One split's predictions of every model, indexed by window for fast ensembling.
#[derive(Debug, Clone, Default)]
pub struct SplitIndex {
    labels: Vec<bool>,
    /// Per model: (window index, probability).
    preds: Vec<Vec<(u32, f32)>>,
}

impl SplitIndex {
    pub fn new<'a>(preds: impl Iterator<Item = &'a Predictions>) -> SplitIndex {
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
    pub fn score(&self, b: &[bool]) -> (f64, f64) {
        let mut sum = vec![0.0f64; self.labels.len()];
        let mut cnt = vec![0u16; self.labels.len()];
        for (m, p) in self.preds.iter().enumerate() {
            if !b[m] {
                continue;
            }
            for &(k, pr) in p {
                sum[k as usize] += pr as f64;
                cnt[k as usize] += 1;
            }
        }
        let (mut l, mut s) = (Vec::new(), Vec::new());
        for k in 0..sum.len() {
            if cnt[k] > 0 {
                l.push(self.labels[k]);
                s.push((sum[k] / cnt[k] as f64) as f32);
            }
        }
        let (r, p) = (roc_auc(&l, &s), pr_auc(&l, &s));
        (
            if r.is_nan() { 0.0 } else { r },
            if p.is_nan() { 0.0 } else { p },
        )
    }
}

/// Loads every valid model of the zoo with its latency: from stored profiles when present,
/// else measured now (batch 1, a few runs) and stored.
pub fn load_zoo(dir: &Path, db: &Path) -> anyhow::Result<Vec<Entry>> {
    let (models, _bad) = zoo::load_dir::<burn::backend::Flex>(dir, &Default::default())?;
    let cpu = crate::engine::device::Device::cpu();
    let mut out = Vec::new();
    for m in models {
        let mf = &m.manifest;
        let stored = crate::profile::load_profiles(db, &mf.name, &mf.weights.sha256)?
            .into_iter()
            .find(|p| p.device == "cpu")
            .and_then(|p| p.points.iter().find(|x| x.batch == 1).map(|x| x.p95_ms));
        let latency_ms = match stored {
            Some(l) => l,
            None => {
                let opts = crate::profile::ProfileOptions {
                    max_batch: 1,
                    warmup: 1,
                    min_repeats: 5,
                    max_repeats: 20,
                    budget: std::time::Duration::from_millis(500),
                };
                let p = crate::profile::profile_model(&m.dir, &cpu, &opts)?;
                crate::profile::store_profile(db, &p)?;
                p.points[0].p95_ms
            }
        };
        out.push(Entry {
            name: mf.name.clone(),
            validation: mf
                .predictions
                .get("validation")
                .cloned()
                .unwrap_or_default(),
            test: mf.predictions.get("test").cloned().unwrap_or_default(),
            latency_ms,
        });
    }
    Ok(out)
}

/// ROC-AUC and PR-AUC of the mean-probability ensemble `b` on a split (the slow reference
/// path, kept for checking [`SplitIndex::score`]).
pub fn accuracy(entries: &[Entry], b: &[bool], test: bool) -> (f64, f64) {
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

/// Estimated end-to-end latency (ms) of ensemble `b` for `beds` beds staggered over `hop_s`:
/// the members share the CPU, so a window takes the sum of their service times, and queueing
/// adds the network-calculus bound.
pub fn latency_estimate(entries: &[Entry], b: &[bool], beds: usize, hop_s: f64) -> f64 {
    let ts: f64 = entries
        .iter()
        .zip(b)
        .filter(|x| *x.1)
        .map(|(e, _)| e.latency_ms)
        .sum::<f64>()
        / 1000.0;
    if ts <= 0.0 {
        return 0.0;
    }
    netcalc::delay_bound(&netcalc::staggered(beds, hop_s), hop_s, 1.0 / ts, ts) * 1000.0
}

/// One method's result at one budget.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub method: String,
    pub budget_ms: f64,
    pub members: Vec<String>,
    pub val_roc_auc: f64,
    pub val_pr_auc: f64,
    pub test_roc_auc: f64,
    pub test_pr_auc: f64,
    pub latency_ms: f64,
    pub profiler_calls: usize,
    pub seconds: f64,
    /// False when the exact search ran out of its node budget.
    pub complete: bool,
}

/// Ensembles the exact search may profile before it gives up (the report then says so).
pub const EXACT_NODES: usize = 10_000;

pub const METHODS: [&str; 7] = ["rd", "af", "lf", "npo", "holmes", "holmes-ucb", "exact"];

/// Runs `method` at `budget_ms` with the fast latency estimate.
pub fn run(
    entries: &[Entry],
    method: &str,
    budget_ms: f64,
    beds: usize,
    hop_s: f64,
    params: &HolmesParams,
) -> Row {
    run_with(entries, method, budget_ms, params, &mut |b: &[bool]| {
        latency_estimate(entries, b, beds, hop_s)
    })
}

/// Runs `method` at `budget_ms` with the given latency profiler.
pub fn run_with(
    entries: &[Entry],
    method: &str,
    budget_ms: f64,
    params: &HolmesParams,
    latency: &mut dyn FnMut(&[bool]) -> f64,
) -> Row {
    let n = entries.len();
    let t = Instant::now();
    let val = SplitIndex::new(entries.iter().map(|e| &e.validation));
    let test = SplitIndex::new(entries.iter().map(|e| &e.test));
    let mut prof = Profiler::new(|b: &[bool]| val.score(b).0, &mut *latency);
    let mut complete = true;
    let chosen: Option<Bits> = match method {
        "rd" => search::rd(&mut prof, n, budget_ms, params.seed),
        "af" => search::af(&mut prof, n, budget_ms),
        "lf" => search::lf(&mut prof, n, budget_ms),
        "npo" => search::npo(&mut prof, n, budget_ms, params.budget_calls, params.seed),
        "holmes" => search::holmes(&mut prof, n, budget_ms, params).0,
        "holmes-ucb" => {
            search::holmes(
                &mut prof,
                n,
                budget_ms,
                &HolmesParams {
                    explore: 1.0,
                    ..*params
                },
            )
            .0
        }
        "exact" => match search::exact(&mut prof, n, budget_ms, EXACT_NODES) {
            Some(b) => b,
            None => {
                complete = false;
                prof.best(budget_ms).map(|x| x.0)
            }
        },
        other => panic!("unknown method {other}"),
    };
    let calls = prof.calls();
    let b = chosen.unwrap_or_else(|| vec![false; n]);
    let (vr, vp) = val.score(&b);
    let (tr, tp) = test.score(&b);
    Row {
        method: method.to_owned(),
        budget_ms,
        members: entries
            .iter()
            .zip(&b)
            .filter(|x| *x.1)
            .map(|(e, _)| e.name.clone())
            .collect(),
        val_roc_auc: vr,
        val_pr_auc: vp,
        test_roc_auc: tr,
        test_pr_auc: tp,
        latency_ms: prof.profile(&b).1,
        profiler_calls: calls,
        seconds: t.elapsed().as_secs_f64(),
        complete,
    }
}

/// Budgets that cover the zoo's range: twice the fastest ECG-sized model (models under 1 ms,
/// the vitals models, fit in any budget), half of everything at once, and their geometric
/// mean.
pub fn default_budgets(entries: &[Entry], beds: usize, hop_s: f64) -> Vec<f64> {
    let n = entries.len();
    let single = (0..n)
        .map(|i| {
            let mut b = vec![false; n];
            b[i] = true;
            latency_estimate(entries, &b, beds, hop_s)
        })
        .filter(|&l| l >= 1.0)
        .fold(f64::INFINITY, f64::min);
    let single = if single.is_finite() { single } else { 1.0 };
    // All members at once may overload the beds' schedule (an unbounded queue): then the
    // top budget is what the largest stable ensemble of singles would need.
    let all = latency_estimate(entries, &vec![true; n], beds, hop_s);
    let all = if all.is_finite() { all } else { 8.0 * single };
    let (lo, hi) = (2.0 * single, (all / 2.0).max(4.0 * single));
    vec![lo, (lo * hi).sqrt(), hi]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexed_scoring_matches_the_reference() {
        let p = |ids: &[&str], l: &[u8], pr: &[f32]| Predictions {
            ids: ids.iter().map(|s| s.to_string()).collect(),
            labels: l.to_vec(),
            probs: pr.to_vec(),
        };
        let e = |name: &str, v: Predictions| Entry {
            name: name.into(),
            validation: v.clone(),
            test: v,
            latency_ms: 1.0,
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
}
