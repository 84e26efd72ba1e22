//! The monitor side of the server: one task per WebSocket connection on `/ws/monitor`, and what
//! the monitors' streams cost the CPU ([`cost`]).
//! It checks the hello and its device token ([`devices`](crate::serving::ingest::devices)), attaches to the
//! bed in the [`ward`](crate::serving::ward), validates every frame against what the hello announced,
//! answers bad frames with an error (the connection carries on) and fatal problems with a
//! close code. The bed's patient identity, from the hello and `patient` messages, goes to the
//! ward's admissions ([`patient`]).

/// The tables the ingest's tests use: the store's, the devices' and the ingest's costs.
#[cfg(test)]
pub(crate) const TEST_SCHEMA: crate::serving::store::Schema =
    crate::serving::store::Schema::new(&[
        crate::serving::store::MIGRATIONS,
        devices::MIGRATIONS,
        cost::MIGRATIONS,
    ]);

pub(crate) mod cost;
pub(crate) mod devices;
mod patient;
pub(crate) mod pcd04;
mod replies;
pub(crate) mod sdc;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::{IngestConfig, LeadsConfig};

mod leads;
use crate::core::window::MAX_LEADS;
use crate::protocol::{
    ClientMsg, ErrorCode, PROTOCOL_VERSION, ServerMsg, close, parse_binary, parse_client,
};
use crate::serving::ingest::devices::DeviceAuth;
use crate::serving::store::audit::{Action, AuditLog};
use crate::serving::ward::{AlarmMsg, BedCmd, SampleFrame, Ward};
use leads::lead_slots;
use patient::Bedside;

/// Replies queued to one monitor; while the queue is full (the monitor is not reading them),
/// further replies are dropped and counted.
const OUT_QUEUE: usize = 64;
/// The appliance's ECG rate.
const ECG_HZ: f64 = 250.0;
/// Most ECG leads a hello may announce (the binary lead-off mask has 16 bits).
const MAX_ECG_CHANNELS: usize = 16;
/// Most vitals a hello may announce.
const MAX_VITALS: usize = 32;

/// What ingest reads of the configuration (its own section and the lead-name roles), and the
/// audit log it records the ward's refusals in.
#[derive(Debug, Clone)]
pub(crate) struct IngestSettings {
    pub(crate) ingest: IngestConfig,
    pub(crate) leads: LeadsConfig,
    pub(crate) audit: AuditLog,
}

/// A monitor that stops reading must not hold its task (and its bed) forever; also how long
/// an ending connection waits for its queued replies and close frame to be written.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

async fn close_with(socket: &mut WebSocket, code: u16, reason: &str) {
    let frame = Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }));
    let _ = tokio::time::timeout(SEND_TIMEOUT, socket.send(frame)).await;
}

async fn send(socket: &mut WebSocket, m: ServerMsg) -> Result<(), ()> {
    match tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Text(m.to_text().into()))).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(()),
    }
}

/// Serves one monitor connection until it closes, is superseded, or the server stops.
pub(crate) async fn connection(
    mut socket: WebSocket,
    cfg: IngestSettings,
    ward: Ward,
    devices: DeviceAuth,
    shutdown: CancellationToken,
) {
    let hello_timeout = Duration::from_secs_f64(cfg.ingest.hello_timeout_secs);
    let hello = match tokio::time::timeout(hello_timeout, socket.recv()).await {
        Ok(Some(Ok(Message::Text(t)))) => parse_client(&t),
        Ok(Some(Ok(_))) => Err("the first message must be a JSON text hello".into()),
        Ok(Some(Err(e))) => {
            if let Some((code, r)) = read_failure(&e, &cfg) {
                close_with(&mut socket, code, &r).await;
            }
            return;
        }
        Ok(None) => return,
        Err(_) => Err(format!("no hello within {} s", hello_timeout.as_secs_f64())),
    };
    let (bed, device, token, ecg, vitals, admitted) = match hello {
        Ok(ClientMsg::Hello {
            protocol,
            bed,
            device,
            token,
            ecg,
            vitals,
            patient,
        }) => {
            if protocol != PROTOCOL_VERSION {
                let r = format!(
                    "protocol {protocol} is not supported (this server speaks {PROTOCOL_VERSION})"
                );
                return close_with(&mut socket, close::BAD_HELLO, &r).await;
            }
            (bed, device, token, ecg, vitals, patient)
        }
        Ok(_) => {
            return close_with(
                &mut socket,
                close::BAD_HELLO,
                "the first message must be a hello",
            )
            .await;
        }
        Err(e) => {
            return close_with(
                &mut socket,
                close::BAD_HELLO,
                &truncate(&format!("bad hello: {e}")),
            )
            .await;
        }
    };
    if bed.is_empty() || bed.len() > 64 || device.is_empty() || device.len() > 128 {
        return close_with(
            &mut socket,
            close::BAD_HELLO,
            "bed (1-64 chars) and device (1-128) are required",
        )
        .await;
    }
    if device.starts_with(sdc::DEVICE_PREFIX) {
        let r = format!(
            "device names beginning {:?} are the SDC devices'",
            sdc::DEVICE_PREFIX
        );
        return close_with(&mut socket, close::BAD_HELLO, &r).await;
    }
    // Announced leads: name -> role slot, in hello order.
    let mut ann = Announced {
        by_name: HashMap::new(),
        order: Vec::new(),
    };
    if ecg.len() > MAX_ECG_CHANNELS || vitals.len() > MAX_VITALS {
        let r = format!("at most {MAX_ECG_CHANNELS} ECG leads and {MAX_VITALS} vitals per hello");
        return close_with(&mut socket, close::BAD_HELLO, &r).await;
    }
    for ch in &ecg {
        if (ch.hz - ECG_HZ).abs() > 1e-6 {
            let r = format!(
                "lead {}: sampling rate {} Hz, this appliance takes {ECG_HZ} Hz",
                ch.lead, ch.hz
            );
            return close_with(&mut socket, close::BAD_HELLO, &truncate(&r)).await;
        }
        if ann.by_name.contains_key(&ch.lead) {
            let r = format!("lead {} is announced twice", ch.lead);
            return close_with(&mut socket, close::BAD_HELLO, &truncate(&r)).await;
        }
        ann.by_name.insert(ch.lead.clone(), None);
    }
    let names: Vec<&str> = ecg.iter().map(|ch| ch.lead.as_str()).collect();
    for (ch, slot) in ecg.iter().zip(lead_slots(&cfg.leads, &names)) {
        ann.by_name.insert(ch.lead.clone(), slot);
        ann.order.push(slot);
    }
    let claim = match devices.admit(&device, &bed, &token).await {
        Ok(claim) => claim,
        Err(refusal) => {
            // The device name is no patient data; the bed and the token stay out of the log.
            tracing::warn!(device = ?device, reason = refusal.as_str(), "Monitor refused: token not accepted");
            metrics::counter!("holmes_monitor_refusals_total", "reason" => "token").increment(1);
            return close_with(&mut socket, close::UNAUTHORIZED, "token not accepted").await;
        }
    };
    let vitals: Vec<String> = vitals.into_iter().map(|v| v.name).collect();
    let (out_tx, out_rx) = mpsc::channel::<ServerMsg>(OUT_QUEUE);
    let attach = match ward
        .attach(&bed, &device, claim, ann.names(), vitals, out_tx.clone())
        .await
    {
        Ok(a) => a,
        Err(e) => {
            tracing::info!(code = e.code, device = ?device, "Monitor refused");
            if [close::WARD_FULL, close::DEVICE_FULL].contains(&e.code) {
                metrics::counter!("holmes_monitor_refusals_total", "reason" => "full").increment(1);
                let detail = serde_json::json!({
                    "device": device, "bed": bed, "code": e.code, "reason": e.reason,
                });
                cfg.audit.record(Some(&device), Action::BedRefused, detail);
            }
            return close_with(&mut socket, e.code, &truncate(&e.reason)).await;
        }
    };
    // The bed's patient is the hello's from now on (none: discharged).
    let bedside = Bedside {
        bed: &bed,
        device: &device,
        admissions: ward.admissions(),
        audit: &cfg.audit,
    };
    bedside.admit(admitted);
    let welcome = ServerMsg::Welcome {
        bed: bed.clone(),
        next_samples_seq: attach.next_samples_seq,
        next_vitals_seq: attach.next_vitals_seq,
        window_secs: ward.window_secs(),
        hop_secs: ward.hop_secs(),
    };
    if send(&mut socket, welcome).await.is_err() {
        ward.detach(&bed, attach.conn).await;
        return;
    }
    // From here the socket's writing half is the writer's; this task only reads.
    let (sink, mut socket) = futures_util::StreamExt::split(socket);
    let writer = replies::spawn(sink, out_rx);
    let dropped = attach.replies_dropped.clone();
    let queue = |m: ServerMsg| replies::queue(&out_tx, m, &dropped);
    let mut kicked = attach.kicked;
    let mut errors: (Instant, u32) = (Instant::now(), 0);
    let idle = Duration::from_secs_f64(cfg.ingest.idle_timeout_secs);
    let mut last_rx = tokio::time::Instant::now();
    let mut rate = RateLimit::new(cfg.ingest.max_messages_per_sec);
    let to_bed = ToBed::new(attach.tx);
    // Made once, not once a frame: each would register with the server's shutdown and with
    // the timer afresh, ten times a second per bed. The idle timer is moved on when it fires.
    let stopping = shutdown.cancelled();
    tokio::pin!(stopping);
    let quiet = tokio::time::sleep_until(last_rx + idle);
    tokio::pin!(quiet);
    let reason = loop {
        // Over the message rate: stop reading until a message is allowed again (the socket's
        // buffers fill and TCP slows the sender); say so once per episode.
        if let Some(wait) = rate.wait(tokio::time::Instant::now()) {
            if rate.announce() {
                let m = ServerMsg::error(
                    None,
                    ErrorCode::RateLimited,
                    format!(
                        "more than {} messages per second; reading paused",
                        cfg.ingest.max_messages_per_sec
                    ),
                );
                if queue(m).is_err() {
                    break None;
                }
            }
            tokio::select! {
                _ = &mut stopping => break Some((close::GOING_AWAY, "server shutting down".to_string())),
                k = &mut kicked => break k.ok(),
                _ = tokio::time::sleep(wait) => {}
            }
            continue;
        }
        tokio::select! {
            _ = &mut stopping => break Some((close::GOING_AWAY, "server shutting down".to_string())),
            _ = &mut quiet => {
                if last_rx + idle > tokio::time::Instant::now() {
                    quiet.as_mut().reset(last_rx + idle);
                    continue;
                }
                // A half-open link must not hold the bed: the monitor reconnects when it can.
                break Some((close::IDLE, format!("nothing received for {} s", idle.as_secs_f64())));
            }
            k = &mut kicked => break k.ok(),
            incoming = futures_util::StreamExt::next(&mut socket) => {
                last_rx = tokio::time::Instant::now();
                rate.take(last_rx);
                let reply = match incoming {
                    None | Some(Ok(Message::Close(_))) => break None,
                    Some(Err(e)) => break read_failure(&e, &cfg),
                    Some(Ok(Message::Text(t))) => handle_text(&cfg, &t, &ann, &to_bed, &bedside).await,
                    Some(Ok(Message::Binary(b))) => handle_binary(&cfg, &b, &ann, &to_bed).await,
                    Some(Ok(_)) => None,
                };
                let (m, counts) = match reply {
                    Some(Reply::Msg(m)) => (m, true),
                    Some(Reply::Warn(m)) => (m, false),
                    Some(Reply::Gone) => break Some((close::GOING_AWAY, "bed aggregator stopped".into())),
                    None => continue,
                };
                if counts && matches!(m, ServerMsg::Error { .. }) {
                    if errors.0.elapsed() > Duration::from_secs(60) {
                        errors = (Instant::now(), 0);
                    }
                    errors.1 += 1;
                    if errors.1 > cfg.ingest.max_errors_per_minute {
                        break Some((close::TOO_MANY_ERRORS, "too many bad frames in a minute".into()));
                    }
                }
                if queue(m).is_err() {
                    break None;
                }
            }
        }
    };
    writer
        .finish(reason.map(|(code, r)| (code, truncate(&r))))
        .await;
    ward.detach(&bed, attach.conn).await;
}

/// The close code and reason for a message the socket could not read: too large (1009), or a
/// text message that is not UTF-8 (1007); None for a broken connection (nothing to say).
fn read_failure(e: &axum::Error, cfg: &IngestSettings) -> Option<(u16, String)> {
    let e = e.to_string().to_lowercase();
    if ["too long", "too big", "size"]
        .iter()
        .any(|w| e.contains(w))
    {
        return Some((
            close::TOO_BIG,
            format!("message larger than {} bytes", cfg.ingest.max_frame_bytes),
        ));
    }
    if e.contains("utf-8") || e.contains("utf8") {
        return Some((
            close::INVALID_PAYLOAD,
            "a text message that is not UTF-8".into(),
        ));
    }
    None
}

/// A token bucket: `per_sec` messages a second, bursts of one second's worth.
struct RateLimit {
    per_sec: f64,
    tokens: f64,
    at: tokio::time::Instant,
    /// The current over-rate episode was announced to the monitor.
    announced: bool,
}

impl RateLimit {
    fn new(per_sec: u32) -> RateLimit {
        let per_sec = f64::from(per_sec.max(1));
        RateLimit {
            per_sec,
            tokens: per_sec,
            at: tokio::time::Instant::now(),
            announced: false,
        }
    }

    fn refill(&mut self, now: tokio::time::Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * self.per_sec).min(self.per_sec);
        self.at = now;
    }

    /// A message arrived.
    fn take(&mut self, now: tokio::time::Instant) {
        self.refill(now);
        self.tokens -= 1.0;
    }

    /// How long to wait before reading the next message, if the rate is exceeded.
    fn wait(&mut self, now: tokio::time::Instant) -> Option<Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            // Back under the rate: a later episode is announced again (once it is well under).
            if self.tokens >= self.per_sec / 2.0 {
                self.announced = false;
            }
            return None;
        }
        Some(Duration::from_secs_f64((1.0 - self.tokens) / self.per_sec))
    }

    /// True the first time in an episode.
    fn announce(&mut self) -> bool {
        !std::mem::replace(&mut self.announced, true)
    }
}

/// Where a connection's frames go: its bed's queue, and the ingest's counters in `/metrics`,
/// looked up once per connection rather than once a frame (each look-up hashes the name and
/// its labels).
struct ToBed {
    tx: mpsc::Sender<BedCmd>,
    samples_frames: metrics::Counter,
    vitals_frames: metrics::Counter,
    samples: metrics::Counter,
}

impl ToBed {
    fn new(tx: mpsc::Sender<BedCmd>) -> ToBed {
        ToBed {
            tx,
            samples_frames: metrics::counter!("holmes_ingested_frames_total", "kind" => "samples"),
            vitals_frames: metrics::counter!("holmes_ingested_frames_total", "kind" => "vitals"),
            samples: metrics::counter!("holmes_ingested_samples_total"),
        }
    }
}

enum Reply {
    /// Send this to the monitor (an error counts towards the per-minute limit).
    Msg(ServerMsg),
    /// Send this to the monitor; the frame was kept, so it does not count as a bad frame.
    Warn(ServerMsg),
    /// The bed's aggregator is gone (server stopping).
    Gone,
}

impl From<ServerMsg> for Reply {
    fn from(m: ServerMsg) -> Reply {
        Reply::Msg(m)
    }
}

fn truncate(s: &str) -> String {
    // Close reasons must fit in 123 bytes.
    let mut out = String::new();
    for c in s.chars() {
        if out.len() + c.len_utf8() > 120 {
            break;
        }
        out.push(c);
    }
    out
}

/// The announced ECG channels: lead name to role slot, and the hello's order (for binary
/// frames). `None`: announced but not a role this appliance scores.
struct Announced {
    by_name: HashMap<String, Option<usize>>,
    order: Vec<Option<usize>>,
}

impl Announced {
    /// The name of the lead in each slot.
    fn names(&self) -> [Option<String>; MAX_LEADS] {
        let mut out: [Option<String>; MAX_LEADS] = Default::default();
        for (name, slot) in &self.by_name {
            if let Some(s) = slot.filter(|&s| s < MAX_LEADS) {
                out[s] = Some(name.clone());
            }
        }
        out
    }
}

async fn handle_text(
    cfg: &IngestSettings,
    text: &str,
    ann: &Announced,
    bed: &ToBed,
    bedside: &Bedside<'_>,
) -> Option<Reply> {
    let arrived = Instant::now();
    let msg = match parse_client(text) {
        Ok(m) => m,
        Err(e) => {
            return Some(ServerMsg::error(None, ErrorCode::Malformed, truncate_msg(&e)).into());
        }
    };
    let cmd = match msg {
        ClientMsg::Hello { .. } => {
            let m = ServerMsg::error(
                None,
                ErrorCode::UnexpectedHello,
                "already said hello on this connection",
            );
            return Some(m.into());
        }
        ClientMsg::Bye {} => BedCmd::Bye,
        ClientMsg::Alarm { id, kind, t_ms } => BedCmd::MonitorAlarm(AlarmMsg {
            id,
            kind,
            t_ms,
            names: ann.names(),
            arrived,
            received_ms: crate::core::time::now_ms(),
        }),
        ClientMsg::AlarmEnd { id, t_ms } => BedCmd::MonitorAlarmEnd { id, t_ms },
        ClientMsg::Patient { patient } => {
            bedside.admit(patient);
            return None;
        }
        ClientMsg::Vitals { seq, t_ms, values } => {
            let mut implausible = Vec::new();
            let values = values
                .into_iter()
                .map(|v| {
                    // A flagged reading is absent without complaint; a value is checked.
                    let value = v.value.filter(|_| v.status.is_empty());
                    let kept = value.and_then(|x| match plausible(cfg, &v.name, x) {
                        Ok(()) => Some(x as f32),
                        Err(why) => {
                            implausible.push(why);
                            None
                        }
                    });
                    (v.name, kept)
                })
                .collect();
            let cmd = BedCmd::Vitals {
                seq,
                t_ms,
                values,
                arrived,
            };
            if bed.tx.send(cmd).await.is_err() {
                return Some(Reply::Gone);
            }
            bed.vitals_frames.increment(1);
            return (!implausible.is_empty()).then(|| {
                let m = format!("{}; counted as absent", implausible.join("; "));
                Reply::Warn(ServerMsg::error(
                    Some(seq),
                    ErrorCode::BadVitals,
                    truncate_msg(&m),
                ))
            });
        }
        ClientMsg::Samples {
            seq,
            t_ms,
            leads,
            lead_off,
        } => {
            let mut data = Vec::with_capacity(leads.len());
            for (name, samples) in leads {
                let Some(slot) = ann.by_name.get(&name) else {
                    let m = format!("lead {name:?} was not announced in the hello");
                    return Some(ServerMsg::error(Some(seq), ErrorCode::BadShape, m).into());
                };
                data.push((*slot, samples));
            }
            let off: Vec<usize> = lead_off
                .iter()
                .filter_map(|n| ann.by_name.get(n).copied().flatten())
                .collect();
            return send_samples(cfg, seq, t_ms, data, &off, arrived, bed).await;
        }
    };
    if bed.tx.send(cmd).await.is_err() {
        return Some(Reply::Gone);
    }
    None
}

/// Whether a vital's reading is finite (as the f32 it is kept as: 1e39 is a finite f64 but an
/// infinite f32) and inside its plausible range (`ingest.vital_ranges`); if not, why.
fn plausible(cfg: &IngestSettings, name: &str, x: f64) -> Result<(), String> {
    // 1e300 reads as such, not as its 301 digits; formatted only for an error.
    let x_text = || {
        if x.abs() < 1e9 {
            x.to_string()
        } else {
            format!("{x:e}")
        }
    };
    if !(x as f32).is_finite() {
        return Err(format!("{name} {} is not a finite number", x_text()));
    }
    match cfg.ingest.vital_ranges.get(name) {
        Some([lo, hi]) if !(*lo..=*hi).contains(&x) => Err(format!(
            "{name} {} is outside its plausible range [{lo}, {hi}]",
            x_text()
        )),
        _ => Ok(()),
    }
}

async fn handle_binary(
    cfg: &IngestSettings,
    bytes: &[u8],
    ann: &Announced,
    bed: &ToBed,
) -> Option<Reply> {
    let arrived = Instant::now();
    let f = match parse_binary(bytes, ann.order.len()) {
        Ok(f) => f,
        Err(e) => return Some(ServerMsg::error(None, ErrorCode::Malformed, e).into()),
    };
    let off: Vec<usize> = ann
        .order
        .iter()
        .zip(&f.lead_off)
        .filter_map(|(s, &o)| s.filter(|_| o))
        .collect();
    let data = ann.order.iter().copied().zip(f.leads).collect();
    send_samples(cfg, f.seq, f.t_ms, data, &off, arrived, bed).await
}

/// Checks a samples frame's shape, discards bad samples (answering how many), and hands the
/// frame to the bed.
async fn send_samples(
    cfg: &IngestSettings,
    seq: u64,
    t_ms: i64,
    data: Vec<(Option<usize>, Vec<Option<f32>>)>,
    lead_off: &[usize],
    arrived: Instant,
    bed: &ToBed,
) -> Option<Reply> {
    let bad_shape = |m: String| Some(ServerMsg::error(Some(seq), ErrorCode::BadShape, m).into());
    let n = data.first().map_or(0, |d| d.1.len());
    if n == 0 {
        return bad_shape("a samples frame needs at least one sample".into());
    }
    if data.iter().any(|d| d.1.len() != n) {
        return bad_shape("leads carry different numbers of samples".into());
    }
    if n > cfg.ingest.max_samples_per_frame {
        return bad_shape(format!(
            "{n} samples per lead; at most {} per frame",
            cfg.ingest.max_samples_per_frame
        ));
    }
    let mut leads: [Option<Vec<Option<f32>>>; MAX_LEADS] = Default::default();
    let mut bad = 0usize;
    for (slot, samples) in data {
        let Some(s) = slot else { continue };
        let clean: Vec<Option<f32>> = samples
            .into_iter()
            .map(|v| v.filter(|x| x.is_finite() && x.abs() <= cfg.ingest.max_abs_mv))
            .collect();
        bad += clean.iter().filter(|v| v.is_none()).count();
        leads[s] = Some(clean);
    }
    let mut off = [false; MAX_LEADS];
    for &s in lead_off {
        off[s] = true;
    }
    let frame = SampleFrame {
        seq,
        t_ms,
        n,
        leads,
        lead_off: off,
        arrived,
    };
    let channels = frame.leads.iter().flatten().count() as u64;
    if bed.tx.send(BedCmd::Samples(frame)).await.is_err() {
        return Some(Reply::Gone);
    }
    bed.samples_frames.increment(1);
    bed.samples.increment(n as u64 * channels);
    (bad > 0).then(|| {
        let m = format!(
            "{bad} missing, non-finite or out-of-range (> {} mV) samples were discarded",
            cfg.ingest.max_abs_mv
        );
        Reply::Warn(ServerMsg::error(Some(seq), ErrorCode::BadSamples, m))
    })
}

fn truncate_msg(e: &str) -> String {
    e.chars().take(300).collect()
}
