//! `holmes evaluate --json` through the real binary on a small subset of the split (the two
//! shortest records of each part, one noise level), with a report folder: its figures are
//! checked for consistency (counts add up, times and rates non-negative, the report's JSON is
//! what was printed), not for values. Where a beat classifier is fitted, each epoch draws 50
//! batches (`--beat-batches`) instead of the served counter's 1,000: the fit is a smoke check
//! too, and its figures are held to consistency alone.

mod common;

use std::process::Command;

use serde_json::Value;

/// `holmes evaluate --json` on the two shortest records of each part, one noise level (6 dB),
/// at a 5-s hop, with `extra` arguments: what it printed.
fn evaluate_json(data: &std::path::Path, extra: &[&str]) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_holmes"))
        .current_dir(common::root())
        .args([
            "evaluate",
            "--json",
            "--max-records",
            "2",
            "--noise-db",
            "6",
        ])
        .arg("--data")
        .arg(data)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "evaluate failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("--json prints JSON")
}

/// `holmes` with `args`, run in the repository root: what it printed as JSON (it must succeed).
fn holmes_json<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_holmes"))
        .current_dir(common::root())
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "holmes {:?} failed: {}",
        args.iter().map(|a| a.as_ref()).collect::<Vec<_>>(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("--json prints JSON")
}

fn as_u64(v: &Value, what: &str) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{what} is not a count: {v}"))
}

/// The false alarms a `false_alarm_causes` object accounts for (each has one cause).
fn causes(c: &Value) -> u64 {
    [
        "noise_marked",
        "ectopy",
        "before_episode",
        "after_episode",
        "other",
    ]
    .iter()
    .map(|k| as_u64(&c[*k], k))
    .sum()
}

#[test]
fn evaluate_json_adds_up_on_a_subset() {
    let Some(data) = common::data_dir("evaluate_json_adds_up_on_a_subset") else {
        return;
    };
    let report = tempfile::tempdir().unwrap();
    let report_dir = report.path().to_str().unwrap();
    let e = evaluate_json(&data, &["--report", report_dir]);
    let kept: Value = serde_json::from_str(
        &std::fs::read_to_string(report.path().join("evaluation.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(e, kept, "the report folder keeps what was printed");
    for svg in ["time_to_alarm.svg", "roc.svg"] {
        let s = std::fs::read_to_string(report.path().join(svg)).unwrap();
        assert!(
            s.starts_with("<svg") && s.trim_end().ends_with("</svg>"),
            "{svg}"
        );
    }

    assert_eq!(e["part"], "test");
    assert_eq!(e["records"].as_array().unwrap().len(), 2);
    assert_eq!(e["validation_records"].as_array().unwrap().len(), 2);
    assert_eq!(e["hop_secs"], 5);
    let detectors = e["detectors"].as_array().unwrap();
    let names: Vec<&str> = detectors
        .iter()
        .map(|d| d["detector"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ensemble", "classical"]);
    for d in detectors {
        let rule = &d["rule"];
        let (on, off) = (rule["on"].as_f64().unwrap(), rule["off"].as_f64().unwrap());
        assert!((0.0..=1.0).contains(&on) && off <= on, "{rule}");
        assert!(as_u64(&rule["k"], "k") <= as_u64(&rule["n"], "n"));
        let chosen = &d["chosen_on_validation"];
        assert!(as_u64(&chosen["detected"], "detected") <= as_u64(&chosen["episodes"], "episodes"));

        let conditions = d["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 2, "clean and 6 dB");
        assert!(conditions[0]["snr_db"].is_null());
        assert_eq!(conditions[1]["snr_db"], 6.0);
        for c in conditions {
            check_condition(c);
            // The served ensemble counts beats beside its members, so it says how many of its
            // false alarms a counted run took part in; the classical detector has no counter.
            let counted = &c["false_alarm_causes"]["counted_run"];
            assert_eq!(counted.is_u64(), d["detector"] == "ensemble", "{counted}");
        }
    }

    // The classical detector's clean alarms stand for a monitor's, each judged with the served
    // risk and alarm before it: every alarm its own figures count false is false here too
    // (one raised before an episode that it stays on into is false here, not there).
    let m = &e["monitor_alarms"];
    let alarms = as_u64(&m["alarms"], "alarms");
    let truths = as_u64(&m["true_alarms"], "true_alarms");
    let classical_clean = &detectors[1]["conditions"][0]["summary"];
    let classical_false = as_u64(&classical_clean["false_alarms"], "false_alarms");
    assert!(truths <= alarms, "{m}");
    assert!(alarms - truths >= classical_false, "{m}");
    assert!(as_u64(&m["true_vt"], "vt") + as_u64(&m["true_vf"], "vf") >= truths);
    assert!(as_u64(&m["on_for_true"], "on_for_true") <= truths);
    assert!(as_u64(&m["on_for_false"], "on_for_false") <= alarms - truths);
    assert_eq!(m["challenge_score"].is_f64(), alarms > 0, "{m}");
    if let Some(a) = m["roc_auc"].as_f64() {
        let (lo, hi) = (
            m["roc_auc_interval"][0].as_f64().unwrap(),
            m["roc_auc_interval"][1].as_f64().unwrap(),
        );
        assert!((0.0..=1.0).contains(&a) && lo <= a && a <= hi, "{m}");
    }
}

#[test]
fn the_beat_count_is_evaluated_beside_the_ensemble() {
    let Some(data) = common::data_dir("the_beat_count_is_evaluated_beside_the_ensemble") else {
        return;
    };
    let e = evaluate_json(
        &data,
        &[
            "--no-classical",
            "--beats",
            "--beat-fits",
            "2",
            "--beat-batches",
            "50",
            "--part",
            "validation",
        ],
    );
    let detectors = e["detectors"].as_array().unwrap();
    let names: Vec<&str> = detectors
        .iter()
        .map(|d| d["detector"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ensemble", "ensemble+beats"]);
    for d in detectors {
        for c in d["conditions"].as_array().unwrap() {
            check_condition(c);
        }
        // Both rules were chosen on validation, the part reported here: what they reached
        // there by EC57's overlap (the ensemble+beats pair with its chosen beat rule applied)
        // is the clean condition's figures.
        assert_eq!(
            d["ec57_on_validation"], d["conditions"][0]["summary"]["gross_figures"],
            "{d}"
        );
    }
    // The classifier's calls add up to the beats judged, on both parts.
    let beats = &e["beats"];
    for part in ["train", "validation"] {
        let f = &beats[part];
        let total: u64 = [
            "true_positive",
            "false_negative",
            "false_positive",
            "true_negative",
        ]
        .iter()
        .map(|k| as_u64(&f[*k], k))
        .sum();
        assert!(total > 100, "{part}: {f}");
    }
    // The beat rule served is one of those tried, each tried with its own alarm rule.
    let trials = e["beat_trials"].as_array().unwrap();
    assert_eq!(trials.len(), 24);
    assert!(trials.iter().any(|t| t["beat_rule"] == beats["rule"]));
    // Each alarm rule tried beside the counter clears above the score of a run short of its
    // call (0.2 times at most 0.99), so such a window neither raises nor holds the alarm.
    for t in trials {
        let off = t["choice"]["rule"]["off"].as_f64().unwrap();
        assert!(off > 0.198, "{t}");
    }
    // Two fits from two seeds, each ending in one logit, differently.
    let fits = beats["classifier"]["fits"].as_array().unwrap();
    assert_eq!(fits.len(), 2);
    for f in fits {
        let layers = f["layers"].as_array().unwrap();
        assert_eq!(layers.last().unwrap()["outputs"], 1);
    }
    assert_ne!(fits[0]["layers"], fits[1]["layers"]);
}

#[test]
fn the_records_can_be_read_with_one_lead_alone() {
    let Some(data) = common::data_dir("the_records_can_be_read_with_one_lead_alone") else {
        return;
    };
    let e = evaluate_json(
        &data,
        &["--no-classical", "--no-noise", "--leads", "primary"],
    );
    assert_eq!(e["leads"], "primary");
    for c in e["detectors"][0]["conditions"].as_array().unwrap() {
        check_condition(c);
    }

    // V alone fills the secondary slot: a secondary-lead member scores every window of it, a
    // primary-lead member none; records without a second lead (cudb) are not read.
    for (member, scored) in [
        ("ecg-secondary-5s-w16-d4", true),
        ("ecg-primary-5s-w16-d4", false),
    ] {
        let e = evaluate_json(
            &data,
            &[
                "--no-classical",
                "--no-noise",
                "--leads",
                "secondary",
                "--members",
                member,
            ],
        );
        assert_eq!(e["leads"], "secondary");
        let records = e["records"].as_array().unwrap();
        assert_eq!(records.len(), 2);
        assert!(
            records
                .iter()
                .all(|r| !r.as_str().unwrap().starts_with("cudb/"))
        );
        let w = &e["detectors"][0]["conditions"][0]["windows"];
        let (windows, unscored) = (
            as_u64(&w["windows"], "windows"),
            as_u64(&w["unscored"], "unscored"),
        );
        if scored {
            assert!(windows > 0 && unscored == 0, "{member}: {w}");
        } else {
            assert!(windows == 0 && unscored > 0, "{member}: {w}");
        }
    }

    // A rule chosen on one lead is not one for the zoo's book.
    let o = Command::new(env!("CARGO_BIN_EXE_holmes"))
        .args(["evaluate", "--leads", "primary", "--save-rule"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not with --leads primary"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Nor can one lead's members be weighed against the other's.
    let o = Command::new(env!("CARGO_BIN_EXE_holmes"))
        .args(["evaluate", "--leads", "secondary", "--pooling", "choose"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("with --leads secondary one lead's members"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_pooling_is_chosen_on_validation() {
    let Some(data) = common::data_dir("the_pooling_is_chosen_on_validation") else {
        return;
    };
    // Reported on validation, so what the chosen rule reached there is also its clean
    // condition's figure.
    let e = evaluate_json(
        &data,
        &[
            "--no-classical",
            "--no-noise",
            "--pooling",
            "choose",
            "--part",
            "validation",
        ],
    );
    // The plain mean first, then every share of the grid (the default members read both
    // leads), each with its own rule.
    let trials = e["pooling_trials"].as_array().unwrap();
    assert_eq!(trials.len(), 7, "{trials:?}");
    assert!(trials[0]["primary_share"].is_null());
    assert!(trials[1..].iter().all(|t| t["primary_share"].is_f64()));
    // The ensemble is evaluated pooled as one of them; a share serves only where its rule
    // reached the target and EC57's episode sensitivity kept it.
    let served = trials
        .iter()
        .find(|t| t["primary_share"] == e["primary_share"])
        .expect("the pooling served is one tried");
    if !served["primary_share"].is_null() {
        assert_eq!(served["choice"]["met_target"], true, "{served}");
        let target = e["target_sensitivity"].as_f64().unwrap();
        assert!(
            served["ec57_se"].as_f64().unwrap() >= target - 1e-9,
            "{served}"
        );
    }
    // The replays pooled again for the choice give the rule the ensemble is then chosen with.
    let chosen = &e["detectors"][0]["chosen_on_validation"];
    assert_eq!(
        chosen["rule"], served["choice"]["rule"],
        "{chosen} / {served}"
    );
    assert_eq!(chosen["false_alarms"], served["choice"]["false_alarms"]);
    // What the chosen rule reached on validation by EC57's overlap (kept with a saved rule) is
    // the served trial's, and the figures of the validation part it is reported on.
    let d = &e["detectors"][0];
    assert_eq!(d["ec57_on_validation"]["se"], served["ec57_se"], "{d}");
    assert_eq!(
        d["ec57_on_validation"], d["conditions"][0]["summary"]["gross_figures"],
        "{d}"
    );
    for d in e["detectors"].as_array().unwrap() {
        for c in d["conditions"].as_array().unwrap() {
            check_condition(c);
        }
    }
}

fn check_condition(c: &Value) {
    // EC57's sensitivity by kind counts each kind's episodes as time to alarm does.
    let kinds = c["by_kind"].as_object().unwrap();
    let ec57 = c["ec57_by_kind"].as_object().unwrap();
    assert_eq!(
        kinds.keys().collect::<Vec<_>>(),
        ec57.keys().collect::<Vec<_>>()
    );
    let (mut episodes, mut detected) = (0, 0);
    for (kind, t) in kinds {
        let k = &ec57[kind];
        assert_eq!(k["episodes"], t["episodes"], "{kind}");
        episodes += as_u64(&k["episodes"], "episodes");
        detected += as_u64(&k["detected"], "detected");
    }
    // The merged count joins a VT run and the VF it runs into: one merged episode detected
    // has a kind's episode detected, one missed has all of its kinds' missed.
    let gross = &c["summary"]["gross"];
    let (tp, missed) = (as_u64(&gross["tp_s"], "tp_s"), as_u64(&gross["fn"], "fn"));
    assert!(detected >= tp, "{detected} < {tp}");
    assert!(
        episodes - detected >= missed,
        "{episodes} - {detected} < {missed}"
    );
    assert!(episodes >= tp + missed);
    let w = &c["windows"];
    assert!(as_u64(&w["positives"], "positives") <= as_u64(&w["windows"], "windows"));
    for auc in ["roc_auc", "pr_auc"] {
        if let Some(x) = w[auc].as_f64() {
            assert!((0.0..=1.0).contains(&x), "{auc} {x}");
        }
    }
    let records = c["records"].as_array().unwrap();
    let s = &c["summary"];
    assert_eq!(as_u64(&s["records"], "records"), records.len() as u64);
    // Gross counts are the sums of the records' counts.
    for k in ["tp_s", "fn", "tp_p", "fp"] {
        let sum: u64 = records.iter().map(|r| as_u64(&r["counts"][k], k)).sum();
        assert_eq!(as_u64(&s["gross"][k], k), sum, "{k}");
    }
    // EC57's test period: the pooled counts are the records', and each record counts there
    // the reference episodes that end after 5:00.
    for k in ["tp_s", "fn", "tp_p", "fp"] {
        let sum: u64 = records
            .iter()
            .map(|r| as_u64(&r["test_period"][k], k))
            .sum();
        assert_eq!(as_u64(&s["test_period"][k], k), sum, "{k}");
    }
    // EC57's record set: the same sums over the records that are not paced.
    let unpaced: Vec<&Value> = records
        .iter()
        .filter(|r| !r["paced"].as_bool().expect("paced"))
        .collect();
    assert_eq!(
        as_u64(&s["paced_records"], "paced_records"),
        (records.len() - unpaced.len()) as u64
    );
    for k in ["tp_s", "fn", "tp_p", "fp"] {
        for (set, per_record) in [("unpaced", "counts"), ("ec57", "test_period")] {
            let sum: u64 = unpaced.iter().map(|r| as_u64(&r[per_record][k], k)).sum();
            assert_eq!(as_u64(&s[set][k], k), sum, "{set} {k}");
        }
    }
    for r in records {
        let c = &r["test_period"];
        let after = r["timings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["end_ms"].as_i64().unwrap() > 300_000)
            .count() as u64;
        assert_eq!(
            as_u64(&c["tp_s"], "tp_s") + as_u64(&c["fn"], "fn"),
            after,
            "{r}"
        );
    }
    // Each gross figure lies inside its interval.
    for (figures, intervals, f) in [
        ("gross_figures", "gross_intervals", "se"),
        ("gross_figures", "gross_intervals", "pp"),
        ("test_period_figures", "test_period_intervals", "se"),
        ("test_period_figures", "test_period_intervals", "pp"),
        ("unpaced_figures", "unpaced_intervals", "se"),
        ("unpaced_figures", "unpaced_intervals", "pp"),
        ("ec57_figures", "ec57_intervals", "se"),
        ("ec57_figures", "ec57_intervals", "pp"),
    ] {
        match (s[figures][f].as_f64(), s[intervals][f].as_array()) {
            (Some(x), Some(lh)) => {
                let (lo, hi) = (lh[0].as_f64().unwrap(), lh[1].as_f64().unwrap());
                assert!(
                    0.0 <= lo && lo <= x && x <= hi && hi <= 1.0,
                    "{figures} {f} {x} {lo} {hi}"
                );
            }
            (None, None) => {}
            other => panic!("{figures} {f}: figure and interval disagree: {other:?}"),
        }
    }
    let fa: u64 = records
        .iter()
        .map(|r| as_u64(&r["false_alarms"], "FA"))
        .sum();
    assert_eq!(as_u64(&s["false_alarms"], "FA"), fa);
    // Every false alarm has exactly one cause, per record and in all.
    for r in records {
        assert_eq!(
            causes(&r["false_alarm_causes"]),
            as_u64(&r["false_alarms"], "FA"),
            "{r}"
        );
    }
    assert_eq!(causes(&c["false_alarm_causes"]), fa);
    // The counter's false alarms are some of them, and add up over the records (none said
    // for a detector without a counter: the classical one).
    let counted = |c: &Value| c["false_alarm_causes"]["counted_run"].as_u64();
    for r in records {
        if let Some(n) = counted(r) {
            assert!(n <= as_u64(&r["false_alarms"], "FA"), "{r}");
        }
    }
    let per_record: Vec<Option<u64>> = records.iter().map(counted).collect();
    match counted(c) {
        Some(n) => assert_eq!(n, per_record.iter().flatten().sum::<u64>()),
        None => assert!(per_record.iter().all(Option::is_none), "{per_record:?}"),
    }
    assert!(s["monitored_ms"].as_i64().unwrap() >= 0);
    if let Some(r) = s["false_alarms_per_hour"].as_f64() {
        assert!(r >= 0.0);
    }
    // Every reference episode has exactly one time-to-alarm outcome.
    let t = &s["time_to_alarm"];
    let episodes = as_u64(&t["episodes"], "episodes");
    assert_eq!(
        as_u64(&s["gross"]["tp_s"], "tp_s") + as_u64(&s["gross"]["fn"], "fn"),
        episodes
    );
    assert_eq!(
        as_u64(&t["raised"], "raised")
            + as_u64(&t["already_on"], "on")
            + as_u64(&t["missed"], "missed"),
        episodes
    );
    let (median, p90, max) = (
        t["median_s"].as_f64(),
        t["p90_s"].as_f64(),
        t["max_s"].as_f64(),
    );
    if let (Some(a), Some(b), Some(m)) = (median, p90, max) {
        assert!(0.0 <= a && a <= b && b <= m, "{t}");
    }
    for r in records {
        for tm in r["timings"].as_array().unwrap() {
            if let Some(d) = tm["delay_ms"].as_i64() {
                assert!(d >= 0, "{tm}");
            }
            assert!(tm["onset_ms"].as_i64() <= tm["end_ms"].as_i64());
        }
    }
    // By kind, the episodes of each kind (a VT turning into VF is one reference episode but
    // one of each kind, so the kinds hold at least as many).
    let by_kind: u64 = c["by_kind"]
        .as_object()
        .unwrap()
        .values()
        .map(|k| as_u64(&k["episodes"], "episodes"))
        .sum();
    assert!(by_kind >= episodes, "{by_kind} < {episodes}");
}

#[test]
fn spliced_runs_of_a_held_out_patient_are_judged_by_length_and_rate() {
    let Some(data) =
        common::data_dir("spliced_runs_of_a_held_out_patient_are_judged_by_length_and_rate")
    else {
        return;
    };
    // One test patient with annotated ventricular beats; the rule given, so nothing is chosen
    // on validation.
    let dir = tempfile::tempdir().unwrap();
    let split = dir.path().join("split.toml");
    std::fs::write(
        &split,
        "train = [\"mitdb/100\"]\nvalidation = [\"mitdb/101\"]\ntest = [\"mitdb/205\"]\n",
    )
    .unwrap();
    let report = dir.path().join("report");
    let run = |seed: &str| -> Value {
        let e = holmes_json(&[
            "evaluate",
            "--json",
            "--no-noise",
            "--no-classical",
            "--spliced",
            "--splice-seed",
            seed,
            "--rule",
            "0.42,0.21,1,1",
            "--split",
            split.to_str().unwrap(),
            "--data",
            data.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ]);
        e["spliced"].clone()
    };
    let s = run("1");
    assert_eq!(s["records"], serde_json::json!(["mitdb/205"]));
    let count = |k: &str| (as_u64(&s[k]["runs"], k), as_u64(&s[k]["detected"], k));
    let (short, long, salvos, bigeminy) = (
        count("runs_5_7"),
        count("runs_8_plus"),
        count("salvos_2_4"),
        count("bigeminy"),
    );
    for (n, k) in [short, long, salvos, bigeminy] {
        assert!(k <= n, "{s}");
    }
    assert!(short.0 + long.0 > 3 && salvos.0 + bigeminy.0 > 3, "{s}");
    // The shaped runs (a copy of the record of their own) are counted by shape alone; the
    // plain row holds the plain runs above.
    let rows = s["shapes"].as_array().unwrap();
    let row = |shape: &str| {
        let r = rows.iter().find(|r| r["shape"] == shape).unwrap();
        (as_u64(&r["runs"], shape), as_u64(&r["detected"], shape))
    };
    assert_eq!(row("plain").0, short.0 + long.0, "{s}");
    assert_eq!(row("paced").0, 0, "mitdb 205 is not paced: {s}");
    let mut shaped = 0;
    for shape in ["under_way", "slow", "burst", "flat_start"] {
        let (n, k) = row(shape);
        assert!(k <= n, "{s}");
        shaped += n;
    }
    assert!(shaped > 3, "{s}");
    assert_eq!(
        short.0 + long.0 + salvos.0 + bigeminy.0 + shaped,
        as_u64(&s["events"], "events")
    );
    // The length-and-rate bands hold every run once.
    let banded: u64 = s["bands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| as_u64(&b["runs"], "runs"))
        .sum();
    assert_eq!(banded, short.0 + long.0);
    assert!(
        long.1 > 0,
        "the served ensemble detects no spliced run of 8+ beats: {s}"
    );
    // The runs rank above the salvos and bigeminy by their highest score more often than not.
    let ranking = s["ranking_roc_auc"]
        .as_f64()
        .expect("runs and negatives both");
    assert!(ranking > 0.5 && ranking <= 1.0, "{s}");
    let svg = std::fs::read_to_string(report.join("spliced.svg")).unwrap();
    assert!(
        svg.contains("spliced run") && svg.contains("annotated VT run"),
        "{svg}"
    );
    // Deterministic from the seed; another seed draws other events.
    assert_eq!(run("1"), s);
    assert_ne!(run("2")["bands"], s["bands"]);
}

#[test]
fn the_beat_classifier_is_judged_on_a_database_it_was_not_fitted_on() {
    let Some(data) =
        common::data_dir("the_beat_classifier_is_judged_on_a_database_it_was_not_fitted_on")
    else {
        return;
    };
    let c = holmes_json(&[
        "evaluate",
        "--cross-database",
        "--json",
        "--beat-fits",
        "1",
        "--beat-batches",
        "50",
        "--max-records",
        "3",
        "--data",
        data.to_str().unwrap(),
    ]);
    assert!((c["anchor_sensitivity"].as_f64().unwrap() - 0.777).abs() < 1e-9);
    let folds = c["folds"].as_array().unwrap();
    let held: Vec<&str> = folds
        .iter()
        .map(|f| f["held_out"].as_str().unwrap())
        .collect();
    // qtdb, which no part of the split holds, where the data folder has it.
    if data.join("qtdb").join("RECORDS").exists() {
        assert_eq!(held, ["svdb", "mitdb", "qtdb"]);
        assert_eq!(
            folds[2]["fitted_on"],
            serde_json::json!(["mitdb", "svdb", "nstdb"])
        );
    } else {
        assert_eq!(held, ["svdb", "mitdb"]);
    }
    for f in folds {
        // Never fitted on the database it is judged on.
        let fitted: Vec<&str> = f["fitted_on"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap())
            .collect();
        assert!(!fitted.contains(&f["held_out"].as_str().unwrap()), "{f}");
        let q = &f["qrs"];
        let n = |k: &str| as_u64(&q[k], k);
        assert!(n("detected") <= n("annotated") && n("ventricular_detected") <= n("ventricular"));
        assert!(n("annotated") > 1_000 && n("ventricular") > 0, "{q}");
        assert!(n("false_detections") <= n("detections"));
        // Every ventricular beat is a true positive or a false negative at every call, by the
        // classifier's own probabilities and by the counter's (the beats alike), which judge
        // the same detections.
        for calls in ["calls", "counter_calls"] {
            let mut last_tp = u64::MAX;
            for k in f[calls].as_array().unwrap() {
                let (tp, fn_) = (
                    as_u64(&k["true_positive"], "tp"),
                    as_u64(&k["false_negative"], "fn"),
                );
                assert_eq!(tp + fn_, n("ventricular"), "{calls}: {k}");
                assert!(tp <= last_tp, "a stricter call finds no more: {k}");
                last_tp = tp;
            }
        }
        let calls = |which: &str| f[which].as_array().unwrap().len();
        assert_eq!(calls("calls"), calls("counter_calls"));
    }
}

#[test]
fn the_operating_points_are_chosen_on_the_other_folds_and_pooled() {
    let Some(data) =
        common::data_dir("the_operating_points_are_chosen_on_the_other_folds_and_pooled")
    else {
        return;
    };
    let c = holmes_json(&[
        "evaluate",
        "--folds",
        "2",
        "--json",
        "--no-noise",
        "--beat-fits",
        "1",
        "--beat-batches",
        "50",
        "--max-records",
        "3",
        "--data",
        data.to_str().unwrap(),
    ]);
    let folds = c["per_fold"].as_array().unwrap();
    assert_eq!(folds.len(), 2);
    for f in folds {
        // One fit asked for, so one epoch kept; no stress test, so no false alarms under it.
        assert_eq!(f["epochs"].as_array().unwrap().len(), 1, "{f}");
        assert!(f["stressed_false_alarms"].is_null(), "{f}");
    }
    // Every record in exactly one fold.
    let mut records: Vec<&str> = folds
        .iter()
        .flat_map(|f| f["records"].as_array().unwrap().iter())
        .map(|r| r.as_str().unwrap())
        .collect();
    let n = records.len();
    records.sort_unstable();
    records.dedup();
    assert_eq!(records.len(), n, "a record in two folds: {c}");
    assert_eq!(n, 6, "three shortest of validation and of test: {c}");
    // The pooled figures are the folds' own, added up.
    let episodes: u64 = folds
        .iter()
        .map(|f| as_u64(&f["episodes"], "episodes"))
        .sum();
    let detected: u64 = folds
        .iter()
        .map(|f| as_u64(&f["detected"], "detected"))
        .sum();
    let pooled = &c["clean"]["detected"];
    assert_eq!(as_u64(&pooled["of"], "of"), episodes, "{c}");
    assert_eq!(as_u64(&pooled["count"], "count"), detected, "{c}");
    assert!(episodes > 0, "{c}");
    let [lo, hi] = [0, 1].map(|i| pooled["interval"][i].as_f64().unwrap());
    let v = pooled["value"].as_f64().unwrap();
    assert!(lo <= v && v <= hi, "{pooled}");
    let fa: u64 = folds.iter().map(|f| as_u64(&f["false_alarms"], "fa")).sum();
    assert_eq!(
        as_u64(&c["clean"]["summary"]["false_alarms"], "false_alarms"),
        fa
    );
    // Every false alarm has one cause, overall and in each database.
    let pooled_rows =
        std::iter::once(&c["clean"]).chain(c["clean_by_database"].as_object().unwrap().values());
    for p in pooled_rows {
        assert_eq!(
            causes(&p["false_alarm_causes"]),
            as_u64(&p["summary"]["false_alarms"], "fa"),
            "{p}"
        );
    }
    for f in folds {
        let rule = &f["alarm_rule"];
        assert!(
            rule["off"].as_f64().unwrap() <= rule["on"].as_f64().unwrap(),
            "{f}"
        );
        assert!(as_u64(&f["chosen_on_detected"], "d") <= as_u64(&f["chosen_on_episodes"], "e"));
    }
    assert!(c["stressed"].is_null(), "--no-noise: {c}");
}

#[test]
fn cross_validation_judges_each_folds_own_spliced_runs() {
    let Some(data) = common::data_dir("cross_validation_judges_each_folds_own_spliced_runs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let split = dir.path().join("split.toml");
    std::fs::write(
        &split,
        "train = [\"mitdb/100\", \"mitdb/106\"]\nvalidation = [\"mitdb/205\", \"mitdb/203\"]\n\
         test = [\"mitdb/213\", \"mitdb/219\"]\n",
    )
    .unwrap();
    let c = holmes_json(&[
        "evaluate",
        "--folds",
        "2",
        "--spliced",
        "--json",
        "--no-noise",
        "--beat-fits",
        "1",
        "--beat-batches",
        "50",
        "--split",
        split.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
    ]);
    assert_eq!(c["splice_seed"], 1);
    let s = &c["spliced"];
    let runs = as_u64(&s["runs_5_7"]["runs"], "runs") + as_u64(&s["runs_8_plus"]["runs"], "runs");
    let detected =
        as_u64(&s["runs_5_7"]["detected"], "d") + as_u64(&s["runs_8_plus"]["detected"], "d");
    assert!(runs >= 10 && detected <= runs, "{s}");
    assert!(as_u64(&s["salvos_2_4"]["runs"], "salvos") > 0, "{s}");
    // The rules were chosen on the other fold's real records only: their episodes, not the
    // spliced runs (each fold holds fewer real episodes than it has spliced runs).
    let real = as_u64(&c["clean"]["detected"]["of"], "episodes");
    for f in c["per_fold"].as_array().unwrap() {
        assert!(as_u64(&f["chosen_on_episodes"], "e") <= real, "{f}");
    }
    assert!(runs > real, "{c}");
    // Holmes's opinion on the proxy monitor's alarm at each fold's spliced events, pooled with
    // the monitor's own alarms: plain events, then with the shaped runs among the true ones.
    let a = &c["spliced_adjudication"];
    let opined = as_u64(&a["runs_5_7"]["runs"], "a") + as_u64(&a["runs_8_plus"]["runs"], "a");
    assert!(opined > 0 && opined <= runs, "{a}");
    let pools = c["proxy_pooled"].as_array().expect("the proxy pooled");
    assert_eq!(pools.len(), 2, "{pools:?}");
    assert_eq!(pools[0]["events"], "plain");
    let (plain, shaped) = (&pools[0], &pools[1]);
    assert_eq!(as_u64(&plain["short_runs"], "s"), opined, "{plain}");
    assert!(as_u64(&plain["true_alarms"], "t") >= opined, "{plain}");
    assert!(as_u64(&plain["confirmed_true"], "c") <= as_u64(&plain["true_alarms"], "t"));
    assert!(as_u64(&shaped["short_runs"], "s") > opined, "{shaped}");
    // Every alarm of the pool with the shaped runs, one by one, adding up to its figures.
    let listed = c["alarms"].as_array().expect("the alarms listed");
    let count = |f: &dyn Fn(&Value) -> bool| listed.iter().filter(|a| f(a)).count() as u64;
    assert_eq!(
        listed.len() as u64,
        as_u64(&shaped["alarms"], "a"),
        "{shaped}"
    );
    assert_eq!(
        count(&|a| a["truth"] == true),
        as_u64(&shaped["true_alarms"], "t")
    );
    let confirmed = |a: &Value| a["confirmed"] == true;
    assert_eq!(
        count(&|a| a["truth"] == true && confirmed(a)),
        as_u64(&shaped["confirmed_true"], "c")
    );
    assert_eq!(
        count(&|a| a["truth"] == false && confirmed(a)),
        as_u64(&shaped["confirmed_false"], "c")
    );
    for a in listed {
        let p = a["probability"].as_f64().unwrap();
        assert_eq!(confirmed(a), p >= a["confirm_at"].as_f64().unwrap(), "{a}");
        assert!(!a["reason"].as_str().unwrap().is_empty(), "{a}");
        assert!(a["at_s"].as_f64().unwrap() > 0.0, "{a}");
        let record = a["record"].as_str().unwrap();
        assert!(record.starts_with("mitdb/"), "{a}");
        // Seconds into a half-hour record (a spliced copy a little longer), not milliseconds.
        assert!(a["at_s"].as_f64().unwrap() < 3600.0, "{a}");
    }
    assert!(count(&|a| a["source"] == "spliced") > 0, "{c}");
    assert!(count(&|a| a["source"] == "monitor") > 0, "{c}");
    // A textbook monitor at N = 4, 5 and 6, clean only (`--no-noise`): these records' VT runs
    // draw true alarms, and the opinion confirms no more alarms than there are.
    let textbook = c["textbook_monitor"]
        .as_array()
        .expect("the textbook monitor");
    let n: Vec<u64> = textbook
        .iter()
        .map(|r| as_u64(&r["min_beats"], "n"))
        .collect();
    assert_eq!(n, [4, 5, 6], "{textbook:?}");
    for r in textbook {
        let (all, truth) = (as_u64(&r["alarms"], "a"), as_u64(&r["true_alarms"], "t"));
        assert!(truth > 0 && truth <= all, "{r}");
        assert!(as_u64(&r["confirmed_true"], "c") <= truth, "{r}");
        assert!(as_u64(&r["confirmed_false"], "f") <= all - truth, "{r}");
    }
}
