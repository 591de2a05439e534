//! One kernel held to its variant, a mutant's or its control's: the
//! variant whose expectations a mutant is held to, the kernel it is
//! judged on (that variant's whole series with the one patch mutated;
//! its control's the same, unmutated, built the same way), what decides
//! (the plan or the fuzzer) and how, and the plan tests its sample line
//! names, run first.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::lists::Sample;
use super::outcome::{self, Outcome};
use super::{JudgeOptions, Mutant, MutantJudge};
use crate::fuzz::campaign::{self, FuzzOptions, FuzzVerdict};
use crate::fuzz::FuzzParams;
use crate::kernel::choice::Sides;
use crate::kernel::manifest::KernelInfo;
use crate::kernel::series::Series;
use crate::kernel::{self, KernelConfig, SourceConfig};
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

/// The tree and kernel name every mutant and every control is built
/// under.
pub(super) const MUTANT_VARIANT: &str = "mutant";

/// The kernel the judge holds to `claim`: the claimed variant's whole
/// series, with `mutated` (a patch's index and the file of its mutated
/// text) in that patch's place, or, for the control, none replaced. One
/// path for both, so that a fault of the path fails the control too: a
/// mutant of 0002 is built with 0003, as `direct` is.
pub(super) fn judged_series(
    series: &Series,
    claim: &str,
    mutated: Option<(usize, &Path)>,
) -> Result<Series> {
    let variant = series.variant(claim).with_context(|| {
        format!(
            "no variant {claim} to hold a mutant to: the series builds {}",
            series.variant_names().join(", ")
        )
    })?;
    series.variant_with(variant, mutated, MUTANT_VARIANT)
}

/// Builds `judged` (a `judged_series`) in the mutants' tree, its bzImage
/// copied to `keep`; the inner error when it does not apply or build.
pub(super) fn build_judged(
    options: &JudgeOptions,
    source: &SourceConfig,
    judged: Series,
    keep: &Path,
) -> Result<Result<KernelInfo>> {
    kernel::build_series(source, judged, (KernelConfig::Lean, options.debug), keep)
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
    let chosen = boot.choose(source, Sides::Plan)?;
    let plan = Plan::new(source, chosen, &boot, &plan_options)?.run()?;
    let results: Vec<_> = plan.runs.iter().flat_map(|r| r.results.clone()).collect();
    Ok(outcome::of_results(&results, plan.vm_failures.first()))
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
    let params = FuzzParams {
        seed: options.seed,
        seconds: options.fuzz_seconds,
        threads: 1,
        // A race takes two faults at once: a quarter of the time.
        race_seconds: crate::fuzz::default_race_seconds(options.fuzz_seconds),
        replay: false,
    };
    let options = FuzzOptions {
        params,
        replay: None,
        vms: 1,
    };
    // The mutant's bzImage, by path, playing the variant its claim names.
    let chosen = boot.choose(source, Sides::Own)?;
    let fuzzed = campaign::fuzz_kernels(source, &chosen, boot, options)?;
    Ok(fuzz_outcome(&fuzzed.verdicts[0]))
}

/// A mutant's outcome from the fuzzer's verdict on its kernel.
fn fuzz_outcome(verdict: &FuzzVerdict) -> Outcome {
    match verdict {
        FuzzVerdict::Clean => Outcome::Survived,
        // A pass that tried nothing the mutant may have broken.
        FuzzVerdict::NotExercised(what) => Outcome::Undecided {
            why: format!("the fuzzer did not exercise it: {what}"),
        },
        FuzzVerdict::Diverged(what, _) => Outcome::Killed {
            by: format!("fuzz: {what}"),
        },
        // The mutant's kernel panicked before the fuzzer reported: as
        // the plan counts it; anything else is the host's.
        FuzzVerdict::Infra(failed) if failed.panicked() => Outcome::Crashed {
            detail: failed.headline(),
        },
        FuzzVerdict::Infra(failed) => Outcome::Error {
            why: format!("the fuzzer's VM could not run: {}", failed.headline()),
        },
        // A fault of the fuzzer's is no finding about the mutant.
        FuzzVerdict::FuzzerFailed(why) => Outcome::Undecided {
            why: format!("the fuzzer failed: {why}"),
        },
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::vm::failed::{KernelSign, VmFailed};

    /// The index in `series` of the patch whose name starts with `prefix`.
    pub(in crate::mutants) fn patch_index(series: &Series, prefix: &str) -> usize {
        let found = series
            .patches
            .iter()
            .position(|p| p.name.starts_with(prefix));
        found.expect("a patch of the series")
    }
    use crate::mutants::{of_patch, read_patches};

    /// A mutant of 0002 is held to `direct`, and built as direct is:
    /// with 0003, whose arena T22, T33 and T39 look at.
    #[test]
    fn a_mutant_of_0002_is_built_with_0003() {
        let series = crate::kernel::project_series().unwrap();
        let texts = read_patches(&series).unwrap();
        let (p2, p3) = (patch_index(&series, "0002-"), patch_index(&series, "0003-"));
        let m = of_patch(p2, &series.patches[p2].name, &texts[p2])
            .into_iter()
            .find(|m| m.id == "0002.36.return2")
            .expect("0002's forced SIGBUS");
        let dir = crate::util::tempdir();
        let path = dir.join("0002.36.return2.patch");
        std::fs::write(&path, m.patch_text(&texts[p2])).unwrap();
        let claim = claim_for(&series, p2).unwrap();
        assert_eq!(claim, "direct");
        let built = judged_series(&series, &claim, Some((p2, &path))).unwrap();
        let names: Vec<&str> = built.patches.iter().map(|p| p.name.as_str()).collect();
        assert!(
            names.contains(&series.patches[p3].name.as_str()),
            "a mutant of 0002 lacks 0003: {names:?}"
        );
        assert_eq!(
            built.patches.len(),
            series.variant("direct").unwrap().patches
        );
        assert_ne!(built.patches[p2].sha256, series.patches[p2].sha256);
        assert_eq!(built.patches[p3].sha256, series.patches[p3].sha256);
        assert_eq!(built.whole().name, MUTANT_VARIANT);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A fuzzer's VM whose kernel panicked is a crash, as the plan counts
    /// it, by what the VM saw, not by how its failure reads; any other VM
    /// failure is the host's.
    #[test]
    fn a_fuzzed_kernel_that_panicked_is_a_crash_whatever_the_words() {
        let infra = |cause: &str, sign| {
            FuzzVerdict::Infra(VmFailed {
                sign,
                ..VmFailed::of_host(cause.into())
            })
        };
        let crashed = fuzz_outcome(&infra("Kernel panic - not syncing", KernelSign::Panicked));
        assert!(matches!(crashed, Outcome::Crashed { .. }), "{crashed:?}");
        let host = fuzz_outcome(&infra(
            "the kernel panicked: read as text",
            KernelSign::Nothing,
        ));
        assert!(matches!(host, Outcome::Error { .. }), "{host:?}");
    }
}
