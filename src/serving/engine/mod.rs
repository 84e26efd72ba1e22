//! The serving engine: closed windows in, committed scores out, inside a latency budget.
//!
//! A window from the [`ward`](crate::serving::ward) is materialised once ([`job::WindowJob`]) and its id
//! pushed into the deadline queue ([`queue`]) of every ensemble member whose input it has.
//! Each member's workers ([`worker`]), dedicated threads on an accelerator, pull batches of windows
//! from different beds, earliest deadline first, and report to the window's accumulator, which
//! commits to the [`store`](crate::serving::store) when all members are in, or at the deadline with what
//! it has (`partial`), via the [`deadline`] watcher. The zoo's beat counter, where one serves,
//! reads each window on a stage of its own beside the members ([`beats`]) and raises the
//! score as the window commits. Overload is explicit: one waiting window per bed and model
//! (a newer one supersedes it), bounded queues, and a counter for each case.
//!
//! The [`adjudicator`] forms Holmes's opinion on the monitors' own VT and VF alarms with the
//! same beat counter, on a thread of its own.
//!
//! [`ensemble`] loads, describes and places an ensemble ([`accelerator`], [`plan`],
//! [`profile`]) from its [`sources`] for the daemon and the composer alike; [`counter`] names
//! the beat counter served beside the members; [`reload`] hot-swaps changed members.

pub(crate) mod accelerator;
pub(crate) mod adjudicator;
pub(crate) mod beats;
pub mod counter;
pub(crate) mod deadline;
pub mod ensemble;
pub(crate) mod job;
pub(crate) mod plan;
pub mod pooling;
pub(crate) mod profile;
pub(crate) mod queue;
pub(crate) mod reload;
pub mod sources;
pub(crate) mod worker;

pub(crate) use worker::ZooInfer;
pub use worker::{Factory, FakeModel, InferModel};

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::{Combine, EngineConfig};
use crate::core::score::ScoreStatus;
use crate::core::window::ClosedWindow;
use crate::serving::store::StoreHandle;
use crate::signal::beats::BeatCounter;
use crate::zoo::{Input, LeadSets};
use job::{BeatSlot, Slot, Timing, WindowJob};
use queue::{ModelQueue, Pushed};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("model {name}: {reason}")]
    Model { name: String, reason: String },
    #[error("engine thread failed to start: {0}")]
    Thread(String),
}

/// One ensemble member as the engine runs it.
pub struct MemberSpec {
    pub name: String,
    pub version: u32,
    pub input: Input,
    pub factory: Factory,
    /// Worker threads for this model.
    pub workers: usize,
    /// Most windows per batch.
    pub batch_cap: usize,
    /// Weight in a weighted mean.
    pub weight: f64,
    /// Device id the workers are bound to (`cpu`, `cuda:N`).
    pub device: String,
}

/// A member's live state: its queue and the current version's factory.
pub(crate) struct ModelSlot {
    pub(crate) name: String,
    pub(crate) input: Input,
    pub(crate) version: AtomicU32,
    pub(crate) queue: ModelQueue,
    /// Bumped when a new version is swapped in.
    pub(crate) generation: AtomicU64,
    factory: Mutex<Factory>,
    pub(crate) workers: usize,
    pub(crate) batch_cap: usize,
    pub(crate) device: String,
}

impl ModelSlot {
    pub(crate) fn factory(&self) -> Factory {
        self.factory.lock().expect("factory lock").clone()
    }
}

/// Counters of the engine, read by the API and the tests.
#[derive(Debug, Default)]
pub struct Counters {
    pub(crate) scored: AtomicU64,
    pub(crate) partial: AtomicU64,
    pub superseded: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) insufficient: AtomicU64,
    pub dropped_members: AtomicU64,
    pub late_members: AtomicU64,
    pub model_faults: AtomicU64,
    pub batches: AtomicU64,
    /// Windows the beat counter read.
    pub beat_readings: AtomicU64,
    pub(crate) batched_windows: AtomicU64,
}

/// A model's faults since start, as `/api/ensemble` and `/api/health` show them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ModelFaults {
    /// Windows the model failed on (panic, error, wrong output count, non-finite output).
    pub faults: u64,
    /// The latest fault: its kind and message.
    pub last_fault: Option<String>,
    /// Unix ms of the latest fault.
    pub last_fault_ms: Option<i64>,
    /// When a `model_fault` event was last stored (at most one a minute per model).
    #[serde(skip)]
    last_event: Option<Instant>,
}

/// Least time between two `model_fault` events of one model.
const FAULT_EVENT_EVERY: Duration = Duration::from_secs(60);

/// Metrics sink: atomic counters plus the process-wide `metrics` recorder.
#[derive(Debug, Default)]
pub(crate) struct EngineMetrics {
    pub(crate) counters: Counters,
    /// Faults per model name (bounded by the zoo's models).
    pub(crate) per_model: Mutex<std::collections::BTreeMap<String, ModelFaults>>,
}

impl EngineMetrics {
    fn late_member(&self) {
        self.counters.late_members.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("holmes_late_member_results_total").increment(1);
    }

    /// Counts `windows` windows that `model` failed on; true when an event should be stored
    /// (the first fault, then at most one a minute).
    fn model_fault(&self, model: &str, windows: usize, what: &str) -> bool {
        let n = windows as u64;
        self.counters.model_faults.fetch_add(n, Ordering::Relaxed);
        metrics::counter!("holmes_model_faults_total", "model" => model.to_owned()).increment(n);
        let mut per = self.per_model.lock().expect("fault lock");
        let m = per.entry(model.to_owned()).or_default();
        m.faults += n;
        m.last_fault = Some(what.to_owned());
        m.last_fault_ms = Some(crate::core::time::now_ms());
        let due = m
            .last_event
            .is_none_or(|t| t.elapsed() >= FAULT_EVENT_EVERY);
        if due {
            m.last_event = Some(Instant::now());
        }
        due
    }

    fn dropped_member(&self) {
        self.counters
            .dropped_members
            .fetch_add(1, Ordering::Relaxed);
        metrics::counter!("holmes_dropped_member_runs_total").increment(1);
    }

    fn batch(&self, model: &str, n: usize, compute: Duration) {
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        self.counters
            .batched_windows
            .fetch_add(n as u64, Ordering::Relaxed);
        metrics::histogram!("holmes_batch_size", "model" => model.to_owned()).record(n as f64);
        metrics::histogram!("holmes_compute_seconds", "model" => model.to_owned())
            .record(compute.as_secs_f64());
    }

    fn committed(&self, status: ScoreStatus, timing: &Timing, _last_sample_at: Instant) {
        let c = &self.counters;
        let counter = match status {
            ScoreStatus::Scored => &c.scored,
            ScoreStatus::Partial => &c.partial,
            ScoreStatus::Superseded => &c.superseded,
            ScoreStatus::Dropped => &c.dropped,
            ScoreStatus::InsufficientSignal => &c.insufficient,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("holmes_windows_total", "status" => status.as_str()).increment(1);
        for m in &timing.members {
            metrics::histogram!("holmes_queue_seconds").record(m.queue_ms / 1000.0);
        }
    }
}

/// State shared by workers, the deadline watcher and submitters of one served ensemble.
pub(crate) struct Shared {
    pub(crate) store: StoreHandle,
    pub(crate) metrics: Arc<EngineMetrics>,
    pub(crate) ensemble_id: i64,
    slots: Vec<Arc<ModelSlot>>,
    /// Each member's weight, and how the members' probabilities combine.
    weights: Vec<f64>,
    combine: Combine,
    /// The beat counter that raises each combined score, and its stage, if one serves.
    pub(crate) beats: Option<beats::BeatStage>,
    deadlines: deadline::Deadlines,
}

impl Shared {
    pub(crate) fn slot(&self, i: usize) -> Arc<ModelSlot> {
        self.slots[i].clone()
    }

    /// `(name, version)` of each member, in ensemble order.
    pub(crate) fn member_names(&self) -> Vec<(String, u32)> {
        self.slots
            .iter()
            .map(|s| (s.name.clone(), s.version.load(Ordering::Relaxed)))
            .collect()
    }

    fn weight(&self, i: usize) -> f64 {
        self.weights[i]
    }
}

/// One served ensemble: its shared state and threads. The engine swaps whole generations.
struct Generation {
    shared: Arc<Shared>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Generation {
    /// Starts every member's workers and the deadline watcher; returns once each worker has
    /// built (loaded and warmed) its model, or with the first failure.
    fn start(
        cfg: &EngineConfig,
        members: Vec<MemberSpec>,
        store: StoreHandle,
        ensemble_id: i64,
        metrics: Arc<EngineMetrics>,
        beats: Option<Arc<BeatCounter>>,
    ) -> Result<Generation, EngineError> {
        let weights = members.iter().map(|m| m.weight).collect();
        let slots = members
            .into_iter()
            .map(|m| {
                Arc::new(ModelSlot {
                    name: m.name,
                    input: m.input,
                    version: AtomicU32::new(m.version),
                    queue: ModelQueue::new(cfg.queue_capacity),
                    generation: AtomicU64::new(0),
                    factory: Mutex::new(m.factory),
                    workers: m.workers.max(1),
                    batch_cap: m.batch_cap.max(1),
                    device: m.device,
                })
            })
            .collect::<Vec<_>>();
        let shared = Arc::new(Shared {
            store,
            metrics,
            ensemble_id,
            slots,
            weights,
            combine: cfg.combine,
            beats: beats.map(|counter| beats::BeatStage {
                counter,
                queue: ModelQueue::new(cfg.queue_capacity),
            }),
            deadlines: deadline::Deadlines::default(),
        });
        let mut threads = Vec::new();
        let mut ready = Vec::new();
        let mut spawn_err = None;
        'spawn: for (i, slot) in shared.slots.iter().enumerate() {
            for w in 0..slot.workers {
                let (tx, rx) = std::sync::mpsc::channel();
                let (sh, cap) = (shared.clone(), slot.batch_cap);
                match std::thread::Builder::new()
                    .name(format!("holmes-{}-{w}", slot.name))
                    .spawn(move || worker::run(sh, i, cap, tx))
                {
                    Ok(h) => threads.push(h),
                    Err(e) => {
                        spawn_err = Some(EngineError::Thread(e.to_string()));
                        break 'spawn;
                    }
                }
                ready.push(rx);
            }
        }
        if spawn_err.is_none() && shared.beats.is_some() {
            let sh = shared.clone();
            match std::thread::Builder::new()
                .name("holmes-beats".into())
                .spawn(move || beats::run(sh))
            {
                Ok(h) => threads.push(h),
                Err(e) => spawn_err = Some(EngineError::Thread(e.to_string())),
            }
        }
        if spawn_err.is_none() {
            let sh = shared.clone();
            match std::thread::Builder::new()
                .name("holmes-deadlines".into())
                .spawn(move || sh.deadlines.run(&sh))
            {
                Ok(h) => threads.push(h),
                Err(e) => spawn_err = Some(EngineError::Thread(e.to_string())),
            }
        }
        let generation = Generation {
            shared,
            threads: Mutex::new(threads),
        };
        let mut failure = spawn_err;
        for r in ready {
            let res = r
                .recv()
                .map_err(|e| EngineError::Thread(e.to_string()))
                .and_then(|x| x);
            if let Err(e) = res {
                failure.get_or_insert(e);
            }
        }
        match failure {
            Some(e) => {
                generation.stop();
                Err(e)
            }
            None => Ok(generation),
        }
    }

    /// Queues close (workers finish what is queued), the watcher stops, threads join.
    fn stop(&self) {
        for s in &self.shared.slots {
            s.queue.close();
        }
        if let Some(b) = &self.shared.beats {
            b.queue.close();
        }
        let threads: Vec<_> = std::mem::take(&mut *self.threads.lock().expect("threads lock"));
        let (workers, watcher): (Vec<_>, Vec<_>) = threads
            .into_iter()
            .partition(|t| t.thread().name() != Some("holmes-deadlines"));
        for t in workers {
            let _ = t.join();
        }
        self.shared.deadlines.stop();
        for t in watcher {
            let _ = t.join();
        }
    }
}

/// Handle to the running engine. Cheap to clone; every clone follows [`Engine::switch`].
#[derive(Clone)]
pub struct Engine {
    current: Arc<RwLock<Arc<Generation>>>,
    metrics: Arc<EngineMetrics>,
    cfg: Arc<EngineConfig>,
    /// The beat counter every generation applies (it does not change with the members).
    beats: Option<Arc<BeatCounter>>,
    /// Serialises switches (a switch loads models, outside the `current` lock).
    switching: Arc<Mutex<()>>,
}

impl Engine {
    /// Starts every member's workers and the deadline watcher; returns once each worker has
    /// built (loaded and warmed) its model, or with the first failure.
    pub fn start(
        cfg: &EngineConfig,
        members: Vec<MemberSpec>,
        store: StoreHandle,
        ensemble_id: i64,
        beats: Option<BeatCounter>,
    ) -> Result<Engine, EngineError> {
        let metrics = Arc::new(EngineMetrics::default());
        let beats = beats.map(Arc::new);
        let g = Generation::start(
            cfg,
            members,
            store,
            ensemble_id,
            metrics.clone(),
            beats.clone(),
        )?;
        Ok(Engine {
            current: Arc::new(RwLock::new(Arc::new(g))),
            metrics,
            cfg: Arc::new(cfg.clone()),
            beats,
            switching: Arc::new(Mutex::new(())),
        })
    }

    /// The beat counter applied to every window's score, if one serves.
    pub(crate) fn beats(&self) -> Option<Arc<BeatCounter>> {
        self.beats.clone()
    }

    fn current(&self) -> Arc<Generation> {
        self.current.read().expect("engine lock").clone()
    }

    /// Serves a new ensemble: its workers start (models load and warm) while the current one
    /// keeps serving; then new windows go to the new one at once, and the old one finishes
    /// the windows it holds (they commit under its ensemble id) and stops. On failure the
    /// current ensemble keeps serving.
    pub(crate) fn switch(
        &self,
        members: Vec<MemberSpec>,
        store: StoreHandle,
        ensemble_id: i64,
    ) -> Result<(), EngineError> {
        let _one = self.switching.lock().expect("switch lock");
        let g = Generation::start(
            &self.cfg,
            members,
            store,
            ensemble_id,
            self.metrics.clone(),
            self.beats.clone(),
        )?;
        let old = std::mem::replace(
            &mut *self.current.write().expect("engine lock"),
            Arc::new(g),
        );
        old.stop();
        Ok(())
    }

    /// Id of the ensemble (members and plan) serving now.
    pub(crate) fn ensemble_id(&self) -> i64 {
        self.current().shared.ensemble_id
    }

    /// Hands a closed window to the engine. Never blocks on inference.
    pub fn submit(&self, w: ClosedWindow) {
        // The read lock is held through the submission, so a switch never strands a window in
        // a generation that is stopping.
        let g = self.current.read().expect("engine lock");
        let sh = &g.shared;
        let slots: Vec<Slot> = sh
            .slots
            .iter()
            .map(|s| {
                if input_of_window(&w, &s.input).is_some() {
                    Slot::Waiting
                } else {
                    Slot::NotApplicable
                }
            })
            .collect();
        let applicable: Vec<usize> = (0..slots.len())
            .filter(|&i| slots[i] == Slot::Waiting)
            .collect();
        let beats = match &sh.beats {
            Some(_) if !applicable.is_empty() => BeatSlot::Waiting,
            _ => BeatSlot::Off,
        };
        let job = Arc::new(WindowJob::new(w, slots, beats, self.slo()));
        if applicable.is_empty() {
            job.commit_now(sh);
            return;
        }
        sh.deadlines.add(&job);
        if let Some(stage) = &sh.beats
            && !queue_up(&stage.queue, &job, sh)
        {
            job.drop_beats();
            sh.metrics.dropped_member();
        }
        let mut dropped = 0;
        for i in applicable.iter().copied() {
            if !queue_up(&sh.slots[i].queue, &job, sh) {
                job.drop_member(i);
                sh.metrics.dropped_member();
                dropped += 1;
            }
        }
        if dropped == applicable.len() {
            job.on_deadline(sh);
        }
    }

    /// Device and batch cap of member `name`.
    pub(crate) fn placement_of(&self, name: &str) -> Option<(String, usize)> {
        self.current()
            .shared
            .slots
            .iter()
            .find(|s| s.name == name)
            .map(|s| (s.device.clone(), s.batch_cap))
    }

    /// Swaps in a new version of member `name` (already validated); workers switch between
    /// batches. Returns false when `name` is not a member.
    pub(crate) fn reload(&self, name: &str, version: u32, factory: Factory) -> bool {
        let g = self.current();
        let Some(slot) = g.shared.slots.iter().find(|s| s.name == name) else {
            return false;
        };
        *slot.factory.lock().expect("factory lock") = factory;
        slot.version.store(version, Ordering::Relaxed);
        slot.generation.fetch_add(1, Ordering::Release);
        true
    }

    pub(crate) fn members(&self) -> Vec<(String, u32)> {
        self.current().shared.member_names()
    }

    /// The lead sets the ensemble serving now scores.
    pub(crate) fn lead_sets(&self) -> LeadSets {
        self.current()
            .shared
            .slots
            .iter()
            .map(|s| LeadSets::of_input(&s.input))
            .collect()
    }

    /// The running plan: per member, device, workers and batch cap.
    pub(crate) fn plan(&self) -> Vec<serde_json::Value> {
        self.current()
            .shared
            .slots
            .iter()
            .map(|s| serde_json::json!({"model": s.name, "device": s.device, "workers": s.workers, "batch_cap": s.batch_cap}))
            .collect()
    }

    pub fn counters(&self) -> &Counters {
        &self.metrics.counters
    }

    /// Faults per model since start (models that never failed are absent).
    pub fn model_faults(&self) -> std::collections::BTreeMap<String, ModelFaults> {
        self.metrics.per_model.lock().expect("fault lock").clone()
    }

    /// Windows waiting per member queue, then the beat counter's (`beats`) where one serves.
    pub fn queue_lengths(&self) -> Vec<(String, usize)> {
        let g = self.current();
        let sh = &g.shared;
        sh.slots
            .iter()
            .map(|s| (s.name.clone(), s.queue.len()))
            .chain(
                sh.beats
                    .as_ref()
                    .map(|b| (counter::BEATS_NAME.to_owned(), b.queue.len())),
            )
            .collect()
    }

    pub(crate) fn slo(&self) -> Duration {
        Duration::from_millis(self.cfg.slo_ms)
    }

    /// Stops: queues close (workers finish what is queued), the watcher stops, threads join.
    pub fn shutdown(&self) {
        self.current().stop();
    }
}

/// Pushes `job` onto `queue`, superseding the stale windows of its bed the queue gave up;
/// false when the queue was full.
fn queue_up(queue: &ModelQueue, job: &Arc<WindowJob>, sh: &Shared) -> bool {
    match queue.push(job.clone()) {
        Pushed::Queued => true,
        Pushed::Superseded(old) => {
            old.iter().for_each(|o| o.supersede(sh));
            true
        }
        Pushed::Full(old) => {
            old.iter().for_each(|o| o.supersede(sh));
            false
        }
    }
}

/// The input a member reads from a window, if usable: the last `input.samples()` samples of
/// its lead (or of the heart-rate series), so that members of different lengths score the same
/// window by its end. `None` when the lead is absent or shorter than the member reads.
pub fn input_of_window<'a>(w: &'a ClosedWindow, input: &Input) -> Option<&'a [f32]> {
    let series = match input {
        Input::Ecg { lead, .. } => w.ecg[lead.index()].as_deref(),
        Input::HeartRate { .. } => w.heart_rate.as_deref(),
    }?;
    let from = series.len().checked_sub(input.samples())?;
    Some(&series[from..])
}
