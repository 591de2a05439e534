//! `cargo xtask kselftest`: the BPF tree's own test_progs on each kernel
//! (the suite is `kselftest::campaign`). A test that fails only on a
//! variant of the series is a regression (exit 1).

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::KselftestArgs;
use crate::hostdeps;
use crate::kernel::choice::Sides;
use crate::kselftest::campaign::{self, SuiteOptions};
use crate::kselftest::selection::TestChoice;
use crate::kselftest::verdict;
use crate::project::{EXIT_INFRA, EXIT_TESTS_FAILED};

pub fn run(args: KselftestArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    let llvm = args.llvm.choose()?;
    let why = match args.llvm.version {
        Some(_) => "--llvm",
        None => "the newest installed, 18 or later, else 19; --llvm N to choose",
    };
    crate::status!("kselftest", "LLVM {} ({why})", llvm.0);
    // One check, so one error names everything missing.
    let mut deps = hostdeps::kernel_build(&source);
    deps.extend(hostdeps::kselftest(llvm.0));
    if !args.build_only {
        deps.extend_from_slice(hostdeps::BOOT);
        deps.extend_from_slice(hostdeps::KSELFTEST_RUN);
    }
    hostdeps::ensure(&deps).context("checking the host tools for the BPF selftests")?;
    if !args.build_only {
        hostdeps::ensure_share(args.share.choice)?;
    }
    let options = SuiteOptions {
        choice: TestChoice {
            tests: args.tests.clone(),
            all: args.all,
        },
        new_on: args.new_on.clone(),
        runners: args.runners.clone(),
        parallel: args.parallel,
        vms: args.vms.count,
        build_only: args.build_only,
        share: args.share.choice,
        stall: args.stall,
        llvm,
    };
    let boot = args.vm.boot();
    let chosen = boot.choose(&source, Sides::Own)?;
    let Some(ran) = campaign::run(&source, &chosen, &boot, &options)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let verdict = verdict::conclude(&ran)?;
    eprint!("\n{}", verdict.text);
    eprintln!(
        "reports: {} (table.txt, KTAP per kernel, junit.xml, test_progs output, console logs)",
        ran.run_dir.display()
    );
    println!("{}", verdict.counts.closing_line());
    if !ran.infra.is_empty() {
        let names: Vec<&str> = ran.infra.iter().map(|f| f.name.as_str()).collect();
        eprintln!("VM failure on: {}", names.join(", "));
        return Ok(ExitCode::from(EXIT_INFRA));
    }
    Ok(if verdict.failed {
        ExitCode::from(EXIT_TESTS_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}
