//! Spliced ventricular runs: a patient's own annotated ventricular beats (both leads) placed
//! one after another into that patient's sinus rhythm, so that runs of any length and rate
//! appear in a realistic context. Built from held-out patients they are a test set
//! (`holmes evaluate --spliced`); from training patients, augmentation.
//!
//! Each event sits at an **anchor**: an annotated sinus beat with eight sinus beats before it,
//! no reference episode, ectopic rhythm label or noise mark within [`CLEAR_BEFORE_SECS`] before
//! and [`CLEAR_AFTER_SECS`] after it. After the anchor come the placed beats: the first
//! ventricular beat at the coupling interval (the run's beat interval, at most 0.85 of the
//! sinus interval: premature), the rest at the run's interval (±2 % jitter); a bigeminy
//! alternates them with sinus beats after a compensatory pause. Then a pause of 1.2 sinus
//! intervals and the sinus beat that followed the anchor, from which the record continues:
//! the event is **inserted**, nothing of the record is dropped, and every later annotation
//! moves by the time inserted.
//!
//! The signal between two placed beats is cut at the midpoint of their R peaks (each sample
//! belongs to the nearest placed beat: at fast rates a beat's T wave gives way to the next
//! QRS, as in a real run). Each placed stretch gets a linear baseline ramp that makes it meet
//! the stretch before it, and the last one the sinus rhythm after it, so baseline and
//! amplitude are continuous at every joint. The ventricular beats of a run are the source
//! beat drawn and its neighbours in time (one morphology, slightly varied), on every lead.
//!
//! A run has a [`RunShape`]: the plain runs above, or one of the kinds of true VT alarm that a
//! beat count misses most on real monitors (runs well under way at the monitor's alarm, slow
//! runs, very fast bursts, and runs after a signal that starts a few seconds before them),
//! drawn by [`SpliceMix::SHAPES`]. A run spliced into a paced record is a run in paced rhythm.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::core::window::SAMPLE_RATE_HZ;

use super::labels::{Episode, EpisodeKind, VT_MIN_BEATS};
use super::{RecordData, Span};

/// An anchor's sinus rhythm is free of episodes, ectopic rhythms and noise this long before
/// it, s ...
const CLEAR_BEFORE_SECS: f64 = 20.0;
/// ... and this long after it.
const CLEAR_AFTER_SECS: f64 = 20.0;
/// Sinus beats that precede an anchor.
const SINUS_BEFORE: usize = 8;
/// Events lie at least this far apart, s.
pub(crate) const SPACING_SECS: f64 = 60.0;
/// The first event's anchor comes no earlier than this, s (a ward window and more before it).
const FIRST_AT_SECS: f64 = 45.0;
/// Source ventricular beats need this much signal around their R peak, s.
const SOURCE_MARGIN_SECS: f64 = 0.7;
/// Fewest distinct annotated ventricular beats a record needs to be spliced.
pub(crate) const MIN_SOURCES: usize = 3;
/// Rates of spliced runs and salvos, beats/min.
pub(crate) const RATE_BPM: (f64, f64) = (100.0, 250.0);
/// Beats of a spliced run.
pub(crate) const RUN_BEATS: (usize, usize) = (5, 30);
/// Beats of a salvo (hard negatives: short of a run).
pub(crate) const SALVO_BEATS: (usize, usize) = (2, 4);
/// Ventricular beats of a bigeminy (each after a sinus beat).
const BIGEMINY_BEATS: (usize, usize) = (3, 6);

/// Rates of slow runs, beats/min, and how long they last, s.
const SLOW_BPM: (f64, f64) = (100.0, 130.0);
const SLOW_SECS: (f64, f64) = (6.0, 10.0);
/// Rates of bursts, beats/min, and how long they last, s (five beats at least).
const BURST_BPM: (f64, f64) = (200.0, 300.0);
const BURST_SECS: (f64, f64) = (1.0, 2.0);
/// A run under way at the alarm lasts at least this long, s (the proxy monitor alarms 2-4 s
/// into it).
pub(crate) const UNDER_WAY_SECS: f64 = 4.5;
/// Before a run after a flat start, the leads are flat from this long before its first beat,
/// s, ...
const FLAT_FROM_SECS: f64 = 20.0;
/// ... to this long before it (drawn), s.
const FLAT_LEAD_IN_SECS: (f64, f64) = (2.0, 4.0);

/// How a run is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunShape {
    /// [`RUN_BEATS`] at [`RATE_BPM`], half of them 5-7 beats (salvos and bigeminy are plain
    /// too).
    Plain,
    /// A run at [`RATE_BPM`] lasting [`UNDER_WAY_SECS`] or more, so that it is still going
    /// 2-4 s into it, where a monitor that counts beats has alarmed.
    UnderWay,
    /// [`SLOW_BPM`] for [`SLOW_SECS`].
    Slow,
    /// [`BURST_BPM`] for [`BURST_SECS`].
    Burst,
    /// A plain run after a signal that starts ([`FLAT_LEAD_IN_SECS`] before it, every lead
    /// flat before that).
    FlatStart,
}

impl RunShape {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunShape::Plain => "plain",
            RunShape::UnderWay => "under_way",
            RunShape::Slow => "slow",
            RunShape::Burst => "burst",
            RunShape::FlatStart => "flat_start",
        }
    }
}

/// What an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SpliceKind {
    /// [`VT_MIN_BEATS`] or more ventricular beats in a row: VT by the label's rule.
    Run,
    /// Two to four in a row: not VT.
    Salvo,
    /// Ventricular beats each after a sinus beat: not VT.
    Bigeminy,
}

/// One spliced event, on the spliced record's timeline.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Event {
    pub kind: SpliceKind,
    /// A run's shape ([`RunShape::Plain`] for salvos and bigeminy).
    pub shape: RunShape,
    /// Ventricular beats placed.
    pub beats: usize,
    /// The ventricular beats' rate, beats/min (their interval's reciprocal).
    pub rate_bpm: f64,
    /// Each placed ventricular beat's R peak, samples.
    pub ventricular: Vec<i64>,
    /// One past the event's last sample (its last beat and the pause after it).
    pub end: i64,
}

/// A record with events spliced in.
#[derive(Debug, Clone)]
pub(crate) struct Spliced {
    pub record: RecordData,
    pub events: Vec<Event>,
}

/// What a record's events are drawn from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SpliceMix {
    /// Shares of runs and salvos among the events (the rest bigeminy).
    pub runs: f64,
    pub salvos: f64,
    /// The runs' shapes, drawn alike (one shape: nothing drawn for it).
    pub shapes: &'static [RunShape],
}

impl SpliceMix {
    /// Half runs (plain, half of them 5-7 beats), a quarter salvos, a quarter bigeminy.
    pub(crate) const EVALUATION: SpliceMix = SpliceMix {
        runs: 0.5,
        salvos: 0.25,
        shapes: &[RunShape::Plain],
    };
    /// Runs only, under way, slow, bursts and after a flat start alike.
    pub(crate) const SHAPES: SpliceMix = SpliceMix {
        runs: 1.0,
        salvos: 0.0,
        shapes: &[
            RunShape::UnderWay,
            RunShape::Slow,
            RunShape::Burst,
            RunShape::FlatStart,
        ],
    };
}

/// Splices events into `rec` (one per [`SPACING_SECS`] where an anchor allows), drawn from
/// `seed` and `mix`; `None` when the record's database does not label ventricular beats or it
/// has fewer than [`MIN_SOURCES`] usable ones, or no anchor was found.
pub(crate) fn splice(rec: &RecordData, seed: u64, mix: SpliceMix) -> Option<Spliced> {
    if !rec.db.labels_ventricular_beats() {
        return None;
    }
    let fs = SAMPLE_RATE_HZ as f64;
    let margin = (SOURCE_MARGIN_SECS * fs) as i64;
    let len = rec.len() as i64;
    let sources: Vec<i64> = ventricular_beats(rec)
        .into_iter()
        .filter(|&v| v >= margin && v + margin < len && !noisy(rec, v - margin, v + margin))
        .collect();
    if sources.len() < MIN_SOURCES {
        return None;
    }
    let original = rec.leads.clone();
    let mut out = rec.clone();
    let mut events = Vec::new();
    let mut rng = SmallRng::seed_from_u64(seed ^ hash_key(&rec.key));
    let mut from = (FIRST_AT_SECS * fs) as i64;
    while let Some(k) = anchor(&out, from) {
        let plan = draw(&mut rng, mix);
        let src = rng.random_range(0..sources.len());
        let event = insert(&mut out, &original, &sources, src, k, plan, &mut rng);
        from = event.end + (SPACING_SECS * fs) as i64;
        events.push(event);
    }
    (!events.is_empty()).then_some(Spliced {
        record: out,
        events,
    })
}

/// An event drawn: its kind, ventricular beats and rate.
#[derive(Debug, Clone, Copy)]
struct Plan {
    kind: SpliceKind,
    shape: RunShape,
    beats: usize,
    rate_bpm: f64,
    /// For [`RunShape::FlatStart`]: the signal starts this long before the first beat, s.
    lead_in_secs: f64,
}

fn draw(rng: &mut SmallRng, mix: SpliceMix) -> Plan {
    let u: f64 = rng.random();
    let mut rate_bpm = rng.random_range(RATE_BPM.0..=RATE_BPM.1);
    let mut shape = RunShape::Plain;
    let mut lead_in_secs = 0.0;
    let (kind, beats) = if u < mix.runs {
        if let [one] = mix.shapes {
            shape = *one;
        } else {
            shape = mix.shapes[rng.random_range(0..mix.shapes.len())];
        }
        // Beats lasting `secs` at `rate_bpm`, five at least.
        let lasting = |secs: f64, rate_bpm: f64| ((secs * rate_bpm / 60.0).round() as usize).max(5);
        let beats = match shape {
            // Half the runs short (5-7 beats), where a detector is tested hardest.
            RunShape::Plain | RunShape::FlatStart => {
                if rng.random_bool(0.5) {
                    rng.random_range(RUN_BEATS.0..=7)
                } else {
                    rng.random_range(8..=RUN_BEATS.1)
                }
            }
            RunShape::UnderWay => lasting(UNDER_WAY_SECS, rate_bpm) + 1,
            RunShape::Slow => {
                rate_bpm = rng.random_range(SLOW_BPM.0..=SLOW_BPM.1);
                lasting(rng.random_range(SLOW_SECS.0..=SLOW_SECS.1), rate_bpm)
            }
            RunShape::Burst => {
                rate_bpm = rng.random_range(BURST_BPM.0..=BURST_BPM.1);
                lasting(rng.random_range(BURST_SECS.0..=BURST_SECS.1), rate_bpm)
            }
        };
        if shape == RunShape::FlatStart {
            lead_in_secs = rng.random_range(FLAT_LEAD_IN_SECS.0..=FLAT_LEAD_IN_SECS.1);
        }
        (SpliceKind::Run, beats)
    } else if u < mix.runs + mix.salvos {
        (
            SpliceKind::Salvo,
            rng.random_range(SALVO_BEATS.0..=SALVO_BEATS.1),
        )
    } else {
        (
            SpliceKind::Bigeminy,
            rng.random_range(BIGEMINY_BEATS.0..=BIGEMINY_BEATS.1),
        )
    };
    Plan {
        kind,
        shape,
        beats,
        rate_bpm,
        lead_in_secs,
    }
}

/// The annotated ventricular beats of a record (its one-sample ectopy marks).
pub(crate) fn ventricular_beats(rec: &RecordData) -> Vec<i64> {
    rec.ectopy
        .iter()
        .filter(|(a, b)| b - a == 1)
        .map(|&(a, _)| a)
        .collect()
}

/// Whether any lead is noise-marked somewhere in `[a, b)`.
fn noisy(rec: &RecordData, a: i64, b: i64) -> bool {
    rec.noise
        .iter()
        .any(|spans| spans.iter().any(|&(s, e)| s < b && e > a))
}

/// The index in `rec.beats` of the first anchor at or after sample `from`: a beat with
/// [`SINUS_BEFORE`] sinus beats before it and a sinus beat after it, clear of episodes,
/// ectopic rhythm labels, ventricular beats and noise around it.
fn anchor(rec: &RecordData, from: i64) -> Option<usize> {
    let fs = SAMPLE_RATE_HZ as f64;
    let (before, after) = (
        (CLEAR_BEFORE_SECS * fs) as i64,
        (CLEAR_AFTER_SECS * fs) as i64,
    );
    let len = rec.len() as i64;
    let start = rec.beats.partition_point(|&b| b < from).max(SINUS_BEFORE);
    (start..rec.beats.len().saturating_sub(1)).find(|&k| {
        let r = rec.beats[k];
        let (a, b) = (r - before, r + after);
        a >= 0
            && b < len
            && !rec.episodes.iter().any(|e| e.onset < b && e.end > a)
            && !rec.ectopy.iter().any(|&(s, e)| s < b && e > a)
            && !noisy(rec, a, b)
    })
}

/// One placed beat of the spliced stretch: its R peak on the output timeline, and where its
/// waveform comes from.
#[derive(Debug, Clone, Copy)]
struct Placed {
    at: i64,
    source: Source,
}

#[derive(Debug, Clone, Copy)]
enum Source {
    /// An R peak of the record as it is being spliced (the anchor, sinus beats).
    Current(i64),
    /// An annotated ventricular beat of the original record.
    Original(i64),
}

/// Inserts one event after anchor beat `k` of `rec` (ventricular beats from `original`,
/// around `sources[src]`), updating the record's signals and annotations; the event on the
/// new timeline.
fn insert(
    rec: &mut RecordData,
    original: &[Vec<f32>],
    sources: &[i64],
    src: usize,
    k: usize,
    plan: Plan,
    rng: &mut SmallRng,
) -> Event {
    let r_k = rec.beats[k];
    let r_next = rec.beats[k + 1];
    let sinus_rr = median_rr(&rec.beats[k - SINUS_BEFORE..=k]).max(1.0);
    let rr = 60.0 * SAMPLE_RATE_HZ as f64 / plan.rate_bpm;
    let coupling = rr.min(0.85 * sinus_rr);
    // The run's beats: the drawn source and the ones most like it (one morphology).
    let family = most_alike(original, sources, src, FAMILY);
    let mut placed = vec![Placed {
        at: r_k,
        source: Source::Current(r_k),
    }];
    let mut ventricular = Vec::with_capacity(plan.beats);
    let mut t = r_k as f64 + coupling;
    for i in 0..plan.beats {
        let at = t.round() as i64;
        placed.push(Placed {
            at,
            source: Source::Original(family[i % family.len()]),
        });
        ventricular.push(at);
        if plan.kind == SpliceKind::Bigeminy {
            // A sinus beat after a compensatory pause, then the next coupled beat.
            let n_at = (t + 2.0 * sinus_rr - coupling).round() as i64;
            if i + 1 < plan.beats {
                let sinus = rec.beats[k - (i % SINUS_BEFORE)];
                placed.push(Placed {
                    at: n_at,
                    source: Source::Current(sinus),
                });
                t = n_at as f64 + coupling;
            }
        } else {
            t += rr * rng.random_range(0.98..=1.02);
        }
    }
    let last = placed.last().map_or(r_k, |p| p.at);
    let resume = last + (1.2 * sinus_rr).round() as i64;
    let shift = resume - r_next;
    placed.push(Placed {
        at: resume,
        source: Source::Current(r_next),
    });

    // Render [r_k, resume) on the new timeline; the record continues from r_next.
    let new_leads: Vec<Vec<f32>> = rec
        .leads
        .iter()
        .zip(original)
        .map(|(cur, orig)| {
            let stretch = render(&placed, cur, orig);
            let mut lead = Vec::with_capacity(cur.len() + shift.max(0) as usize);
            lead.extend_from_slice(&cur[..r_k as usize]);
            lead.extend_from_slice(&stretch);
            lead.extend_from_slice(&cur[r_next as usize..]);
            lead
        })
        .collect();
    rec.leads = new_leads;

    // Annotations after the anchor move by the time inserted.
    let moved = |t: i64| if t > r_k { t + shift } else { t };
    let move_span = |&(a, b): &Span| (moved(a), moved(b));
    let mut beats: Vec<i64> = rec.beats.iter().map(|&b| moved(b)).collect();
    beats.extend(placed[1..placed.len() - 1].iter().map(|p| p.at));
    beats.sort_unstable();
    rec.beats = beats;
    let mut ectopy: Vec<Span> = rec.ectopy.iter().map(move_span).collect();
    ectopy.extend(ventricular.iter().map(|&v| (v, v + 1)));
    ectopy.sort_unstable();
    rec.ectopy = ectopy;
    for spans in &mut rec.noise {
        *spans = spans.iter().map(move_span).collect();
    }
    for e in &mut rec.episodes {
        (e.onset, e.confirmed, e.end) = (moved(e.onset), moved(e.confirmed), moved(e.end));
    }
    let end = resume;
    if plan.shape == RunShape::FlatStart {
        // Every lead flat (at its value where the signal starts) up to the lead-in.
        let fs = SAMPLE_RATE_HZ as f64;
        let to = ventricular[0] - (plan.lead_in_secs * fs).round() as i64;
        let from = (ventricular[0] - (FLAT_FROM_SECS * fs) as i64).max(0);
        for lead in &mut rec.leads {
            let v = lead[to as usize];
            lead[from as usize..to as usize].fill(v);
        }
    }
    if plan.kind == SpliceKind::Run {
        let first = ventricular[0];
        let last_v = ventricular[ventricular.len() - 1];
        let mean_rr = (last_v - first) as f64 / (ventricular.len() - 1) as f64;
        rec.episodes.push(Episode {
            kind: EpisodeKind::Vt,
            onset: first,
            confirmed: ventricular[VT_MIN_BEATS - 1],
            end: last_v + mean_rr.round() as i64,
        });
        rec.episodes.sort_by_key(|e| (e.kind, e.onset));
    }
    let rate_bpm = if ventricular.len() >= 2 && plan.kind != SpliceKind::Bigeminy {
        let span = (ventricular[ventricular.len() - 1] - ventricular[0]) as f64;
        60.0 * SAMPLE_RATE_HZ as f64 * (ventricular.len() - 1) as f64 / span
    } else {
        plan.rate_bpm
    };
    Event {
        kind: plan.kind,
        shape: plan.shape,
        beats: plan.beats,
        rate_bpm,
        ventricular,
        end,
    }
}

/// The samples `[placed[0].at, placed.last().at)` of one lead: each sample from the placed
/// beat nearest it, every inner beat's stretch ramped to meet its neighbours.
fn render(placed: &[Placed], current: &[f32], original: &[f32]) -> Vec<f32> {
    let value = |p: &Placed, t: i64| -> f32 {
        let (signal, r) = match p.source {
            Source::Current(r) => (current, r),
            Source::Original(r) => (original, r),
        };
        let i = (r + t - p.at).clamp(0, signal.len() as i64 - 1);
        signal[i as usize]
    };
    let start = placed[0].at;
    let stop = placed[placed.len() - 1].at;
    let mut out: Vec<f32> = Vec::with_capacity((stop - start) as usize);
    // Stretch boundaries: the midpoints between neighbouring R peaks.
    let bounds: Vec<i64> = placed.windows(2).map(|w| (w[0].at + w[1].at) / 2).collect();
    // The anchor's own stretch, as it was.
    for t in start..bounds[0] {
        out.push(value(&placed[0], t));
    }
    let inner = placed.len() - 2;
    for i in 1..=inner {
        let (a, b) = (bounds[i - 1], bounds[i]);
        let p = &placed[i];
        let prev = out.last().copied().unwrap_or_else(|| value(p, a - 1));
        // Continuous with the stretch before: the offset where this one would have been.
        let offset_start = prev - value(p, a - 1);
        // The last inner stretch meets the sinus beat after it; the others end on their own
        // baseline, and the next one meets them.
        let offset_end = if i == inner {
            value(&placed[i + 1], b) - value(p, b)
        } else {
            0.0
        };
        let n = (b - a).max(1) as f32;
        for t in a..b {
            let w = (t - a) as f32 / n;
            out.push(value(p, t) + offset_start * (1.0 - w) + offset_end * w);
        }
    }
    let last = &placed[placed.len() - 1];
    for t in bounds[bounds.len() - 1]..stop {
        out.push(value(last, t));
    }
    out
}

/// Source beats a run cycles through.
const FAMILY: usize = 4;

/// `sources[src]` and the `n - 1` other source beats whose QRS stretch (-0.1 to +0.15 s, every
/// lead) correlates best with it.
fn most_alike(leads: &[Vec<f32>], sources: &[i64], src: usize, n: usize) -> Vec<i64> {
    let (pre, post) = (SAMPLE_RATE_HZ as i64 / 10, SAMPLE_RATE_HZ as i64 * 3 / 20);
    let stretch = |r: i64| -> Vec<f64> {
        leads
            .iter()
            .flat_map(|l| l[(r - pre) as usize..(r + post) as usize].iter())
            .map(|&v| v as f64)
            .collect()
    };
    let reference = stretch(sources[src]);
    let mut scored: Vec<(f64, i64)> = sources
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != src)
        .map(|(_, &r)| (-crate::core::stats::correlation(&stretch(r), &reference), r))
        .collect();
    scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    std::iter::once(sources[src])
        .chain(scored.into_iter().map(|(_, r)| r))
        .take(n)
        .collect()
}

/// The median interval between consecutive beats.
fn median_rr(beats: &[i64]) -> f64 {
    let rr: Vec<f64> = beats.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    crate::core::stats::median(&rr)
}

/// A stable hash of a record key, so that each record draws its own events from one seed.
fn hash_key(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests;
