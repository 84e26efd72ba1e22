//! `holmes compose --method all` on a small copy of the zoo: every method at three budgets,
//! HOLMES at or above every baseline, and the exact optimum stated.

mod common;

#[test]
fn compose_all_methods_on_a_small_zoo() {
    let dir = tempfile::tempdir().unwrap();
    let zoo = dir.path().join("models");
    for m in [
        "ecg-primary-w8-d2",
        "ecg-secondary-w8-d2",
        "ecg-primary-w8-d8",
        "vitals-hr-mlp",
        "vitals-hr-logreg",
    ] {
        let (src, dst) = (common::root().join("models").join(m), zoo.join(m));
        std::fs::create_dir_all(&dst).unwrap();
        for f in ["manifest.json", "weights.mpk"] {
            std::fs::copy(src.join(f), dst.join(f)).unwrap();
        }
    }
    let cfg = holmes::config::DEFAULT_TOML
        .replace(
            "models_dir = \"models\"",
            &format!("models_dir = {:?}", zoo.display().to_string()),
        )
        .replace(
            "db = \"holmes.db\"",
            &format!("db = {:?}", dir.path().join("c.db").display().to_string()),
        );
    std::fs::write(dir.path().join("c.toml"), cfg).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .args([
            "compose", "--method", "all", "--beds", "64", "--calls", "30", "--json", "--config",
        ])
        .arg(dir.path().join("c.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let budgets: std::collections::BTreeSet<u64> = rows
        .iter()
        .map(|r| {
            r["budget_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("no budget in {r}"))
                .to_bits()
        })
        .collect();
    assert_eq!(budgets.len(), 3, "three budgets");
    assert_eq!(rows.len(), 3 * holmes::composer::compose::METHODS.len());
    for chunk in rows.chunks(holmes::composer::compose::METHODS.len()) {
        let auc = |m: &str| {
            chunk.iter().find(|r| r["method"] == m).unwrap()["val_roc_auc"]
                .as_f64()
                .unwrap()
        };
        for r in chunk {
            assert!(
                r["latency_ms"].as_f64().unwrap() <= r["budget_ms"].as_f64().unwrap() + 1e-9,
                "{r}"
            );
        }
        for base in ["rd", "af", "lf", "npo"] {
            assert!(
                auc("holmes") >= auc(base) - 1e-12,
                "holmes {} < {base} {}",
                auc("holmes"),
                auc(base)
            );
        }
        let exact = chunk.iter().find(|r| r["method"] == "exact").unwrap();
        assert_eq!(
            exact["complete"], true,
            "five models: the exact search completes"
        );
        assert!(auc("exact") >= auc("holmes") - 1e-12);
    }
}

#[test]
fn measured_latency_runs_the_real_engine_and_is_cached_by_architecture() {
    let dir = common::root().join("models");
    let names = ["ecg-primary-w8-d2", "ecg-secondary-w8-d2", "vitals-hr-mlp"];
    let manifests: Vec<holmes::zoo::Manifest> = names
        .iter()
        .map(|n| {
            holmes::zoo::ZooModel::<burn::backend::Flex>::load(&dir.join(n), &Default::default())
                .unwrap()
                .manifest
        })
        .collect();
    let mut m = holmes::composer::measure::Measurer::new(
        &dir,
        manifests,
        holmes::config::Config::default(),
        5,
    )
    .unwrap();
    let primary = m.service_ms(&[true, false, false]);
    assert!(primary > 0.0 && primary.is_finite(), "{primary}");
    let t = std::time::Instant::now();
    // The same architecture on the other lead is a cache hit.
    assert_eq!(m.service_ms(&[false, true, false]), primary);
    assert!(t.elapsed() < std::time::Duration::from_millis(50));
    let both = m.service_ms(&[true, true, true]);
    assert!(both.is_finite() && both > 0.0);
    let lat = m.latency_ms(&[true, true, true], 64, 30.0);
    assert!(lat >= both, "queueing only adds: {lat} vs {both}");
    println!(
        "measured service p95: one w8-d2 {primary:.2} ms, three members {both:.2} ms, 64-bed latency {lat:.2} ms"
    );
}
