//! Prometheus metrics: the process-wide `metrics` recorder (installed once) and its text
//! rendering for `GET /metrics`. Every metric is prefixed `holmes_`; none is labelled by bed.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Latency buckets in seconds, from 1 ms to 10 s.
const SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5, 10.0,
];
/// SQLite commits are mostly well under a millisecond.
const COMMIT_SECONDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];
const BATCH: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the recorder on first use; `None` if another recorder was installed first.
pub(crate) fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full("holmes_batch_size".into()), BATCH)
                })
                .and_then(|b| {
                    // Full matchers are consulted before suffix ones.
                    b.set_buckets_for_metric(
                        Matcher::Full("holmes_sqlite_commit_seconds".into()),
                        COMMIT_SECONDS,
                    )
                })
                .ok()?
                .install_recorder()
                .ok()
        })
        .as_ref()
}

/// The metrics in Prometheus text format.
pub(crate) fn render() -> String {
    match handle() {
        Some(h) => {
            h.run_upkeep();
            h.render()
        }
        None => "# metrics recorder unavailable\n".into(),
    }
}
