//! Each beat classified once: a bed's windows overlap (a 30-s window every 5-s hop holds each
//! beat six times), so the probability a beat got in the first window that classified it (its
//! context stretch whole, the template of the 30 s before it) is kept and read again by the
//! windows after it. The classifier's work follows the hop, not the window: about one window
//! in six of beats is new at each hop. [`BeatMemory`] is one bed's; [`BedMemories`] holds the
//! ward's, keyed by bed, as the served counter reads them.
//!
//! A beat of a later window is the same beat when its R peak lies within [`MATCH_MS`] on the
//! bed's timeline (the detector may place it a sample or two apart in another window; two
//! beats are at least 200 ms apart). A window that ends at or before the last one read starts
//! the memory afresh (a monitor that restarted its timeline, or another record replayed).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::window::SAMPLE_RATE_HZ;

/// Two beats of one bed this close on its timeline are the same beat, ms.
pub(crate) const MATCH_MS: i64 = 20;
/// A bed not read for this long is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// Reads between two sweeps for forgotten beds.
const SWEEP_EVERY: u64 = 4096;

/// The beats of one bed's recent windows and the probability each was given.
#[derive(Debug, Default, Clone)]
pub(crate) struct BeatMemory {
    /// The end of the last window read, ms on the bed's timeline.
    last_end_ms: Option<i64>,
    /// R peak (ms on the bed's timeline) and probability, in time order.
    beats: VecDeque<(i64, f64)>,
    /// Beats classified (not read from memory) since the memory began.
    #[cfg(test)]
    classified: u64,
    /// Experiment: the bed's beat shapes (`HOLMES_EXP_BED`).
    pub(crate) shapes: super::BedShapes,
}

impl BeatMemory {
    /// The probability that each beat at `samples` (R peaks of a window of `len` samples
    /// ending at `end_ms`) is ventricular: from memory where an earlier window classified it,
    /// else `classify(k)` for the `k`-th beat, then remembered. Beats before the window are
    /// forgotten.
    pub(crate) fn probabilities(
        &mut self,
        samples: &[usize],
        mut classify: impl FnMut(usize) -> f64,
        len: usize,
        end_ms: i64,
    ) -> Vec<f64> {
        if self.last_end_ms.is_some_and(|last| end_ms <= last) {
            self.beats.clear();
            self.shapes = Default::default();
        }
        self.last_end_ms = Some(end_ms);
        let ms = |samples: usize| (samples * 1000 / SAMPLE_RATE_HZ) as i64;
        let start_ms = end_ms - ms(len);
        while self
            .beats
            .front()
            .is_some_and(|&(t, _)| t < start_ms - MATCH_MS)
        {
            self.beats.pop_front();
        }
        samples
            .iter()
            .enumerate()
            .map(|(k, &sample)| {
                let t = start_ms + ms(sample);
                let i = self.beats.partition_point(|&(u, _)| u < t - MATCH_MS);
                match self.beats.get(i) {
                    Some(&(u, p)) if u <= t + MATCH_MS => p,
                    _ => {
                        let p = classify(k);
                        self.beats.insert(i, (t, p));
                        #[cfg(test)]
                        {
                            self.classified += 1;
                        }
                        p
                    }
                }
            })
            .collect()
    }

    /// Beats classified since the memory began.
    #[cfg(test)]
    pub(crate) fn classified(&self) -> u64 {
        self.classified
    }
}

/// The ward's beat memories, by bed; beds not read for [`FORGET_AFTER`] are forgotten.
#[derive(Debug, Default)]
pub(crate) struct BedMemories {
    beds: HashMap<Arc<str>, (BeatMemory, Instant)>,
    reads: u64,
}

impl BedMemories {
    /// `bed`'s memory, for a read now.
    pub(crate) fn of(&mut self, bed: &Arc<str>) -> &mut BeatMemory {
        self.reads += 1;
        let now = Instant::now();
        if self.reads.is_multiple_of(SWEEP_EVERY) {
            self.beds
                .retain(|_, (_, seen)| now.duration_since(*seen) < FORGET_AFTER);
        }
        let entry = self
            .beds
            .entry(bed.clone())
            .or_insert_with(|| (BeatMemory::default(), now));
        entry.1 = now;
        &mut entry.0
    }

    /// Beds remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.beds.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Beat, BeatClassifier, FEATURES};
    use super::*;

    /// A classifier whose probability is the logistic of the first feature.
    fn first_feature() -> BeatClassifier {
        BeatClassifier::on_first_feature(1.0, 0.0)
    }

    fn beat(sample: usize, x: f32) -> Beat {
        let mut features = vec![0.0; FEATURES];
        features[0] = x;
        Beat { sample, features }
    }

    /// `m`'s probabilities of `beats` as `c` classifies them.
    fn probs(
        m: &mut BeatMemory,
        c: &BeatClassifier,
        beats: &[Beat],
        len: usize,
        end_ms: i64,
    ) -> Vec<f64> {
        let samples: Vec<usize> = beats.iter().map(|b| b.sample).collect();
        m.probabilities(&samples, |k| c.probability(&beats[k].features), len, end_ms)
    }

    #[test]
    fn a_beat_keeps_the_probability_of_the_first_window_that_described_it() {
        let c = first_feature();
        let mut m = BeatMemory::default();
        // A window of 1,250 samples (5 s) ending at 5 s: beats at 1 s and 3 s.
        let p1 = probs(&mut m, &c, &[beat(250, 2.0), beat(750, -2.0)], 1_250, 5_000);
        assert!(p1[0] > 0.8 && p1[1] < 0.2);
        assert_eq!(m.classified(), 2);
        // The next window, a second later: the same beats (one placed a sample later) with other
        // features, and a new one at 5.5 s.
        let p2 = probs(
            &mut m,
            &c,
            &[beat(0, -9.0), beat(501, 9.0), beat(1_125, 0.0)],
            1_250,
            6_000,
        );
        assert_eq!(p2[1], p1[1], "the 3-s beat read from memory");
        assert_eq!(p2[2], 0.5, "the new beat classified");
        // The 1-s beat lay at the window's start: also from memory.
        assert_eq!(p2[0], p1[0]);
        assert_eq!(m.classified(), 3);
        // Beats further apart than MATCH_MS are new.
        let far = (MATCH_MS as usize + 8) * SAMPLE_RATE_HZ / 1000;
        probs(&mut m, &c, &[beat(875 + far, 1.0)], 1_250, 7_000);
        assert_eq!(m.classified(), 4);
    }

    #[test]
    fn a_timeline_that_goes_back_starts_afresh_and_old_beats_are_forgotten() {
        let c = first_feature();
        let mut m = BeatMemory::default();
        probs(&mut m, &c, &[beat(600, 3.0)], 1_250, 5_000);
        let again = probs(&mut m, &c, &[beat(600, -3.0)], 1_250, 5_000);
        assert!(again[0] < 0.1, "a repeated end is a new timeline");
        // Windows far on: the beat at 2.4 s has left them and is forgotten.
        probs(&mut m, &c, &[], 1_250, 60_000);
        assert!(m.beats.is_empty());
    }

    #[test]
    fn bed_memories_are_kept_apart() {
        let c = first_feature();
        let mut ward = BedMemories::default();
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        probs(ward.of(&a), &c, &[beat(600, 3.0)], 1_250, 5_000);
        let pb = probs(ward.of(&b), &c, &[beat(600, -3.0)], 1_250, 6_000);
        assert!(pb[0] < 0.1);
        assert_eq!(ward.len(), 2);
        assert_eq!(ward.of(&a).classified(), 1);
    }
}
