//! The test plan as a suite: the selftests run on each kernel of a run,
//! each kernel held to its side of the plan, with the console check and
//! the allowed skips; per-kernel KTAP as it goes, and typed results for
//! the caller (`vmtest` prints them, `mutants` judges a mutant by them).
//! `selection` chooses the tests (`kernel::choice` chose the kernels
//! and the side of the plan each plays), `inject` places a harness
//! self-test's failure, `results` turns a guest's report into a kernel's
//! results.

mod inject;
mod results;
mod selection;

use std::fs;

use anyhow::Result;
use guest_common::protocol::Program;

use crate::kernel::choice::Chosen;
use crate::kernel::SourceConfig;
use crate::report::skips::{self, AllowedSkip};
use crate::report::{self, Counts, KernelRun};
use crate::vm::failed::{KernelSign, VmFailed};
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

/// A kernel whose run gave no verdict on the plan, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmFailure {
    pub kernel: String,
    pub why: NoVerdict,
}

/// Why a kernel's run gave no verdict on the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoVerdict {
    /// Its VM could not do its job.
    Vm(VmFailed),
    /// It did, and no test matches the filters.
    NoTest,
}

impl NoVerdict {
    /// What its kernel said of itself, which tells a kernel's failure
    /// from the host's (mutants).
    pub fn sign(&self) -> KernelSign {
        match self {
            NoVerdict::Vm(f) => f.sign.clone(),
            NoVerdict::NoTest => KernelSign::Nothing,
        }
    }

    /// Why, on one line.
    pub fn headline(&self) -> String {
        match self {
            NoVerdict::Vm(f) => format!("the VM could not do its job: {}", f.headline()),
            NoVerdict::NoTest => NO_TEST.to_string(),
        }
    }
}

const NO_TEST: &str =
    "no test ran: none matches the filters (`cargo run -p selftests -- --list` lists them)";

/// Why, with the VM's console lines.
impl std::fmt::Display for NoVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoVerdict::Vm(failed) => write!(f, "the VM could not do its job: {failed}"),
            NoVerdict::NoTest => f.write_str(NO_TEST),
        }
    }
}

/// A plan run, checked: the filters, the kernels' claims, the
/// injection's form and the skip allowlist, so that bad input fails
/// before anything is installed or built.
pub struct Plan<'a> {
    source: &'a SourceConfig,
    chosen: Chosen,
    boot: &'a BootConfig,
    options: &'a PlanOptions,
    inject: GuestInject,
    allowed_skips: Vec<AllowedSkip>,
}

impl<'a> Plan<'a> {
    /// The plan on `chosen`, its kernels chosen with `Sides::Plan`.
    pub fn new(
        source: &'a SourceConfig,
        chosen: Chosen,
        boot: &'a BootConfig,
        options: &'a PlanOptions,
    ) -> Result<Plan<'a>> {
        selection::check_filters(&options.filters)?;
        Ok(Plan {
            source,
            chosen,
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
        targets,
        mut session,
    } = session::prepare(
        source,
        &plan.chosen,
        boot,
        "vmtest",
        SessionOptions {
            sharing: options.sharing,
            results_stall: options.results_stall,
            ..SessionOptions::default()
        },
    )?;
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
        let run = session.run_guest(target, guest);
        let failure = match &run {
            Ok(run) => run_failure(run.vm_failure.as_ref(), run.report.results.is_empty()),
            Err(err) => Some(NoVerdict::Vm(VmFailed::of_host(format!("{err:#}")))),
        };
        if let Some(why) = failure {
            eprintln!("== {}: {why}", target.name);
            vm_failures.push(VmFailure {
                kernel: target.name.clone(),
                why,
            });
        }
        if let Ok(run) = run {
            // One with no result (it died before its plan, or no test
            // was chosen) has nothing to report but its failure.
            if !run.report.results.is_empty() {
                runs.push(results::kernel_run(&session, target, run, allowed_skips)?);
            }
        }
    }
    Ok(PlanRun {
        session,
        runs,
        vm_failures,
    })
}

/// Why one kernel's run gave no verdict, if it gave none: the VM's
/// failure, or a run that did its job with no result (no test matches
/// the filters), which is no kernel's.
fn run_failure(vm_failure: Option<&VmFailed>, no_results: bool) -> Option<NoVerdict> {
    match vm_failure {
        Some(f) => Some(NoVerdict::Vm(f.clone())),
        None if no_results => Some(NoVerdict::NoTest),
        None => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::process::{VmEnd, VmOutcome};
    use std::time::Duration;

    fn outcome(panic: Option<&str>) -> VmOutcome {
        VmOutcome {
            end: VmEnd::Exited { code: Some(0) },
            console_log: "/tmp/console.log".into(),
            tail: Vec::new(),
            splats: panic.iter().map(|p| p.to_string()).collect(),
            splat_in_test: Vec::new(),
            splats_before_last_start: 0,
            panic: panic.map(str::to_string),
            boot_secs: None,
            elapsed: Duration::from_secs(1),
            qemu_stderr: Vec::new(),
        }
    }

    /// A run with no result is what it is: a kernel that panicked before
    /// the plan line panicked, and one that ran no test ran none.
    #[test]
    fn a_run_without_results_keeps_its_own_failure() {
        let panicked = outcome(Some("Kernel panic - not syncing: VFS"));
        let why = "the kernel panicked: Kernel panic - not syncing: VFS";
        let vm = VmFailed::of_run(&panicked, why.into(), None);
        let f = run_failure(Some(&vm), true).unwrap();
        assert_eq!(f.sign(), KernelSign::Panicked);
        assert!(f.headline().ends_with(why), "{}", f.headline());
        let none = run_failure(None, true).unwrap();
        assert_eq!(none.sign(), KernelSign::Nothing);
        assert!(none.headline().starts_with("no test ran"), "{none}");
        assert_eq!(run_failure(None, false), None);
        let quiet = outcome(None);
        let hung = VmFailed::of_run(&quiet, "the guest hung".into(), None);
        let hung = run_failure(Some(&hung), false).unwrap();
        assert_eq!(hung.sign(), KernelSign::Nothing);
    }
}
