//! One bed's aggregator state: the sample timeline (sequence numbers, device timestamps, gaps,
//! duplicates, late frames, clock jumps, reconnects), ring buffers per lead and vital, and the
//! window scheduler. Pure and synchronous: [`super::task`] drives it from a tokio task, and the
//! unit tests drive it directly.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::ring::{Ring, fill_holes};
use crate::core::event::{Event, EventKind};
use crate::core::window::{ClosedWindow, LeadSlot, MAX_LEADS, WindowQuality};

/// Timeline parameters of a bed.
#[derive(Debug, Clone)]
pub(crate) struct BedParams {
    /// ECG samples per second (the appliance's rate).
    pub(crate) fs: i64,
    pub(crate) window: i64,
    pub(crate) hop: i64,
    /// Where the window ends sit within the hop.
    pub(crate) phase: Phase,
    pub(crate) grace: Duration,
    /// Samples buffered per lead.
    pub(crate) capacity: usize,
    /// Silent windows stop being closed this long after the last data.
    pub(crate) lost_after: Duration,
    pub(crate) min_coverage: f64,
    pub(crate) max_lead_off_fraction: f64,
    pub(crate) min_vitals_coverage: f64,
    /// Device time (ms) up to which an earlier run of the daemon stored this bed's windows:
    /// windows ending at or before it are passed over, not scored again (a monitor resends
    /// its buffer to a restarted daemon, which welcomes it from sequence 0).
    pub(crate) scored_until_ms: Option<i64>,
}

/// Where a bed's window ends sit within the hop.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Phase {
    /// At `phase + k * hop` on the bed's timeline.
    Timeline(i64),
    /// Closing `slot_secs` past each whole hop since `epoch` on the wall clock: placed a hop
    /// before the first window can end, from the stream's real-time origin (see
    /// [`BedState::place`]).
    WallClock { epoch: Instant, slot_secs: f64 },
}

/// A samples frame after ingest validation: lead slots resolved, bad samples already `None`.
#[derive(Debug, Clone)]
pub(crate) struct SampleFrame {
    pub(crate) seq: u64,
    pub(crate) t_ms: i64,
    pub(crate) n: usize,
    pub(crate) leads: [Option<Vec<Option<f32>>>; MAX_LEADS],
    pub(crate) lead_off: [bool; MAX_LEADS],
    pub(crate) arrived: Instant,
}

/// What a frame did, for the connection to answer and the store to record.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) duplicate: bool,
    pub(crate) too_late: bool,
    pub(crate) events: Vec<Event>,
    pub(crate) windows: Vec<ClosedWindow>,
}

/// Recently seen sequence numbers (a sliding bitmap).
#[derive(Debug, Clone, Default)]
struct SeenSeqs {
    base: u64,
    bits: std::collections::VecDeque<bool>,
}

const SEEN_SPAN: u64 = 4096;
/// How much earlier the real-time origin must turn out to be before a wall-clock slot's ends
/// are placed again (seconds): half a 100-ms frame, so the network's jitter does not move them.
const REPLACE_SECS: f64 = 0.05;
/// Forward jumps longer than a day are clock errors, not gaps.
const MAX_GAP_SAMPLES: i64 = 250 * 86_400;

impl SeenSeqs {
    fn contains(&self, seq: u64) -> bool {
        seq >= self.base
            && self
                .bits
                .get((seq - self.base) as usize)
                .copied()
                .unwrap_or(false)
    }
    fn insert(&mut self, seq: u64) {
        // A jump beyond the span restarts the bitmap, so memory stays bounded whatever the
        // monitor sends.
        if self.bits.is_empty() || seq >= self.base.saturating_add(2 * SEEN_SPAN) {
            self.bits.clear();
            self.base = seq;
        }
        if seq < self.base {
            return;
        }
        let idx = (seq - self.base) as usize;
        if idx >= self.bits.len() {
            self.bits.resize(idx + 1, false);
        }
        self.bits[idx] = true;
        while self.bits.len() as u64 > SEEN_SPAN {
            self.bits.pop_front();
            self.base += 1;
        }
    }
    fn clear(&mut self) {
        self.bits.clear();
    }
}

/// A 1 Hz vitals channel by timeline second.
#[derive(Debug, Clone)]
struct VitalRing {
    values: Vec<Option<f32>>,
    tags: Vec<i64>,
}

impl VitalRing {
    fn new(cap: usize) -> Self {
        VitalRing {
            values: vec![None; cap],
            tags: vec![i64::MIN; cap],
        }
    }
    fn put(&mut self, sec: i64, v: Option<f32>) {
        let s = sec.rem_euclid(self.values.len() as i64) as usize;
        self.values[s] = v;
        self.tags[s] = sec;
    }
    /// Whether a reading (possibly "no value") arrived for `sec`.
    fn arrived(&self, sec: i64) -> bool {
        self.tags[sec.rem_euclid(self.tags.len() as i64) as usize] == sec
    }
    fn get(&self, sec: i64) -> Option<f32> {
        let s = sec.rem_euclid(self.values.len() as i64) as usize;
        if self.tags[s] == sec {
            self.values[s]
        } else {
            None
        }
    }
}

/// The bed's aggregator.
#[derive(Debug)]
pub(crate) struct BedState {
    pub(crate) bed: Arc<str>,
    p: BedParams,
    leads: Vec<Ring>,
    /// Lead slots the current connection announced.
    present: [bool; MAX_LEADS],
    vitals: BTreeMap<String, VitalRing>,
    /// Device time and timeline position that anchor the mapping between them.
    origin: Option<(i64, i64)>,
    next_seq: u64,
    expected_pos: i64,
    high_water: i64,
    seen: SeenSeqs,
    /// The next samples frame is the first of a new connection (its seq may restart).
    fresh: bool,
    next_end: i64,
    /// Earliest wall-clock moment (seconds since the slot's epoch) at which timeline position
    /// 0 could have been taken, by the frames seen so far: the stream's real-time origin.
    origin_secs: f64,
    /// The origin a wall-clock slot's window ends were last placed from; infinite until they
    /// are placed (a hop before the first window can end).
    placed_from: f64,
    /// The frames since the stream last ran ahead of real time: the least origin they bound,
    /// and where they began (a backlog arriving faster than real time restarts them).
    run_min: f64,
    run_from: i64,
    window_index: u64,
    due_since: Option<Instant>,
    last_arrival: Option<Instant>,
    /// Positions before this belong to closed windows only.
    closed_until: i64,
    next_vitals_seq: u64,
    /// The monitor said bye: no silent windows until data returns.
    idle: bool,
    /// The next vitals frame is the first of a new connection (its seq may restart).
    vitals_fresh: bool,
}

impl BedState {
    pub(crate) fn new(bed: Arc<str>, p: BedParams) -> BedState {
        let phase = match p.phase {
            Phase::Timeline(phase) => phase,
            Phase::WallClock { .. } => 0,
        };
        let first_end = first_boundary(p.window, phase, p.hop);
        BedState {
            bed,
            leads: (0..MAX_LEADS).map(|_| Ring::new(p.capacity)).collect(),
            present: [false; MAX_LEADS],
            vitals: BTreeMap::new(),
            origin: None,
            next_seq: 0,
            expected_pos: 0,
            high_water: 0,
            seen: SeenSeqs::default(),
            fresh: true,
            next_end: first_end,
            origin_secs: f64::INFINITY,
            placed_from: f64::INFINITY,
            run_min: f64::INFINITY,
            run_from: 0,
            window_index: 0,
            due_since: None,
            last_arrival: None,
            closed_until: 0,
            next_vitals_seq: 0,
            idle: true,
            vitals_fresh: true,
            p,
        }
    }

    /// ECG samples per second.
    pub(crate) fn fs(&self) -> i64 {
        self.p.fs
    }

    /// Whether the samples up to device time `t_ms` are in (`None` before the first frame).
    pub(crate) fn reached(&self, t_ms: i64) -> Option<bool> {
        self.origin.map(|_| self.high_water >= self.pos_of(t_ms))
    }

    /// Each lead slot's `samples` positions up to device time `t_ms`, holes filled, with how
    /// many arrived; `None` for a slot the connection did not announce (all of them before
    /// the first frame).
    pub(crate) fn before(&self, t_ms: i64, samples: i64) -> Vec<Option<(Vec<f32>, usize)>> {
        if self.origin.is_none() {
            return vec![None; MAX_LEADS];
        }
        let end = self.pos_of(t_ms);
        (0..MAX_LEADS)
            .map(|l| {
                self.present[l].then(|| {
                    let (x, arrived, _) = self.leads[l].window(end.saturating_sub(samples), end);
                    (x, arrived)
                })
            })
            .collect()
    }

    /// The last `samples` of each lead slot, with the strip's end as a timeline position and as
    /// device time (ms).
    pub(crate) fn strip(&self, samples: i64) -> (i64, i64, Vec<Option<Vec<Option<f32>>>>) {
        let end = self.high_water;
        let start = (end - samples).max(0);
        let leads = (0..MAX_LEADS)
            .map(|l| self.present[l].then(|| self.leads[l].samples(start, end)))
            .collect();
        (end, self.ms_of(end), leads)
    }

    /// A connection attached, announcing these lead slots and vitals.
    pub(crate) fn attach(&mut self, present: [bool; MAX_LEADS], vitals: &[String]) {
        self.present = present;
        let cap = (self.p.capacity as i64 / self.p.fs).max(2) as usize;
        for v in vitals {
            self.vitals
                .entry(v.clone())
                .or_insert_with(|| VitalRing::new(cap));
        }
        self.fresh = true;
        self.vitals_fresh = true;
    }

    /// The monitor left on purpose.
    pub(crate) fn bye(&mut self) {
        self.idle = true;
    }

    pub(crate) fn next_samples_seq(&self) -> u64 {
        self.next_seq
    }

    pub(crate) fn next_vitals_seq(&self) -> u64 {
        self.next_vitals_seq
    }

    /// Timeline position of device time `t_ms`.
    fn pos_of(&self, t_ms: i64) -> i64 {
        let (t0, p0) = self.origin.expect("anchored");
        // The difference first, exactly (i128): near i64::MIN or MAX an f64 cannot tell
        // timestamps 100 ms apart, which would read as clock jumps.
        let dt = (i128::from(t_ms) - i128::from(t0)) as f64 * self.p.fs as f64 / 1000.0;
        // `as` saturates, so absurd timestamps give extreme positions, never a panic.
        p0.saturating_add(dt.round() as i64)
    }

    /// Device time of timeline position `pos`.
    fn ms_of(&self, pos: i64) -> i64 {
        let (t0, p0) = self.origin.unwrap_or((0, 0));
        t0.saturating_add(((pos as f64 - p0 as f64) * 1000.0 / self.p.fs as f64).round() as i64)
    }

    fn event(&self, kind: EventKind, detail: serde_json::Value) -> Event {
        Event::bed(self.bed.clone(), kind, detail)
    }

    /// Takes a samples frame.
    pub(crate) fn on_samples(&mut self, f: SampleFrame) -> Outcome {
        let mut out = Outcome::default();
        let n = f.n as i64;
        let tol = (n / 2).max(3);
        self.last_arrival = Some(f.arrived);
        self.idle = false;
        let pos;
        if self.origin.is_none() {
            self.origin = Some((f.t_ms, 0));
            self.next_seq = f.seq;
            pos = 0;
        } else {
            let ts_pos = self.pos_of(f.t_ms);
            // A reconnecting monitor restarted its numbering; or more missing frames than a
            // day has samples, which is no outage: the monitor renumbered its frames. Either
            // way, follow it, placing the frame by its time.
            let restarted =
                self.fresh && f.seq < self.next_seq && ts_pos >= self.expected_pos - tol;
            let renumbered =
                f.seq > self.next_seq && f.seq - self.next_seq > MAX_GAP_SAMPLES as u64;
            if restarted || renumbered {
                out.events.push(self.event(
                    EventKind::SeqReset,
                    json!({"from": self.next_seq, "to": f.seq}),
                ));
                self.seen.clear();
                self.next_seq = f.seq;
            }
            if f.seq == self.next_seq {
                let ahead = ts_pos.saturating_sub(self.expected_pos);
                if ahead.abs() <= tol {
                    pos = self.expected_pos;
                } else if ahead > 0 && ahead <= MAX_GAP_SAMPLES && self.fresh {
                    // Resuming after a disconnection: the silence is a gap.
                    pos = ts_pos;
                    out.events
                        .push(self.gap_event(self.expected_pos, ts_pos, 0));
                } else {
                    out.events.push(self.clock_jump(f.seq, f.t_ms, ts_pos));
                    pos = self.expected_pos;
                }
            } else if f.seq > self.next_seq {
                let missing = f.seq - self.next_seq;
                let ahead = ts_pos.saturating_sub(self.expected_pos);
                if (0..=MAX_GAP_SAMPLES).contains(&ahead) {
                    pos = ts_pos;
                } else {
                    out.events.push(self.clock_jump(f.seq, f.t_ms, ts_pos));
                    pos = self.expected_pos;
                }
                out.events
                    .push(self.gap_event(self.expected_pos, pos, missing));
            } else if self.seen.contains(f.seq) {
                out.duplicate = true;
                out.events
                    .push(self.event(EventKind::Duplicate, json!({"seq": f.seq})));
                return out;
            } else {
                // Out of order: an earlier frame arriving late fills its hole if still open.
                pos = ts_pos;
                if pos < self.closed_until || pos.saturating_add(n) > self.high_water {
                    out.too_late = true;
                    out.events
                        .push(self.event(EventKind::TooLate, json!({"seq": f.seq, "samples": n})));
                    self.seen.insert(f.seq);
                    return out;
                }
            }
        }
        self.fresh = false;
        if pos + n <= self.closed_until {
            // Resent after its window closed (e.g. on the wall clock while disconnected).
            out.too_late = true;
            out.events
                .push(self.event(EventKind::TooLate, json!({"seq": f.seq, "samples": n})));
            self.seen.insert(f.seq);
            self.next_seq = self.next_seq.max(f.seq.saturating_add(1));
            self.expected_pos = self.expected_pos.max(pos + n);
            return out;
        }
        self.place(pos + n, f.arrived);
        if pos + n > self.expected_pos + self.p.capacity as i64 && pos > self.expected_pos {
            out.events.extend(self.skip_outage(pos));
        }
        for (slot, lead) in f.leads.iter().enumerate() {
            let Some(samples) = lead else { continue };
            self.leads[slot].put_run(pos, samples, f.lead_off[slot]);
        }
        self.seen.insert(f.seq);
        if f.seq >= self.next_seq {
            self.next_seq = f.seq.saturating_add(1);
            self.expected_pos = self.expected_pos.max(pos + n);
        }
        self.high_water = self.high_water.max(pos + n);
        out.windows = self.try_close(f.arrived);
        out
    }

    /// Places the window ends of a wall-clock slot. Each samples frame, whose last sample
    /// (`pos_end`) arrived at `arrived`, bounds the stream's real-time origin: position 0 was
    /// taken no later than `arrived - pos_end / fs`. The earliest bound holds once a monitor
    /// that started behind (connecting, or sending a backlog) has caught up, where the first
    /// frame alone would place the bed by its connection's moment. A hop before the first
    /// window can end, its ends are placed to arrive at the slot past each whole hop. When a
    /// longer backlog has arrived since and the stream runs in real time again (a second of
    /// signal arrived no faster than it was taken), they are placed again from the earlier
    /// origin. A stream that stays faster than real time is not placed again: its windows
    /// close as its signal comes. Ends only move forward: a window already closed (on the
    /// wall clock, say) is never closed again, and one hop may run long.
    fn place(&mut self, pos_end: i64, arrived: Instant) {
        let Phase::WallClock { epoch, slot_secs } = self.p.phase else {
            return;
        };
        let fs = self.p.fs as f64;
        let since = arrived.saturating_duration_since(epoch).as_secs_f64();
        let bound = since - pos_end as f64 / fs;
        self.origin_secs = self.origin_secs.min(bound);
        if bound < self.run_min - REPLACE_SECS {
            (self.run_min, self.run_from) = (bound, pos_end);
        }
        let due = if self.placed_from.is_finite() {
            let real_time = pos_end - self.run_from >= self.p.fs;
            real_time && self.origin_secs < self.placed_from - REPLACE_SECS
        } else {
            pos_end >= self.p.window - self.p.hop
        };
        if !due {
            return;
        }
        self.placed_from = self.origin_secs;
        let hop_secs = self.p.hop as f64 / fs;
        let wait = (slot_secs - self.origin_secs).rem_euclid(hop_secs);
        let phase = ((wait * fs).round() as i64).rem_euclid(self.p.hop);
        let floor = if self.window_index > 0 {
            self.next_end
        } else {
            self.p.window
        };
        self.next_end = first_boundary(floor, phase, self.p.hop);
    }

    /// The device clock disagrees with the sequence: re-anchor so the frame lands where its
    /// sequence number says, and record the jump.
    fn clock_jump(&mut self, seq: u64, t_ms: i64, ts_pos: i64) -> Event {
        let jump_ms = self.ms_of(ts_pos) - self.ms_of(self.expected_pos);
        self.origin = Some((t_ms, self.expected_pos));
        self.event(
            EventKind::ClockJump,
            json!({"seq": seq, "jump_ms": jump_ms}),
        )
    }

    fn gap_event(&self, from: i64, to: i64, missing_frames: u64) -> Event {
        self.event(
            EventKind::Gap,
            json!({
                "from_ms": self.ms_of(from),
                "to_ms": self.ms_of(to),
                "samples": (to - from).max(0),
                "missing_frames": missing_frames,
            }),
        )
    }

    /// Windows entirely inside an outage longer than the buffer are skipped in one event.
    fn skip_outage(&mut self, pos: i64) -> Option<Event> {
        let mut skipped = 0u64;
        if self.next_end <= pos {
            let k = (pos - self.next_end) / self.p.hop + 1;
            self.next_end += k * self.p.hop;
            self.window_index += k as u64;
            skipped = k as u64;
        }
        self.closed_until = self.closed_until.max(self.next_end - self.p.window);
        self.due_since = None;
        (skipped > 0).then(|| self.event(EventKind::Outage, json!({"windows_skipped": skipped})))
    }

    /// Takes a vitals frame: `(name, value)` with flagged or absent readings as `None`.
    pub(crate) fn on_vitals(
        &mut self,
        seq: u64,
        t_ms: i64,
        values: &[(String, Option<f32>)],
        arrived: Instant,
    ) -> Outcome {
        let mut out = Outcome::default();
        self.last_arrival = Some(arrived);
        if seq < self.next_vitals_seq && !self.vitals_fresh {
            out.duplicate = true;
            return out;
        }
        self.vitals_fresh = false;
        self.next_vitals_seq = seq.saturating_add(1);
        if self.origin.is_none() {
            self.origin = Some((t_ms, 0));
        }
        let sec = self.pos_of(t_ms).div_euclid(self.p.fs);
        for (name, v) in values {
            // Only vitals announced in a hello are kept (bounded memory per bed).
            if let Some(r) = self.vitals.get_mut(name) {
                r.put(sec, *v);
            }
        }
        out.windows = self.try_close(arrived);
        out
    }

    /// Periodic check: closes windows whose grace period ran out.
    pub(crate) fn on_tick(&mut self, now: Instant) -> Vec<ClosedWindow> {
        self.try_close(now)
    }

    /// Shutdown: closes every window that is due without waiting out its grace for missing
    /// samples (recorded with the gap), so nothing the bed accepted waits for a tick that
    /// will not come.
    pub(crate) fn on_shutdown(&mut self, now: Instant) -> Vec<ClosedWindow> {
        let grace = std::mem::replace(&mut self.p.grace, Duration::ZERO);
        let closed = self.try_close(now);
        self.p.grace = grace;
        closed
    }

    fn try_close(&mut self, now: Instant) -> Vec<ClosedWindow> {
        let mut closed = Vec::new();
        loop {
            let end = self.next_end;
            let start = end - self.p.window;
            if self.high_water >= end {
                // Complete when every ECG sample and the last second's heart rate are in.
                let complete = self.holes(start, end) == 0
                    && self
                        .vitals
                        .get("hr")
                        .is_none_or(|r| r.arrived(end / self.p.fs));
                // A backlog replayed faster than real time must not wait on the wall clock
                // until the ring overwrites the window: close once the signal has run on by
                // what the buffer can spare.
                let ring_pressure = self.high_water - start >= self.p.capacity as i64 - self.p.hop;
                if !complete && !ring_pressure {
                    let since = *self.due_since.get_or_insert(now);
                    if now.duration_since(since) < self.p.grace {
                        break;
                    }
                }
            } else {
                // Not all samples yet: close on the wall clock once the end is overdue.
                let (Some(last), false) = (self.last_arrival, self.idle) else {
                    break;
                };
                if now.duration_since(last) > self.p.lost_after {
                    break;
                }
                let behind =
                    Duration::from_secs_f64((end - self.high_water) as f64 / self.p.fs as f64);
                if now < last + behind + self.p.grace {
                    break;
                }
            }
            // `now` is the arrival of the frame that completed the window (or the moment its
            // grace ran out): the start of the window's end-to-end latency.
            if self.p.scored_until_ms.is_some_and(|t| self.ms_of(end) <= t) {
                tracing::debug!(
                    end_ms = self.ms_of(end),
                    "Window stored by an earlier run; not scored again"
                );
            } else {
                closed.push(self.close(start, end, now));
            }
            self.next_end += self.p.hop;
            self.window_index += 1;
            self.closed_until = self.next_end - self.p.window;
            self.due_since = None;
        }
        closed
    }

    /// Missing samples in `[start, end)` over the announced leads.
    fn holes(&self, start: i64, end: i64) -> usize {
        (0..MAX_LEADS)
            .filter(|&s| self.present[s])
            .map(|s| self.leads[s].missing(start, end))
            .sum()
    }

    fn close(&self, start: i64, end: i64, last_sample_at: Instant) -> ClosedWindow {
        let len = (end - start) as f64;
        let mut ecg: [Option<Arc<[f32]>>; MAX_LEADS] = Default::default();
        let mut leads: [Option<LeadSlot>; MAX_LEADS] = Default::default();
        let mut gap_samples = 0usize;
        for s in 0..MAX_LEADS {
            if !self.present[s] {
                continue;
            }
            let (x, arrived, off) = self.leads[s].window(start, end);
            let coverage = arrived as f64 / len;
            let off_frac = off as f64 / len;
            gap_samples = gap_samples.max(len as usize - arrived);
            let usable =
                coverage >= self.p.min_coverage && off_frac <= self.p.max_lead_off_fraction;
            leads[s] = Some(LeadSlot {
                coverage,
                lead_off_secs: off as f64 / self.p.fs as f64,
                usable,
            });
            if usable {
                ecg[s] = Some(x.into());
            }
        }
        // Heart rate: the value reported for each second ending inside the window.
        let (first_sec, last_sec) = (start / self.p.fs + 1, end / self.p.fs);
        let hr_raw: Vec<Option<f32>> = match self.vitals.get("hr") {
            Some(r) => (first_sec..=last_sec).map(|s| r.get(s)).collect(),
            None => Vec::new(),
        };
        let hr_coverage = if hr_raw.is_empty() {
            0.0
        } else {
            hr_raw.iter().filter(|v| v.is_some()).count() as f64 / hr_raw.len() as f64
        };
        let heart_rate = (hr_coverage >= self.p.min_vitals_coverage && hr_coverage > 0.0)
            .then(|| Arc::<[f32]>::from(fill_holes(&hr_raw)));
        ClosedWindow {
            bed: self.bed.clone(),
            index: self.window_index,
            start_ms: self.ms_of(start),
            end_ms: self.ms_of(end),
            ecg,
            heart_rate,
            quality: WindowQuality {
                leads,
                gap_samples,
                hr_coverage,
            },
            last_sample_at,
        }
    }
}

/// Smallest `e >= window` with `e = phase (mod hop)`.
fn first_boundary(window: i64, phase: i64, hop: i64) -> i64 {
    let r = (phase - window).rem_euclid(hop);
    window + r
}

#[cfg(test)]
#[path = "bed_tests.rs"]
mod tests;
