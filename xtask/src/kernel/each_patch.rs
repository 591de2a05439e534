//! Every patch on its own, as bisecting a series needs: each prefix of
//! the series' own patches in turn, in a tree of its own, with the
//! objects the series touches built with W=1 and sparse (incrementally:
//! a file a prefix leaves as it was keeps its mtime). The first prefix
//! that does not build, or that brings a diagnostic the tree before the
//! series did not have, names its patch.

use anyhow::{ensure, Result};

use super::hygiene;
use super::series::Variant;
use super::{apply, PreparedTrees};

/// What one patch's prefix gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchBuild {
    /// It built; these diagnostics are new against the tree before the
    /// series (empty: clean).
    Built { new: Vec<String> },
    /// It did not build: make's last lines.
    Failed(String),
}

/// Each of the series' own patches with what its prefix gave, in order;
/// `before` is the build output of the same objects in the tree the
/// series applies to. The series must touch an object kbuild builds
/// (`check-patches` says so when it touches none).
pub fn build_each(
    trees: &PreparedTrees,
    before: &str,
    jobs: usize,
) -> Result<Vec<(String, PatchBuild)>> {
    let series = &trees.series;
    let objects = hygiene::objects_of(&series.own_touched_files());
    // make given no object would build the whole kernel.
    ensure!(
        !objects.is_empty(),
        "the series touches no kernel object to build"
    );
    let mut out = Vec::new();
    for (k, patch) in series.own().iter().enumerate() {
        let prefix = series.upto(&Variant {
            name: format!("each-{}", k + 1),
            patches: series.baseline + k + 1,
        });
        apply::prepare_patched(&trees.pristine, &trees.each_patch, &prefix)?;
        let built = match hygiene::checked_build(&trees.each_patch, &objects, jobs) {
            Ok(after) => PatchBuild::Built {
                new: hygiene::new_diagnostics(before, &after),
            },
            Err(e) => PatchBuild::Failed(format!("{e:#}")),
        };
        out.push((patch.name.clone(), built));
    }
    Ok(out)
}
