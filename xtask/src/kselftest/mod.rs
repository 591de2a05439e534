//! `cargo xtask kselftest`: the BPF tree's own `test_progs`, built from
//! the kernel tree under test, run in the guest of each kernel over the
//! share, and compared base against patched. A test that fails only on a
//! patched kernel is a regression (exit 1); one that fails on base too is
//! listed, not held against the series.

pub mod build;
pub mod compare;
pub mod guest;
pub mod leftout;
pub mod lists;
pub mod parse;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use self::build::KernelTree;
use self::compare::Side;
use self::leftout::LeftOut;
use crate::cli::KselftestArgs;
use crate::kernel::{self, Flavor, KernelSpec};
use crate::project::{EXIT_INFRA, EXIT_TESTS_FAILED};
use crate::report::protocol::{Status, TestResult};
use crate::report::{self, Counts, KernelRun};
use crate::vm::session::{self, Prepared, Session, Target};
use crate::{hostdeps, kernel::series::Series};

/// The guest's limit for `--all` under TCG (3x on debug kernels): the
/// default set needs minutes, every test far more.
const ALL_TIMEOUT_SECS: u64 = 4 * 3600;

/// The result that stands for the kernel's console: no splat.
const CONSOLE_CHECK: &str = "kernel_console_clean";

pub fn run(args: KselftestArgs) -> Result<ExitCode> {
    hostdeps::ensure(hostdeps::KSELFTEST)
        .context("checking the host tools for the BPF selftests")?;
    // The default set is what this VM guarantees: each of its tests must
    // be built, report on every kernel, and pass. Empty with -t or --all.
    let plan: Vec<String> = if default_set(&args) {
        lists::load(lists::ALLOWLIST)?
            .into_iter()
            .map(|e| e.name)
            .collect()
    } else {
        Vec::new()
    };
    let argv = test_progs_argv(&args, &plan)?;
    let mut vm = args.vm.clone();
    if args.all && vm.timeout.is_none() {
        vm.timeout = Some(ALL_TIMEOUT_SECS);
    }
    let Prepared {
        targets,
        mut session,
    } = session::prepare(&args.source, &vm, "kselftest")?;
    let (run_dirs, left_out) = build_for(&args, &targets)?;
    check_default_set_built(&plan, &left_out)?;
    if args.build_only {
        return Ok(ExitCode::SUCCESS);
    }
    session.share = Some(args.share.forced());
    let mut runs = Vec::new();
    let mut infra = Vec::new();
    let stall = args.stall.unwrap_or(guest::OUTPUT_STALL_SECS);
    for (target, dir) in targets.iter().zip(&run_dirs) {
        eprintln!("== {}: test_progs {}", target.name, argv.join(" "));
        match run_on(&mut session, target, dir, &argv, &plan, stall) {
            Ok((kr, failure)) => {
                if let Some(why) = failure {
                    eprintln!("== {}: the VM could not do its job: {why}", target.name);
                    infra.push(target.name.clone());
                }
                runs.push((kr, target.flavor == Flavor::Patched));
            }
            Err(err) => {
                eprintln!("== {}: the VM could not do its job: {err:#}", target.name);
                infra.push(target.name.clone());
            }
        }
    }
    let strict = default_set(&args);
    finish(&session, &runs, &infra, strict, &left_out)
}

/// Neither `-t` nor `--all`: kselftest/ALLOWLIST.
fn default_set(args: &KselftestArgs) -> bool {
    !args.all && args.tests.is_empty()
}

/// Every test of the default set must be in test_progs: one left out of
/// the build is a kernel config that lacks what it needs.
fn check_default_set_built(plan: &[String], left_out: &LeftOut) -> Result<()> {
    let missing: Vec<&str> = plan
        .iter()
        .filter(|t| left_out.tests.contains(*t))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        bail!(
            "kselftest/ALLOWLIST names {}, left out of test_progs because a BPF program it loads does not compile against this kernel's BTF ({}); add what it needs to kconfig/selftests.config",
            missing.join(", "),
            describe_progs(left_out)
        );
    }
    Ok(())
}

fn describe_progs(left_out: &LeftOut) -> String {
    left_out
        .progs
        .iter()
        .map(|(p, why)| format!("{p}.bpf.o: {why}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// test_progs's arguments: the default set (`plan`), `-t` names, or
/// everything; never what the denylist names.
fn test_progs_argv(args: &KselftestArgs, plan: &[String]) -> Result<Vec<String>> {
    let deny = lists::load(lists::DENYLIST)?;
    let mut argv = Vec::new();
    if !args.tests.is_empty() {
        argv.extend(["-t".to_string(), args.tests.join(",")]);
    } else if !args.all {
        if plan.is_empty() {
            bail!("kselftest/ALLOWLIST lists no test; name tests with -t or use --all");
        }
        argv.extend(["-a".to_string(), plan.join(",")]);
    }
    if !deny.is_empty() {
        argv.extend(["-d".to_string(), lists::joined(&deny)]);
    }
    Ok(argv)
}

/// Builds test_progs once and the test modules for each kernel, with the
/// cache locked; returns each kernel's directory to run test_progs in.
fn build_for(args: &KselftestArgs, targets: &[Target]) -> Result<(Vec<PathBuf>, LeftOut)> {
    let kernels = targets
        .iter()
        .map(|t| match &t.vmlinux {
            Some(v) => KernelTree::from_vmlinux(&t.name, v),
            None => bail!(
                "--kernel {}: kselftest runs only kernels it builds (base, patched): \
                 the test modules are built against each kernel's build tree",
                t.name
            ),
        })
        .collect::<Result<Vec<_>>>()?;
    // The BTF test_progs is built against: the plain kernel of the patched
    // tree if one runs, else base. CO-RE adapts it to every kernel, and a
    // debug run reuses the plain build rather than make its own.
    let flavor = if targets.iter().any(|t| t.flavor == Flavor::Patched) {
        Flavor::Patched
    } else {
        Flavor::Base
    };
    let spec = KernelSpec {
        flavor,
        debug: false,
    };
    let (manifest, _lock) = kernel::build_locked(&args.source, &[spec])?;
    let btf_info = &manifest.kernels[0];
    let btf = KernelTree::from_vmlinux(&btf_info.name, &btf_info.vmlinux)?;
    let work = manifest
        .source
        .pristine
        .parent()
        .context("the pristine tree has no parent")?
        .join("kselftest");
    say_which_tree(&args.source.patches, &btf)?;
    let jobs = kernel::jobs(&args.source);
    let built = build::test_progs(&work, &btf.tree, &btf, jobs)?;
    let dirs = kernels
        .iter()
        .map(|k| {
            let modules = build::modules(&work, &btf.tree, k, jobs)?;
            build::run_dir(&work, &built.out, &k.name, &modules)
        })
        .collect::<Result<_>>()?;
    Ok((dirs, built.left_out))
}

/// One test_progs serves base and patched when the series leaves tools/
/// alone; says which it is.
fn say_which_tree(patches: &Path, btf: &KernelTree) -> Result<()> {
    let series = Series::load(patches)?;
    let in_tools: Vec<String> = series
        .touched_files()
        .into_iter()
        .filter(|f| f.starts_with("tools/"))
        .collect();
    if in_tools.is_empty() {
        crate::status!(
            "kselftest",
            "the series touches nothing under tools/: one test_progs (from {}) serves every kernel",
            btf.tree.display()
        );
    } else {
        crate::status!(
            "kselftest",
            "the series changes {}: test_progs is built from the {} tree, with those changes",
            in_tools.join(", "),
            btf.name
        );
    }
    Ok(())
}

/// test_progs on one kernel: its results (the console check included) and
/// why the VM failed, if it did.
fn run_on(
    session: &mut Session,
    target: &Target,
    dir: &Path,
    argv: &[String],
    plan: &[String],
    stall: u64,
) -> Result<(KernelRun, Option<String>)> {
    let numbering = guest::Numbering::of(dir, argv)?;
    let ran = guest::run(session, target, dir, argv, &numbering, stall)?;
    let kr = kernel_run(target, ran, plan);
    let path = session.run_dir.join(format!("{}.ktap", kr.0.kernel));
    fs::write(&path, report::ktap(&kr.0)).with_context(|| format!("writing {}", path.display()))?;
    Ok(kr)
}

/// The results, a planned test never reported as not run, and a
/// test_progs that ended without its summary as one crashed entry.
fn kernel_run(
    target: &Target,
    ran: guest::KernelResults,
    plan: &[String],
) -> (KernelRun, Option<String>) {
    let mut results = ran.results;
    results.extend(parse::not_reported(&results, plan));
    let any_failed = results.iter().any(|r| r.status == Status::Fail);
    let (status, tail) = (&ran.status, &ran.stderr_tail);
    if !ran.summary_seen {
        let why = ran.vm_failure.as_deref().unwrap_or("test_progs stopped");
        results.push(TestResult {
            name: "test_progs".into(),
            status: Status::Crashed,
            millis: 0,
            message: format!("no summary line (exit status {status}): {why} | {tail}"),
        });
    } else if status != "0" && !any_failed {
        results.push(TestResult {
            name: "test_progs".into(),
            status: Status::Fail,
            millis: 0,
            message: format!("exit status {status} with no failed test | {tail}"),
        });
    }
    let kr = KernelRun {
        kernel: target.name.clone(),
        accel: ran.accel,
        results,
        seconds: ran.seconds,
    };
    let c = Counts::of(&kr.results);
    eprintln!(
        "== {} ({}): {} in {:.1} s",
        kr.kernel,
        kr.accel,
        c.closing_line(),
        kr.seconds
    );
    (kr, ran.vm_failure)
}

/// The table, what it means, the reports, the closing line, the exit code.
fn finish(
    session: &Session,
    runs: &[(KernelRun, bool)],
    infra: &[String],
    strict: bool,
    left_out: &LeftOut,
) -> Result<ExitCode> {
    let sides: Vec<Side> = runs
        .iter()
        .map(|(run, patched)| Side {
            run,
            patched: *patched,
        })
        .collect();
    let table = compare::table(&sides, !strict);
    let findings = compare::findings(&sides);
    let mut verdict = compare::verdict(&findings);
    let default_set_failed = strict && findings.any();
    if default_set_failed {
        verdict.push(
            "FAIL: the default set (kselftest/ALLOWLIST) must pass on every kernel; fix what the VM lacks, or move the test to kselftest/DENYLIST with why".into(),
        );
    }
    let mut text = format!("{table}\n{}\n", verdict.join("\n"));
    if !left_out.tests.is_empty() {
        let tests: Vec<&str> = left_out.tests.iter().map(String::as_str).collect();
        text.push_str(&format!(
            "left out of test_progs ({} test(s); a BPF program they load does not compile against this kernel's BTF): {}\n  programs: {}\n",
            tests.len(),
            tests.join(", "),
            describe_progs(left_out)
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
