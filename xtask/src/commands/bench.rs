//! `cargo xtask bench`: the flags lowered into the bench's configuration,
//! the host tools ensured, the run (`bench::run`), and how it ended as an
//! exit code.

use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::bench::options::BenchOptions;
use crate::bench::outcome::BenchOutcome;
use crate::bench::run::Bench;
use crate::cli::BenchArgs;
use crate::hostdeps;
use crate::kernel::choice::Sides;
use crate::kernel::own_series::Suite;
use crate::project::{self, EXIT_INFRA, EXIT_TESTS_FAILED};

/// The bench's rows and targets are this series' kernels'.
const BENCH: Suite = Suite {
    tests: "bench measures this series' array-map mmap",
    instead: "use `cargo xtask run --kernel ... --expect` or `kselftest` for your own patch",
    claimed_images: false,
};

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    let repeat = args.repeat.unwrap_or(if args.quick { 1 } else { 3 });
    if repeat == 0 {
        bail!("--repeat 0: at least one boot per kernel is needed");
    }
    let source = args.source.config()?;
    let boot = args.vm.boot();
    let chosen = boot.choose(&source, Sides::OwnSeries(&BENCH))?;
    let options = BenchOptions {
        quick: args.quick,
        repeat,
        out: args
            .out
            .unwrap_or_else(|| project::root().join("target/bench")),
        clock: args.clock,
        record: args.record,
        drop_targets: args.drop_target,
        gate: args.gate,
        gate_targets: args.gate_targets,
    };
    let bench = Bench::new(source, chosen, boot, options)?;
    hostdeps::ensure_boot(bench.source())?;
    Ok(exit_code(bench.run()?))
}

fn exit_code(outcome: BenchOutcome) -> ExitCode {
    match outcome {
        BenchOutcome::Passed => ExitCode::SUCCESS,
        BenchOutcome::GateFailed | BenchOutcome::BenchFailed => ExitCode::from(EXIT_TESTS_FAILED),
        BenchOutcome::VmFailed => ExitCode::from(EXIT_INFRA),
    }
}
