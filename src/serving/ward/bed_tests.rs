//! Unit tests of [`BedState`](super::BedState): windowing, gaps, sequence numbers, clocks.

use super::*;

fn params() -> BedParams {
    BedParams {
        fs: 250,
        window: 250 * 4,
        hop: 250 * 2,
        phase: Phase::Timeline(0),
        scored_until_ms: None,
        grace: Duration::from_millis(500),
        capacity: 250 * 10,
        lost_after: Duration::from_secs(60),
        min_coverage: 0.8,
        max_lead_off_fraction: 0.5,
        min_vitals_coverage: 0.8,
    }
}

fn frame(seq: u64, t_ms: i64, n: usize, at: Instant) -> SampleFrame {
    let v: Vec<Option<f32>> = (0..n)
        .map(|k| Some((seq.wrapping_mul(1000) + k as u64) as f32))
        .collect();
    SampleFrame {
        seq,
        t_ms,
        n,
        leads: [Some(v), None, None],
        lead_off: [false; 3],
        arrived: at,
    }
}

fn bed() -> BedState {
    let mut b = BedState::new("b1".into(), params());
    b.attach([true, false, false], &[]);
    b
}

/// 250 frames of 25 samples = 25 s of signal from device time 1,000,000 ms, delivered at
/// once (faster than real time); the windows they close.
fn stream_25_s(b: &mut BedState) -> Vec<ClosedWindow> {
    let t = Instant::now();
    (0..250u64)
        .flat_map(|seq| {
            b.on_samples(frame(seq, 1_000_000 + seq as i64 * 100, 25, t))
                .windows
        })
        .collect()
}

#[test]
fn windows_close_on_the_sample_timeline() {
    let mut b = bed();
    let windows = stream_25_s(&mut b);
    // Ends at 4 s, 6 s, ..., 24 s: 11 windows, none waiting for the wall clock.
    assert_eq!(windows.len(), 11);
    assert_eq!(windows[0].end_ms - windows[0].start_ms, 4000);
    assert_eq!(windows[1].start_ms - windows[0].start_ms, 2000);
    assert!(
        windows
            .iter()
            .all(|w| w.ecg[0].is_some() && w.quality.gap_samples == 0)
    );
    assert_eq!(windows[0].ecg[0].as_ref().unwrap()[0], 0.0);
}

#[test]
fn gaps_duplicates_late_frames_and_clock_jumps() {
    let mut b = bed();
    let t = Instant::now();
    b.on_samples(frame(0, 0, 25, t));
    let dup = b.on_samples(frame(0, 0, 25, t));
    assert!(dup.duplicate);
    // seq 1 and 2 missing, 3 arrives at its time: a gap of 50 samples.
    let o = b.on_samples(frame(3, 300, 25, t));
    assert!(
        o.events
            .iter()
            .any(|e| e.kind == EventKind::Gap && e.detail["samples"] == 50)
    );
    // seq 1 arrives late and fills its hole.
    let o = b.on_samples(frame(1, 100, 25, t));
    assert!(!o.too_late && !o.duplicate);
    assert_eq!(b.leads[0].get(30), Some(1005.0));
    // In-order frame with a wildly wrong clock: re-anchored, written where seq says.
    let o = b.on_samples(frame(4, 9_999_999, 25, t));
    assert!(o.events.iter().any(|e| e.kind == EventKind::ClockJump));
    assert_eq!(b.leads[0].get(100), Some(4000.0));
}

#[test]
fn a_gap_closes_after_grace_and_poor_coverage_is_unusable() {
    let mut b = bed();
    let t = Instant::now();
    for seq in 0..20u64 {
        b.on_samples(frame(seq, seq as i64 * 100, 25, t)); // 0..2 s
    }
    // Jump to 5 s: the first window (0..4 s) misses 2 s of 4.
    let o = b.on_samples(frame(50, 5000, 25, t));
    assert!(o.windows.is_empty(), "waits for late frames first");
    let w = b.on_tick(t + Duration::from_millis(600));
    assert_eq!(w.len(), 1);
    let q = &w[0].quality;
    assert_eq!(q.gap_samples, 500);
    assert!(!q.leads[0].as_ref().unwrap().usable && w[0].ecg[0].is_none());
}

#[test]
fn reconnect_mid_window_keeps_the_buffer() {
    let mut b = bed();
    let t = Instant::now();
    for seq in 0..30u64 {
        b.on_samples(frame(seq, seq as i64 * 100, 25, t));
    }
    b.attach([true, false, false], &[]);
    // The monitor resumes at the expected seq, from its own buffer.
    let mut windows = Vec::new();
    for seq in 30..45u64 {
        windows.extend(b.on_samples(frame(seq, seq as i64 * 100, 25, t)).windows);
    }
    assert_eq!(windows.len(), 1);
    assert_eq!(windows[0].quality.gap_samples, 0);
    // A monitor that restarts its numbering after reconnecting is followed too.
    b.attach([true, false, false], &[]);
    let o = b.on_samples(frame(0, 4600, 25, t));
    assert!(o.events.iter().any(|e| e.kind == EventKind::SeqReset));
    assert!(o.events.iter().any(|e| e.kind == EventKind::Gap));
}

#[test]
fn heart_rate_fills_the_window_by_second() {
    let mut b = BedState::new("b1".into(), params());
    b.attach([true, false, false], &["hr".to_string()]);
    let t = Instant::now();
    // The first samples frame anchors the timeline; vitals then land by second.
    let mut w = b.on_samples(frame(0, 0, 25, t)).windows;
    for s in 1..=4 {
        b.on_vitals(
            s as u64,
            s * 1000,
            &[("hr".into(), Some(60.0 + s as f32))],
            t,
        );
    }
    for seq in 1..40u64 {
        w.extend(b.on_samples(frame(seq, seq as i64 * 100, 25, t)).windows);
    }
    assert_eq!(
        w[0].heart_rate.as_deref(),
        Some(&[61.0, 62.0, 63.0, 64.0][..])
    );
}

#[test]
fn absurd_sequence_numbers_and_timestamps_stay_bounded() {
    let mut b = bed();
    let t = Instant::now();
    b.on_samples(frame(0, 0, 25, t));
    // A jump of 2^40 sequence numbers, then the largest possible ones and timestamps.
    b.on_samples(frame(1 << 40, 100, 25, t));
    b.on_samples(frame(u64::MAX, i64::MAX, 25, t));
    b.on_samples(frame(u64::MAX - 1, i64::MIN, 25, t));
    assert!(b.seen.bits.len() as u64 <= 2 * SEEN_SPAN);
    // A fresh connection claiming a time years ahead is a clock jump, not a huge gap.
    b.attach([true, false, false], &[]);
    let o = b.on_samples(frame(5, 4_000_000_000_000, 25, t));
    assert!(o.windows.len() < 10, "no window storm");
}

#[test]
fn a_fast_backlog_with_a_hole_closes_before_the_ring_overwrites_it() {
    let mut b = bed(); // window 4 s, hop 2 s, buffer 10 s
    let t = Instant::now();
    let mut w = Vec::new();
    for seq in (0..100u64).filter(|&s| s != 5) {
        w.extend(b.on_samples(frame(seq, seq as i64 * 100, 25, t)).windows);
    }
    // No wall-clock time passed, yet the first window (with its 25-sample hole) closed
    // with its data intact rather than after the ring moved past it.
    assert!(!w.is_empty());
    assert_eq!(w[0].quality.gap_samples, 25);
    assert!(w[0].ecg[0].is_some());
}

#[test]
fn phase_offsets_shift_the_boundaries() {
    assert_eq!(first_boundary(1000, 0, 500), 1000);
    assert_eq!(first_boundary(1000, 100, 500), 1100);
    assert_eq!(first_boundary(7500, 3750, 7500), 11250);
}

#[test]
fn wall_clock_slots_close_at_their_moment_whenever_the_stream_started() {
    // Windows of 4 s every 2 s; frames of 0.1 s, each arriving as its last sample is taken,
    // except that a monitor `behind` sends the frames it took meanwhile in one burst.
    let epoch = Instant::now();
    let closings = |slot_secs: f64, start_secs: f64, behind: f64| -> Vec<f64> {
        let mut p = params();
        p.phase = Phase::WallClock { epoch, slot_secs };
        let mut b = BedState::new("b".into(), p);
        b.attach([true, false, false], &[]);
        let mut at = Vec::new();
        for seq in 0..150u64 {
            let taken = (seq + 1) as f64 * 0.1;
            let arrived = epoch + Duration::from_secs_f64(start_secs + taken.max(behind));
            for w in b
                .on_samples(frame(seq, seq as i64 * 100, 25, arrived))
                .windows
            {
                assert_eq!(w.end_ms - w.start_ms, 4000);
                at.push(w.last_sample_at.duration_since(epoch).as_secs_f64());
            }
        }
        at
    };
    let cases = [
        (0.5, 0.3, 0.0),
        (0.5, 1.7, 0.0),
        (1.5, 0.3, 0.0),
        (1.5, 1.0, 0.0),
        (0.0, 0.95, 0.0),
        // Connected 1.3 s (1.9 s) late and caught up before the placement, a hop before the
        // first window's end: placed by when it took its samples, not by when it connected
        // (which would close it 1.3 s early).
        (0.5, 0.3, 1.3),
        (1.5, 1.7, 1.9),
    ];
    for (slot, start, behind) in cases {
        let at = closings(slot, start, behind);
        // A window every hop, the first once 4 s of signal are in and its end falls in the
        // slot, the last within a hop of the stream's end (15 s after its start).
        assert!(at[0] >= start + 4.0 && at[0] < start + 6.0, "{at:?}");
        assert!(at[at.len() - 1] > start + 13.0, "{at:?}");
        assert!(
            at.windows(2).all(|p| (p[1] - p[0] - 2.0).abs() < 1e-6),
            "{at:?}"
        );
        // At the slot, or with the frame that holds it (at most a frame later).
        for t in &at {
            let late = (t - slot + 1e-9).rem_euclid(2.0);
            assert!(late < 0.1, "slot {slot} start {start}: {at:?}");
        }
    }
}

/// A wall-clock bed (slot 0.5 s of a 2-s hop), frames of 0.1 s: `(seq, arrival secs)` each.
fn wall_clock_ends(frames: &[(u64, f64)], ticks: &[f64]) -> Vec<(i64, f64)> {
    let epoch = Instant::now();
    let mut p = params();
    p.phase = Phase::WallClock {
        epoch,
        slot_secs: 0.5,
    };
    let mut b = BedState::new("b".into(), p);
    b.attach([true, false, false], &[]);
    let at = |s: f64| epoch + Duration::from_secs_f64(s);
    let mut events: Vec<(f64, Option<u64>)> = frames.iter().map(|&(q, t)| (t, Some(q))).collect();
    events.extend(ticks.iter().map(|&t| (t, None)));
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut ends = Vec::new();
    for (t, seq) in events {
        let closed = match seq {
            Some(q) => b.on_samples(frame(q, q as i64 * 100, 25, at(t))).windows,
            None => b.on_tick(at(t)),
        };
        ends.extend(closed.iter().map(|w| {
            (
                w.end_ms,
                w.last_sample_at.duration_since(epoch).as_secs_f64(),
            )
        }));
    }
    ends
}

#[test]
fn a_backlog_longer_than_the_wait_is_placed_again_once_caught_up() {
    // The monitor connects 3.5 s after it started taking samples (more than the 2 s the bed
    // waits before placing) and sends its backlog at once, then streams in real time.
    let frames: Vec<(u64, f64)> = (0..150u64)
        .map(|q| (q, ((q + 1) as f64 * 0.1).max(3.5)))
        .collect();
    let ends = wall_clock_ends(&frames, &[]);
    assert!(ends.len() >= 5, "{ends:?}");
    // Every end after the first is in the slot (within a frame), one hop after the last.
    for (_, t) in &ends[1..] {
        let late = (t - 0.5 + 1e-9).rem_euclid(2.0);
        assert!(late < 0.1, "{ends:?}");
    }
    assert!(ends.windows(2).all(|p| p[1].0 - p[0].0 >= 2000), "{ends:?}");
}

#[test]
fn a_stream_faster_than_real_time_loses_no_window() {
    // Ten times real time throughout (a replay): 15 s of signal in 1.5 s. The wall clock says
    // nothing about it; its windows end a hop apart on its timeline, none skipped.
    let frames: Vec<(u64, f64)> = (0..150u64).map(|q| (q, (q + 1) as f64 * 0.01)).collect();
    let ends = wall_clock_ends(&frames, &[]);
    assert_eq!(ends.len(), 6, "{ends:?}");
    assert!(ends.windows(2).all(|p| p[1].0 - p[0].0 == 2000), "{ends:?}");
}

#[test]
fn windows_closed_on_the_wall_clock_before_placement_are_not_closed_again() {
    // One second of signal, then silence: windows come due on the wall clock (with their gap)
    // before the bed could be placed. The monitor comes back at 6 s and streams on.
    let mut frames: Vec<(u64, f64)> = (0..10u64).map(|q| (q, (q + 1) as f64 * 0.1)).collect();
    frames.extend((60..150u64).map(|q| (q, (q + 1) as f64 * 0.1)));
    let ends = wall_clock_ends(&frames, &[4.6, 5.2, 5.9]);
    assert!(ends.len() >= 5, "{ends:?}");
    // No end twice, none going back, a hop or more apart.
    assert!(ends.windows(2).all(|p| p[1].0 - p[0].0 >= 2000), "{ends:?}");
}

#[test]
fn windows_an_earlier_run_stored_are_passed_over() {
    // A restarted daemon: the earlier run stored windows ending up to 1_010_000 ms; the
    // monitor resends its buffer from 1_000_000 ms.
    let mut p = params();
    p.scored_until_ms = Some(1_010_000);
    let mut b = BedState::new("b1".into(), p);
    b.attach([true, false, false], &[]);
    let windows = stream_25_s(&mut b);
    // Of the ends at 4, 6, ..., 24 s only those after 10 s are scored: 12, 14, ..., 24.
    assert_eq!(windows.len(), 7);
    assert!(windows.iter().all(|w| w.end_ms > 1_010_000));
    assert_eq!(windows[0].end_ms, 1_012_000);
}

#[test]
fn timestamps_near_the_ends_of_i64_keep_their_millisecond_steps() {
    for t0 in [i64::MIN + 1, i64::MAX - 30_000] {
        let mut b = bed();
        let t = Instant::now();
        let mut events = Vec::new();
        let mut windows = Vec::new();
        for seq in 0..250u64 {
            let o = b.on_samples(frame(seq, t0 + seq as i64 * 100, 25, t));
            events.extend(o.events);
            windows.extend(o.windows);
        }
        assert!(events.is_empty(), "t0 {t0}: {events:?}");
        assert_eq!(windows.len(), 11, "t0 {t0}");
        assert_eq!(windows[0].start_ms, t0);
        assert_eq!(windows[0].end_ms - windows[0].start_ms, 4000);
    }
}

#[test]
fn a_jump_of_more_frames_than_a_day_has_samples_is_a_renumbering_not_a_gap() {
    let mut b = bed();
    let t = Instant::now();
    for seq in 0..10u64 {
        b.on_samples(frame(seq, seq as i64 * 100, 25, t));
    }
    let big = 1u64 << 62;
    let o = b.on_samples(frame(big, 1000, 25, t));
    let kinds: Vec<EventKind> = o.events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::SeqReset], "{:?}", o.events);
    assert_eq!(b.next_samples_seq(), big + 1);
    // The renumbered stream goes on without gaps; the old numbers are duplicates no more.
    let o = b.on_samples(frame(big + 1, 1100, 25, t));
    assert!(o.events.is_empty() && !o.duplicate, "{:?}", o.events);
    // A real gap (5 frames) is still one.
    let o = b.on_samples(frame(big + 7, 1700, 25, t));
    assert_eq!(o.events[0].kind, EventKind::Gap);
    assert_eq!(o.events[0].detail["missing_frames"], 5);
}
