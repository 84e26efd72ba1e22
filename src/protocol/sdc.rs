//! IEEE 11073 SDC as a consumer speaks it, sans-IO: the SOAP 1.2 requests Holmes sends a
//! device (WS-Transfer Get, WS-Eventing Subscribe / Renew / Unsubscribe, BICEPS GetMdib) and
//! what it reads of the answers and reports: the hosted services, the MDIB's ECG leads (by
//! their 11073-10101 codes, with their sample periods), heart-rate metric and alert conditions,
//! and the `WaveformStream`, `EpisodicMetricReport` and `EpisodicAlertReport` notifications.
//! `serving::ingest::sdc` does the HTTP. Elements are matched by namespace and local name
//! (devices differ in prefixes); `tests/sdc_peer/README.md` notes what a device sends.

use roxmltree::{Document, Node};

const SOAP: &str = "http://www.w3.org/2003/05/soap-envelope";
const WSA: &str = "http://www.w3.org/2005/08/addressing";
const WSE: &str = "http://schemas.xmlsoap.org/ws/2004/08/eventing";
const MSG: &str = "http://standards.ieee.org/downloads/11073/11073-10207-2017/message";
const PM: &str = "http://standards.ieee.org/downloads/11073/11073-10207-2017/participant";
const XSI: &str = "http://www.w3.org/2001/XMLSchema-instance";
const SDC: &str = "http://standards.ieee.org/downloads/11073/11073-20701-2018";
const TRANSFER_GET: &str = "http://schemas.xmlsoap.org/ws/2004/09/transfer/Get";
const ACTION_DIALECT: &str = "http://docs.oasis-open.org/ws-dd/ns/dpws/2009/01/Action";

/// The report actions Holmes subscribes to.
pub(crate) const WAVEFORM_STREAM: &str =
    "http://standards.ieee.org/downloads/11073/11073-20701-2018/WaveformService/WaveformStream";
pub(crate) const EPISODIC_ALERT_REPORT: &str = "http://standards.ieee.org/downloads/11073/11073-20701-2018/StateEventService/EpisodicAlertReport";
pub(crate) const EPISODIC_METRIC_REPORT: &str = "http://standards.ieee.org/downloads/11073/11073-20701-2018/StateEventService/EpisodicMetricReport";

/// What a device's answer or report did not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SdcError {
    #[error("not XML: {0}")]
    Xml(String),
    #[error("the device answered with a fault: {0}")]
    Fault(String),
    #[error("the answer holds no {0}")]
    Missing(&'static str),
}

/// A SOAP 1.2 envelope to `to` with WS-Addressing's `action` and a fresh message id.
pub(crate) fn envelope(to: &str, action: &str, body: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
         <s12:Envelope xmlns:s12=\"{SOAP}\" xmlns:wsa=\"{WSA}\" xmlns:wse=\"{WSE}\" xmlns:msg=\"{MSG}\">\
         <s12:Header><wsa:To>{}</wsa:To><wsa:Action>{}</wsa:Action>\
         <wsa:MessageID>urn:uuid:{}</wsa:MessageID></s12:Header>\
         <s12:Body>{body}</s12:Body></s12:Envelope>",
        escape(to),
        escape(action),
        uuid4()
    )
}

/// WS-Transfer Get: the device's metadata (its hosted services), asked at its XAddr.
pub(crate) fn transfer_get(xaddr: &str) -> String {
    envelope(xaddr, TRANSFER_GET, "")
}

/// BICEPS GetMdib, to the device's GetService.
pub(crate) fn get_mdib(to: &str) -> String {
    envelope(to, &format!("{SDC}/GetService/GetMdib"), "<msg:GetMdib/>")
}

/// WS-Eventing Subscribe to `actions`, pushed to `notify_to` (and the end of the subscription
/// to `end_to`), for `secs`.
pub(crate) fn subscribe(
    to: &str,
    notify_to: &str,
    end_to: &str,
    actions: &[&str],
    secs: u32,
) -> String {
    let body = format!(
        "<wse:Subscribe><wse:EndTo><wsa:Address>{}</wsa:Address></wse:EndTo>\
         <wse:Delivery Mode=\"{WSE}/DeliveryModes/Push\"><wse:NotifyTo><wsa:Address>{}</wsa:Address>\
         </wse:NotifyTo></wse:Delivery><wse:Expires>PT{secs}S</wse:Expires>\
         <wse:Filter Dialect=\"{ACTION_DIALECT}\">{}</wse:Filter></wse:Subscribe>",
        escape(end_to),
        escape(notify_to),
        escape(&actions.join(" "))
    );
    envelope(to, &format!("{WSE}/Subscribe"), &body)
}

/// WS-Eventing Renew, to the subscription manager, for `secs`.
pub(crate) fn renew(manager: &str, secs: u32) -> String {
    let body = format!("<wse:Renew><wse:Expires>PT{secs}S</wse:Expires></wse:Renew>");
    envelope(manager, &format!("{WSE}/Renew"), &body)
}

/// WS-Eventing Unsubscribe, to the subscription manager.
pub(crate) fn unsubscribe(manager: &str) -> String {
    envelope(manager, &format!("{WSE}/Unsubscribe"), "<wse:Unsubscribe/>")
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A random UUID in version 4's form: message ids, and names of test devices.
pub(crate) fn uuid4() -> String {
    let b: [u8; 16] = rand::random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-4{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[13..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Parses `xml`, refusing a SOAP fault (whatever the HTTP status said).
fn parse(xml: &str) -> Result<Document<'_>, SdcError> {
    let doc = Document::parse(xml).map_err(|e| SdcError::Xml(e.to_string()))?;
    if let Some(f) = doc.descendants().find(|n| n.has_tag_name((SOAP, "Fault"))) {
        let text: Vec<&str> = f
            .descendants()
            .filter(|n| n.has_tag_name((SOAP, "Text")) || n.has_tag_name((SOAP, "Value")))
            .filter_map(|n| n.text())
            .collect();
        return Err(SdcError::Fault(text.join("; ")));
    }
    Ok(doc)
}

/// The first child element of `n` named `(ns, name)`.
fn child<'a, 'i>(n: Node<'a, 'i>, ns: &str, name: &str) -> Option<Node<'a, 'i>> {
    n.children().find(|c| c.has_tag_name((ns, name)))
}

/// The local name of an `xsi:type` (its prefix dropped).
fn xsi_type<'a>(n: &Node<'a, '_>) -> Option<&'a str> {
    n.attribute((XSI, "type"))
        .map(|t| t.rsplit(':').next().unwrap_or(t))
}

/// A hosted service of the device: its address and the local names of its types
/// (`GetService`, `WaveformService`, `StateEventService`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hosted {
    pub(crate) address: String,
    pub(crate) types: Vec<String>,
}

/// The hosted services a WS-Transfer Get's answer lists.
pub(crate) fn hosted(xml: &str) -> Result<Vec<Hosted>, SdcError> {
    let doc = parse(xml)?;
    let out: Vec<Hosted> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "Hosted")
        .filter_map(|h| {
            let address = h
                .descendants()
                .find(|n| n.has_tag_name((WSA, "Address")))?
                .text()?
                .trim()
                .to_owned();
            let types = h
                .children()
                .filter(|n| n.tag_name().name() == "Types")
                .filter_map(|n| n.text())
                .flat_map(|t| t.split_whitespace())
                .map(|t| t.rsplit(':').next().unwrap_or(t).to_owned())
                .collect();
            Some(Hosted { address, types })
        })
        .collect();
    if out.is_empty() {
        return Err(SdcError::Missing("hosted service"));
    }
    Ok(out)
}

/// The subscription manager's address a SubscribeResponse gives.
pub(crate) fn subscription_manager(xml: &str) -> Result<String, SdcError> {
    let doc = parse(xml)?;
    doc.descendants()
        .find(|n| n.has_tag_name((WSE, "SubscriptionManager")))
        .and_then(|m| m.descendants().find(|n| n.has_tag_name((WSA, "Address"))))
        .and_then(|a| a.text())
        .map(|t| t.trim().to_owned())
        .ok_or(SdcError::Missing("subscription manager"))
}

/// Checks an answer holds no fault (a Renew's, an Unsubscribe's).
pub(crate) fn check(xml: &str) -> Result<(), SdcError> {
    parse(xml).map(|_| ())
}

/// An ECG lead of the device: its handle, its name as a monitor's hello would give it (by
/// its 11073-10101 code) and its sample period.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Lead {
    pub(crate) handle: String,
    pub(crate) name: String,
    pub(crate) period_ms: f64,
}

/// What Holmes reads of a device's MDIB.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Mdib {
    pub(crate) leads: Vec<Lead>,
    /// The numeric metrics Holmes takes, each handle with the vital it is (`hr`: the first
    /// `MDC_ECG_HEART_RATE`, else the first pulse rate; `spo2`: the first
    /// `MDC_PULS_OXIM_SAT_O2`).
    pub(crate) vitals: Vec<(String, &'static str)>,
    /// Each physiological alert condition's handle and its type's code (technical ones,
    /// `Kind="Tec"`, are left out).
    pub(crate) alerts: Vec<(String, String)>,
    /// The alert conditions' presence as the MDIB holds it: handle, present, since when.
    pub(crate) presence: Vec<(String, bool, Option<i64>)>,
}

/// The lead name of an ECG waveform's 11073-10101 code (`MDC_ECG_ELEC_POTL_*`, or the
/// `MDC_ECG_LEAD_*` form); None for another waveform.
pub(crate) fn lead_name(code: &str) -> Option<&'static str> {
    Some(match code {
        "131329" | "131073" => "I",
        "131330" | "131074" => "II",
        "131389" | "131133" => "III",
        "131390" | "131134" => "AVR",
        "131391" | "131135" => "AVL",
        "131392" | "131136" => "AVF",
        "131331" | "131075" => "V1",
        "131332" | "131076" => "V2",
        "131333" | "131077" => "V3",
        "131334" | "131078" => "V4",
        "131335" | "131079" => "V5",
        "131336" | "131080" => "V6",
        _ => return None,
    })
}

/// The vitals Holmes takes from a device's numeric metrics (named as the WebSocket protocol
/// names them), each by its 11073-10101 codes in order of preference: the heart rate
/// (`MDC_ECG_HEART_RATE` 147842, else `MDC_PULS_RATE` 149514) and SpO2
/// (`MDC_PULS_OXIM_SAT_O2` 150456).
const VITAL_CODES: &[(&[&str], &str)] = &[(&["147842", "149514"], "hr"), (&["150456"], "spo2")];

/// An xs:duration of seconds only (`PT0.002S`), in ms.
fn period_ms(d: &str) -> Option<f64> {
    let secs: f64 = d.strip_prefix("PT")?.strip_suffix('S')?.parse().ok()?;
    (secs > 0.0 && secs.is_finite()).then_some(secs * 1000.0)
}

/// The leads, heart rate and alert conditions of a GetMdibResponse.
pub(crate) fn mdib(xml: &str) -> Result<Mdib, SdcError> {
    let doc = parse(xml)?;
    let mut m = Mdib::default();
    let mut numerics: Vec<(String, String)> = Vec::new();
    let code = |n: &Node<'_, '_>| {
        child(*n, PM, "Type")
            .and_then(|t| t.attribute("Code"))
            .map(str::to_owned)
    };
    for n in doc.descendants().filter(|n| n.is_element()) {
        let Some(handle) = n.attribute("Handle") else {
            continue;
        };
        if n.has_tag_name((PM, "Metric")) {
            let Some(c) = code(&n) else { continue };
            match xsi_type(&n) {
                Some("RealTimeSampleArrayMetricDescriptor") => {
                    let period = n.attribute("SamplePeriod").and_then(period_ms);
                    if let (Some(name), Some(period_ms)) = (lead_name(&c), period) {
                        m.leads.push(Lead {
                            handle: handle.to_owned(),
                            name: name.to_owned(),
                            period_ms,
                        });
                    }
                }
                Some("NumericMetricDescriptor") => numerics.push((handle.to_owned(), c)),
                _ => {}
            }
        } else if n.has_tag_name((PM, "AlertCondition"))
            && n.attribute("Kind") != Some("Tec")
            && let Some(c) = code(&n)
        {
            m.alerts.push((handle.to_owned(), c));
        }
    }
    for st in doc.descendants().filter(|n| n.is_element()) {
        if xsi_type(&st).is_some_and(|t| t == "AlertConditionState")
            && let Some(h) = st.attribute("DescriptorHandle")
        {
            let at = st
                .attribute("DeterminationTime")
                .and_then(|t| t.trim().parse().ok());
            m.presence
                .push((h.to_owned(), st.attribute("Presence") == Some("true"), at));
        }
    }
    // Each vital from the first metric of its most preferred code (the ECG's heart rate
    // before a pulse rate, which a pulseless rhythm stops).
    for (codes, name) in VITAL_CODES {
        if let Some((h, _)) = codes
            .iter()
            .find_map(|c| numerics.iter().find(|(_, code)| code == c))
        {
            m.vitals.push((h.clone(), *name));
        }
    }
    if m.leads.is_empty() {
        return Err(SdcError::Missing("ECG waveform (an MDC_ECG lead)"));
    }
    Ok(m)
}

/// A report a device pushed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Report {
    /// Samples of one waveform: its handle, the first sample's time (ms since the epoch) and
    /// the samples.
    Waveform(Vec<(String, i64, Vec<f32>)>),
    /// Numeric metrics' values by handle (absent: no value), with when each was determined.
    Metrics(Vec<(String, Option<f32>, Option<i64>)>),
    /// Alert conditions' presence changes: handle, present, when (ms since the epoch).
    Alerts(Vec<(String, bool, Option<i64>)>),
    /// The device ended the subscription.
    End,
    /// Another action.
    Other(String),
}

/// Whether a metric state's value is a measurement to take: the metric switched on (its
/// `ActivationState` absent or `On`) and the value's `MetricQuality` `Validity` absent,
/// `Vld` or `Vldated`. Anything else (a probe off, a lead off, calibration, over- or
/// underflow, questionable) makes the value absent, as a WebSocket monitor's flagged reading
/// is.
fn measured(state: &Node<'_, '_>, value: Node<'_, '_>) -> bool {
    let on = state.attribute("ActivationState").is_none_or(|a| a == "On");
    let validity = child(value, PM, "MetricQuality").and_then(|q| q.attribute("Validity"));
    on && validity.is_none_or(|v| v == "Vld" || v == "Vldated")
}

/// Reads a notification's envelope.
pub(crate) fn report(xml: &str) -> Result<Report, SdcError> {
    let doc = parse(xml)?;
    let action = doc
        .descendants()
        .find(|n| n.has_tag_name((WSA, "Action")))
        .and_then(|n| n.text())
        .map(str::trim)
        .unwrap_or_default();
    let ms = |v: Option<&str>| v.and_then(|t| t.trim().parse::<i64>().ok());
    if action == WAVEFORM_STREAM {
        let mut out = Vec::new();
        for s in doc.descendants().filter(|n| n.has_tag_name((MSG, "State"))) {
            let (Some(handle), Some(v)) =
                (s.attribute("DescriptorHandle"), child(s, PM, "MetricValue"))
            else {
                continue;
            };
            let Some(t0) = ms(v.attribute("DeterminationTime")) else {
                continue;
            };
            let ok = measured(&s, v);
            let samples = v
                .attribute("Samples")
                .unwrap_or_default()
                .split_whitespace()
                .map(|x| match x.parse::<f32>() {
                    Ok(x) if ok => x,
                    _ => f32::NAN,
                })
                .collect();
            out.push((handle.to_owned(), t0, samples));
        }
        return Ok(Report::Waveform(out));
    }
    if action == EPISODIC_METRIC_REPORT {
        let out = doc
            .descendants()
            .filter(|n| n.has_tag_name((MSG, "MetricState")))
            .filter_map(|s| {
                let handle = s.attribute("DescriptorHandle")?;
                let mv = child(s, PM, "MetricValue");
                let value = mv
                    .filter(|v| measured(&s, *v))
                    .and_then(|v| v.attribute("Value"))
                    .and_then(|v| v.parse::<f32>().ok());
                let at = ms(mv.and_then(|v| v.attribute("DeterminationTime")));
                Some((handle.to_owned(), value, at))
            })
            .collect();
        return Ok(Report::Metrics(out));
    }
    if action == EPISODIC_ALERT_REPORT {
        let out = doc
            .descendants()
            .filter(|n| n.has_tag_name((MSG, "AlertState")))
            .filter(|n| xsi_type(n).is_some_and(|t| t.ends_with("AlertConditionState")))
            .filter_map(|s| {
                let handle = s.attribute("DescriptorHandle")?;
                let present = s.attribute("Presence") == Some("true");
                Some((
                    handle.to_owned(),
                    present,
                    ms(s.attribute("DeterminationTime")),
                ))
            })
            .collect();
        return Ok(Report::Alerts(out));
    }
    if action.ends_with("/SubscriptionEnd") {
        return Ok(Report::End);
    }
    Ok(Report::Other(action.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_soap_envelopes_that_parse() {
        let s = subscribe(
            "http://d/StateEvent",
            "http://h:1/sdc/0/reports",
            "http://h:1/sdc/0/end",
            &[WAVEFORM_STREAM, EPISODIC_ALERT_REPORT],
            15,
        );
        let doc = Document::parse(&s).unwrap();
        let filter = doc
            .descendants()
            .find(|n| n.has_tag_name((WSE, "Filter")))
            .unwrap();
        assert_eq!(filter.text().unwrap().split(' ').count(), 2);
        assert!(s.contains("<wse:Expires>PT15S</wse:Expires>"));
        let id = doc
            .descendants()
            .find(|n| n.has_tag_name((WSA, "MessageID")))
            .unwrap();
        assert_eq!(id.text().unwrap().len(), "urn:uuid:".len() + 36);
        for r in [
            transfer_get("http://d/x"),
            get_mdib("http://d/Get"),
            renew("http://d/m", 15),
            unsubscribe("http://d/m"),
        ] {
            Document::parse(&r).unwrap();
        }
    }

    #[test]
    fn a_fault_is_an_error_whatever_the_status() {
        let f = format!(
            "<s:Envelope xmlns:s=\"{SOAP}\"><s:Body><s:Fault><s:Code><s:Value>s:Receiver</s:Value></s:Code>\
             <s:Reason><s:Text>unknown Subscription identifier</s:Text></s:Reason></s:Fault></s:Body></s:Envelope>"
        );
        let e = check(&f).unwrap_err();
        assert!(e.to_string().contains("unknown Subscription"), "{e}");
        assert!(matches!(check("not xml"), Err(SdcError::Xml(_))));
    }

    /// A GetMdibResponse as a device writes it (its participant prefix `dom`, not `pm`).
    fn mdib_xml() -> String {
        format!(
            "<s12:Envelope xmlns:s12=\"{SOAP}\" xmlns:wsa=\"{WSA}\" xmlns:msg=\"{MSG}\" \
             xmlns:dom=\"{PM}\" xmlns:xsi=\"{XSI}\"><s12:Body><msg:GetMdibResponse><msg:Mdib>\
             <dom:MdDescription><dom:Mds Handle=\"mds0\"><dom:Vmd Handle=\"vmd\">\
             <dom:AlertSystem Handle=\"asy\">\
             <dom:AlertCondition Handle=\"ac.vt\" Kind=\"Phy\"><dom:Type Code=\"199832\"/></dom:AlertCondition>\
             <dom:AlertCondition Handle=\"ac.off\" Kind=\"Tec\"><dom:Type Code=\"196616\"/></dom:AlertCondition>\
             </dom:AlertSystem><dom:Channel Handle=\"ch\">\
             <dom:Metric xsi:type=\"dom:RealTimeSampleArrayMetricDescriptor\" Handle=\"ecg.ii\" SamplePeriod=\"PT0.002S\"><dom:Type Code=\"131330\"/></dom:Metric>\
             <dom:Metric xsi:type=\"dom:RealTimeSampleArrayMetricDescriptor\" Handle=\"pleth\" SamplePeriod=\"PT0.008S\"><dom:Type Code=\"150452\"/></dom:Metric>\
             <dom:Metric xsi:type=\"dom:NumericMetricDescriptor\" Handle=\"pr\"><dom:Type Code=\"149514\"/></dom:Metric>\
             <dom:Metric xsi:type=\"dom:NumericMetricDescriptor\" Handle=\"hr\"><dom:Type Code=\"147842\"/></dom:Metric>\
             <dom:Metric xsi:type=\"dom:NumericMetricDescriptor\" Handle=\"sat\"><dom:Type Code=\"150456\"/></dom:Metric>\
             <dom:Metric xsi:type=\"dom:NumericMetricDescriptor\" Handle=\"rr\"><dom:Type Code=\"151562\"/></dom:Metric>\
             </dom:Channel></dom:Vmd></dom:Mds></dom:MdDescription><dom:MdState>\
             <dom:State xsi:type=\"dom:AlertConditionState\" DescriptorHandle=\"ac.vt\" Presence=\"true\" DeterminationTime=\"1700000000000\"/>\
             </dom:MdState></msg:Mdib></msg:GetMdibResponse></s12:Body></s12:Envelope>"
        )
    }

    #[test]
    fn an_mdib_gives_its_ecg_leads_heart_rate_spo2_and_physiological_alarms() {
        let m = mdib(&mdib_xml()).unwrap();
        // The plethysmogram (no ECG code) is no lead; the technical condition no alarm.
        assert_eq!(
            m.leads,
            [Lead {
                handle: "ecg.ii".into(),
                name: "II".into(),
                period_ms: 2.0
            }]
        );
        // The ECG's heart rate (not the pulse rate before it) and SpO2; not the respiration.
        assert_eq!(
            m.vitals,
            vec![("hr".to_string(), "hr"), ("sat".to_string(), "spo2")]
        );
        assert_eq!(m.alerts, [("ac.vt".to_string(), "199832".to_string())]);
        assert_eq!(
            m.presence,
            [("ac.vt".to_string(), true, Some(1_700_000_000_000))]
        );
        // A device with no ECG lead is refused.
        let none = mdib_xml().replace("131330", "150452");
        assert_eq!(
            mdib(&none),
            Err(SdcError::Missing("ECG waveform (an MDC_ECG lead)"))
        );
    }

    #[test]
    fn reports_give_samples_values_and_presence() {
        let wrap = |action: &str, body: &str| {
            format!(
                "<s12:Envelope xmlns:s12=\"{SOAP}\" xmlns:wsa=\"{WSA}\" xmlns:msg=\"{MSG}\" \
                 xmlns:dom=\"{PM}\" xmlns:xsi=\"{XSI}\"><s12:Header><wsa:Action>{action}</wsa:Action>\
                 </s12:Header><s12:Body>{body}</s12:Body></s12:Envelope>"
            )
        };
        let wave = wrap(
            WAVEFORM_STREAM,
            "<msg:WaveformStream><msg:State DescriptorHandle=\"ecg.ii\">\
             <dom:MetricValue DeterminationTime=\"1700000000000\" Samples=\"0 0.001 -0.25\"/>\
             </msg:State></msg:WaveformStream>",
        );
        assert_eq!(
            report(&wave),
            Ok(Report::Waveform(vec![(
                "ecg.ii".into(),
                1_700_000_000_000,
                vec![0.0, 0.001, -0.25]
            )]))
        );
        let alert = wrap(
            EPISODIC_ALERT_REPORT,
            "<msg:EpisodicAlertReport><msg:ReportPart>\
             <msg:AlertState xsi:type=\"dom:AlertConditionState\" DescriptorHandle=\"ac.vt\" \
             Presence=\"false\" DeterminationTime=\"1700000009000\"/>\
             <msg:AlertState xsi:type=\"dom:AlertSignalState\" DescriptorHandle=\"as\" Presence=\"Off\"/>\
             </msg:ReportPart></msg:EpisodicAlertReport>",
        );
        assert_eq!(
            report(&alert),
            Ok(Report::Alerts(vec![(
                "ac.vt".into(),
                false,
                Some(1_700_000_009_000)
            )]))
        );
        let metric = wrap(
            EPISODIC_METRIC_REPORT,
            "<msg:EpisodicMetricReport><msg:ReportPart>\
             <msg:MetricState xsi:type=\"dom:NumericMetricState\" DescriptorHandle=\"hr\">\
             <dom:MetricValue Value=\"180\" DeterminationTime=\"1700000001000\"/></msg:MetricState>\
             <msg:MetricState xsi:type=\"dom:NumericMetricState\" DescriptorHandle=\"sat\">\
             <dom:MetricValue Value=\"71\" DeterminationTime=\"1700000001000\">\
             <dom:MetricQuality Validity=\"Inv\"/></dom:MetricValue></msg:MetricState>\
             <msg:MetricState xsi:type=\"dom:NumericMetricState\" DescriptorHandle=\"pr\" ActivationState=\"Off\">\
             <dom:MetricValue Value=\"60\" DeterminationTime=\"1700000001000\">\
             <dom:MetricQuality Validity=\"Vld\"/></dom:MetricValue></msg:MetricState>\
             </msg:ReportPart></msg:EpisodicMetricReport>",
        );
        // A value its device flags (invalid, or the metric switched off) is absent.
        let at = Some(1_700_000_001_000);
        assert_eq!(
            report(&metric),
            Ok(Report::Metrics(vec![
                ("hr".into(), Some(180.0), at),
                ("sat".into(), None, at),
                ("pr".into(), None, at),
            ]))
        );
        let flagged = wave.replace(
            "Samples=\"0 0.001 -0.25\"/>",
            "Samples=\"0 0.001 -0.25\"><dom:MetricQuality Validity=\"Qst\"/></dom:MetricValue>",
        );
        let Ok(Report::Waveform(w)) = report(&flagged) else {
            panic!("{flagged}")
        };
        assert!(w[0].2.iter().all(|x| x.is_nan()), "{w:?}");
        let end = wrap(
            &format!("{WSE}/SubscriptionEnd"),
            "<wse:SubscriptionEnd xmlns:wse=\"http://schemas.xmlsoap.org/ws/2004/08/eventing\"/>",
        );
        assert_eq!(report(&end), Ok(Report::End));
        assert!(matches!(report("<not xml"), Err(SdcError::Xml(_))));
    }

    #[test]
    fn leads_are_named_by_their_codes_and_periods_read() {
        assert_eq!(lead_name("131330"), Some("II"));
        assert_eq!(lead_name("131075"), Some("V1"));
        assert_eq!(lead_name("150456"), None);
        assert_eq!(period_ms("PT0.002S"), Some(2.0));
        assert_eq!(period_ms("PT0.004S"), Some(4.0));
        assert_eq!(period_ms("P1D"), None);
    }
}
