use super::*;
use crate::signal::test_signals::ectopic_train;
use crate::training::dataset::Database;

/// Ten minutes of beats every 0.8 s on two leads, a ventricular beat (wide, inverted) at
/// three places in the first 40 s only.
fn record() -> RecordData {
    let wide = [10usize, 20, 30];
    let (lead, centres) = ectopic_train(600 * SAMPLE_RATE_HZ, 200, &wide);
    let second: Vec<f32> = lead.iter().map(|v| 0.5 * v + 0.1).collect();
    RecordData {
        db: Database::Mitdb,
        key: "mitdb/x".into(),
        group: "mitdb/x".into(),
        leads: vec![lead, second],
        episodes: Vec::new(),
        noise: vec![Vec::new(), Vec::new()],
        beats: centres.iter().map(|&c| c as i64).collect(),
        paced: false,
        ectopy: wide
            .iter()
            .map(|&k| (centres[k] as i64, centres[k] as i64 + 1))
            .collect(),
    }
}

#[test]
fn events_are_inserted_with_their_beats_episodes_and_shifted_annotations() {
    let rec = record();
    let s = splice(&rec, 7, SpliceMix::EVALUATION).expect("spliced");
    assert!(s.events.len() >= 5, "{}", s.events.len());
    let inserted: i64 = s.record.len() as i64 - rec.len() as i64;
    assert!(inserted > 0);
    assert_eq!(s.record.leads[1].len(), s.record.len());
    // Every run is a VT episode confirmed at its fifth beat; salvos and bigeminy are not.
    let runs: Vec<&Event> = s
        .events
        .iter()
        .filter(|e| e.kind == SpliceKind::Run)
        .collect();
    assert!(!runs.is_empty());
    assert_eq!(s.record.episodes.len(), runs.len());
    for (e, ep) in runs.iter().zip(&s.record.episodes) {
        assert_eq!(ep.onset, e.ventricular[0]);
        assert_eq!(ep.confirmed, e.ventricular[4]);
        assert!(
            e.beats >= 5 && (95.0..=260.0).contains(&e.rate_bpm),
            "{e:?}"
        );
    }
    // The placed beats are annotated ventricular, and the original ones kept.
    let v = ventricular_beats(&s.record);
    let placed: usize = s.events.iter().map(|e| e.beats).sum();
    assert_eq!(v.len(), 3 + placed);
    assert!(s.record.beats.len() > rec.beats.len() + placed - 1);
    // Events are apart and after the first ward window.
    for w in s.events.windows(2) {
        assert!(w[1].ventricular[0] - w[0].end >= (SPACING_SECS * 250.0) as i64);
    }
    assert!(s.events[0].ventricular[0] > 40 * 250);
}

#[test]
fn a_placed_beat_is_the_source_beat_and_the_joints_are_continuous() {
    let rec = record();
    let s = splice(&rec, 3, SpliceMix::EVALUATION).expect("spliced");
    let x = &s.record.leads[0];
    // At each placed ventricular R peak, the inverted wide source beat (-2.5 at its peak,
    // give or take the baseline ramp).
    for e in &s.events {
        for &v in &e.ventricular {
            assert!(x[v as usize] < -1.5, "{} at {v}", x[v as usize]);
        }
    }
    // No jumps: the largest step between neighbouring samples is no larger than the
    // source's own steepest one.
    let steepest = |y: &[f32]| {
        y.windows(2)
            .map(|w| (w[1] - w[0]).abs())
            .fold(0.0f32, f32::max)
    };
    for (l, o) in s.record.leads.iter().zip(&rec.leads) {
        assert!(steepest(l) <= steepest(o) * 1.05 + 1e-3);
    }
}

#[test]
fn the_same_seed_splices_the_same_events_and_another_seed_others() {
    let rec = record();
    let a = splice(&rec, 11, SpliceMix::EVALUATION).unwrap();
    let b = splice(&rec, 11, SpliceMix::EVALUATION).unwrap();
    let c = splice(&rec, 12, SpliceMix::EVALUATION).unwrap();
    assert_eq!(a.events, b.events);
    assert_eq!(a.record.leads, b.record.leads);
    assert_ne!(a.events, c.events);
}

#[test]
fn shaped_runs_keep_their_rates_lengths_and_flat_starts() {
    let rec = record();
    let s = splice(&rec, 5, SpliceMix::SHAPES).expect("spliced");
    assert!(s.events.iter().all(|e| e.kind == SpliceKind::Run));
    let shapes: std::collections::HashSet<RunShape> = s.events.iter().map(|e| e.shape).collect();
    assert!(shapes.len() >= 3, "{shapes:?}");
    let fs = SAMPLE_RATE_HZ as f64;
    for e in &s.events {
        let secs = (e.ventricular[e.beats - 1] - e.ventricular[0]) as f64 / fs;
        match e.shape {
            RunShape::Slow => assert!((95.0..=135.0).contains(&e.rate_bpm), "{e:?}"),
            RunShape::Burst => {
                assert!((190.0..=310.0).contains(&e.rate_bpm), "{e:?}");
                assert!(e.beats >= 5 && secs <= 2.1, "{e:?}");
            }
            RunShape::UnderWay => assert!(secs >= UNDER_WAY_SECS - 0.3, "{e:?}"),
            RunShape::FlatStart => {
                // Flat from 20 s before the run to 2-4 s before it, on every lead.
                let v0 = e.ventricular[0] as usize;
                for lead in &s.record.leads {
                    let flat = &lead[v0 - 18 * SAMPLE_RATE_HZ..v0 - 4 * SAMPLE_RATE_HZ];
                    assert!(flat.iter().all(|&x| x == flat[0]), "{e:?}");
                    let live = &lead[v0 - 2 * SAMPLE_RATE_HZ..v0];
                    assert!(live.iter().any(|&x| x != live[0]), "{e:?}");
                }
            }
            RunShape::Plain => panic!("no plain runs in the shaped mix: {e:?}"),
        }
    }
    // The plain mix draws what it drew before shapes existed: nothing shaped.
    let plain = splice(&rec, 5, SpliceMix::EVALUATION).unwrap();
    assert!(plain.events.iter().all(|e| e.shape == RunShape::Plain));
}

#[test]
fn a_record_without_ventricular_beat_labels_or_sources_is_not_spliced() {
    let mut rec = record();
    rec.db = Database::Cudb;
    assert!(splice(&rec, 1, SpliceMix::EVALUATION).is_none());
    let mut rec = record();
    rec.ectopy.truncate(2);
    assert!(splice(&rec, 1, SpliceMix::EVALUATION).is_none());
}
