//! House rules for the project's own code, checked on every `cargo test`:
//! no function in the harness (xtask), the guest tests (selftests), the
//! crate they share (guest-common) or the guest programs (vm-images)
//! spans 80 lines or more.

use std::fs;
use std::path::{Path, PathBuf};

const MAX_FN_LINES: usize = 80;

/// A function found in a file: its name, first and last line of its body.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    start: usize,
    end: usize,
}

impl Function {
    fn lines(&self) -> usize {
        self.end - self.start + 1
    }
}

/// Skips a string literal starting at `i` (at its opening quote, after any
/// `r`/`#` prefix of a raw string, whose `hashes` are given); returns the
/// index just past it.
fn skip_string(c: &[char], mut i: usize, raw: bool, hashes: usize) -> usize {
    i += 1;
    while i < c.len() {
        if !raw && c[i] == '\\' {
            i += 2;
            continue;
        }
        if c[i] == '"'
            && c[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&h| h == '#')
                .count()
                == hashes
        {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// Skips a comment starting at `i` (at its `/`); returns the index of its
/// last character. Block comments nest, as in Rust.
fn skip_comment(c: &[char], mut i: usize) -> usize {
    if c[i + 1] == '/' {
        while i + 1 < c.len() && c[i + 1] != '\n' {
            i += 1;
        }
        return i;
    }
    let mut depth = 0;
    while i + 1 < c.len() {
        if c[i] == '/' && c[i + 1] == '*' {
            depth += 1;
            i += 1;
        } else if c[i] == '*' && c[i + 1] == '/' {
            depth -= 1;
            i += 1;
            if depth == 0 {
                return i;
            }
        }
        i += 1;
    }
    i
}

/// Skips a char literal at `i` (at its quote); a lifetime is left alone.
fn skip_char(c: &[char], i: usize) -> usize {
    match (c.get(i + 1), c.get(i + 2)) {
        (Some('\\'), _) => {
            i + c[i + 2..]
                .iter()
                .position(|&x| x == '\'')
                .map_or(2, |p| p + 2)
        }
        (Some(_), Some('\'')) => i + 2,
        _ => i,
    }
}

/// The identifier starting at `i`, if any.
fn ident_at(c: &[char], i: usize) -> String {
    c[i..]
        .iter()
        .take_while(|x| x.is_alphanumeric() || **x == '_')
        .collect()
}

/// The `r"`, `r#"`, `br"` ... prefix of a raw string at `i`: its length up
/// to the quote and its number of `#`.
fn raw_prefix(c: &[char], i: usize) -> Option<(usize, usize)> {
    let start = if c[i] == 'b' { i + 1 } else { i };
    if c.get(start) != Some(&'r') || (i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')) {
        return None;
    }
    let hashes = c[start + 1..].iter().take_while(|&&h| h == '#').count();
    (c.get(start + 1 + hashes) == Some(&'"')).then_some((start + 1 + hashes - i, hashes))
}

/// Every function with a body in `text`, with the lines its body spans.
fn functions(text: &str) -> Vec<Function> {
    let c: Vec<char> = text.chars().collect();
    let (mut line, mut i) = (1, 0);
    let mut pending: Option<String> = None;
    let mut open: Vec<Option<(String, usize)>> = Vec::new();
    let mut found = Vec::new();
    while i < c.len() {
        let start_line = line;
        let next = match c[i] {
            '"' => skip_string(&c, i, false, 0),
            '/' if matches!(c.get(i + 1), Some('/' | '*')) => skip_comment(&c, i) + 1,
            '\'' => skip_char(&c, i) + 1,
            'b' | 'r' if raw_prefix(&c, i).is_some() => {
                let (len, hashes) = raw_prefix(&c, i).unwrap_or_default();
                skip_string(&c, i + len, true, hashes)
            }
            '{' => {
                open.push(pending.take().map(|name| (name, line)));
                i + 1
            }
            '}' => {
                if let Some(Some((name, start))) = open.pop() {
                    found.push(Function {
                        name,
                        start,
                        end: line,
                    });
                }
                i + 1
            }
            ';' => {
                pending = None;
                i + 1
            }
            x if x.is_alphabetic() || x == '_' => {
                let word = ident_at(&c, i);
                let before = i.checked_sub(1).map(|p| c[p]);
                if word == "fn" && !before.is_some_and(|b| b.is_alphanumeric() || b == '_') {
                    let rest = c[i + 2..].iter().position(|x| !x.is_whitespace());
                    let name = rest.map(|p| ident_at(&c, i + 2 + p)).unwrap_or_default();
                    // `fn(u32) -> u32` is a type, not a function.
                    if !name.is_empty() {
                        pending = Some(name);
                    }
                }
                i + word.chars().count()
            }
            _ => i + 1,
        };
        line = start_line
            + c[i..next.min(c.len())]
                .iter()
                .filter(|&&x| x == '\n')
                .count();
        i = next;
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_function_spans_80_lines_or_more() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the project root");
    let mut files = Vec::new();
    // The harness, the guest tests and the guest programs alike.
    for dir in [
        "xtask/src",
        "xtask/tests",
        "selftests/src",
        "selftests/tests",
        "vm-images/init/src",
        "vm-images/bench/src",
        "guest-common/src",
        "vm-images/map-fuzz/src",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut long = Vec::new();
    for f in &files {
        for func in functions(&fs::read_to_string(f).unwrap()) {
            if func.lines() >= MAX_FN_LINES {
                long.push(format!(
                    "{}:{} fn {} ({} lines)",
                    f.strip_prefix(root).unwrap_or(f).display(),
                    func.start,
                    func.name,
                    func.lines()
                ));
            }
        }
    }
    assert!(files.len() > 10, "found only {files:?}");
    assert!(
        long.is_empty(),
        "split these into named helpers:\n{}",
        long.join("\n")
    );
}

#[test]
fn scanner_ignores_braces_in_strings_chars_and_comments() {
    let text = r##"
trait T { fn decl(&self) -> u32; }
fn a() {
    let s = "{ \" {";
    let r = r#"}"#;
    let c = '{';
    let e = '\'';
    // }
    /* { /* } */ } */
    let f: fn(u32) -> u32 = |x| x;
    fn inner<'a>(x: &'a str) -> &'a str { x }
}
fn b() { }
"##;
    let got = functions(text);
    let names: Vec<(&str, usize, usize)> = got
        .iter()
        .map(|f| (f.name.as_str(), f.start, f.end))
        .collect();
    assert_eq!(names, [("inner", 11, 11), ("a", 3, 12), ("b", 13, 13)]);
}
