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
use super::ledger::{self, Ledger};
use super::lists::Sample;
use super::on_kernel::{build_judged, claim_for, first_tests, judge_kernel, judged_series};
use super::outcome::Outcome;
use super::Mutant;
use super::{JudgeOptions, MutantJudge};
use crate::kernel::series::Series;
use crate::kernel::{self, SourceConfig};
use crate::project;
use crate::vm::qemu::{Accel, AccelChoice};

/// What judging the mutants needs: the options, the source,
/// the series and its patches' texts, what else keys an outcome in the
/// ledger, the run's directory and the sample.
pub struct Judging<'a> {
    pub options: &'a JudgeOptions,
    pub source: &'a SourceConfig,
    pub series: &'a Series,
    pub texts: &'a [String],
    pub decides: &'a ledger::Decides,
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
        let key = ledger_key(ctx.series, texts, (m.patch, &mutated), ctx.decides)?;
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
                // A host failure, or a judge that could not decide (the
                // fuzzer short of what it was to try), says nothing of
                // the mutant: not kept, so the next run judges it again.
                if !matches!(o, Outcome::Error { .. } | Outcome::Undecided { .. }) {
                    ledger.put(key, &m.id, o.clone(), secs)?;
                }
                o
            }
        };
        outcomes.push(Some(outcome));
    }
    Ok((outcomes, remembered))
}

/// What besides the mutated series keys an outcome in the ledger (a
/// change to any of it can change an outcome): the tests, the guest image
/// and the kernels' configuration; the host's judge; the kernel source and
/// its version; the series' base and variants; `--accel`; whether the
/// kernels are debug ones, and for the fuzzer its host side, its seed and
/// budget.
pub fn what_decides(
    options: &JudgeOptions,
    source: &SourceConfig,
    series: &Series,
) -> Result<ledger::Decides> {
    let root = project::root();
    let tests = ledger::tests_digest(
        &root,
        &["selftests", "guest-common", "vm-images", "kconfig"],
    )?;
    let mut judge = if options.debug { "debug" } else { "lean" }.to_string();
    if options.judge == MutantJudge::Fuzz {
        let host = ledger::tests_digest(&root, &["xtask/src/fuzz"])?;
        judge += &format!(
            " fuzz {host} seed {} for {} s",
            options.seed, options.fuzz_seconds
        );
    }
    Ok(ledger::Decides {
        tests,
        host_judge: ledger::tests_digest(&root, ledger::HOST_JUDGE)?,
        source: kernel::source_identity(source)?,
        variants: variants_of(series),
        accel: accel_key(options.accel, || {
            crate::vm::accel::auto_tries_kvm(&source.cache_dir)
        }),
        judge,
    })
}

/// The accelerator the outcomes are judged under, for the ledger: `auto`
/// resolved as its first boot will resolve it (KVM where this host can
/// run a kernel under it), so an outcome judged under TCG is never taken
/// for one under KVM, nor the reverse.
fn accel_key(asked: AccelChoice, auto_tries_kvm: impl FnOnce() -> bool) -> String {
    let accel = match asked {
        AccelChoice::Auto if auto_tries_kvm() => Accel::Kvm,
        AccelChoice::Auto => Accel::Tcg,
        AccelChoice::Kvm => Accel::Kvm,
        AccelChoice::Tcg => Accel::Tcg,
    };
    format!("{accel:?}")
}

/// The series' base (its name and patches) and each variant with how
/// many patches it has, on one line.
fn variants_of(series: &Series) -> String {
    let base = series.base.patches.iter().map(|p| p.sha256.as_str());
    let variants = series
        .variants
        .iter()
        .map(|v| format!("{}:{}", v.name, v.patches));
    std::iter::once(series.base.name.as_str().to_string())
        .chain(base.map(str::to_string))
        .chain(variants)
        .collect::<Vec<_>>()
        .join(" ")
}

/// How a mutant's kernel is built, in its outcome's key: an outcome
/// from a kernel built another way (before: the patches up to the
/// mutant's only) is not taken, even where the patches are the same.
const BUILD_PATH: &str = "built as the claimed variant's whole series";

/// The key of a mutant's outcome: the variant it is held to, how its
/// kernel is built, that kernel's patches (`texts` up to the variant's
/// last, with `mutated` in place of patch `index`), and what else
/// decides it.
fn ledger_key(
    series: &Series,
    texts: &[String],
    (index, mutated): (usize, &str),
    decides: &ledger::Decides,
) -> Result<String> {
    let claim = claim_for(series, index)?;
    let held = series.variant(&claim).context("a claim of no variant")?;
    let mut bodies: Vec<&[u8]> = vec![claim.as_bytes(), BUILD_PATH.as_bytes()];
    for (i, text) in texts[..held.patches].iter().enumerate() {
        bodies.push(if i == index { mutated } else { text }.as_bytes());
    }
    Ok(ledger::key(&bodies, decides))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_keys_the_ledger_as_the_accelerator_it_will_boot_with() {
        let never = || -> bool { panic!("only auto asks the host") };
        assert_eq!(accel_key(AccelChoice::Kvm, never), "Kvm");
        assert_eq!(accel_key(AccelChoice::Tcg, never), "Tcg");
        assert_eq!(accel_key(AccelChoice::Auto, || true), "Kvm");
        assert_eq!(accel_key(AccelChoice::Auto, || false), "Tcg");
    }
    use crate::mutants::read_patches;

    /// A mutant's outcome is keyed on its claimed variant's whole series
    /// and on that way of building it: 0002's key follows an edit of
    /// 0003, and no key of the old path (the patches up to the mutant's)
    /// is taken, not even a mutant of its variant's last patch, whose
    /// patches are the same.
    #[test]
    fn a_mutants_key_covers_its_variants_whole_series_and_its_build_path() {
        let series = crate::kernel::project_series().unwrap();
        let texts = read_patches(&series).unwrap();
        let at = |n: &str| super::super::on_kernel::tests::patch_index(&series, n);
        let (p2, p3) = (at("0002-"), at("0003-"));
        let decides = ledger::Decides::default();
        let key = |texts: &[String], index: usize| {
            ledger_key(&series, texts, (index, "mutated"), &decides).unwrap()
        };
        let mut edited = texts.clone();
        edited[p3].push_str("\n-- \nedited\n");
        assert_ne!(
            key(&texts, p2),
            key(&edited, p2),
            "0003 is not in 0002's key"
        );
        let old_path = |index: usize| {
            let mut bodies: Vec<&[u8]> = texts[..index].iter().map(|t| t.as_bytes()).collect();
            bodies.push(b"mutated");
            ledger::key(&bodies, &decides)
        };
        assert_ne!(key(&texts, p3), old_path(p3), "0003's old key is taken");
        assert_ne!(key(&texts, p2), old_path(p2));
    }

    /// The variant a mutant is held to follows the mapping: a changed
    /// mapping, or base, is a changed key.
    #[test]
    fn the_variants_line_follows_the_mapping_and_the_base() {
        let series = crate::kernel::project_series().unwrap();
        let line = variants_of(&series);
        assert!(
            line.contains(&format!("{}:", series.variants[0].name)),
            "{line}"
        );
        let mut moved = series.clone();
        moved.variants[1].patches += 1;
        assert_ne!(variants_of(&moved), line);
        let mut based = series.clone();
        based.base.patches.clear();
        based.base.name = crate::kernel::series::BaseName::Base;
        assert_ne!(variants_of(&based), line);
    }
}
