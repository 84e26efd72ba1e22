//! The training and evaluation data set: PhysioNet records at 250 Hz, windows with labels,
//! lead presence and 1 Hz heart rate, and the patient-wise split.
//!
//! Reads records through [`wfdb`](crate::training::wfdb); [`train`](crate::training::train) and the zoo's
//! prediction checks consume [`Dataset`]. The normalisation that turns a window into model
//! input lives in [`zoo::preprocess`](crate::zoo::preprocess), shared with serving.

mod augment;
mod folds;
mod labels;
mod splice;
mod split;
mod windows;

pub(crate) use augment::{Augment, NoiseBank, qrs_peak_to_peak};
pub(crate) use folds::{deal, fold_split};
pub(crate) use labels::{Episode, EpisodeKind, LABEL_GRACE_SECS, Label, Span};

use augment::NoiseKind;
pub(crate) use labels::label_at;
use labels::overlap;
pub(crate) use splice::{RunShape, SpliceKind, SpliceMix, Spliced, splice, ventricular_beats};
pub use split::{Split, SplitName};
pub(crate) use windows::Window;
pub use windows::{Dataset, WindowSpec};

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::core::window::{MAX_LEADS, SAMPLE_RATE_HZ};
use crate::signal::heart_rate::{detect_qrs, heart_rate_at};
use crate::signal::resample::resample;
use crate::training::wfdb::{self, Record, WfdbError};

/// What can go wrong building the data set.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error(transparent)]
    Wfdb(#[from] WfdbError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "data folder {0} has none of vfdb/, cudb/, mitdb/, svdb/, nstdb/ (set --data or HOLMES_DATA)"
    )]
    NoData(PathBuf),
    #[error("{path}: {reason}")]
    Split { path: PathBuf, reason: String },
    #[error("record {record}: {reason}")]
    Record { record: String, reason: String },
}

/// The PhysioNet databases the zoo learns from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Database {
    Vfdb,
    Cudb,
    Mitdb,
    Svdb,
    /// The noise stress test records (mitdb 118 and 119 with electrode-motion noise); its
    /// noise-only records are not patients and are read by [`NoiseBank`] instead.
    Nstdb,
    /// The QT Database's excerpts of patients in no other folder (European ST-T, MIT-BIH
    /// Long-Term, ST Change, Normal Sinus Rhythm): held out of the split, a cross-database
    /// test only ([`Database::HELD_OUT`]).
    Qtdb,
}

impl Database {
    pub(crate) const ALL: [Database; 5] = [
        Database::Vfdb,
        Database::Cudb,
        Database::Mitdb,
        Database::Svdb,
        Database::Nstdb,
    ];

    /// Databases no part of the split holds: never learnt from, judged across databases
    /// (`holmes evaluate --cross-database`). qtdb's 265 ventricular beats would add under 2 %
    /// to the beats the classifier learns from; as a test they are patients, recordings and
    /// hospitals that nothing chose anything on.
    pub(crate) const HELD_OUT: [Database; 1] = [Database::Qtdb];

    /// Folder name under the data directory, also the prefix of record keys.
    pub fn name(self) -> &'static str {
        match self {
            Database::Vfdb => "vfdb",
            Database::Cudb => "cudb",
            Database::Mitdb => "mitdb",
            Database::Svdb => "svdb",
            Database::Nstdb => "nstdb",
            Database::Qtdb => "qtdb",
        }
    }

    /// The database labels ventricular beats, so VT comes from beat runs (else from `(VT`
    /// rhythm labels: vfdb has no beat labels, cudb labels every beat `N`).
    pub(crate) fn labels_ventricular_beats(self) -> bool {
        matches!(
            self,
            Database::Mitdb | Database::Svdb | Database::Nstdb | Database::Qtdb
        )
    }

    pub fn from_name(s: &str) -> Option<Database> {
        Database::ALL.into_iter().find(|d| d.name() == s)
    }
}

/// One record, resampled to [`SAMPLE_RATE_HZ`], with its label and noise intervals.
#[derive(Debug, Clone)]
pub struct RecordData {
    pub db: Database,
    /// Key `db/name`, e.g. `mitdb/201`.
    pub key: String,
    /// Patient group: records of one patient share it (mitdb 201 and 202).
    pub(crate) group: String,
    /// ECG signals in mV at 250 Hz: `leads[0]` primary, `leads[1]` secondary.
    pub(crate) leads: Vec<Vec<f32>>,
    /// Reference VT and VF episodes (samples at 250 Hz), sorted by onset.
    pub(crate) episodes: Vec<Episode>,
    /// Noise-marked intervals per lead.
    pub(crate) noise: Vec<Vec<Span>>,
    /// QRS sample indices at 250 Hz.
    pub(crate) beats: Vec<i64>,
    /// Annotated ventricular ectopy short of VT ([`labels::ectopy_spans`]): training's hard
    /// negatives.
    pub(crate) ectopy: Vec<Span>,
    /// The record is paced ([`labels::paced`]): EC57's figures leave it out.
    pub(crate) paced: bool,
}

impl RecordData {
    /// The reference VT and VF episodes as `(kind, onset, end)`, kind `vt` or `vf`, times in
    /// seconds from the record's start.
    pub fn episodes_secs(&self) -> Vec<(&'static str, f64, f64)> {
        self.episodes
            .iter()
            .map(|e| {
                let kind = match e.kind {
                    EpisodeKind::Vt => "vt",
                    EpisodeKind::Vf => "vf",
                };
                let fs = SAMPLE_RATE_HZ as f64;
                (kind, e.onset as f64 / fs, e.end as f64 / fs)
            })
            .collect()
    }

    /// The ECG signals in mV at 250 Hz, the primary lead first.
    pub fn leads(&self) -> &[Vec<f32>] {
        &self.leads
    }

    /// Samples per lead.
    pub(crate) fn len(&self) -> usize {
        self.leads.first().map_or(0, Vec::len)
    }
}

/// Group of a record key: records in one group stay in one part of the split. mitdb 201 and
/// 202 are one patient; mitdb 118, 119 and nstdb's noisy copies of them are one group, since
/// the copies hold the same patients and the same stretches of recorded noise.
pub(crate) fn group_of(key: &str) -> String {
    match key {
        "mitdb/201" | "mitdb/202" => "mitdb/201+202".to_owned(),
        "mitdb/118" | "mitdb/119" => NST_GROUP.to_owned(),
        k if k.starts_with("nstdb/") => NST_GROUP.to_owned(),
        k => k.to_owned(),
    }
}

const NST_GROUP: &str = "mitdb/118+119+nstdb";

/// Whether a qtdb record is its excerpt of a mitdb (`sel100`-`sel234`) or svdb
/// (`sel800`-`sel894`) record: those patients are in their own folders, so such an excerpt is
/// never read as qtdb's (the shared folder leaves them out; this holds it so).
fn excerpt_of_another_folder(name: &str) -> bool {
    name.strip_prefix("sel").is_some_and(|n| {
        n.len() == 3
            && n.bytes().all(|b| b.is_ascii_digit())
            && matches!(n.as_bytes()[0], b'1' | b'2' | b'8')
    })
}

/// Record keys listed in `<data>/<db>/RECORDS`, for the split's databases present.
pub fn record_keys(data: &Path) -> Result<Vec<(Database, String)>, DatasetError> {
    record_keys_of(data, &Database::ALL)
}

/// Record keys listed in `<data>/<db>/RECORDS`, for those of `dbs` present.
pub(crate) fn record_keys_of(
    data: &Path,
    dbs: &[Database],
) -> Result<Vec<(Database, String)>, DatasetError> {
    let mut out = Vec::new();
    for &db in dbs {
        let path = data.join(db.name()).join("RECORDS");
        if !path.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|source| DatasetError::Io {
            path: path.clone(),
            source,
        })?;
        out.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .filter(|l| {
                    db != Database::Nstdb || !NoiseKind::ALL.iter().any(|k| k.record() == *l)
                })
                .filter(|l| db != Database::Qtdb || !excerpt_of_another_folder(l))
                .map(|l| (db, l.to_owned())),
        );
    }
    if out.is_empty() {
        return Err(DatasetError::NoData(data.to_owned()));
    }
    Ok(out)
}

/// A record's signals at 250 Hz, its beats, and its annotations (rescaled to 250 Hz).
#[derive(Debug, Clone)]
pub struct Signals {
    /// ECG signals in mV: `leads[0]` primary, `leads[1]` secondary.
    pub(crate) leads: Vec<Vec<f32>>,
    /// Each lead's name as the header gives it (`MLII`, `V1`, `ECG1`, ...).
    pub(crate) names: Vec<String>,
    /// QRS sample indices at 250 Hz.
    pub(crate) beats: Vec<i64>,
    /// Reference annotations (empty when the record has no `.atr`).
    pub(crate) annotations: Vec<wfdb::Annotation>,
}

/// Reads record `name` in `dir`: signals resampled to 250 Hz, beats from the `.atr` file
/// when it annotates them, from the QRS detector otherwise (or when there is no `.atr`).
pub(crate) fn read_signals(dir: &Path, name: &str) -> Result<Signals, DatasetError> {
    let rec = Record::open(dir, name)?;
    let key = dir.join(name).display().to_string();
    let fs = rec.header.fs;
    if fs.fract() != 0.0 || rec.header.signals.is_empty() {
        return Err(DatasetError::Record {
            record: key,
            reason: format!("needs signals at an integral sampling rate (has {fs} Hz)"),
        });
    }
    let nleads = rec.header.signals.len().min(MAX_LEADS);
    let leads = (0..nleads)
        .map(|i| resample(&rec.physical(i), fs as usize, SAMPLE_RATE_HZ))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|reason| DatasetError::Record {
            record: key.clone(),
            reason,
        })?;
    let atr = dir.join(format!("{name}.atr"));
    let mut annotations = if atr.exists() {
        wfdb::read_annotations(&atr)?
    } else {
        Vec::new()
    };
    labels::rescale(&mut annotations, fs, SAMPLE_RATE_HZ as f64);
    let beats = labels::annotated_beats(&annotations)
        .unwrap_or_else(|| detect_qrs(&leads[0], SAMPLE_RATE_HZ as f64));
    let names = rec.header.signals[..nleads]
        .iter()
        .map(|s| s.description.clone())
        .collect();
    Ok(Signals {
        leads,
        names,
        beats,
        annotations,
    })
}

/// Loads one record of a database: signals to 250 Hz mV, annotations to intervals and beats.
pub(crate) fn load_record(
    data: &Path,
    db: Database,
    name: &str,
) -> Result<RecordData, DatasetError> {
    let dir = data.join(db.name());
    let key = format!("{}/{name}", db.name());
    if !dir.join(format!("{name}.atr")).exists() {
        return Err(DatasetError::Record {
            record: key,
            reason: "has no reference annotations (.atr)".into(),
        });
    }
    let s = read_signals(&dir, name)?;
    let len = s.leads[0].len() as i64;
    Ok(RecordData {
        db,
        group: group_of(&key),
        episodes: labels::episodes(
            &s.annotations,
            len,
            db.labels_ventricular_beats(),
            SAMPLE_RATE_HZ as f64,
        ),
        noise: labels::noise_spans(&s.annotations, s.leads.len(), len),
        ectopy: labels::ectopy_spans(&s.annotations, len),
        paced: labels::paced(&s.annotations),
        beats: s.beats,
        leads: s.leads,
        key,
    })
}

/// Loads every record of every database present under `data`, in parallel, in key order.
pub fn load_all(data: &Path) -> Result<Vec<RecordData>, DatasetError> {
    load_keys(data, &record_keys(data)?)
}

/// Loads the given records, in parallel, in the given order.
pub fn load_keys(
    data: &Path,
    keys: &[(Database, String)],
) -> Result<Vec<RecordData>, DatasetError> {
    keys.par_iter()
        .map(|(db, name)| load_record(data, *db, name))
        .collect()
}

/// The data directory: `HOLMES_DATA` if set, else `../shared/data/physionet` from the
/// crate root.
pub fn default_data_dir() -> PathBuf {
    std::env::var_os("HOLMES_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/physionet"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qtdbs_excerpts_of_mitdb_and_svdb_are_not_read_as_qtdb() {
        for n in ["sel100", "sel233", "sel803", "sel891"] {
            assert!(excerpt_of_another_folder(n), "{n}");
        }
        for n in ["sel301", "sel310", "sel14046", "sel16265", "sele0104"] {
            assert!(!excerpt_of_another_folder(n), "{n}");
        }
    }

    #[test]
    fn ec57s_paced_records_are_found_from_their_annotations() {
        let data = default_data_dir();
        if !data.join("mitdb").join("RECORDS").exists() || !data.join("vfdb").exists() {
            println!(
                "SKIPPED ec57s_paced_records_are_found_from_their_annotations: PhysioNet data not found at {} (set HOLMES_DATA)",
                data.display()
            );
            return;
        }
        // mitdb 102 is on ecgeval's list of paced records; vfdb 602 labels `(PM`; mitdb 230's
        // `(PREX` is pre-excitation, and 208 holds neither.
        for (db, name, paced) in [
            (Database::Mitdb, "102", true),
            (Database::Vfdb, "602", true),
            (Database::Mitdb, "230", false),
            (Database::Mitdb, "208", false),
        ] {
            let r = load_record(&data, db, name).unwrap();
            assert_eq!(r.paced, paced, "{}", r.key);
        }
    }
}
