//! What a kselftest run says: the table of every row that is not a pass
//! or a skip everywhere (with `-t`, every row), the findings (a test
//! failing only on a variant is a regression), the tests held to pass
//! (`held`), every skip and what test_progs' build left out; written as
//! `table.txt` and `junit.xml`.

use std::fs;

use anyhow::Result;

use super::campaign::Ran;
use super::compare::{self, Side};
use super::held;
use super::selection;
use crate::report::protocol::Status;
use crate::report::{self, Counts, KernelRun};

/// What the run concludes: its text, the counts behind the closing
/// line, and whether a test failed that the run holds.
pub struct Conclusion {
    pub text: String,
    pub counts: Counts,
    pub failed: bool,
}

/// The table, what it means and every skip, written to `table.txt` with
/// `junit.xml` in the run's directory.
pub fn conclude(ran: &Ran) -> Result<Conclusion> {
    let (runs, held, left_out) = (&ran.runs, &ran.held, &ran.left_out);
    let sides: Vec<Side> = runs
        .iter()
        .map(|(run, patched)| Side {
            run,
            patched: *patched,
        })
        .collect();
    // Every row that is not a pass or a skip everywhere (every row of
    // -t's tests, whose skips are held), then the counts.
    let table = format!(
        "{}\n{}",
        compare::table(&sides, !held.named),
        compare::runner_summary(&sides)
    );
    let findings = compare::findings(&sides);
    let broken = if held.any {
        held::held(&sides, held)
    } else {
        Vec::new()
    };
    let verdict = verdict_lines(&findings, &broken, &held.new_names());
    let default_set_failed = !broken.is_empty();
    let mut text = format!("{table}\n{}\n", verdict.join("\n"));
    text.push_str(&skipped(runs));
    text.push_str(&passed_anyway(runs));
    if !left_out.tests.is_empty() {
        let tests: Vec<&str> = left_out.tests.iter().map(String::as_str).collect();
        text.push_str(&format!(
            "left out of test_progs ({} test(s); a BPF program they load does not compile against this kernel's BTF): {}\n  programs: {}\n",
            tests.len(),
            tests.join(", "),
            super::describe_progs(left_out)
        ));
    }
    fs::write(ran.run_dir.join("table.txt"), &text)?;
    let kernel_runs: Vec<KernelRun> = runs.iter().map(|(r, _)| r.clone()).collect();
    fs::write(
        ran.run_dir.join("junit.xml"),
        report::junit("bpflab kselftest", &kernel_runs),
    )?;
    Ok(Conclusion {
        text,
        counts: Counts::total(&kernel_runs),
        failed: findings.fails() || default_set_failed,
    })
}

/// What the comparison and the held tests mean, a line each: with a held
/// rule broken the run fails, and no line may read as a pass.
fn verdict_lines(findings: &compare::Findings, broken: &[String], new: &[String]) -> Vec<String> {
    let mut verdict = compare::verdict(findings);
    if broken.is_empty() {
        return verdict;
    }
    // Base against the variants found nothing, but the run fails: a
    // "no regression" line above its FAIL would read as a pass.
    verdict.retain(|line| line != compare::NO_REGRESSION);
    // A new test failing where its change is says the change (or the
    // test) is wrong, not the VM; the advice goes by the rows broken.
    let about_new = |b: &String| new.iter().any(|t| b.contains(&format!(":{t}")));
    let mut fixes = Vec::new();
    if broken.iter().any(|b| !about_new(b)) {
        fixes.push("fix what the VM lacks, or move a test to kselftest/DENYLIST with why");
    }
    if broken.iter().any(about_new) {
        fixes.push("a test --new-on names must pass, not skip, on its variant and the ones after it, and must not pass on those before: fix the change or the test, or name the variant it is new in");
    }
    let fix = fixes.join("; ");
    verdict.push(format!(
        "FAIL: the tests run must pass on every kernel (-t's tests may skip on none, base included; the default set may skip only where base skips too; --new-on exempts the kernels before its variant, where the named tests must not pass): {}; {fix}",
        broken.join("; ")
    ));
    verdict
}

/// Every skipped test, by kernel, so that none goes unnamed.
fn skipped(runs: &[(KernelRun, bool)]) -> String {
    let mut out = String::new();
    for (run, _) in runs {
        let names: Vec<&str> = run
            .results
            .iter()
            .filter(|r| r.status == Status::Skip)
            .map(|r| r.name.as_str())
            .collect();
        if !names.is_empty() {
            out += &format!(
                "skipped on {} ({}): {}\n",
                run.kernel,
                names.len(),
                names.join(", ")
            );
        }
    }
    out
}

/// Every result the denylist names that passed, by kernel: a pass, not a
/// skip, and a line that says its entry may go.
fn passed_anyway(runs: &[(KernelRun, bool)]) -> String {
    let mut out = String::new();
    for (run, _) in runs {
        let names: Vec<&str> = run
            .results
            .iter()
            .filter(|r| selection::passed_anyway(r))
            .map(|r| r.name.as_str())
            .collect();
        if !names.is_empty() {
            out += &format!(
                "{} on {} ({}): {}; remove them from kselftest/DENYLIST (or DENYLIST.lean, as each result's message says) once they pass on every kernel\n",
                selection::PASSED_ANYWAY,
                run.kernel,
                names.len(),
                names.join(", ")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::protocol::TestResult;

    #[test]
    fn a_denylisted_test_that_passed_is_named_as_passed_not_skipped() {
        let passed = format!("{}: remove it", selection::PASSED_ANYWAY);
        let run = KernelRun {
            kernel: "eager".into(),
            accel: "tcg".into(),
            results: vec![
                TestResult::new("test_maps:gone", Status::Pass, 0, passed),
                TestResult::new("test_maps:a", Status::Pass, 0, String::new()),
                TestResult::new(
                    "test_maps:b",
                    Status::Skip,
                    0,
                    "kselftest/DENYLIST: x".into(),
                ),
            ],
            seconds: 1.0,
        };
        let runs = [(run, false)];
        assert_eq!(
            passed_anyway(&runs),
            "denylisted but passed on eager (1): test_maps:gone; remove them from kselftest/DENYLIST (or DENYLIST.lean, as each result's message says) once they pass on every kernel\n"
        );
        assert_eq!(skipped(&runs), "skipped on eager (1): test_maps:b\n");
    }

    #[test]
    fn a_broken_held_rule_leaves_no_line_that_reads_as_a_pass() {
        let clean = compare::Findings::default();
        assert_eq!(verdict_lines(&clean, &[], &[]), [compare::NO_REGRESSION]);
        let broken = ["test_progs:mine skips on base: -t names it".to_string()];
        let lines = verdict_lines(&clean, &broken, &[]);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("FAIL: "), "{lines:?}");
        assert!(lines[0].contains("fix what the VM lacks"), "{lines:?}");
        let new = ["mine".to_string()];
        let lines = verdict_lines(&clean, &broken, &new);
        assert!(lines[0].contains("a test --new-on names"), "{lines:?}");
        assert!(!lines[0].contains("fix what the VM lacks"), "{lines:?}");
    }
}
