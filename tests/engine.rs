//! The serving engine with `FakeModel` members: cross-bed batching, deadline order, partial
//! scores at the deadline, superseding under overload, a faulty member isolated, the zoo's
//! beat counter read beside the members (and left out, named, when it is late), and the
//! engine's own overhead per window (printed).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use holmes::config::Combine;
use holmes::config::EngineConfig;
use holmes::config::StorageConfig;
use holmes::core::window::ClosedWindow;
use holmes::core::window::LeadSlot;
use holmes::core::window::WindowQuality;
use holmes::serving::engine::{Engine, Factory, FakeModel, InferModel, MemberSpec};
use holmes::serving::store::{self, ServedEnsemble, StoreHandle, StoreReader};
use holmes::signal::beats::BeatCounter;
use holmes::zoo::{Input, Lead};

struct Rig {
    engine: Engine,
    store: StoreHandle,
    reader: StoreReader,
    writer: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

fn fake(f: FakeModel) -> Factory {
    Arc::new(move || Ok(Box::new(f.clone()) as Box<dyn InferModel>))
}

fn member(name: &str, f: FakeModel, batch_cap: usize) -> MemberSpec {
    MemberSpec {
        name: name.into(),
        version: 1,
        input: Input::Ecg {
            lead: Lead::Primary,
            samples: 7500,
            sample_rate_hz: 250,
            bandpass: false,
        },
        factory: fake(f),
        workers: 1,
        batch_cap,
        weight: 1.0,
        device: "cpu".into(),
    }
}

fn rig(slo_ms: u64, queue_capacity: usize, members: Vec<MemberSpec>) -> Rig {
    rig_counting(slo_ms, queue_capacity, members, None)
}

/// The zoo's beat counter, as the daemon serves it at the 5-s hop.
fn zoo_counter() -> BeatCounter {
    let models = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    BeatCounter::load(&models, 5)
        .unwrap()
        .expect("the zoo has a beat counter")
}

fn rig_counting(
    slo_ms: u64,
    queue_capacity: usize,
    members: Vec<MemberSpec>,
    beats: Option<BeatCounter>,
) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StorageConfig {
        db: dir.path().join("e.db"),
        retention_days: 1,
        thin_after_days: 0,
        thin_keep_secs: 30,
        batch_rows: 64,
        flush_ms: 5,
        backlog_rows: 10_000,
        retry_min_ms: 100,
        retry_max_ms: 1000,
    };
    let (store, id, writer) = store::start(
        &cfg,
        &holmes::appliance::schema::WARD,
        ServedEnsemble {
            members: &[],
            source: "test",
            plan: "[]".into(),
            counter: None,
            primary_share: None,
        },
    )
    .unwrap();
    let ecfg = EngineConfig {
        slo_ms,
        queue_capacity,
        batch_cap: 8,
        workers_per_model: 1,
        combine: Combine::Mean,
        device: "cpu".into(),
        pin: Default::default(),
    };
    let engine = Engine::start(&ecfg, members, store.clone(), id, beats).unwrap();
    let reader = StoreReader::open(&cfg.db).unwrap();
    Rig {
        engine,
        store,
        reader,
        writer: Some(writer),
        _dir: dir,
    }
}

impl Rig {
    fn rows(&self, bed: &str) -> Vec<holmes::serving::store::ScoreRow> {
        self.reader.scores(bed, i64::MIN, i64::MAX, 10_000).unwrap()
    }

    /// Waits until `n` windows are committed in total.
    fn wait(&self, n: u64) {
        let until = Instant::now() + Duration::from_secs(20);
        while self.store.health.committed_scores.load(Ordering::Relaxed) < n {
            assert!(Instant::now() < until, "timed out waiting for {n} commits");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.engine.shutdown();
        self.store.close();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

fn window(bed: &str, index: u64, last_sample_at: Instant) -> ClosedWindow {
    let slot = LeadSlot {
        coverage: 1.0,
        lead_off_secs: 0.0,
        usable: true,
    };
    ClosedWindow {
        bed: bed.into(),
        index,
        start_ms: index as i64 * 30_000,
        end_ms: (index as i64 + 1) * 30_000,
        ecg: [Some(vec![0.0f32; 7500].into()), None, None],
        heart_rate: None,
        quality: WindowQuality {
            leads: [Some(slot), None, None],
            gap_samples: 0,
            hr_coverage: 0.0,
        },
        last_sample_at,
    }
}

fn busy(ms: u64) -> FakeModel {
    FakeModel::new(Duration::from_millis(ms), Duration::ZERO)
}

#[test]
fn windows_that_coincide_are_batched_across_beds() {
    let r = rig(5_000, 64, vec![member("m", busy(40), 8)]);
    let now = Instant::now();
    r.engine.submit(window("blocker", 0, now)); // keeps the worker busy while the rest queue
    std::thread::sleep(Duration::from_millis(10));
    for b in 0..8 {
        r.engine.submit(window(&format!("bed-{b}"), 0, now));
    }
    r.wait(9);
    let batch = |bed: &str| {
        r.rows(bed)[0].timing["members"][0]["batch"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(batch("blocker"), 1);
    for b in 0..8 {
        assert_eq!(
            batch(&format!("bed-{b}")),
            8,
            "the eight waiting windows ran as one batch"
        );
    }
    assert_eq!(r.engine.counters().batches.load(Ordering::Relaxed), 2);
}

#[test]
fn earliest_deadline_runs_first() {
    let r = rig(10_000, 64, vec![member("m", busy(15), 1)]);
    let now = Instant::now();
    r.engine.submit(window("blocker", 0, now));
    std::thread::sleep(Duration::from_millis(5));
    // Submitted latest-deadline first; must run earliest-deadline first.
    for (i, bed) in ["c", "b", "a"].iter().enumerate() {
        let closed = now - Duration::from_millis(100 * (i as u64 + 1));
        r.engine.submit(window(bed, 0, closed));
    }
    r.wait(4);
    let committed = |bed: &str| r.rows(bed)[0].committed_ms;
    let ids: Vec<i64> = ["a", "b", "c"]
        .iter()
        .map(|b| {
            r.rows(b)[0].timing["members"][0]["queue_ms"]
                .as_f64()
                .unwrap() as i64
        })
        .collect();
    assert!(
        ids[0] <= ids[1] && ids[1] <= ids[2],
        "queue waits grow with deadline: {ids:?}"
    );
    assert!(committed("a") <= committed("c"));
}

#[test]
fn a_member_that_misses_the_deadline_makes_a_partial_score_naming_it() {
    let r = rig(
        100,
        64,
        vec![member("fast", busy(1), 8), member("slow", busy(600), 8)],
    );
    r.engine.submit(window("bed-p", 0, Instant::now()));
    r.wait(1);
    let row = &r.rows("bed-p")[0];
    assert_eq!(row.status, "partial");
    assert_eq!(row.score, Some(0.0), "the fast member's probability");
    let members = row.members.as_array().unwrap();
    assert!(
        members[0]["prob"].is_number() && members[1]["prob"].is_null(),
        "{members:?}"
    );
    let missing: Vec<String> = serde_json::from_value(row.missing.clone()).unwrap();
    assert_eq!(missing, vec!["slow".to_string()]);
    assert!(
        row.latency_ms < 400.0,
        "committed at the deadline, not when the slow member ended: {}",
        row.latency_ms
    );
    // The slow member's result arrives after the commit and is counted, not stored twice.
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(r.engine.counters().late_members.load(Ordering::Relaxed), 1);
    assert_eq!(r.rows("bed-p").len(), 1);
}

#[test]
fn the_beat_counter_reads_beside_the_members() {
    let r = rig_counting(
        5_000,
        64,
        vec![member("m", busy(300), 8)],
        Some(zoo_counter()),
    );
    r.engine.submit(window("bed-c", 0, Instant::now()));
    r.wait(1);
    let row = &r.rows("bed-c")[0];
    assert_eq!(row.status, "scored", "{row:?}");
    let missing: Vec<String> = serde_json::from_value(row.missing.clone()).unwrap();
    assert!(missing.is_empty(), "{missing:?}");
    let beats = &row.timing["beats"];
    let member = &row.timing["members"][0];
    // The counter began reading as the window arrived, while the member computed: it did not
    // wait for the member's 300 ms.
    assert!(
        beats["queue_ms"].as_f64().unwrap() < member["compute_ms"].as_f64().unwrap() / 2.0,
        "{}",
        row.timing
    );
    assert!(beats["compute_ms"].as_f64().unwrap() >= 0.0);
    let queues: Vec<String> = r.engine.queue_lengths().into_iter().map(|q| q.0).collect();
    assert_eq!(queues, ["m", "beats"]);
}

#[test]
fn a_late_beat_counter_leaves_the_score_partial_naming_it() {
    // Two hours of beats in one window: the counter reads them all (the member only its last
    // 30 s), far past the 20-ms deadline.
    let r = rig_counting(20, 64, vec![member("m", busy(1), 8)], Some(zoo_counter()));
    let n = 250 * 7200;
    let ecg: Vec<f32> = (0..n)
        .map(|i| {
            let k = i % 200;
            if k < 10 {
                1.0 - (k as f32 - 5.0).abs() / 5.0
            } else {
                0.0
            }
        })
        .collect();
    let mut w = window("bed-l", 0, Instant::now());
    w.ecg[0] = Some(ecg.into());
    r.engine.submit(w);
    r.wait(1);
    let row = &r.rows("bed-l")[0];
    assert_eq!(row.status, "partial", "{row:?}");
    assert_eq!(row.score, Some(0.0), "the member's probability, not raised");
    let missing: Vec<String> = serde_json::from_value(row.missing.clone()).unwrap();
    assert_eq!(missing, ["beats"]);
    assert!(row.timing.get("beats").is_none(), "{}", row.timing);
    // Its reading arrives after the commit and is counted, not stored twice.
    let until = Instant::now() + Duration::from_secs(30);
    while r.engine.counters().late_members.load(Ordering::Relaxed) < 1 {
        assert!(Instant::now() < until, "the late reading was never counted");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(r.rows("bed-l").len(), 1);
}

#[test]
fn overload_supersedes_stale_windows_and_stays_bounded() {
    let r = rig(30, 4, vec![member("m", busy(200), 1)]);
    let t0 = Instant::now();
    r.engine.submit(window("blocker", 0, t0));
    std::thread::sleep(Duration::from_millis(5));
    // Bed A's window 0 waits, goes stale, and window 1 replaces it.
    r.engine.submit(window("A", 0, Instant::now()));
    std::thread::sleep(Duration::from_millis(50));
    r.engine.submit(window("A", 1, Instant::now()));
    // More beds than the queue holds: the overflow is dropped, recorded, never queued.
    for b in 0..6 {
        r.engine.submit(window(&format!("x{b}"), 0, Instant::now()));
    }
    let waiting: usize = r.engine.queue_lengths().iter().map(|q| q.1).sum();
    assert!(waiting <= 4, "queue bounded: {waiting}");
    let c = r.engine.counters();
    assert_eq!(c.superseded.load(Ordering::Relaxed), 1);
    assert!(c.dropped_members.load(Ordering::Relaxed) >= 3);
    let a = {
        r.wait(1 + 2 + 6);
        r.rows("A")
    };
    let statuses: Vec<&str> = a.iter().map(|x| x.status.as_str()).collect();
    assert!(statuses.contains(&"superseded"), "{statuses:?}");
    assert_eq!(
        a.iter().filter(|x| x.window_index == 1).count(),
        1,
        "the newest window is kept"
    );
}

#[test]
fn a_panicking_or_nan_member_is_left_out_and_the_rest_scores() {
    let mut bad = busy(1);
    bad.panic = true;
    let mut nan = busy(1);
    nan.nan = true;
    let r = rig(
        2_000,
        64,
        vec![
            member("good", busy(1), 8),
            member("bad", bad, 8),
            member("nan", nan, 8),
        ],
    );
    r.engine.submit(window("bed-f", 0, Instant::now()));
    r.wait(1);
    let row = &r.rows("bed-f")[0];
    assert_eq!(row.status, "partial");
    assert_eq!(row.score, Some(0.0));
    // The score row names the failed members and says how each failed.
    let member = |name: &str| {
        row.members
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(member("bad")["fault"], "panic", "{}", row.members);
    assert_eq!(member("nan")["fault"], "non_finite", "{}", row.members);
    assert!(member("good")["fault"].is_null() && member("good")["prob"] == 0.0);
    let mut missing: Vec<&str> = row
        .missing
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    missing.sort();
    assert_eq!(missing, ["bad", "nan"]);
    // The engine keeps serving after the panic.
    r.engine.submit(window("bed-f", 1, Instant::now()));
    r.wait(2);
    // Counted once per window and model (a panic is not counted twice)...
    assert_eq!(r.engine.counters().model_faults.load(Ordering::Relaxed), 4);
    let per = r.engine.model_faults();
    assert_eq!(per["bad"].faults, 2);
    assert!(
        per["bad"]
            .last_fault
            .as_deref()
            .unwrap()
            .starts_with("panic")
    );
    assert_eq!(per["nan"].faults, 2);
    assert!(per["nan"].last_fault_ms.is_some());
    assert!(!per.contains_key("good"));
    // ...and one model_fault event per model (at most one a minute), under the bed `zoo`.
    let until = Instant::now() + Duration::from_secs(10);
    let events = loop {
        let ev: Vec<_> = r
            .reader
            .events("zoo", 100)
            .unwrap()
            .into_iter()
            .filter(|e| e.1 == "model_fault")
            .collect();
        if ev.len() >= 2 || Instant::now() > until {
            break ev;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut models: Vec<&str> = events
        .iter()
        .map(|e| e.2["model"].as_str().unwrap())
        .collect();
    models.sort();
    assert_eq!(models, ["bad", "nan"], "{events:?}");
}

#[test]
fn engine_overhead_per_window_is_reported() {
    // The same load through zero-cost members and through members that compute 2 ms each:
    // the difference is the models, the rest is the engine (Pochelu et al.'s method).
    let run = |compute_ms: u64| {
        let r = rig(
            60_000,
            1024,
            vec![
                member(
                    "m1",
                    FakeModel::new(Duration::ZERO, Duration::from_millis(compute_ms)),
                    8,
                ),
                member(
                    "m2",
                    FakeModel::new(Duration::ZERO, Duration::from_millis(compute_ms)),
                    8,
                ),
            ],
        );
        let n = 256u64;
        let t = Instant::now();
        for i in 0..n {
            r.engine
                .submit(window(&format!("bed-{}", i % 64), i / 64, Instant::now()));
        }
        r.wait(n);
        t.elapsed().as_secs_f64() / n as f64
    };
    let fake = run(0);
    let real = run(2);
    println!(
        "engine overhead: {:.1} us per window with zero-cost members; {:.1} us per window with 2 ms members (overhead ratio {:.1} %)",
        fake * 1e6,
        real * 1e6,
        100.0 * fake / real
    );
    assert!(fake < real);
}
