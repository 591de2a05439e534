//! Which LLVM builds the BPF selftests. Debian installs each major
//! version in `/usr/lib/llvm-N`, whose `bin/` has the unversioned names
//! the selftests' Makefile calls (clang, llc, llvm-strip) and the ld.lld
//! clang looks up beside itself. `--llvm N` picks one; without it, the
//! newest installed that is new enough, else [`DEFAULT`], which the
//! host-tools check then installs.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// Where Debian installs each LLVM.
pub const LIB: &str = "/usr/lib";

/// The LLVM installed when none new enough is: Debian 13's, which the
/// harness always built with (its build keeps the work directory's
/// old name, `kselftest::work_name`).
pub const DEFAULT: Llvm = Llvm(19);

/// The oldest LLVM that builds all five runners from 6.12's selftests:
/// the Makefile builds test_progs-cpuv4 (a runner of BPF CI's and of
/// ci's) only with a clang that knows `-mcpu=v4`, which came in LLVM 18,
/// and progs/ is written for 18 (pyperf180.c, verifier_spill_fill.c's
/// "LLVM-18+"). An older clang builds the rest, and the build would fail
/// later on the runner it lacks, so it is refused here.
pub const MINIMUM: u32 = 18;

/// An LLVM, by major version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Llvm(pub u32);

impl Llvm {
    /// The directory make finds it in, first on its PATH.
    pub fn bin(self) -> PathBuf {
        Path::new(LIB).join(format!("llvm-{}", self.0)).join("bin")
    }

    pub fn clang(self) -> PathBuf {
        self.bin().join("clang")
    }
}

/// `--llvm`'s parser: a major version, [`MINIMUM`] or later.
pub fn parse_version(text: &str) -> Result<u32, String> {
    let n: u32 = text
        .parse()
        .map_err(|_| format!("not a major version of LLVM, such as {}", DEFAULT.0))?;
    if n < MINIMUM {
        return Err(format!(
            "LLVM {n} is too old for the BPF selftests: test_progs-cpuv4 needs -mcpu=v4, LLVM {MINIMUM} or later; leave --llvm out for the newest installed"
        ));
    }
    Ok(n)
}

/// The versions `lib` holds a whole toolchain of (`llvm-N/bin/` with
/// clang, ld.lld and llc, what the selftests' Makefile calls), newest
/// first; a directory without one of them (a leftover of llvm-N-tools, a
/// clang without lld) holds none.
pub fn installed(lib: &Path) -> Vec<u32> {
    let mut found: Vec<u32> = fs::read_dir(lib)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
        .unwrap_or_default()
        .iter()
        .filter_map(|name| name.to_str()?.strip_prefix("llvm-")?.parse().ok())
        .filter(|n| {
            let bin = lib.join(format!("llvm-{n}/bin"));
            ["clang", "ld.lld", "llc"]
                .iter()
                .all(|t| bin.join(t).is_file())
        })
        .collect();
    found.sort_unstable_by(|a, b| b.cmp(a));
    found
}

/// The LLVM without `--llvm`: the newest of `installed` that is new
/// enough, else [`DEFAULT`].
pub fn default_for(installed: &[u32]) -> Llvm {
    installed
        .iter()
        .copied()
        .filter(|&n| n >= MINIMUM)
        .max()
        .map_or(DEFAULT, Llvm)
}

/// The LLVM to build with: `flag`'s (already held to [`MINIMUM`] by its
/// parser), or the default for what is `installed`. A given one that is
/// missing is installed with the other host tools when `can_install`;
/// otherwise it is an error naming the fix.
pub fn choose(flag: Option<u32>, installed: &[u32], can_install: bool) -> Result<Llvm> {
    let default = default_for(installed);
    let Some(n) = flag else {
        return Ok(default);
    };
    if !installed.contains(&n) && !can_install {
        bail!(
            "--llvm {n}: {} is missing; apt-get install clang-{n} lld-{n} llvm-{n}, or leave --llvm out for clang {}",
            Llvm(n).clang().display(),
            default.0
        );
    }
    Ok(Llvm(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_newest_new_enough_else_19() {
        assert_eq!(default_for(&[14, 19]), Llvm(19));
        assert_eq!(default_for(&[18, 20, 19]), Llvm(20));
        assert_eq!(default_for(&[18]), Llvm(18));
        assert_eq!(default_for(&[14, 17]), DEFAULT);
        assert_eq!(default_for(&[]), DEFAULT);
        assert_eq!(choose(None, &[14, 19], false).unwrap(), Llvm(19));
    }

    #[test]
    fn installed_versions_are_those_with_a_clang() {
        let lib = crate::util::tempdir();
        for (dir, clang) in [("llvm-14", false), ("llvm-19", true), ("llvm-20", true)] {
            fs::create_dir_all(lib.join(dir).join("bin")).unwrap();
            if clang {
                for tool in ["clang", "ld.lld", "llc"] {
                    fs::write(lib.join(dir).join("bin").join(tool), "").unwrap();
                }
            }
        }
        fs::create_dir_all(lib.join("llvm-x/bin")).unwrap();
        fs::write(lib.join("llvm-x/bin/clang"), "").unwrap();
        fs::write(lib.join("llvm-21"), "").unwrap();
        // A clang without lld is no toolchain.
        fs::create_dir_all(lib.join("llvm-22/bin")).unwrap();
        fs::write(lib.join("llvm-22/bin/clang"), "").unwrap();
        assert_eq!(installed(&lib), [20, 19]);
        assert_eq!(installed(&lib.join("none")), Vec::<u32>::new());
        fs::remove_dir_all(lib).unwrap();
    }

    #[test]
    fn a_given_llvm_is_taken_installed_or_installable_else_named_with_the_fix() {
        assert_eq!(choose(Some(18), &[18, 19], false).unwrap(), Llvm(18));
        assert_eq!(choose(Some(20), &[19], true).unwrap(), Llvm(20));
        let err = choose(Some(18), &[14, 19], false).unwrap_err().to_string();
        assert_eq!(
            err,
            "--llvm 18: /usr/lib/llvm-18/bin/clang is missing; apt-get install clang-18 \
             lld-18 llvm-18, or leave --llvm out for clang 19"
        );
    }

    #[test]
    fn too_old_an_llvm_is_refused_in_one_line() {
        assert_eq!(parse_version("18"), Ok(18));
        assert_eq!(parse_version("21"), Ok(21));
        let err = parse_version("17").unwrap_err();
        assert!(
            err.starts_with("LLVM 17 is too old for the BPF selftests: test_progs-cpuv4"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
        assert!(parse_version("19.1").is_err());
    }
}
