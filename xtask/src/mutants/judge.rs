//! Judging mutants: each chosen mutant's outcome from the ledger or
//! from a run, where a run builds the mutated series as the kernel
//! variant `mutant` (one tree, rebuilt incrementally) and holds it to the
//! expectations of the variant its patch belongs to: the plan (its sample
//! line's tests first, alone; the whole plan when they do not kill it),
//! or the fuzzer held to that variant's model.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::control::{self, Controls};
use super::ledger::{self, Ledger};
use super::lists::Sample;
use super::outcome::{self, Outcome};
use super::Mutant;
use crate::fuzz::campaign::{self, Verdict};
use crate::kernel::series::Series;
use crate::kernel::{self, KernelConfig, SourceConfig};
use crate::plan::{self, PlanOptions};
use crate::project;
use crate::vm::qemu::AccelChoice;
use crate::vm::targets::BootConfig;

/// The tree and kernel name every mutant is built under.
const MUTANT_VARIANT: &str = "mutant";

/// What decides whether a mutant is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MutantJudge {
    Plan,
    Fuzz,
}

/// How the mutants are judged: by what, on which kernels, and whether
/// the ledger's outcomes are taken.
#[derive(Debug, Clone)]
pub struct JudgeOptions {
    pub judge: MutantJudge,
    /// Debug kernels (KASAN, lockdep, ...) instead of lean ones.
    pub debug: bool,
    pub accel: AccelChoice,
    /// Run every mutant again, taking nothing from the ledger.
    pub fresh: bool,
    /// The fuzzer's seed and seconds a mutant (`--judge fuzz`).
    pub seed: u64,
    pub fuzz_seconds: u64,
}

/// What judging the mutants needs: the options, the source,
/// the series and its patches' texts, the tests' key, the run's
/// directory and the sample.
pub struct Judging<'a> {
    pub options: &'a JudgeOptions,
    pub source: &'a SourceConfig,
    pub series: &'a Series,
    pub texts: &'a [String],
    pub tests: &'a str,
    pub run_dir: &'a std::path::Path,
    pub sample: Option<&'a Sample>,
}

/// Each chosen mutant's outcome (None: equivalent), from the ledger or
/// run, and what the ledger's outcomes took when they ran.
pub fn judge_all(
    ctx: &Judging,
    chosen: &[Mutant],
    equivalent: &HashMap<String, String>,
    controls: &mut Controls,
) -> Result<(Vec<Option<Outcome>>, f64)> {
    let texts = ctx.texts;
    let mut ledger = Ledger::open(&ctx.source.cache_dir)?;
    let mut outcomes: Vec<Option<Outcome>> = Vec::new();
    // What the outcomes taken from the ledger took when they were run.
    let mut remembered = 0.0;
    for (n, m) in chosen.iter().enumerate() {
        if let Some(why) = equivalent.get(&m.id) {
            eprintln!("[{}/{}] {}: equivalent ({why})", n + 1, chosen.len(), m.id);
            outcomes.push(None);
            continue;
        }
        let mutated = m.patch_text(&texts[m.patch]);
        let key = ledger_key(&texts[..m.patch], &mutated, ctx.tests);
        let outcome = match ledger.get(&key).filter(|_| !ctx.options.fresh) {
            Some((o, secs)) => {
                remembered += secs;
                eprintln!(
                    "[{}/{}] {}: {} (from the ledger, {secs:.0} s then)",
                    n + 1,
                    chosen.len(),
                    m.id,
                    o.word()
                );
                o.clone()
            }
            None => {
                eprintln!(
                    "[{}/{}] {}: {}:{}: {}",
                    n + 1,
                    chosen.len(),
                    m.id,
                    m.file,
                    m.new_line,
                    m.brief()
                );
                let t = Instant::now();
                let o = run_one(ctx, m, &mutated, controls)?;
                let secs = t.elapsed().as_secs_f64();
                eprintln!(
                    "[{}/{}] {}: {} in {secs:.0} s: {}",
                    n + 1,
                    chosen.len(),
                    m.id,
                    o.word(),
                    o.detail()
                );
                // A host failure says nothing of the mutant: not kept.
                if !matches!(o, Outcome::Error { .. }) {
                    ledger.put(key, &m.id, o.clone(), secs)?;
                }
                o
            }
        };
        outcomes.push(Some(outcome));
    }
    Ok((outcomes, remembered))
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

/// What besides the mutated series keys an outcome in the ledger: the
/// tests, the guest image and the kernels' configuration (a change to any
/// of them can change an outcome), whether the kernels are debug ones,
/// and for the fuzzer its host side, its seed and budget.
pub fn tests_key(options: &JudgeOptions) -> Result<String> {
    let mut tests = ledger::tests_digest(
        &project::root(),
        &["selftests", "guest-common", "vm-images", "kconfig"],
    )?;
    if options.debug {
        tests.push_str(" debug");
    }
    if options.judge == MutantJudge::Plan {
        return Ok(tests);
    }
    let host = ledger::tests_digest(&project::root(), &["xtask/src/fuzz"])?;
    Ok(format!(
        "{tests} fuzz {host} seed {} for {} s",
        options.seed, options.fuzz_seconds
    ))
}

/// The key of a mutant's outcome: the patches before its own (`earlier`),
/// its mutated patch, and the tests.
fn ledger_key(earlier: &[String], mutated: &str, tests: &str) -> String {
    let mut bodies: Vec<&[u8]> = earlier.iter().map(|t| t.as_bytes()).collect();
    bodies.push(mutated.as_bytes());
    ledger::key(&bodies, tests)
}

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

/// Builds one mutant's kernel and runs the plan on it.
fn run_one(ctx: &Judging, m: &Mutant, mutated: &str, controls: &mut Controls) -> Result<Outcome> {
    let (source, series, run_dir) = (ctx.source, ctx.series, ctx.run_dir);
    let path = run_dir.join(format!("{}.patch", m.id));
    fs::write(&path, mutated).with_context(|| format!("writing {}", path.display()))?;
    let mutant_series = series.with_replaced(m.patch, &path, MUTANT_VARIANT)?;
    // The mutant's own bzImage, booted and then removed: the tree may be
    // another run's by then.
    let kept = run_dir.join(format!("{}.bzImage", m.id));
    let built = match kernel::build_series(
        source,
        mutant_series,
        (KernelConfig::Lean, ctx.options.debug),
        &kept,
    )? {
        Ok(k) => k,
        Err(e) => {
            let error = format!("{e:#}");
            return Ok(Outcome::Unbuildable {
                error: error.lines().next().unwrap_or("").to_string(),
            });
        }
    };
    let claim = claim_for(series, m.patch)?;
    let first = first_tests(ctx.options, ctx.sample, m);
    let outcome = judge_first(ctx, (&built.bzimage, &claim), &first, controls);
    fs::remove_file(&kept).with_context(|| format!("removing {}", kept.display()))?;
    outcome
}

/// The judge on a mutant's kernel: `first` alone, and the whole plan
/// only when they do not kill it (after the whole plan's control on the
/// claim, once a run), so that "survived" is always the whole plan's.
fn judge_first(
    ctx: &Judging,
    (bzimage, claim): (&Path, &str),
    first: &[String],
    controls: &mut Controls,
) -> Result<Outcome> {
    if !first.is_empty() {
        let o = judge_kernel(ctx.options, ctx.source, bzimage, (claim, first))?;
        if o != Outcome::Survived {
            return Ok(o);
        }
        eprintln!(
            "[judge] {} did not kill it: the whole plan",
            first.join(", ").to_uppercase()
        );
        if !controls.whole.iter().any(|c| c == claim) {
            control::control_one(ctx.options, ctx.source, ctx.series, (claim, &[]))?;
            controls.whole.push(claim.to_string());
        }
    }
    judge_kernel(ctx.options, ctx.source, bzimage, (claim, &[]))
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
    let plan = plan::run(source, &boot, &plan_options)?;
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
        claim: claim.to_string(),
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
        replay: false,
    };
    let fuzzed = campaign::fuzz_kernels(source, boot, &plan, None, 1)?;
    Ok(match &fuzzed.verdicts[0] {
        Verdict::Clean => Outcome::Survived,
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
