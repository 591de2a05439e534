//! The controls of a mutants run: the judge on each variant the counted
//! mutants are held to, unmutated, which must pass, or no mutant's
//! outcome would mean anything (a host that cannot boot guests kills
//! every mutant).

use std::time::Instant;

use anyhow::{bail, Result};

use super::kernel_judge as judge;
use super::lists::Sample;
use super::outcome::Outcome;
use super::JudgeOptions;
use super::Mutant;
use crate::kernel::series::Series;
use crate::kernel::{self, ExtraConfig, KernelConfig, SourceConfig};

/// The judge on each variant the counted mutants are held to, unmutated,
/// with the tests it runs first on them (`first_tests`; the whole plan
/// when one of them has none): every test must pass (the fuzzer: run
/// clean), or the mutants' outcomes would say nothing (a host that
/// cannot boot guests kills every mutant).
pub fn control(
    options: &JudgeOptions,
    source: &SourceConfig,
    series: &Series,
    (counted, sample): (&[&Mutant], Option<&Sample>),
) -> Result<Controls> {
    let judged = counted
        .iter()
        .map(|m| {
            Ok((
                judge::claim_for(series, m.patch)?,
                judge::first_tests(options, sample, m),
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut controls = Controls::default();
    for (claim, tests) in &controlled_tests(judged) {
        control_one(options, source, series, (claim, tests))?;
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

/// The control of one claim: `tests` (all without any) on its unmutated
/// kernel.
pub(super) fn control_one(
    options: &JudgeOptions,
    source: &SourceConfig,
    series: &Series,
    (claim, tests): (&str, &[String]),
) -> Result<()> {
    let specs = kernel::specs_for(
        &[claim.to_string()],
        series,
        (KernelConfig::Lean, options.debug),
        &ExtraConfig::default(),
    )?;
    let manifest = kernel::build(source, &specs)?;
    let t = Instant::now();
    let o = judge::judge_kernel(
        options,
        source,
        &manifest.kernels[0].bzimage,
        (claim, tests),
    )?;
    if o != Outcome::Survived {
        bail!(
            "the control failed: the judge on the unmutated {claim} kernel gave \"{}: {}\", so no mutant's outcome would mean anything; run `cargo xtask vmtest --kernel {claim}` to see why",
            o.word(),
            o.detail()
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

#[cfg(test)]
mod tests {
    use super::*;

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
