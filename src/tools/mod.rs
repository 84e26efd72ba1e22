//! Tools beside the daemon: simulated monitors ([`sim`]), the load benchmark
//! ([`bench`], `holmes bench`), the CPU kernels against ONNX Runtime ([`cpu_bench`],
//! `holmes bench-cpu`), offline scoring of a recording ([`score`], `holmes score`), and the
//! event-level evaluation of alarms on a split's records ([`evaluate`], `holmes evaluate`).

pub(crate) mod bench;
pub(crate) mod cpu_bench;
pub mod evaluate;
pub mod score;
pub mod sim;
