//! The HL7 messages' tests: the documents' samples, the codes, the patient, the answers.

use super::*;

fn field<'m>(m: &'m hl7_parser::Message<'m>, q: &str) -> String {
    m.query(q)
        .map(|r| m.separators.decode(r.raw_value()).to_string())
        .unwrap_or_default()
}

use super::samples::{blocks, drafts};

/// The ```text blocks of a document that hold `kind` (an MSH-9), as segments.
fn samples(doc: &str, kind: &str) -> Vec<Vec<String>> {
    blocks(doc, "text")
        .into_iter()
        .filter(|b| b.contains(kind))
        .map(|b| b.lines().map(str::to_owned).collect())
        .collect()
}

#[test]
fn the_sample_messages_of_the_readme_and_operations_are_what_holmes_renders() {
    let cfg = Hl7Config {
        receiving_application: "GATEWAY".into(),
        receiving_facility: "HOSP".into(),
        equipment_id: "HOLMES^^0050C2FFFE12A3B4^EUI-64".into(),
        ..Hl7Config::default()
    };
    let (t0, o, a) = drafts();
    let segments = |m: String| -> Vec<String> {
        m.split('\r')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let r01 = segments(render(&cfg, &Draft::Observation(o), "1042", t0 + 1_250));
    let r40 = segments(render(&cfg, &Draft::Alarm(a), "1043", t0 + 55_320));
    let monitor = Draft::MonitorAlarm(super::samples::monitor_alarm());
    let monitor = segments(render(&cfg, &monitor, "1044", t0 + 55_910));
    assert_eq!(samples("README.md", "ORU^R01"), vec![r01.clone()]);
    assert_eq!(samples("README.md", "ORU^R40"), vec![r40.clone()]);
    assert_eq!(samples("docs/OPERATIONS.md", "ORU^R01"), vec![r01]);
    // OPERATIONS also shows a monitor's own alarm with Holmes's opinion.
    assert_eq!(samples("docs/OPERATIONS.md", "ORU^R40"), vec![r40, monitor]);
}

#[test]
fn times_are_utc_with_milliseconds() {
    assert_eq!(hl7_time(0), "19700101000000.000+0000");
    // 2024-02-29 23:59:59.123 UTC.
    assert_eq!(hl7_time(1_709_251_199_123), "20240229235959.123+0000");
}

#[test]
fn an_observation_report_carries_the_codes_the_bed_and_the_equipment() {
    let cfg = Hl7Config::default();
    let o = Observation {
        bed: "bed|1^a".into(),
        at_ms: 1_709_251_199_123,
        score: Some(0.8126),
        heart_rate_bpm: Some(72.4),
        risk_alarm: true,
        quality: "scored",
        patient: None,
    };
    let text = render(&cfg, &Draft::Observation(o), "17", 1_709_251_200_000);
    let m = hl7_parser::parse_message(&text).unwrap();
    assert_eq!(field(&m, "MSH.9"), "ORU^R01^ORU_R01");
    assert_eq!(field(&m, "MSH.10"), "17");
    assert_eq!(field(&m, "MSH.12"), "2.6");
    assert_eq!(field(&m, "MSH.21.3"), "1.3.6.1.4.1.19376.1.6.1.1.1");
    // The bed id is escaped into one component and decodes back whole.
    assert_eq!(field(&m, "PV1.3.3"), "bed|1^a");
    assert_eq!(field(&m, "PID.3"), "");
    assert_eq!(field(&m, "OBR.7"), "20240229235959.123+0000");
    let obx: Vec<_> = m.segments().filter(|s| s.name == "OBX").collect();
    assert_eq!(obx.len(), 4);
    assert_eq!(field(&m, "OBX[1].3.1"), "HOLMES-RISK");
    assert_eq!(field(&m, "OBX[1].5"), "0.813");
    assert_eq!(field(&m, "OBX[2].3"), HEART_RATE);
    assert_eq!(field(&m, "OBX[2].5"), "72");
    assert_eq!(field(&m, "OBX[2].6.2"), "MDC_DIM_BEAT_PER_MIN");
    assert_eq!(field(&m, "OBX[2].18.3"), "0000000000000000");
    assert_eq!(field(&m, "OBX[3].5"), "active");
    assert_eq!(field(&m, "OBX[4].5"), "scored");
    assert_eq!(field(&m, "OBX[4].4"), "1.1.1.4");
}

#[test]
fn an_unscored_window_reports_no_score_and_says_why() {
    let cfg = Hl7Config::default();
    let o = Observation {
        bed: "b".into(),
        at_ms: 0,
        score: None,
        heart_rate_bpm: None,
        risk_alarm: false,
        quality: "insufficient_signal",
        patient: None,
    };
    let text = render(&cfg, &Draft::Observation(o), "1", 0);
    let m = hl7_parser::parse_message(&text).unwrap();
    assert_eq!(m.segments().filter(|s| s.name == "OBX").count(), 2);
    assert_eq!(field(&m, "OBX[1].5"), "inactive");
    assert_eq!(field(&m, "OBX[2].5"), "insufficient_signal");
    // Sub-ids are the metrics' own, not their positions.
    assert_eq!(field(&m, "OBX[1].4"), "1.1.1.3");
    assert_eq!(field(&m, "OBX[2].4"), "1.1.1.4");
}

#[test]
fn an_alarm_report_has_seven_facets_with_the_configured_codes() {
    let cfg = Hl7Config {
        facet_phase: "68165^MDC_ATTR_EVENT_PHASE^MDC".into(),
        ..Hl7Config::default()
    };
    let a = AlarmReport {
        alarm_id: 9,
        bed: "b7".into(),
        kind: AlarmKind::Lost,
        phase: Phase::End,
        raised_ms: 1_000,
        at_ms: 61_000,
        inactivation: "alert-acknowledged",
        patient: None,
    };
    let text = render(&cfg, &Draft::Alarm(a), "33", 70_000);
    let m = hl7_parser::parse_message(&text).unwrap();
    assert_eq!(field(&m, "MSH.9"), "ORU^R40^ORU_R40");
    assert_eq!(field(&m, "MSH.21.3"), "1.3.6.1.4.1.19376.1.6.4.4");
    assert_eq!(field(&m, "OBR.2"), "9^HOLMES");
    assert_eq!(field(&m, "OBR.7"), hl7_time(1_000));
    assert_eq!(field(&m, "OBR.8"), hl7_time(61_000));
    let facets: Vec<(String, String, String)> = (1..=7)
        .map(|i| {
            (
                field(&m, &format!("OBX[{i}].4")),
                field(&m, &format!("OBX[{i}].3.1")),
                field(&m, &format!("OBX[{i}].5")),
            )
        })
        .collect();
    let want = [
        ("1.1.1.1.1", "HOLMES-SIGNAL-LOST", "lost"),
        ("1.1.1.1.2", "69965", ""),
        ("1.1.1.1.3", "68165", "end"),
        ("1.1.1.1.4", "68482", "inactive"),
        ("1.1.1.1.5", "68483", "alert-acknowledged"),
        ("1.1.1.1.6", "68484", "PM"),
        ("1.1.1.1.7", "68485", "ST"),
    ];
    for (got, want) in facets.iter().zip(want) {
        assert_eq!((got.0.as_str(), got.1.as_str(), got.2.as_str()), want);
    }
    assert_eq!(field(&m, "OBX[1].8"), "PM~ST");
    assert_eq!(field(&m, "OBX[3].14"), hl7_time(61_000));
}

#[test]
fn acks_of_both_modes_and_the_receivers_reason_are_read() {
    let ack = |msa: &str| {
        format!(
            "MSH|^~\\&|R|F|HOLMES|WARD|20260101||ACK^R01^ACK|9|P|2.6\r{msa}\rERR|||207^Application internal error^HL70357|E||||disk \\F\\ full\r"
        )
    };
    let a = parse_ack(ack("MSA|AA|17").as_bytes()).unwrap();
    assert_eq!(
        (a.verdict, a.control_id.as_str()),
        (Verdict::Accepted, "17")
    );
    let a = parse_ack(ack("MSA|CR|18|bad").as_bytes()).unwrap();
    assert_eq!((a.verdict, a.code.as_str()), (Verdict::Refused, "CR"));
    assert_eq!(
        a.reason,
        "bad; 207^Application internal error^HL70357; disk | full"
    );
    let ora = "MSH|^~\\&|R|F|||20260101||ORA^R41^ORA_R41|9|P|2.6\nMSA|AE|19\n";
    let a = parse_ack(ora.as_bytes()).unwrap();
    assert_eq!((a.verdict, a.control_id.as_str()), (Verdict::Refused, "19"));
    assert!(matches!(
        parse_ack(ack("MSA|XX|1").as_bytes()),
        Err(MessageError::BadCode(_))
    ));
    let oru = render(
        &Hl7Config::default(),
        &Draft::Observation(Observation {
            bed: "b".into(),
            at_ms: 0,
            score: None,
            heart_rate_bpm: None,
            risk_alarm: false,
            quality: "scored",
            patient: None,
        }),
        "1",
        0,
    );
    assert!(matches!(
        parse_ack(oru.as_bytes()),
        Err(MessageError::NotAnAck(_))
    ));
    assert!(parse_ack(b"garbage").is_err());
    assert!(matches!(
        parse_ack(&[0xff, 0xfe]),
        Err(MessageError::NotText)
    ));
}

#[test]
fn an_admitted_beds_reports_carry_the_patient_in_pid_3_and_others_none() {
    let cfg = Hl7Config::default();
    let (t0, mut o, mut a) = drafts();
    // The authority is CX.4, an HD: an OID as universal id of type ISO, another URI as one
    // of type URI, anything else the namespace id.
    for (authority, pid3, hd) in [
        (
            "urn:oid:1.2.840.99.7",
            "MRN-00417^^^&1.2.840.99.7&ISO^MR",
            ["", "1.2.840.99.7", "ISO"],
        ),
        (
            "https://h.example/mrn",
            "MRN-00417^^^&https://h.example/mrn&URI^MR",
            ["", "https://h.example/mrn", "URI"],
        ),
        ("HOSP", "MRN-00417^^^HOSP^MR", ["HOSP", "", ""]),
        // Not an OID after all: a URI.
        (
            "urn:oid:1.2.x",
            "MRN-00417^^^&urn:oid:1.2.x&URI^MR",
            ["", "urn:oid:1.2.x", "URI"],
        ),
    ] {
        let who = Arc::new(Patient {
            id: "MRN-00417".into(),
            authority: authority.into(),
        });
        o.patient = Some(who.clone());
        a.patient = Some(who);
        for text in [
            render(&cfg, &Draft::Observation(o.clone()), "1", t0),
            render(&cfg, &Draft::Alarm(a.clone()), "2", t0),
        ] {
            let m = hl7_parser::parse_message(&text).unwrap();
            assert_eq!(field(&m, "PID.1"), "1");
            assert_eq!(field(&m, "PID.3"), pid3);
            assert_eq!(field(&m, "PID.3.1"), "MRN-00417");
            for (k, want) in hd.iter().enumerate() {
                assert_eq!(field(&m, &format!("PID.3.4.{}", k + 1)), *want, "{text}");
            }
            assert_eq!(field(&m, "PID.3.5"), "MR");
            assert_eq!(field(&m, "PV1.3.3"), "bed-7");
            let pid = text.split('\r').find(|s| s.starts_with("PID")).unwrap();
            assert_eq!(pid, format!("PID|1||{pid3}"));
        }
    }
    o.patient = None;
    let text = render(&cfg, &Draft::Observation(o), "3", t0);
    assert!(text.contains("\rPID|1\r"), "{text}");
}
