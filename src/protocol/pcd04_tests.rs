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
        (Some(_), Ok(Report::Alarms(mut a))) if a.len() == 1 => a.remove(0),
        other => panic!("not one alarm: {other:?}"),
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
    // A follow-up names the first report's alarm in OBR-29 (an EIP: the placer's and the
    // filler's EI, each with its namespace as subcomponents).
    let follow = |eip: &str| {
        report("continue", "active", "").replace(
            "20251127080000.250+0000|",
            &format!("20251127080000.250+0000||||||||||||||||||||||{eip}|"),
        )
    };
    assert_eq!(alarm(&follow("AL-P&GW^AL-0&GW")).id, "AL-0");
    assert_eq!(alarm(&follow("AL-0&GW")).id, "AL-0");
    // An end before the start is refused.
    let r = refusal(&report("end", "inactive", "20251127075959+0000"));
    assert_eq!((r.code, r.location.as_str()), (AckCode::Error, "OBR^1^8"));
    // The header an answer echoes.
    let (h, _) = read(&report("start", "active", ""));
    let h = h.unwrap();
    assert_eq!(h.control_id, "MSG-77");
    assert!(h.enhanced);
    assert_eq!(h.sender.0[..2], ["GW", "0123456789ABCDEF"]);
    assert_eq!(h.sender.1[0], "ICU");
}

#[test]
fn times_keep_their_offset_and_milliseconds() {
    let at = |v: &str| time(v, 0, "OBR^1^7", "the time");
    assert_eq!(at("20251127080000+0000"), Ok(T0));
    assert_eq!(at("20251127090000.250+0100"), Ok(T0 + 250));
    assert_eq!(at("20251127023000-0530"), Ok(T0));
    assert_eq!(at("20251127073000-0030"), Ok(T0));
    assert_eq!(at("20251127080000.1234+0000"), Ok(T0 + 123));
    assert_eq!(at("20251127080000"), Ok(T0));
    assert_eq!(at("20000229120000"), Ok(951_825_600_000));
    // Without an offset, the report's (MSH-7's).
    assert_eq!(time("20251127090000", 60, "x", "t"), Ok(T0));
    for bad in [
        "202511270800",
        "20251327080000",
        "20250231080000",
        "20251127240000",
        "20251127080000+05",
        "20251127080000.12345",
        "yesterday",
        "",
    ] {
        let r = at(bad).unwrap_err();
        assert_eq!(r.code, AckCode::Error, "{bad}");
        assert!(r.reason.starts_with("the time"), "{r:?}");
    }
    assert_eq!(offset_of("20251127080000-0030"), Some(-30));
    assert_eq!(offset_of("20251127080000"), None);
}

#[test]
fn a_time_without_an_offset_takes_the_reports() {
    let local = report("start", "active", "")
        .replace("20251127080001+0000", "20251127090001+0100")
        .replace("20251127080000.250+0000", "20251127090000.250");
    assert_eq!(alarm(&local).onset_ms, T0 + 250);
}

#[test]
fn a_report_of_several_alarms_gives_each() {
    let vt = report("start", "active", "");
    let at = vt.find("OBR|").unwrap();
    let second = vt[at..]
        .replace("AL-1^GW", "AL-2^GW")
        .replace("199832^MDC_EVT_ECG_V_TACHY", "199684^MDC_EVT_ECG_ASYSTOLE");
    let both = format!("{vt}\r{second}");
    let (_, r) = read(&both);
    let Ok(Report::Alarms(a)) = r else {
        panic!("{r:?}")
    };
    let got: Vec<(&str, MonitorAlarmKind)> = a.iter().map(|x| (x.id.as_str(), x.kind)).collect();
    assert_eq!(
        got,
        [
            ("AL-1", MonitorAlarmKind::Vt),
            ("AL-2", MonitorAlarmKind::Asystole)
        ]
    );
    // One bad alarm refuses the report, naming which OBR.
    let bad = both.replacen("AL-2^GW|AL-2^GW", "|", 1);
    let r = refusal(&bad);
    assert_eq!(r.location, "OBR^2^3");
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
        ("", "MDC_EVT_ECG_SV_TACHY", "", Tachy),
        ("", "NOM_EVT_ECG_SV_TACHY", "", Tachy),
        ("", "MDC_EVT_ECG_V_FLUTTER", "", Vf),
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
    let r = refusal(&vt.replace("|P|2.6|", "|T|2.6|"));
    assert_eq!((r.code, r.hl7_error), (AckCode::Reject, "202"));
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
    assert_eq!(field(&ok, "MSH.5"), "GW^0123456789ABCDEF^EUI-64");
    assert_eq!(field(&ok, "MSH.7"), "20251127080000.000+0000");
    let original = report("start", "active", "").replace("|AL|NE|", "|||");
    let (h, r) = read(&original.replace("20251127080000.250+0000", "soon"));
    let r = r.unwrap_err();
    let no = ack(h.as_ref(), Err(&r), ("HOLMES", "WARD"), "A-2", T0);
    assert_eq!(field(&no, "MSA.1"), "AE");
    assert_eq!(field(&no, "ERR.2"), "OBR^1^7");
    assert_eq!(field(&no, "ERR.3.1"), "102");
    assert!(field(&no, "ERR.8").contains("\"soon\""), "{no}");
    // Commit answers only where MSH-15 asks for them.
    let (h, _) = read(&report("start", "active", "").replace("|AL|NE|", "|NE|AL|"));
    let ok = ack(h.as_ref(), Ok(()), ("HOLMES", "WARD"), "A-4", T0);
    assert_eq!(field(&ok, "MSA.1"), "AA");
    // A report Holmes could not keep is to be sent again: AR, or CE.
    let again = Refusal::retry("the report could not be kept; send it again");
    let no = ack(None, Err(&again), ("HOLMES", "WARD"), "A-5", T0);
    assert_eq!(field(&no, "MSA.1"), "AR");
    // A long reason is cut.
    let long = Refusal::error("102", "OBR^1^7", "x".repeat(10_000));
    let no = ack(None, Err(&long), ("HOLMES", "WARD"), "A-6", T0);
    assert_eq!(field(&no, "ERR.8").len(), MAX_REASON_CHARS);
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
