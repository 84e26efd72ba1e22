//! `holmes compose` on a small copy of the zoo: every method at three budgets, HOLMES at or
//! above every baseline, every choice covering both leads, the gap to the exact optimum, the
//! report files (JSON, Markdown, the SVG figure) and the accuracy-constrained dual.

mod common;

use serde_json::Value;

const METHODS: usize = holmes::config::METHODS.len();

/// A five-model zoo and a config pointing at it (and at a scratch database).
fn small_zoo() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let zoo = dir.path().join("models");
    for m in [
        "ecg-primary-5s-w8-d2",
        "ecg-secondary-5s-w8-d2",
        "ecg-primary-10s-w8-d2",
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
    let path = dir.path().join("c.toml");
    std::fs::write(&path, cfg).unwrap();
    (dir, path)
}

/// Runs `holmes compose --json` with `args`; the printed report.
fn compose(config: &std::path::Path, args: &[&str]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .arg("compose")
        .args(args)
        .arg("--json")
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "no progress bar with --json: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a number: {v}"))
}

#[test]
fn compose_all_methods_on_a_small_zoo() {
    let (dir, config) = small_zoo();
    let out = dir.path().join("report");
    let report = compose(
        &config,
        &[
            "--method",
            "all",
            "--beds",
            "64",
            "--calls",
            "30",
            "--estimator",
            "des",
            "--report",
            out.to_str().unwrap(),
        ],
    );
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(report["latency"], "des");
    let all = serde_json::json!({"primary_only": true, "secondary_only": true, "both": true});
    assert_eq!(report["lead_sets"], all, "the zoo covers every lead set");
    let budgets: std::collections::BTreeSet<u64> =
        rows.iter().map(|r| f(&r["budget_ms"]).to_bits()).collect();
    assert_eq!(budgets.len(), 3, "three budgets");
    assert_eq!(rows.len(), 3 * METHODS);
    let n = report["models"].as_array().unwrap().len();
    assert_eq!(n, 5);
    for chunk in rows.chunks(METHODS) {
        let row = |m: &str| chunk.iter().find(|r| r["method"] == m).unwrap();
        let auc = |m: &str| f(&row(m)["val_roc_auc"]);
        for r in chunk {
            assert!(f(&r["latency_ms"]) <= f(&r["budget_ms"]) + 1e-9, "{r}");
            // Every profiler call recorded, in order, with the best so far.
            let t = r["trajectory"].as_array().unwrap();
            assert_eq!(t.len() as u64, r["profiler_calls"].as_u64().unwrap());
            for (i, s) in t.iter().enumerate() {
                assert_eq!(s["call"].as_u64().unwrap(), i as u64 + 1);
                assert_eq!(s["members"].as_str().unwrap().len(), n);
                // Feasible: within the budget and covering the lead sets.
                let leads = s["members"].as_str().unwrap().char_indices();
                let covers = ["ecg-primary", "ecg-secondary"].iter().all(|l| {
                    leads.clone().any(|(i, c)| {
                        c == '1' && report["models"][i].as_str().unwrap().starts_with(l)
                    })
                });
                assert_eq!(s["covers_leads"].as_bool().unwrap(), covers, "{s}");
                assert_eq!(
                    s["feasible"].as_bool().unwrap(),
                    covers && f(&s["latency_ms"]) <= f(&r["budget_ms"])
                );
            }
            if !r["members"].as_array().unwrap().is_empty() {
                assert_eq!(r["lead_sets"], all, "{r}");
                // The searches return the best they profiled; the greedy baselines their
                // last feasible ensemble, which may be worse than one seen on the way.
                let best = f(&t.last().unwrap()["best_accuracy"]);
                if ["rd", "af", "lf"].contains(&r["method"].as_str().unwrap()) {
                    assert!(best >= f(&r["val_roc_auc"]), "{r}");
                } else {
                    assert_eq!(best, f(&r["val_roc_auc"]), "{}", r["method"]);
                }
                // Youden's threshold from validation, F1 and accuracy on both splits.
                let th = f(&r["threshold"]);
                assert!(th > 0.0 && th < 1.0);
                for k in ["val_f1", "val_accuracy", "test_f1", "test_accuracy"] {
                    assert!((0.0..=1.0).contains(&f(&r[k])), "{k}: {r}");
                }
            }
        }
        for base in ["rd", "af", "lf", "npo"] {
            assert!(
                auc("holmes") >= auc(base) - 1e-12,
                "holmes {} < {base} {}",
                auc("holmes"),
                auc(base)
            );
        }
        let exact = row("exact");
        assert_eq!(
            exact["complete"], true,
            "five models: the exact search completes"
        );
        assert!(auc("exact") >= auc("holmes") - 1e-12);
        let gap = &row("holmes")["gap_to_exact"];
        assert_eq!(gap["proven"], true);
        assert!((f(&gap["value"]) - (auc("exact") - auc("holmes"))).abs() < 1e-12);
    }

    // The files: the same JSON, the Markdown table, and the figure.
    let files: Vec<String> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(files.len(), 3);
    let on_disk: Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(on_disk["rows"], report["rows"]);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| goal | method | valAUC") && md.contains("Gap to the exact optimum"));
    assert_eq!(
        md.matches("| holmes |").count(),
        6,
        "table and trajectories, 3 budgets"
    );
    let svg = std::fs::read_to_string(out.join("pareto.svg")).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<g").count(), svg.matches("</g>").count());
    assert_eq!(
        svg.matches("class=\"budget\"").count(),
        3,
        "one line per budget"
    );
    assert!(svg.contains("class=\"pareto\"") && svg.contains("class=\"point\""));
    for m in holmes::config::METHODS {
        let chosen = rows
            .iter()
            .filter(|r| r["method"] == m && !r["members"].as_array().unwrap().is_empty())
            .count();
        assert_eq!(
            svg.matches(&format!("class=\"marker\" data-method=\"{m}\""))
                .count(),
            chosen,
            "one marker per method and budget: {m}"
        );
    }
}

#[test]
fn the_dual_finds_the_fastest_ensemble_reaching_an_accuracy_floor() {
    let (dir, config) = small_zoo();
    let report_dir = dir.path().join("dual");
    // A floor between the best single model and the best ensemble.
    let floor = "0.95";
    let report = compose(
        &config,
        &[
            "--method",
            "all",
            "--min-accuracy",
            floor,
            "--calls",
            "30",
            "--report",
            report_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(report["latency"], "netcalc", "the default estimator");
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), METHODS);
    let row = |m: &str| rows.iter().find(|r| r["method"] == m).unwrap();
    let exact = row("exact");
    assert_eq!(exact["complete"], true);
    assert_eq!(exact["goal"]["kind"], "min_latency");
    assert!(f(&exact["val_roc_auc"]) >= 0.95, "{exact}");
    for r in rows {
        if r["members"].as_array().unwrap().is_empty() {
            continue; // a baseline that never reached the floor
        }
        assert!(f(&r["val_roc_auc"]) >= 0.95, "{r}");
        assert_eq!(r["lead_sets"]["secondary_only"], true, "{r}");
        assert!(
            f(&r["latency_ms"]) >= f(&exact["latency_ms"]) - 1e-9,
            "nothing beats the exact optimum: {r}"
        );
    }
    let holmes = row("holmes");
    assert!(!holmes["members"].as_array().unwrap().is_empty());
    assert!(f(&holmes["gap_to_exact"]["value"]) >= 0.0);
    let svg = std::fs::read_to_string(report_dir.join("pareto.svg")).unwrap();
    assert_eq!(svg.matches("class=\"floor\"").count(), 1);
}

#[test]
fn measured_latency_runs_the_real_engine_and_is_cached_by_architecture() {
    let dir = common::root().join("models");
    let names = [
        "ecg-primary-5s-w8-d2",
        "ecg-secondary-5s-w8-d2",
        "vitals-hr-mlp",
    ];
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
