//! The developer's own kconfig fragments (`--config FRAGMENT`): merged
//! after ours and survival-checked like them, in a build directory of
//! their own, so the kernels without them are never rebuilt for them.
//! That directory starts as a copy of the kernel's plain build, so make
//! rebuilds only what the fragment's options reach.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// Extra fragments, resolved to absolute paths, in merge order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ExtraConfig {
    fragments: Vec<PathBuf>,
}

impl ExtraConfig {
    /// Checks each fragment named on the command line: a readable file
    /// with at least one `CONFIG_` line. Paths are taken from the working
    /// directory; a fragment given twice counts once.
    pub fn load(paths: &[PathBuf]) -> Result<ExtraConfig> {
        let mut fragments: Vec<PathBuf> = Vec::new();
        for path in paths {
            let abs = path.canonicalize().with_context(|| {
                format!(
                    "--config {}: no such file (give a kconfig fragment: CONFIG_FOO=y lines)",
                    path.display()
                )
            })?;
            let text = fs::read_to_string(&abs)
                .with_context(|| format!("--config {}: reading it", path.display()))?;
            if super::kconfig::parse(&text).is_empty() {
                bail!(
                    "--config {}: no CONFIG_ option in it (a fragment holds lines like CONFIG_FOO=y or `# CONFIG_FOO is not set`)",
                    path.display()
                );
            }
            if !fragments.contains(&abs) {
                fragments.push(abs);
            }
        }
        Ok(ExtraConfig { fragments })
    }

    pub fn fragments(&self) -> &[PathBuf] {
        &self.fragments
    }

    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// What a kernel's name gets: `+net+mine` for net.config and
    /// mine.config; empty without fragments.
    pub fn name_suffix(&self) -> String {
        self.fragments
            .iter()
            .map(|f| format!("+{}", stem(f)))
            .collect()
    }

    /// What its build directory's name gets: the name suffix and a hash
    /// of the fragments' paths, so two fragments of one name in other
    /// directories never share a build. An edited fragment keeps its
    /// directory (the build is then incremental).
    pub fn dir_suffix(&self) -> String {
        if self.fragments.is_empty() {
            return String::new();
        }
        let mut h = Sha256::new();
        for f in &self.fragments {
            h.update(f.as_os_str().as_encoded_bytes());
            h.update([0]);
        }
        let hash = hex::encode(h.finalize());
        format!("{}-{}", self.name_suffix(), &hash[..8])
    }
}

/// `net` for `/x/net.config`, `mine` for `/x/mine`.
fn stem(path: &Path) -> String {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let stem = name.strip_suffix(".config").unwrap_or(&name);
    // Only what is safe in a directory name and a console label.
    stem.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_are_checked_named_and_keyed_by_path() {
        let dir = crate::util::tempdir();
        let net = dir.join("net.config");
        fs::write(&net, "CONFIG_INET=y\n").unwrap();
        let other = dir.join("sub");
        fs::create_dir_all(&other).unwrap();
        let net2 = other.join("net.config");
        fs::write(&net2, "# CONFIG_INET is not set\n").unwrap();
        let mine = dir.join("my frag");
        fs::write(&mine, "CONFIG_X=m\n").unwrap();

        let a = ExtraConfig::load(&[net.clone(), mine.clone(), net.clone()]).unwrap();
        assert_eq!(a.fragments().len(), 2, "a fragment given twice counts once");
        assert_eq!(a.name_suffix(), "+net+my_frag");
        let b = ExtraConfig::load(std::slice::from_ref(&net2)).unwrap();
        assert_eq!(b.name_suffix(), "+net");
        let c = ExtraConfig::load(std::slice::from_ref(&net)).unwrap();
        assert_ne!(b.dir_suffix(), c.dir_suffix(), "same name, other file");
        assert!(c.dir_suffix().starts_with("+net-"), "{}", c.dir_suffix());
        assert_eq!(c.dir_suffix().len(), "+net-".len() + 8);
        // Editing a fragment keeps its directory.
        fs::write(&net, "CONFIG_INET=y\nCONFIG_IPV6=y\n").unwrap();
        assert_eq!(
            ExtraConfig::load(std::slice::from_ref(&net))
                .unwrap()
                .dir_suffix(),
            c.dir_suffix()
        );
        assert_eq!(ExtraConfig::default().dir_suffix(), "");
        assert!(ExtraConfig::default().is_empty() && !c.is_empty());

        let missing = format!(
            "{:#}",
            ExtraConfig::load(&[dir.join("nope.config")]).unwrap_err()
        );
        assert!(
            missing.starts_with("--config ") && missing.contains("nope.config: no such file"),
            "{missing}"
        );
        let empty = dir.join("empty.config");
        fs::write(&empty, "# only a comment\nFOO=y\n").unwrap();
        let err = format!("{:#}", ExtraConfig::load(&[empty]).unwrap_err());
        assert!(err.contains("no CONFIG_ option in it"), "{err}");
        fs::remove_dir_all(dir).unwrap();
    }
}
