//! Holmes: a bedside appliance that scores ventricular-tachyarrhythmia risk from ECG and vitals
//! with ensembles drawn from a model zoo.
//!
//! # Layout
//!
//! - [`wfdb`]: PhysioNet record reading (headers, signals, annotations).
//! - [`dataset`]: records at 250 Hz, labelled windows, heart rate, the patient-wise split.
//! - [`zoo`]: model families (ResNeXt-1D for ECG, logistic regression / MLP for vitals), the
//!   model folder format, loading with validation, and input preprocessing shared with serving.
//! - [`train`]: `holmes train`, fitting the zoo model by model.
//! - [`evaluation`]: ROC-AUC, PR-AUC and the mean-probability ensemble.
//! - [`cpu_bench`]: `holmes bench-cpu`, the zoo's convolutions against ONNX Runtime.
//! - [`cli`]: the command line.
//!
//! # Data flow (training)
//!
//! ```text
//! PhysioNet .hea/.dat/.atr --wfdb--> Record --dataset--> RecordData (250 Hz, spans, beats)
//!     --> Dataset (windows: label, leads, heart rate) --split--> train | validation | test
//!     --train::fit--> Net --zoo::write_model--> models/<name>/{manifest.json, weights.mpk}
//! ```

pub mod appliance;
pub mod audit;
pub mod bench;
pub mod cli;
pub mod composer;
pub mod config;
pub mod cpu_bench;
pub mod dashboard;
pub mod dataset;
pub mod devices;
pub mod engine;
pub mod evaluation;
pub mod http;
pub mod ingest;
pub mod listen;
pub mod profile;
pub mod protocol;
pub mod scorer;
pub mod server;
pub mod sim;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod train;
pub mod ward;
pub mod wfdb;
pub mod zoo;
