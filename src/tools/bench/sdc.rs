//! `holmes bench --sdc`: the daemon consuming a ward of IEEE 11073 SDC devices, beside the
//! same ward over the WebSocket path. The devices are the test peer's (`--sdc-peer`, Dräger's
//! `sdc11073` playing vfdb 422 as two 250-Hz ECG leads, each device from its own place, with a
//! VT alert condition raised at staggered times), `--sdc-per-process` of them to a Python
//! process at nice 10 (on a ward the devices are other machines). The WebSocket run goes first (records replayed by the simulated monitors, as
//! `holmes bench --records` does), then the SDC run on a fresh daemon with the same members
//! for the same time: window latency, the daemon's CPU (the consumer's share per bed is the
//! difference of the two), and from each device's VT condition (its `DeterminationTime`, on
//! this machine's clock) to Holmes's opinion stored. Then the devices are killed (no
//! `SubscriptionEnd`) and started again at the same addresses: the time until each bed shows
//! stale or lost, the time from the devices' return until each is live again, and that no
//! window was stored twice and no more samples went into the beds than the devices sent.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::daemon::Daemon;
use super::{BenchError, BenchOptions, BenchReport, Scenario};
use crate::config::{Config, SdcDevice};
use crate::core::stats::percentile;
use crate::training::dataset::{Database, default_data_dir, load_keys};

/// Where the devices play vfdb 422 from and to (s): sinus rhythm into its first VT.
const PLAY_SECS: (usize, usize) = (1311, 1345);
/// Seconds after the devices start at which device 0 raises its VT (the daemon loads, every
/// bed goes live and holds the 16 s an opinion reads before), every 40 s after, and the
/// stagger between devices.
const VT_AT: f64 = 45.0;
const VT_STAGGER: f64 = 0.37;
/// Longest wait for a bed to change state after the devices go or come back.
const STATE_WAIT: Duration = Duration::from_secs(60);

/// `holmes bench --sdc`.
#[derive(Debug, Clone)]
pub(crate) struct SdcArgs {
    pub(crate) beds: usize,
    pub(crate) members: Vec<String>,
    pub(crate) duration: f64,
    /// The SDC test provider (`tests/sdc_peer/provider.py`).
    pub(crate) peer: PathBuf,
    /// Devices a provider process hosts.
    pub(crate) per_process: usize,
    pub(crate) json: bool,
}

/// What the SDC run measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SdcFigures {
    pub(crate) beds: usize,
    pub(crate) processes: usize,
    /// Seconds of steady load (the figures below up to the devices' loss are over it).
    pub(crate) seconds: f64,
    pub(crate) windows: usize,
    pub(crate) scored: usize,
    /// Windows stored with another status (partial, dropped, ...), by status.
    pub(crate) not_scored: std::collections::BTreeMap<String, usize>,
    pub(crate) latency_ms_p50: f64,
    pub(crate) latency_ms_p95: f64,
    pub(crate) latency_ms_max: f64,
    pub(crate) daemon_cpu_cores: f64,
    /// The provider processes' CPU (the devices, on a ward other machines).
    pub(crate) devices_cpu_cores: f64,
    /// VT conditions the devices raised during the steady load, VT alarms stored, judged.
    pub(crate) vt_raised: usize,
    pub(crate) vt_stored: usize,
    pub(crate) vt_judged: usize,
    /// From the device's VT condition to Holmes's opinion stored, ms.
    pub(crate) alert_to_opinion_ms_p50: f64,
    pub(crate) alert_to_opinion_ms_p95: f64,
    pub(crate) alert_to_opinion_ms_max: f64,
    /// Beds shown without their device (`connected` false: the session's renewal failed)
    /// after the devices were killed, and the time it took, s.
    pub(crate) beds_unplugged: usize,
    pub(crate) unplugged_secs_p50: f64,
    pub(crate) unplugged_secs_max: f64,
    /// Beds shown stale or lost (no data for `ward.stale_secs`) after the devices were
    /// killed, and the time it took, s.
    pub(crate) beds_marked: usize,
    pub(crate) marked_secs_p50: f64,
    pub(crate) marked_secs_max: f64,
    /// Beds live again after the devices came back, and the time from their return, s.
    pub(crate) beds_back: usize,
    pub(crate) back_secs_p50: f64,
    pub(crate) back_secs_max: f64,
    /// Windows stored twice for a bed (the same end), and samples (per lead, at 250 Hz) the
    /// beds took against what the devices said they sent.
    pub(crate) windows_twice: usize,
    pub(crate) samples_taken: u64,
    pub(crate) samples_sent: u64,
}

/// Both paths at the same beds, side by side.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SdcComparison {
    pub(crate) websocket: BenchReport,
    pub(crate) sdc: SdcFigures,
    /// The daemon's CPU per bed taking SDC rather than the WebSocket protocol, ms a second.
    pub(crate) consumer_cpu_ms_per_bed_second: f64,
}

/// Runs the comparison and prints it.
pub(crate) fn main(cfg: Config, args: SdcArgs) -> Result<(), BenchError> {
    if args.beds == 0 || args.per_process == 0 {
        return Err(BenchError::Config(
            "--sdc needs at least one bed and one device a process".into(),
        ));
    }
    if !args.peer.is_file() {
        return Err(BenchError::Config(format!(
            "the SDC test provider {} is not there (run from the source tree, or give --sdc-peer)",
            args.peer.display()
        )));
    }
    super::raise_open_files();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let data = default_data_dir();
    let ws = rt.block_on(super::run(
        cfg.clone(),
        BenchOptions {
            scenario: Scenario::Steady,
            beds: args.beds,
            members: args.members.clone(),
            val_roc_auc: None,
            duration: Duration::from_secs_f64(args.duration),
            source: crate::tools::sim::Source::Records(data.clone()),
            speed: 1.0,
            monitor_alarms: false,
        },
    ))?;
    let sdc = rt.block_on(run(cfg, &args, &data))?;
    let c = SdcComparison {
        consumer_cpu_ms_per_bed_second: (sdc.daemon_cpu_cores - ws.daemon_cpu_cores) * 1000.0
            / args.beds as f64,
        websocket: ws,
        sdc,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&[&c])?);
    } else {
        println!("{}", c.to_text());
    }
    Ok(())
}

impl SdcComparison {
    fn to_text(&self) -> String {
        let (w, s) = (&self.websocket, &self.sdc);
        format!(
            "{} beds, members {}\n\
             WebSocket: {} windows, {} scored; latency p50 / p95 / max {:.1} / {:.1} / {:.1} ms; daemon {:.3} cores\n\
             SDC ({} devices in {} processes, {:.0} s): {} windows, {} scored {:?}; latency p50 / p95 / max {:.1} / {:.1} / {:.1} ms; daemon {:.3} cores, devices {:.2} cores\n\
             the consumer: {:.2} ms of the daemon's CPU a bed each second\n\
             VT conditions: {} raised, {} stored, {} judged; condition to opinion p50 / p95 / max {:.0} / {:.0} / {:.0} ms\n\
             devices killed: {}/{} beds shown unconnected, p50 / max {:.1} / {:.1} s; {}/{} stale or lost, p50 / max {:.1} / {:.1} s; back: {}/{} live, p50 / max {:.1} / {:.1} s after the devices' return\n\
             windows stored twice {}; samples taken {} of {} sent",
            s.beds,
            w.members.join(", "),
            w.windows,
            w.scored,
            w.latency_ms_p50,
            w.latency_ms_p95,
            w.latency_ms_max,
            w.daemon_cpu_cores,
            s.beds,
            s.processes,
            s.seconds,
            s.windows,
            s.scored,
            s.not_scored,
            s.latency_ms_p50,
            s.latency_ms_p95,
            s.latency_ms_max,
            s.daemon_cpu_cores,
            s.devices_cpu_cores,
            self.consumer_cpu_ms_per_bed_second,
            s.vt_raised,
            s.vt_stored,
            s.vt_judged,
            s.alert_to_opinion_ms_p50,
            s.alert_to_opinion_ms_p95,
            s.alert_to_opinion_ms_max,
            s.beds_unplugged,
            s.beds,
            s.unplugged_secs_p50,
            s.unplugged_secs_max,
            s.beds_marked,
            s.beds,
            s.marked_secs_p50,
            s.marked_secs_max,
            s.beds_back,
            s.beds,
            s.back_secs_p50,
            s.back_secs_max,
            s.windows_twice,
            s.samples_taken,
            s.samples_sent,
        )
    }
}

/// A provider process: its devices' addresses, and what it said it raised and sent.
struct Provider {
    child: Child,
    devices: Vec<String>,
    vt_raised: Arc<AtomicU64>,
    sent: Arc<AtomicU64>,
}

impl Provider {
    /// Starts `n` devices from `port` (device i at `port + i`), named under `epr`.
    fn start(
        peer: &Path,
        samples: &Path,
        (port, n, first): (u16, usize, usize),
        epr: &str,
        vt_until: f64,
    ) -> Result<Provider, BenchError> {
        let vt_at: Vec<String> = (0..)
            .map(|k| VT_AT + 40.0 * k as f64 + first as f64 * VT_STAGGER)
            .take_while(|&t| t < vt_until)
            .map(|t| format!("{t:.2}"))
            .collect();
        // The devices are other machines on a ward: here they yield the cores to the daemon.
        let mut cmd = Command::new("nice");
        cmd.args(["-n", "10", "python3"])
            .arg(peer)
            .args(["--port", &port.to_string(), "--devices", &n.to_string()])
            .args(["--hz", "250", "--chunk-ms", "100", "--no-validate"])
            .args(["--epr", epr, "--vt-stagger", &VT_STAGGER.to_string()])
            .arg("--tell-sent")
            .arg("--samples")
            .arg(samples);
        if !vt_at.is_empty() {
            cmd.arg("--vt-at").args(&vt_at);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| BenchError::Config(format!("starting python3 {}: {e}", peer.display())))?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .map_err(BenchError::Io)?;
        let ready: serde_json::Value = serde_json::from_str(&line).map_err(|_| {
            let _ = child.kill();
            let mut err = String::new();
            if let Some(e) = child.stderr.take() {
                use std::io::Read;
                let _ = BufReader::new(e).take(4000).read_to_string(&mut err);
            }
            BenchError::Config(format!("the SDC provider did not start: {err}"))
        })?;
        let devices: Vec<String> = ready["devices"]
            .as_array()
            .map(|d| {
                d.iter()
                    .filter_map(|x| x["xaddr"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if devices.len() != n {
            return Err(BenchError::Config(format!(
                "the SDC provider announced {} devices of {n}",
                devices.len()
            )));
        }
        let (vt_raised, sent) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let stderr = child.stderr.take().expect("piped");
        let (v, s) = (vt_raised.clone(), sent.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let Ok(e) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                match e["ev"].as_str() {
                    Some("vt") if e["presence"] == true => {
                        v.fetch_add(1, Ordering::Relaxed);
                    }
                    Some("sent") | Some("stopping") => {
                        if let Some(n) = e["samples"].as_u64().or(e["samples_sent"].as_u64()) {
                            s.store(n, Ordering::Relaxed);
                        }
                    }
                    _ => {}
                }
            }
        });
        Ok(Provider {
            child,
            devices,
            vt_raised,
            sent,
        })
    }

    fn cpu_seconds(&self) -> f64 {
        super::daemon::proc_cpu_seconds(self.child.id())
    }

    /// SIGKILL: gone without a word, as a device that loses power.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `n` free loopback ports from one base, tried a few times.
fn free_ports(n: usize) -> Result<u16, BenchError> {
    for _ in 0..50 {
        let base = 20_000 + (rand::random::<u32>() % 30_000) as u16;
        let ok =
            (0..n as u16).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok());
        if ok {
            return Ok(base);
        }
    }
    Err(BenchError::Config(format!("no {n} free ports in a row")))
}

/// Each bed's status and whether its monitor (here, its device's session) is connected, as
/// the API shows them.
async fn states(daemon: &Daemon) -> Result<Vec<(String, String, bool)>, BenchError> {
    let v: serde_json::Value = serde_json::from_str(&daemon.get("/api/beds").await?)?;
    Ok(v["beds"]
        .as_array()
        .map(|b| {
            b.iter()
                .map(|x| {
                    (
                        x["bed"].as_str().unwrap_or_default().to_string(),
                        x["status"].as_str().unwrap_or_default().to_string(),
                        x["connected"].as_bool().unwrap_or(false),
                    )
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Seconds from `t0` until each bed first meets each of `tests` (by status and connected),
/// sorted; beds that never do within [`STATE_WAIT`] are left out.
async fn until_states<const K: usize>(
    daemon: &Daemon,
    beds: usize,
    tests: [fn(&str, bool) -> bool; K],
    t0: Instant,
) -> Result<[Vec<f64>; K], BenchError> {
    let mut at: [std::collections::HashMap<String, f64>; K] =
        std::array::from_fn(|_| Default::default());
    while at.iter().any(|a| a.len() < beds) && t0.elapsed() < STATE_WAIT {
        for (bed, status, connected) in states(daemon).await? {
            for (test, at) in tests.iter().zip(at.iter_mut()) {
                if test(&status, connected) {
                    at.entry(bed.clone()).or_insert(t0.elapsed().as_secs_f64());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(at.map(|a| {
        let mut secs: Vec<f64> = a.into_values().collect();
        secs.sort_by(f64::total_cmp);
        secs
    }))
}

fn live(status: &str, _: bool) -> bool {
    status == "live"
}

fn marked(status: &str, _: bool) -> bool {
    status == "stale" || status == "lost"
}

fn unplugged(_: &str, connected: bool) -> bool {
    !connected
}

async fn run(mut cfg: Config, args: &SdcArgs, data: &Path) -> Result<SdcFigures, BenchError> {
    let dir = tempfile::tempdir()?;
    let keys = vec![(Database::Vfdb, "422".to_string())];
    let data = data.to_path_buf();
    let recs = tokio::task::spawn_blocking(move || load_keys(&data, &keys))
        .await
        .expect("loading a record does not panic")
        .map_err(|e| BenchError::Config(format!("the devices play vfdb 422: {e}")))?;
    let (from, to) = (PLAY_SECS.0 * 250, PLAY_SECS.1 * 250);
    let leads = recs[0].leads();
    let samples = dir.path().join("ecg.json");
    std::fs::write(
        &samples,
        serde_json::json!({"II": &leads[0][from..to], "V": &leads[1][from..to]}).to_string(),
    )?;

    // The devices: `per_process` to a process, each at its own port.
    let n = args.beds;
    let base = free_ports(n)?;
    let eprs: Vec<String> = (0..n.div_ceil(args.per_process))
        .map(|_| format!("urn:uuid:{}", uuid_v4()))
        .collect();
    // VT conditions raised within the steady load (which starts once every bed is live).
    let vt_until = args.duration - 5.0;
    let start_all = |vt_until: f64| -> Result<Vec<Provider>, BenchError> {
        (0..n)
            .step_by(args.per_process)
            .zip(&eprs)
            .map(|(first, epr)| {
                let k = args.per_process.min(n - first);
                Provider::start(
                    &args.peer,
                    &samples,
                    (base + first as u16, k, first),
                    epr,
                    vt_until,
                )
            })
            .collect()
    };
    let mut providers = start_all(vt_until)?;
    let xaddrs: Vec<String> = providers.iter().flat_map(|p| p.devices.clone()).collect();
    let bed = |i: usize| format!("bed-{}", i + 1);
    cfg.storage.db = dir.path().join("bench.db");
    cfg.ensemble.members = args.members.clone();
    cfg.composer.enabled = false;
    cfg.ward.beds = (0..n).map(bed).collect();
    cfg.ward.max_beds = cfg.ward.max_beds.max(n);
    cfg.server.max_connections = cfg.server.max_connections.max(n + 64);
    // The bench reads the beds' states from the API without signing in (loopback).
    cfg.dashboard.public_ward_view = true;
    cfg.sdc.enabled = true;
    cfg.sdc.notify_listen = format!("127.0.0.1:{}", free_ports(1)?);
    cfg.sdc.devices = xaddrs
        .iter()
        .enumerate()
        .map(|(i, x)| SdcDevice {
            xaddr: x.clone(),
            bed: bed(i),
        })
        .collect();
    let ready_within = Duration::from_secs(60 + 10 * args.members.len() as u64);
    let daemon = Daemon::start(cfg.clone(), dir.path(), ready_within).await?;
    let started = Instant::now();
    // Steady load from when every bed is live.
    let [up] = until_states(&daemon, n, [live], started).await?;
    if up.len() < n {
        return Err(BenchError::Http(format!(
            "only {} of {n} SDC beds went live within {STATE_WAIT:?}",
            up.len()
        )));
    }
    let devices_cpu = |p: &[Provider]| p.iter().map(Provider::cpu_seconds).sum::<f64>();
    let (cpu0, dev0, t0) = (
        daemon.cpu_seconds(),
        devices_cpu(&providers),
        Instant::now(),
    );
    tokio::time::sleep(Duration::from_secs_f64(args.duration)).await;
    let seconds = t0.elapsed().as_secs_f64();
    let daemon_cpu_cores = (daemon.cpu_seconds() - cpu0) / seconds;
    let devices_cpu_cores = (devices_cpu(&providers) - dev0) / seconds;
    let vt_raised: u64 = providers
        .iter()
        .map(|p| p.vt_raised.load(Ordering::Relaxed))
        .sum();
    // Let the last windows and opinions commit.
    tokio::time::sleep(Duration::from_millis(cfg.engine.slo_ms * 3 + 2_000)).await;
    let steady_until_ms = crate::core::time::now_ms();

    // The devices are gone without a word, then come back at the same addresses.
    let mut sent: u64 = 0;
    for p in &mut providers {
        p.kill();
        // What it said it sent, up to its last second: it sent at most a second's more.
        sent += p.sent.load(Ordering::Relaxed) + 250 * p.devices.len() as u64;
    }
    let killed = Instant::now();
    let [gone, marked] = until_states(&daemon, n, [unplugged, marked], killed).await?;
    drop(providers);
    let mut providers = start_all(0.0)?;
    let returned = Instant::now();
    let [back] = until_states(&daemon, n, [live], returned).await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    for p in &mut providers {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = p.child.wait();
    }
    // The stopping line is read by the provider's reader thread: give it a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    sent += providers
        .iter()
        .map(|p| p.sent.load(Ordering::Relaxed))
        .sum::<u64>();
    let taken = daemon.scrape().await?.value("holmes_sdc_samples_total") as u64;
    daemon.stop(Duration::from_secs(30)).await?;

    let db = cfg.storage.db.clone();
    let read = tokio::task::spawn_blocking(move || read_db(&db, steady_until_ms))
        .await
        .expect("reading the database does not panic")?;
    let secs = |v: &[f64], q: f64| percentile(v, q);
    Ok(SdcFigures {
        beds: n,
        processes: eprs.len(),
        seconds,
        windows: read.latencies.len() + read.not_scored.values().sum::<usize>(),
        scored: read.latencies.len(),
        not_scored: read.not_scored,
        latency_ms_p50: percentile(&read.latencies, 0.5),
        latency_ms_p95: percentile(&read.latencies, 0.95),
        latency_ms_max: read.latencies.last().copied().unwrap_or(f64::NAN),
        daemon_cpu_cores,
        devices_cpu_cores,
        vt_raised: vt_raised as usize,
        vt_stored: read.vt_stored,
        vt_judged: read.opinion_ms.len(),
        alert_to_opinion_ms_p50: percentile(&read.opinion_ms, 0.5),
        alert_to_opinion_ms_p95: percentile(&read.opinion_ms, 0.95),
        alert_to_opinion_ms_max: read.opinion_ms.last().copied().unwrap_or(f64::NAN),
        beds_unplugged: gone.len(),
        unplugged_secs_p50: secs(&gone, 0.5),
        unplugged_secs_max: gone.last().copied().unwrap_or(f64::NAN),
        beds_marked: marked.len(),
        marked_secs_p50: secs(&marked, 0.5),
        marked_secs_max: marked.last().copied().unwrap_or(f64::NAN),
        beds_back: back.len(),
        back_secs_p50: secs(&back, 0.5),
        back_secs_max: back.last().copied().unwrap_or(f64::NAN),
        windows_twice: read.windows_twice,
        samples_taken: taken,
        samples_sent: sent,
    })
}

/// What the run left in the database.
struct Read {
    /// Scored windows' latencies (sorted), and the others by status, up to `until_ms`.
    latencies: Vec<f64>,
    not_scored: std::collections::BTreeMap<String, usize>,
    /// VT alarms stored up to `until_ms`, and each judged one's condition to opinion (sorted).
    vt_stored: usize,
    opinion_ms: Vec<f64>,
    /// Windows stored twice for a bed over the whole run.
    windows_twice: usize,
}

fn read_db(db: &Path, until_ms: i64) -> Result<Read, BenchError> {
    let c = crate::serving::store::open_read_only(db)?;
    let mut st = c.prepare(
        "SELECT status, CASE WHEN score IS NULL THEN NULL ELSE latency_ms END
         FROM scores WHERE committed_ms <= ?1",
    )?;
    let (mut latencies, mut not_scored) = (Vec::new(), std::collections::BTreeMap::new());
    for row in st.query_map([until_ms], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, Option<f64>>(1)?))
    })? {
        match row? {
            (s, Some(ms)) if s == "scored" => latencies.push(ms),
            (s, _) => *not_scored.entry(s).or_insert(0) += 1,
        }
    }
    latencies.sort_by(f64::total_cmp);
    let mut st = c.prepare(
        "SELECT judged_ms - onset_ms FROM monitor_alarms
         WHERE kind = 'vt' AND received_ms <= ?1",
    )?;
    let rows = st
        .query_map([until_ms], |r| r.get::<_, Option<i64>>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    let vt_stored = rows.len();
    let mut opinion_ms: Vec<f64> = rows.into_iter().flatten().map(|ms| ms as f64).collect();
    opinion_ms.sort_by(f64::total_cmp);
    let windows_twice: i64 = c.query_row(
        "SELECT COUNT(*) - COUNT(DISTINCT bed || '/' || window_end_ms) FROM scores",
        [],
        |r| r.get(0),
    )?;
    Ok(Read {
        latencies,
        not_scored,
        vt_stored,
        opinion_ms,
        windows_twice: windows_twice as usize,
    })
}

/// A random (version 4) UUID, as the devices' names.
fn uuid_v4() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}
