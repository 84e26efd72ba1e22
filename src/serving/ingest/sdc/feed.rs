//! What an SDC device's reports become for its bed, sans-IO ([`Feed`]): sample frames on one
//! 250 Hz grid for every lead, the heart rate and SpO2 as the `hr` and `spo2` vitals, and the
//! alert conditions' presence as the monitor's own alarms and their ends.
//!
//! **Samples.** Each lead's samples are brought to a grid of 4-ms positions (250 Hz) counted
//! from the session's first sample, by their device time (`DeterminationTime` is the first
//! sample's; the samples after it follow at the lead's period): from a faster rate, each
//! position is the mean of the samples in its 4 ms (a boxcar: at 500 or 1,000 Hz each group
//! of 2 or 4 samples that makes one); from a slower rate (200 or 240 Hz, say), the line
//! between the samples either side of it. Samples a report leaves short of a position wait for
//! the next report. Frames cover the span every lead has reached; a lead more than [`LAG`]
//! behind the others is sent as a hole. A report that starts later than its lead's last ended
//! (a report lost, by the device or the sink) leaves a hole on the grid and drops what was
//! held; one that overlaps what was sent is cut; a clock that jumps more than a second ahead
//! starts every lead again there, a gap. Where no lead
//! holds the next positions, the frame's sequence number is skipped, so the bed records a gap
//! rather than a clock jump.
//!
//! **Alarms.** A condition of the MDIB's physiological ones whose presence turns true is raised
//! (`handle@onset` its id, its kind by its code), and ended when it turns false; the open ones
//! outlive a session (the caller keeps them), and a new session's MDIB presence reconciles
//! them. Times are the device's (its `DeterminationTime`), else the grid's last position.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use crate::core::monitor_alarm::MonitorAlarmKind;
use crate::core::window::{MAX_LEADS, SAMPLE_RATE_HZ};
use crate::protocol::pcd04;
use crate::protocol::sdc::{Mdib, Report};
use crate::serving::ward::{AlarmMsg, BedCmd, SampleFrame};

/// Grid positions (4 ms each) a lead may lag the others before it is sent as a hole.
pub(super) const LAG: i64 = SAMPLE_RATE_HZ as i64;
/// One grid position, ms.
const STEP_MS: f64 = 1000.0 / SAMPLE_RATE_HZ as f64;

/// A frame's samples, per lead slot.
type Leads = [Option<Vec<Option<f32>>>; MAX_LEADS];

/// One ECG lead on its way to the grid.
#[derive(Debug)]
pub(super) struct Stream {
    pub(super) handle: String,
    pub(super) slot: usize,
    /// The device's sample period, ms.
    pub(super) period: f64,
    /// Samples (device time, value) not yet used up, and the device time the lead's next
    /// sample is due at.
    held: VecDeque<(f64, f32)>,
    next_in: Option<f64>,
    /// The next grid position this lead gives a value for (none before its first sample).
    next_out: Option<i64>,
    /// Samples on the grid not yet sent, from position `at`.
    pending: Vec<Option<f32>>,
    at: i64,
}

impl Stream {
    pub(super) fn new(handle: String, slot: usize, period: f64) -> Stream {
        Stream {
            handle,
            slot,
            period,
            held: VecDeque::new(),
            next_in: None,
            next_out: None,
            pending: Vec::new(),
            at: 0,
        }
    }

    /// The grid's values this lead's held samples make, from position `next_out` on: at a
    /// period under 4 ms the mean of the samples in `[t, t + 4 ms)` (a boxcar: each group of
    /// samples that makes one, at 500 or 1,000 Hz), else the line between the samples either
    /// side of `t`. Samples used up are let go. The first position made, and the values.
    fn resample(&mut self, origin: f64) -> Option<(i64, Vec<Option<f32>>)> {
        const EPS: f64 = 1e-6;
        let first_t = self.held.front()?.0;
        let last_t = self.held.back()?.0;
        let first = *self
            .next_out
            .get_or_insert_with(|| ((first_t - origin) / STEP_MS - EPS).ceil() as i64);
        let (p, mut k) = (self.period, first);
        let mut out = Vec::new();
        loop {
            let t = origin + k as f64 * STEP_MS;
            let value = if p < STEP_MS {
                // Every sample of [t, t + 4 ms) is here once the next would fall past it.
                if last_t + p < t + STEP_MS - EPS {
                    break;
                }
                let (sum, n) = self
                    .held
                    .iter()
                    .filter(|(at, _)| *at >= t - EPS && *at < t + STEP_MS - EPS)
                    .fold((0.0f32, 0usize), |(s, n), (_, x)| (s + x, n + 1));
                (n > 0).then(|| sum / n as f32)
            } else {
                if last_t < t - EPS {
                    break;
                }
                let after = self.held.iter().position(|(at, _)| *at >= t - EPS);
                match after.map(|i| (i, self.held[i])) {
                    Some((_, (at, x))) if (at - t).abs() <= EPS => Some(x),
                    Some((i, (at, x))) if i > 0 => {
                        let (a, y) = self.held[i - 1];
                        Some(y + (x - y) * ((t - a) / (at - a)) as f32)
                    }
                    _ => None,
                }
            };
            out.push(value.filter(|v| v.is_finite()));
            k += 1;
        }
        // Keep the last sample at or before the next position (the line starts there).
        let next_t = origin + k as f64 * STEP_MS;
        while self.held.len() > 1 && self.held[1].0 <= next_t + 1e-6 {
            self.held.pop_front();
        }
        if p < STEP_MS {
            while self.held.front().is_some_and(|(at, _)| *at < next_t - 1e-6) {
                self.held.pop_front();
            }
        }
        self.next_out = Some(k);
        (!out.is_empty()).then_some((first, out))
    }

    fn end(&self) -> i64 {
        self.at + self.pending.len() as i64
    }

    /// The grid's values over `[from, to)` (holes where the lead holds none), dropped from
    /// what is pending.
    fn take(&mut self, from: i64, to: i64) -> Vec<Option<f32>> {
        let out = (from..to)
            .map(|p| {
                let i = p - self.at;
                (0..self.pending.len() as i64)
                    .contains(&i)
                    .then(|| self.pending[i as usize])
                    .flatten()
            })
            .collect();
        let gone = ((to - self.at).max(0) as usize).min(self.pending.len());
        self.pending.drain(..gone);
        self.at = self.at.max(to);
        out
    }
}

/// A session's state between reports.
#[derive(Debug)]
pub(super) struct Feed {
    streams: Vec<Stream>,
    /// The device time (ms since the epoch) the session's times are counted from: its first
    /// report's. Held as an offset so that times keep their fraction of a ms.
    base: Option<i64>,
    /// The time of grid position 0 (the session's first sample), ms after `base`.
    origin: Option<f64>,
    /// The next grid position a frame starts at, and the frames' next sequence number.
    next: i64,
    seq: u64,
    vitals_seq: u64,
    /// The lead names of the announced slots (for alarms).
    names: [Option<String>; MAX_LEADS],
    /// Each vital's plausible range (`ingest.vital_ranges`): a value outside is absent.
    ranges: BTreeMap<String, [f64; 2]>,
}

/// An alert condition raised and not yet ended: handle, the alarm's id.
pub(super) type Open = Vec<(String, String)>;

impl Feed {
    pub(super) fn new(
        streams: Vec<Stream>,
        names: [Option<String>; MAX_LEADS],
        (seq, vitals_seq): (u64, u64),
        ranges: BTreeMap<String, [f64; 2]>,
    ) -> Feed {
        Feed {
            streams,
            base: None,
            origin: None,
            next: 0,
            seq,
            vitals_seq,
            names,
            ranges,
        }
    }

    /// `v` where it is finite and inside `name`'s plausible range, as the WebSocket ingest
    /// takes a vital; else absent (and counted).
    fn plausible(&self, name: &str, v: Option<f32>) -> Option<f32> {
        let v = v?;
        let ok = v.is_finite()
            && self
                .ranges
                .get(name)
                .is_none_or(|[lo, hi]| (*lo..=*hi).contains(&f64::from(v)));
        if !ok {
            metrics::counter!("holmes_sdc_vitals_implausible_total").increment(1);
        }
        ok.then_some(v)
    }

    /// The device time of the grid's next position (its "now"), ms.
    fn device_now(&self) -> Option<i64> {
        let (base, origin) = (self.base?, self.origin?);
        Some(base + (origin + self.next as f64 * STEP_MS).round() as i64)
    }

    /// What `report` becomes for the bed; `open`: the alarms raised and not ended.
    pub(super) fn commands(&mut self, report: Report, mdib: &Mdib, open: &mut Open) -> Vec<BedCmd> {
        let arrived = Instant::now();
        match report {
            Report::Waveform(parts) => {
                for (handle, t0, samples) in parts {
                    self.place(&handle, t0, &samples);
                }
                self.frames(arrived)
            }
            Report::Metrics(values) => {
                // One vitals frame a metric the bed takes, at the device's time for it.
                let mut out = Vec::new();
                for (handle, v, at) in values {
                    let Some((_, name)) = mdib.vitals.iter().find(|(h, _)| *h == handle) else {
                        continue;
                    };
                    let Some(t_ms) = at.or_else(|| self.device_now()) else {
                        continue;
                    };
                    self.vitals_seq += 1;
                    out.push(BedCmd::Vitals {
                        seq: self.vitals_seq - 1,
                        t_ms,
                        values: vec![((*name).into(), self.plausible(name, v))],
                        arrived,
                    });
                }
                out
            }
            Report::Alerts(changes) => self.alarms(changes, mdib, open, arrived),
            Report::End | Report::Other(_) => Vec::new(),
        }
    }

    /// Alarms and ends from alert conditions' presence (a report's, or a new session's MDIB).
    pub(super) fn alarms(
        &mut self,
        changes: Vec<(String, bool, Option<i64>)>,
        mdib: &Mdib,
        open: &mut Open,
        arrived: Instant,
    ) -> Vec<BedCmd> {
        let mut out = Vec::new();
        for (handle, present, when) in changes {
            let Some((_, code)) = mdib.alerts.iter().find(|a| a.0 == handle) else {
                continue;
            };
            let Some(t_ms) = when.or_else(|| self.device_now()) else {
                continue;
            };
            let was = open.iter().position(|o| o.0 == handle);
            match (present, was) {
                (true, None) => {
                    let id = format!("{handle}@{t_ms}");
                    open.push((handle, id.clone()));
                    let kind: MonitorAlarmKind = pcd04::kind_of(code, "", "");
                    out.push(BedCmd::MonitorAlarm(AlarmMsg {
                        id,
                        kind,
                        t_ms,
                        names: self.names.clone(),
                        arrived,
                        received_ms: crate::core::time::now_ms(),
                    }));
                }
                (false, Some(i)) => {
                    let (_, id) = open.remove(i);
                    out.push(BedCmd::MonitorAlarmEnd { id, t_ms });
                }
                _ => {}
            }
        }
        out
    }

    /// Brings a lead's report (its first sample at `t0`, ms since the epoch) to the grid.
    fn place(&mut self, handle: &str, t0: i64, samples: &[f32]) {
        let Some(i) = self.streams.iter().position(|s| s.handle == handle) else {
            return;
        };
        let base = *self.base.get_or_insert(t0);
        let t0 = (t0 - base) as f64;
        let s = &mut self.streams[i];
        let period = s.period;
        // A report that follows its lead's last goes on from where it was due (its time is
        // whole ms, rounded or stamped a little late: within 2 ms of it, or half a period);
        // one that does not starts the lead again at its own time (what was held is lost with
        // the gap).
        let start = match s.next_in {
            Some(due) if (t0 - due).abs() <= (period * 0.5).max(2.0) => due,
            _ => {
                s.held.clear();
                s.next_out = None;
                t0
            }
        };
        s.next_in = Some(start + samples.len() as f64 * period);
        s.held.extend(
            samples
                .iter()
                .enumerate()
                .map(|(i, x)| (start + i as f64 * period, *x)),
        );
        let origin = *self.origin.get_or_insert(start);
        let Some((p, out)) = s.resample(origin) else {
            return;
        };
        // The device's clock jumped ahead by more than a second: every lead starts again
        // there, and what was not sent is let go (a gap, not hours of holes to send).
        let top = self.streams.iter().map(Stream::end).max().unwrap_or(p);
        if p > top.max(self.next) + LAG {
            for s in &mut self.streams {
                s.pending.clear();
                s.at = p;
            }
        }
        let s = &mut self.streams[i];
        if s.pending.is_empty() {
            s.at = s.at.max(p);
        }
        let end = s.end();
        let skip = (end - p).max(0) as usize;
        if p > end {
            s.pending
                .extend(std::iter::repeat_n(None, (p - end) as usize));
        }
        s.pending.extend(out.into_iter().skip(skip));
    }

    /// Frames over the span every lead has reached (a lead [`LAG`] behind sent as holes).
    fn frames(&mut self, arrived: Instant) -> Vec<BedCmd> {
        let (Some(base), Some(origin), Some(top)) = (
            self.base,
            self.origin,
            self.streams.iter().map(Stream::end).max(),
        ) else {
            return Vec::new();
        };
        let reached = self.streams.iter().map(Stream::end).min().unwrap_or(top);
        let to = reached.max(top - LAG);
        // Nothing held for the next positions by any lead: a gap, not a clock jump.
        let first = self
            .streams
            .iter()
            .filter(|s| !s.pending.is_empty())
            .map(|s| s.at)
            .min()
            .unwrap_or(to);
        if first > self.next {
            self.next = first.min(to);
            self.seq += 1;
        }
        if to <= self.next {
            return Vec::new();
        }
        let (from, n) = (self.next, (to - self.next) as usize);
        let mut leads: Leads = Default::default();
        for s in &mut self.streams {
            leads[s.slot] = Some(s.take(from, to));
        }
        self.next = to;
        self.seq += 1;
        vec![BedCmd::Samples(SampleFrame {
            seq: self.seq - 1,
            t_ms: base + (origin + from as f64 * STEP_MS).round() as i64,
            n,
            leads,
            lead_off: [false; MAX_LEADS],
            arrived,
        })]
    }
}

#[cfg(test)]
#[path = "feed_tests.rs"]
mod tests;
