//! `holmes simulate`: N bedside monitors against a running daemon.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use anyhow::{Context, Result};

use crate::tools::sim::{Faults, SimOptions, Source};
use crate::training::dataset;

/// Flags of `holmes simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Daemon WebSocket URL.
    #[arg(long, default_value = "ws://127.0.0.1:8080/ws/monitor")]
    pub(crate) url: String,
    #[arg(long, default_value_t = 8)]
    pub(crate) beds: usize,
    /// PhysioNet folder to replay [default: $HOLMES_DATA or ../shared/data/physionet].
    #[arg(long, conflicts_with = "synthetic")]
    pub(crate) source: Option<PathBuf>,
    /// Synthetic ECG (McSharry's dynamical model) instead of recordings.
    #[arg(long)]
    pub(crate) synthetic: bool,
    /// Wall-clock seconds to run.
    #[arg(long, default_value_t = 120.0)]
    pub(crate) duration: f64,
    /// Signal seconds per wall-clock second.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) speed: f64,
    /// Start each record this many signal seconds in (e.g. shortly before an episode).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) start_secs: f64,
    /// Device token presented in the hello (from `holmes device add`).
    #[arg(long, default_value = "demo")]
    pub(crate) token: String,
    /// Device name in every hello (the token's device, as a gateway for all the beds)
    /// [default: sim-<bed> per bed].
    #[arg(long)]
    pub(crate) device: Option<String>,
    /// PEM file of the CA (or self-signed certificate) to trust for a wss:// URL [default:
    /// the system's roots].
    #[arg(long)]
    pub(crate) ca: Option<PathBuf>,
    /// Probability a frame is dropped.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) drop: f64,
    /// Probability a frame is sent twice.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) duplicate: f64,
    /// Probability a corrupt copy precedes a frame.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) corrupt: f64,
    /// Bed name prefix.
    #[arg(long, default_value = "bed-")]
    pub(crate) prefix: String,
    /// Admit every simulated bed with a patient in its hello: bed n's identifier is `SIM-<n>`
    /// under this assigning authority (a namespace id such as `HOSP`, or a URI such as
    /// `urn:oid:1.2.840.99.7`), sent out in PID-3 and as the FHIR `subject` [default: no
    /// patient].
    #[arg(long, value_name = "AUTHORITY")]
    pub(crate) patient_authority: Option<String>,
    /// Each bed replaying a record also sends the alarms a textbook monitor (the classical
    /// detector) raises on it, and their ends (`docs/PROTOCOL.md` §5a).
    #[arg(long, conflicts_with = "synthetic")]
    pub(crate) monitor_alarms: bool,
}

pub(crate) fn run(a: SimulateArgs) -> Result<()> {
    let source = if a.synthetic {
        Source::Synthetic
    } else {
        Source::Records(a.source.clone().unwrap_or_else(dataset::default_data_dir))
    };
    let mut opts = SimOptions::new(a.url, a.beds, source);
    opts.duration = std::time::Duration::from_secs_f64(a.duration);
    opts.speed = a.speed;
    opts.start_secs = a.start_secs;
    opts.token = a.token;
    opts.device = a.device;
    opts.ca = a.ca;
    opts.bed_prefix = a.prefix;
    opts.patient_authority = a.patient_authority;
    opts.monitor_alarms = a.monitor_alarms;
    // Refused here rather than by the daemon closing every connection.
    if let Some(p) = opts.patient(1) {
        p.check().context("--patient-authority")?;
    }
    opts.faults = Faults {
        drop: a.drop,
        duplicate: a.duplicate,
        corrupt: a.corrupt,
    };
    let report = super::runtime()?.block_on(crate::tools::sim::run(opts))?;
    println!(
        "simulation over: {} frames sent, {} monitor alarms, {} connections, {} errors received",
        report.frames_sent.load(Ordering::Relaxed),
        report.alarms_sent.load(Ordering::Relaxed),
        report.connects.load(Ordering::Relaxed),
        report.errors_received.load(Ordering::Relaxed)
    );
    Ok(())
}
