//! Which side of the plan's P/U cases each kernel of a run is held to.
//! Base and the variants the plan knows (`PLAN_KERNELS`: this series')
//! are held to their own; any other kernel to `--claim`'s: a variant of
//! another series (a branch's `lazy-flag`) only when `--claim` says which,
//! a bzImage given by path to patched unless it says otherwise.

use anyhow::{bail, Result};
use guest_common::protocol::PLAN_KERNELS;

use crate::kernel::series::Series;
use crate::kernel::{self, Flavor, SourceConfig};
use crate::vm::targets::{self, BootConfig, Target};

/// Before anything is built: every kernel `--kernel` names is held to a
/// side of the plan, and a word that names no kernel is refused.
pub(super) fn check(source: &SourceConfig, boot: &BootConfig) -> Result<()> {
    let series = Series::load(&source.patches)?;
    for word in &boot.kernels {
        match kernel::expand_word(word, &series) {
            Some(flavors) => {
                for flavor in &flavors {
                    held_to(word, flavor, (boot.claim.as_deref(), is_branch(source)))?;
                }
            }
            None => {
                targets::own_kernel_path(word, &series)?;
            }
        }
    }
    Ok(())
}

/// The targets with the plan kernel each is held to as its flavor, which
/// the guest reads.
pub(super) fn hold(
    targets: &mut [Target],
    source: &SourceConfig,
    claim: Option<&str>,
) -> Result<()> {
    for t in targets {
        t.flavor = held_to(&t.name, &t.flavor, (claim, is_branch(source)))?;
    }
    Ok(())
}

/// A branch's variants are the developer's whatever their names: a branch
/// `dev/prefault` is not this series' prefault.
fn is_branch(source: &SourceConfig) -> bool {
    source.git.is_some()
}

/// The plan kernel `flavor` (named by the `--kernel` word `word`) is held
/// to: its own when the plan knows it (base always; a variant unless it
/// is a branch's), else the claim.
fn held_to(word: &str, flavor: &Flavor, (claim, branch): (Option<&str>, bool)) -> Result<Flavor> {
    if flavor.is_base() || (!branch && PLAN_KERNELS.contains(&flavor.name())) {
        return Ok(flavor.clone());
    }
    let Some(claim) = claim else {
        // `all` names several: say which of them the plan does not know.
        let which = match flavor.name() {
            name if name == word => String::new(),
            name => format!(" ({name})"),
        };
        let (last, rest) = PLAN_KERNELS.split_last().expect("the plan knows kernels");
        bail!(
            "--kernel {word}{which}: the plan knows {} and {last}; add --claim {} to say which it should behave as",
            rest.join(", "),
            PLAN_KERNELS.join("|")
        );
    };
    Ok(Flavor::from_name(claim))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    /// `check` of `vmtest` with these arguments (and `--patches dir`).
    fn check_vmtest(dir: &std::path::Path, args: &[&str]) -> Result<(), String> {
        let mut argv = vec!["x", "vmtest"];
        argv.extend(args);
        argv.extend(["--patches", dir.to_str().unwrap()]);
        let Command::Vmtest(a) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not vmtest")
        };
        check(&a.source.config().unwrap(), &a.vm.boot()).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn the_series_variants_are_held_to_their_own_and_others_to_the_claim() {
        let held =
            |name: &str, claim, branch| held_to(name, &Flavor::from_name(name), (claim, branch));
        for name in PLAN_KERNELS {
            assert_eq!(held(name, None, false).unwrap().name(), name);
            // --claim is for kernels the plan does not know.
            assert_eq!(held(name, Some("base"), false).unwrap().name(), name);
        }
        // A branch's variant is the developer's, whatever its name.
        assert!(
            held("prefault", None, true).is_err(),
            "a branch dev/prefault"
        );
        assert_eq!(held("prefault", Some("base"), true).unwrap(), Flavor::Base);
        assert_eq!(held("base", None, true).unwrap(), Flavor::Base);
        let lazy = Flavor::from_name("lazy-flag");
        assert_eq!(
            held_to("all", &lazy, (Some("base"), false)).unwrap(),
            Flavor::Base
        );
        let err = held_to("all", &lazy, (None, false))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--kernel all (lazy-flag): the plan knows"),
            "{err}"
        );
        let mut ran = vec![Target {
            name: "lazy-flag-debug".into(),
            bzimage: "lazy-flag-debug.bzImage".into(),
            flavor: lazy,
            debug: true,
            vmlinux: None,
        }];
        let source = crate::kernel::SourceConfig {
            kernel_src: None,
            cache_dir: "/nonexistent".into(),
            patches: "/nonexistent".into(),
            jobs: 1,
            git: None,
        };
        hold(&mut ran, &source, Some("prefault")).unwrap();
        assert_eq!(ran[0].flavor.name(), "prefault");
    }

    #[test]
    fn another_series_variant_needs_a_claim_and_a_word_naming_nothing_is_refused() {
        let dir = crate::util::tempdir();
        fs::write(
            dir.join("1.patch"),
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n",
        )
        .unwrap();
        // A branch's series: its one variant named after the branch.
        fs::write(dir.join("series"), "[lazy-flag]\n1.patch\n").unwrap();
        let image = dir.join("bzImage");
        fs::write(&image, "").unwrap();
        let check = |args: &[&str]| check_vmtest(&dir, args);
        assert_eq!(
            check(&["--kernel", "lazy-flag"]),
            Err("--kernel lazy-flag: the plan knows base, patched, direct, prefault and adaptive; \
                 add --claim base|patched|direct|prefault|adaptive to say which it should behave as"
                .into())
        );
        assert_eq!(check(&["--kernel", "all", "--claim", "patched"]), Ok(()));
        assert_eq!(check(&["--kernel", "base"]), Ok(()));
        assert_eq!(check(&["--kernel", image.to_str().unwrap()]), Ok(()));
        let err = check(&["--kernel", "prefault", "--claim", "patched"]).unwrap_err();
        assert!(
            err.starts_with("--kernel prefault: not one of base, lazy-flag (the series' variants)"),
            "{err}"
        );
        fs::remove_dir_all(dir).unwrap();
        let own = crate::project::root().join("patches");
        assert_eq!(check_vmtest(&own, &["--kernel", "all"]), Ok(()));
    }
}
