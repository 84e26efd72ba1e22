//! The beat counter's stage: a thread of its own beside the members that reads each window's
//! beats ([`BeatCounter::read`], all of the counter's work) off its own deadline queue, so that
//! the reading overlaps the members' inference instead of following the last of them in the
//! window's commit, where only the judgement ([`BeatCounter::judge`]) is left. Overload is
//! handled as a member's: the queue is bounded, a newer window of a bed supersedes a stale
//! one, and a reading that is refused or late leaves the counter out of that window's score,
//! which then commits `partial` with `beats` among the missing.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Shared;
use super::counter::BEATS_NAME;
use super::job::{ModelFault, Reading};
use super::queue::ModelQueue;
use super::worker::report_fault;
use crate::signal::beats::BeatCounter;

/// The counter served beside an ensemble, and its queue.
pub(crate) struct BeatStage {
    pub(crate) counter: Arc<BeatCounter>,
    pub(crate) queue: ModelQueue,
}

/// Runs the stage until its queue closes: one window at a time, earliest deadline first.
pub(crate) fn run(shared: Arc<Shared>) {
    let Some(stage) = shared.beats.as_ref() else {
        return;
    };
    while let Some(batch) = stage.queue.pop_batch(1) {
        for job in batch {
            let started = Instant::now();
            let evidence =
                std::panic::catch_unwind(AssertUnwindSafe(|| stage.counter.read(&job.window))).ok();
            let compute = started.elapsed();
            metrics::histogram!("holmes_beats_seconds").record(compute.as_secs_f64());
            shared
                .metrics
                .counters
                .beat_readings
                .fetch_add(1, Ordering::Relaxed);
            if evidence.is_none() {
                report_fault(&shared, BEATS_NAME, ModelFault::Panic, "panicked", 1);
            }
            let reading = Reading {
                evidence,
                queue: started.saturating_duration_since(job.submitted),
                compute,
            };
            job.complete_beats(reading, &shared);
        }
    }
}
