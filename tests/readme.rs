//! The documents' commands against the binary: every `--flag` the README, BENCHMARKS.md,
//! docs/OPERATIONS.md, docs/ZOO.md or docs/DATA.md gives a `holmes` subcommand (in a code
//! block, or in a `holmes ...` code span of its prose) is one that subcommand, or one of its
//! own subcommands, takes. And every configuration key those and docs/ARCHITECTURE.md name
//! (`ward.hop_secs`, `[engine] device`) is one `config/holmes.toml` has.

use std::collections::BTreeMap;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_holmes");

/// The documents whose `holmes` commands are checked: the README, the benchmarks' commands
/// and the reference it points to (the daemon's, the zoo's, the data's).
const COMMAND_DOCS: [&str; 5] = [
    "README.md",
    "BENCHMARKS.md",
    "docs/OPERATIONS.md",
    "docs/ZOO.md",
    "docs/DATA.md",
];

fn help(words: &[&str]) -> String {
    let o = Command::new(BIN)
        .args(words)
        .arg("--help")
        .output()
        .unwrap();
    assert!(o.status.success(), "holmes {words:?} --help failed");
    String::from_utf8(o.stdout).unwrap()
}

/// The subcommands a help text lists under "Commands:" (`help` left out).
fn commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// The `--flags` of a piece of text.
fn flags(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("--") {
        let tail = &rest[i..];
        let end = tail[2..]
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
            .map_or(tail.len(), |e| e + 2);
        let before = rest[..i].chars().last();
        let named = tail[2..].starts_with(|c: char| c.is_ascii_lowercase());
        if named && !before.is_some_and(|c| c.is_alphanumeric() || c == '-') {
            out.push(&tail[..end]);
        }
        rest = &tail[end..];
    }
    out
}

/// The README's `holmes` commands: code-block lines (continuations joined) and prose code
/// spans that begin with `holmes `.
fn readme_commands(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut joined = String::new();
    for line in readme.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            joined.push_str(line.trim_end().trim_end_matches('\\'));
            joined.push(' ');
            if !line.trim_end().ends_with('\\') {
                let cmd = joined.split_whitespace().collect::<Vec<_>>().join(" ");
                joined.clear();
                if let Some(i) = cmd.find("holmes ") {
                    out.push(cmd[i..].to_owned());
                }
            }
        } else {
            out.extend(
                line.split('`')
                    .skip(1)
                    .step_by(2)
                    .filter(|s| s.starts_with("holmes "))
                    .map(String::from),
            );
        }
    }
    out
}

#[test]
fn every_flag_the_readme_gives_a_subcommand_is_one_it_takes() {
    let root = env!("CARGO_MANIFEST_DIR");
    // Each subcommand's help and its own subcommands' helps, together.
    let mut helps: BTreeMap<String, String> = BTreeMap::new();
    for sub in commands(&help(&[])) {
        let mut all = help(&[&sub]);
        for child in commands(&all.clone()) {
            all.push_str(&help(&[&sub, &child]));
        }
        helps.insert(sub, all);
    }
    assert!(helps.len() >= 15, "{:?}", helps.keys());
    let mut checked = 0;
    let mut wrong = Vec::new();
    for doc in COMMAND_DOCS {
        let text = std::fs::read_to_string(format!("{root}/{doc}")).unwrap();
        for cmd in readme_commands(&text) {
            let Some(sub) = cmd.split_whitespace().nth(1) else {
                continue;
            };
            let Some(h) = helps.get(sub) else {
                wrong.push(format!("{doc}: {cmd:?}: holmes has no subcommand {sub:?}"));
                continue;
            };
            for f in flags(&cmd) {
                checked += 1;
                // An option's line in a help begins with it (`-h, --help` or `--json`).
                let taken = h
                    .lines()
                    .any(|l| l.trim_start().starts_with('-') && flags(l).first() == Some(&f));
                if !taken {
                    wrong.push(format!("{doc}: {cmd:?}: holmes {sub} takes no {f}"));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} flags found in {COMMAND_DOCS:?}"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Keys the docs name as retired (refused when found).
const RETIRED_KEYS: [&str; 1] = ["auth.device_tokens"];

/// The configuration key a code span names, as a dotted path: `ward.hop_secs` (a value after
/// ` = ` allowed) or `[engine] device`; `None` where it names none of `sections`.
fn config_key(span: &str, sections: &[String]) -> Option<String> {
    let key = match span.strip_prefix('[') {
        Some(rest) => {
            let (section, tail) = rest.split_once("] ")?;
            format!("{section}.{}", tail.split_whitespace().next()?)
        }
        None => span.split(" = ").next()?.to_owned(),
    };
    let valid = key
        .split('.')
        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
    let first = key.split('.').next()?;
    (valid && key.contains('.') && sections.iter().any(|s| s == first)).then_some(key)
}

#[test]
fn every_config_key_the_docs_name_is_one_the_config_has() {
    let root = env!("CARGO_MANIFEST_DIR");
    let config: toml::Table = std::fs::read_to_string(format!("{root}/config/holmes.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let sections: Vec<String> = config.keys().cloned().collect();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for doc in COMMAND_DOCS.iter().chain(&["docs/ARCHITECTURE.md"]) {
        let text = std::fs::read_to_string(format!("{root}/{doc}")).unwrap();
        for span in text.split('`').skip(1).step_by(2) {
            let Some(key) = config_key(span, &sections) else {
                continue;
            };
            if RETIRED_KEYS.contains(&key.as_str()) {
                continue;
            }
            checked += 1;
            let mut at = Some(&config);
            let parts: Vec<&str> = key.split('.').collect();
            for p in &parts[..parts.len() - 1] {
                at = at.and_then(|t| t.get(*p)).and_then(toml::Value::as_table);
            }
            if !at.is_some_and(|t| t.contains_key(parts[parts.len() - 1])) {
                wrong.push(format!(
                    "{doc}: `{span}` names no key of config/holmes.toml"
                ));
            }
        }
    }
    assert!(checked > 30, "only {checked} keys found in the docs");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_readers_find_what_they_must() {
    assert_eq!(
        flags("holmes x [--a-b N] --c,--d x--e ---"),
        vec!["--a-b", "--c", "--d"]
    );
    let text = "A `holmes zoo list --json` span.\n```sh\nholmes a --b \\\n  --c\n```\n";
    assert_eq!(
        readme_commands(text),
        vec!["holmes zoo list --json", "holmes a --b --c"]
    );
    assert_eq!(
        commands("Usage\n\nCommands:\n  add  Adds\n  help  Help\n\nOptions:\n"),
        vec!["add"]
    );
    let sections = ["ward".to_owned(), "composer".to_owned()];
    let key = |span| config_key(span, &sections);
    assert_eq!(key("ward.hop_secs"), Some("ward.hop_secs".into()));
    assert_eq!(key("ward.hop_secs = 5"), Some("ward.hop_secs".into()));
    assert_eq!(
        key("[composer] max_utilisation"),
        Some("composer.max_utilisation".into())
    );
    assert_eq!(
        key("composer.search.calls"),
        Some("composer.search.calls".into())
    );
    assert_eq!(key("holmes.toml"), None);
    assert_eq!(key("beats.json"), None);
    assert_eq!(key("ward"), None);
}
