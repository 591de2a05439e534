//! `cargo xtask vmtest`: boot each kernel under QEMU, run the selftests in
//! the guest, and report per test, per kernel and overall.

use std::fs;
use std::process::ExitCode;

use anyhow::Result;

use crate::cli::VmtestArgs;
use crate::project::{EXIT_INFRA, EXIT_TESTS_FAILED};
use crate::report::protocol::Status;
use crate::report::{self, Counts, KernelRun};
use crate::vm::process::VmOutcome;
use crate::vm::session::{self, GuestRun, Prepared, Session, Target};

pub fn run(args: VmtestArgs) -> Result<ExitCode> {
    session::check_filters(&args.filters)?;
    let Prepared {
        targets,
        mut session,
    } = session::prepare(&args.source, &args.vm, "vmtest")?;
    session::check_filters_match(&args.filters)?;
    let mut runs = Vec::new();
    let mut infra_errors = Vec::new();
    for target in &targets {
        let guest = target.guest("selftests", args.filters.clone(), args.vm.inject.clone());
        match session.run_guest(target, guest) {
            Ok(run) if run.report.results.is_empty() => {
                eprintln!(
                    "== {}: no test matches the filters {:?} (`cargo run -p selftests -- --list` lists them)",
                    target.name, args.filters
                );
                infra_errors.push(target.name.clone());
            }
            Ok(run) => runs.push(kernel_run(&session, target, run)?),
            Err(err) => {
                eprintln!("== {}: the VM could not do its job: {err:#}", target.name);
                infra_errors.push(target.name.clone());
            }
        }
    }
    finish(&session, &runs, &infra_errors)
}

/// One kernel's results, the console check included: summarised on
/// stderr and written as KTAP into the run's directory.
fn kernel_run(session: &Session, target: &Target, run: GuestRun) -> Result<KernelRun> {
    let mut results = run.report.results.clone();
    results.push(session::console_check(&run.outcome));
    let kr = KernelRun {
        kernel: target.name.clone(),
        accel: run.accel.name().into(),
        results,
        seconds: run.outcome.elapsed.as_secs_f64(),
    };
    print_summary(&kr, &run.outcome);
    fs::write(
        session.run_dir.join(format!("{}.ktap", target.name)),
        report::ktap(&kr),
    )?;
    Ok(kr)
}

/// The JUnit file, the closing line, and the exit code.
fn finish(session: &Session, runs: &[KernelRun], infra_errors: &[String]) -> Result<ExitCode> {
    let junit = session.run_dir.join("junit.xml");
    fs::write(&junit, report::junit(runs))?;
    eprintln!(
        "reports: {} (KTAP per kernel, junit.xml, console logs)",
        session.run_dir.display()
    );
    let total = Counts::total(runs);
    println!("{}", total.closing_line());
    if !infra_errors.is_empty() {
        eprintln!("VM failure on: {}", infra_errors.join(", "));
        return Ok(ExitCode::from(EXIT_INFRA));
    }
    Ok(if total.failed > 0 {
        ExitCode::from(EXIT_TESTS_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_summary(run: &KernelRun, outcome: &VmOutcome) {
    let c = Counts::of(&run.results);
    let boot = outcome
        .boot_secs
        .map(|s| format!(", boot to first test {s:.1} s"))
        .unwrap_or_default();
    eprintln!(
        "== {} ({}): {} in {:.1} s{boot}",
        run.kernel,
        run.accel,
        c.closing_line(),
        run.seconds
    );
    for r in run.results.iter().filter(|r| r.status == Status::Fail) {
        eprintln!("   FAIL {}: {}", r.name, r.message);
    }
}
