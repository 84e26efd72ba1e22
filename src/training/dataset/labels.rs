//! From annotations to time intervals: ventricular tachyarrhythmia episodes, noise per lead,
//! beats, and the label of a window by its end.
//!
//! Rules (documented in docs/ZOO.md, "The task the zoo learns"):
//! - **VF/VFL episodes**: `[` ... `]` flutter/fibrillation brackets (an unmatched `[` runs to the
//!   record end) and rhythm episodes labelled `(VF`, `(VFL` or `(VFIB`;
//! - **VT episodes**: in a database that labels ventricular beats (mitdb, svdb, nstdb), runs of
//!   at least [`VT_MIN_BEATS`] consecutive ventricular beats (`V`, `E`, `r`, `F`, as WFDB's
//!   `rxr` counts them) at a mean rate above [`VT_MIN_RATE_BPM`]; elsewhere (vfdb, cudb, whose
//!   beats do not tell ventricular ones apart) rhythm episodes labelled `(VT`;
//! - a `+` annotation's rhythm lasts until the next rhythm label or the record end; vfdb's
//!   `(NOISE` is not a rhythm: the previous rhythm continues underneath it, and its span is
//!   noise on every lead;
//! - `~` annotations set the noise state per lead from their subtype: bits 0-3 noisy, bits 4-7
//!   unreadable, -1 every lead unreadable, 0 clean again.
//!
//! A window is labelled by its **end** ("is there a ventricular tachyarrhythmia now?"): positive
//! when an episode is confirmed by then (the fifth beat of a run, or [`RHYTHM_CONFIRM_SECS`] into
//! a rhythm-labelled episode) and did not end more than [`LABEL_GRACE_SECS`] before; unsure
//! between an episode's onset and its confirmation (no one can call it yet: left out of
//! training and of window metrics); negative otherwise.

use crate::training::wfdb::Annotation;

/// Half-open sample interval `[start, end)`.
pub(crate) type Span = (i64, i64);

/// Rhythm labels of ventricular fibrillation or flutter.
const VF_RHYTHMS: [&str; 3] = ["(VFL", "(VF", "(VFIB"];
/// Consecutive ventricular beats that make a VT run.
pub(crate) const VT_MIN_BEATS: usize = 5;
/// Mean rate a run must exceed to be VT (beats/min).
pub(crate) const VT_MIN_RATE_BPM: f64 = 100.0;
/// A rhythm-labelled episode counts as visible this long after its labelled onset.
pub(crate) const RHYTHM_CONFIRM_SECS: f64 = 2.0;
/// A window stays positive this long after an episode ends.
pub(crate) const LABEL_GRACE_SECS: f64 = 3.0;
/// Beat labels that extend a ventricular run (WFDB `rxr`).
const VENTRICULAR_BEATS: [&str; 4] = ["V", "E", "r", "F"];

/// VT or VF/VFL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EpisodeKind {
    Vt,
    Vf,
}

/// One reference episode of ventricular tachyarrhythmia (samples at the record's rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Episode {
    pub(crate) kind: EpisodeKind,
    /// First sample: the run's first beat, or the rhythm label.
    pub(crate) onset: i64,
    /// From here on the episode can be called: the run's fifth beat, or
    /// [`RHYTHM_CONFIRM_SECS`] after a rhythm label (never past `end`).
    pub(crate) confirmed: i64,
    /// One past the last sample.
    pub(crate) end: i64,
}

/// The label of a window by its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Label {
    Negative,
    Positive,
    /// Between an episode's onset and its confirmation: left out.
    Unsure,
}

/// The label of a window ending at sample `end` (exclusive) of a record with `episodes`;
/// `grace` samples after an episode's end still count as positive.
pub(crate) fn label_at(episodes: &[Episode], end: i64, grace: i64) -> Label {
    let mut unsure = false;
    for e in episodes {
        if e.confirmed < end && end <= e.end + grace {
            return Label::Positive;
        }
        unsure |= e.onset < end && end <= e.confirmed;
    }
    if unsure {
        Label::Unsure
    } else {
        Label::Negative
    }
}

/// Reference episodes of a record, sorted by onset; episodes of one kind that overlap are
/// merged. `beat_runs`: VT comes from ventricular beat runs (else from `(VT` rhythm labels);
/// `fs`: the annotations' sampling rate.
pub(crate) fn episodes(ann: &[Annotation], len: i64, beat_runs: bool, fs: f64) -> Vec<Episode> {
    let confirm = (RHYTHM_CONFIRM_SECS * fs).round() as i64;
    let rhythm = |start: i64, end: i64, kind| Episode {
        kind,
        onset: start,
        confirmed: (start + confirm).min(end),
        end,
    };
    let mut out = Vec::new();
    for (s, e, aux) in rhythm_spans(ann, len) {
        if VF_RHYTHMS.contains(&aux) {
            out.push(rhythm(s, e, EpisodeKind::Vf));
        } else if aux == "(VT" && !beat_runs {
            out.push(rhythm(s, e, EpisodeKind::Vt));
        }
    }
    let mut flutter_start: Option<i64> = None;
    for a in ann {
        match a.symbol() {
            "[" => {
                flutter_start.get_or_insert(a.sample);
            }
            "]" => {
                if let Some(s) = flutter_start.take() {
                    out.push(rhythm(s, a.sample, EpisodeKind::Vf));
                }
            }
            _ => {}
        }
    }
    if let Some(s) = flutter_start {
        out.push(rhythm(s, len, EpisodeKind::Vf));
    }
    if beat_runs {
        out.extend(ventricular_runs(ann, fs));
    }
    merge_episodes(out, len)
}

/// Runs of [`VT_MIN_BEATS`] or more consecutive ventricular beats faster than
/// [`VT_MIN_RATE_BPM`]; a run ends one mean beat interval after its last beat.
fn ventricular_runs(ann: &[Annotation], fs: f64) -> Vec<Episode> {
    let mut out = Vec::new();
    let mut run: Vec<i64> = Vec::new();
    let mut flush = |run: &mut Vec<i64>| {
        if run.len() >= VT_MIN_BEATS {
            let (first, last) = (run[0], run[run.len() - 1]);
            let rr = (last - first) as f64 / (run.len() - 1) as f64;
            if rr > 0.0 && 60.0 * fs / rr > VT_MIN_RATE_BPM {
                out.push(Episode {
                    kind: EpisodeKind::Vt,
                    onset: first,
                    confirmed: run[VT_MIN_BEATS - 1],
                    end: last + rr.round() as i64,
                });
            }
        }
        run.clear();
    };
    for a in ann {
        let sym = a.symbol();
        if VENTRICULAR_BEATS.contains(&sym) {
            run.push(a.sample);
        } else if QRS_SYMBOLS.contains(&sym) {
            flush(&mut run);
        }
    }
    flush(&mut run);
    out
}

/// The rhythm label of a `+` annotation (`(N`, `(VT`, `(NOISE`, ...), if it carries one.
fn rhythm_label(a: &Annotation) -> Option<&str> {
    if a.symbol() != "+" {
        return None;
    }
    a.aux.as_deref().filter(|aux| aux.starts_with('('))
}

/// Rhythm intervals `(start, end, label)` from `+` annotations (not `(NOISE`).
fn rhythm_spans(ann: &[Annotation], len: i64) -> Vec<(i64, i64, &str)> {
    let mut out = Vec::new();
    let mut open: Option<(i64, &str)> = None;
    for a in ann {
        let Some(aux) = rhythm_label(a).filter(|&l| l != "(NOISE") else {
            continue;
        };
        if let Some((s, label)) = open.take() {
            out.push((s, a.sample, label));
        }
        open = Some((a.sample, aux));
    }
    if let Some((s, label)) = open {
        out.push((s, len, label));
    }
    out
}

/// Clips to `[0, len)`, sorts by onset and merges overlapping episodes of one kind (the
/// earliest onset and confirmation, the latest end).
fn merge_episodes(mut eps: Vec<Episode>, len: i64) -> Vec<Episode> {
    eps.retain_mut(|e| {
        e.onset = e.onset.clamp(0, len);
        e.end = e.end.clamp(0, len);
        e.confirmed = e.confirmed.clamp(e.onset, e.end);
        e.end > e.onset
    });
    eps.sort_by_key(|e| (e.kind, e.onset));
    let mut out: Vec<Episode> = Vec::with_capacity(eps.len());
    for e in eps {
        match out.last_mut() {
            Some(last) if last.kind == e.kind && e.onset <= last.end => {
                last.end = last.end.max(e.end);
                last.confirmed = last.confirmed.min(e.confirmed);
            }
            _ => out.push(e),
        }
    }
    out.sort_by_key(|e| (e.onset, e.kind));
    out
}

/// Beat annotation symbols that mark a QRS complex (WFDB's `isqrs`, plus flutter waves).
const QRS_SYMBOLS: [&str; 17] = [
    "N", "L", "R", "a", "V", "F", "J", "A", "S", "E", "j", "/", "Q", "e", "n", "f", "!",
];

/// Noise-marked intervals for each of `leads` signals.
pub(crate) fn noise_spans(ann: &[Annotation], leads: usize, len: i64) -> Vec<Vec<Span>> {
    let mut out = vec![Vec::new(); leads];
    let mut since: Vec<Option<i64>> = vec![None; leads];
    let mut noise_rhythm: Option<i64> = None;
    for a in ann {
        match a.symbol() {
            "~" => {
                for (lead, open) in since.iter_mut().enumerate() {
                    let noisy = a.subtype == -1 || (a.subtype as u8 >> lead) & 0x11 != 0;
                    match (noisy, *open) {
                        (true, None) => *open = Some(a.sample),
                        (false, Some(s)) => {
                            out[lead].push((s, a.sample));
                            *open = None;
                        }
                        _ => {}
                    }
                }
            }
            "+" => {
                let Some(aux) = rhythm_label(a) else {
                    continue;
                };
                match (aux == "(NOISE", noise_rhythm) {
                    (true, None) => noise_rhythm = Some(a.sample),
                    (false, Some(s)) => {
                        out.iter_mut().for_each(|v| v.push((s, a.sample)));
                        noise_rhythm = None;
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    for (lead, open) in since.into_iter().enumerate() {
        if let Some(s) = open {
            out[lead].push((s, len));
        }
    }
    if let Some(s) = noise_rhythm {
        out.iter_mut().for_each(|v| v.push((s, len)));
    }
    out.into_iter().map(|v| merge(v, len)).collect()
}

/// Rhythm labels of repeated ventricular ectopy short of VT: bigeminy, trigeminy, high-grade
/// ventricular ectopic activity, idioventricular and ventricular escape rhythm.
const ECTOPIC_RHYTHMS: [&str; 5] = ["(B", "(T", "(HGEA", "(IVR", "(VER"];

/// Where the annotations show ventricular ectopy: one sample-long span at each ventricular
/// beat (`V`, `E`, `r`, `F`) and the intervals of [`ECTOPIC_RHYTHMS`] labels, sorted by start
/// and not merged (a caller counts beats). The windows they end in are the hard negatives of
/// a VT detector: single PVCs, couplets and bigeminy look like the start of a run.
pub(crate) fn ectopy_spans(ann: &[Annotation], len: i64) -> Vec<Span> {
    let mut out: Vec<Span> = ann
        .iter()
        .filter(|a| VENTRICULAR_BEATS.contains(&a.symbol()))
        .map(|a| (a.sample, a.sample + 1))
        .chain(
            rhythm_spans(ann, len)
                .into_iter()
                .filter(|(_, _, l)| ECTOPIC_RHYTHMS.contains(l))
                .map(|(a, b, _)| (a, b)),
        )
        .filter(|&(a, b)| b > a && a < len)
        .collect();
    out.sort_unstable();
    out
}

/// Beat labels of paced and paced-fusion beats.
const PACED_BEATS: [&str; 2] = ["/", "f"];
/// Rhythm labels of paced rhythm: mitdb's `(P`, vfdb's `(PM` (not `(PREX`, pre-excitation).
const PACED_RHYTHMS: [&str; 2] = ["(P", "(PM"];

/// Whether a record is paced: its annotations hold a paced or paced-fusion beat or a paced
/// rhythm label. EC57's evaluations leave such records out (`ecgeval`'s `mitxlist` omits mitdb
/// 102, 104, 107 and 217, the records this finds in mitdb); vfdb 602's `(PM` is found alike.
pub(crate) fn paced(ann: &[Annotation]) -> bool {
    ann.iter().any(|a| {
        PACED_BEATS.contains(&a.symbol())
            || rhythm_label(a).is_some_and(|l| PACED_RHYTHMS.contains(&l))
    })
}

/// Sample indices of annotated QRS complexes, or `None` if the file annotates no beats.
pub(crate) fn annotated_beats(ann: &[Annotation]) -> Option<Vec<i64>> {
    let beats: Vec<i64> = ann
        .iter()
        .filter(|a| QRS_SYMBOLS.contains(&a.symbol()))
        .map(|a| a.sample)
        .collect();
    (!beats.is_empty()).then_some(beats)
}

/// Sorts, clips to `[0, len)` and merges overlapping spans.
pub(crate) fn merge(mut spans: Vec<Span>, len: i64) -> Vec<Span> {
    spans.retain_mut(|s| {
        s.0 = s.0.clamp(0, len);
        s.1 = s.1.clamp(0, len);
        s.1 > s.0
    });
    spans.sort_unstable();
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.0 <= last.1 => last.1 = last.1.max(s.1),
            _ => out.push(s),
        }
    }
    out
}

/// Samples of `[start, end)` covered by `spans` (sorted, merged).
pub(crate) fn overlap(spans: &[Span], start: i64, end: i64) -> i64 {
    spans
        .iter()
        .map(|&(s, e)| (e.min(end) - s.max(start)).max(0))
        .sum()
}

/// Rescales annotation sample indices from `from_hz` to `to_hz` (rounded to nearest).
pub(crate) fn rescale(ann: &mut [Annotation], from_hz: f64, to_hz: f64) {
    if from_hz == to_hz {
        return;
    }
    for a in ann {
        a.sample = (a.sample as f64 * to_hz / from_hz).round() as i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(sample: i64, code: u8, aux: Option<&str>, subtype: i8) -> Annotation {
        Annotation {
            sample,
            code,
            subtype,
            chan: 0,
            num: 0,
            aux: aux.map(str::to_owned),
        }
    }

    #[test]
    fn rhythm_and_flutter_episodes() {
        let a = vec![
            ann(0, 28, Some("(N"), 0),
            ann(100, 28, Some("(VT"), 0),
            ann(150, 28, Some("(NOISE"), 0), // VT continues underneath
            ann(200, 28, Some("(N"), 0),
            ann(180, 32, None, 0), // '[' overlapping the VT end
            ann(260, 33, None, 0), // ']'
            ann(900, 32, None, 0), // unmatched '[' runs to the end
        ];
        let ep = |kind, onset, confirmed, end| Episode {
            kind,
            onset,
            confirmed,
            end,
        };
        assert_eq!(
            episodes(&a, 1000, false, 250.0),
            vec![
                ep(EpisodeKind::Vt, 100, 200, 200),
                ep(EpisodeKind::Vf, 180, 260, 260),
                ep(EpisodeKind::Vf, 900, 1000, 1000),
            ]
        );
    }

    #[test]
    fn noise_by_subtype_and_noise_rhythm() {
        let a = vec![
            ann(10, 14, None, 1),  // lead 0 noisy
            ann(20, 14, None, 0),  // clean
            ann(30, 14, None, 32), // lead 1 unreadable (bit 5)
            ann(40, 14, None, -1), // all unreadable
            ann(50, 14, None, 0),
            ann(60, 28, Some("(NOISE"), 0),
            ann(70, 28, Some("(N"), 0),
        ];
        let n = noise_spans(&a, 2, 100);
        assert_eq!(n[0], vec![(10, 20), (40, 50), (60, 70)]);
        assert_eq!(n[1], vec![(30, 50), (60, 70)]);
        assert_eq!(overlap(&n[1], 0, 100), 30);
    }

    fn beat(sample: i64, sym: &str) -> Annotation {
        let code = match sym {
            "N" => 1,
            "V" => 5,
            "F" => 6,
            _ => unreachable!(),
        };
        ann(sample, code, None, 0)
    }

    /// Beats every `rr` samples from `start`, one symbol each.
    fn beats(start: i64, rr: i64, syms: &str) -> Vec<Annotation> {
        syms.chars()
            .enumerate()
            .map(|(i, c)| beat(start + i as i64 * rr, &c.to_string()))
            .collect()
    }

    #[test]
    fn a_vt_run_is_five_fast_ventricular_beats() {
        // 250 Hz: RR 100 samples = 150/min. NNVVVVVNN: five V (F counts) -> one run.
        let a = beats(0, 100, "NNVVVFVNN");
        let e = episodes(&a, 2000, true, 250.0);
        assert_eq!(
            e,
            vec![Episode {
                kind: EpisodeKind::Vt,
                onset: 200,
                confirmed: 600,
                end: 700,
            }]
        );
        // Four fast V beats, or five slow ones (RR 300 = 50/min), are not VT.
        assert!(episodes(&beats(0, 100, "NVVVVN"), 2000, true, 250.0).is_empty());
        assert!(episodes(&beats(0, 300, "NVVVVVN"), 4000, true, 250.0).is_empty());
    }

    #[test]
    fn paced_beats_or_a_paced_rhythm_make_a_record_paced() {
        // Codes: 1 N, 12 paced, 38 paced fusion, 28 rhythm.
        let plain = vec![ann(0, 1, None, 0), ann(300, 28, Some("(PREX"), 0)];
        assert!(!paced(&plain), "pre-excitation is not pacing");
        for extra in [
            ann(500, 12, None, 0),
            ann(500, 38, None, 0),
            ann(500, 28, Some("(P"), 0),
            ann(500, 28, Some("(PM"), 0),
        ] {
            let mut a = plain.clone();
            a.push(extra.clone());
            assert!(paced(&a), "{extra:?}");
        }
    }

    #[test]
    fn rhythm_labels_make_vt_only_where_beats_do_not() {
        let a = vec![
            ann(0, 28, Some("(N"), 0),
            ann(1000, 28, Some("(VT"), 0),
            ann(3000, 28, Some("(VFL"), 0),
            ann(4000, 28, Some("(N"), 0),
        ];
        let vf = Episode {
            kind: EpisodeKind::Vf,
            onset: 3000,
            confirmed: 3500,
            end: 4000,
        };
        let e = episodes(&a, 5000, false, 250.0);
        assert_eq!(
            e,
            vec![
                Episode {
                    kind: EpisodeKind::Vt,
                    onset: 1000,
                    confirmed: 1500,
                    end: 3000,
                },
                vf
            ]
        );
        // With beat labels the (VT label is not used, VF still is.
        assert_eq!(episodes(&a, 5000, true, 250.0), vec![vf]);
    }

    #[test]
    fn a_window_is_labelled_by_its_end() {
        let e = [Episode {
            kind: EpisodeKind::Vt,
            onset: 1000,
            confirmed: 1400,
            end: 2000,
        }];
        assert_eq!(label_at(&e, 1000, 750), Label::Negative);
        assert_eq!(label_at(&e, 1001, 750), Label::Unsure);
        assert_eq!(label_at(&e, 1400, 750), Label::Unsure);
        assert_eq!(label_at(&e, 1401, 750), Label::Positive);
        assert_eq!(label_at(&e, 2750, 750), Label::Positive);
        assert_eq!(label_at(&e, 2751, 750), Label::Negative);
    }

    #[test]
    fn ectopy_is_ventricular_beats_and_ectopic_rhythms() {
        let mut a = beats(0, 100, "NVNVNN");
        a.push(ann(700, 28, Some("(B"), 0));
        a.push(ann(900, 28, Some("(N"), 0));
        a.push(ann(950, 28, Some("(HGEA"), 0));
        a.sort_by_key(|x| x.sample);
        assert_eq!(
            ectopy_spans(&a, 1_000),
            vec![(100, 101), (300, 301), (700, 900), (950, 1_000)]
        );
    }
}
