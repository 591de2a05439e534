//! `cargo xtask vmtest`: boot each kernel under QEMU, run the selftests in
//! the guest, and report per test, per kernel and overall (the suite is
//! `plan`). A guest that dies half way still reports what it got through.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::VmtestArgs;
use crate::hostdeps;
use crate::kernel::choice::Sides;
use crate::plan::{self, Plan, PlanOptions};
use crate::project::{EXIT_INFRA, EXIT_TESTS_FAILED};
use crate::vm::share::Sharing;

pub fn run(args: VmtestArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    let boot = args.vm.boot();
    let options = PlanOptions {
        filters: args.filters.clone(),
        inject: args.vm.inject.clone(),
        stop_after: args.stop_after(),
        sharing: args.share.map_or(Sharing::Hermetic, Sharing::Host),
        results_stall: args.stall,
    };
    let chosen = boot.choose(&source, Sides::Plan)?;
    let plan = Plan::new(&source, chosen, &boot, &options)?;
    hostdeps::ensure_boot(&source)?;
    if let Some(choice) = args.share {
        hostdeps::ensure_share(choice)?;
    }
    let run = plan.run()?;
    let total = plan::write_junit(&run, "bpflab vmtest")?;
    eprintln!(
        "reports: {} (KTAP per kernel, junit.xml, console logs)",
        run.session.run_dir().display()
    );
    println!("{}", total.closing_line());
    if !run.vm_failures.is_empty() {
        let names: Vec<&str> = run.vm_failures.iter().map(|f| f.kernel.as_str()).collect();
        eprintln!("VM failure on: {}", names.join(", "));
        return Ok(ExitCode::from(EXIT_INFRA));
    }
    Ok(if total.bad() {
        ExitCode::from(EXIT_TESTS_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}
