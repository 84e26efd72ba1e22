//! Rust source as the cycle check reads it: the code of a file with comments, strings and
//! `#[cfg(test)]` items blanked, the files those items declare, every path rooted at
//! `crate::`, `super::` or `self::` (use groups spread out), inline modules, and a path made
//! absolute from the module it is written in.

use std::path::{Path, PathBuf};

/// The code of a file with its comments, strings and character literals blanked byte for
/// byte (so offsets and line numbers stay those of the file).
pub(crate) fn blank(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let wipe = |from: usize, to: usize, out: &mut Vec<u8>| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let start_of_token = i == 0 || !ident(b[i - 1]);
        if b[i..].starts_with(b"//") {
            let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
            wipe(i, end, &mut out);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            wipe(i, j, &mut out);
            i = j;
        } else if start_of_token && (b[i] == b'r' || b[i..].starts_with(b"br")) && {
            let k = i + if b[i] == b'r' { 1 } else { 2 };
            let hashes = b[k..].iter().take_while(|&&c| c == b'#').count();
            b.get(k + hashes) == Some(&b'"')
        } {
            let k = i + if b[i] == b'r' { 1 } else { 2 };
            let hashes = b[k..].iter().take_while(|&&c| c == b'#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let body = k + hashes + 1;
            let end = text[body..]
                .find(&close)
                .map_or(b.len(), |n| body + n + close.len());
            wipe(i, end, &mut out);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            wipe(i, j + 1, &mut out);
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{..}'), or a lifetime ('a), left alone.
            let end = if b.get(i + 1) == Some(&b'\\') {
                text.get(i + 3..)
                    .and_then(|t| t.find('\''))
                    .map(|n| i + 3 + n + 1)
            } else {
                text[i + 1..]
                    .chars()
                    .next()
                    .map(|c| i + 1 + c.len_utf8())
                    .filter(|&j| b.get(j) == Some(&b'\''))
                    .map(|j| j + 1)
            };
            match end {
                Some(end) => {
                    wipe(i, end, &mut out);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// The end of the item that starts at `i` of blanked code: its `;`, or its closing `}` (a
/// `use` ends at its `;` whatever braces it holds).
pub(crate) fn item_end(code: &str, i: usize) -> usize {
    let b = code.as_bytes();
    let is_use = code[i..].trim_start().starts_with("use ")
        || code[i..].trim_start().starts_with("pub(crate) use ");
    let mut depth = 0i32;
    for (j, &c) in b.iter().enumerate().skip(i) {
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b'{' if depth == 0 && !is_use => {
                let mut braces = 0;
                for (k, &c) in b.iter().enumerate().skip(j) {
                    match c {
                        b'{' => braces += 1,
                        b'}' => braces -= 1,
                        _ => {}
                    }
                    if braces == 0 {
                        return k + 1;
                    }
                }
                return b.len();
            }
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b';' if depth == 0 => return j + 1,
            _ => {}
        }
    }
    b.len()
}

/// Blanked code without its `#[cfg(test)]` items, and the files those items declare
/// (`mod tests;`, with its `#[path]`), as paths beside `file`.
pub(crate) fn without_tests(file: &Path, text: &str) -> (String, Vec<PathBuf>) {
    let mut code = blank(text).into_bytes();
    let mut test_files = Vec::new();
    let here = file.parent().unwrap();
    let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
    let children = if stem == "mod" || stem == "lib" || stem == "main" {
        here.to_path_buf()
    } else {
        here.join(&stem)
    };
    let mut from = 0;
    while let Some(n) = std::str::from_utf8(&code[from..])
        .unwrap()
        .find("#[cfg(test)]")
    {
        let at = from + n;
        let mut i = at + "#[cfg(test)]".len();
        let mut path_attr = None;
        loop {
            let s = std::str::from_utf8(&code[i..]).unwrap();
            let skip = s.len() - s.trim_start().len();
            i += skip;
            if !code[i..].starts_with(b"#[") {
                break;
            }
            let end = i + std::str::from_utf8(&code[i..]).unwrap().find(']').unwrap() + 1;
            let attr = &text[i..end];
            if let Some(p) = attr.strip_prefix("#[path = \"") {
                path_attr = Some(p.trim_end_matches("\"]").to_owned());
            }
            i = end;
        }
        let end = item_end(std::str::from_utf8(&code).unwrap(), i);
        let item = std::str::from_utf8(&code[i..end]).unwrap().trim();
        if let Some(name) = item
            .strip_prefix("mod ")
            .or_else(|| item.strip_prefix("pub(crate) mod "))
            .or_else(|| item.strip_prefix("pub mod "))
            .and_then(|m| m.strip_suffix(';'))
        {
            test_files.push(match &path_attr {
                Some(p) => here.join(p),
                None => children.join(format!("{}.rs", name.trim())),
            });
            test_files.push(children.join(name.trim()).join("mod.rs"));
        }
        for c in &mut code[at..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    (String::from_utf8(code).unwrap(), test_files)
}

/// Every path that starts `crate::`, `super::` or `self::` in blanked code, with its offset,
/// its `{..}` groups spread out: `super::{a::X, b}` -> `super::a::X`, `super::b`.
pub(crate) fn rooted_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    fn ident_at(s: &str, i: usize) -> Option<&str> {
        let end = s[i..]
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(s.len(), |n| i + n);
        (end > i).then(|| &s[i..end])
    }
    fn skip_ws(s: &str, i: usize) -> usize {
        i + (s[i..].len() - s[i..].trim_start().len())
    }
    /// The tree at `i` below `prefix`: its paths.
    fn tree(s: &str, mut i: usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
        loop {
            i = skip_ws(s, i);
            if s[i..].starts_with('{') {
                i += 1;
                loop {
                    i = skip_ws(s, i);
                    if s[i..].starts_with('}') {
                        return i + 1;
                    }
                    if s[i..].starts_with("self") && ident_at(s, i) == Some("self") {
                        out.push(prefix.clone());
                        i += 4;
                        // `self as x`
                        while i < s.len() && !matches!(s.as_bytes()[i], b',' | b'}') {
                            i += 1;
                        }
                    } else {
                        i = tree(s, i, prefix.clone(), out);
                        while i < s.len() && !matches!(s.as_bytes()[i], b',' | b'}') {
                            i += 1;
                        }
                    }
                    if s[i..].starts_with(',') {
                        i += 1;
                    }
                }
            }
            if s[i..].starts_with('*') {
                out.push(prefix);
                return i + 1;
            }
            let Some(id) = ident_at(s, i) else {
                out.push(prefix);
                return i;
            };
            prefix.push(id.to_owned());
            i += id.len();
            let j = skip_ws(s, i);
            if s[j..].starts_with("::") && !s[j + 2..].trim_start().starts_with('<') {
                i = j + 2;
            } else {
                out.push(prefix);
                return i;
            }
        }
    }
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let head = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|h| code[i..].starts_with(h));
        let token_start =
            i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b"_:$".contains(&b[i - 1]));
        match head {
            Some(_) if token_start => {
                let mut paths = Vec::new();
                let end = tree(code, i, Vec::new(), &mut paths);
                out.extend(paths.into_iter().map(|p| (i, p)));
                i = end.max(i + 1);
            }
            _ => i += 1,
        }
    }
    out
}

/// The spans of inline modules (`mod x { .. }`) in blanked code, with their names.
pub(crate) fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(n) = code[from..].find("mod ") {
        let at = from + n;
        from = at + 4;
        if at > 0
            && (code.as_bytes()[at - 1].is_ascii_alphanumeric() || code.as_bytes()[at - 1] == b'_')
        {
            continue;
        }
        let rest = &code[at + 4..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if rest[name.len()..].trim_start().starts_with('{') {
            out.push((at, item_end(code, at), name));
        }
    }
    out
}

/// A path as it is written in `module` (`super::x`, `crate::a::b`), absolute.
pub(crate) fn absolute(module: &[String], path: &[String]) -> Vec<String> {
    let mut at: Vec<String> = module.to_vec();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            at.clear();
            rest = &path[1..];
        }
        Some("self") => rest = &path[1..],
        _ => {}
    }
    while rest.first().is_some_and(|p| p == "super") {
        at.pop();
        rest = &rest[1..];
    }
    at.extend(rest.iter().cloned());
    at
}
