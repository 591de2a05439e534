//! Mutation testing of the series: every line a patch adds (comments
//! aside) mutated one way at a time, each mutant built as a kernel of its
//! own and held to the test plan. A mutant the plan does not kill is a
//! place where the suite looks away.
//!
//! `units` cuts a patch's added code into statements, `operators` mutates
//! them, `lists` reads the equivalent mutants and CI's sample, `select`
//! chooses a run's mutants, `judge` (after `control`) runs each, on a
//! kernel as `on_kernel` says, `outcome` judges its run, `ledger`
//! keeps outcomes, `report` tallies, and `campaign` is the whole run.

pub mod campaign;
mod control;
mod judge;
pub mod ledger;
pub mod lists;
pub mod on_kernel;
pub mod operators;
pub mod outcome;
mod report;
pub mod select;
pub mod units;

use std::fs;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use self::operators::Op;
use crate::kernel::series::Series;
use crate::vm::qemu::AccelChoice;

/// What decides whether a mutant is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MutantJudge {
    Plan,
    Fuzz,
}

/// How the mutants are judged: by what, on which kernels, and whether
/// the ledger's outcomes are taken.
#[derive(Debug, Clone)]
pub struct JudgeOptions {
    pub judge: MutantJudge,
    /// Debug kernels (lockdep, DEBUG_VM, ...) instead of lean ones.
    pub debug: bool,
    pub accel: AccelChoice,
    /// Run every mutant again, taking nothing from the ledger.
    pub fresh: bool,
    /// The fuzzer's seed and seconds a mutant (`--judge fuzz`).
    pub seed: u64,
    pub fuzz_seconds: u64,
    /// Take no new mutant after this long; those left are for the next
    /// run (the ledger keeps what is done).
    pub minutes: Option<u64>,
}

/// One mutant of one patch of the series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutant {
    /// `<patch number>.<line in the patch>.<operator><n>`, e.g.
    /// `0002.37.cmp1`: stable while the patch does not change.
    pub id: String,
    /// The patch's index in the series, and its file name.
    pub patch: usize,
    pub patch_name: String,
    pub op: Op,
    /// Where in the patch text the changed lines start.
    pub first: usize,
    pub original: Vec<String>,
    pub replacement: Vec<String>,
    /// The file the lines go to, and the first one's line there.
    pub file: String,
    pub new_line: usize,
    /// What the lists key on beside the id (`hunk_digest`): an id that
    /// comes to name another mutant changes it.
    pub digest: String,
}

/// The patch's number: what its file name starts with (`0002-…`).
pub fn patch_number(name: &str) -> &str {
    name.split('-').next().unwrap_or(name)
}

/// Every mutant of one patch, in patch order.
pub fn of_patch(index: usize, name: &str, text: &str) -> Vec<Mutant> {
    let mut out = Vec::new();
    let diff = diff_start(text);
    let lines: Vec<&str> = text.lines().collect();
    // The kernel's code only: tools/ (the BPF tree's selftests) is what
    // judges a kernel, not what a kernel runs.
    for unit in units::units(text)
        .into_iter()
        .filter(|u| !u.file.starts_with("tools/"))
    {
        let mut counts = std::collections::HashMap::new();
        for (op, replacement) in operators::mutate(&unit) {
            let n = counts.entry(op).or_insert(0);
            *n += 1;
            let digest = hunk_digest(&unit, &lines, &replacement);
            out.push(Mutant {
                id: format!(
                    "{}.{}.{}{n}",
                    patch_number(name),
                    unit.first + 1 - diff,
                    op.name()
                ),
                patch: index,
                patch_name: name.to_string(),
                op,
                first: unit.first,
                original: unit.lines.clone(),
                replacement,
                file: unit.file.clone(),
                new_line: unit.new_line,
                digest,
            });
        }
    }
    out
}

/// Eight hex digits over what a mutant changes and where: its file and
/// function, the patch line before its unit, the unit's lines, their
/// replacement and the patch line after. An edit that moves an id onto
/// another mutant, or changes the mutated line or a neighbour, changes
/// it; one elsewhere in the patch does not.
fn hunk_digest(unit: &units::Unit, lines: &[&str], replacement: &[String]) -> String {
    let before = unit.first.checked_sub(1).and_then(|i| lines.get(i));
    let after = lines.get(unit.first + unit.lines.len());
    let mut h = Sha256::new();
    let function = unit.function.as_deref().unwrap_or("");
    let parts = [unit.file.as_str(), function, before.copied().unwrap_or("")]
        .into_iter()
        .chain(unit.lines.iter().map(String::as_str))
        .chain(["=>"])
        .chain(replacement.iter().map(String::as_str))
        .chain([after.copied().unwrap_or("")]);
    for part in parts {
        h.update(part.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..4])
}

/// The index of a patch's first `diff --git` line. Ids count lines from
/// it, so that rewording a commit message renumbers no mutant.
fn diff_start(text: &str) -> usize {
    text.lines()
        .position(|l| l.starts_with("diff --git "))
        .unwrap_or(0)
}

/// The text of every patch of `series`, in order: what the mutants are
/// made from, and what a mutant's kernel is built from besides its own.
pub fn read_patches(series: &Series) -> Result<Vec<String>> {
    series
        .patches
        .iter()
        .map(|p| {
            fs::read_to_string(&p.path).with_context(|| format!("reading {}", p.path.display()))
        })
        .collect()
}

/// Every mutant of every patch of `series`, whose texts are `texts`.
pub fn of_series(series: &Series, texts: &[String]) -> Vec<Mutant> {
    let mut out = Vec::new();
    for (i, (p, text)) in series.patches.iter().zip(texts).enumerate() {
        out.extend(of_patch(i, &p.name, text));
    }
    out
}

impl Mutant {
    /// The patch `original` (this mutant's patch) with the mutation in it.
    pub fn patch_text(&self, original: &str) -> String {
        let mut lines: Vec<String> = original.lines().map(str::to_string).collect();
        for (k, line) in self.replacement.iter().enumerate() {
            lines[self.first + k] = format!("+{line}");
        }
        let mut text = lines.join("\n");
        if original.ends_with('\n') {
            text.push('\n');
        }
        text
    }

    /// The change as a reviewer reads it: where, then the lines before
    /// and after.
    pub fn diff(&self) -> String {
        let mut out = format!("{} ({}:{})\n", self.id, self.file, self.new_line);
        for l in &self.original {
            out.push_str(&format!("-{l}\n"));
        }
        for l in self.replacement.iter().filter(|l| !l.is_empty()) {
            out.push_str(&format!("+{l}\n"));
        }
        out
    }

    /// The first line the mutation changes, before and after (an emptied
    /// line as `(deleted)`), trimmed.
    fn changed_line(&self) -> (String, String) {
        let k = (0..self.original.len())
            .find(|&k| self.original[k] != self.replacement[k])
            .unwrap_or(0);
        let shown = |s: &str| match s.trim() {
            "" => "(deleted)".to_string(),
            t => t.to_string(),
        };
        (shown(&self.original[k]), shown(&self.replacement[k]))
    }

    /// The mutated line as it reads in the mutant: what EQUIVALENT keys on.
    pub fn mutated_line(&self) -> String {
        self.changed_line().1
    }

    /// The mutation on one line, for `--list`: the first changed line,
    /// before and after.
    pub fn brief(&self) -> String {
        let (before, after) = self.changed_line();
        format!("{before}  →  {after}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series() -> Series {
        crate::kernel::project_series().unwrap()
    }

    #[test]
    fn the_selftests_a_patch_adds_are_not_mutated() {
        let patch =
            "diff --git a/tools/testing/selftests/bpf/x.c b/tools/testing/selftests/bpf/x.c\n\
                     --- /dev/null\n\
                     +++ b/tools/testing/selftests/bpf/x.c\n\
                     @@ -0,0 +1,3 @@\n\
                     +void f(int *a)\n\
                     +{\n\
                     +\t*a = 1;\n";
        assert!(of_patch(0, "0006-x.patch", patch).is_empty());
        let kernel = patch.replace("tools/testing/selftests/bpf/", "kernel/bpf/");
        assert!(!of_patch(0, "0006-x.patch", &kernel).is_empty());
    }

    #[test]
    fn every_patch_of_the_series_has_mutants_with_unique_ids() {
        let s = series();
        let all = of_series(&s, &read_patches(&s).unwrap());
        // 0002, the smallest, is one statement: its return, mutated three
        // ways. The selftests patch has none.
        let kernel_patches = s
            .patches
            .iter()
            .enumerate()
            .filter(|(_, p)| p.files.iter().any(|f| !f.starts_with("tools/")));
        for (p, _) in kernel_patches {
            assert!(
                all.iter().filter(|m| m.patch == p).count() >= 3,
                "patch {p}"
            );
        }
        let mut ids: Vec<&str> = all.iter().map(|m| m.id.as_str()).collect();
        ids.sort();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n, "ids are unique");
        // And so are their digests, which the lists key on: two units of
        // the same text and neighbours (0004's two walk callbacks) are
        // told apart by their function.
        let mut digests: Vec<&str> = all.iter().map(|m| m.digest.as_str()).collect();
        digests.sort();
        digests.dedup();
        assert_eq!(digests.len(), n, "digests are unique");
        // Comments are never mutated.
        assert!(all
            .iter()
            .all(|m| !m.original.iter().any(|l| l.trim_start().starts_with("/*"))));
    }

    #[test]
    fn a_mutated_patch_still_applies_and_changes_only_its_lines() {
        let s = series();
        // 0004, the window: the downward fill's test for a full batch.
        let text = fs::read_to_string(&s.patches[3].path).unwrap();
        let all = of_patch(3, &s.patches[3].name, &text);
        let m = all
            .iter()
            .find(|m| m.op == Op::Cmp && m.brief().contains("from + nr == lo"))
            .expect("the full-batch test is mutated");
        let mutated = m.patch_text(&text);
        assert_eq!(mutated.lines().count(), text.lines().count());
        let changed: Vec<(&str, &str)> = text
            .lines()
            .zip(mutated.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(
            changed,
            [("+\t\tif (from + nr == lo) {", "+\t\tif (from + nr != lo) {")]
        );
        assert!(m.diff().contains("kernel/bpf/arraymap.c"), "{}", m.diff());
    }
}
