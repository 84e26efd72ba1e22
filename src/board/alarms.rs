//! Alarms: a risk alarm per bed raised and cleared by the alarm rule serving now
//! ([`crate::alarm::AlarmState`], one per bed, fed each committed window at its end on the
//! bed's timeline; the rule from the served plan, [`rule`](crate::composer::rule)), kept apart from technical alarms (lead
//! off, stale, lost). Nurses acknowledge or silence them for a while (both recorded with who
//! and when); an alarm clears itself when its condition resolves. [`Alarms`] is the pure state
//! machine the [`board`](super) drives; [`AlarmDb`] persists every transition for the
//! per-bed history.
//!
//! When the served rule changes (another ensemble serves), an active risk alarm stays active
//! and clears under the new rule ([`AlarmState::carried`]); the other beds start a fresh count,
//! since scores of the old ensemble are no evidence under the new ensemble's rule. A new
//! ensemble served with the same rule changes nothing.

use std::collections::HashMap;
use std::path::PathBuf;

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::alarm::{AlarmChange, AlarmState};
use crate::composer::rule::ServedRule;
use crate::serving::store::Db;
use crate::serving::ward::BedStatus;

#[derive(Debug, thiserror::Error)]
pub(crate) enum AlarmError {
    #[error("no active alarm {0}")]
    Unknown(i64),
    #[error("silence for 1 to {max} seconds, not {asked}")]
    BadSilence { asked: u64, max: u64 },
    #[error(transparent)]
    Store(#[from] crate::serving::store::StoreError),
    /// The action took effect on the ward but its row or audit entry could not be written
    /// (e.g. the disk is full); the user is told, the action stands.
    #[error("alarm {alarm} changed on the ward but the change could not be recorded: {reason}")]
    NotRecorded { alarm: i64, reason: String },
    #[error("alarm database {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

/// What an alarm is about. `Risk` is the clinical (decision-support) alarm; the rest are
/// technical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AlarmKind {
    Risk,
    LeadOff,
    Stale,
    Lost,
}

impl AlarmKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AlarmKind::Risk => "risk",
            AlarmKind::LeadOff => "lead_off",
            AlarmKind::Stale => "stale",
            AlarmKind::Lost => "lost",
        }
    }

    pub(crate) fn technical(self) -> bool {
        self != AlarmKind::Risk
    }
}

/// One alarm, active or (once `cleared_ms` is set) resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Alarm {
    pub(crate) id: i64,
    pub(crate) bed: String,
    pub(crate) kind: AlarmKind,
    pub(crate) technical: bool,
    /// When the ward raised it (the server's clock, ms since the epoch).
    pub(crate) raised_ms: i64,
    /// Risk alarms: the end of the window at which the rule was met, on the bed's timeline
    /// (the monitor's clock, as the ECG strip's `end_ms`); `None` for technical alarms.
    pub(crate) onset_ms: Option<i64>,
    /// Risk alarms raised on a VT run the beat counter found: the run's first beat, on the
    /// bed's timeline (where the rhythm began, up to a window before `onset_ms`).
    pub(crate) run_onset_ms: Option<i64>,
    /// The score (risk) or lead-off fraction (lead off) that raised it.
    pub(crate) value: Option<f64>,
    /// Risk alarms: the rule that raised it (thresholds, persistence, validated or the
    /// fallback); `None` for technical alarms.
    pub(crate) rule: Option<ServedRule>,
    pub(crate) acked_by: Option<String>,
    pub(crate) acked_ms: Option<i64>,
    pub(crate) silenced_by: Option<String>,
    pub(crate) silenced_ms: Option<i64>,
    pub(crate) silenced_until_ms: Option<i64>,
    pub(crate) cleared_ms: Option<i64>,
}

/// One alarm as a bed's history lists it (`GET /api/beds/{bed}/alarms`), read back from the
/// `alarms` table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AlarmRow {
    id: i64,
    kind: String,
    raised_ms: i64,
    /// Risk alarms: the onset on the bed's timeline (see [`Alarm::onset_ms`]).
    onset_ms: Option<i64>,
    /// Risk alarms raised on a counted VT run: its first beat ([`Alarm::run_onset_ms`]).
    run_onset_ms: Option<i64>,
    /// Risk alarms: the rule that raised it, as [`Alarm::rule`].
    rule: Option<serde_json::Value>,
    value: Option<f64>,
    cleared_ms: Option<i64>,
    acked_by: Option<String>,
    acked_ms: Option<i64>,
    silenced_by: Option<String>,
    silenced_ms: Option<i64>,
    silenced_until_ms: Option<i64>,
}

/// A change to persist and show.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Transition {
    Raised(Alarm),
    Changed(Alarm),
}

/// Thresholds of the technical alarms and the longest silence (the risk alarm's rule is a
/// [`ServedRule`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Thresholds {
    pub(crate) lead_off: f64,
    pub(crate) max_silence_secs: u64,
}

/// The active alarms of the ward.
#[derive(Debug)]
pub(crate) struct Alarms {
    t: Thresholds,
    rule: ServedRule,
    /// Each bed's risk alarm rule state, made at the bed's first window.
    risk: HashMap<String, AlarmState>,
    next_id: i64,
    active: HashMap<(String, AlarmKind), Alarm>,
}

impl Alarms {
    /// `last_id`: the highest alarm id already stored.
    pub(crate) fn new(t: Thresholds, rule: ServedRule, last_id: i64) -> Alarms {
        Alarms {
            t,
            rule,
            risk: HashMap::new(),
            next_id: last_id + 1,
            active: HashMap::new(),
        }
    }

    /// The risk alarm rule serving now.
    pub(crate) fn rule(&self) -> ServedRule {
        self.rule
    }

    /// Serves `rule` from now on; `false` when it is the rule already serving (nothing
    /// changes). See the module's doc for what happens to the beds' alarms.
    pub(crate) fn set_rule(&mut self, rule: ServedRule) -> bool {
        if rule == self.rule {
            return false;
        }
        self.rule = rule;
        let carried: Vec<(String, i64)> = self
            .active
            .values()
            .filter(|a| a.kind == AlarmKind::Risk)
            .map(|a| (a.bed.clone(), a.onset_ms.unwrap_or(i64::MIN)))
            .collect();
        self.risk.clear();
        for (bed, onset) in carried {
            let s = AlarmState::carried(rule.rule, rule.hop_ms(), onset)
                .expect("a served rule is validated");
            self.risk.insert(bed, s);
        }
        true
    }

    /// Active alarms, risk first, then oldest first.
    pub(crate) fn active(&self) -> Vec<Alarm> {
        let mut v: Vec<Alarm> = self.active.values().cloned().collect();
        v.sort_by_key(|a| (a.technical, a.raised_ms, a.id));
        v
    }

    /// Raises (`on`) or clears alarm `kind` of `bed`; a raised risk alarm carries its `onset`:
    /// the window end at which the rule was met, and the counted VT run's first beat when the
    /// beat counter raised it.
    fn set(
        &mut self,
        bed: &str,
        kind: AlarmKind,
        on: bool,
        value: Option<f64>,
        onset: Option<(i64, Option<i64>)>,
        now: i64,
    ) -> Option<Transition> {
        let key = (bed.to_owned(), kind);
        match (on, self.active.contains_key(&key)) {
            (true, false) => {
                let a = Alarm {
                    id: self.next_id,
                    bed: bed.to_owned(),
                    kind,
                    technical: kind.technical(),
                    raised_ms: now,
                    onset_ms: onset.map(|(window, _)| window),
                    run_onset_ms: onset.and_then(|(_, run)| run),
                    value,
                    rule: (kind == AlarmKind::Risk).then_some(self.rule),
                    acked_by: None,
                    acked_ms: None,
                    silenced_by: None,
                    silenced_ms: None,
                    silenced_until_ms: None,
                    cleared_ms: None,
                };
                self.next_id += 1;
                self.active.insert(key, a.clone());
                Some(Transition::Raised(a))
            }
            (false, true) => {
                let mut a = self.active.remove(&key).expect("present");
                a.cleared_ms = Some(now);
                Some(Transition::Changed(a))
            }
            _ => None,
        }
    }

    /// A bed's committed window ending at `end_ms` (the bed's timeline) with its score
    /// (`None`: not scored, e.g. insufficient signal or partial without a score), where the
    /// beat counter raised that score the first beat of its VT run, and the primary lead's
    /// lead-off fraction in that window.
    pub(crate) fn on_score(
        &mut self,
        bed: &str,
        end_ms: i64,
        score: Option<f32>,
        run_onset_ms: Option<i64>,
        lead_off: Option<f64>,
        now: i64,
    ) -> Vec<Transition> {
        let mut out = Vec::new();
        let rule = self.rule;
        let state = self.risk.entry(bed.to_owned()).or_insert_with(|| {
            AlarmState::new(rule.rule, rule.hop_ms()).expect("a served rule is validated")
        });
        match state.observe(end_ms, score) {
            Some(AlarmChange::Raised { onset_ms }) => {
                let value = score.map(f64::from);
                let onset = Some((onset_ms, run_onset_ms));
                out.extend(self.set(bed, AlarmKind::Risk, true, value, onset, now));
            }
            Some(AlarmChange::Cleared { .. }) => {
                out.extend(self.set(bed, AlarmKind::Risk, false, None, None, now));
            }
            None => {}
        }
        if let Some(f) = lead_off {
            let on = f > self.t.lead_off;
            out.extend(self.set(bed, AlarmKind::LeadOff, on, Some(f), None, now));
        }
        out
    }

    /// The active risk alarm of `bed`, if any.
    pub(crate) fn risk_of(&self, bed: &str) -> Option<&Alarm> {
        self.active.get(&(bed.to_owned(), AlarmKind::Risk))
    }

    /// A bed's data status: stale and lost are technical alarms (lost replaces stale).
    pub(crate) fn on_status(&mut self, bed: &str, status: BedStatus, now: i64) -> Vec<Transition> {
        let (stale, lost) = match status {
            BedStatus::Live => (false, false),
            BedStatus::Stale => (true, false),
            BedStatus::Lost => (false, true),
        };
        let mut out = Vec::new();
        out.extend(self.set(bed, AlarmKind::Stale, stale, None, None, now));
        out.extend(self.set(bed, AlarmKind::Lost, lost, None, None, now));
        out
    }

    fn find(&mut self, id: i64) -> Result<&mut Alarm, AlarmError> {
        self.active
            .values_mut()
            .find(|a| a.id == id)
            .ok_or(AlarmError::Unknown(id))
    }

    pub(crate) fn acknowledge(
        &mut self,
        id: i64,
        user: &str,
        now: i64,
    ) -> Result<Transition, AlarmError> {
        let a = self.find(id)?;
        a.acked_by = Some(user.to_owned());
        a.acked_ms = Some(now);
        Ok(Transition::Changed(a.clone()))
    }

    pub(crate) fn silence(
        &mut self,
        id: i64,
        user: &str,
        secs: u64,
        now: i64,
    ) -> Result<Transition, AlarmError> {
        let max = self.t.max_silence_secs;
        if secs == 0 || secs > max {
            return Err(AlarmError::BadSilence { asked: secs, max });
        }
        let a = self.find(id)?;
        a.silenced_by = Some(user.to_owned());
        a.silenced_ms = Some(now);
        a.silenced_until_ms = Some(now + secs as i64 * 1000);
        Ok(Transition::Changed(a.clone()))
    }

    /// Silences that ran out end (the alarm sounds again).
    pub(crate) fn expire(&mut self, now: i64) -> Vec<Transition> {
        let mut out = Vec::new();
        for a in self.active.values_mut() {
            if a.silenced_until_ms.is_some_and(|u| u <= now) {
                a.silenced_until_ms = None;
                out.push(Transition::Changed(a.clone()));
            }
        }
        out
    }
}

/// The `alarms` table.
pub(crate) struct AlarmDb {
    db: Db,
}

impl AlarmDb {
    /// The table in the ward's database `db`.
    pub(crate) fn new(db: Db) -> AlarmDb {
        AlarmDb { db }
    }

    fn err(&self, source: rusqlite::Error) -> AlarmError {
        AlarmError::Sqlite {
            path: self.db.path().to_owned(),
            source,
        }
    }

    /// The highest stored alarm id (0: none). Alarms left active by a previous run are closed
    /// as of `now` (the board re-raises what still holds).
    pub(crate) fn resume(&self, now: i64) -> Result<i64, AlarmError> {
        let c = self.db.lock();
        c.execute(
            "UPDATE alarms SET cleared_ms = ?1 WHERE cleared_ms IS NULL",
            params![now],
        )
        .map_err(|e| self.err(e))?;
        let id: Option<i64> = c
            .query_row("SELECT max(id) FROM alarms", [], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?
            .flatten();
        Ok(id.unwrap_or(0))
    }

    pub(crate) fn apply(&self, t: &Transition) -> Result<(), AlarmError> {
        let a = match t {
            Transition::Raised(a) | Transition::Changed(a) => a,
        };
        let rule = a
            .rule
            .map(|r| serde_json::to_string(&r).expect("a rule serialises"));
        self.db
            .lock()
            .execute(
                "INSERT INTO alarms (id, bed, kind, raised_ms, value, cleared_ms, acked_by, acked_ms,
                                     silenced_by, silenced_ms, silenced_until_ms, onset_ms, rule,
                                     run_onset_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
                 ON CONFLICT (id) DO UPDATE SET cleared_ms = ?6, acked_by = ?7, acked_ms = ?8,
                     silenced_by = ?9, silenced_ms = ?10, silenced_until_ms = ?11",
                params![
                    a.id,
                    a.bed,
                    a.kind.as_str(),
                    a.raised_ms,
                    a.value,
                    a.cleared_ms,
                    a.acked_by,
                    a.acked_ms,
                    a.silenced_by,
                    a.silenced_ms,
                    a.silenced_until_ms,
                    a.onset_ms,
                    rule,
                    a.run_onset_ms
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// A bed's alarms, newest first.
    pub(crate) fn history(&self, bed: &str, limit: usize) -> Result<Vec<AlarmRow>, AlarmError> {
        let c = self.db.lock();
        let mut st = c
            .prepare(
                "SELECT id, kind, raised_ms, value, cleared_ms, acked_by, acked_ms, silenced_by,
                        silenced_ms, silenced_until_ms, onset_ms, rule, run_onset_ms
                 FROM alarms WHERE bed = ?1 ORDER BY raised_ms DESC, id DESC LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map(params![bed, limit as i64], |r| {
                Ok(AlarmRow {
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    raised_ms: r.get(2)?,
                    value: r.get(3)?,
                    cleared_ms: r.get(4)?,
                    acked_by: r.get(5)?,
                    acked_ms: r.get(6)?,
                    silenced_by: r.get(7)?,
                    silenced_ms: r.get(8)?,
                    silenced_until_ms: r.get(9)?,
                    onset_ms: r.get(10)?,
                    run_onset_ms: r.get(12)?,
                    rule: r
                        .get::<_, Option<String>>(11)?
                        .and_then(|t| serde_json::from_str(&t).ok()),
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alarm::AlarmRule;

    const HOP: i64 = 2_000;

    fn served(on: f32, off: f32, k: u32, n: u32, validated: bool) -> ServedRule {
        ServedRule {
            rule: AlarmRule { on, off, k, n },
            validated,
            derived: false,
            hop_secs: (HOP / 1000) as u32,
        }
    }

    /// Today's fallback: 0.7 / 0.5, no persistence.
    fn alarms() -> Alarms {
        with_rule(served(0.7, 0.5, 1, 1, false))
    }

    fn with_rule(rule: ServedRule) -> Alarms {
        Alarms::new(
            Thresholds {
                lead_off: 0.5,
                max_silence_secs: 600,
            },
            rule,
            0,
        )
    }

    /// Feeds `scores` to `bed` one hop apart from hop `from`; returns the risk transitions as
    /// `(hop, raised?)`.
    fn feed(a: &mut Alarms, bed: &str, from: i64, scores: &[Option<f32>]) -> Vec<(i64, bool)> {
        let mut out = Vec::new();
        for (i, &s) in scores.iter().enumerate() {
            let hop = from + i as i64;
            for t in a.on_score(bed, hop * HOP, s, None, None, 1_000 + hop) {
                match t {
                    Transition::Raised(x) if x.kind == AlarmKind::Risk => out.push((hop, true)),
                    Transition::Changed(x) if x.kind == AlarmKind::Risk => {
                        assert!(x.cleared_ms.is_some());
                        out.push((hop, false))
                    }
                    _ => {}
                }
            }
        }
        out
    }

    #[test]
    fn risk_alarm_crosses_with_hysteresis_and_clears_itself() {
        let mut a = alarms();
        assert!(a.on_score("b1", HOP, Some(0.69), None, None, 1).is_empty());
        let t = a.on_score("b1", 2 * HOP, Some(0.71), None, None, 2);
        assert!(matches!(&t[..], [Transition::Raised(x)]
            if x.kind == AlarmKind::Risk && x.id == 1 && x.onset_ms == Some(2 * HOP)
                && x.raised_ms == 2 && x.value == Some(0.71_f32 as f64)
                && x.run_onset_ms.is_none()));
        // Between the thresholds: stays raised.
        assert!(
            a.on_score("b1", 3 * HOP, Some(0.6), None, None, 3)
                .is_empty()
        );
        assert_eq!(a.active().len(), 1);
        assert_eq!(a.risk_of("b1").unwrap().onset_ms, Some(2 * HOP));
        let t = a.on_score("b1", 4 * HOP, Some(0.4), None, None, 4);
        assert!(matches!(&t[..], [Transition::Changed(x)] if x.cleared_ms == Some(4)));
        assert!(a.active().is_empty());
        assert!(a.risk_of("b1").is_none());
    }

    #[test]
    fn a_validated_rule_needs_k_of_n_high_windows_and_k_low_ones_to_clear() {
        let mut a = with_rule(served(0.6, 0.3, 2, 3, true));
        // One high window alone does not alarm; high, low, high does (2 of the last 3).
        let got = feed(
            &mut a,
            "b1",
            0,
            &[Some(0.9), Some(0.1), Some(0.1), Some(0.9)],
        );
        assert!(got.is_empty(), "{got:?}");
        let got = feed(&mut a, "b1", 4, &[Some(0.1), Some(0.9)]);
        assert_eq!(got, [(5, true)]);
        assert_eq!(a.risk_of("b1").unwrap().onset_ms, Some(5 * HOP));
        // One low window, then one between off and on, then a second low: clears.
        let got = feed(&mut a, "b1", 6, &[Some(0.1), Some(0.5), Some(0.2)]);
        assert_eq!(got, [(8, false)]);
        // Beds are apart.
        assert!(feed(&mut a, "b2", 0, &[Some(0.9)]).is_empty());
    }

    #[test]
    fn unscored_windows_neither_raise_nor_clear() {
        let mut a = with_rule(served(0.6, 0.3, 2, 3, true));
        // High, none, high: 2 of the last 3 hops.
        assert_eq!(
            feed(&mut a, "b1", 0, &[Some(0.9), None, Some(0.9)]),
            [(2, true)]
        );
        // Any number of unscored windows keep the alarm.
        assert!(feed(&mut a, "b1", 3, &[None; 20]).is_empty());
        assert!(a.risk_of("b1").is_some());
        // A late window of an earlier hop is ignored.
        assert!(a.on_score("b1", HOP, Some(0.0), None, None, 9).is_empty());
        assert_eq!(
            feed(&mut a, "b1", 23, &[Some(0.1), Some(0.1)]),
            [(24, false)]
        );
    }

    #[test]
    fn a_rule_change_keeps_an_active_alarm_and_restarts_the_counts() {
        let mut a = with_rule(served(0.6, 0.3, 2, 3, true));
        feed(&mut a, "b1", 0, &[Some(0.9), Some(0.9)]);
        feed(&mut a, "b2", 0, &[Some(0.9)]);
        assert!(!a.set_rule(served(0.6, 0.3, 2, 3, true)), "same rule");
        assert!(a.set_rule(served(0.8, 0.5, 3, 3, false)));
        assert!(!a.rule().validated);
        // b1's alarm stays (no second raise), and clears on 3 low windows under the new rule.
        let id = a.risk_of("b1").unwrap().id;
        assert_eq!(feed(&mut a, "b1", 2, &[Some(0.4), Some(0.4)]), []);
        assert_eq!(a.risk_of("b1").unwrap().id, id);
        assert_eq!(feed(&mut a, "b1", 4, &[Some(0.4)]), [(4, false)]);
        // b2's high window under the old rule no longer counts: 3 new ones are needed.
        assert_eq!(feed(&mut a, "b2", 1, &[Some(0.9), Some(0.9)]), []);
        assert_eq!(feed(&mut a, "b2", 3, &[Some(0.9)]), [(3, true)]);
    }

    #[test]
    fn technical_alarms_are_apart_and_lost_replaces_stale() {
        let mut a = alarms();
        a.on_score("b1", HOP, Some(0.9), None, Some(0.8), 1);
        let kinds: Vec<_> = a.active().iter().map(|x| (x.kind, x.technical)).collect();
        assert_eq!(
            kinds,
            [(AlarmKind::Risk, false), (AlarmKind::LeadOff, true)]
        );
        assert_eq!(a.active()[1].onset_ms, None);
        a.on_status("b1", BedStatus::Stale, 2);
        a.on_status("b1", BedStatus::Lost, 3);
        let tech: Vec<_> = a
            .active()
            .iter()
            .filter(|x| x.technical)
            .map(|x| x.kind)
            .collect();
        assert_eq!(tech, [AlarmKind::LeadOff, AlarmKind::Lost]);
        a.on_status("b1", BedStatus::Live, 4);
        assert!(a.active().iter().all(|x| x.kind != AlarmKind::Lost));
    }

    #[test]
    fn acknowledge_and_silence_record_who_and_when() {
        let mut a = alarms();
        a.on_score("b1", HOP, Some(0.9), None, None, 1);
        let id = a.active()[0].id;
        a.acknowledge(id, "nina", 5).unwrap();
        assert!(matches!(
            a.silence(id, "nina", 0, 6),
            Err(AlarmError::BadSilence { .. })
        ));
        a.silence(id, "nina", 60, 6).unwrap();
        let x = &a.active()[0];
        assert_eq!((x.acked_by.as_deref(), x.acked_ms), (Some("nina"), Some(5)));
        assert_eq!(x.silenced_until_ms, Some(60_006));
        assert!(a.expire(60_005).is_empty());
        assert_eq!(a.expire(60_006).len(), 1);
        assert!(matches!(
            a.acknowledge(99, "nina", 7),
            Err(AlarmError::Unknown(99))
        ));
    }

    #[test]
    fn history_lists_a_beds_alarms_newest_first_with_a_risk_alarms_onset_and_rule() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("alarms.db");
        let db = AlarmDb::new(Db::open(&path, &crate::serving::store::STORE).unwrap());
        let mut a = alarms();
        // Raised on a counted VT run that began 1.5 s before the window's end.
        for t in a.on_score("b1", HOP, Some(0.875), Some(HOP - 1_500), None, 1) {
            db.apply(&t).unwrap();
        }
        assert_eq!(a.risk_of("b1").unwrap().run_onset_ms, Some(HOP - 1_500));
        db.apply(&a.acknowledge(1, "nina", 5).unwrap()).unwrap();
        for t in a.on_score("b1", 2 * HOP, Some(0.875), None, Some(0.8), 7) {
            db.apply(&t).unwrap();
        }
        let rows = serde_json::to_value(db.history("b1", 10).unwrap()).unwrap();
        assert_eq!(
            rows,
            serde_json::json!([
                {"id": 2, "kind": "lead_off", "raised_ms": 7, "onset_ms": null, "rule": null,
                 "run_onset_ms": null,
                 "value": 0.8, "cleared_ms": null, "acked_by": null, "acked_ms": null,
                 "silenced_by": null, "silenced_ms": null, "silenced_until_ms": null},
                {"id": 1, "kind": "risk", "raised_ms": 1, "onset_ms": HOP,
                 "run_onset_ms": HOP - 1_500,
                 "rule": {"on": 0.7, "off": 0.5, "k": 1, "n": 1, "validated": false, "hop_secs": 2},
                 "value": 0.875, "cleared_ms": null, "acked_by": "nina", "acked_ms": 5,
                 "silenced_by": null, "silenced_ms": null, "silenced_until_ms": null},
            ])
        );
        assert!(db.history("b2", 10).unwrap().is_empty());
    }
}
