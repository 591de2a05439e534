//! The controls of a mutants run: the judge on each variant the counted
//! mutants are held to, unmutated and built as its mutants are (the
//! variant's whole series in the mutants' tree, by the same function),
//! which must pass, or no mutant's outcome would mean anything (a host
//! that cannot boot guests kills every mutant; a build path that drops
//! a patch fails the tests about it on every mutant).

use std::fs;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::lists::Sample;
use super::on_kernel;
use super::outcome::Outcome;
use super::Mutant;
use super::{JudgeOptions, MutantJudge};
use crate::kernel::series::Series;
use crate::kernel::SourceConfig;

/// The judge on each variant the counted mutants are held to, unmutated
/// and built as they are (`control_series`), with the tests it runs first on them (`first_tests`; the whole plan
/// when one of them has none): every test must pass (the fuzzer: run
/// clean), or the mutants' outcomes would say nothing (a host that
/// cannot boot guests kills every mutant).
pub fn control(
    options: &JudgeOptions,
    (source, series, run_dir): (&SourceConfig, &Series, &Path),
    (counted, sample): (&[&Mutant], Option<&Sample>),
) -> Result<Controls> {
    let judged = counted
        .iter()
        .map(|m| {
            Ok((
                on_kernel::claim_for(series, m.patch)?,
                on_kernel::first_tests(options, sample, m),
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut controls = Controls::default();
    for (claim, tests) in &controlled_tests(judged) {
        control_one(options, (source, series, run_dir), (claim, tests))?;
        if tests.is_empty() {
            controls.whole.push(claim.clone());
        }
    }
    Ok(controls)
}

/// Each claim once, in order, with the tests its control runs: every
/// mutant's first tests, or the whole plan (none) when one of them has
/// none.
fn controlled_tests(judged: Vec<(String, Vec<String>)>) -> Vec<(String, Vec<String>)> {
    let mut claims: Vec<(String, Vec<String>)> = Vec::new();
    for (claim, first) in judged {
        match claims.iter_mut().find(|(c, _)| *c == claim) {
            None => claims.push((claim, first)),
            Some((_, tests)) if tests.is_empty() || first.is_empty() => tests.clear(),
            Some((_, tests)) => {
                for t in first {
                    if !tests.contains(&t) {
                        tests.push(t);
                    }
                }
            }
        }
    }
    claims
}

/// The claims whose unmutated kernel passed the whole plan in this run:
/// a mutant its first tests do not kill is judged by the whole plan, and
/// its claim's control is the whole plan too.
#[derive(Default)]
pub struct Controls {
    pub whole: Vec<String>,
}

/// The kernel of `claim`'s control: its mutants' path with no patch
/// replaced.
fn control_series(series: &Series, claim: &str) -> Result<Series> {
    on_kernel::judged_series(series, claim, None)
}

/// The control of one claim: `tests` (all without any) on its unmutated
/// kernel, built as its mutants are, in `run_dir` while it is judged.
pub(super) fn control_one(
    options: &JudgeOptions,
    (source, series, run_dir): (&SourceConfig, &Series, &Path),
    (claim, tests): (&str, &[String]),
) -> Result<()> {
    let keep = run_dir.join(format!("control-{claim}.bzImage"));
    let built = on_kernel::build_judged(options, source, control_series(series, claim)?, &keep)?
        .with_context(|| {
            format!("the control failed: the unmutated {claim} kernel, built as its mutants are, did not build")
        })?;
    let t = Instant::now();
    let judged = on_kernel::judge_kernel(options, source, &built.bzimage, (claim, tests));
    fs::remove_file(&keep).with_context(|| format!("removing {}", keep.display()))?;
    let o = judged?;
    if o != Outcome::Survived {
        bail!(
            "the control failed: the judge on the unmutated {claim} kernel gave \"{}: {}\", so no mutant's outcome would mean anything; it was built as its mutants are (the variant's whole series in the mutants' tree): if `{}` passes, that path is at fault",
            o.word(),
            o.detail(),
            same_judge_command(options, claim)
        );
    }
    let which = if tests.is_empty() {
        "every test".to_string()
    } else {
        tests.join(", ").to_uppercase()
    };
    eprintln!(
        "[control] {claim} unmutated: {which} passed in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The command that judges `claim`'s own kernel (built the usual way)
/// as the mutants are judged: the plan or the fuzzer, lean or debug.
fn same_judge_command(options: &JudgeOptions, claim: &str) -> String {
    let debug = if options.debug { " --debug" } else { "" };
    match options.judge {
        MutantJudge::Plan => format!("cargo xtask vmtest --kernel {claim}{debug}"),
        MutantJudge::Fuzz => format!(
            "cargo xtask fuzz --kernel {claim}{debug} --seed {} --seconds {}",
            options.seed, options.fuzz_seconds
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_control_names_the_run_that_judges_the_kernel_alike() {
        let mut o = JudgeOptions {
            judge: MutantJudge::Plan,
            debug: false,
            accel: crate::vm::qemu::AccelChoice::Auto,
            fresh: false,
            seed: 7,
            fuzz_seconds: 30,
            minutes: None,
        };
        assert_eq!(
            same_judge_command(&o, "direct"),
            "cargo xtask vmtest --kernel direct"
        );
        o.debug = true;
        assert_eq!(
            same_judge_command(&o, "direct"),
            "cargo xtask vmtest --kernel direct --debug"
        );
        o.judge = MutantJudge::Fuzz;
        assert_eq!(
            same_judge_command(&o, "adaptive"),
            "cargo xtask fuzz --kernel adaptive --debug --seed 7 --seconds 30"
        );
    }
    use crate::mutants::on_kernel::{claim_for, judged_series, MUTANT_VARIANT};

    /// Each claim's control is the kernel its mutants are built as, with
    /// the unmutated patch in place: the claimed variant's whole series,
    /// in the mutants' tree. For `direct` that is 0002 and 0003, where a
    /// mutant of 0002 also goes.
    #[test]
    fn a_claims_control_is_built_by_its_mutants_path_with_no_patch_replaced() {
        let series = crate::kernel::project_series().unwrap();
        for (index, patch) in series.patches.iter().enumerate() {
            let claim = claim_for(&series, index).unwrap();
            let control = control_series(&series, &claim).unwrap();
            let variant = series.variant(&claim).unwrap();
            let unmutated = judged_series(&series, &claim, Some((index, &patch.path))).unwrap();
            assert_eq!(control.whole().name, MUTANT_VARIANT, "{claim}");
            assert_eq!(control.whole(), unmutated.whole(), "{claim}");
            assert_eq!(control.hash(), unmutated.hash(), "{claim}");
            assert_eq!(control.hash(), series.upto(variant).hash(), "{claim}");
        }
        let direct = control_series(&series, "direct").unwrap();
        let names: Vec<&str> = direct.patches.iter().map(|p| p.name.as_str()).collect();
        assert!(
            names.iter().any(|n| n.starts_with("0003-")),
            "direct's control lacks 0003: {names:?}"
        );
        let err = format!("{:#}", control_series(&series, "nope").unwrap_err());
        assert!(err.contains("no variant nope to hold a mutant to"), "{err}");
    }

    fn judged(rows: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        rows.iter()
            .map(|(c, t)| (c.to_string(), t.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    #[test]
    fn a_claims_control_runs_its_mutants_first_tests_or_the_whole_plan_when_one_has_none() {
        let got = controlled_tests(judged(&[
            ("patched", &["t03"]),
            ("direct", &["t02"]),
            ("patched", &["t06", "t09"]),
            ("patched", &["t03"]),
            ("prefault", &["t29"]),
            ("prefault", &[]),
            ("prefault", &["t18"]),
        ]));
        assert_eq!(
            got,
            judged(&[
                ("patched", &["t03", "t06", "t09"]),
                ("direct", &["t02"]),
                ("prefault", &[]),
            ])
        );
    }
}
