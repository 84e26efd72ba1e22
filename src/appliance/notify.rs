//! systemd's notify protocol (`sd_notify(3)`) through the `sd-notify` crate: readiness,
//! status lines, stopping, and watchdog pings gated by a liveness check of the engine and
//! the store writer.
//!
//! Without `NOTIFY_SOCKET` (not started by systemd with `Type=notify`) every call is a no-op.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sd_notify::NotifyState;

use crate::serving::engine::Engine;
use crate::serving::store::StoreHealth;

/// Sends state changes to the service manager, when there is one.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    enabled: bool,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` (left set: the crate reads it on each call).
    pub(crate) fn from_env() -> Notifier {
        Notifier {
            enabled: std::env::var_os("NOTIFY_SOCKET").is_some(),
        }
    }

    fn send(&self, states: &[NotifyState<'_>]) {
        if !self.enabled {
            return;
        }
        if let Err(e) = sd_notify::notify(false, states) {
            tracing::warn!(error = %e, "Cannot notify the service manager");
        }
    }

    pub(crate) fn status(&self, line: &str) {
        self.send(&[NotifyState::Status(line)]);
    }

    /// `READY=1` with a status line.
    pub(crate) fn ready(&self, line: &str) {
        self.send(&[NotifyState::Ready, NotifyState::Status(line)]);
    }

    /// `STOPPING=1` with a status line.
    pub(crate) fn stopping(&self, line: &str) {
        self.send(&[NotifyState::Stopping, NotifyState::Status(line)]);
    }

    pub(crate) fn ping(&self) {
        self.send(&[NotifyState::Watchdog]);
    }

    /// Half the watchdog period systemd asked for (`WATCHDOG_USEC`), when the watchdog is on
    /// and meant for this process (`WATCHDOG_PID` absent or ours), as `sd_watchdog_enabled(3)`.
    pub(crate) fn watchdog_interval(&self) -> Option<Duration> {
        if !self.enabled {
            return None;
        }
        ping_interval(
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        )
    }
}

/// Half of `usec`, when it parses and `pid` (if given) is `me`.
fn ping_interval(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|u| *u > 0)?;
    if let Some(pid) = pid
        && pid.trim().parse::<u32>().ok() != Some(me)
    {
        return None;
    }
    Some(Duration::from_micros(usec / 2))
}

/// Whether the daemon is making progress: the engine finishes batches while windows wait in
/// its queues (an idle engine is live), and the store writer turns its loop (it wakes at
/// least once a second when idle).
pub(crate) struct Liveness {
    engine: Engine,
    store: Arc<StoreHealth>,
    stall: Duration,
    /// Batches finished, and when that count last moved (or the queues were empty).
    engine_mark: (u64, Instant),
    /// Writer loop turns, and when that count last moved.
    store_mark: (u64, Instant),
}

impl Liveness {
    pub(crate) fn new(engine: Engine, store: Arc<StoreHealth>, stall: Duration) -> Liveness {
        let now = Instant::now();
        Liveness {
            engine_mark: (engine.counters().batches.load(Ordering::Relaxed), now),
            store_mark: (store.heartbeats.load(Ordering::Relaxed), now),
            engine,
            store,
            stall,
        }
    }

    /// `Err` with the reason when either has stalled for longer than the allowance.
    pub(crate) fn check(&mut self, now: Instant) -> Result<(), String> {
        // Progress: a member's batch or a window the beat counter read.
        let counters = self.engine.counters();
        let progress = counters.batches.load(Ordering::Relaxed)
            + counters.beat_readings.load(Ordering::Relaxed);
        let queued: usize = self.engine.queue_lengths().iter().map(|q| q.1).sum();
        if progress != self.engine_mark.0 || queued == 0 {
            self.engine_mark = (progress, now);
        }
        let beats = self.store.heartbeats.load(Ordering::Relaxed);
        if beats != self.store_mark.0 {
            self.store_mark = (beats, now);
        }
        let engine_idle = now.duration_since(self.engine_mark.1);
        if engine_idle > self.stall {
            return Err(format!(
                "engine stalled: {queued} windows queued and no batch finished for {:.0} s",
                engine_idle.as_secs_f64()
            ));
        }
        let store_idle = now.duration_since(self.store_mark.1);
        if store_idle > self.stall {
            return Err(format!(
                "store writer stalled for {:.0} s",
                store_idle.as_secs_f64()
            ));
        }
        Ok(())
    }
}

/// Pings `WATCHDOG=1` every `every` while `live` holds; a stall stops the pings (and says so
/// in the status line) so systemd restarts the service after `WatchdogSec=`.
pub(crate) async fn watchdog(notifier: Notifier, every: Duration, mut live: Liveness) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stalled = false;
    loop {
        tick.tick().await;
        match live.check(Instant::now()) {
            Ok(()) => {
                if stalled {
                    tracing::info!("Engine and store make progress again; watchdog pings resume");
                    notifier.status("Serving");
                    stalled = false;
                }
                notifier.ping();
            }
            Err(reason) => {
                if !stalled {
                    tracing::error!(%reason, "Watchdog pings withheld");
                    notifier.status(&format!("Stalled: {reason}"));
                    stalled = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_pings_at_half_the_period_for_this_process_only() {
        let half = Some(Duration::from_secs(5));
        assert_eq!(ping_interval(Some("10000000"), None, 7), half);
        assert_eq!(ping_interval(Some("10000000"), Some("7"), 7), half);
        assert_eq!(ping_interval(Some("10000000"), Some("8"), 7), None);
        assert_eq!(ping_interval(Some("0"), None, 7), None);
        assert_eq!(ping_interval(Some("soon"), None, 7), None);
        assert_eq!(ping_interval(None, None, 7), None);
    }
}
