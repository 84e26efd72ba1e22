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

    /// Stores `value` at `pos` (or marks it missing when `None`), with its lead-off flag.
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

    /// The value at `pos`, if it arrived and has not been overwritten.
    pub(crate) fn get(&self, pos: i64) -> Option<f32> {
        let s = self.slot(pos);
        (self.tags[s] == Ring::tag(pos)).then_some(self.values[s])
    }

    /// Whether `pos` was written as lead-off (only meaningful for arrived positions).
    pub(crate) fn lead_off(&self, pos: i64) -> bool {
        let s = self.slot(pos);
        self.tags[s] == Ring::tag(pos) && self.off[s]
    }

    /// Copies `[start, end)` out with holes filled by linear interpolation (held flat at the
    /// ends); returns the samples, the arrived count and the lead-off count.
    pub(crate) fn window(&self, start: i64, end: i64) -> (Vec<f32>, usize, usize) {
        let n = (end - start).max(0) as usize;
        let got: Vec<Option<f32>> = (start..end).map(|p| self.get(p)).collect();
        let arrived = got.iter().filter(|v| v.is_some()).count();
        let off = (start..end).filter(|&p| self.lead_off(p)).count();
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
    fn fill_holes_edges() {
        assert_eq!(fill_holes(&[None, Some(1.0), None]), vec![1.0, 1.0, 1.0]);
        assert_eq!(fill_holes(&[None, None]), vec![0.0, 0.0]);
    }
}
