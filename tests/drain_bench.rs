//! `holmes bench --drain` at a tiny size (three beds, a five-minute outage) against the peers
//! the link tests use: every queued message arrives, none twice, each bed's in order. The
//! drain's speed is a benchmark (BENCHMARKS.md), never asserted here.

mod common;
mod fhir_server;
mod hl7_receiver;

use serde_json::Value;

#[test]
fn a_small_outage_drains_whole_once_and_in_each_beds_order() {
    let mut args = vec!["bench", "--drain", "--beds", "3", "--outage-minutes", "5"];
    if hl7_receiver::hl7_available("drain_bench (HL7)") {
        args.extend(["--link", "hl7"]);
    }
    if fhir_server::fhir_available("drain_bench (FHIR)") {
        args.extend(["--link", "fhir"]);
    }
    if args.len() == 6 {
        return;
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .current_dir(common::root())
        .args(&args)
        .args(["--drain-timeout", "120", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reports.len(), (args.len() - 6) / 2);
    for r in &reports {
        let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
        // Five one-minute cadences of three beds: one HL7 message, or two FHIR resources
        // (risk score and heart rate), each.
        let per = if r["link"] == "fhir" { 2 } else { 1 };
        assert_eq!(n("queued"), 15 * per, "{r}");
        assert_eq!(r["drained"], true, "{r}");
        assert_eq!(n("delivered"), n("queued"), "{r}");
        assert_eq!(n("lost"), 0, "{r}");
        assert_eq!(n("duplicates"), 0, "{r}");
        assert_eq!(n("out_of_order_beds"), 0, "{r}");
        assert_eq!(n("parked") + n("dropped"), 0, "{r}");
        // The daemon is a child process: its memory is its own.
        assert!(r["daemon_peak_rss_mb"].as_f64().unwrap() > 1.0, "{r}");
    }
}
