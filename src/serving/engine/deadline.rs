//! The deadline watcher: one thread that wakes at each window's deadline and makes its
//! accumulator commit what it has.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Instant;

use super::Shared;
use super::job::WindowJob;

struct Entry(Instant, u64, Weak<WindowJob>);

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.0, self.1) == (o.0, o.1)
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
        (self.0, self.1).cmp(&(o.0, o.1))
    }
}

#[derive(Default)]
struct Inner {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    stop: bool,
}

/// Deadlines of windows in flight.
#[derive(Default)]
pub(crate) struct Deadlines {
    inner: Mutex<Inner>,
    wake: Condvar,
}

impl Deadlines {
    pub(crate) fn add(&self, job: &Arc<WindowJob>) {
        let mut g = self.inner.lock().expect("deadline lock");
        g.seq += 1;
        let seq = g.seq;
        let earliest = g.heap.peek().is_none_or(|e| job.deadline < e.0.0);
        g.heap
            .push(Reverse(Entry(job.deadline, seq, Arc::downgrade(job))));
        drop(g);
        if earliest {
            self.wake.notify_one();
        }
    }

    pub(crate) fn stop(&self) {
        self.inner.lock().expect("deadline lock").stop = true;
        self.wake.notify_one();
    }

    /// The watcher loop; returns after [`Deadlines::stop`].
    pub(crate) fn run(&self, shared: &Shared) {
        let mut g = self.inner.lock().expect("deadline lock");
        loop {
            if g.stop {
                return;
            }
            let now = Instant::now();
            match g.heap.peek().map(|e| e.0.0) {
                Some(d) if d <= now => {
                    let Reverse(Entry(_, _, job)) = g.heap.pop().expect("peeked");
                    drop(g);
                    if let Some(job) = job.upgrade() {
                        job.on_deadline(shared);
                    }
                    g = self.inner.lock().expect("deadline lock");
                }
                Some(d) => {
                    g = self.wake.wait_timeout(g, d - now).expect("deadline lock").0;
                }
                None => {
                    g = self.wake.wait(g).expect("deadline lock");
                }
            }
        }
    }
}
