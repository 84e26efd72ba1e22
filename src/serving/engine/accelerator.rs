//! Accelerators a model can run on: the CPU (burn `flex`) always; with the `cuda` feature, the GPUs that the CUDA
//! driver reports. burn-cuda loads libcuda at run time and panics without it, so the driver is
//! probed first (loaded with `libloading`, `cuInit`, `cuDeviceGetCount`); any failure is
//! logged with its reason and Holmes runs on the CPU.

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use super::{EngineError, Factory, InferModel, ZooInfer};
use crate::zoo::ZooModel;

/// A device a worker can be bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Accelerator {
    /// `cpu` or `cuda:N`.
    pub(crate) id: String,
    pub(crate) name: String,
    /// Memory in bytes, where known.
    pub(crate) memory_bytes: Option<u64>,
}

impl Accelerator {
    pub(crate) fn cpu() -> Accelerator {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Accelerator {
            id: "cpu".into(),
            name: format!("CPU, {cores} cores (burn flex)"),
            memory_bytes: None,
        }
    }

    pub(crate) fn is_gpu(&self) -> bool {
        self.id.starts_with("cuda:")
    }
}

/// The devices of this machine: GPUs first (when the `cuda` feature is built and the driver
/// answers), then the CPU.
pub(crate) fn discover() -> Vec<Accelerator> {
    let mut out = gpus();
    out.push(Accelerator::cpu());
    out
}

#[cfg(not(feature = "cuda"))]
fn gpus() -> Vec<Accelerator> {
    Vec::new()
}

#[cfg(feature = "cuda")]
fn gpus() -> Vec<Accelerator> {
    match probe_cuda() {
        Ok(v) => {
            tracing::info!(gpus = v.len(), "CUDA driver found");
            v
        }
        Err(why) => {
            tracing::warn!(reason = %why, "No usable CUDA GPU; running on the CPU");
            Vec::new()
        }
    }
}

/// Asks the CUDA driver for its devices without going through burn (which panics when the
/// driver is absent).
#[cfg(feature = "cuda")]
fn probe_cuda() -> Result<Vec<Accelerator>, String> {
    type Init = unsafe extern "C" fn(u32) -> i32;
    type Count = unsafe extern "C" fn(*mut i32) -> i32;
    type Name = unsafe extern "C" fn(*mut std::ffi::c_char, i32, i32) -> i32;
    type Mem = unsafe extern "C" fn(*mut usize, i32) -> i32;
    // SAFETY: loading the system's CUDA driver library; its symbols are called with the
    // signatures of the CUDA driver API and valid pointers.
    unsafe {
        let lib = libloading::Library::new("libcuda.so.1")
            .or_else(|_| libloading::Library::new("libcuda.so"))
            .map_err(|e| format!("libcuda not loadable: {e}"))?;
        let init: libloading::Symbol<Init> = lib.get(b"cuInit\0").map_err(|e| e.to_string())?;
        let count: libloading::Symbol<Count> =
            lib.get(b"cuDeviceGetCount\0").map_err(|e| e.to_string())?;
        let name: libloading::Symbol<Name> =
            lib.get(b"cuDeviceGetName\0").map_err(|e| e.to_string())?;
        let mem: libloading::Symbol<Mem> = lib
            .get(b"cuDeviceTotalMem_v2\0")
            .map_err(|e| e.to_string())?;
        let rc = init(0);
        if rc != 0 {
            return Err(format!("cuInit failed with CUDA error {rc}"));
        }
        let mut n = 0i32;
        let rc = count(&mut n);
        if rc != 0 || n <= 0 {
            return Err(format!("no CUDA devices (error {rc}, count {n})"));
        }
        let mut out = Vec::new();
        for i in 0..n {
            let mut buf = [0 as std::ffi::c_char; 128];
            let nm = if name(buf.as_mut_ptr(), 128, i) == 0 {
                std::ffi::CStr::from_ptr(buf.as_ptr())
                    .to_string_lossy()
                    .into_owned()
            } else {
                "CUDA device".into()
            };
            let mut bytes = 0usize;
            let m = (mem(&mut bytes, i) == 0).then_some(bytes as u64);
            out.push(Accelerator {
                id: format!("cuda:{i}"),
                name: nm,
                memory_bytes: m,
            });
        }
        Ok(out)
    }
}

/// A factory that loads zoo model `dir` on device `device` (`cpu`, `cuda:N`), on the calling
/// worker thread. On a GPU it then runs every batch size up to `warm_batches` once: burn-cuda
/// tunes its kernels for each new shape on first use (hundreds of ms), which in service would
/// fall on the first windows of each batch size and miss their deadline. A warm-up that fails
/// is logged and stops there; the member loads all the same.
pub(crate) fn zoo_factory(dir: &Path, device: &str, warm_batches: usize) -> Factory {
    let dir = dir.to_owned();
    let err = |dir: &Path, e: crate::zoo::ZooError| EngineError::Model {
        name: dir.display().to_string(),
        reason: e.to_string(),
    };
    #[cfg(feature = "cuda")]
    if let Some(i) = device
        .strip_prefix("cuda:")
        .and_then(|i| i.parse::<usize>().ok())
    {
        return Arc::new(move || {
            let d = burn::backend::cuda::CudaDevice::new(i);
            let m = ZooModel::<burn::backend::Cuda>::load(&dir, &d).map_err(|e| err(&dir, e))?;
            let zeros = vec![0.0f32; m.manifest.input.samples()];
            for b in 1..=warm_batches {
                let inputs: Vec<&[f32]> = (0..b).map(|_| zeros.as_slice()).collect();
                // A failed warm-up (memory, say) leaves that size cold; the member still
                // serves, and a real batch that fails is reported where it fails.
                if let Err(e) = m.predict(&inputs) {
                    tracing::warn!(model = %dir.display(), batch = b, error = %e, "Warming up a batch size on the GPU failed");
                    break;
                }
            }
            Ok(Box::new(ZooInfer(m)) as Box<dyn InferModel>)
        });
    }
    let _ = (device, warm_batches);
    Arc::new(move || {
        let m = ZooModel::<burn::backend::Flex>::load(&dir, &Default::default())
            .map_err(|e| err(&dir, e))?;
        Ok(Box::new(ZooInfer(m)) as Box<dyn InferModel>)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_lists_the_cpu_last() {
        let d = discover();
        assert_eq!(d.last().unwrap().id, "cpu");
    }

    /// Every ECG model of the committed zoo gives the same probabilities on the GPU as on the
    /// CPU, for a batch of rhythms (sinus, a wide fast run, fibrillation, noise): what the
    /// engine serves does not depend on where a model runs.
    #[cfg(feature = "cuda")]
    #[test]
    fn cuda_and_the_cpu_agree_on_every_ecg_model() {
        use crate::signal::test_signals as ts;
        if let Err(why) = probe_cuda() {
            println!("SKIPPED cuda parity: {why}");
            return;
        }
        // Relative to the crate's root, where cargo runs tests (and a test binary carried to a
        // GPU machine is run).
        let root = Path::new("models");
        let dirs: Vec<_> = crate::zoo::model_dirs(root)
            .unwrap()
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("ecg-"))
            })
            .collect();
        assert!(!dirs.is_empty(), "no ECG models under {}", root.display());
        let gpu = burn::backend::cuda::CudaDevice::new(0);
        for dir in &dirs {
            let cpu = ZooModel::<burn::backend::Flex>::load(dir, &Default::default()).unwrap();
            let cuda = ZooModel::<burn::backend::Cuda>::load(dir, &gpu).unwrap();
            let secs = cpu.manifest.input.secs();
            let n = cpu.manifest.input.samples();
            let windows: Vec<Vec<f32>> = vec![
                ts::sinus(1, 72.0, secs),
                ts::wide_run(180.0, 160.0, secs),
                ts::fibrillation(2, secs),
                ts::noise(3, 0.5, secs),
            ]
            .into_iter()
            .map(|mut w| {
                w.resize(n, 0.0);
                w
            })
            .collect();
            let refs: Vec<&[f32]> = windows.iter().map(Vec::as_slice).collect();
            let a = cpu.predict(&refs).unwrap();
            let b = cuda.predict(&refs).unwrap();
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    (x - y).abs() < 1e-3,
                    "{}: CPU {a:?} against CUDA {b:?}",
                    dir.display()
                );
            }
            println!("{}: CPU {a:?} CUDA {b:?}", dir.display());
        }
    }
}
