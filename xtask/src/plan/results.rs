//! One kernel's results: the guest's report with the skips held to the
//! allowlist and the console check added (symbolized), or every planned
//! test as not run when the kernel was not booted; summarised on stderr
//! and written as `<kernel>.ktap` into the run's directory.

use std::fs;

use anyhow::{Context, Result};

use crate::report::protocol::{Status, TestResult};
use crate::report::skips::{self, AllowedSkip};
use crate::report::{self, Counts, KernelRun};
use crate::vm::assess;
use crate::vm::process::VmOutcome;
use crate::vm::session::{GuestRun, Session};
use crate::vm::symbolize;
use crate::vm::targets::Target;

/// A kernel not booted because earlier kernels already failed enough:
/// every planned test, and the console check, as not run.
pub(super) fn not_booted(
    session: &Session,
    target: &Target,
    plan: &[String],
    max: usize,
) -> Result<KernelRun> {
    let why =
        format!("not run: {max} failure(s) on earlier kernels (--fail-fast / --max-failures)");
    let results = plan
        .iter()
        .map(String::as_str)
        .chain([assess::CONSOLE_CHECK])
        .map(|name| TestResult::new(name, Status::NotRun, 0, why.clone()))
        .collect();
    let kr = KernelRun {
        kernel: target.name.clone(),
        accel: "not booted".into(),
        results,
        seconds: 0.0,
    };
    eprintln!("== {}: not booted: {max} failure(s) already", target.name);
    write_ktap(session, &kr)?;
    Ok(kr)
}

/// One kernel's results, the console check included, skips held to the
/// allowlist.
pub(super) fn kernel_run(
    session: &Session,
    target: &Target,
    run: GuestRun,
    allowed_skips: &[AllowedSkip],
) -> Result<KernelRun> {
    let mut results = run.report.results.clone();
    skips::enforce(&mut results, allowed_skips);
    let mut console = assess::console_check(&run.outcome, &results);
    symbolize::onto_console_check(&mut console, &run.outcome, target.vmlinux());
    results.push(console);
    let kr = KernelRun {
        kernel: target.name.clone(),
        accel: run.accel.name().into(),
        results,
        seconds: run.outcome.elapsed.as_secs_f64(),
    };
    print_summary(&kr, &run.outcome);
    write_ktap(session, &kr)?;
    Ok(kr)
}

/// `<kernel>.ktap` in the run's directory.
fn write_ktap(session: &Session, run: &KernelRun) -> Result<()> {
    let path = session.run_dir().join(format!("{}.ktap", run.kernel));
    fs::write(&path, report::ktap(run)).with_context(|| format!("writing {}", path.display()))
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
    for r in &run.results {
        let word = match r.status {
            Status::Fail => "FAIL",
            Status::Crashed => "CRASH",
            _ => continue,
        };
        // The detail (a symbolized splat has dozens of lines) under the
        // message, a line each.
        eprintln!("   {word} {}: {}", r.name, r.message);
        for line in &r.detail {
            eprintln!("        {line}");
        }
    }
    if c.not_run > 0 {
        eprintln!("   {} test(s) not run", c.not_run);
    }
}
