//! Tests of the searches: the genetic operators, every method against the known optimum of
//! small synthetic zoos (both goals), lead coverage as a constraint, and the recorded trajectory.

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
