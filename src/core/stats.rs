//! Percentiles of measured times (the one definition used by profiles, the latency watch, the
//! bench and the reports), the median (each column's of a set of rows, and the upper middle
//! of f32 values), the largest difference between two outputs, and the confidence interval of
//! a proportion.

/// The `q`-quantile (0..=1) of ascending `sorted` values, nearest rank (`NaN` when empty).
pub(crate) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize]
}

/// The median of `v` (the mean of the middle two for an even count; 0 when empty).
pub(crate) fn median(v: &[f64]) -> f64 {
    median_with(v, &mut Vec::new())
}

/// [`median`] with `keys` as its working space (kept where many medians are taken).
/// The values are selected as integers in [`f64::total_cmp`]'s order, which compare faster
/// than the floats and give the same middle values.
fn median_with(v: &[f64], keys: &mut Vec<i64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    keys.clear();
    keys.extend(v.iter().map(|&x| total_key(x)));
    let m = keys.len() / 2;
    // The middle value(s) of the sorted order, without sorting the rest.
    let (left, &mut mid, _) = keys.select_nth_unstable(m);
    let mid = from_total_key(mid);
    if v.len() % 2 == 1 {
        mid
    } else {
        let below = left.iter().max().map_or(mid, |&k| from_total_key(k));
        (below + mid) / 2.0
    }
}

/// The median of each column of equally long `rows` (a template: the per-sample median of
/// stretches), one working space for all.
pub(crate) fn column_medians(rows: &[Vec<f64>]) -> Vec<f64> {
    let len = rows.first().map_or(0, Vec::len);
    let (mut column, mut keys) = (Vec::with_capacity(rows.len()), Vec::new());
    (0..len)
        .map(|i| {
            column.clear();
            column.extend(rows.iter().map(|r| r[i]));
            median_with(&column, &mut keys)
        })
        .collect()
}

/// The upper middle of `v` in [`f32::total_cmp`]'s order (0 when empty), selected as
/// integers in that order as [`median`] is.
pub(crate) fn upper_median_f32(v: &[f32]) -> f32 {
    if v.is_empty() {
        return 0.0;
    }
    // The transformation `total_cmp` makes of the bits; it is its own inverse.
    let flip = |b: i32| b ^ (((b >> 31) as u32) >> 1) as i32;
    let mut keys: Vec<i32> = v.iter().map(|&x| flip(x.to_bits() as i32)).collect();
    let mid = keys.len() / 2;
    let k = *keys.select_nth_unstable(mid).1;
    f32::from_bits(flip(k) as u32)
}

/// `x` as an integer whose order is [`f64::total_cmp`]'s (the same transformation).
fn total_key(x: f64) -> i64 {
    let b = x.to_bits() as i64;
    b ^ (((b >> 63) as u64) >> 1) as i64
}

/// The float of a [`total_key`] (the transformation is its own inverse).
fn from_total_key(k: i64) -> f64 {
    f64::from_bits((k ^ (((k >> 63) as u64) >> 1) as i64) as u64)
}

/// The normal quantile of a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval at 95 % of a proportion of `successes` in `trials` (`None`
/// without trials, or with more successes than trials): unlike the normal approximation it
/// stays inside 0..=1 and holds for small counts and proportions near 0 or 1, as episode
/// counts are. It assumes independent trials.
pub(crate) fn wilson_interval(successes: usize, trials: usize) -> Option<[f64; 2]> {
    if trials == 0 || successes > trials {
        return None;
    }
    let (n, p) = (trials as f64, successes as f64 / trials as f64);
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    // Rounded separately, the bounds could miss a proportion of 0 or 1 by an ulp.
    Some([(centre - half).clamp(0.0, p), (centre + half).clamp(p, 1.0)])
}

/// Pearson correlation of two equally long stretches (0 where one is flat).
pub(crate) fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        ab += (x - ma) * (y - mb);
        aa += (x - ma).powi(2);
        bb += (y - mb).powi(2);
    }
    if aa > 0.0 && bb > 0.0 {
        ab / (aa * bb).sqrt()
    } else {
        0.0
    }
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
    fn the_median_is_the_sorted_middle() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0]), 3.0);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        // Repeated values on both sides of the middle.
        assert_eq!(median(&[2.0, 2.0, 9.0, 2.0, -1.0, 9.0]), 2.0);
        let v: Vec<f64> = (0..101).map(|i| ((i * 37) % 101) as f64 * 0.1).collect();
        assert_eq!(median(&v), 5.0);
        // The same bits as the middle of a full sort by total order, zeros' signs and NaNs
        // included, at odd and even lengths.
        let odd = [f64::NAN, -0.0, 0.0, -f64::NAN, 1.0, -0.0, 2.5, 0.0, -3.0];
        for len in 1..=odd.len() {
            let v = &odd[..len];
            let mut s = v.to_vec();
            s.sort_by(f64::total_cmp);
            let m = len / 2;
            let want = if len % 2 == 1 {
                s[m]
            } else {
                (s[m - 1] + s[m]) / 2.0
            };
            assert_eq!(median(v).to_bits(), want.to_bits(), "{v:?}");
        }
    }

    #[test]
    fn a_templates_columns_are_each_their_own_median() {
        let rows: Vec<Vec<f64>> = (0..7)
            .map(|r| {
                (0..5)
                    .map(|c| ((r * 31 + c * 17) % 11) as f64 - 0.5 * c as f64)
                    .collect()
            })
            .collect();
        let got = column_medians(&rows);
        for (c, &m) in got.iter().enumerate() {
            let column: Vec<f64> = rows.iter().map(|r| r[c]).collect();
            assert_eq!(m.to_bits(), median(&column).to_bits(), "column {c}");
        }
        assert_eq!(got.len(), 5);
        assert!(column_medians(&[]).is_empty());
    }

    #[test]
    fn the_median_is_the_upper_middle_of_the_total_order_to_the_bit() {
        let odd = [
            f32::NAN,
            -0.0,
            0.0,
            -f32::NAN,
            1.0,
            -0.0,
            2.5,
            0.0,
            -3.0,
            1e-30,
            7.0,
        ];
        for len in 0..=odd.len() {
            let v = &odd[..len];
            let mut s = v.to_vec();
            s.sort_by(f32::total_cmp);
            let want = s.get(len / 2).copied().unwrap_or(0.0);
            assert_eq!(upper_median_f32(v).to_bits(), want.to_bits(), "{v:?}");
        }
        let w: Vec<f32> = (0..7_500u32)
            .map(|i| ((i * 7_919) % 1_013) as f32 * 0.37 - 90.0)
            .collect();
        let mut s = w.clone();
        s.sort_by(f32::total_cmp);
        assert_eq!(upper_median_f32(&w).to_bits(), s[3_750].to_bits());
    }

    #[test]
    fn wilson_intervals_hold_their_proportion() {
        // 25 of 30, worked by hand from Wilson's formula: 0.664..0.927.
        let [lo, hi] = wilson_interval(25, 30).unwrap();
        assert!(
            (lo - 0.6644).abs() < 1e-3 && (hi - 0.9266).abs() < 1e-3,
            "{lo} {hi}"
        );
        let [_, hi] = wilson_interval(0, 10).unwrap();
        assert!((hi - 0.2775).abs() < 1e-3, "{hi}");
        // Every interval lies in 0..=1 and holds its proportion, exactly at 0 and 1.
        for n in 1..=500 {
            for k in [0, 1, n / 2, n - 1, n] {
                let [lo, hi] = wilson_interval(k, n).unwrap();
                let p = k as f64 / n as f64;
                assert!(0.0 <= lo && lo <= p && p <= hi && hi <= 1.0, "{k}/{n}");
            }
            assert_eq!(wilson_interval(0, n).unwrap()[0], 0.0);
            assert_eq!(wilson_interval(n, n).unwrap()[1], 1.0);
        }
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
