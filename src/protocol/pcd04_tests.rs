use super::*;

/// 2025-11-27 08:00:00 UTC.
const T0: i64 = 1_764_230_400_000;

/// A gateway's VT alarm report laid out as IHE PCD TF-2's ACM examples are: device OBX rows
/// first, then one OBX per facet; `phase`, `state` and the OBR's end as given.
fn report(phase: &str, state: &str, obr8: &str) -> String {
    [
        "MSH|^~\\&|GW^0123456789ABCDEF^EUI-64|ICU||HOLMES|20251127080001+0000||ORU^R40^ORU_R40|MSG-77|P|2.6|||AL|NE||UNICODE UTF-8|||IHE_PCD_ACM_001^IHE PCD^1.3.6.1.4.1.19376.1.6.4.4^ISO",
        "PID|||MRN-1^^^HOSP^MR||Doe^John",
        "PV1||I|ICU1^R7^bed-7",
        &format!("OBR|1|AL-1^GW|AL-1^GW|196616^MDC_EVT_ALARM^MDC|||20251127080000.250+0000|{obr8}"),
        "OBX|1||69837^MDC_DEV_MON_PHYSIO_MULTI_PARAM_MDS^MDC|1.0.0.0|||||||X",
        "OBX|2|ST|199832^MDC_EVT_ECG_V_TACHY^MDC|1.1.1.1.1|VT||||PH~SP||F",
        "OBX|3|ST|147842^MDC_ECG_HEART_RATE^MDC|1.1.1.1.2|185||||||F",
        &format!("OBX|4|ST|68481^MDC_ATTR_EVENT_PHASE^MDC|1.1.1.1.3|{phase}||||||F|||20251127080012+0000"),
        &format!("OBX|5|ST|68482^MDC_ATTR_ALARM_STATE^MDC|1.1.1.1.4|{state}||||||F"),
        "OBX|6|ST|68484^MDC_ATTR_ALARM_PRIORITY^MDC|1.1.1.1.6|PH||||||F",
    ]
    .join("\r")
}

fn alarm(text: &str) -> GatewayAlarm {
    match read(text) {
        (Some(_), Ok(Report::Alarm(a))) => a,
        other => panic!("not an alarm: {other:?}"),
    }
}

fn refusal(text: &str) -> Refusal {
    match read(text) {
        (_, Err(r)) => r,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_gateways_vt_alarm_is_read_with_its_bed_id_onset_and_end() {
    let a = alarm(&report("start", "active", ""));
    assert_eq!(
        a,
        GatewayAlarm {
            bed: "bed-7".into(),
            id: "AL-1".into(),
            kind: MonitorAlarmKind::Vt,
            onset_ms: T0 + 250,
            end_ms: None,
        }
    );
    // A resend while it lasts is the same alarm.
    assert_eq!(alarm(&report("continue", "active", "")), a);
    // Its end: OBR-8, else the phase facet's OBX-14, else MSH-7.
    let ended = alarm(&report("end", "inactive", "20251127080030+0000"));
    assert_eq!(ended.end_ms, Some(T0 + 30_000));
    assert_eq!(
        alarm(&report("end", "active", "")).end_ms,
        Some(T0 + 12_000)
    );
    assert_eq!(
        alarm(&report("update", "inactive", "")).end_ms,
        Some(T0 + 12_000)
    );
    // A follow-up names the first report's alarm in OBR-29.
    let follow = report("continue", "active", "").replace(
        "20251127080000.250+0000|",
        "20251127080000.250+0000||||||||||||||||||||||AL-0^GW|",
    );
    assert_eq!(alarm(&follow).id, "AL-0");
    // The header an answer echoes.
    let (h, _) = read(&report("start", "active", ""));
    let h = h.unwrap();
    assert_eq!(h.control_id, "MSG-77");
    assert!(h.enhanced);
    assert_eq!(h.sender.1, "ICU");
}

#[test]
fn times_keep_their_offset_and_milliseconds() {
    let at = |v: &str| time(v, "OBR^1^7", "t");
    assert_eq!(at("20251127080000+0000"), Ok(T0));
    assert_eq!(at("20251127090000.250+0100"), Ok(T0 + 250));
    assert_eq!(at("20251127023000-0530"), Ok(T0));
    assert_eq!(at("20251127080000"), Ok(T0));
    assert_eq!(at("20000229120000"), Ok(951_825_600_000));
    for bad in ["202511270800", "20251327080000", "yesterday", ""] {
        let r = at(bad).unwrap_err();
        assert_eq!(r.code, AckCode::Error, "{bad}");
        assert!(r.reason.contains('t'), "{r:?}");
    }
}

#[test]
fn kinds_follow_the_mdc_codes_and_names_vendors_use() {
    use MonitorAlarmKind::*;
    for (code, name, value, kind) in [
        ("199832", "MDC_EVT_ECG_V_TACHY", "", Vt),
        ("", "MDC_EVT_ECG_V_TACHY", "", Vt),
        ("61444", "NOM_EVT_ECG_V_FIB_TACHY", "", Vf),
        ("", "MDC_EVT_ECG_V_FIB", "", Vf),
        ("", "MDC_EVT_ECG_V_FLUTTER", "", Vf),
        (
            "HOLMES-MONITOR-VF",
            "Ventricular fibrillation or flutter",
            "",
            Vf,
        ),
        ("199684", "MDC_EVT_ECG_ASYSTOLE", "", Asystole),
        ("199694", "MDC_EVT_ECG_BRADY_EXTREME", "", Brady),
        ("199692", "", "", Brady),
        ("199730", "MDC_EVT_ECG_TACHY_EXTREME", "", Tachy),
        ("199870", "MDC_EVT_ECG_SINUS_TACHY", "", Tachy),
        ("199874", "MDC_EVT_ECG_ARRHY", "", Other),
        ("196616", "MDC_EVT_ALARM", "MDC_EVT_ECG_LEAD_OFF", Other),
        ("150456", "MDC_PULS_OXIM_SAT_O2", "", Other),
    ] {
        assert_eq!(kind_of(code, name, value), kind, "{code} {name} {value}");
    }
}

#[test]
fn what_is_not_an_alarm_report_is_refused_saying_where() {
    let vt = report("start", "active", "");
    let adt = vt.replace("ORU^R40^ORU_R40", "ADT^A01^ADT_A01");
    let r = refusal(&adt);
    assert_eq!((r.code, r.hl7_error), (AckCode::Reject, "200"));
    assert!(r.reason.contains("ADT^A01"), "{r:?}");
    let r = refusal(&vt.replace("|MSG-77|", "||"));
    assert_eq!((r.code, r.location.as_str()), (AckCode::Reject, "MSH^1^10"));
    let r = refusal("this is not HL7");
    assert_eq!(r.code, AckCode::Reject);
    assert_eq!(read("this is not HL7").0, None);
    let r = refusal(&vt.replace("PV1||I|ICU1^R7^bed-7", "PV1||I|"));
    assert_eq!((r.code, r.location.as_str()), (AckCode::Error, "PV1^1^3"));
    // The point of care names the bed where PL.3 is empty.
    let ward_only = vt.replace("ICU1^R7^bed-7", "bed-9");
    assert_eq!(alarm(&ward_only).bed, "bed-9");
    let r = refusal(&vt.replace("20251127080000.250+0000", "soon"));
    assert_eq!((r.code, r.location.as_str()), (AckCode::Error, "OBR^1^7"));
    let r = refusal(&vt.replace("AL-1^GW|AL-1^GW", "|"));
    assert_eq!((r.code, r.location.as_str()), (AckCode::Error, "OBR^1^3"));
    let long = format!("|{}^GW|", "x".repeat(65));
    let r = refusal(&vt.replace("|AL-1^GW|AL-1^GW|", &format!("|{long}")));
    assert_eq!(r.hl7_error, "102");
    let no_event = vt
        .replace("1.1.1.1.1|VT", "1.1.1.1.9|VT")
        .replace("199832^MDC_EVT_ECG_V_TACHY", "199832^SOMETHING");
    let r = refusal(&no_event);
    assert_eq!((r.code, r.location.as_str()), (AckCode::Error, "OBX"));
}

#[test]
fn a_keep_alive_carries_no_alarm() {
    let ka = [
        "MSH|^~\\&|HOLMES|WARD|GW|ICU|20251127080000.000+0000||ORU^R40^ORU_R40|K-1|P|2.6|||AL|NE",
        "PID|1",
        "OBR|1|||HOLMES-KEEP-ALIVE^Keep-alive^99HOLMES|||20251127080000.000+0000",
    ]
    .join("\r");
    assert_eq!(read(&ka).1, Ok(Report::KeepAlive));
}

#[test]
fn answers_echo_the_control_id_in_the_reports_mode_with_the_reason() {
    let field = |m: &str, q: &str| {
        let msg = hl7_parser::parse_message(m).unwrap();
        value(&msg, q)
    };
    let (h, _) = read(&report("start", "active", ""));
    let ok = ack(h.as_ref(), Ok(()), ("HOLMES", "WARD"), "A-1", T0);
    assert_eq!(field(&ok, "MSH.9"), "ACK^R40^ACK");
    assert_eq!(field(&ok, "MSA.1"), "CA");
    assert_eq!(field(&ok, "MSA.2"), "MSG-77");
    assert_eq!(field(&ok, "MSH.10"), "A-1");
    assert_eq!(field(&ok, "MSH.6"), "ICU");
    assert_eq!(field(&ok, "MSH.7"), "20251127080000.000+0000");
    let original = report("start", "active", "").replace("|AL|NE|", "|||");
    let (h, r) = read(&original.replace("20251127080000.250+0000", "soon"));
    let r = r.unwrap_err();
    let no = ack(h.as_ref(), Err(&r), ("HOLMES", "WARD"), "A-2", T0);
    assert_eq!(field(&no, "MSA.1"), "AE");
    assert_eq!(field(&no, "ERR.2"), "OBR^1^7");
    assert_eq!(field(&no, "ERR.3.1"), "102");
    assert!(field(&no, "ERR.8").contains("\"soon\""), "{no}");
    let (h, r) = read("garbage");
    let no = ack(
        h.as_ref(),
        Err(&r.unwrap_err()),
        ("HOLMES", "WARD"),
        "A-3",
        T0,
    );
    assert_eq!(field(&no, "MSA.1"), "AR");
    assert_eq!(field(&no, "MSA.2"), "");
}
