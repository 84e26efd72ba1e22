//! The default planner: the allocation matrix of Pochelu et al. (device x model -> workers and
//! batch cap), built by worst-fit-decreasing placement of the members by weight memory with
//! priority to GPUs, then batch caps chosen from measured profiles so a batch fits in half the
//! latency budget (the other half is left for queueing).
//!
//! CPU workers of every model share burn flex's rayon pool, sized to the cores: a worker
//! blocks while its operations run on the pool, so intra-op threads x busy workers never
//! exceed the cores.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::accelerator::Accelerator;
use crate::config::EngineConfig;
use crate::serving::engine::profile::Profile;

/// One non-zero cell of the allocation matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Cell {
    pub(crate) model: String,
    pub(crate) device: String,
    pub(crate) workers: usize,
    pub(crate) batch_cap: usize,
    /// Why this batch cap: `profile` (fitted latency within half the budget) or `config`.
    pub(crate) batch_source: &'static str,
}

/// Activation and workspace memory assumed per byte of weights when packing GPUs.
const GPU_FOOTPRINT_FACTOR: u64 = 8;

/// Places `members` (`(name, weight_bytes)`) on `devices` and picks batch caps.
pub(crate) fn plan(
    members: &[(String, u64)],
    devices: &[Accelerator],
    profiles: &HashMap<(String, String), Profile>,
    cfg: &EngineConfig,
    beds: usize,
) -> Vec<Cell> {
    let cpu = devices
        .iter()
        .find(|d| d.id == "cpu")
        .cloned()
        .unwrap_or_else(Accelerator::cpu);
    let mut free: BTreeMap<String, u64> = devices
        .iter()
        .filter(|d| d.is_gpu())
        .map(|d| (d.id.clone(), d.memory_bytes.unwrap_or(0) * 9 / 10))
        .collect();
    let mut order: Vec<&(String, u64)> = members.iter().collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut placed: HashMap<String, String> = HashMap::new();
    for (name, bytes) in order {
        let need = bytes.saturating_mul(GPU_FOOTPRINT_FACTOR);
        let device = match cfg.pin.get(name) {
            Some(id) if id == "cpu" || free.contains_key(id) => id.clone(),
            _ if cfg.device == "cpu" => cpu.id.clone(),
            _ => {
                // Worst fit: the GPU with the most memory left, if the model fits there.
                let best = free
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(k, v)| (k.clone(), *v));
                match best {
                    Some((id, left)) if left >= need => id,
                    _ => cpu.id.clone(),
                }
            }
        };
        if let Some(left) = free.get_mut(&device) {
            *left = left.saturating_sub(need);
        }
        placed.insert(name.clone(), device);
    }
    let budget_ms = cfg.slo_ms as f64 / 2.0;
    let cap_limit = cfg.batch_cap.min(beds.max(1)).max(1);
    members
        .iter()
        .map(|(name, _)| {
            let device = placed[name].clone();
            let (batch_cap, batch_source) = match profiles.get(&(name.clone(), device.clone())) {
                Some(p) => {
                    let fits = (1..=cap_limit)
                        .rev()
                        .find(|&b| p.predict(b) <= budget_ms)
                        .unwrap_or(1);
                    (fits, "profile")
                }
                None => (cap_limit, "config"),
            };
            let workers = if device == "cpu" {
                1
            } else {
                cfg.workers_per_model.max(1)
            };
            Cell {
                model: name.clone(),
                device,
                workers,
                batch_cap,
                batch_source,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Combine;
    use crate::serving::engine::profile::Point;

    fn cfg() -> EngineConfig {
        EngineConfig {
            slo_ms: 200,
            queue_capacity: 64,
            batch_cap: 32,
            workers_per_model: 2,
            combine: Combine::Mean,
            device: "auto".into(),
            pin: BTreeMap::new(),
        }
    }

    fn gpu(i: usize, mb: u64) -> Accelerator {
        Accelerator {
            id: format!("cuda:{i}"),
            name: "gpu".into(),
            memory_bytes: Some(mb << 20),
        }
    }

    #[test]
    fn worst_fit_decreasing_with_gpu_priority() {
        let members = vec![
            ("small".to_string(), 1 << 20),
            ("big".to_string(), 40 << 20),
            ("mid".to_string(), 10 << 20),
        ];
        let devices = vec![gpu(0, 500), gpu(1, 400), Accelerator::cpu()];
        let p = plan(&members, &devices, &HashMap::new(), &cfg(), 64);
        let on = |m: &str| p.iter().find(|c| c.model == m).unwrap().device.clone();
        // big (320 MB footprint) goes to the roomier GPU 0, mid to GPU 1, small to GPU 1 too
        // (GPU 0 has 130 MB left, GPU 1 280 MB).
        assert_eq!(
            (on("big"), on("mid"), on("small")),
            ("cuda:0".into(), "cuda:1".into(), "cuda:1".into())
        );
        // Nothing fits a tiny GPU: everything lands on the CPU with one worker.
        let p = plan(
            &members,
            &[gpu(0, 1), Accelerator::cpu()],
            &HashMap::new(),
            &cfg(),
            64,
        );
        assert!(p.iter().all(|c| c.device == "cpu" && c.workers == 1));
    }

    #[test]
    fn batch_caps_come_from_profiles() {
        let members = vec![("m".to_string(), 1 << 20), ("n".to_string(), 1 << 20)];
        let prof = Profile {
            model: "m".into(),
            sha256: String::new(),
            device: "cpu".into(),
            hardware: String::new(),
            points: vec![Point {
                batch: 1,
                p50_ms: 12.0,
                p95_ms: 13.0,
                p99_ms: 14.0,
                repeats: 5,
            }],
            quadratic: [0.0, 10.0, 2.0], // 10 ms per window + 2 ms
        };
        let profiles = HashMap::from([(("m".to_string(), "cpu".to_string()), prof)]);
        let p = plan(&members, &[Accelerator::cpu()], &profiles, &cfg(), 64);
        assert_eq!((p[0].batch_cap, p[0].batch_source), (9, "profile")); // 10*9+2 = 92 <= 100
        assert_eq!((p[1].batch_cap, p[1].batch_source), (32, "config"));
        assert_eq!(
            plan(&members, &[Accelerator::cpu()], &profiles, &cfg(), 4)[1].batch_cap,
            4,
            "never above the bed count"
        );
    }
}
