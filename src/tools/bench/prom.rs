//! Reading the daemon's Prometheus text (`GET /metrics`): counters summed over their labels,
//! histograms merged over their labels, and the differences between two scrapes, so a
//! benchmark reports what happened during its load and not since start-up.
//!
//! Used by [`bench`](super); the format is the one [`telemetry`](crate::http::telemetry) renders.

use std::collections::BTreeMap;

/// One scrape: every sample by metric name, summed over label sets; histogram buckets by
/// their upper bound.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scrape {
    values: BTreeMap<String, f64>,
    buckets: BTreeMap<String, BTreeMap<Bound, f64>>,
}

/// A bucket's upper bound, ordered (`+Inf` last).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bound(f64);
impl Eq for Bound {}
impl PartialOrd for Bound {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bound {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

impl Scrape {
    pub(crate) fn parse(text: &str) -> Scrape {
        let mut s = Scrape::default();
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let Some((key, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = match key.split_once('{') {
                Some((n, l)) => (n, l.trim_end_matches('}')),
                None => (key, ""),
            };
            if let Some(base) = name.strip_suffix("_bucket") {
                let le = labels
                    .split(',')
                    .find_map(|kv| kv.strip_prefix("le=\""))
                    .map(|v| v.trim_end_matches('"'));
                let bound = match le {
                    Some("+Inf") => f64::INFINITY,
                    Some(v) => match v.parse() {
                        Ok(b) => b,
                        Err(_) => continue,
                    },
                    None => continue,
                };
                *s.buckets
                    .entry(base.to_owned())
                    .or_default()
                    .entry(Bound(bound))
                    .or_default() += value;
            } else {
                *s.values.entry(name.to_owned()).or_default() += value;
            }
        }
        s
    }

    /// A counter (or a histogram's `_sum`/`_count`), summed over labels; 0 when absent.
    pub(crate) fn value(&self, name: &str) -> f64 {
        self.get(name).unwrap_or(0.0)
    }

    /// A series' value, if the daemon published it.
    pub(crate) fn get(&self, name: &str) -> Option<f64> {
        self.values.get(name).copied()
    }

    /// What happened between `earlier` and this scrape.
    pub(crate) fn since(&self, earlier: &Scrape) -> Scrape {
        let mut d = self.clone();
        for (k, v) in &mut d.values {
            *v -= earlier.value(k);
        }
        for (k, b) in &mut d.buckets {
            if let Some(e) = earlier.buckets.get(k) {
                for (bound, v) in b.iter_mut() {
                    *v -= e.get(bound).copied().unwrap_or(0.0);
                }
            }
        }
        d
    }

    /// Mean of a histogram, in its unit; NaN when it saw nothing.
    pub(crate) fn mean(&self, histogram: &str) -> f64 {
        let n = self.value(&format!("{histogram}_count"));
        if n > 0.0 {
            self.value(&format!("{histogram}_sum")) / n
        } else {
            f64::NAN
        }
    }

    /// Quantile `q` of a histogram by linear interpolation within its cumulative buckets
    /// (as Prometheus' `histogram_quantile`); NaN when it saw nothing.
    pub(crate) fn quantile(&self, histogram: &str, q: f64) -> f64 {
        let Some(b) = self.buckets.get(histogram) else {
            return f64::NAN;
        };
        let total = b.values().last().copied().unwrap_or(0.0);
        if total <= 0.0 {
            return f64::NAN;
        }
        let rank = q * total;
        let (mut lower, mut below) = (0.0, 0.0);
        for (bound, &cum) in b {
            if cum >= rank {
                if bound.0.is_infinite() {
                    return lower;
                }
                let inside = cum - below;
                let frac = if inside > 0.0 {
                    (rank - below) / inside
                } else {
                    1.0
                };
                return lower + (bound.0 - lower) * frac;
            }
            (lower, below) = (bound.0, cum);
        }
        lower
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# TYPE holmes_windows_total counter
holmes_windows_total{outcome="scored"} 10
holmes_windows_total{outcome="partial"} 2
# TYPE holmes_sqlite_commit_seconds histogram
holmes_sqlite_commit_seconds_bucket{le="0.001"} 50
holmes_sqlite_commit_seconds_bucket{le="0.002"} 90
holmes_sqlite_commit_seconds_bucket{le="+Inf"} 100
holmes_sqlite_commit_seconds_sum 0.15
holmes_sqlite_commit_seconds_count 100
"#;

    #[test]
    fn counters_sum_over_labels_and_histograms_interpolate() {
        let s = Scrape::parse(TEXT);
        assert_eq!(s.value("holmes_windows_total"), 12.0);
        assert!((s.mean("holmes_sqlite_commit_seconds") - 0.0015).abs() < 1e-12);
        // The 50th of 100 lies at the top of the first bucket; the 70th halfway up the second.
        assert!((s.quantile("holmes_sqlite_commit_seconds", 0.5) - 0.001).abs() < 1e-12);
        assert!((s.quantile("holmes_sqlite_commit_seconds", 0.7) - 0.0015).abs() < 1e-12);
        // Beyond the last finite bound: that bound.
        assert_eq!(s.quantile("holmes_sqlite_commit_seconds", 0.99), 0.002);
        assert!(s.quantile("absent", 0.5).is_nan());
    }

    #[test]
    fn differences_cover_only_the_load() {
        let a = Scrape::parse(TEXT);
        let b = Scrape::parse(&TEXT.replace("} 10\n", "} 25\n").replace(" 100\n", " 140\n"));
        let d = b.since(&a);
        assert_eq!(d.value("holmes_windows_total"), 15.0);
        assert_eq!(d.value("holmes_sqlite_commit_seconds_count"), 40.0);
    }
}
