//! Windows over records: label, data quality per lead, and the 1 Hz heart-rate series.

use serde::{Deserialize, Serialize};

use super::split::Split;
use super::{MAX_LEADS, RecordData, SAMPLE_RATE_HZ, SplitName, heart_rate_at, overlap};

/// How windows are cut and labelled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    /// Window length in seconds.
    pub window_secs: u32,
    /// Seconds between window starts.
    pub hop_secs: u32,
    /// A window is positive when it overlaps at least this much ventricular tachyarrhythmia.
    pub min_positive_secs: f32,
    /// A lead counts as absent in a window when more than this fraction is noise-marked.
    pub max_noise_fraction: f32,
}

impl Default for WindowSpec {
    fn default() -> Self {
        WindowSpec {
            window_secs: 30,
            hop_secs: 30,
            min_positive_secs: 5.0,
            max_noise_fraction: 0.5,
        }
    }
}

impl WindowSpec {
    /// Samples per window at 250 Hz.
    pub fn len(&self) -> usize {
        self.window_secs as usize * SAMPLE_RATE_HZ
    }

    pub fn is_empty(&self) -> bool {
        self.window_secs == 0
    }
}

/// One window of one record.
#[derive(Debug, Clone)]
pub struct Window {
    /// Index into [`Dataset::records`].
    pub record: usize,
    /// Stable id `db/record/start_sample`, the key of stored predictions.
    pub id: String,
    /// First sample (at 250 Hz).
    pub start: usize,
    pub label: bool,
    /// Seconds of ventricular tachyarrhythmia inside the window.
    pub positive_secs: f32,
    /// Noise-marked fraction per lead slot (1.0 for a lead the record lacks).
    pub noise_fraction: [f32; MAX_LEADS],
    /// Lead slot usable: the record has it and it is not mostly noise.
    pub leads: [bool; MAX_LEADS],
    /// Heart rate reported at the end of each second of the window (beats/min).
    pub heart_rate: Vec<f32>,
}

/// Records and their windows.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub spec: WindowSpec,
    pub records: Vec<RecordData>,
    pub windows: Vec<Window>,
}

impl Dataset {
    /// Cuts every record into windows per `spec` (a trailing partial window is dropped).
    pub fn new(records: Vec<RecordData>, spec: WindowSpec) -> Dataset {
        let len = spec.len();
        let hop = spec.hop_secs as usize * SAMPLE_RATE_HZ;
        let mut windows = Vec::new();
        for (ri, r) in records.iter().enumerate() {
            let mut start = 0;
            while start + len <= r.len() {
                windows.push(make_window(ri, r, start, &spec));
                start += hop;
            }
        }
        Dataset {
            spec,
            records,
            windows,
        }
    }

    /// The ECG samples (mV) of lead slot `lead` of window `w`, if the record has that lead.
    pub fn ecg(&self, w: &Window, lead: usize) -> Option<&[f32]> {
        self.records[w.record]
            .leads
            .get(lead)
            .map(|l| &l[w.start..w.start + self.spec.len()])
    }

    /// Indices of the windows whose record is in `name` of `split`.
    pub fn indices(&self, split: &Split, name: SplitName) -> Vec<usize> {
        (0..self.windows.len())
            .filter(|&i| split.of(&self.records[self.windows[i].record].key) == Some(name))
            .collect()
    }

    /// Window index by id.
    pub fn find(&self, id: &str) -> Option<usize> {
        self.windows.iter().position(|w| w.id == id)
    }
}

fn make_window(ri: usize, r: &RecordData, start: usize, spec: &WindowSpec) -> Window {
    let len = spec.len();
    let (s, e) = (start as i64, (start + len) as i64);
    let positive_secs = overlap(&r.positive, s, e) as f32 / SAMPLE_RATE_HZ as f32;
    let mut noise_fraction = [1.0f32; MAX_LEADS];
    let mut leads = [false; MAX_LEADS];
    for (lead, spans) in r.noise.iter().enumerate() {
        noise_fraction[lead] = overlap(spans, s, e) as f32 / len as f32;
        leads[lead] = noise_fraction[lead] <= spec.max_noise_fraction;
    }
    let t0 = start as f64 / SAMPLE_RATE_HZ as f64;
    let heart_rate = (1..=spec.window_secs)
        .map(|k| heart_rate_at(&r.beats, SAMPLE_RATE_HZ as f64, t0 + k as f64))
        .collect();
    Window {
        record: ri,
        id: format!("{}/{start}", r.key),
        start,
        label: positive_secs >= spec.min_positive_secs,
        positive_secs,
        noise_fraction,
        leads,
        heart_rate,
    }
}
