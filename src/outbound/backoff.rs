//! A link's back-off ([`Backoff`]), one definition for both link tasks ([`link`](super::link)
//! for HL7, [`fhir::link`](super::fhir::link) for FHIR): before it connects again, before it
//! sends again a message the receiver did not answer for good, and after a final state the
//! outbox could not write, it waits a step that doubles from the link's `retry_min_ms` to its
//! `retry_max_ms`; once the outbox has written a message's final state the steps start again
//! from the minimum. Every wait gives way to the shutdown.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Exponential back-off of a link, from its `retry_min_ms` doubling to its `retry_max_ms`.
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(min_ms: u64, max_ms: u64) -> Backoff {
        let min = Duration::from_millis(min_ms);
        Backoff {
            min,
            max: Duration::from_millis(max_ms),
            next: min,
        }
    }

    fn step(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }

    fn reset(&mut self) {
        self.next = self.min;
    }

    /// Sleeps the next step; false when `shutdown` comes first.
    pub(crate) async fn wait(&mut self, shutdown: &CancellationToken) -> bool {
        let d = self.step();
        tokio::select! {
            _ = shutdown.cancelled() => false,
            _ = tokio::time::sleep(d) => true,
        }
    }

    /// Sleeps the next step before the same message goes again; `Err(stopping)` when
    /// `shutdown` comes first.
    pub(crate) async fn resend<E>(
        &mut self,
        shutdown: &CancellationToken,
        stopping: E,
    ) -> Result<(), E> {
        match self.wait(shutdown).await {
            true => Ok(()),
            false => Err(stopping),
        }
    }

    /// After the outbox was told a message's final state: `written`, the steps start again
    /// from the minimum and the link goes on at once; not written (the database refused it,
    /// the message stays pending), the link sleeps the next step before the message goes
    /// again, no tight loop of resends while the database refuses. `Err(stopping)` when
    /// `shutdown` comes first.
    pub(crate) async fn settle<E>(
        &mut self,
        written: bool,
        shutdown: &CancellationToken,
        stopping: E,
    ) -> Result<(), E> {
        if written {
            self.reset();
            return Ok(());
        }
        self.resend(shutdown, stopping).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steps_double_up_to_the_most_and_start_again_from_the_least() {
        let mut b = Backoff::new(100, 350);
        let steps: Vec<u128> = (0..4).map(|_| b.step().as_millis()).collect();
        assert_eq!(steps, [100, 200, 350, 350]);
        b.reset();
        assert_eq!(b.step().as_millis(), 100);
    }

    #[tokio::test]
    async fn a_written_final_state_goes_on_at_once_and_a_shutdown_stops_every_wait() {
        let hour = 3_600_000;
        let mut b = Backoff::new(hour, 2 * hour);
        b.step();
        let stopped = CancellationToken::new();
        stopped.cancel();
        // Written: no wait (an hour's step would time the test out), the steps reset.
        assert_eq!(b.settle(true, &stopped, "stopping").await, Ok(()));
        assert_eq!(b.next, b.min);
        // Not written, or a resend: the wait, which the shutdown cuts short.
        assert_eq!(b.settle(false, &stopped, "stopping").await, Err("stopping"));
        assert_eq!(b.resend(&stopped, "stopping").await, Err("stopping"));
        assert!(!b.wait(&stopped).await);
    }
}
