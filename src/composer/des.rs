//! The discrete-event latency estimator (InferLine's Estimator, Crankshaw et al. section 4.3):
//! the ward's windows arrive on their real schedule, each member of the ensemble has a queue
//! pulled by its workers in batches, and a window's latency runs from its arrival to the end of
//! the last member batch that held it. The simulation is exact for its model of the machine;
//! what it leaves out is listed below.
//!
//! [`compose`](super::compose) builds the [`Member`]s from stored profiles
//! ([`profile`](crate::serving::engine::profile)) and the engine's default plan ([`plan`](crate::serving::engine::plan))
//! and calls [`p95_ms`] as the latency profiler; [`netcalc`](super::netcalc) is the other, the
//! closed-form bound.
//!
//! # The model
//!
//! - Arrivals: bed `i` of `B` closes a window at `i * hop / B + k * hop` (the ward staggers
//!   the beds' phases evenly), for `k` below the hops simulated. Every member gets every
//!   window.
//! - Queues: one FIFO per member (the engine's earliest-deadline-first order is FIFO when every
//!   window has the same budget). An idle worker takes up to the batch cap of waiting windows
//!   at once and holds them for the batch's service time.
//! - Service: the batch-`b` time comes from the model's stored profile (see [`batch_curve`]).
//! - Contention, a processor-sharing approximation: the workers of all members run on `cores`
//!   cores; while `k` batches are in service, each progresses at `min(1, cores / k)` of its
//!   profiled speed. Profiles were measured one model at a time, so this treats a batch as
//!   needing one core; burn's intra-op threads (one rayon pool shared by every worker) and
//!   cache effects are not modelled.
//! - Left out: superseded and deadline-dropped windows (every window is served to the end),
//!   preprocessing, the accumulator and the SQLite commit (about 1 ms a window, which is all
//!   of the latency of an ensemble of vitals models).
//!
//! Against the measured engine on a 2-core machine shared with a training job, members did
//! not run in parallel (an ensemble's service time was about the sum of its members'), so
//! the two-core simulation was about half of it; `cores` 1 matches there. BENCHMARKS.md
//! ("Composer") has the numbers.

use std::collections::VecDeque;

use serde::Serialize;

/// One ensemble member as the simulation sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Member {
    /// Service time (ms) of a batch of `b` windows at index `b - 1`; the length is the batch
    /// cap. Never empty.
    pub(crate) batch_ms: Vec<f64>,
    /// Workers pulling from the member's queue.
    pub(crate) workers: usize,
}

/// The ward and machine simulated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct DesParams {
    pub(crate) beds: usize,
    pub(crate) hop_ms: f64,
    /// Hops simulated: each bed closes this many windows.
    pub(crate) hops: usize,
    /// Batches that run at full speed at once.
    pub(crate) cores: usize,
}

impl DesParams {
    /// `beds` beds with a hop of `hop_s` seconds, three hops, this machine's cores.
    pub(crate) fn new(beds: usize, hop_s: f64) -> DesParams {
        DesParams {
            beds,
            hop_ms: hop_s * 1000.0,
            hops: 3,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// Window arrival times (ms) of `beds` beds staggered evenly over `hop_ms`, for `hops` hops,
/// sorted.
pub(crate) fn staggered(beds: usize, hop_ms: f64, hops: usize) -> Vec<f64> {
    let mut t: Vec<f64> = (0..hops)
        .flat_map(|k| (0..beds).map(move |i| k as f64 * hop_ms + i as f64 * hop_ms / beds as f64))
        .collect();
    t.sort_by(f64::total_cmp);
    t
}

/// Batch service times (ms) for batch sizes 1 to `cap` from a profile's measured points
/// `(batch, ms)`: linear between measured sizes; beyond the largest, the fitted curve's
/// increase (`fitted(b)`, the profile's quadratic) when two or more sizes were measured, else
/// `b` times the batch-1 time (no batching gain assumed). Never decreasing in `b`.
pub(crate) fn batch_curve(
    points: &[(usize, f64)],
    fitted: impl Fn(usize) -> f64,
    cap: usize,
) -> Vec<f64> {
    let mut p: Vec<(usize, f64)> = points.iter().copied().filter(|x| x.0 >= 1).collect();
    p.sort_by_key(|x| x.0);
    let Some(&(first_b, first_ms)) = p.first() else {
        return vec![0.0; cap.max(1)];
    };
    let (last_b, last_ms) = *p.last().expect("not empty");
    let mut out: Vec<f64> = (1..=cap.max(1))
        .map(|b| {
            if b <= first_b {
                first_ms * b as f64 / first_b as f64
            } else if b <= last_b {
                let j = p.iter().position(|x| x.0 >= b).expect("b within range");
                let ((b0, y0), (b1, y1)) = (p[j - 1], p[j]);
                y0 + (y1 - y0) * (b - b0) as f64 / (b1 - b0) as f64
            } else if p.len() >= 2 {
                last_ms + (fitted(b) - fitted(last_b)).max(0.0)
            } else {
                last_ms * b as f64 / last_b as f64
            }
        })
        .collect();
    for i in 1..out.len() {
        out[i] = out[i].max(out[i - 1]);
    }
    out
}

/// A batch in service.
struct Job {
    member: usize,
    windows: Vec<usize>,
    /// Work left, in ms at full speed.
    left_ms: f64,
}

/// End-to-end latency (ms) of each window of `arrivals` (ms, any order; the result is in the
/// same order): from its arrival to the end of its last member's batch.
pub(crate) fn simulate(members: &[Member], arrivals: &[f64], cores: usize) -> Vec<f64> {
    let n = arrivals.len();
    if members.is_empty() {
        return vec![0.0; n];
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| arrivals[a].total_cmp(&arrivals[b]));
    let mut queues: Vec<VecDeque<usize>> = vec![VecDeque::new(); members.len()];
    let mut idle: Vec<usize> = members.iter().map(|m| m.workers.max(1)).collect();
    let mut pending = vec![members.len(); n];
    let mut finished = vec![f64::NAN; n];
    let mut jobs: Vec<Job> = Vec::new();
    let (mut t, mut next) = (f64::NEG_INFINITY, 0usize);
    let cores = cores.max(1) as f64;
    loop {
        // Idle workers take what is waiting.
        for (m, member) in members.iter().enumerate() {
            while idle[m] > 0 && !queues[m].is_empty() {
                let k = queues[m].len().min(member.batch_ms.len());
                let windows: Vec<usize> = queues[m].drain(..k).collect();
                jobs.push(Job {
                    member: m,
                    windows,
                    left_ms: member.batch_ms[k - 1],
                });
                idle[m] -= 1;
            }
        }
        if jobs.is_empty() && next == n {
            break;
        }
        let rate = (cores / jobs.len() as f64).min(1.0);
        let t_done = jobs
            .iter()
            .map(|j| t + j.left_ms / rate)
            .fold(f64::INFINITY, f64::min);
        let t_arrive = order.get(next).map_or(f64::INFINITY, |&w| arrivals[w]);
        let now = t_done.min(t_arrive);
        if t.is_finite() {
            for j in &mut jobs {
                j.left_ms -= (now - t) * rate;
            }
        }
        t = now;
        // Batches that are done release their windows and workers.
        let mut i = 0;
        while i < jobs.len() {
            if jobs[i].left_ms <= 1e-9 * (1.0 + t.abs()) {
                let j = jobs.swap_remove(i);
                idle[j.member] += 1;
                for w in j.windows {
                    pending[w] -= 1;
                    if pending[w] == 0 {
                        finished[w] = t;
                    }
                }
            } else {
                i += 1;
            }
        }
        // Windows arriving now join every member's queue.
        while let Some(&w) = order.get(next) {
            if arrivals[w] > t {
                break;
            }
            for q in &mut queues {
                q.push_back(w);
            }
            next += 1;
        }
    }
    finished.iter().zip(arrivals).map(|(f, a)| f - a).collect()
}

/// The 95th percentile (nearest rank) of the windows' end-to-end latency (ms) for `members`
/// serving the staggered ward of `p`.
pub(crate) fn p95_ms(members: &[Member], p: &DesParams) -> f64 {
    let mut l = simulate(members, &staggered(p.beds, p.hop_ms, p.hops), p.cores);
    if l.is_empty() {
        return 0.0;
    }
    l.sort_by(f64::total_cmp);
    crate::core::stats::percentile(&l, 0.95)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(batch_ms: &[f64], workers: usize) -> Member {
        Member {
            batch_ms: batch_ms.to_vec(),
            workers,
        }
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn one_model_one_worker_queues_first_come_first_served() {
        // 10 ms per window; windows at 0, 5 and 30 ms: the second waits 5 ms for the first.
        let m = [member(&[10.0], 1)];
        let l = simulate(&m, &[0.0, 5.0, 30.0], 4);
        assert!(close(&l, &[10.0, 15.0, 10.0]), "{l:?}");
        // Three at once: 10, 20, 30. Given out of order, reported in the input's order.
        let l = simulate(&m, &[0.0, 0.0, 0.0], 1);
        assert!(close(&l, &[10.0, 20.0, 30.0]), "{l:?}");
        let l = simulate(&m, &[7.0, 0.0], 1);
        assert!(close(&l, &[13.0, 10.0]), "{l:?}");
        // Two workers serve two at once.
        let l = simulate(&[member(&[10.0], 2)], &[0.0, 0.0, 0.0], 2);
        assert!(close(&l, &[10.0, 10.0, 20.0]), "{l:?}");
    }

    #[test]
    fn windows_that_coincide_are_batched() {
        // Batch b costs 10 + 5 b ms. Four at once with a cap of 4: one batch of 30 ms.
        let curve = [15.0, 20.0, 25.0, 30.0];
        let l = simulate(&[member(&curve, 1)], &[0.0; 4], 1);
        assert!(close(&l, &[30.0; 4]), "{l:?}");
        // Cap 2: two batches of 20 ms.
        let l = simulate(&[member(&curve[..2], 1)], &[0.0; 4], 1);
        assert!(close(&l, &[20.0, 20.0, 40.0, 40.0]), "{l:?}");
        // A window arriving while the worker is busy waits, then goes with the next ones.
        let l = simulate(&[member(&curve, 1)], &[0.0, 1.0, 2.0, 3.0], 1);
        // First alone (0-15), then the three waiting as one batch (15-40).
        assert!(close(&l, &[15.0, 39.0, 38.0, 37.0]), "{l:?}");
    }

    #[test]
    fn members_share_the_cores_and_a_window_waits_for_its_last_member() {
        let m = [member(&[10.0], 1), member(&[30.0], 1)];
        // Enough cores: the slower member decides.
        assert!(close(&simulate(&m, &[0.0], 2), &[30.0]));
        // One core: both at half speed until the first finishes at 20 ms, then the other
        // alone with 20 ms of work left: 40 ms, the sum of the work.
        assert!(close(&simulate(&m, &[0.0], 1), &[40.0]));
        // Three members of 10 ms on two cores: each at 2/3 speed, all done at 15 ms.
        let m = [member(&[10.0], 1), member(&[10.0], 1), member(&[10.0], 1)];
        assert!(close(&simulate(&m, &[0.0], 2), &[15.0]));
        assert!(close(&simulate(&[], &[0.0, 1.0], 2), &[0.0, 0.0]));
    }

    #[test]
    fn a_staggered_ward_with_room_has_no_queueing_and_an_overloaded_one_grows() {
        // 64 beds over 30 s: a window every 469 ms; a 100 ms ensemble never queues.
        let p = DesParams {
            beds: 64,
            hop_ms: 30_000.0,
            hops: 3,
            cores: 1,
        };
        assert_eq!(
            staggered(4, 1000.0, 2),
            vec![0.0, 250.0, 500.0, 750.0, 1000.0, 1250.0, 1500.0, 1750.0]
        );
        assert!((p95_ms(&[member(&[100.0], 1)], &p) - 100.0).abs() < 1e-6);
        // 600 ms per window and no batching gain: the queue grows every window.
        let slow = p95_ms(&[member(&[600.0, 1200.0], 1)], &p);
        assert!(slow > 10_000.0, "{slow}");
    }

    #[test]
    fn batch_curves_interpolate_and_extrapolate() {
        let none = |_: usize| 0.0;
        // One measured size: linear in the batch.
        assert_eq!(batch_curve(&[(1, 2.0)], none, 3), vec![2.0, 4.0, 6.0]);
        // Measured 1, 2 and 4: interpolated at 3, the fitted curve's rise beyond 4.
        let fit = |b: usize| b as f64;
        let c = batch_curve(&[(4, 7.0), (1, 2.0), (2, 3.0)], fit, 6);
        assert_eq!(c, vec![2.0, 3.0, 5.0, 7.0, 8.0, 9.0]);
        // Noise never makes a bigger batch cheaper.
        assert_eq!(batch_curve(&[(1, 3.0), (2, 2.0)], none, 2), vec![3.0, 3.0]);
    }
}
