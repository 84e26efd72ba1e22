//! ECG signal processing shared by training, serving and the tools: QRS detection and the
//! heart rate a monitor reports ([`heart_rate`]), sample-rate conversion ([`resample`]), a
//! synthetic ECG ([`ecgsyn`]) for demos, profiling and tests, a classical VT/VF detector
//! ([`classical`], the baseline of `holmes evaluate`), signal-quality indices ([`quality`]) and
//! the beat counter a ward serves beside its ensemble ([`beats`]), and the opinion on a
//! monitor's own VT or VF alarm read from the seconds before it ([`adjudicate`]).

pub mod adjudicate;
pub mod beats;
pub mod classical;
pub mod ecgsyn;
pub(crate) mod heart_rate;
pub mod quality;
pub(crate) mod resample;
mod spectrum;
#[cfg(test)]
pub(crate) mod test_signals;
