//! Checks that the root crate knows no agent by name: everything
//! agent-specific comes from the adapters' registry
//! (`git_session_adapters::registry`), so adding an agent touches its
//! adapter, one registry line, its fixtures and its tests, and nothing here.
//!
//! The check reads `src/**/*.rs` outside comments and `#[cfg(test)]` items
//! and reports, by file and line, every string literal that is an agent's
//! name (or starts with `<name>-`, as hook names do), every
//! `Agent::<Variant>` of a registry agent, every path through an adapter's
//! module (`::<name>::`), and every identifier made of `_`-separated words
//! of which one is the name (`codex_home`; a lone word such as `pi` is
//! some other pi).

use std::path::{Path, PathBuf};

use git_session_adapters::registry::ADAPTERS;

/// One token of Rust source: what the check looks at.
#[derive(Debug, PartialEq)]
enum Token {
    /// A string literal's content, as written (escapes not applied).
    Str(String),
    /// An identifier or keyword.
    Ident(String),
    /// Any other character outside whitespace.
    Punct(char),
}

/// Splits `text` into tokens with their 1-based lines, leaving out
/// comments, whitespace, char literals, lifetimes and numbers' insides.
fn tokens(text: &str) -> Vec<(Token, usize)> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let start_line = line;
        match c[i] {
            '\n' => {
                line += 1;
                i += 1;
            }
            ch if ch.is_whitespace() => i += 1,
            '/' if c.get(i + 1) == Some(&'/') => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '/' if c.get(i + 1) == Some(&'*') => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        line += usize::from(c[i] == '\n');
                        i += 1;
                    }
                }
            }
            '"' => {
                let (s, next) = quoted(&c, i + 1, &mut line);
                out.push((Token::Str(s), start_line));
                i = next;
            }
            'r' | 'b' | 'c' if raw_start(&c, i).is_some() => {
                let (hashes, open) = raw_start(&c, i).expect("checked");
                let mut j = open + 1;
                let mut s = String::new();
                loop {
                    if j >= c.len() {
                        break;
                    }
                    if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
                        j += 1 + hashes;
                        break;
                    }
                    line += usize::from(c[j] == '\n');
                    s.push(c[j]);
                    j += 1;
                }
                out.push((Token::Str(s), start_line));
                i = j;
            }
            'b' | 'c' if c.get(i + 1) == Some(&'"') => {
                let (s, next) = quoted(&c, i + 2, &mut line);
                out.push((Token::Str(s), start_line));
                i = next;
            }
            '\'' => {
                // A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
                if c.get(i + 1) == Some(&'\\') {
                    let mut j = i + 2;
                    while j < c.len() && c[j] != '\'' {
                        j += 1;
                    }
                    i = j + 1;
                } else if c.get(i + 2) == Some(&'\'') {
                    i += 3;
                } else {
                    i += 1;
                    while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                        i += 1;
                    }
                }
            }
            ch if ch.is_alphabetic() || ch == '_' => {
                let mut s = String::new();
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    s.push(c[i]);
                    i += 1;
                }
                out.push((Token::Ident(s), start_line));
            }
            ch if ch.is_ascii_digit() => {
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
            ch => {
                out.push((Token::Punct(ch), start_line));
                i += 1;
            }
        }
    }
    out
}

/// Reads a `"`-quoted string from `i` (just past the quote) to its end;
/// returns the content and the index past the closing quote.
fn quoted(c: &[char], mut i: usize, line: &mut usize) -> (String, usize) {
    let mut s = String::new();
    while i < c.len() && c[i] != '"' {
        if c[i] == '\\' && i + 1 < c.len() {
            s.push(c[i]);
            i += 1;
        }
        *line += usize::from(c[i] == '\n');
        s.push(c[i]);
        i += 1;
    }
    (s, i + 1)
}

/// Returns the number of `#` and the index of the opening quote when a raw
/// string (`r"`, `r#"`, `br#"`, `cr"`) starts at `i`.
fn raw_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return None;
    }
    let mut j = i;
    if c[j] == 'b' || c[j] == 'c' {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some((hashes, j))
}

fn is_punct(t: Option<&(Token, usize)>, ch: char) -> bool {
    matches!(t, Some((Token::Punct(p), _)) if *p == ch)
}

fn is_ident(t: Option<&(Token, usize)>, name: &str) -> bool {
    matches!(t, Some((Token::Ident(s), _)) if s == name)
}

/// Returns the length of a `#[cfg(test)]` (or `#![cfg(test)]`) attribute
/// at `i`, if one starts there.
fn cfg_test_at(t: &[(Token, usize)], i: usize) -> Option<usize> {
    if !is_punct(t.get(i), '#') {
        return None;
    }
    let j = i + 1 + usize::from(is_punct(t.get(i + 1), '!'));
    let ok = is_punct(t.get(j), '[')
        && is_ident(t.get(j + 1), "cfg")
        && is_punct(t.get(j + 2), '(')
        && is_ident(t.get(j + 3), "test")
        && is_punct(t.get(j + 4), ')')
        && is_punct(t.get(j + 5), ']');
    ok.then_some(j + 6 - i)
}

/// Returns the index past the item starting at `i`: up to its `;`, or its
/// `{...}` block.
fn skip_item(t: &[(Token, usize)], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < t.len() {
        match t[i].0 {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            Token::Punct(';') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// What in one file names an agent: `(line, what)`, and the modules it
/// declares under `#[cfg(test)]` (`mod name;`), whose files are tests too.
fn findings(text: &str) -> (Vec<(usize, String)>, Vec<String>) {
    let t = tokens(text);
    let names: Vec<&str> = ADAPTERS.iter().map(|a| a.spec().name()).collect();
    let variants: Vec<String> = ADAPTERS
        .iter()
        .map(|a| format!("{:?}", a.spec().agent))
        .collect();
    let mut found = Vec::new();
    let mut test_mods = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if let Some(len) = cfg_test_at(&t, i) {
            if is_punct(t.get(i + 1), '!') {
                // The whole file is test code.
                return (Vec::new(), test_mods);
            }
            let mut j = i + len;
            while let Some(more) = cfg_test_at(&t, j).or_else(|| {
                // Further attributes on the same item.
                is_punct(t.get(j), '#')
                    .then(|| skip_attribute(&t, j))
                    .flatten()
            }) {
                j += more;
            }
            let end = skip_item(&t, j);
            if let (Some((Token::Ident(m), _)), Some((Token::Ident(n), _))) =
                (t.get(j), t.get(j + 1))
                && m == "mod"
                && is_punct(t.get(j + 2), ';')
            {
                test_mods.push(n.clone());
            }
            i = end;
            continue;
        }
        let (token, line) = &t[i];
        match token {
            Token::Str(s) => {
                if let Some(n) = names
                    .iter()
                    .find(|n| s == *n || s.starts_with(&format!("{n}-")))
                {
                    found.push((*line, format!("string {s:?} names {n}")));
                }
            }
            Token::Ident(s) => {
                let after_path =
                    i >= 2 && is_punct(t.get(i - 1), ':') && is_punct(t.get(i - 2), ':');
                if s == "Agent"
                    && is_punct(t.get(i + 1), ':')
                    && is_punct(t.get(i + 2), ':')
                    && let Some((Token::Ident(v), _)) = t.get(i + 3)
                    && variants.contains(v)
                {
                    found.push((*line, format!("Agent::{v}")));
                    i += 4;
                    continue;
                }
                // A lone word (`pi`, a pattern index) is not taken for a name.
                let named = |n: &&&str| {
                    s.contains('_') && s.split('_').any(|word| word == **n)
                        || s == **n && after_path
                };
                if let Some(n) = names.iter().find(named) {
                    let what = if after_path && is_punct(t.get(i + 1), ':') {
                        format!("path through adapter module ::{s}::")
                    } else {
                        format!("identifier {s} names {n}")
                    };
                    found.push((*line, what));
                }
            }
            Token::Punct(_) => {}
        }
        i += 1;
    }
    (found, test_mods)
}

/// Returns the length of the attribute `#[...]` at `i`.
fn skip_attribute(t: &[(Token, usize)], i: usize) -> Option<usize> {
    if !is_punct(t.get(i + 1), '[') {
        return None;
    }
    let mut depth = 0usize;
    for (k, (tok, _)) in t.iter().enumerate().skip(i + 1) {
        match tok {
            Token::Punct('[') => depth += 1,
            Token::Punct(']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(k + 1 - i);
                }
            }
            _ => {}
        }
    }
    None
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The directory a file's `mod x;` declarations resolve in.
fn module_dir(file: &Path) -> PathBuf {
    let parent = file.parent().unwrap().to_owned();
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib" | "main") => parent,
        Some(stem) => parent.join(stem),
        None => parent,
    }
}

#[test]
fn the_root_crate_names_no_agent_outside_the_registry() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut tests: Vec<PathBuf> = Vec::new();
    let mut report = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let (found, test_mods) = findings(&text);
        for m in test_mods {
            let dir = module_dir(file);
            tests.push(dir.join(format!("{m}.rs")));
            tests.push(dir.join(m).join("mod.rs"));
        }
        let rel = file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap();
        report.extend(
            found
                .into_iter()
                .map(|(line, what)| (file.clone(), format!("{}:{line}: {what}", rel.display()))),
        );
    }
    let report: Vec<String> = report
        .into_iter()
        .filter(|(file, _)| !tests.contains(file))
        .map(|(_, line)| line)
        .collect();
    assert!(
        report.is_empty(),
        "agent knowledge outside the registry (move it into an AgentSpec):\n{}",
        report.join("\n")
    );
}

#[test]
fn the_check_sees_names_in_code_and_not_in_comments_or_tests() {
    let text = r##"
//! "codex" in a doc comment is an example.
/* "claude" in a block comment */
fn f() -> Agent {
    let home = codex_home(); // "pi"
    let (pi, opencode) = (0, 1);
    let s = r#"hermes"#;
    let lifetime: &'static str = "claude-stop";
    let c = '"';
    git_session_adapters::opencode::NATIVE_KEY;
    Agent::Dsh
}
#[cfg(test)]
mod tests {
    fn g() { let _ = ("claude", Agent::Codex); }
}
#[cfg(test)]
mod more;
"##;
    let (found, test_mods) = findings(text);
    let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [5, 7, 8, 10, 11], "{found:?}");
    assert!(found[2].1.contains("claude-stop"), "{found:?}");
    assert!(found[3].1.contains("::opencode::"), "{found:?}");
    assert_eq!(found[4].1, "Agent::Dsh");
    assert_eq!(test_mods, ["more"]);
    assert!(
        findings("#![cfg(test)]\nconst A: &str = \"codex\";\n")
            .0
            .is_empty()
    );
}
