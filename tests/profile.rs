//! `holmes profile` stores per-batch latency profiles that the running server shows through
//! `GET /api/models`.

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_are_stored_and_served() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("profiles.db");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .current_dir(common::root())
        .args([
            "profile",
            "--models",
            "ecg-primary-5s-w8-d2",
            "--models",
            "vitals-hr-mlp",
            "--max-batch",
            "4",
            "--repeats",
            "3",
            "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
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
