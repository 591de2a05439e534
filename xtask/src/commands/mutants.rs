//! `cargo xtask mutants`: each mutant of the series (`mutants/`) built as
//! the kernel variant `mutant` (one tree, rebuilt incrementally) and run
//! through the plan with `--fail-fast`, held to the expectations of the
//! variant its patch belongs to: 0001's on `patched`, 0002's and 0003's
//! on `direct`, and so on. First the judge runs on each such variant unmutated, a
//! control that must pass, or no outcome would mean anything. Killed,
//! crashed (counted as killed), survived; did not build, undecided (the
//! judge broke) and errors (the host failed) are not counted and fail the
//! run. The table per patch, the kill rate and every survivor's diff at
//! the end; with `--sample`, each mutant held to the tests its
//! CI_SAMPLE line names: those run first, alone (and the control runs
//! them), and the whole plan only when they do not kill it. `--debug`
//! builds and judges debug kernels.

use std::collections::HashMap;
use std::fs;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::vmtest;
use crate::cli::{MutantJudge, MutantsArgs, VmArgs, VmtestArgs};
use crate::hostdeps;
use crate::kernel::series::Series;
use crate::kernel::{self, ExtraConfig, KernelConfig, SourceConfig};
use crate::mutants::ledger::{self, Ledger};
use crate::mutants::lists::{self, Sample, CI_SAMPLE};
use crate::mutants::outcome::{self, Outcome};
use crate::mutants::{self as mutation, patch_number, Mutant};
use crate::project::{self, EXIT_TESTS_FAILED};
use crate::vm::targets::BootConfig;

/// The tree and kernel name every mutant is built under.
const MUTANT_VARIANT: &str = "mutant";

pub fn run(args: MutantsArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    let series = Series::load(&source.patches)?;
    let texts = mutation::read_patches(&series)?;
    let all = mutation::of_series(&series, &texts);
    // mutants/'s lists are of the project's own series.
    let own = own_series(&source.patches);
    let equivalent: HashMap<String, String> = if own {
        let listed = lists::equivalents()?;
        lists::check_equivalents(&all, &listed)?;
        listed.into_iter().map(|e| (e.id, e.reason)).collect()
    } else {
        HashMap::new()
    };
    let sample = match (&args.sample_file, args.sample, own) {
        (Some(file), _, _) => Some(lists::sample_file(file)?),
        (None, false, _) => None,
        (None, true, true) => Some(lists::sample()?),
        (None, true, false) => bail!(
            "--sample runs mutants/{CI_SAMPLE}, of the project's own series; with --patches {}, give --sample-file FILE in its form, or choose mutants with --patch or --filter",
            source.patches.display()
        ),
    };
    let chosen = select(&all, &args, &series, sample.as_ref())?;
    if args.list {
        list(&chosen, &equivalent);
        return Ok(ExitCode::SUCCESS);
    }
    hostdeps::ensure_kernel_build(&source)?;
    hostdeps::ensure_boot(&source)?;
    let run_dir = project::new_run_dir(&source.cache_dir, "mutants")?;
    // The tests, the guest image and the kernels' configuration: a change
    // to any of them can change an outcome.
    let tests = tests_key(&args, &source)?;
    let counted: Vec<&Mutant> = chosen
        .iter()
        .filter(|m| !equivalent.contains_key(&m.id))
        .collect();
    if counted.is_empty() {
        bail!("no mutant to judge: every one chosen is listed in mutants/EQUIVALENT (`--list` shows them)");
    }
    let mut controls = control(&args, &source, &series, (&counted, sample.as_ref()))?;
    let started = Instant::now();
    let ctx = Judging {
        args: &args,
        source: &source,
        series: &series,
        texts: &texts,
        tests: &tests,
        run_dir: &run_dir,
        sample: sample.as_ref(),
    };
    let (outcomes, remembered) = judge_all(&ctx, &chosen, &equivalent, &mut controls)?;
    let secs = (started.elapsed().as_secs_f64(), remembered);
    let code = report(&chosen, &outcomes, &run_dir, secs)?;
    let misses = sample
        .as_ref()
        .map(|s| outcome::sample_misses(s, &chosen, &outcomes))
        .unwrap_or_default();
    for miss in &misses {
        println!("FAIL: {miss}");
    }
    Ok(if misses.is_empty() {
        code
    } else {
        ExitCode::from(EXIT_TESTS_FAILED)
    })
}

/// Whether `patches` is the project's own series, which mutants/'s
/// lists are of.
fn own_series(patches: &std::path::Path) -> bool {
    let own = project::root().join("patches");
    match (fs::canonicalize(patches), fs::canonicalize(own)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// What judging the mutants needs: the command's arguments, the source,
/// the series and its patches' texts, the tests' key, the run's
/// directory and the sample.
struct Judging<'a> {
    args: &'a MutantsArgs,
    source: &'a SourceConfig,
    series: &'a Series,
    texts: &'a [String],
    tests: &'a str,
    run_dir: &'a std::path::Path,
    sample: Option<&'a Sample>,
}

/// Each chosen mutant's outcome (None: equivalent), from the ledger or
/// run, and what the ledger's outcomes took when they ran.
fn judge_all(
    ctx: &Judging,
    chosen: &[Mutant],
    equivalent: &HashMap<String, String>,
    controls: &mut Controls,
) -> Result<(Vec<Option<Outcome>>, f64)> {
    let (args, texts) = (ctx.args, ctx.texts);
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
        let outcome = match ledger.get(&key).filter(|_| !args.fresh) {
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

/// The judge on each variant the counted mutants are held to, unmutated,
/// with the tests it runs first on them (`first_tests`; the whole plan
/// when one of them has none): every test must pass (the fuzzer: run
/// clean), or the mutants' outcomes would say nothing (a host that
/// cannot boot guests kills every mutant).
fn control(
    args: &MutantsArgs,
    source: &SourceConfig,
    series: &Series,
    (counted, sample): (&[&Mutant], Option<&Sample>),
) -> Result<Controls> {
    let judged = counted
        .iter()
        .map(|m| Ok((claim_for(series, m.patch)?, first_tests(args, sample, m))))
        .collect::<Result<Vec<_>>>()?;
    let mut controls = Controls::default();
    for (claim, tests) in &controlled_tests(judged) {
        control_one(args, source, series, (claim, tests))?;
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
struct Controls {
    whole: Vec<String>,
}

/// The control of one claim: `tests` (all without any) on its unmutated
/// kernel.
fn control_one(
    args: &MutantsArgs,
    source: &SourceConfig,
    series: &Series,
    (claim, tests): (&str, &[String]),
) -> Result<()> {
    let specs = kernel::specs_for(
        &[claim.to_string()],
        series,
        (KernelConfig::Lean, args.debug),
        &ExtraConfig::default(),
    )?;
    let manifest = kernel::build(source, &specs)?;
    let t = Instant::now();
    let o = judge_kernel(args, source, &manifest.kernels[0].bzimage, (claim, tests))?;
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

/// The plan tests the judge runs first on `m`: its sample line's, whose
/// kill is what the sample holds (found in seconds rather than after the
/// tests before them); none (the whole plan at once) without a sample
/// line, or for the fuzzer.
fn first_tests(args: &MutantsArgs, sample: Option<&Sample>, m: &Mutant) -> Vec<String> {
    if args.judge != MutantJudge::Plan {
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
fn tests_key(args: &MutantsArgs, source: &SourceConfig) -> Result<String> {
    let mut tests = ledger::tests_digest(&project::root(), &["selftests", "vm-images", "kconfig"])?;
    if args.debug {
        tests.push_str(" debug");
    }
    if args.judge == MutantJudge::Plan {
        return Ok(tests);
    }
    super::fuzz::ensure_tools(source)?;
    let host = ledger::tests_digest(&project::root(), &["xtask/src/fuzz"])?;
    Ok(format!(
        "{tests} fuzz {host} seed {} for {} s",
        args.seed, args.fuzz_seconds
    ))
}

/// The mutants asked for: `--sample` (its entries), `--patch`, `--filter`.
fn select(
    all: &[Mutant],
    args: &MutantsArgs,
    series: &Series,
    sample: Option<&Sample>,
) -> Result<Vec<Mutant>> {
    if let Some(sample) = sample {
        return sample
            .entries
            .iter()
            .map(|s| {
                all.iter().find(|m| m.id == s.id).cloned().with_context(|| {
                    format!(
                        "{}: no mutant {} (`cargo xtask mutants --list` lists them)",
                        sample.name, s.id
                    )
                })
            })
            .collect();
    }
    let patch = match &args.patch {
        None => None,
        Some(p) => Some(patch_index(series, p)?),
    };
    Ok(all
        .iter()
        .filter(|m| patch.is_none_or(|p| m.patch == p))
        .filter(|m| args.filter.is_empty() || args.filter.iter().any(|f| m.id.contains(f.as_str())))
        .cloned()
        .collect())
}

/// `--patch 2`, `0002` or the file name, to the patch's index.
fn patch_index(series: &Series, word: &str) -> Result<usize> {
    let found = series.patches.iter().position(|p| {
        p.name == word
            || patch_number(&p.name) == word
            || word.parse::<usize>().ok() == patch_number(&p.name).parse().ok()
    });
    found.with_context(|| {
        let names: Vec<&str> = series
            .patches
            .iter()
            .map(|p| patch_number(&p.name))
            .collect();
        format!(
            "--patch {word}: the series has patches {}",
            names.join(", ")
        )
    })
}

fn list(chosen: &[Mutant], equivalent: &HashMap<String, String>) {
    for m in chosen {
        let eq = equivalent
            .get(&m.id)
            .map(|why| format!("  [equivalent: {why}]"))
            .unwrap_or_default();
        println!("{:<20} {}:{}  {}{eq}", m.id, m.file, m.new_line, m.brief());
    }
    eprintln!(
        "{} mutant(s), {} listed as equivalent",
        chosen.len(),
        chosen
            .iter()
            .filter(|m| equivalent.contains_key(&m.id))
            .count()
    );
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
fn claim_for(series: &Series, index: usize) -> Result<String> {
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
    let (args, source, series, run_dir) = (ctx.args, ctx.source, ctx.series, ctx.run_dir);
    let path = run_dir.join(format!("{}.patch", m.id));
    fs::write(&path, mutated).with_context(|| format!("writing {}", path.display()))?;
    let mutant_series = series.with_replaced(m.patch, &path, MUTANT_VARIANT)?;
    // The mutant's own bzImage, booted and then removed: the tree may be
    // another run's by then.
    let kept = run_dir.join(format!("{}.bzImage", m.id));
    let built = match kernel::build_series(
        source,
        mutant_series,
        (KernelConfig::Lean, args.debug),
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
    let first = first_tests(args, ctx.sample, m);
    let outcome = judge_first(ctx, (&built.bzimage, &claim), &first, controls);
    fs::remove_file(&kept).with_context(|| format!("removing {}", kept.display()))?;
    outcome
}

/// The judge on a mutant's kernel: `first` alone, and the whole plan
/// only when they do not kill it (after the whole plan's control on the
/// claim, once a run), so that "survived" is always the whole plan's.
fn judge_first(
    ctx: &Judging,
    (bzimage, claim): (&std::path::Path, &str),
    first: &[String],
    controls: &mut Controls,
) -> Result<Outcome> {
    if !first.is_empty() {
        let o = judge_kernel(ctx.args, ctx.source, bzimage, (claim, first))?;
        if o != Outcome::Survived {
            return Ok(o);
        }
        eprintln!(
            "[judge] {} did not kill it: the whole plan",
            first.join(", ").to_uppercase()
        );
        if !controls.whole.iter().any(|c| c == claim) {
            control_one(ctx.args, ctx.source, ctx.series, (claim, &[]))?;
            controls.whole.push(claim.to_string());
        }
    }
    judge_kernel(ctx.args, ctx.source, bzimage, (claim, &[]))
}

/// The judge (`--judge`) on one kernel, held to `claim`'s expectations.
fn judge_kernel(
    args: &MutantsArgs,
    source: &SourceConfig,
    bzimage: &std::path::Path,
    (claim, tests): (&str, &[String]),
) -> Result<Outcome> {
    if args.judge == MutantJudge::Fuzz {
        return fuzz_mutant(args, source, bzimage, claim);
    }
    let plan = vmtest::run_plan(&VmtestArgs {
        source: args.source.clone(),
        vm: VmArgs {
            kernels: vec![bzimage.to_string_lossy().into_owned()],
            debug: args.debug,
            kernel_config: KernelConfig::Lean,
            config: Vec::new(),
            accel: args.accel,
            claim: claim.to_string(),
            timeout: None,
            bundle: None,
            machine: Default::default(),
            inject: None,
        },
        fail_fast: true,
        max_failures: None,
        share: None,
        stall: None,
        filters: tests.to_vec(),
    })?;
    let results: Vec<_> = plan.runs.iter().flat_map(|r| r.results.clone()).collect();
    let failure = plan.vm_failures.first();
    if let Some(f) = failure {
        if let Some(why) = outcome::host_failure(f.reached_init, f.panicked, &f.why) {
            return Ok(Outcome::Error { why });
        }
    }
    Ok(outcome::judge(&results, failure.map(|f| f.why.as_str())))
}

/// The fuzzer on a mutant's kernel, held to its variant's model.
fn fuzz_mutant(
    args: &MutantsArgs,
    source: &SourceConfig,
    bzimage: &std::path::Path,
    claim: &str,
) -> Result<Outcome> {
    let boot = BootConfig {
        kernels: vec![bzimage.to_string_lossy().into_owned()],
        config: KernelConfig::Lean,
        extra_config: Vec::new(),
        debug: args.debug,
        accel: args.accel,
        claim: claim.to_string(),
        timeout: None,
        bundle: None,
        machine: Default::default(),
    };
    let plan = crate::fuzz::Plan {
        seed: args.seed,
        seconds: args.fuzz_seconds,
        threads: 1,
        replay: false,
    };
    let fuzzed = super::fuzz::fuzz_kernels(source, boot, &plan, None, 1)?;
    Ok(match &fuzzed.verdicts[0] {
        super::fuzz::Verdict::Clean => Outcome::Survived,
        super::fuzz::Verdict::Diverged(what, _) => Outcome::Killed {
            by: format!("fuzz: {what}"),
        },
        // The mutant's kernel panicked before the fuzzer reported: as
        // the plan counts it; anything else is the host's.
        super::fuzz::Verdict::Infra(why) if crate::vm::judge::is_panic(why) => Outcome::Crashed {
            detail: why.clone(),
        },
        super::fuzz::Verdict::Infra(why) => Outcome::Error {
            why: format!(
                "the fuzzer's VM could not run: {}",
                why.lines().next().unwrap_or("")
            ),
        },
        // A fault of the fuzzer's is no finding about the mutant.
        super::fuzz::Verdict::FuzzerFailed(why) => Outcome::Undecided {
            why: format!("the fuzzer failed: {why}"),
        },
    })
}

/// One line per mutant for `report.md`: its outcome and what decided it
/// (the test that killed it, the crash, the build error).
fn every_outcome(chosen: &[Mutant], outcomes: &[Option<Outcome>]) -> String {
    let mut out = String::from("## Every mutant\n\n");
    for (m, o) in chosen.iter().zip(outcomes) {
        let line = match o {
            Some(o) => format!("{} {}: {}", m.id, o.word(), o.detail()),
            None => format!("{} equivalent", m.id),
        };
        out.push_str(&line.replace('\n', " "));
        out.push('\n');
    }
    out
}

/// The table per patch, every survivor's diff, and in `report.md` in the
/// run's directory also every mutant's outcome; exit 1 when a counted mutant survived. `secs`: this run's
/// time, and what the outcomes taken from the ledger took when they ran.
fn report(
    chosen: &[Mutant],
    outcomes: &[Option<Outcome>],
    run_dir: &std::path::Path,
    secs: (f64, f64),
) -> Result<ExitCode> {
    let rows = chosen.iter().zip(outcomes.iter().map(Option::as_ref));
    let tallies = outcome::tally(rows.clone());
    let mut text = outcome::table(&tallies);
    text.push_str(&format!("\n{} mutant(s) in {:.0} s", chosen.len(), secs.0));
    if secs.1 > 0.0 {
        text.push_str(&format!(
            " (and {:.0} s when the ledger's outcomes ran)",
            secs.1
        ));
    }
    text.push('\n');
    let survivors: Vec<&Mutant> = rows
        .filter(|(_, o)| matches!(o, Some(Outcome::Survived)))
        .map(|(m, _)| m)
        .collect();
    for m in &survivors {
        text.push_str(&format!("\nSURVIVED {}", m.diff()));
    }
    let unjudged: Vec<String> = chosen
        .iter()
        .zip(outcomes)
        .filter_map(|(m, o)| match o {
            Some(o) if !o.judged() => Some(format!("{} {}: {}\n", o.word(), m.id, o.detail())),
            _ => None,
        })
        .collect();
    text.extend(unjudged.iter().cloned());
    let path = run_dir.join("report.md");
    let every = every_outcome(chosen, outcomes);
    fs::write(&path, format!("{text}\n{every}"))
        .with_context(|| format!("writing {}", path.display()))?;
    print!("{text}");
    eprintln!("report: {}", path.display());
    let killed: usize = tallies.values().map(|t| t.killed + t.crashed).sum();
    let counted: usize = killed + survivors.len();
    println!(
        "mutants: {killed} of {counted} killed, {} survived, {} not judged",
        survivors.len(),
        unjudged.len()
    );
    if !unjudged.is_empty() {
        println!(
            "FAIL: {} mutant(s) not judged (above): a host error is the host's to fix; a mutant that cannot build or that breaks its judge goes in mutants/EQUIVALENT with why, or its operator is fixed",
            unjudged.len()
        );
    }
    Ok(if survivors.is_empty() && unjudged.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_TESTS_FAILED)
    })
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
