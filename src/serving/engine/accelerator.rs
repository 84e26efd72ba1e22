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
/// worker thread.
pub(crate) fn zoo_factory(dir: &Path, device: &str) -> Factory {
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
            Ok(Box::new(ZooInfer(m)) as Box<dyn InferModel>)
        });
    }
    let _ = device;
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
}
