//! `mutants/EQUIVALENT` (mutants no test can kill, each with why) and
//! `mutants/CI_SAMPLE` (the mutants CI runs every time, each with what it
//! stands for): one mutant id and its reason per line, `#` comments.
//! An EQUIVALENT reason starts with the mutated line in backticks, so an
//! id that comes to name another mutant (a patch edited above it) is an
//! error, never a silent exemption; a CI_SAMPLE reason starts with the
//! plan tests that may kill the mutant (`T03`, or `T06/T09`), which the
//! run checks.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::Mutant;

/// A list's file in the project.
pub fn path(list: &str) -> PathBuf {
    crate::project::root().join("mutants").join(list)
}

pub const EQUIVALENT: &str = "EQUIVALENT";
pub const CI_SAMPLE: &str = "CI_SAMPLE";

/// `(id, reason)` per entry of the list `list`.
pub fn load(list: &str) -> Result<Vec<(String, String)>> {
    read(&path(list), &format!("mutants/{list}"))
}

/// `(id, reason)` per entry of the file `p`, named `name` in errors.
fn read(p: &Path, name: &str) -> Result<Vec<(String, String)>> {
    let text = fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    parse(&text, name)
}

/// `(id, reason)` per line of `text`; `list` names the list in errors.
pub fn parse(text: &str, list: &str) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = without_comment(line).trim();
        if line.is_empty() {
            continue;
        }
        let (id, reason) = line
            .split_once(char::is_whitespace)
            .map(|(i, r)| (i, r.trim()))
            .unwrap_or((line, ""));
        if reason.is_empty() {
            bail!(
                "{list} line {}: {id} has no reason; write why after the id",
                n + 1
            );
        }
        if out.iter().any(|(i, _)| i == id) {
            bail!("{list} line {}: {id} is listed twice", n + 1);
        }
        out.push((id.to_string(), reason.to_string()));
    }
    Ok(out)
}

/// A line up to its comment: a `#` outside backticks (a mutated line
/// may be a `#define`).
fn without_comment(line: &str) -> &str {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '`' => quoted = !quoted,
            '#' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}

/// An EQUIVALENT entry: the id, the mutated line it was judged on, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Equivalent {
    pub id: String,
    pub text: String,
    pub reason: String,
}

/// EQUIVALENT's entries.
pub fn equivalents() -> Result<Vec<Equivalent>> {
    equivalent_entries(load(EQUIVALENT)?)
}

fn equivalent_entries(entries: Vec<(String, String)>) -> Result<Vec<Equivalent>> {
    entries
        .into_iter()
        .map(|(id, rest)| {
            let text = rest
                .strip_prefix('`')
                .and_then(|r| r.split_once('`'))
                .filter(|(t, _)| !t.is_empty());
            match text {
                Some((text, reason)) if !reason.trim().is_empty() => Ok(Equivalent {
                    id,
                    text: text.to_string(),
                    reason: reason.trim().to_string(),
                }),
                _ => bail!(
                    "mutants/{EQUIVALENT}: {id}: write the mutated line in backticks, then why (`cargo xtask mutants --list` shows it)"
                ),
            }
        })
        .collect()
}

/// Holds EQUIVALENT to the series: each id names a mutant whose mutated
/// line is the one written beside it.
pub fn check_equivalents(all: &[Mutant], listed: &[Equivalent]) -> Result<()> {
    for e in listed {
        let Some(m) = all.iter().find(|m| m.id == e.id) else {
            bail!("mutants/{EQUIVALENT}: no mutant {} (`cargo xtask mutants --list` lists them); a patch edited above it moves its id", e.id);
        };
        if m.mutated_line() != e.text {
            bail!(
                "mutants/{EQUIVALENT}: {} is now `{}`, not `{}`: the patch moved its id; find the mutant's new id with `cargo xtask mutants --list`",
                e.id,
                m.mutated_line(),
                e.text
            );
        }
    }
    Ok(())
}

/// Whether `id` is a plan test's id as the results name it: `t` and its
/// number (`t03`).
pub fn is_plan_test(id: &str) -> bool {
    id.len() > 1 && id.starts_with('t') && id[1..].chars().all(|c| c.is_ascii_digit())
}

/// A CI_SAMPLE entry: the id, the plan tests that may kill it (`t03`,
/// lower case as the results name them), what it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampled {
    pub id: String,
    pub killers: Vec<String>,
    pub what: String,
}

/// A sample of mutants: CI_SAMPLE, or a developer's file in its form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// What errors call it: `mutants/CI_SAMPLE`, or the file's path.
    pub name: String,
    pub entries: Vec<Sampled>,
}

/// CI_SAMPLE's entries.
pub fn sample() -> Result<Sample> {
    sample_entries(load(CI_SAMPLE)?, format!("mutants/{CI_SAMPLE}"))
}

/// A sample list of the developer's (`--sample-file`), in CI_SAMPLE's form.
pub fn sample_file(p: &Path) -> Result<Sample> {
    let name = p.display().to_string();
    sample_entries(read(p, &name)?, name)
}

fn sample_entries(entries: Vec<(String, String)>, name: String) -> Result<Sample> {
    if entries.is_empty() {
        bail!("{name}: no mutant in it; write one id per line, the plan tests that kill it, then what it stands for");
    }
    let entries = entries
        .into_iter()
        .map(|(id, rest)| {
            let (first, what) = rest
                .split_once(char::is_whitespace)
                .unwrap_or((rest.as_str(), ""));
            let killers: Vec<String> = first.split('/').map(str::to_ascii_lowercase).collect();
            if !killers.iter().all(|k| is_plan_test(k)) || what.trim().is_empty() {
                bail!("{name}: {id}: write the plan tests that kill it (`T03` or `T06/T09`), then what it stands for");
            }
            Ok(Sampled {
                id,
                killers,
                what: what.trim().to_string(),
            })
        })
        .collect::<Result<_>>()?;
    Ok(Sample { name, entries })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let series = crate::kernel::project_series().unwrap();
        let texts = super::super::read_patches(&series).unwrap();
        let all = super::super::of_series(&series, &texts);
        let equivalent = equivalents().unwrap();
        check_equivalents(&all, &equivalent).unwrap();
        let sample = sample().unwrap().entries;
        for s in &sample {
            assert!(
                all.iter().any(|m| m.id == s.id),
                "mutants/{CI_SAMPLE}: no mutant {}",
                s.id
            );
        }
        assert!(sample
            .iter()
            .all(|s| !equivalent.iter().any(|e| e.id == s.id)));
        for p in &series.patches {
            let n = super::super::patch_number(&p.name);
            assert!(
                sample.iter().any(|s| s.id.starts_with(n)),
                "CI samples patch {n}"
            );
        }
    }

    /// An id that moved to another mutant is an error naming it, and the
    /// text that was judged.
    #[test]
    fn an_equivalent_id_that_names_another_mutant_is_an_error() {
        let series = crate::kernel::project_series().unwrap();
        let texts = super::super::read_patches(&series).unwrap();
        let all = super::super::of_series(&series, &texts);
        let mut listed = equivalents().unwrap();
        let moved = all
            .iter()
            .find(|m| m.patch == 0 && !listed.iter().any(|e| e.id == m.id))
            .unwrap();
        listed[0].id = moved.id.clone();
        let err = check_equivalents(&all, &listed).unwrap_err().to_string();
        assert!(
            err.contains(&moved.id) && err.contains("moved its id"),
            "{err}"
        );
    }

    #[test]
    fn a_sample_line_names_its_killers_and_an_equivalent_its_text() {
        let list = |text| sample_entries(parse(text, "S").unwrap(), "S".to_string());
        assert_eq!(
            list("0001.5.delete1  T03/t09 what\n").unwrap().entries[0].killers,
            ["t03", "t09"]
        );
        let err = list("# nothing\n").unwrap_err().to_string();
        assert!(err.starts_with("S: no mutant in it"), "{err}");
        let err = list("0001.5.delete1  what it is\n");
        assert!(err
            .unwrap_err()
            .to_string()
            .contains("plan tests that kill it"));
        let eq =
            equivalent_entries(parse("0001.5.delete1  `if (0)`  never\n", EQUIVALENT).unwrap());
        assert_eq!(eq.unwrap()[0].text, "if (0)");
        let text = "0003.16.arith1  `#define B\t17`  same # a comment\n";
        let eq = equivalent_entries(parse(text, EQUIVALENT).unwrap()).unwrap();
        assert_eq!(
            (eq[0].text.as_str(), eq[0].reason.as_str()),
            ("#define B\t17", "same")
        );
        let err = equivalent_entries(parse("0001.5.delete1  never taken\n", EQUIVALENT).unwrap());
        assert!(err.unwrap_err().to_string().contains("in backticks"));
    }
}
