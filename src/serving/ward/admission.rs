//! Who gets a place in the ward: the policy [`Ward::attach`](super::Ward::attach) applies to a
//! hello for a bed the ward does not hold. Pure: it reads the beds held and says which to
//! evict, or why the hello is refused.
//!
//! - A bed is **reserved** when it is configured (`ward.beds`) or bound to a registered device
//!   (`holmes device add NAME --bed BED`). Unreserved beds may fill the ward only up to
//!   `ward.max_beds` less the reserved beds not held, so a registered monitor always finds its
//!   place.
//! - A bed is **evictable** when no monitor is connected and it either never streamed (a
//!   hello, then nothing) or is lost (no data for `ward.lost_secs`). When a new bed needs a
//!   place, evictable beds give theirs up: those that never streamed first, then the longest
//!   lost. An evicted bed's history stays in the database.
//! - A **gateway** (a registered device bound to no bed) holds at most
//!   `auth.max_beds_per_gateway` beds; past it, its own evictable beds go first, else it is
//!   refused.

use std::time::Instant;

/// A bed the ward holds, as the policy sees it.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(crate) bed: String,
    /// The device that attached to it last.
    pub(crate) device: String,
    pub(crate) reserved: bool,
    /// None: a monitor is connected, or data arrived within `ward.lost_secs`.
    pub(crate) idle: Option<Idle>,
}

/// Why, and since when, a held bed may give up its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Idle {
    /// Said hello and sent nothing; its monitor left at this time.
    NeverStreamed(Instant),
    /// Its last data arrived at this time, longer ago than `ward.lost_secs`.
    Lost(Instant),
}

impl Idle {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Idle::NeverStreamed(_) => "never_streamed",
            Idle::Lost(_) => "lost",
        }
    }
}

/// A hello for a new bed, as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Newcomer<'a> {
    pub(crate) device: &'a str,
    pub(crate) reserved: bool,
    /// Most beds its device may hold (a gateway's cap), if any.
    pub(crate) device_cap: Option<usize>,
}

/// Why a new bed gets no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Full {
    /// The device holds its cap of beds, none of them evictable.
    Device { cap: usize },
    /// The ward holds `limit` beds (its maximum, less the places kept for reserved beds), none
    /// of them evictable.
    Ward { limit: usize },
}

/// The beds to evict (in order) so that `new` has a place, or why it cannot have one.
/// `missing_reserved`: reserved beds the ward does not hold, `new`'s own bed excluded.
pub(super) fn make_room(
    held: &[Held],
    new: Newcomer<'_>,
    max_beds: usize,
    missing_reserved: usize,
) -> Result<Vec<String>, Full> {
    let mut evict: Vec<String> = Vec::new();
    if let Some(cap) = new.device_cap {
        let mine: Vec<&Held> = held.iter().filter(|h| h.device == new.device).collect();
        let mut idle = evictable(mine.iter().copied());
        let mut n = mine.len();
        while n >= cap {
            let bed = idle.pop().ok_or(Full::Device { cap })?;
            evict.push(bed);
            n -= 1;
        }
    }
    // Unreserved beds leave room for the reserved ones that are away; evicting a reserved bed
    // would only move its place into that reserve, so they are not candidates for them.
    let limit = if new.reserved {
        max_beds
    } else {
        max_beds.saturating_sub(missing_reserved)
    };
    let mut idle = evictable(
        held.iter()
            .filter(|h| !evict.contains(&h.bed) && (new.reserved || !h.reserved)),
    );
    let mut n = held.len() - evict.len();
    while n >= limit {
        let bed = idle.pop().ok_or(Full::Ward { limit })?;
        evict.push(bed);
        n -= 1;
    }
    Ok(evict)
}

/// The evictable beds, the first to go last (a stack): never streamed before lost, the
/// longest idle first.
fn evictable<'a>(beds: impl Iterator<Item = &'a Held>) -> Vec<String> {
    let mut idle: Vec<(Idle, &str)> = beds
        .filter_map(|h| Some((h.idle?, h.bed.as_str())))
        .collect();
    idle.sort();
    idle.into_iter().rev().map(|(_, b)| b.to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn held(bed: &str, device: &str, reserved: bool, idle: Option<Idle>) -> Held {
        Held {
            bed: bed.into(),
            device: device.into(),
            reserved,
            idle,
        }
    }

    #[test]
    fn idle_beds_make_room_never_streamed_first_and_reserved_places_are_kept() {
        let t = Instant::now();
        let s = |secs| t + Duration::from_secs(secs);
        let ward = vec![
            held("live", "mon-a", false, None),
            held("lost-old", "gw", false, Some(Idle::Lost(s(1)))),
            held("junk-new", "gw", false, Some(Idle::NeverStreamed(s(9)))),
            held("junk-old", "gw", false, Some(Idle::NeverStreamed(s(5)))),
        ];
        let gw = Newcomer {
            device: "gw",
            reserved: false,
            device_cap: None,
        };
        // Room in the ward: nobody goes.
        assert_eq!(make_room(&ward, gw, 5, 0), Ok(vec![]));
        // Full: the oldest bed that never streamed goes first, then the next, then the lost.
        assert_eq!(make_room(&ward, gw, 4, 0), Ok(vec!["junk-old".to_owned()]));
        assert_eq!(
            make_room(&ward, gw, 2, 0),
            Ok(vec![
                "junk-old".into(),
                "junk-new".into(),
                "lost-old".into()
            ])
        );
        // Two reserved beds away: an unreserved one needs two places more.
        assert_eq!(
            make_room(&ward, gw, 5, 2),
            Ok(vec!["junk-old".into(), "junk-new".into()])
        );
        // Only live beds left: refused, naming the limit.
        let live = vec![held("a", "x", false, None), held("b", "y", false, None)];
        assert_eq!(make_room(&live, gw, 4, 2), Err(Full::Ward { limit: 2 }));
        // A reserved bed's monitor gets the places kept for it.
        let mon = Newcomer {
            device: "mon-2",
            reserved: true,
            device_cap: None,
        };
        assert_eq!(make_room(&live, mon, 4, 1), Ok(vec![]));
        // Reserved beds do not give up their places to unreserved ones.
        let kept = vec![held("icu-1", "mon-1", true, Some(Idle::Lost(s(1))))];
        assert_eq!(make_room(&kept, gw, 1, 0), Err(Full::Ward { limit: 1 }));
        assert_eq!(make_room(&kept, mon, 1, 0), Ok(vec!["icu-1".to_owned()]));
    }

    #[test]
    fn a_gateway_holds_at_most_its_cap_evicting_its_own_idle_beds_first() {
        let t = Instant::now();
        let ward = vec![
            held("gw-1", "gw", false, None),
            held("gw-2", "gw", false, Some(Idle::NeverStreamed(t))),
            held("other", "mon", false, Some(Idle::NeverStreamed(t))),
        ];
        let gw = Newcomer {
            device: "gw",
            reserved: false,
            device_cap: Some(2),
        };
        assert_eq!(make_room(&ward, gw, 10, 0), Ok(vec!["gw-2".to_owned()]));
        let busy = vec![
            held("gw-1", "gw", false, None),
            held("gw-2", "gw", false, None),
        ];
        assert_eq!(make_room(&busy, gw, 10, 0), Err(Full::Device { cap: 2 }));
        // Another device is not held to the gateway's cap.
        let mon = Newcomer {
            device: "mon",
            reserved: false,
            device_cap: Some(2),
        };
        assert_eq!(make_room(&busy, mon, 10, 0), Ok(vec![]));
    }
}
