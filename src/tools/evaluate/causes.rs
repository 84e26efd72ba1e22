//! What the reference says about each false alarm, so a clinical engineer sees what the
//! alarms a ward would get are made of, not only how many: raised on a stretch the annotators
//! marked as noise (vfdb's `(NOISE` rhythm, the `~` signal-quality marks of the beat-labelled
//! databases), on ventricular ectopy short of a run (two or more ventricular beats, or a
//! bigeminy, trigeminy, high-grade ectopy or idioventricular label), shortly before a reference episode's onset (the rhythm already turning, or an
//! onset annotated late), shortly after one ended (post-episode rhythm, shocks), or none of
//! these. First match in that order; the annotations' word, not a judgement of the signal.
//! Apart from that cause, the false alarms with a counted VT run among the hops that raised
//! them (a hop whose score the beat counter raised to 1, within the rule's last `n` hops) are
//! counted: an upper bound on the counter's share, since the members' own score may have
//! reached the threshold there too.

use serde::Serialize;

use crate::alarm::matching::{MatchOptions, is_false_alarm, overlaps};
use crate::core::window::SAMPLE_RATE_HZ;

/// The stretch before a raise that counts as the signal that raised it, ms: the window of the
/// shorter members plus a hop.
pub const LOOKBACK_MS: i64 = 10_000;
/// How close to an episode a raise counts as before or after it, ms.
pub const NEAR_EPISODE_MS: i64 = 30_000;

/// False alarms by what the reference says at their raise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FalseAlarmCauses {
    /// The [`LOOKBACK_MS`] before the raise overlap a noise-marked stretch.
    pub noise_marked: usize,
    /// The [`LOOKBACK_MS`] before the raise hold two or more ventricular beats, or overlap an
    /// ectopic rhythm label.
    pub ectopy: usize,
    /// A reference episode begins within [`NEAR_EPISODE_MS`] after the raise.
    pub before_episode: usize,
    /// A reference episode ended within [`NEAR_EPISODE_MS`] before the raise.
    pub after_episode: usize,
    /// None of the above: rhythm the reference calls neither noise nor near an episode.
    pub other: usize,
    /// Of all of them, whatever their cause above: those with a counted VT run among the
    /// hops that raised them; `None` for a detector without a beat counter's runs.
    pub counted_run: Option<usize>,
}

impl FalseAlarmCauses {
    pub fn total(&self) -> usize {
        self.noise_marked + self.ectopy + self.before_episode + self.after_episode + self.other
    }

    /// The causes as words for a person: "noise-marked 3, ventricular ectopy 1, ...".
    pub fn words(&self) -> String {
        format!(
            "noise-marked {}, ventricular ectopy {}, before an episode {}, after one {}, other {}{}",
            self.noise_marked,
            self.ectopy,
            self.before_episode,
            self.after_episode,
            self.other,
            self.counted_run.map_or(String::new(), |n| format!(
                "; with a counted VT run among the hops that raised them {n}"
            ))
        )
    }

    pub fn add(&mut self, o: &FalseAlarmCauses) {
        self.noise_marked += o.noise_marked;
        self.ectopy += o.ectopy;
        self.before_episode += o.before_episode;
        self.after_episode += o.after_episode;
        self.other += o.other;
        self.counted_run = match (self.counted_run, o.counted_run) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
    }
}

/// Classifies the false alarms among `alarms` (those [`is_false_alarm`] counts) by the
/// `reference` episodes, the `noise` stretches and the `ectopy` marks (a mark of at most
/// [`BEAT_MARK_MS`] per ventricular beat, longer spans for ectopic rhythm labels; all
/// `[start, end)` in ms); `counted`, for a detector with a beat counter: the hops (their
/// ends, ms) whose score it raised, and how far back before a raise the rule's hops reach, ms
/// (`(n - 1/2)` hops: the rule's last `n`).
pub fn classify(
    alarms: &[(i64, i64)],
    reference: &[(i64, i64)],
    noise: &[(i64, i64)],
    ectopy: &[(i64, i64)],
    counted: Option<(&[i64], i64)>,
    opts: MatchOptions,
) -> FalseAlarmCauses {
    let mut out = FalseAlarmCauses {
        counted_run: counted.map(|_| 0),
        ..FalseAlarmCauses::default()
    };
    for &a in alarms
        .iter()
        .filter(|&&a| is_false_alarm(a, reference, opts))
    {
        let raise = a.0;
        if let (Some(n), Some((hops, reach))) = (out.counted_run.as_mut(), counted) {
            *n += usize::from(hops.iter().any(|&t| t <= raise && raise - t < reach));
        }
        let seen = (raise - LOOKBACK_MS, raise);
        if noise.iter().any(|&n| overlaps(n, seen)) {
            out.noise_marked += 1;
        } else if ectopic(ectopy, seen) {
            out.ectopy += 1;
        } else if reference
            .iter()
            .any(|&(on, _)| on >= raise && on - raise <= NEAR_EPISODE_MS)
        {
            out.before_episode += 1;
        } else if reference
            .iter()
            .any(|&(_, end)| end <= raise && raise - end <= NEAR_EPISODE_MS)
        {
            out.after_episode += 1;
        } else {
            out.other += 1;
        }
    }
    out
}

/// The longest ectopy mark that is one beat (a sample), ms.
const BEAT_MARK_MS: i64 = 1000 / SAMPLE_RATE_HZ as i64;

/// Two or more ventricular beats in `seen`, or an ectopic rhythm label over it (a span longer
/// than a beat's mark counts as two).
fn ectopic(ectopy: &[(i64, i64)], seen: (i64, i64)) -> bool {
    ectopy
        .iter()
        .filter(|&&e| overlaps(e, seen))
        .map(|&(a, b)| if b - a > BEAT_MARK_MS { 2 } else { 1 })
        .sum::<usize>()
        >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1000;

    #[test]
    fn each_false_alarm_gets_the_first_cause_that_fits() {
        // 1 s of onset tolerance, 10 s of grace.
        let opts = MatchOptions::default();
        let reference = [(100 * S, 160 * S), (600 * S, 700 * S)];
        let noise = [(300 * S, 320 * S)];
        let alarms = [
            // True: overlaps the first episode.
            (90 * S, 120 * S),
            // After the first episode's end plus the grace, within 30 s of it.
            (185 * S, 190 * S),
            // Raised 5 s after a noise stretch ended: noise-marked.
            (325 * S, 330 * S),
            // 20 s before the second episode's onset (and cleared before it).
            (580 * S, 585 * S),
            // Far from everything.
            (450 * S, 455 * S),
            (900 * S, 905 * S),
        ];
        // Two ventricular beats before the raise at 900 s, one before the raise at 450 s.
        let ectopy = [
            (445 * S, 445 * S + 1),
            (893 * S, 893 * S + 1),
            (897 * S, 897 * S + 1),
        ];
        // The counter raised the hops at 90 s (a true alarm), 450 s, 895 s and 1,000 s; the
        // rule looks back two hops of 5 s (half a hop of tolerance).
        let counted = [90 * S, 450 * S, 895 * S, 1_000 * S];
        let got = classify(
            &alarms,
            &reference,
            &noise,
            &ectopy,
            Some((&counted, 7_500)),
            opts,
        );
        assert_eq!(
            got,
            FalseAlarmCauses {
                noise_marked: 1,
                ectopy: 1,
                before_episode: 1,
                after_episode: 1,
                other: 1,
                counted_run: Some(2),
            }
        );
        assert_eq!(
            got.words(),
            "noise-marked 1, ventricular ectopy 1, before an episode 1, after one 1, other 1; \
             with a counted VT run among the hops that raised them 2"
        );
        assert_eq!(
            got.total(),
            5,
            "the counter's are among the five, not beside them"
        );
        // Raised at the hop the counter raised only (n = 1): the one at 900 s is not.
        let one = classify(
            &alarms,
            &reference,
            &noise,
            &ectopy,
            Some((&counted, 2_500)),
            opts,
        );
        assert_eq!(one.counted_run, Some(1));
        // A detector without a counter says nothing of it.
        let none = classify(&alarms, &reference, &noise, &ectopy, None, opts);
        assert_eq!((none.counted_run, none.total()), (None, 5));
        // A bigeminy label over the lookback is ectopy by itself.
        let label = classify(
            &[(450 * S, 455 * S)],
            &reference,
            &noise,
            &[(0, 449 * S)],
            None,
            opts,
        );
        assert_eq!(label.ectopy, 1);
        // Noise comes first: the same alarm near an episode and after noise is noise-marked.
        let both = classify(
            &[(575 * S, 578 * S)],
            &reference,
            &[(570 * S, 573 * S)],
            &[],
            None,
            opts,
        );
        assert_eq!(both.noise_marked, 1);
        // A raise 11 s after the noise ended is no longer noise-marked.
        let late = classify(&[(331 * S, 335 * S)], &reference, &noise, &[], None, opts);
        assert_eq!((late.noise_marked, late.other), (0, 1));
    }
}
