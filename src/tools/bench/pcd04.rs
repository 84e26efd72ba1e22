//! `holmes bench --pcd04 N`: a ward's alarm gateways sending IHE PCD-04 alarm reports to the
//! daemon's listener (`serving::ingest::pcd04`) as fast as it answers them. `N` distinct
//! monitor alarms of every kind over 64 beds that no monitor streams (so none waits for
//! samples; the opinion's own cost under load is `--monitor-alarms`'), each rendered as Holmes's
//! own HL7 link renders a monitor's alarm (`outbound::message::monitor`), sent over
//! [`GATEWAYS`] connections, each sending its next report once the last is answered.
//! Reported: reports a minute, how each was answered, the time to each answer, the daemon's
//! CPU a report, and the alarms stored (every one, once), read from its SQLite file.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde::Serialize;
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

use super::BenchError;
use super::daemon::Daemon;
use crate::config::{Config, Hl7Config};
use crate::core::monitor_alarm::MONITOR_ALARM_KINDS;
use crate::core::stats::percentile;
use crate::outbound::message::monitor::{MonitorAlarmReport, render};
use crate::outbound::message::{Phase, Verdict, parse_ack};
use crate::protocol::mllp::Mllp;

/// Gateway connections sending at once.
pub(crate) const GATEWAYS: usize = 4;
/// Beds the alarms are spread over.
const BEDS: usize = 64;

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Pcd04Figures {
    pub(crate) reports: usize,
    pub(crate) gateways: usize,
    /// From the first report sent to the last answer.
    pub(crate) seconds: f64,
    pub(crate) reports_per_minute: f64,
    /// Answered AA/CA, and AE/AR/CE/CR.
    pub(crate) accepted: usize,
    pub(crate) refused: usize,
    /// Report sent to its answer read, ms.
    pub(crate) answer_ms_p50: f64,
    pub(crate) answer_ms_p95: f64,
    pub(crate) answer_ms_max: f64,
    /// The daemon's CPU over the run, per report, ms.
    pub(crate) daemon_cpu_ms_per_report: f64,
    /// Monitor alarm rows stored, and distinct alarms among them (each report one alarm).
    pub(crate) stored: i64,
    pub(crate) stored_distinct: i64,
}

impl Pcd04Figures {
    pub(crate) fn to_text(&self) -> String {
        format!(
            "PCD-04 in: {} reports over {} gateway connections in {:.1} s ({:.0} a minute); \
             {} accepted, {} refused; answer p50 / p95 / max {:.1} / {:.1} / {:.1} ms; daemon \
             CPU {:.2} ms a report; {} alarms stored ({} distinct)",
            self.reports,
            self.gateways,
            self.seconds,
            self.reports_per_minute,
            self.accepted,
            self.refused,
            self.answer_ms_p50,
            self.answer_ms_p95,
            self.answer_ms_max,
            self.daemon_cpu_ms_per_report,
            self.stored,
            self.stored_distinct
        )
    }
}

/// The `n`-th report: alarm `gw-n` of bed `bed-(n % 64)`, its kind cycling through every kind.
fn report(n: usize, t0_ms: i64, hl7: &Hl7Config) -> String {
    let r = MonitorAlarmReport {
        key: n as i64,
        bed: format!("bed-{}", n % BEDS),
        id: format!("gw-{n}"),
        kind: MONITOR_ALARM_KINDS[n % MONITOR_ALARM_KINDS.len()],
        phase: Phase::Start,
        onset_ms: t0_ms + n as i64 * 100,
        end_ms: None,
        opinion: None,
        not_judged: None,
        judged_ms: None,
        patient: None,
    };
    render(hl7, &r, &format!("BENCH-{n}"), t0_ms)
}

/// Runs the benchmark: the daemon of `cfg` with its listener on, `n` reports.
pub(crate) fn main(mut cfg: Config, n: usize, json: bool) -> Result<(), BenchError> {
    if n == 0 {
        return Err(BenchError::Config(
            "--pcd04 needs at least one report".into(),
        ));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    cfg.storage.db = dir.path().join("holmes.db");
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    cfg.pcd04_in.enabled = true;
    cfg.pcd04_in.listen = format!("127.0.0.1:{port}");
    let f = rt.block_on(run(cfg, dir.path(), port, n))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&[&f])?);
    } else {
        println!("{}", f.to_text());
    }
    Ok(())
}

async fn run(
    cfg: Config,
    dir: &std::path::Path,
    port: u16,
    n: usize,
) -> Result<Pcd04Figures, BenchError> {
    let (hl7, db) = (cfg.hl7.clone(), cfg.storage.db.clone());
    let daemon = Daemon::start(cfg, dir, Duration::from_secs(300)).await?;
    let t0_ms = crate::core::time::now_ms() - 3_600_000;
    let reports: Vec<String> = (0..n).map(|i| report(i, t0_ms, &hl7)).collect();
    let cpu0 = daemon.cpu_seconds();
    let t0 = Instant::now();
    let mut gateways = Vec::new();
    for g in 0..GATEWAYS {
        let mine: Vec<String> = reports.iter().skip(g).step_by(GATEWAYS).cloned().collect();
        let max = hl7.max_frame_bytes;
        gateways.push(tokio::spawn(async move { gateway(port, max, mine).await }));
    }
    let mut answers = Vec::with_capacity(n);
    for g in gateways {
        let got = g
            .await
            .map_err(|e| BenchError::Http(format!("a gateway failed: {e}")))??;
        answers.extend(got);
    }
    let seconds = t0.elapsed().as_secs_f64();
    let cpu = daemon.cpu_seconds() - cpu0;
    // Every report taken is stored: wait for the last to be committed.
    let until = Instant::now() + Duration::from_secs(120);
    let (stored, distinct) = loop {
        let c = crate::serving::store::open_read_only(&db)?;
        let got: (i64, i64) = c.query_row(
            "SELECT COUNT(*), COUNT(DISTINCT bed || '/' || alarm_id) FROM monitor_alarms",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if got.0 >= n as i64 || Instant::now() > until {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    daemon.stop(Duration::from_secs(30)).await?;
    let mut ms: Vec<f64> = answers.iter().map(|a| a.0).collect();
    ms.sort_by(f64::total_cmp);
    let accepted = answers.iter().filter(|a| a.1).count();
    Ok(Pcd04Figures {
        reports: n,
        gateways: GATEWAYS,
        seconds,
        reports_per_minute: n as f64 / seconds * 60.0,
        accepted,
        refused: answers.len() - accepted,
        answer_ms_p50: percentile(&ms, 0.50),
        answer_ms_p95: percentile(&ms, 0.95),
        answer_ms_max: ms.last().copied().unwrap_or(f64::NAN),
        daemon_cpu_ms_per_report: cpu * 1000.0 / n as f64,
        stored,
        stored_distinct: distinct,
    })
}

/// One gateway connection sending `reports` in turn: each answer's time (ms) and whether it
/// accepted the report.
async fn gateway(
    port: u16,
    max_frame_bytes: usize,
    reports: Vec<String>,
) -> Result<Vec<(f64, bool)>, BenchError> {
    let socket = TcpStream::connect(("127.0.0.1", port)).await?;
    let mut framed = Framed::new(socket, Mllp::new(max_frame_bytes));
    let mut out = Vec::with_capacity(reports.len());
    for r in reports {
        let t = Instant::now();
        framed
            .send(r.as_bytes())
            .await
            .map_err(|e| BenchError::Http(format!("sending a report: {e}")))?;
        let answer = framed
            .next()
            .await
            .ok_or_else(|| BenchError::Http("the listener closed the connection".into()))?
            .map_err(|e| BenchError::Http(format!("reading an answer: {e}")))?;
        let ack = parse_ack(&answer).map_err(|e| BenchError::Http(e.to_string()))?;
        out.push((
            t.elapsed().as_secs_f64() * 1000.0,
            ack.verdict == Verdict::Accepted,
        ));
    }
    Ok(out)
}
