//! The layer order of `src/`, held by reading the code's own `crate::` paths: a module may use
//! only modules of lower layers (and its own unit), and the training side and the serving
//! side never use each other. `src/lib.rs` draws the same order, and docs/ARCHITECTURE.md's
//! module table names what each unit uses. Inside a folder, no import cycle among its files
//! (a file using a sibling through `crate::` or `super::` paths, tests left out). Also: no
//! source file over 700 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The units, bottom layer first. Units in one layer may not use each other.
const LAYERS: &[&[&str]] = &[
    &["core"],
    &["config"],
    &["alarm", "protocol", "signal"],
    &["zoo"],
    &["training"],
    &["serving::store"],
    &["serving::engine"],
    &["serving::ward"],
    &["serving::ingest"],
    &["composer"],
    &["board"],
    &["dashboard", "outbound"],
    &["http"],
    &["appliance"],
    &["tools"],
    &["cli"],
];

/// Units of the serving side, which must not reach the training side.
const SERVING_SIDE: &[&str] = &[
    "serving::store",
    "serving::engine",
    "serving::ward",
    "serving::ingest",
    "composer",
    "board",
    "dashboard",
    "outbound",
    "http",
    "appliance",
];

fn rank(unit: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| l.contains(&unit))
        .unwrap_or_else(|| panic!("unit {unit} is not in LAYERS"))
}

/// The unit a module path (`serving::engine::plan`) belongs to: the longest listed prefix.
fn unit_of(path: &str) -> Option<&'static str> {
    LAYERS
        .iter()
        .flat_map(|l| l.iter().copied())
        .filter(|u| path == *u || path.starts_with(&format!("{u}::")))
        .max_by_key(|u| u.len())
}

/// The module path of a source file: `src/serving/engine/mod.rs` -> `serving::engine`.
fn module_of(file: &Path, src: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Code of a line without its comment (`//` not preceded by `:`, so URLs in strings stay).
fn code_of(line: &str) -> &str {
    let b = line.as_bytes();
    for i in 0..b.len().saturating_sub(1) {
        if b[i] == b'/' && b[i + 1] == b'/' && (i == 0 || b[i - 1] != b':') {
            return &line[..i];
        }
    }
    line
}

/// Every `crate::a::b...` path in a line of code, as `a::b...`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        let tail = &rest[i + "crate::".len()..];
        let end = tail
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            out.push(tail[..end].trim_end_matches(':').to_owned());
        }
        rest = &tail[end..];
    }
    out
}

/// One `crate::` path in the code of `src/`: where it is, the unit whose code it is in, the
/// path, and the unit it names (`None`: none).
struct Use {
    at: String,
    from: &'static str,
    path: String,
    to: Option<&'static str>,
}

/// Every `crate::` path in the code of `src/` (comments left out), by unit.
fn uses() -> Vec<Use> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in &files {
        let module = module_of(f, &src);
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(from) = unit_of(&module) else {
            // A folder of units (`serving`) holds only their declarations.
            let parent = LAYERS
                .iter()
                .flat_map(|l| l.iter())
                .any(|u| u.starts_with(&format!("{module}::")));
            assert!(parent, "{} is in no unit of LAYERS", f.display());
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            for path in crate_paths(code_of(line)) {
                out.push(Use {
                    at: format!("{}:{}", f.display(), n + 1),
                    from,
                    to: unit_of(&path),
                    path,
                });
            }
        }
    }
    out
}

#[test]
fn imports_only_run_down_the_layers() {
    let mut wrong = Vec::new();
    for u in uses() {
        let Some(to) = u.to else {
            wrong.push(format!("{}: crate::{} names no unit", u.at, u.path));
            continue;
        };
        if to == u.from {
            continue;
        }
        let upward = rank(to) >= rank(u.from);
        let crosses = SERVING_SIDE.contains(&u.from) && to == "training";
        if upward || crosses {
            wrong.push(format!(
                "{}: {} uses crate::{} ({to}), which is not below it",
                u.at, u.from, u.path
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layer order:\n{}",
        wrong.join("\n")
    );
}

/// Pairs (user, used) the layer order allows that must still not be: the page shows what the
/// board and the served plan publish and chooses nothing, so it reaches neither the composer
/// nor the engine.
const NEVER: &[(&str, &str)] = &[("dashboard", "composer"), ("dashboard", "serving::engine")];

#[test]
fn the_page_reaches_neither_the_composer_nor_the_engine() {
    let wrong: Vec<String> = uses()
        .into_iter()
        .filter(|u| {
            NEVER
                .iter()
                .any(|&(from, to)| u.from == from && u.to == Some(to))
        })
        .map(|u| format!("{}: {} uses crate::{}", u.at, u.from, u.path))
        .collect();
    assert!(
        wrong.is_empty(),
        "uses the layer order allows but the design does not:\n{}",
        wrong.join("\n")
    );
}

/// The units a name in the module table's "uses" column stands for: a unit, a serving unit by
/// its last part (`store`), or `serving` for any of them; other names (a type, a module
/// inside a unit) stand for none.
fn named_units(name: &str) -> Vec<&'static str> {
    let all = LAYERS.iter().flat_map(|l| l.iter().copied());
    if name == "serving" {
        return all.filter(|u| u.starts_with("serving::")).collect();
    }
    all.filter(|u| *u == name || u.strip_prefix("serving::") == Some(name))
        .collect()
}

/// The `code` spans of a Markdown table cell.
fn backticked(cell: &str) -> impl Iterator<Item = &str> {
    cell.split('`').skip(1).step_by(2)
}

#[test]
fn the_architecture_table_names_what_each_unit_uses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let mut used: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for u in uses() {
        if let Some(to) = u.to.filter(|&to| to != u.from) {
            used.entry(u.from).or_default().insert(to);
        }
    }
    let mut rows = BTreeSet::new();
    let mut wrong = Vec::new();
    for line in doc.lines() {
        // | `unit` | role | uses (below it) |
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, unit, _, column, _] = cells[..] else {
            continue;
        };
        let Some(unit) = backticked(unit)
            .next()
            .and_then(unit_of)
            .filter(|u| format!("`{u}`") == unit)
        else {
            continue;
        };
        rows.insert(unit);
        if column.contains("everything") {
            // Held by the layer order alone.
            continue;
        }
        let actual = used.get(unit).cloned().unwrap_or_default();
        let mut allowed = BTreeSet::new();
        for name in backticked(column) {
            let units = named_units(name);
            if units.is_empty() {
                continue;
            }
            if !units.iter().any(|u| actual.contains(u)) {
                wrong.push(format!(
                    "{unit}: the table names `{name}`, which it does not use"
                ));
            }
            allowed.extend(units);
        }
        for to in actual.difference(&allowed) {
            wrong.push(format!("{unit}: uses {to}, which the table does not name"));
        }
    }
    let units: BTreeSet<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    assert_eq!(rows, units, "every unit has its row in the module table");
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md's module table against the code:\n{}",
        wrong.join("\n")
    );
}

/// `file:line` of each line of code (comments left out) in `files` that names one of `names`,
/// read in the part of each file `part` keeps.
fn code_lines_naming<'f>(
    files: impl Iterator<Item = &'f PathBuf>,
    part: impl Fn(&str) -> &str,
    names: &[&str],
) -> Vec<String> {
    files
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            part(&text)
                .lines()
                .enumerate()
                .filter(|(_, l)| names.iter().any(|o| code_of(l).contains(o)))
                .map(|(n, _)| format!("{}:{}", f.display(), n + 1))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Only the store opens SQLite: every other module is handed a store handle or asks the
/// store for a connection (`serving::store::open`, `open_read_only`), so WAL, the busy
/// timeout and the schema are the store's alone.
#[test]
fn only_the_store_opens_the_database() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let store = src.join("serving").join("store");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let wrong = code_lines_naming(
        files.iter().filter(|f| !f.starts_with(&store)),
        |text| text,
        &["Connection::open"],
    );
    assert!(
        wrong.is_empty(),
        "SQLite opened outside the store:\n{}",
        wrong.join("\n")
    );
}

/// The daemon's parts are handed the store's connections, never open their own: outside the
/// store, only the start-up wiring (`appliance::parts`) and the command line's one-shot tools
/// (`cli`, `tools`, and `holmes validate`'s read-only look at the schema version) open one, so
/// the daemon holds three (`tests/connections.rs` counts them).
#[test]
fn the_daemons_parts_are_handed_their_connection() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed = [
        src.join("serving").join("store"),
        src.join("appliance").join("parts.rs"),
        src.join("appliance").join("validate.rs"),
        src.join("cli"),
        src.join("tools"),
    ];
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let opens = [
        "store::open(",
        "Db::open(",
        "StoreReader::open(",
        "open_read_only(",
    ];
    let wrong = code_lines_naming(
        files
            .iter()
            .filter(|f| !allowed.iter().any(|a| f.starts_with(a)))
            .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs")),
        // The code before the file's unit tests.
        |text| text.split("#[cfg(test)]").next().unwrap_or_default(),
        &opens,
    );
    assert!(
        wrong.is_empty(),
        "a connection opened outside the store and the start-up wiring:\n{}",
        wrong.join("\n")
    );
}

/// Each table's migrations live beside the code that owns it, and one list names every owner:
/// a file that creates a table (before its unit tests) defines `MIGRATIONS`, and
/// `appliance/schema.rs` names it (a `schema.rs` by its parent module, which re-exports it).
#[test]
fn every_table_owner_keeps_its_migrations_and_the_schema_names_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let list = std::fs::read_to_string(src.join("appliance").join("schema.rs")).unwrap();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut owners = 0;
    let mut wrong = Vec::new();
    for f in files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
    {
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        if !code.contains("CREATE TABLE") {
            continue;
        }
        owners += 1;
        let mut module = module_of(f, &src);
        if module.ends_with("::schema") && !module.starts_with("appliance") {
            module.truncate(module.len() - "::schema".len());
        }
        if !code.contains("const MIGRATIONS") {
            wrong.push(format!(
                "{}: creates a table outside MIGRATIONS",
                f.display()
            ));
        }
        if !list.contains(&format!("crate::{module}::MIGRATIONS")) {
            wrong.push(format!(
                "{module}: its MIGRATIONS are not in appliance::schema"
            ));
        }
    }
    assert!(owners >= 7, "only {owners} table owners found");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_source_file_over_700_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 700).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over 700 lines: {long:?}");
}

#[test]
fn the_checker_sees_what_it_must() {
    assert_eq!(
        crate_paths(
            "use crate::serving::ward::{Ward, WardSink}; let x = crate::core::time::now_ms();"
        ),
        vec!["serving::ward", "core::time::now_ms"]
    );
    assert_eq!(
        code_of("let u = \"ws://x\"; // crate::cli"),
        "let u = \"ws://x\"; "
    );
    assert_eq!(unit_of("serving::engine::plan"), Some("serving::engine"));
    assert_eq!(unit_of("servingx"), None);
    assert!(rank("core") < rank("cli"));
}

// ---- No import cycle among the files of a folder ----

#[path = "layers/source.rs"]
mod source;

use source::{absolute, blank, inline_modules, rooted_paths, without_tests};

/// One use of a sibling: in folder `folder`, file `from` uses file (or folder) `to`, at `at`.
struct SiblingUse {
    folder: String,
    from: String,
    to: String,
    at: String,
}

/// Every use, outside tests, of a sibling module by a file of `src/`; a folder's own module
/// (`mod.rs`, or `x.rs` beside `x/`) is no sibling of its files.
fn sibling_uses() -> Vec<SiblingUse> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut code = BTreeMap::new();
    let mut tests = BTreeSet::new();
    for f in &files {
        let (c, t) = without_tests(f, &std::fs::read_to_string(f).unwrap());
        code.insert(f.clone(), c);
        tests.extend(t);
    }
    let modules: BTreeSet<String> = files
        .iter()
        .filter(|f| !tests.contains(*f))
        .map(|f| module_of(f, &src))
        .collect();
    let mut out = Vec::new();
    for f in files.iter().filter(|f| !tests.contains(*f)) {
        let module = module_of(f, &src);
        let Some((folder, name)) = module.rsplit_once("::") else {
            continue;
        };
        let code = &code[f];
        let inline = inline_modules(code);
        let parts: Vec<String> = module.split("::").map(str::to_owned).collect();
        for (at, path) in rooted_paths(code) {
            let mut here = parts.clone();
            for (from, to, m) in &inline {
                if (*from..*to).contains(&at) {
                    here.push(m.clone());
                }
            }
            let target = absolute(&here, &path).join("::");
            let Some(sibling) = target.strip_prefix(&format!("{folder}::")) else {
                continue;
            };
            let sibling = sibling.split("::").next().unwrap();
            if sibling != name && modules.contains(&format!("{folder}::{sibling}")) {
                let line = code[..at].matches('\n').count() + 1;
                out.push(SiblingUse {
                    folder: folder.to_owned(),
                    from: name.to_owned(),
                    to: sibling.to_owned(),
                    at: format!("src/{}:{line}", f.strip_prefix(&src).unwrap().display()),
                });
            }
        }
    }
    out
}

/// The strongly connected components of more than one node of a directed graph (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        for u in w.edges.get(v).into_iter().flatten() {
            if !w.index.contains_key(u.as_str()) {
                visit(w, u);
                let l = w.low[v].min(w.low[u.as_str()]);
                w.low.insert(v, l);
            } else if w.stack.contains(&u.as_str()) {
                let l = w.low[v].min(w.index[u.as_str()]);
                w.low.insert(v, l);
            }
        }
        if w.low[v] == w.index[v] {
            let mut scc = Vec::new();
            while let Some(u) = w.stack.pop() {
                scc.push(u.to_owned());
                if u == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                w.out.push(scc);
            }
        }
    }
    let mut w = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.out
}

#[test]
fn no_import_cycle_among_the_files_of_a_folder() {
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let mut at: BTreeMap<(String, String, String), String> = BTreeMap::new();
    for u in sibling_uses() {
        let g = graphs.entry(u.folder.clone()).or_default();
        g.entry(u.from.clone()).or_default().insert(u.to.clone());
        at.entry((u.folder, u.from, u.to)).or_insert(u.at);
    }
    let mut found = Vec::new();
    for (folder, edges) in &graphs {
        for scc in cycles(edges) {
            let mut lines = vec![format!("{folder}: {}", scc.join(", "))];
            for a in &scc {
                for b in edges[a].iter().filter(|b| scc.contains(b)) {
                    let key = (folder.clone(), a.clone(), b.clone());
                    lines.push(format!("  {a} -> {b} ({})", at[&key]));
                }
            }
            found.push(lines.join("\n"));
        }
    }
    assert!(
        found.is_empty(),
        "import cycles among the files of a folder:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_cycle_checker_sees_what_it_must() {
    let code = blank(
        "use super::{a::X, b as c, self}; // super::d\nlet s = \"super::e\"; let c = '{'; let q = '\\'';\n",
    );
    let paths: Vec<String> = rooted_paths(&code)
        .into_iter()
        .map(|(_, p)| p.join("::"))
        .collect();
    assert_eq!(paths, ["super::a::X", "super::b", "super"]);
    let code =
        blank("use crate::x::{\n    y::{Z, W},\n    v,\n};\nfn f<'a>() { crate::q::r::<u8>(); }");
    let paths: Vec<String> = rooted_paths(&code)
        .into_iter()
        .map(|(_, p)| p.join("::"))
        .collect();
    assert_eq!(
        paths,
        [
            "crate::x::y::Z",
            "crate::x::y::W",
            "crate::x::v",
            "crate::q::r"
        ]
    );
    let (code, tests) = without_tests(
        Path::new("src/a/b.rs"),
        "use super::c;\n#[cfg(test)]\nmod tests {\n    use super::d;\n}\n#[cfg(test)]\n#[path = \"b_tests.rs\"]\nmod more;\n",
    );
    assert_eq!(rooted_paths(&code).len(), 1);
    assert!(tests.contains(&PathBuf::from("src/a/b_tests.rs")));
    let m: Vec<String> = ["a", "b"].map(String::from).to_vec();
    let p: Vec<String> = ["super", "c", "X"].map(String::from).to_vec();
    assert_eq!(absolute(&m, &p), ["a", "c", "X"]);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        g.entry(a.into()).or_default().insert(b.into());
    }
    assert_eq!(cycles(&g), vec![vec!["a", "b", "c"]]);
}
