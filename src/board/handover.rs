//! The board's end of the alarm feed: each alarm transition handed, without waiting, to the
//! consumers above the dashboard (the outbound links' feeds, `outbound`: HL7, FHIR), and those
//! a consumer cannot take (its channel full or closed) counted where that consumer reports
//! them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use super::alarms::Transition;

/// Hands alarm transitions over without waiting, counting those it cannot.
#[derive(Clone)]
pub(crate) struct AlarmFeed {
    /// To each consumer, which closes its channel by dropping its receiver; with the count of
    /// transitions not handed to it since start, shared with the consumer's status.
    to: Vec<(mpsc::Sender<Transition>, Arc<AtomicU64>)>,
}

impl AlarmFeed {
    pub(crate) fn new(tx: mpsc::Sender<Transition>, dropped: Arc<AtomicU64>) -> AlarmFeed {
        AlarmFeed {
            to: vec![(tx, dropped)],
        }
    }

    /// This feed and `other`'s consumers together.
    pub(crate) fn and(mut self, other: AlarmFeed) -> AlarmFeed {
        self.to.extend(other.to);
        self
    }

    /// `false` (and counted) when the transition could not be handed to every consumer.
    pub(crate) fn try_hand(&self, t: Transition) -> bool {
        let mut all = true;
        for (tx, dropped) in &self.to {
            if tx.try_send(t.clone()).is_err() {
                all = false;
                dropped.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("holmes_alarm_feed_dropped_total").increment(1);
            }
        }
        all
    }
}
