//! `holmes bench` (the daemon under simulated monitors, draining an outbound outage with
//! `--drain`, taking a gateway's alarm reports with `--pcd04`, or consuming SDC devices with
//! `--sdc`) and `holmes bench-cpu` (the
//! zoo's convolutions against ONNX Runtime).

use std::path::PathBuf;

use anyhow::Result;

use super::ConfigArgs;
use crate::tools::bench::drain::{DrainArgs, Link};
use crate::tools::bench::{BenchArgs, Scenario};
use crate::tools::cpu_bench::BenchCpuArgs;

/// `holmes bench`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchCli {
    /// Simulated beds (repeatable: one run per count; the start of a `--capacity` search).
    #[arg(long, default_values_t = [16usize])]
    pub(crate) beds: Vec<usize>,
    /// steady, aligned, storm, ramp, overload or ingest.
    #[arg(long, default_value = "steady")]
    pub(crate) scenario: Scenario,
    /// Ensemble members [default: the config's].
    #[arg(long, conflicts_with_all = ["composed", "whole_zoo"])]
    pub(crate) members: Vec<String>,
    /// Serve the ensemble the composer picks for each bed count (from the stored profiles in
    /// the config's database) instead of fixed members.
    #[arg(long)]
    pub(crate) composed: bool,
    /// Every model in the zoo as a member (the memory test).
    #[arg(long, conflicts_with = "composed")]
    pub(crate) whole_zoo: bool,
    /// Wall-clock seconds of load per run (two hops need about 70).
    #[arg(long, default_value_t = 75.0)]
    pub(crate) duration: f64,
    /// Replay PhysioNet records instead of synthetic ECG.
    #[arg(long)]
    pub(crate) records: bool,
    /// The records' beds also send the alarms a textbook monitor raises on them; reports
    /// Holmes's opinion on the VT/VF ones (how many judged, arrival to opinion).
    #[arg(long, requires = "records")]
    pub(crate) monitor_alarms: bool,
    /// Signal seconds per wall second (keep 1 for real measurements).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) speed: f64,
    /// Find the most beds within the budget: double from `--beds` until a run fails, then
    /// bisect.
    #[arg(long)]
    pub(crate) capacity: bool,
    /// Time the outbound links draining a receiver outage instead: `--outage-minutes` at the
    /// first `--beds` left in each link's outbox, drained by the daemon once the receiver
    /// (`--hl7-peer`, `--fhir-peer`) returns; checked for loss, duplicates and each bed's order.
    #[arg(long)]
    pub(crate) drain: bool,
    /// Minutes of receiver outage left in the outbox (`--drain`).
    #[arg(long, default_value_t = 60.0, requires = "drain")]
    pub(crate) outage_minutes: f64,
    /// The links drained, one daemon run each (`--drain`; repeatable: hl7, fhir).
    #[arg(long = "link", default_values = ["hl7", "fhir"], requires = "drain")]
    pub(crate) links: Vec<Link>,
    /// The HL7 receiver (`--drain`): a script taking `PORT CONTROL_FILE OUT_FILE`.
    #[arg(long, default_value = "tests/hl7_peer.py", requires = "drain")]
    pub(crate) hl7_peer: PathBuf,
    /// The FHIR server (`--drain`): a script taking `PORT DIR` (node for `.mjs`, python3 for
    /// `.py`).
    #[arg(long, default_value = "tests/fhir_peer/server.mjs", requires = "drain")]
    pub(crate) fhir_peer: PathBuf,
    /// Seconds a drain may take before it is reported unfinished (`--drain`).
    #[arg(long, default_value_t = 600.0, requires = "drain")]
    pub(crate) drain_timeout: f64,
    /// Time IHE PCD-04 alarm reports in instead: this many, from a ward's alarm gateways to
    /// the daemon's `[pcd04_in]` listener, each sent once the last is answered; checked that
    /// every one is answered and stored once.
    #[arg(long, conflicts_with = "drain")]
    pub(crate) pcd04: Option<usize>,
    /// Time a ward of IEEE 11073 SDC devices instead (`--beds` of them, the first count), beside
    /// the same ward over the WebSocket path: window latency, the consumer's CPU, a device's VT
    /// condition to the opinion, and the beds through the devices' loss and return. Needs
    /// python3 with `sdc11073` and vfdb in the data folder.
    #[arg(long, conflicts_with_all = ["drain", "pcd04", "capacity", "composed", "whole_zoo"])]
    pub(crate) sdc: bool,
    /// The SDC test provider (`--sdc`).
    #[arg(long, default_value = "tests/sdc_peer/provider.py", requires = "sdc")]
    pub(crate) sdc_peer: PathBuf,
    /// Devices each provider process hosts (`--sdc`).
    #[arg(long, default_value_t = 32, requires = "sdc")]
    pub(crate) sdc_per_process: usize,
    /// Mutual TLS for `--sdc`: DIR holds `cacert.pem`, `usercert.pem` and `userkey.pem` (a CA
    /// and a certificate it signed for 127.0.0.1), shown by the devices and Holmes alike.
    #[arg(long, value_name = "DIR", requires = "sdc")]
    pub(crate) sdc_tls_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) config: ConfigArgs,
    #[arg(long)]
    pub(crate) json: bool,
}

/// `holmes bench-cpu` arguments.
#[derive(Debug, clap::Args)]
pub struct BenchCpuCli {
    /// Folder holding gen_onnx.py's output (weights_W_D.{bin,txt}, verify_W_D_{in,ort}.bin).
    #[arg(long)]
    pub(crate) weights: PathBuf,
    /// Answer the line protocol on stdin instead of printing a table.
    #[arg(long)]
    pub(crate) serve: bool,
    /// Configurations `WxD`, comma-separated.
    #[arg(long, default_value = "8x2,32x4,64x8,128x16")]
    pub(crate) configs: String,
    /// Batch sizes, comma-separated.
    #[arg(long, default_value = "1,8,32")]
    pub(crate) batches: String,
    /// Timed forward passes per path and point.
    #[arg(long, default_value_t = 10)]
    pub(crate) iters: usize,
    /// Run on the CUDA device (builds with `--features cuda` only).
    #[arg(long)]
    pub(crate) cuda: bool,
}

pub(crate) fn bench(a: BenchCli) -> Result<()> {
    let cfg = a.config.load()?;
    if let Some(n) = a.pcd04 {
        crate::tools::bench::pcd04::main(cfg, n, a.json)?;
        return Ok(());
    }
    if a.sdc {
        let args = crate::tools::bench::sdc::SdcArgs {
            beds: a.beds.first().copied().unwrap_or(16),
            members: if a.members.is_empty() {
                cfg.ensemble.members.clone()
            } else {
                a.members
            },
            duration: a.duration,
            peer: a.sdc_peer,
            per_process: a.sdc_per_process,
            tls_dir: a.sdc_tls_dir,
            json: a.json,
        };
        crate::tools::bench::sdc::main(cfg, args)?;
        return Ok(());
    }
    if a.drain {
        let args = DrainArgs {
            beds: a.beds.first().copied().unwrap_or(16),
            outage_minutes: a.outage_minutes,
            links: a.links,
            hl7_peer: a.hl7_peer,
            fhir_peer: a.fhir_peer,
            timeout_secs: a.drain_timeout,
            json: a.json,
        };
        crate::tools::bench::drain::main(cfg, args)?;
        return Ok(());
    }
    let args = BenchArgs {
        beds: a.beds,
        scenario: a.scenario,
        members: a.members,
        composed: a.composed,
        whole_zoo: a.whole_zoo,
        duration: a.duration,
        records: a.records,
        speed: a.speed,
        capacity: a.capacity,
        monitor_alarms: a.monitor_alarms,
        json: a.json,
    };
    crate::tools::bench::main(cfg, args)?;
    Ok(())
}

pub(crate) fn bench_cpu(a: BenchCpuCli) -> Result<()> {
    let args = BenchCpuArgs {
        weights: a.weights,
        serve: a.serve,
        configs: a.configs,
        batches: a.batches,
        iters: a.iters,
        cuda: a.cuda,
    };
    crate::tools::cpu_bench::run(&args)?;
    Ok(())
}
