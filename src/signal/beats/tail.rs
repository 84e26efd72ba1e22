//! Beats read up to a stretch's very last sample, as a monitor's alarm asks: the alarm comes
//! within a few beats of a run's start, so its newest beats sit at the end of the data, where
//! the 0.45 s of context after the R peak that the classifier reads ([`CONTEXT_POST`]) is not
//! there yet. A window's counter leaves such beats to the next window; an alarm's
//! adjudication cannot wait for it.
//!
//! How the newest beats are judged: the stretch is extended by holding each lead's last
//! sample for [`CONTEXT_POST`], so that every beat whose R peak lies in the stretch (up to
//! [`CUT_MARGIN`] before its end) is found and described. A beat whose context the end cuts is
//! called by the median probability of the earlier, wholly described beats alike to it (the
//! same likeness as [`Described::alike_median`], on the part of its QRS stretch that lies in
//! the data): the newest beats of a monomorphic run take the run's call. A cut beat alike to
//! no earlier beat keeps the classifier's own probability on its held context. Then every
//! beat is called with the beats alike to it, as the counter calls them.

use crate::core::stats::median;
use crate::core::window::SAMPLE_RATE_HZ;

use super::{
    ALIKE_CORR, ALIKE_SIZE, BeatClassifier, CONTEXT_POST, Described, PRE, ptp, standardised,
};

/// A beat whose R peak lies this close to the stretch's end is not read (its QRS is barely
/// there): 40 ms.
const CUT_MARGIN: usize = SAMPLE_RATE_HZ / 25;

/// A stretch's beats read up to its end ([`BeatClassifier::call_to_end`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CalledToEnd {
    /// R peaks, samples from the stretch's start, in time order.
    pub peaks: Vec<usize>,
    /// Each beat's probability of being ventricular, called with the beats alike to it.
    pub p: Vec<f64>,
    /// How many of the last beats had their context cut by the end.
    pub cut: usize,
}

impl BeatClassifier {
    /// The beats of `leads` (as [`Described::of`] takes them) up to their last sample, each
    /// called as the module's doc says; `None` with too few beats for a template.
    pub(crate) fn call_to_end(&self, leads: &[&[f32]]) -> Option<CalledToEnd> {
        let n = leads.first()?.len();
        let held: Vec<Vec<f32>> = leads
            .iter()
            .map(|l| {
                let last = l.last().copied().unwrap_or(0.0);
                let mut v = Vec::with_capacity(l.len() + CONTEXT_POST);
                v.extend_from_slice(l);
                v.extend(std::iter::repeat_n(last, CONTEXT_POST));
                v
            })
            .collect();
        let refs: Vec<&[f32]> = held.iter().map(Vec::as_slice).collect();
        let d = Described::of_until(&refs, n.saturating_sub(CUT_MARGIN))?;
        let whole = d.peaks.iter().filter(|&&r| r + CONTEXT_POST <= n).count();
        let mut p: Vec<f64> = (0..d.len())
            .map(|k| self.probability(&d.features(k)))
            .collect();
        for k in whole..d.len() {
            // The part of the beat's QRS stretch that lies in the data.
            let keep = PRE + (n - d.peaks[k]).min(d.segs0[k].len() - PRE);
            let alike: Vec<f64> = (0..whole)
                .filter(|&j| d.alike_in(k, j, keep))
                .map(|j| p[j])
                .collect();
            if !alike.is_empty() {
                p[k] = median(&alike);
            }
        }
        Some(CalledToEnd {
            p: d.alike_median(&p),
            cut: d.len() - whole,
            peaks: d.peaks,
        })
    }
}

impl Described {
    /// Whether beats `i` and `j` are alike ([`ALIKE_CORR`], [`ALIKE_SIZE`]) on the first `keep`
    /// samples of their QRS stretches.
    fn alike_in(&self, i: usize, j: usize, keep: usize) -> bool {
        let (a, b) = (&self.segs0[i][..keep], &self.segs0[j][..keep]);
        let ratio = ptp(a).max(1e-6) / ptp(b).max(1e-6);
        let corr = |a: &[f64], b: &[f64]| {
            let (x, y) = (standardised(a), standardised(b));
            x.iter().zip(&y).map(|(u, v)| u * v).sum::<f64>()
        };
        (1.0 / ALIKE_SIZE..=ALIKE_SIZE).contains(&ratio)
            && corr(a, b) >= ALIKE_CORR
            && self
                .segs1
                .as_ref()
                .is_none_or(|s| corr(&s[i][..keep], &s[j][..keep]) >= ALIKE_CORR)
    }
}

#[cfg(test)]
mod tests {
    use crate::signal::test_signals::ectopic_train;

    use super::*;

    #[test]
    fn the_newest_beats_of_a_run_are_read_up_to_the_last_sample() {
        // Sinus beats every 0.8 s, the last eight wide and inverted; cut just after the last.
        let wide: Vec<usize> = (12..20).collect();
        let (x, centres) = ectopic_train(4_400, 200, &wide);
        let end = centres[19] + 60;
        let x = &x[..end];
        // Calls a beat ventricular when it correlates poorly with the template.
        let c = BeatClassifier::on_first_feature(-20.0, 10.0);
        let read = c.call_to_end(&[x]).expect("beats");
        let found = |t: usize| read.peaks.iter().position(|&r| r.abs_diff(t) < 30);
        let last = found(centres[19]).expect("the last beat is read");
        assert!(read.cut >= 1, "{read:?}");
        // A window's counter would not describe it at all.
        let plain = Described::of(&[x]).unwrap();
        assert!(
            plain
                .samples()
                .iter()
                .all(|&r| r.abs_diff(centres[19]) >= 30)
        );
        // The cut beat takes the call of the run's beats alike to it.
        let earlier = found(centres[15]).unwrap();
        assert_eq!(read.p[last], read.p[earlier], "{:?}", read.p);
        let sinus = found(centres[5]).unwrap();
        assert!(read.p[last] > read.p[sinus], "{:?}", read.p);
    }
}
