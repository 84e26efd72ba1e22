//! From annotations to time intervals: ventricular tachyarrhythmia, noise per lead, beats.
//!
//! Rules (documented in the README's "Task" section):
//! - positive time is the union of rhythm episodes labelled `(VT`, `(VFL`, `(VF` or `(VFIB`
//!   (a `+` annotation's rhythm lasts until the next rhythm label or the record end) and of
//!   `[` ... `]` flutter/fibrillation episodes (an unmatched `[` runs to the record end);
//! - vfdb's `(NOISE` is not a rhythm: the previous rhythm continues underneath it, and its span
//!   is noise on every lead;
//! - `~` annotations set the noise state per lead from their subtype: bits 0-3 noisy, bits 4-7
//!   unreadable, -1 every lead unreadable, 0 clean again.

use crate::training::wfdb::Annotation;

/// Half-open sample interval `[start, end)`.
pub type Span = (i64, i64);

/// Rhythm labels that make time positive.
pub const VENTRICULAR_RHYTHMS: [&str; 4] = ["(VT", "(VFL", "(VF", "(VFIB"];

/// Beat annotation symbols that mark a QRS complex (WFDB's `isqrs`, plus flutter waves).
const QRS_SYMBOLS: [&str; 17] = [
    "N", "L", "R", "a", "V", "F", "J", "A", "S", "E", "j", "/", "Q", "e", "n", "f", "!",
];

/// Intervals of ventricular tachyarrhythmia, sorted and merged.
pub fn ventricular_spans(ann: &[Annotation], len: i64) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut rhythm: Option<(i64, bool)> = None; // (start, positive)
    let mut flutter_start: Option<i64> = None;
    for a in ann {
        match a.symbol() {
            "+" => {
                let Some(aux) = a.aux.as_deref().map(|s| s.trim_end_matches('\0')) else {
                    continue;
                };
                if !aux.starts_with('(') || aux == "(NOISE" {
                    continue;
                }
                if let Some((s, true)) = rhythm {
                    spans.push((s, a.sample));
                }
                rhythm = Some((a.sample, VENTRICULAR_RHYTHMS.contains(&aux)));
            }
            "[" => {
                flutter_start.get_or_insert(a.sample);
            }
            "]" => {
                if let Some(s) = flutter_start.take() {
                    spans.push((s, a.sample));
                }
            }
            _ => {}
        }
    }
    if let Some((s, true)) = rhythm {
        spans.push((s, len));
    }
    if let Some(s) = flutter_start {
        spans.push((s, len));
    }
    merge(spans, len)
}

/// Noise-marked intervals for each of `leads` signals.
pub fn noise_spans(ann: &[Annotation], leads: usize, len: i64) -> Vec<Vec<Span>> {
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
                let aux = a.aux.as_deref().unwrap_or("");
                if !aux.starts_with('(') {
                    continue;
                }
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

/// Sample indices of annotated QRS complexes, or `None` if the file annotates no beats.
pub fn annotated_beats(ann: &[Annotation]) -> Option<Vec<i64>> {
    let beats: Vec<i64> = ann
        .iter()
        .filter(|a| QRS_SYMBOLS.contains(&a.symbol()))
        .map(|a| a.sample)
        .collect();
    (!beats.is_empty()).then_some(beats)
}

/// Sorts, clips to `[0, len)` and merges overlapping spans.
pub fn merge(mut spans: Vec<Span>, len: i64) -> Vec<Span> {
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
pub fn overlap(spans: &[Span], start: i64, end: i64) -> i64 {
    spans
        .iter()
        .map(|&(s, e)| (e.min(end) - s.max(start)).max(0))
        .sum()
}

/// Rescales annotation sample indices from `from_hz` to `to_hz` (rounded to nearest).
pub fn rescale(ann: &mut [Annotation], from_hz: f64, to_hz: f64) {
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
    fn rhythm_and_flutter_episodes_union() {
        let a = vec![
            ann(0, 28, Some("(N"), 0),
            ann(100, 28, Some("(VT"), 0),
            ann(150, 28, Some("(NOISE"), 0), // VT continues underneath
            ann(200, 28, Some("(N"), 0),
            ann(180, 32, None, 0), // '[' overlapping the VT end
            ann(260, 33, None, 0), // ']'
            ann(900, 32, None, 0), // unmatched '[' runs to the end
        ];
        assert_eq!(ventricular_spans(&a, 1000), vec![(100, 260), (900, 1000)]);
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
}
