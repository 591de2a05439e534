//! What became of a mutant, judged from its kernel's run of the plan, and
//! the tally: a table per patch with its kill rate (`report` adds every
//! survivor's diff).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::lists::{is_plan_test, Sample};
use super::Mutant;
use crate::plan::VmFailure;
use crate::report::protocol::{Status, TestResult};
use crate::vm::failed::KernelSign;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// A test failed in the guest (or the console check): the first one
    /// that did.
    Killed {
        by: String,
    },
    /// The VM failed and the kernel panicked or left a splat: counts as
    /// killed.
    Crashed {
        detail: String,
    },
    Survived,
    /// The mutant's kernel did not build: not counted.
    Unbuildable {
        error: String,
    },
    /// Its judge broke (the fuzzer, not the kernel): not counted.
    Undecided {
        why: String,
    },
    /// The host could not judge it: the VM failed without a panic or a
    /// splat of the kernel's (QEMU did not start or was killed, the
    /// results stalled), or no test ran. Never kept in the ledger, never
    /// holds a sample line, and the run fails: it says nothing of the
    /// mutant.
    Error {
        why: String,
    },
    /// Not run: the run's `--minutes` were spent before it. Never kept
    /// in the ledger; the next run takes it up.
    Left,
}

impl Outcome {
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Killed { .. } => "killed",
            Outcome::Crashed { .. } => "crashed",
            Outcome::Survived => "SURVIVED",
            Outcome::Unbuildable { .. } => "did not build",
            Outcome::Undecided { .. } => "undecided",
            Outcome::Error { .. } => "ERROR",
            Outcome::Left => "left",
        }
    }

    pub fn detail(&self) -> &str {
        match self {
            Outcome::Killed { by } => by,
            Outcome::Crashed { detail } => detail,
            Outcome::Survived => "every test passed",
            Outcome::Unbuildable { error } => error,
            Outcome::Undecided { why } | Outcome::Error { why } => why,
            Outcome::Left => "not run: --minutes spent; the same command again goes on",
        }
    }

    /// Whether it says something of the mutant: a kill, a crash or a
    /// survival (what the kill rate counts).
    pub fn judged(&self) -> bool {
        matches!(
            self,
            Outcome::Killed { .. } | Outcome::Crashed { .. } | Outcome::Survived
        )
    }

    /// The plan test that killed it (`t03` of `t03_vmflags_…: why`), for a
    /// kill or a crash during a test.
    pub fn killer(&self) -> Option<&str> {
        let text = match self {
            Outcome::Killed { by } => by,
            Outcome::Crashed { detail } => detail,
            _ => return None,
        };
        let name = text.split(':').next()?;
        let id = name.split('_').next()?;
        is_plan_test(id).then_some(id)
    }
}

/// A mutant's run: its results and, when its VM failed or ran no test,
/// the failure. A kill needs a test that failed in the guest, or a panic
/// or splat of the kernel's; a VM that failed without either was failed
/// by the host (QEMU killed, a results stall, a share's daemon gone), or
/// ran no test, and says nothing of the mutant: an error, never a kill.
pub fn of_results(results: &[TestResult], failure: Option<&VmFailure>) -> Outcome {
    if let Some(r) = results.iter().find(|r| r.status == Status::Fail) {
        return Outcome::Killed {
            by: format!("{}: {}", r.name, on_one_line(r)),
        };
    }
    let Some(failure) = failure else {
        return match results.is_empty() {
            true => Outcome::Error {
                why: "the plan gave no result".into(),
            },
            false => Outcome::Survived,
        };
    };
    if failure.why.sign() == KernelSign::Nothing {
        return Outcome::Error {
            why: format!(
                "no panic or splat of the kernel's, so not the mutant's: {}",
                failure.why.headline()
            ),
        };
    }
    let crashed = results.iter().find(|r| r.status == Status::Crashed);
    Outcome::Crashed {
        detail: match crashed {
            Some(r) => format!("{}: {}", r.name, on_one_line(r)),
            None => failure.why.headline(),
        },
    }
}

/// A result's message and detail on the one line the report gives a
/// mutant: what killed it, with the lines that show why.
fn on_one_line(r: &TestResult) -> String {
    r.lines().collect::<Vec<_>>().join(" | ")
}

/// The sampled mutants not killed by a test their sample line names,
/// each said in one line.
pub fn sample_misses(
    sample: &Sample,
    chosen: &[Mutant],
    outcomes: &[Option<Outcome>],
) -> Vec<String> {
    let list = &sample.name;
    let mut out = Vec::new();
    for (m, o) in chosen.iter().zip(outcomes) {
        let (Some(s), Some(o)) = (sample.entries.iter().find(|s| s.id == m.id), o) else {
            continue;
        };
        let named = s.killers.join("/").to_uppercase();
        if !o.judged() {
            out.push(format!(
                "{list}: {} was not judged ({}: {}), so its line naming {named} is not held",
                m.id,
                o.word(),
                o.detail().lines().next().unwrap_or("")
            ));
            continue;
        }
        if o == &Outcome::Survived {
            continue;
        }
        match o.killer() {
            Some(k) if s.killers.iter().any(|want| want == k) => {}
            Some(k) => out.push(format!(
                "{list}: {} was killed by {} ({}), its line names {named}: update the line, or find why {named} no longer kills it",
                m.id,
                k.to_uppercase(),
                o.detail().lines().next().unwrap_or("")
            )),
            None => out.push(format!(
                "{list}: {} was {} outside every plan test ({}), its line names {named}",
                m.id,
                o.word(),
                o.detail().lines().next().unwrap_or("")
            )),
        }
    }
    out
}

/// One patch's figures.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    pub mutants: usize,
    pub equivalent: usize,
    pub unbuildable: usize,
    pub undecided: usize,
    pub killed: usize,
    pub crashed: usize,
    pub survived: usize,
}

impl Tally {
    /// Killed (crashes included) over the mutants that count: built and
    /// not equivalent. None when none ran.
    pub fn kill_rate(&self) -> Option<f64> {
        let counted = self.killed + self.crashed + self.survived;
        (counted > 0).then(|| 100.0 * (self.killed + self.crashed) as f64 / counted as f64)
    }
}

/// Per patch: mutants, with each outcome (None: equivalent, not run).
pub fn tally<'a>(
    rows: impl Iterator<Item = (&'a Mutant, Option<&'a Outcome>)>,
) -> BTreeMap<String, Tally> {
    let mut out: BTreeMap<String, Tally> = BTreeMap::new();
    for (m, outcome) in rows {
        let t = out.entry(m.patch_name.clone()).or_default();
        t.mutants += 1;
        match outcome {
            None => t.equivalent += 1,
            Some(Outcome::Killed { .. }) => t.killed += 1,
            Some(Outcome::Crashed { .. }) => t.crashed += 1,
            Some(Outcome::Survived) => t.survived += 1,
            Some(Outcome::Unbuildable { .. }) => t.unbuildable += 1,
            Some(Outcome::Undecided { .. } | Outcome::Error { .. }) => t.undecided += 1,
            // Counted in none: the closing line says how many.
            Some(Outcome::Left) => {}
        }
    }
    out
}

/// The table: one row per patch, the kill rate last.
pub fn table(tallies: &BTreeMap<String, Tally>) -> String {
    let mut out = String::from(
        "| patch | mutants | equivalent | did not build | undecided | killed | crashed | survived | kill rate |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for (patch, t) in tallies {
        let rate = t.kill_rate().map_or("-".into(), |r| format!("{r:.1}%"));
        out.push_str(&format!(
            "| {patch} | {} | {} | {} | {} | {} | {} | {} | {rate} |\n",
            t.mutants, t.equivalent, t.unbuildable, t.undecided, t.killed, t.crashed, t.survived
        ));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::mutants::lists::Sampled;
    use crate::mutants::operators::Op;
    use crate::plan::NoVerdict;
    use crate::vm::failed::VmFailed;

    fn result(name: &str, status: Status) -> TestResult {
        TestResult::new(name, status, 1, "why".into()).with_detail(["more".to_string()])
    }

    fn failure(sign: KernelSign, cause: &str) -> VmFailure {
        let failed = VmFailed {
            sign,
            ..VmFailed::of_host(cause.into())
        };
        VmFailure {
            kernel: "mutant".into(),
            why: NoVerdict::Vm(failed),
        }
    }

    #[test]
    fn a_failure_kills_a_crash_counts_and_a_clean_run_survives() {
        let pass = result("t01", Status::Pass);
        let fail = result("t02", Status::Fail);
        let crash = result("t03", Status::Crashed);
        assert_eq!(
            of_results(&[pass.clone(), fail], None),
            Outcome::Killed {
                by: "t02: why | more".into()
            }
        );
        let panicked = failure(KernelSign::Panicked, "the kernel panicked: x");
        assert_eq!(
            of_results(&[pass.clone(), crash], Some(&panicked)),
            Outcome::Crashed {
                detail: "t03: why | more".into()
            }
        );
        let lockup = failure(KernelSign::Splat("soft lockup".into()), "hung");
        assert_eq!(
            of_results(std::slice::from_ref(&pass), Some(&lockup)),
            Outcome::Crashed {
                detail: "the VM could not do its job: hung".into()
            }
        );
        assert_eq!(of_results(&[pass], None), Outcome::Survived);
    }

    /// QEMU killed, a results stall: the running test is marked crashed,
    /// but with no panic or splat of the kernel's that is the host's,
    /// never a kill.
    #[test]
    fn a_host_failure_after_init_is_an_error_not_a_kill() {
        let pass = result("t01", Status::Pass);
        let crash = result("t02", Status::Crashed);
        let stall = failure(
            KernelSign::Nothing,
            "the guest hung: no results line for 120s",
        );
        let o = of_results(&[pass, crash], Some(&stall));
        assert!(
            matches!(&o, Outcome::Error { why } if why.ends_with("no results line for 120s")),
            "{o:?}"
        );
        assert!(!o.judged() && o.killer().is_none());
    }

    /// A panic before the plan line leaves no result: still a kill. And a
    /// run with no result and no panic is no kill.
    #[test]
    fn a_run_without_results_is_what_it_is() {
        let panicked = failure(KernelSign::Panicked, "the kernel panicked: VFS");
        assert_eq!(
            of_results(&[], Some(&panicked)),
            Outcome::Crashed {
                detail: "the VM could not do its job: the kernel panicked: VFS".into()
            }
        );
        let none = VmFailure {
            kernel: "mutant".into(),
            why: NoVerdict::NoTest,
        };
        assert!(matches!(
            of_results(&[], Some(&none)),
            Outcome::Error { .. }
        ));
        assert!(matches!(of_results(&[], None), Outcome::Error { .. }));
    }

    pub(crate) fn mutant(id: &str, patch: &str) -> Mutant {
        Mutant {
            id: id.into(),
            patch: 0,
            patch_name: patch.into(),
            op: Op::Delete,
            first: 0,
            original: vec![],
            replacement: vec![],
            file: "f".into(),
            new_line: 1,
            digest: "00000000".into(),
        }
    }

    #[test]
    fn a_sampled_mutant_must_fall_to_a_test_its_line_names() {
        let m = |id: &str| mutant(id, "0001");
        let s = |id: &str, killers: &[&str]| Sampled {
            id: id.into(),
            digest: "00000000".into(),
            line: 1,
            killers: killers.iter().map(|k| k.to_string()).collect(),
            what: "w".into(),
        };
        let sample = Sample {
            name: "mutants/CI_SAMPLE".into(),
            entries: vec![
                s("a", &["t03"]),
                s("b", &["t06", "t09"]),
                s("c", &["t02"]),
                s("d", &["t02"]),
                s("e", &["t02"]),
            ],
        };
        let chosen = [m("a"), m("b"), m("c"), m("d"), m("e")];
        let outcomes = [
            Some(Outcome::Killed {
                by: "t03_vmflags: lacks mm".into(),
            }),
            Some(Outcome::Crashed {
                detail: "t09_populate: the kernel panicked".into(),
            }),
            Some(Outcome::Killed {
                by: "t32_races: SIGBUS".into(),
            }),
            Some(Outcome::Crashed {
                detail: "the guest hung".into(),
            }),
            Some(Outcome::Error {
                why: "no panic or splat of the kernel's".into(),
            }),
        ];
        let misses = sample_misses(&sample, &chosen, &outcomes);
        assert_eq!(misses.len(), 3, "{misses:?}");
        assert!(
            misses[2].starts_with("mutants/CI_SAMPLE: e was not judged (ERROR: no panic"),
            "{misses:?}"
        );
        assert!(
            misses[0].starts_with("mutants/CI_SAMPLE: c was killed by T32")
                && misses[0].contains("names T02")
        );
        assert!(misses[1].contains("d was crashed outside every plan test"));
    }

    #[test]
    fn the_kill_rate_leaves_out_equivalent_unbuildable_and_undecided_mutants() {
        let m = |patch: &str| mutant("x", patch);
        let ms = [
            m("0001"),
            m("0001"),
            m("0001"),
            m("0001"),
            m("0001"),
            m("0002"),
        ];
        let killed = Outcome::Killed { by: "t".into() };
        let outcomes = [
            Some(killed.clone()),
            Some(Outcome::Survived),
            None,
            Some(Outcome::Unbuildable { error: "e".into() }),
            Some(Outcome::Undecided { why: "f".into() }),
            Some(Outcome::Crashed { detail: "p".into() }),
        ];
        let t = tally(ms.iter().zip(outcomes.iter().map(Option::as_ref)));
        assert_eq!(t["0001"].kill_rate(), Some(50.0));
        assert_eq!(t["0002"].kill_rate(), Some(100.0));
        let text = table(&t);
        assert!(
            text.contains("| 0001 | 5 | 1 | 1 | 1 | 1 | 0 | 1 | 50.0% |"),
            "{text}"
        );
    }
}
