//! A bed's monitor alarms on their way to the adjudicator. A monitor sends its alarm soon
//! after the samples it alarmed on, but over a network the two can cross: an alarm waits here
//! until the bed holds its samples up to the onset, or [`WAIT`] at most, and is then handed on
//! with the [`LOOKBACK_SECS`] of every announced lead up to the onset (what has not arrived
//! by then is a hole, filled as a window's are, and counted in the alarm's coverage). Kinds
//! Holmes does not judge go on at once, without samples. An alarm's end that comes while the
//! alarm waits is kept with it and follows it. Nothing accepted is dropped: when
//! [`MAX_PENDING`] alarms wait, the oldest goes on with what the bed holds.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bed::BedState;
use crate::core::monitor_alarm::{
    LOOKBACK_SECS, MonitorAlarm, MonitorAlarmEvent, MonitorAlarmKind,
};
use crate::core::window::MAX_LEADS;

/// The longest an alarm waits for the samples up to its onset.
pub(crate) const WAIT: Duration = Duration::from_secs(1);
/// Alarms a bed holds waiting at most.
const MAX_PENDING: usize = 32;

/// A monitor's alarm as its connection read it.
#[derive(Debug, Clone)]
pub(crate) struct AlarmMsg {
    pub(crate) id: String,
    pub(crate) kind: MonitorAlarmKind,
    /// The onset, device time (ms).
    pub(crate) t_ms: i64,
    /// The name the monitor gives each lead slot it announced.
    pub(crate) names: [Option<String>; MAX_LEADS],
    pub(crate) arrived: Instant,
    pub(crate) received_ms: i64,
}

/// An alarm waiting, since when it waits (the bed took it), and its end if the monitor sent
/// it meanwhile.
#[derive(Debug)]
struct Waiting {
    alarm: AlarmMsg,
    since: Instant,
    end_ms: Option<i64>,
}

/// The alarms of one bed waiting for their samples, oldest first.
#[derive(Debug, Default)]
pub(super) struct PendingAlarms {
    waiting: VecDeque<Waiting>,
}

impl PendingAlarms {
    /// Takes an alarm; returns what to hand on now (a kind not judged, or the oldest when
    /// too many wait), read from `state`.
    pub(super) fn push(&mut self, a: AlarmMsg, state: &BedState) -> Vec<MonitorAlarmEvent> {
        if !a.kind.judged() {
            return vec![MonitorAlarmEvent::Raised(cut(&a, state, false))];
        }
        let now = Instant::now();
        self.waiting.push_back(Waiting {
            alarm: a,
            since: now,
            end_ms: None,
        });
        let mut out = Vec::new();
        while self.waiting.len() > MAX_PENDING {
            let oldest = self.waiting.pop_front().expect("more than the cap wait");
            hand_on(&oldest, state, &mut out);
        }
        out.extend(self.due(state, now));
        out
    }

    /// The monitor ended alarm `id` at `end_ms`: kept with the alarm while it waits (so the
    /// end follows it), else handed on now.
    pub(super) fn end(
        &mut self,
        bed: &Arc<str>,
        id: String,
        end_ms: i64,
    ) -> Vec<MonitorAlarmEvent> {
        match self.waiting.iter_mut().rev().find(|w| w.alarm.id == id) {
            Some(w) => {
                w.end_ms = Some(end_ms);
                Vec::new()
            }
            None => vec![MonitorAlarmEvent::Ended {
                bed: bed.clone(),
                id,
                end_ms,
            }],
        }
    }

    /// The alarms whose samples are in, or that have waited [`WAIT`], read from `state`
    /// (each followed by its end where the monitor sent it).
    pub(super) fn due(&mut self, state: &BedState, now: Instant) -> Vec<MonitorAlarmEvent> {
        let mut out = Vec::new();
        self.waiting.retain(|w| {
            let ready = state.reached(w.alarm.t_ms) == Some(true);
            let waited = now.duration_since(w.since) >= WAIT;
            if ready || waited {
                hand_on(w, state, &mut out);
            }
            !(ready || waited)
        });
        out
    }

    /// Every waiting alarm, with what the bed holds (the bed stops).
    pub(super) fn drain(&mut self, state: &BedState) -> Vec<MonitorAlarmEvent> {
        let mut out = Vec::new();
        for w in self.waiting.drain(..) {
            hand_on(&w, state, &mut out);
        }
        out
    }
}

/// The waiting alarm, read from `state`, then its end.
fn hand_on(w: &Waiting, state: &BedState, out: &mut Vec<MonitorAlarmEvent>) {
    out.push(MonitorAlarmEvent::Raised(cut(&w.alarm, state, true)));
    if let Some(end_ms) = w.end_ms {
        out.push(MonitorAlarmEvent::Ended {
            bed: state.bed.clone(),
            id: w.alarm.id.clone(),
            end_ms,
        });
    }
}

/// The alarm handed on, with the look-back of each announced lead when `with_samples`.
fn cut(a: &AlarmMsg, state: &BedState, with_samples: bool) -> MonitorAlarm {
    let want = (LOOKBACK_SECS as i64) * state.fs();
    let mut leads = Vec::new();
    let (mut arrived, mut asked) = (0usize, 0usize);
    if with_samples {
        for (slot, got) in state.before(a.t_ms, want).into_iter().enumerate() {
            if let Some((samples, n)) = got {
                let name = a.names[slot]
                    .clone()
                    .unwrap_or_else(|| format!("slot {slot}"));
                arrived += n;
                asked += samples.len();
                leads.push((name, samples));
            }
        }
    }
    MonitorAlarm {
        bed: Arc::clone(&state.bed),
        id: a.id.clone(),
        kind: a.kind,
        onset_ms: a.t_ms,
        received_ms: a.received_ms,
        arrived: a.arrived,
        leads,
        coverage: if asked == 0 {
            0.0
        } else {
            arrived as f32 / asked as f32
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_buffer_the_config_takes_holds_an_alarms_look_back() {
        let wait = WAIT.as_secs_f64().ceil() as usize;
        assert!(crate::config::MIN_ALARM_BUFFER_SECS as usize > LOOKBACK_SECS + wait);
    }
}
