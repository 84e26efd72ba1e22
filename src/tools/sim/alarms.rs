//! The alarms a textbook monitor raises on a replayed record (`holmes simulate
//! --monitor-alarms`), sent with the record's samples as a monitor sends its own alarms
//! (`docs/PROTOCOL.md` §5a).
//!
//! The monitor is the classical detector ([`baseline_scores`](crate::signal::classical::baseline_scores), the proxy monitor `holmes
//! evaluate` judges the opinion on) on the record's first lead, in 8 s windows every second,
//! under the simplest rule that reads its score as a monitor's call: an alarm is **raised** at
//! the first hop whose score reaches 1 (a run of 5 wide beats over 100/min, or 4 s of
//! fibrillatory signal) and **ends** at the first hop after it below 1; a new alarm is raised
//! no sooner than [`MIN_GAP_SECS`] after the previous one ended. Its kind is `vf` where the VF
//! rule alone reaches 1 at the raise ([`vf_likeness`] of the 4 s before it), `vt` otherwise.
//!
//! The schedule is computed once per record ([`Schedule::of`]); each bed playing the record
//! then walks it from where its replay starts ([`AlarmPlayer`]), around the record as the
//! replay wraps. An alarm's `t_ms` is the end of the window that raised it, on the bed's
//! stream clock (sample `n` of the stream at `base + 4 n` ms, as the samples frames carry it).
//! Synthetic beds send none: the dynamical model is sinus rhythm, on which no alarm is due.

use std::sync::Arc;

use serde_json::json;

use crate::core::monitor_alarm::MonitorAlarmKind;
use crate::core::window::SAMPLE_RATE_HZ;
use crate::signal::classical::{ClassicalError, VT_MIN_BEATS, baseline_scores_with, vf_likeness};
use crate::training::dataset::RecordData;

/// The proxy monitor's window, samples (8 s, as the detector's own tests read it).
const WINDOW_SAMPLES: usize = 8 * SAMPLE_RATE_HZ;
/// The monitor re-evaluates every this many samples (1 s).
const HOP_SAMPLES: usize = SAMPLE_RATE_HZ;
/// Least time between an alarm's end and the next raise, s (a monitor does not re-raise the
/// same call on every flicker of its detector).
pub(crate) const MIN_GAP_SECS: usize = 10;
/// Milliseconds per sample at the stream's rate.
const MS_PER_SAMPLE: i64 = 1000 / SAMPLE_RATE_HZ as i64;

/// One alarm the proxy monitor raises on a record: its kind, and the samples (exclusive ends,
/// from the record's start) where it was raised and where it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduledAlarm {
    pub kind: MonitorAlarmKind,
    pub raised: usize,
    pub ended: usize,
}

/// Every alarm the proxy monitor raises on one record, in order, and the record's length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub alarms: Vec<ScheduledAlarm>,
    pub len: usize,
}

impl Schedule {
    /// The proxy monitor's alarms on a record (on its first lead).
    pub fn of_record(rec: &RecordData) -> Result<Schedule, ClassicalError> {
        Schedule::of(rec.leads.first().map_or(&[][..], Vec::as_slice))
    }

    /// The proxy monitor's alarms on `lead` (mV, 250 Hz), the record's first lead.
    pub fn of(lead: &[f32]) -> Result<Schedule, ClassicalError> {
        Schedule::of_with(lead, VT_MIN_BEATS)
    }

    /// [`Schedule::of`] with the monitor's VT run set to `min_beats` beats.
    pub(crate) fn of_with(lead: &[f32], min_beats: usize) -> Result<Schedule, ClassicalError> {
        let len = lead.len();
        if len < WINDOW_SAMPLES {
            return Ok(Schedule {
                alarms: Vec::new(),
                len,
            });
        }
        let scores = baseline_scores_with(lead, HOP_SAMPLES, WINDOW_SAMPLES, min_beats)?;
        let gap = MIN_GAP_SECS * SAMPLE_RATE_HZ;
        let mut alarms: Vec<ScheduledAlarm> = Vec::new();
        let mut open: Option<(usize, MonitorAlarmKind)> = None;
        for &(end, score) in &scores {
            match open {
                None if score >= 1.0 && alarms.last().is_none_or(|a| end >= a.ended + gap) => {
                    let kind = if vf_likeness(&lead[..end]) >= 1.0 {
                        MonitorAlarmKind::Vf
                    } else {
                        MonitorAlarmKind::Vt
                    };
                    open = Some((end, kind));
                }
                Some((raised, kind)) if score < 1.0 => {
                    alarms.push(ScheduledAlarm {
                        kind,
                        raised,
                        ended: end,
                    });
                    open = None;
                }
                _ => {}
            }
        }
        if let (Some((raised, kind)), Some(&(last, _))) = (open, scores.last()) {
            alarms.push(ScheduledAlarm {
                kind,
                raised,
                ended: last,
            });
        }
        Ok(Schedule { alarms, len })
    }
}

/// A raise or an end, at an offset into one pass of the record from where a bed's replay
/// starts (samples, in `1..=len`: the sample before it is the last one the event waits for).
#[derive(Debug, Clone, Copy)]
struct Event {
    offset: u64,
    alarm: usize,
    raise: Option<MonitorAlarmKind>,
}

/// An alarm message to send: its text, and whether it raises an alarm (or ends one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AlarmMessage {
    pub(crate) text: String,
    pub(crate) raise: bool,
}

/// One bed's walk through its record's schedule: the alarm messages due once the stream's
/// first `n` samples are sent.
#[derive(Debug)]
pub(crate) struct AlarmPlayer {
    events: Arc<[Event]>,
    len: u64,
    /// Passes of the record completed, and the next event of this pass.
    cycle: u64,
    next: usize,
    /// The alarm raised and not yet ended: its place in the schedule and the id it was sent
    /// with.
    open: Option<(usize, String)>,
    /// Alarms raised so far (the ids are `A-1`, `A-2`, ...).
    raised: u64,
}

impl AlarmPlayer {
    /// A bed replaying the record of `schedule` from sample `start`.
    pub(crate) fn new(schedule: &Schedule, start: usize) -> AlarmPlayer {
        let len = schedule.len.max(1) as u64;
        let start = start as u64 % len;
        // An exclusive end `e` waits for sample `e - 1`: its offset from the start, plus one.
        let offset = |e: usize| (e as u64 + len - start - 1) % len + 1;
        let mut events: Vec<Event> = schedule
            .alarms
            .iter()
            .enumerate()
            .flat_map(|(i, a)| {
                [
                    Event {
                        offset: offset(a.raised),
                        alarm: i,
                        raise: Some(a.kind),
                    },
                    Event {
                        offset: offset(a.ended),
                        alarm: i,
                        raise: None,
                    },
                ]
            })
            .collect();
        events.sort_by_key(|e| (e.offset, e.raise.is_some()));
        AlarmPlayer {
            events: events.into(),
            len,
            cycle: 0,
            next: 0,
            open: None,
            raised: 0,
        }
    }

    /// The `alarm` and `alarm_end` messages due once the stream's first `sent` samples are
    /// out, in order, on the clock where stream sample `n` is at `base_ms + 4 n`. An end whose
    /// alarm this bed never raised (one that began before its replay did) is not sent.
    pub(crate) fn due(&mut self, sent: u64, base_ms: i64) -> Vec<AlarmMessage> {
        let mut out = Vec::new();
        while let Some(&e) = self.events.get(self.next) {
            let at = self.cycle * self.len + e.offset;
            if at > sent {
                break;
            }
            let t_ms = base_ms + at as i64 * MS_PER_SAMPLE;
            match e.raise {
                Some(kind) => {
                    if let Some((_, id)) = self.open.take() {
                        out.push(end_text(&id, t_ms));
                    }
                    self.raised += 1;
                    let id = format!("A-{}", self.raised);
                    out.push(AlarmMessage {
                        text:
                            json!({"type": "alarm", "id": id, "kind": kind.as_str(), "t_ms": t_ms})
                                .to_string(),
                        raise: true,
                    });
                    self.open = Some((e.alarm, id));
                }
                None => {
                    if self.open.as_ref().is_some_and(|(i, _)| *i == e.alarm) {
                        let (_, id) = self.open.take().expect("checked just above");
                        out.push(end_text(&id, t_ms));
                    }
                }
            }
            self.next += 1;
            if self.next == self.events.len() {
                self.next = 0;
                self.cycle += 1;
            }
        }
        out
    }
}

fn end_text(id: &str, t_ms: i64) -> AlarmMessage {
    AlarmMessage {
        text: json!({"type": "alarm_end", "id": id, "t_ms": t_ms}).to_string(),
        raise: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ClientMsg, parse_client};
    use crate::signal::test_signals::{fibrillation, sinus, wide_run};

    fn parsed(messages: &[AlarmMessage]) -> Vec<ClientMsg> {
        messages
            .iter()
            .map(|m| {
                let c = parse_client(&m.text).unwrap_or_else(|e| panic!("{}: {e:?}", m.text));
                assert_eq!(m.raise, matches!(c, ClientMsg::Alarm { .. }), "{}", m.text);
                c
            })
            .collect()
    }

    #[test]
    fn sinus_raises_nothing_and_a_wide_fast_run_raises_vt_until_it_stops() {
        let fs = SAMPLE_RATE_HZ as f64;
        assert!(
            Schedule::of(&sinus(1, 70.0, 60.0))
                .unwrap()
                .alarms
                .is_empty()
        );

        let mut lead = sinus(2, 70.0, 30.0);
        lead.extend(wide_run(180.0, 160.0, 20.0));
        lead.extend(sinus(3, 70.0, 30.0));
        let s = Schedule::of(&lead).unwrap();
        assert_eq!(s.alarms.len(), 1, "{s:?}");
        let a = s.alarms[0];
        assert_eq!(a.kind, MonitorAlarmKind::Vt);
        let secs = |n: usize| n as f64 / fs;
        assert!((30.0..34.0).contains(&secs(a.raised)), "{a:?}");
        assert!((50.0..60.0).contains(&secs(a.ended)), "{a:?}");
    }

    #[test]
    fn fibrillation_raises_vf() {
        let mut lead = sinus(4, 70.0, 30.0);
        lead.extend(fibrillation(5, 20.0));
        let s = Schedule::of(&lead).unwrap();
        assert_eq!(s.alarms.first().map(|a| a.kind), Some(MonitorAlarmKind::Vf));
    }

    #[test]
    fn a_bed_sends_each_alarm_once_its_samples_are_out_and_again_on_the_next_pass() {
        let schedule = Schedule {
            alarms: vec![
                ScheduledAlarm {
                    kind: MonitorAlarmKind::Vt,
                    raised: 1_000,
                    ended: 2_000,
                },
                ScheduledAlarm {
                    kind: MonitorAlarmKind::Vf,
                    raised: 5_000,
                    ended: 6_000,
                },
            ],
            len: 10_000,
        };
        // Replay starts in the first alarm: its end is not sent on the first pass.
        let mut p = AlarmPlayer::new(&schedule, 1_500);
        assert!(p.due(499, 0).is_empty());
        assert!(
            p.due(3_499, 0).is_empty(),
            "an end of an alarm never raised"
        );
        let m = parsed(&p.due(3_500, 0));
        assert!(
            matches!(&m[..], [ClientMsg::Alarm { id, kind: MonitorAlarmKind::Vf, t_ms: 14_000, .. }] if id == "A-1"),
            "{m:?}"
        );
        let m = parsed(&p.due(4_500, 0));
        assert!(
            matches!(&m[..], [ClientMsg::AlarmEnd { id, t_ms: 18_000, .. }] if id == "A-1"),
            "{m:?}"
        );
        // Round the record: the first alarm, raised 9,500 samples into the stream.
        let m = parsed(&p.due(10_000, 100));
        assert!(
            matches!(&m[..], [ClientMsg::Alarm { id, kind: MonitorAlarmKind::Vt, t_ms: 38_100, .. }] if id == "A-2"),
            "{m:?}"
        );
        assert!(p.due(10_000, 100).is_empty(), "sent once");
        assert_eq!(parsed(&p.due(20_000, 0)).len(), 4, "{p:?}");
    }
}
