//! Tools beside the daemon: simulated monitors ([`sim`]), the load benchmark
//! ([`bench`], `holmes bench`), the CPU kernels against ONNX Runtime ([`cpu_bench`],
//! `holmes bench-cpu`), offline scoring of a recording ([`score`], `holmes score`), the
//! event-level evaluation of alarms on a split's records ([`evaluate`], `holmes evaluate`), and
//! the zoo's rule book against the zoo ([`rule_book`], `holmes zoo rules`).

pub(crate) mod bench;
pub(crate) mod cpu_bench;
pub mod evaluate;
pub(crate) mod rule_book;
pub mod score;
pub mod sim;
