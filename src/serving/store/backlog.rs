//! What the [`store`](super) writer does when SQLite cannot write (disk full, a read-only file
//! system, I/O errors): rows of failed transactions wait in a bounded in-memory [`Backlog`] in
//! arrival order and are retried with exponential [`Backoff`]; when a retry commits, the rest
//! follow in order. [`StorageFault`] is the fault as `/api/health` reports it.
//!
//! Overflow policy: **drop oldest**. A full backlog drops its oldest row for each new one and
//! counts it (`backlog_dropped_rows`): the newest scores matter most to a ward, and the count
//! says exactly how much history a long outage cost.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rusqlite::ErrorCode;
use serde::Serialize;

/// Rows waiting for the database, oldest first, at most `capacity`.
#[derive(Debug)]
pub(super) struct Backlog<T> {
    rows: VecDeque<T>,
    capacity: usize,
}

impl<T> Backlog<T> {
    pub(super) fn new(capacity: usize) -> Backlog<T> {
        Backlog {
            rows: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Appends `row`; when full, drops the oldest row first and returns it.
    pub(super) fn push(&mut self, row: T) -> Option<T> {
        let dropped = if self.rows.len() >= self.capacity {
            self.rows.pop_front()
        } else {
            None
        };
        self.rows.push_back(row);
        dropped
    }

    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The oldest `n` rows (fewer if fewer wait), to write in one transaction.
    pub(super) fn front(&mut self, n: usize) -> &[T] {
        let n = n.min(self.rows.len());
        &self.rows.make_contiguous()[..n]
    }

    /// Removes the oldest `n` rows (once written).
    pub(super) fn pop_front(&mut self, n: usize) -> impl Iterator<Item = T> + '_ {
        let n = n.min(self.rows.len());
        self.rows.drain(..n)
    }
}

/// Exponential backoff between retries: `min`, doubling up to `max`.
#[derive(Debug)]
pub(super) struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
    due: Instant,
}

impl Backoff {
    pub(super) fn new(min: Duration, max: Duration) -> Backoff {
        Backoff {
            min,
            max: max.max(min),
            next: min,
            due: Instant::now(),
        }
    }

    /// A write failed at `now`: the next try waits longer.
    pub(super) fn failed(&mut self, now: Instant) {
        self.due = now + self.next;
        self.next = (self.next * 2).min(self.max);
    }

    /// The database recovered: the next fault starts from `min` again.
    pub(super) fn reset(&mut self) {
        self.next = self.min;
    }

    /// When the next retry may run.
    pub(super) fn due(&self) -> Instant {
        self.due
    }
}

/// Whether `e` is the storage failing (space, permissions, I/O, locks): worth holding the rows
/// and retrying. Anything else (a constraint, a type mismatch) would fail again however long
/// we waited.
pub(super) fn is_storage_fault(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => matches!(
            f.code,
            ErrorCode::DiskFull
                | ErrorCode::ReadOnly
                | ErrorCode::SystemIoFailure
                | ErrorCode::CannotOpen
                | ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::OutOfMemory
                | ErrorCode::FileLockingProtocolFailed
                | ErrorCode::PermissionDenied
        ),
        _ => false,
    }
}

/// The storage fault in progress, as `/api/health` shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StorageFault {
    /// Unix ms when the first write of this episode failed.
    pub(crate) since_ms: i64,
    /// The latest error.
    pub(crate) error: String,
    /// Failed retries in this episode.
    pub(crate) retries: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_backlog_drops_its_oldest_rows_and_keeps_order() {
        let mut b = Backlog::new(3);
        assert_eq!(b.push(1), None);
        assert_eq!(b.push(2), None);
        assert_eq!(b.push(3), None);
        assert_eq!(b.push(4), Some(1));
        assert_eq!(b.front(2), &[2, 3]);
        assert_eq!(b.pop_front(2).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(b.front(10), &[4]);
        assert_eq!(b.len(), 1);
        b.pop_front(10).for_each(drop);
        assert!(b.is_empty());
    }

    #[test]
    fn backoff_doubles_up_to_its_cap_and_resets() {
        let t = Instant::now();
        let mut o = Backoff::new(Duration::from_millis(100), Duration::from_millis(300));
        o.failed(t);
        assert_eq!(o.due(), t + Duration::from_millis(100));
        o.failed(t);
        assert_eq!(o.due(), t + Duration::from_millis(200));
        o.failed(t);
        o.failed(t);
        assert_eq!(o.due(), t + Duration::from_millis(300));
        o.reset();
        o.failed(t);
        assert_eq!(o.due(), t + Duration::from_millis(100));
    }

    #[test]
    fn only_storage_errors_are_held_for_retry() {
        let full = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        );
        let ro = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
            None,
        );
        let constraint = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT),
            None,
        );
        assert!(is_storage_fault(&full) && is_storage_fault(&ro));
        assert!(!is_storage_fault(&constraint));
        assert!(!is_storage_fault(&rusqlite::Error::QueryReturnedNoRows));
    }
}
