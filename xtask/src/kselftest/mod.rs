//! The BPF tree's own `test_progs`: built from the kernel tree under
//! test, run in the guest of each kernel over the share, and compared
//! base against patched (`compare.rs`). A test that fails only on a
//! patched kernel is a regression; one that fails on base too is listed,
//! not held against the series. `campaign` runs the suite on a run's
//! kernels (`selection` chooses the tests), `held` says what the tests
//! held to pass broke, `verdict` concludes; `llvm`
//! chooses the compiler that builds it, and `first_build` starts a first build
//! for a new source from another's.

pub mod build;
pub mod campaign;
pub mod compare;
pub mod first_build;
pub mod guest;
pub mod held;
pub mod lists;
pub mod llvm;
pub mod maps_verifier_output;
pub mod parse;
pub mod runner;
pub mod selection;
pub mod unbuildable;
pub mod verdict;

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use self::build::{KernelTree, MakeOptions};
use self::llvm::Llvm;
use self::runner::Runner;
use self::unbuildable::LeftOut;
use crate::kernel::series::{Patch, Series, Variant};
use crate::kernel::{self, Flavor, KernelConfig, KernelSpec, SourceConfig};
use crate::report::protocol::{Status, TestResult};
use crate::report::{self, Counts, KernelRun};
use crate::vm::failed::VmFailed;
use crate::vm::session::Session;
use crate::vm::targets::Target;

/// The guest's limit for `--all` under TCG (3x on debug kernels): the
/// default set needs minutes, every test far more.
pub const ALL_TIMEOUT_SECS: u64 = 4 * 3600;

/// The guest's limit on a kernel of BPF CI's config under TCG (3x on
/// debug kernels). That config has lockdep (PROVE_LOCKING,
/// DEBUG_ATOMIC_SLEEP), and test_maps, which always runs whole, took
/// 2579 s on eager-bpfci of 7.3 here, two guests side by side (a lean
/// boot's 900 s limit killed it): 2 hours leaves room for the slowest
/// machine, 1.7x slower.
pub const BPF_CI_TIMEOUT_SECS: u64 = 2 * 3600;

/// The guest's limit when `--timeout` gives none, before the debug
/// kernels' slowdown: `--all`'s, then BPF CI's config's, else the
/// boot's own default (None).
pub fn default_timeout(all: bool, config: KernelConfig) -> Option<u64> {
    match (all, config) {
        (true, _) => Some(ALL_TIMEOUT_SECS),
        (false, KernelConfig::BpfCi) => Some(BPF_CI_TIMEOUT_SECS),
        (false, KernelConfig::Lean) => None,
    }
}

/// The result that stands for the kernel's console: no splat.
pub const CONSOLE_CHECK: &str = "kernel_console_clean";

/// Every test of the default set must be in test_progs: one left out of
/// the build is a kernel config that lacks what it needs.
pub fn check_default_set_built(plan: &[String], left_out: &LeftOut) -> Result<()> {
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

/// The tests `-t`'s names select in `runner` (whose arguments are
/// `argv`, the denylist's `-d` with them), each name checked before a
/// boot: one left out of the build, one that matches no test, or a
/// selection the denylist empties is an error that says so, never a VM
/// failure (test_progs would exit 2, EXIT_NO_TEST).
pub fn named_tests(
    dir: &Path,
    runner: Runner,
    (names, argv): (&[String], &[String]),
    left_out: &LeftOut,
) -> Result<Vec<String>> {
    for name in names {
        let test = name.split('/').next().unwrap_or(name);
        if left_out.tests.iter().any(|t| t == test) {
            bail!(
                "-t {name}: left out of {} because a BPF program it loads does not compile against this kernel's BTF ({}); add what it needs to kconfig/selftests.config",
                runner.name(),
                describe_progs(left_out)
            );
        }
        let alone = ["-t".to_string(), name.clone()];
        if guest::list_tests(dir, runner, &alone)?.is_empty() {
            bail!(
                "-t {name}: no test of {} matches it; `{} -l` in {} lists them",
                runner.name(),
                runner.name(),
                dir.display()
            );
        }
    }
    let selected = guest::list_tests(dir, runner, argv)?;
    if selected.is_empty() {
        bail!(
            "-t {}: every test it selects in {} is in kselftest/DENYLIST",
            names.join(","),
            runner.name()
        );
    }
    Ok(selected)
}

/// Why each left-out file is: the programs' and tests' first complaints.
pub fn describe_progs(left_out: &LeftOut) -> String {
    let progs = left_out
        .progs
        .iter()
        .map(|(p, why)| format!("{p}.bpf.o: {why}"));
    let tests = left_out
        .test_errors
        .iter()
        .map(|(t, why)| format!("prog_tests/{t}.c: {why}"));
    progs.chain(tests).collect::<Vec<_>>().join("; ")
}

/// The work directory of test_progs' build, one per configuration and
/// LLVM: make compares mtimes only, so it would take objects another
/// clang built for up to date. A directory per LLVM is the cheapest
/// correct way: a stamp would have to clean the outputs on every switch
/// and rebuild them on switching back (minutes each way), where a
/// directory keeps both warm for the disk of a second set of outputs,
/// and keeps its own left-out.json (what compiles is the compiler's
/// too). The default LLVM keeps the names it always had, so existing
/// caches (CI's) stay warm.
fn work_name(config: KernelConfig, llvm: Llvm) -> String {
    let name = match config {
        KernelConfig::Lean => "kselftest",
        KernelConfig::BpfCi => "kselftest-bpfci",
    };
    if llvm == llvm::DEFAULT {
        name.to_string()
    } else {
        format!("{name}-llvm{}", llvm.0)
    }
}

/// Builds test_progs once with `llvm` and the test modules for each
/// kernel, with the cache locked; returns each kernel's directory to run
/// test_progs in, made under `runs_in` (the run's own directory: two runs
/// at once each boot their own, and neither removes the other's).
pub fn build_for(
    (source, series): (&SourceConfig, &Series),
    (config, bundle, llvm): (KernelConfig, Option<&Path>, Llvm),
    targets: &[Target],
    (runners, runs_in): (&[Runner], &Path),
) -> Result<(Vec<PathBuf>, LeftOut)> {
    if let Some(bundle) = bundle {
        let manifest = kernel::bundle_manifest::load(bundle)?;
        kernel::bundle_manifest::check_llvm(bundle, &manifest, llvm.0)?;
        return from_bundle(bundle, config, targets);
    }
    let kernels = targets
        .iter()
        .map(|t| match t.vmlinux() {
            Some(v) => KernelTree::from_vmlinux(&t.name, v),
            None => bail!(
                "--kernel {}: kselftest runs only kernels it builds (base and the series' variants): \
                 the test modules are built against each kernel's build tree",
                t.name
            ),
        })
        .collect::<Result<Vec<_>>>()?;
    // The tree and BTF test_progs is built from: the plain kernel of base
    // or of one variant (`test_progs_flavor`), the same whichever kernels
    // run, so that switching kernels never rebuilds it. CO-RE adapts it to every kernel, and a debug run
    // reuses the plain build rather than make its own.
    let spec = KernelSpec {
        flavor: test_progs_flavor(series),
        config,
        debug: false,
        extra: Default::default(),
    };
    let btf_tree = spec.flavor.name().to_string();
    let manifest = kernel::build(source, &[spec])?;
    let btf_info = &manifest.kernels[0];
    let btf = KernelTree::from_vmlinux(&btf_info.name, &btf_info.vmlinux)?;
    let work_name = work_name(config, llvm);
    let work = manifest
        .source
        .pristine
        .parent()
        .context("the pristine tree has no parent")?
        .join(&work_name);
    // The work directory, the tree test_progs is built from and the trees
    // the modules are built against, held all at once (in name order, as
    // every run takes them). Only paths were read before: the BTF's
    // identity, which stamps the build, is read under them.
    let mut names: Vec<&str> = targets.iter().map(|t| t.flavor.name()).collect();
    names.extend([btf_tree.as_str(), work_name.as_str()]);
    let _held = kernel::hold(source, &names)?;
    say_which_tree(series, &btf);
    if !first_build::is_built(&work) {
        first_build::from_other(source, (&work, &work_name), &btf.tree)?;
    }
    let make = MakeOptions {
        jobs: source.jobs,
        llvm,
    };
    let built = build::test_progs(&work, &btf.tree, (&btf, runners), make)?;
    let dirs = kernels
        .iter()
        .map(|k| {
            let modules = build::modules(&work, &btf.tree, k, make)?;
            build::run_dir(runs_in, &built.out, &k.name, &modules)
        })
        .collect::<Result<_>>()?;
    Ok((dirs, built.left_out))
}

/// The run directories of `targets` and what was left out, from a bundle.
fn from_bundle(
    bundle: &Path,
    config: KernelConfig,
    targets: &[Target],
) -> Result<(Vec<PathBuf>, LeftOut)> {
    let dir = kernel::bundle::kselftest_dir(bundle, config);
    let dirs = targets
        .iter()
        .map(|t| {
            let run = dir.join("run").join(&t.name);
            if run.is_dir() {
                Ok(run)
            } else {
                bail!(
                    "the bundle {} has no test programs for {} ({} is missing); make it with `cargo xtask bundle`",
                    bundle.display(),
                    t.name,
                    run.display()
                )
            }
        })
        .collect::<Result<_>>()?;
    Ok((dirs, build::load_left_out(&dir)?.unwrap_or_default()))
}

/// The kernel test_progs is built from, its tree and its BTF: the first
/// variant with every change the series makes under tools/, or, when it
/// makes none, the kernel the series starts from: a Debian baseline's
/// mainline (the release as shipped, 7.3's seed merged), else base. That
/// BTF is the release's own, so it serves every series on the release
/// that leaves tools/ alone, a branch's with a new test among them: a
/// first build for a new source starts from another's and rebuilds no
/// BPF object (vmlinux.h is rewritten only when its text differs;
/// `first_build.rs`). Eager's BTF differed from a 7.3 branch's base, and its
/// first kselftest rebuilt all 1932 objects (about 25 min in ci).
fn test_progs_flavor(series: &Series) -> Flavor {
    let in_tools = |p: &Patch| p.files.iter().any(|f| f.starts_with("tools/"));
    let Some(last) = series.patches.iter().rposition(in_tools) else {
        return match series.start() {
            Some(start) => Flavor::Variant(start.name.clone()),
            None => Flavor::Base(series.base.name),
        };
    };
    let variant: &Variant = series
        .variants
        .iter()
        .find(|v| v.patches > last)
        .expect("the last variant has every patch");
    Flavor::Variant(variant.name.clone())
}

/// One test_progs serves every kernel when the series leaves tools/
/// alone; says which it is.
fn say_which_tree(series: &Series, btf: &KernelTree) {
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
}

/// One runner's results on one kernel (named `<runner>:<test>`, its
/// console check included), and why the VM failed, if it did.
pub struct RunnerRun {
    pub results: Vec<TestResult>,
    pub accel: String,
    pub seconds: f64,
    pub vm_failure: Option<VmFailed>,
}

/// How one runner runs: its stall limit, test_progs's `-j`, and the
/// label of its relayed lines when guests run side by side.
pub struct RunOptions {
    pub stall: u64,
    pub parallel: Option<usize>,
    pub label: Option<String>,
}

/// `runner` with `argv` on one kernel; `plan`: the tests it must report.
pub fn run_on(
    session: &mut Session,
    target: &Target,
    dir: &Path,
    (runner, argv): (Runner, &[String]),
    plan: &[String],
    opts: &RunOptions,
) -> Result<RunnerRun> {
    // Only test_progs lists its tests, and can resume after one.
    let numbering = if runner.is_test_progs() {
        guest::Numbering::of(dir, runner, argv)?
    } else {
        guest::Numbering::default()
    };
    let job = guest::Job {
        runner,
        dir,
        argv,
        numbering: &numbering,
        stall: opts.stall,
        parallel: opts.parallel,
        label: opts.label.clone(),
    };
    let ran = guest::run(session, target, &job)?;
    Ok(runner_run(target, runner, ran, plan))
}

/// The results, a planned test never reported as not run, and a runner
/// that ended without its summary as one crashed entry named after it.
fn runner_run(
    target: &Target,
    runner: Runner,
    ran: guest::KernelResults,
    plan: &[String],
) -> RunnerRun {
    let mut results = ran.results;
    results.extend(parse::not_reported(&results, plan));
    let any_failed = results.iter().any(|r| r.status == Status::Fail);
    let (status, tail) = (&ran.status, &ran.stderr_tail);
    for r in &mut results {
        r.name = runner.result_name(&r.name);
    }
    if !ran.summary_seen {
        let why = ran
            .vm_failure
            .as_ref()
            .map_or("the runner stopped".to_string(), ToString::to_string);
        let message = format!("no summary line (exit status {status}): {why}");
        results.push(
            TestResult::new(runner.name(), Status::Crashed, 0, message)
                .with_detail(tail.iter().cloned()),
        );
    } else if status != "0" && !any_failed {
        let message = format!("exit status {status} with no failed test");
        results.push(
            TestResult::new(runner.name(), Status::Fail, 0, message)
                .with_detail(tail.iter().cloned()),
        );
    }
    let c = Counts::of(&results);
    eprintln!(
        "== {} ({}) {}: {} in {:.1} s",
        target.name,
        ran.accel,
        runner.name(),
        c.closing_line(),
        ran.seconds
    );
    RunnerRun {
        results,
        accel: ran.accel,
        seconds: ran.seconds,
        vm_failure: ran.vm_failure,
    }
}

/// One kernel's runs, every runner's results in one report, and its KTAP
/// file in the run's directory.
pub fn kernel_run(session: &Session, target: &Target, runs: Vec<RunnerRun>) -> Result<KernelRun> {
    let kr = KernelRun {
        kernel: target.name.clone(),
        accel: runs
            .first()
            .map_or_else(|| "not booted".into(), |r| r.accel.clone()),
        seconds: runs.iter().map(|r| r.seconds).sum(),
        results: runs.into_iter().flat_map(|r| r.results).collect(),
    };
    let path = session.run_dir().join(format!("{}.ktap", kr.kernel));
    fs::write(&path, report::ktap(&kr)).with_context(|| format!("writing {}", path.display()))?;
    Ok(kr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpf_cis_config_and_all_outlast_a_lean_boots_limit() {
        assert_eq!(default_timeout(false, KernelConfig::Lean), None);
        assert_eq!(
            default_timeout(false, KernelConfig::BpfCi),
            Some(BPF_CI_TIMEOUT_SECS)
        );
        assert_eq!(
            default_timeout(true, KernelConfig::BpfCi),
            Some(ALL_TIMEOUT_SECS)
        );
        assert_eq!(
            default_timeout(true, KernelConfig::Lean),
            Some(ALL_TIMEOUT_SECS)
        );
    }

    fn series(patch_files: &[&str], variants: &[(&str, usize)]) -> Series {
        Series {
            patches: patch_files
                .iter()
                .enumerate()
                .map(|(i, f)| Patch {
                    name: format!("{i}.patch"),
                    path: PathBuf::new(),
                    sha256: String::new(),
                    files: vec![f.to_string()],
                })
                .collect(),
            variants: variants
                .iter()
                .map(|(n, k)| Variant {
                    name: n.to_string(),
                    patches: *k,
                })
                .collect(),
            base: Default::default(),
            baseline: 0,
        }
    }

    #[test]
    fn another_llvm_builds_in_a_directory_of_its_own_and_19_in_the_old_one() {
        let (lean, bpfci) = (KernelConfig::Lean, KernelConfig::BpfCi);
        assert_eq!(work_name(lean, Llvm(19)), "kselftest");
        assert_eq!(work_name(bpfci, Llvm(19)), "kselftest-bpfci");
        assert_eq!(work_name(lean, Llvm(18)), "kselftest-llvm18");
        assert_eq!(work_name(bpfci, Llvm(20)), "kselftest-bpfci-llvm20");
    }

    #[test]
    fn test_progs_comes_from_the_start_or_the_variant_with_every_change_under_tools() {
        let kernel_only = series(
            &["kernel/a.c", "kernel/b.c"],
            &[("patched", 1), ("prefault", 2)],
        );
        assert_eq!(test_progs_flavor(&kernel_only), Flavor::from_name("base"));
        // On a Debian baseline: the release as shipped.
        let mut on_baseline = series(
            &["kernel/a.c", "kernel/b.c"],
            &[("mainline", 1), ("direct", 2)],
        );
        on_baseline.baseline = 1;
        assert_eq!(
            test_progs_flavor(&on_baseline),
            Flavor::from_name("mainline")
        );
        let tools_later = series(
            &["kernel/a.c", "tools/testing/x.c", "kernel/b.c"],
            &[("patched", 1), ("tests", 2), ("last", 3)],
        );
        assert_eq!(test_progs_flavor(&tools_later), Flavor::from_name("tests"));
    }
}
