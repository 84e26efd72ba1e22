//! The profilers as a search sees them: an ensemble in, its accuracy and latency out, each
//! new ensemble counted (a profiler call is the search budget's unit), cached and recorded in
//! call order. Also the [`Goal`] a search optimises, which with the lead coverage the
//! [`Profiler`] may be given decides feasibility and the best: every search reads
//! feasibility here.
//!
//! [`search`](super::search) drives a [`Profiler`]; [`compose`](super::compose) builds one from
//! the validation predictions and a latency estimator; [`report`](super::report) reads its
//! [`trajectory`](Profiler::trajectory).

use std::cmp::Ordering;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::zoo::LeadSets;

/// An ensemble: one bit per zoo model.
pub(crate) type Bits = Vec<bool>;

/// A profiler: an ensemble in, a number out.
pub(crate) type ProfileFn<'a> = Box<dyn FnMut(&[bool]) -> f64 + 'a>;

/// Told of each new profile: `(calls so far, accuracy, latency)`.
pub(crate) type CallHook<'a> = Box<dyn FnMut(usize, f64, f64) + 'a>;

/// What a search optimises over ensembles `b` (accuracy `f_a(b)`, latency `f_l(b)` in ms).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Goal {
    /// Highest accuracy with latency at most `budget_ms` (HOLMES eq. 1).
    MaxAccuracy { budget_ms: f64 },
    /// Lowest latency with accuracy at least `min_accuracy` (HOLMES appendix A.6).
    MinLatency { min_accuracy: f64 },
}

impl From<f64> for Goal {
    /// A bare number is a latency budget in ms.
    fn from(budget_ms: f64) -> Goal {
        Goal::MaxAccuracy { budget_ms }
    }
}

impl Goal {
    /// Whether an ensemble with this accuracy and latency meets the constraint.
    pub(crate) fn feasible(&self, accuracy: f64, latency: f64) -> bool {
        match *self {
            Goal::MaxAccuracy { budget_ms } => latency <= budget_ms,
            Goal::MinLatency { min_accuracy } => accuracy >= min_accuracy,
        }
    }

    /// Orders two feasible `(accuracy, latency)` results, `Greater` for the better: accuracy
    /// first (then the faster), or latency first (then the more accurate).
    pub(crate) fn compare(&self, a: (f64, f64), b: (f64, f64)) -> Ordering {
        match self {
            Goal::MaxAccuracy { .. } => a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)),
            Goal::MinLatency { .. } => b.1.total_cmp(&a.1).then(a.0.total_cmp(&b.0)),
        }
    }

    /// The optimised quantity of a result: accuracy, or latency in ms.
    pub(crate) fn objective(&self, accuracy: f64, latency: f64) -> f64 {
        match self {
            Goal::MaxAccuracy { .. } => accuracy,
            Goal::MinLatency { .. } => latency,
        }
    }
}

impl std::fmt::Display for Goal {
    /// `120.0 ms` (a budget) or `AUC >= 0.95` (a floor).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Goal::MaxAccuracy { budget_ms } => write!(f, "{budget_ms:.1} ms"),
            Goal::MinLatency { min_accuracy } => write!(f, "AUC >= {min_accuracy}"),
        }
    }
}

/// Splits `order` into the models that each cover a lead set the ones before them do not
/// (`leads[i]` is what model `i` scores) and the rest, both in `order`'s order. The first part
/// covers everything the models of `order` cover.
pub(crate) fn split_covering(leads: &[LeadSets], order: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut covered = LeadSets::default();
    order.iter().copied().partition(|&i| {
        let with: LeadSets = [covered, leads[i]].into_iter().collect();
        let adds = with != covered;
        covered = with;
        adds
    })
}

/// One profiler call of a search, as the report shows it (HOLMES figures 6 and 11).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Step {
    /// 1 for the first call.
    pub(crate) call: usize,
    /// The ensemble, one character per zoo model in zoo order: `1` a member, `0` not.
    pub(crate) members: String,
    pub(crate) accuracy: f64,
    /// `null` in JSON when unbounded (the beds outrun the service).
    pub(crate) latency_ms: f64,
    /// Whether it covers every lead set the zoo covers (see [`Profiler::covering`]).
    pub(crate) covers_leads: bool,
    /// Whether it meets the goal's constraint and covers the lead sets.
    pub(crate) feasible: bool,
    /// Accuracy and latency of the best feasible ensemble profiled up to this call.
    pub(crate) best_accuracy: Option<f64>,
    pub(crate) best_latency_ms: Option<f64>,
}

/// The two profilers with call counting and caching (a profiler call is the budget unit),
/// and the lead-coverage constraint when one is set.
pub(crate) struct Profiler<'a> {
    pub(crate) accuracy: ProfileFn<'a>,
    pub(crate) latency: ProfileFn<'a>,
    cache: HashMap<Bits, (f64, f64)>,
    /// Every ensemble profiled, in order.
    pub(crate) profiled: Vec<(Bits, f64, f64)>,
    on_call: Option<CallHook<'a>>,
    /// Per model, the lead sets it scores (empty: no constraint).
    leads: Vec<LeadSets>,
    /// What a feasible ensemble must cover: everything the zoo covers.
    required: LeadSets,
}

impl<'a> Profiler<'a> {
    pub(crate) fn new(
        accuracy: impl FnMut(&[bool]) -> f64 + 'a,
        latency: impl FnMut(&[bool]) -> f64 + 'a,
    ) -> Self {
        Profiler {
            accuracy: Box::new(accuracy),
            latency: Box::new(latency),
            cache: HashMap::new(),
            profiled: Vec::new(),
            on_call: None,
            leads: Vec::new(),
            required: LeadSets::default(),
        }
    }

    /// Makes lead coverage a hard constraint: `leads[i]` is what model `i` scores, and an
    /// ensemble is feasible only if it covers every lead set the whole zoo covers (all three
    /// when the zoo has a primary-lead and a secondary-lead model). A zoo that cannot cover a
    /// lead set at all is not held to it, so composing still works.
    pub(crate) fn covering(mut self, leads: Vec<LeadSets>) -> Self {
        self.required = leads.iter().copied().collect();
        self.leads = leads;
        self
    }

    /// Whether ensemble `b` covers the lead sets required (always, without a constraint).
    pub(crate) fn covers(&self, b: &[bool]) -> bool {
        let have: LeadSets = self
            .leads
            .iter()
            .zip(b)
            .filter(|x| *x.1)
            .map(|x| *x.0)
            .collect();
        have.covers(self.required)
    }

    /// Whether ensemble `b` with this accuracy and latency meets the goal and covers the lead
    /// sets: the feasibility every search reads.
    pub(crate) fn feasible(&self, goal: Goal, b: &[bool], accuracy: f64, latency: f64) -> bool {
        goal.feasible(accuracy, latency) && self.covers(b)
    }

    /// `order` with, first, each model that covers a lead set the ones before it do not (in
    /// `order`'s order), then the rest: a greedy search adding models in this order covers the
    /// required lead sets as early as it can. Unchanged without a constraint.
    pub(crate) fn coverage_first(&self, order: &[usize]) -> Vec<usize> {
        if self.leads.is_empty() {
            return order.to_vec();
        }
        let (mut first, rest) = split_covering(&self.leads, order);
        first.extend(rest);
        first
    }

    /// Calls `f(calls, accuracy, latency)` after each new profile (a progress bar).
    pub(crate) fn on_call(mut self, f: impl FnMut(usize, f64, f64) + 'a) -> Self {
        self.on_call = Some(Box::new(f));
        self
    }

    /// `(accuracy, latency)` of `b`, profiling it on first sight.
    pub(crate) fn profile(&mut self, b: &[bool]) -> (f64, f64) {
        if let Some(&r) = self.cache.get(b) {
            return r;
        }
        let r = ((self.accuracy)(b), (self.latency)(b));
        self.cache.insert(b.to_vec(), r);
        self.profiled.push((b.to_vec(), r.0, r.1));
        if let Some(f) = self.on_call.as_mut() {
            f(self.profiled.len(), r.0, r.1);
        }
        r
    }

    pub(crate) fn calls(&self) -> usize {
        self.profiled.len()
    }

    /// The best feasible ensemble profiled so far.
    pub(crate) fn best(&self, goal: impl Into<Goal>) -> Option<(Bits, f64, f64)> {
        let goal = goal.into();
        self.profiled
            .iter()
            .filter(|(b, a, l)| self.feasible(goal, b, *a, *l))
            .max_by(|a, b| goal.compare((a.1, a.2), (b.1, b.2)))
            .cloned()
    }

    /// Every call so far in order, with feasibility and the best feasible result up to it.
    pub(crate) fn trajectory(&self, goal: impl Into<Goal>) -> Vec<Step> {
        let goal = goal.into();
        let mut best: Option<(f64, f64)> = None;
        self.profiled
            .iter()
            .enumerate()
            .map(|(i, (b, a, l))| {
                let covers_leads = self.covers(b);
                let feasible = covers_leads && goal.feasible(*a, *l);
                if feasible && best.is_none_or(|x| goal.compare((*a, *l), x) == Ordering::Greater) {
                    best = Some((*a, *l));
                }
                Step {
                    call: i + 1,
                    members: b.iter().map(|&x| if x { '1' } else { '0' }).collect(),
                    accuracy: *a,
                    latency_ms: *l,
                    covers_leads,
                    feasible,
                    best_accuracy: best.map(|x| x.0),
                    best_latency_ms: best.map(|x| x.1),
                }
            })
            .collect()
    }
}
