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

/// How the kernels of `tree` are configured: what the fragments are
/// merged onto, and the fragments in merge order.
pub fn plan(
    tree: &Path,
    config: super::KernelConfig,
    debug: bool,
) -> Result<(ConfigBase, Vec<PathBuf>)> {
    Ok(match config {
        super::KernelConfig::Lean => (ConfigBase::AllNo, fragments(debug)),
        // BPF CI's own config first, ours after it (a later fragment wins).
        super::KernelConfig::BpfCi => {
            let mut all = tree_selftests_config(tree)?;
            all.extend(fragments(debug));
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
/// kernel's merge_config.sh, then fails if any requested value was lost.
pub fn configure(
    tree: &Path,
    build_dir: &Path,
    base: ConfigBase,
    fragments: &[PathBuf],
    log: &Path,
) -> Result<()> {
    fs::create_dir_all(build_dir).with_context(|| format!("creating {}", build_dir.display()))?;
    let sh = crate::project::shell()?;
    sh.change_dir(tree);
    let out_name = build_dir
        .file_name()
        .context("build directory has no name")?
        .to_owned();
    let allno = (base == ConfigBase::AllNo).then_some("-n");
    let output = cmd!(
        sh,
        "scripts/kconfig/merge_config.sh {allno...} -O {out_name} {fragments...}"
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

/// The choice groups of a tree's Kconfig files: each symbol declared
/// between `choice` and `endchoice`, with the number of its group. Only one
/// symbol of a group can be y.
pub fn choice_groups(tree: &Path) -> Result<BTreeMap<String, usize>> {
    let mut groups = BTreeMap::new();
    let mut next = 0;
    for file in kconfig_files(tree)? {
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        add_choices(&text, &mut next, &mut groups);
    }
    Ok(groups)
}

/// Adds the choice groups of one Kconfig file, numbered from `next`.
fn add_choices(text: &str, next: &mut usize, groups: &mut BTreeMap<String, usize>) {
    let mut inside: Option<usize> = None;
    for line in text.lines().map(str::trim) {
        match line {
            "choice" => {
                inside = Some(*next);
                *next += 1;
            }
            "endchoice" => inside = None,
            _ => {
                if let (Some(g), Some(sym)) = (inside, line.strip_prefix("config ")) {
                    groups.insert(sym.trim().to_string(), g);
                }
            }
        }
    }
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

/// What `fragments` ask for, in order, a later fragment overriding an
/// earlier one: for an option, and for a choice, where a later y of the
/// group drops an earlier one (kconfig keeps the last).
pub fn requested(texts: &[String], groups: &BTreeMap<String, usize>) -> Options {
    let mut want = Options::new();
    for text in texts {
        for (name, value) in parse(text) {
            if value == "y" {
                if let Some(g) = groups.get(&name) {
                    want.retain(|other, v| v != "y" || groups.get(other) != Some(g));
                }
            }
            want.insert(name, value);
        }
    }
    want
}

/// Fails, listing them, if options the fragments ask for are not in
/// `config` (a choice is the last fragment's, see `requested`).
pub fn check_survived(tree: &Path, fragments: &[PathBuf], config: &Path) -> Result<()> {
    let groups = choice_groups(tree)?;
    let texts = fragments
        .iter()
        .map(|f| fs::read_to_string(f).with_context(|| format!("reading {}", f.display())))
        .collect::<Result<Vec<_>>>()?;
    let requested = requested(&texts, &groups);
    let final_config = parse(
        &fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?,
    );
    let lost = not_survived(&requested, &final_config);
    if lost.is_empty() {
        return Ok(());
    }
    // Each with the fragment that asked for it last.
    let named: Vec<String> = lost
        .iter()
        .map(|l| {
            let name = l
                .trim_start_matches("CONFIG_")
                .split('=')
                .next()
                .unwrap_or("");
            let by = fragments
                .iter()
                .zip(&texts)
                .rev()
                .find(|(_, t)| parse(t).contains_key(name))
                .map_or(String::new(), |(f, _)| {
                    format!(
                        " from {}",
                        f.file_name().unwrap_or_default().to_string_lossy()
                    )
                });
            format!("{l}{by}")
        })
        .collect();
    bail!(
        "kconfig options did not survive olddefconfig (a dependency is missing from the fragments): {}",
        named.join(", ")
    )
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
        let names: Vec<String> = frags
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
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
    fn a_later_choice_drops_an_earlier_one() {
        let kconfig = "choice\n\tprompt \"Debug information\"\nconfig DWARF_DEFAULT\n\tbool\nconfig DWARF4\n\tbool\n\thelp\n\t  a choice and more\nendchoice\nconfig OTHER\n";
        let mut groups = BTreeMap::new();
        add_choices(kconfig, &mut 0, &mut groups);
        assert_eq!(groups.len(), 2, "{groups:?}");
        assert!(!groups.contains_key("OTHER"));
        let frags = [
            "CONFIG_DWARF4=y\nCONFIG_OTHER=y\n".to_string(),
            "CONFIG_DWARF_DEFAULT=y\n".to_string(),
            "CONFIG_DWARF4=y\n".to_string(),
        ];
        let want = requested(&frags, &groups);
        assert_eq!(want.get("DWARF4").map(String::as_str), Some("y"));
        assert_eq!(
            want.get("DWARF_DEFAULT"),
            None,
            "the later DWARF4 took the choice"
        );
        assert_eq!(want.get("OTHER").map(String::as_str), Some("y"));
        let want = requested(&frags[..2], &groups);
        assert_eq!(want.get("DWARF4"), None);
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
