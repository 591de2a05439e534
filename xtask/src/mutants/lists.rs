//! `mutants/EQUIVALENT` (mutants no test can kill, each with why) and
//! `mutants/CI_SAMPLE` (the mutants CI runs every time, each with what it
//! stands for): one mutant id and its reason per line, `#` comments.

use std::fs;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

/// A list's file in the project.
pub fn path(list: &str) -> PathBuf {
    crate::project::root().join("mutants").join(list)
}

pub const EQUIVALENT: &str = "EQUIVALENT";
pub const CI_SAMPLE: &str = "CI_SAMPLE";

/// `(id, reason)` per entry of the list `list`.
pub fn load(list: &str) -> Result<Vec<(String, String)>> {
    let p = path(list);
    let text = fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    parse(&text, list)
}

pub fn parse(text: &str, list: &str) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (id, reason) = line
            .split_once(char::is_whitespace)
            .map(|(i, r)| (i, r.trim()))
            .unwrap_or((line, ""));
        if reason.is_empty() {
            bail!(
                "mutants/{list} line {}: {id} has no reason; write why after the id",
                n + 1
            );
        }
        if out.iter().any(|(i, _)| i == id) {
            bail!("mutants/{list} line {}: {id} is listed twice", n + 1);
        }
        out.push((id.to_string(), reason.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::series::Series;

    #[test]
    fn every_entry_has_a_reason_once() {
        let got = parse("# c\n0001.5.delete1  no-op on x86 # more\n\n", "X").unwrap();
        assert_eq!(
            got,
            [("0001.5.delete1".to_string(), "no-op on x86".to_string())]
        );
        let err = parse("0001.5.delete1\n", "X").unwrap_err().to_string();
        assert!(err.contains("has no reason"), "{err}");
        let err = parse("a r\na r\n", "X").unwrap_err().to_string();
        assert!(err.contains("listed twice"), "{err}");
    }

    /// A patch edited under a list moves its ids: the list must follow.
    #[test]
    fn the_lists_name_mutants_the_series_has() {
        let series = Series::load(&crate::project::root().join("patches")).unwrap();
        let texts = super::super::read_patches(&series).unwrap();
        let all = super::super::of_series(&series, &texts);
        for list in [EQUIVALENT, CI_SAMPLE] {
            for (id, _) in load(list).unwrap() {
                assert!(
                    all.iter().any(|m| m.id == id),
                    "mutants/{list}: no mutant {id}"
                );
            }
        }
        let sample = load(CI_SAMPLE).unwrap();
        let equivalent = load(EQUIVALENT).unwrap();
        assert!(sample
            .iter()
            .all(|(id, _)| !equivalent.iter().any(|(e, _)| e == id)));
        for p in &series.patches {
            let n = super::super::patch_number(&p.name);
            assert!(
                sample.iter().any(|(id, _)| id.starts_with(n)),
                "CI samples patch {n}"
            );
        }
    }
}
