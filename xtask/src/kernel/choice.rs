//! A run's kernels, chosen once: its `--kernel` words expanded against
//! the series, each kernel's side of the test plan taken from `--claim`,
//! and bad words and claims refused before anything is built. Every later
//! step (building, booting, what the guest is told it runs) reads the
//! result; none expands a word or applies a claim again.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use guest_common::protocol::PLAN_KERNELS;

use super::claim::Claims;
use super::own_series::{self, Suite};
use super::series::Series;
use super::{expand_word, known_words, Flavor, SourceConfig};

/// The side the source's base is held to without a claim: the tree
/// before a series is taken to map eagerly, as every kernel before 7.3.
const BASE_SIDE: &str = "eager";

/// The side a bzImage given by path plays without a claim: a kernel of
/// today, with the lazy mapping merged.
const OWN_KERNEL_SIDE: &str = "mainline";

/// How a suite holds its kernels to the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sides {
    /// The plan (vmtest): every kernel plays a side the plan knows: its
    /// own for this series' kernels, a claim's for any other (the
    /// source's base eager without one), and a claim that holds no kernel
    /// of the run is refused.
    Plan,
    /// run and kselftest: a built kernel plays itself, a bzImage by path
    /// its claim (mainline without one).
    Own,
    /// bench, fuzz and mutants: as `Own`, of this series' own kernels
    /// only; another series, another word or an unclaimed bzImage is
    /// refused in the suite's words (`own_series`).
    OwnSeries(&'static Suite),
}

/// The kernels of a run, in the order their words named them, and the
/// series they were chosen from.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub series: Series,
    pub kernels: Vec<ChosenKernel>,
}

/// One kernel of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct ChosenKernel {
    pub made: Made,
    /// The plan's kernel its guest is told it is (`bpflab.kernel`).
    pub plays: Flavor,
}

/// What a chosen kernel is.
#[derive(Debug, Clone, PartialEq)]
pub enum Made {
    /// Built from the source and the series (or taken from a bundle).
    Built(Flavor),
    /// A bzImage of the user's own, by the path `--kernel` gave.
    Image(PathBuf),
}

/// Chooses the kernels `words` name, each held to its side by `claim`
/// as `sides` says; a kernel two words name is chosen once.
pub fn choose(
    source: &SourceConfig,
    words: &[String],
    claim: Option<&str>,
    sides: Sides,
) -> Result<Chosen> {
    let series = source.series()?;
    let claims = Claims::parse(claim)?;
    if let Sides::OwnSeries(suite) = sides {
        // A file a claim holds to a variant is left to the path check.
        let taken = |w: &&String| {
            !(suite.claimed_images && claim.is_some() && expand_word(w, &series).is_none())
        };
        let own: Vec<String> = words.iter().filter(taken).cloned().collect();
        own_series::check(suite, source, &series, &own)?;
    }
    let branch = source.git.is_some();
    let mut kernels: Vec<ChosenKernel> = Vec::new();
    // Every name a KERNEL=SIDE may give, and the kernels the plan does
    // not know, for the check that each claim holds something.
    let (mut names, mut unknown) = (Vec::new(), Vec::new());
    for word in words {
        let Some(flavors) = expand_word(word, &series) else {
            let path = own_kernel_path(word, &series)?;
            let file = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let side = claims.side_of(&[word, &file]).unwrap_or(OWN_KERNEL_SIDE);
            kernels.push(ChosenKernel {
                made: Made::Image(path.to_path_buf()),
                plays: Flavor::from_name(side),
            });
            names.extend([word.clone(), file]);
            unknown.push(word.clone());
            continue;
        };
        for flavor in flavors {
            names.push(flavor.name().to_string());
            if !knows(&flavor, branch) {
                unknown.push(flavor.name().to_string());
            }
            let plays = match sides {
                Sides::Plan => held_to(word, &flavor, (&claims, branch))?,
                Sides::Own | Sides::OwnSeries(_) => flavor.clone(),
            };
            let made = Made::Built(flavor);
            if !kernels.iter().any(|k| k.made == made) {
                kernels.push(ChosenKernel { made, plays });
            }
        }
    }
    if sides == Sides::Plan {
        claims_hold_something(&claims, &names, &unknown)?;
    }
    Ok(Chosen { series, kernels })
}

/// A `--kernel` word that names no kernel of `series`: the path of a
/// bzImage file, or an error that says what the word may be.
pub fn own_kernel_path<'a>(word: &'a str, series: &Series) -> Result<&'a Path> {
    let p = Path::new(word);
    if !p.is_file() {
        bail!(
            "--kernel {word}: not one of {}, nor an existing bzImage file",
            known_words(series)
        );
    }
    Ok(p)
}

/// Whether the plan knows `flavor` as this series' own kernel; a
/// branch's variants are the developer's whatever their names (a branch
/// `dev/prefault` is not this series' prefault).
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
    use guest_common::protocol::PLAN_KERNELS;

    /// The kernels `vmtest` with these arguments (and `--patches dir`)
    /// chooses.
    fn choose_vmtest(dir: &std::path::Path, args: &[&str]) -> Result<Chosen, String> {
        let mut argv = vec!["x", "vmtest"];
        argv.extend(args);
        argv.extend(["--patches", dir.to_str().unwrap()]);
        let Command::Vmtest(a) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not vmtest")
        };
        let boot = a.vm.boot();
        let source = a.source.config().unwrap();
        choose(&source, &boot.kernels, boot.claim.as_deref(), Sides::Plan)
            .map_err(|e| format!("{e:#}"))
    }

    /// Only whether `choose_vmtest` chose.
    fn check_vmtest(dir: &std::path::Path, args: &[&str]) -> Result<(), String> {
        choose_vmtest(dir, args).map(drop)
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
    }

    /// A `--patches` directory of another series, its one variant named
    /// after a branch (`lazy-flag`), and an empty file `image` beside it.
    fn other_series(image: &str) -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = crate::util::tempdir();
        fs::write(
            dir.join("1.patch"),
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n",
        )
        .unwrap();
        fs::write(dir.join("series"), "[lazy-flag]\n1.patch\n").unwrap();
        let image = dir.join(image);
        fs::write(&image, "").unwrap();
        (dir, image)
    }

    #[test]
    fn another_series_variant_needs_a_claim_and_a_word_naming_nothing_is_refused() {
        let (dir, image) = other_series("bzImage");
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

    /// What each chosen kernel is and what it plays: for the plan another
    /// series' variant plays its claim while it stays what it is; for the
    /// other suites it plays itself. A kernel two words name is chosen
    /// once, and a bzImage plays its claim.
    #[test]
    fn each_kernel_is_chosen_once_with_what_it_is_and_what_it_plays() {
        let (dir, image) = other_series("m.bzImage");
        let image = image.to_str().unwrap().to_string();
        let words = format!("all,lazy-flag,{image}");
        let chosen = choose_vmtest(
            &dir,
            &[
                "--kernel",
                &words,
                "--claim",
                "lazy-flag=direct,m.bzImage=prefault",
            ],
        )
        .unwrap();
        let seen: Vec<(Made, &str)> = chosen
            .kernels
            .iter()
            .map(|k| (k.made.clone(), k.plays.name()))
            .collect();
        assert_eq!(
            seen,
            [
                (Made::Built(Flavor::from_name("eager")), "eager"),
                (Made::Built(Flavor::from_name("mainline")), "mainline"),
                (Made::Built(Flavor::from_name("lazy-flag")), "direct"),
                (Made::Image(image.clone().into()), "prefault"),
            ]
        );
        let Command::Vmtest(a) = Cli::try_parse_from([
            "x",
            "vmtest",
            "--kernel",
            "all",
            "--patches",
            dir.to_str().unwrap(),
        ])
        .unwrap()
        .command
        else {
            panic!("not vmtest")
        };
        let own = choose(
            &a.source.config().unwrap(),
            &["all".into()],
            None,
            Sides::Own,
        )
        .unwrap();
        let plays: Vec<&str> = own.kernels.iter().map(|k| k.plays.name()).collect();
        assert_eq!(plays, ["eager", "mainline", "lazy-flag"]);
        fs::remove_dir_all(dir).unwrap();
    }
}
