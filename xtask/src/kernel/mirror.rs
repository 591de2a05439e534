//! A hard-link mirror of a kernel tree: a cheap copy we own, whose files
//! share inodes (and so contents and mtimes) with the source. Builds and
//! patches happen in the mirror, never in the source.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// What a sync did, and a fingerprint of the source's state.
#[derive(Debug, Default)]
pub struct SyncReport {
    pub linked: usize,
    pub removed: usize,
    pub unchanged: usize,
    /// Hash of (path, inode, size, mtime) of every source file: changes
    /// whenever a file is edited in place, replaced, added or removed.
    pub fingerprint: String,
}

/// Not source: version control data is never mirrored.
pub fn is_source_artifact(rel: &Path) -> bool {
    rel == Path::new(".git")
}

/// Paths at the top of a mirror that belong to us: build directories and
/// stamps. They are neither mirrored nor removed.
pub fn is_ours(rel: &Path) -> bool {
    let s = rel.to_string_lossy();
    !s.contains('/') && (s.starts_with("_build-") || s.starts_with(".bpflab-"))
}

/// Makes `dst` a hard-link mirror of `src`. Paths in `keep` (relative) are
/// left alone in `dst`: they are the patched files, real copies.
pub fn sync(src: &Path, dst: &Path, keep: &HashSet<PathBuf>) -> Result<SyncReport> {
    let keeps = Keeps {
        keep,
        untracked: &|_| false,
        fresh_copies: false,
        relink_same: false,
    };
    sync_with(src, dst, &keeps)
}

/// [`sync`] for a mirror that make builds inside (the BPF selftests):
/// the paths the source lacks for which `outputs` is true are left alone,
/// and a file that changed since the last sync becomes a copy with a new
/// mtime, so that make rebuilds what depends on it even when the change
/// takes the file back to an older version (a link keeps the source's
/// mtime, older than the outputs).
pub fn sync_for_builds_inside(
    src: &Path,
    dst: &Path,
    outputs: &dyn Fn(&Path) -> bool,
) -> Result<SyncReport> {
    sync_building(src, dst, outputs, false)
}

/// [`sync_for_builds_inside`] for a mirror just made as a copy of
/// another source's (`kselftest/first_build.rs`): its files are links to that
/// source's tree or copies with that build's mtimes. One with the bytes
/// of `src`'s and an mtime no older than it becomes a link to `src`'s
/// (make sees nothing newer, and later syncs compare inodes, not the
/// bytes of every file). Only here: a copy a sync made because its
/// source changed must keep its new mtime until make has run.
pub fn sync_after_copy(
    src: &Path,
    dst: &Path,
    outputs: &dyn Fn(&Path) -> bool,
) -> Result<SyncReport> {
    sync_building(src, dst, outputs, true)
}

fn sync_building(
    src: &Path,
    dst: &Path,
    outputs: &dyn Fn(&Path) -> bool,
    relink_same: bool,
) -> Result<SyncReport> {
    let keeps = Keeps {
        keep: &HashSet::new(),
        untracked: outputs,
        fresh_copies: true,
        relink_same,
    };
    sync_with(src, dst, &keeps)
}

fn sync_with(src: &Path, dst: &Path, keeps: &Keeps) -> Result<SyncReport> {
    fs::create_dir_all(dst).with_context(|| format!("creating {}", dst.display()))?;
    let mut report = SyncReport::default();
    let mut hasher = Sha256::new();
    let mut seen = HashSet::new();
    link_dir(
        src,
        dst,
        Path::new(""),
        keeps,
        &mut report,
        &mut hasher,
        &mut seen,
    )?;
    prune_dir(dst, Path::new(""), keeps, &seen, &mut report)?;
    report.fingerprint = hex::encode(hasher.finalize());
    Ok(report)
}

/// What a fingerprint records of a file: which inode, how big, how old.
fn identity(m: &fs::Metadata) -> String {
    format!(
        "\0{}\0{}\0{}.{}\n",
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec()
    )
}

/// Fingerprint of just `files` (relative to `root`); a missing file counts.
pub fn fingerprint_of(root: &Path, files: &[String]) -> Result<String> {
    let mut hasher = Sha256::new();
    for f in files {
        hasher.update(f.as_bytes());
        match fs::symlink_metadata(root.join(f)) {
            Ok(m) => hasher.update(identity(&m).as_bytes()),
            Err(_) => hasher.update(b"\0missing\n"),
        }
    }
    Ok(hex::encode(hasher.finalize()))
}

fn sorted_entries(dir: &Path) -> Result<Vec<fs::DirEntry>> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<io::Result<_>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    Ok(entries)
}

fn link_dir(
    src_root: &Path,
    dst_root: &Path,
    rel: &Path,
    keeps: &Keeps,
    report: &mut SyncReport,
    hasher: &mut Sha256,
    seen: &mut HashSet<PathBuf>,
) -> Result<()> {
    for entry in sorted_entries(&src_root.join(rel))? {
        let rel_child = rel.join(entry.file_name());
        if is_source_artifact(&rel_child) || is_ours(&rel_child) {
            continue;
        }
        seen.insert(rel_child.clone());
        let src = src_root.join(&rel_child);
        let dst = dst_root.join(&rel_child);
        let meta =
            fs::symlink_metadata(&src).with_context(|| format!("reading {}", src.display()))?;
        hasher.update(rel_child.as_os_str().as_encoded_bytes());
        hasher.update(identity(&meta).as_bytes());
        if meta.is_dir() {
            match fs::symlink_metadata(&dst) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    fs::remove_file(&dst)?;
                    fs::create_dir(&dst)?;
                }
                Err(_) => {
                    fs::create_dir(&dst).with_context(|| format!("creating {}", dst.display()))?
                }
            }
            link_dir(src_root, dst_root, &rel_child, keeps, report, hasher, seen)?;
        } else if keeps.keep.contains(&rel_child) {
            report.unchanged += 1;
        } else if meta.file_type().is_symlink() {
            let target = fs::read_link(&src)?;
            if fs::read_link(&dst).ok().as_ref() == Some(&target) {
                report.unchanged += 1;
            } else {
                remove_any(&dst)?;
                std::os::unix::fs::symlink(&target, &dst)
                    .with_context(|| format!("creating symlink {}", dst.display()))?;
                report.linked += 1;
            }
        } else {
            let dst_meta = fs::symlink_metadata(&dst).ok();
            match file_state((&src, &meta), (&dst, dst_meta.as_ref()), keeps) {
                FileState::Same => report.unchanged += 1,
                FileState::SameBytesNoNewer => {
                    remove_any(&dst)?;
                    link_or_copy(&src, &dst)?;
                    report.unchanged += 1;
                }
                FileState::Differs if keeps.fresh_copies && dst_meta.is_some() => {
                    remove_any(&dst)?;
                    fs::copy(&src, &dst).with_context(|| format!("copying {}", src.display()))?;
                    report.linked += 1;
                }
                FileState::Differs => {
                    remove_any(&dst)?;
                    link_or_copy(&src, &dst)?;
                    report.linked += 1;
                }
            }
        }
    }
    Ok(())
}

/// A mirror's file against its source's.
enum FileState {
    /// The source's file (its inode, or a copy with its size and mtime).
    Same,
    /// Right after a copy ([`sync_after_copy`]): a copy or another
    /// tree's link with the source's bytes and an mtime no older than
    /// the source's.
    SameBytesNoNewer,
    Differs,
}

fn file_state(
    (src, meta): (&Path, &fs::Metadata),
    (dst, dst_meta): (&Path, Option<&fs::Metadata>),
    keeps: &Keeps,
) -> FileState {
    let Some(m) = dst_meta else {
        return FileState::Differs;
    };
    if m.ino() == meta.ino() && m.dev() == meta.dev() {
        return FileState::Same;
    }
    if keeps.fresh_copies {
        // A copy of ours: only its bytes say whether it is still the
        // source's (its mtime is its own).
        if !same_contents(src, dst) {
            return FileState::Differs;
        }
        let no_newer = (meta.mtime(), meta.mtime_nsec()) <= (m.mtime(), m.mtime_nsec());
        return if keeps.relink_same && no_newer && m.dev() == meta.dev() {
            FileState::SameBytesNoNewer
        } else {
            FileState::Same
        };
    }
    // Where links were not possible and the file was copied with its
    // mtime: the same size and mtime.
    let copied = (m.dev() != meta.dev() || m.nlink() == 1)
        && m.size() == meta.size()
        && m.mtime() == meta.mtime()
        && m.mtime_nsec() == meta.mtime_nsec();
    if copied {
        FileState::Same
    } else {
        FileState::Differs
    }
}

/// What a sync leaves alone, and how it replaces a changed file.
struct Keeps<'a> {
    keep: &'a HashSet<PathBuf>,
    untracked: &'a dyn Fn(&Path) -> bool,
    fresh_copies: bool,
    relink_same: bool,
}

fn prune_dir(
    dst_root: &Path,
    rel: &Path,
    keeps: &Keeps,
    seen: &HashSet<PathBuf>,
    report: &mut SyncReport,
) -> Result<()> {
    for entry in sorted_entries(&dst_root.join(rel))? {
        let rel_child = rel.join(entry.file_name());
        if is_ours(&rel_child) || keeps.keep.contains(&rel_child) {
            continue;
        }
        let path = dst_root.join(&rel_child);
        if !seen.contains(&rel_child) {
            if (keeps.untracked)(&rel_child) {
                continue;
            }
            remove_any(&path)?;
            report.removed += 1;
        } else if entry.file_type()?.is_dir() {
            prune_dir(dst_root, &rel_child, keeps, seen, report)?;
        }
    }
    Ok(())
}

/// Whether two regular files hold the same bytes.
fn same_contents(a: &Path, b: &Path) -> bool {
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(ma), Ok(mb)) if ma.is_file() && mb.is_file() && ma.len() == mb.len() => {
            matches!((fs::read(a), fs::read(b)), (Ok(x), Ok(y)) if x == y)
        }
        _ => false,
    }
}

fn remove_any(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            fs::remove_dir_all(path).with_context(|| format!("removing {}", path.display()))
        }
        Ok(_) => fs::remove_file(path).with_context(|| format!("removing {}", path.display())),
        Err(_) => Ok(()),
    }
}

/// Hard-links `src` to `dst`; across file systems, copies it instead
/// (keeping the mtime, so make sees the source's age).
fn link_or_copy(src: &Path, dst: &Path) -> Result<()> {
    match fs::hard_link(src, dst) {
        Ok(()) => Ok(()),
        // Another file system, or links refused (fs.protected_hardlinks on
        // a tree we do not own): copy.
        Err(err) if matches!(err.raw_os_error(), Some(libc::EXDEV) | Some(libc::EPERM)) => {
            fs::copy(src, dst).with_context(|| format!("copying {}", src.display()))?;
            crate::util::set_mtime(dst, fs::metadata(src)?.modified()?)?;
            Ok(())
        }
        Err(err) => {
            Err(err).with_context(|| format!("hard-linking {} to {}", src.display(), dst.display()))
        }
    }
}

/// Replaces `rel` in `dst` by a real copy of `src/rel` (a fresh inode with
/// a fresh mtime), so that patching it cannot reach the source and make
/// rebuilds whatever depends on it. A file absent from `src` is removed.
pub fn replace_with_copy(src: &Path, dst: &Path, rel: &Path) -> Result<()> {
    let from = src.join(rel);
    let to = dst.join(rel);
    remove_any(&to)?;
    if from.exists() {
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::copy(&from, &to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::tempdir;

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    #[test]
    fn mirror_links_skips_artifacts_and_prunes() {
        let t = tempdir();
        let (src, dst) = (t.join("src"), t.join("dst"));
        write(&src.join("Makefile"), "all:\n");
        write(&src.join("kernel/bpf/arraymap.c"), "int x;\n");
        write(&src.join(".git/HEAD"), "ref\n");
        let r1 = sync(&src, &dst, &HashSet::new()).unwrap();
        assert_eq!(r1.linked, 2);
        let ino = |p: &Path| fs::metadata(p).unwrap().ino();
        assert_eq!(ino(&src.join("Makefile")), ino(&dst.join("Makefile")));
        assert!(!dst.join(".git").exists());

        // Nothing changed: nothing to do, same fingerprint.
        let r2 = sync(&src, &dst, &HashSet::new()).unwrap();
        assert_eq!(r2.linked + r2.removed, 0);
        assert_eq!(r1.fingerprint, r2.fingerprint);

        // Our build dirs survive; a removed source file disappears; a
        // replaced one is relinked; the fingerprint moves.
        write(&dst.join("_build-default/.config"), "x");
        fs::remove_file(src.join("Makefile")).unwrap();
        fs::remove_file(src.join("kernel/bpf/arraymap.c")).unwrap();
        write(&src.join("kernel/bpf/arraymap.c"), "int y;\n");
        let r3 = sync(&src, &dst, &HashSet::new()).unwrap();
        assert_eq!((r3.linked, r3.removed), (1, 1));
        assert_ne!(r3.fingerprint, r2.fingerprint);
        assert!(dst.join("_build-default/.config").exists());
        assert_eq!(
            fs::read_to_string(dst.join("kernel/bpf/arraymap.c")).unwrap(),
            "int y;\n"
        );
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn untracked_outputs_can_be_kept() {
        let t = crate::util::tempdir();
        let (src, dst) = (t.join("src"), t.join("dst"));
        write(&src.join("sel/prog.c"), "int x;");
        sync(&src, &dst, &HashSet::new()).unwrap();
        write(&dst.join("sel/prog.o"), "obj");
        write(&dst.join("other.o"), "obj");
        let in_sel = |p: &Path| p.starts_with("sel");
        let r = sync_for_builds_inside(&src, &dst, &in_sel).unwrap();
        assert!(dst.join("sel/prog.o").exists());
        assert!(!dst.join("other.o").exists());
        assert_eq!(r.removed, 1);
    }

    #[test]
    fn a_changed_file_in_a_build_mirror_is_newer_than_its_outputs() {
        let t = crate::util::tempdir();
        let (src, dst) = (t.join("src"), t.join("dst"));
        let any = |_: &Path| true;
        write(&src.join("m.c"), "old");
        sync_for_builds_inside(&src, &dst, &any).unwrap();
        let old = fs::metadata(src.join("m.c")).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(&dst.join("m.o"), "built from old");
        let built = fs::metadata(dst.join("m.o")).unwrap().modified().unwrap();
        // Back to an older version: a link would carry the old mtime.
        fs::remove_file(src.join("m.c")).unwrap();
        write(&src.join("m.c"), "new");
        fs::File::options()
            .write(true)
            .open(src.join("m.c"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        sync_for_builds_inside(&src, &dst, &any).unwrap();
        let now = fs::metadata(dst.join("m.c")).unwrap().modified().unwrap();
        assert!(
            now > built,
            "the changed source must look newer than its output"
        );
        assert_eq!(fs::read_to_string(dst.join("m.c")).unwrap(), "new");
        // Unchanged since: the copy stays as it is.
        let r = sync_for_builds_inside(&src, &dst, &any).unwrap();
        assert_eq!(r.linked, 0);
        assert_eq!(
            fs::metadata(dst.join("m.c")).unwrap().modified().unwrap(),
            now
        );
    }

    #[test]
    fn kept_copies_are_left_alone_and_never_reach_the_source() {
        let t = tempdir();
        let (src, dst) = (t.join("src"), t.join("dst"));
        write(&src.join("a.c"), "original\n");
        sync(&src, &dst, &HashSet::new()).unwrap();
        replace_with_copy(&src, &dst, Path::new("a.c")).unwrap();
        fs::write(dst.join("a.c"), "patched\n").unwrap();
        let keep: HashSet<PathBuf> = [PathBuf::from("a.c")].into();
        let r = sync(&src, &dst, &keep).unwrap();
        assert_eq!(r.linked + r.removed, 0);
        assert_eq!(fs::read_to_string(src.join("a.c")).unwrap(), "original\n");
        assert_eq!(fs::read_to_string(dst.join("a.c")).unwrap(), "patched\n");
        fs::remove_dir_all(t).unwrap();
    }
}
