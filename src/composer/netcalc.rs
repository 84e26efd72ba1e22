//! The queueing part of the latency estimate: the deterministic network-calculus delay bound
//! of HOLMES section 3.4 / InferLine section 5, the largest horizontal distance between the
//! arrival curve of the beds' window schedule and a rate-latency service curve
//! `beta(t) = mu * max(t - t_s, 0)`.
//!
//! Arrivals are periodic (one window per bed per hop), so the arrival curve comes from the
//! beds' phases: `A(t)` is the most windows that arrive in any interval of length `t`.

/// The delay bound (seconds) for `phases` of one window per `period`, served at `mu` windows
/// per second after a latency of `t_s` seconds. Infinite when the beds outrun the service.
pub(crate) fn delay_bound(phases: &[f64], period: f64, mu: f64, t_s: f64) -> f64 {
    let n = phases.len();
    if n == 0 {
        return t_s;
    }
    if mu <= 0.0 || (n as f64) / period > mu + 1e-12 {
        return f64::INFINITY;
    }
    // The sup of t_s + A(t)/mu - t is reached at the shortest interval that holds k + 1
    // arrivals, for some k below n (a stable service only loses ground within a period).
    let mut p: Vec<f64> = phases.iter().map(|x| x.rem_euclid(period)).collect();
    p.sort_by(f64::total_cmp);
    let two: Vec<f64> = p
        .iter()
        .copied()
        .chain(p.iter().map(|x| x + period))
        .collect();
    let mut best: f64 = 0.0;
    for k in 0..n {
        let shortest = (0..n)
            .map(|i| two[i + k] - two[i])
            .fold(f64::INFINITY, f64::min);
        best = best.max(t_s + (k + 1) as f64 / mu - shortest);
    }
    best
}

/// Phases of `beds` beds spread evenly over `period` (the ward's staggering).
pub(crate) fn staggered(beds: usize, period: f64) -> Vec<f64> {
    (0..beds).map(|i| i as f64 * period / beds as f64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_bounds() {
        // One bed: one window's service after the latency.
        assert!((delay_bound(&[3.0], 30.0, 10.0, 0.05) - 0.15).abs() < 1e-9);
        // Four beds aligned: a burst of four, served at 10/s: 0.05 + 4/10.
        assert!((delay_bound(&[0.0; 4], 1.0, 10.0, 0.05) - 0.45).abs() < 1e-9);
        // Four beds staggered by 0.25 s at 10/s: each window is served before the next comes.
        assert!((delay_bound(&staggered(4, 1.0), 1.0, 10.0, 0.05) - 0.15).abs() < 1e-9);
        // Two pairs: bursts of 2 every 0.5 s at 5/s: 0.02 + 2/5.
        assert!((delay_bound(&[0.0, 0.0, 0.5, 0.5], 1.0, 5.0, 0.02) - 0.42).abs() < 1e-9);
        // Beds outrunning the service: unbounded.
        assert!(delay_bound(&staggered(4, 1.0), 1.0, 2.0, 0.05).is_infinite());
    }
}
