//! `mutants/EQUIVALENT` (mutants no test can kill, each with why) and
//! `mutants/CI_SAMPLE` (the mutants CI runs every time, each with what it
//! stands for): per line a mutant's id, its digest (eight hex digits over
//! the mutated lines, their replacement and a patch line either side, as
//! `cargo xtask mutants --list` shows it), then the rest; `#` comments.
//! An id that comes to name another mutant (a patch edited above it), or
//! whose line or neighbours changed, is an error naming the entry, never
//! a silent match. An EQUIVALENT entry goes on with the mutated line in
//! backticks, then why; a CI_SAMPLE one with the plan tests that may kill
//! the mutant (`T03`, or `T06/T09`), which the run checks, then what it
//! stands for.

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

/// One entry of a list: its line in the file, the mutant's id and
/// digest, and what follows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub line: usize,
    pub id: String,
    pub digest: String,
    pub rest: String,
}

/// The entries of the list `list`.
pub fn load(list: &str) -> Result<Vec<Entry>> {
    read(&path(list), &format!("mutants/{list}"))
}

/// The entries of the file `p`, named `name` in errors.
fn read(p: &Path, name: &str) -> Result<Vec<Entry>> {
    let text = fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    parse(&text, name)
}

/// The entries of `text`; `list` names the list in errors.
pub fn parse(text: &str, list: &str) -> Result<Vec<Entry>> {
    let mut out: Vec<Entry> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = without_comment(line).trim();
        if line.is_empty() {
            continue;
        }
        let words = |s: &str| {
            let (a, b) = s.split_once(char::is_whitespace).unwrap_or((s, ""));
            (a.to_string(), b.trim().to_string())
        };
        let (id, after_id) = words(line);
        let (digest, rest) = words(&after_id);
        let n = n + 1;
        if !is_digest(&digest) {
            bail!("{list} line {n}: {id} has no digest: write the eight hex digits `cargo xtask mutants --list` shows after its id");
        }
        if rest.is_empty() {
            bail!("{list} line {n}: {id} has no reason; write why after its digest");
        }
        if out.iter().any(|e| e.id == id) {
            bail!("{list} line {n}: {id} is listed twice");
        }
        out.push(Entry {
            line: n,
            id,
            digest,
            rest,
        });
    }
    Ok(out)
}

fn is_digest(word: &str) -> bool {
    word.len() == 8 && word.chars().all(|c| c.is_ascii_hexdigit())
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

/// The mutant a list's entry names (`line`, `id`, `digest`), held to the
/// digest: a patch edited above it moves its id, and the id then names
/// another mutant, or none.
fn named<'a>(all: &'a [Mutant], list: &str, (line, id, digest): Key) -> Result<&'a Mutant> {
    let fix = "run `cargo xtask mutants --list` and update it";
    let Some(m) = all.iter().find(|m| m.id == id) else {
        bail!("{list} line {line}: no mutant {id} (a patch edited above it moves its id); {fix}");
    };
    if m.digest != digest {
        bail!(
            "{list} line {line}: {id} is no longer the mutant listed (digest {digest}, now {}: `{}`): a patch edit moved its id or changed its lines; {fix}",
            m.digest,
            m.brief()
        );
    }
    Ok(m)
}

/// Where an entry is and what it names: its line, the id, the digest.
type Key<'a> = (usize, &'a str, &'a str);

/// An EQUIVALENT entry: the id and digest, its line in the file, the
/// mutated line it was judged on, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Equivalent {
    pub id: String,
    pub digest: String,
    pub line: usize,
    pub text: String,
    pub reason: String,
}

/// EQUIVALENT's entries.
pub fn equivalents() -> Result<Vec<Equivalent>> {
    equivalent_entries(load(EQUIVALENT)?)
}

fn equivalent_entries(entries: Vec<Entry>) -> Result<Vec<Equivalent>> {
    entries
        .into_iter()
        .map(|entry| {
            let text = entry
                .rest
                .strip_prefix('`')
                .and_then(|r| r.split_once('`'))
                .filter(|(t, _)| !t.is_empty())
                .map(|(t, r)| (t.to_string(), r.trim().to_string()));
            match text {
                Some((text, reason)) if !reason.is_empty() => Ok(Equivalent {
                    id: entry.id,
                    digest: entry.digest,
                    line: entry.line,
                    text,
                    reason,
                }),
                _ => bail!(
                    "mutants/{EQUIVALENT} line {}: {}: write the mutated line in backticks after the digest, then why (`cargo xtask mutants --list` shows it)",
                    entry.line,
                    entry.id
                ),
            }
        })
        .collect()
}

/// Holds EQUIVALENT to the series: each id names the mutant of its
/// digest, whose mutated line is the one written beside it.
pub fn check_equivalents(all: &[Mutant], listed: &[Equivalent]) -> Result<()> {
    let list = format!("mutants/{EQUIVALENT}");
    for e in listed {
        let m = named(all, &list, (e.line, &e.id, &e.digest))?;
        if m.mutated_line() != e.text {
            bail!(
                "{list} line {}: {} mutates its line to `{}`, not `{}`: write what `cargo xtask mutants --list` shows after the arrow",
                e.line,
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

/// A CI_SAMPLE entry: the id and digest, its line in the file, the plan
/// tests that may kill it (`t03`, lower case as the results name them),
/// what it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampled {
    pub id: String,
    pub digest: String,
    pub line: usize,
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

fn sample_entries(entries: Vec<Entry>, name: String) -> Result<Sample> {
    if entries.is_empty() {
        bail!("{name}: no mutant in it; write one id per line, its digest, the plan tests that kill it, then what it stands for");
    }
    let entries = entries
        .into_iter()
        .map(|entry| {
            let (first, what) = entry
                .rest
                .split_once(char::is_whitespace)
                .unwrap_or((entry.rest.as_str(), ""));
            let killers: Vec<String> = first.split('/').map(str::to_ascii_lowercase).collect();
            let what = what.trim().to_string();
            if !killers.iter().all(|k| is_plan_test(k)) || what.is_empty() {
                bail!("{name} line {}: {}: write the plan tests that kill it (`T03` or `T06/T09`) after its digest, then what it stands for", entry.line, entry.id);
            }
            Ok(Sampled {
                id: entry.id,
                digest: entry.digest,
                line: entry.line,
                killers,
                what,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Sample { name, entries })
}

/// The mutants of `sample`, in its order, each held to its digest.
pub fn sampled(all: &[Mutant], sample: &Sample) -> Result<Vec<Mutant>> {
    sample
        .entries
        .iter()
        .map(|s| named(all, &sample.name, (s.line, &s.id, &s.digest)).cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_has_a_digest_and_a_reason_once() {
        let got = parse(
            "# c\n0001.5.delete1  0a1B2c3d  no-op on x86 # more\n\n",
            "X",
        )
        .unwrap();
        let entry = Entry {
            line: 2,
            id: "0001.5.delete1".into(),
            digest: "0a1B2c3d".into(),
            rest: "no-op on x86".into(),
        };
        assert_eq!(got, [entry]);
        let err = parse("0001.5.delete1 0a1b2c3d\n", "X")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("X line 1: 0001.5.delete1 has no reason"),
            "{err}"
        );
        let err = parse("0001.5.delete1  no-op\n", "X")
            .unwrap_err()
            .to_string();
        assert!(err.contains("has no digest"), "{err}");
        let err = parse("a 00000000 r\na 00000000 r\n", "X")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("X line 2: a is listed twice"), "{err}");
    }

    fn project_mutants() -> Vec<Mutant> {
        let series = crate::kernel::project_series().unwrap();
        let texts = super::super::read_patches(&series).unwrap();
        super::super::of_series(&series, &texts)
    }

    /// A patch edited under a list moves its ids: the list must follow.
    #[test]
    fn the_lists_name_mutants_the_series_has() {
        let series = crate::kernel::project_series().unwrap();
        let all = project_mutants();
        let equivalent = equivalents().unwrap();
        check_equivalents(&all, &equivalent).unwrap();
        let sample = sample().unwrap();
        sampled(&all, &sample).unwrap();
        let sample = sample.entries;
        assert!(sample
            .iter()
            .all(|s| !equivalent.iter().any(|e| e.id == s.id)));
        // Every patch with mutants: the selftests patch has none.
        for p in &series.patches {
            let n = super::super::patch_number(&p.name);
            if all.iter().any(|m| m.id.starts_with(n)) {
                assert!(
                    sample.iter().any(|s| s.id.starts_with(n)),
                    "CI samples patch {n}"
                );
            }
        }
    }

    /// Two mutants whose mutated lines read the same (`if (0)`): an
    /// entry moved from one to the other still matches its text, but not
    /// its digest.
    fn twins(all: &[Mutant]) -> (&Mutant, &Mutant) {
        all.iter()
            .enumerate()
            .find_map(|(i, a)| {
                let b = all[i + 1..]
                    .iter()
                    .find(|b| b.mutated_line() == a.mutated_line())?;
                Some((a, b))
            })
            .expect("two mutants with the same mutated line")
    }

    /// An id that moved to another mutant with the same mutated line is
    /// an error naming the entry, the mutant it is now and the fix.
    #[test]
    fn an_equivalent_id_that_names_another_mutant_is_an_error() {
        let all = project_mutants();
        let (judged, other) = twins(&all);
        let moved = Equivalent {
            id: other.id.clone(),
            digest: judged.digest.clone(),
            line: 7,
            text: judged.mutated_line(),
            reason: "never taken".into(),
        };
        let err = check_equivalents(&all, &[moved]).unwrap_err().to_string();
        let head = format!(
            "mutants/EQUIVALENT line 7: {} is no longer the mutant listed",
            other.id
        );
        assert!(err.starts_with(&head), "{err}");
        assert!(
            err.ends_with("run `cargo xtask mutants --list` and update it"),
            "{err}"
        );
        let gone = Equivalent {
            id: "0001.9999.cond2".into(),
            ..moved_back(judged)
        };
        let err = check_equivalents(&all, &[gone]).unwrap_err().to_string();
        assert!(err.contains("line 3: no mutant 0001.9999.cond2"), "{err}");
        check_equivalents(&all, &[moved_back(judged)]).unwrap();
    }

    fn moved_back(m: &Mutant) -> Equivalent {
        Equivalent {
            id: m.id.clone(),
            digest: m.digest.clone(),
            line: 3,
            text: m.mutated_line(),
            reason: "r".into(),
        }
    }

    /// A CI_SAMPLE line carries no text, only its digest: an id moved to
    /// another mutant is an error all the same.
    #[test]
    fn a_sample_id_that_names_another_mutant_is_an_error() {
        let all = project_mutants();
        let (judged, other) = twins(&all);
        let text = format!("{}  {}  T03  what it was\n", other.id, judged.digest);
        let sample = sample_entries(parse(&text, "S").unwrap(), "S".into()).unwrap();
        let err = sampled(&all, &sample).unwrap_err().to_string();
        let head = format!("S line 1: {} is no longer the mutant listed", other.id);
        assert!(err.starts_with(&head), "{err}");
        let text = format!("{}  {}  T03  what it is\n", judged.id, judged.digest);
        let sample = sample_entries(parse(&text, "S").unwrap(), "S".into()).unwrap();
        assert_eq!(sampled(&all, &sample).unwrap()[0].id, judged.id);
    }

    #[test]
    fn a_sample_line_names_its_killers_and_an_equivalent_its_text() {
        let list = |text| sample_entries(parse(text, "S").unwrap(), "S".to_string());
        assert_eq!(
            list("0001.5.delete1 00000000 T03/t09 what\n")
                .unwrap()
                .entries[0]
                .killers,
            ["t03", "t09"]
        );
        let err = list("# nothing\n").unwrap_err().to_string();
        assert!(err.starts_with("S: no mutant in it"), "{err}");
        let err = list("0001.5.delete1 00000000 what it is\n");
        assert!(err
            .unwrap_err()
            .to_string()
            .contains("plan tests that kill it"));
        let eq = |text| equivalent_entries(parse(text, EQUIVALENT).unwrap());
        assert_eq!(
            eq("0001.5.delete1 00000000 `if (0)`  never\n").unwrap()[0].text,
            "if (0)"
        );
        let got = eq("0003.16.arith1 00000000 `#define B\t17`  same # a comment\n").unwrap();
        assert_eq!(
            (got[0].text.as_str(), got[0].reason.as_str()),
            ("#define B\t17", "same")
        );
        let err = eq("0001.5.delete1 00000000 never taken\n");
        assert!(err.unwrap_err().to_string().contains("in backticks"));
    }
}
