//! The bed registry ([`Ward`]) and each bed's aggregator task: a clonable handle over a map of
//! beds, each a tokio task that owns its [`BedState`] and is fed by a bounded channel.
//!
//! A bed's task outlives its connections, so a monitor that reconnects mid-window resumes
//! into the same buffer. Closed windows, technical events and hellos go to the [`WardSink`]
//! the ward was given (the daemon's: the engine and the store), which never blocks a bed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::bed::{BedParams, BedState, SampleFrame};
use crate::config::{QualityConfig, WardConfig};
use crate::core::event::{Event, EventKind};
use crate::core::window::{ClosedWindow, MAX_LEADS, SAMPLE_RATE_HZ};
use crate::protocol::{ErrorCode, ServerMsg, close};

/// Where the ward's output goes. None of these may block: a bed's task calls them.
pub trait WardSink: Send + Sync + 'static {
    /// A closed window, to be scored.
    fn window(&self, w: ClosedWindow);
    /// A technical event of a bed (gap, reconnect, ...).
    fn event(&self, e: Event);
    /// A monitor's hello was admitted for `bed`.
    fn bed_seen(&self, bed: &str, device: &str);
}

/// What the ward reads of the configuration: its own section, the quality floor, and the
/// depth of each bed's command queue.
#[derive(Debug, Clone)]
pub struct WardSettings {
    pub ward: WardConfig,
    pub quality: QualityConfig,
    /// Commands queued from a connection to its bed's aggregator (`ingest.bed_queue`).
    pub bed_queue: usize,
}

/// Where a bed's results go, and where an earlier run's stored windows end.
#[derive(Clone)]
struct Outputs {
    sink: Arc<dyn WardSink>,
    /// Per bed, where the stored windows of an earlier run end (device ms; read once at
    /// start-up): a bed resumes after it instead of scoring a resent buffer twice.
    scored_until: Arc<HashMap<String, i64>>,
}

/// Commands to a bed's task.
#[derive(Debug)]
pub enum BedCmd {
    Attach {
        conn: u64,
        present: [bool; MAX_LEADS],
        vitals: Vec<String>,
        out: mpsc::Sender<ServerMsg>,
        reply: oneshot::Sender<(u64, u64)>,
    },
    Samples(SampleFrame),
    Vitals {
        seq: u64,
        t_ms: i64,
        values: Vec<(String, Option<f32>)>,
        arrived: Instant,
    },
    Bye,
    Detach {
        conn: u64,
    },
    /// The last seconds of ECG, for the bed view.
    Strip {
        secs: f64,
        reply: oneshot::Sender<Strip>,
    },
}

/// The last seconds of a bed's ECG per lead slot (None: the lead is not announced; a None
/// sample did not arrive).
#[derive(Debug, Clone, Serialize)]
pub struct Strip {
    pub fs: i64,
    /// Samples since the bed's timeline origin at the strip's end.
    pub end_pos: i64,
    pub leads: Vec<Option<Vec<Option<f32>>>>,
}

/// Live status of a bed, as `/api/beds` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BedStatus {
    Live,
    Stale,
    Lost,
}

/// What the registry knows of a bed without asking its task.
#[derive(Debug, Clone, Serialize)]
pub struct BedView {
    pub bed: String,
    pub status: BedStatus,
    pub connected: bool,
    pub device: Option<String>,
    /// Seconds since the last frame, if any arrived.
    pub data_age_secs: Option<f64>,
    pub frames: u64,
    pub gaps: u64,
    pub duplicates: u64,
    pub windows_closed: u64,
}

#[derive(Debug, Default)]
struct Counters {
    last_data: Option<Instant>,
    frames: u64,
    gaps: u64,
    duplicates: u64,
    windows_closed: u64,
}

struct Conn {
    id: u64,
    device: String,
    kick: Option<oneshot::Sender<(u16, String)>>,
}

struct BedEntry {
    tx: mpsc::Sender<BedCmd>,
    counters: Arc<Mutex<Counters>>,
    conn: Option<Conn>,
}

/// Why a hello was refused: a close code and a reason for the monitor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct AttachError {
    pub code: u16,
    pub reason: String,
}

/// A connection's grip on its bed.
#[derive(Debug)]
pub struct Attach {
    pub conn: u64,
    pub tx: mpsc::Sender<BedCmd>,
    /// Fires when a newer connection of the same device takes the bed over.
    pub kicked: oneshot::Receiver<(u16, String)>,
    pub next_samples_seq: u64,
    pub next_vitals_seq: u64,
}

struct Inner {
    cfg: WardSettings,
    beds: Mutex<HashMap<String, BedEntry>>,
    admitted: Mutex<u64>,
    next_conn: Mutex<u64>,
    outputs: Outputs,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

/// Handle to the bed registry. Cheap to clone.
#[derive(Clone)]
pub struct Ward {
    inner: Arc<Inner>,
}

const GOLDEN: f64 = 0.618_033_988_749_894_9;
/// How often a bed checks for overdue windows.
const TICK: Duration = Duration::from_millis(200);

impl Ward {
    /// A ward handing its output to `sink`; `scored_until` holds, per bed, where an earlier
    /// run's stored windows end (device ms).
    pub fn new(
        cfg: WardSettings,
        sink: Arc<dyn WardSink>,
        scored_until: HashMap<String, i64>,
        cancel: CancellationToken,
        tracker: TaskTracker,
    ) -> Ward {
        let outputs = Outputs {
            sink,
            scored_until: Arc::new(scored_until),
        };
        Ward {
            inner: Arc::new(Inner {
                cfg,
                beds: Mutex::new(HashMap::new()),
                admitted: Mutex::new(0),
                next_conn: Mutex::new(1),
                outputs,
                cancel,
                tracker,
            }),
        }
    }

    /// Window length, seconds (told to each monitor in its welcome).
    pub fn window_secs(&self) -> u32 {
        self.inner.cfg.ward.window_secs
    }

    /// Seconds between a bed's window closings.
    pub fn hop_secs(&self) -> u32 {
        self.inner.cfg.ward.hop_secs
    }

    /// Phase of a bed's window ends within the hop, in samples: configured beds evenly by
    /// their order, others by the golden-ratio sequence (evenly spread for any count).
    fn phase(&self, bed: &str) -> i64 {
        let w = &self.inner.cfg.ward;
        let hop = (w.hop_secs as usize * SAMPLE_RATE_HZ) as f64;
        if !w.stagger {
            return 0;
        }
        let frac = match w.beds.iter().position(|b| b == bed) {
            Some(i) => i as f64 / w.beds.len() as f64,
            None => {
                let mut k = self.inner.admitted.lock().expect("lock");
                *k += 1;
                (*k as f64 * GOLDEN).fract()
            }
        };
        (frac * hop).round() as i64
    }

    fn params(&self, bed: &str) -> BedParams {
        let c = &self.inner.cfg;
        BedParams {
            fs: SAMPLE_RATE_HZ as i64,
            window: (c.ward.window_secs as usize * SAMPLE_RATE_HZ) as i64,
            hop: (c.ward.hop_secs as usize * SAMPLE_RATE_HZ) as i64,
            phase: self.phase(bed),
            grace: Duration::from_secs_f64(c.ward.grace_secs),
            capacity: c.ward.buffer_secs as usize * SAMPLE_RATE_HZ,
            lost_after: Duration::from_secs_f64(c.ward.lost_secs),
            min_coverage: c.quality.min_coverage,
            max_lead_off_fraction: c.quality.max_lead_off_fraction,
            min_vitals_coverage: c.quality.min_vitals_coverage,
            scored_until_ms: self.inner.outputs.scored_until.get(bed).copied(),
        }
    }

    /// Admits a hello whose token [`DeviceAuth`](crate::serving::ingest::devices::DeviceAuth) accepted: bed
    /// policy, one device per bed. Spawns the bed's task on first sight and attaches the
    /// connection to it.
    pub async fn attach(
        &self,
        bed: &str,
        device: &str,
        present: [bool; MAX_LEADS],
        vitals: Vec<String>,
        out: mpsc::Sender<ServerMsg>,
    ) -> Result<Attach, AttachError> {
        let c = &self.inner.cfg;
        if !c.ward.admit_unknown_beds && !c.ward.beds.iter().any(|b| b == bed) {
            return Err(AttachError {
                code: close::UNKNOWN_BED,
                reason: format!("bed {bed:?} is not configured and unknown beds are refused"),
            });
        }
        let conn = {
            let mut n = self.inner.next_conn.lock().expect("lock");
            *n += 1;
            *n
        };
        let (kick_tx, kick_rx) = oneshot::channel();
        let tx = {
            let mut beds = self.inner.beds.lock().expect("lock");
            // A bed whose task died (a bug) is started afresh rather than locked forever.
            if beds.get(bed).is_some_and(|e| e.tx.is_closed()) {
                tracing::error!("A bed aggregator had stopped; starting it afresh");
                beds.remove(bed);
            }
            if !beds.contains_key(bed) && beds.len() >= c.ward.max_beds {
                return Err(AttachError {
                    code: close::WARD_FULL,
                    reason: format!("the ward holds its maximum of {} beds", c.ward.max_beds),
                });
            }
            if !beds.contains_key(bed) {
                let entry = self.spawn_bed(bed);
                beds.insert(bed.to_owned(), entry);
            }
            let entry = beds.get_mut(bed).expect("just inserted");
            if let Some(old) = &mut entry.conn {
                if old.device != device {
                    return Err(AttachError {
                        code: close::BED_IN_USE,
                        reason: format!("bed {bed:?} is in use by another device"),
                    });
                }
                if let Some(k) = old.kick.take() {
                    let _ = k.send((
                        close::SUPERSEDED,
                        "superseded by a newer connection of this device".into(),
                    ));
                }
                self.inner.outputs.sink.event(Event::bed(
                    bed,
                    EventKind::Superseded,
                    json!({"device": device}),
                ));
            }
            entry.conn = Some(Conn {
                id: conn,
                device: device.to_owned(),
                kick: Some(kick_tx),
            });
            entry.tx.clone()
        };
        self.inner.outputs.sink.bed_seen(bed, device);
        let (reply_tx, reply_rx) = oneshot::channel();
        let gone = || AttachError {
            code: close::GOING_AWAY,
            reason: "server shutting down".into(),
        };
        tx.send(BedCmd::Attach {
            conn,
            present,
            vitals,
            out,
            reply: reply_tx,
        })
        .await
        .map_err(|_| gone())?;
        let (next_samples_seq, next_vitals_seq) = reply_rx.await.map_err(|_| gone())?;
        Ok(Attach {
            conn,
            tx,
            kicked: kick_rx,
            next_samples_seq,
            next_vitals_seq,
        })
    }

    /// A connection ended.
    pub async fn detach(&self, bed: &str, conn: u64) {
        let tx = {
            let mut beds = self.inner.beds.lock().expect("lock");
            let Some(e) = beds.get_mut(bed) else { return };
            if e.conn.as_ref().is_some_and(|c| c.id == conn) {
                e.conn = None;
            }
            e.tx.clone()
        };
        let _ = tx.send(BedCmd::Detach { conn }).await;
    }

    /// The last `secs` seconds of a bed's ECG (None: unknown bed).
    pub async fn strip(&self, bed: &str, secs: f64) -> Option<Strip> {
        let tx = {
            let beds = self.inner.beds.lock().expect("lock");
            beds.get(bed)?.tx.clone()
        };
        let (reply, rx) = oneshot::channel();
        tx.send(BedCmd::Strip { secs, reply }).await.ok()?;
        rx.await.ok()
    }

    /// Closes (with `code`) the connections of every device for which `gone` holds; returns
    /// how many each such device had.
    pub fn kick_devices(
        &self,
        gone: impl Fn(&str) -> bool,
        code: u16,
        reason: &str,
    ) -> Vec<(String, usize)> {
        let mut kicked: HashMap<String, usize> = HashMap::new();
        let mut beds = self.inner.beds.lock().expect("lock");
        for e in beds.values_mut() {
            if let Some(conn) = e.conn.as_mut().filter(|c| gone(&c.device))
                && let Some(k) = conn.kick.take()
            {
                let _ = k.send((code, reason.to_owned()));
                *kicked.entry(conn.device.clone()).or_default() += 1;
            }
        }
        kicked.into_iter().collect()
    }

    /// Beds with a monitor connected now.
    pub fn connected_beds(&self) -> usize {
        let beds = self.inner.beds.lock().expect("lock");
        beds.values().filter(|e| e.conn.is_some()).count()
    }

    /// Every bed's status, sorted by bed.
    pub fn views(&self) -> Vec<BedView> {
        let w = &self.inner.cfg.ward;
        let now = Instant::now();
        let beds = self.inner.beds.lock().expect("lock");
        let mut out: Vec<BedView> = beds
            .iter()
            .map(|(bed, e)| {
                let c = e.counters.lock().expect("lock");
                let age = c.last_data.map(|t| now.duration_since(t).as_secs_f64());
                let status = match age {
                    Some(a) if a <= w.stale_secs => BedStatus::Live,
                    Some(a) if a <= w.lost_secs => BedStatus::Stale,
                    _ => BedStatus::Lost,
                };
                BedView {
                    bed: bed.clone(),
                    status,
                    connected: e.conn.is_some(),
                    device: e.conn.as_ref().map(|c| c.device.clone()),
                    data_age_secs: age,
                    frames: c.frames,
                    gaps: c.gaps,
                    duplicates: c.duplicates,
                    windows_closed: c.windows_closed,
                }
            })
            .collect();
        out.sort_by(|a, b| a.bed.cmp(&b.bed));
        out
    }

    fn spawn_bed(&self, bed: &str) -> BedEntry {
        let (tx, rx) = mpsc::channel(self.inner.cfg.bed_queue);
        let counters = Arc::new(Mutex::new(Counters::default()));
        let state = BedState::new(bed.into(), self.params(bed));
        let task = BedTask {
            state,
            rx,
            out: None,
            outputs: self.inner.outputs.clone(),
            counters: counters.clone(),
            last_ack: None,
            scoring: self.inner.cfg.ward.scoring,
        };
        let cancel = self.inner.cancel.child_token();
        self.inner.tracker.spawn(task.run(cancel));
        BedEntry {
            tx,
            counters,
            conn: None,
        }
    }
}

struct BedTask {
    state: BedState,
    rx: mpsc::Receiver<BedCmd>,
    /// The attached connection's outbound queue.
    out: Option<(u64, mpsc::Sender<ServerMsg>)>,
    outputs: Outputs,
    counters: Arc<Mutex<Counters>>,
    last_ack: Option<Instant>,
    /// Closed windows go to the engine (false: ingest only).
    scoring: bool,
}

impl BedTask {
    // Debug level: bed ids stay out of the info log (see ARCHITECTURE.md, Security).
    #[tracing::instrument(level = "debug", skip_all, fields(bed = %self.state.bed))]
    async fn run(mut self, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => {
                    // The daemon stops: windows already due go to the engine, which finishes
                    // them before the store flushes.
                    let windows = self.state.on_shutdown(Instant::now());
                    self.forward(windows);
                    break;
                }
                cmd = self.rx.recv() => match cmd {
                    Some(cmd) => self.handle(cmd),
                    None => break,
                },
                _ = tick.tick() => {
                    let windows = self.state.on_tick(Instant::now());
                    self.forward(windows);
                }
            }
        }
    }

    fn reply(&self, msg: ServerMsg) {
        if let Some((_, out)) = &self.out {
            // A slow monitor loses replies, never the bed's progress.
            let _ = out.try_send(msg);
        }
    }

    fn handle(&mut self, cmd: BedCmd) {
        match cmd {
            BedCmd::Attach {
                conn,
                present,
                vitals,
                out,
                reply,
            } => {
                self.state.attach(present, &vitals);
                self.out = Some((conn, out));
                let _ = reply.send((self.state.next_samples_seq(), self.state.next_vitals_seq()));
                self.outputs.sink.event(Event::bed(
                    self.state.bed.clone(),
                    EventKind::Connected,
                    json!({"next_samples_seq": self.state.next_samples_seq()}),
                ));
            }
            BedCmd::Detach { conn } => {
                if self.out.as_ref().is_some_and(|(c, _)| *c == conn) {
                    self.out = None;
                    self.outputs.sink.event(Event::bed(
                        self.state.bed.clone(),
                        EventKind::Disconnected,
                        json!({}),
                    ));
                }
            }
            BedCmd::Bye => self.state.bye(),
            BedCmd::Strip { secs, reply } => {
                let fs = self.state.fs();
                let (end_pos, leads) = self.state.strip((secs * fs as f64) as i64);
                let _ = reply.send(Strip { fs, end_pos, leads });
            }
            BedCmd::Samples(f) => {
                let (seq, arrived) = (f.seq, f.arrived);
                let o = self.state.on_samples(f);
                {
                    let mut c = self.counters.lock().expect("lock");
                    c.last_data = Some(arrived);
                    c.frames += 1;
                    c.duplicates += u64::from(o.duplicate);
                    c.gaps += o.events.iter().filter(|e| e.kind == EventKind::Gap).count() as u64;
                }
                if o.duplicate {
                    self.reply(ServerMsg::error(
                        Some(seq),
                        ErrorCode::Duplicate,
                        "sequence number already received; frame ignored",
                    ));
                } else if o.too_late {
                    self.reply(ServerMsg::error(
                        Some(seq),
                        ErrorCode::TooLate,
                        "frame arrived after its window closed; dropped",
                    ));
                }
                for e in o.events {
                    if e.kind != EventKind::Duplicate {
                        self.outputs.sink.event(e);
                    }
                }
                if self
                    .last_ack
                    .is_none_or(|t| arrived.duration_since(t) >= Duration::from_secs(1))
                {
                    self.last_ack = Some(arrived);
                    let next = self.state.next_samples_seq();
                    if next > 0 {
                        self.reply(ServerMsg::Ack {
                            samples_seq: next - 1,
                        });
                    }
                }
                self.forward(o.windows);
            }
            BedCmd::Vitals {
                seq,
                t_ms,
                values,
                arrived,
            } => {
                let o = self.state.on_vitals(seq, t_ms, &values, arrived);
                self.counters.lock().expect("lock").last_data = Some(arrived);
                if o.duplicate {
                    self.reply(ServerMsg::error(
                        Some(seq),
                        ErrorCode::Duplicate,
                        "vitals sequence number already received",
                    ));
                }
                self.forward(o.windows);
            }
        }
    }

    fn forward(&mut self, windows: Vec<ClosedWindow>) {
        for w in windows {
            self.counters.lock().expect("lock").windows_closed += 1;
            metrics::counter!("holmes_windows_closed_total").increment(1);
            if self.scoring {
                self.outputs.sink.window(w);
            }
        }
    }
}
