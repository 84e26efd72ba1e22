//! Windows over records, named by their **end**: a model of any observation window reads the
//! last N seconds before it, so members of different lengths score the same windows. The
//! label is the end's label ([`label_at`]); lead usability and the heart-rate series are
//! taken over the reading model's own length.

use serde::{Deserialize, Serialize};

use super::split::Split;
use super::{
    LABEL_GRACE_SECS, Label, MAX_LEADS, RecordData, SAMPLE_RATE_HZ, SplitName, heart_rate_at,
    label_at, overlap,
};

/// How the evaluation grid of window ends is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    /// Seconds between window ends on the grid.
    pub(crate) hop_secs: u32,
    /// The first end, in seconds from the record start: the longest window a model reads, so
    /// every model scores every window.
    pub(crate) first_end_secs: u32,
    /// Besides the grid, ends this many seconds apart inside every episode's positive time
    /// (from one second after its confirmation), so that short runs are represented.
    pub(crate) episode_hop_secs: u32,
    /// A lead counts as absent in a window when more than this fraction is noise-marked.
    pub(crate) max_noise_fraction: f32,
}

impl Default for WindowSpec {
    fn default() -> Self {
        WindowSpec {
            hop_secs: 10,
            first_end_secs: 30,
            episode_hop_secs: 5,
            max_noise_fraction: 0.5,
        }
    }
}

/// One window of one record: the samples before `end`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Index into [`Dataset::records`].
    pub record: usize,
    /// One past the last sample (at 250 Hz).
    pub end: usize,
    pub(crate) label: Label,
}

impl Window {
    pub fn positive(&self) -> bool {
        self.label == Label::Positive
    }
}

/// Records and the windows of their evaluation grid (unsure ends left out).
#[derive(Debug, Clone)]
pub struct Dataset {
    pub(crate) spec: WindowSpec,
    pub records: Vec<RecordData>,
    pub windows: Vec<Window>,
}

/// Samples a window stays positive after an episode ends.
pub(crate) fn grace_samples() -> i64 {
    (LABEL_GRACE_SECS * SAMPLE_RATE_HZ as f64).round() as i64
}

impl Dataset {
    /// Lays the evaluation grid over every record per `spec`.
    pub fn new(records: Vec<RecordData>, spec: WindowSpec) -> Dataset {
        let hz = SAMPLE_RATE_HZ;
        let first = spec.first_end_secs as usize * hz;
        let grace = grace_samples();
        let mut windows = Vec::new();
        for (ri, r) in records.iter().enumerate() {
            let mut ends: Vec<usize> = (first..=r.len())
                .step_by(spec.hop_secs.max(1) as usize * hz)
                .collect();
            for e in &r.episodes {
                let mut end = e.confirmed + hz as i64;
                while end <= e.end + grace {
                    ends.push(end as usize);
                    end += (spec.episode_hop_secs.max(1) as usize * hz) as i64;
                }
            }
            ends.retain(|&e| e >= first && e <= r.len());
            ends.sort_unstable();
            ends.dedup();
            windows.extend(
                ends.into_iter()
                    .filter_map(|end| labelled(ri, r, end, grace)),
            );
        }
        Dataset {
            spec,
            records,
            windows,
        }
    }

    /// Stable id `db/record/end_sample`, the key of stored predictions.
    pub(crate) fn id(&self, w: &Window) -> String {
        format!("{}/{}", self.records[w.record].key, w.end)
    }

    /// The last `samples` ECG samples (mV) of lead slot `lead` before the window's end, if
    /// the record has that lead and that much signal.
    pub fn ecg(&self, w: &Window, lead: usize, samples: usize) -> Option<&[f32]> {
        let start = w.end.checked_sub(samples)?;
        self.records[w.record]
            .leads
            .get(lead)
            .map(|l| &l[start..w.end])
    }

    /// Lead slot `lead` is present and at most [`WindowSpec::max_noise_fraction`] of the last
    /// `samples` before the end is noise-marked.
    pub(crate) fn lead_usable(&self, w: &Window, lead: usize, samples: usize) -> bool {
        let r = &self.records[w.record];
        if lead >= MAX_LEADS || w.end < samples {
            return false;
        }
        r.noise.get(lead).is_some_and(|spans| {
            let (s, e) = ((w.end - samples) as i64, w.end as i64);
            overlap(spans, s, e) as f32 <= self.spec.max_noise_fraction * samples as f32
        })
    }

    /// Heart rate reported at the end of each of the last `secs` seconds (beats/min).
    pub fn heart_rate(&self, w: &Window, secs: usize) -> Vec<f32> {
        let r = &self.records[w.record];
        let t_end = w.end as f64 / SAMPLE_RATE_HZ as f64;
        (0..secs)
            .rev()
            .map(|k| heart_rate_at(&r.beats, SAMPLE_RATE_HZ as f64, t_end - k as f64))
            .collect()
    }

    /// The window of record `record` (an index into [`Dataset::records`]) ending at `end`.
    pub fn window_at(&self, record: usize, end: usize) -> Window {
        let label = label_at(&self.records[record].episodes, end as i64, grace_samples());
        Window { record, end, label }
    }

    /// The window an id (`db/record/end_sample`) names, if its record is loaded.
    pub fn find(&self, id: &str) -> Option<Window> {
        let (key, end) = id.rsplit_once('/')?;
        let record = self.records.iter().position(|r| r.key == key)?;
        Some(self.window_at(record, end.parse().ok()?))
    }

    /// Indices of the grid windows whose record is in `name` of `split`.
    pub(crate) fn indices(&self, split: &Split, name: SplitName) -> Vec<usize> {
        (0..self.windows.len())
            .filter(|&i| split.of(&self.records[self.windows[i].record].key) == Some(name))
            .collect()
    }

    /// A denser set of windows for training: ends every `hop` samples from `first` samples
    /// into each record of `name` (unsure ends left out).
    pub(crate) fn dense(
        &self,
        split: &Split,
        name: SplitName,
        first: usize,
        hop: usize,
    ) -> Vec<Window> {
        let grace = grace_samples();
        self.records
            .iter()
            .enumerate()
            .filter(|(_, r)| split.of(&r.key) == Some(name))
            .flat_map(|(ri, r)| {
                (first..=r.len())
                    .step_by(hop.max(1))
                    .filter_map(move |end| labelled(ri, r, end, grace))
            })
            .collect()
    }
}

/// The window of record `ri` ending at `end`, unless its end is unsure.
fn labelled(ri: usize, r: &RecordData, end: usize, grace: i64) -> Option<Window> {
    let label = label_at(&r.episodes, end as i64, grace);
    (label != Label::Unsure).then_some(Window {
        record: ri,
        end,
        label,
    })
}
