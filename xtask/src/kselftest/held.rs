//! What a run holds its tests to beyond base against patched: the
//! default set, or the tests `-t` names, must pass on every kernel, but
//! where `--new-on` says a kernel lacks what the named tests test. One
//! line per broken rule, naming the test and the kernel.

use super::compare::{bad, rows, status_of, word, Side};
use super::parse::is_test_or_subtest;
use crate::report::protocol::Status;

/// What the run holds its tests to: the default set and `-t`'s tests
/// must pass on every kernel, but where `--new-on` says a kernel lacks
/// what the named tests test (`lacking`, per kernel).
pub struct Held {
    pub any: bool,
    pub new: Vec<String>,
    pub lacking: Vec<bool>,
}

/// What a held set (the default set, or the tests `-t` names) may not
/// do, one line each: fail on a kernel, or skip on a variant where a base
/// kernel ran it. `new`: tests (`-t` names) new in the series, so they
/// must not pass on the kernels `lacking` marks (base, and the variants
/// before `--new-on`'s); there they are held to that instead.
pub fn held(sides: &[Side], new: &[String], lacking: &[bool]) -> Vec<String> {
    let is_new = |name: &str| {
        let test = name.split_once(':').map_or(name, |(_, t)| t);
        new.iter().any(|t| is_test_or_subtest(test, t))
    };
    let mut out = Vec::new();
    for (name, row) in rows(sides) {
        let status = |i: usize| row[i].unwrap_or(Status::NotRun);
        let ran_it: Vec<&str> = (0..sides.len())
            .filter(|&i| !sides[i].patched && status(i) == Status::Pass)
            .map(|i| sides[i].run.kernel.as_str())
            .collect();
        for (i, side) in sides.iter().enumerate() {
            let kernel = &side.run.kernel;
            if lacking[i] && is_new(&name) {
                continue;
            }
            if bad(status(i)) {
                out.push(format!("{name} is {} on {kernel}", word(Some(status(i)))));
            } else if status(i) == Status::Skip && side.patched && !ran_it.is_empty() {
                let base = ran_it.join(" and ");
                out.push(format!("{name} skips on {kernel}, where {base} runs it"));
            }
        }
    }
    // A new test, as a whole, must not pass where its feature is missing.
    for (side, _) in sides.iter().zip(lacking).filter(|(_, l)| **l) {
        for t in new {
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
                        "{whole} passes on {}: --new-on says that kernel lacks what it tests",
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
    use super::*;
    use crate::report::protocol::TestResult;
    use crate::report::KernelRun;

    /// A base and a patched side.
    fn pair<'a>(base: &'a KernelRun, patched: &'a KernelRun) -> [Side<'a>; 2] {
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

    fn run(kernel: &str, results: &[(&str, Status)]) -> KernelRun {
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
    fn a_held_test_fails_anywhere_and_skips_on_no_variant_base_runs() {
        use Status::*;
        let base = run(
            "base",
            &[
                ("tp:a", Fail),
                ("tp:b", Pass),
                ("tp:c", Skip),
                ("tp:d", Pass),
            ],
        );
        let patched = run(
            "patched",
            &[
                ("tp:a", Fail),
                ("tp:b", Skip),
                ("tp:c", Skip),
                ("tp:d", Pass),
            ],
        );
        let sides = pair(&base, &patched);
        let none = [false, false];
        assert_eq!(
            held(&sides, &[], &none),
            [
                "tp:a is FAIL on base",
                "tp:a is FAIL on patched",
                "tp:b skips on patched, where base runs it"
            ]
        );
        let clean = run("base", &[("tp:d", Pass)]);
        assert!(held(&pair(&clean, &clean), &[], &none).is_empty());
    }

    #[test]
    fn a_new_test_must_not_pass_where_its_feature_is_missing() {
        use Status::*;
        let new = ["feat".to_string()];
        let lacking = [true, false];
        // Fails on base, passes on the variant: what --new-on says.
        let base = run(
            "base",
            &[("tp:feat/x", Fail), ("tp:feat/y", Pass), ("tp:old", Pass)],
        );
        let patched = run(
            "patched",
            &[("tp:feat/x", Pass), ("tp:feat/y", Pass), ("tp:old", Pass)],
        );
        assert!(held(&pair(&base, &patched), &new, &lacking).is_empty());
        // Passing on base too: it does not test what the variant adds.
        let base_ok = run("base", &[("tp:feat/x", Pass), ("tp:old", Pass)]);
        let patched_ok = run("patched", &[("tp:feat/x", Pass), ("tp:old", Pass)]);
        assert_eq!(
            held(&pair(&base_ok, &patched_ok), &new, &lacking),
            ["tp:feat passes on base: --new-on says that kernel lacks what it tests"]
        );
        // Failing on the variant as on base: held as any test.
        let patched_bad = run(
            "patched",
            &[("tp:feat/x", Fail), ("tp:feat/y", Pass), ("tp:old", Pass)],
        );
        assert_eq!(
            held(&pair(&base, &patched_bad), &new, &lacking),
            ["tp:feat/x is FAIL on patched"]
        );
        // A test that is not new still holds on base.
        let base_old_bad = run("base", &[("tp:feat/x", Fail), ("tp:old", Fail)]);
        assert_eq!(
            held(&pair(&base_old_bad, &patched), &new, &lacking),
            ["tp:old is FAIL on base"]
        );
    }
}
