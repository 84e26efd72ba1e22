//! The bed registry ([`Ward`]): a clonable handle over the map of beds the ward holds, each
//! with its aggregator task ([`task`](super::task)) and the connection attached to it. It
//! admits hellos (bed policy, one device per bed, a place in the ward by the
//! [`admission`](super::admission) policy, evicting idle beds when one is needed), detaches
//! connections, closes those of revoked devices, and reports every bed's status.
//!
//! A bed's task outlives its connections, so a monitor that reconnects mid-window resumes
//! into the same buffer. Closed windows, technical events and hellos go to the [`WardSink`]
//! the ward was given (the daemon's: the engine and the store), which never blocks a bed.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::admission::{self, Full, Held, Idle, Newcomer};
use super::bed::{BedParams, BedState, Phase};
use super::monitor_alarms::AlarmMsg;
use super::sink::WardSink;
use super::task::{BedCmd, BedTask, Counters, Strip};
use crate::config::{QualityConfig, Stagger, WardConfig};
use crate::core::event::{Event, EventKind};
use crate::core::monitor_alarm::{MonitorAlarm, MonitorAlarmEvent, MonitorAlarmKind};
use crate::core::patient::Admissions;
use crate::core::window::{MAX_LEADS, SAMPLE_RATE_HZ};
use crate::protocol::{ServerMsg, close};

/// What the ward reads of the configuration: its own section, the quality floor, and the
/// depth of each bed's command queue.
#[derive(Debug, Clone)]
pub(crate) struct WardSettings {
    pub(crate) ward: WardConfig,
    pub(crate) quality: QualityConfig,
    /// Commands queued from a connection to its bed's aggregator (`ingest.bed_queue`).
    pub(crate) bed_queue: usize,
}

/// Live status of a bed, as `/api/beds` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum BedStatus {
    Live,
    Stale,
    Lost,
}

/// What the registry knows of a bed without asking its task.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BedView {
    pub(crate) bed: String,
    pub(crate) status: BedStatus,
    pub(crate) connected: bool,
    pub(crate) device: Option<String>,
    /// Seconds since the last frame, if any arrived.
    pub(crate) data_age_secs: Option<f64>,
    pub(crate) frames: u64,
    pub(crate) gaps: u64,
    pub(crate) duplicates: u64,
    pub(crate) windows_closed: u64,
    /// Replies (acks, per-frame errors) dropped because the bed's monitor did not read them.
    pub(crate) replies_dropped: u64,
}

struct Conn {
    id: u64,
    device: String,
    kick: Option<oneshot::Sender<(u16, String)>>,
    /// Held by a configured device, not a token ([`Claim::configured`]).
    configured: bool,
}

struct BedEntry {
    tx: mpsc::Sender<BedCmd>,
    counters: Arc<Mutex<Counters>>,
    conn: Option<Conn>,
    /// The device that attached last (a gateway's beds count against its cap).
    device: String,
    /// When its last connection ended.
    left: Instant,
    /// Replies dropped because its monitors did not read them.
    replies_dropped: Arc<AtomicU64>,
    /// The name its monitor gave each lead slot when it last attached (a gateway's alarm for
    /// the bed is read with them).
    leads: [Option<String>; MAX_LEADS],
}

/// What the device's registration says of a hello, for the ward's admission policy
/// ([`admission`](super::admission)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Claim {
    /// The device is registered for this very bed: the bed's place is reserved.
    pub(crate) bound: bool,
    /// Most beds the device may hold at once (a gateway's cap); None: no cap.
    pub(crate) max_beds: Option<usize>,
    /// A device the configuration lists (an SDC device), held without a device token:
    /// revoking tokens closes no such connection.
    pub(crate) configured: bool,
}

/// Why a hello was refused: a close code and a reason for the monitor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub(crate) struct AttachError {
    pub(crate) code: u16,
    pub(crate) reason: String,
}

/// A connection's grip on its bed.
#[derive(Debug)]
pub(crate) struct Attach {
    pub(crate) conn: u64,
    pub(crate) tx: mpsc::Sender<BedCmd>,
    /// Fires when a newer connection of the same device takes the bed over.
    pub(crate) kicked: oneshot::Receiver<(u16, String)>,
    /// Replies to the bed's monitors dropped because they were not read (the bed's task and
    /// the connection both count here).
    pub(crate) replies_dropped: Arc<AtomicU64>,
    pub(crate) next_samples_seq: u64,
    pub(crate) next_vitals_seq: u64,
}

struct Inner {
    cfg: WardSettings,
    beds: Mutex<HashMap<String, BedEntry>>,
    admitted: Mutex<u64>,
    next_conn: Mutex<u64>,
    sink: Arc<dyn WardSink>,
    /// Per bed, where its stored windows end (device ms): read at start-up from an earlier
    /// run's, raised when a bed is evicted. A bed taken in again resumes after it instead of
    /// scoring a resent buffer twice.
    scored_until: Mutex<HashMap<String, i64>>,
    /// Beds bound to registered devices (their places are reserved, like configured beds').
    bound: Mutex<HashSet<String>>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    /// The wall clock's origin for the beds' slots (`ward.stagger = "wall_clock"`).
    epoch: Instant,
    /// The patient each bed is admitted with, as its monitor said (an evicted bed's is
    /// forgotten).
    admissions: Admissions,
}

/// Handle to the bed registry. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Ward {
    inner: Arc<Inner>,
}

const GOLDEN: f64 = 0.618_033_988_749_894_9;
impl Ward {
    /// A ward handing its output to `sink`; `scored_until` holds, per bed, where an earlier
    /// run's stored windows end (device ms), `admissions` the beds' patients (an earlier
    /// run's, where the store kept them).
    pub(crate) fn new(
        cfg: WardSettings,
        sink: Arc<dyn WardSink>,
        scored_until: HashMap<String, i64>,
        admissions: Admissions,
        cancel: CancellationToken,
        tracker: TaskTracker,
    ) -> Ward {
        Ward {
            inner: Arc::new(Inner {
                cfg,
                beds: Mutex::new(HashMap::new()),
                admitted: Mutex::new(0),
                next_conn: Mutex::new(1),
                sink,
                scored_until: Mutex::new(scored_until),
                bound: Mutex::new(HashSet::new()),
                cancel,
                tracker,
                epoch: Instant::now(),
                admissions,
            }),
        }
    }

    /// The beds bound to registered devices now (after each read of the devices table): their
    /// places are reserved.
    pub(crate) fn set_bound_beds(&self, beds: HashSet<String>) {
        *self.inner.bound.lock().expect("lock") = beds;
    }

    /// The beds' patient identities: the monitors' connections set them, the outbound feeds
    /// read them.
    pub(crate) fn admissions(&self) -> Admissions {
        self.inner.admissions.clone()
    }

    /// Whether the ward takes `bed` at all: a configured bed, or any where unknown beds are
    /// admitted.
    pub(crate) fn admits(&self, bed: &str) -> bool {
        let w = &self.inner.cfg.ward;
        w.admit_unknown_beds || w.beds.iter().any(|b| b == bed)
    }

    /// Window length, seconds (told to each monitor in its welcome).
    pub(crate) fn window_secs(&self) -> u32 {
        self.inner.cfg.ward.window_secs
    }

    /// Seconds between a bed's window closings.
    pub(crate) fn hop_secs(&self) -> u32 {
        self.inner.cfg.ward.hop_secs
    }

    /// Where a bed's window ends sit within the hop: its slot, a fraction of the hop
    /// (configured beds evenly by their order, others by the golden-ratio sequence, evenly
    /// spread for any count), on the wall clock or its own timeline as `ward.stagger` says.
    fn phase(&self, bed: &str) -> Phase {
        let w = &self.inner.cfg.ward;
        let hop = (w.hop_secs as usize * SAMPLE_RATE_HZ) as f64;
        if w.stagger == Stagger::Off {
            return Phase::Timeline(0);
        }
        let frac = match w.beds.iter().position(|b| b == bed) {
            Some(i) => i as f64 / w.beds.len() as f64,
            None => {
                let mut k = self.inner.admitted.lock().expect("lock");
                *k += 1;
                (*k as f64 * GOLDEN).fract()
            }
        };
        match w.stagger {
            Stagger::WallClock => Phase::WallClock {
                epoch: self.inner.epoch,
                slot_secs: frac * w.hop_secs as f64,
            },
            _ => Phase::Timeline((frac * hop).round() as i64),
        }
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
            scored_until_ms: self
                .inner
                .scored_until
                .lock()
                .expect("lock")
                .get(bed)
                .copied(),
        }
    }

    /// Admits a hello whose token [`DeviceAuth`](crate::serving::ingest::devices::DeviceAuth)
    /// accepted: bed policy, a place in the ward ([`admission`](super::admission)), one device
    /// per bed. Spawns the bed's task on first sight and attaches the connection to it.
    pub(crate) async fn attach(
        &self,
        bed: &str,
        device: &str,
        claim: Claim,
        leads: [Option<String>; MAX_LEADS],
        vitals: Vec<String>,
        out: mpsc::Sender<ServerMsg>,
    ) -> Result<Attach, AttachError> {
        if !self.admits(bed) {
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
        let (tx, replies_dropped) = {
            let mut beds = self.inner.beds.lock().expect("lock");
            // A bed whose task died (a bug) is started afresh rather than locked forever.
            if beds.get(bed).is_some_and(|e| e.tx.is_closed()) {
                tracing::error!("A bed aggregator had stopped; starting it afresh");
                beds.remove(bed);
            }
            if !beds.contains_key(bed) {
                self.make_room(&mut beds, bed, device, claim)?;
                let entry = self.spawn_bed(bed, device);
                beds.insert(bed.to_owned(), entry);
            }
            let entry = beds.get_mut(bed).expect("just inserted");
            entry.device = device.to_owned();
            entry.leads = leads.clone();
            let dropped = entry.replies_dropped.clone();
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
                self.inner.sink.event(Event::bed(
                    bed,
                    EventKind::Superseded,
                    json!({"device": device}),
                ));
            }
            entry.conn = Some(Conn {
                id: conn,
                device: device.to_owned(),
                kick: Some(kick_tx),
                configured: claim.configured,
            });
            (entry.tx.clone(), dropped)
        };
        self.inner.sink.bed_seen(bed, device);
        let (reply_tx, reply_rx) = oneshot::channel();
        let gone = || AttachError {
            code: close::GOING_AWAY,
            reason: "server shutting down".into(),
        };
        tx.send(BedCmd::Attach {
            conn,
            present: leads.map(|l| l.is_some()),
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
            replies_dropped,
            next_samples_seq,
            next_vitals_seq,
        })
    }

    /// Makes a place for a new bed, evicting idle beds if need be (their history stays in the
    /// database), or says why there is none. Called with the registry locked.
    fn make_room(
        &self,
        beds: &mut HashMap<String, BedEntry>,
        bed: &str,
        device: &str,
        claim: Claim,
    ) -> Result<(), AttachError> {
        let w = &self.inner.cfg.ward;
        let now = Instant::now();
        let lost = Duration::from_secs_f64(w.lost_secs);
        let bound = self.inner.bound.lock().expect("lock");
        let reserved = |b: &str| w.beds.iter().any(|c| c == b) || bound.contains(b);
        let held: Vec<Held> = beds
            .iter()
            .map(|(b, e)| {
                let last = e.counters.lock().expect("lock").last_data;
                let idle = match (&e.conn, last) {
                    (Some(_), _) => None,
                    (None, None) => Some(Idle::NeverStreamed(e.left)),
                    (None, Some(t)) => (now.duration_since(t) > lost).then_some(Idle::Lost(t)),
                };
                Held {
                    bed: b.clone(),
                    device: e.device.clone(),
                    reserved: reserved(b),
                    idle,
                }
            })
            .collect();
        let missing_reserved = {
            let mut away: HashSet<&str> = bound.iter().map(String::as_str).collect();
            away.extend(w.beds.iter().map(String::as_str));
            away.retain(|b| *b != bed && !beds.contains_key(*b));
            away.len()
        };
        let new = Newcomer {
            device,
            reserved: claim.bound || reserved(bed),
            device_cap: claim.max_beds,
        };
        let evict = admission::make_room(&held, new, w.max_beds, missing_reserved).map_err(
            |full| match full {
                Full::Device { cap } => AttachError {
                    code: close::DEVICE_FULL,
                    reason: format!("device {device:?} holds its maximum of {cap} beds"),
                },
                Full::Ward { limit } if limit < w.max_beds => AttachError {
                    code: close::WARD_FULL,
                    reason: format!(
                        "the ward holds its maximum of {} beds ({} kept for registered monitors)",
                        w.max_beds,
                        w.max_beds - limit
                    ),
                },
                Full::Ward { .. } => AttachError {
                    code: close::WARD_FULL,
                    reason: format!("the ward holds its maximum of {} beds", w.max_beds),
                },
            },
        )?;
        for b in evict {
            let why = held.iter().find(|h| h.bed == b).and_then(|h| h.idle);
            let Some(e) = beds.remove(&b) else { continue };
            // Dropping the entry drops the bed's last sender: its task flushes and ends.
            if let Some(end) = e.counters.lock().expect("lock").closed_until_ms {
                let mut until = self.inner.scored_until.lock().expect("lock");
                let u = until.entry(b.clone()).or_insert(end);
                *u = (*u).max(end);
            }
            let why = why.map_or("idle", Idle::as_str);
            // Its monitor names the patient again when it comes back.
            self.inner.admissions.forget(&b);
            metrics::counter!("holmes_beds_evicted_total").increment(1);
            tracing::debug!(bed = %b, why, "Bed evicted to make room");
            self.inner
                .sink
                .event(Event::bed(b, EventKind::Evicted, json!({"reason": why})));
        }
        Ok(())
    }

    /// A connection ended.
    pub(crate) async fn detach(&self, bed: &str, conn: u64) {
        let tx = {
            let mut beds = self.inner.beds.lock().expect("lock");
            let Some(e) = beds.get_mut(bed) else { return };
            if e.conn.as_ref().is_some_and(|c| c.id == conn) {
                e.conn = None;
                e.left = Instant::now();
            }
            e.tx.clone()
        };
        let _ = tx.send(BedCmd::Detach { conn }).await;
    }

    /// The last `secs` seconds of a bed's ECG (None: unknown bed).
    pub(crate) async fn strip(&self, bed: &str, secs: f64) -> Option<Strip> {
        let tx = {
            let beds = self.inner.beds.lock().expect("lock");
            beds.get(bed)?.tx.clone()
        };
        let (reply, rx) = oneshot::channel();
        tx.send(BedCmd::Strip { secs, reply }).await.ok()?;
        rx.await.ok()
    }

    /// Closes (with `code`) the connections of every device for which `gone` holds (not those
    /// of configured devices, which hold no token); returns how many each such device had.
    pub(crate) fn kick_devices(
        &self,
        gone: impl Fn(&str) -> bool,
        code: u16,
        reason: &str,
    ) -> Vec<(String, usize)> {
        let mut kicked: HashMap<String, usize> = HashMap::new();
        let mut beds = self.inner.beds.lock().expect("lock");
        for e in beds.values_mut() {
            if let Some(conn) = e.conn.as_mut().filter(|c| !c.configured && gone(&c.device))
                && let Some(k) = conn.kick.take()
            {
                let _ = k.send((code, reason.to_owned()));
                *kicked.entry(conn.device.clone()).or_default() += 1;
            }
        }
        kicked.into_iter().collect()
    }

    /// Beds with a monitor connected now.
    pub(crate) fn connected_beds(&self) -> usize {
        let beds = self.inner.beds.lock().expect("lock");
        beds.values().filter(|e| e.conn.is_some()).count()
    }

    /// Every bed's status, sorted by bed.
    pub(crate) fn views(&self) -> Vec<BedView> {
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
                    replies_dropped: e.replies_dropped.load(Ordering::Relaxed),
                }
            })
            .collect();
        out.sort_by(|a, b| a.bed.cmp(&b.bed));
        out
    }

    fn spawn_bed(&self, bed: &str, device: &str) -> BedEntry {
        let (tx, rx) = mpsc::channel(self.inner.cfg.bed_queue);
        let counters = Arc::new(Mutex::new(Counters::default()));
        let replies_dropped = Arc::new(AtomicU64::new(0));
        let state = BedState::new(bed.into(), self.params(bed));
        let task = BedTask::new(
            state,
            rx,
            self.inner.sink.clone(),
            counters.clone(),
            replies_dropped.clone(),
            self.inner.cfg.ward.scoring,
        );
        let cancel = self.inner.cancel.child_token();
        self.inner.tracker.spawn(task.run(cancel));
        BedEntry {
            tx,
            counters,
            conn: None,
            device: device.to_owned(),
            left: Instant::now(),
            replies_dropped,
            leads: Default::default(),
        }
    }

    /// A monitor's alarm (or its end) that a gateway reported for `bed` (IHE PCD-04 in):
    /// handed to the bed's task as the monitor's own connection hands it, read with the lead
    /// names its monitor announced; for a bed the ward does not hold, straight on to the
    /// sink without samples (stored with no opinion, saying why). Waits while the bed's queue
    /// is full.
    pub(crate) async fn gateway_alarm(&self, bed: &str, alarm: GatewayAlarm) {
        let held = {
            let beds = self.inner.beds.lock().expect("lock");
            beds.get(bed)
                .filter(|e| !e.tx.is_closed())
                .map(|e| (e.tx.clone(), e.leads.clone()))
        };
        let (tx, names) = held.unzip();
        let cmd = match alarm {
            GatewayAlarm::Raised { id, kind, t_ms } => BedCmd::MonitorAlarm(AlarmMsg {
                id,
                kind,
                t_ms,
                names: names.unwrap_or_default(),
                arrived: Instant::now(),
                received_ms: crate::core::time::now_ms(),
            }),
            GatewayAlarm::Ended { id, t_ms } => BedCmd::MonitorAlarmEnd { id, t_ms },
        };
        let unsent = match tx {
            Some(tx) => match tx.send(cmd).await {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => cmd,
        };
        // No bed to read it from: on to the sink without samples.
        let event = match unsent {
            BedCmd::MonitorAlarm(a) => MonitorAlarmEvent::Raised(MonitorAlarm {
                bed: bed.into(),
                id: a.id,
                kind: a.kind,
                onset_ms: a.t_ms,
                received_ms: a.received_ms,
                arrived: a.arrived,
                leads: Vec::new(),
                coverage: 0.0,
            }),
            BedCmd::MonitorAlarmEnd { id, t_ms } => MonitorAlarmEvent::Ended {
                bed: bed.into(),
                id,
                end_ms: t_ms,
            },
            _ => unreachable!("only alarms are built here"),
        };
        self.inner.sink.monitor_alarm(event);
    }
}

/// What a gateway reported of a monitor's alarm (device time, ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GatewayAlarm {
    Raised {
        id: String,
        kind: MonitorAlarmKind,
        t_ms: i64,
    },
    Ended {
        id: String,
        t_ms: i64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::monitor_alarm::MonitorAlarmEvent;
    use crate::core::patient::Patient;
    use crate::core::window::ClosedWindow;

    struct Nowhere;

    impl WardSink for Nowhere {
        fn window(&self, _: ClosedWindow) {}
        fn event(&self, _: Event) {}
        fn bed_seen(&self, _: &str, _: &str) {}
        fn monitor_alarm(&self, _: MonitorAlarmEvent) {}
    }

    #[tokio::test]
    async fn an_evicted_beds_patient_is_forgotten() {
        let c = crate::config::Config::default();
        let mut ward_cfg = c.ward.clone();
        ward_cfg.max_beds = 1;
        ward_cfg.beds.clear();
        ward_cfg.admit_unknown_beds = true;
        let ward = Ward::new(
            WardSettings {
                ward: ward_cfg,
                quality: c.quality.clone(),
                bed_queue: 8,
            },
            Arc::new(Nowhere),
            HashMap::new(),
            Admissions::default(),
            CancellationToken::new(),
            TaskTracker::new(),
        );
        let (out, _rx) = mpsc::channel(8);
        let attach = |bed: &'static str| {
            let (ward, out) = (ward.clone(), out.clone());
            async move {
                let leads = std::array::from_fn(|k| Some(format!("lead {k}")));
                ward.attach(bed, "gw", Claim::default(), leads, vec![], out)
                    .await
            }
        };
        let a = attach("a").await.unwrap();
        let p = Patient {
            id: "MRN-1".into(),
            authority: "HOSP".into(),
        };
        ward.admissions().set("a", Some(p.clone()));
        // Still attached: bed b finds no place, bed a keeps its patient.
        assert!(attach("b").await.is_err());
        assert_eq!(ward.admissions().get("a").as_deref(), Some(&p));
        // Gone without streaming: b takes its place and a's patient is forgotten.
        ward.detach("a", a.conn).await;
        attach("b").await.unwrap();
        assert_eq!(ward.admissions().get("a"), None);
    }
}
