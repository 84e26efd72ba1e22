//! Technical events (gaps, reconnects, zoo and plan changes, start and stop), each with the
//! [`Origin`] it is recorded under: a bed, or one of the system's own parts.

use std::sync::Arc;

use serde::Serialize;

/// Where an event comes from. Stored in the events table's `bed` column: a bed's id, or the
/// name of a system part ([`Origin::as_str`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A bed (its monitor's stream).
    Bed(Arc<str>),
    /// The model zoo: models added, changed, refused, removed, or failing.
    Zoo,
    /// The composer: serving-ensemble switches.
    Composer,
    /// The daemon itself: start, stop, unclean shutdown.
    Server,
}

impl Origin {
    /// The names under which system events are stored (and read back through the API).
    pub(crate) const SYSTEM: [&'static str; 3] = ["zoo", "composer", "server"];

    /// The value stored in the `bed` column.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Origin::Bed(b) => b,
            Origin::Zoo => "zoo",
            Origin::Composer => "composer",
            Origin::Server => "server",
        }
    }
}

/// Kinds of technical events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EventKind {
    Connected,
    Disconnected,
    Superseded,
    Gap,
    Duplicate,
    TooLate,
    ClockJump,
    SeqReset,
    Outage,
    /// The bed gave up its place in a full ward (never streamed, or lost); its history stays.
    Evicted,
    /// A model was added, changed, refused or removed ([`Origin::Zoo`]).
    ZooChange,
    /// The composer switched the serving ensemble ([`Origin::Composer`]).
    PlanChange,
    /// The daemon opened the database ([`Origin::Server`]).
    ServerStart,
    /// The daemon flushed the database and stopped gracefully ([`Origin::Server`]).
    ServerStop,
    /// Found at start-up: the previous run ended without `server_stop` (under
    /// [`Origin::Server`], and under each bed it scored, with the bed's last committed window).
    UncleanShutdown,
    /// A model panicked, failed or returned non-finite output ([`Origin::Zoo`], at most once a
    /// minute per model).
    ModelFault,
}

impl EventKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventKind::Connected => "connected",
            EventKind::Disconnected => "disconnected",
            EventKind::Superseded => "superseded",
            EventKind::Gap => "gap",
            EventKind::Duplicate => "duplicate",
            EventKind::TooLate => "too_late",
            EventKind::ClockJump => "clock_jump",
            EventKind::SeqReset => "seq_reset",
            EventKind::Outage => "outage",
            EventKind::Evicted => "evicted",
            EventKind::ZooChange => "zoo_change",
            EventKind::PlanChange => "plan_change",
            EventKind::ServerStart => "server_start",
            EventKind::ServerStop => "server_stop",
            EventKind::UncleanShutdown => "unclean_shutdown",
            EventKind::ModelFault => "model_fault",
        }
    }
}

/// A technical event, stored with its origin and the time the store takes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub(crate) origin: Origin,
    pub(crate) kind: EventKind,
    pub(crate) detail: serde_json::Value,
}

impl Event {
    /// An event of bed `bed`.
    pub(crate) fn bed(
        bed: impl Into<Arc<str>>,
        kind: EventKind,
        detail: serde_json::Value,
    ) -> Event {
        Event {
            origin: Origin::Bed(bed.into()),
            kind,
            detail,
        }
    }

    /// An event of a system part.
    pub(crate) fn system(origin: Origin, kind: EventKind, detail: serde_json::Value) -> Event {
        Event {
            origin,
            kind,
            detail,
        }
    }
}
