//! A bedside monitor's own arrhythmia alarm as an IHE PCD-04 `ORU^R40`, with Holmes's opinion
//! on it as further observations of the same alarm.
//!
//! The alarm is reported as the monitor raised it: OBR-2 and OBR-3 are the monitor's id of the
//! alarm, namespaced by its bed (`vt-1^bed-7`: a monitor's ids are unique only on its bed),
//! OBR-7 its onset and OBR-8 its end (the monitor's clock), and the seven facets of
//! [`alarm`](super::alarm)'s reports under OBX-4 `1.1.1.1.n`, the event its kind's MDC code
//! (`MDC_EVT_ECG_V_TACHY`, `MDC_EVT_ECG_ASYSTOLE`, `MDC_EVT_ECG_BRADY_EXTREME`,
//! `MDC_EVT_ECG_TACHY_EXTREME`, `MDC_EVT_ECG_ARRHY` for `other`; ISO/IEEE 11073-10101's event
//! partition, 3); ventricular fibrillation has no alarm event code in the sources Holmes was
//! built from, so it carries the local `HOLMES-MONITOR-VF` of `99HOLMES`. The priority is the
//! one bedside monitors give these alarms (high; `other` medium): the monitor does not say.
//!
//! For a kind Holmes judges (VT, VF) three more OBXs follow, with local codes (MDC has none for
//! a second opinion): `1.1.1.1.8` the opinion (`confirmed`, `doubted`, or `not judged`),
//! `1.1.1.1.9` its probability (dimensionless, 0 to 1; absent when not judged), `1.1.1.1.10`
//! its one-line reason (or why there is no opinion). Their OBX-14 is the onset (what they are
//! about), OBX-19 when the opinion was formed. Every phase carries them; kinds Holmes does not
//! judge carry none.

use std::sync::Arc;

use hl7_parser::builder::prelude::*;

use super::{DIMENSIONLESS, HEART_RATE, Obx, Phase, coded, hl7_time, obx, pcd04_head};
use crate::config::Hl7Config;
use crate::core::monitor_alarm::{MonitorAlarmKind, Opinion};
use crate::core::patient::Patient;
use crate::serving::store::MonitorAlarmView;

/// OBX-3 of Holmes's opinion on a monitor's alarm: `confirmed`, `doubted` or `not judged`.
pub(crate) const OPINION: &str = "HOLMES-OPINION^Opinion on the monitor's alarm^99HOLMES";
/// OBX-3 of the opinion's probability that the alarm is true (0 to 1).
pub(crate) const OPINION_PROBABILITY: &str =
    "HOLMES-OPINION-PROBABILITY^Probability the monitor's alarm is true^99HOLMES";
/// OBX-3 of the opinion's reason, one line (or why there is none).
pub(crate) const OPINION_REASON: &str = "HOLMES-OPINION-REASON^Reason for the opinion^99HOLMES";
/// The ECG as an alarm's source.
const ECG: &str = "131328^MDC_ECG_ELEC_POTL^MDC";

/// One report of a monitor's alarm: its start (as stored, with Holmes's opinion) or its end.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MonitorAlarmReport {
    /// Holmes's number for the alarm (the store's row): one report per phase of it is queued.
    pub(crate) key: i64,
    pub(crate) bed: String,
    /// The monitor's id of the alarm (OBR-2, OBR-3).
    pub(crate) id: String,
    pub(crate) kind: MonitorAlarmKind,
    /// [`Phase::Start`] or [`Phase::End`].
    pub(crate) phase: Phase,
    /// The onset and the end, the monitor's clock (ms).
    pub(crate) onset_ms: i64,
    pub(crate) end_ms: Option<i64>,
    /// Holmes's opinion (VT and VF alarms), else why a kind it judges has none.
    pub(crate) opinion: Option<Opinion>,
    pub(crate) not_judged: Option<String>,
    /// When the opinion was formed, wall clock (ms).
    pub(crate) judged_ms: Option<i64>,
    /// The patient the bed is admitted with when the report is made, if any (PID-3).
    pub(crate) patient: Option<Arc<Patient>>,
}

impl MonitorAlarmReport {
    /// The report of `a`'s `phase`, naming `patient`.
    pub(crate) fn of(
        a: &MonitorAlarmView,
        phase: Phase,
        patient: Option<Arc<Patient>>,
    ) -> MonitorAlarmReport {
        MonitorAlarmReport {
            key: a.key,
            bed: a.bed.clone(),
            id: a.id.clone(),
            kind: a.kind(),
            phase,
            onset_ms: a.onset_ms,
            end_ms: a.end_ms,
            opinion: a.opinion(),
            not_judged: a.not_judged().map(str::to_owned),
            judged_ms: a.judged_ms,
            patient,
        }
    }

    /// When this phase happened: the onset, or the end.
    pub(crate) fn at_ms(&self) -> i64 {
        match self.phase {
            Phase::End => self.end_ms.unwrap_or(self.onset_ms),
            _ => self.onset_ms,
        }
    }

    /// The opinion's word: `confirmed`, `doubted`, or `not judged` for a kind Holmes judges
    /// that it could not; `None` for a kind it does not judge.
    pub(crate) fn verdict(&self) -> Option<&'static str> {
        match &self.opinion {
            Some(o) if o.confirmed => Some("confirmed"),
            Some(_) => Some("doubted"),
            None if self.kind.judged() => Some("not judged"),
            None => None,
        }
    }

    /// The opinion's reason, or why there is none.
    pub(crate) fn reason(&self) -> Option<&str> {
        match &self.opinion {
            Some(o) => Some(&o.reason),
            None => self.not_judged.as_deref(),
        }
    }
}

/// Event code (facet 1), source (facet 2) and priority of a monitor alarm's kind.
pub(crate) fn event_codes(kind: MonitorAlarmKind) -> (&'static str, &'static str, &'static str) {
    match kind {
        MonitorAlarmKind::Vt => ("199832^MDC_EVT_ECG_V_TACHY^MDC", ECG, "PH"),
        MonitorAlarmKind::Vf => (
            "HOLMES-MONITOR-VF^Ventricular fibrillation or flutter^99HOLMES",
            ECG,
            "PH",
        ),
        MonitorAlarmKind::Asystole => ("199684^MDC_EVT_ECG_ASYSTOLE^MDC", ECG, "PH"),
        MonitorAlarmKind::Brady => ("199694^MDC_EVT_ECG_BRADY_EXTREME^MDC", HEART_RATE, "PH"),
        MonitorAlarmKind::Tachy => ("199730^MDC_EVT_ECG_TACHY_EXTREME^MDC", HEART_RATE, "PH"),
        MonitorAlarmKind::Other => ("199874^MDC_EVT_ECG_ARRHY^MDC", ECG, "PM"),
    }
}

/// The IHE PCD-04 report of `r` with MSH-10 `control_id`, made at `created_ms`.
pub(crate) fn render(
    cfg: &Hl7Config,
    r: &MonitorAlarmReport,
    control_id: &str,
    created_ms: i64,
) -> String {
    let mut m = pcd04_head(cfg, &r.bed, r.patient.as_deref(), control_id, created_ms);
    let id = FieldBuilder::default()
        .with_component(1, r.id.as_str())
        .with_component(2, r.bed.as_str());
    let mut obr = SegmentBuilder::new("OBR")
        .with_field_value(1, "1")
        .with_field(2, id.clone())
        .with_field(3, id)
        .with_field(4, coded(super::ALARM_EVENT))
        .with_field_value(7, hl7_time(r.onset_ms));
    if r.phase == Phase::End {
        obr = obr.with_field_value(8, hl7_time(r.at_ms()));
    }
    m.push_segment(obr);
    let (event, source, priority) = event_codes(r.kind);
    let state = if r.phase == Phase::End {
        "inactive"
    } else {
        "active"
    };
    let flags = [priority, "SP"];
    let none: &[&str] = &[];
    let facets: [(&str, &str, &[&str]); 7] = [
        (event, r.kind.as_str(), &flags[..]),
        (source, "", none),
        (cfg.facet_phase.as_str(), r.phase.as_str(), none),
        (cfg.facet_state.as_str(), state, none),
        (cfg.facet_inactivation.as_str(), "enabled", none),
        (cfg.facet_priority.as_str(), priority, none),
        (cfg.facet_type.as_str(), "SP", none),
    ];
    let mut set = 0;
    for (i, (code, value, flags)) in facets.into_iter().enumerate() {
        set += 1;
        m.push_segment(obx(
            cfg,
            Obx {
                set,
                kind: "ST",
                code,
                sub: format!("1.1.1.1.{}", i + 1),
                value: value.to_owned(),
                units: None,
                flags,
                at_ms: r.at_ms(),
                method: false,
            },
        ));
    }
    let Some(verdict) = r.verdict() else {
        return m.to_string();
    };
    // The opinion: about the ECG up to the onset, formed when it was judged.
    let mut rows = vec![(8, "ST", OPINION, verdict.to_owned(), None)];
    if let Some(o) = &r.opinion {
        rows.push((
            9,
            "NM",
            OPINION_PROBABILITY,
            format!("{:.3}", o.probability),
            Some(DIMENSIONLESS),
        ));
    }
    if let Some(why) = r.reason() {
        rows.push((10, "ST", OPINION_REASON, why.to_owned(), None));
    }
    for (sub, kind, code, value, units) in rows {
        set += 1;
        let mut s = obx(
            cfg,
            Obx {
                set,
                kind,
                code,
                sub: format!("1.1.1.1.{sub}"),
                value,
                units,
                flags: &[],
                at_ms: r.onset_ms,
                method: false,
            },
        );
        if let Some(j) = r.judged_ms {
            s = s.with_field_value(19, hl7_time(j));
        }
        m.push_segment(s);
    }
    m.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field<'m>(m: &'m hl7_parser::Message<'m>, q: &str) -> String {
        m.query(q)
            .map(|r| m.separators.decode(r.raw_value()).to_string())
            .unwrap_or_default()
    }

    fn report(kind: MonitorAlarmKind, phase: Phase) -> MonitorAlarmReport {
        let judged = kind.judged();
        MonitorAlarmReport {
            key: 3,
            bed: "bed-7".into(),
            id: "A|1743".into(),
            kind,
            phase,
            onset_ms: 1_764_230_455_310,
            end_ms: (phase == Phase::End).then_some(1_764_230_463_000),
            opinion: judged.then(|| Opinion {
                kind,
                confirmed: false,
                probability: 0.1234,
                reason: "no run of ventricular beats on II and V".into(),
            }),
            not_judged: None,
            judged_ms: judged.then_some(1_764_230_455_900),
            patient: None,
        }
    }

    #[test]
    fn a_monitors_vt_alarm_carries_its_mdc_event_its_id_and_holmess_opinion() {
        let cfg = Hl7Config::default();
        let text = render(
            &cfg,
            &report(MonitorAlarmKind::Vt, Phase::Start),
            "71",
            1_764_230_456_000,
        );
        let m = hl7_parser::parse_message(&text).unwrap();
        assert_eq!(field(&m, "MSH.9"), "ORU^R40^ORU_R40");
        assert_eq!(field(&m, "MSH.10"), "71");
        assert_eq!(field(&m, "PV1.3.3"), "bed-7");
        // The monitor's id, whole (escaped), namespaced by the bed.
        assert_eq!(field(&m, "OBR.3.1"), "A|1743");
        assert_eq!(field(&m, "OBR.3.2"), "bed-7");
        assert_eq!(field(&m, "OBR.2"), field(&m, "OBR.3"));
        assert_eq!(field(&m, "OBR.4"), "196616^MDC_EVT_ALARM^MDC");
        assert_eq!(field(&m, "OBR.7"), "20251127080055.310+0000");
        assert_eq!(field(&m, "OBR.8"), "");
        let rows: Vec<[String; 3]> = (1..=10)
            .map(|i| [4, 3, 5].map(|f| field(&m, &format!("OBX[{i}].{f}"))))
            .collect();
        let want = [
            ["1.1.1.1.1", "199832^MDC_EVT_ECG_V_TACHY^MDC", "vt"],
            ["1.1.1.1.2", "131328^MDC_ECG_ELEC_POTL^MDC", ""],
            ["1.1.1.1.3", "68481^MDC_ATTR_EVENT_PHASE^MDC", "start"],
            ["1.1.1.1.4", "68482^MDC_ATTR_ALARM_STATE^MDC", "active"],
            [
                "1.1.1.1.5",
                "68483^MDC_ATTR_ALARM_INACTIVATION_STATE^MDC",
                "enabled",
            ],
            ["1.1.1.1.6", "68484^MDC_ATTR_ALARM_PRIORITY^MDC", "PH"],
            ["1.1.1.1.7", "68485^MDC_ATTR_ALERT_TYPE^MDC", "SP"],
            ["1.1.1.1.8", OPINION, "doubted"],
            ["1.1.1.1.9", OPINION_PROBABILITY, "0.123"],
            [
                "1.1.1.1.10",
                OPINION_REASON,
                "no run of ventricular beats on II and V",
            ],
        ];
        for (got, want) in rows.iter().zip(want) {
            assert_eq!(got, &want.map(String::from), "{text}");
        }
        assert_eq!(field(&m, "OBX[1].8"), "PH~SP");
        assert_eq!(field(&m, "OBX[9].6"), "262656^MDC_DIM_DIMLESS^MDC");
        assert_eq!(field(&m, "OBX[9].14"), "20251127080055.310+0000");
        assert_eq!(field(&m, "OBX[9].19"), "20251127080055.900+0000");
        assert_eq!(m.segments().filter(|s| s.name == "OBX").count(), 10);
    }

    #[test]
    fn an_end_is_dated_at_the_monitors_end_and_kinds_not_judged_carry_no_opinion() {
        let cfg = Hl7Config::default();
        let text = render(
            &cfg,
            &report(MonitorAlarmKind::Asystole, Phase::End),
            "72",
            1_764_230_464_000,
        );
        let m = hl7_parser::parse_message(&text).unwrap();
        assert_eq!(field(&m, "OBR.8"), "20251127080103.000+0000");
        assert_eq!(field(&m, "OBX[1].3"), "199684^MDC_EVT_ECG_ASYSTOLE^MDC");
        assert_eq!(field(&m, "OBX[3].5"), "end");
        assert_eq!(field(&m, "OBX[4].5"), "inactive");
        assert_eq!(field(&m, "OBX[3].14"), "20251127080103.000+0000");
        assert_eq!(m.segments().filter(|s| s.name == "OBX").count(), 7);
        // A VF alarm Holmes could not judge: its local event code, "not judged" and why.
        let mut r = report(MonitorAlarmKind::Vf, Phase::Start);
        r.opinion = None;
        r.not_judged = Some("12 % of the 16 s before the alarm arrived".into());
        let text = render(&cfg, &r, "73", 1_764_230_464_000);
        let m = hl7_parser::parse_message(&text).unwrap();
        assert_eq!(field(&m, "OBX[1].3.1"), "HOLMES-MONITOR-VF");
        assert_eq!(field(&m, "OBX[1].3.3"), "99HOLMES");
        assert_eq!(field(&m, "OBX[8].5"), "not judged");
        assert_eq!(field(&m, "OBX[9].4"), "1.1.1.1.10");
        assert_eq!(
            field(&m, "OBX[9].5"),
            "12 % of the 16 s before the alarm arrived"
        );
        assert_eq!(m.segments().filter(|s| s.name == "OBX").count(), 9);
        for (kind, event, priority) in [
            (MonitorAlarmKind::Brady, "199694", "PH"),
            (MonitorAlarmKind::Tachy, "199730", "PH"),
            (MonitorAlarmKind::Other, "199874", "PM"),
        ] {
            let (code, source, p) = event_codes(kind);
            assert!(code.starts_with(event) && p == priority, "{kind}");
            let want = if kind == MonitorAlarmKind::Other {
                ECG
            } else {
                HEART_RATE
            };
            assert_eq!(source, want);
        }
    }
}
