//! The BPF selftests as a suite: test_progs (and the other runners)
//! built from each kernel's tree, run on every kernel of a run, `vms`
//! guests at a time, and each kernel's results gathered with what the
//! run holds them to; `verdict` compares them.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use anyhow::{bail, Result};

use super::guest;
use super::held::{Held, NewTest};
use super::lists;
use super::llvm::Llvm;
use super::runner::Runner;
use super::selection::{Lists, TestChoice};
use super::unbuildable::LeftOut;
use super::{RunOptions, RunnerRun};
use crate::kernel::choice::Chosen;
use crate::kernel::series::Series;
use crate::kernel::SourceConfig;
use crate::report::KernelRun;
use crate::vm::failed::{FailedRun, VmFailed};
use crate::vm::schedule;
use crate::vm::session::{self, Prepared, Session, SessionOptions};
use crate::vm::share::{ShareChoice, Sharing};
use crate::vm::targets::{BootConfig, Target};

/// How a kselftest run goes, beside which kernels and how they boot.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// test_progs's `-t` names, or `--all` (DENYLIST still applies), or
    /// neither: the default set.
    pub choice: TestChoice,
    /// The variant `tests` are new in.
    pub new_on: Option<String>,
    /// The runners; none: all five.
    pub runners: Vec<Runner>,
    /// test_progs's `-j`.
    pub parallel: Option<usize>,
    /// Guests at once.
    pub vms: NonZeroUsize,
    /// Build test_progs and the test modules, boot nothing.
    pub build_only: bool,
    /// How the host is shared with the guests.
    pub share: ShareChoice,
    /// How long test_progs may print nothing (None: the default).
    pub stall: Option<u64>,
    /// The LLVM that builds the runners.
    pub llvm: Llvm,
}

/// A run's results: each kernel's (true: a variant), the kernel-runner
/// pairs whose VM could not do its job, what the tests are held to, and
/// what test_progs' build left out; in `run_dir`.
pub struct Ran {
    pub run_dir: PathBuf,
    pub runs: Vec<(KernelRun, bool)>,
    pub infra: Vec<FailedRun>,
    pub held: Held,
    pub left_out: LeftOut,
}

/// Builds the runners for each kernel of `chosen` (with `Sides::Own`)
/// and runs them as `boot` says (nothing runs with `build_only`: None).
/// The host tools must be there.
pub fn run(
    source: &SourceConfig,
    chosen: &Chosen,
    boot: &BootConfig,
    options: &SuiteOptions,
) -> Result<Option<Ran>> {
    if boot.machine.gdb.is_some() && options.vms.get() > 1 {
        bail!(
            "--gdb with --vms {}: the guests would share one gdb port; use --vms 1",
            options.vms
        );
    }
    let mut boot = boot.clone();
    let lists = Lists::load(boot.config)?;
    let runners = runners(options);
    let choice = &options.choice;
    // Every test_progs test of the default set must be built.
    let progs_plan = lists.plan(choice, Runner::TestProgs);
    if boot.timeout.is_none() {
        boot.timeout = super::default_timeout(choice.all, boot.config)
            .map(|secs| secs * session::slowdown(boot.debug));
    }
    let Prepared { targets, session } = session::prepare(
        source,
        chosen,
        &boot,
        "kselftest",
        SessionOptions {
            sharing: Sharing::Host(options.share),
            ..SessionOptions::default()
        },
    )?;
    let (run_dirs, left_out) = super::build_for(
        (source, &chosen.series),
        (boot.config, boot.bundle.as_deref(), options.llvm),
        &targets,
        (&runners, session.run_dir()),
    )?;
    super::check_default_set_built(&progs_plan, &left_out)?;
    let series = &chosen.series;
    let lacking = lacking(options, series, &targets)?;
    // Each runner's tests that must report: the default set's, or what
    // -t's names select (checked here, before a boot).
    let plans: Vec<Vec<String>> = runners
        .iter()
        .map(|&r| match (&run_dirs[..], choice.tests.is_empty()) {
            ([dir, ..], false) if r.is_test_progs() => {
                let argv = lists.argv(choice, r, &[])?;
                super::named_tests(dir, r, (&choice.tests, &argv), &left_out)
            }
            _ => Ok(lists.plan(choice, r)),
        })
        .collect::<Result<_>>()?;
    if options.build_only {
        return Ok(None);
    }
    let AllRuns { runs, infra } = run_all(
        options,
        (&lists, &plans),
        &runners,
        &session,
        (&targets, &run_dirs),
    )?;
    let held = Held {
        any: choice.default_set() || !choice.tests.is_empty(),
        named: !choice.tests.is_empty(),
        new: new_tests(lacking, choice, series, &targets)?,
    };
    Ok(Some(Ran {
        run_dir: session.run_dir().to_path_buf(),
        runs,
        infra,
        held,
        left_out,
    }))
}

/// The tests new in a variant: `--new-on`'s (`lacking` its kernels
/// without the variant), or in the default set `kselftest/NEW_ON`'s.
fn new_tests(
    lacking: Option<Vec<bool>>,
    choice: &TestChoice,
    series: &Series,
    targets: &[Target],
) -> Result<Vec<NewTest>> {
    Ok(match (lacking, choice.default_set()) {
        (Some(lacking), _) => choice
            .tests
            .iter()
            .map(|t| NewTest {
                name: t.clone(),
                lacking: lacking.clone(),
            })
            .collect(),
        (None, true) => new_in_the_default_set(series, targets)?,
        (None, false) => Vec::new(),
    })
}

/// The default set's tests that `kselftest/NEW_ON` says are new in a
/// variant, each with the kernels of this run that lack it.
fn new_in_the_default_set(series: &Series, targets: &[Target]) -> Result<Vec<NewTest>> {
    lists::load_new_on()?
        .into_iter()
        .map(|(name, variant)| {
            let Some(wanted) = series.variant(&variant).map(|v| v.patches) else {
                bail!(
                    "kselftest/{}: {name} is new in {variant}, which the series has no variant of; name one of patches/series's",
                    lists::NEW_ON
                );
            };
            Ok(NewTest {
                name,
                lacking: lacking_before(series, wanted, targets),
            })
        })
        .collect()
}

/// Per kernel of `targets`, whether it lacks a variant of `wanted`
/// patches: base, and the variants before it.
fn lacking_before(series: &Series, wanted: usize, targets: &[Target]) -> Vec<bool> {
    let patches = |name: &str| series.variant(name).map(|v| v.patches);
    targets
        .iter()
        .map(|t| t.flavor.is_base() || patches(t.flavor.name()).is_some_and(|p| p < wanted))
        .collect()
}

/// Per kernel, whether it lacks `--new-on VARIANT`'s patches: base, and
/// the variants before it (None without `--new-on`). VARIANT must be one
/// of the run's kernels.
fn lacking(
    options: &SuiteOptions,
    series: &Series,
    targets: &[Target],
) -> Result<Option<Vec<bool>>> {
    let Some(new_on) = &options.new_on else {
        return Ok(None);
    };
    let patches = |name: &str| series.variant(name).map(|v| v.patches);
    let Some(wanted) =
        patches(new_on).filter(|_| targets.iter().any(|t| t.flavor.name() == new_on))
    else {
        bail!(
            "--new-on {new_on}: not one of this run's variants ({}); name the variant the tests are new in, and run it",
            targets
                .iter()
                .filter(|t| !t.flavor.is_base())
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    Ok(Some(lacking_before(series, wanted, targets)))
}

/// Every runner on every kernel, `--vms` guests at once; each kernel's
/// results in runner order.
fn run_all(
    options: &SuiteOptions,
    (lists, plans): (&Lists, &[Vec<String>]),
    runners: &[Runner],
    session: &Session,
    (targets, run_dirs): (&[Target], &[PathBuf]),
) -> Result<AllRuns> {
    // Every runner's arguments, so that a bad list fails before a boot.
    let planned: Vec<(Vec<String>, Vec<String>)> = runners
        .iter()
        .zip(plans)
        .map(|(&r, plan)| {
            let argv = lists.argv(&options.choice, r, plan)?;
            Ok((plan.clone(), argv))
        })
        .collect::<Result<_>>()?;
    let stall = options.stall.unwrap_or(guest::OUTPUT_STALL_SECS);
    let side_by_side = options.vms.get() > 1 && targets.len() > 1;
    let indices: Vec<usize> = (0..runners.len()).collect();
    let jobs = schedule::interleaved(targets.len(), &indices);
    let ran = schedule::run_keyed(
        &jobs,
        options.vms.get(),
        |j| j.0,
        |&(k, r)| {
            let (target, runner, (plan, argv)) = (&targets[k], runners[r], &planned[r]);
            eprintln!("== {}: {} {}", target.name, runner.name(), argv.join(" "));
            let opts = RunOptions {
                stall,
                parallel: options.parallel,
                label: side_by_side.then(|| format!("[{} {}] ", target.name, runner.name())),
            };
            let mut session = session.clone();
            super::run_on(
                &mut session,
                target,
                &run_dirs[k],
                (runner, argv),
                plan,
                &opts,
            )
        },
    );
    let mut by_kernel: Vec<Vec<RunnerRun>> = targets.iter().map(|_| Vec::new()).collect();
    let mut infra = Vec::new();
    // `jobs` go runner by runner, so each kernel's runs stay in order.
    for (&(k, r), outcome) in jobs.iter().zip(ran) {
        let name = format!("{} {}", targets[k].name, runners[r].name());
        let failed = match outcome {
            Ok(mut run) => {
                let failed = run.vm_failure.clone();
                lists.not_counted(runners[r], &mut run.results);
                by_kernel[k].push(run);
                failed
            }
            Err(err) => Some(VmFailed::of_host(format!("{err:#}"))),
        };
        if let Some(failed) = failed {
            eprintln!("== {name}: the VM could not do its job: {failed}");
            infra.push(FailedRun { name, failed });
        }
    }
    let mut runs = Vec::new();
    for (target, kernel) in targets.iter().zip(by_kernel) {
        let kr = super::kernel_run(session, target, kernel)?;
        runs.push((kr, !target.flavor.is_base()));
    }
    Ok(AllRuns { runs, infra })
}

/// Each kernel's run (true: a variant), and the kernel-runner pairs whose
/// VM could not do its job.
struct AllRuns {
    runs: Vec<(KernelRun, bool)>,
    infra: Vec<FailedRun>,
}

/// `--runner`; without it all five, or with `-t` the three test_progs
/// flavors: the names select in them, and test_maps and test_verifier,
/// which take no names, would run their whole sets (minutes per kernel)
/// beside a developer's one test.
fn runners(options: &SuiteOptions) -> Vec<Runner> {
    match (&options.runners[..], options.choice.tests.is_empty()) {
        ([], true) => Runner::ALL.to_vec(),
        ([], false) => Runner::ALL
            .into_iter()
            .filter(|r| r.is_test_progs())
            .collect(),
        (chosen, _) => chosen.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(tests: &[&str], runners: &[Runner]) -> SuiteOptions {
        SuiteOptions {
            choice: TestChoice {
                tests: tests.iter().map(|t| t.to_string()).collect(),
                all: false,
            },
            new_on: None,
            runners: runners.to_vec(),
            parallel: None,
            vms: NonZeroUsize::MIN,
            build_only: false,
            share: ShareChoice::Auto,
            stall: None,
            llvm: crate::kselftest::llvm::DEFAULT,
        }
    }

    #[test]
    fn named_tests_run_in_the_test_progs_flavors_unless_runners_are_chosen() {
        assert_eq!(runners(&options(&[], &[])), Runner::ALL);
        let flavors = [Runner::TestProgs, Runner::NoAlu32, Runner::CpuV4];
        assert_eq!(runners(&options(&["mine"], &[])), flavors);
        let maps = [Runner::Maps];
        assert_eq!(runners(&options(&["mine"], &maps)), maps);
        assert_eq!(runners(&options(&[], &maps)), maps);
    }
}
