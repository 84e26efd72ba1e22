//! Fixed-capacity ring buffers on a bed's sample timeline. A slot is valid only when it was
//! written for exactly that position, so holes (gaps) and overwritten history are told apart
//! from data without clearing anything.

/// One channel's samples by absolute timeline position.
#[derive(Debug, Clone)]
pub(crate) struct Ring {
    values: Vec<f32>,
    /// Position each slot was last written for (truncated to 32 bits, +1 so 0 means never).
    tags: Vec<u32>,
    /// Lead-off flag per slot.
    off: Vec<bool>,
}

impl Ring {
    pub(crate) fn new(capacity: usize) -> Ring {
        Ring {
            values: vec![0.0; capacity],
            tags: vec![0; capacity],
            off: vec![false; capacity],
        }
    }

    fn slot(&self, pos: i64) -> usize {
        pos.rem_euclid(self.values.len() as i64) as usize
    }

    fn tag(pos: i64) -> u32 {
        (pos as u32).wrapping_add(1).max(1)
    }

    /// Stores `value` at `pos` (or marks it missing when `None`), with its lead-off flag: one
    /// sample at a time, the reference [`put_run`](Self::put_run) is tested against.
    #[cfg(test)]
    pub(crate) fn put(&mut self, pos: i64, value: Option<f32>, lead_off: bool) {
        let s = self.slot(pos);
        match value {
            Some(v) => {
                self.values[s] = v;
                self.tags[s] = Ring::tag(pos);
            }
            None => self.tags[s] = 0,
        }
        self.off[s] = lead_off;
    }

    /// Stores a frame's `values` from `start` on ([`put`](Self::put) each, the slot found once
    /// and then stepped, not divided out per sample).
    pub(crate) fn put_run(&mut self, start: i64, values: &[Option<f32>], lead_off: bool) {
        for ((pos, s), v) in (start..).zip(self.slots(start)).zip(values) {
            match v {
                Some(v) => {
                    self.values[s] = *v;
                    self.tags[s] = Ring::tag(pos);
                }
                None => self.tags[s] = 0,
            }
            self.off[s] = lead_off;
        }
    }

    /// Positions of `[start, end)` that did not arrive or were overwritten.
    pub(crate) fn missing(&self, start: i64, end: i64) -> usize {
        self.positions(start, end)
            .filter(|&(pos, s)| !self.holds(pos, s))
            .count()
    }

    /// The values of `[start, end)`, `None` where a sample did not arrive or was overwritten.
    pub(crate) fn samples(&self, start: i64, end: i64) -> Vec<Option<f32>> {
        self.positions(start, end)
            .map(|(pos, s)| self.holds(pos, s).then_some(self.values[s]))
            .collect()
    }

    /// Each position of `[start, end)` with its slot.
    fn positions(&self, start: i64, end: i64) -> impl Iterator<Item = (i64, usize)> + use<> {
        (start..end).zip(self.slots(start))
    }

    /// Whether slot `s` holds position `pos`.
    fn holds(&self, pos: i64, s: usize) -> bool {
        self.tags[s] == Ring::tag(pos)
    }

    /// The slots of `start`, `start + 1`, ... in turn, wrapping around.
    fn slots(&self, start: i64) -> impl Iterator<Item = usize> + use<> {
        let (first, cap) = (self.slot(start), self.values.len());
        (first..cap).chain(0..first).cycle()
    }

    /// The value at `pos`, if it arrived and has not been overwritten: one position at a time,
    /// the reference [`samples`](Self::samples) is tested against.
    #[cfg(test)]
    pub(crate) fn get(&self, pos: i64) -> Option<f32> {
        let s = self.slot(pos);
        (self.tags[s] == Ring::tag(pos)).then_some(self.values[s])
    }

    /// Whether `pos` was written as lead-off (only meaningful for arrived positions): the
    /// reference [`window`](Self::window)'s count is tested against.
    #[cfg(test)]
    pub(crate) fn lead_off(&self, pos: i64) -> bool {
        let s = self.slot(pos);
        self.tags[s] == Ring::tag(pos) && self.off[s]
    }

    /// Copies `[start, end)` out with holes filled by linear interpolation (held flat at the
    /// ends); returns the samples, the arrived count and the lead-off count.
    pub(crate) fn window(&self, start: i64, end: i64) -> (Vec<f32>, usize, usize) {
        let n = (end - start).max(0) as usize;
        let got = self.samples(start, end);
        let off = self
            .positions(start, end)
            .filter(|&(pos, s)| self.holds(pos, s) && self.off[s])
            .count();
        let arrived = got.iter().filter(|v| v.is_some()).count();
        (fill_holes(&got), arrived.min(n), off)
    }
}

/// Linear interpolation across holes; flat extension before the first and after the last
/// value; all zeros when nothing arrived.
pub(crate) fn fill_holes(x: &[Option<f32>]) -> Vec<f32> {
    let mut out = vec![0.0f32; x.len()];
    let mut last: Option<(usize, f32)> = None;
    for (i, v) in x.iter().enumerate() {
        if let Some(v) = *v {
            match last {
                Some((j, u)) if i > j + 1 => {
                    for (k, o) in out.iter_mut().enumerate().take(i).skip(j + 1) {
                        let t = (k - j) as f32 / (i - j) as f32;
                        *o = u + (v - u) * t;
                    }
                }
                None => out[..i].fill(v),
                _ => {}
            }
            out[i] = v;
            last = Some((i, v));
        }
    }
    if let Some((j, u)) = last {
        out[j + 1..].fill(u);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_and_overwrites_are_told_apart() {
        let mut r = Ring::new(8);
        for p in 0..6 {
            r.put(p, Some(p as f32), p == 2);
        }
        r.put(3, None, false);
        assert_eq!(r.get(2), Some(2.0));
        assert!(r.lead_off(2));
        assert_eq!(r.get(3), None);
        r.put(10, Some(10.0), false); // overwrites slot 2
        assert_eq!(r.get(2), None);
        assert_eq!(r.get(10), Some(10.0));
        let (w, arrived, off) = r.window(4, 11);
        assert_eq!((arrived, off), (3, 0)); // 4, 5, 10
        assert_eq!(w.len(), 7);
        assert_eq!((w[0], w[1], w[6]), (4.0, 5.0, 10.0));
        assert!((w[3] - 7.0).abs() < 1e-6); // interpolated between 5 and 10
    }

    #[test]
    fn a_run_and_a_window_wrap_around_the_ring_as_sample_by_sample() {
        let (mut a, mut b) = (Ring::new(7), Ring::new(7));
        let run: Vec<Option<f32>> = (0..5).map(|k| (k != 2).then_some(k as f32)).collect();
        for start in [-9i64, -3, 0, 4, 5, 12, 40] {
            a.put_run(start, &run, start % 2 == 0);
            for (k, v) in run.iter().enumerate() {
                b.put(start + k as i64, *v, start % 2 == 0);
            }
            assert_eq!(a.tags, b.tags, "{start}");
            assert_eq!(a.values, b.values, "{start}");
            assert_eq!(a.off, b.off, "{start}");
            for from in start - 8..start + 6 {
                let (w, arrived, off) = a.window(from, from + 9);
                let got: Vec<Option<f32>> = (from..from + 9).map(|p| a.get(p)).collect();
                let lead_off = (from..from + 9).filter(|&p| a.lead_off(p)).count();
                let here = got.iter().flatten().count();
                assert_eq!((w, arrived, off), (fill_holes(&got), here, lead_off));
                assert_eq!(a.missing(from, from + 9), 9 - here);
                assert_eq!(a.samples(from, from + 9), got);
            }
        }
    }

    #[test]
    fn fill_holes_edges() {
        assert_eq!(fill_holes(&[None, Some(1.0), None]), vec![1.0, 1.0, 1.0]);
        assert_eq!(fill_holes(&[None, None]), vec![0.0, 0.0]);
    }
}
