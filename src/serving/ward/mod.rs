//! The ward: one aggregator per bed (ring buffers, timeline, window scheduler) and the
//! registry that connections attach to.
//!
//! [`ingest`](crate::serving::ingest) validates frames and sends them to a bed through [`Ward`];
//! each bed's task ([`task`]) closes windows and hands them, with its technical events, to the
//! [`WardSink`] the ward was given (the daemon wires it to the engine and the store). The bed's
//! timeline and window scheduler ([`bed`]) are pure and synchronous.

mod bed;
mod ring;
mod task;

pub use bed::{BedParams, BedState, Outcome, SampleFrame};
pub use task::{
    Attach, AttachError, BedCmd, BedStatus, BedView, Strip, Ward, WardSettings, WardSink,
};
