//! `cargo xtask kselftest`: the BPF tree's own test_progs on each kernel
//! (the work is in `kselftest/`). A test that fails only on a variant of
//! the series is a regression (exit 1).

use std::fs;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::cli::KselftestArgs;
use crate::hostdeps;
use crate::kselftest::compare::{self, Side};
use crate::kselftest::leftout::LeftOut;
use crate::kselftest::{self, guest, lists};
use crate::project::{EXIT_INFRA, EXIT_TESTS_FAILED};
use crate::report::{self, Counts, KernelRun};
use crate::vm::session::{self, Prepared, Session};
use crate::vm::share::Sharing;

pub fn run(args: KselftestArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    // One check, so one error names everything missing.
    let mut deps = hostdeps::kernel_build(&source);
    deps.extend_from_slice(hostdeps::KSELFTEST);
    if !args.build_only {
        deps.extend_from_slice(hostdeps::BOOT);
    }
    hostdeps::ensure(&deps).context("checking the host tools for the BPF selftests")?;
    if !args.build_only {
        hostdeps::ensure_share(args.share)?;
    }
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
    let mut boot = args.vm.boot();
    if args.all && boot.timeout.is_none() {
        boot.timeout = Some(kselftest::ALL_TIMEOUT_SECS);
    }
    let Prepared {
        targets,
        mut session,
    } = session::prepare(&source, &boot, "kselftest")?;
    let (run_dirs, left_out) = kselftest::build_for(&source, boot.config, &targets)?;
    kselftest::check_default_set_built(&plan, &left_out)?;
    if args.build_only {
        return Ok(ExitCode::SUCCESS);
    }
    session.sharing = Sharing::Host(args.share);
    let mut runs = Vec::new();
    let mut infra = Vec::new();
    let stall = args.stall.unwrap_or(guest::OUTPUT_STALL_SECS);
    for (target, dir) in targets.iter().zip(&run_dirs) {
        eprintln!("== {}: test_progs {}", target.name, argv.join(" "));
        match kselftest::run_on(&mut session, target, dir, &argv, &plan, stall) {
            Ok((kr, failure)) => {
                if let Some(why) = failure {
                    eprintln!("== {}: the VM could not do its job: {why}", target.name);
                    infra.push(target.name.clone());
                }
                runs.push((kr, !target.flavor.is_base()));
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
