//! Each fragment held to the tree's Kconfig before the merge: renamed
//! options under the tree's name, options the tree does not declare
//! refused (ours), left out and named (the tree's own config), or left
//! to olddefconfig's check (the developer's).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use super::{kconfig_files, parse, Fragment, Origin};

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

/// The fragments as a tree takes them, and what was left out of the
/// tree's own config.
#[derive(Debug)]
pub struct Adapted {
    pub fragments: Vec<Fragment>,
    /// `CONFIG_X=v from FRAGMENT`, one per option of `Origin::Tree` the
    /// tree does not declare.
    pub left_out: Vec<String>,
}

/// The fragments as this tree takes them: a fragment with a renamed
/// option, or with one the tree does not declare that is of
/// `NEWER_ONLY` or of the tree's own config, is rewritten into `dir`
/// with the new name or without the line (what the tree's own config
/// lost is named in `left_out`); the others are used as they are. An
/// option of ours the tree declares under no name is refused in one
/// line; one of the developer's `--config` is left to olddefconfig,
/// whose check names what did not survive.
pub fn adapt(tree: &Path, fragments: &[Fragment], dir: &Path) -> Result<Adapted> {
    let symbols = declared(tree)?;
    let mut out = Adapted {
        fragments: Vec::new(),
        left_out: Vec::new(),
    };
    for fragment in fragments {
        let text = fs::read_to_string(&fragment.path)
            .with_context(|| format!("reading {}", fragment.path.display()))?;
        let taken = adapt_text(&text, &symbols, fragment.origin).map_err(|option| {
            anyhow::anyhow!(
                "{}: CONFIG_{option} is no option of {} (its Kconfig declares it under no name); \
                 remove it, or add its new name to kernel::kconfig::RENAMED (or it to NEWER_ONLY)",
                fragment.path.display(),
                tree.display()
            )
        })?;
        let name = fragment.name();
        out.left_out
            .extend(taken.left_out.iter().map(|o| format!("{o} from {name}")));
        if !taken.changed {
            out.fragments.push(fragment.clone());
            continue;
        }
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(&name);
        crate::util::write_atomic(&path, taken.text.as_bytes())?;
        out.fragments.push(Fragment::new(path, fragment.origin));
    }
    Ok(out)
}

/// One fragment as a tree takes it.
struct Taken {
    text: String,
    changed: bool,
    /// `CONFIG_X=v` of the tree's own config the tree does not declare.
    left_out: Vec<String>,
}

/// One fragment's text with renamed options under their new names and
/// the undeclared ones it may lose left out; Err names an undeclared
/// option of ours.
fn adapt_text(text: &str, symbols: &BTreeSet<String>, origin: Origin) -> Result<Taken, String> {
    let mut taken = Taken {
        text: String::new(),
        changed: false,
        left_out: Vec::new(),
    };
    for line in text.lines() {
        let option = parse(line).into_iter().next();
        let line = match option.map(|(o, v)| (name_in(&o, symbols), o, v)) {
            Some((Some(new), o, _)) if new != o => {
                taken.changed = true;
                line.replacen(&format!("CONFIG_{o}"), &format!("CONFIG_{new}"), 1)
            }
            Some((None, o, _)) if NEWER_ONLY.iter().any(|(n, _)| *n == o) => {
                taken.changed = true;
                format!("# left out: CONFIG_{o}, which this tree does not declare (NEWER_ONLY)")
            }
            Some((None, o, _)) if origin == Origin::Ours => return Err(o),
            // Not set is what an undeclared option is anyway.
            Some((None, o, v)) if origin == Origin::Tree && v != "n" => {
                taken.changed = true;
                taken.left_out.push(format!("CONFIG_{o}={v}"));
                format!("# left out: CONFIG_{o}={v}, which this tree does not declare")
            }
            _ => line.to_string(),
        };
        taken.text.push_str(&line);
        taken.text.push('\n');
    }
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let one = |path: &Path, origin: Origin, dir: &str| {
            let frag = Fragment::new(path.to_path_buf(), origin);
            adapt(&tree, &[frag], &t.join(dir))
        };
        let ours = t.join("qemu.config");
        fs::write(&ours, "# why\nCONFIG_PROC_FS=y\nCONFIG_PROC_SYSCTL=y\n").unwrap();
        let out = one(&ours, Origin::Ours, "frags").unwrap();
        assert_eq!(
            out.fragments,
            [Fragment::new(t.join("frags/qemu.config"), Origin::Ours)]
        );
        assert!(out.left_out.is_empty());
        assert_eq!(
            fs::read_to_string(&out.fragments[0].path).unwrap(),
            "# why\nCONFIG_PROC_FS=y\nCONFIG_SYSCTL=y\n"
        );
        // A tree that still declares the old name keeps the fragment as is.
        fs::write(tree.join("Kconfig"), "config PROC_SYSCTL\n").unwrap();
        let out = one(&ours, Origin::Ours, "frags2").unwrap();
        assert_eq!(out.fragments[0].path, ours);
        // An option no name of which the tree declares is refused by name.
        fs::write(&ours, "CONFIG_PROC_FS=y\n# CONFIG_GONE is not set\n").unwrap();
        let err = format!("{:#}", one(&ours, Origin::Ours, "x").unwrap_err());
        assert!(err.contains("CONFIG_GONE is no option of"), "{err}");
        assert!(err.contains("kernel::kconfig::RENAMED"), "{err}");
        // An option only newer trees have is left out of an older one.
        fs::write(&ours, "CONFIG_PROC_FS=y\nCONFIG_NUMA_MIGRATION=y\n").unwrap();
        let out = one(&ours, Origin::Ours, "frags3").unwrap();
        let text = fs::read_to_string(&out.fragments[0].path).unwrap();
        assert!(
            text.starts_with("CONFIG_PROC_FS=y\n# left out: CONFIG_NUMA_MIGRATION"),
            "{text}"
        );
        assert_eq!(parse(&text).len(), 1, "{text}");
        // A developer's --config is taken as it is: olddefconfig's check
        // names what the tree lacks.
        let theirs = t.join("mine.config");
        fs::write(&theirs, "CONFIG_GONE=y\n").unwrap();
        let out = one(&theirs, Origin::Developer, "frags4").unwrap();
        assert_eq!(out.fragments[0].path, theirs);
        assert!(out.left_out.is_empty());
        fs::remove_dir_all(t).unwrap();
    }

    /// 7.3's own config.x86_64 asks for CONFIG_MCORE2, which 7.3's Kconfig
    /// no longer declares: BPF CI's merge_config.sh warns and goes on.
    #[test]
    fn the_trees_own_config_loses_what_the_tree_does_not_declare_by_name() {
        let t = crate::util::tempdir();
        let tree = t.join("linux");
        fs::create_dir_all(&tree).unwrap();
        fs::write(tree.join("Kconfig"), "config BPF\nconfig PROC_FS\n").unwrap();
        let own = tree.join("config.x86_64");
        fs::write(
            &own,
            "CONFIG_BPF=y\nCONFIG_MCORE2=y\n# CONFIG_OLD is not set\nCONFIG_NR=4\n",
        )
        .unwrap();
        let out = adapt(
            &tree,
            &[Fragment::new(own.clone(), Origin::Tree)],
            &t.join("frags"),
        )
        .unwrap();
        assert_eq!(
            out.left_out,
            [
                "CONFIG_MCORE2=y from config.x86_64",
                "CONFIG_NR=4 from config.x86_64"
            ]
        );
        let taken = &out.fragments[0];
        assert_eq!(taken.origin, Origin::Tree);
        assert_ne!(taken.path, own, "the tree's file is never written");
        let text = fs::read_to_string(&taken.path).unwrap();
        let asked = parse(&text);
        assert_eq!(
            asked.keys().map(String::as_str).collect::<Vec<_>>(),
            ["BPF", "OLD"],
            "{text}"
        );
        assert!(text.contains("# left out: CONFIG_MCORE2=y"), "{text}");
        // Declared everywhere, it is taken as it is.
        fs::write(&own, "CONFIG_BPF=y\n").unwrap();
        let out = adapt(&tree, &[Fragment::new(own.clone(), Origin::Tree)], &t).unwrap();
        assert_eq!(
            (out.fragments[0].path.clone(), out.left_out.len()),
            (own, 0)
        );
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
            for fragment in super::super::shipped_fragments() {
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
}
