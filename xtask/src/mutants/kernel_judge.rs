//! The judge on one kernel, mutated or not: what decides (the plan or
//! the fuzzer) and how, the variant whose expectations a mutant is held
//! to, and the plan tests its sample line names, run first.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::lists::Sample;
use super::outcome::{self, Outcome};
use super::{JudgeOptions, Mutant, MutantJudge};
use crate::fuzz::campaign::{self, FuzzOptions, Verdict};
use crate::kernel::series::Series;
use crate::kernel::{KernelConfig, SourceConfig};
use crate::plan::{Plan, PlanOptions};
use crate::vm::targets::BootConfig;

/// The variant whose expectations a mutant of patch `index` is held to:
/// the first that has the patch.
pub(super) fn claim_for(series: &Series, index: usize) -> Result<String> {
    let v = series
        .variants
        .iter()
        .find(|v| v.patches > index)
        .context("a patch outside every variant")?;
    if !guest_common::protocol::PLAN_KERNELS.contains(&v.name.as_str()) {
        bail!("the variant {} has no expectations in the test plan: its patch's mutants cannot be judged", v.name);
    }
    Ok(v.name.clone())
}

/// The plan tests the judge runs first on `m`: its sample line's, whose
/// kill is what the sample holds (found in seconds rather than after the
/// tests before them); none (the whole plan at once) without a sample
/// line, or for the fuzzer.
pub(super) fn first_tests(
    options: &JudgeOptions,
    sample: Option<&Sample>,
    m: &Mutant,
) -> Vec<String> {
    if options.judge != MutantJudge::Plan {
        return Vec::new();
    }
    sample
        .and_then(|s| s.entries.iter().find(|e| e.id == m.id))
        .map(|e| e.killers.clone())
        .unwrap_or_default()
}

/// The judge (`--judge`) on one kernel, held to `claim`'s expectations.
pub(super) fn judge_kernel(
    options: &JudgeOptions,
    source: &SourceConfig,
    bzimage: &Path,
    (claim, tests): (&str, &[String]),
) -> Result<Outcome> {
    let boot = boot_of(options, bzimage, claim);
    if options.judge == MutantJudge::Fuzz {
        return fuzz_mutant(options, source, boot);
    }
    let plan_options = PlanOptions {
        filters: tests.to_vec(),
        stop_after: Some(1),
        ..PlanOptions::default()
    };
    let plan = Plan::new(source, &boot, &plan_options)?.run()?;
    let results: Vec<_> = plan.runs.iter().flat_map(|r| r.results.clone()).collect();
    let failure = plan.vm_failures.first();
    if let Some(f) = failure {
        if let Some(why) = outcome::host_failure(f.reached_init, f.panicked, &f.why) {
            return Ok(Outcome::Error { why });
        }
    }
    Ok(outcome::judge(&results, failure.map(|f| f.why.as_str())))
}

/// One lean (or debug) kernel by path, held to `claim`.
fn boot_of(options: &JudgeOptions, bzimage: &Path, claim: &str) -> BootConfig {
    BootConfig {
        kernels: vec![bzimage.to_string_lossy().into_owned()],
        config: KernelConfig::Lean,
        extra_config: Vec::new(),
        debug: options.debug,
        accel: options.accel,
        claim: Some(claim.to_string()),
        timeout: None,
        bundle: None,
        machine: Default::default(),
    }
}

/// The fuzzer on a mutant's kernel, held to its variant's model.
fn fuzz_mutant(options: &JudgeOptions, source: &SourceConfig, boot: BootConfig) -> Result<Outcome> {
    let plan = crate::fuzz::Plan {
        seed: options.seed,
        seconds: options.fuzz_seconds,
        threads: 1,
        // A race takes two faults at once: a quarter of the time.
        race_seconds: crate::fuzz::default_race_seconds(options.fuzz_seconds),
        replay: false,
    };
    let options = FuzzOptions {
        plan,
        replay: None,
        vms: 1,
    };
    let fuzzed = campaign::fuzz_kernels(source, boot, options)?;
    Ok(match &fuzzed.verdicts[0] {
        Verdict::Clean => Outcome::Survived,
        // A pass that tried nothing the mutant may have broken.
        Verdict::NotExercised(what) => Outcome::Undecided {
            why: format!("the fuzzer did not exercise it: {what}"),
        },
        Verdict::Diverged(what, _) => Outcome::Killed {
            by: format!("fuzz: {what}"),
        },
        // The mutant's kernel panicked before the fuzzer reported: as
        // the plan counts it; anything else is the host's.
        Verdict::Infra(why) if crate::vm::judge::is_panic(why) => Outcome::Crashed {
            detail: why.clone(),
        },
        Verdict::Infra(why) => Outcome::Error {
            why: format!(
                "the fuzzer's VM could not run: {}",
                why.lines().next().unwrap_or("")
            ),
        },
        // A fault of the fuzzer's is no finding about the mutant.
        Verdict::FuzzerFailed(why) => Outcome::Undecided {
            why: format!("the fuzzer failed: {why}"),
        },
    })
}
