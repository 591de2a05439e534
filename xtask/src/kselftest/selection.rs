//! Which tests a kselftest run asks of each runner: kselftest/ALLOWLIST
//! (the default set), `-t`'s names or everything, never what DENYLIST
//! (and DENYLIST.lean on the lean kernels) names.

use anyhow::{bail, Result};

use super::lists;
use super::runner::{self, Runner};
use crate::kernel::KernelConfig;
use crate::report::protocol::{Status, TestResult};

/// Which tests a run asks test_progs for: `-t`'s names, every test
/// (`--all`), or neither: the default set.
#[derive(Debug, Clone, Default)]
pub struct TestChoice {
    pub tests: Vec<String>,
    pub all: bool,
}

impl TestChoice {
    /// Neither `-t` nor `--all`: kselftest/ALLOWLIST.
    pub fn default_set(&self) -> bool {
        !self.all && self.tests.is_empty()
    }
}

/// kselftest/ALLOWLIST and DENYLIST.
pub struct Lists {
    allow: Vec<lists::Entry>,
    deny: Vec<lists::Entry>,
}

impl Lists {
    /// ALLOWLIST, DENYLIST and, for the lean kernels, DENYLIST.lean.
    pub fn load(config: KernelConfig) -> Result<Lists> {
        let mut deny = lists::load(lists::DENYLIST)?;
        if config == KernelConfig::Lean {
            deny.extend(lists::load(lists::DENYLIST_LEAN)?);
        }
        Ok(Lists {
            allow: lists::load(lists::ALLOWLIST)?,
            deny,
        })
    }

    /// The tests of the default set `runner` must report (empty with -t,
    /// whose tests are found in test_progs, or --all, and for the runners
    /// that cannot be told their tests).
    pub fn plan(&self, choice: &TestChoice, runner: Runner) -> Vec<String> {
        if !choice.default_set() || !runner.is_test_progs() {
            return Vec::new();
        }
        lists::for_runner(&self.allow, runner)
            .into_iter()
            .map(|e| e.name)
            .collect()
    }

    /// A runner's arguments: for test_progs the default set (`plan`), `-t`
    /// names, or everything, never what the denylist names; test_maps and
    /// test_verifier take none.
    pub fn argv(
        &self,
        choice: &TestChoice,
        runner: Runner,
        plan: &[String],
    ) -> Result<Vec<String>> {
        let mut argv = Vec::new();
        if !runner.is_test_progs() {
            return Ok(argv);
        }
        if !choice.tests.is_empty() {
            argv.extend(["-t".to_string(), choice.tests.join(",")]);
        } else if !choice.all {
            if plan.is_empty() {
                bail!(
                    "kselftest/ALLOWLIST lists no test for {}; name tests with -t or use --all",
                    runner.name()
                );
            }
            argv.extend(["-a".to_string(), plan.join(",")]);
        }
        let deny = lists::for_runner(&self.deny, runner);
        if !deny.is_empty() {
            argv.extend(["-d".to_string(), lists::joined(&deny)]);
        }
        Ok(argv)
    }

    /// test_maps and test_verifier run every test they have: a result the
    /// denylist names is not counted, a skip that says why; one that
    /// passed anyway stays a pass that says its entry can go.
    pub fn not_counted(&self, runner: Runner, results: &mut [TestResult]) {
        if runner.is_test_progs() {
            return;
        }
        for r in results.iter_mut() {
            let Some((_, test)) = runner::split_result_name(&r.name) else {
                continue;
            };
            let Some(e) = self.deny.iter().find(|e| e.names(runner, test)) else {
                continue;
            };
            if r.status == Status::Pass {
                r.message = format!(
                    "{PASSED_ANYWAY}: remove it from kselftest/{} (it says: {})",
                    e.list, e.reason
                );
            } else {
                r.status = Status::Skip;
                r.message = format!("kselftest/{}: {}", e.list, e.reason);
                r.detail.clear();
            }
        }
    }
}

/// How a denylisted result that passed begins its message.
pub const PASSED_ANYWAY: &str = "denylisted but passed";

/// Whether `r` is a result the denylist does not count (a skip whose
/// message is its entry's): its test did not pass, and the denylist
/// says why.
pub fn is_not_counted(r: &TestResult) -> bool {
    r.status == Status::Skip
        && r.message
            .starts_with(&format!("kselftest/{}", lists::DENYLIST))
}

/// Whether `r` is a result the denylist names that passed anyway.
pub fn passed_anyway(r: &TestResult) -> bool {
    r.status == Status::Pass && r.message.starts_with(PASSED_ANYWAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, status: Status) -> TestResult {
        TestResult::new(name, status, 0, "its own".into())
    }

    #[test]
    fn a_denylisted_result_is_a_skip_unless_it_passed() {
        let lists = Lists {
            allow: Vec::new(),
            deny: lists::parse(
                "test_maps:flaky # a reason\ntest_maps:gone # fixed upstream\n",
                lists::DENYLIST_LEAN,
            )
            .unwrap(),
        };
        let mut results = [
            result("test_maps:flaky", Status::Fail),
            result("test_maps:gone", Status::Pass),
            result("test_maps:other", Status::Fail),
        ];
        lists.not_counted(Runner::Maps, &mut results);
        assert_eq!(results[0].status, Status::Skip);
        assert_eq!(results[0].message, "kselftest/DENYLIST.lean: a reason");
        assert!(is_not_counted(&results[0]));
        assert_eq!(results[1].status, Status::Pass);
        assert_eq!(
            results[1].message,
            "denylisted but passed: remove it from kselftest/DENYLIST.lean (it says: fixed upstream)"
        );
        assert!(passed_anyway(&results[1]) && !is_not_counted(&results[1]));
        assert_eq!(results[2].status, Status::Fail);
        assert!(!is_not_counted(&results[2]) && !passed_anyway(&results[2]));
    }
}
