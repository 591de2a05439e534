//! A first build of test_progs for a source starts as a copy of another
//! source's build of the same configuration and LLVM. A new base (a
//! developer's branch, a rebase) differs from the last in a few files,
//! and a build from nothing compiles every BPF object again (minutes per
//! runner). The copy's kernel sources are links to the other tree's
//! files and the selftests directory, which make writes into, a copy with
//! its mtimes; the mirror's sync (`mirror::sync_for_builds_inside`) then
//! makes each file whose bytes differ in the new tree a copy with a new
//! mtime, so make rebuilds what depends on it and nothing else. vmlinux.h
//! is rewritten by the Makefile only when its text differs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::build::{SELFTESTS_DIR, TREE};
use crate::kernel::{self, SourceConfig};

/// The file that says a work directory holds a build: test_progs.
pub fn built_marker() -> PathBuf {
    Path::new(TREE).join(SELFTESTS_DIR).join("test_progs")
}

/// Whether `work` holds a build of test_progs.
pub fn is_built(work: &Path) -> bool {
    work.join(built_marker()).is_file()
}

/// Makes `work` (named `name`, of `source`, held by the caller, not
/// built) a copy of the newest build of another source, when there is
/// one. Whether it copied.
pub fn from_other(source: &SourceConfig, work: &Path, name: &str) -> Result<bool> {
    let Some((from, _held)) = kernel::hold_other_work(source, name, &built_marker())? else {
        return Ok(false);
    };
    if !is_built(&from) {
        return Ok(false);
    }
    crate::status!(
        "kselftest",
        "a first build for this source: starting from {}",
        from.display()
    );
    let started = Instant::now();
    copy_tree(&from.join(TREE), &work.join(TREE))?;
    crate::status!(
        "kselftest",
        "copied in {:.0?}; what differs is rebuilt",
        started.elapsed()
    );
    Ok(true)
}

/// `to` (replaced) as a copy of `from`: links outside the selftests
/// directory (make never writes there), a copy with mtimes inside it.
/// Made beside `to` and renamed, so that a killed copy leaves no tree.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let making = to.with_extension("seeding");
    for dir in [&making, to] {
        remove_if_there(dir)?;
    }
    let work = to.parent().context("a tree has its work directory")?;
    fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    cp(&["-al"], from, &making)?;
    let selftests = making.join(SELFTESTS_DIR);
    fs::remove_dir_all(&selftests)
        .with_context(|| format!("removing the links in {}", selftests.display()))?;
    cp(&["-a"], &from.join(SELFTESTS_DIR), &selftests)?;
    fs::rename(&making, to)
        .with_context(|| format!("renaming {} to {}", making.display(), to.display()))
}

fn remove_if_there(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", dir.display()))
        }
        _ => Ok(()),
    }
}

fn cp(flags: &[&str], from: &Path, to: &Path) -> Result<()> {
    let out = Command::new("cp")
        .args(flags)
        .arg(from)
        .arg(to)
        .output()
        .with_context(|| format!("running cp {}", flags.join(" ")))?;
    if !out.status.success() {
        bail!(
            "cp {} {} {}: {}",
            flags.join(" "),
            from.display(),
            to.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn a_seeded_tree_links_the_kernel_sources_and_copies_the_selftests() {
        let dir = crate::util::tempdir();
        let (from, to) = (dir.join("from"), dir.join("work/tree"));
        let source = from.join("kernel/bpf/arraymap.c");
        let output = from.join(SELFTESTS_DIR).join("test_progs.o");
        for (path, text) in [(&source, "int x;"), (&output, "ELF")] {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30);
        crate::util::set_mtime(&output, old).unwrap();
        copy_tree(&from, &to).unwrap();
        fs::write(to.join("stale"), "from a killed build").unwrap();
        copy_tree(&from, &to).unwrap();
        let meta = |p: &Path| fs::metadata(p).unwrap();
        let linked = meta(&to.join("kernel/bpf/arraymap.c"));
        assert_eq!(
            linked.ino(),
            meta(&source).ino(),
            "a kernel source is a link"
        );
        let copied = meta(&to.join(SELFTESTS_DIR).join("test_progs.o"));
        assert_ne!(copied.ino(), meta(&output).ino(), "make writes the copy");
        assert_eq!(copied.mtime(), meta(&output).mtime(), "so make keeps it");
        assert!(!to.join("stale").exists() && !to.with_extension("seeding").exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
