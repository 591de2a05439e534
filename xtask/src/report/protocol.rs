//! Reading the results channel: the plan, each test's start and result,
//! the benchmark records and the verdict, as `guest_common::protocol`
//! defines them.

use anyhow::{bail, Result};
use guest_common::protocol::{self as wire, Line, Program, ResultWord, TestLine, LINE_BREAK};
pub use guest_common::protocol::{Outcome, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Fail,
    Skip,
    /// The kernel died (or the guest stopped responding) during this test.
    Crashed,
    /// Never reached: the runner stopped early, or the guest died first.
    NotRun,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TestResult {
    pub name: String,
    pub status: Status,
    pub millis: u64,
    /// Its first line: why it failed, skipped or was not run.
    pub message: String,
    /// The lines after it: a log's tail, a symbolized splat, a console's.
    pub detail: Vec<String>,
}

impl TestResult {
    /// A result whose message is one line, with no detail.
    pub fn new(name: &str, status: Status, millis: u64, message: String) -> TestResult {
        TestResult {
            name: name.to_string(),
            status,
            millis,
            message,
            detail: Vec::new(),
        }
    }

    /// A result whose first line of `lines` is the message and the rest
    /// the detail.
    pub fn with_lines(name: &str, status: Status, lines: Vec<String>) -> TestResult {
        let mut lines = lines.into_iter();
        let message = lines.next().unwrap_or_default();
        TestResult::new(name, status, 0, message).with_detail(lines)
    }

    /// The result with `lines` after its detail.
    pub fn with_detail(mut self, lines: impl IntoIterator<Item = String>) -> TestResult {
        self.detail.extend(lines);
        self
    }

    /// The message, then its detail: one line each.
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.message.as_str()).chain(self.detail.iter().map(String::as_str))
    }
}

/// Everything the guest said on the results channel, before any judgement
/// of whether the run was complete.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    /// How many tests were announced (None: no plan line).
    pub planned: Option<usize>,
    /// Their names, in order, where the plan line gave them.
    pub plan: Vec<String>,
    /// Tests that started, in order.
    pub started: Vec<String>,
    pub results: Vec<TestResult>,
    pub verdicts: Vec<Verdict>,
    /// `BPFLAB-BENCH` payloads, unparsed.
    pub bench: Vec<String>,
    /// `BPFLAB-FUZZ` payloads, unparsed.
    pub fuzz: Vec<String>,
}

impl Transcript {
    /// The test that started but never reported: what was running when
    /// the guest died.
    pub fn running(&self) -> Option<&str> {
        let last = self.started.last()?;
        (!self.results.iter().any(|r| &r.name == last)).then_some(last.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GuestReport {
    pub results: Vec<TestResult>,
    pub verdict: Verdict,
    pub bench: Vec<String>,
    pub fuzz: Vec<String>,
}

/// Reads the channel line by line, each a `wire::Line`. Only what cannot
/// be trusted even in a cut-off run is an error: a malformed line, a test
/// reported twice, a second plan.
pub fn read_transcript(text: &str) -> Result<Transcript> {
    let mut t = Transcript::default();
    // A line without its newline was cut off when the guest died.
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    for raw in complete.lines() {
        if !raw.starts_with(wire::LINE_PREFIX) {
            continue;
        }
        match raw.parse::<Line>().map_err(anyhow::Error::msg)? {
            Line::Plan { count, names } => {
                if t.planned.replace(count).is_some() {
                    bail!("the guest announced its test plan twice");
                }
                t.plan = names;
            }
            Line::Start(name) => t.started.push(name),
            Line::Result(r) => {
                if t.results.iter().any(|x| x.name == r.name) {
                    bail!("test {} reported twice", r.name);
                }
                t.results.push(test_result(r));
            }
            Line::Verdict(v) => t.verdicts.push(v),
            Line::Bench(json) => t.bench.push(json),
            Line::Fuzz(json) => t.fuzz.push(json),
        }
    }
    Ok(t)
}

/// A result line's message carries its lines joined on one protocol
/// line: the first is the message, the rest its detail.
fn test_result(r: TestLine) -> TestResult {
    let mut lines = r.message.split(LINE_BREAK).map(str::to_string);
    TestResult {
        name: r.name,
        status: match r.word {
            ResultWord::Pass => Status::Pass,
            ResultWord::Fail => Status::Fail,
            ResultWord::Skip => Status::Skip,
            ResultWord::NotRun => Status::NotRun,
        },
        millis: r.millis,
        message: lines.next().unwrap_or_default(),
        detail: lines.collect(),
    }
}

/// A complete run: exactly one verdict, and for a test run a plan that
/// the results match. Anything else means the guest was cut off or
/// confused, and is an error.
pub fn parse_results(text: &str, program: Program) -> Result<GuestReport> {
    let t = read_transcript(text)?;
    complete(t, program)
}

/// Each test the plan names reported, and none it does not: a count
/// that matches can hide one test reported in another's place.
fn check_names(plan: &[String], results: &[TestResult]) -> Result<()> {
    if plan.is_empty() {
        return Ok(());
    }
    let missing: Vec<&str> = plan
        .iter()
        .filter(|n| !results.iter().any(|r| &r.name == *n))
        .map(String::as_str)
        .collect();
    let unplanned: Vec<&str> = results
        .iter()
        .filter(|r| !plan.contains(&r.name))
        .map(|r| r.name.as_str())
        .collect();
    if missing.is_empty() && unplanned.is_empty() {
        return Ok(());
    }
    bail!(
        "the guest's results do not match its plan: not reported {}; not planned {}",
        missing.join(", "),
        unplanned.join(", ")
    )
}

/// How a guest run that did not end by itself died, for the report.
#[derive(Debug, Clone)]
pub struct Death {
    /// One line: "the kernel panicked: ..." or "the guest stopped responding ...".
    pub cause: String,
    /// The first kernel splat on the console since the running test started.
    pub first_splat: Option<String>,
    /// The last console lines.
    pub excerpt: Vec<String>,
}

/// The results of a run the guest did not finish: every result that
/// arrived is kept, the test that was running is marked crashed with the
/// cause, the first splat and the console excerpt, and every planned test
/// never reached is listed as not run. None when the guest died before it
/// announced its plan (nothing to keep).
pub fn salvage(t: &Transcript, death: &Death) -> Option<Vec<TestResult>> {
    t.planned?;
    let plan = &t.plan;
    let running = t.running().map(str::to_string);
    let mut results = t.results.clone();
    if let Some(name) = &running {
        let splat = death
            .first_splat
            .iter()
            .map(|s| format!("first splat: {}", s.trim()));
        let excerpt = death.excerpt.iter().map(|l| l.trim_end().to_string());
        results.push(
            TestResult::new(name, Status::Crashed, 0, death.cause.clone())
                .with_detail(splat.chain(excerpt)),
        );
    }
    let why = match (&running, t.started.last()) {
        (Some(name), _) => format!("not run: the guest died during {name}"),
        (None, Some(last)) => format!("not run: the guest died after {last}"),
        (None, None) => "not run: the guest died before the first test".to_string(),
    };
    for name in plan {
        if !results.iter().any(|r| &r.name == name) {
            results.push(TestResult::new(name, Status::NotRun, 0, why.clone()));
        }
    }
    let order = |r: &TestResult| plan.iter().position(|n| *n == r.name).unwrap_or(usize::MAX);
    results.sort_by_key(order);
    Some(results)
}

fn complete(mut t: Transcript, program: Program) -> Result<GuestReport> {
    let verdict = match t.verdicts.len() {
        0 => bail!("the guest gave no verdict (it died, hung or was cut off before the end)"),
        1 => t.verdicts.remove(0),
        n => bail!("the guest gave {n} verdicts instead of one"),
    };
    // Test runs announce a plan; a benchmark sends records instead.
    let tests = program == Program::Selftests;
    if tests && matches!(verdict.outcome, Outcome::Pass | Outcome::Fail) {
        match t.planned {
            None => bail!("the guest reported tests without announcing a plan"),
            Some(n) if n != t.results.len() => {
                bail!(
                    "the guest planned {n} tests but reported {}",
                    t.results.len()
                )
            }
            Some(_) => check_names(&t.plan, &t.results)?,
        }
    }
    let any_failed = t.results.iter().any(|r| r.status == Status::Fail);
    if verdict.outcome == Outcome::Pass && any_failed {
        bail!("the guest's verdict is pass but some tests failed");
    }
    if tests && verdict.outcome == Outcome::Fail && !any_failed {
        bail!(
            "the guest's verdict is fail but no test failed ({})",
            verdict.detail
        );
    }
    Ok(GuestReport {
        results: t.results,
        verdict,
        bench: t.bench,
        fuzz: t.fuzz,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "BPFLAB-PLAN 3\r\nBPFLAB-RESULT t01_a pass 12\nBPFLAB-RESULT t02_b fail 7 expected 3 pages | got 2048\nBPFLAB-RESULT t27_c skip 0 one NUMA node\nBPFLAB-VERDICT fail exit=1\n";

    #[test]
    fn parses_results_and_verdict() {
        let r = parse_results(GOOD, Program::Selftests).unwrap();
        assert_eq!(r.verdict.outcome, Outcome::Fail);
        assert_eq!(r.verdict.detail.to_string(), "exit=1");
        assert_eq!(r.results.len(), 3);
        assert_eq!(r.results[0].status, Status::Pass);
        assert_eq!(r.results[1].message, "expected 3 pages");
        assert_eq!(r.results[1].detail, ["got 2048"]);
        assert_eq!(r.results[1].millis, 7);
        assert_eq!(r.results[2].status, Status::Skip);
    }

    #[test]
    fn missing_verdict_is_rejected() {
        let text = GOOD.replace("BPFLAB-VERDICT fail exit=1\n", "");
        let err = parse_results(&text, Program::Selftests)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no verdict"), "{err}");
    }

    #[test]
    fn doubled_verdict_is_rejected() {
        let text = format!("{GOOD}BPFLAB-VERDICT pass exit=0\n");
        let err = parse_results(&text, Program::Selftests)
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 verdicts"), "{err}");
    }

    #[test]
    fn inconsistent_reports_are_rejected() {
        let short = "BPFLAB-PLAN 2\nBPFLAB-RESULT t01 pass 1\nBPFLAB-VERDICT pass exit=0\n";
        assert!(parse_results(short, Program::Selftests)
            .unwrap_err()
            .to_string()
            .contains("planned 2"));
        let dup =
            "BPFLAB-RESULT t01 pass 1\nBPFLAB-RESULT t01 pass 1\nBPFLAB-VERDICT pass exit=0\n";
        assert!(parse_results(dup, Program::Selftests)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        let lying = "BPFLAB-PLAN 1\nBPFLAB-RESULT t01 fail 1 x\nBPFLAB-VERDICT pass exit=0\n";
        assert!(parse_results(lying, Program::Selftests).is_err());
        let garbage = "BPFLAB-PLAN 1\nBPFLAB-RESULT t01 maybe 1\nBPFLAB-VERDICT pass exit=0\n";
        assert!(parse_results(garbage, Program::Selftests)
            .unwrap_err()
            .to_string()
            .contains("malformed"));
    }

    const CUT: &str = "BPFLAB-PLAN 4 t01_a t02_b t03_c t04_d\nBPFLAB-START t01_a\nBPFLAB-RESULT t01_a pass 5\nBPFLAB-START t02_b\nBPFLAB-RESULT t02_b fail 9 expected 0 | got 1\nBPFLAB-START t03_c\n";

    fn death() -> Death {
        Death {
            cause: "the kernel panicked: Kernel panic - not syncing: dumptest".into(),
            first_splat: Some("[   9.000001] BUG: unable to handle page fault".into()),
            excerpt: vec!["[   9.100000] Call Trace:".into()],
        }
    }

    #[test]
    fn a_cut_off_transcript_names_the_running_test() {
        let t = read_transcript(CUT).unwrap();
        assert_eq!((t.planned, t.plan.len()), (Some(4), 4));
        assert_eq!(t.started, ["t01_a", "t02_b", "t03_c"]);
        assert_eq!(t.running(), Some("t03_c"));
        assert!(parse_results(CUT, Program::Selftests)
            .unwrap_err()
            .to_string()
            .contains("no verdict"));
    }

    #[test]
    fn salvage_keeps_results_marks_the_crash_and_lists_the_rest() {
        let t = read_transcript(CUT).unwrap();
        let r = salvage(&t, &death()).unwrap();
        let got: Vec<(&str, Status)> = r.iter().map(|r| (r.name.as_str(), r.status)).collect();
        assert_eq!(
            got,
            [
                ("t01_a", Status::Pass),
                ("t02_b", Status::Fail),
                ("t03_c", Status::Crashed),
                ("t04_d", Status::NotRun)
            ]
        );
        assert!(
            r[2].message
                .starts_with("the kernel panicked: Kernel panic"),
            "{}",
            r[2].message
        );
        assert!(r[2].detail[0].starts_with("first splat: [   9.000001] BUG: unable to handle"));
        assert!(r[2].detail.iter().any(|l| l.contains("Call Trace:")));
        assert_eq!(r[3].message, "not run: the guest died during t03_c");
    }

    #[test]
    fn salvage_needs_a_plan_and_a_finished_run_has_no_crash() {
        assert_eq!(salvage(&read_transcript("").unwrap(), &death()), None);
        let all = "BPFLAB-PLAN 1 t01_a\nBPFLAB-START t01_a\nBPFLAB-RESULT t01_a pass 5\n";
        let r = salvage(&read_transcript(all).unwrap(), &death()).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].status, Status::Pass);
    }

    #[test]
    fn a_line_cut_off_by_the_crash_is_ignored() {
        let t = read_transcript(&format!("{CUT}BPFLAB-RESULT t03_c notr")).unwrap();
        assert_eq!(t.results.len(), 2);
        assert_eq!(t.running(), Some("t03_c"));
        let t = read_transcript("BPFLAB-PLAN 2 t01_a t02_b\nBPFLAB-START t01_a\nBPFLAB-START t0")
            .unwrap();
        assert_eq!(t.running(), Some("t01_a"), "a cut START names no test");
    }

    #[test]
    fn not_run_results_and_named_plans() {
        let text = "BPFLAB-PLAN 2 t01_a t02_b\nBPFLAB-RESULT t01_a fail 3 x\nBPFLAB-RESULT t02_b notrun 0 the runner stopped\nBPFLAB-VERDICT fail exit=1\n";
        let r = parse_results(text, Program::Selftests).unwrap();
        assert_eq!(r.results[1].status, Status::NotRun);
        assert!(
            read_transcript("BPFLAB-PLAN 3 t01_a\n").is_err(),
            "count and names disagree"
        );
        assert!(read_transcript("BPFLAB-START\n").is_err());
        let swapped = "BPFLAB-PLAN 2 t01_a t02_b\nBPFLAB-RESULT t01_a pass 3\nBPFLAB-RESULT t03_c pass 1\nBPFLAB-VERDICT pass exit=0\n";
        let err = parse_results(swapped, Program::Selftests)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not reported t02_b; not planned t03_c"),
            "{err}"
        );
    }

    #[test]
    fn error_verdict_and_bench_lines() {
        let r = parse_results(
            "BPFLAB-BENCH {\"kind\":\"scenario\"}\nBPFLAB-VERDICT error signal=SIGSEGV\n",
            Program::Bench,
        )
        .unwrap();
        assert_eq!(r.verdict.outcome, Outcome::Error);
        assert_eq!(r.bench, ["{\"kind\":\"scenario\"}"]);
        // A benchmark that fails before its first record is a failed
        // benchmark, not a run without a plan.
        let r = parse_results("BPFLAB-VERDICT fail exit=1\n", Program::Bench).unwrap();
        assert_eq!(r.verdict.outcome, Outcome::Fail);
        assert!(parse_results("BPFLAB-VERDICT fail exit=1\n", Program::Selftests).is_err());
    }
}
