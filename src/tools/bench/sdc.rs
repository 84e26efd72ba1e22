//! `holmes bench --sdc`: the daemon consuming a ward of IEEE 11073 SDC devices, beside the
//! same ward over the WebSocket path. The devices are the test peer's (`--sdc-peer`: Dräger's
//! `sdc11073` playing vfdb 422 as two 250-Hz ECG leads, each device from its own place),
//! `--sdc-per-process` of them to a Python process at nice 10 (on a ward the devices are other
//! machines). The WebSocket run goes first (records replayed by the simulated monitors, as
//! `holmes bench --records` does), then the SDC run on a fresh daemon with the same members:
//! once every bed is live, `--duration` seconds of steady load (window latency, the daemon's
//! CPU: the consumer's share a bed is the difference of the two runs), during which each
//! device raises its VT alert condition at staggered times (from its `DeterminationTime`, on
//! this machine's clock, to Holmes's opinion stored). Then the devices are killed (no
//! `SubscriptionEnd`) and started again at the same addresses: the time until each bed shows
//! its device gone and until it is stale, the time from its device's return until it is live,
//! and no frame or window taken twice. With `--sdc-tls-dir` both directions are mutual TLS.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::daemon::Daemon;
use super::{BenchError, BenchOptions, BenchReport, Scenario};
use crate::config::{Config, SdcDevice, Stagger};
use crate::core::stats::percentile;
use crate::training::dataset::{Database, default_data_dir, load_keys};

/// Where the devices play vfdb 422 from and to (s): sinus rhythm into its first VT.
const PLAY_SECS: (usize, usize) = (1311, 1345);
/// Seconds after the steady load starts (every bed live, and told "go") at which device 0
/// raises its VT (the bed then holds the 16 s an opinion reads), every 40 s after, and the
/// stagger between devices.
const VT_AT: f64 = 20.0;
const VT_EVERY: f64 = 40.0;
const VT_STAGGER: f64 = 0.37;
/// Longest wait for a device process to say it is ready, and for the beds to change state
/// after the devices go or come back.
const READY_WAIT: Duration = Duration::from_secs(120);
const STATE_WAIT: Duration = Duration::from_secs(60);
/// Most devices a run may have (their ports are taken in one run below the ephemeral range).
const MAX_DEVICES: usize = 4096;

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
    /// Mutual TLS: a folder with `cacert.pem`, `usercert.pem` and `userkey.pem` (a CA and a
    /// certificate it signed for 127.0.0.1), shown by the devices and by Holmes alike.
    pub(crate) tls_dir: Option<PathBuf>,
    pub(crate) json: bool,
}

/// What the SDC run measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SdcFigures {
    pub(crate) beds: usize,
    pub(crate) processes: usize,
    /// Over mutual TLS (`--sdc-tls-dir`), or plain HTTP.
    pub(crate) tls: bool,
    /// Seconds of steady load, from when every bed was live; the figures down to the alert's
    /// are over it.
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
    /// Of the beds marked, those live again after their device came back, and the time from
    /// that device's process saying it was ready, s.
    pub(crate) beds_back: usize,
    pub(crate) back_secs_p50: f64,
    pub(crate) back_secs_max: f64,
    /// Frames the ward refused as already taken (its `duplicates`, summed over the beds), and
    /// windows stored twice for a bed (the same end), over the whole run.
    pub(crate) frames_twice: u64,
    pub(crate) windows_twice: usize,
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
    if args.beds == 0 || args.beds > MAX_DEVICES || args.per_process == 0 {
        return Err(BenchError::Config(format!(
            "--sdc needs 1 to {MAX_DEVICES} beds and at least one device a process"
        )));
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
             devices killed: {}/{} beds shown unconnected, p50 / max {:.1} / {:.1} s; {}/{} stale or lost, p50 / max {:.1} / {:.1} s; back: {}/{} live, p50 / max {:.1} / {:.1} s after their device's return\n\
             frames taken twice {}, windows stored twice {}",
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
            s.beds_marked,
            s.back_secs_p50,
            s.back_secs_max,
            s.frames_twice,
            s.windows_twice,
        )
    }
}

/// A provider process (killed when dropped): its devices' addresses, when it said it was
/// ready, and the VT conditions it said it raised.
struct Provider {
    child: Child,
    stdin: Option<ChildStdin>,
    devices: Vec<String>,
    ready: Instant,
    vt_raised: Arc<AtomicU64>,
}

/// Where a process's devices sit in the ward: the first's port and place, and how many.
#[derive(Debug, Clone, Copy)]
struct Block {
    port: u16,
    first: usize,
    n: usize,
}

impl Provider {
    /// Starts the devices of `block`, named under `epr`, playing `samples`; their VT
    /// conditions at `vt_at` seconds after they are told "go".
    fn start(
        peer: &Path,
        samples: &Path,
        block: Block,
        epr: &str,
        (vt_at, tls_dir): (&[String], Option<&Path>),
    ) -> Result<Provider, BenchError> {
        // The devices are other machines on a ward: here they yield the cores to the daemon.
        let mut cmd = Command::new("nice");
        cmd.args(["-n", "10", "python3"])
            .arg(peer)
            .args(["--port", &block.port.to_string()])
            .args(["--devices", &block.n.to_string()])
            .args(["--first-index", &block.first.to_string()])
            .args(["--hz", "250", "--chunk-ms", "100", "--no-validate"])
            .args(["--epr", epr, "--vt-stagger", &VT_STAGGER.to_string()])
            .arg("--vt-after-go")
            .arg("--samples")
            .arg(samples);
        if !vt_at.is_empty() {
            cmd.arg("--vt-at").args(vt_at);
        }
        if let Some(dir) = tls_dir {
            cmd.arg("--tls-dir").arg(dir);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Self::failed(format!("nice -n 10 python3 {}: {e}", peer.display())))?;
        let (stdin, stdout, stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let mut p = Provider {
            child,
            stdin,
            devices: Vec::new(),
            ready: Instant::now(),
            vt_raised: Arc::new(AtomicU64::new(0)),
        };
        // Its stderr: the VT conditions raised (JSON lines), the rest kept for an error.
        let said = Arc::new(std::sync::Mutex::new(String::new()));
        if let Some(stderr) = stderr {
            let (v, said) = (p.vt_raised.clone(), said.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    match serde_json::from_str::<serde_json::Value>(&line) {
                        Ok(e) if e["ev"] == "vt" && e["presence"] == true => {
                            v.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(_) => {}
                        Err(_) => {
                            let mut s = said.lock().expect("lock");
                            if s.len() < 4000 {
                                s.push_str(&line);
                                s.push('\n');
                            }
                        }
                    }
                }
            });
        }
        // Its ready line, within a bound.
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = BufReader::new(stdout).read_line(&mut line);
                let _ = tx.send(line);
            });
        }
        let line = rx.recv_timeout(READY_WAIT).unwrap_or_default();
        let ready: serde_json::Value = serde_json::from_str(&line).map_err(|_| {
            p.kill();
            Self::failed(format!(
                "its devices did not say they were ready; it said:\n{}",
                said.lock().expect("lock")
            ))
        })?;
        p.ready = Instant::now();
        p.devices = ready["devices"]
            .as_array()
            .map(|d| {
                d.iter()
                    .filter_map(|x| x["xaddr"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if p.devices.len() != block.n {
            return Err(Self::failed(format!(
                "it announced {} devices of {}",
                p.devices.len(),
                block.n
            )));
        }
        Ok(p)
    }

    fn failed(why: String) -> BenchError {
        BenchError::Config(format!("the SDC test devices: {why}"))
    }

    /// Starts the devices' VT clock.
    fn go(&mut self) -> Result<(), BenchError> {
        let stdin = self.stdin.as_mut().expect("piped");
        stdin.write_all(b"go\n")?;
        stdin.flush()?;
        Ok(())
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

/// `n` free loopback ports in a row, below the ephemeral range (where a port closed a moment
/// ago may not yet be free to bind again).
fn free_ports(n: usize) -> Result<u16, BenchError> {
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<usize>().ok())
        .unwrap_or(32_768);
    let (low, high) = (10_000usize, ephemeral.saturating_sub(n));
    for _ in 0..50 {
        if high <= low {
            break;
        }
        let base = low + rand::random::<u64>() as usize % (high - low);
        let ok =
            (base..base + n).all(|p| std::net::TcpListener::bind(("127.0.0.1", p as u16)).is_ok());
        if ok {
            return Ok(base as u16);
        }
    }
    Err(BenchError::Config(format!(
        "no {n} free ports in a row below {ephemeral}"
    )))
}

/// Each bed's status, whether its device's session is connected, and its frames refused as
/// already taken, as the API shows them.
async fn states(daemon: &Daemon) -> Result<Vec<(String, String, bool, u64)>, BenchError> {
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
                        x["duplicates"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default())
}

/// When each bed first met each of `tests` (by status and connected); beds that never did
/// within [`STATE_WAIT`] are left out.
async fn until_states<const K: usize>(
    daemon: &Daemon,
    beds: usize,
    tests: [fn(&str, bool) -> bool; K],
) -> Result<[std::collections::HashMap<String, Instant>; K], BenchError> {
    let t0 = Instant::now();
    let mut at: [std::collections::HashMap<String, Instant>; K] =
        std::array::from_fn(|_| Default::default());
    while at.iter().any(|a| a.len() < beds) && t0.elapsed() < STATE_WAIT {
        for (bed, status, connected, _) in states(daemon).await? {
            for (test, at) in tests.iter().zip(at.iter_mut()) {
                if test(&status, connected) {
                    at.entry(bed.clone()).or_insert_with(Instant::now);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(at)
}

/// Seconds from `t0` to each time, sorted.
fn since(t0: Instant, at: &std::collections::HashMap<String, Instant>) -> Vec<f64> {
    let mut secs: Vec<f64> = at
        .values()
        .map(|t| t.saturating_duration_since(t0).as_secs_f64())
        .collect();
    secs.sort_by(f64::total_cmp);
    secs
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
    let blocks: Vec<(Block, String)> = (0..n)
        .step_by(args.per_process)
        .map(|first| {
            let block = Block {
                port: base + first as u16,
                first,
                n: args.per_process.min(n - first),
            };
            (block, format!("urn:uuid:{}", crate::protocol::sdc::uuid4()))
        })
        .collect();
    // Each device's VT within the steady load (counted from "go"), the last device's too.
    let last = (n - 1) as f64 * VT_STAGGER;
    let vt_at: Vec<String> = (0..)
        .map(|k| VT_AT + VT_EVERY * k as f64)
        .take_while(|&t| t + last + 5.0 < args.duration)
        .map(|t| format!("{t:.2}"))
        .collect();
    let start_all = |vt_at: &[String]| -> Result<Vec<Provider>, BenchError> {
        blocks
            .iter()
            .map(|(block, epr)| {
                let tls = args.tls_dir.as_deref();
                Provider::start(&args.peer, &samples, *block, epr, (vt_at, tls))
            })
            .collect()
    };
    let mut providers = start_all(&vt_at)?;
    let xaddrs: Vec<String> = providers.iter().flat_map(|p| p.devices.clone()).collect();
    let bed = |i: usize| format!("bed-{}", i + 1);
    cfg.storage.db = dir.path().join("bench.db");
    cfg.ensemble.members = args.members.clone();
    cfg.composer.enabled = false;
    cfg.ward.beds = (0..n).map(bed).collect();
    cfg.ward.max_beds = cfg.ward.max_beds.max(n);
    cfg.ward.scoring = true;
    // As the WebSocket run: windows spread over the hop.
    if cfg.ward.stagger == Stagger::Off {
        cfg.ward.stagger = Stagger::WallClock;
    }
    cfg.server.max_connections = cfg.server.max_connections.max(n + 64);
    // The bench reads the beds' states from the API without signing in (loopback).
    cfg.dashboard.public_ward_view = true;
    cfg.sdc.enabled = true;
    cfg.sdc.notify_listen = format!("127.0.0.1:{}", free_ports(1)?);
    if let Some(dir) = &args.tls_dir {
        cfg.sdc.tls_ca = Some(dir.join("cacert.pem"));
        cfg.sdc.tls = Some(crate::config::TlsConfig {
            cert: dir.join("usercert.pem"),
            key: dir.join("userkey.pem"),
        });
    }
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
    // Steady load from when every bed is live.
    let [up] = until_states(&daemon, n, [live]).await?;
    if up.len() < n {
        return Err(BenchError::Config(format!(
            "only {} of {n} SDC beds went live within {STATE_WAIT:?} (the daemon's log: {})",
            up.len(),
            dir.path().join("daemon.log").display()
        )));
    }
    for p in &mut providers {
        p.go()?;
    }
    let devices_cpu = |p: &[Provider]| p.iter().map(Provider::cpu_seconds).sum::<f64>();
    let (cpu0, dev0, t0) = (
        daemon.cpu_seconds(),
        devices_cpu(&providers),
        Instant::now(),
    );
    let steady_from_ms = crate::core::time::now_ms();
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
    for p in &mut providers {
        p.kill();
    }
    let killed = Instant::now();
    let [gone, stale] = until_states(&daemon, n, [unplugged, marked]).await?;
    drop(providers);
    let providers = start_all(&[])?;
    let again: Vec<String> = providers.iter().flat_map(|p| p.devices.clone()).collect();
    if again != xaddrs {
        return Err(BenchError::Config(
            "the devices came back at other addresses".into(),
        ));
    }
    let [live_again] = until_states(&daemon, n, [live]).await?;
    // Each marked bed's return, from its own device's process being ready.
    let mut back: Vec<f64> = (0..n)
        .filter(|&i| stale.contains_key(&bed(i)))
        .filter_map(|i| {
            let ready = providers[i / args.per_process].ready;
            live_again
                .get(&bed(i))
                .map(|t| t.saturating_duration_since(ready).as_secs_f64())
        })
        .collect();
    back.sort_by(f64::total_cmp);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let frames_twice: u64 = states(&daemon).await?.iter().map(|s| s.3).sum();
    drop(providers);
    daemon.stop(Duration::from_secs(30)).await?;

    let db = cfg.storage.db.clone();
    let read = tokio::task::spawn_blocking(move || read_db(&db, steady_from_ms, steady_until_ms))
        .await
        .expect("reading the database does not panic")?;
    let (gone, stale) = (since(killed, &gone), since(killed, &stale));
    let last = |v: &[f64]| v.last().copied().unwrap_or(f64::NAN);
    Ok(SdcFigures {
        beds: n,
        processes: blocks.len(),
        tls: args.tls_dir.is_some(),
        seconds,
        windows: read.latencies.len() + read.not_scored.values().sum::<usize>(),
        scored: read.latencies.len(),
        not_scored: read.not_scored,
        latency_ms_p50: percentile(&read.latencies, 0.5),
        latency_ms_p95: percentile(&read.latencies, 0.95),
        latency_ms_max: last(&read.latencies),
        daemon_cpu_cores,
        devices_cpu_cores,
        vt_raised: vt_raised as usize,
        vt_stored: read.vt_stored,
        vt_judged: read.opinion_ms.len(),
        alert_to_opinion_ms_p50: percentile(&read.opinion_ms, 0.5),
        alert_to_opinion_ms_p95: percentile(&read.opinion_ms, 0.95),
        alert_to_opinion_ms_max: last(&read.opinion_ms),
        beds_unplugged: gone.len(),
        unplugged_secs_p50: percentile(&gone, 0.5),
        unplugged_secs_max: last(&gone),
        beds_marked: stale.len(),
        marked_secs_p50: percentile(&stale, 0.5),
        marked_secs_max: last(&stale),
        beds_back: back.len(),
        back_secs_p50: percentile(&back, 0.5),
        back_secs_max: last(&back),
        frames_twice,
        windows_twice: read.windows_twice,
    })
}

/// What the run left in the database.
struct Read {
    /// Scored windows' latencies (sorted), and the others by status, over the steady load.
    latencies: Vec<f64>,
    not_scored: std::collections::BTreeMap<String, usize>,
    /// VT alarms stored over the steady load, and each judged one's condition to opinion
    /// (sorted).
    vt_stored: usize,
    opinion_ms: Vec<f64>,
    /// Windows stored twice for a bed over the whole run.
    windows_twice: usize,
}

fn read_db(db: &Path, from_ms: i64, until_ms: i64) -> Result<Read, BenchError> {
    let c = crate::serving::store::open_read_only(db)?;
    let mut st = c.prepare(
        "SELECT status, CASE WHEN score IS NULL THEN NULL ELSE latency_ms END
         FROM scores WHERE committed_ms BETWEEN ?1 AND ?2",
    )?;
    let (mut latencies, mut not_scored) = (Vec::new(), std::collections::BTreeMap::new());
    for row in st.query_map([from_ms, until_ms], |r| {
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
         WHERE kind = 'vt' AND received_ms BETWEEN ?1 AND ?2",
    )?;
    let rows = st
        .query_map([from_ms, until_ms], |r| r.get::<_, Option<i64>>(0))?
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
