//! `cargo xtask fuzz`: the differential fuzzer on every kernel with one
//! seed. Each kernel's guest draws the same operations, checks each
//! against the model of its variant, and sends a shrunk reproducer when
//! the kernel and the model part; the series' kernels must also agree
//! with each other. Exit 0 when nothing diverged, 1 when something did
//! (a reproducer is written) or a clean kernel did not exercise the
//! allocation failures or racing rounds it was to, 2 when a VM could not
//! run, 3 on bad input.

use std::path::Path;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use crate::cli::FuzzArgs;
use crate::fuzz::campaign::{self, FuzzOptions, FuzzVerdict, Fuzzed};
use crate::fuzz::records::KernelFuzz;
use crate::fuzz::{self, FuzzParams};
use crate::hostdeps;
use crate::kernel::choice::Sides;
use crate::kernel::own_series::Suite;
use crate::project::{EXIT_INFRA, EXIT_TESTS_FAILED};

/// The guest's models are of this series' variants.
const FUZZ: Suite = Suite {
    tests: "fuzz holds each kernel to its model of this series' array-map mmap",
    instead: "use `cargo xtask run --kernel ... --expect` or `kselftest` for your own patch",
    claimed_images: true,
};

pub fn run(args: FuzzArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    let boot = args.vm.boot();
    let chosen = boot.choose(&source, Sides::OwnSeries(&FUZZ))?;
    hostdeps::ensure_fuzzer(&source)?;
    let replay = args.replay.as_deref().map(read_replay).transpose()?;
    let params = FuzzParams {
        seed: args.seed.unwrap_or_else(clock_seed),
        seconds: args.seconds,
        threads: args.threads.get(),
        race_seconds: args
            .race_seconds
            .unwrap_or_else(|| fuzz::default_race_seconds(args.seconds)),
        replay: replay.is_some(),
    };
    if args.race_seconds.is_some_and(|r| r > args.seconds) {
        bail!(
            "--race-seconds {} is more than --seconds {}: the races are part of the run's time",
            args.race_seconds.unwrap_or_default(),
            args.seconds
        );
    }
    if params.replay && params.threads > 1 {
        bail!("--replay runs one thread's operations; drop --threads");
    }
    let options = FuzzOptions {
        params: params.clone(),
        replay,
        vms: args.vms.count.get(),
    };
    let fuzzed = campaign::fuzz_kernels(&source, &chosen, boot, options)?;
    finish(&fuzzed, &params)
}

/// A reproducer the guest can run: every line an operation, or a race
/// reproducer's rounds.
fn read_replay(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--replay {}: reading it", path.display()))?;
    // A race reproducer: its rounds, with their threads.
    if map_fuzz::threads::script::Script::parse(&text)
        .map_err(|e| anyhow::anyhow!("--replay {}: {e}", path.display()))?
        .is_some()
    {
        return Ok(text);
    }
    let ops = map_fuzz::op::parse_ops(&text)
        .map_err(|e| anyhow::anyhow!("--replay {}: {e}", path.display()))?;
    if ops.is_empty() {
        bail!("--replay {}: no operation in it", path.display());
    }
    Ok(text)
}

fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_secs() ^ u64::from(d.subsec_nanos()))
}

fn finish(fuzzed: &Fuzzed, params: &FuzzParams) -> Result<ExitCode> {
    let (targets, ran, verdicts) = (&fuzzed.targets, &fuzzed.runs, &fuzzed.verdicts);
    let runs: Vec<(&str, &KernelFuzz)> = targets
        .iter()
        .zip(ran)
        .map(|(t, r)| (t.name.as_str(), &r.fuzz))
        .collect();
    println!("\n{:<18} {:>8} {:>8}  result", "kernel", "ops", "ops/s");
    for ((t, r), v) in targets.iter().zip(ran).zip(verdicts) {
        let rate = r
            .fuzz
            .summary
            .as_ref()
            .map_or("-".to_string(), |s| format!("{:.1}", s.ops_per_sec));
        let result = match v {
            FuzzVerdict::Clean => match r.fuzz.tried() {
                Some(tried) => format!("clean ({tried})"),
                None => "clean".to_string(),
            },
            FuzzVerdict::NotExercised(what) => {
                format!("NOT EXERCISED: clean with {what} (run longer: --seconds, --race-seconds)")
            }
            FuzzVerdict::Diverged(why, Some(p)) => {
                format!("DIVERGED: {why}\n{:>38}reproducer: {}", "", p.display())
            }
            FuzzVerdict::Diverged(why, None) => format!("DIVERGED: {why}"),
            FuzzVerdict::Infra(failed) => format!("VM FAILED: {failed}"),
            FuzzVerdict::FuzzerFailed(why) => format!("FUZZER FAILED: {why}"),
        };
        println!("{:<18} {:>8} {:>8}  {result}", t.name, r.fuzz.ops, rate);
    }
    let disagree = fuzz::digests_disagree(&runs);
    if let Some((ops, a, b)) = disagree {
        println!(
            "the series' kernels disagree: {a} and {b} saw different returns by operation {ops} (seed {})",
            params.seed
        );
    }
    println!(
        "seed {}: run it again with --seed {}; consoles and reproducers in {}",
        params.seed,
        params.seed,
        fuzzed.run_dir.display()
    );
    // One closing line in the form of vmtest's and kselftest's, a kernel
    // a result: what fresh-root's record and a CI log's reader look for.
    let clean = verdicts
        .iter()
        .filter(|v| matches!(v, FuzzVerdict::Clean))
        .count();
    let failed = verdicts.len() - clean + usize::from(disagree.is_some());
    println!(
        "fuzz: {clean} passed, {failed} failed (a kernel each{}, seed {})",
        if disagree.is_some() {
            ", and one the series' kernels disagreeing"
        } else {
            ""
        },
        params.seed
    );
    // Not exercised fails as a divergence does: the run proved less
    // than a pass says.
    let diverged = disagree.is_some()
        || verdicts
            .iter()
            .any(|v| matches!(v, FuzzVerdict::Diverged(..) | FuzzVerdict::NotExercised(_)));
    let infra = verdicts
        .iter()
        .any(|v| matches!(v, FuzzVerdict::Infra { .. } | FuzzVerdict::FuzzerFailed(_)));
    Ok(if diverged {
        ExitCode::from(EXIT_TESTS_FAILED)
    } else if infra {
        ExitCode::from(EXIT_INFRA)
    } else {
        ExitCode::SUCCESS
    })
}
