//! A first build of test_progs for a source starts as a copy of another
//! source's build of the same configuration and LLVM. A new base (a
//! developer's branch, a rebase) differs from the last in a few files,
//! and a build from nothing compiles every BPF object again (minutes per
//! runner). The copy's kernel sources are links to the other tree's
//! files and the selftests directory, which make writes into, a copy with
//! its mtimes; the other source's own selftests files that this tree
//! lacks (a test only its branch has) go, and the records of commands and
//! dependencies are made to name the copy. The first sync
//! (`mirror::sync_after_copy`) then links each file with the same bytes
//! to this tree's and makes each that differs a copy with a new mtime, so
//! make rebuilds what depends on it and nothing else; vmlinux.h is
//! rewritten by the Makefile only when its text differs. A copy is a
//! speed-up: when it cannot be made, the build starts from nothing.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use super::build::{is_output, MIRRORED_FROM, SELFTESTS_DIR, TEST_MODULES, TREE};
use crate::kernel::{self, mirror, SourceConfig};
use crate::util::gone_is_none;

/// The file that says a work directory holds a build: test_progs.
pub fn built_marker() -> PathBuf {
    Path::new(TREE).join(SELFTESTS_DIR).join("test_progs")
}

/// Whether `work` holds a build of test_progs.
pub fn is_built(work: &Path) -> bool {
    work.join(built_marker()).is_file()
}

/// Makes `work` (named `name`, of `source`, held by the caller, not
/// built) a copy of the newest build of another source that no run
/// holds, synced with `tree`, the tree test_progs is built from. Whether
/// it did; a copy that fails is said and left, not an error.
pub fn from_other(source: &SourceConfig, (work, name): (&Path, &str), tree: &Path) -> Result<bool> {
    let Some((from, _held)) = kernel::hold_other_work(source, name, &built_marker())? else {
        return Ok(false);
    };
    let Some(other_tree) = mirrored_from(&from) else {
        return Ok(false);
    };
    crate::status!(
        "kselftest",
        "a first build for this source: starting from {}",
        from.display()
    );
    let started = Instant::now();
    let copy = work.join(TREE);
    match copy_and_sync(&from, (&copy, tree), &other_tree) {
        Ok(()) => {
            crate::status!(
                "kselftest",
                "copied in {:.0?}; what differs is rebuilt",
                started.elapsed()
            );
            Ok(true)
        }
        Err(e) => {
            crate::status!("kselftest", "no copy ({e:#}); building from nothing");
            remove_if_there(&copy)?;
            Ok(false)
        }
    }
}

/// The tree the build in `work` was made from, if it is still there.
fn mirrored_from(work: &Path) -> Option<PathBuf> {
    let text = fs::read_to_string(work.join(MIRRORED_FROM)).ok()?;
    let tree = PathBuf::from(text.trim());
    tree.join(SELFTESTS_DIR).is_dir().then_some(tree)
}

/// `copy`, made from `from`'s tree (a mirror of `other_tree`), then
/// synced with `tree`.
fn copy_and_sync(from: &Path, (copy, tree): (&Path, &Path), other_tree: &Path) -> Result<()> {
    copy_tree(&from.join(TREE), copy)?;
    drop_other_sources(other_tree, tree, copy, Path::new(SELFTESTS_DIR))?;
    // The test modules are kbuild's (M=), whose records name the other
    // tree in more files than its .cmd ones (modules.order, the .mod
    // lists): built again against each kernel anyway, they start clean.
    for module in TEST_MODULES {
        let rel = Path::new(SELFTESTS_DIR).join(module);
        drop_outputs(tree, copy, &rel)?;
    }
    let records = |p: &Path| {
        let name = p
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        name.ends_with(".d") || name.ends_with(".cmd")
    };
    let old = from.join(TREE);
    kernel::first_build::rebase_paths(&copy.join(SELFTESTS_DIR), (&old, copy), &records)?;
    mirror::sync_after_copy(tree, copy, &is_output)
        .with_context(|| format!("syncing {} with {}", copy.display(), tree.display()))?;
    Ok(())
}

/// Removes from `copy` each file under `rel` that `other_tree` has and
/// `tree` lacks: a source of the other's (a test only its branch has),
/// which the sync would keep as an output.
fn drop_other_sources(other_tree: &Path, tree: &Path, copy: &Path, rel: &Path) -> Result<()> {
    let dir = other_tree.join(rel);
    for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let rel = rel.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            drop_other_sources(other_tree, tree, copy, &rel)?;
        } else if fs::symlink_metadata(tree.join(&rel)).is_err() {
            let stale = copy.join(&rel);
            if fs::symlink_metadata(&stale).is_ok() {
                fs::remove_file(&stale).with_context(|| format!("removing {}", stale.display()))?;
            }
        }
    }
    Ok(())
}

/// Removes from `copy` each file under `rel` that `tree` lacks: what a
/// build wrote there.
fn drop_outputs(tree: &Path, copy: &Path, rel: &Path) -> Result<()> {
    let dir = copy.join(rel);
    let Some(entries) = gone_is_none(fs::read_dir(&dir))? else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry?;
        let rel = rel.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            drop_outputs(tree, copy, &rel)?;
        } else if fs::symlink_metadata(tree.join(&rel)).is_err() {
            fs::remove_file(entry.path())
                .with_context(|| format!("removing {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// `to` (replaced) as a copy of `from`: links outside the selftests
/// directory (make never writes there), a copy with mtimes inside it.
/// Made beside `to` and renamed, so that a killed copy leaves no tree.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    // Its name from before `first_build`: a killed copy's is still removed.
    let making = to.with_extension("seeding");
    for dir in [&making, to] {
        remove_if_there(dir)?;
    }
    let work = to.parent().context("a tree has its work directory")?;
    fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let sh = crate::project::shell()?;
    xshell::cmd!(sh, "cp -al {from} {making}")
        .quiet()
        .run()
        .with_context(|| format!("linking {} into {}", from.display(), making.display()))?;
    let selftests = making.join(SELFTESTS_DIR);
    fs::remove_dir_all(&selftests)
        .with_context(|| format!("removing the links in {}", selftests.display()))?;
    let theirs = from.join(SELFTESTS_DIR);
    xshell::cmd!(sh, "cp -a {theirs} {selftests}")
        .quiet()
        .run()
        .with_context(|| format!("copying {} to {}", theirs.display(), selftests.display()))?;
    fs::rename(&making, to)
        .with_context(|| format!("renaming {} to {}", making.display(), to.display()))
}

fn remove_if_there(dir: &Path) -> Result<()> {
    gone_is_none(fs::remove_dir_all(dir)).with_context(|| format!("removing {}", dir.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn a_copied_tree_links_the_kernel_sources_and_copies_the_selftests() {
        let dir = crate::util::tempdir();
        let (from, to) = (dir.join("from"), dir.join("work/tree"));
        let source = from.join("kernel/bpf/arraymap.c");
        let output = from.join(SELFTESTS_DIR).join("test_progs.o");
        write(&source, "int x;");
        write(&output, "ELF");
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

    #[test]
    fn a_copy_keeps_no_test_of_the_other_branch_and_names_itself_in_its_records() {
        let dir = crate::util::tempdir();
        let (other, ours) = (dir.join("other-src"), dir.join("our-src"));
        let (from, copy) = (dir.join("other-work"), dir.join("work/tree"));
        let theirs = format!("{SELFTESTS_DIR}/prog_tests/theirs.c");
        let shared = format!("{SELFTESTS_DIR}/prog_tests/shared.c");
        for (root, files) in [(&other, vec![&theirs, &shared]), (&ours, vec![&shared])] {
            for f in files {
                write(&root.join(f), "void test_x(void) {}");
            }
        }
        // The other work directory: its mirror, an output, a record.
        for f in [&theirs, &shared] {
            write(&from.join(TREE).join(f), "void test_x(void) {}");
        }
        let module_out = format!("{SELFTESTS_DIR}/bpf_testmod/modules.order");
        write(&from.join(TREE).join(&module_out), "/other/bpf_testmod.o\n");
        let record = from.join(TREE).join(SELFTESTS_DIR).join("shared.test.d");
        let dep = format!(
            "{}/{SELFTESTS_DIR}/shared.test.o: x.h\n",
            from.join(TREE).display()
        );
        write(&record, &dep);
        copy_and_sync(&from, (&copy, &ours), &other).unwrap();
        assert!(!copy.join(&theirs).exists(), "the other branch's test went");
        assert!(
            !copy.join(&module_out).exists(),
            "a test module starts clean"
        );
        assert!(copy.join(&shared).is_file());
        let rewritten = fs::read_to_string(copy.join(SELFTESTS_DIR).join("shared.test.d")).unwrap();
        let ours_dep = format!("{}/{SELFTESTS_DIR}/shared.test.o: x.h\n", copy.display());
        assert_eq!(rewritten, ours_dep);
        let linked = fs::metadata(copy.join(&shared)).unwrap().ino();
        assert_eq!(
            linked,
            fs::metadata(ours.join(&shared)).unwrap().ino(),
            "same bytes: a link"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
