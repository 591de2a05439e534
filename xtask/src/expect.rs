//! A developer's own test on several kernels, each held to what it is
//! expected to do there (`run --kernel base,mine --expect base=fail`;
//! pass everywhere by default): the table of exit statuses, splats and
//! outputs, one JUnit test case per kernel, and whether every kernel did
//! as expected. `fail` is the command failing, never a splat behind a
//! passing command (that is `splat`) nor the OOM killer's kill (which
//! meets no expectation: the test did not run to its end).

use std::fmt::Write as _;
use std::fs;

use anyhow::{bail, Context, Result};

use crate::report::protocol::{Status, TestResult};
use crate::report::{self, KernelRun};
use crate::vm::command::KernelCommand;

/// What a kernel is expected to do with the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Exit 0, and no splat unless allowed.
    Pass,
    /// The command itself fails: an exit but 0, or a signal; not a
    /// command that is not there (126, 127), not the OOM killer's kill.
    Fail,
    /// The kernel splats (a WARNING, BUG, Oops, ...), whatever the
    /// command's exit; not with an OOM kill.
    Splat,
}

/// What `--expect` takes after `KERNEL=`.
const EXPECT_WORDS: &str = "KERNEL=pass, KERNEL=fail or KERNEL=splat";

impl Expect {
    fn word(self) -> &'static str {
        match self {
            Expect::Pass => "pass",
            Expect::Fail => "fail",
            Expect::Splat => "splat",
        }
    }
}

/// `--expect` words, `KERNEL=pass|fail|splat`, each kernel once.
pub fn parse_expectations(words: &[String]) -> Result<Vec<(String, Expect)>> {
    let mut out: Vec<(String, Expect)> = Vec::new();
    for word in words {
        let (kernel, what) = word
            .split_once('=')
            .with_context(|| format!("--expect {word}: want {EXPECT_WORDS}"))?;
        let expect = match what {
            "pass" => Expect::Pass,
            "fail" => Expect::Fail,
            "splat" => Expect::Splat,
            _ => bail!("--expect {word}: want {EXPECT_WORDS}"),
        };
        if kernel.is_empty() || out.iter().any(|(k, _)| k == kernel) {
            bail!("--expect {word}: name each kernel once");
        }
        out.push((kernel.to_string(), expect));
    }
    Ok(out)
}

/// Every kernel an expectation names must be one of the run's.
pub fn check_names(expectations: &[(String, Expect)], kernels: &[String]) -> Result<()> {
    for (kernel, _) in expectations {
        if !kernels.contains(kernel) {
            bail!(
                "--expect {kernel}=...: {kernel} is not a kernel of this run ({}); name one of them",
                kernels.join(", ")
            );
        }
    }
    Ok(())
}

/// One kernel's run held to its expectation.
#[derive(Debug)]
pub struct Row {
    pub ran: KernelCommand,
    pub expected: Expect,
    pub as_expected: bool,
}

/// Each kernel's run, held to its expectation (pass when none is given);
/// `allow_splat`: a splat does not stop a pass.
pub fn held_rows(
    ran: Vec<KernelCommand>,
    expectations: &[(String, Expect)],
    allow_splat: bool,
) -> Vec<Row> {
    ran.into_iter()
        .map(|ran| {
            let expected = expectations
                .iter()
                .find(|(k, _)| *k == ran.kernel)
                .map_or(Expect::Pass, |(_, e)| *e);
            let as_expected = meets(expected, &ran, allow_splat);
            Row {
                ran,
                expected,
                as_expected,
            }
        })
        .collect()
}

/// Whether `ran` did what `expected` says. A run the OOM killer cut
/// short, or whose command never started, meets nothing.
fn meets(expected: Expect, ran: &KernelCommand, allow_splat: bool) -> bool {
    let Ok(code) = ran.status else {
        return false;
    };
    if ran.oom_kills > 0 || not_run(code) {
        return false;
    }
    match expected {
        Expect::Pass => code == 0 && (ran.splats == 0 || allow_splat),
        Expect::Fail => code != 0,
        Expect::Splat => ran.splats > 0,
    }
}

/// The guest's exit statuses, as a shell's, for a command that is not
/// there (127) or cannot be run (126): the test never ran, so it meets no
/// expectation to fail (a mistyped path would have "failed" on base).
fn not_run(code: u8) -> bool {
    matches!(code, 126 | 127)
}

/// What a kernel's run gave, in a word or two.
fn got(ran: &KernelCommand) -> String {
    match &ran.status {
        Ok(_) if ran.oom_kills > 0 => "OOM-killed".to_string(),
        Ok(code) if not_run(*code) => format!("exit {code}, not run"),
        Ok(code) => format!("exit {code}"),
        Err(_) => "VM failed".to_string(),
    }
}

/// The table: each kernel, what was expected, what it gave, its splats,
/// and whether it did as expected; then where each output is and why a
/// VM failed.
pub fn table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<18} {:<8} {:<10} {:>6}  verdict\n",
        "kernel", "expected", "got", "splats"
    );
    for r in rows {
        let verdict = if r.as_expected {
            "as expected"
        } else {
            "DIFFERS"
        };
        writeln!(
            out,
            "{:<18} {:<8} {:<10} {:>6}  {verdict}",
            r.ran.kernel,
            r.expected.word(),
            got(&r.ran),
            r.ran.splats
        )
        .unwrap();
    }
    for r in rows {
        match &r.ran.status {
            Err(why) => writeln!(
                out,
                "{}: the VM could not run the command: {why}",
                r.ran.kernel
            ),
            Ok(_) => writeln!(
                out,
                "{}: output in {} and {}",
                r.ran.kernel,
                r.ran.stdout.display(),
                r.ran.stderr.display()
            ),
        }
        .unwrap();
    }
    out
}

/// A kernel's run as a test result named after the command: passed when
/// as expected, failed when not, an error when the VM could not run it;
/// the output's last lines as its detail.
fn test_result(command: &str, r: &Row) -> TestResult {
    let (status, message) = match (&r.ran.status, r.as_expected) {
        (Err(why), _) => (Status::Crashed, why.clone()),
        (Ok(_), true) => (Status::Pass, String::new()),
        (Ok(_), false) => (
            Status::Fail,
            format!("expected {}, got {}", r.expected.word(), got(&r.ran)),
        ),
    };
    let tail = |path: &std::path::Path| {
        fs::read_to_string(path)
            .map(|t| crate::util::last_lines(&t, 8))
            .unwrap_or_default()
    };
    let detail = [tail(&r.ran.stdout), tail(&r.ran.stderr)]
        .into_iter()
        .flat_map(|t| t.lines().map(str::to_string).collect::<Vec<_>>());
    TestResult::new(command, status, 0, message).with_detail(detail)
}

/// One JUnit test case per kernel (suite "bpflab run").
pub fn junit(rows: &[Row], command: &str) -> String {
    let runs: Vec<KernelRun> = rows
        .iter()
        .map(|r| KernelRun {
            kernel: r.ran.kernel.clone(),
            accel: String::new(),
            results: vec![test_result(command, r)],
            seconds: 0.0,
        })
        .collect();
    report::junit("bpflab run", &runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn ran(kernel: &str, status: std::result::Result<u8, String>) -> KernelCommand {
        KernelCommand {
            kernel: kernel.into(),
            status,
            splats: 0,
            oom_kills: 0,
            stdout: PathBuf::from(format!("/r/{kernel}.stdout")),
            stderr: PathBuf::from(format!("/r/{kernel}.stderr")),
        }
    }

    fn splatted(kernel: &str, status: u8) -> KernelCommand {
        KernelCommand {
            splats: 1,
            ..ran(kernel, Ok(status))
        }
    }

    fn oom_killed(kernel: &str) -> KernelCommand {
        KernelCommand {
            oom_kills: 1,
            ..ran(kernel, Ok(137))
        }
    }

    /// Whether each run meets `expect`.
    fn verdicts(runs: Vec<KernelCommand>, expect: Expect, allow_splat: bool) -> Vec<bool> {
        let e: Vec<(String, Expect)> = runs.iter().map(|r| (r.kernel.clone(), expect)).collect();
        held_rows(runs, &e, allow_splat)
            .iter()
            .map(|r| r.as_expected)
            .collect()
    }

    /// fail is the command failing: a splat behind exit 0 is splat's, an
    /// OOM kill meets nothing, and any other signal is a failure.
    #[test]
    fn fail_is_the_command_failing_and_a_splat_with_exit_0_is_splat() {
        let runs = || {
            vec![
                splatted("a", 0),
                oom_killed("b"),
                ran("c", Ok(139)),
                ran("d", Ok(137)),
                splatted("e", 139),
                ran("f", Ok(0)),
            ]
        };
        let fail = verdicts(runs(), Expect::Fail, false);
        assert_eq!(fail, [false, false, true, true, true, false]);
        let splat = verdicts(runs(), Expect::Splat, false);
        assert_eq!(splat, [true, false, false, false, true, false]);
        let pass = verdicts(runs(), Expect::Pass, false);
        assert_eq!(pass, [false, false, false, false, false, true]);
        let allowed = verdicts(runs(), Expect::Pass, true);
        assert_eq!(allowed, [true, false, false, false, false, true]);
        let rows = held_rows(vec![oom_killed("b")], &[("b".into(), Expect::Fail)], false);
        assert!(
            table(&rows).contains("b                  fail     OOM-killed"),
            "{}",
            table(&rows)
        );
    }

    #[test]
    fn expectations_are_kernel_equals_pass_or_fail_each_kernel_once() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_expectations(&words(&["base=fail", "mine=pass"])).unwrap(),
            [("base".into(), Expect::Fail), ("mine".into(), Expect::Pass)]
        );
        assert_eq!(
            parse_expectations(&words(&["base=splat"])).unwrap(),
            [("base".into(), Expect::Splat)]
        );
        for bad in ["base", "base=maybe", "=pass"] {
            assert!(parse_expectations(&words(&[bad])).is_err(), "{bad}");
        }
        assert!(parse_expectations(&words(&["base=fail", "base=pass"])).is_err());
        let e = parse_expectations(&words(&["other=fail"])).unwrap();
        let err = check_names(&e, &["base".into(), "patched".into()]).unwrap_err();
        assert!(err.to_string().contains("base, patched"), "{err}");
    }

    #[test]
    fn a_kernel_passes_by_default_and_is_held_to_what_it_is_expected_to_do() {
        let rows = held_rows(
            vec![
                ran("base", Ok(1)),
                ran("patched", Ok(0)),
                ran("direct", Ok(0)),
                ran("prefault", Err("panic".into())),
                ran("adaptive", Ok(127)),
            ],
            &[
                ("base".into(), Expect::Fail),
                ("direct".into(), Expect::Fail),
                ("adaptive".into(), Expect::Fail),
            ],
            false,
        );
        let got: Vec<(Expect, bool)> = rows.iter().map(|r| (r.expected, r.as_expected)).collect();
        assert_eq!(
            got,
            [
                (Expect::Fail, true),
                (Expect::Pass, true),
                (Expect::Fail, false),
                (Expect::Pass, false),
                // A command that is not there failed nothing it tests.
                (Expect::Fail, false),
            ]
        );
        let t = table(&rows);
        assert!(t.contains("direct             fail     exit 0"), "{t}");
        assert!(t.contains("DIFFERS"), "{t}");
        assert!(
            t.contains("prefault: the VM could not run the command: panic"),
            "{t}"
        );
        let j = junit(&rows, "sh -c x");
        assert!(j.contains("failures=\"2\" errors=\"1\""), "{j}");
        assert!(j.contains("expected fail, got exit 0"), "{j}");
        assert!(j.contains("expected fail, got exit 127, not run"), "{j}");
    }
}
