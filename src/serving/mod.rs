//! The daemon's data path, one module per stage. Data flows
//! monitor -> [`ingest`] -> [`ward`] -> [`engine`] -> [`store`]; imports run the other way
//! only: the ward hands closed windows to a [`ward::WindowSink`] it is given, and the engine
//! commits scores through a store handle.
//!
//! - [`ingest`]: one task per monitor WebSocket, and the monitors' device tokens.
//! - [`ward`]: one aggregator per bed: timeline, ring buffers, window scheduler, quality.
//! - [`engine`]: per-member deadline queues, batching workers on accelerators, partial scores
//!   at the deadline, ensemble loading and placement, zoo hot reload, latency profiles.
//! - [`store`]: SQLite: the writer thread, migrations, the reader, the audit log.

pub mod engine;
pub(crate) mod ingest;
pub mod store;
pub(crate) mod ward;
