//! What a run holds its tests to beyond base against patched, one line
//! per broken rule, naming the test and the kernel. The default set must
//! pass on every kernel, and may skip only where base skips too (a
//! kernel's configuration can lack what a test needs, and then lacks it
//! on base as well). A test `-t` names must pass on every kernel, base
//! included: a skip there tested nothing the developer asked for. A test
//! `--new-on VARIANT` names must pass, not skip, on VARIANT and every
//! variant after it, and must not pass before it, where what it tests is
//! missing (a skip or a failure there is what it should do).

use super::compare::{bad, rows, status_of, word, Side};
use super::parse::is_test_or_subtest;
use super::runner::split_result_name;
use super::selection;
use crate::report::protocol::Status;
use crate::report::KernelRun;

/// What the run holds its tests to: whether anything is held (not with
/// `--all`), whether the tests were named with `-t`, and the tests that
/// are new in a variant (`--new-on`'s `-t` names, or in the default set
/// those `kselftest/NEW_ON` lists).
pub struct Held {
    pub any: bool,
    pub named: bool,
    pub new: Vec<NewTest>,
}

/// A test new in a variant, and per kernel whether that kernel lacks the
/// variant (base, and the variants before it).
pub struct NewTest {
    pub name: String,
    pub lacking: Vec<bool>,
}

impl Held {
    /// The new test `test` (a test or one of its subtests) is, if any.
    fn new_test(&self, test: &str) -> Option<&NewTest> {
        self.new.iter().find(|t| is_test_or_subtest(test, &t.name))
    }

    /// The new tests' names.
    pub fn new_names(&self) -> Vec<String> {
        self.new.iter().map(|t| t.name.clone()).collect()
    }
}

/// Which rule holds one result row.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rule {
    /// The default set's: no failure, no skip on a variant where base
    /// passes it.
    DefaultSet,
    /// `-t`'s: no failure and no skip, on any kernel.
    Named,
    /// `--new-on`'s: `Named` from its variant on, nothing before it (where
    /// `passes_where_lacking` holds it instead).
    New,
}

impl Held {
    /// The rule of the row `name` (`runner:test`): `-t` selects only in
    /// test_progs's flavors, so test_maps's and test_verifier's whole
    /// sets, run beside it with `--runner`, keep the default set's rule.
    fn rule(&self, name: &str) -> Rule {
        let test = name.split_once(':').map_or(name, |(_, t)| t);
        if self.new_test(test).is_some() {
            return Rule::New;
        }
        let selected_by_name = split_result_name(name).is_some_and(|(r, _)| r.is_test_progs());
        if self.named && selected_by_name {
            Rule::Named
        } else {
            Rule::DefaultSet
        }
    }
}

/// Every rule of `held` a row broke, one line each (see the module's
/// opener).
pub fn held(sides: &[Side], held: &Held) -> Vec<String> {
    let mut out = Vec::new();
    for (name, row) in rows(sides) {
        let status = |i: usize| row[i].unwrap_or(Status::NotRun);
        let base_ran: Vec<&str> = (0..sides.len())
            .filter(|&i| !sides[i].patched && status(i) == Status::Pass)
            .map(|i| sides[i].run.kernel.as_str())
            .collect();
        let rule = held.rule(&name);
        let test = name.split_once(':').map_or(name.as_str(), |(_, t)| t);
        let lacking = |i: usize| held.new_test(test).is_some_and(|t| t.lacking[i]);
        for (i, side) in sides.iter().enumerate() {
            if rule == Rule::New && lacking(i) {
                continue;
            }
            let kernel = &side.run.kernel;
            if bad(status(i)) {
                out.push(format!("{name} is {} on {kernel}", word(Some(status(i)))));
            } else if status(i) == Status::Skip && !not_counted(side.run, &name) {
                let base = (side.patched && !base_ran.is_empty()).then(|| base_ran.join(" and "));
                if base.is_none() && skipped_inside_a_passing_test(side.run, &name, held) {
                    continue;
                }
                out.extend(skip_broke(&name, kernel, rule, base));
            }
        }
    }
    out.extend(passes_where_lacking(sides, held));
    out
}

/// A skip the denylist made of a result that did not pass: not held,
/// its entry says why.
fn not_counted(run: &KernelRun, name: &str) -> bool {
    run.results
        .iter()
        .any(|r| r.name == name && selection::is_not_counted(r))
}

/// Whether `name` is a subtest that skips inside a test that passed on
/// this kernel: the test ran, and the skip is its own (test_progs's
/// prog_tests_framework skips two subtests by design). Not when
/// `--new-on` names the subtest itself.
fn skipped_inside_a_passing_test(run: &KernelRun, name: &str, held: &Held) -> bool {
    let Some((parent, _)) = name.split_once('/') else {
        return false;
    };
    let test = name.split_once(':').map_or(name, |(_, t)| t);
    !held.new.iter().any(|t| t.name == test) && status_of(run, parent) == Some(Status::Pass)
}

/// The line for a skip of `name` on `kernel` that `rule` does not allow;
/// `base`: the base kernels that passed it, when `kernel` is a variant.
fn skip_broke(name: &str, kernel: &str, rule: Rule, base: Option<String>) -> Option<String> {
    match (rule, base) {
        (Rule::New, _) => Some(format!(
            "{name} skips on {kernel}: --new-on holds it to pass from its variant on"
        )),
        (_, Some(base)) => Some(format!("{name} skips on {kernel}, where {base} runs it")),
        (Rule::Named, None) => Some(format!(
            "{name} skips on {kernel}: -t names it, so it must run and pass there"
        )),
        (Rule::DefaultSet, None) => None,
    }
}

/// A new test, as a whole, must not pass where its feature is missing.
fn passes_where_lacking(sides: &[Side], held: &Held) -> Vec<String> {
    let mut out = Vec::new();
    for new in &held.new {
        let t = &new.name;
        for (side, _) in sides.iter().zip(&new.lacking).filter(|(_, l)| **l) {
            let mut runners: Vec<&str> = Vec::new();
            for r in &side.run.results {
                match r.name.split_once(':') {
                    Some((runner, test))
                        if is_test_or_subtest(test, t) && !runners.contains(&runner) =>
                    {
                        runners.push(runner)
                    }
                    _ => {}
                }
            }
            for runner in runners {
                let whole = format!("{runner}:{t}");
                if status_of(side.run, &whole) == Some(Status::Pass) {
                    out.push(format!(
                        "{whole} passes on {}: it is new in a later variant (--new-on or kselftest/NEW_ON), so that kernel lacks what it tests",
                        side.run.kernel
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::compare::tests::{pair, run};
    use super::*;
    use crate::report::protocol::TestResult;

    /// The default set (`named` false) or `-t`'s tests, `new` of them
    /// new on the first kernel `lacking` marks false.
    fn holding(named: bool, new: &[&str], lacking: &[bool]) -> Held {
        Held {
            any: true,
            named,
            new: new
                .iter()
                .map(|t| NewTest {
                    name: t.to_string(),
                    lacking: lacking.to_vec(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_held_test_fails_anywhere_and_skips_on_no_variant_base_runs() {
        use Status::*;
        let base = run(
            "base",
            &[
                ("test_progs:a", Fail),
                ("test_progs:b", Pass),
                ("test_progs:c", Skip),
                ("test_progs:d", Pass),
            ],
        );
        let patched = run(
            "patched",
            &[
                ("test_progs:a", Fail),
                ("test_progs:b", Skip),
                ("test_progs:c", Skip),
                ("test_progs:d", Pass),
            ],
        );
        let sides = pair(&base, &patched);
        let default_set = holding(false, &[], &[false, false]);
        assert_eq!(
            held(&sides, &default_set),
            [
                "test_progs:a is FAIL on base",
                "test_progs:a is FAIL on patched",
                "test_progs:b skips on patched, where base runs it"
            ]
        );
        let clean = run("base", &[("test_progs:d", Pass)]);
        assert!(held(&pair(&clean, &clean), &default_set).is_empty());
    }

    #[test]
    fn a_named_test_that_skips_fails_on_every_kernel_base_included() {
        use Status::*;
        let rows = [
            ("test_progs:mine", Skip),
            ("test_progs-cpuv4:mine/sub", Pass),
            ("test_maps:beside", Skip),
            // A test that passed with a subtest it skips by design.
            ("test_progs:fw", Pass),
            ("test_progs:fw/good", Pass),
            ("test_progs:fw/by_design", Skip),
        ];
        let base = run("base", &rows);
        let mut patched = run("patched", &rows);
        patched.results[1].status = Skip;
        let sides = pair(&base, &patched);
        assert_eq!(
            held(&sides, &holding(true, &[], &[false, false])),
            [
                "test_progs:mine skips on base: -t names it, so it must run and pass there",
                "test_progs:mine skips on patched: -t names it, so it must run and pass there",
                "test_progs-cpuv4:mine/sub skips on patched, where base runs it",
            ]
        );
        // The default set may skip where base skips too; test_maps's set,
        // run beside -t's tests, is held as the default set is.
        assert_eq!(
            held(&sides, &holding(false, &[], &[false, false])),
            ["test_progs-cpuv4:mine/sub skips on patched, where base runs it"]
        );
    }

    #[test]
    fn a_new_test_must_pass_not_skip_from_its_variant_on() {
        use Status::*;
        // Fails on base, then skips on its variant and the one after
        // (test__skip() after a failed probe of the feature).
        let base = run("base", &[("test_progs:feat", Fail)]);
        let first = run("first", &[("test_progs:feat", Skip)]);
        let later = run("later", &[("test_progs:feat", Skip)]);
        let variant = |run| Side { run, patched: true };
        let sides = [
            Side {
                run: &base,
                patched: false,
            },
            variant(&first),
            variant(&later),
        ];
        assert_eq!(
            held(&sides, &holding(true, &["feat"], &[true, false, false])),
            [
                "test_progs:feat skips on first: --new-on holds it to pass from its variant on",
                "test_progs:feat skips on later: --new-on holds it to pass from its variant on",
            ]
        );
        // Skipping where it is not new yet is what it should do there.
        let passing = run("first", &[("test_progs:feat", Pass)]);
        let sides = pair(&first, &passing);
        assert!(held(&sides, &holding(true, &["feat"], &[true, false])).is_empty());
        // A subtest --new-on names is held itself, its test's pass aside;
        // one it does not name may skip inside its passing test.
        let before = run(
            "base",
            &[("test_progs:feat/a", Pass), ("test_progs:feat/b", Fail)],
        );
        let parted = run(
            "first",
            &[("test_progs:feat/a", Pass), ("test_progs:feat/b", Skip)],
        );
        let sides = pair(&before, &parted);
        assert!(held(&sides, &holding(true, &["feat"], &[true, false])).is_empty());
        assert_eq!(
            held(&sides, &holding(true, &["feat/b"], &[true, false])),
            ["test_progs:feat/b skips on first: --new-on holds it to pass from its variant on"]
        );
    }

    #[test]
    fn a_new_test_must_not_pass_where_its_feature_is_missing() {
        use Status::*;
        let hold = holding(true, &["feat"], &[true, false]);
        // Fails on base, passes on the variant: what --new-on says.
        let base = run(
            "base",
            &[
                ("test_progs:feat/x", Fail),
                ("test_progs:feat/y", Pass),
                ("test_progs:old", Pass),
            ],
        );
        let patched = run(
            "patched",
            &[
                ("test_progs:feat/x", Pass),
                ("test_progs:feat/y", Pass),
                ("test_progs:old", Pass),
            ],
        );
        assert!(held(&pair(&base, &patched), &hold).is_empty());
        // Passing on base too: it does not test what the variant adds.
        let base_ok = run(
            "base",
            &[("test_progs:feat/x", Pass), ("test_progs:old", Pass)],
        );
        let patched_ok = run(
            "patched",
            &[("test_progs:feat/x", Pass), ("test_progs:old", Pass)],
        );
        assert_eq!(
            held(&pair(&base_ok, &patched_ok), &hold),
            ["test_progs:feat passes on base: it is new in a later variant (--new-on or kselftest/NEW_ON), so that kernel lacks what it tests"]
        );
        // Failing on the variant as on base: held as any test.
        let patched_bad = run(
            "patched",
            &[
                ("test_progs:feat/x", Fail),
                ("test_progs:feat/y", Pass),
                ("test_progs:old", Pass),
            ],
        );
        assert_eq!(
            held(&pair(&base, &patched_bad), &hold),
            ["test_progs:feat/x is FAIL on patched"]
        );
        // A test that is not new still holds on base.
        let base_old_bad = run(
            "base",
            &[("test_progs:feat/x", Fail), ("test_progs:old", Fail)],
        );
        assert_eq!(
            held(&pair(&base_old_bad, &patched), &hold),
            ["test_progs:old is FAIL on base"]
        );
    }

    #[test]
    fn each_new_test_is_held_from_its_own_variant_on() {
        use Status::*;
        // The default set with two tests new in two variants, as
        // kselftest/NEW_ON lists them: `early` from the second kernel on,
        // `late` from the third.
        let hold = Held {
            any: true,
            named: false,
            new: vec![
                NewTest {
                    name: "early".into(),
                    lacking: vec![true, false, false],
                },
                NewTest {
                    name: "late".into(),
                    lacking: vec![true, true, false],
                },
            ],
        };
        let kernels = |early: [Status; 3], late: [Status; 3]| {
            ["base", "first", "second"]
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    run(
                        k,
                        &[("test_progs:early", early[i]), ("test_progs:late", late[i])],
                    )
                })
                .collect::<Vec<_>>()
        };
        fn sides_of(runs: &[KernelRun]) -> Vec<Side<'_>> {
            runs.iter()
                .enumerate()
                .map(|(i, run)| Side {
                    run,
                    patched: i > 0,
                })
                .collect()
        }
        let good = kernels([Fail, Pass, Pass], [Fail, Fail, Pass]);
        assert!(held(&sides_of(&good), &hold).is_empty());
        // `late` failing on the first variant is what it should do there;
        // `early` failing there is not.
        let bad = kernels([Fail, Fail, Pass], [Fail, Fail, Pass]);
        assert_eq!(
            held(&sides_of(&bad), &hold),
            ["test_progs:early is FAIL on first"]
        );
        // `late` passing where its variant is missing.
        let early_pass = kernels([Fail, Pass, Pass], [Fail, Pass, Pass]);
        assert_eq!(
            held(&sides_of(&early_pass), &hold),
            ["test_progs:late passes on first: it is new in a later variant (--new-on or kselftest/NEW_ON), so that kernel lacks what it tests"]
        );
    }

    #[test]
    fn a_denylisted_failure_is_not_held_where_base_passed_it() {
        let passed = TestResult::new(
            "test_maps:flaky",
            Status::Pass,
            0,
            format!("{}: remove it", selection::PASSED_ANYWAY),
        );
        let denied = TestResult::new(
            "test_maps:flaky",
            Status::Skip,
            0,
            "kselftest/DENYLIST: a reason".into(),
        );
        let kernel = |name: &str, r: &TestResult| KernelRun {
            kernel: name.into(),
            accel: "tcg".into(),
            results: vec![r.clone()],
            seconds: 1.0,
        };
        let (base, patched) = (kernel("base", &passed), kernel("patched", &denied));
        let default_set = holding(false, &[], &[false, false]);
        assert_eq!(
            held(&pair(&base, &patched), &default_set),
            Vec::<String>::new()
        );
        // A skip of its own on the variant is still held.
        let own = kernel(
            "patched",
            &TestResult::new("test_maps:flaky", Status::Skip, 0, "".into()),
        );
        assert_eq!(
            held(&pair(&base, &own), &default_set),
            ["test_maps:flaky skips on patched, where base runs it"]
        );
    }
}
