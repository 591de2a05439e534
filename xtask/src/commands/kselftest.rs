//! `cargo xtask kselftest`: the BPF tree's own test_progs on each kernel
//! (the work is in `kselftest/`). A test that fails only on a variant of
//! the series is a regression (exit 1).

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::cli::KselftestArgs;
use crate::hostdeps;
use crate::kernel::KernelConfig;
use crate::kselftest::compare::{self, Side};
use crate::kselftest::leftout::LeftOut;
use crate::kselftest::runner::Runner;
use crate::kselftest::{self, guest, lists, RunOptions, RunnerRun};
use crate::project::{EXIT_INFRA, EXIT_TESTS_FAILED};
use crate::report::{self, Counts, KernelRun};
use crate::vm::schedule;
use crate::vm::session::{self, Prepared, Session};
use crate::vm::share::Sharing;
use crate::vm::targets::Target;

pub fn run(args: KselftestArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    // One check, so one error names everything missing.
    let mut deps = hostdeps::kernel_build(&source);
    deps.extend_from_slice(hostdeps::KSELFTEST);
    if !args.build_only {
        deps.extend_from_slice(hostdeps::BOOT);
        deps.extend_from_slice(hostdeps::KSELFTEST_RUN);
    }
    hostdeps::ensure(&deps).context("checking the host tools for the BPF selftests")?;
    if !args.build_only {
        hostdeps::ensure_share(args.share)?;
    }
    if args.vm.machine.gdb.is_some() && args.vms.get() > 1 {
        bail!(
            "--gdb with --vms {}: the guests would share one gdb port; use --vms 1",
            args.vms
        );
    }
    let mut boot = args.vm.boot();
    let lists = Lists::load(boot.config)?;
    let runners = runners(&args);
    // Every test_progs test of the default set must be built.
    let progs_plan = lists.plan(&args, Runner::TestProgs);
    if args.all && boot.timeout.is_none() {
        boot.timeout = Some(kselftest::ALL_TIMEOUT_SECS * session::slowdown(boot.debug));
    }
    let Prepared {
        targets,
        mut session,
    } = session::prepare(&source, &boot, "kselftest")?;
    let (run_dirs, left_out) = kselftest::build_for(
        &source,
        (boot.config, boot.bundle.as_deref()),
        &targets,
        (&runners, &session.run_dir),
    )?;
    kselftest::check_default_set_built(&progs_plan, &left_out)?;
    let lacking = lacking(&args, &source, &targets)?;
    // Each runner's tests that must report: the default set's, or what
    // -t's names select (checked here, before a boot).
    let plans: Vec<Vec<String>> = runners
        .iter()
        .map(|&r| match (&run_dirs[..], args.tests.is_empty()) {
            ([dir, ..], false) if r.is_test_progs() => {
                let argv = lists.argv(&args, r, &[])?;
                kselftest::named_tests(dir, r, (&args.tests, &argv), &left_out)
            }
            _ => Ok(lists.plan(&args, r)),
        })
        .collect::<Result<_>>()?;
    if args.build_only {
        return Ok(ExitCode::SUCCESS);
    }
    session.sharing = Sharing::Host(args.share);
    let AllRuns { runs, infra } = run_all(
        &args,
        (&lists, &plans),
        &runners,
        &session,
        (&targets, &run_dirs),
    )?;
    let held = Held {
        any: default_set(&args) || !args.tests.is_empty(),
        new: if args.new_on.is_some() {
            args.tests.clone()
        } else {
            Vec::new()
        },
        lacking,
    };
    finish(&session, &runs, &infra, &held, &left_out)
}

/// What the run holds its tests to: the default set and `-t`'s tests
/// must pass on every kernel, but where `--new-on` says a kernel lacks
/// what the named tests test (`lacking`, per kernel).
struct Held {
    any: bool,
    new: Vec<String>,
    lacking: Vec<bool>,
}

/// Per kernel, whether it lacks `--new-on VARIANT`'s patches: base, and
/// the variants before it. VARIANT must be one of the run's kernels.
fn lacking(
    args: &KselftestArgs,
    source: &crate::kernel::SourceConfig,
    targets: &[Target],
) -> Result<Vec<bool>> {
    let Some(new_on) = &args.new_on else {
        return Ok(vec![false; targets.len()]);
    };
    let series = crate::kernel::series::Series::load(&source.patches)?;
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
    Ok(targets
        .iter()
        .map(|t| t.flavor.is_base() || patches(t.flavor.name()).is_some_and(|p| p < wanted))
        .collect())
}

/// Every runner on every kernel, `--vms` guests at once; each kernel's
/// results in runner order.
fn run_all(
    args: &KselftestArgs,
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
            let argv = lists.argv(args, r, plan)?;
            Ok((plan.clone(), argv))
        })
        .collect::<Result<_>>()?;
    let stall = args.stall.unwrap_or(guest::OUTPUT_STALL_SECS);
    let side_by_side = args.vms.get() > 1 && targets.len() > 1;
    let indices: Vec<usize> = (0..runners.len()).collect();
    let jobs = schedule::interleaved(targets.len(), &indices);
    let ran = schedule::run_keyed(
        &jobs,
        args.vms.get(),
        |j| j.0,
        |&(k, r)| {
            let (target, runner, (plan, argv)) = (&targets[k], runners[r], &planned[r]);
            eprintln!("== {}: {} {}", target.name, runner.name(), argv.join(" "));
            let opts = RunOptions {
                stall,
                parallel: args.parallel,
                label: side_by_side.then(|| format!("[{} {}] ", target.name, runner.name())),
            };
            let mut session = session.clone();
            kselftest::run_on(
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
        let (name, runner) = (&targets[k].name, runners[r]);
        match outcome {
            Ok(mut run) => {
                if let Some(why) = &run.vm_failure {
                    eprintln!(
                        "== {name} {}: the VM could not do its job: {why}",
                        runner.name()
                    );
                    infra.push(format!("{name} {}", runner.name()));
                }
                lists.not_counted(runner, &mut run.results);
                by_kernel[k].push(run);
            }
            Err(err) => {
                eprintln!(
                    "== {name} {}: the VM could not do its job: {err:#}",
                    runner.name()
                );
                infra.push(format!("{name} {}", runner.name()));
            }
        }
    }
    let mut runs = Vec::new();
    for (target, kernel) in targets.iter().zip(by_kernel) {
        let kr = kselftest::kernel_run(session, target, kernel)?;
        runs.push((kr, !target.flavor.is_base()));
    }
    Ok(AllRuns { runs, infra })
}

/// Each kernel's run (true: a variant), and the kernel-runner pairs whose
/// VM could not do its job.
struct AllRuns {
    runs: Vec<(KernelRun, bool)>,
    infra: Vec<String>,
}

/// `--runner`, all five without it.
fn runners(args: &KselftestArgs) -> Vec<Runner> {
    if args.runners.is_empty() {
        Runner::ALL.to_vec()
    } else {
        args.runners.clone()
    }
}

/// Neither `-t` nor `--all`: kselftest/ALLOWLIST.
fn default_set(args: &KselftestArgs) -> bool {
    !args.all && args.tests.is_empty()
}

/// kselftest/ALLOWLIST and DENYLIST.
struct Lists {
    allow: Vec<lists::Entry>,
    deny: Vec<lists::Entry>,
}

impl Lists {
    /// ALLOWLIST, DENYLIST and, for the lean kernels, DENYLIST.lean.
    fn load(config: KernelConfig) -> Result<Lists> {
        let mut deny = lists::load(lists::DENYLIST)?;
        if config == KernelConfig::Lean {
            deny.extend(lists::load(lists::DENYLIST_LEAN)?);
        }
        Ok(Lists {
            allow: lists::load(lists::ALLOWLIST)?,
            deny,
        })
    }

    /// The tests of the default set `runner` must report (empty with -t,
    /// whose tests are found in test_progs, or --all, and for the runners
    /// that cannot be told their tests).
    fn plan(&self, args: &KselftestArgs, runner: Runner) -> Vec<String> {
        if !default_set(args) || !runner.is_test_progs() {
            return Vec::new();
        }
        lists::for_runner(&self.allow, runner)
            .into_iter()
            .map(|e| e.name)
            .collect()
    }

    /// A runner's arguments: for test_progs the default set (`plan`), `-t`
    /// names, or everything, never what the denylist names; test_maps and
    /// test_verifier take none.
    fn argv(&self, args: &KselftestArgs, runner: Runner, plan: &[String]) -> Result<Vec<String>> {
        let mut argv = Vec::new();
        if !runner.is_test_progs() {
            return Ok(argv);
        }
        if !args.tests.is_empty() {
            argv.extend(["-t".to_string(), args.tests.join(",")]);
        } else if !args.all {
            if plan.is_empty() {
                bail!(
                    "kselftest/ALLOWLIST lists no test for {}; name tests with -t or use --all",
                    runner.name()
                );
            }
            argv.extend(["-a".to_string(), plan.join(",")]);
        }
        let deny = lists::for_runner(&self.deny, runner);
        if !deny.is_empty() {
            argv.extend(["-d".to_string(), lists::joined(&deny)]);
        }
        Ok(argv)
    }

    /// test_maps and test_verifier run every test they have: a result the
    /// denylist names becomes a skip that says why.
    fn not_counted(&self, runner: Runner, results: &mut [crate::report::protocol::TestResult]) {
        if runner.is_test_progs() {
            return;
        }
        for r in results.iter_mut() {
            let Some((_, test)) = kselftest::runner::split_result_name(&r.name) else {
                continue;
            };
            if let Some(e) = self.deny.iter().find(|e| e.names(runner, test)) {
                r.status = crate::report::protocol::Status::Skip;
                r.message = format!("kselftest/{}: {}", e.list, e.reason);
            }
        }
    }
}

/// Every skipped test, by kernel, so that none goes unnamed.
fn skipped(runs: &[(KernelRun, bool)]) -> String {
    let mut out = String::new();
    for (run, _) in runs {
        let names: Vec<&str> = run
            .results
            .iter()
            .filter(|r| r.status == crate::report::protocol::Status::Skip)
            .map(|r| r.name.as_str())
            .collect();
        if !names.is_empty() {
            out += &format!(
                "skipped on {} ({}): {}\n",
                run.kernel,
                names.len(),
                names.join(", ")
            );
        }
    }
    out
}

/// The table, what it means, the reports, the closing line, the exit code.
fn finish(
    session: &Session,
    runs: &[(KernelRun, bool)],
    infra: &[String],
    held: &Held,
    left_out: &LeftOut,
) -> Result<ExitCode> {
    let sides: Vec<Side> = runs
        .iter()
        .map(|(run, patched)| Side {
            run,
            patched: *patched,
        })
        .collect();
    // Every row that is not a pass or a skip everywhere, then the counts.
    let table = format!(
        "{}\n{}",
        compare::table(&sides, true),
        compare::runner_summary(&sides)
    );
    let findings = compare::findings(&sides);
    let mut verdict = compare::verdict(&findings);
    let broken = if held.any {
        compare::held(&sides, &held.new, &held.lacking)
    } else {
        Vec::new()
    };
    if !broken.is_empty() {
        verdict.push(format!(
            "FAIL: the tests run must pass on every kernel (the default set, or -t's; --new-on exempts the kernels without the named tests' variant), and skip on no variant where base runs them: {}; fix what the VM lacks, or move a test to kselftest/DENYLIST with why",
            broken.join("; ")
        ));
    }
    let default_set_failed = !broken.is_empty();
    let mut text = format!("{table}\n{}\n", verdict.join("\n"));
    text.push_str(&skipped(runs));
    if !left_out.tests.is_empty() {
        let tests: Vec<&str> = left_out.tests.iter().map(String::as_str).collect();
        text.push_str(&format!(
            "left out of test_progs ({} test(s); a BPF program they load does not compile against this kernel's BTF): {}\n  programs: {}\n",
            tests.len(),
            tests.join(", "),
            kselftest::describe_progs(left_out)
        ));
    }
    fs::write(session.run_dir.join("table.txt"), &text)?;
    let kernel_runs: Vec<KernelRun> = runs.iter().map(|(r, _)| r.clone()).collect();
    fs::write(
        session.run_dir.join("junit.xml"),
        report::junit("bpflab kselftest", &kernel_runs),
    )?;
    eprint!("\n{text}");
    eprintln!(
        "reports: {} (table.txt, KTAP per kernel, junit.xml, test_progs output, console logs)",
        session.run_dir.display()
    );
    println!("{}", Counts::total(&kernel_runs).closing_line());
    if !infra.is_empty() {
        eprintln!("VM failure on: {}", infra.join(", "));
        return Ok(ExitCode::from(EXIT_INFRA));
    }
    Ok(if findings.fails() || default_set_failed {
        ExitCode::from(EXIT_TESTS_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}
