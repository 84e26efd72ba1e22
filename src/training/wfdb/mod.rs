//! WFDB (PhysioNet) record reading: headers, signal files and MIT-format annotations.
//!
//! This is the only module that touches PhysioNet's file formats. [`dataset`](crate::training::dataset)
//! reads records through [`Record::open`] and [`read_annotations`] and never sees a byte layout.
//! Supported: single-segment headers, signal formats 212 and 16 (with the optional `+offset`
//! byte offset of a signal file), gains, baselines and ADC zeros, and the MIT annotation format
//! with its SKIP/NUM/SUB/CHN/AUX pseudo-annotations.

mod annotation;
mod header;
mod signal;

pub(crate) use annotation::Annotation;
pub use annotation::read_annotations;
pub(crate) use header::Header;
pub use signal::Record;

use std::path::PathBuf;

/// What can go wrong reading a WFDB record. Every variant names the file it is about.
#[derive(Debug, thiserror::Error)]
pub enum WfdbError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: line {line}: {reason}")]
    Header {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{path}: signal format {format} is not supported (212 and 16 are)")]
    UnsupportedFormat { path: PathBuf, format: u32 },
    #[error("{path}: {reason}")]
    Signal { path: PathBuf, reason: String },
    #[error("{path}: byte {offset}: {reason}")]
    Annotation {
        path: PathBuf,
        offset: usize,
        reason: String,
    },
}
