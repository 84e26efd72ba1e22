//! The adjudicator: Holmes's opinion on each monitor's own VT or VF alarm
//! ([`signal::adjudicate`](crate::signal::adjudicate)), formed on a thread of its own (the
//! work is blocking CPU work, never a tokio worker's) from the samples the bed handed on with
//! the alarm, with the beat counter the engine serves; the alarm and its opinion, with their
//! provenance and the strip it read, go to the store, and a monitor's end of an alarm after it, in the order the
//! monitor sent them.
//!
//! The ensemble's side of the opinion is the served risk of the bed's windows ending in the
//! [`RISK_LOOKBACK_SECS`] before the onset, as the store commits them ([`RecentRisk`], fed by
//! the store's committed scores): the windows committed by the time the alarm is judged.
//!
//! An alarm whose look-back holds less than [`MIN_COVERAGE`] of its samples (it came before
//! the stream, or its samples never came) is stored without an opinion, the reason in its
//! provenance: a doubt read from filled holes would be false reassurance.
//!
//! An actor: [`Adjudicator`] is the handle, a bounded channel in front of the thread. Nothing
//! accepted is lost: when [`QUEUE`] alarms wait, a new alarm is stored at once without an
//! opinion (the reason says the adjudicator was overloaded, and a counter counts it), and an
//! alarm's end waits for room.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use serde_json::json;
use tokio::sync::broadcast;

use super::EngineError;
use crate::core::monitor_alarm::{
    LOOKBACK_SECS, MonitorAlarm, MonitorAlarmEvent, Opinion, RISK_LOOKBACK_SECS,
};
use crate::core::score::ScoreRecord;
use crate::core::time::now_ms;
use crate::serving::store::{MonitorAlarmRow, StoreHandle};
use crate::signal::adjudicate::{Lead, adjudicate, served_point};
use crate::signal::beats::BeatCounter;

/// Alarms waiting for the thread at most.
pub(crate) const QUEUE: usize = 256;
/// The least share of the look-back's samples that must have arrived for an opinion.
const MIN_COVERAGE: f32 = 0.5;
/// Windows of each bed whose served scores [`RecentRisk`] keeps (at the 5-s hop, 80 s).
const KEPT_WINDOWS: usize = 16;
/// Beds [`RecentRisk`] keeps at most; past it, it starts afresh (a bounded map, and a ward
/// has far fewer beds).
const KEPT_BEDS: usize = 16_384;

/// A bed's latest windows: `(end_ms, served score)`, oldest first.
type Windows = VecDeque<(i64, f32)>;

/// The served scores of each bed's latest windows.
#[derive(Debug, Default)]
pub(crate) struct RecentRisk {
    beds: Mutex<HashMap<Arc<str>, Windows>>,
}

impl RecentRisk {
    fn note(&self, r: &ScoreRecord) {
        let Some(score) = r.score else {
            return;
        };
        let mut beds = self.beds.lock().unwrap_or_else(PoisonError::into_inner);
        if beds.len() >= KEPT_BEDS && !beds.contains_key(&r.bed) {
            beds.clear();
        }
        let q = beds.entry(r.bed.clone()).or_default();
        if q.len() == KEPT_WINDOWS {
            q.pop_front();
        }
        q.push_back((r.end_ms, score));
    }

    /// The highest served score of `bed`'s windows ending from [`RISK_LOOKBACK_SECS`] before
    /// `onset_ms` to it.
    pub(crate) fn before(&self, bed: &str, onset_ms: i64) -> Option<f32> {
        let beds = self.beds.lock().unwrap_or_else(PoisonError::into_inner);
        let from = onset_ms.saturating_sub(RISK_LOOKBACK_SECS * 1000);
        beds.get(bed)?
            .iter()
            .filter(|&&(end, _)| (from..=onset_ms).contains(&end))
            .map(|&(_, s)| s)
            .reduce(f32::max)
    }
}

/// The handle: hands alarms to the adjudicator's thread.
pub(crate) struct Adjudicator {
    tx: Mutex<Option<SyncSender<MonitorAlarmEvent>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    store: StoreHandle,
}

impl Adjudicator {
    /// Starts the thread, judging with `beats` (none: VT and VF alarms are stored unjudged,
    /// the reason saying the zoo has no beat counter).
    /// Must be called within the daemon's runtime (a task follows the committed scores).
    pub(crate) fn start(
        beats: Option<Arc<BeatCounter>>,
        store: StoreHandle,
    ) -> Result<Adjudicator, EngineError> {
        let (tx, rx) = sync_channel(QUEUE);
        let risk = Arc::new(RecentRisk::default());
        let mut committed = store.subscribe();
        let fed = risk.clone();
        tokio::spawn(async move {
            loop {
                match committed.recv().await {
                    Ok(r) => fed.note(&r),
                    // A lagging reader skips what it missed; the next windows follow.
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        let st = store.clone();
        let thread = std::thread::Builder::new()
            .name("holmes-adjudicator".into())
            .spawn(move || run(rx, beats.as_deref(), &risk, &st))
            .map_err(|e| EngineError::Thread(e.to_string()))?;
        Ok(Adjudicator {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            store,
        })
    }

    /// Hands on a monitor's alarm or its end, as the module says (never waits for the thread
    /// on a tokio worker except for an end while the queue is full).
    pub(crate) fn send(&self, e: MonitorAlarmEvent) {
        // A kind Holmes does not judge needs no thread: stored at once (its end, if any, comes
        // after it through the queue or the store).
        if let MonitorAlarmEvent::Raised(a) = &e
            && !a.kind.judged()
        {
            self.store.monitor_alarm(judge(a, None, None));
            return;
        }
        // The sender, without holding the lock while the store is asked anything.
        let tx = self
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(tx) = tx else {
            // Stopped: stored as it is.
            store_unjudged(&self.store, e, "not judged: the daemon was stopping");
            return;
        };
        match tx.try_send(e) {
            Ok(()) => {}
            Err(TrySendError::Full(e @ MonitorAlarmEvent::Raised(_))) => {
                metrics::counter!("holmes_monitor_alarms_overloaded_total").increment(1);
                store_unjudged(&self.store, e, "not judged: the adjudicator was overloaded");
            }
            Err(TrySendError::Full(e)) => {
                let on_worker = tokio::runtime::Handle::try_current().is_ok_and(|h| {
                    h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
                });
                if on_worker {
                    tokio::task::block_in_place(|| {
                        let _ = tx.send(e);
                    });
                } else {
                    let _ = tx.send(e);
                }
            }
            Err(TrySendError::Disconnected(e)) => {
                store_unjudged(&self.store, e, "not judged: the adjudicator has stopped");
            }
        }
    }

    /// Judges what is queued and stops the thread (before the store closes).
    pub(crate) fn shutdown(&self) {
        self.tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

fn run(
    rx: Receiver<MonitorAlarmEvent>,
    beats: Option<&BeatCounter>,
    risk: &RecentRisk,
    store: &StoreHandle,
) {
    for e in rx {
        match e {
            MonitorAlarmEvent::Raised(a) => {
                let before = risk.before(&a.bed, a.onset_ms);
                // A panic judging one alarm stores it unjudged; the thread goes on.
                let row = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    judge(&a, beats, before)
                }))
                .unwrap_or_else(|_| {
                    tracing::error!("Judging a monitor alarm panicked; stored without an opinion");
                    unjudged_row(&a, "not judged: an internal error")
                });
                let seconds = a.arrived.elapsed().as_secs_f64();
                metrics::histogram!("holmes_monitor_alarm_opinion_seconds").record(seconds);
                let opinion = match &row.opinion {
                    Some(o) if o.confirmed => "confirmed",
                    Some(_) => "doubted",
                    None => "not_judged",
                };
                metrics::counter!("holmes_monitor_alarms_total", "kind" => a.kind.as_str(), "opinion" => opinion)
                    .increment(1);
                store.monitor_alarm(row);
            }
            MonitorAlarmEvent::Ended { bed, id, end_ms } => {
                store.monitor_alarm_end(bed, id, end_ms);
            }
        }
    }
}

/// The alarm's row with Holmes's opinion on it (from its samples and the served `risk` before
/// it) and the opinion's provenance.
fn judge(a: &MonitorAlarm, beats: Option<&BeatCounter>, risk: Option<f32>) -> MonitorAlarmRow {
    let mut provenance = json!({
        "holmes": env!("CARGO_PKG_VERSION"),
        "lookback_secs": LOOKBACK_SECS,
        "coverage": a.coverage,
        "leads": a.leads.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
    });
    let opinion = match (a.kind.judged(), beats) {
        (false, _) => None,
        (true, None) => {
            provenance["not_judged"] = json!("the zoo serves no beat counter");
            None
        }
        // Too little of the look-back arrived (the alarm came before the stream, or its
        // samples never came): no opinion rather than a doubt read from filled holes.
        (true, Some(_)) if a.coverage < MIN_COVERAGE => {
            provenance["not_judged"] = json!(format!(
                "{:.0} % of the {LOOKBACK_SECS} s before the alarm arrived (at least {:.0} % needed)",
                100.0 * a.coverage,
                100.0 * MIN_COVERAGE
            ));
            None
        }
        (true, Some(c)) => {
            provenance["counter_sha256"] = json!(c.sha256);
            let point = served_point(&c.file);
            provenance["confirm_at"] = json!(point);
            provenance["risk"] = json!(risk);
            let leads: Vec<Lead> = a
                .leads
                .iter()
                .map(|(name, samples)| Lead { name, samples })
                .collect();
            adjudicate(&c.file.classifier, &leads, a.kind, risk, point)
        }
    };
    row(a, opinion, provenance)
}

/// The alarm's row without an opinion, `why` in its provenance.
fn unjudged_row(a: &MonitorAlarm, why: &str) -> MonitorAlarmRow {
    row(
        a,
        None,
        json!({ "not_judged": why, "coverage": a.coverage }),
    )
}

/// The alarm's row with its `opinion` (formed now) and `provenance`.
fn row(
    a: &MonitorAlarm,
    opinion: Option<Opinion>,
    provenance: serde_json::Value,
) -> MonitorAlarmRow {
    MonitorAlarmRow {
        bed: a.bed.clone(),
        id: a.id.clone(),
        kind: a.kind,
        onset_ms: a.onset_ms,
        received_ms: a.received_ms,
        judged_ms: opinion.as_ref().map(|_| now_ms()),
        opinion,
        provenance,
        strip: a.leads.clone(),
    }
}

/// Stores an alarm without an opinion (`why` in its provenance), or an end as it is.
fn store_unjudged(store: &StoreHandle, e: MonitorAlarmEvent, why: &str) {
    match e {
        MonitorAlarmEvent::Raised(a) => store.monitor_alarm(unjudged_row(&a, why)),
        MonitorAlarmEvent::Ended { bed, id, end_ms } => store.monitor_alarm_end(bed, id, end_ms),
    }
}
