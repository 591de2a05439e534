//! After the merge: what the fragments asked for, held to the .config
//! olddefconfig wrote.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::{kconfig_files, parse, Fragment, Options, Origin};

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

/// Fails, listing them, if options ours or the developer's fragments
/// ask for are not in `config` (a choice is the last fragment's, see
/// `requested`). Returns, named the same way, what the tree's own config
/// asked for last and lost: BPF CI's merge_config.sh warns of those and
/// builds on.
pub fn check_survived(tree: &Path, fragments: &[Fragment], config: &Path) -> Result<Vec<String>> {
    let groups = choice_groups(tree)?;
    let texts = fragments
        .iter()
        .map(|f| {
            fs::read_to_string(&f.path).with_context(|| format!("reading {}", f.path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let requested = requested(&texts, &groups);
    let final_config = parse(
        &fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?,
    );
    let (mut refused, mut reported) = (Vec::new(), Vec::new());
    for lost in not_survived(&requested, &final_config) {
        let name = lost
            .trim_start_matches("CONFIG_")
            .split('=')
            .next()
            .unwrap_or("");
        // The fragment that asked for it last decides.
        let by = fragments
            .iter()
            .zip(&texts)
            .rev()
            .find(|(_, t)| parse(t).contains_key(name))
            .map(|(f, _)| f);
        let line = match by {
            Some(f) => format!("{lost} from {}", f.name()),
            None => lost,
        };
        match by.map(|f| f.origin) {
            Some(Origin::Tree) => reported.push(line),
            _ => refused.push(line),
        }
    }
    if !refused.is_empty() {
        bail!(
            "kconfig options did not survive olddefconfig (a dependency is missing from the fragments): {}",
            refused.join(", ")
        );
    }
    Ok(reported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_of_the_trees_own_config_is_reported_and_one_of_ours_refused() {
        let t = crate::util::tempdir();
        fs::write(t.join("Kconfig"), "config A\nconfig B\nconfig FB\n").unwrap();
        let write = |name: &str, text: &str, origin: Origin| {
            fs::write(t.join(name), text).unwrap();
            Fragment::new(t.join(name), origin)
        };
        let own = write("config.x86_64", "CONFIG_A=y\nCONFIG_FB=y\n", Origin::Tree);
        let ours = write("qemu.config", "CONFIG_B=y\n", Origin::Ours);
        let config = t.join(".config");
        fs::write(&config, "CONFIG_A=y\nCONFIG_B=y\n").unwrap();
        let frags = [own.clone(), ours.clone()];
        assert_eq!(
            check_survived(&t, &frags, &config).unwrap(),
            ["CONFIG_FB=y (got n) from config.x86_64"]
        );
        // Ours lost: refused, naming it, whatever the tree's lost too.
        fs::write(&config, "CONFIG_A=y\n").unwrap();
        let err = format!("{:#}", check_survived(&t, &frags, &config).unwrap_err());
        assert!(
            err.ends_with(": CONFIG_B=y (got n) from qemu.config"),
            "{err}"
        );
        // Asked for again later by ours or the developer's, it must survive.
        fs::write(&config, "CONFIG_A=y\nCONFIG_B=y\n").unwrap();
        for origin in [Origin::Ours, Origin::Developer] {
            let later = write("mine.config", "CONFIG_FB=y\n", origin);
            let frags = [own.clone(), ours.clone(), later];
            let err = format!("{:#}", check_survived(&t, &frags, &config).unwrap_err());
            assert!(
                err.ends_with(": CONFIG_FB=y (got n) from mine.config"),
                "{err}"
            );
        }
        fs::remove_dir_all(t).unwrap();
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
}
