//! Experiment: each beat called with the beats alike to it in the window and in the bed's
//! recent past. A bed keeps up to [`MAX_SHAPES`] QRS shapes (both leads, standardised, a
//! running mean), each with the own probabilities of the last [`KEEP`] beats that matched
//! it; a beat's call is the median over the window's beats alike to it and the probabilities
//! its shape holds of beats before the window.

use std::collections::VecDeque;

use super::{ALIKE_CORR, ALIKE_SIZE, Described, median, ptp, standardised};

const MAX_SHAPES: usize = 16;

fn keep() -> usize {
    static KEEP: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *KEEP.get_or_init(|| {
        std::env::var("HOLMES_EXP_BED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

/// Whether the counter reads the bed's shapes (`HOLMES_EXP_BED` set to how many
/// probabilities a shape keeps).
pub(crate) fn enabled() -> bool {
    keep() > 0
}

#[derive(Debug, Clone)]
struct Shape {
    z0: Vec<f64>,
    z1: Option<Vec<f64>>,
    size: f64,
    /// (R peak on the bed's timeline, own probability), oldest first.
    probs: VecDeque<(i64, f64)>,
    last_used: i64,
}

/// One bed's shapes.
#[derive(Debug, Clone, Default)]
pub(crate) struct BedShapes {
    shapes: Vec<Shape>,
    /// The last beat added, on the bed's timeline.
    last_at: Option<i64>,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn renorm(v: &mut [f64]) {
    let n = dot(v, v).sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

impl Described {
    /// The calls of [`alike_median`](Self::alike_median) with the bed's shapes as more
    /// context; `start` places the window on the bed's timeline (samples). Adds the window's
    /// new beats (after the last one added) to their shapes.
    pub(crate) fn alike_median_bed(&self, p: &[f64], start: i64, bed: &mut BedShapes) -> Vec<f64> {
        let n = self.len();
        let z0: Vec<Vec<f64>> = self.segs0.iter().map(|s| standardised(s)).collect();
        let z1: Option<Vec<Vec<f64>>> = self
            .segs1
            .as_ref()
            .map(|segs| segs.iter().map(|s| standardised(s)).collect());
        let sizes: Vec<f64> = self.segs0.iter().map(|s| ptp(s).max(1e-6)).collect();
        let alike = |i: usize, j: usize| -> bool {
            if i == j {
                return true;
            }
            let ratio = sizes[i] / sizes[j];
            (1.0 / ALIKE_SIZE..=ALIKE_SIZE).contains(&ratio)
                && dot(&z0[i], &z0[j]) >= ALIKE_CORR
                && z1.as_ref().is_none_or(|z| dot(&z[i], &z[j]) >= ALIKE_CORR)
        };
        // Each beat's shape: the best-correlating alike one.
        let shape_of = |i: usize, shapes: &[Shape]| -> Option<usize> {
            shapes
                .iter()
                .enumerate()
                .filter(|(_, s)| {
                    let ratio = sizes[i] / s.size;
                    (1.0 / ALIKE_SIZE..=ALIKE_SIZE).contains(&ratio)
                        && s.z1.is_some() == z1.is_some()
                })
                .filter_map(|(k, s)| {
                    let c0 = dot(&z0[i], &s.z0);
                    let c1 = match (&z1, &s.z1) {
                        (Some(z), Some(t)) => dot(&z[i], t),
                        _ => 1.0,
                    };
                    (c0 >= ALIKE_CORR && c1 >= ALIKE_CORR).then_some((k, c0.min(c1)))
                })
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(k, _)| k)
        };
        let first = start + self.peaks.first().copied().unwrap_or(0) as i64;
        let mut v = Vec::new();
        let out: Vec<f64> = (0..n)
            .map(|i| {
                v.clear();
                v.extend((0..n).filter(|&j| alike(i, j)).map(|j| p[j]));
                if let Some(k) = shape_of(i, &bed.shapes) {
                    v.extend(
                        bed.shapes[k]
                            .probs
                            .iter()
                            .filter(|&&(at, _)| at < first)
                            .map(|&(_, q)| q),
                    );
                }
                median(&v)
            })
            .collect();
        let keep = keep();
        for i in 0..n {
            let at = start + self.peaks[i] as i64;
            if bed.last_at.is_some_and(|l| at <= l + 10) {
                continue;
            }
            bed.last_at = Some(at);
            match shape_of(i, &bed.shapes) {
                Some(k) => {
                    let s = &mut bed.shapes[k];
                    s.z0.iter_mut()
                        .zip(&z0[i])
                        .for_each(|(a, b)| *a = 0.9 * *a + 0.1 * b);
                    renorm(&mut s.z0);
                    if let (Some(t), Some(z)) = (s.z1.as_mut(), z1.as_ref()) {
                        t.iter_mut()
                            .zip(&z[i])
                            .for_each(|(a, b)| *a = 0.9 * *a + 0.1 * b);
                        renorm(t);
                    }
                    s.size = 0.9 * s.size + 0.1 * sizes[i];
                    s.probs.push_back((at, p[i]));
                    while s.probs.len() > keep {
                        s.probs.pop_front();
                    }
                    s.last_used = at;
                }
                None => {
                    if bed.shapes.len() >= MAX_SHAPES {
                        let lru = (0..bed.shapes.len())
                            .min_by_key(|&k| bed.shapes[k].last_used)
                            .unwrap_or(0);
                        bed.shapes.swap_remove(lru);
                    }
                    bed.shapes.push(Shape {
                        z0: z0[i].clone(),
                        z1: z1.as_ref().map(|z| z[i].clone()),
                        size: sizes[i],
                        probs: VecDeque::from([(at, p[i])]),
                        last_used: at,
                    });
                }
            }
        }
        out
    }
}
