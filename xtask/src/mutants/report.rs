//! A mutants run's report: the table per patch, every survivor's diff
//! and every mutant not judged, written with one line per mutant into
//! `report.md` in the run's directory; the counts behind the closing
//! line.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::outcome::{self, Outcome};
use super::Mutant;

/// What the report says, for the command to print.
pub struct Summary {
    /// The table, the survivors' diffs and the mutants not judged.
    pub text: String,
    /// Where `report.md` was written.
    pub path: PathBuf,
    pub killed: usize,
    pub survived: usize,
    pub unjudged: usize,
    /// Not run: `--minutes` was spent first.
    pub left: usize,
}

impl Summary {
    /// `mutants: K of N killed, S survived, U not judged`, and `, L left
    /// for the next run` when `--minutes` was spent.
    pub fn closing_line(&self) -> String {
        let mut line = format!(
            "mutants: {} of {} killed, {} survived, {} not judged",
            self.killed,
            self.killed + self.survived,
            self.survived,
            self.unjudged
        );
        if self.left > 0 {
            line += &format!(
                ", {} left for the next run (the same command goes on)",
                self.left
            );
        }
        line
    }

    /// No counted mutant survived, and every one was judged.
    pub fn passed(&self) -> bool {
        self.survived == 0 && self.unjudged == 0 && self.left == 0
    }
}

/// One line per mutant for `report.md`: its outcome and what decided it
/// (the test that killed it, the crash, the build error).
fn every_outcome(chosen: &[Mutant], outcomes: &[Option<Outcome>]) -> String {
    let mut out = String::from("## Every mutant\n\n");
    for (m, o) in chosen.iter().zip(outcomes) {
        let line = match o {
            Some(o) => format!("{} {}: {}", m.id, o.word(), o.detail()),
            None => format!("{} equivalent", m.id),
        };
        out.push_str(&line.replace('\n', " "));
        out.push('\n');
    }
    out
}

/// The report of `chosen`'s `outcomes` (None: equivalent), written to
/// `report.md` in `run_dir`. `secs`: this run's time, and what the
/// outcomes taken from the ledger took when they ran.
pub fn write(
    chosen: &[Mutant],
    outcomes: &[Option<Outcome>],
    run_dir: &Path,
    secs: (f64, f64),
) -> Result<Summary> {
    let rows = chosen.iter().zip(outcomes.iter().map(Option::as_ref));
    let tallies = outcome::tally(rows.clone());
    let mut text = outcome::table(&tallies);
    text.push_str(&format!("\n{} mutant(s) in {:.0} s", chosen.len(), secs.0));
    if secs.1 > 0.0 {
        text.push_str(&format!(
            " (and {:.0} s when the ledger's outcomes ran)",
            secs.1
        ));
    }
    text.push('\n');
    let survivors: Vec<&Mutant> = rows
        .filter(|(_, o)| matches!(o, Some(Outcome::Survived)))
        .map(|(m, _)| m)
        .collect();
    for m in &survivors {
        text.push_str(&format!("\nSURVIVED {}", m.diff()));
    }
    let unjudged: Vec<String> = chosen
        .iter()
        .zip(outcomes)
        .filter_map(|(m, o)| match o {
            Some(Outcome::Left) => None,
            Some(o) if !o.judged() => Some(format!("{} {}: {}\n", o.word(), m.id, o.detail())),
            _ => None,
        })
        .collect();
    text.extend(unjudged.iter().cloned());
    let path = run_dir.join("report.md");
    let every = every_outcome(chosen, outcomes);
    fs::write(&path, format!("{text}\n{every}"))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(Summary {
        text,
        path,
        killed: tallies.values().map(|t| t.killed + t.crashed).sum(),
        survived: survivors.len(),
        unjudged: unjudged.len(),
        left: outcomes
            .iter()
            .filter(|o| matches!(o, Some(Outcome::Left)))
            .count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mutant(id: &str) -> Mutant {
        crate::mutants::outcome::tests::mutant(id, "0004")
    }

    #[test]
    fn mutants_left_by_minutes_are_said_apart_and_the_run_does_not_pass() {
        let dir = crate::util::tempdir();
        let chosen = [mutant("0004.1.delete1"), mutant("0004.2.delete1")];
        let killed = Outcome::Killed { by: "t01".into() };
        let outcomes = [Some(killed), Some(Outcome::Left)];
        let s = write(&chosen, &outcomes, &dir, (1.0, 0.0)).unwrap();
        assert_eq!(
            s.closing_line(),
            "mutants: 1 of 1 killed, 0 survived, 0 not judged, \
             1 left for the next run (the same command goes on)"
        );
        assert!(!s.passed());
        assert!(!s.text.contains("0004.2.delete1"), "{}", s.text);
        let done = write(&chosen[..1], &outcomes[..1], &dir, (1.0, 0.0)).unwrap();
        assert!(done.passed() && !done.closing_line().contains("left"));
    }
}
