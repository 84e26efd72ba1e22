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

pub(crate) use super::profiler::{Goal, Profiler, Step};

/// An ensemble: one bit per zoo model.
pub(crate) type Bits = Vec<bool>;

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
mod tests {
    use super::*;
    use crate::zoo::LeadSets;

    #[test]
    fn genetic_operators_never_emit_duplicates_or_empty_ensembles() {
        let mut rng = SmallRng::seed_from_u64(1);
        let params = HolmesParams::default();
        let seen: Vec<Bits> = (0..20).map(|_| random_bits(8, &mut rng)).collect();
        let c = explore(&seen, 8, 200, &params, &mut rng);
        let set: HashSet<&Bits> = c.iter().collect();
        assert_eq!(set.len(), c.len(), "no duplicates among candidates");
        assert!(c.iter().all(|b| b.iter().any(|&x| x)), "no empty ensemble");
        assert!(
            c.iter().all(|b| !seen.contains(b)),
            "nothing already profiled"
        );
        // A tiny space is exhausted without looping forever.
        let all = explore(&[], 3, 100, &params, &mut rng);
        assert_eq!(all.len(), 7);
    }

    /// A synthetic zoo where the optimum is known: model i has latency (i + 1) ms and gain
    /// depending on i; accuracy is the sum of gains (diminishing), so the best ensemble under
    /// a budget is computable by brute force.
    fn synthetic(n: usize) -> (Vec<f64>, Vec<f64>) {
        let lat: Vec<f64> = (0..n).map(|i| 1.0 + i as f64).collect();
        let gain: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 13) as f64 / 13.0 + 0.1)
            .collect();
        (lat, gain)
    }

    fn acc_of(gain: &[f64], b: &[bool]) -> f64 {
        let s: f64 = b.iter().zip(gain).filter(|x| *x.0).map(|x| x.1).sum();
        1.0 - (-s).exp()
    }

    fn lat_of(lat: &[f64], b: &[bool]) -> f64 {
        b.iter().zip(lat).filter(|x| *x.0).map(|x| x.1).sum()
    }

    #[test]
    fn search_finds_the_known_optimum_of_a_synthetic_zoo() {
        let n = 12;
        let (lat, gain) = synthetic(n);
        let budget = 20.0;
        // Brute force.
        let mut opt = 0.0f64;
        for mask in 1u32..(1 << n) {
            let b: Bits = (0..n).map(|i| mask >> i & 1 == 1).collect();
            if lat_of(&lat, &b) <= budget {
                opt = opt.max(acc_of(&gain, &b));
            }
        }
        let mut p = Profiler::new(|b: &[bool]| acc_of(&gain, b), |b: &[bool]| lat_of(&lat, b));
        let ex = exact(&mut p, n, budget, 1 << 20)
            .expect("small enough")
            .unwrap();
        assert!(
            (acc_of(&gain, &ex) - opt).abs() < 1e-12,
            "branch and bound is exact"
        );
        let params = HolmesParams {
            budget_calls: 300,
            candidates: 300,
            ..HolmesParams::default()
        };
        let mut p = Profiler::new(|b: &[bool]| acc_of(&gain, b), |b: &[bool]| lat_of(&lat, b));
        let (h, traj) = holmes(&mut p, n, budget, &params);
        let h = h.unwrap();
        assert!(lat_of(&lat, &h) <= budget);
        assert!(
            (acc_of(&gain, &h) - opt).abs() < 1e-9,
            "HOLMES reached the optimum {opt} within {} calls",
            p.calls()
        );
        assert!(
            traj.windows(2).all(|w| w[1].1 >= w[0].1),
            "best accuracy never drops"
        );
        assert!(p.calls() <= 300);
    }

    #[test]
    fn the_dual_finds_the_fastest_ensemble_reaching_the_floor() {
        let n = 12;
        let (lat, gain) = synthetic(n);
        let floor = 0.95;
        let goal = Goal::MinLatency {
            min_accuracy: floor,
        };
        // Brute force: the lowest latency among ensembles at or above the floor.
        let mut opt = f64::INFINITY;
        for mask in 1u32..(1 << n) {
            let b: Bits = (0..n).map(|i| mask >> i & 1 == 1).collect();
            if acc_of(&gain, &b) >= floor {
                opt = opt.min(lat_of(&lat, &b));
            }
        }
        assert!(opt.is_finite() && opt > 3.0, "a non-trivial floor: {opt}");
        let mut p = Profiler::new(|b: &[bool]| acc_of(&gain, b), |b: &[bool]| lat_of(&lat, b));
        let ex = exact(&mut p, n, goal, 1 << 20)
            .expect("small enough")
            .unwrap();
        assert!(acc_of(&gain, &ex) >= floor);
        assert_eq!(
            lat_of(&lat, &ex),
            opt,
            "branch and bound over latency is exact"
        );
        let exact_calls = p.calls();
        assert!(exact_calls < (1 << n) - 1, "it cut branches: {exact_calls}");

        let params = HolmesParams {
            budget_calls: 300,
            candidates: 300,
            ..HolmesParams::default()
        };
        let mut p = Profiler::new(|b: &[bool]| acc_of(&gain, b), |b: &[bool]| lat_of(&lat, b));
        let (h, traj) = holmes(&mut p, n, goal, &params);
        let h = h.unwrap();
        assert!(acc_of(&gain, &h) >= floor);
        assert_eq!(lat_of(&lat, &h), opt, "HOLMES reached the dual optimum");
        assert!(
            traj.windows(2).all(|w| w[1].1 <= w[0].1),
            "best latency never rises"
        );
        // The baselines stop at the first ensemble reaching the floor.
        let mut p = Profiler::new(|b: &[bool]| acc_of(&gain, b), |b: &[bool]| lat_of(&lat, b));
        let a = af(&mut p, n, goal).unwrap();
        assert!(acc_of(&gain, &a) >= floor && lat_of(&lat, &a) >= opt);
        let mut without_last = a.clone();
        let last = (0..n)
            .filter(|&i| a[i])
            .max_by(|&x, &y| gain[x].total_cmp(&gain[y]).reverse())
            .unwrap();
        without_last[last] = false;
        assert!(
            acc_of(&gain, &without_last) < floor,
            "AF stopped at the floor"
        );
    }

    /// Six models of equal latency: three secondary-lead ones that rank well, two primary-lead
    /// ones that rank badly and a vitals one in between.
    fn two_lead_zoo() -> (Vec<LeadSets>, Vec<f64>, Vec<f64>) {
        let (p, s) = (
            LeadSets {
                primary_only: true,
                secondary_only: false,
                both: true,
            },
            LeadSets {
                primary_only: false,
                secondary_only: true,
                both: true,
            },
        );
        let leads = vec![s, s, s, p, p, LeadSets::default()];
        (leads, vec![1.0; 6], vec![0.9, 0.8, 0.7, 0.2, 0.1, 0.5])
    }

    fn bits(members: &[usize]) -> Bits {
        (0..6).map(|i| members.contains(&i)).collect()
    }

    #[test]
    fn every_method_covers_both_leads_when_the_best_ensemble_would_not() {
        let (leads, lat, gain) = two_lead_zoo();
        let params = HolmesParams {
            budget_calls: 63,
            candidates: 100,
            ..HolmesParams::default()
        };
        let free = || Profiler::new(|b: &[bool]| acc_of(&gain, b), |b: &[bool]| lat_of(&lat, b));
        let bound = || free().covering(leads.clone());
        // Three models fit. Unconstrained, the best three are the secondary-lead ones: a
        // monitor sending lead II alone would get no score.
        let budget = 3.0;
        let unconstrained = exact(&mut free(), 6, budget, 1000).unwrap().unwrap();
        assert_eq!(unconstrained, bits(&[0, 1, 2]));
        let mut p = bound();
        assert!(!p.covers(&unconstrained) && !p.covers(&bits(&[0, 1, 5])));
        // Constrained, the best covering ensemble trades the third for the best primary one.
        let best = bits(&[0, 1, 3]);
        assert_eq!(exact(&mut p, 6, budget, 1000).unwrap().unwrap(), best);
        let t = p.trajectory(budget);
        let step = t.iter().find(|s| s.members == "111000").unwrap();
        assert!(!step.covers_leads && !step.feasible, "{step:?}");
        assert_eq!(holmes(&mut bound(), 6, budget, &params).0.unwrap(), best);
        // AF and LF put the best (fastest) secondary and primary models first.
        assert_eq!(af(&mut bound(), 6, budget).unwrap(), best);
        assert_eq!(lf(&mut bound(), 6, budget).unwrap(), best);
        for seed in 0..8 {
            let r = rd(&mut bound(), 6, budget, seed).unwrap();
            let n = npo(&mut bound(), 6, budget, 40, seed).unwrap();
            for b in [r, n] {
                assert!(bound().covers(&b) && lat_of(&lat, &b) <= budget, "{b:?}");
            }
        }
        // One model fits: nothing covers both leads, so nothing is feasible.
        assert_eq!(exact(&mut bound(), 6, 1.0, 1000).unwrap(), None);
        assert_eq!(af(&mut bound(), 6, 1.0), None);
        assert_eq!(holmes(&mut bound(), 6, 1.0, &params).0, None);

        // The dual: the fastest ensemble reaching the floor is a pair of secondary-lead models
        // unconstrained; constrained, the only covering pair that reaches it.
        let goal = Goal::MinLatency {
            min_accuracy: 1.0 - (-1.05f64).exp(),
        };
        assert_eq!(
            exact(&mut free(), 6, goal, 1000).unwrap().unwrap(),
            bits(&[0, 1])
        );
        let pair = bits(&[0, 3]);
        assert_eq!(exact(&mut bound(), 6, goal, 1000).unwrap().unwrap(), pair);
        assert_eq!(holmes(&mut bound(), 6, goal, &params).0.unwrap(), pair);
        assert_eq!(af(&mut bound(), 6, goal).unwrap(), pair);
    }

    #[test]
    fn a_zoo_without_a_lead_is_held_only_to_the_lead_sets_it_covers() {
        // Secondary-lead models and a vitals model that ranks best: composing still works, and
        // the ensemble must hold a secondary-lead model.
        let (mut leads, lat, _) = two_lead_zoo();
        leads.truncate(3);
        leads.push(LeadSets::default());
        let (lat, gain) = (&lat[..4], [0.3, 0.2, 0.1, 0.9]);
        let acc = |b: &[bool]| acc_of(&gain, b);
        let mut p = Profiler::new(acc, |b: &[bool]| lat_of(lat, b)).covering(leads);
        assert!(!p.covers(&[false, false, false, true]));
        assert!(p.covers(&[false, false, true, false]));
        let b = exact(&mut p, 4, 2.0, 1000).unwrap().unwrap();
        assert_eq!(b, vec![true, false, false, true]);
    }

    #[test]
    fn the_trajectory_records_every_call_with_the_best_so_far() {
        let n = 6;
        let (lat, gain) = synthetic(n);
        let budget = 6.0;
        let mut seen = Vec::new();
        let mut p = Profiler::new(|b: &[bool]| acc_of(&gain, b), |b: &[bool]| lat_of(&lat, b))
            .on_call(|k, a, l| seen.push((k, a, l)));
        lf(&mut p, n, budget);
        p.profile(&[true; 6]); // infeasible
        p.profile(&[true, false, false, false, false, false]); // cached: no call
        let t = p.trajectory(budget);
        drop(p);
        // Six singles, three greedy steps (the third over the budget), all six at once.
        assert_eq!(t.len(), 10);
        assert_eq!(seen.len(), t.len(), "the hook saw each call once");
        assert_eq!(t[0].members, "100000");
        assert!(t.iter().enumerate().all(|(i, s)| s.call == i + 1));
        let last = t.last().unwrap();
        assert!(!last.feasible && last.latency_ms == 21.0);
        // The best so far never drops and equals the best feasible profiled.
        assert!(
            t.windows(2)
                .all(|w| w[1].best_accuracy.unwrap() >= w[0].best_accuracy.unwrap())
        );
        let best = t
            .iter()
            .filter(|s| s.feasible)
            .map(|s| s.accuracy)
            .fold(0.0, f64::max);
        assert_eq!(last.best_accuracy, Some(best));
        assert!(last.best_latency_ms.unwrap() <= budget);
    }
}
