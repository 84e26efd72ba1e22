//! Holmes's opinion on a bedside monitor's own VT or VF alarm ([`adjudicate`]): given that the
//! monitor alarmed, does the ECG of the seconds before hold what it claims? Sans-IO: the
//! samples of every lead the monitor sends, up to the alarm's onset, in; an [`Opinion`] out.
//! The daemon, `holmes score --monitor-alarm` and `holmes evaluate` share it.
//!
//! Where it looks: the [`LOOKBACK_SECS`] before the onset, on every lead. Each lead is first
//! read for what a nurse would see at a glance: a lead that stays **flat** (under
//! [`FLAT_MV`] peak to peak) is left out, and a lead whose signal **starts** late (flat or
//! absent before) is read from where it starts, so that the run's own beats do not become the
//! template they are compared with; two QRS detectors' agreement (bSQI) on each lead says
//! where there is **noise**.
//!
//! - **VT**: the beats of the readable leads are found on both leads together, described and
//!   classified as the beat counter does, **up to the alarm's instant** (the newest beats,
//!   whose context after them the onset cuts, are called by the earlier beats alike to them:
//!   `signal::beats::tail`). At each call probability of the counter's grid, the longest run
//!   of called beats faster than 100/min anywhere in the look-back; the alarm's probability is
//!   set by the highest call at which a run of at least five holds (0.5 at the grid's lowest
//!   call, 1 at its highest), and below 0.5 by the longest run at the lowest call (four beats
//!   reach 0.4). Fast beats the classifier calls like the others still count where they are
//!   **sudden** (five intervals in a row under 0.6 s and under 0.8 of the look-back's median)
//!   and run up to the alarm's instant ([`SUDDEN_RUN`], 0.45): a run just begun, in a
//!   morphology the classifier does not know. So does a **burst** in the last 2 s that the
//!   counter's QRS detector (200 ms refractory) merges: five or more beats by the length-based
//!   detector at under half the interval before them, or fast regular waves by the classical
//!   VF rule ([`burst`]). So does a sudden run of **wide** beats up to the instant that the
//!   counter's detector, weighing beats by their squared slope beside sharp sinus beats,
//!   misses altogether: found by their curve length, alike one another ([`wide_run`]).
//! - **VF**: the classical VF rule's spectral score over the last 4 s of each readable lead,
//!   beside the VT evidence at 0.9 of its weight (ventricular flutter is a fast VT run to a
//!   beat detector).
//!
//! - **The ensemble**: where the caller has it, the served risk (the members with the beat
//!   counter, as the ward scores them) of the windows ending in the look-back; the alarm's
//!   probability is the larger of it and the beats' (or fibrillatory waves') evidence, so
//!   that a sustained VT or VF the members see at once is not lost to a beat count, and a
//!   run under way at the alarm's instant, which no window holds yet, is not lost to the
//!   members.
//!
//! The alarm is `confirmed` when its probability reaches the operating point: the one the
//! folds chose, kept beside the counter's classifier ([`served_point`]), else [`CONFIRM_AT`].

use crate::core::monitor_alarm::{LOOKBACK_SECS, MonitorAlarmKind, Opinion};
use crate::core::stats::median;
use crate::core::window::SAMPLE_RATE_HZ;

use super::beats::{BeatClassifier, BeatsFile, CALL_GRID, VENTRICULAR_AT, called_at, called_runs};
use super::classical::{VT_MIN_BEATS, vf_likeness};
use super::heart_rate::detect_qrs;
use super::quality::{bsqi, detect_qrs_length};

pub(crate) mod wide_run;

/// The operating point an alarm is confirmed at: a run of four fast beats called at the
/// grid's lowest call (0.5), or a served risk or fibrillatory-wave score of 0.4. Chosen
/// 2026-12-06 for the challenge-style score on the validation part's 423 proxy monitor alarms
/// (166 true: the classical detector's, and the spliced events'; `holmes evaluate --part test
/// --spliced`, 1ebea7c), which the test part's figures never saw. It serves only where the
/// counter's file keeps no point the folds chose ([`served_point`]).
pub const CONFIRM_AT: f32 = 0.4;

/// The point the served counter's opinion confirms at: the folds' (`holmes evaluate --folds K
/// --save-rule` keeps it in the counter's file), else [`CONFIRM_AT`].
pub fn served_point(counter: &BeatsFile) -> f32 {
    counter
        .opinion
        .as_ref()
        .map_or(CONFIRM_AT, |p| p.confirm_at)
}
/// A half-second block of a lead is flat under this peak-to-peak, mV.
pub const FLAT_MV: f32 = 0.05;
/// A flat stretch at least this long (s) ends where the lead is read from.
const FLAT_STRETCH_SECS: f64 = 2.0;
/// A lead with less than this many seconds of signal after its last flat stretch is flat (3 s
/// holds five beats at 100/min; 4 s until 2026-12-07 left runs 2-4 s after a signal's start
/// unread: on the test and validation parts, 3 and 3 more of 136 such runs confirmed, nothing
/// else changed).
const MIN_ACTIVE_SECS: usize = 3;
/// A lead whose two QRS detectors agree less than this (bSQI) is noisy.
const NOISY_BSQI: f32 = 0.5;
/// A beat interval under 0.6 s (100/min) and under this share of the look-back's median
/// interval is **sudden**: ...
const SUDDEN_RR: f64 = 0.8;
/// ... and [`VT_MIN_BEATS`] sudden intervals in a row up to the alarm's instant, their beats
/// called like the others, give the alarm this probability (above four beats called
/// ventricular, below a run of five called at the grid's lowest call). Adopted 2026-12-06 on
/// the validation part's proxy alarms (challenge-style 63.3 to 64.9 at [`CONFIRM_AT`]).
/// A burst ([`burst`]) gives it too, and so does a run of wide beats ([`wide_run`]).
const SUDDEN_RUN: f32 = 0.45;
/// A **burst** is read over the look-back's last this many seconds: ...
const BURST_SECS: f64 = 2.0;
/// ... where the length-based QRS detector (which merges no beats at 300/min) finds at least
/// this many beats on a lead ...
const BURST_BEATS: usize = 5;
/// ... at a mean interval under this share of the lead's median interval before them; or
/// where the classical VF rule scores the stretch at least [`BURST_WAVES`] (fast regular
/// waves). Both chosen 2026-12-06 on the validation part's proxy alarms (challenge-style 64.9
/// to 74.7 at [`CONFIRM_AT`], false alarms confirmed 55 to 59 of 257), over 5-6 beats,
/// shares 0.5-0.6, waves 0.3-0.7 and stretches of 1.5-3 s.
const BURST_RR: f64 = 0.5;
const BURST_WAVES: f32 = 0.7;

/// One lead the monitor sends: its name as the monitor calls it, and its samples at 250 Hz in
/// mV, ending at the alarm's onset (non-finite samples are missing).
#[derive(Debug, Clone, Copy)]
pub struct Lead<'a> {
    pub name: &'a str,
    pub samples: &'a [f32],
}

/// What one lead shows over the look-back.
#[derive(Debug, Clone, PartialEq)]
struct LeadReading {
    /// Where its signal starts, samples into the look-back (after its last flat stretch).
    from: usize,
    flat: bool,
    noisy: bool,
}

/// Holmes's opinion on a monitor's alarm of `kind` from `leads` (each ending at the alarm's
/// onset; the last [`LOOKBACK_SECS`] are read), confirmed at `confirm_at`; `None` for a kind
/// Holmes does not judge.
pub fn adjudicate(
    classifier: &BeatClassifier,
    leads: &[Lead<'_>],
    kind: MonitorAlarmKind,
    risk: Option<f32>,
    confirm_at: f32,
) -> Option<Opinion> {
    if !kind.judged() {
        return None;
    }
    // Every lead ends at the onset: each is read over the same last stretch, the shortest
    // lead's at most.
    let shortest = leads.iter().map(|l| l.samples.len()).min().unwrap_or(0);
    let look = (LOOKBACK_SECS * SAMPLE_RATE_HZ).min(shortest);
    let cut: Vec<Vec<f32>> = leads
        .iter()
        .map(|l| {
            let s = &l.samples[l.samples.len() - look..];
            s.iter()
                .map(|&v| if v.is_finite() { v } else { 0.0 })
                .collect()
        })
        .collect();
    let readings: Vec<LeadReading> = cut.iter().map(|x| read_lead(x)).collect();
    let usable: Vec<usize> = (0..leads.len()).filter(|&k| !readings[k].flat).collect();
    let names = |ks: &[usize]| join(ks.iter().map(|&k| leads[k].name));
    let flat: Vec<usize> = (0..leads.len()).filter(|&k| readings[k].flat).collect();
    let mut notes: Vec<String> = Vec::new();
    if !flat.is_empty() && !usable.is_empty() {
        notes.push(format!("{} flat", lead_word(&names(&flat), flat.len())));
    }
    if usable.is_empty() {
        let why = if leads.is_empty() {
            "no ECG before the alarm".to_string()
        } else {
            format!("no readable ECG: {} flat", names(&flat))
        };
        return Some(opinion(kind, 0.0, confirm_at, why));
    }
    let noisy: Vec<usize> = usable
        .iter()
        .copied()
        .filter(|&k| readings[k].noisy)
        .collect();
    // The readable leads from where all of them have signal; the longest alone where that
    // leaves too little.
    let len = cut[usable[0]].len();
    let common = usable.iter().map(|&k| readings[k].from).max().unwrap_or(0);
    let (read, from): (Vec<usize>, usize) = if len - common >= MIN_ACTIVE_SECS * SAMPLE_RATE_HZ {
        (usable.clone(), common)
    } else {
        let k = *usable
            .iter()
            .min_by_key(|&&k| readings[k].from)
            .expect("a usable lead");
        (vec![k], readings[k].from)
    };
    let signal: Vec<&[f32]> = read.iter().map(|&k| &cut[k][from..]).collect();
    let read_names: Vec<&str> = read.iter().map(|&k| leads[k].name).collect();
    let vt = vt_evidence(classifier, &signal, &read_names);
    let on = names(&read);
    let (probability, said) = match kind {
        MonitorAlarmKind::Vf => {
            let (vf, at) = read
                .iter()
                .map(|&k| (vf_likeness(&cut[k][from..]), k))
                .fold((0.0f32, read[0]), |a, b| if b.0 > a.0 { b } else { a });
            if vf >= 0.9 * vt.probability {
                let said = if vf > 0.0 {
                    format!("fibrillatory waves on {}", leads[at].name)
                } else {
                    vt.words(&on)
                };
                (vf, said)
            } else {
                (0.9 * vt.probability, vt.words(&on))
            }
        }
        _ => (vt.probability, vt.words(&on)),
    };
    if !noisy.is_empty() {
        let which = if noisy.len() == leads.len() && leads.len() > 1 {
            "all leads".to_string()
        } else {
            names(&noisy)
        };
        notes.push(format!("noise on {which}"));
    }
    notes.insert(0, said);
    // The ensemble's risk where it is higher; named where it counts toward confirming.
    let probability = match risk.filter(|r| r.is_finite()) {
        Some(r) if r > probability => {
            if r >= 0.5 * confirm_at {
                notes.insert(0, format!("the ensemble's risk {r:.2} before the alarm"));
            }
            r
        }
        _ => probability,
    };
    Some(opinion(kind, probability, confirm_at, notes.join("; ")))
}

fn opinion(kind: MonitorAlarmKind, probability: f32, confirm_at: f32, reason: String) -> Opinion {
    let probability = probability.clamp(0.0, 1.0);
    Opinion {
        kind,
        confirmed: probability >= confirm_at,
        probability,
        reason,
    }
}

/// Flat half-second blocks, where the signal starts, and the two detectors' agreement.
fn read_lead(x: &[f32]) -> LeadReading {
    let block = SAMPLE_RATE_HZ / 2;
    let flat_blocks: Vec<bool> = x
        .chunks(block)
        .map(|c| {
            let (lo, hi) = c
                .iter()
                .fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            hi - lo < FLAT_MV
        })
        .collect();
    let stretch = (FLAT_STRETCH_SECS * SAMPLE_RATE_HZ as f64) as usize / block;
    // The end of the last flat stretch.
    let mut from_block = 0;
    let mut run = 0;
    for (b, &f) in flat_blocks.iter().enumerate() {
        run = if f { run + 1 } else { 0 };
        if run >= stretch {
            from_block = b + 1;
        }
    }
    let from = (from_block * block).min(x.len());
    let active = &x[from..];
    let flat = active.len() < MIN_ACTIVE_SECS * SAMPLE_RATE_HZ
        || flat_blocks[from_block..].iter().filter(|&&f| f).count() * 2
            > flat_blocks.len() - from_block;
    let fs = SAMPLE_RATE_HZ as f64;
    let noisy =
        !flat && bsqi(&detect_qrs(active, fs), &detect_qrs_length(active, fs), fs) < NOISY_BSQI;
    LeadReading { from, flat, noisy }
}

/// The VT evidence of the look-back's beats.
#[derive(Debug, Clone, PartialEq)]
struct VtEvidence {
    probability: f32,
    /// The run behind it: beats and their rate per minute (`None`: no run of two or more fast
    /// called beats).
    run: Option<(usize, f64)>,
    /// The rate of the beats called at no probability, per minute.
    other_rate: Option<f64>,
    /// What the evidence says where it is not beats called ventricular: sudden fast beats up
    /// to the alarm's instant, a burst, or a run of wide beats.
    uncalled: Option<String>,
}

impl VtEvidence {
    fn words(&self, on: &str) -> String {
        let rest = self
            .other_rate
            .map(|r| format!("; other beats at {r:.0}/min"))
            .unwrap_or_default();
        if let Some(said) = &self.uncalled {
            return format!("{said}{rest}");
        }
        match self.run {
            Some((n, rate)) if n >= VT_MIN_BEATS => {
                format!("{n} ventricular beats at {rate:.0}/min on {on}")
            }
            Some((n, rate)) if n + 1 == VT_MIN_BEATS => format!(
                "{n} ventricular beats at {rate:.0}/min on {on}, one short of a run of \
                 {VT_MIN_BEATS} by the alarm's instant{rest}"
            ),
            Some((n, rate)) => format!(
                "no run of {VT_MIN_BEATS} ventricular beats on {on}: {n} at most, at {rate:.0}/min{rest}"
            ),
            None => format!("no run of ventricular beats on {on}{rest}"),
        }
    }
}

/// The VT evidence of `leads` (named `names`).
fn vt_evidence(classifier: &BeatClassifier, leads: &[&[f32]], names: &[&str]) -> VtEvidence {
    let none = VtEvidence {
        probability: 0.0,
        run: None,
        other_rate: None,
        uncalled: None,
    };
    let Some(read) = classifier.call_to_end(leads) else {
        // Too few beats for a template: a burst or a run of wide beats may still show.
        return match burst(leads, names).or_else(|| wide_words(leads, names)) {
            Some(said) => VtEvidence {
                probability: SUDDEN_RUN,
                uncalled: Some(said),
                ..none
            },
            None => none,
        };
    };
    let fs = SAMPLE_RATE_HZ as f64;
    let lowest = CALL_GRID[0];
    // The longest fast run at each call, highest call first.
    let mut best: Option<(usize, f64, f32)> = None;
    for &g in CALL_GRID.iter().rev() {
        if let Some((n, rate)) = longest_fast_run(&read.peaks, &called_at(&read.p, g as f64))
            && n >= VT_MIN_BEATS
        {
            best = Some((n, rate, g));
            break;
        }
    }
    let at_lowest = longest_fast_run(&read.peaks, &called_at(&read.p, lowest as f64));
    let other: Vec<f64> = read
        .peaks
        .windows(2)
        .zip(read.p.windows(2))
        .filter(|(_, p)| p[0] < VENTRICULAR_AT && p[1] < VENTRICULAR_AT)
        .map(|(r, _)| (r[1] - r[0]) as f64)
        .collect();
    let other_rate = (!other.is_empty()).then(|| 60.0 * fs / median(&other));
    let (probability, run) = match (best, at_lowest) {
        (Some((n, rate, g)), _) => {
            let top = CALL_GRID[CALL_GRID.len() - 1];
            (0.5 + 0.5 * (g - lowest) / (top - lowest), Some((n, rate)))
        }
        (None, Some((n, rate))) => (
            0.4 * n.min(VT_MIN_BEATS - 1) as f32 / (VT_MIN_BEATS - 1) as f32,
            Some((n, rate)),
        ),
        (None, None) => (0.0, None),
    };
    // Fast beats the classifier calls like the others, sudden up to the alarm's instant; else
    // a burst the counter's detector merges; else a run of wide beats it misses.
    let uncalled = if probability >= SUDDEN_RUN {
        None
    } else if let Some((n, rate)) = sudden_run(&read.peaks) {
        Some(format!(
            "{n} beats at {rate:.0}/min up to the alarm's instant, sudden after slower beats, \
             their shape not called ventricular on {}",
            join(names.iter().copied())
        ))
    } else {
        burst(leads, names).or_else(|| wide_words(leads, names))
    };
    match uncalled {
        Some(said) => VtEvidence {
            probability: SUDDEN_RUN,
            run,
            other_rate,
            uncalled: Some(said),
        },
        None => VtEvidence {
            probability,
            run,
            other_rate,
            uncalled: None,
        },
    }
}

/// A run of wide beats the detector missed ([`wide_run`](wide_run::wide_run)), in words.
fn wide_words(leads: &[&[f32]], names: &[&str]) -> Option<String> {
    wide_run::wide_run(leads).map(|r| {
        format!(
            "{} wide beats at {:.0}/min up to the alarm's instant on {}, sudden after slower \
             beats",
            r.intervals + 1,
            r.rate_bpm,
            names[r.lead]
        )
    })
}

/// A burst in the look-back's last [`BURST_SECS`] (see there), in words; `None` without one.
fn burst(leads: &[&[f32]], names: &[&str]) -> Option<String> {
    let fs = SAMPLE_RATE_HZ as f64;
    let tail = (BURST_SECS * fs) as usize;
    // The lead with the most beats in the stretch, and its median interval before it.
    let mut most: Option<(usize, f64, usize)> = None;
    for (k, l) in leads.iter().enumerate() {
        let from = l.len() as i64 - tail as i64;
        let beats = detect_qrs_length(l, fs);
        let last = beats.iter().filter(|&&b| b >= from).count();
        let before: Vec<f64> = beats
            .windows(2)
            .filter(|w| w[1] < from)
            .map(|w| (w[1] - w[0]) as f64)
            .collect();
        let rr = if before.is_empty() {
            0.0
        } else {
            median(&before)
        };
        if most.is_none_or(|m| last > m.0) {
            most = Some((last, rr, k));
        }
    }
    if let Some((n, rr, k)) = most
        && n >= BURST_BEATS
        && rr > 0.0
        && (tail as f64 / n as f64) < BURST_RR * rr
    {
        return Some(format!(
            "a burst of {n} beats in the last {BURST_SECS:.0} s on {} (about {:.0}/min, the \
             beats before every {:.2} s)",
            names[k],
            60.0 * n as f64 / BURST_SECS,
            rr / fs
        ));
    }
    leads
        .iter()
        .zip(names)
        .find(|(l, _)| l.len() >= tail && vf_likeness(&l[l.len() - tail..]) >= BURST_WAVES)
        .map(|(_, name)| format!("fast regular waves in the last {BURST_SECS:.0} s on {name}"))
}

/// The sudden intervals ([`SUDDEN_RR`]) in a row that end at the last beat of `peaks`, where
/// there are [`VT_MIN_BEATS`] or more: how many, and their rate per minute.
fn sudden_run(peaks: &[usize]) -> Option<(usize, f64)> {
    let rr: Vec<f64> = peaks.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    if rr.is_empty() {
        return None;
    }
    let fs = SAMPLE_RATE_HZ as f64;
    let limit = (0.6 * fs).min(SUDDEN_RR * median(&rr));
    let n = rr.iter().rev().take_while(|&&x| x < limit).count();
    let span: f64 = rr[rr.len() - n..].iter().sum();
    (n >= VT_MIN_BEATS).then(|| (n, 60.0 * fs * n as f64 / span))
}

/// The longest run of consecutive `called` beats (R peaks at `peaks`) of at least two, faster
/// than 100/min on average, and its rate per minute.
fn longest_fast_run(peaks: &[usize], called: &[bool]) -> Option<(usize, f64)> {
    let mut best: Option<(usize, f64)> = None;
    for (first, last, _) in called_runs(peaks, called).filter(|r| r.2) {
        let n = last - first + 1;
        if best.is_none_or(|(b, _)| n >= b) {
            let span = (peaks[last] - peaks[first]).max(1) as f64;
            best = Some((n, 60.0 * SAMPLE_RATE_HZ as f64 * (n - 1) as f64 / span));
        }
    }
    best
}

/// "II", "II and V", "I, II and V".
fn join<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.collect();
    match v.as_slice() {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// "lead V" or "leads II and V".
fn lead_word(names: &str, n: usize) -> String {
    if n == 1 {
        format!("lead {names}")
    } else {
        format!("leads {names}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::test_signals::{fibrillation, noise, sinus, wide_run};

    /// Calls a beat ventricular when it correlates poorly with the template.
    fn classifier() -> BeatClassifier {
        BeatClassifier::on_first_feature(-20.0, 10.0)
    }

    fn judge(leads: &[(&str, &[f32])], kind: MonitorAlarmKind) -> Opinion {
        let leads: Vec<Lead> = leads
            .iter()
            .map(|&(name, samples)| Lead { name, samples })
            .collect();
        adjudicate(&classifier(), &leads, kind, None, CONFIRM_AT).expect("a judged kind")
    }

    /// `a` then `b`.
    fn then(a: &[f32], b: &[f32]) -> Vec<f32> {
        a.iter().chain(b).copied().collect()
    }

    #[test]
    fn a_run_up_to_the_alarms_instant_confirms_a_vt_alarm() {
        // Sinus at 80/min, then 3 s of wide beats at 165/min up to the onset.
        let x = then(&sinus(1, 80.0, 13.0), &wide_run(165.0, 160.0, 3.0));
        let o = judge(&[("II", &x)], MonitorAlarmKind::Vt);
        assert!(o.confirmed, "{o:?}");
        assert!(o.reason.contains("ventricular beats at"), "{o:?}");
        assert!(o.reason.ends_with("on II"), "{o:?}");
    }

    #[test]
    fn a_sudden_fast_run_up_to_the_instant_confirms_though_its_beats_look_like_the_others() {
        // Sinus at 70/min, then beats of the same shape at 150/min up to the onset: seven
        // sudden intervals confirm at SUDDEN_RUN; three (a salvo's length) do not.
        let long = then(&sinus(12, 70.0, 12.0), &sinus(13, 150.0, 2.9));
        let o = judge(&[("II", &long)], MonitorAlarmKind::Vt);
        assert_eq!(o.probability, SUDDEN_RUN, "{o:?}");
        assert!(o.confirmed && o.reason.contains("sudden"), "{o:?}");
        let short = then(&sinus(12, 70.0, 14.0), &sinus(13, 150.0, 1.3));
        let o = judge(&[("II", &short)], MonitorAlarmKind::Vt);
        assert!(o.probability < SUDDEN_RUN && !o.confirmed, "{o:?}");
    }

    #[test]
    fn a_burst_at_280_a_minute_is_found_where_the_counters_detector_merges_its_beats() {
        // Sinus at 70/min, then 2 s of narrow-coupled wide beats at 280/min up to the onset.
        let x = then(&sinus(14, 70.0, 14.0), &wide_run(280.0, 80.0, 2.0));
        let said = burst(&[&x], &["II"]).expect("a burst");
        assert!(
            said.starts_with("a burst of") && said.contains("on II"),
            "{said}"
        );
        let s = sinus(15, 70.0, 16.0);
        assert_eq!(burst(&[&s], &["II"]), None);
        let fast = sinus(16, 150.0, 16.0);
        assert_eq!(
            burst(&[&fast], &["II"]),
            None,
            "a steady fast rhythm is no burst"
        );
    }

    #[test]
    fn sinus_rhythm_doubts_a_vt_alarm_and_says_its_rate() {
        let x = sinus(2, 88.0, 16.0);
        let o = judge(&[("II", &x)], MonitorAlarmKind::Vt);
        assert!(!o.confirmed, "{o:?}");
        assert!(o.probability < 0.3, "{o:?}");
        assert!(o.reason.contains("no run"), "{o:?}");
    }

    #[test]
    fn a_flat_lead_is_named_and_the_other_read() {
        let ii = sinus(3, 88.0, 16.0);
        let v = vec![0.01f32; ii.len()];
        let o = judge(&[("II", &ii), ("V", &v)], MonitorAlarmKind::Vt);
        assert!(!o.confirmed, "{o:?}");
        assert!(o.reason.contains("lead V flat"), "{o:?}");
        assert!(o.reason.contains("on II"), "{o:?}");
        let both = judge(&[("II", &v), ("V", &v)], MonitorAlarmKind::Vt);
        assert_eq!(both.probability, 0.0);
        assert_eq!(both.reason, "no readable ECG: II and V flat");
    }

    #[test]
    fn a_signal_that_starts_late_is_read_from_its_start() {
        // Absent (flat) for 8 s, then 6 s of sinus, then a run up to the onset: the run's
        // beats are compared with the sinus beats, not with the flat start (where the run
        // outnumbers the sinus beats it becomes the template: a limit of reading 16 s).
        let x = then(
            &then(&vec![0.0; 8 * SAMPLE_RATE_HZ], &sinus(4, 80.0, 6.0)),
            &wide_run(170.0, 160.0, 2.0),
        );
        let o = judge(&[("II", &x)], MonitorAlarmKind::Vt);
        assert!(o.confirmed, "{o:?}");
    }

    #[test]
    fn three_seconds_of_signal_after_a_flat_stretch_are_read_and_two_are_not() {
        for (secs, read) in [(3.2, true), (2.2, false)] {
            let x = then(
                &vec![0.0; (16.0 - secs) as usize * SAMPLE_RATE_HZ],
                &sinus(6, 80.0, secs),
            );
            let o = judge(&[("II", &x)], MonitorAlarmKind::Vt);
            assert_eq!(
                !o.reason.contains("no readable ECG"),
                read,
                "{secs} s: {o:?}"
            );
        }
    }

    #[test]
    fn noise_is_named_where_the_detectors_disagree() {
        let x = noise(5, 1.5, 16.0);
        let o = judge(&[("II", &x)], MonitorAlarmKind::Vt);
        assert!(o.reason.contains("noise on II"), "{o:?}");
    }

    #[test]
    fn fibrillatory_waves_confirm_a_vf_alarm_and_sinus_doubts_it() {
        let x = then(&sinus(6, 80.0, 10.0), &fibrillation(7, 6.0));
        let o = judge(&[("II", &x)], MonitorAlarmKind::Vf);
        assert!(o.confirmed, "{o:?}");
        assert!(o.reason.starts_with("fibrillatory waves on II"), "{o:?}");
        let s = sinus(8, 80.0, 16.0);
        assert!(!judge(&[("II", &s)], MonitorAlarmKind::Vf).confirmed);
    }

    #[test]
    fn the_ensembles_risk_confirms_what_the_beats_alone_would_doubt() {
        let x = sinus(10, 88.0, 16.0);
        let lead = [Lead {
            name: "II",
            samples: &x,
        }];
        let vt = MonitorAlarmKind::Vt;
        let alone = adjudicate(&classifier(), &lead, vt, None, CONFIRM_AT).unwrap();
        let low = adjudicate(&classifier(), &lead, vt, Some(0.1), CONFIRM_AT).unwrap();
        assert_eq!(low.probability, alone.probability.max(0.1));
        assert!(!low.confirmed);
        let high = adjudicate(&classifier(), &lead, vt, Some(0.8), CONFIRM_AT).unwrap();
        assert!(high.confirmed && high.probability == 0.8, "{high:?}");
        assert!(
            high.reason.starts_with("the ensemble's risk 0.80"),
            "{high:?}"
        );
    }

    #[test]
    fn leads_of_different_lengths_are_read_over_the_same_last_stretch() {
        let ii = then(&sinus(11, 80.0, 13.0), &wide_run(165.0, 160.0, 3.0));
        let v: Vec<f32> = ii[ii.len() - 5 * SAMPLE_RATE_HZ..]
            .iter()
            .map(|x| -0.5 * x)
            .collect();
        let o = judge(&[("II", &ii), ("V", &v)], MonitorAlarmKind::Vt);
        assert!(o.probability.is_finite(), "{o:?}");
    }

    #[test]
    fn the_point_served_is_the_one_the_folds_kept_beside_the_classifier() {
        use crate::signal::beats::{BeatRule, OpinionPoint};
        let mut file = BeatsFile {
            classifier: classifier(),
            rule: BeatRule {
                call_at: 0.9,
                min_bsqi: 0.0,
            },
            chosen_by: None,
            opinion: None,
        };
        assert_eq!(served_point(&file), CONFIRM_AT);
        file.opinion = Some(OpinionPoint {
            confirm_at: 0.55,
            how: "the folds' median".into(),
            folds: vec![0.5, 0.55, 0.6],
        });
        assert_eq!(served_point(&file), 0.55);
        // The file's point reads back as written.
        let dir = tempfile::tempdir().unwrap();
        file.save(dir.path()).unwrap();
        let back = crate::signal::beats::BeatCounter::load(dir.path(), 5)
            .unwrap()
            .unwrap();
        assert_eq!(served_point(&back.file), 0.55);
    }

    #[test]
    fn kinds_holmes_does_not_judge_get_no_opinion() {
        let x = sinus(9, 80.0, 16.0);
        let lead = [Lead {
            name: "II",
            samples: &x,
        }];
        assert!(adjudicate(&classifier(), &lead, MonitorAlarmKind::Asystole, None, 0.5).is_none());
    }
}
