//! Skips are failures unless allowed: the VM's configuration guarantees
//! what the tests need, so a test that skips found something missing. The
//! allowlist names the tests that may skip, each with its reason.

use std::fs;

use anyhow::{bail, Context, Result};

use super::protocol::{Status, TestResult};

pub const ALLOWLIST: &str = "vm-images/skip-allowlist.txt";

/// One allowed skip: a test name and why it may skip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedSkip {
    pub test: String,
    pub reason: String,
}

/// `NAME  reason...` per line, `#` comments; a name without a reason is
/// an error.
pub fn parse_allowlist(text: &str) -> Result<Vec<AllowedSkip>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (test, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        if reason.trim().is_empty() {
            bail!(
                "{ALLOWLIST} line {}: {test:?} has no reason; write `NAME  why it may skip`",
                i + 1
            );
        }
        out.push(AllowedSkip {
            test: test.to_string(),
            reason: reason.trim().to_string(),
        });
    }
    Ok(out)
}

pub fn load() -> Result<Vec<AllowedSkip>> {
    let path = crate::project::root().join(ALLOWLIST);
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_allowlist(&text)
}

/// Turns every skip the allowlist does not name into a failure.
pub fn enforce(results: &mut [TestResult], allowed: &[AllowedSkip]) {
    for r in results.iter_mut().filter(|r| r.status == Status::Skip) {
        if !allowed.iter().any(|a| a.test == r.name) {
            r.status = Status::Fail;
            r.message = format!(
                "skipped ({}), and a skip is a failure unless {ALLOWLIST} names the test with its reason",
                r.message
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, status: Status, message: &str) -> TestResult {
        TestResult::new(name, status, 0, message.into())
    }

    #[test]
    fn a_skip_fails_unless_allowed_with_a_reason() {
        let allowed = parse_allowlist("# why\n\nt26_thp  THP is off on this host\n").unwrap();
        assert_eq!(
            allowed,
            [AllowedSkip {
                test: "t26_thp".into(),
                reason: "THP is off on this host".into()
            }]
        );
        let mut r = vec![
            result("t26_thp", Status::Skip, "no THP"),
            result("t17_gup", Status::Skip, "no /dev/ram0"),
            result("t01_a", Status::Pass, ""),
        ];
        enforce(&mut r, &allowed);
        assert_eq!(r[0].status, Status::Skip);
        assert_eq!(r[1].status, Status::Fail);
        assert!(
            r[1].message.starts_with("skipped (no /dev/ram0)"),
            "{}",
            r[1].message
        );
        assert!(r[1].message.contains(ALLOWLIST));
        assert_eq!(r[2].status, Status::Pass);
    }

    #[test]
    fn an_entry_without_a_reason_is_an_error() {
        let err = parse_allowlist("t26_thp\n").unwrap_err().to_string();
        assert!(err.contains("line 1") && err.contains("no reason"), "{err}");
    }

    #[test]
    fn the_projects_allowlist_parses() {
        load().unwrap();
    }
}
