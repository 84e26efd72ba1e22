//! The documents stay references: BENCHMARKS.md holds today's figures in at most 500 lines
//! (their history is the lab notebook's, docs/EXPERIMENTS.md), and each row of
//! docs/ARCHITECTURE.md's module table says in at most 400 characters what its module is and
//! owns (the detail is the module's own `//!` doc).

use std::path::Path;

fn read(doc: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap()
}

/// The rows of a document's module table: the table lines whose first cell is a `module`.
fn module_rows(doc: &str) -> Vec<&str> {
    doc.lines()
        .filter(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            cells.len() == 5 && cells[0].is_empty() && cells[1].starts_with('`')
        })
        .collect()
}

#[test]
fn benchmarks_stays_within_500_lines() {
    let n = read("BENCHMARKS.md").lines().count();
    assert!(
        n <= 500,
        "BENCHMARKS.md has {n} lines, over 500: move history to docs/EXPERIMENTS.md"
    );
}

#[test]
fn every_architecture_module_row_stays_within_400_characters() {
    let doc = read("docs/ARCHITECTURE.md");
    let rows = module_rows(&doc);
    assert!(rows.len() >= 15, "only {} module rows found", rows.len());
    let long: Vec<String> = rows
        .iter()
        .filter(|r| r.chars().count() > 400)
        .map(|r| {
            format!(
                "{} ({} characters)",
                &r[..r.find(" |").unwrap_or(0)],
                r.chars().count()
            )
        })
        .collect();
    assert!(
        long.is_empty(),
        "docs/ARCHITECTURE.md's module rows over 400 characters: {long:?}"
    );
}

#[test]
fn the_row_reader_finds_rows() {
    let doc = "| module | role | uses |\n|---|---|---|\n| `core` | data | nothing |\ntext | x\n";
    assert_eq!(module_rows(doc), vec!["| `core` | data | nothing |"]);
}
