//! The test plan as a suite: the selftests run on each kernel of a run,
//! each kernel held to its side of the plan, with the console check and
//! the allowed skips; per-kernel KTAP as it goes, and typed results for
//! the caller (`vmtest` prints them, `mutants` judges a mutant by them).
//! `selection` chooses the tests, `claims` the side of the plan each
//! kernel is held to, `inject` places a harness self-test's failure,
//! `results` turns a guest's report into a kernel's results.

mod claims;
mod inject;
mod results;
mod selection;

use std::fs;

use anyhow::Result;
use guest_common::protocol::Program;

use crate::kernel::SourceConfig;
use crate::report::skips::{self, AllowedSkip};
use crate::report::{self, Counts, KernelRun};
use crate::vm::process::VmOutcome;
use crate::vm::qemu::GuestCommand;
use crate::vm::session::{self, Prepared, Session, SessionOptions, DEBUG_SLOWDOWN};
use crate::vm::share::Sharing;
use crate::vm::targets::{BootConfig, Target};

use inject::GuestInject;

/// How the plan runs, beside which kernels and how they boot.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Test name filters (substrings); none: the whole plan.
    pub filters: Vec<String>,
    /// A harness self-test's failure (`--inject`).
    pub inject: Option<String>,
    /// Stop after this many failing tests over all kernels; the rest are
    /// reported as not run.
    pub stop_after: Option<usize>,
    /// Where the guest reads its programs from.
    pub sharing: Sharing,
    /// How long the results channel may stay still (None: the default).
    pub results_stall: Option<u64>,
}

/// What a plan run gave: each kernel's results, and the kernels whose
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

/// A plan run, checked: the filters, the kernels' claims, the
/// injection's form and the skip allowlist, so that bad input fails
/// before anything is installed or built.
pub struct Plan<'a> {
    source: &'a SourceConfig,
    boot: &'a BootConfig,
    options: &'a PlanOptions,
    inject: GuestInject,
    allowed_skips: Vec<AllowedSkip>,
}

impl<'a> Plan<'a> {
    pub fn new(
        source: &'a SourceConfig,
        boot: &'a BootConfig,
        options: &'a PlanOptions,
    ) -> Result<Plan<'a>> {
        selection::check_filters(&options.filters)?;
        claims::check(source, boot)?;
        Ok(Plan {
            source,
            boot,
            options,
            inject: inject::split(options.inject.as_deref())?,
            allowed_skips: skips::load()?,
        })
    }

    /// Boots each kernel and runs the plan on it; reports per kernel as
    /// it goes (stderr, KTAP), the JUnit file and closing line left to
    /// the caller. The host tools to boot (and share) must be there.
    pub fn run(&self) -> Result<PlanRun> {
        run_plan(self)
    }
}

fn run_plan(plan: &Plan) -> Result<PlanRun> {
    let (source, boot, options) = (plan.source, plan.boot, plan.options);
    let (inject, allowed_skips) = (&plan.inject, &plan.allowed_skips);
    let Prepared {
        mut targets,
        mut session,
    } = session::prepare(
        source,
        boot,
        "vmtest",
        SessionOptions {
            sharing: options.sharing,
            results_stall: options.results_stall,
            ..SessionOptions::default()
        },
    )?;
    claims::hold(&mut targets, source, boot.claim.as_deref())?;
    let planned = selection::planned_tests(&options.filters)?;
    inject.check_against(&planned)?;
    let mut runs = Vec::new();
    let mut vm_failures = Vec::new();
    for target in &targets {
        let so_far = Counts::total(&runs);
        let failures = so_far.failed + so_far.crashed;
        let budget = match options.stop_after {
            Some(max) if failures >= max => {
                runs.push(results::not_booted(&session, target, &planned, max)?);
                continue;
            }
            max => max.map(|m| m - failures),
        };
        let guest = selftests_guest(options, target, inject, budget);
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
                    target.name, options.filters
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
                runs.push(results::kernel_run(&session, target, run, allowed_skips)?);
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

/// The run's `junit.xml`, named after `suite`, in the run's directory;
/// the counts over every kernel.
pub fn write_junit(run: &PlanRun, suite: &str) -> Result<Counts> {
    let junit = run.session.run_dir().join("junit.xml");
    fs::write(&junit, report::junit(suite, &run.runs))?;
    Ok(Counts::total(&run.runs))
}

/// The selftests' command line for one kernel.
fn selftests_guest(
    options: &PlanOptions,
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
    argv.extend(options.filters.iter().cloned());
    target.guest(Program::Selftests, argv, inject.init)
}
