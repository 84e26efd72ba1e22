//! Holmes: a bedside appliance that scores ventricular-tachyarrhythmia risk from ECG and vitals
//! with ensembles drawn from a model zoo.
//!
//! # Layers
//!
//! Modules are listed from the bottom up; each imports only modules listed above it (the
//! training side and the serving side never import each other). `tests/layers.rs` holds the
//! code to this order.
//!
//! - [`core`]: the data that crosses stages (window, event, score) and shared helpers.
//! - [`config`]: the TOML configuration, pure data, one section per subsystem.
//! - [`alarm`]: the risk alarm rule (threshold, persistence, hysteresis), how alarms match
//!   reference episodes, and the rule's choice on validation; sans-IO, for the dashboard,
//!   `holmes score` and `holmes evaluate` to share (used by `holmes evaluate` so far).
//! - [`protocol`]: the monitor wire format.
//! - [`signal`]: ECG signal processing: QRS detection and heart rate, resampling, synthetic ECG,
//!   signal-quality indices, a classical VT/VF detector.
//! - [`zoo`]: model families, the model folder format, validated loading, preprocessing and
//!   the fast inference kernels, shared by training and serving.
//! - [`training`]: offline, PhysioNet records to trained models: `wfdb`, `dataset`, `train`.
//! - [`serving`]: the daemon's data path, bottom up `store` <- `engine` <- `ward` <- `ingest`
//!   (data flows the other way: monitor -> ingest -> ward -> engine -> store).
//! - [`composer`]: which members to serve within the latency budget (HOLMES), the actor
//!   that recomposes while serving, and the served plan (what serves and its alarm rule).
//! - [`board`]: the ward's state and alarm book: tiles, the risk and technical alarms'
//!   lifecycle (raise, acknowledge, silence, end), the monitors' alarms with Holmes's opinions;
//!   read by the page and the outbound links alike.
//! - [`dashboard`]: the ward page: its routes, users and sign-in.
//! - [`outbound`]: scores and alarms out to the hospital, HL7 v2 (IHE PCD-01, PCD-04) over
//!   MLLP and FHIR R4 Observations over HTTP(S), each through a durable outbox.
//! - [`http`]: the router, its state and errors, the accept loop and TLS.
//! - [`appliance`]: the daemon's wiring and shutdown order, and the system service.
//! - [`tools`]: the simulator, `holmes bench`, `holmes bench-cpu`, `holmes score`, and the
//!   episode comparison of `holmes evaluate`.
//! - [`cli`]: the command line, one file per subcommand.
//!
//! # Data flow
//!
//! ```text
//! serving:  monitor --protocol--> ingest --> ward --ClosedWindow--> engine --ScoreRecord--> store
//!                                                                                  |
//!           page <-- dashboard <-- http <-- board <--------------------------------+
//!                    board (alarms) + store (scores) --> outbound --HL7 v2/MLLP, FHIR R4--> hospital
//! training: PhysioNet --wfdb--> dataset --train--> zoo: models/<name>/{manifest.json, weights.mpk}
//! ```

pub mod core;

pub mod alarm;
pub mod config;
pub mod protocol;
pub mod signal;

pub mod zoo;

pub mod training;

pub mod serving;

pub mod board;
pub mod composer;
pub mod dashboard;
pub mod outbound;

pub mod http;

pub mod appliance;
pub mod tools;

pub mod cli;
