//! Each bed's aggregator: a tokio task that owns the bed's [`BedState`] and is fed by a bounded
//! channel of [`BedCmd`]s from the bed's connection (through the [`registry`](super::registry)).
//! It answers the connection (acks, per-frame errors) without ever waiting on it, closes
//! windows on a tick, and hands windows and events to the [`WardSink`]. It stops when the
//! daemon does, or when the registry drops its sender (the bed was evicted); either way the
//! windows already due are handed on first.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::bed::{BedState, SampleFrame};
use super::monitor_alarms::{AlarmMsg, PendingAlarms};
use super::sink::WardSink;
use crate::core::event::{Event, EventKind};
use crate::core::monitor_alarm::MonitorAlarmEvent;
use crate::core::window::{ClosedWindow, MAX_LEADS};
use crate::protocol::{ErrorCode, ServerMsg};

/// Commands to a bed's task.
#[derive(Debug)]
pub(crate) enum BedCmd {
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
    /// The monitor raised one of its own alarms.
    MonitorAlarm(AlarmMsg),
    /// The monitor's alarm `id` ended at device time `t_ms`.
    MonitorAlarmEnd {
        id: String,
        t_ms: i64,
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
pub(crate) struct Strip {
    pub(crate) fs: i64,
    /// Samples since the bed's timeline origin at the strip's end.
    pub(crate) end_pos: i64,
    /// The strip's end on the bed's timeline (the monitor's clock, ms), the time base of
    /// window ends and of a risk alarm's onset.
    pub(crate) end_ms: i64,
    pub(crate) leads: Vec<Option<Vec<Option<f32>>>>,
}

/// What the registry reads of a bed without asking its task.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) last_data: Option<Instant>,
    pub(super) frames: u64,
    pub(super) gaps: u64,
    pub(super) duplicates: u64,
    pub(super) windows_closed: u64,
    /// Device time (ms) at which the bed's newest closed window ends.
    pub(super) closed_until_ms: Option<i64>,
}

/// How often a bed checks for overdue windows.
const TICK: Duration = Duration::from_millis(200);

pub(super) struct BedTask {
    state: BedState,
    rx: mpsc::Receiver<BedCmd>,
    /// The attached connection's outbound queue.
    out: Option<(u64, mpsc::Sender<ServerMsg>)>,
    sink: Arc<dyn WardSink>,
    counters: Arc<Mutex<Counters>>,
    /// Replies the connection's queue had no room for (its monitor is not reading them).
    replies_dropped: Arc<AtomicU64>,
    last_ack: Option<Instant>,
    /// Closed windows go to the engine (false: ingest only).
    scoring: bool,
    /// The monitor's alarms waiting for the samples up to their onsets.
    alarms: PendingAlarms,
}

impl BedTask {
    pub(super) fn new(
        state: BedState,
        rx: mpsc::Receiver<BedCmd>,
        sink: Arc<dyn WardSink>,
        counters: Arc<Mutex<Counters>>,
        replies_dropped: Arc<AtomicU64>,
        scoring: bool,
    ) -> BedTask {
        BedTask {
            state,
            rx,
            out: None,
            sink,
            counters,
            replies_dropped,
            last_ack: None,
            scoring,
            alarms: PendingAlarms::default(),
        }
    }

    // Debug level: bed ids stay out of the info log (see ARCHITECTURE.md, Security).
    #[tracing::instrument(level = "debug", skip_all, fields(bed = %self.state.bed))]
    pub(super) async fn run(mut self, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => {
                    // The daemon stops: windows already due go to the engine, which finishes
                    // them before the store flushes.
                    let windows = self.state.on_shutdown(Instant::now());
                    self.forward(windows);
                    let waiting = self.alarms.drain(&self.state);
                    self.hand_on(waiting);
                    break;
                }
                cmd = self.rx.recv() => match cmd {
                    Some(cmd) => self.handle(cmd),
                    None => {
                        // Evicted from the ward: windows already due are still scored.
                        let windows = self.state.on_shutdown(Instant::now());
                        self.forward(windows);
                        let waiting = self.alarms.drain(&self.state);
                        self.hand_on(waiting);
                        break;
                    }
                },
                _ = tick.tick() => {
                    let now = Instant::now();
                    let windows = self.state.on_tick(now);
                    self.forward(windows);
                    let due = self.alarms.due(&self.state, now);
                    self.hand_on(due);
                }
            }
        }
    }

    fn reply(&self, msg: ServerMsg) {
        if let Some((_, out)) = &self.out {
            // A slow monitor loses replies, never the bed's progress.
            if let Err(mpsc::error::TrySendError::Full(_)) = out.try_send(msg) {
                count_dropped_reply(&self.replies_dropped);
            }
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
                self.sink.event(Event::bed(
                    self.state.bed.clone(),
                    EventKind::Connected,
                    json!({"next_samples_seq": self.state.next_samples_seq()}),
                ));
            }
            BedCmd::Detach { conn } => {
                if self.out.as_ref().is_some_and(|(c, _)| *c == conn) {
                    self.out = None;
                    self.sink.event(Event::bed(
                        self.state.bed.clone(),
                        EventKind::Disconnected,
                        json!({}),
                    ));
                }
            }
            BedCmd::Bye => self.state.bye(),
            BedCmd::Strip { secs, reply } => {
                let fs = self.state.fs();
                let (end_pos, end_ms, leads) = self.state.strip((secs * fs as f64) as i64);
                let _ = reply.send(Strip {
                    fs,
                    end_pos,
                    end_ms,
                    leads,
                });
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
                        self.sink.event(e);
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
                let due = self.alarms.due(&self.state, Instant::now());
                self.hand_on(due);
            }
            BedCmd::MonitorAlarm(a) => {
                let now = self.alarms.push(a, &self.state);
                self.hand_on(now);
            }
            BedCmd::MonitorAlarmEnd { id, t_ms } => {
                let now = self.alarms.end(&self.state.bed, id, t_ms);
                self.hand_on(now);
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

    fn hand_on(&self, events: Vec<MonitorAlarmEvent>) {
        for e in events {
            self.sink.monitor_alarm(e);
        }
    }

    fn forward(&mut self, windows: Vec<ClosedWindow>) {
        for w in windows {
            {
                let mut c = self.counters.lock().expect("lock");
                c.windows_closed += 1;
                c.closed_until_ms = Some(c.closed_until_ms.map_or(w.end_ms, |u| u.max(w.end_ms)));
            }
            metrics::counter!("holmes_windows_closed_total").increment(1);
            if self.scoring {
                self.sink.window(w);
            }
        }
    }
}

/// One reply dropped because its monitor does not read its replies: counted for the bed's
/// view and the metrics (the bed task and the connection's writer both drop so).
pub(crate) fn count_dropped_reply(dropped: &AtomicU64) {
    dropped.fetch_add(1, Ordering::Relaxed);
    metrics::counter!("holmes_monitor_replies_dropped_total").increment(1);
}
