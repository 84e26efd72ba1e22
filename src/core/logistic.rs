//! Logistic regression on a handful of features, fitted by Newton's method (iteratively
//! reweighted least squares) on standardised features with a small ridge penalty: the stacked
//! score of `holmes evaluate --sqi-stack` and the beat classifier of [`crate::signal::beats`]
//! both need no more than a dozen features, where Newton converges in a few steps.

use serde::{Deserialize, Serialize};

/// Newton steps at most; the fit converges in fewer.
const NEWTON_STEPS: usize = 25;

/// A fitted regression: feature standardisation and weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Logistic {
    /// Each feature's mean over the rows fitted on.
    pub mean: Vec<f64>,
    /// Each feature's standard deviation over those rows (at least 1e-9).
    pub std: Vec<f64>,
    /// Intercept first, then one weight per standardised feature.
    pub weights: Vec<f64>,
}

impl Logistic {
    /// Fits `P(y = 1 | x)` on rows `xs` (all of one length) with labels `ys` (0 or 1), the
    /// ridge penalty `ridge` per row on the standardised weights (not the intercept).
    pub fn fit<X: AsRef<[f64]>>(xs: &[X], ys: &[f64], ridge: f64) -> Logistic {
        let used = xs.first().map_or(0, |x| x.as_ref().len());
        let n = xs.len().max(1) as f64;
        let mut mean = vec![0.0; used];
        let mut std = vec![0.0; used];
        for x in xs {
            for (m, v) in mean.iter_mut().zip(x.as_ref()) {
                *m += v / n;
            }
        }
        for x in xs {
            for ((s, v), m) in std.iter_mut().zip(x.as_ref()).zip(&mean) {
                *s += (v - m).powi(2) / n;
            }
        }
        for v in &mut std {
            *v = v.sqrt().max(1e-9);
        }
        let mut model = Logistic {
            mean,
            std,
            weights: vec![0.0; used + 1],
        };
        // Design rows: 1, then the standardised features.
        let d = used + 1;
        let rows: Vec<Vec<f64>> = xs.iter().map(|x| model.row(x.as_ref())).collect();
        let w = &mut model.weights;
        for _ in 0..NEWTON_STEPS {
            // Gradient and Hessian of the penalised negative log-likelihood.
            let mut g = vec![0.0; d];
            let mut h = vec![vec![0.0; d]; d];
            for (row, &y) in rows.iter().zip(ys) {
                let z: f64 = row.iter().zip(w.iter()).map(|(a, b)| a * b).sum();
                let p = 1.0 / (1.0 + (-z).exp());
                let v = (p * (1.0 - p)).max(1e-12);
                for a in 0..d {
                    g[a] += (p - y) * row[a];
                    for b in 0..=a {
                        h[a][b] += v * row[a] * row[b];
                    }
                }
            }
            for a in 0..d {
                let lower: Vec<f64> = h[a][..a].to_vec();
                for (b, v) in lower.into_iter().enumerate() {
                    h[b][a] = v;
                }
                if a > 0 {
                    g[a] += ridge * n * w[a];
                    h[a][a] += ridge * n;
                }
            }
            let Some(step) = solve(h, g) else { break };
            for (wa, sa) in w.iter_mut().zip(&step) {
                *wa -= sa;
            }
            if step.iter().map(|s| s.abs()).fold(0.0, f64::max) < 1e-8 {
                break;
            }
        }
        model
    }

    /// The intercept's 1, then `x` standardised.
    fn row(&self, x: &[f64]) -> Vec<f64> {
        std::iter::once(1.0)
            .chain(
                x.iter()
                    .zip(self.mean.iter().zip(&self.std))
                    .map(|(v, (m, s))| (v - m) / s),
            )
            .collect()
    }

    /// `P(y = 1 | x)`; `x` has as many features as the rows fitted on.
    pub fn probability(&self, x: &[f64]) -> f64 {
        debug_assert_eq!(x.len(), self.mean.len());
        let z: f64 = self
            .row(x)
            .iter()
            .zip(&self.weights)
            .map(|(a, b)| a * b)
            .sum();
        1.0 / (1.0 + (-z).exp())
    }
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting; `None` when singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() < 1e-12 {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        let (top, rest) = a.split_at_mut(c + 1);
        let pivot = &top[c];
        for (r, row) in rest.iter_mut().enumerate() {
            let f = row[c] / pivot[c];
            for (x, p) in row[c..].iter_mut().zip(&pivot[c..]) {
                *x -= f * p;
            }
            b[c + 1 + r] -= f * b[c];
        }
    }
    let mut x = vec![0.0; n];
    for c in (0..n).rev() {
        let s: f64 = (c + 1..n).map(|k| a[c][k] * x[k]).sum();
        x[c] = (b[c] - s) / a[c][c];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaussian_elimination_solves_a_small_system() {
        let a = vec![vec![2.0, 1.0], vec![1.0, 3.0]];
        let x = solve(a, vec![3.0, 5.0]).unwrap();
        assert!(
            (x[0] - 0.8).abs() < 1e-12 && (x[1] - 1.4).abs() < 1e-12,
            "{x:?}"
        );
        assert!(solve(vec![vec![1.0, 2.0], vec![2.0, 4.0]], vec![1.0, 2.0]).is_none());
    }

    #[test]
    fn the_fit_recovers_a_known_slope_and_ignores_noise_features() {
        // y = 1 with probability sigmoid(2 * (a - 0.5)); b is unrelated. Each of 100 values
        // of a gets 200 rows, the first round(200 p) of them positive.
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for i in 0..100 {
            let a = i as f64 / 100.0 * 6.0 - 3.0;
            let p = 1.0 / (1.0 + (-2.0 * (a - 0.5)).exp());
            for j in 0..200 {
                let b = ((i * 37 + j * 11) % 101) as f64 / 101.0;
                xs.push(vec![a, b]);
                ys.push(if (j as f64 + 0.5) / 200.0 < p {
                    1.0
                } else {
                    0.0
                });
            }
        }
        let m = Logistic::fit(&xs, &ys, 1e-6);
        let slope = m.weights[1] / m.std[0];
        assert!((slope - 2.0).abs() < 0.1, "{m:?}");
        assert!(m.weights[2].abs() < 0.2, "{m:?}");
        assert!((m.probability(&[0.5, 0.3]) - 0.5).abs() < 0.1);
        assert!(m.probability(&[3.0, 0.3]) > 0.9);
    }
}
