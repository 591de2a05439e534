//! Kernel configuration: kconfig/ fragments merged onto allnoconfig with
//! the kernel's own scripts/kconfig/merge_config.sh, then checked: every
//! option a fragment asks for must survive olddefconfig. Before the merge
//! each fragment is held to the tree's Kconfig (`adapt`): an option a
//! newer kernel renamed or folded into another is asked for by its new
//! name, and one the tree does not declare at all is refused by name.

use std::collections::{BTreeMap, BTreeSet};
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

/// Options renamed or folded into another between the kernels the
/// harness builds: (old name, new name, since when and why). A fragment
/// keeps the old name while any supported source declares it; in a tree
/// that declares only the new one, the new one is asked for instead.
pub const RENAMED: &[(&str, &str, &str)] = &[(
    "PROC_SYSCTL",
    "SYSCTL",
    "7.3 folded /proc/sys support into SYSCTL",
)];

/// Options only the newer of the supported kernels declare, and why a
/// fragment asks for them: asked for where the tree declares them, left
/// out where it does not.
pub const NEWER_ONLY: &[(&str, &str)] = &[(
    "NUMA_MIGRATION",
    "7.3 puts move_pages() behind it (it selects MIGRATION); before, MIGRATION was the switch",
)];

/// Every symbol a tree's Kconfig files declare (`config X`, `menuconfig X`).
pub fn declared(tree: &Path) -> Result<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for file in kconfig_files(tree)? {
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        all.extend(declared_in(&text));
    }
    Ok(all)
}

fn declared_in(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines().filter_map(|line| {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("config" | "menuconfig"), Some(sym)) => Some(sym.to_string()),
            _ => None,
        }
    })
}

/// The name `option` goes by in a tree that declares `symbols`: itself,
/// its new name (RENAMED), or None when the tree has neither.
pub fn name_in(option: &str, symbols: &BTreeSet<String>) -> Option<String> {
    if symbols.contains(option) {
        return Some(option.to_string());
    }
    RENAMED
        .iter()
        .find(|(old, new, _)| *old == option && symbols.contains(*new))
        .map(|(_, new, _)| new.to_string())
}

/// The fragments as this tree takes them: a fragment with a renamed
/// option, or one of `NEWER_ONLY` the tree lacks, is rewritten into
/// `dir` with the new name or without the line; the others are used as
/// they are. An option of ours (a fragment of the project's kconfig/)
/// that the tree declares under no name is refused in one line; one of
/// the developer's `--config` or the tree's own selftests config is left
/// to olddefconfig, whose check names what did not survive.
pub fn adapt(tree: &Path, fragments: &[PathBuf], dir: &Path) -> Result<Vec<PathBuf>> {
    let ours = crate::project::root().join("kconfig");
    adapt_with(tree, fragments, &ours, dir)
}

/// `adapt`, with the fragments below `ours` held strictly.
fn adapt_with(tree: &Path, fragments: &[PathBuf], ours: &Path, dir: &Path) -> Result<Vec<PathBuf>> {
    let symbols = declared(tree)?;
    let mut out = Vec::new();
    for fragment in fragments {
        let text = fs::read_to_string(fragment)
            .with_context(|| format!("reading {}", fragment.display()))?;
        let strict = fragment.starts_with(ours);
        let (adapted, changed) = adapt_text(&text, &symbols, strict).map_err(|option| {
            anyhow::anyhow!(
                "{}: CONFIG_{option} is no option of {} (its Kconfig declares it under no name); \
                 remove it, or add its new name to kernel::kconfig::RENAMED (or it to NEWER_ONLY)",
                fragment.display(),
                tree.display()
            )
        })?;
        if !changed {
            out.push(fragment.clone());
            continue;
        }
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let name = fragment.file_name().context("a fragment has a file name")?;
        let path = dir.join(name);
        crate::util::write_atomic(&path, adapted.as_bytes())?;
        out.push(path);
    }
    Ok(out)
}

/// One fragment's text with renamed options under their new names, and
/// whether anything changed; Err names an option `symbols` lacks (only
/// when `strict`).
fn adapt_text(
    text: &str,
    symbols: &BTreeSet<String>,
    strict: bool,
) -> Result<(String, bool), String> {
    let mut out = String::new();
    let mut changed = false;
    for line in text.lines() {
        let option = parse(line).into_keys().next();
        let line = match option.as_deref().map(|o| (o, name_in(o, symbols))) {
            Some((o, Some(new))) if new != o => {
                changed = true;
                line.replacen(&format!("CONFIG_{o}"), &format!("CONFIG_{new}"), 1)
            }
            Some((o, None)) if NEWER_ONLY.iter().any(|(n, _)| *n == o) => {
                changed = true;
                format!("# left out: CONFIG_{o}, which this tree does not declare (NEWER_ONLY)")
            }
            Some((o, None)) if strict => return Err(o.to_string()),
            _ => line.to_string(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    Ok((out, changed))
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
    fn a_renamed_option_is_asked_for_by_its_new_name_and_an_unknown_one_refused() {
        let t = crate::util::tempdir();
        let tree = t.join("linux");
        fs::create_dir_all(tree.join("fs/proc")).unwrap();
        fs::write(
            tree.join("fs/proc/Kconfig"),
            "config PROC_FS\n\tbool\nmenuconfig SYSCTL\n\tbool \"x\"\n",
        )
        .unwrap();
        let kconfig = t.join("kconfig");
        fs::create_dir_all(&kconfig).unwrap();
        let adapt = |frags: &[PathBuf], dir: &Path| adapt_with(&tree, frags, &kconfig, dir);
        let ours = kconfig.join("qemu.config");
        fs::write(&ours, "# why\nCONFIG_PROC_FS=y\nCONFIG_PROC_SYSCTL=y\n").unwrap();
        let out = adapt(std::slice::from_ref(&ours), &t.join("frags")).unwrap();
        assert_eq!(out, [t.join("frags/qemu.config")]);
        assert_eq!(
            fs::read_to_string(&out[0]).unwrap(),
            "# why\nCONFIG_PROC_FS=y\nCONFIG_SYSCTL=y\n"
        );
        // A tree that still declares the old name keeps the fragment as is.
        fs::write(tree.join("Kconfig"), "config PROC_SYSCTL\n").unwrap();
        let out = adapt(std::slice::from_ref(&ours), &t.join("frags2")).unwrap();
        assert_eq!(out, std::slice::from_ref(&ours));
        // An option no name of which the tree declares is refused by name;
        // the tree's own fragments are taken as they are.
        fs::write(&ours, "CONFIG_PROC_FS=y\n# CONFIG_GONE is not set\n").unwrap();
        let err = format!("{:#}", adapt(std::slice::from_ref(&ours), &t).unwrap_err());
        assert!(err.contains("CONFIG_GONE is no option of"), "{err}");
        // An option only newer trees have is left out of an older one.
        fs::write(&ours, "CONFIG_PROC_FS=y\nCONFIG_NUMA_MIGRATION=y\n").unwrap();
        let out = adapt(std::slice::from_ref(&ours), &t.join("frags3")).unwrap();
        let text = fs::read_to_string(&out[0]).unwrap();
        assert!(
            text.starts_with("CONFIG_PROC_FS=y\n# left out: CONFIG_NUMA_MIGRATION"),
            "{text}"
        );
        assert_eq!(parse(&text).len(), 1, "{text}");
        assert!(err.contains("kernel::kconfig::RENAMED"), "{err}");
        let own = tree.join("config.vm");
        fs::write(&own, "CONFIG_GONE=y\n").unwrap();
        assert_eq!(adapt(std::slice::from_ref(&own), &t).unwrap(), [own]);
        // So is a developer's --config: olddefconfig's check names it.
        let theirs = t.join("mine.config");
        fs::write(&theirs, "CONFIG_GONE=y\n").unwrap();
        assert_eq!(adapt(std::slice::from_ref(&theirs), &t).unwrap(), [theirs]);
        fs::remove_dir_all(t).unwrap();
    }

    /// Each supported source's Kconfig, as far as the fragments go:
    /// `kconfig/declared/<source>` lists the fragments' options (and the
    /// new names of RENAMED) that the source's tree declares. Every
    /// option of every fragment must be one of them, under its name or
    /// its new one; an option a supported kernel lacks fails here.
    #[test]
    fn every_fragment_option_is_an_option_of_each_supported_source() {
        let dir = crate::project::root().join("kconfig/declared");
        let mut sources = Vec::new();
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = fs::read_to_string(&path).unwrap();
            let symbols: BTreeSet<String> = text
                .lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .map(|l| l.trim().to_string())
                .collect();
            sources.push(path.file_name().unwrap().to_string_lossy().into_owned());
            for fragment in fragments(true) {
                let frag = fs::read_to_string(&fragment).unwrap();
                for option in parse(&frag).keys() {
                    let newer = NEWER_ONLY.iter().any(|(n, _)| n == option);
                    assert!(
                        newer || name_in(option, &symbols).is_some(),
                        "CONFIG_{option} of {} is no option of {}",
                        fragment.display(),
                        path.display()
                    );
                }
            }
        }
        sources.sort();
        assert_eq!(sources, ["debian-6.12", "debian-7.3"]);
        // Each option only newer kernels have is one the newest declares.
        let newest = fs::read_to_string(dir.join("debian-7.3")).unwrap();
        for (option, _) in NEWER_ONLY {
            assert!(newest.lines().any(|l| l == *option), "{option}");
        }
        // The one rename the two differ by.
        assert_eq!(
            name_in("PROC_SYSCTL", &BTreeSet::from(["SYSCTL".to_string()])).as_deref(),
            Some("SYSCTL")
        );
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
