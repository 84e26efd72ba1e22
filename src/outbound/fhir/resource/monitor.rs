//! A bedside monitor's own alarm and Holmes's opinion on it as FHIR R4 resources, after the
//! HL7 link's [PCD-04 report](crate::outbound::message::monitor):
//!
//! - each phase (start, end) of the alarm: an alarm-event Observation as the dashboard's
//!   alarms are (category `alarm`, code MDC `196616` plus the kind's event code, its facets as
//!   components, `effectivePeriod` from the onset to the end, the monitor's clock), with the
//!   monitor's id of the alarm as the component `HOLMES-MONITOR-ALARM-ID`; identifier
//!   `<bed>/monitor-alarm/<id>/<phase>/<time>`;
//! - with the start of a kind Holmes judges (VT, VF), Holmes's opinion: an Observation coded
//!   `HOLMES-OPINION` (category `survey`, a scored assessment as the risk score is), its
//!   `focus` the alarm's start by identifier (a logical reference: the server's id for it is
//!   not Holmes's to know), `valueCodeableConcept` `confirmed` or `doubted` with the
//!   probability (`HOLMES-OPINION-PROBABILITY`, UCUM `1`) and the reason
//!   (`HOLMES-OPINION-REASON`) as components, `effectiveDateTime` the onset (what it is about)
//!   and `issued` when it was queued, when it was formed in the extension [`JUDGED_EXTENSION`];
//!   where nothing could judge the alarm, `dataAbsentReason`
//!   `not-performed` with why. `focus`, not `derivedFrom`: the opinion is about the alarm, and
//!   derived from the ECG, which no resource holds. Identifier
//!   `<bed>/monitor-alarm/<id>/opinion/<onset>`.

use serde_json::{Value, json};

use super::{ABSENT, HOLMES, MDC, UCUM, base, category, coding, instant};
use crate::config::FhirConfig;
use crate::outbound::message::monitor::{
    MonitorAlarmReport, OPINION, OPINION_PROBABILITY, OPINION_REASON, event_codes,
};
use crate::outbound::message::{ALARM_EVENT, Phase};

/// The extension holding when an opinion was formed (an instant).
pub(crate) const JUDGED_EXTENSION: &str = "urn:holmes:fhir:judged";

/// How many resources a monitor alarm's report becomes: its phase's, and with the start of a
/// kind Holmes judges, the opinion.
pub(super) fn parts(r: &MonitorAlarmReport) -> usize {
    1 + usize::from(r.phase == Phase::Start && r.kind.judged())
}

/// Resource `part` of `r` (see [`parts`]), issued at `created_ms`.
pub(super) fn render(
    cfg: &FhirConfig,
    r: &MonitorAlarmReport,
    part: usize,
    created_ms: i64,
) -> Value {
    match part {
        0 => alarm(cfg, r, created_ms),
        _ => opinion(cfg, r, created_ms),
    }
}

/// The identifier's `kind` part of phase `phase` of `r`.
fn kind_of(r: &MonitorAlarmReport, phase: &str) -> String {
    format!("monitor-alarm/{}/{phase}", r.id)
}

fn alarm(cfg: &FhirConfig, r: &MonitorAlarmReport, created_ms: i64) -> Value {
    let mut v = base(
        cfg,
        &r.bed,
        r.patient.as_deref(),
        &kind_of(r, r.phase.as_str()),
        r.at_ms(),
        created_ms,
    );
    let (event, _source, priority) = event_codes(r.kind);
    let state = if r.phase == Phase::End {
        "inactive"
    } else {
        "active"
    };
    v["category"] = category(HOLMES, "alarm", "Alarm event");
    v["code"] =
        json!({"coding": [coding(ALARM_EVENT), coding(event)], "text": event.split('^').nth(1)});
    let mut period = json!({"start": instant(r.onset_ms)});
    if r.phase == Phase::End {
        period["end"] = instant(r.at_ms()).into();
    }
    v["effectivePeriod"] = period;
    let facet = |code: &str, display: &str, value: &str| {
        json!({
            "code": {"coding": [{"system": MDC, "code": code, "display": display}]},
            "valueString": value
        })
    };
    v["component"] = json!([
        facet("68481", "MDC_ATTR_EVENT_PHASE", r.phase.as_str()),
        facet("68482", "MDC_ATTR_ALARM_STATE", state),
        facet("68483", "MDC_ATTR_ALARM_INACTIVATION_STATE", "enabled"),
        facet("68484", "MDC_ATTR_ALARM_PRIORITY", priority),
        facet("68485", "MDC_ATTR_ALERT_TYPE", "SP"),
        {
            "code": {"coding": [{"system": HOLMES, "code": "HOLMES-MONITOR-ALARM-ID", "display": "The monitor's alarm id"}]},
            "valueString": r.id
        },
        {
            "code": {"coding": [{"system": HOLMES, "code": "HOLMES-ALARM-PHASE-TIME", "display": "Time of this phase"}]},
            "valueDateTime": instant(r.at_ms())
        }
    ]);
    v
}

fn opinion(cfg: &FhirConfig, r: &MonitorAlarmReport, created_ms: i64) -> Value {
    let mut v = base(
        cfg,
        &r.bed,
        r.patient.as_deref(),
        &kind_of(r, "opinion"),
        r.onset_ms,
        created_ms,
    );
    v["category"] = category(
        "http://terminology.hl7.org/CodeSystem/observation-category",
        "survey",
        "Survey",
    );
    v["code"] = json!({"coding": [coding(OPINION)], "text": OPINION.split('^').nth(1)});
    // The alarm's start, by the identifier its own resource carries.
    let alarm_id = format!("{}/{}/{}", r.bed, kind_of(r, "start"), r.onset_ms);
    v["focus"] = json!([{
        "type": "Observation",
        "identifier": {"system": cfg.identifier_system, "value": alarm_id},
        "display": format!("the monitor's {} alarm {}", r.kind.as_str().to_uppercase(), r.id)
    }]);
    v["effectiveDateTime"] = instant(r.onset_ms).into();
    let reason =
        |text: &str| json!({"code": {"coding": [coding(OPINION_REASON)]}, "valueString": text});
    match &r.opinion {
        Some(o) => {
            let word = if o.confirmed { "confirmed" } else { "doubted" };
            let display = if o.confirmed { "Confirmed" } else { "Doubted" };
            v["valueCodeableConcept"] = json!({
                "coding": [{"system": HOLMES, "code": word, "display": display}],
                "text": word
            });
            v["component"] = json!([
                {
                    "code": {"coding": [coding(OPINION_PROBABILITY)]},
                    "valueQuantity": {
                        "value": (f64::from(o.probability) * 1000.0).round() / 1000.0,
                        "unit": "1", "system": UCUM, "code": "1"
                    }
                },
                reason(&o.reason)
            ]);
        }
        None => {
            let why = r.not_judged.as_deref().unwrap_or("not judged");
            v["dataAbsentReason"] = json!({
                "coding": [{"system": ABSENT, "code": "not-performed", "display": "Not Performed"}],
                "text": why
            });
            v["component"] = json!([reason(why)]);
        }
    }
    if let Some(j) = r.judged_ms {
        v["extension"]
            .as_array_mut()
            .expect("base gives the bed's extension")
            .push(json!({"url": JUDGED_EXTENSION, "valueInstant": instant(j)}));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::monitor_alarm::{MonitorAlarmKind, Opinion};
    use crate::outbound::message::Draft;

    fn report(kind: MonitorAlarmKind, phase: Phase) -> MonitorAlarmReport {
        MonitorAlarmReport {
            key: 3,
            bed: "bed-7".into(),
            id: "vt-1".into(),
            kind,
            phase,
            onset_ms: 1_764_230_455_310,
            end_ms: (phase == Phase::End).then_some(1_764_230_463_000),
            opinion: kind.judged().then(|| Opinion {
                kind,
                confirmed: true,
                probability: 0.87654,
                reason: "7 ventricular beats at 165/min on II and V".into(),
            }),
            not_judged: None,
            judged_ms: kind.judged().then_some(1_764_230_455_900),
            patient: None,
        }
    }

    fn resources(r: MonitorAlarmReport) -> Vec<Value> {
        let cfg = FhirConfig::default();
        let d = Draft::MonitorAlarm(r);
        (0..super::super::parts(&d))
            .map(|p| serde_json::from_str(&super::super::render(&cfg, &d, p, 5)).unwrap())
            .collect()
    }

    #[test]
    fn the_sample_resources_of_outbound_md_are_what_holmes_renders() {
        let cfg = FhirConfig {
            identifier_system: "urn:holmes:0050c2fffe12a3b4".into(),
            device_id: "0050C2FFFE12A3B4".into(),
            ..FhirConfig::default()
        };
        let r = crate::outbound::message::samples::monitor_alarm();
        let t = r.onset_ms + 600;
        let want: Vec<Value> = (0..parts(&r)).map(|p| render(&cfg, &r, p, t)).collect();
        let got: Vec<Value> = crate::outbound::message::samples::blocks("docs/OUTBOUND.md", "json")
            .iter()
            .flat_map(|b| b.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()))
            .collect();
        let lines: Vec<String> = want.iter().map(Value::to_string).collect();
        assert_eq!(got, want, "what Holmes renders:\n{}", lines.join("\n"));
    }

    #[test]
    fn a_vt_alarms_start_is_an_alarm_event_and_an_opinion_focused_on_it() {
        let rs = resources(report(MonitorAlarmKind::Vt, Phase::Start));
        assert_eq!(rs.len(), 2);
        let (a, o) = (&rs[0], &rs[1]);
        assert_eq!(a["code"]["coding"][0]["code"], "196616");
        assert_eq!(a["code"]["coding"][1]["code"], "199832");
        assert_eq!(a["code"]["coding"][1]["system"], MDC);
        assert_eq!(a["code"]["text"], "MDC_EVT_ECG_V_TACHY");
        assert_eq!(
            a["effectivePeriod"],
            json!({"start": "2025-11-27T08:00:55.310Z"})
        );
        assert_eq!(
            a["identifier"][0]["value"],
            "bed-7/monitor-alarm/vt-1/start/1764230455310"
        );
        let values: Vec<&str> = a["component"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["valueString"].as_str())
            .collect();
        assert_eq!(values, ["start", "active", "enabled", "PH", "SP", "vt-1"]);
        // The opinion points at the alarm's start by the identifier it carries.
        assert_eq!(o["focus"][0]["identifier"], a["identifier"][0]);
        assert_eq!(o["code"]["coding"][0]["code"], "HOLMES-OPINION");
        assert_eq!(o["code"]["coding"][0]["system"], HOLMES);
        assert_eq!(o["valueCodeableConcept"]["coding"][0]["code"], "confirmed");
        assert_eq!(o["component"][0]["valueQuantity"]["value"], 0.877);
        assert_eq!(
            o["component"][1]["valueString"],
            "7 ventricular beats at 165/min on II and V"
        );
        assert_eq!(o["effectiveDateTime"], "2025-11-27T08:00:55.310Z");
        assert_eq!(
            o["identifier"][0]["value"],
            "bed-7/monitor-alarm/vt-1/opinion/1764230455310"
        );
        assert_eq!(
            o["extension"][1]["valueInstant"],
            "2025-11-27T08:00:55.900Z"
        );
    }

    #[test]
    fn an_end_is_one_resource_and_an_alarm_not_judged_says_why() {
        let rs = resources(report(MonitorAlarmKind::Vt, Phase::End));
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0]["effectivePeriod"]["end"], "2025-11-27T08:01:03.000Z");
        assert_eq!(
            rs[0]["identifier"][0]["value"],
            "bed-7/monitor-alarm/vt-1/end/1764230463000"
        );
        let rs = resources(report(MonitorAlarmKind::Asystole, Phase::Start));
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0]["code"]["coding"][1]["code"], "199684");
        let mut r = report(MonitorAlarmKind::Vf, Phase::Start);
        r.opinion = None;
        r.judged_ms = None;
        r.not_judged = Some("the zoo serves no beat counter".into());
        let rs = resources(r);
        assert_eq!(rs[0]["code"]["coding"][1]["code"], "HOLMES-MONITOR-VF");
        assert_eq!(rs[0]["code"]["coding"][1]["system"], HOLMES);
        assert!(rs[1].get("valueCodeableConcept").is_none());
        assert_eq!(
            rs[1]["dataAbsentReason"]["coding"][0]["code"],
            "not-performed"
        );
        assert_eq!(
            rs[1]["dataAbsentReason"]["text"],
            "the zoo serves no beat counter"
        );
    }
}
