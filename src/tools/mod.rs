//! Tools beside the daemon: simulated monitors ([`sim`]), the load benchmark
//! ([`bench`], `holmes bench`), the CPU kernels against ONNX Runtime ([`cpu_bench`],
//! `holmes bench-cpu`), and offline scoring of a recording ([`score`], `holmes score`).

pub mod bench;
pub mod cpu_bench;
pub mod score;
pub mod sim;
