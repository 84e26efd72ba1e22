//! Model workers: dedicated OS threads, each bound to a device and one model, pulling batches
//! of windows (from different beds) off that model's deadline queue. Also the model trait the
//! workers run, its zoo implementation, and `FakeModel` for tests and overhead measurement.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use burn::tensor::backend::Backend;

use super::job::{MemberResult, ModelFault};
use super::{EngineError, Shared};
use crate::core::event::{Event, EventKind, Origin};
use crate::zoo::ZooModel;

/// What a worker runs: a batch of raw windows in, one probability per window out.
pub trait InferModel {
    fn version(&self) -> u32;
    fn predict_batch(&mut self, inputs: &[&[f32]]) -> Result<Vec<f32>, String>;
}

/// Builds a model instance on the worker's own thread (burn modules stay on their thread).
pub type Factory = Arc<dyn Fn() -> Result<Box<dyn InferModel>, EngineError> + Send + Sync>;

/// Counts a fault of `model` (a member, or the beat counter) on `windows` windows; the first
/// of an episode is logged and stored as a `model_fault` event. The model is left out of
/// those windows' scores.
pub(crate) fn report_fault(
    shared: &Shared,
    model: &str,
    kind: ModelFault,
    message: &str,
    windows: usize,
) {
    let what = format!("{}: {message}", kind.as_str());
    if shared.metrics.model_fault(model, windows, &what) {
        tracing::error!(model, fault = %what, windows, "Model failed; it is left out of these scores");
        shared.store.event(Event::system(
            Origin::Zoo,
            EventKind::ModelFault,
            serde_json::json!({"model": model, "fault": kind.as_str(),
                "message": what, "windows": windows}),
        ));
    }
}

/// A zoo model on a burn backend.
pub(crate) struct ZooInfer<B: Backend>(pub(crate) ZooModel<B>);

impl<B: Backend> InferModel for ZooInfer<B> {
    fn version(&self) -> u32 {
        self.0.manifest.version
    }
    fn predict_batch(&mut self, inputs: &[&[f32]]) -> Result<Vec<f32>, String> {
        self.0.predict(inputs).map_err(|e| e.to_string())
    }
}

/// A stand-in model: returns probability 0 after `per_batch + per_window * n` of compute,
/// spent spinning (not sleeping) so it occupies a core like a real model.
#[derive(Debug, Clone)]
pub struct FakeModel {
    pub(crate) per_batch: Duration,
    pub(crate) per_window: Duration,
    pub(crate) version: u32,
    /// Return NaN instead of 0 (fault tests).
    pub nan: bool,
    /// Panic instead of answering (fault tests).
    pub panic: bool,
}

impl FakeModel {
    pub fn new(per_batch: Duration, per_window: Duration) -> FakeModel {
        FakeModel {
            per_batch,
            per_window,
            version: 1,
            nan: false,
            panic: false,
        }
    }
}

impl InferModel for FakeModel {
    fn version(&self) -> u32 {
        self.version
    }
    fn predict_batch(&mut self, inputs: &[&[f32]]) -> Result<Vec<f32>, String> {
        let until = Instant::now() + self.per_batch + self.per_window * inputs.len() as u32;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        if self.panic {
            panic!("FakeModel told to panic");
        }
        Ok(vec![if self.nan { f32::NAN } else { 0.0 }; inputs.len()])
    }
}

/// Runs one worker until its queue closes. `member` indexes the ensemble.
pub(crate) fn run(
    shared: Arc<Shared>,
    member: usize,
    batch_cap: usize,
    ready: std::sync::mpsc::Sender<Result<(), EngineError>>,
) {
    let slot = shared.slot(member);
    let mut generation = slot.generation.load(Ordering::Acquire);
    let mut model = match (slot.factory())() {
        Ok(m) => {
            let _ = ready.send(Ok(()));
            m
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    drop(ready);
    let input = slot.input;
    while let Some(batch) = slot.queue.pop_batch(batch_cap) {
        // Hot reload: a new version was validated; switch between batches, so windows already
        // in a batch finish on the old one.
        let g = slot.generation.load(Ordering::Acquire);
        if g != generation {
            match (slot.factory())() {
                Ok(m) => model = m,
                Err(e) => {
                    tracing::error!(model = %slot.name, error = %e, "Reloaded model failed to start on a worker; keeping the old one")
                }
            }
            generation = g;
        }
        let started = Instant::now();
        let inputs: Vec<&[f32]> = batch
            .iter()
            .map(|j| {
                super::input_of_window(&j.window, &input)
                    .expect("only applicable members are queued")
            })
            .collect();
        let out = std::panic::catch_unwind(AssertUnwindSafe(|| model.predict_batch(&inputs)));
        let compute = started.elapsed();
        // One fault kind for the whole batch, or per window for non-finite outputs.
        let (probs, fault, what): (Vec<Option<f32>>, Option<ModelFault>, String) = match out {
            Ok(Ok(p)) if p.len() == batch.len() => {
                let probs: Vec<Option<f32>> =
                    p.into_iter().map(|x| x.is_finite().then_some(x)).collect();
                (probs, None, "non-finite output".to_owned())
            }
            Ok(Ok(p)) => (
                vec![None; batch.len()],
                Some(ModelFault::WrongOutputs),
                format!("{} outputs for {} windows", p.len(), batch.len()),
            ),
            Ok(Err(e)) => (vec![None; batch.len()], Some(ModelFault::Error), e),
            Err(_) => (
                vec![None; batch.len()],
                Some(ModelFault::Panic),
                "panicked".to_owned(),
            ),
        };
        let failed = probs.iter().filter(|p| p.is_none()).count();
        if failed > 0 {
            let kind = fault.unwrap_or(ModelFault::NonFinite);
            report_fault(&shared, &slot.name, kind, &what, failed);
        }
        shared.metrics.batch(&slot.name, batch.len(), compute);
        let version = model.version();
        for (job, prob) in batch.iter().zip(probs) {
            let r = MemberResult {
                prob,
                version,
                queue: started.saturating_duration_since(job.submitted),
                compute,
                batch: batch.len(),
                fault: prob
                    .is_none()
                    .then(|| fault.unwrap_or(ModelFault::NonFinite)),
            };
            job.complete_member(member, r, &shared);
        }
    }
}
