//! `holmes profile` stores per-batch latency profiles that the running server shows through
//! `GET /api/models`.

mod common;

/// Runs `holmes profile ARGS --db DB` from the repository root; its standard output, once it
/// has succeeded.
fn profile(args: &[&str], db: &std::path::Path) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .current_dir(common::root())
        .arg("profile")
        .args(args)
        .arg("--db")
        .arg(db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_are_stored_and_served() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("profiles.db");
    let text = profile(
        &[
            "--models",
            "ecg-primary-5s-w8-d2",
            "--models",
            "vitals-hr-mlp",
            "--max-batch",
            "4",
            "--repeats",
            "3",
        ],
        &db,
    );
    assert!(
        text.contains("batch    4") && text.contains("fit: p50(b)"),
        "{text}"
    );

    let db2 = db.clone();
    let app = common::spawn_app(move |c| {
        c.storage.db = db2;
        // Profiles are shown for the serving members: these two and one not profiled.
        c.ensemble.members = [
            "ecg-primary-5s-w8-d2",
            "ecg-secondary-5s-w8-d2",
            "vitals-hr-mlp",
        ]
        .map(String::from)
        .to_vec();
    })
    .await;
    let (_, v) = app.get("/api/models").await;
    let p = &v["profiles"]["ecg-primary-5s-w8-d2"][0];
    assert_eq!(p["device"], "cpu", "{v}");
    let batches: Vec<u64> = p["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["batch"].as_u64().unwrap())
        .collect();
    assert_eq!(batches, vec![1, 2, 4]);
    assert!(p["points"][0]["p50_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(
        v["profiles"]["vitals-hr-mlp"][0]["points"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // A member that was not profiled has no profile yet.
    assert!(
        v["profiles"]["ecg-secondary-5s-w8-d2"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    app.stop().await;
}

/// `holmes profile --ingest` measures the daemon under simulated monitors and stores what
/// their streams cost a bed, for the composer's utilisation.
#[test]
fn the_ingest_is_measured_and_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ingest.db");
    let text = profile(
        &[
            "--ingest",
            "--ingest-beds",
            "8",
            "--ingest-secs",
            "3",
            "--json",
        ],
        &db,
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    // The ingest alone: no model was profiled.
    assert_eq!(v["profiles"].as_array().unwrap().len(), 0, "{v}");
    let ingest = &v["ingest"];
    assert_eq!(ingest["beds"], 8, "{v}");
    let cores = ingest["cpu_cores"].as_f64().unwrap();
    assert!(cores > 0.0 && cores < 8.0, "{v}");
    assert!(ingest["seconds"].as_f64().unwrap() >= 3.0, "{v}");
    let per_bed = ingest["ms_per_bed_second"].as_f64().unwrap();
    assert!((per_bed - cores * 1000.0 / 8.0).abs() < 1e-9, "{v}");
    // Stored for this machine, as the composer reads it.
    let c = rusqlite::Connection::open(&db).unwrap();
    let (beds, stored): (i64, f64) = c
        .query_row("SELECT beds, cpu_cores FROM ingest_profiles", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(beds, 8);
    // The JSON's decimal text reads back to within a rounding of the stored figure.
    assert!(
        (stored - cores).abs() <= 1e-12 * cores.abs().max(1.0),
        "{stored} {cores}"
    );
}
