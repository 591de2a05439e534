//! Where the kernel source comes from: a user's tree or tarball given with
//! --kernel-src (read, never modified), or one of Debian's linux-source
//! packages (`--source debian:X.Y`, fetched by `debian`).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};
use xshell::cmd;

use super::cache::Cache;
use super::debian::Release;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum KernelSource {
    /// A directory holding a kernel tree (plain or a git checkout).
    Directory { path: PathBuf },
    /// A kernel.org-style tarball (.tar.xz, .tar.gz, ...).
    Tarball { path: PathBuf },
    /// A commit of a git checkout (`--base`), its tracked files only.
    Git { repo: PathBuf, commit: String },
    /// One upload of Debian's linux-source-X.Y, fetched into the cache.
    Debian { release: Release },
}

impl KernelSource {
    /// Classifies `--kernel-src PATH`.
    pub fn from_path(path: &Path) -> Result<KernelSource> {
        let path = fs::canonicalize(path).with_context(|| {
            format!(
                "--kernel-src {}: no such file or directory; pass a kernel tree or a .tar.xz/.tar.gz",
                path.display()
            )
        })?;
        if path.is_dir() {
            if !path.join("Makefile").is_file() || !path.join("kernel/bpf").is_dir() {
                bail!(
                    "--kernel-src {}: not a kernel tree (no Makefile or kernel/bpf); pass the top of a Linux source tree",
                    path.display()
                );
            }
            // An in-tree build would make kbuild refuse our out-of-tree
            // build, or worse, pick up its stale objects.
            for artifact in [".config", "include/config"] {
                if path.join(artifact).exists() {
                    bail!(
                        "--kernel-src {}: has an in-tree build ({artifact} exists); run `make mrproper` there or pass a clean tree",
                        path.display()
                    );
                }
            }
            Ok(KernelSource::Directory { path })
        } else if is_tarball_name(&path) {
            Ok(KernelSource::Tarball { path })
        } else {
            bail!(
                "--kernel-src {}: neither a directory nor a .tar.xz/.tar.gz/.tar.bz2/.tar file",
                path.display()
            )
        }
    }

    /// `--kernel-src REPO --base REV`: the commit's tree, read from git,
    /// so an in-tree build in the checkout does not matter.
    pub fn git(repo: &Path, commit: &str) -> Result<KernelSource> {
        let repo = fs::canonicalize(repo).with_context(|| {
            format!(
                "--kernel-src {}: no such directory; pass your kernel checkout",
                repo.display()
            )
        })?;
        Ok(KernelSource::Git {
            repo,
            commit: commit.to_string(),
        })
    }

    /// A short, stable, readable name for this source's cache directory.
    pub fn cache_key(&self) -> Result<String> {
        let (path, extra) = match self {
            KernelSource::Debian { release } => return Ok(release.cache_key()),
            KernelSource::Git { repo, commit } => {
                let name = repo.file_name().map(|n| n.to_string_lossy().into_owned());
                let name = name.unwrap_or_else(|| "root".into());
                return Ok(format!("{name}-git-{}", &commit[..12]));
            }
            KernelSource::Directory { path } => (path, String::new()),
            KernelSource::Tarball { path } => {
                let m =
                    fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
                (
                    path,
                    format!("{}:{}.{}", m.size(), m.mtime(), m.mtime_nsec()),
                )
            }
        };
        let digest = Sha256::digest(format!("{}\0{extra}", path.display()).as_bytes());
        let base = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "root".into());
        let base = crate::util::name_safe(
            base.trim_end_matches(".xz")
                .trim_end_matches(".gz")
                .trim_end_matches(".bz2")
                .trim_end_matches(".tar"),
        );
        Ok(format!("{base}-{}", &hex::encode(digest)[..12]))
    }

    /// The pristine tree to mirror from: the user's directory itself, or the
    /// tarball unpacked (once) into the cache.
    pub fn pristine(&self, cache: &Cache, key: &str) -> Result<PathBuf> {
        match self {
            KernelSource::Directory { path } => Ok(path.clone()),
            KernelSource::Tarball { path } => unpack_once(path, &cache.source_dir(key)),
            KernelSource::Debian { release } => {
                unpack_once(&release.tarball, &cache.source_dir(key))
            }
            KernelSource::Git { repo, commit } => {
                super::git::archive_once(repo, commit, &cache.source_dir(key))
            }
        }
    }
}

fn is_tarball_name(path: &Path) -> bool {
    let name = path.to_string_lossy();
    [".tar.xz", ".tar.gz", ".tgz", ".tar.bz2", ".tar"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

/// Unpacks `tarball` into `<dir>/pristine`. The work happens in a temporary
/// directory renamed into place at the end, so a killed run leaves either
/// nothing or a complete tree; a leftover temporary directory is removed.
fn unpack_once(tarball: &Path, dir: &Path) -> Result<PathBuf> {
    let pristine = dir.join("pristine");
    if pristine.join("Makefile").is_file() {
        return Ok(pristine);
    }
    let tmp = dir.join("pristine.unpacking");
    if tmp.exists() {
        crate::status!(
            "source",
            "removing a half-unpacked tree left by an interrupted run"
        );
        fs::remove_dir_all(&tmp).with_context(|| format!("removing {}", tmp.display()))?;
    }
    fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let started = std::time::Instant::now();
    crate::status!("source", "unpacking {}", tarball.display());
    let sh = crate::project::shell()?;
    cmd!(sh, "tar -xf {tarball} -C {tmp} --strip-components=1")
        .quiet()
        .run()
        .with_context(|| format!("unpacking {}", tarball.display()))?;
    if !tmp.join("Makefile").is_file() || !tmp.join("kernel/bpf").is_dir() {
        bail!(
            "{} does not unpack to a kernel tree (expected one top directory with Makefile and kernel/bpf)",
            tarball.display()
        );
    }
    fs::rename(&tmp, &pristine).with_context(|| format!("renaming {}", tmp.display()))?;
    crate::status!("source", "unpacked in {:.0?}", started.elapsed());
    Ok(pristine)
}

/// The kernel release of a configured build directory (e.g. 6.12.117).
pub fn kernel_release(build_dir: &Path) -> Result<String> {
    let path = build_dir.join("include/config/kernel.release");
    Ok(fs::read_to_string(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_sources() {
        let t = crate::util::tempdir();
        let err = format!(
            "{:#}",
            KernelSource::from_path(&t.join("nope")).unwrap_err()
        );
        assert!(err.contains("no such file"), "{err}");
        let err = format!("{:#}", KernelSource::from_path(&t).unwrap_err());
        assert!(err.contains("not a kernel tree"), "{err}");
        fs::create_dir_all(t.join("kernel/bpf")).unwrap();
        fs::write(t.join("Makefile"), "").unwrap();
        assert!(matches!(
            KernelSource::from_path(&t).unwrap(),
            KernelSource::Directory { .. }
        ));
        fs::write(t.join(".config"), "CONFIG_X=y\n").unwrap();
        let err = format!("{:#}", KernelSource::from_path(&t).unwrap_err());
        assert!(
            err.contains("in-tree build") && err.contains("make mrproper"),
            "{err}"
        );
        fs::remove_file(t.join(".config")).unwrap();
        fs::write(t.join("linux-6.13.tar.xz"), "").unwrap();
        let tar = KernelSource::from_path(&t.join("linux-6.13.tar.xz")).unwrap();
        assert!(matches!(tar, KernelSource::Tarball { .. }));
        assert!(tar.cache_key().unwrap().starts_with("linux-6.13-"));
        fs::remove_dir_all(t).unwrap();
    }
}
