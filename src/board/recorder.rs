//! The alarm recorder: one thread that stores each alarm change the board makes (its row in
//! `alarms`, and a user's action's audit entry) and only then hands it to the outbound links'
//! feed ([`AlarmFeed`]), in the order the board made them. A report sent to the hospital thus
//! always names an alarm the database holds: killed between the two, the next run finds the
//! row and ends the alarm, rather than a report whose alarm id a new alarm then reuses.
//!
//! The board sends [`Record`]s over a bounded channel (`dashboard.alarm_write_queue`) and
//! waits for room when it is full; the thread owns the [`AlarmDb`] connection and stops when
//! the board drops its sender.

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::alarms::{Alarm, AlarmDb, AlarmError, Transition};
use super::handover::AlarmFeed;
use crate::serving::store::audit::{Action, AuditLog};

/// What the board asks the recorder.
pub(crate) enum Record {
    /// Automatic transitions (raised, cleared, expired, a silence run out).
    Changes(Vec<Transition>),
    /// A user's action: stored with its audit entry; the user hears back either way (the
    /// action stands on the ward).
    Action {
        change: Box<Transition>,
        user: String,
        action: Action,
        reply: oneshot::Sender<Result<Alarm, AlarmError>>,
    },
}

/// Starts the recorder's thread.
pub(crate) fn start(
    db: AlarmDb,
    audit: AuditLog,
    feed: Option<AlarmFeed>,
    queue: usize,
) -> (mpsc::Sender<Record>, std::thread::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel(queue);
    let thread = std::thread::Builder::new()
        .name("holmes-alarm-recorder".into())
        .spawn(move || {
            let r = Recorder {
                db,
                audit,
                feed,
                feed_full: AtomicBool::new(false),
            };
            while let Some(rec) = rx.blocking_recv() {
                r.record(rec);
            }
        })
        .expect("spawning the alarm recorder");
    (tx, thread)
}

struct Recorder {
    db: AlarmDb,
    audit: AuditLog,
    feed: Option<AlarmFeed>,
    /// The feed could not take a change (logged once an episode).
    feed_full: AtomicBool,
}

impl Recorder {
    fn record(&self, rec: Record) {
        match rec {
            Record::Changes(ts) => {
                for t in &ts {
                    if let Err(e) = self.db.apply(t) {
                        tracing::error!(error = %e, "Cannot store an alarm change");
                    }
                    self.hand(t);
                }
            }
            Record::Action {
                change,
                user,
                action,
                reply,
            } => {
                let a = match &*change {
                    Transition::Raised(a) | Transition::Changed(a) => a.clone(),
                };
                let detail = json!({"alarm": a.id, "bed": a.bed, "kind": a.kind.as_str(), "silenced_until_ms": a.silenced_until_ms});
                let stored = self
                    .db
                    .apply(&change)
                    .map_err(|e| e.to_string())
                    .and_then(|()| {
                        self.audit
                            .write(Some(&user), action, &detail)
                            .map_err(|e| e.to_string())
                    });
                self.hand(&change);
                let _ = reply.send(match stored {
                    Ok(()) => Ok(a),
                    Err(e) => {
                        tracing::error!(error = %e, id = a.id, "Cannot store an alarm action");
                        Err(AlarmError::NotRecorded {
                            alarm: a.id,
                            reason: e,
                        })
                    }
                });
            }
        }
    }

    /// Hands a stored change to the outbound links, without waiting.
    fn hand(&self, t: &Transition) {
        let Some(f) = &self.feed else { return };
        if f.try_hand(t.clone()) {
            self.feed_full.store(false, Ordering::Relaxed);
        } else if !self.feed_full.swap(true, Ordering::Relaxed) {
            tracing::error!(
                "Alarm changes cannot be handed to an outbound link (its queue is full or closed); counted in holmes_alarm_feed_dropped_total"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::alarms::AlarmKind;

    #[tokio::test]
    async fn a_change_reaches_the_links_only_once_its_row_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::serving::store::Db::open(
            &dir.path().join("a.db"),
            &crate::serving::store::STORE,
        )
        .unwrap();
        let (ftx, mut frx) = mpsc::channel(8);
        let feed = AlarmFeed::new(ftx, Default::default());
        let (tx, thread) = start(AlarmDb::new(db.clone()), AuditLog::new(&db), Some(feed), 4);
        let alarm = |id| Alarm {
            id,
            bed: "b1".into(),
            kind: AlarmKind::Risk,
            technical: false,
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
        };
        let ts: Vec<Transition> = (1..=3).map(|i| Transition::Raised(alarm(i))).collect();
        tx.send(Record::Changes(ts)).await.unwrap();
        for want in 1..=3 {
            let Transition::Raised(a) = frx.recv().await.unwrap() else {
                panic!("a raise")
            };
            assert_eq!(a.id, want, "in order");
            let stored: i64 = db
                .lock()
                .query_row("SELECT count(*) FROM alarms WHERE id = ?1", [a.id], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(stored, 1, "handed over before its row was stored");
        }
        // A user's action: stored with its audit entry before the link hears of it.
        let (reply, answer) = oneshot::channel();
        let mut acked = alarm(2);
        acked.acked_by = Some("nina".into());
        acked.acked_ms = Some(200);
        tx.send(Record::Action {
            change: Box::new(Transition::Changed(acked)),
            user: "nina".into(),
            action: Action::AlarmAcknowledged,
            reply,
        })
        .await
        .unwrap();
        assert!(frx.recv().await.is_some());
        let by: Option<String> = db
            .lock()
            .query_row("SELECT acked_by FROM alarms WHERE id = 2", [], |r| r.get(0))
            .unwrap();
        assert_eq!(by.as_deref(), Some("nina"));
        assert_eq!(answer.await.unwrap().unwrap().id, 2);
        drop(tx);
        thread.join().unwrap();
    }
}
