//! Where the ward's output goes ([`WardSink`]): given to the [`registry`](super::registry) by
//! the daemon (the engine and the store) and called by each bed's [`task`](super::task).

use crate::core::event::Event;
use crate::core::monitor_alarm::MonitorAlarmEvent;
use crate::core::window::ClosedWindow;

/// Where the ward's output goes. None of these may block: a bed's task calls them.
pub(crate) trait WardSink: Send + Sync + 'static {
    /// A closed window, to be scored.
    fn window(&self, w: ClosedWindow);
    /// A technical event of a bed (gap, reconnect, ...).
    fn event(&self, e: Event);
    /// A monitor's hello was admitted for `bed`.
    fn bed_seen(&self, bed: &str, device: &str);
    /// A monitor's own alarm (with the samples up to its onset), or its end, in the order the
    /// monitor sent them; never to be dropped.
    fn monitor_alarm(&self, e: MonitorAlarmEvent);
}
