//! The board's end of the alarm feed: each alarm transition handed, without waiting, to a
//! consumer above the dashboard (the HL7 link's feed, `outbound`), and those it cannot take
//! (its channel full or closed) counted where the consumer reports them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use super::alarms::Transition;

/// Hands alarm transitions over without waiting, counting those it cannot.
#[derive(Clone)]
pub(crate) struct AlarmFeed {
    /// To the consumer, which closes it by dropping its receiver.
    tx: mpsc::Sender<Transition>,
    /// Transitions not handed over since start, shared with the consumer's status.
    dropped: Arc<AtomicU64>,
}

impl AlarmFeed {
    pub(crate) fn new(tx: mpsc::Sender<Transition>, dropped: Arc<AtomicU64>) -> AlarmFeed {
        AlarmFeed { tx, dropped }
    }

    /// `false` (and counted) when the transition could not be handed over.
    pub(crate) fn try_hand(&self, t: Transition) -> bool {
        let ok = self.tx.try_send(t).is_ok();
        if !ok {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("holmes_alarm_feed_dropped_total").increment(1);
        }
        ok
    }
}
