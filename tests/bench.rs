//! `holmes bench` runs end to end and reports what it measured (a smoke run: real benchmarks
//! run at speed 1 and their results go to BENCHMARKS.md, never into test assertions on time).

mod common;

#[test]
fn bench_reports_windows_latency_and_resources() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .current_dir(common::root())
        .args([
            "bench",
            "--beds",
            "3",
            "--duration",
            "5",
            "--speed",
            "20",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v[0];
    assert_eq!(r["beds"], 3);
    assert!(r["windows"].as_u64().unwrap() >= 3, "{r}");
    assert_eq!(
        r["windows"],
        r["scored"].as_u64().unwrap()
            + r["partial"].as_u64().unwrap()
            + r["superseded"].as_u64().unwrap()
            + r["dropped"].as_u64().unwrap()
            + r["insufficient"].as_u64().unwrap()
    );
    assert!(r["latency_ms_p50"].as_f64().unwrap() > 0.0);
    assert!(r["peak_rss_mb"].as_f64().unwrap() > 1.0);
    assert!(r["frames_per_sec"].as_f64().unwrap() > 10.0);
}
