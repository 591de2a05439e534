//! test_progs's output (serial, not verbose) to per-test results.
//!
//! test_progs prints a failed test's log, then one `#N/M test/sub:RESULT`
//! line per subtest, then `#N test:RESULT`, and at the end
//! `Summary: P/S PASSED, K SKIPPED, F FAILED`. A test with subtests is
//! reported as its subtests (a failure outside them as the test itself),
//! so that a regression in one subtest is not hidden by another subtest
//! failing on both kernels.

use crate::report::protocol::{Status, TestResult};

/// What one test_progs run reported.
#[derive(Debug, Default)]
pub struct Parsed {
    pub results: Vec<TestResult>,
    /// Whether the closing `Summary:` line came: without it test_progs
    /// died, or was killed, half way.
    pub summary: Option<String>,
}

/// Lines of a failed test's log kept in its message.
const LOG_LINES: usize = 12;

pub fn parse(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut log: Vec<&str> = Vec::new();
    // Subtest results of the test being printed, until its own line.
    let mut subtests: Vec<TestResult> = Vec::new();
    let mut last_result = "";
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("Summary: ") {
            parsed.summary = Some(rest.trim().to_string());
            continue;
        }
        let Some((number, name, status)) = result_line(line) else {
            log.push(line);
            continue;
        };
        // A failed test's line can come twice (after its log, and again).
        if line == last_result {
            continue;
        }
        last_result = line;
        let lines = if status == Status::Fail {
            failure_lines(&log)
        } else {
            Vec::new()
        };
        log.clear();
        let result = TestResult::with_lines(name, status, lines);
        if number.contains('/') {
            subtests.push(result);
            continue;
        }
        let any_sub_failed = subtests.iter().any(|s| s.status == Status::Fail);
        if result.status == Status::Pass && any_sub_failed {
            // test_progs's verdict on the test stands: a test that passes
            // with a failing subtest made it fail on purpose
            // (prog_tests_framework tests its own failure path).
            for s in subtests.iter_mut().filter(|s| s.status == Status::Fail) {
                s.status = Status::Skip;
                s.message = format!("failed, as its test expects: {} passed", result.name);
            }
        }
        if subtests.is_empty() || (result.status == Status::Fail && !any_sub_failed) {
            parsed.results.push(result);
        }
        parsed.results.append(&mut subtests);
    }
    // Subtests whose test line never came: test_progs died inside it.
    parsed.results.append(&mut subtests);
    parsed
}

/// The highest test number test_progs printed a line for (0: none).
pub fn last_number(stdout: &str) -> usize {
    stdout
        .lines()
        .filter_map(|l| result_line(l).map(|(number, _, _)| number))
        .filter_map(|n| n.split('/').next()?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// Whether a result's `name` is `test` itself or one of its subtests
/// (`test/sub`).
pub fn is_test_or_subtest(name: &str, test: &str) -> bool {
    name.strip_prefix(test)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The tests of `plan` that no result names (as itself, or as a subtest
/// of it), as not run.
pub fn not_reported(results: &[TestResult], plan: &[String]) -> Vec<TestResult> {
    plan.iter()
        .filter(|t| !results.iter().any(|r| is_test_or_subtest(&r.name, t)))
        .map(|t| TestResult::new(t, Status::NotRun, 0, "test_progs did not report it".into()))
        .collect()
}

/// `#12     name:OK` or `#12/3   name/sub:FAIL` as (number, name, status).
fn result_line(line: &str) -> Option<(&str, &str, Status)> {
    let rest = line.strip_prefix('#')?;
    let (number, rest) = rest.split_once(char::is_whitespace)?;
    if !number.chars().all(|c| c.is_ascii_digit() || c == '/') || number.is_empty() {
        return None;
    }
    let rest = rest.trim();
    // "OK (SKIP: 2/5)": some subtests skipped, the test passed.
    let (name, word) = match rest.find(":OK (SKIP: ") {
        Some(at) => (&rest[..at], "OK"),
        None => rest.rsplit_once(':')?,
    };
    let status = match word {
        "OK" => Status::Pass,
        "SKIP" => Status::Skip,
        "FAIL" => Status::Fail,
        _ => return None,
    };
    Some((number, name, status))
}

/// The tail of a failed test's log, a line each.
fn failure_lines(log: &[&str]) -> Vec<String> {
    let lines: Vec<&str> = log
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    let tail = &lines[lines.len().saturating_sub(LOG_LINES)..];
    if tail.is_empty() {
        vec!["failed (test_progs printed no log)".to_string()]
    } else {
        tail.iter().map(|l| l.to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subtest_that_fails_inside_a_passing_test_failed_on_purpose() {
        let out = "#203/1   prog_tests_framework/test_fail_subtest:FAIL\n#203/2   prog_tests_framework/test_ok:OK\n#203     prog_tests_framework:OK\nSummary: 1/2 PASSED, 0 SKIPPED, 0 FAILED\n";
        let p = parse(out);
        let got: Vec<(&str, Status)> = p
            .results
            .iter()
            .map(|r| (r.name.as_str(), r.status))
            .collect();
        assert_eq!(
            got,
            [
                ("prog_tests_framework/test_fail_subtest", Status::Skip),
                ("prog_tests_framework/test_ok", Status::Pass)
            ]
        );
        assert!(p.results[0]
            .message
            .starts_with("failed, as its test expects"));
    }

    const RUN: &str = "\
#1       mmap:OK
#2/1     ringbuf/ringbuf:OK
#2/2     ringbuf/ringbuf_n:OK
#2       ringbuf:OK
test_skeleton:PASS:skel_open 0 nsec
test_skeleton:FAIL:bss_check unexpected bss_check: actual 1 != expected 0
#3       skeleton:FAIL
#3       skeleton:FAIL
#4       arena_list:SKIP
#5/1     user_ringbuf/test_user_ringbuf_mappings:OK
#5/2     user_ringbuf/test_user_ringbuf_commit:SKIP
#5       user_ringbuf:OK (SKIP: 1/2)
Summary: 3/3 PASSED, 2 SKIPPED, 1 FAILED
";

    fn find<'a>(p: &'a Parsed, name: &str) -> &'a TestResult {
        p.results
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("{name} not parsed: {:?}", p.results))
    }

    #[test]
    fn tests_with_subtests_are_reported_as_their_subtests() {
        let p = parse(RUN);
        let names: Vec<&str> = p.results.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "mmap",
                "ringbuf/ringbuf",
                "ringbuf/ringbuf_n",
                "skeleton",
                "arena_list",
                "user_ringbuf/test_user_ringbuf_mappings",
                "user_ringbuf/test_user_ringbuf_commit",
            ]
        );
        assert_eq!(find(&p, "mmap").status, Status::Pass);
        assert_eq!(find(&p, "arena_list").status, Status::Skip);
        assert_eq!(
            find(&p, "user_ringbuf/test_user_ringbuf_commit").status,
            Status::Skip
        );
        assert_eq!(
            p.summary.as_deref(),
            Some("3/3 PASSED, 2 SKIPPED, 1 FAILED")
        );
    }

    #[test]
    fn a_failure_carries_its_log() {
        let p = parse(RUN);
        let s = find(&p, "skeleton");
        assert_eq!(s.status, Status::Fail);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines.len() > 1, "{lines:?}");
        assert!(
            lines.iter().any(|l| l.contains("bss_check unexpected")),
            "{lines:?}"
        );
    }

    #[test]
    fn a_failure_outside_the_subtests_is_the_test_s_own() {
        let p = parse("#7/1 a/x:OK\n#7 a:FAIL\n#8/1 b/y:FAIL\n#8 b:FAIL\n");
        assert_eq!(find(&p, "a").status, Status::Fail);
        assert_eq!(find(&p, "a/x").status, Status::Pass);
        assert_eq!(find(&p, "b/y").status, Status::Fail);
        assert!(!p.results.iter().any(|r| r.name == "b"));
        assert_eq!(p.summary, None);
    }

    #[test]
    fn the_last_test_number_counts_subtests_as_their_test() {
        assert_eq!(last_number(RUN), 5);
        assert_eq!(last_number("#9/2 x/y:OK\n"), 9);
        assert_eq!(last_number("nothing\n"), 0);
    }

    #[test]
    fn planned_tests_without_a_result_are_not_run() {
        let p = parse(RUN);
        let plan = ["mmap", "ringbuf", "ring", "arena_htab"].map(String::from);
        let missing = not_reported(&p.results, &plan);
        let names: Vec<&str> = missing.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["ring", "arena_htab"]);
        assert!(missing.iter().all(|r| r.status == Status::NotRun));
    }

    #[test]
    fn lines_that_only_look_like_results_are_log() {
        let p = parse("#include <x.h>:OK\n# comment:FAIL\n#12 name:WEIRD\n");
        assert!(p.results.is_empty(), "{:?}", p.results);
    }
}
