//! `holmes bench --drain`: a receiver outage's backlog drained by the daemon once the receiver
//! returns. For each link asked for (HL7, FHIR), an outage of `--outage-minutes` at `--beds`
//! beds and the link's cadence is left in the link's outbox (written here, through the
//! outbox the daemon uses, before the daemon starts: as an outage, or a restart in the middle
//! of one, leaves it); then `holmes serve` starts with that database and the link on toward a
//! receiver that is not there, and once the daemon is ready the receiver starts (the peers the
//! tests use: `tests/hl7_peer.py`, `tests/fhir_peer/server.mjs`, or another given by
//! `--hl7-peer` / `--fhir-peer`). Timed from the receiver's port answering to the daemon's
//! backlog (its `/metrics`) reaching zero, with the daemon's CPU and resident memory over the
//! drain; then what the receiver recorded is checked against the outbox: every message
//! arrived (by MSH-10, or FHIR identifier), none twice, each bed's in order.
//!
//! Neighbours: [`daemon`](super::daemon) runs the server; the [`outbox`] and the links are
//! [`outbound`](crate::outbound)'s.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::BenchError;
use super::daemon::Daemon;
use crate::config::Config;
use crate::outbound::message::{Draft, Observation};
use crate::outbound::{LinkStatus, fhir, hl7_spec, outbox};

#[derive(Debug, thiserror::Error)]
pub(crate) enum DrainError {
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("filling the outbox: {0}")]
    Outbox(#[from] outbox::OutboxError),
    #[error("reading the outbox: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("writing the report: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the receiver {peer} did not listen within {secs} s; its log ends:\n{log}")]
    Peer {
        peer: String,
        secs: u64,
        log: String,
    },
    #[error("--drain needs at least one bed and a positive --outage-minutes")]
    Size,
}

/// One of the two links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Link {
    Hl7,
    Fhir,
}

impl Link {
    /// Its outbox's table (one shape for both links).
    fn table(self) -> &'static str {
        match self {
            Link::Hl7 => outbox::HL7.table,
            Link::Fhir => outbox::FHIR.table,
        }
    }
}

impl std::str::FromStr for Link {
    type Err = String;

    fn from_str(s: &str) -> Result<Link, String> {
        match s {
            "hl7" => Ok(Link::Hl7),
            "fhir" => Ok(Link::Fhir),
            _ => Err(format!("unknown link {s:?} (hl7 or fhir)")),
        }
    }
}

/// What `holmes bench --drain` asks for.
#[derive(Debug, Clone)]
pub(crate) struct DrainArgs {
    pub(crate) beds: usize,
    /// Minutes of outage left in the outbox: one observation per bed per cadence.
    pub(crate) outage_minutes: f64,
    /// The links to drain, one daemon run each, in this order.
    pub(crate) links: Vec<Link>,
    /// The HL7 receiver's script (`PORT CONTROL_FILE OUT_FILE`, as `tests/hl7_peer.py`).
    pub(crate) hl7_peer: PathBuf,
    /// The FHIR server's script (`PORT DIR`, as `tests/fhir_peer/server.mjs`).
    pub(crate) fhir_peer: PathBuf,
    /// Seconds a drain may take before it is reported unfinished.
    pub(crate) timeout_secs: f64,
    pub(crate) json: bool,
}

/// What one link's drain measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DrainReport {
    pub(crate) link: Link,
    /// The receiver's script.
    pub(crate) receiver: String,
    pub(crate) beds: usize,
    pub(crate) outage_minutes: f64,
    /// Messages (HL7) or resources (FHIR) left in the outbox.
    pub(crate) queued: u64,
    /// Seconds writing them into the outbox.
    pub(crate) fill_secs: f64,
    /// Whether the backlog reached zero within the timeout.
    pub(crate) drained: bool,
    /// From the receiver's port answering to the backlog at zero (or the timeout).
    pub(crate) drain_secs: f64,
    pub(crate) per_sec: f64,
    /// Distinct queued messages the receiver holds.
    pub(crate) delivered: u64,
    /// Queued messages the receiver never got.
    pub(crate) lost: u64,
    /// Messages the receiver holds more than once (HL7: received twice by MSH-10; FHIR:
    /// stored twice by identifier).
    pub(crate) duplicates: u64,
    /// Requests beyond one per message (resends; FHIR answers them from what it holds).
    pub(crate) resent: u64,
    /// Beds whose messages arrived out of their queued order.
    pub(crate) out_of_order_beds: u64,
    /// What else the receiver got (keep-alives).
    pub(crate) other: u64,
    /// Refused (parked) and too old (dropped) at the end, from the daemon's metrics.
    pub(crate) parked: u64,
    pub(crate) dropped: u64,
    /// The daemon's CPU seconds over the drain, and per message (us).
    pub(crate) daemon_cpu_secs: f64,
    pub(crate) daemon_cpu_us_per_message: f64,
    /// The daemon's resident memory as the receiver returned, the most sampled during the
    /// drain, and its peak since start (VmHWM), MB.
    pub(crate) daemon_rss_mb_before: f64,
    pub(crate) daemon_rss_mb_max: f64,
    pub(crate) daemon_peak_rss_mb: f64,
}

/// `holmes bench --drain`.
pub(crate) fn main(cfg: Config, args: DrainArgs) -> Result<(), DrainError> {
    if args.beds == 0 || args.outage_minutes.is_nan() || args.outage_minutes <= 0.0 {
        return Err(DrainError::Size);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut reports = Vec::new();
    for &link in &args.links {
        let r = rt.block_on(run(cfg.clone(), &args, link))?;
        if !args.json {
            println!("{}", r.to_text());
        }
        reports.push(r);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    Ok(())
}

/// A free loopback port (free when asked; the receiver takes it later).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// One link's drain.
async fn run(mut cfg: Config, args: &DrainArgs, link: Link) -> Result<DrainReport, DrainError> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("bench.db");
    cfg.storage.db = db.clone();
    cfg.composer.enabled = false;
    let port = free_port()?;
    // While the receiver is away the link retries every second at most, so the drain starts
    // within a second of its return (the default back-off grows to a minute).
    cfg.hl7.enabled = link == Link::Hl7;
    cfg.fhir.enabled = link == Link::Fhir;
    cfg.hl7.receiver = format!("127.0.0.1:{port}");
    cfg.hl7.retry_max_ms = cfg.hl7.retry_min_ms.max(1_000).min(cfg.hl7.retry_max_ms);
    cfg.fhir.base_url = format!("http://127.0.0.1:{port}/fhir/R4");
    cfg.fhir.token_file = String::new();
    cfg.fhir.retry_max_ms = cfg.fhir.retry_min_ms.max(1_000).min(cfg.fhir.retry_max_ms);
    let cadence = match link {
        Link::Hl7 => cfg.hl7.cadence_secs,
        Link::Fhir => cfg.fhir.cadence_secs,
    };
    let cadences = ((args.outage_minutes * 60.0 / cadence).round() as usize).max(1);

    let t = Instant::now();
    let (queued, expected) = {
        let (cfg, db) = (cfg.clone(), db.clone());
        let beds = args.beds;
        tokio::task::spawn_blocking(move || fill(&cfg, &db, link, beds, cadences))
            .await
            .expect("filling the outbox does not panic")?
    };
    let fill_secs = t.elapsed().as_secs_f64();

    let ready_within = Duration::from_secs(60 + 10 * cfg.ensemble.members.len() as u64);
    let daemon = Daemon::start(cfg.clone(), dir.path(), ready_within).await?;
    let peer_dir = dir.path().join("peer");
    std::fs::create_dir_all(&peer_dir)?;
    let script = match link {
        Link::Hl7 => &args.hl7_peer,
        Link::Fhir => &args.fhir_peer,
    };
    let rss_before = daemon.rss_mb().0;
    let mut peer = Peer::start(link, script, port, &peer_dir)?;
    let t0 = Instant::now();
    let cpu0 = daemon.cpu_seconds();
    let (mut rss_max, mut drained) = (rss_before, false);
    let name = |what: &str| format!("holmes_{}_{what}", link_key(link));
    while t0.elapsed().as_secs_f64() < args.timeout_secs {
        rss_max = rss_max.max(daemon.rss_mb().0);
        if let Ok(m) = daemon.scrape().await
            && m.get(&name("backlog")) == Some(0.0)
        {
            drained = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drain_secs = t0.elapsed().as_secs_f64();
    let cpu = daemon.cpu_seconds() - cpu0;
    let peak = daemon.rss_mb().1;
    let last = daemon.scrape().await?;
    daemon.stop(Duration::from_secs(30)).await?;
    peer.stop();

    let got = match link {
        Link::Hl7 => hl7_received(&peer_dir.join("received.jsonl"))?,
        Link::Fhir => fhir_received(&peer_dir)?,
    };
    // Reports the age limit dropped were not to arrive; they are counted apart.
    let dropped_keys = dropped(&db, link)?;
    let expected: Expected = expected
        .into_iter()
        .filter(|(k, _)| !dropped_keys.contains(k))
        .collect();
    let check = check(&expected, &got);
    let n = |what: &str| last.value(&name(what)) as u64;
    Ok(DrainReport {
        link,
        receiver: script.display().to_string(),
        beds: args.beds,
        outage_minutes: args.outage_minutes,
        queued,
        fill_secs,
        drained,
        drain_secs,
        per_sec: check.delivered as f64 / drain_secs,
        delivered: check.delivered,
        lost: check.lost,
        duplicates: check.duplicates,
        resent: got.requests.saturating_sub(check.delivered + got.other),
        out_of_order_beds: check.out_of_order_beds,
        other: got.other,
        parked: n("parked"),
        dropped: n("observations_dropped_total"),
        daemon_cpu_secs: cpu,
        daemon_cpu_us_per_message: cpu * 1e6 / queued.max(1) as f64,
        daemon_rss_mb_before: rss_before,
        daemon_rss_mb_max: rss_max,
        daemon_peak_rss_mb: peak,
    })
}

fn link_key(link: Link) -> &'static str {
    match link {
        Link::Hl7 => "hl7",
        Link::Fhir => "fhir",
    }
}

/// A queued message: the key the receiver shows it by (the MSH-10, or the FHIR identifier's
/// value) and its bed, in outbox order.
type Expected = Vec<(String, String)>;

/// Writes `cadences` observations of each of `beds` beds (the last ones first, as an outage
/// leaves them) into `link`'s outbox in `db`, through the outbox the daemon uses; returns the
/// rows queued and each one's key and bed in row order.
fn fill(
    cfg: &Config,
    db: &Path,
    link: Link,
    beds: usize,
    cadences: usize,
) -> Result<(u64, Expected), DrainError> {
    let db = &crate::serving::store::Db::open(db, &crate::appliance::schema::WARD)
        .map_err(outbox::OutboxError::from)?;
    // Room for the whole outage at once: the fill is not the feed.
    let spec = match link {
        Link::Hl7 => hl7_spec(&crate::config::Hl7Config {
            queue: 65_536,
            ..cfg.hl7.clone()
        }),
        Link::Fhir => fhir::spec(&crate::config::FhirConfig {
            queue: 65_536,
            ..cfg.fhir.clone()
        }),
    };
    let cadence_ms = match link {
        Link::Hl7 => cfg.hl7.cadence_secs,
        Link::Fhir => cfg.fhir.cadence_secs,
    } * 1000.0;
    let status = Arc::new(LinkStatus::default());
    let (ob, thread) = outbox::start(
        spec,
        db,
        &Default::default(),
        status.clone(),
        Arc::new(tokio::sync::Notify::new()),
    )?;
    let now = crate::core::time::now_ms();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let parts = if link == Link::Fhir { 2 } else { 1 };
    let rows = (beds * cadences * parts) as u64;
    rt.block_on(async {
        for k in 0..cadences {
            for b in 1..=beds {
                let back = (cadences - k) as f64 * cadence_ms;
                ob.enqueue(Draft::Observation(Observation {
                    bed: format!("bed-{b}"),
                    at_ms: now - back as i64,
                    score: Some(0.04),
                    heart_rate_bpm: Some(72.0),
                    risk_alarm: false,
                    quality: "scored",
                    patient: None,
                }))
                .await;
            }
        }
        while status.backlog.load(Ordering::Relaxed) < rows {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    drop(ob);
    thread.join().expect("the outbox thread does not panic");
    let table = link.table();
    // Each report waited in the outbox since its window, as in a real outage, so the age limit
    // (`max_observation_age_secs`) sees the oldest of them as old as the outage.
    let c = db.lock();
    c.execute(
        &format!(
            "UPDATE {table} SET created_ms = created_ms
               - (?1 - (id - (SELECT MIN(id) FROM {table})) / ?2) * ?3"
        ),
        rusqlite::params![cadences as i64, (beds * parts) as i64, cadence_ms as i64],
    )?;
    let mut st = c.prepare(&format!(
        "SELECT id, bed, body FROM {table} WHERE state = 'pending' ORDER BY id"
    ))?;
    let expected = st
        .query_map([], |r| {
            let (id, bed, body): (i64, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
            Ok((id, bed, body))
        })?
        .map(|r| {
            r.map(|(id, bed, body)| match link {
                Link::Hl7 => (id.to_string(), bed),
                Link::Fhir => (fhir_identifier(&body).unwrap_or_default(), bed),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((expected.len() as u64, expected))
}

/// The keys (as [`Expected`] holds them) of the reports the link dropped as too old.
fn dropped(db: &Path, link: Link) -> Result<HashSet<String>, DrainError> {
    let c = crate::serving::store::open(db).map_err(outbox::OutboxError::from)?;
    let table = link.table();
    let mut st = c.prepare(&format!(
        "SELECT id, body FROM {table} WHERE state = 'dropped' ORDER BY id"
    ))?;
    let keys = st
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
        .map(|r| {
            r.map(|(id, body)| match link {
                Link::Hl7 => id.to_string(),
                Link::Fhir => fhir_identifier(&body).unwrap_or_default(),
            })
        })
        .collect::<Result<HashSet<_>, _>>()?;
    Ok(keys)
}

/// A FHIR resource's identifier value.
fn fhir_identifier(body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    Some(v["identifier"][0]["value"].as_str()?.to_owned())
}

/// A receiver started for the drain (a child process), with its log beside its files.
struct Peer(Child);

impl Peer {
    /// Starts `script` (python3 for `.py`, node otherwise) listening on `port`, answering
    /// everything as accepted, with its files in `dir`; returns once the port answers.
    fn start(link: Link, script: &Path, port: u16, dir: &Path) -> Result<Peer, DrainError> {
        let py = script.extension().is_some_and(|e| e == "py");
        let mut cmd = Command::new(if py { "python3" } else { "node" });
        if !py && node_major() == Some(20) {
            // Node 20's global WebSocket (which @medplum/core reads at load) is behind a flag.
            cmd.arg("--experimental-websocket");
        }
        cmd.arg(script).arg(port.to_string());
        match link {
            Link::Hl7 => {
                std::fs::write(dir.join("control"), "aa")?;
                cmd.arg(dir.join("control")).arg(dir.join("received.jsonl"));
            }
            Link::Fhir => {
                std::fs::write(dir.join("control"), "ok")?;
                cmd.arg(dir);
            }
        }
        let log = std::fs::File::create(dir.join("peer.log"))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut peer = Peer(child);
        let t = Instant::now();
        let within = Duration::from_secs(60);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(peer);
            }
            if peer.0.try_wait()?.is_some() || t.elapsed() > within {
                peer.stop();
                let log = std::fs::read_to_string(dir.join("peer.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                return Err(DrainError::Peer {
                    peer: script.display().to_string(),
                    secs: within.as_secs(),
                    log: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Node's major version, if node runs.
fn node_major() -> Option<u32> {
    let o = Command::new("node").arg("--version").output().ok()?;
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// What a receiver recorded.
#[derive(Debug, Default, PartialEq)]
struct Received {
    /// The key of each message it holds, in the order it took them (HL7: every message
    /// received; FHIR: every resource stored).
    keys: Vec<String>,
    /// Requests it answered (HL7: messages received; FHIR: writes).
    requests: u64,
    /// Messages that were none of the queued ones (HL7 keep-alives).
    other: u64,
}

/// What `tests/hl7_peer.py` received (`received.jsonl`): observation reports by MSH-10;
/// anything else counted as other.
fn hl7_received(path: &Path) -> Result<Received, DrainError> {
    let mut r = Received::default();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let msg = v["msg"].as_str().unwrap_or("");
        let msh: Vec<&str> = msg
            .split(['\r', '\n'])
            .next()
            .unwrap_or("")
            .split('|')
            .collect();
        r.requests += 1;
        // MSH-1 is the separator itself: MSH-n is at index n - 1.
        if msh.get(8).is_some_and(|k| k.starts_with("ORU^R01")) {
            r.keys.push(msh.get(9).unwrap_or(&"").to_string());
        } else {
            r.other += 1;
        }
    }
    Ok(r)
}

/// What a FHIR peer stored (`store.jsonl`, each resource it created, by identifier value) and
/// was sent (`requests.jsonl`, each write).
fn fhir_received(dir: &Path) -> Result<Received, DrainError> {
    let mut r = Received::default();
    for line in std::fs::read_to_string(dir.join("store.jsonl"))
        .unwrap_or_default()
        .lines()
    {
        r.keys.push(fhir_identifier(line).unwrap_or_default());
    }
    r.requests = std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap_or_default()
        .lines()
        .count() as u64;
    Ok(r)
}

/// What the receiver's record says of the queued messages.
#[derive(Debug, PartialEq)]
struct Check {
    delivered: u64,
    lost: u64,
    duplicates: u64,
    out_of_order_beds: u64,
}

/// Compares what was queued (in outbox order) with what the receiver holds: how many it has,
/// lacks and holds twice, and how many beds' messages it took out of their queued order (by
/// the first time it took each).
fn check(expected: &Expected, got: &Received) -> Check {
    let rank: HashMap<&str, (usize, &str)> = expected
        .iter()
        .enumerate()
        .map(|(i, (k, bed))| (k.as_str(), (i, bed.as_str())))
        .collect();
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    let mut last: HashMap<&str, usize> = HashMap::new();
    let mut disordered = HashSet::new();
    for k in &got.keys {
        let Some(&(i, bed)) = rank.get(k.as_str()) else {
            continue;
        };
        if !seen.insert(k.as_str()) {
            duplicates += 1;
            continue;
        }
        if last.get(bed).is_some_and(|&j| j > i) {
            disordered.insert(bed);
        }
        last.insert(bed, i);
    }
    Check {
        delivered: seen.len() as u64,
        lost: (expected.len() - seen.len()) as u64,
        duplicates,
        out_of_order_beds: disordered.len() as u64,
    }
}

impl DrainReport {
    pub(crate) fn to_text(&self) -> String {
        let what = match self.link {
            Link::Hl7 => "HL7 messages",
            Link::Fhir => "FHIR resources",
        };
        format!(
            "{link:?} drain, {beds} beds, {min} min outage: {queued} {what} queued (in {fill:.1} s); \
             {state} in {secs:.1} s from the receiver's return ({rate:.0}/s); {delivered} delivered, \
             {lost} lost, {dup} twice, {resent} resent, {ooo} beds out of order, {other} other; \
             {parked} parked, {dropped} dropped; daemon CPU {cpu:.1} s ({us:.0} us a message), RSS {before:.0} MB \
             before, at most {max:.0} MB during (peak since start {hwm:.0} MB); receiver {receiver}",
            link = self.link,
            beds = self.beds,
            min = self.outage_minutes,
            queued = self.queued,
            fill = self.fill_secs,
            state = if self.drained {
                "drained"
            } else {
                "NOT drained"
            },
            secs = self.drain_secs,
            rate = self.per_sec,
            delivered = self.delivered,
            lost = self.lost,
            dup = self.duplicates,
            resent = self.resent,
            ooo = self.out_of_order_beds,
            other = self.other,
            parked = self.parked,
            dropped = self.dropped,
            cpu = self.daemon_cpu_secs,
            us = self.daemon_cpu_us_per_message,
            before = self.daemon_rss_mb_before,
            max = self.daemon_rss_mb_max,
            hwm = self.daemon_peak_rss_mb,
            receiver = self.receiver,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued() -> Expected {
        // Two beds, three cadences, in outbox order.
        (1..=6)
            .map(|i| (i.to_string(), format!("bed-{}", 1 + (i + 1) % 2)))
            .collect()
    }

    fn got(keys: &[&str]) -> Received {
        Received {
            keys: keys.iter().map(|k| k.to_string()).collect(),
            requests: keys.len() as u64,
            other: 0,
        }
    }

    #[test]
    fn everything_once_in_order_is_a_clean_drain() {
        let c = check(&queued(), &got(&["1", "2", "3", "4", "5", "6"]));
        assert_eq!(
            c,
            Check {
                delivered: 6,
                lost: 0,
                duplicates: 0,
                out_of_order_beds: 0
            }
        );
        // Beds interleave differently: each bed's own order is what counts.
        let c = check(&queued(), &got(&["2", "1", "4", "3", "6", "5"]));
        assert_eq!(c.out_of_order_beds, 0);
    }

    #[test]
    fn a_lost_a_doubled_and_a_reordered_message_are_each_counted() {
        let c = check(&queued(), &got(&["1", "2", "3", "5", "6"]));
        assert_eq!((c.delivered, c.lost), (5, 1));
        let c = check(&queued(), &got(&["1", "2", "3", "3", "4", "5", "6"]));
        assert_eq!((c.lost, c.duplicates), (0, 1));
        // bed-1 holds 1, 3, 5: 5 before 3 is out of order; bed-2's order is kept.
        let c = check(&queued(), &got(&["1", "2", "5", "4", "3", "6"]));
        assert_eq!(c.out_of_order_beds, 1);
        // A message that was never queued (a keep-alive) is neither lost nor a duplicate.
        let c = check(&queued(), &got(&["1", "2", "3", "4", "5", "6", "99"]));
        assert_eq!((c.delivered, c.lost, c.duplicates), (6, 0, 0));
    }

    #[test]
    fn the_hl7_record_is_read_by_msh10_and_keep_alives_counted_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("received.jsonl");
        let lines = [
            r#"{"msg": "MSH|^~\\&|HOLMES|WARD|||20251127||ORU^R01^ORU_R01|17|P|2.6\rPV1||I|^^bed-1", "answer": "aa"}"#,
            r#"{"msg": "MSH|^~\\&|HOLMES|WARD|||20251127||ORU^R40^ORU_R40|k1|P|2.6", "answer": "aa"}"#,
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let r = hl7_received(&path).unwrap();
        assert_eq!(r.keys, vec!["17".to_string()]);
        assert_eq!((r.requests, r.other), (2, 1));
    }
}
