//! `holmes score`: a recording scored window by window through the daemon's own scoring path:
//! the same window type, the serving ensemble as the engine loads it, its input selection and
//! its combination ([`Ensemble::score_batch`]), then the ward's risk alarm rule over the scores
//! ([`mark_alarms`], the same [`AlarmState`] the dashboard runs per bed). [`record_window`] cuts
//! the windows, for `holmes evaluate` too.

use std::sync::Arc;

use crate::alarm::{AlarmChange, AlarmError, AlarmRule, AlarmState};
use crate::core::monitor_alarm::{MonitorAlarmKind, Opinion, RISK_LOOKBACK_SECS};
use crate::core::score::{MemberScore, ScoreStatus};
use crate::core::window::{ClosedWindow, LeadSlot, MAX_LEADS, SAMPLE_RATE_HZ, WindowQuality};
use crate::serving::engine::ensemble::{Ensemble, OFFLINE_BATCH};
use crate::signal::adjudicate::{Lead, adjudicate, served_point};
use crate::signal::heart_rate::heart_rate_at;

/// One window of a recording scored offline (`holmes score`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct OfflineScore {
    pub start_secs: f64,
    pub end_secs: f64,
    pub status: ScoreStatus,
    pub score: Option<f32>,
    pub members: Vec<MemberScore>,
    /// The beat counter's run level: the highest probability its beats are called
    /// ventricular at and still end in a VT run (0: none; absent without a counter or without
    /// a score).
    pub run_level: Option<f32>,
    /// Where the beat counter raised the score: its VT run's first beat, s from the record's
    /// start.
    pub run_onset_secs: Option<f64>,
    /// The risk alarm after this window: `off`, `raised` (here), `on` or `cleared` (here).
    pub alarm: &'static str,
}

/// Runs `rule` over the rows' scores as the ward does, one observation per hop (`hop_ms`, the
/// rows' spacing), and marks each row with the alarm's state after it.
pub fn mark_alarms(
    rows: &mut [OfflineScore],
    rule: AlarmRule,
    hop_ms: i64,
) -> Result<(), AlarmError> {
    let mut state = AlarmState::new(rule, hop_ms)?;
    for r in rows {
        let t_ms = (r.end_secs * 1000.0).round() as i64;
        r.alarm = match state.observe(t_ms, r.score) {
            Some(AlarmChange::Raised { .. }) => "raised",
            Some(AlarmChange::Cleared { .. }) => "cleared",
            None if state.is_active() => "on",
            None => "off",
        };
    }
    Ok(())
}

/// The window `[end - len, end)` (samples at 250 Hz) of a recording as the ward would close it
/// from a monitor sending these leads whole: `leads[0]` in slot `first_slot` (0 primary, 1
/// secondary), each next lead in the slot after, the heart rate of each second ending in the
/// window from `beats` (QRS sample indices).
pub fn record_window(
    leads: &[Vec<f32>],
    first_slot: usize,
    beats: &[i64],
    end: usize,
    len: usize,
    index: u64,
) -> ClosedWindow {
    let fs = SAMPLE_RATE_HZ;
    let start = end - len;
    let mut ecg: [Option<Arc<[f32]>>; MAX_LEADS] = Default::default();
    let mut slots: [Option<LeadSlot>; MAX_LEADS] = Default::default();
    for (slot, lead) in leads
        .iter()
        .enumerate()
        .map(|(k, l)| (first_slot + k, l))
        .take_while(|&(slot, _)| slot < MAX_LEADS)
    {
        ecg[slot] = Some(lead[start..end].into());
        slots[slot] = Some(LeadSlot {
            coverage: 1.0,
            lead_off_secs: 0.0,
            usable: true,
        });
    }
    let t0 = start as f64 / fs as f64;
    let hr: Vec<f32> = (1..=len / fs)
        .map(|k| heart_rate_at(beats, fs as f64, t0 + k as f64))
        .collect();
    ClosedWindow {
        bed: Arc::from("offline"),
        index,
        start_ms: (start * 1000 / fs) as i64,
        end_ms: (end * 1000 / fs) as i64,
        ecg,
        heart_rate: Some(hr.into()),
        quality: WindowQuality {
            leads: slots,
            gap_samples: 0,
            hr_coverage: 1.0,
        },
        last_sample_at: std::time::Instant::now(),
    }
}

/// Scores a recording window by window through exactly the daemon's path: windows of
/// `window_secs` every `hop_secs` from `from_secs` to `to_secs`, the record's first and second
/// signals as the primary and secondary leads, heart rate per second from its beats.
pub fn score_signals(
    ens: &Ensemble,
    s: &crate::training::dataset::Signals,
    window_secs: u32,
    hop_secs: u32,
    from_secs: f64,
    to_secs: Option<f64>,
) -> Vec<OfflineScore> {
    let fs = SAMPLE_RATE_HZ;
    let len = s.leads[0].len();
    let stop = to_secs.map_or(len, |t| ((t * fs as f64) as usize).min(len));
    let (win, hop) = (window_secs as usize * fs, (hop_secs as usize * fs).max(1));
    let first = (from_secs.max(0.0) * fs as f64) as usize + win;
    let ends: Vec<usize> = (first..=stop).step_by(hop).collect();
    let mut out = Vec::with_capacity(ends.len());
    for (k, chunk) in ends.chunks(OFFLINE_BATCH).enumerate() {
        let windows: Vec<ClosedWindow> = chunk
            .iter()
            .enumerate()
            .map(|(i, &end)| {
                let index = (k * OFFLINE_BATCH + i) as u64;
                record_window(&s.leads, 0, &s.beats, end, win, index)
            })
            .collect();
        for (o, &end) in ens.score_batch(&windows).into_iter().zip(chunk) {
            out.push(OfflineScore {
                start_secs: (end - win) as f64 / fs as f64,
                end_secs: end as f64 / fs as f64,
                status: o.status,
                score: o.score,
                members: o.members,
                run_level: o.run_level,
                run_onset_secs: o.run_onset_ms.map(|t| t as f64 / 1000.0),
                alarm: "off",
            });
        }
    }
    out
}

/// A monitor's alarm of `kind` at `secs` into a recording that [`adjudicate_at`] cannot
/// read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the monitor's alarm at {secs} s lies beyond the record's end ({len_secs:.1} s)")]
pub struct AlarmBeyondRecord {
    pub secs: f64,
    pub len_secs: f64,
}

/// Holmes's opinion on a monitor's alarm of `kind` at `secs` into the recording `s` (its
/// leads in the record's order, named as its header names them), as the daemon gives it from
/// the samples up to the onset and the served `risk` of the windows before it
/// ([`risk_before`]), with the served counter's classifier at its served point; `None` for a
/// kind Holmes does not judge.
pub fn adjudicate_at(
    counter: &crate::signal::beats::BeatsFile,
    s: &crate::training::dataset::Signals,
    secs: f64,
    kind: MonitorAlarmKind,
    risk: Option<f32>,
) -> Result<Option<Opinion>, AlarmBeyondRecord> {
    let len = s.leads.first().map_or(0, Vec::len);
    let end = (secs * SAMPLE_RATE_HZ as f64).round() as usize;
    if end > len {
        return Err(AlarmBeyondRecord {
            secs,
            len_secs: len as f64 / SAMPLE_RATE_HZ as f64,
        });
    }
    // Each lead by its header's name; where names are missing or repeat (vfdb calls both
    // leads "ECG"), by its place.
    let given: Vec<&str> = (0..s.leads.len())
        .map(|k| s.names.get(k).map_or("", |n| n.trim()))
        .collect();
    let unique = given
        .iter()
        .enumerate()
        .all(|(k, n)| !n.is_empty() && !given[..k].contains(n));
    let names: Vec<String> = given
        .iter()
        .enumerate()
        .map(|(k, n)| {
            if unique {
                n.to_string()
            } else {
                format!("ECG{}", k + 1)
            }
        })
        .collect();
    // The ECG leads: a record may carry pressure, pleth or respiration among its first
    // signals (the 2015 Challenge's do).
    let leads: Vec<Lead> = s
        .leads
        .iter()
        .zip(&names)
        .zip(&given)
        .filter(|(_, given)| !not_ecg(given))
        .map(|((l, name), _)| Lead {
            name,
            samples: &l[..end],
        })
        .collect();
    Ok(adjudicate(
        &counter.classifier,
        &leads,
        kind,
        risk,
        served_point(counter),
    ))
}

/// Whether a signal's header name says it is not ECG (pressures, pleth, respiration, SpO2).
fn not_ecg(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "ABP", "ART", "PAP", "CVP", "PLETH", "PPG", "RESP", "SPO2", "SAO2", "CO2", "ICP",
    ]
    .iter()
    .any(|k| n.contains(k))
}

/// The served risk before a monitor alarm at `secs` into the recording `s`: the highest score
/// of the windows ending at whole hops of the recording from [`RISK_LOOKBACK_SECS`] before the
/// alarm to it, as a bed streaming the recording would have them (`None`: none scored).
pub fn risk_before(
    ens: &Ensemble,
    s: &crate::training::dataset::Signals,
    secs: f64,
    window_secs: u32,
    hop_secs: u32,
) -> Option<f32> {
    let hop = f64::from(hop_secs.max(1));
    let first_end = ((secs - RISK_LOOKBACK_SECS as f64) / hop).ceil() * hop;
    let first_end = first_end.max(f64::from(window_secs));
    if first_end > secs {
        return None;
    }
    let from = first_end - f64::from(window_secs);
    score_signals(ens, s, window_secs, hop_secs, from, Some(secs))
        .iter()
        .filter_map(|r| r.score)
        .reduce(f32::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lead_sent_alone_fills_its_own_slot() {
        let fs = SAMPLE_RATE_HZ;
        let v = vec![0.5f32; 40 * fs];
        let w = record_window(std::slice::from_ref(&v), 1, &[], 40 * fs, 30 * fs, 0);
        assert!(w.ecg[0].is_none() && w.quality.leads[0].is_none());
        assert_eq!(w.ecg[1].as_deref().map(<[f32]>::len), Some(30 * fs));
        assert!(w.quality.leads[1].is_some_and(|l| l.usable));
        assert_eq!((w.start_ms, w.end_ms), (10_000, 40_000));
        // Both leads fill both slots, in order.
        let two = [vec![0.1f32; 40 * fs], v.clone()];
        let w = record_window(&two, 0, &[], 40 * fs, 30 * fs, 0);
        assert_eq!(w.ecg[0].as_deref().map(|l| l[0]), Some(0.1));
        assert_eq!(w.ecg[1].as_deref().map(|l| l[0]), Some(0.5));
    }

    fn row(end_secs: f64, score: Option<f32>) -> OfflineScore {
        OfflineScore {
            start_secs: end_secs - 30.0,
            end_secs,
            status: ScoreStatus::Scored,
            score,
            members: Vec::new(),
            run_level: None,
            run_onset_secs: None,
            alarm: "off",
        }
    }

    #[test]
    fn pressures_pleth_and_respiration_are_not_read_as_ecg() {
        for n in ["ABP", "PLETH", "RESP", "Pleth", "SpO2", "PAP", "CVP", "ART"] {
            assert!(not_ecg(n), "{n}");
        }
        for n in ["II", "V", "aVF", "MLII", "V1", "ECG1", "I", "III", "MCL"] {
            assert!(!not_ecg(n), "{n}");
        }
    }

    #[test]
    fn alarms_are_marked_as_the_ward_raises_and_clears_them() {
        let scores = [0.1, 0.7, 0.8, 0.4, 0.2, 0.1];
        let mut rows: Vec<OfflineScore> = scores
            .iter()
            .enumerate()
            .map(|(i, &s)| row(30.0 + 5.0 * i as f64, Some(s)))
            .collect();
        let rule = AlarmRule {
            on: 0.6,
            off: 0.3,
            k: 1,
            n: 1,
        };
        mark_alarms(&mut rows, rule, 5000).unwrap();
        let marks: Vec<&str> = rows.iter().map(|r| r.alarm).collect();
        assert_eq!(marks, ["off", "raised", "on", "on", "cleared", "off"]);
    }
}
