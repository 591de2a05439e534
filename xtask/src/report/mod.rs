//! Test results: the results channel read (`protocol`; the benchmark's
//! records pass through it unparsed), skips held to their allowlist
//! (`skips`), and the reports: KTAP per kernel, one JUnit XML file for
//! the run, and the counts behind the closing `N passed, N failed` line.

pub mod protocol;
pub mod skips;

use std::fmt::Write as _;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use self::protocol::{Status, TestResult};

/// The results of one kernel's run, as reported to the user.
#[derive(Debug, Clone)]
pub struct KernelRun {
    pub kernel: String,
    pub accel: String,
    pub results: Vec<TestResult>,
    pub seconds: f64,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Tests during which the kernel died or the guest stopped responding.
    pub crashed: usize,
    pub not_run: usize,
}

impl Counts {
    pub fn of(results: &[TestResult]) -> Counts {
        let mut c = Counts::default();
        for r in results {
            *match r.status {
                Status::Pass => &mut c.passed,
                Status::Fail => &mut c.failed,
                Status::Skip => &mut c.skipped,
                Status::Crashed => &mut c.crashed,
                Status::NotRun => &mut c.not_run,
            } += 1;
        }
        c
    }

    /// Over every kernel's results.
    pub fn total(runs: &[KernelRun]) -> Counts {
        runs.iter()
            .fold(Counts::default(), |acc, r| acc.add(Counts::of(&r.results)))
    }

    pub fn add(self, o: Counts) -> Counts {
        Counts {
            passed: self.passed + o.passed,
            failed: self.failed + o.failed,
            skipped: self.skipped + o.skipped,
            crashed: self.crashed + o.crashed,
            not_run: self.not_run + o.not_run,
        }
    }

    /// Whether anything went wrong: a failure, a crash, or a test never run.
    pub fn bad(&self) -> bool {
        self.failed + self.crashed + self.not_run > 0
    }

    /// `N passed, N failed`, then `, N crashed`, `, N skipped` and
    /// `, N not run` where there are any.
    pub fn closing_line(&self) -> String {
        let mut s = format!("{} passed, {} failed", self.passed, self.failed);
        for (n, what) in [
            (self.crashed, "crashed"),
            (self.skipped, "skipped"),
            (self.not_run, "not run"),
        ] {
            if n > 0 {
                write!(s, ", {n} {what}").unwrap();
            }
        }
        s
    }
}

/// Diagnostic lines: the message and its detail, one per line.
fn diagnostics(out: &mut String, r: &TestResult) {
    for line in r.lines() {
        writeln!(out, "# {line}").unwrap();
    }
}

pub fn ktap(run: &KernelRun) -> String {
    let mut out = String::from("KTAP version 1\n");
    writeln!(out, "# kernel: {} ({})", run.kernel, run.accel).unwrap();
    writeln!(out, "1..{}", run.results.len()).unwrap();
    for (i, r) in run.results.iter().enumerate() {
        let n = i + 1;
        match r.status {
            Status::Pass => writeln!(out, "ok {n} {}", r.name).unwrap(),
            Status::Skip | Status::NotRun => {
                writeln!(out, "ok {n} {} # SKIP {}", r.name, r.message).unwrap()
            }
            Status::Fail | Status::Crashed => {
                diagnostics(&mut out, r);
                writeln!(out, "not ok {n} {}", r.name).unwrap();
            }
        }
    }
    out
}

/// One result as a JUnit test case: a failure or a crash carries its
/// first line as the message and the whole of it as the text.
fn junit_case(kernel: &str, r: &TestResult) -> TestCase {
    let first = r.message.as_str();
    let full = r.lines().collect::<Vec<_>>().join("\n");
    let mut status = match r.status {
        Status::Pass => TestCaseStatus::success(),
        Status::Skip | Status::NotRun => TestCaseStatus::skipped(),
        Status::Fail => TestCaseStatus::non_success(NonSuccessKind::Failure),
        Status::Crashed => TestCaseStatus::non_success(NonSuccessKind::Error),
    };
    match r.status {
        Status::Pass => {}
        Status::Skip | Status::NotRun => {
            status.set_message(r.message.as_str());
        }
        Status::Fail | Status::Crashed => {
            status.set_message(first);
            status.set_description(full);
        }
    }
    let mut case = TestCase::new(r.name.as_str(), status);
    case.set_classname(kernel);
    case.set_time(Duration::from_millis(r.millis));
    case
}

/// The JUnit XML of a run: one test suite per kernel.
pub fn junit(suite: &str, runs: &[KernelRun]) -> String {
    let mut report = Report::new(suite);
    for run in runs {
        let mut s = TestSuite::new(run.kernel.as_str());
        s.set_time(Duration::from_secs_f64(run.seconds.max(0.0)));
        s.add_test_cases(run.results.iter().map(|r| junit_case(&run.kernel, r)));
        report.add_test_suite(s);
    }
    report
        .to_string()
        .expect("a JUnit report of plain strings serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> KernelRun {
        let r = |name: &str, status, message: &str| {
            let lines = message.split('\n').map(str::to_string).collect();
            TestResult {
                millis: 1500,
                ..TestResult::with_lines(name, status, lines)
            }
        };
        KernelRun {
            kernel: "mainline".into(),
            accel: "TCG".into(),
            results: vec![
                r("t01_a", Status::Pass, ""),
                r("t02_b", Status::Fail, "rss <3> & \"x\"\nsecond line"),
                r("t27_c", Status::Skip, "one NUMA node"),
            ],
            seconds: 12.5,
        }
    }

    #[test]
    fn closing_line() {
        let c = Counts::of(&run().results);
        assert_eq!(c.closing_line(), "1 passed, 1 failed, 1 skipped");
        assert_eq!(
            Counts {
                passed: 5,
                ..Counts::default()
            }
            .closing_line(),
            "5 passed, 0 failed"
        );
        let crash = Counts {
            passed: 15,
            failed: 2,
            crashed: 1,
            not_run: 21,
            ..Counts::default()
        };
        assert_eq!(
            crash.closing_line(),
            "15 passed, 2 failed, 1 crashed, 21 not run"
        );
        assert!(crash.bad());
    }

    fn crashed_run() -> KernelRun {
        let mut k = run();
        k.results.push(TestResult::with_lines(
            "t28_d",
            Status::Crashed,
            vec![
                "the kernel panicked: Kernel panic - not syncing: dumptest".into(),
                "first splat: BUG: x".into(),
            ],
        ));
        k.results.push(TestResult::new(
            "t28_e",
            Status::NotRun,
            0,
            "not run: the guest died during t28_d".into(),
        ));
        k
    }

    #[test]
    fn crashed_and_not_run_tests_are_reported() {
        let k = ktap(&crashed_run());
        let lines: Vec<&str> = k.lines().collect();
        assert!(lines.contains(&"# the kernel panicked: Kernel panic - not syncing: dumptest"));
        assert!(lines.contains(&"# first splat: BUG: x"));
        assert!(lines.contains(&"not ok 4 t28_d"));
        assert!(lines.contains(&"ok 5 t28_e # SKIP not run: the guest died during t28_d"));
        let j = junit("bpflab vmtest", &[crashed_run()]);
        assert!(
            j.contains("tests=\"5\" skipped=\"2\" failures=\"1\" errors=\"1\""),
            "{j}"
        );
        assert!(
            j.contains(
                "<error message=\"the kernel panicked: Kernel panic - not syncing: dumptest\">"
            ),
            "{j}"
        );
        assert!(
            j.contains("<skipped message=\"not run: the guest died during t28_d\"/>"),
            "{j}"
        );
        assert_eq!(j.matches("<testcase ").count(), 5);
    }

    #[test]
    fn ktap_lines() {
        let k = ktap(&run());
        let lines: Vec<&str> = k.lines().collect();
        assert_eq!(lines[0], "KTAP version 1");
        assert!(lines.contains(&"1..3"));
        assert!(lines.contains(&"ok 1 t01_a"));
        assert!(lines.contains(&"# rss <3> & \"x\""));
        assert!(lines.contains(&"# second line"));
        assert!(lines.contains(&"not ok 2 t02_b"));
        assert!(lines.contains(&"ok 3 t27_c # SKIP one NUMA node"));
    }

    #[test]
    fn junit_is_escaped_and_counted() {
        let j = junit("bpflab vmtest", &[run()]);
        assert!(
            j.contains(
                "<testsuites name=\"bpflab vmtest\" tests=\"3\" skipped=\"1\" failures=\"1\" errors=\"0\">"
            ),
            "{j}"
        );
        assert!(
            j.contains("<testcase name=\"t01_a\" classname=\"mainline\" time=\"1.500\"/>"),
            "{j}"
        );
        assert!(
            j.contains("<failure message=\"rss &lt;3&gt; &amp; &quot;x&quot;\">"),
            "{j}"
        );
        assert!(j.contains("<skipped message=\"one NUMA node\"/>"), "{j}");
        assert_eq!(j.matches("<testcase ").count(), 3);
        assert!(j.trim_end().ends_with("</testsuites>"));
    }
}
