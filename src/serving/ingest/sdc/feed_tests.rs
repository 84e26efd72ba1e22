use super::*;
use crate::protocol::sdc::Lead;

const T0: i64 = 1_700_000_000_000;

fn mdib() -> Mdib {
    let lead = |h: &str, n: &str| Lead {
        handle: h.into(),
        name: n.into(),
        period_ms: 2.0,
    };
    Mdib {
        leads: vec![lead("ecg.ii", "II"), lead("ecg.v", "V1")],
        vitals: vec![("hr".into(), "hr"), ("sat".into(), "spo2")],
        alerts: vec![("ac.vt".into(), "199832".into())],
        presence: Vec::new(),
    }
}

/// A feed of two leads at 500 Hz.
fn feed() -> Feed {
    feed_at(2.0)
}

/// A feed of two leads at a sample period of `period` ms.
fn feed_at(period: f64) -> Feed {
    let streams = vec![
        Stream::new("ecg.ii".into(), 0, period),
        Stream::new("ecg.v".into(), 1, period),
    ];
    let names = [Some("II".into()), Some("V1".into()), None];
    let ranges = [("spo2".to_string(), [0.0, 100.0])].into_iter().collect();
    Feed::new(streams, names, (7, 3), ranges)
}

/// A report of both leads at 500 Hz from `t0`: sample i of lead II is `i`, of V `-i`.
fn both(t0: i64, from: usize, n: usize) -> Report {
    let ii = (from..from + n).map(|i| i as f32).collect();
    let v = (from..from + n).map(|i| -(i as f32)).collect();
    Report::Waveform(vec![("ecg.ii".into(), t0, ii), ("ecg.v".into(), t0, v)])
}

fn frames(cmds: Vec<BedCmd>) -> Vec<SampleFrame> {
    cmds.into_iter()
        .filter_map(|c| match c {
            BedCmd::Samples(f) => Some(f),
            _ => None,
        })
        .collect()
}

#[test]
fn odd_reports_at_500_hz_make_continuous_frames_of_pair_means() {
    let (mut f, m, mut open) = (feed(), mdib(), Open::new());
    let mut got = Vec::new();
    // Reports of 25 samples (50 ms at 500 Hz): every other one ends mid-pair.
    for k in 0..8 {
        let t0 = T0 + k * 50;
        got.extend(frames(f.commands(
            both(t0, k as usize * 25, 25),
            &m,
            &mut open,
        )));
    }
    let seqs: Vec<u64> = got.iter().map(|x| x.seq).collect();
    assert_eq!(seqs, (7..7 + got.len() as u64).collect::<Vec<_>>());
    let mut t = T0;
    let mut ii = Vec::new();
    for fr in &got {
        assert_eq!(fr.t_ms, t, "{fr:?}");
        t += fr.n as i64 * 4;
        ii.extend(fr.leads[0].clone().unwrap());
        assert_eq!(fr.leads[1].as_ref().unwrap().len(), fr.n);
    }
    // 200 samples at 500 Hz: 100 at 250 Hz, each the mean of a pair.
    assert_eq!(ii.len(), 100);
    for (i, v) in ii.iter().enumerate() {
        assert_eq!(*v, Some(2.0 * i as f32 + 0.5));
    }
}

/// A second of a ramp (each sample's value its device time, ms after `T0`) at `hz`, in
/// reports of 100 ms whose times are whole ms, as `DeterminationTime` is: lead II's values
/// on the grid, checked to come in frames without a gap.
fn ramp_at(hz: u32) -> Vec<Option<f32>> {
    let period = 1000.0 / hz as f64;
    let (mut f, m, mut open) = (feed_at(period), mdib(), Open::new());
    let mut got = Vec::new();
    let mut sent = 0usize;
    for k in 0..10 {
        let t0 = T0 + k * 100;
        let upto = ((k + 1) as usize * hz as usize) / 10;
        let ii: Vec<f32> = (sent..upto).map(|i| (i as f64 * period) as f32).collect();
        let v = ii.iter().map(|x| -x).collect();
        sent = upto;
        let r = Report::Waveform(vec![("ecg.ii".into(), t0, ii), ("ecg.v".into(), t0, v)]);
        got.extend(frames(f.commands(r, &m, &mut open)));
    }
    let seqs: Vec<u64> = got.iter().map(|x| x.seq).collect();
    assert_eq!(
        seqs,
        (7..7 + got.len() as u64).collect::<Vec<_>>(),
        "{hz} Hz"
    );
    assert_eq!(got[0].t_ms, T0);
    got.iter()
        .flat_map(|fr| fr.leads[0].clone().unwrap())
        .collect()
}

#[test]
fn rates_that_do_not_divide_4_ms_are_brought_to_the_grid() {
    // 200 and 240 Hz: each position on the line between the samples either side, exact on a
    // ramp.
    for hz in [200, 240] {
        let ii = ramp_at(hz);
        assert!(ii.len() >= 245, "{hz} Hz: {} positions", ii.len());
        for (j, v) in ii.iter().enumerate() {
            let v = v.unwrap_or_else(|| panic!("{hz} Hz: a hole at {j}"));
            assert!((v - 4.0 * j as f32).abs() < 1e-3, "{hz} Hz at {j}: {v}");
        }
    }
    // 300 and 1,000 Hz: each position the mean of the samples in its 4 ms, so a ramp reads
    // the mean of their times (1.5 ms in at 1,000 Hz; 0.0-3.3 ms at 300 Hz).
    for (hz, lo, hi) in [(300, 0.0, 10.0 / 3.0), (1000, 1.5, 1.5)] {
        let ii = ramp_at(hz);
        assert!(ii.len() >= 248, "{hz} Hz: {} positions", ii.len());
        for (j, v) in ii.iter().enumerate() {
            let v = v.unwrap_or_else(|| panic!("{hz} Hz: a hole at {j}")) - 4.0 * j as f32;
            assert!(v >= lo - 1e-3 && v <= hi + 1e-3, "{hz} Hz at {j}: {v}");
        }
    }
}

#[test]
fn reports_of_odd_lengths_whose_times_are_rounded_to_the_ms_stay_continuous() {
    // 2,000 Hz in reports of 51 or 49 samples (25.5 or 24.5 ms), each stamped with its first
    // sample's time rounded to the ms (half a ms off every other report), and one stamped
    // a ms late: no hole, no position twice.
    let (mut f, m, mut open) = (feed_at(0.5), mdib(), Open::new());
    let (mut got, mut sent) = (Vec::new(), 0usize);
    for k in 0..40 {
        let n = if k % 2 == 0 { 51 } else { 49 };
        let late = if k == 17 { 1 } else { 0 };
        let t0 = T0 + (sent as f64 * 0.5).round() as i64 + late;
        let ii: Vec<f32> = (sent..sent + n).map(|i| i as f32 * 0.5).collect();
        let v = ii.clone();
        sent += n;
        let r = Report::Waveform(vec![("ecg.ii".into(), t0, ii), ("ecg.v".into(), t0, v)]);
        got.extend(frames(f.commands(r, &m, &mut open)));
    }
    let seqs: Vec<u64> = got.iter().map(|x| x.seq).collect();
    assert_eq!(seqs, (7..7 + got.len() as u64).collect::<Vec<_>>());
    let ii: Vec<Option<f32>> = got
        .iter()
        .flat_map(|fr| fr.leads[0].clone().unwrap())
        .collect();
    assert!(ii.len() >= 248, "{} positions", ii.len());
    for (j, v) in ii.iter().enumerate() {
        let v = v.unwrap_or_else(|| panic!("a hole at {j}"));
        assert!((v - (4.0 * j as f32 + 1.75)).abs() < 1e-3, "at {j}: {v}");
    }
}

#[test]
fn a_clock_that_jumps_an_hour_ahead_is_a_gap() {
    let (mut f, m, mut open) = (feed(), mdib(), Open::new());
    let before = frames(f.commands(both(T0, 0, 50), &m, &mut open));
    assert_eq!((before[0].t_ms, before[0].n), (T0, 25));
    // Lead II jumps first: nothing is sent for the hour between.
    let later = T0 + 3_600_000;
    let Report::Waveform(mut parts) = both(later, 0, 50) else {
        unreachable!()
    };
    let v = parts.pop().unwrap();
    assert!(frames(f.commands(Report::Waveform(parts), &m, &mut open)).is_empty());
    let after = frames(f.commands(Report::Waveform(vec![v]), &m, &mut open));
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!((after[0].t_ms, after[0].n), (later, 25));
    assert!(after[0].seq > before[0].seq + 1, "a gap: {after:?}");
    assert!(
        after[0].leads[1]
            .as_ref()
            .unwrap()
            .iter()
            .all(Option::is_some)
    );
}

#[test]
fn leads_in_separate_reports_share_frames_and_a_lost_report_is_a_gap() {
    let (mut f, m, mut open) = (feed(), mdib(), Open::new());
    let Report::Waveform(mut parts) = both(T0, 0, 50) else {
        unreachable!()
    };
    let v = parts.pop().unwrap();
    // Lead II first: nothing to send until V reaches it.
    assert!(frames(f.commands(Report::Waveform(parts), &m, &mut open)).is_empty());
    let one = frames(f.commands(Report::Waveform(vec![v]), &m, &mut open));
    assert_eq!(one.len(), 1);
    assert_eq!((one[0].seq, one[0].t_ms, one[0].n), (7, T0, 25));
    assert!(
        one[0].leads[0]
            .as_ref()
            .unwrap()
            .iter()
            .all(Option::is_some)
    );
    // The next 100 ms never came: the frame after it skips a sequence number.
    let next = frames(f.commands(both(T0 + 200, 100, 50), &m, &mut open));
    assert_eq!(next.len(), 1);
    assert_eq!((next[0].seq, next[0].t_ms), (9, T0 + 200));
    // A lead silent for more than a second is sent as holes.
    let mut t = T0 + 300;
    let mut last = Vec::new();
    for k in 0..12 {
        let ii: Vec<f32> = vec![0.5; 50];
        let r = Report::Waveform(vec![("ecg.ii".into(), t, ii)]);
        last = frames(f.commands(r, &m, &mut open));
        t += 100;
        let _ = k;
    }
    let fr = last.last().expect("frames once V lags a second");
    assert!(fr.leads[1].as_ref().unwrap().iter().all(Option::is_none));
    assert!(fr.leads[0].as_ref().unwrap().iter().all(Option::is_some));
}

#[test]
fn alert_conditions_raise_and_end_the_monitors_alarm_and_unknown_ones_are_ignored() {
    let (mut f, m, mut open) = (feed(), mdib(), Open::new());
    let raise = Report::Alerts(vec![
        ("ac.vt".into(), true, Some(T0 + 5_000)),
        ("ac.unknown".into(), true, Some(T0)),
    ]);
    let cmds = f.commands(raise.clone(), &m, &mut open);
    assert_eq!(cmds.len(), 1);
    let BedCmd::MonitorAlarm(a) = &cmds[0] else {
        panic!("{cmds:?}")
    };
    assert_eq!((a.kind, a.t_ms), (MonitorAlarmKind::Vt, T0 + 5_000));
    assert_eq!(a.id, format!("ac.vt@{}", T0 + 5_000));
    assert_eq!(a.names[1].as_deref(), Some("V1"));
    // Present again (a new session's MDIB): not raised twice.
    assert!(f.commands(raise, &m, &mut open).is_empty());
    let end = Report::Alerts(vec![("ac.vt".into(), false, Some(T0 + 9_000))]);
    let cmds = f.commands(end, &m, &mut open);
    assert!(
        matches!(&cmds[..], [BedCmd::MonitorAlarmEnd { id, t_ms }] if *t_ms == T0 + 9_000 && id.starts_with("ac.vt@")),
        "{cmds:?}"
    );
    assert!(open.is_empty());
    // The heart rate and SpO2 are the hr and spo2 vitals, each at the device's time for it;
    // another metric is left out.
    let hr = Report::Metrics(vec![
        ("hr".into(), Some(180.0), Some(T0 + 1_000)),
        ("rr".into(), Some(14.0), Some(T0 + 1_000)),
        ("sat".into(), Some(96.0), Some(T0 + 1_200)),
    ]);
    let cmds = f.commands(hr, &m, &mut open);
    assert!(
        matches!(&cmds[..], [
            BedCmd::Vitals { seq: 3, t_ms: t1, values: v1, .. },
            BedCmd::Vitals { seq: 4, t_ms: t2, values: v2, .. },
        ] if *t1 == T0 + 1_000 && v1[..] == [("hr".to_string(), Some(180.0))]
            && *t2 == T0 + 1_200 && v2[..] == [("spo2".to_string(), Some(96.0))]),
        "{cmds:?}"
    );
    // A reading outside its plausible range is absent, as over the WebSocket path.
    let odd = Report::Metrics(vec![("sat".into(), Some(140.0), Some(T0 + 2_000))]);
    let cmds = f.commands(odd, &m, &mut open);
    assert!(
        matches!(&cmds[..], [BedCmd::Vitals { values, .. }] if values[..] == [("spo2".to_string(), None)]),
        "{cmds:?}"
    );
}
