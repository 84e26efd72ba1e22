//! One queue per model, ordered by deadline (earliest first), pulled by that model's workers
//! in batches. A newer window of a bed supersedes a waiting window of the same bed that is
//! already past its deadline, so under overload each bed keeps at most one stale window. A full queue refuses the job (the member is then missing from
//! that window's score, which commits partial at its deadline).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use super::job::WindowJob;

struct Entry {
    deadline: Instant,
    seq: u64,
    job: Arc<WindowJob>,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.deadline, self.seq) == (o.deadline, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(o.deadline, o.seq))
    }
}

struct Inner {
    heap: BinaryHeap<Reverse<Entry>>,
    closed: bool,
    seq: u64,
}

/// What happened to a pushed job.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    Queued,
    /// Queued, and these older windows of the same bed were taken out of the queue.
    Superseded(Vec<Arc<WindowJob>>),
    /// The queue is full; the job was not queued (and these older windows of the same bed
    /// were taken out of it all the same: they are superseded).
    Full(Vec<Arc<WindowJob>>),
}

impl std::fmt::Debug for WindowJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WindowJob({} #{})", self.window.bed, self.window.index)
    }
}

impl PartialEq for WindowJob {
    fn eq(&self, o: &Self) -> bool {
        std::ptr::eq(self, o)
    }
}
impl Eq for WindowJob {}

/// A model's deadline queue.
pub(crate) struct ModelQueue {
    inner: Mutex<Inner>,
    ready: Condvar,
    capacity: usize,
}

impl ModelQueue {
    pub(crate) fn new(capacity: usize) -> ModelQueue {
        ModelQueue {
            inner: Mutex::new(Inner {
                heap: BinaryHeap::new(),
                closed: false,
                seq: 0,
            }),
            ready: Condvar::new(),
            capacity,
        }
    }

    /// Queues `job`. A waiting window of the same bed whose deadline has already passed is
    /// stale: the newer one supersedes it (one that can still make its deadline stays, so a
    /// monitor replaying a backlog gets every window scored).
    pub(crate) fn push(&self, job: Arc<WindowJob>) -> Pushed {
        let mut g = self.inner.lock().expect("queue lock");
        let bed = job.window.bed.clone();
        let now = Instant::now();
        let stale = |e: &Entry| {
            e.job.window.bed == bed && e.job.window.index < job.window.index && e.deadline <= now
        };
        let mut superseded = Vec::new();
        if g.heap.iter().any(|e| stale(&e.0)) {
            let old = std::mem::take(&mut g.heap);
            for e in old.into_vec() {
                if stale(&e.0) {
                    superseded.push(e.0.job);
                } else {
                    g.heap.push(e);
                }
            }
        }
        if g.heap.len() >= self.capacity {
            return Pushed::Full(superseded);
        }
        g.seq += 1;
        let seq = g.seq;
        g.heap.push(Reverse(Entry {
            deadline: job.deadline,
            seq,
            job,
        }));
        drop(g);
        self.ready.notify_one();
        if superseded.is_empty() {
            Pushed::Queued
        } else {
            Pushed::Superseded(superseded)
        }
    }

    /// Blocks until jobs are waiting (or the queue closes), then takes up to `max` of them,
    /// earliest deadline first, skipping windows that are already committed.
    pub(crate) fn pop_batch(&self, max: usize) -> Option<Vec<Arc<WindowJob>>> {
        let mut g = self.inner.lock().expect("queue lock");
        loop {
            let mut batch = Vec::new();
            while batch.len() < max {
                match g.heap.pop() {
                    Some(Reverse(e)) if e.job.is_done() => continue,
                    Some(Reverse(e)) => batch.push(e.job),
                    None => break,
                }
            }
            if !batch.is_empty() {
                return Some(batch);
            }
            if g.closed {
                return None;
            }
            g = self.ready.wait(g).expect("queue lock");
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.inner.lock().expect("queue lock").heap.len()
    }

    /// Wakes every worker; they drain nothing more and stop.
    pub(crate) fn close(&self) {
        self.inner.lock().expect("queue lock").closed = true;
        self.ready.notify_all();
    }
}
