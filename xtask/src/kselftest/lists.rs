//! `kselftest/ALLOWLIST` (the default set) and `kselftest/DENYLIST` (what
//! cannot run in this VM), in the BPF CI's form: one test per line, each
//! with its reason after `#`.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// One line of a list: a test_progs name (or glob) and why it is listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub reason: String,
}

pub const ALLOWLIST: &str = "ALLOWLIST";
pub const DENYLIST: &str = "DENYLIST";

/// Reads `kselftest/<file>` of the project.
pub fn load(file: &str) -> Result<Vec<Entry>> {
    let path = crate::project::root().join("kselftest").join(file);
    read(&path)
}

pub fn read(path: &Path) -> Result<Vec<Entry>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| format!("in {}", path.display()))
}

/// Lines that are empty or start with `#` are comments; every other line
/// is `NAME  # reason`, and a name without a reason is an error.
pub fn parse(text: &str) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, reason) = line.split_once('#').unwrap_or((line, ""));
        let (name, reason) = (name.trim(), reason.trim());
        if reason.is_empty() {
            bail!(
                "line {}: `{name}` has no reason; write `{name}  # why`",
                i + 1
            );
        }
        if name.contains(char::is_whitespace) || name.contains(',') {
            bail!(
                "line {}: `{name}` is not one test name (no spaces or commas)",
                i + 1
            );
        }
        entries.push(Entry {
            name: name.to_string(),
            reason: reason.to_string(),
        });
    }
    Ok(entries)
}

/// The names as one comma-separated test_progs argument.
pub fn joined(entries: &[Entry]) -> String {
    entries
        .iter()
        .map(|e| e.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_carry_their_reasons() {
        let e = parse("# head\n\nmmap   # the feature\nringbuf/ringbuf_n # n\n").unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "mmap");
        assert_eq!(e[0].reason, "the feature");
        assert_eq!(joined(&e), "mmap,ringbuf/ringbuf_n");
    }

    #[test]
    fn a_name_without_a_reason_is_refused() {
        let err = parse("mmap\n").unwrap_err().to_string();
        assert!(err.contains("line 1: `mmap` has no reason"), "{err}");
        assert!(parse("a b # two\n").is_err());
        assert!(parse("a,b # two\n").is_err());
    }

    #[test]
    fn the_project_lists_parse_and_hold_the_issue_set() {
        let allow = load(ALLOWLIST).unwrap();
        for name in ["mmap", "skeleton", "global_data", "ringbuf", "arena_htab"] {
            assert!(allow.iter().any(|e| e.name == name), "{name} missing");
        }
        load(DENYLIST).unwrap();
    }
}
