//! What goes out, one feed per link (HL7, FHIR): a tokio task turning the dashboard's alarm
//! transitions into alarm reports (PCD-04 messages, FHIR alarm Observations) (queued as they happen, each waiting for room in the outbox's queue, and those
//! handed over before shutdown queued before the feed stops: the feed drops none; the board
//! hands changes over without waiting, so one that finds this feed's channel full is lost
//! and counted there, `holmes_alarm_feed_dropped_total`, a problem in `/api/health`), and
//! every `hl7.cadence_secs` (`fhir.cadence_secs`) each bed's latest committed window (from
//! the store writer's broadcast of scores) into an observation report (dropped and
//! counted when the queue is full: the next cadence brings a newer one); and each monitor's own
//! alarm as the store commits its row (the store's broadcast of monitor alarms: raised, with
//! Holmes's opinion or without, and ended) into its report, waiting for room as an alarm does
//! (a feed that fell behind that broadcast has the outbox queue what it skipped from the
//! store's table). Each report carries the patient its bed is admitted with as the feed makes
//! it (the ward's admissions). It holds one score per bed between cadences, so its memory is
//! bounded by the ward.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::LinkStatus;
use super::message::{AlarmReport, Draft, MonitorAlarmReport, Observation, Phase};
use super::outbox::{Names, Outbox};
use crate::board::alarms::{Alarm, AlarmKind, Transition};
use crate::core::patient::Admissions;
use crate::core::score::ScoreRecord;
use crate::core::time::now_ms;
use crate::serving::store::{MonitorAlarmChange, MonitorAlarmPhase};

/// What the feed reads and where it writes.
pub(crate) struct Feed {
    pub(crate) cadence: Duration,
    pub(crate) outbox: Outbox,
    /// The link's metric names.
    pub(crate) names: &'static Names,
    pub(crate) status: Arc<LinkStatus>,
    /// The scores the store writer takes (its broadcast).
    pub(crate) scores: broadcast::Receiver<Arc<ScoreRecord>>,
    /// The board's alarm transitions (the board holds the sender).
    pub(crate) alarms: mpsc::Receiver<Transition>,
    /// The monitors' own alarms as the store commits them (the store's broadcast).
    pub(crate) monitor_alarms: broadcast::Receiver<Arc<MonitorAlarmChange>>,
    /// The patient each bed is admitted with (the monitors' connections write it).
    pub(crate) admissions: Admissions,
    pub(crate) shutdown: CancellationToken,
}

/// The report of one alarm transition, dated when it happened (`now` for a change that
/// carries no time of its own, such as a silence running out), without a patient.
pub(crate) fn report(t: &Transition, now: i64) -> AlarmReport {
    let (a, phase, at): (&Alarm, Phase, i64) = match t {
        Transition::Raised(a) => (a, Phase::Start, a.raised_ms),
        Transition::Changed(a) => match a.cleared_ms {
            Some(c) => (a, Phase::End, c),
            // A silence that ran out has no time of its own: now.
            None if a.silenced_until_ms.is_none()
                && a.silenced_ms.is_some()
                && a.silenced_ms >= a.acked_ms =>
            {
                (a, Phase::Continue, now)
            }
            None => {
                let at = [a.acked_ms, a.silenced_ms].into_iter().flatten().max();
                (a, Phase::Continue, at.unwrap_or(now).max(a.raised_ms))
            }
        },
    };
    let inactivation = if a.silenced_until_ms.is_some_and(|u| u > now) {
        "audio-paused"
    } else if a.acked_by.is_some() {
        "alert-acknowledged"
    } else {
        "enabled"
    };
    AlarmReport {
        alarm_id: a.id,
        bed: a.bed.clone(),
        kind: a.kind,
        phase,
        raised_ms: a.raised_ms,
        at_ms: at,
        inactivation,
        patient: None,
    }
}

impl Feed {
    /// The report of `t` now, with the patient its bed is admitted with now.
    fn alarm_report(&self, t: &Transition) -> AlarmReport {
        let mut r = report(t, now_ms());
        r.patient = self.admissions.get(&r.bed);
        r
    }

    /// The report of a monitor alarm's change, with the patient its bed is admitted with now.
    fn monitor_alarm_report(&self, c: &MonitorAlarmChange) -> Draft {
        let phase = match c.phase {
            MonitorAlarmPhase::Raised => Phase::Start,
            MonitorAlarmPhase::Ended => Phase::End,
        };
        let patient = self.admissions.get(&c.alarm.bed);
        Draft::MonitorAlarm(MonitorAlarmReport::of(&c.alarm, phase, patient))
    }

    pub(crate) async fn run(mut self) {
        let mut latest: HashMap<Arc<str>, Arc<ScoreRecord>> = HashMap::new();
        let mut risk: HashSet<String> = HashSet::new();
        let start = tokio::time::Instant::now() + self.cadence;
        let mut tick = tokio::time::interval_at(start, self.cadence);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut scores_open, mut alarms_open, mut monitor_open) = (true, true, true);
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => break,
                r = self.scores.recv(), if scores_open => match r {
                    Ok(s) => {
                        let newer = latest.get(&s.bed).is_none_or(|o| o.end_ms <= s.end_ms);
                        if newer {
                            latest.insert(s.bed.clone(), s);
                        }
                    }
                    // Observations sample the latest window: a skipped score changes nothing.
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => scores_open = false,
                },
                t = self.alarms.recv(), if alarms_open => match t {
                    Some(t) => {
                        let r = self.alarm_report(&t);
                        if r.kind == AlarmKind::Risk {
                            if r.phase == Phase::End {
                                risk.remove(&r.bed);
                            } else {
                                risk.insert(r.bed.clone());
                            }
                        }
                        self.outbox.enqueue(Draft::Alarm(r)).await;
                    }
                    None => alarms_open = false,
                },
                m = self.monitor_alarms.recv(), if monitor_open => match m {
                    Ok(c) => {
                        let d = self.monitor_alarm_report(&c);
                        self.outbox.enqueue(d).await;
                    }
                    // What it skipped is in the store: the outbox looks it up.
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(skipped = n, link = self.names.link, "The outbound feed fell behind the monitor alarms; the outbox queues them from the store");
                        self.outbox.catch_up().await;
                    }
                    Err(broadcast::error::RecvError::Closed) => monitor_open = false,
                },
                _ = tick.tick() => {
                    for (bed, s) in latest.drain() {
                        let o = Observation {
                            bed: bed.to_string(),
                            at_ms: s.end_ms,
                            score: s.score,
                            heart_rate_bpm: s.heart_rate_bpm,
                            risk_alarm: risk.contains(&*bed),
                            quality: s.status.as_str(),
                            patient: self.admissions.get(&bed),
                        };
                        if !self.outbox.try_enqueue(Draft::Observation(o)) {
                            self.status.queue_dropped.fetch_add(1, Ordering::Relaxed);
                            metrics::counter!(self.names.dropped_total).increment(1);
                        }
                    }
                }
            }
        }
        // Alarm changes the board handed over before shutdown still go to the outbox, and the
        // monitor alarms the store committed by then (those it commits later, the next start
        // finds in the store).
        self.alarms.close();
        while let Some(t) = self.alarms.recv().await {
            let r = self.alarm_report(&t);
            self.outbox.enqueue(Draft::Alarm(r)).await;
        }
        loop {
            match self.monitor_alarms.try_recv() {
                Ok(c) => {
                    let d = self.monitor_alarm_report(&c);
                    self.outbox.enqueue(d).await;
                }
                Err(broadcast::error::TryRecvError::Lagged(_)) => self.outbox.catch_up().await,
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alarm() -> Alarm {
        Alarm {
            id: 4,
            bed: "b1".into(),
            kind: AlarmKind::LeadOff,
            technical: true,
            raised_ms: 100,
            onset_ms: None,
            run_onset_ms: None,
            value: Some(0.9),
            rule: None,
            acked_by: None,
            acked_ms: None,
            silenced_by: None,
            silenced_ms: None,
            silenced_until_ms: None,
            cleared_ms: None,
        }
    }

    #[test]
    fn an_alarm_change_the_feed_cannot_take_is_counted_and_a_problem() {
        let status = Arc::new(LinkStatus::default());
        let (tx, _rx) = mpsc::channel(1);
        let feed = crate::board::handover::AlarmFeed::new(tx, status.alarm_feed_dropped.clone());
        assert!(feed.try_hand(Transition::Raised(alarm())));
        assert!(!feed.try_hand(Transition::Raised(alarm())));
        let o = super::super::Outbound {
            link: "hl7",
            receiver: "r:1".into(),
            stuck_ms: 50_000,
            status: status.clone(),
        };
        assert!(
            o.problems().iter().any(|p| p.contains("1 alarm change")),
            "{:?}",
            o.problems()
        );
        // A message pending longer than five answer timeouts is a problem, connected or not.
        assert!(!o.problems().iter().any(|p| p.contains("has waited")));
        status
            .oldest_pending_ms
            .store(now_ms() - 60_000, Ordering::Relaxed);
        status.backlog.store(1, Ordering::Relaxed);
        assert!(o.problems().iter().any(|p| p.contains("has waited 60 s")));
    }

    #[test]
    fn transitions_become_phases_with_their_own_times_and_inactivation_states() {
        let mut a = alarm();
        let r = report(&Transition::Raised(a.clone()), 999);
        assert_eq!(
            (r.phase, r.at_ms, r.inactivation),
            (Phase::Start, 100, "enabled")
        );
        a.acked_by = Some("nina".into());
        a.acked_ms = Some(200);
        let r = report(&Transition::Changed(a.clone()), 999);
        assert_eq!(
            (r.phase, r.at_ms, r.inactivation),
            (Phase::Continue, 200, "alert-acknowledged")
        );
        a.silenced_by = Some("nina".into());
        a.silenced_ms = Some(300);
        a.silenced_until_ms = Some(60_300);
        let r = report(&Transition::Changed(a.clone()), 999);
        assert_eq!(
            (r.phase, r.at_ms, r.inactivation),
            (Phase::Continue, 300, "audio-paused")
        );
        // The silence ran out: acknowledged still, dated when the feed saw it.
        a.silenced_until_ms = None;
        let r = report(&Transition::Changed(a.clone()), 70_000);
        assert_eq!((r.at_ms, r.inactivation), (70_000, "alert-acknowledged"));
        a.cleared_ms = Some(80_000);
        let r = report(&Transition::Changed(a), 80_001);
        assert_eq!((r.phase, r.at_ms, r.alarm_id), (Phase::End, 80_000, 4));
    }
}
