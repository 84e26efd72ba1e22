//! Ensemble search: HOLMES (Algorithms 1 and 2: random-forest surrogates for accuracy and
//! latency, genetic exploration, greedy top-K profiling under the hard latency constraint), the
//! baselines of section 4.2 (RD, AF, LF, NPO), an exact optimum by branch and bound, and an
//! uncertainty-aware acquisition as an option (our extension).
//!
//! Every method solves either problem of [`Goal`]: the paper's (highest accuracy within a
//! latency budget) or its dual of appendix A.6 (lowest latency reaching an accuracy floor).
//! Either way an ensemble must also cover the lead sets the [`Profiler`] requires (our
//! extension: every bed gets a score whatever leads its monitor sends); each method reads
//! feasibility from it ([`Profiler::feasible`]). The [`Profiler`] counts, caches and records
//! every call; [`compose`](super::compose) supplies the accuracy and latency profilers and the
//! members' lead sets, and [`report`](super::report) reads the record.

use std::cmp::Ordering;
use std::collections::HashSet;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::config::HolmesParams;
use smartcore::ensemble::random_forest_regressor::{
    RandomForestRegressor, RandomForestRegressorParameters,
};
use smartcore::linalg::basic::matrix::DenseMatrix;

pub(crate) use super::profiler::{Bits, Goal, Profiler, Step};

/// A random non-empty ensemble.
pub(crate) fn random_bits(n: usize, rng: &mut SmallRng) -> Bits {
    loop {
        let b: Bits = (0..n).map(|_| rng.random_bool(0.5)).collect();
        if b.iter().any(|&x| x) {
            return b;
        }
    }
}

/// Flips `degree` distinct random bits.
pub(crate) fn mutate(b: &[bool], degree: usize, rng: &mut SmallRng) -> Bits {
    let mut out = b.to_vec();
    let mut idx: Vec<usize> = (0..b.len()).collect();
    idx.shuffle(rng);
    for &i in idx.iter().take(degree.min(b.len())) {
        out[i] = !out[i];
    }
    out
}

/// Single-point recombination of two parents.
pub(crate) fn recombine(a: &[bool], b: &[bool], rng: &mut SmallRng) -> Bits {
    let cut = rng.random_range(1..a.len().max(2));
    a[..cut.min(a.len())]
        .iter()
        .chain(&b[cut.min(b.len())..])
        .copied()
        .collect()
}

/// Algorithm 2's exploration: `m` new candidates (random, mutated, recombined), never a
/// duplicate of each other or of `seen`, never empty.
pub(crate) fn explore(
    seen: &[Bits],
    n: usize,
    m: usize,
    params: &HolmesParams,
    rng: &mut SmallRng,
) -> Vec<Bits> {
    let known: HashSet<&Bits> = seen.iter().collect();
    let mut out: Vec<Bits> = Vec::new();
    let mut fresh: HashSet<Bits> = HashSet::new();
    let space = if n >= 63 {
        usize::MAX
    } else {
        (1usize << n) - 1
    };
    let want = m.min(space.saturating_sub(known.len()));
    let mut tries = 0;
    while out.len() < want && tries < m * 50 {
        tries += 1;
        let c = if seen.is_empty() || !rng.random_bool(params.p) {
            random_bits(n, rng)
        } else if rng.random_bool(params.q) {
            mutate(
                &seen[rng.random_range(0..seen.len())],
                params.mutation_degree,
                rng,
            )
        } else {
            let a = &seen[rng.random_range(0..seen.len())];
            let b = &seen[rng.random_range(0..seen.len())];
            recombine(a, b, rng)
        };
        if c.iter().any(|&x| x) && !known.contains(&c) && fresh.insert(c.clone()) {
            out.push(c);
        }
    }
    out
}

/// A bag of single-tree forests, so the spread across trees is available.
struct Forest(Vec<RandomForestRegressor<f64, f64, DenseMatrix<f64>, Vec<f64>>>);

fn matrix(rows: &[Bits]) -> DenseMatrix<f64> {
    let v: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| r.iter().map(|&x| f64::from(u8::from(x))).collect())
        .collect();
    DenseMatrix::from_2d_vec(&v).expect("a rectangular matrix")
}

impl Forest {
    fn fit(x: &[Bits], y: &[f64], trees: usize, seed: u64) -> Option<Forest> {
        let m = matrix(x);
        let y = y.to_vec();
        let mut out = Vec::new();
        for t in 0..trees {
            let p = RandomForestRegressorParameters::default()
                .with_n_trees(1)
                .with_seed(seed + t as u64)
                .with_min_samples_leaf(1);
            out.push(RandomForestRegressor::fit(&m, &y, p).ok()?);
        }
        Some(Forest(out))
    }

    /// Mean and spread across trees for each row.
    fn predict(&self, x: &[Bits]) -> Vec<(f64, f64)> {
        let m = matrix(x);
        let per: Vec<Vec<f64>> = self.0.iter().filter_map(|t| t.predict(&m).ok()).collect();
        (0..x.len())
            .map(|i| {
                let v: Vec<f64> = per.iter().map(|p| p[i]).collect();
                let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
                let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>()
                    / v.len().max(1) as f64)
                    .sqrt();
                (mean, sd)
            })
            .collect()
    }
}

/// Adds models in `order` one at a time (RD, AF, LF): while the ensemble stays within the
/// budget, returning the last feasible ensemble; in the dual, until it reaches the accuracy
/// floor, returning the first feasible one. Under the lead constraint the order is made
/// [coverage-first](Profiler::coverage_first), so the ensemble covers the lead sets as soon
/// as it can and ensembles before that are passed over.
pub(crate) fn greedy(
    prof: &mut Profiler<'_>,
    order: &[usize],
    n: usize,
    goal: impl Into<Goal>,
) -> Option<Bits> {
    let goal = goal.into();
    let mut cur = vec![false; n];
    let mut best = None;
    for i in prof.coverage_first(order) {
        cur[i] = true;
        let (a, l) = prof.profile(&cur);
        let feasible = prof.feasible(goal, &cur, a, l);
        match goal {
            // Over the budget: a larger ensemble is no faster.
            Goal::MaxAccuracy { .. } if !goal.feasible(a, l) => break,
            Goal::MaxAccuracy { .. } if feasible => best = Some(cur.clone()),
            Goal::MinLatency { .. } if feasible => return Some(cur),
            Goal::MaxAccuracy { .. } | Goal::MinLatency { .. } => {}
        }
    }
    best
}

/// Single-model profiles, the starting information of AF and LF.
fn singles(prof: &mut Profiler<'_>, n: usize) -> Vec<(f64, f64)> {
    (0..n)
        .map(|i| {
            let mut b = vec![false; n];
            b[i] = true;
            prof.profile(&b)
        })
        .collect()
}

pub(crate) fn rd(
    prof: &mut Profiler<'_>,
    n: usize,
    goal: impl Into<Goal>,
    seed: u64,
) -> Option<Bits> {
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(seed));
    greedy(prof, &order, n, goal)
}

pub(crate) fn af(prof: &mut Profiler<'_>, n: usize, goal: impl Into<Goal>) -> Option<Bits> {
    let s = singles(prof, n);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| s[b].0.total_cmp(&s[a].0));
    greedy(prof, &order, n, goal)
}

pub(crate) fn lf(prof: &mut Profiler<'_>, n: usize, goal: impl Into<Goal>) -> Option<Bits> {
    let s = singles(prof, n);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| s[a].1.total_cmp(&s[b].1));
    greedy(prof, &order, n, goal)
}

/// NPO: random subsets (at most as many models as LF chose; in the dual, all models when LF
/// never reached the floor) merged into the explored set until the call budget is spent; the
/// best feasible profiled ensemble wins.
pub(crate) fn npo(
    prof: &mut Profiler<'_>,
    n: usize,
    goal: impl Into<Goal>,
    calls: usize,
    seed: u64,
) -> Option<Bits> {
    let goal = goal.into();
    let warm = [
        rd(prof, n, goal, seed),
        af(prof, n, goal),
        lf(prof, n, goal),
    ];
    let unreached = match goal {
        Goal::MaxAccuracy { .. } => 1,
        Goal::MinLatency { .. } => n,
    };
    let max_size = warm[2]
        .as_ref()
        .map_or(unreached, |b| b.iter().filter(|&&x| x).count())
        .max(1);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9e37);
    let mut stale = 0;
    while prof.calls() < calls && stale < 1000 {
        let k = rng.random_range(1..=max_size);
        let mut idx: Vec<usize> = (0..n).collect();
        idx.shuffle(&mut rng);
        let mut b = vec![false; n];
        for &i in idx.iter().take(k) {
            b[i] = true;
        }
        let before = prof.calls();
        prof.profile(&b);
        stale = if prof.calls() == before { stale + 1 } else { 0 };
    }
    prof.best(goal).map(|x| x.0)
}

/// HOLMES: warm start from RD, AF and LF, then fit surrogates, explore, score under the hard
/// constraint, profile the top K, until the call budget is spent. Returns the best feasible
/// profiled ensemble and the objective of the best after each iteration (accuracy; in the dual
/// latency, infinite before the floor is reached).
///
/// In the dual, candidates predicted to reach the accuracy floor are ranked by predicted
/// latency, fastest first; the rest follow, most accurate first.
pub(crate) fn holmes(
    prof: &mut Profiler<'_>,
    n: usize,
    goal: impl Into<Goal>,
    params: &HolmesParams,
) -> (Option<Bits>, Vec<(usize, f64)>) {
    let goal = goal.into();
    let mut rng = SmallRng::seed_from_u64(params.seed);
    rd(prof, n, goal, params.seed);
    af(prof, n, goal);
    lf(prof, n, goal);
    let best_objective = |prof: &Profiler<'_>| match (goal, prof.best(goal)) {
        (_, Some(b)) => goal.objective(b.1, b.2),
        (Goal::MaxAccuracy { .. }, None) => 0.0,
        (Goal::MinLatency { .. }, None) => f64::INFINITY,
    };
    let mut trajectory = vec![(prof.calls(), best_objective(prof))];
    let mut iter = 0u64;
    while prof.calls() < params.budget_calls {
        iter += 1;
        let xs: Vec<Bits> = prof.profiled.iter().map(|p| p.0.clone()).collect();
        let acc: Vec<f64> = prof.profiled.iter().map(|p| p.1).collect();
        // Unbounded latencies are clipped so the forest can fit them.
        let cap = match goal {
            Goal::MaxAccuracy { budget_ms } => budget_ms * 100.0,
            Goal::MinLatency { .. } => {
                let finite = prof.profiled.iter().map(|p| p.2).filter(|l| l.is_finite());
                finite.fold(1.0f64, f64::max) * 100.0
            }
        };
        let lat: Vec<f64> = prof.profiled.iter().map(|p| p.2.min(cap)).collect();
        let cands = explore(&xs, n, params.candidates, params, &mut rng);
        if cands.is_empty() {
            break;
        }
        // Lead coverage is known exactly, not predicted.
        let covers: Vec<bool> = cands.iter().map(|c| prof.covers(c)).collect();
        // (predicted feasible, score, index): feasible first, then by score.
        let scored: Vec<(bool, f64, usize)> = match (
            Forest::fit(&xs, &acc, params.trees, params.seed + iter * 1000),
            Forest::fit(&xs, &lat, params.trees, params.seed + iter * 1000 + 500),
        ) {
            (Some(fa), Some(fl)) => {
                let pa = fa.predict(&cands);
                let pl = fl.predict(&cands);
                let ucb = |i: usize| pa[i].0 + params.explore * pa[i].1;
                (0..cands.len())
                    .map(|i| match goal {
                        // Hard constraints: predicted-infeasible candidates, and those missing
                        // a lead set, score 0.
                        Goal::MaxAccuracy { budget_ms } if covers[i] && pl[i].0 <= budget_ms => {
                            (true, ucb(i), i)
                        }
                        Goal::MaxAccuracy { .. } => (false, 0.0, i),
                        Goal::MinLatency { min_accuracy }
                            if covers[i] && ucb(i) >= min_accuracy =>
                        {
                            (true, -(pl[i].0 - params.explore * pl[i].1), i)
                        }
                        Goal::MinLatency { .. } => (false, ucb(i), i),
                    })
                    .collect()
            }
            _ => (0..cands.len())
                .map(|i| (covers[i], rng.random::<f64>(), i))
                .collect(),
        };
        let mut order = scored;
        order.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
        for &(_, _, i) in order.iter().take(params.top_k) {
            if prof.calls() >= params.budget_calls {
                break;
            }
            prof.profile(&cands[i]);
        }
        trajectory.push((prof.calls(), best_objective(prof)));
    }
    (prof.best(goal).map(|b| b.0), trajectory)
}

/// The exact optimum by branch and bound over ensembles, ordered by model index; a branch is
/// cut when adding models can only raise the latency above the budget (latency must grow with
/// the ensemble, which holds for the profilers here: members share the CPU). In the dual a
/// branch is cut once it is feasible (reaches the accuracy floor and covers the lead sets) or
/// is already slower than the best found. Lead coverage cuts no branch (adding a model can
/// only add lead sets); it decides which ensembles may be the best.
/// Feasible only for small zoos: `max_nodes` bounds the work and `None` says it was not enough.
pub(crate) fn exact(
    prof: &mut Profiler<'_>,
    n: usize,
    goal: impl Into<Goal>,
    max_nodes: usize,
) -> Option<Option<Bits>> {
    let budget = match goal.into() {
        Goal::MaxAccuracy { budget_ms } => budget_ms,
        Goal::MinLatency { min_accuracy } => {
            return exact_min_latency(prof, n, min_accuracy, max_nodes);
        }
    };
    let mut nodes = 0usize;
    let mut best: Option<(Bits, f64)> = None;
    let mut stack: Vec<(Bits, usize)> = vec![(vec![false; n], 0)];
    while let Some((cur, next)) = stack.pop() {
        for i in next..n {
            nodes += 1;
            if nodes > max_nodes {
                return None;
            }
            let mut b = cur.clone();
            b[i] = true;
            let (a, l) = prof.profile(&b);
            if l > budget {
                continue;
            }
            if prof.covers(&b) && best.as_ref().is_none_or(|x| a > x.1) {
                best = Some((b.clone(), a));
            }
            stack.push((b, i + 1));
        }
    }
    Some(best.map(|b| b.0))
}

/// [`exact`] for the dual: the fastest ensemble with accuracy at least `min_accuracy`.
fn exact_min_latency(
    prof: &mut Profiler<'_>,
    n: usize,
    min_accuracy: f64,
    max_nodes: usize,
) -> Option<Option<Bits>> {
    let goal = Goal::MinLatency { min_accuracy };
    let mut nodes = 0usize;
    let mut best: Option<(Bits, f64, f64)> = None;
    let mut stack: Vec<(Bits, usize)> = vec![(vec![false; n], 0)];
    while let Some((cur, next)) = stack.pop() {
        for i in next..n {
            nodes += 1;
            if nodes > max_nodes {
                return None;
            }
            let mut b = cur.clone();
            b[i] = true;
            let (a, l) = prof.profile(&b);
            // Supersets are no faster: nothing below a slower node can win.
            if best.as_ref().is_some_and(|x| l > x.2) {
                continue;
            }
            if prof.feasible(goal, &b, a, l) {
                if best
                    .as_ref()
                    .is_none_or(|x| goal.compare((a, l), (x.1, x.2)) == Ordering::Greater)
                {
                    best = Some((b, a, l));
                }
                continue;
            }
            stack.push((b, i + 1));
        }
    }
    Some(best.map(|b| b.0))
}

#[cfg(test)]
mod tests;
