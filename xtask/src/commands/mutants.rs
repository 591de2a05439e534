//! `cargo xtask mutants`: the series' mutants, listed (`--list`) or each
//! built and judged (the suite is `mutants::campaign`); exit 1 when a
//! counted mutant survives, is not judged, or a sample line is not held.

use std::collections::HashMap;
use std::process::ExitCode;

use anyhow::Result;

use crate::cli::MutantsArgs;
use crate::hostdeps;
use crate::kernel::choice::{self, Sides};
use crate::kernel::own_series::Suite;
use crate::mutants::campaign::{self, Judged};
use crate::mutants::select::{self, Selection};
use crate::mutants::Mutant;
use crate::mutants::{JudgeOptions, MutantJudge};
use crate::project::EXIT_TESTS_FAILED;

/// A mutant is held to the plan's side of its patch's variant, which
/// only this series' variants have.
const MUTANTS: Suite = Suite {
    tests: "mutants holds this series' array-map mmap patches to the plan",
    instead:
        "use `cargo xtask vmtest --kernel NAME --claim KERNEL` or `kselftest` for your own patch",
    claimed_images: false,
};

pub fn run(args: MutantsArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    // No kernel is named: the series is what is chosen.
    let kernels = choice::choose(&source, &[], None, Sides::OwnSeries(&MUTANTS))?;
    let selection = Selection {
        patch: args.patch.as_deref(),
        filter: &args.filter,
        sample: args.sample,
        sample_file: args.sample_file.as_deref(),
    };
    let chosen = select::mutants(&source, kernels.series, &selection)?;
    if args.list {
        list(&chosen.mutants, &chosen.equivalent);
        return Ok(ExitCode::SUCCESS);
    }
    hostdeps::ensure_kernel_build(&source)?;
    hostdeps::ensure_boot(&source)?;
    if args.judge == MutantJudge::Fuzz {
        hostdeps::ensure_fuzzer(&source)?;
    }
    let options = JudgeOptions {
        judge: args.judge,
        debug: args.debug.enabled,
        accel: args.accel.choice,
        fresh: args.fresh,
        seed: args.seed,
        fuzz_seconds: args.fuzz_seconds,
        minutes: args.minutes,
    };
    let judged = campaign::run(&source, &chosen, &options)?;
    print_judged(&judged);
    Ok(if judged.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_TESTS_FAILED)
    })
}

fn list(chosen: &[Mutant], equivalent: &HashMap<String, String>) {
    for m in chosen {
        let eq = equivalent
            .get(&m.id)
            .map(|why| format!("  [equivalent: {why}]"))
            .unwrap_or_default();
        println!(
            "{:<20} {}  {}:{}  {}{eq}",
            m.id,
            m.digest,
            m.file,
            m.new_line,
            m.brief()
        );
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

/// The report's text, where it is, the closing line, and why the run
/// fails: mutants not judged, sample lines not held.
fn print_judged(judged: &Judged) {
    let summary = &judged.summary;
    print!("{}", summary.text);
    eprintln!("report: {}", summary.path.display());
    println!("{}", summary.closing_line());
    if summary.unjudged > 0 {
        println!(
            "FAIL: {} mutant(s) not judged (above): a host error is the host's to fix; a mutant that cannot build or that breaks its judge goes in mutants/EQUIVALENT with why, or its operator is fixed",
            summary.unjudged
        );
    }
    for miss in &judged.sample_misses {
        println!("FAIL: {miss}");
    }
}
