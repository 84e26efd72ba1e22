//! Each thread's spare float buffers for the direct convolutions: a layer's padded input,
//! pooled shortcut and output are taken from here and handed back when dropped, so the layers
//! of a window (and the windows after it) reuse a few allocations. A spare keeps every float
//! it ever held written, so a layer no larger than it is handed it as it is: nothing zeroed.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

thread_local! {
    /// This thread's spare vectors, each as long as the largest buffer it has served (every
    /// float of it written).
    static SPARE: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// Spare vectors a thread keeps: a residual block holds five buffers at once (its input, the
/// first convolution's output, the second's padded input, pooled shortcut and output).
const MAX_SPARE: usize = 6;

/// `len` floats of a spare vector, handed back to this thread's spares when dropped. Their
/// values are whatever the vector last held: the taker writes every one before reading it.
pub(super) struct Buf {
    v: Vec<f32>,
    len: usize,
}

impl Buf {
    /// `n` floats: the smallest spare that holds them, else the largest grown to `n` (only
    /// the part it grows by is written), else a new vector.
    pub(super) fn take(n: usize) -> Buf {
        let mut v = SPARE
            .with_borrow_mut(|spare| {
                let fits = (0..spare.len())
                    .filter(|&i| spare[i].len() >= n)
                    .min_by_key(|&i| spare[i].len());
                let pick = fits.or_else(|| (0..spare.len()).max_by_key(|&i| spare[i].len()));
                pick.map(|i| spare.swap_remove(i))
            })
            .unwrap_or_default();
        if v.len() < n {
            if v.capacity() < n {
                // Reallocated: its old values need not be copied.
                v.clear();
            }
            v.resize(n, 0.0);
        }
        Buf { v, len: n }
    }
}

impl Deref for Buf {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        &self.v[..self.len]
    }
}

impl DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.v[..self.len]
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.v));
    }
}

/// Hands `v` (every float of it written) back to this thread's spares, the shortest dropped
/// when they are full.
pub(super) fn give_back(v: Vec<f32>) {
    if v.is_empty() {
        return;
    }
    SPARE.with_borrow_mut(|spare| {
        spare.push(v);
        if spare.len() > MAX_SPARE {
            let shortest = (0..spare.len()).min_by_key(|&i| spare[i].len());
            if let Some(i) = shortest {
                spare.swap_remove(i);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_reused_without_being_zeroed_and_grown_where_it_must() {
        give_back(vec![7.0; 100]);
        let a = Buf::take(40);
        assert_eq!(a.len(), 40);
        assert!(a.iter().all(|&v| v == 7.0), "reused as it was");
        drop(a);
        // The same spare, still 100 long, serves 90 as it is and grows for 150.
        let b = Buf::take(90);
        assert!(b.iter().all(|&v| v == 7.0));
        drop(b);
        let mut c = Buf::take(150);
        assert_eq!(c.len(), 150);
        assert!(
            c[100..].iter().all(|&v| v == 0.0),
            "the part grown by is written"
        );
        c.fill(1.0);
        drop(c);
        assert!(Buf::take(150).iter().all(|&v| v == 1.0));
    }
}
