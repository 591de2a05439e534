//! The suites that test this series' array-map mmap (bench, fuzz,
//! mutants) take its own kernels only: their targets, models and plan
//! sides are its variants'. Another series (a `--patches` directory whose
//! variants have other names, a branch through `--base`) or a `--kernel`
//! word other than base, a variant, `all` or `both` is refused in one
//! line, before anything is built, naming what the suite takes and what
//! to use instead.

use anyhow::{bail, Result};
use guest_common::protocol::PLAN_KERNELS;

use super::series::Series;
use super::{names_several, SourceConfig};

/// A suite of this series' own, as its refusal names it.
#[derive(Debug, PartialEq, Eq)]
pub struct Suite {
    /// What it tests: "bench measures this series' array-map mmap".
    pub tests: &'static str,
    /// What to use for another patch: "use `cargo xtask run ...` ...".
    pub instead: &'static str,
    /// Whether it takes a bzImage by path whose `--claim` names the
    /// variant it is held to (fuzz: a mutant's kernel, to replay its
    /// reproducer); without a claim a file is refused, a model must be
    /// chosen, not defaulted.
    pub claimed_images: bool,
}

/// Refuses `source`'s series unless it is this one's (its variants'
/// names are the plan's), and a `--kernel` word in `words` that is not
/// base, a variant of this series, `all` or `both`.
pub fn check(
    suite: &Suite,
    source: &SourceConfig,
    series: &Series,
    words: &[String],
) -> Result<()> {
    let own = own_variants().join(", ");
    let other = other_series(source, series)
        .map(|what| format!("{what}, not this series' variants ({own})"));
    let word = words.iter().find(|w| !own_word(w));
    // all and both take the source's base, which only a Debian source's
    // baseline makes this series' eager.
    let several = words.iter().find(|w| names_several(w));
    let no_eager = several
        .filter(|_| source.baseline_dir().is_none())
        .map(|w| {
            format!(
            "--kernel {w} takes the tree's own base, no kernel of the plan (only a Debian source's \
             baseline has eager and mainline): name the variants, or use --source debian:7.3"
        )
        });
    let refused = other
        .or(no_eager)
        .or_else(|| word.map(|w| format!("--kernel {w} is not one of eager, {own}, all or both")));
    match refused {
        Some(why) => bail!("{}: {why}; {}", suite.tests, suite.instead),
        None => Ok(()),
    }
}

/// This series' variants: the plan's kernels after eager.
fn own_variants() -> &'static [&'static str] {
    &PLAN_KERNELS[1..]
}

/// eager, a variant of this series, `all` or `both`.
fn own_word(word: &str) -> bool {
    PLAN_KERNELS.contains(&word) || names_several(word)
}

/// What makes `series` another than this one, if anything does: a
/// branch, or a variant of another name.
pub fn other_series(source: &SourceConfig, series: &Series) -> Option<String> {
    let names = series.variant_names();
    if source.git.is_some() {
        return Some(format!(
            "--base makes your branch the series ({})",
            names.join(", ")
        ));
    }
    let others: Vec<&str> = names
        .into_iter()
        .filter(|n| !own_variants().contains(n))
        .collect();
    (!others.is_empty()).then(|| {
        format!(
            "--patches {} builds {}",
            source.patches.display(),
            others.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::{Path, PathBuf};

    use super::*;

    const BENCH: Suite = Suite {
        tests: "bench measures this series' array-map mmap",
        instead: "use run --expect",
        claimed_images: false,
    };

    /// `check` of `words`, with the source's series loaded.
    fn checked(suite: &Suite, source: &SourceConfig, words: &[String]) -> Result<()> {
        check(suite, source, &source.series()?, words)
    }

    /// A source of the series in `patches`, a branch's with `git`.
    fn source(patches: &Path, git: bool) -> SourceConfig {
        SourceConfig {
            // A branch's source is a checkout of the developer's.
            kernel_src: git.then(|| PathBuf::from("/nonexistent")),
            debian: Default::default(),
            cache_dir: PathBuf::from("/nonexistent"),
            patches: patches.to_path_buf(),
            jobs: 1,
            git: git.then(|| super::super::git::GitRange {
                base: "0".repeat(40),
                head: "HEAD".into(),
                head_commit: "1".repeat(40),
                clean: false,
                cuts: Vec::new(),
            }),
        }
    }

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn this_series_and_its_words_are_taken() {
        let own = crate::project::root().join("patches");
        let series = crate::kernel::project_series().unwrap();
        assert_eq!(series.variant_names(), own_variants());
        let all = words(&[
            "eager", "mainline", "direct", "prefault", "adaptive", "all", "both",
        ]);
        assert!(checked(&BENCH, &source(&own, false), &all).is_ok());
        let err = checked(
            &BENCH,
            &source(&own, false),
            &words(&["eager", "lazy-flag"]),
        );
        assert_eq!(
            err.unwrap_err().to_string(),
            "bench measures this series' array-map mmap: --kernel lazy-flag is not one of \
             eager, mainline, direct, prefault, adaptive, all or both; use run --expect"
        );
        let err = checked(&BENCH, &source(&own, false), &words(&["/tmp/bzImage"]));
        assert!(err.is_err(), "a bzImage is no kernel of the series");
        // A tree of the developer's has no eager: all would take its base.
        let mut tree = source(&own, false);
        tree.kernel_src = Some(PathBuf::from("/src/linux"));
        let err = checked(&BENCH, &tree, &words(&["all"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--kernel all takes the tree's own base"),
            "{err}"
        );
        assert!(checked(&BENCH, &tree, &words(&["direct", "adaptive"])).is_ok());
    }

    #[test]
    fn another_series_is_refused_in_one_line() {
        let dir = crate::util::tempdir();
        fs::write(
            dir.join("1.patch"),
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n",
        )
        .unwrap();
        fs::write(
            dir.join("2.patch"),
            "--- a/g\n+++ b/g\n@@ -1 +1 @@\n-x\n+y\n",
        )
        .unwrap();
        // This series' names, fewer of them: a copy with an edit is taken.
        fs::write(
            dir.join("series"),
            "[direct]\n1.patch\n[prefault]\n2.patch\n",
        )
        .unwrap();
        assert!(checked(&BENCH, &source(&dir, false), &words(&["all"])).is_ok());
        let branch = checked(&BENCH, &source(&dir, true), &words(&["all"])).unwrap_err();
        assert_eq!(
            branch.to_string(),
            "bench measures this series' array-map mmap: --base makes your branch the series \
             (direct, prefault), not this series' variants (mainline, direct, prefault, adaptive); \
             use run --expect"
        );
        fs::write(dir.join("series"), "1.patch\n[window]\n2.patch\n").unwrap();
        let err = checked(&BENCH, &source(&dir, false), &words(&["eager"])).unwrap_err();
        let says = format!(
            "bench measures this series' array-map mmap: --patches {} builds patched, window, not this \
             series' variants (mainline, direct, prefault, adaptive); use run --expect",
            dir.display()
        );
        assert_eq!(err.to_string(), says);
        assert!(!says.contains('\n'));
        fs::remove_dir_all(dir).unwrap();
    }
}
