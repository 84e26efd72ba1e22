//! `holmes bench --monitor-alarms`: Holmes's opinion on the monitors' VT/VF alarms under the
//! load. The simulated monitors send the proxy monitor's alarms with their records
//! ([`sim::alarms`](crate::tools::sim::alarms)); after the run this reads the rows the daemon
//! stored in `monitor_alarms` (its SQLite file, read-only, as the window outcomes are read):
//! how many arrived, how many got an opinion, why the others did not (their provenance's
//! `not_judged`), and the time from an alarm's arrival to its opinion (`judged_ms -
//! received_ms`, both the daemon's wall clock).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::core::stats::percentile;

/// The opinion on a VT/VF alarm is due this long after the alarm message arrives, ms (issue
/// 66's target, at the planned beds with the served ensemble).
pub(crate) const OPINION_BUDGET_MS: f64 = 2_000.0;

/// The monitors' VT/VF alarms of a run and Holmes's opinions on them.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OpinionFigures {
    /// `alarm` messages the monitors sent, and VT/VF alarms the daemon stored.
    pub(crate) sent: u64,
    pub(crate) stored: usize,
    /// Stored with an opinion, and without one; the latter by the reason their provenance
    /// gives.
    pub(crate) judged: usize,
    pub(crate) unjudged: usize,
    pub(crate) unjudged_why: BTreeMap<String, usize>,
    /// Arrival to opinion of the judged alarms, ms (NaN when none was judged).
    pub(crate) latency_ms_p50: f64,
    pub(crate) latency_ms_p95: f64,
    pub(crate) latency_ms_max: f64,
    /// Every alarm sent was stored and judged, the p95 within [`OPINION_BUDGET_MS`].
    pub(crate) within_budget: bool,
}

impl OpinionFigures {
    /// The figures of the VT/VF alarms stored in `db`, of `sent` sent.
    pub(crate) fn read(db: &Path, sent: u64) -> rusqlite::Result<OpinionFigures> {
        let c = crate::serving::store::open_read_only(db)?;
        let mut st = c.prepare(
            "SELECT confirmed IS NOT NULL, judged_ms - received_ms,
                    json_extract(provenance, '$.not_judged')
             FROM monitor_alarms WHERE kind IN ('vt', 'vf')",
        )?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, bool>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, Option<String>>(2)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(OpinionFigures::of(sent, &rows))
    }

    /// The figures of `rows`: whether each was judged, its arrival to opinion (ms), and why
    /// it was not judged.
    fn of(sent: u64, rows: &[(bool, Option<i64>, Option<String>)]) -> OpinionFigures {
        let mut lat: Vec<f64> = rows
            .iter()
            .filter(|r| r.0)
            .filter_map(|r| r.1.map(|ms| ms as f64))
            .collect();
        lat.sort_by(f64::total_cmp);
        let mut unjudged_why = BTreeMap::new();
        for (_, _, why) in rows.iter().filter(|r| !r.0) {
            let why = why.clone().unwrap_or_else(|| "not said".into());
            *unjudged_why.entry(why).or_insert(0) += 1;
        }
        let judged = rows.iter().filter(|r| r.0).count();
        let p95 = percentile(&lat, 0.95);
        OpinionFigures {
            sent,
            stored: rows.len(),
            judged,
            unjudged: rows.len() - judged,
            unjudged_why,
            latency_ms_p50: percentile(&lat, 0.5),
            latency_ms_p95: p95,
            latency_ms_max: lat.last().copied().unwrap_or(f64::NAN),
            within_budget: rows.len() as u64 == sent
                && judged == rows.len()
                && (judged == 0 || p95 <= OPINION_BUDGET_MS),
        }
    }

    pub(crate) fn to_text(&self) -> String {
        let why = if self.unjudged_why.is_empty() {
            String::new()
        } else {
            let each: Vec<String> = self
                .unjudged_why
                .iter()
                .map(|(w, n)| format!("{n} {w}"))
                .collect();
            format!(" ({})", each.join(", "))
        };
        format!(
            "monitor VT/VF alarms: {sent} sent, {stored} stored, {judged} judged, {unjudged} without an opinion{why}; \
             alarm to opinion p50 {p50:.1} / p95 {p95:.1} / max {max:.1} ms (budget {budget:.0} ms)",
            sent = self.sent,
            stored = self.stored,
            judged = self.judged,
            unjudged = self.unjudged,
            p50 = self.latency_ms_p50,
            p95 = self.latency_ms_p95,
            max = self.latency_ms_max,
            budget = OPINION_BUDGET_MS,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judged_alarms_give_the_latency_and_the_others_their_reasons() {
        let overloaded = Some("not judged: the adjudicator was overloaded".to_owned());
        let rows = vec![
            (true, Some(40), None),
            (true, Some(10), None),
            (true, Some(3_000), None),
            (false, Some(1), overloaded.clone()),
            (false, None, None),
        ];
        let f = OpinionFigures::of(6, &rows);
        assert_eq!((f.stored, f.judged, f.unjudged), (5, 3, 2));
        assert_eq!(f.unjudged_why[overloaded.as_deref().unwrap()], 1);
        assert_eq!(f.unjudged_why["not said"], 1);
        assert_eq!((f.latency_ms_p50, f.latency_ms_max), (40.0, 3_000.0));
        assert!(!f.within_budget);
        assert!(
            f.to_text()
                .contains("1 not judged: the adjudicator was overloaded")
        );

        let fine = OpinionFigures::of(2, &rows[..2]);
        assert!(fine.within_budget, "{fine:?}");
        assert!(fine.latency_ms_p95 <= 40.0);
        let lost = OpinionFigures::of(3, &rows[..2]);
        assert!(!lost.within_budget, "one sent was not stored");
    }
}
