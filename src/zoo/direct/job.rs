//! One task of a direct convolution: a run of output rows, computed a block of output
//! channels and a span of positions at a time, in the widest instruction set the CPU has
//! (see [`Isa`]), and stored in the layout the next convolution reads.

use super::layout::{Layout, MAX_SPAN, Phases};
use super::{DirectConv, Isa, Shortcut};

/// One task: a run of output rows.
pub(super) struct Job<'a> {
    pub(super) conv: &'a DirectConv,
    pub(super) phases: &'a Phases,
    pub(super) l_out: usize,
    pub(super) first_row: usize,
    pub(super) shortcut: Option<Shortcut<'a>>,
    pub(super) relu: bool,
    /// The layout the output rows are written in.
    pub(super) out: Layout,
}

impl Job<'_> {
    /// [`run`](Self::run) compiled for AVX2 and FMA where the CPU has them, with AVX-512's
    /// sixteen further vector registers (and larger passes) where it has those too.
    pub(super) fn run_best(&self, out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::is_x86_feature_detected as has;
            let widest = self.conv.widest;
            if widest >= Isa::Avx512
                && has!("avx2")
                && has!("fma")
                && has!("avx512f")
                && has!("avx512vl")
            {
                // SAFETY: the CPU supports AVX2, FMA, AVX-512F and VL, checked just above.
                unsafe { self.run_avx512(out) };
                return;
            }
            if widest >= Isa::Avx2 && has!("avx2") && has!("fma") {
                // SAFETY: the CPU supports AVX2 and FMA, checked just above.
                unsafe { self.run_avx2_fma(out) };
                return;
            }
        }
        // SAFETY: without `simd` no intrinsic is reached.
        unsafe { self.run::<false>(out, false) };
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn run_avx2_fma(&self, out: &mut [f32]) {
        // SAFETY: this function is only entered where the CPU has AVX2 and FMA.
        unsafe { self.run::<false>(out, true) };
    }

    /// The same 256-bit code, given the 32 vector registers AVX-512VL addresses.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    fn run_avx512(&self, out: &mut [f32]) {
        // SAFETY: this function is only entered where the CPU has AVX2, FMA, AVX-512F and VL.
        unsafe { self.run::<true>(out, true) };
    }

    /// The task's rows, taken 4, 2 or 1 output channels of one group at a time; each such
    /// block in passes of `8 * LANES` positions, `CO * LANES` vector accumulators: eight to
    /// twelve where 16 vector registers must also hold the input vectors and a broadcast
    /// weight, twelve to sixteen with 32 (`WIDE`).
    ///
    /// # Safety
    /// With `simd` the CPU must have AVX2 and FMA, and with `WIDE` also AVX-512F and VL.
    #[inline(always)]
    unsafe fn run<const WIDE: bool>(&self, out: &mut [f32], simd: bool) {
        let c = self.conv;
        let rl = self.out.row_len();
        let rows = out.len() / rl;
        let mut r = 0;
        while r < rows {
            let row = self.first_row + r;
            let co = row % c.cout;
            let left_in_group = c.cog - co % c.cog;
            let take = match left_in_group.min(rows - r) {
                t if t >= 4 => 4,
                t if t >= 2 => 2,
                _ => 1,
            };
            let dst = &mut out[r * rl..(r + take) * rl];
            // SAFETY: as this function's.
            unsafe {
                match (take, WIDE) {
                    (4, false) => self.rows::<4, 2, WIDE>(row, dst, simd),
                    (4, true) => self.rows::<4, 4, WIDE>(row, dst, simd),
                    (2, false) => self.rows::<2, 4, WIDE>(row, dst, simd),
                    (2, true) => self.rows::<2, 8, WIDE>(row, dst, simd),
                    _ => self.rows::<1, 12, WIDE>(row, dst, simd),
                }
            }
            r += take;
        }
    }

    /// `CO` output rows of one group starting at global row `row`, written into `dst`.
    ///
    /// # Safety
    /// As [`run`](Self::run)'s.
    #[inline(always)]
    unsafe fn rows<const CO: usize, const LANES: usize, const WIDE: bool>(
        &self,
        row: usize,
        dst: &mut [f32],
        simd: bool,
    ) {
        let c = self.conv;
        let (n, co) = (row / c.cout, row % c.cout);
        let first_in = n * c.cin + (co / c.cog) * c.cpg;
        // What every pass's reads stay within (checked once here, relied on by the SIMD pass).
        assert!(
            (co + CO) * c.cpg * c.kernel <= c.weight.len(),
            "weights of the block"
        );
        let input = self.phases.layout;
        assert!(
            input.stride == c.stride
                && input.plen >= self.l_out + MAX_SPAN + (c.kernel - 1) / c.stride,
            "phase rows built for this convolution and output length"
        );
        let out = self.out;
        assert!(8 * LANES <= MAX_SPAN && dst.len() == CO * out.row_len());
        assert!(
            (out.stride == 1 || (out.stride == 2 && LANES.is_multiple_of(2)))
                && (self.l_out == 0 || (self.l_out - 1 + out.begin) / out.stride < out.plen),
            "output layout"
        );
        if let Some(s) = self.shortcut {
            let l = s.x.layout;
            assert!(
                l.begin.div_ceil(l.stride) + self.l_out <= l.plen,
                "shortcut rows"
            );
        }
        let mut l0 = 0;
        while l0 < self.l_out {
            #[cfg(target_arch = "x86_64")]
            if simd {
                // SAFETY: the CPU has the features `simd` and `WIDE` stand for (this
                // function's contract); the reads are within the bounds asserted above (phase
                // rows reach `MAX_SPAN` positions past `l_out`; `Phases::row` checks the row).
                unsafe {
                    match WIDE {
                        true => avx::tile_avx512::<CO, LANES>(self, n, co, first_in, l0, dst),
                        false => avx::tile_avx2::<CO, LANES>(self, n, co, first_in, l0, dst),
                    }
                };
                l0 += 8 * LANES;
                continue;
            }
            let acc = self.pass::<CO, LANES>(first_in, co, l0);
            self.store(&acc, n, co, l0, dst);
            l0 += 8 * LANES;
        }
    }

    /// One pass of `CO` output channels from `co` over positions `l0..l0 + 8 * LANES`: bias
    /// plus the sum over the group's input channels and the taps (portable form).
    #[inline(always)]
    fn pass<const CO: usize, const LANES: usize>(
        &self,
        first_in: usize,
        co: usize,
        l0: usize,
    ) -> [[[f32; 8]; LANES]; CO] {
        let c = self.conv;
        let per_out = c.cpg * c.kernel;
        let mut acc = [[[0.0f32; 8]; LANES]; CO];
        for (o, a) in acc.iter_mut().enumerate() {
            *a = [[c.bias[co + o]; 8]; LANES];
        }
        for ci in 0..c.cpg {
            for (p, &(off, taps)) in c.phase_taps.iter().enumerate() {
                let xr = self.phases.row(first_in + ci, p);
                for q in 0..taps {
                    let xs = &xr[l0 + q..l0 + q + 8 * LANES];
                    for (o, a) in acc.iter_mut().enumerate() {
                        let w = c.weight[(co + o) * per_out + ci * c.kernel + off + q];
                        for (av, xv) in a.as_flattened_mut().iter_mut().zip(xs) {
                            *av += w * xv;
                        }
                    }
                }
            }
        }
        acc
    }

    /// The pass's sums stored at `l0` of the block's rows: the shortcut added (channels it
    /// has), then ReLU if asked, each position where the output layout puts it; positions
    /// past `l_out` dropped.
    #[inline(always)]
    fn store<const CO: usize, const LANES: usize>(
        &self,
        acc: &[[[f32; 8]; LANES]; CO],
        n: usize,
        co: usize,
        l0: usize,
        dst: &mut [f32],
    ) {
        let valid = (8 * LANES).min(self.l_out - l0);
        let rl = self.out.row_len();
        for (o, a) in acc.iter().enumerate() {
            let row = &mut dst[o * rl..(o + 1) * rl];
            for (i, &v) in a.as_flattened()[..valid].iter().enumerate() {
                let j = l0 + i;
                let mut y = v;
                if let Some(s) = self.shortcut_at(n, co + o, j) {
                    y += s;
                }
                if self.relu {
                    y = y.max(0.0);
                }
                row[self.out.at(j)] = y;
            }
        }
    }

    /// The shortcut of channel `ch` of sample `n` at output position `j`, where it has that
    /// channel: the block input there, or the larger of its two samples there when pooled
    /// (an odd last sample alone).
    #[inline(always)]
    fn shortcut_at(&self, n: usize, ch: usize, j: usize) -> Option<f32> {
        let (first, second) = self.shortcut_rows(n, ch)?;
        let len = self.shortcut.map_or(0, |s| s.x.layout.len);
        Some(match second {
            Some(second) if 2 * j + 1 < len => first[j].max(second[j]),
            _ => first[j],
        })
    }

    /// The positions past which a pass goes through the portable store: the output length,
    /// less a pooled shortcut's odd last sample (there is one sample to take, not two).
    fn simd_end(&self) -> usize {
        match self.shortcut.map(|s| s.x.layout) {
            Some(l) if l.stride == 2 && l.len % 2 == 1 => self.l_out - 1,
            _ => self.l_out,
        }
    }

    /// Where channel `ch` of sample `n`'s shortcut is read from for output position 0: the
    /// block input's row there, and, pooled, the row of the second sample of each pair.
    #[inline(always)]
    fn shortcut_rows(&self, n: usize, ch: usize) -> Option<(&[f32], Option<&[f32]>)> {
        let s = self.shortcut.filter(|s| ch < s.channels)?;
        let (l, r) = (s.x.layout, n * s.channels + ch);
        Some(match l.stride {
            1 => (&s.x.row(r, 0)[l.begin..], None),
            _ => (
                &s.x.row(r, l.begin % 2)[l.begin / 2..],
                Some(&s.x.row(r, (l.begin + 1) % 2)[l.begin.div_ceil(2)..]),
            ),
        })
    }
}

/// A pass and its store with AVX2 and FMA intrinsics.
#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::{
        __m256, _mm256_add_ps, _mm256_broadcast_ss, _mm256_castpd_ps, _mm256_castps_pd,
        _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_max_ps, _mm256_permute4x64_pd, _mm256_set1_ps,
        _mm256_setzero_ps, _mm256_shuffle_ps, _mm256_storeu_ps,
    };

    use super::Job;

    /// [`Job::pass`] and [`Job::store`] over positions `l0..l0 + 8 * LANES`, the accumulators
    /// in registers, the input and weights read through pointers (no bounds check in the
    /// loop: [`Job::rows`] checked them once).
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; the bounds [`Job::rows`] asserts must hold.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    pub(super) unsafe fn tile_avx2<const CO: usize, const LANES: usize>(
        job: &Job<'_>,
        n: usize,
        co: usize,
        first_in: usize,
        l0: usize,
        dst: &mut [f32],
    ) {
        // SAFETY: as this function's.
        unsafe { tile::<CO, LANES>(job, n, co, first_in, l0, dst) }
    }

    /// [`tile_avx2`] with the 32 vector registers of AVX-512VL.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA, AVX-512F and VL; the bounds [`Job::rows`] asserts
    /// must hold.
    #[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
    #[inline]
    pub(super) unsafe fn tile_avx512<const CO: usize, const LANES: usize>(
        job: &Job<'_>,
        n: usize,
        co: usize,
        first_in: usize,
        l0: usize,
        dst: &mut [f32],
    ) {
        // SAFETY: as this function's.
        unsafe { tile::<CO, LANES>(job, n, co, first_in, l0, dst) }
    }

    /// The body of both, compiled within each.
    #[inline(always)]
    unsafe fn tile<const CO: usize, const LANES: usize>(
        job: &Job<'_>,
        n: usize,
        co: usize,
        first_in: usize,
        l0: usize,
        dst: &mut [f32],
    ) {
        // SAFETY: the caller runs this where the CPU has AVX2 and FMA, and within the bounds
        // `Job::rows` asserts (weights of rows co..co + CO; phase rows holding
        // `l0 + taps - 1 + 8 * LANES` positions; shortcut rows holding `l_out` positions past
        // where they are read from; output rows holding every position below `l_out` where
        // the layout puts it). A pass stored here ends at or before `l_out`.
        unsafe {
            let c = job.conv;
            let per_out = c.cpg * c.kernel;
            let mut a = [[_mm256_setzero_ps(); LANES]; CO];
            for (o, ao) in a.iter_mut().enumerate() {
                *ao = [_mm256_set1_ps(c.bias[co + o]); LANES];
            }
            let w_block = c.weight.as_ptr().add(co * per_out);
            for ci in 0..c.cpg {
                for (p, &(off, taps)) in c.phase_taps.iter().enumerate() {
                    let x0 = job.phases.row(first_in + ci, p).as_ptr().add(l0);
                    let w0 = w_block.add(ci * c.kernel + off);
                    for q in 0..taps {
                        let mut x: [__m256; LANES] = [_mm256_setzero_ps(); LANES];
                        for (v, xv) in x.iter_mut().enumerate() {
                            *xv = _mm256_loadu_ps(x0.add(q + 8 * v));
                        }
                        for (o, ao) in a.iter_mut().enumerate() {
                            let w = _mm256_broadcast_ss(&*w0.add(o * per_out + q));
                            for (av, &xv) in ao.iter_mut().zip(&x) {
                                *av = _mm256_fmadd_ps(w, xv, *av);
                            }
                        }
                    }
                }
            }
            if l0 + 8 * LANES > job.simd_end() {
                // The row's last, partial pass: through the portable store.
                let mut acc = [[[0.0f32; 8]; LANES]; CO];
                for (ao, acco) in a.iter().zip(acc.iter_mut()) {
                    for (av, s) in ao.iter().zip(acco.iter_mut()) {
                        _mm256_storeu_ps(s.as_mut_ptr(), *av);
                    }
                }
                job.store(&acc, n, co, l0, dst);
                return;
            }
            let zero = _mm256_setzero_ps();
            let out = job.out;
            for (o, ao) in a.iter().enumerate() {
                let mut y = *ao;
                let sc = job.shortcut_rows(n, co + o);
                for (v, yv) in y.iter_mut().enumerate() {
                    if let Some((first, second)) = sc {
                        let mut s = _mm256_loadu_ps(first.as_ptr().add(l0 + 8 * v));
                        if let Some(second) = second {
                            s = _mm256_max_ps(s, _mm256_loadu_ps(second.as_ptr().add(l0 + 8 * v)));
                        }
                        *yv = _mm256_add_ps(*yv, s);
                    }
                    if job.relu {
                        *yv = _mm256_max_ps(*yv, zero);
                    }
                }
                let row = dst[o * out.row_len()..].as_mut_ptr();
                if out.stride == 1 {
                    for (v, &yv) in y.iter().enumerate() {
                        _mm256_storeu_ps(row.add(out.begin + l0 + 8 * v), yv);
                    }
                    continue;
                }
                // Split by two: the even positions to one phase row, the odd to the other.
                let (b, plen) = (out.begin, out.plen);
                let even = row.add((b % 2) * plen + b / 2 + l0 / 2);
                let odd = row.add(((b + 1) % 2) * plen + b.div_ceil(2) + l0 / 2);
                for (k, pair) in y.chunks_exact(2).enumerate() {
                    let e = _mm256_shuffle_ps::<0b10_00_10_00>(pair[0], pair[1]);
                    let d = _mm256_shuffle_ps::<0b11_01_11_01>(pair[0], pair[1]);
                    let e = _mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(e));
                    let d = _mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(d));
                    _mm256_storeu_ps(even.add(8 * k), _mm256_castpd_ps(e));
                    _mm256_storeu_ps(odd.add(8 * k), _mm256_castpd_ps(d));
                }
            }
        }
    }
}
