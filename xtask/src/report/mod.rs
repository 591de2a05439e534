//! Test reports: KTAP per kernel, one JUnit XML file for the run, and the
//! counts behind the closing `N passed, N failed` line.

pub mod bench;
pub mod plot;
pub mod protocol;

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
}

impl Counts {
    pub fn of(results: &[TestResult]) -> Counts {
        let mut c = Counts::default();
        for r in results {
            match r.status {
                Status::Pass => c.passed += 1,
                Status::Fail => c.failed += 1,
                Status::Skip => c.skipped += 1,
            }
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
        }
    }

    /// `N passed, N failed` plus `, N skipped` when any were skipped.
    pub fn closing_line(&self) -> String {
        let mut s = format!("{} passed, {} failed", self.passed, self.failed);
        if self.skipped > 0 {
            write!(s, ", {} skipped", self.skipped).unwrap();
        }
        s
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
            Status::Skip => writeln!(out, "ok {n} {} # SKIP {}", r.name, r.message).unwrap(),
            Status::Fail => {
                for part in r.message.split(" | ") {
                    writeln!(out, "# {part}").unwrap();
                }
                writeln!(out, "not ok {n} {}", r.name).unwrap();
            }
        }
    }
    out
}

pub fn junit(runs: &[KernelRun]) -> String {
    let total = Counts::total(runs);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    writeln!(
        out,
        "<testsuites name=\"bpflab vmtest\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
        total.passed + total.failed + total.skipped,
        total.failed,
        total.skipped
    )
    .unwrap();
    for run in runs {
        let c = Counts::of(&run.results);
        writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3}\">",
            xml(&run.kernel),
            run.results.len(),
            c.failed,
            c.skipped,
            run.seconds
        )
        .unwrap();
        for r in &run.results {
            let head = format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                xml(&run.kernel),
                xml(&r.name),
                r.millis as f64 / 1000.0
            );
            match r.status {
                Status::Pass => writeln!(out, "{head}/>").unwrap(),
                Status::Skip => writeln!(
                    out,
                    "{head}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                    xml(&r.message)
                )
                .unwrap(),
                Status::Fail => writeln!(
                    out,
                    "{head}>\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                    xml(r.message.split(" | ").next().unwrap_or("")),
                    xml(&r.message.replace(" | ", "\n"))
                )
                .unwrap(),
            }
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
                failed: 0,
                skipped: 0
            }
            .closing_line(),
            "5 passed, 0 failed"
        );
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
        let j = junit(&[run()]);
        assert!(j.contains(
            "<testsuites name=\"bpflab vmtest\" tests=\"3\" failures=\"1\" skipped=\"1\">"
        ));
        assert!(j.contains("<testcase classname=\"patched\" name=\"t01_a\" time=\"1.500\"/>"));
        assert!(j.contains("<failure message=\"rss &lt;3&gt; &amp; &quot;x&quot;\">"));
        assert!(j.contains("<skipped message=\"one NUMA node\"/>"));
        assert_eq!(j.matches("<testcase ").count(), 3);
        assert!(j.trim_end().ends_with("</testsuites>"));
    }
}
