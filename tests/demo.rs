//! `holmes demo` (the README's first command) shows scores for its beds within two hops.

mod common;

#[test]
fn demo_shows_scores_for_every_bed_within_two_hops() {
    let dir = tempfile::tempdir().unwrap();
    // 20x speed: two 30 s hops of signal take 3 s of wall clock; 6 s leaves room.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holmes"))
        .current_dir(common::root())
        .args([
            "demo",
            "--beds",
            "2",
            "--speed",
            "20",
            "--duration",
            "6",
            "--listen",
            "127.0.0.1:0",
            "--db",
        ])
        .arg(dir.path().join("demo.db"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("/api/beds"),
        "prints where to look: {stdout}"
    );
    for bed in ["bed-1", "bed-2"] {
        let scored = stdout
            .lines()
            .filter(|l| l.contains(bed) && l.contains("risk"))
            .count();
        assert!(scored >= 1, "{bed} has no score in {stdout}");
    }
}
