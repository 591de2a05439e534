//! Which side of the plan's P/U cases each kernel of a run is held to.
//! This series' own kernels (`PLAN_KERNELS`: eager, mainline and the
//! variants) are held to their own; any other kernel to `--claim`'s
//! (`vm::claim`): a source's `base` to eager unless claimed, a variant of
//! another series (a branch's `lazy-flag`) only when claimed, a bzImage
//! given by path to mainline unless claimed. A claim is never ignored: one
//! that would move this series' kernel to another side, or that holds no
//! kernel of the run, is refused.

use anyhow::{bail, Result};
use guest_common::protocol::PLAN_KERNELS;

use crate::kernel::{self, Flavor, SourceConfig};
use crate::vm::claim::Claims;
use crate::vm::targets::{self, BootConfig, Target};

/// The side the source's base is held to without a claim: the tree
/// before a series is taken to map eagerly, as every kernel before 7.3.
const BASE_SIDE: &str = "eager";

/// Before anything is built: every kernel `--kernel` names is held to a
/// side of the plan, a word that names no kernel is refused, and so is a
/// claim that holds no kernel of the run.
pub(super) fn check(source: &SourceConfig, boot: &BootConfig) -> Result<()> {
    let series = source.series()?;
    let claims = Claims::parse(boot.claim.as_deref())?;
    let mut unknown = Vec::new();
    let mut names = Vec::new();
    for word in &boot.kernels {
        match kernel::expand_word(word, &series) {
            Some(flavors) => {
                for flavor in &flavors {
                    held_to(word, flavor, (&claims, is_branch(source)))?;
                    names.push(flavor.name().to_string());
                    if !knows(flavor, is_branch(source)) {
                        unknown.push(flavor.name().to_string());
                    }
                }
            }
            None => {
                let path = targets::own_kernel_path(word, &series)?;
                let file = path.file_name().unwrap_or_default().to_string_lossy();
                names.extend([word.clone(), file.into_owned()]);
                unknown.push(word.clone());
            }
        }
    }
    claims_hold_something(&claims, &names, &unknown)
}

/// The targets with the plan kernel each is held to as its flavor, which
/// the guest reads.
pub(super) fn hold(
    targets: &mut [Target],
    source: &SourceConfig,
    claim: Option<&str>,
) -> Result<()> {
    let claims = Claims::parse(claim)?;
    for t in targets {
        t.flavor = held_to(&t.name, &t.flavor, (&claims, is_branch(source)))?;
    }
    Ok(())
}

/// A branch's variants are the developer's whatever their names: a branch
/// `dev/prefault` is not this series' prefault.
fn is_branch(source: &SourceConfig) -> bool {
    source.git.is_some()
}

/// Whether the plan knows `flavor` as this series' own kernel.
fn knows(flavor: &Flavor, branch: bool) -> bool {
    !branch && PLAN_KERNELS.contains(&flavor.name())
}

/// Every `KERNEL=SIDE` names a kernel of the run, and a bare `SIDE` has a
/// kernel the plan does not know to hold.
fn claims_hold_something(claims: &Claims, names: &[String], unknown: &[String]) -> Result<()> {
    for (kernel, side) in &claims.named {
        if !names.contains(kernel) {
            bail!(
                "--claim {kernel}={side}: no kernel of this run is called {kernel}; it runs {}",
                names.join(", ")
            );
        }
    }
    if let (Some(side), true) = (&claims.any, unknown.is_empty()) {
        bail!(
            "--claim {side}: every kernel of this run ({}) is this series' own, held to its own side; \
             --claim is for a source's base, a branch's variants and a bzImage by path",
            names.join(", ")
        );
    }
    Ok(())
}

/// The plan kernel `flavor` (named by the `--kernel` word `word`) is held
/// to: its own when the plan knows it (unless a claim would move it, which
/// is refused), else its claim; base without one is held to eager.
fn held_to(word: &str, flavor: &Flavor, (claims, branch): (&Claims, bool)) -> Result<Flavor> {
    let name = flavor.name();
    if knows(flavor, branch) {
        match claims.named(&[name]) {
            Some(side) if side != name => bail!(
                "--claim {name}={side}: {name} is this series' own kernel, held to its own side; \
                 --claim is for a source's base, a branch's variants and a bzImage by path"
            ),
            _ => return Ok(flavor.clone()),
        }
    }
    if let Some(side) = claims.side_of(&[name]) {
        return Ok(Flavor::from_name(side));
    }
    if flavor.is_base() {
        return Ok(Flavor::from_name(BASE_SIDE));
    }
    // `all` names several: say which of them the plan does not know.
    let which = match name {
        n if n == word => String::new(),
        n => format!(" ({n})"),
    };
    let (last, rest) = PLAN_KERNELS.split_last().expect("the plan knows kernels");
    bail!(
        "--kernel {word}{which}: the plan knows {} and {last}; add --claim {}, or --claim {name}=SIDE, to say which it should behave as",
        rest.join(", "),
        PLAN_KERNELS.join("|")
    )
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
    fn the_series_kernels_are_held_to_their_own_and_others_to_the_claim() {
        let parse = |c: Option<&str>| Claims::parse(c).unwrap();
        let held = |name: &str, claim: Option<&str>, branch| {
            held_to(name, &Flavor::from_name(name), (&parse(claim), branch))
                .map(|f| f.name().to_string())
                .map_err(|e| e.to_string())
        };
        for name in PLAN_KERNELS {
            assert_eq!(held(name, None, false).unwrap(), name);
            // A claim for every unknown kernel leaves the series' own.
            assert_eq!(held(name, Some("eager"), false).unwrap(), name);
            // One that names it, to its own side, is what it is.
            let own = format!("{name}={name}");
            assert_eq!(held(name, Some(&own), false).unwrap(), name);
        }
        // One that would move it is refused, never ignored.
        let err = held("direct", Some("direct=mainline"), false).unwrap_err();
        assert!(
            err.starts_with("--claim direct=mainline: direct is this series' own kernel"),
            "{err}"
        );
        // A branch's variant is the developer's, whatever its name.
        assert!(
            held("prefault", None, true).is_err(),
            "a branch dev/prefault"
        );
        assert_eq!(held("prefault", Some("eager"), true).unwrap(), "eager");
        // A tree's base: eager unless claimed, and a claim applies to it.
        assert_eq!(held("base", None, true).unwrap(), "eager");
        assert_eq!(held("base", Some("mainline"), false).unwrap(), "mainline");
        assert_eq!(
            held("base", Some("base=mainline"), true).unwrap(),
            "mainline"
        );
        let lazy = Flavor::from_name("lazy-flag");
        let claims = parse(Some("base=mainline,lazy-flag=direct"));
        assert_eq!(
            held_to("all", &lazy, (&claims, true)).unwrap().name(),
            "direct"
        );
        let err = held_to("all", &lazy, (&parse(None), false))
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
            provenance: crate::vm::targets::Provenance::Bundle,
        }];
        let source = crate::kernel::SourceConfig {
            kernel_src: None,
            debian: Default::default(),
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
            Err("--kernel lazy-flag: the plan knows eager, mainline, direct, prefault and adaptive; \
                 add --claim eager|mainline|direct|prefault|adaptive, or --claim lazy-flag=SIDE, \
                 to say which it should behave as"
                .into())
        );
        assert_eq!(check(&["--kernel", "all", "--claim", "mainline"]), Ok(()));
        assert_eq!(
            check(&["--kernel", "all", "--claim", "lazy-flag=direct"]),
            Ok(())
        );
        assert_eq!(check(&["--kernel", "eager"]), Ok(()));
        assert_eq!(check(&["--kernel", image.to_str().unwrap()]), Ok(()));
        let err = check(&["--kernel", "prefault", "--claim", "mainline"]).unwrap_err();
        assert!(
            err.starts_with(
                "--kernel prefault: not one of eager, mainline, lazy-flag (the series' variants)"
            ),
            "{err}"
        );
        let err = check(&["--kernel", "eager", "--claim", "nope=eager"]).unwrap_err();
        assert!(
            err.starts_with("--claim nope=eager: no kernel of this run is called nope"),
            "{err}"
        );
        fs::remove_dir_all(dir).unwrap();
        let own = crate::project::root().join("patches");
        assert_eq!(check_vmtest(&own, &["--kernel", "all"]), Ok(()));
        // This series' own kernels leave a claim for others nothing to hold.
        let err =
            check_vmtest(&own, &["--kernel", "eager,mainline", "--claim", "mainline"]).unwrap_err();
        assert!(
            err.starts_with(
                "--claim mainline: every kernel of this run (eager, mainline) is this series' own"
            ),
            "{err}"
        );
    }
}
