//! ECG signal processing shared by training, serving and the tools: QRS detection and the
//! heart rate a monitor reports ([`heart_rate`]), sample-rate conversion ([`resample`]), and a
//! synthetic ECG ([`ecgsyn`]) for demos, profiling and tests.

pub mod ecgsyn;
pub mod heart_rate;
pub mod resample;
