//! `cargo xtask check-patches`: the series through a maintainer's first
//! gates (`kernel/hygiene.rs`): checkpatch --strict with no errors,
//! warnings or checks; `git am` onto a clean git tree of the source; and
//! no W=1 or sparse warning in the objects it touches that the base tree
//! does not also have.

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::CheckPatchesArgs;
use crate::kernel::each_patch::{self, PatchBuild};
use crate::kernel::{hygiene, PreparedTrees};
use crate::{hostdeps, kernel, project};

pub fn run(args: CheckPatchesArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    hostdeps::ensure_kernel_build(&source)?;
    hostdeps::ensure(hostdeps::PATCH_CHECKS)
        .context("checking the host tools for the patch checks")?;
    // Mirrored and patched, not built: the checks compile what they need.
    let trees = kernel::prepare_trees(&source)?;
    let series = &trees.series;
    let mut failed = Vec::new();
    for r in hygiene::checkpatch(&trees.pristine, series)? {
        crate::status!("checkpatch", "--strict {}: {}", r.patch, r.total);
        for id in &r.upstream_ids {
            crate::status!(
                "checkpatch",
                "    the warning UNKNOWN_COMMIT_ID {id}: an upstream commit this tree (a tarball, no history) lacks; \
                 its Fixes: tag is checked against hygiene::UPSTREAM_COMMITS instead"
            );
        }
        if !r.maintained.is_empty() {
            crate::status!(
                "checkpatch",
                "    the warning FILE_PATH_CHANGES: MAINTAINERS names {} under an entry already",
                r.maintained.join(", ")
            );
        }
        if !r.clean {
            eprintln!("{}", r.report.trim_end());
            failed.push(format!("checkpatch --strict {}", r.patch));
        }
    }
    match hygiene::git_am(&trees.pristine, series, &trees.source_dir) {
        Ok(()) => crate::status!(
            "git am",
            "the series applies to a clean git tree of the source"
        ),
        Err(e) => {
            eprintln!("{e:#}");
            failed.push("git am".into());
        }
    }
    failed.extend(checked_builds(&trees, source.jobs, args.each)?);
    if failed.is_empty() {
        println!("patch checks: all passed");
        return Ok(ExitCode::SUCCESS);
    }
    println!("patch checks failed: {}", failed.join(", "));
    Ok(ExitCode::from(project::EXIT_TESTS_FAILED))
}

/// The objects the series touches built with W=1 and sparse before and
/// with it, and with `each` at every patch: what failed. A series that
/// touches no object kbuild builds (make given none would build the
/// whole kernel) is said to have nothing built, not passed.
fn checked_builds(trees: &PreparedTrees, jobs: usize, each: bool) -> Result<Vec<String>> {
    let objects = hygiene::objects_of(&trees.series.own_touched_files());
    if objects.is_empty() {
        crate::status!(
            "W=1 + sparse",
            "the series touches no kernel object (tools/ only): nothing to build"
        );
        return Ok(Vec::new());
    }
    let before = hygiene::checked_build(&trees.base, &objects, jobs)?;
    let after = hygiene::checked_build(&trees.patched, &objects, jobs)?;
    let new = hygiene::new_diagnostics(&before, &after);
    crate::status!(
        "W=1 + sparse",
        "{}: {} diagnostic(s) before the series, {} with it, {} new",
        objects.join(" "),
        hygiene::diagnostics(&before).values().sum::<usize>(),
        hygiene::diagnostics(&after).values().sum::<usize>(),
        new.len()
    );
    for d in &new {
        eprintln!("    new: {d}");
    }
    let mut failed = Vec::new();
    if !new.is_empty() {
        failed.push("W=1 + sparse".into());
    }
    if each {
        failed.extend(each_patch(trees, &before, jobs)?);
    }
    Ok(failed)
}

/// Every patch on its own (`--each`): what failed, by patch.
fn each_patch(trees: &PreparedTrees, before: &str, jobs: usize) -> Result<Vec<String>> {
    let mut failed = Vec::new();
    for (patch, built) in each_patch::build_each(trees, before, jobs)? {
        match built {
            PatchBuild::Built { new } if new.is_empty() => crate::status!(
                "each patch",
                "{patch}: builds with W=1 and sparse, nothing new"
            ),
            PatchBuild::Built { new } => {
                crate::status!("each patch", "{patch}: {} new diagnostic(s)", new.len());
                for d in &new {
                    eprintln!("    new: {d}");
                }
                failed.push(format!("{patch} on its own (W=1 + sparse)"));
            }
            PatchBuild::Failed(why) => {
                crate::status!("each patch", "{patch}: does not build");
                eprintln!("{why}");
                failed.push(format!("{patch} on its own (does not build)"));
            }
        }
    }
    Ok(failed)
}
