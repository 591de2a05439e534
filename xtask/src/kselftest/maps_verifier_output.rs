//! test_maps's and test_verifier's output to results (test_progs's is
//! `parse.rs`). Names are the runner's own; the caller adds the prefix.
//!
//! test_maps runs everything in one process and exits at its first
//! failure (`func(line):FAIL:tag ...`); what it passes it says as
//! `name:PASS ...`, what it skips as `name SKIP (why)`, and its end as
//! `test_maps: OK, N SKIPPED`. test_verifier prints `#N/u descr RESULT`
//! (unprivileged) and `#N/p descr RESULT` (privileged) per test, a
//! failure's detail on the lines after, and `Summary: ...` at the end.

use super::parse::Parsed;
use crate::report::protocol::{Status, TestResult};

/// Lines of a failure's detail kept.
const DETAIL_LINES: usize = 12;

fn result(name: &str, status: Status, message: String) -> TestResult {
    TestResult::new(name, status, 0, message)
}

pub fn parse_maps(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    for line in stdout.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("test_maps: ") {
            parsed.summary = Some(rest.to_string());
        } else if let Some((name, what)) = line.split_once(":PASS") {
            // `map_in_map_batch_ops:PASS with inner ARRAY map`: twice, apart.
            let name = format!("{name}{}", what.trim_end().replace(' ', "_"));
            parsed
                .results
                .push(result(&name, Status::Pass, String::new()));
        } else if let Some((name, why)) = line.split_once(" SKIP ") {
            parsed
                .results
                .push(result(name, Status::Skip, why.to_string()));
        } else if let Some((at, detail)) = line.split_once(":FAIL:") {
            let name = at.split('(').next().unwrap_or(at);
            parsed
                .results
                .push(result(name, Status::Fail, format!("{at}: {detail}")));
        }
    }
    // The whole run, as BPF CI counts it: it ended with its OK line.
    let all = match &parsed.summary {
        Some(s) if s.starts_with("OK") => result("all", Status::Pass, String::new()),
        _ => {
            let tail = crate::util::last_lines(stdout, DETAIL_LINES);
            result("all", Status::Fail, "no `test_maps: OK` line".into())
                .with_detail(tail.lines().map(str::to_string))
        }
    };
    parsed.results.push(all);
    parsed
}

/// `#12/p descr 3 cases OK` as (`#12/p descr`, the status, what follows
/// the status word on its line).
fn verifier_line(line: &str) -> Option<(String, Status, String)> {
    let rest = line.strip_prefix('#')?;
    let (id, rest) = rest.split_once(' ')?;
    let (num, mode) = id.split_once('/')?;
    if !num.chars().all(|c| c.is_ascii_digit()) || !matches!(mode, "u" | "p") {
        return None;
    }
    let words: Vec<&str> = rest.split(' ').collect();
    let at = words
        .iter()
        .position(|w| w.starts_with("FAIL") || *w == "SKIP");
    let (descr, status, after) = match at {
        Some(i) => {
            let status = if words[i] == "SKIP" {
                Status::Skip
            } else {
                Status::Fail
            };
            (
                words[..i].join(" "),
                status,
                words[i..].join(" ").trim().to_string(),
            )
        }
        None => {
            let ok = words.iter().rposition(|w| *w == "OK")?;
            let mut descr = &words[..ok];
            // `N cases` before OK: how many runs passed, not the name.
            if descr.len() >= 2 && descr[descr.len() - 1] == "cases" {
                descr = &descr[..descr.len() - 2];
            }
            (descr.join(" "), Status::Pass, String::new())
        }
    };
    Some((format!("#{num}/{mode} {}", descr.trim()), status, after))
}

pub fn parse_verifier(stdout: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut detail: Vec<&str> = Vec::new();
    let flush = |parsed: &mut Parsed, detail: &mut Vec<&str>| {
        if let Some(last) = parsed.results.last_mut() {
            if last.status == Status::Fail && !detail.is_empty() {
                let keep = &detail[..detail.len().min(DETAIL_LINES)];
                last.detail.extend(keep.iter().map(|l| l.to_string()));
            }
        }
        detail.clear();
    };
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("Summary: ") {
            flush(&mut parsed, &mut detail);
            parsed.summary = Some(rest.trim().to_string());
        } else if let Some((name, status, after)) = verifier_line(line) {
            flush(&mut parsed, &mut detail);
            parsed.results.push(result(&name, status, after));
        } else if !line.trim().is_empty() {
            detail.push(line.trim_end());
        }
    }
    flush(&mut parsed, &mut detail);
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statuses(p: &Parsed) -> Vec<(&str, Status)> {
        p.results
            .iter()
            .map(|r| (r.name.as_str(), r.status))
            .collect()
    }

    #[test]
    fn test_maps_passes_skips_and_its_end() {
        let out = "Fork 1024 tasks to 'test_update_delete'\ntest_array_map_batch_ops:PASS\nmap_in_map_batch_ops:PASS with inner ARRAY map\nmap_in_map_batch_ops:PASS with inner HASH map\ntest_task_storage_map_stress_lookup SKIP (no CONFIG_PREEMPT)\ntest_maps: OK, 1 SKIPPED\n";
        let p = parse_maps(out);
        assert_eq!(
            statuses(&p),
            [
                ("test_array_map_batch_ops", Status::Pass),
                ("map_in_map_batch_ops_with_inner_ARRAY_map", Status::Pass),
                ("map_in_map_batch_ops_with_inner_HASH_map", Status::Pass),
                ("test_task_storage_map_stress_lookup", Status::Skip),
                ("all", Status::Pass),
            ]
        );
        assert_eq!(p.summary.as_deref(), Some("OK, 1 SKIPPED"));
    }

    #[test]
    fn test_maps_stops_at_its_first_failure() {
        let p = parse_maps("test_hashmap_walk:PASS\ntest_sockmap(744):FAIL:sockmap msg\n");
        assert_eq!(
            statuses(&p),
            [
                ("test_hashmap_walk", Status::Pass),
                ("test_sockmap", Status::Fail),
                ("all", Status::Fail)
            ]
        );
        assert_eq!(p.results[1].message, "test_sockmap(744): sockmap msg");
        assert!(p.results[2].message.starts_with("no `test_maps: OK` line"));
        assert_eq!(p.summary, None);
    }

    #[test]
    fn test_verifier_lines_and_failure_details() {
        let out = "#0/u invalid and of negative number OK\n#0/p invalid and of negative number OK\n#1/p ld_abs: 2 cases OK\n#2/p bounds check FAIL\nUnexpected verifier log!\nEXP: R1 bad\n#3/u unpriv: return pointer SKIP\n#4/p map lookup FAIL retval 1 != 2 \n#5/p jit OK (NOTE: not executed due to unknown alignment)\nSummary: 4 PASSED, 1 SKIPPED, 2 FAILED\n";
        let p = parse_verifier(out);
        assert_eq!(
            statuses(&p),
            [
                ("#0/u invalid and of negative number", Status::Pass),
                ("#0/p invalid and of negative number", Status::Pass),
                ("#1/p ld_abs:", Status::Pass),
                ("#2/p bounds check", Status::Fail),
                ("#3/u unpriv: return pointer", Status::Skip),
                ("#4/p map lookup", Status::Fail),
                ("#5/p jit", Status::Pass),
            ]
        );
        assert_eq!(p.results[3].message, "FAIL");
        assert_eq!(
            p.results[3].detail,
            ["Unexpected verifier log!", "EXP: R1 bad"]
        );
        assert_eq!(p.results[5].message, "FAIL retval 1 != 2");
        assert_eq!(p.summary.as_deref(), Some("4 PASSED, 1 SKIPPED, 2 FAILED"));
    }
}
