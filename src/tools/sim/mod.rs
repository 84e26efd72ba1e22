//! `holmes simulate`: N bedside monitors on WebSocket clients. Each bed replays a PhysioNet
//! record (at 250 Hz, resampled where needed, heart rate from the beats) or a synthetic ECG
//! ([`ecgsyn`](crate::signal::ecgsyn)), in 100 ms frames at a chosen speed, with 1 Hz heart-rate vitals. It
//! reconnects with backoff and resends what the server has not seen, can inject faults, and
//! stops after its duration. With `monitor_alarms`, a bed replaying a record also sends the
//! alarms a textbook monitor raises on it ([`alarms`]).

pub mod alarms;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::json;
use tokio_tungstenite::Connector;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::protocol::{Patient, ServerMsg};
use crate::signal::heart_rate::heart_rate_at;
use crate::training::dataset::{self, Database, RecordData};

/// Samples per frame (100 ms at 250 Hz).
pub(crate) const FRAME_SAMPLES: usize = 25;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Dataset(#[from] dataset::DatasetError),
    #[error("no records found under {0}")]
    NoRecords(PathBuf),
    #[error(transparent)]
    Tls(#[from] crate::http::tls::TlsError),
    #[error("the proxy monitor's alarms: {0}")]
    Alarms(#[from] crate::signal::classical::ClassicalError),
}

/// Where the beds' signals come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Replay PhysioNet records from this folder (vfdb/, cudb/, mitdb/).
    Records(PathBuf),
    /// McSharry's dynamical model.
    Synthetic,
}

/// Fault injection, each a probability per frame.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    pub drop: f64,
    pub duplicate: f64,
    pub corrupt: f64,
}

/// Options of `holmes simulate`.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub url: String,
    pub beds: usize,
    pub source: Source,
    /// Wall-clock run time.
    pub duration: Duration,
    /// Signal seconds per wall-clock second.
    pub speed: f64,
    /// Where in each record replay starts, signal seconds from its beginning (records only;
    /// past the end it wraps around).
    pub start_secs: f64,
    pub token: String,
    /// Device name of every hello (None: `sim-<bed>` per bed).
    pub device: Option<String>,
    /// CA certificate (PEM) to trust for `wss://` (None: the system's roots).
    pub ca: Option<PathBuf>,
    /// Beds are named `<prefix><n>`, n from 1.
    pub bed_prefix: String,
    /// Each monitor's hello admits its bed with the patient `SIM-<n>` under this authority
    /// (None: no patient). `holmes simulate` checks it as the daemon will.
    pub patient_authority: Option<String>,
    pub faults: Faults,
    /// Only these record keys (`db/name`), in this order; empty: every record.
    pub records: Vec<String>,
    pub seed: u64,
    /// Monitors join over this span: monitor i first connects at `i / beds * ramp`
    /// (zero: all at once).
    pub ramp: Duration,
    /// A reconnect storm: at this time after the start every monitor drops its connection
    /// without a close frame, then reconnects after its backoff and resends what the server
    /// has not acknowledged.
    pub storm_at: Option<Duration>,
    /// Each bed replaying a record also sends the alarms the proxy monitor raises on it
    /// ([`alarms`]), each once, after the samples up to its onset; faults apply to samples
    /// frames only. Synthetic beds send none.
    pub monitor_alarms: bool,
}

impl SimOptions {
    /// The patient bed `n` (from 1) is admitted with: `SIM-<n>` under
    /// [`patient_authority`](Self::patient_authority), if one is set.
    pub fn patient(&self, n: usize) -> Option<Patient> {
        self.patient_authority.as_ref().map(|a| Patient {
            id: format!("SIM-{n}"),
            authority: a.clone(),
        })
    }

    /// `beds` monitors of `source` against `url` for a day, in real time, without faults:
    /// token `demo`, beds `bed-1`, `bed-2`, ..., each its own device; every record, seed 1,
    /// all at once. Set the fields that differ.
    pub(crate) fn new(url: String, beds: usize, source: Source) -> SimOptions {
        SimOptions {
            url,
            beds,
            source,
            duration: Duration::from_secs(86_400),
            speed: 1.0,
            start_secs: 0.0,
            token: "demo".into(),
            device: None,
            ca: None,
            bed_prefix: "bed-".into(),
            patient_authority: None,
            faults: Faults::default(),
            records: Vec::new(),
            seed: 1,
            ramp: Duration::ZERO,
            storm_at: None,
            monitor_alarms: false,
        }
    }
}

/// What the run did.
#[derive(Debug, Default)]
pub struct SimReport {
    pub frames_sent: AtomicU64,
    pub connects: AtomicU64,
    pub errors_received: AtomicU64,
    pub(crate) closes_received: AtomicU64,
    /// Largest delay of a frame behind its 100 ms schedule, microseconds (a sender that
    /// cannot keep up, or a server pushing back).
    pub(crate) max_lag_us: AtomicU64,
    /// Connections dropped on purpose by a reconnect storm.
    pub(crate) storm_drops: AtomicU64,
    /// Monitor alarms sent (`alarm` messages, not their ends).
    pub alarms_sent: AtomicU64,
}

enum Signal {
    Record {
        rec: Arc<RecordData>,
        pos: usize,
        /// The proxy monitor's alarms on the record, where the beds send them.
        alarms: Option<Arc<alarms::Schedule>>,
    },
    Synthetic {
        generator: crate::signal::ecgsyn::EcgSyn,
        t: f64,
    },
}

impl Signal {
    /// The next frame: primary and (if any) secondary lead, and the time in signal seconds.
    fn next(&mut self) -> (Vec<f32>, Option<Vec<f32>>) {
        match self {
            Signal::Record { rec, pos, .. } => {
                let len = rec.len();
                let take = |lead: &Vec<f32>| {
                    (0..FRAME_SAMPLES)
                        .map(|k| lead[(*pos + k) % len])
                        .collect::<Vec<f32>>()
                };
                let p = take(&rec.leads[0]);
                let s = rec.leads.get(1).map(take);
                *pos = (*pos + FRAME_SAMPLES) % len;
                (p, s)
            }
            Signal::Synthetic { generator, t } => {
                let p: Vec<f32> = (0..FRAME_SAMPLES)
                    .map(|_| generator.next_sample())
                    .collect();
                let s = p.iter().map(|v| -0.5 * v).collect();
                *t += FRAME_SAMPLES as f64 / crate::signal::ecgsyn::FS;
                (p, Some(s))
            }
        }
    }

    /// Heart rate reported at signal second `k` after the start.
    fn heart_rate(&self, start: usize, k: u64) -> f32 {
        match self {
            Signal::Record { rec, .. } => {
                let t = (start as f64 + (k as f64) * 250.0) / 250.0;
                heart_rate_at(&rec.beats, 250.0, t)
            }
            Signal::Synthetic { generator, .. } => generator.heart_rate() as f32,
        }
    }

    /// Where replay starts, samples into the record.
    fn start(&self) -> usize {
        match self {
            Signal::Record { pos, .. } => *pos,
            Signal::Synthetic { .. } => 0,
        }
    }

    /// The bed's walk through its record's alarms, where it sends them.
    fn alarm_player(&self) -> Option<alarms::AlarmPlayer> {
        match self {
            Signal::Record {
                pos,
                alarms: Some(s),
                ..
            } => Some(alarms::AlarmPlayer::new(s, *pos)),
            _ => None,
        }
    }

    fn has_secondary(&self) -> bool {
        match self {
            Signal::Record { rec, .. } => rec.leads.len() > 1,
            Signal::Synthetic { .. } => true,
        }
    }
}

/// Runs the simulation to its end and reports.
pub async fn run(opts: SimOptions) -> Result<Arc<SimReport>, SimError> {
    let report = Arc::new(SimReport::default());
    let signals: Vec<Signal> = match &opts.source {
        Source::Synthetic => (0..opts.beds)
            .map(|i| Signal::Synthetic {
                generator: crate::signal::ecgsyn::EcgSyn::new(
                    opts.seed + i as u64,
                    60.0 + (i % 7) as f64 * 6.0,
                ),
                t: 0.0,
            })
            .collect(),
        Source::Records(dir) => {
            let mut keys = dataset::record_keys(dir)?;
            if !opts.records.is_empty() {
                keys = opts
                    .records
                    .iter()
                    .filter_map(|k| {
                        let (db, name) = k.split_once('/')?;
                        Some((Database::from_name(db)?, name.to_owned()))
                    })
                    .collect();
            }
            if keys.is_empty() {
                return Err(SimError::NoRecords(dir.clone()));
            }
            let wanted: Vec<_> = keys.iter().take(opts.beds).cloned().collect();
            let dir = dir.clone();
            let loaded = tokio::task::spawn_blocking(move || dataset::load_keys(&dir, &wanted))
                .await
                .expect("record loading does not panic")?;
            let loaded: Vec<Arc<RecordData>> = loaded.into_iter().map(Arc::new).collect();
            // Each record's alarms once, however many beds play it.
            let schedules: Vec<Option<Arc<alarms::Schedule>>> = if opts.monitor_alarms {
                let recs = loaded.clone();
                tokio::task::spawn_blocking(move || {
                    use rayon::prelude::*;
                    recs.par_iter()
                        .map(|r| alarms::Schedule::of_record(r).map(|s| Some(Arc::new(s))))
                        .collect::<Result<Vec<_>, _>>()
                })
                .await
                .expect("the proxy monitor does not panic")?
            } else {
                vec![None; loaded.len()]
            };
            (0..opts.beds)
                .map(|i| {
                    let rec = loaded[i % loaded.len()].clone();
                    let pos = (opts.start_secs.max(0.0) * 250.0) as usize % rec.len().max(1);
                    let alarms = schedules[i % loaded.len()].clone();
                    Signal::Record { rec, pos, alarms }
                })
                .collect()
        }
    };
    let connector = match opts.ca.clone() {
        Some(ca) => Some(Connector::Rustls(
            tokio::task::spawn_blocking(move || crate::http::tls::client_config(&ca))
                .await
                .expect("reading the CA file does not panic")?,
        )),
        None => None,
    };
    let start = Instant::now();
    let deadline = start + opts.duration;
    let mut tasks = Vec::new();
    for (i, sig) in signals.into_iter().enumerate() {
        let bed = format!("{}{}", opts.bed_prefix, i + 1);
        let join_at = start + opts.ramp.mul_f64(i as f64 / opts.beds.max(1) as f64);
        let m = Monitor {
            bed,
            patient: opts.patient(i + 1),
            opts: opts.clone(),
            connector: connector.clone(),
            join_at,
            storm: opts.storm_at.map(|d| start + d),
            deadline,
            report: report.clone(),
            seed: opts.seed ^ (i as u64 + 1),
        };
        tasks.push(tokio::spawn(monitor(m, sig)));
    }
    for t in tasks {
        let _ = t.await;
    }
    Ok(report)
}

/// One simulated monitor's schedule.
struct Monitor {
    bed: String,
    /// The patient its hello names, if any.
    patient: Option<Patient>,
    opts: SimOptions,
    /// TLS client settings for `wss://` (absent: the default roots).
    connector: Option<Connector>,
    /// First connection.
    join_at: Instant,
    /// When the reconnect storm drops this monitor's connection.
    storm: Option<Instant>,
    deadline: Instant,
    report: Arc<SimReport>,
    seed: u64,
}

/// The monitors' WebSocket settings: a read buffer of 8 KiB, as the server's monitor endpoint
/// reads with. The server sends a monitor only short acks and errors, and tungstenite zeroes
/// the free part of its read buffer (128 KiB by default) before every read: with a thousand
/// monitors on the appliance's own cores (`holmes bench`), that zeroing was a sixth of the
/// simulator's CPU (`docs/EXPERIMENTS.md`, 2026-11-26).
fn client_config() -> WebSocketConfig {
    WebSocketConfig::default().read_buffer_size(8 * 1024)
}

/// A samples frame with leads `II` and, if given, `V`.
#[derive(Serialize)]
struct SamplesFrame<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    seq: u64,
    t_ms: i64,
    leads: FrameLeads<'a>,
}

#[derive(Serialize)]
struct FrameLeads<'a> {
    #[serde(rename = "II")]
    primary: &'a [f32],
    #[serde(rename = "V", skip_serializing_if = "Option::is_none")]
    secondary: Option<&'a [f32]>,
}

/// The text of a samples frame, written straight from the samples: each sample as the
/// shortest decimal of its `f32` (going through `serde_json::Value` widened them to `f64` and
/// wrote up to 17 digits). The server reads it back to the same `f32` at every magnitude an
/// ECG in mV has (serde_json reads an `f32` through `f64`, which can land one step off only
/// for values under about 1e-15).
fn samples_text(seq: u64, t_ms: i64, primary: &[f32], secondary: Option<&[f32]>) -> String {
    serde_json::to_string(&SamplesFrame {
        kind: "samples",
        seq,
        t_ms,
        leads: FrameLeads { primary, secondary },
    })
    .expect("a samples frame serialises")
}

/// One simulated monitor.
async fn monitor(m: Monitor, mut sig: Signal) {
    let Monitor {
        bed,
        patient,
        opts,
        connector,
        join_at,
        mut storm,
        deadline,
        report,
        seed,
    } = m;
    tokio::time::sleep_until(join_at.into()).await;
    let mut rng = SmallRng::seed_from_u64(seed);
    let base_ms = crate::core::time::now_ms();
    let period = Duration::from_secs_f64(0.1 / opts.speed.max(1e-3));
    let device = opts.device.clone().unwrap_or_else(|| format!("sim-{bed}"));
    let mut seq: u64 = 0;
    let mut vseq: u64 = 0;
    let mut sent: VecDeque<(u64, String)> = VecDeque::new();
    let mut backoff = Duration::from_millis(200);
    let start_pos = sig.start();
    let mut alarm_player = sig.alarm_player();
    // Alarm messages due and not yet sent (a broken connection sends them after the resend).
    let mut alarms_due: VecDeque<alarms::AlarmMessage> = VecDeque::new();
    let mut ecg = vec![json!({"lead": "II", "hz": 250})];
    if sig.has_secondary() {
        ecg.push(json!({"lead": "V", "hz": 250}));
    }
    let mut hello = json!({"type": "hello", "protocol": 1, "bed": bed, "device": device, "token": opts.token,
                       "ecg": ecg, "vitals": [{"name": "hr", "unit": "bpm"}]});
    if let Some(p) = patient {
        hello["patient"] = json!(p);
    }
    let hello = hello.to_string();
    let mut next_tick = Instant::now();
    while Instant::now() < deadline {
        let Ok(Ok((ws, _))) = tokio::time::timeout(
            Duration::from_secs(5),
            tokio_tungstenite::connect_async_tls_with_config(
                &opts.url,
                Some(client_config()),
                false,
                connector.clone(),
            ),
        )
        .await
        else {
            tokio::time::sleep(backoff.min(deadline.saturating_duration_since(Instant::now())))
                .await;
            backoff = (backoff * 2).min(Duration::from_secs(8));
            continue;
        };
        let (mut tx, mut rx) = ws.split();
        if tx.send(Message::Text(hello.clone().into())).await.is_err() {
            continue;
        }
        let welcome = tokio::time::timeout(Duration::from_secs(5), rx.next()).await;
        let next_seq = match welcome {
            Ok(Some(Ok(Message::Text(t)))) => match serde_json::from_str::<ServerMsg>(&t) {
                Ok(ServerMsg::Welcome {
                    next_samples_seq, ..
                }) => next_samples_seq,
                _ => continue,
            },
            Ok(Some(Ok(Message::Close(_)))) => {
                report.closes_received.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(8));
                continue;
            }
            _ => continue,
        };
        report.connects.fetch_add(1, Ordering::Relaxed);
        backoff = Duration::from_millis(200);
        // Resend what the server has not seen yet, from the local buffer.
        let mut broken = false;
        for (s, text) in sent.iter().filter(|(s, _)| *s >= next_seq) {
            let _ = s;
            if tx.send(Message::Text(text.clone().into())).await.is_err() {
                broken = true;
                break;
            }
        }
        if broken {
            continue;
        }
        if send_alarms(&mut tx, &mut alarms_due, &report)
            .await
            .is_err()
        {
            continue;
        }
        loop {
            if Instant::now() >= deadline {
                let _ = tx
                    .send(Message::Text(json!({"type": "bye"}).to_string().into()))
                    .await;
                let _ = tx.close().await;
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(storm.unwrap_or(deadline).into()), if storm.is_some() => {
                    // Dropping both halves closes the TCP connection with no close frame.
                    storm = None;
                    report.storm_drops.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                _ = tokio::time::sleep_until(next_tick.into()) => {
                    let lag = Instant::now().saturating_duration_since(next_tick);
                    report.max_lag_us.fetch_max(lag.as_micros() as u64, Ordering::Relaxed);
                    next_tick += period;
                    let (p, s) = sig.next();
                    let t_ms = base_ms + seq as i64 * 100;
                    let text = samples_text(seq, t_ms, &p, s.as_deref());
                    sent.push_back((seq, text.clone()));
                    if sent.len() > 600 {
                        sent.pop_front();
                    }
                    seq += 1;
                    let roll: f64 = rng.random();
                    let f = opts.faults;
                    let mut out = Vec::new();
                    if roll < f.drop {
                        // dropped on the way
                    } else if roll < f.drop + f.duplicate {
                        out.push(text.clone());
                        out.push(text);
                    } else if roll < f.drop + f.duplicate + f.corrupt {
                        out.push(text[..text.len() / 2].to_owned());
                        out.push(text);
                    } else {
                        out.push(text);
                    }
                    if seq.is_multiple_of(10) {
                        vseq += 1;
                        let hr = sig.heart_rate(start_pos, vseq);
                        out.push(json!({"type": "vitals", "seq": vseq, "t_ms": base_ms + vseq as i64 * 1000,
                                        "values": [{"name": "hr", "value": hr, "status": []}]}).to_string());
                    }
                    for m in out {
                        if tx.send(Message::Text(m.into())).await.is_err() {
                            broken = true;
                            break;
                        }
                        report.frames_sent.fetch_add(1, Ordering::Relaxed);
                    }
                    if let Some(p) = alarm_player.as_mut() {
                        alarms_due.extend(p.due(seq * FRAME_SAMPLES as u64, base_ms));
                    }
                    if broken || send_alarms(&mut tx, &mut alarms_due, &report).await.is_err() {
                        break;
                    }
                }
                msg = rx.next() => match msg {
                    Some(Ok(Message::Text(t))) if t.contains("\"type\":\"error\"") => {
                        report.errors_received.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                        report.closes_received.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    _ => {}
                }
            }
        }
        tokio::time::sleep(backoff).await;
    }
}

/// Sends the alarm messages due, oldest first, each removed once sent.
async fn send_alarms<S>(
    tx: &mut S,
    due: &mut VecDeque<alarms::AlarmMessage>,
    report: &SimReport,
) -> Result<(), S::Error>
where
    S: futures_util::Sink<Message> + Unpin,
{
    while let Some(m) = due.front() {
        tx.send(Message::Text(m.text.clone().into())).await?;
        if m.raise {
            report.alarms_sent.fetch_add(1, Ordering::Relaxed);
        }
        due.pop_front();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ClientMsg, parse_client};

    #[test]
    fn a_samples_frame_reads_back_to_the_same_samples() {
        let primary: Vec<f32> = (0..FRAME_SAMPLES)
            .map(|k| (k as f32 * 0.37).sin() * 1.7 + 1e-7 * k as f32)
            .collect();
        let secondary: Vec<f32> = primary.iter().map(|v| -0.5 * v).collect();
        for second in [None, Some(secondary.as_slice())] {
            let text = samples_text(42, 1_700_000_000_123, &primary, second);
            let Ok(ClientMsg::Samples {
                seq, t_ms, leads, ..
            }) = parse_client(&text)
            else {
                panic!("not a samples frame: {text}");
            };
            assert_eq!((seq, t_ms), (42, 1_700_000_000_123));
            let back = |lead: &str| -> Option<Vec<f32>> {
                leads
                    .get(lead)
                    .map(|v| v.iter().map(|s| s.expect("a number")).collect())
            };
            assert_eq!(back("II"), Some(primary.clone()), "bit for bit");
            assert_eq!(back("V"), second.map(<[f32]>::to_vec));
            assert_eq!(leads.len(), 1 + second.is_some() as usize);
        }
        assert_eq!(
            samples_text(0, 0, &[0.1, -1.25], None),
            r#"{"type":"samples","seq":0,"t_ms":0,"leads":{"II":[0.1,-1.25]}}"#,
            "the shortest text of each f32"
        );
    }
}
