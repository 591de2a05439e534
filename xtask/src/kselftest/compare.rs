//! Base against patched, test by test: a test that fails only on a
//! patched kernel is a regression; one that fails on base too is the
//! environment's or base's failure, listed but not held against the
//! series.

use std::fmt::Write as _;

use crate::report::protocol::Status;
use crate::report::KernelRun;

/// One kernel's results and which side of the comparison it is on.
pub struct Side<'a> {
    pub run: &'a KernelRun,
    pub patched: bool,
}

/// What the comparison found, by test name.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Bad on a patched kernel, good on every base kernel.
    pub regressions: Vec<String>,
    /// Bad on a patched kernel and on a base kernel.
    pub on_base_too: Vec<String>,
    /// Bad on base only.
    pub base_only: Vec<String>,
    /// Bad on a patched kernel with no base kernel in the run to compare.
    pub unexplained: Vec<String>,
}

impl Findings {
    /// Whether the series is to blame for anything.
    pub fn fails(&self) -> bool {
        !self.regressions.is_empty() || !self.unexplained.is_empty()
    }
}

pub(super) fn bad(s: Status) -> bool {
    matches!(s, Status::Fail | Status::Crashed | Status::NotRun)
}

/// Every test name, in first-seen order, with its status per side (`None`:
/// the kernel did not report it).
pub(super) fn rows(sides: &[Side]) -> Vec<(String, Vec<Option<Status>>)> {
    let mut order: Vec<&str> = Vec::new();
    for side in sides {
        for r in &side.run.results {
            if !order.contains(&r.name.as_str()) {
                order.push(&r.name);
            }
        }
    }
    order
        .into_iter()
        .map(|name| {
            let row = sides.iter().map(|s| status_of(s.run, name)).collect();
            (name.to_string(), row)
        })
        .collect()
}

/// A test's status on one kernel. One kernel may report a test as its
/// subtests and another as a whole (skipped before its subtests ran): a
/// subtest takes its test's status, a test the worst of its subtests'.
pub(super) fn status_of(run: &KernelRun, name: &str) -> Option<Status> {
    if let Some(r) = run.results.iter().find(|r| r.name == name) {
        return Some(r.status);
    }
    if let Some((test, _)) = name.split_once('/') {
        if let Some(r) = run.results.iter().find(|r| r.name == test) {
            return Some(r.status);
        }
    }
    let prefix = format!("{name}/");
    let subs: Vec<Status> = run
        .results
        .iter()
        .filter(|r| r.name.starts_with(&prefix))
        .map(|r| r.status)
        .collect();
    if subs.is_empty() {
        None
    } else if let Some(b) = subs.iter().find(|s| bad(**s)) {
        Some(*b)
    } else if subs.iter().all(|s| *s == Status::Skip) {
        Some(Status::Skip)
    } else {
        Some(Status::Pass)
    }
}

pub fn findings(sides: &[Side]) -> Findings {
    let mut f = Findings::default();
    let has_base = sides.iter().any(|s| !s.patched);
    for (name, row) in rows(sides) {
        // A kernel that never reported the test, while another did: the
        // run stopped before it.
        let status = |i: usize| row[i].unwrap_or(Status::NotRun);
        let bad_on =
            |patched: bool| (0..sides.len()).any(|i| sides[i].patched == patched && bad(status(i)));
        match (bad_on(true), bad_on(false)) {
            (true, _) if !has_base => f.unexplained.push(name),
            (true, true) => f.on_base_too.push(name),
            (true, false) => f.regressions.push(name),
            (false, true) => f.base_only.push(name),
            (false, false) => {}
        }
    }
    f
}

pub(super) fn word(s: Option<Status>) -> &'static str {
    match s {
        Some(Status::Pass) => "ok",
        Some(Status::Fail) => "FAIL",
        Some(Status::Skip) => "skip",
        Some(Status::Crashed) => "CRASH",
        Some(Status::NotRun) | None => "not run",
    }
}

/// The side-by-side table. With `only_bad`, rows where every kernel
/// passed, or every kernel skipped, are counted, not listed: a row whose
/// kernels differ (ok on base, skip on a variant) is always shown.
pub fn table(sides: &[Side], only_bad: bool) -> String {
    let rows = rows(sides);
    let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(4).max(4);
    let mut out = format!("{:width$}", "test");
    for s in sides {
        write!(out, "  {:>9}", s.run.kernel).unwrap();
    }
    out.push('\n');
    let mut hidden = 0;
    for (name, row) in &rows {
        let any_bad = row.iter().any(|s| bad(s.unwrap_or(Status::NotRun)));
        let differs = row.windows(2).any(|w| w[0] != w[1]);
        if only_bad && !any_bad && !differs {
            hidden += 1;
            continue;
        }
        write!(out, "{name:width$}").unwrap();
        for s in row {
            write!(out, "  {:>9}", word(*s)).unwrap();
        }
        out.push('\n');
    }
    if hidden > 0 {
        writeln!(
            out,
            "({hidden} more passed on every kernel, or skipped on every kernel)"
        )
        .unwrap();
    }
    out
}

/// Per runner (the `<runner>:` of result names), each kernel's counts:
/// `test_progs  base 48 ok, 2 FAIL, 1 skip  patched ...`.
pub fn runner_summary(sides: &[Side]) -> String {
    let mut runners: Vec<&str> = Vec::new();
    for s in sides {
        for r in &s.run.results {
            let runner = r.name.split_once(':').map_or(r.name.as_str(), |(p, _)| p);
            if !runners.contains(&runner) {
                runners.push(runner);
            }
        }
    }
    let width = runners.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut out = String::new();
    for runner in runners {
        write!(out, "{runner:width$}").unwrap();
        for s in sides {
            let of_runner: Vec<Status> = s
                .run
                .results
                .iter()
                .filter(|r| r.name.split_once(':').map_or(r.name.as_str(), |(p, _)| p) == runner)
                .map(|r| r.status)
                .collect();
            let n = |st: Status| of_runner.iter().filter(|x| **x == st).count();
            let bad = of_runner.len() - n(Status::Pass) - n(Status::Skip);
            write!(
                out,
                "  {}: {} ok, {bad} bad, {} skip",
                s.run.kernel,
                n(Status::Pass),
                n(Status::Skip)
            )
            .unwrap();
        }
        out.push('\n');
    }
    out
}

/// The line of a run with no regression (other rules may still fail it).
pub const NO_REGRESSION: &str =
    "no regression: nothing fails on a variant of the series that passes on base";

/// The lines that say what the comparison means, for the end of a run.
pub fn verdict(f: &Findings) -> Vec<String> {
    let groups: [(&[String], &str); 4] = [
        (&f.regressions, "REGRESSION: {n} test(s) fail only on a variant of the series"),
        (
            &f.unexplained,
            "FAIL: {n} test(s) fail on a variant, and no base kernel ran to compare (add it: --kernel eager, or base for a tree of your own)",
        ),
        (
            &f.on_base_too,
            "not a regression: {n} test(s) fail on base too (the environment or base)",
        ),
        (&f.base_only, "{n} test(s) fail on base only"),
    ];
    let mut out: Vec<String> = groups
        .iter()
        .filter(|(tests, _)| !tests.is_empty())
        .map(|(tests, head)| {
            let head = head.replace("{n}", &tests.len().to_string());
            format!("{head}: {}", tests.join(", "))
        })
        .collect();
    if !f.fails() {
        out.push(NO_REGRESSION.into());
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::report::protocol::TestResult;

    /// A base and a patched side.
    pub(in crate::kselftest) fn pair<'a>(
        base: &'a KernelRun,
        patched: &'a KernelRun,
    ) -> [Side<'a>; 2] {
        [
            Side {
                run: base,
                patched: false,
            },
            Side {
                run: patched,
                patched: true,
            },
        ]
    }

    /// A kernel's run of `results`.
    pub(in crate::kselftest) fn run(kernel: &str, results: &[(&str, Status)]) -> KernelRun {
        KernelRun {
            kernel: kernel.into(),
            accel: "tcg".into(),
            results: results
                .iter()
                .map(|(n, s)| TestResult::new(n, *s, 0, String::new()))
                .collect(),
            seconds: 1.0,
        }
    }

    #[test]
    fn only_patched_failures_are_regressions() {
        use Status::*;
        let base = run(
            "base",
            &[
                ("mmap", Pass),
                ("both", Fail),
                ("fixed", Fail),
                ("sk", Skip),
                ("same", Pass),
            ],
        );
        let patched = run(
            "patched",
            &[
                ("mmap", Fail),
                ("both", Fail),
                ("fixed", Pass),
                ("sk", Pass),
                ("same", Pass),
            ],
        );
        let sides = pair(&base, &patched);
        let f = findings(&sides);
        assert_eq!(f.regressions, ["mmap"]);
        assert_eq!(f.on_base_too, ["both"]);
        assert_eq!(f.base_only, ["fixed"]);
        assert!(f.fails());
        let t = table(&sides, true);
        assert!(t.contains("mmap") && t.contains("FAIL"), "{t}");
        assert!(t.lines().any(|l| l.starts_with("sk ")), "{t}");
        assert!(
            t.contains("(1 more passed on every kernel, or skipped on every kernel)"),
            "{t}"
        );
        assert!(verdict(&f)[0].starts_with("REGRESSION: 1 test(s)"));
    }

    #[test]
    fn each_runner_is_counted_per_kernel() {
        use Status::*;
        let base = run(
            "base",
            &[
                ("test_maps:a", Pass),
                ("test_verifier:#1/p x", Fail),
                ("test_maps:b", Skip),
            ],
        );
        let patched = run(
            "patched",
            &[("test_maps:a", Pass), ("test_verifier:#1/p x", Pass)],
        );
        let s = runner_summary(&pair(&base, &patched));
        assert_eq!(
            s,
            "test_maps      base: 1 ok, 0 bad, 1 skip  patched: 1 ok, 0 bad, 0 skip\ntest_verifier  base: 0 ok, 1 bad, 0 skip  patched: 1 ok, 0 bad, 0 skip\n"
        );
    }

    #[test]
    fn a_test_missing_on_patched_counts_as_not_run_there() {
        let base = run("base", &[("a", Status::Pass), ("b", Status::Pass)]);
        let patched = run("patched", &[("a", Status::Pass)]);
        let sides = pair(&base, &patched);
        assert_eq!(findings(&sides).regressions, ["b"]);
        assert!(table(&sides, false).contains("not run"));
    }

    #[test]
    fn a_test_skipped_whole_on_one_kernel_matches_its_subtests_on_another() {
        use Status::*;
        let base = run("base", &[("tp", Skip), ("ok_all", Pass)]);
        let patched = run(
            "patched",
            &[("tp/a", Pass), ("tp/b", Pass), ("ok_all/x", Fail)],
        );
        let sides = pair(&base, &patched);
        let f = findings(&sides);
        assert!(
            f.regressions.iter().all(|t| t.starts_with("ok_all")),
            "{f:?}"
        );
        assert!(f.regressions.contains(&"ok_all/x".to_string()), "{f:?}");
        assert!(!f.regressions.iter().any(|t| t.starts_with("tp")), "{f:?}");
    }

    #[test]
    fn without_base_a_failure_is_unexplained_and_fails() {
        let patched = run("patched-debug", &[("a", Status::Fail)]);
        let f = findings(&[Side {
            run: &patched,
            patched: true,
        }]);
        assert_eq!(f.unexplained, ["a"]);
        assert!(f.fails());
        let all_good = run("patched-debug", &[("a", Status::Pass)]);
        let f = findings(&[Side {
            run: &all_good,
            patched: true,
        }]);
        assert!(!f.fails());
        assert!(verdict(&f)[0].starts_with("no regression"));
    }
}
