//! `cargo xtask vmtest`: boot each kernel under QEMU, run the selftests in
//! the guest, and report per test, per kernel and overall. A guest that
//! dies half way still reports what it got through.

use std::fs;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use guest_common::protocol::{Inject, Program, TestInject};

use crate::cli::VmtestArgs;
use crate::hostdeps;
use crate::project::{EXIT_INFRA, EXIT_TESTS_FAILED};
use crate::report::protocol::{Status, TestResult};
use crate::report::skips::{self, AllowedSkip};
use crate::report::{self, Counts, KernelRun};
use crate::vm::judge;
use crate::vm::process::VmOutcome;
use crate::vm::qemu::GuestCommand;
use crate::vm::selection;
use crate::vm::session::{self, GuestRun, Prepared, Session, DEBUG_SLOWDOWN};
use crate::vm::share::Sharing;
use crate::vm::symbolize;
use crate::vm::targets::{self, Target};

pub fn run(args: VmtestArgs) -> Result<ExitCode> {
    let plan = run_plan(&args)?;
    finish(&plan.session, &plan.runs, &plan.vm_failures)
}

/// What a vmtest run gave: each kernel's results, and the kernels whose
/// VM could not do its job, with why.
pub struct PlanRun {
    pub session: Session,
    pub runs: Vec<KernelRun>,
    pub vm_failures: Vec<VmFailure>,
}

/// A kernel whose VM could not do its job: why, and what the guest got
/// to, which tells a kernel's failure from the host's (mutants).
pub struct VmFailure {
    pub kernel: String,
    pub why: String,
    /// The guest's /init started.
    pub reached_init: bool,
    /// The kernel panicked.
    pub panicked: bool,
}

/// Boots each kernel and runs the plan on it; reports per kernel as it
/// goes (stderr, KTAP), the JUnit file and closing line left to the caller.
pub fn run_plan(args: &VmtestArgs) -> Result<PlanRun> {
    selection::check_filters(&args.filters)?;
    let source = args.source.config()?;
    let boot = args.vm.boot();
    targets::check_plan_kernels(&source, &boot)?;
    let inject = split_inject(args.vm.inject.as_deref())?;
    let allowed_skips = skips::load()?;
    hostdeps::ensure_boot(&source)?;
    if let Some(choice) = args.share {
        hostdeps::ensure_share(choice)?;
    }
    let Prepared {
        targets,
        mut session,
    } = session::prepare(&source, &boot, "vmtest")?;
    session.sharing = args.share.map_or(Sharing::Hermetic, Sharing::Host);
    session.results_stall = args.stall;
    let plan = selection::planned_tests(&args.filters)?;
    inject.check_against(&plan)?;
    let mut runs = Vec::new();
    let mut vm_failures = Vec::new();
    for target in &targets {
        let so_far = Counts::total(&runs);
        let failures = so_far.failed + so_far.crashed;
        let budget = match args.stop_after() {
            Some(max) if failures >= max => {
                runs.push(not_booted(&session, target, &plan, max)?);
                continue;
            }
            max => max.map(|m| m - failures),
        };
        let guest = selftests_guest(args, target, &inject, budget);
        let failure = |why: String, outcome: Option<&VmOutcome>| {
            eprintln!("== {}: the VM could not do its job: {why}", target.name);
            VmFailure {
                kernel: target.name.clone(),
                why,
                reached_init: outcome.is_some_and(|o| o.boot_secs.is_some()),
                panicked: outcome.is_some_and(|o| o.panic.is_some()),
            }
        };
        match session.run_guest(target, guest) {
            Ok(run) if run.report.results.is_empty() => {
                eprintln!(
                    "== {}: no test matches the filters {:?} (`cargo run -p selftests -- --list` lists them)",
                    target.name, args.filters
                );
                vm_failures.push(VmFailure {
                    kernel: target.name.clone(),
                    why: "no test ran".into(),
                    reached_init: true,
                    panicked: false,
                });
            }
            Ok(run) => {
                if let Some(why) = &run.vm_failure {
                    vm_failures.push(failure(why.clone(), Some(&run.outcome)));
                }
                runs.push(kernel_run(&session, target, run, &allowed_skips)?);
            }
            Err(err) => vm_failures.push(failure(format!("{err:#}"), None)),
        }
    }
    Ok(PlanRun {
        session,
        runs,
        vm_failures,
    })
}

/// A kernel not booted because earlier kernels already failed enough:
/// every planned test, and the console check, as not run.
fn not_booted(
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
        .chain([judge::CONSOLE_CHECK])
        .map(|name| TestResult {
            name: name.to_string(),
            status: Status::NotRun,
            millis: 0,
            message: why.clone(),
        })
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

/// Where an `--inject` goes: `panic`, `warn`, `hang` and `flood` to /init
/// (around the program), `KIND:TEST` to the selftests runner (in the
/// middle of the plan).
#[derive(Debug, Default, PartialEq, Eq)]
struct GuestInject {
    init: Option<Inject>,
    runner: Option<(TestInject, String)>,
}

impl GuestInject {
    /// The test a runner injection names must be one the run plans.
    fn check_against(&self, plan: &[String]) -> Result<()> {
        match &self.runner {
            Some((kind, test)) if !plan.contains(test) => bail!(
                "--inject {}:{test}: no such test in this run's plan",
                kind.name()
            ),
            _ => Ok(()),
        }
    }
}

fn split_inject(inject: Option<&str>) -> Result<GuestInject> {
    Ok(match inject {
        None => GuestInject::default(),
        Some(v) if v.contains(':') => GuestInject {
            init: None,
            runner: Some(TestInject::parse_spec(v).map_err(anyhow::Error::msg)?),
        },
        Some(v) => GuestInject {
            init: Some(Inject::parse(v).ok_or_else(|| {
                anyhow::anyhow!(
                    "--inject {v}: want panic, warn, hang, flood or crash|freeze|stall:TEST"
                )
            })?),
            runner: None,
        },
    })
}

/// The selftests' command line for one kernel.
fn selftests_guest(
    args: &VmtestArgs,
    target: &Target,
    inject: &GuestInject,
    budget: Option<usize>,
) -> GuestCommand {
    let mut argv = Vec::new();
    if let Some(max) = budget {
        argv.push(format!("--max-failures={max}"));
    }
    if target.debug {
        argv.push(format!("--timeout-scale={DEBUG_SLOWDOWN}"));
    }
    if let Some((kind, test)) = &inject.runner {
        argv.push(format!("--inject={}:{test}", kind.name()));
    }
    argv.extend(args.filters.iter().cloned());
    target.guest(Program::Selftests, argv, inject.init)
}

/// One kernel's results, the console check included, skips held to the
/// allowlist: summarised on stderr and written as KTAP into the run's
/// directory.
fn kernel_run(
    session: &Session,
    target: &Target,
    run: GuestRun,
    allowed_skips: &[AllowedSkip],
) -> Result<KernelRun> {
    let mut results = run.report.results.clone();
    skips::enforce(&mut results, allowed_skips);
    let mut console = judge::console_check(&run.outcome, &results);
    symbolize::onto_console_check(&mut console, &run.outcome, target.vmlinux.as_deref());
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
    let path = session.run_dir.join(format!("{}.ktap", run.kernel));
    fs::write(&path, report::ktap(run)).with_context(|| format!("writing {}", path.display()))
}

/// The JUnit file, the closing line, and the exit code.
fn finish(session: &Session, runs: &[KernelRun], vm_failures: &[VmFailure]) -> Result<ExitCode> {
    let junit = session.run_dir.join("junit.xml");
    fs::write(&junit, report::junit("bpflab vmtest", runs))?;
    eprintln!(
        "reports: {} (KTAP per kernel, junit.xml, console logs)",
        session.run_dir.display()
    );
    let total = Counts::total(runs);
    println!("{}", total.closing_line());
    if !vm_failures.is_empty() {
        let names: Vec<&str> = vm_failures.iter().map(|f| f.kernel.as_str()).collect();
        eprintln!("VM failure on: {}", names.join(", "));
        return Ok(ExitCode::from(EXIT_INFRA));
    }
    Ok(if total.bad() {
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
    for r in &run.results {
        let word = match r.status {
            Status::Fail => "FAIL",
            Status::Crashed => "CRASH",
            _ => continue,
        };
        // A message's " | " parts are its lines (a symbolized splat has
        // dozens): one per line, under the first.
        let mut parts = r.message.split(" | ");
        eprintln!("   {word} {}: {}", r.name, parts.next().unwrap_or_default());
        for part in parts {
            eprintln!("        {part}");
        }
    }
    if c.not_run > 0 {
        eprintln!("   {} test(s) not run", c.not_run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injections_go_to_init_or_to_the_runner() {
        assert_eq!(split_inject(None).unwrap(), GuestInject::default());
        assert_eq!(
            split_inject(Some("panic")).unwrap().init,
            Some(Inject::Panic)
        );
        let mid = split_inject(Some("crash:t11_split_middle_page")).unwrap();
        assert_eq!(
            mid.runner,
            Some((TestInject::Crash, "t11_split_middle_page".into()))
        );
        assert_eq!(mid.init, None);
        assert!(mid.check_against(&["t11_split_middle_page".into()]).is_ok());
        let err = mid
            .check_against(&["t01_a".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("no such test"), "{err}");
        assert!(split_inject(Some("boom")).is_err());
        assert!(split_inject(Some("boom:t01_a")).is_err());
    }
}
