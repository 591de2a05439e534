//! Test reports: KTAP per kernel, one JUnit XML file for the run, and the
//! counts behind the closing `N passed, N failed` line.

pub mod bench;
pub mod plot;
pub mod protocol;
pub mod skips;
pub mod sparse;

use std::fmt::Write as _;

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

    pub fn all(&self) -> usize {
        self.passed + self.failed + self.skipped + self.crashed + self.not_run
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

/// Diagnostic lines: a message's ` | `-separated parts, one per line.
fn diagnostics(out: &mut String, message: &str) {
    for part in message.split(" | ") {
        writeln!(out, "# {part}").unwrap();
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
                diagnostics(&mut out, &r.message);
                writeln!(out, "not ok {n} {}", r.name).unwrap();
            }
        }
    }
    out
}

fn junit_case(out: &mut String, kernel: &str, r: &TestResult) {
    let head = format!(
        "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
        xml(kernel),
        xml(&r.name),
        r.millis as f64 / 1000.0
    );
    let first = xml(r.message.split(" | ").next().unwrap_or(""));
    let body = xml(&r.message.replace(" | ", "\n"));
    let inner = match r.status {
        Status::Pass => return writeln!(out, "{head}/>").unwrap(),
        Status::Skip | Status::NotRun => format!("<skipped message=\"{}\"/>", xml(&r.message)),
        Status::Fail => format!("<failure message=\"{first}\">{body}</failure>"),
        Status::Crashed => format!("<error message=\"{first}\">{body}</error>"),
    };
    writeln!(out, "{head}>\n      {inner}\n    </testcase>").unwrap();
}

pub fn junit(suite: &str, runs: &[KernelRun]) -> String {
    let total = Counts::total(runs);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        xml(suite),
        total.all(),
        total.failed,
        total.crashed,
        total.skipped + total.not_run
    )
    .unwrap();
    for run in runs {
        let c = Counts::of(&run.results);
        writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
            xml(&run.kernel),
            run.results.len(),
            c.failed,
            c.crashed,
            c.skipped + c.not_run,
            run.seconds
        )
        .unwrap();
        for r in &run.results {
            junit_case(&mut out, &run.kernel, r);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> KernelRun {
        let r = |name: &str, status, message: &str| TestResult {
            name: name.into(),
            status,
            millis: 1500,
            message: message.into(),
        };
        KernelRun {
            kernel: "patched".into(),
            accel: "TCG".into(),
            results: vec![
                r("t01_a", Status::Pass, ""),
                r("t02_b", Status::Fail, "rss <3> & \"x\" | second line"),
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
        k.results.push(TestResult {
            name: "t28_d".into(),
            status: Status::Crashed,
            millis: 0,
            message:
                "the kernel panicked: Kernel panic - not syncing: dumptest | first splat: BUG: x"
                    .into(),
        });
        k.results.push(TestResult {
            name: "t28_e".into(),
            status: Status::NotRun,
            millis: 0,
            message: "not run: the guest died during t28_d".into(),
        });
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
            j.contains("tests=\"5\" failures=\"1\" errors=\"1\" skipped=\"2\""),
            "{j}"
        );
        assert!(j.contains(
            "<error message=\"the kernel panicked: Kernel panic - not syncing: dumptest\">"
        ));
        assert!(j.contains("<skipped message=\"not run: the guest died during t28_d\"/>"));
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
        assert!(j.contains(
            "<testsuites name=\"bpflab vmtest\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\">"
        ));
        assert!(j.contains("<testcase classname=\"patched\" name=\"t01_a\" time=\"1.500\"/>"));
        assert!(j.contains("<failure message=\"rss &lt;3&gt; &amp; &quot;x&quot;\">"));
        assert!(j.contains("<skipped message=\"one NUMA node\"/>"));
        assert_eq!(j.matches("<testcase ").count(), 3);
        assert!(j.trim_end().ends_with("</testsuites>"));
    }
}
