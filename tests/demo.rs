//! `holmes demo` (the README's first command) shows scores for its beds within two hops, and
//! its ward page (open without signing in, in the demo) is populated by then.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

/// GET over plain HTTP/1.1; returns the body.
fn get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    assert!(buf.starts_with("HTTP/1.1 200"), "{path}: {buf}");
    buf.split_once("\r\n\r\n")
        .map(|x| x.1.to_owned())
        .unwrap_or_default()
}

#[test]
fn demo_shows_scores_for_every_bed_within_two_hops() {
    let dir = tempfile::tempdir().unwrap();
    // 20x speed: two 30 s hops of signal take 3 s of wall clock; 8 s leaves room.
    let mut child = Command::new(env!("CARGO_BIN_EXE_holmes"))
        .current_dir(common::root())
        .args([
            "demo",
            "--beds",
            "2",
            "--speed",
            "20",
            "--duration",
            "8",
            "--listen",
            "127.0.0.1:0",
            "--db",
        ])
        .arg(dir.path().join("demo.db"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut addr = None;
    let mut scored = std::collections::BTreeSet::new();
    let mut stdout = String::new();
    let mut page = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        stdout.push_str(&line);
        stdout.push('\n');
        if let Some(rest) = line.split("ward dashboard:").nth(1) {
            addr = Some(
                rest.trim()
                    .trim_start_matches("http://")
                    .trim_end_matches('/')
                    .to_owned(),
            );
        }
        for bed in ["bed-1", "bed-2"] {
            if line.contains(bed) && line.contains("risk") {
                scored.insert(bed);
            }
        }
        if scored.len() == 2 && page.is_none() {
            // Both beds have a score: the page and the API it reads show a populated ward.
            let a = addr
                .as_deref()
                .expect("the demo prints the dashboard's address");
            let html = get(a, "/");
            assert!(html.contains("<script src=\"/app.js\""), "{html}");
            let beds: serde_json::Value = serde_json::from_str(&get(a, "/api/beds")).unwrap();
            page = Some(beds);
        }
    }
    let status = child.wait().unwrap();
    let stderr = err.join().unwrap();
    assert!(status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("/api/beds"),
        "prints where to look: {stdout}"
    );
    assert_eq!(scored.len(), 2, "every bed has a score in {stdout}");
    let beds = page.expect("the ward was read while the demo ran");
    let beds = beds["beds"].as_array().unwrap();
    assert_eq!(beds.len(), 2, "{beds:?}");
    for b in beds {
        assert_eq!(b["status"], "live", "{b}");
        assert!(b["latest"]["score"].is_number(), "a populated tile: {b}");
    }
}
