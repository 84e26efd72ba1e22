//! Ensemble search: HOLMES (Algorithms 1 and 2: random-forest surrogates for accuracy and
//! latency, genetic exploration, greedy top-K profiling under the hard latency constraint), the
//! baselines of section 4.2 (RD, AF, LF, NPO), an exact optimum by branch and bound, and an
//! uncertainty-aware acquisition as an option (our extension).

use std::collections::{HashMap, HashSet};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use smartcore::ensemble::random_forest_regressor::{
    RandomForestRegressor, RandomForestRegressorParameters,
};
use smartcore::linalg::basic::matrix::DenseMatrix;

/// An ensemble: one bit per zoo model.
pub type Bits = Vec<bool>;

/// A profiler: an ensemble in, a number out.
pub type ProfileFn<'a> = Box<dyn FnMut(&[bool]) -> f64 + 'a>;

/// The two profilers with call counting and caching (a profiler call is the budget unit).
pub struct Profiler<'a> {
    pub accuracy: ProfileFn<'a>,
    pub latency: ProfileFn<'a>,
    cache: HashMap<Bits, (f64, f64)>,
    /// Every ensemble profiled, in order.
    pub profiled: Vec<(Bits, f64, f64)>,
}

impl<'a> Profiler<'a> {
    pub fn new(
        accuracy: impl FnMut(&[bool]) -> f64 + 'a,
        latency: impl FnMut(&[bool]) -> f64 + 'a,
    ) -> Self {
        Profiler {
            accuracy: Box::new(accuracy),
            latency: Box::new(latency),
            cache: HashMap::new(),
            profiled: Vec::new(),
        }
    }

    /// `(accuracy, latency)` of `b`, profiling it on first sight.
    pub fn profile(&mut self, b: &[bool]) -> (f64, f64) {
        if let Some(&r) = self.cache.get(b) {
            return r;
        }
        let r = ((self.accuracy)(b), (self.latency)(b));
        self.cache.insert(b.to_vec(), r);
        self.profiled.push((b.to_vec(), r.0, r.1));
        r
    }

    pub fn calls(&self) -> usize {
        self.profiled.len()
    }

    /// The best feasible ensemble profiled so far.
    pub fn best(&self, budget: f64) -> Option<(Bits, f64, f64)> {
        self.profiled
            .iter()
            .filter(|(_, _, l)| *l <= budget)
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.2.total_cmp(&a.2)))
            .cloned()
    }
}

/// HOLMES's parameters (paper defaults where it gives them; the rest from its code).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HolmesParams {
    /// Profiler-call budget N.
    pub budget_calls: usize,
    /// Candidates explored per iteration M.
    pub candidates: usize,
    /// Candidates profiled per iteration K.
    pub top_k: usize,
    /// Share of candidates from genetic operators p (the rest are random).
    pub p: f64,
    /// Share of genetic candidates from mutation q (the rest by recombination).
    pub q: f64,
    /// Bits a mutation flips.
    pub mutation_degree: usize,
    /// Trees per surrogate forest.
    pub trees: usize,
    /// Rank candidates by mean + `explore` x spread across the trees (0: the paper's greedy).
    pub explore: f64,
    pub seed: u64,
}

impl Default for HolmesParams {
    fn default() -> Self {
        HolmesParams {
            budget_calls: 100,
            candidates: 1000,
            top_k: 10,
            p: 0.5,
            q: 0.5,
            mutation_degree: 6,
            trees: 20,
            explore: 0.0,
            seed: 42,
        }
    }
}

/// A random non-empty ensemble.
pub fn random_bits(n: usize, rng: &mut SmallRng) -> Bits {
    loop {
        let b: Bits = (0..n).map(|_| rng.random_bool(0.5)).collect();
        if b.iter().any(|&x| x) {
            return b;
        }
    }
}

/// Flips `degree` distinct random bits.
pub fn mutate(b: &[bool], degree: usize, rng: &mut SmallRng) -> Bits {
    let mut out = b.to_vec();
    let mut idx: Vec<usize> = (0..b.len()).collect();
    idx.shuffle(rng);
    for &i in idx.iter().take(degree.min(b.len())) {
        out[i] = !out[i];
    }
    out
}

/// Single-point recombination of two parents.
pub fn recombine(a: &[bool], b: &[bool], rng: &mut SmallRng) -> Bits {
    let cut = rng.random_range(1..a.len().max(2));
    a[..cut.min(a.len())]
        .iter()
        .chain(&b[cut.min(b.len())..])
        .copied()
        .collect()
}

/// Algorithm 2's exploration: `m` new candidates (random, mutated, recombined), never a
/// duplicate of each other or of `seen`, never empty.
pub fn explore(
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

/// Adds models in `order` one at a time while the ensemble stays within the budget (RD, AF,
/// LF); returns the last feasible ensemble.
pub fn greedy(prof: &mut Profiler<'_>, order: &[usize], n: usize, budget: f64) -> Option<Bits> {
    let mut cur = vec![false; n];
    let mut best = None;
    for &i in order {
        cur[i] = true;
        let (_, l) = prof.profile(&cur);
        if l > budget {
            cur[i] = false;
            break;
        }
        best = Some(cur.clone());
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

pub fn rd(prof: &mut Profiler<'_>, n: usize, budget: f64, seed: u64) -> Option<Bits> {
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(seed));
    greedy(prof, &order, n, budget)
}

pub fn af(prof: &mut Profiler<'_>, n: usize, budget: f64) -> Option<Bits> {
    let s = singles(prof, n);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| s[b].0.total_cmp(&s[a].0));
    greedy(prof, &order, n, budget)
}

pub fn lf(prof: &mut Profiler<'_>, n: usize, budget: f64) -> Option<Bits> {
    let s = singles(prof, n);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| s[a].1.total_cmp(&s[b].1));
    greedy(prof, &order, n, budget)
}

/// NPO: random subsets (at most as many models as LF chose) merged into the explored set until
/// the call budget is spent; the best feasible profiled ensemble wins.
pub fn npo(
    prof: &mut Profiler<'_>,
    n: usize,
    budget: f64,
    calls: usize,
    seed: u64,
) -> Option<Bits> {
    let warm = [
        rd(prof, n, budget, seed),
        af(prof, n, budget),
        lf(prof, n, budget),
    ];
    let max_size = warm[2]
        .as_ref()
        .map_or(1, |b| b.iter().filter(|&&x| x).count())
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
    prof.best(budget).map(|x| x.0)
}

/// HOLMES: warm start from RD, AF and LF, then fit surrogates, explore, score under the hard
/// constraint, profile the top K, until the call budget is spent. Returns the best feasible
/// profiled ensemble and the best accuracy after each iteration.
pub fn holmes(
    prof: &mut Profiler<'_>,
    n: usize,
    budget: f64,
    params: &HolmesParams,
) -> (Option<Bits>, Vec<(usize, f64)>) {
    let mut rng = SmallRng::seed_from_u64(params.seed);
    rd(prof, n, budget, params.seed);
    af(prof, n, budget);
    lf(prof, n, budget);
    let mut trajectory = vec![(prof.calls(), prof.best(budget).map_or(0.0, |b| b.1))];
    let mut iter = 0u64;
    while prof.calls() < params.budget_calls {
        iter += 1;
        let xs: Vec<Bits> = prof.profiled.iter().map(|p| p.0.clone()).collect();
        let acc: Vec<f64> = prof.profiled.iter().map(|p| p.1).collect();
        let lat: Vec<f64> = prof
            .profiled
            .iter()
            .map(|p| p.2.min(budget * 100.0))
            .collect();
        let cands = explore(&xs, n, params.candidates, params, &mut rng);
        if cands.is_empty() {
            break;
        }
        let scored: Vec<(f64, usize)> = match (
            Forest::fit(&xs, &acc, params.trees, params.seed + iter * 1000),
            Forest::fit(&xs, &lat, params.trees, params.seed + iter * 1000 + 500),
        ) {
            (Some(fa), Some(fl)) => {
                let pa = fa.predict(&cands);
                let pl = fl.predict(&cands);
                (0..cands.len())
                    .map(|i| {
                        // Hard constraint: predicted-infeasible candidates score 0.
                        let feasible = pl[i].0 <= budget;
                        let s = if feasible {
                            pa[i].0 + params.explore * pa[i].1
                        } else {
                            0.0
                        };
                        (s, i)
                    })
                    .collect()
            }
            _ => (0..cands.len()).map(|i| (rng.random::<f64>(), i)).collect(),
        };
        let mut order = scored;
        order.sort_by(|a, b| b.0.total_cmp(&a.0));
        for &(_, i) in order.iter().take(params.top_k) {
            if prof.calls() >= params.budget_calls {
                break;
            }
            prof.profile(&cands[i]);
        }
        trajectory.push((prof.calls(), prof.best(budget).map_or(0.0, |b| b.1)));
    }
    (prof.best(budget).map(|b| b.0), trajectory)
}

/// The exact optimum by branch and bound over ensembles, ordered by model index; a branch is
/// cut when adding models can only raise the latency above the budget (latency must grow with
/// the ensemble, which holds for the profilers here: members share the CPU). Feasible only for
/// small zoos: `max_nodes` bounds the work and `None` says it was not enough.
pub fn exact(
    prof: &mut Profiler<'_>,
    n: usize,
    budget: f64,
    max_nodes: usize,
) -> Option<Option<Bits>> {
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
            if best.as_ref().is_none_or(|x| a > x.1) {
                best = Some((b.clone(), a));
            }
            stack.push((b, i + 1));
        }
    }
    Some(best.map(|b| b.0))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
