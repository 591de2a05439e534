//! Judging mutants: each chosen mutant's outcome from the ledger or
//! from a run, where a run builds the first variant that has the
//! mutant's patch, its whole series with that patch mutated, as the
//! kernel variant `mutant` (one tree, rebuilt incrementally) and holds
//! it to that variant's expectations: the plan (its sample line's tests
//! first, alone; the whole plan when they do not kill it), or the fuzzer
//! held to that variant's model.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use super::control::{self, Controls};
use super::kernel_judge::{build_judged, claim_for, first_tests, judge_kernel, judged_series};
use super::ledger::{self, Ledger};
use super::lists::Sample;
use super::outcome::Outcome;
use super::Mutant;
use super::{JudgeOptions, MutantJudge};
use crate::kernel::series::Series;
use crate::kernel::SourceConfig;
use crate::project;

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
    let started = Instant::now();
    let spent = || {
        ctx.options
            .minutes
            .is_some_and(|m| started.elapsed().as_secs() >= m * 60)
    };
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
            None if spent() => Outcome::Left,
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

/// Builds one mutant's kernel (its claimed variant's whole series, the
/// mutated patch in place) and runs the plan on it.
fn run_one(ctx: &Judging, m: &Mutant, mutated: &str, controls: &mut Controls) -> Result<Outcome> {
    let (source, series, run_dir) = (ctx.source, ctx.series, ctx.run_dir);
    let path = run_dir.join(format!("{}.patch", m.id));
    fs::write(&path, mutated).with_context(|| format!("writing {}", path.display()))?;
    let claim = claim_for(series, m.patch)?;
    let mutant_series = judged_series(series, &claim, Some((m.patch, &path)))?;
    // The mutant's own bzImage, booted and then removed: the tree may be
    // another run's by then.
    let kept = run_dir.join(format!("{}.bzImage", m.id));
    let built = match build_judged(ctx.options, source, mutant_series, &kept)? {
        Ok(k) => k,
        Err(e) => {
            let error = format!("{e:#}");
            return Ok(Outcome::Unbuildable {
                error: error.lines().next().unwrap_or("").to_string(),
            });
        }
    };
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
            let at = (ctx.source, ctx.series, ctx.run_dir);
            control::control_one(ctx.options, at, (claim, &[]))?;
            controls.whole.push(claim.to_string());
        }
    }
    judge_kernel(ctx.options, ctx.source, bzimage, (claim, &[]))
}
