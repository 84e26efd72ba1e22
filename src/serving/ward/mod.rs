//! The ward: one aggregator per bed (ring buffers, timeline, window scheduler) and the
//! registry that connections attach to.
//!
//! [`ingest`](crate::serving::ingest) validates frames and sends them to a bed through [`Ward`]
//! (the [`registry`]), which gives each new bed a place by the [`admission`] policy (reserved
//! places for registered monitors, a cap per gateway, idle beds evicted); each bed's task
//! ([`task`]) closes windows and hands them, with its technical events, to the [`WardSink`]
//! ([`sink`]) the ward was given (the daemon wires it to the engine and the store), and its monitor's
//! own alarms once the samples up to their onsets are in ([`monitor_alarms`]). The bed's timeline
//! and window scheduler ([`bed`]) are pure and synchronous.

mod admission;
mod bed;
mod monitor_alarms;
mod registry;
mod ring;
mod sink;
mod task;

pub(crate) use bed::SampleFrame;
pub(crate) use monitor_alarms::AlarmMsg;
pub(crate) use registry::{BedStatus, BedView, Claim, GatewayAlarm, Ward, WardSettings};
pub(crate) use sink::WardSink;
pub(crate) use task::count_dropped_reply;
pub(crate) use task::{BedCmd, Strip};
