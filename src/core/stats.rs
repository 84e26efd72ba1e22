//! Percentiles of measured times (the one definition used by profiles, the latency watch, the
//! bench and the reports), the median, the largest difference between two outputs, and the
//! confidence interval of a proportion.

/// The `q`-quantile (0..=1) of ascending `sorted` values, nearest rank (`NaN` when empty).
pub(crate) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize]
}

/// The median of `v` (the mean of the middle two for an even count; 0 when empty).
pub(crate) fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// The normal quantile of a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval at 95 % of a proportion of `successes` in `trials` (`None`
/// without trials): unlike the normal approximation it stays inside 0..=1 and is sound for
/// small counts and proportions near 0 or 1, as episode counts are. It assumes independent
/// trials.
pub(crate) fn wilson_interval(successes: usize, trials: usize) -> Option<[f64; 2]> {
    if trials == 0 || successes > trials {
        return None;
    }
    let (n, p) = (trials as f64, successes as f64 / trials as f64);
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Some([(centre - half).max(0.0), (centre + half).min(1.0)])
}

/// Largest absolute difference (infinite when the lengths differ or a value is NaN).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let d = (x - y).abs();
            if d.is_nan() { f32::INFINITY } else { d }
        })
        .fold(0.0, f32::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_intervals_match_published_values() {
        // 25 of 30 (Wilson 1927's formula, checked by hand): 0.664..0.927.
        let [lo, hi] = wilson_interval(25, 30).unwrap();
        assert!(
            (lo - 0.6644).abs() < 1e-3 && (hi - 0.9266).abs() < 1e-3,
            "{lo} {hi}"
        );
        // Bounded at 0 and 1, and it holds the proportion.
        let [lo, hi] = wilson_interval(0, 10).unwrap();
        assert!(lo.abs() < 1e-12 && (hi - 0.2775).abs() < 1e-3, "{hi}");
        let [lo, hi] = wilson_interval(10, 10).unwrap();
        assert!(
            (lo - 0.7225).abs() < 1e-3 && (hi - 1.0).abs() < 1e-12,
            "{lo} {hi}"
        );
        assert_eq!(wilson_interval(0, 0), None);
        assert_eq!(wilson_interval(3, 2), None);
    }

    #[test]
    fn nearest_rank() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 0.5), 3.0);
        assert_eq!(percentile(&v, 0.95), 5.0);
        assert_eq!(percentile(&v, 1.0), 5.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
