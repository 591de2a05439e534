//! Kernel configuration: kconfig/ fragments merged onto allnoconfig with
//! the kernel's own scripts/kconfig/merge_config.sh, then checked: every
//! option a fragment asks for must survive olddefconfig.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use xshell::cmd;

use crate::util::last_lines;

/// Fragments for the normal kernels, in merge order.
pub const DEFAULT_FRAGMENTS: &[&str] = &[
    "qemu.config",
    "bpf.config",
    "share.config",
    "selftests.config",
];
/// Added on top for the debug kernels.
pub const DEBUG_FRAGMENT: &str = "debug.config";

pub fn fragments(debug: bool) -> Vec<PathBuf> {
    let dir = crate::project::root().join("kconfig");
    let mut names: Vec<&str> = DEFAULT_FRAGMENTS.to_vec();
    if debug {
        names.push(DEBUG_FRAGMENT);
    }
    names.into_iter().map(|n| dir.join(n)).collect()
}

/// Option name (without CONFIG_) to value; "n" for `# CONFIG_X is not set`.
pub type Options = BTreeMap<String, String>;

/// Parses a .config or a fragment.
pub fn parse(text: &str) -> Options {
    let mut opts = Options::new();
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("# CONFIG_") {
            if let Some(name) = rest.strip_suffix(" is not set") {
                opts.insert(name.to_string(), "n".to_string());
            }
        } else if let Some(rest) = line.strip_prefix("CONFIG_") {
            if let Some((name, value)) = rest.split_once('=') {
                opts.insert(name.to_string(), value.to_string());
            }
        }
    }
    opts
}

/// Requested options whose final value differs, as `CONFIG_X=want (got v)`.
pub fn not_survived(requested: &Options, final_config: &Options) -> Vec<String> {
    requested
        .iter()
        .filter_map(|(name, want)| {
            let got = final_config.get(name).map(String::as_str).unwrap_or("n");
            (got != want).then(|| format!("CONFIG_{name}={want} (got {got})"))
        })
        .collect()
}

/// Hash of the fragments' names and contents, in order.
pub fn fragments_hash(fragments: &[PathBuf]) -> Result<String> {
    let mut h = Sha256::new();
    for f in fragments {
        let text = fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        h.update(f.file_name().unwrap_or_default().as_encoded_bytes());
        h.update([0]);
        h.update(&text);
        h.update([0]);
    }
    Ok(hex::encode(h.finalize()))
}

/// Writes `<build_dir>/.config`: allnoconfig plus the fragments, via the
/// kernel's merge_config.sh, then fails if any requested value was lost.
pub fn configure(tree: &Path, build_dir: &Path, fragments: &[PathBuf], log: &Path) -> Result<()> {
    fs::create_dir_all(build_dir).with_context(|| format!("creating {}", build_dir.display()))?;
    let sh = crate::project::shell()?;
    sh.change_dir(tree);
    let out_name = build_dir
        .file_name()
        .context("build directory has no name")?
        .to_owned();
    let output = cmd!(
        sh,
        "scripts/kconfig/merge_config.sh -n -O {out_name} {fragments...}"
    )
    .quiet()
    .ignore_status()
    .output()
    .context("running scripts/kconfig/merge_config.sh")?;
    let mut text = output.stdout.clone();
    text.extend_from_slice(&output.stderr);
    fs::write(log, &text).with_context(|| format!("writing {}", log.display()))?;
    if !output.status.success() {
        bail!(
            "merge_config.sh failed; see {}:\n{}",
            log.display(),
            last_lines(&String::from_utf8_lossy(&text), 15)
        );
    }
    check_survived(fragments, &build_dir.join(".config"))
}

/// Fails, listing them, if options the fragments ask for are not in `config`.
pub fn check_survived(fragments: &[PathBuf], config: &Path) -> Result<()> {
    let mut requested = Options::new();
    for f in fragments {
        let text = fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        requested.extend(parse(&text));
    }
    let final_config = parse(
        &fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?,
    );
    let lost = not_survived(&requested, &final_config);
    if !lost.is_empty() {
        bail!(
            "kconfig options did not survive olddefconfig (a dependency is missing from the fragments in kconfig/): {}",
            lost.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_values_and_not_set() {
        let o = parse(
            "# comment\nCONFIG_A=y\nCONFIG_B=16384\nCONFIG_C=\"s p\"\n# CONFIG_D is not set\n",
        );
        assert_eq!(o["A"], "y");
        assert_eq!(o["B"], "16384");
        assert_eq!(o["C"], "\"s p\"");
        assert_eq!(o["D"], "n");
        assert_eq!(o.len(), 4);
    }

    #[test]
    fn reports_dropped_and_changed_options() {
        let req = parse(
            "CONFIG_BPF_SYSCALL=y\nCONFIG_LKDTM=y\nCONFIG_NR_CPUS=8\n# CONFIG_X is not set\n",
        );
        let fin = parse("CONFIG_BPF_SYSCALL=y\nCONFIG_NR_CPUS=64\n");
        assert_eq!(
            not_survived(&req, &fin),
            ["CONFIG_LKDTM=y (got n)", "CONFIG_NR_CPUS=8 (got 64)"]
        );
        assert!(not_survived(
            &req,
            &parse("CONFIG_BPF_SYSCALL=y\nCONFIG_LKDTM=y\nCONFIG_NR_CPUS=8\n")
        )
        .is_empty());
    }

    #[test]
    fn shipped_fragments_ask_for_what_the_plan_needs() {
        let mut all = Options::new();
        for f in fragments(true) {
            all.extend(parse(&fs::read_to_string(f).unwrap()));
        }
        for opt in [
            "BPF_SYSCALL",
            "NET",
            "PROC_PAGE_MONITOR",
            "CROSS_MEMORY_ATTACH",
            "NUMA",
            "TRANSPARENT_HUGEPAGE",
            "IO_URING",
            "COREDUMP",
            "BLK_DEV_RAM",
            "SERIAL_8250_CONSOLE",
            "BLK_DEV_INITRD",
            "DEVTMPFS",
            "KASAN",
            "KASAN_VMALLOC",
            "DEBUG_VM",
            "PROVE_LOCKING",
            "DEBUG_ATOMIC_SLEEP",
            "PAGE_TABLE_CHECK",
            "SOFTLOCKUP_DETECTOR",
            "DETECT_HUNG_TASK",
        ] {
            assert_eq!(all.get(opt).map(String::as_str), Some("y"), "CONFIG_{opt}");
        }
        assert!(all["NR_CPUS"].parse::<u32>().unwrap() >= 4);
    }

    #[test]
    fn fragment_hash_tracks_content() {
        let t = crate::util::tempdir();
        let f = t.join("a.config");
        fs::write(&f, "CONFIG_A=y\n").unwrap();
        let h1 = fragments_hash(std::slice::from_ref(&f)).unwrap();
        fs::write(&f, "CONFIG_A=n\n").unwrap();
        assert_ne!(h1, fragments_hash(&[f]).unwrap());
        fs::remove_dir_all(t).unwrap();
    }
}
