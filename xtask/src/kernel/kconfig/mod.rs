//! Kernel configuration: kconfig/ fragments merged onto allnoconfig with
//! the kernel's own scripts/kconfig/merge_config.sh, then checked: every
//! option a fragment asks for must survive olddefconfig. Before the merge
//! each fragment is held to the tree's Kconfig (`adapt`): an option a
//! newer kernel renamed or folded into another is asked for by its new
//! name, and one the tree does not declare at all is refused by name.
//! The tree's own BPF selftests config (the bpf-ci flavor) is taken as
//! BPF CI's merge_config.sh takes it: what the tree does not declare is
//! left out and what does not survive is reported, each named, not
//! refused (see `Origin`).

mod adapt;
mod survive;

pub use adapt::adapt;
pub use survive::check_survived;

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
    "net.config",
    "selftests.config",
    "gdb.config",
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

/// Whose a fragment is, which decides how strictly it is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The project's kconfig/: each option must be one the tree declares
    /// (under some name) and must survive.
    Ours,
    /// The developer's `--config`: each option must survive.
    Developer,
    /// The tree's own BPF selftests config, written for whatever kernels
    /// BPF CI builds: an option the tree does not declare is left out and
    /// one that does not survive is reported, as merge_config.sh warns.
    Tree,
}

/// A kconfig fragment and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    pub path: PathBuf,
    pub origin: Origin,
}

impl Fragment {
    pub fn new(path: PathBuf, origin: Origin) -> Fragment {
        Fragment { path, origin }
    }

    /// The file's name, for messages.
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    }
}

/// How the kernels of `tree` are configured: what the fragments are
/// merged onto, and the fragments in merge order.
pub fn plan(
    tree: &Path,
    config: super::KernelConfig,
    debug: bool,
) -> Result<(ConfigBase, Vec<Fragment>)> {
    let ours = fragments(debug)
        .into_iter()
        .map(|p| Fragment::new(p, Origin::Ours));
    Ok(match config {
        super::KernelConfig::Lean => (ConfigBase::AllNo, ours.collect()),
        // BPF CI's own config first, ours after it (a later fragment wins).
        super::KernelConfig::BpfCi => {
            let mut all: Vec<Fragment> = tree_selftests_config(tree)?
                .into_iter()
                .map(|p| Fragment::new(p, Origin::Tree))
                .collect();
            all.extend(ours);
            (ConfigBase::Defaults, all)
        }
    })
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

/// Hash of the fragments' names and contents, in order.
pub fn fragments_hash(fragments: &[Fragment]) -> Result<String> {
    let mut h = Sha256::new();
    for f in fragments.iter().map(|f| &f.path) {
        let text = fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        h.update(f.file_name().unwrap_or_default().as_encoded_bytes());
        h.update([0]);
        h.update(&text);
        h.update([0]);
    }
    Ok(hex::encode(h.finalize()))
}

/// What the fragments are merged onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigBase {
    /// allnoconfig: only what the fragments ask for (the lean kernels).
    AllNo,
    /// Every option's default (alldefconfig), as BPF CI's `make
    /// olddefconfig` over its fragments gives.
    Defaults,
}

impl ConfigBase {
    pub fn name(self) -> &'static str {
        match self {
            ConfigBase::AllNo => "allnoconfig",
            ConfigBase::Defaults => "alldefconfig",
        }
    }
}

/// The BPF selftests' own config in a kernel tree, in BPF CI's order.
pub const TREE_SELFTESTS_CONFIG: &[&str] = &[
    "tools/testing/selftests/bpf/config",
    "tools/testing/selftests/bpf/config.vm",
    "tools/testing/selftests/bpf/config.x86_64",
];

/// `TREE_SELFTESTS_CONFIG` of `tree`; an error names a file it lacks.
pub fn tree_selftests_config(tree: &Path) -> Result<Vec<PathBuf>> {
    TREE_SELFTESTS_CONFIG
        .iter()
        .map(|rel| {
            let path = tree.join(rel);
            if path.is_file() {
                Ok(path)
            } else {
                bail!(
                    "{} has no {rel}: the selftests config comes from the tree under test (a tree of 6.6 or later has it)",
                    tree.display()
                )
            }
        })
        .collect()
}

/// Writes `<build_dir>/.config`: `base` plus the fragments, via the
/// kernel's merge_config.sh, then fails if a value ours or the
/// developer's asked for was lost; returns what of the tree's own
/// config was lost (see `check_survived`).
pub fn configure(
    tree: &Path,
    build_dir: &Path,
    base: ConfigBase,
    fragments: &[Fragment],
    log: &Path,
) -> Result<Vec<String>> {
    fs::create_dir_all(build_dir).with_context(|| format!("creating {}", build_dir.display()))?;
    let sh = crate::project::shell()?;
    sh.change_dir(tree);
    let out_name = build_dir
        .file_name()
        .context("build directory has no name")?
        .to_owned();
    let allno = (base == ConfigBase::AllNo).then_some("-n");
    let paths: Vec<&PathBuf> = fragments.iter().map(|f| &f.path).collect();
    let output = cmd!(
        sh,
        "scripts/kconfig/merge_config.sh {allno...} -O {out_name} {paths...}"
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
    check_survived(tree, fragments, &build_dir.join(".config"))
}

/// Every `Kconfig*` file under `dir`.
fn kconfig_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            if entry.file_type()?.is_dir() {
                // Build directories and hidden ones hold no Kconfig source.
                let n = name.to_string_lossy();
                if !n.starts_with('.') && !n.starts_with("_build-") {
                    todo.push(path);
                }
            } else if name.to_string_lossy().starts_with("Kconfig") {
                found.push(path);
            }
        }
    }
    Ok(found)
}

/// Every fragment the project ships: the lean and debug kernels', and
/// KASAN's, which a debug kernel takes as a fragment of the developer's
/// (`--config kconfig/kasan.config`).
#[cfg(test)]
pub fn shipped_fragments() -> Vec<PathBuf> {
    let mut all = fragments(true);
    all.push(fragments(false)[0].with_file_name("kasan.config"));
    all
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
    fn shipped_fragments_ask_for_what_the_plan_needs() {
        let mut all = Options::new();
        for f in shipped_fragments() {
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
            "PROVE_RAW_LOCK_NESTING",
            "PAGE_TABLE_CHECK",
            "SOFTLOCKUP_DETECTOR",
            "DETECT_HUNG_TASK",
            // test_maps: sockmap's stream parser, reuseport's AF_INET6.
            "CGROUP_BPF",
            "BPF_STREAM_PARSER",
            "IPV6",
            // T39: pagemap's soft-dirty bit, armed by clear_refs.
            "MEM_SOFT_DIRTY",
        ] {
            assert_eq!(all.get(opt).map(String::as_str), Some("y"), "CONFIG_{opt}");
        }
        assert!(all["NR_CPUS"].parse::<u32>().unwrap() >= 4);
    }

    #[test]
    fn the_bpf_ci_config_is_the_trees_then_ours_onto_the_defaults() {
        let t = crate::util::tempdir();
        let err = format!(
            "{:#}",
            plan(&t, super::super::KernelConfig::BpfCi, false).unwrap_err()
        );
        assert!(
            err.contains("has no tools/testing/selftests/bpf/config"),
            "{err}"
        );
        for rel in TREE_SELFTESTS_CONFIG {
            fs::create_dir_all(t.join(rel).parent().unwrap()).unwrap();
            fs::write(t.join(rel), "CONFIG_BPF=y\n").unwrap();
        }
        let (base, frags) = plan(&t, super::super::KernelConfig::BpfCi, true).unwrap();
        assert_eq!(base, ConfigBase::Defaults);
        let names: Vec<String> = frags.iter().map(Fragment::name).collect();
        let origins: Vec<Origin> = frags.iter().map(|f| f.origin).collect();
        assert_eq!(origins[..3], [Origin::Tree; 3]);
        assert_eq!(origins[3..], [Origin::Ours; 7]);
        assert_eq!(
            names,
            [
                "config",
                "config.vm",
                "config.x86_64",
                "qemu.config",
                "bpf.config",
                "share.config",
                "net.config",
                "selftests.config",
                "gdb.config",
                "debug.config"
            ]
        );
        let (base, frags) = plan(&t, super::super::KernelConfig::Lean, false).unwrap();
        assert_eq!((base, frags.len()), (ConfigBase::AllNo, 6));
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn fragment_hash_tracks_content() {
        let t = crate::util::tempdir();
        let f = Fragment::new(t.join("a.config"), Origin::Ours);
        fs::write(&f.path, "CONFIG_A=y\n").unwrap();
        let h1 = fragments_hash(std::slice::from_ref(&f)).unwrap();
        fs::write(&f.path, "CONFIG_A=n\n").unwrap();
        assert_ne!(h1, fragments_hash(&[f]).unwrap());
        fs::remove_dir_all(t).unwrap();
    }
}
