//! `cargo xtask mutants`: each mutant of the series (`mutants/`) built as
//! the kernel variant `mutant` (one tree, rebuilt incrementally) and run
//! through the plan with `--fail-fast`, held to the expectations of the
//! variant its patch belongs to: 0001's on `patched`, 0002's on
//! `prefault`. Killed, crashed (counted as killed), survived, or did not
//! build (not counted); the table per patch, the kill rate and every
//! survivor's diff at the end.

use std::collections::HashMap;
use std::fs;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::vmtest;
use crate::cli::{MutantJudge, MutantsArgs, VmArgs, VmtestArgs};
use crate::hostdeps;
use crate::kernel::series::Series;
use crate::kernel::{self, KernelConfig, SourceConfig};
use crate::mutants::ledger::{self, Ledger};
use crate::mutants::lists::{self, CI_SAMPLE, EQUIVALENT};
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
    let equivalent: HashMap<String, String> = lists::load(EQUIVALENT)?.into_iter().collect();
    let chosen = select(&all, &args, &series)?;
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
    let mut ledger = Ledger::open(&source.cache_dir)?;
    let started = Instant::now();
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
        let key = ledger_key(&texts[..m.patch], &mutated, &tests);
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
                let o = run_one(&args, &source, &series, m, &mutated, &run_dir)?;
                let secs = t.elapsed().as_secs_f64();
                eprintln!(
                    "[{}/{}] {}: {} in {secs:.0} s: {}",
                    n + 1,
                    chosen.len(),
                    m.id,
                    o.word(),
                    o.detail()
                );
                ledger.put(key, &m.id, o.clone(), secs)?;
                o
            }
        };
        outcomes.push(Some(outcome));
    }
    let secs = (started.elapsed().as_secs_f64(), remembered);
    report(&chosen, &outcomes, &run_dir, secs)
}

/// What besides the mutated series keys an outcome in the ledger: the
/// tests, the guest image and the kernels' configuration (a change to any
/// of them can change an outcome), and for the fuzzer its host side, its
/// seed and budget.
fn tests_key(args: &MutantsArgs, source: &SourceConfig) -> Result<String> {
    let tests = ledger::tests_digest(&project::root(), &["selftests", "vm-images", "kconfig"])?;
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

/// The mutants asked for: `--sample`, `--patch`, `--filter`.
fn select(all: &[Mutant], args: &MutantsArgs, series: &Series) -> Result<Vec<Mutant>> {
    if args.sample {
        let sample = lists::load(CI_SAMPLE)?;
        return sample
            .iter()
            .map(|(id, _)| {
                all.iter().find(|m| &m.id == id).cloned().with_context(|| {
                    format!("mutants/{CI_SAMPLE}: no mutant {id} (`cargo xtask mutants --list` lists them)")
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
fn run_one(
    args: &MutantsArgs,
    source: &SourceConfig,
    series: &Series,
    m: &Mutant,
    mutated: &str,
    run_dir: &std::path::Path,
) -> Result<Outcome> {
    let path = run_dir.join(format!("{}.patch", m.id));
    fs::write(&path, mutated).with_context(|| format!("writing {}", path.display()))?;
    let mutant_series = series.with_replaced(m.patch, &path, MUTANT_VARIANT)?;
    let built = match kernel::build_series(source, mutant_series, KernelConfig::Lean) {
        Ok(k) => k,
        Err(e) => {
            let error = format!("{e:#}");
            return Ok(Outcome::Unbuildable {
                error: error.lines().next().unwrap_or("").to_string(),
            });
        }
    };
    let claim = claim_for(series, m.patch)?;
    if args.judge == MutantJudge::Fuzz {
        return fuzz_mutant(args, source, &built.bzimage, &claim);
    }
    let plan = vmtest::run_plan(&VmtestArgs {
        source: args.source.clone(),
        vm: VmArgs {
            kernels: vec![built.bzimage.to_string_lossy().into_owned()],
            debug: false,
            kernel_config: KernelConfig::Lean,
            config: Vec::new(),
            accel: args.accel,
            claim,
            timeout: None,
            bundle: None,
            machine: Default::default(),
            inject: None,
        },
        fail_fast: true,
        max_failures: None,
        share: None,
        stall: None,
        filters: Vec::new(),
    })?;
    let results: Vec<_> = plan.runs.iter().flat_map(|r| r.results.clone()).collect();
    let failure = plan.vm_failures.first().map(|(_, why)| why.as_str());
    Ok(outcome::judge(&results, failure))
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
        debug: false,
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
        // The mutant's kernel did not boot: as the plan counts it.
        super::fuzz::Verdict::Infra(why) => Outcome::Crashed {
            detail: why.clone(),
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
    let unbuilt = chosen.iter().zip(outcomes).filter_map(|(m, o)| match o {
        Some(Outcome::Unbuildable { error }) => Some(format!("did not build: {}: {error}\n", m.id)),
        _ => None,
    });
    text.extend(unbuilt);
    let path = run_dir.join("report.md");
    let every = every_outcome(chosen, outcomes);
    fs::write(&path, format!("{text}\n{every}"))
        .with_context(|| format!("writing {}", path.display()))?;
    print!("{text}");
    eprintln!("report: {}", path.display());
    let killed: usize = tallies.values().map(|t| t.killed + t.crashed).sum();
    let counted: usize = killed + survivors.len();
    println!(
        "mutants: {killed} of {counted} killed, {} survived",
        survivors.len()
    );
    Ok(if survivors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_TESTS_FAILED)
    })
}
