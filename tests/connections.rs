//! The daemon opens its SQLite database three times at start-up and no more while it serves:
//! the store writer's connection, the API's reader and the one connection every other part
//! shares (alarms, devices, users, the links' outboxes, plans, profiles, admissions, audit).
//! Counted by `/metrics` (`holmes_sqlite_connections_opened_total`), with both links on and a
//! monitor scored. One test in this file: the count is the process's.

mod common;

use common::{Monitor, spawn_app};

const T0: i64 = 1_700_000_000_000;

fn opened(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("holmes_sqlite_connections_opened_total "))
        .expect("the count is exported")
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_opens_the_database_three_times() {
    // Both links on, towards receivers that are not there: their outboxes open all the same.
    let app = spawn_app(|c| {
        c.hl7.enabled = true;
        c.hl7.receiver = "127.0.0.1:9".into();
        c.fhir.enabled = true;
        c.fhir.base_url = "http://127.0.0.1:9/fhir/R4".into();
    })
    .await;
    let at_start = opened(&app.get_raw("/metrics").await);
    assert_eq!(at_start, 3, "the writer's, the reader's and the shared one");
    // A monitor, its windows scored and stored, the page's and the API's reads.
    let mut m = Monitor::connect(&app.ws_url(), "bed-1", "mon-1").await;
    m.stream(T0, 0..400).await;
    app.wait_scores("bed-1", 60.0, |r| !r.is_empty()).await;
    let (status, _) = app.get("/api/beds/bed-1/alarms").await;
    assert_eq!(status, 200);
    let (status, _) = app.get("/api/models").await;
    assert_eq!(status, 200);
    assert_eq!(
        opened(&app.get_raw("/metrics").await),
        at_start,
        "no part opens a connection of its own while serving"
    );
    app.stop().await;
}
