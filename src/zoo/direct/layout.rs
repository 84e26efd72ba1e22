//! How a layer's activations lie in memory: each row (one channel of one window) already in
//! the form the next convolution reads, "same"-padded and split by that convolution's stride
//! into phase rows, so every tap's read is a contiguous run and no layer copies its input.
//! A layer writes its output straight into its successor's layout; only the network's input
//! is copied in (one channel), and the last layer writes plain rows for the average pool.

use super::spare::Buf;
use super::{DirectConv, evens};
use crate::zoo::folded::same_padding;

/// Positions a pass covers at most (the job's `8 * LANES`); phase rows carry this much room
/// past their reach, so a pass never reads out of its row.
pub(super) const MAX_SPAN: usize = 96;

/// The layout of one row of `len` samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// Samples in the row.
    pub(super) len: usize,
    /// Phase rows a row is split into (the reading convolution's stride; 1 for plain rows).
    pub(super) stride: usize,
    /// Zeros before the first sample (the reading convolution's left padding).
    pub(super) begin: usize,
    /// Length of one phase row.
    pub(super) plen: usize,
    /// How much of each phase row holds samples or zeros: as far as the reading
    /// convolution's last output position reaches. The rest is room for a pass's lanes past
    /// the row's end, whose outputs are dropped: it keeps whatever the buffer held.
    pub(super) reach: usize,
}

impl Layout {
    /// Plain rows of `len` samples.
    pub(super) fn plain(len: usize) -> Layout {
        Layout {
            len,
            stride: 1,
            begin: 0,
            plen: len,
            reach: len,
        }
    }

    /// Rows of `len` samples as `conv` reads them: padded position `stride * q + p` (phase
    /// `p`, index `q`) holds sample `stride * q + p - begin`, zero outside the row as far as
    /// the last output position's taps reach, then [`MAX_SPAN`] positions of room.
    pub(super) fn input_of(conv: &DirectConv, len: usize) -> Layout {
        let s = conv.stride;
        let (l_out, begin, _) = same_padding(len, conv.kernel, s);
        let reach = l_out + (conv.kernel - 1) / s + 1;
        Layout {
            len,
            stride: s,
            begin,
            plen: reach + MAX_SPAN,
            reach,
        }
    }

    /// Floats one row takes (all its phases).
    pub(super) fn row_len(&self) -> usize {
        self.stride * self.plen
    }

    /// Where sample `i` of a row lies within it.
    #[inline(always)]
    pub(super) fn at(&self, i: usize) -> usize {
        let padded = i + self.begin;
        (padded % self.stride) * self.plen + padded / self.stride
    }

    /// For phase `p`: the first index holding a sample, and how many samples it holds.
    fn samples_of_phase(&self, p: usize) -> (usize, usize) {
        let s = self.stride;
        let q0 = self.begin.saturating_sub(p).div_ceil(s).min(self.reach);
        let first = (s * q0 + p).saturating_sub(self.begin);
        let n = self
            .len
            .saturating_sub(first)
            .div_ceil(s)
            .min(self.reach - q0);
        (q0, n)
    }

    /// Zeroes the padding of `row` (up to the reach; the room past it is left as it is).
    pub(super) fn zero_padding(&self, row: &mut [f32]) {
        for (p, phase) in row.chunks_mut(self.plen).enumerate() {
            let (q0, n) = self.samples_of_phase(p);
            phase[..q0].fill(0.0);
            phase[q0 + n..self.reach].fill(0.0);
        }
    }

    /// Each phase row's part that holds samples or zeros, of the `rows` rows of `data`.
    #[cfg(test)]
    pub(super) fn held<'a>(&self, data: &'a [f32]) -> impl Iterator<Item = &'a [f32]> + 'a {
        let (plen, reach) = (self.plen, self.reach);
        data.chunks(plen).map(move |phase| &phase[..reach])
    }
}

/// Rows of activations (one a `(window, channel)` pair) in a [`Layout`].
pub(super) struct Phases {
    pub(super) data: Buf,
    pub(super) layout: Layout,
}

impl Phases {
    /// `rows` plain rows of `x` copied into `layout` (the network's input; and the tests'),
    /// the padding zeroed up to the reach.
    pub(super) fn copy_in(x: &[f32], rows: usize, layout: Layout, min_len: usize) -> Phases {
        use rayon::prelude::*;
        let (len, s) = (layout.len, layout.stride);
        assert_eq!(x.len(), rows * len, "input shape");
        let mut data = Buf::take(rows * layout.row_len());
        data.par_chunks_mut(layout.row_len())
            .zip(x.par_chunks(len.max(1)))
            .with_min_len(min_len)
            .for_each(|(dst, src)| {
                layout.zero_padding(dst);
                for (p, row) in dst.chunks_mut(layout.plen).enumerate() {
                    let (q0, n) = layout.samples_of_phase(p);
                    let first = (s * q0 + p).saturating_sub(layout.begin);
                    let (src, dst) = (&src[first.min(len)..], &mut row[q0..q0 + n]);
                    match s {
                        // A plain copy, and the even or odd samples (both vectorised).
                        1 => dst.copy_from_slice(&src[..n]),
                        2 => evens(src, dst),
                        _ => {
                            for (d, &v) in dst.iter_mut().zip(src.iter().step_by(s)) {
                                *d = v;
                            }
                        }
                    }
                }
            });
        Phases { data, layout }
    }

    /// Rows held.
    pub(super) fn rows(&self) -> usize {
        self.data.len() / self.layout.row_len()
    }

    /// Phase `p` of row `r`.
    #[inline(always)]
    pub(super) fn row(&self, r: usize, p: usize) -> &[f32] {
        let start = (r * self.layout.stride + p) * self.layout.plen;
        &self.data[start..start + self.layout.plen]
    }

    /// Row `r`'s samples in order.
    #[cfg(test)]
    pub(super) fn samples(&self, r: usize) -> impl Iterator<Item = f32> + '_ {
        let row = &self.data[r * self.layout.row_len()..(r + 1) * self.layout.row_len()];
        (0..self.layout.len).map(move |i| row[self.layout.at(i)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copied_row_holds_each_sample_where_at_says_and_zeros_elsewhere() {
        for (len, stride, begin, reach, plen) in [
            (9, 2, 7, 12, 20),
            (10, 2, 0, 8, 8),
            (7, 1, 3, 11, 12),
            (5, 3, 2, 4, 6),
        ] {
            let layout = Layout {
                len,
                stride,
                begin,
                plen,
                reach,
            };
            let x: Vec<f32> = (0..2 * len).map(|i| i as f32 + 1.0).collect();
            super::super::spare::give_back(vec![f32::NAN; 1000]);
            let p = Phases::copy_in(&x, 2, layout, usize::MAX);
            assert_eq!(p.rows(), 2);
            for r in 0..2 {
                let row = &p.data[r * layout.row_len()..(r + 1) * layout.row_len()];
                let mut want = vec![0.0; layout.row_len()];
                for i in 0..len {
                    want[layout.at(i)] = x[r * len + i];
                }
                assert!(layout.held(row).eq(layout.held(&want)), "{layout:?}");
                assert!(p.samples(r).eq(x[r * len..(r + 1) * len].iter().copied()));
            }
        }
    }
}
