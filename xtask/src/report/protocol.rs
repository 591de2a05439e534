//! The results channel (the guest's ttyS1): `BPFLAB-PLAN`, `BPFLAB-RESULT`,
//! `BPFLAB-VERDICT` and `BPFLAB-BENCH` lines, parsed into a report that is
//! either consistent or an error.

use anyhow::{bail, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TestResult {
    pub name: String,
    pub status: Status,
    pub millis: u64,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    Error,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GuestReport {
    pub results: Vec<TestResult>,
    pub verdict: Verdict,
    pub verdict_detail: String,
    /// `BPFLAB-BENCH` payloads, unparsed.
    pub bench: Vec<String>,
}

/// Parses the results channel. Exactly one verdict is required; a
/// missing or doubled verdict, a malformed line, a duplicate test, or a
/// plan that the results do not match means the guest run cannot be
/// trusted, and is an error.
pub fn parse_results(text: &str) -> Result<GuestReport> {
    let mut plan = None;
    let mut results: Vec<TestResult> = Vec::new();
    let mut verdicts = Vec::new();
    let mut bench = Vec::new();
    for raw in text.lines() {
        let line = raw.trim_end_matches('\r');
        let Some((tag, rest)) = line.split_once(' ') else {
            if line.starts_with("BPFLAB-") {
                bail!("malformed results line: {line:?}");
            }
            continue;
        };
        match tag {
            "BPFLAB-PLAN" => {
                let n: usize = rest
                    .trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("malformed plan line: {line:?}"))?;
                if plan.replace(n).is_some() {
                    bail!("the guest announced its test plan twice");
                }
            }
            "BPFLAB-RESULT" => {
                let r = parse_result(rest)
                    .ok_or_else(|| anyhow::anyhow!("malformed result line: {line:?}"))?;
                if results.iter().any(|x| x.name == r.name) {
                    bail!("test {} reported twice", r.name);
                }
                results.push(r);
            }
            "BPFLAB-VERDICT" => {
                let (word, detail) = rest.split_once(' ').unwrap_or((rest, ""));
                let v = match word {
                    "pass" => Verdict::Pass,
                    "fail" => Verdict::Fail,
                    "error" => Verdict::Error,
                    _ => bail!("malformed verdict line: {line:?}"),
                };
                verdicts.push((v, detail.trim().to_string()));
            }
            "BPFLAB-BENCH" => bench.push(rest.to_string()),
            t if t.starts_with("BPFLAB-") => bail!("unknown results line: {line:?}"),
            _ => {}
        }
    }
    let (verdict, verdict_detail) = match verdicts.len() {
        0 => bail!("the guest gave no verdict (it died, hung or was cut off before the end)"),
        1 => verdicts.remove(0),
        n => bail!("the guest gave {n} verdicts instead of one"),
    };
    // Test runs announce a plan; a benchmark sends records instead.
    if matches!(verdict, Verdict::Pass | Verdict::Fail) && bench.is_empty() {
        match plan {
            None => bail!("the guest reported tests without announcing a plan"),
            Some(n) if n != results.len() => {
                bail!("the guest planned {n} tests but reported {}", results.len())
            }
            Some(_) => {}
        }
    }
    let any_failed = results.iter().any(|r| r.status == Status::Fail);
    if verdict == Verdict::Pass && any_failed {
        bail!("the guest's verdict is pass but some tests failed");
    }
    if verdict == Verdict::Fail && !any_failed && bench.is_empty() {
        bail!("the guest's verdict is fail but no test failed ({verdict_detail})");
    }
    Ok(GuestReport {
        results,
        verdict,
        verdict_detail,
        bench,
    })
}

fn parse_result(rest: &str) -> Option<TestResult> {
    let mut parts = rest.splitn(4, ' ');
    let name = parts.next()?.to_string();
    let status = match parts.next()? {
        "pass" => Status::Pass,
        "fail" => Status::Fail,
        "skip" => Status::Skip,
        _ => return None,
    };
    let millis = parts.next()?.parse().ok()?;
    let message = parts.next().unwrap_or("").trim().to_string();
    if name.is_empty() {
        return None;
    }
    Some(TestResult {
        name,
        status,
        millis,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "BPFLAB-PLAN 3\r\nBPFLAB-RESULT t01_a pass 12\nBPFLAB-RESULT t02_b fail 7 expected 3 pages | got 2048\nBPFLAB-RESULT t27_c skip 0 one NUMA node\nBPFLAB-VERDICT fail exit=1\n";

    #[test]
    fn parses_results_and_verdict() {
        let r = parse_results(GOOD).unwrap();
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(r.verdict_detail, "exit=1");
        assert_eq!(r.results.len(), 3);
        assert_eq!(r.results[0].status, Status::Pass);
        assert_eq!(r.results[1].message, "expected 3 pages | got 2048");
        assert_eq!(r.results[1].millis, 7);
        assert_eq!(r.results[2].status, Status::Skip);
    }

    #[test]
    fn missing_verdict_is_rejected() {
        let text = GOOD.replace("BPFLAB-VERDICT fail exit=1\n", "");
        let err = parse_results(&text).unwrap_err().to_string();
        assert!(err.contains("no verdict"), "{err}");
    }

    #[test]
    fn doubled_verdict_is_rejected() {
        let text = format!("{GOOD}BPFLAB-VERDICT pass exit=0\n");
        let err = parse_results(&text).unwrap_err().to_string();
        assert!(err.contains("2 verdicts"), "{err}");
    }

    #[test]
    fn inconsistent_reports_are_rejected() {
        let short = "BPFLAB-PLAN 2\nBPFLAB-RESULT t01 pass 1\nBPFLAB-VERDICT pass exit=0\n";
        assert!(parse_results(short)
            .unwrap_err()
            .to_string()
            .contains("planned 2"));
        let dup =
            "BPFLAB-RESULT t01 pass 1\nBPFLAB-RESULT t01 pass 1\nBPFLAB-VERDICT pass exit=0\n";
        assert!(parse_results(dup)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        let lying = "BPFLAB-PLAN 1\nBPFLAB-RESULT t01 fail 1 x\nBPFLAB-VERDICT pass exit=0\n";
        assert!(parse_results(lying).is_err());
        let garbage = "BPFLAB-PLAN 1\nBPFLAB-RESULT t01 maybe 1\nBPFLAB-VERDICT pass exit=0\n";
        assert!(parse_results(garbage)
            .unwrap_err()
            .to_string()
            .contains("malformed"));
    }

    #[test]
    fn error_verdict_and_bench_lines() {
        let r = parse_results(
            "BPFLAB-BENCH {\"kind\":\"scenario\"}\nBPFLAB-VERDICT error signal=SIGSEGV\n",
        )
        .unwrap();
        assert_eq!(r.verdict, Verdict::Error);
        assert_eq!(r.bench, ["{\"kind\":\"scenario\"}"]);
    }
}
