//! A first build that starts as a copy of another build, so that kbuild
//! rebuilds what differs rather than every object: a kernel with the
//! developer's fragments from the same kernel's plain build, a variant
//! of the series from the variant before it, built just now, and base
//! of a branch's source from base of another source (a rebase).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};

use super::cache::{Cache, TreeLock};
use super::series::BaseName;
use super::{ExtraConfig, Flavor, KernelSpec};
use crate::util::set_mtime;

/// A kernel with fragments of the developer's starts as a copy of the
/// same kernel's plain build (when there is one and it is the first
/// build): kbuild then rebuilds what the new options reach, not every
/// object. Whether it copied.
pub fn from_plain(spec: &KernelSpec, tree: &Path, build_dir: &Path) -> Result<bool> {
    if spec.extra.is_empty() || build_dir.exists() {
        return Ok(false);
    }
    let plain = KernelSpec {
        extra: ExtraConfig::default(),
        ..spec.clone()
    };
    let from = tree.join(plain.build_dir_name());
    if !from.join("vmlinux").is_file() {
        return Ok(false);
    }
    crate::status!(
        spec.name(),
        "starting from {}'s build ({})",
        plain.name(),
        from.display()
    );
    copy_build(&from, build_dir, (&from, build_dir))?;
    Ok(true)
}

/// The kernel built last in this run (base, or a variant of the series
/// and its number of patches), in its tree (held by the run).
pub struct PreviousBuild<'a> {
    pub spec: &'a KernelSpec,
    pub tree: PathBuf,
    pub patches: usize,
}

/// A variant's first build starts as a copy of the build of `before`,
/// base or a variant of the same series with fewer patches, just built:
/// the variants after `mainline` differ from it in a file or two, and a
/// build of their own from nothing costs every object again (through
/// ccache, about 50 s each on these machines, against 18 s), and so does
/// mainline from eager (eager.patch keeps bpf.h as 7.3 has it). Of the
/// files the variant's patches touch (`touched`, copies in its tree),
/// those the same in `before`'s tree take its mtime, so the objects
/// built from them stand; the others a new one, so make rebuilds what
/// includes them. Whether it copied.
pub fn from_earlier(
    before: &PreviousBuild,
    (spec, patches): (&KernelSpec, usize),
    tree: &Path,
    touched: &[String],
) -> Result<bool> {
    let build_dir = tree.join(spec.build_dir_name());
    let from = before.tree.join(before.spec.build_dir_name());
    let comparable = matches!(spec.flavor, Flavor::Variant(_))
        && before.patches < patches
        && before.spec.build_dir_name() == spec.build_dir_name();
    if !comparable || build_dir.exists() || !from.join("vmlinux").is_file() {
        return Ok(false);
    }
    crate::status!(
        spec.name(),
        "starting from {}'s build ({})",
        before.spec.name(),
        from.display()
    );
    let newer = align_mtimes(&before.tree, tree, touched)?;
    copy_build(&from, &build_dir, (&before.tree, tree))?;
    crate::status!(
        spec.name(),
        "{} file(s) differ from {}'s: what includes them is rebuilt",
        newer.len(),
        before.spec.name()
    );
    Ok(true)
}

/// Base's build in another source, held while this source's base
/// starts from a copy of it.
pub struct OtherBase {
    tree: PathBuf,
    _lock: TreeLock,
}

/// For the first build of base from a branch's source (a new base commit:
/// a branch made or rebased), the newest build of the same kernel as base
/// of another source, held. The pristine tree, the cache's own copy, is
/// aligned with that base tree (a file with the same bytes takes its
/// mtime, any other the time now) before base mirrors it, so that make
/// rebuilds what the two bases differ in (through ccache, about 80 s
/// here for a tree that differs in nothing, against seconds). Only while
/// the source has no build at all (an earlier copy's objects would be
/// judged by another source's mtimes), and only from a tree no run
/// holds: a copy does without rather than wait. A copy is a speed-up:
/// one that fails is said, and the build starts from nothing.
pub fn other_base(
    cache: &Cache,
    key: &str,
    spec: &KernelSpec,
    pristine: &Path,
) -> Result<Option<OtherBase>> {
    if !spec.flavor.is_base() || has_a_build(&cache.source_dir(key))? {
        return Ok(None);
    }
    // Another source's tree as it is, nearest first: a Debian baseline's
    // mainline (the package as shipped, which a branch of 7.3 starts
    // from), a tree's own base, else a baseline's eager.
    let sources = cache.root().join("sources");
    let mut found = None;
    for base in OTHER_BASES {
        let built = Path::new(base).join(spec.build_dir_name()).join("vmlinux");
        if let Some(other) = super::newest_other(&sources, key, &built)? {
            found = Some((other, base));
            break;
        }
    }
    let Some((other, base)) = found else {
        return Ok(None);
    };
    let Some(lock) = cache.try_lock_tree(&other, base)? else {
        return Ok(None);
    };
    let tree = cache.source_dir(&other).join(base);
    if !tree.join(spec.build_dir_name()).join("vmlinux").is_file() {
        return Ok(None);
    }
    crate::status!(
        "base",
        "a first build for this source: starting from {}",
        tree.join(spec.build_dir_name()).display()
    );
    match align_tree(&tree, pristine, Path::new("")) {
        Ok(differ) => {
            crate::status!(
                "base",
                "{differ} file(s) differ from it: what includes them is rebuilt"
            );
            Ok(Some(OtherBase { tree, _lock: lock }))
        }
        Err(e) => {
            crate::status!("base", "no copy ({e:#}); building from nothing");
            Ok(None)
        }
    }
}

/// The trees of another source a branch's first base build may start
/// from, in order of preference.
const OTHER_BASES: [&str; 3] = [
    "mainline",
    BaseName::Base.as_str(),
    BaseName::Eager.as_str(),
];

/// Whether any tree of the source in `dir` has a build directory.
fn has_a_build(dir: &Path) -> Result<bool> {
    let Some(trees) = crate::util::gone_is_none(fs::read_dir(dir))? else {
        return Ok(false);
    };
    for tree in trees.flatten() {
        let Ok(entries) = fs::read_dir(tree.path()) else {
            continue;
        };
        if entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("_build"))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Copies `other`'s build into base's `tree` (then lets `other` go); a
/// copy that fails is said, and base builds from nothing.
pub fn from_other_base(other: OtherBase, spec: &KernelSpec, tree: &Path) {
    let name = spec.build_dir_name();
    if let Err(e) = copy_build(
        &other.tree.join(&name),
        &tree.join(&name),
        (&other.tree, tree),
    ) {
        crate::status!("base", "no copy ({e:#}); building from nothing");
        let _ = fs::remove_dir_all(tree.join(&name).with_extension("copying"));
    }
}

/// Gives each file under `tree/rel` the mtime of the same file under
/// `from` when their bytes are the same, the time now when not; returns
/// how many differ.
fn align_tree(from: &Path, tree: &Path, rel: &Path) -> Result<usize> {
    let dir = tree.join(rel);
    let entries = fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?;
    let mut differ = 0;
    for entry in entries {
        let entry = entry?;
        let rel = rel.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            differ += align_tree(from, tree, &rel)?;
        } else if kind.is_file() {
            let (path, other) = (tree.join(&rel), from.join(&rel));
            let mtime = match fs::metadata(&other) {
                Ok(m) if m.len() == entry.metadata()?.len() && same_bytes(&path, &other)? => {
                    m.modified()?
                }
                _ => {
                    differ += 1;
                    SystemTime::now()
                }
            };
            set_mtime(&path, mtime)?;
        }
    }
    Ok(differ)
}

fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    let read = |p: &Path| fs::read(p).with_context(|| format!("reading {}", p.display()));
    Ok(read(a)? == read(b)?)
}

/// Gives each file of `touched` in `tree` the mtime of the same file in
/// `from` when their contents are the same, and the time now when they
/// differ; returns those that differ. Whether a file differs is read
/// from its bytes whatever its links: a patched file can be linked from
/// a tree made from this one (the BPF selftests' tree is), and taken
/// for the same it kept an mtime older than `from`'s objects, so make
/// rebuilt nothing. A file shared by links keeps its mtime when the
/// same (another name of it may be the pristine source's); one that
/// differs gets a copy of its own before its new mtime.
fn align_mtimes(from: &Path, tree: &Path, touched: &[String]) -> Result<Vec<String>> {
    let now = SystemTime::now();
    let mut newer = Vec::new();
    for file in touched {
        let path = tree.join(file);
        let Some(meta) = crate::util::gone_is_none(fs::metadata(&path))? else {
            continue;
        };
        let other = from.join(file);
        let read = |p: &Path| fs::read(p).with_context(|| format!("reading {}", p.display()));
        let body = read(&path)?;
        let same = crate::util::gone_is_none(fs::read(&other))?.as_deref() == Some(&body[..]);
        let shared = meta.nlink() > 1;
        if same {
            if !shared {
                set_mtime(&path, fs::metadata(&other)?.modified()?)?;
            }
            continue;
        }
        if shared {
            unshare(&path, &body)?;
        }
        set_mtime(&path, now)?;
        newer.push(file.clone());
    }
    Ok(newer)
}

/// Replaces `path`, a name of a file with other links, by a copy of its
/// own holding `body`.
fn unshare(path: &Path, body: &[u8]) -> Result<()> {
    let tmp = path.with_extension("unshare");
    fs::write(&tmp, body).with_context(|| format!("writing {}", tmp.display()))?;
    let mode = fs::metadata(path)?.permissions();
    fs::set_permissions(&tmp, mode)?;
    fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))
}

/// Copies the build directory `from` to `to`, through a temporary name
/// (a copy cut short is never taken for a build), with the tool
/// commands that name the first of `roots` made to name the second.
fn copy_build(from: &Path, to: &Path, roots: (&Path, &Path)) -> Result<()> {
    let tmp = to.with_extension("copying");
    let _ = fs::remove_dir_all(&tmp);
    let sh = crate::project::shell()?;
    xshell::cmd!(sh, "cp -a --reflink=auto {from} {tmp}")
        .quiet()
        .run()
        .with_context(|| format!("copying {} to {}", from.display(), tmp.display()))?;
    rebase_tool_commands(&tmp.join("tools"), roots.0, roots.1)?;
    fs::rename(&tmp, to).with_context(|| format!("moving {} into place", tmp.display()))
}

/// The host tools kbuild builds (objtool, resolve_btfids) record their
/// build directory's absolute path in their `.cmd` files: in a copy,
/// make would take every command for changed and rebuild them, and with
/// objtool every object. Pointed at the copy (mtimes kept), they stand.
fn rebase_tool_commands(dir: &Path, from: &Path, to: &Path) -> Result<()> {
    rebase_paths(dir, (from, to), &|p| {
        p.extension().is_some_and(|e| e == "cmd")
    })
}

/// In the files under `dir` that `wanted` takes, the path `from` becomes
/// `to`, their mtimes kept: a copied build's records of commands and
/// dependencies then name the copy.
pub fn rebase_paths(
    dir: &Path,
    (from, to): (&Path, &Path),
    wanted: &dyn Fn(&Path) -> bool,
) -> Result<()> {
    let (old, new) = (format!("{}/", from.display()), format!("{}/", to.display()));
    let Some(entries) = crate::util::gone_is_none(std::fs::read_dir(dir))? else {
        return Ok(());
    };
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            rebase_paths(&path, (from, to), wanted)?;
            continue;
        }
        if !wanted(&path) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if !text.contains(&old) {
            continue;
        }
        let modified = std::fs::metadata(&path)?.modified()?;
        std::fs::write(&path, text.replace(&old, &new))
            .with_context(|| format!("rewriting {}", path.display()))?;
        set_mtime(&path, modified)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_with_any_build_is_not_copied_into_again() {
        let t = crate::util::tempdir();
        assert!(!has_a_build(&t.join("none")).unwrap());
        std::fs::create_dir_all(t.join("pristine/kernel")).unwrap();
        std::fs::create_dir_all(t.join("kselftest/tree")).unwrap();
        assert!(!has_a_build(&t).unwrap());
        std::fs::create_dir_all(t.join("lazy-flag/_build-bpfci")).unwrap();
        assert!(
            has_a_build(&t).unwrap(),
            "a variant's build of another config"
        );
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn a_tree_takes_the_other_s_mtimes_where_the_bytes_are_the_same() {
        let t = crate::util::tempdir();
        let (from, tree) = (t.join("other"), t.join("pristine"));
        for (root, same, changed) in [(&from, "a", "old"), (&tree, "a", "new")] {
            std::fs::create_dir_all(root.join("kernel/bpf")).unwrap();
            std::fs::write(root.join("kernel/bpf/same.c"), same).unwrap();
            std::fs::write(root.join("kernel/bpf/changed.c"), changed).unwrap();
        }
        std::fs::write(tree.join("kernel/bpf/new.c"), "x").unwrap();
        let old = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        for f in ["same.c", "changed.c"] {
            set_mtime(&from.join("kernel/bpf").join(f), old).unwrap();
            set_mtime(&tree.join("kernel/bpf").join(f), old).unwrap();
        }
        let before = SystemTime::now();
        assert_eq!(align_tree(&from, &tree, Path::new("")).unwrap(), 2);
        let mtime = |f: &str| {
            let p = tree.join("kernel/bpf").join(f);
            std::fs::metadata(p).unwrap().modified().unwrap()
        };
        assert_eq!(mtime("same.c"), old);
        assert!(mtime("changed.c") >= before, "a change is rebuilt");
        assert!(mtime("new.c") >= before, "so is a new file");
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn a_copied_builds_tool_commands_point_at_the_copy_with_their_mtimes() {
        let t = crate::util::tempdir();
        let (from, to) = (t.join("_build-default"), t.join("_build-default+x-1"));
        let cmd = to.join("tools/objtool/.check.o.cmd");
        std::fs::create_dir_all(cmd.parent().unwrap()).unwrap();
        let text = format!(
            "cmd := cc -o {0}/tools/objtool/check.o {0}/x\n",
            from.display()
        );
        std::fs::write(&cmd, &text).unwrap();
        let other = to.join("tools/objtool/check.o");
        std::fs::write(&other, format!("{}/ binary", from.display())).unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        set_mtime(&cmd, old).unwrap();
        rebase_tool_commands(&to.join("tools"), &from, &to).unwrap();
        let got = std::fs::read_to_string(&cmd).unwrap();
        assert_eq!(
            got,
            text.replace(
                &format!("{}/", from.display()),
                &format!("{}/", to.display())
            )
        );
        assert_eq!(std::fs::metadata(&cmd).unwrap().modified().unwrap(), old);
        assert!(
            std::fs::read_to_string(&other)
                .unwrap()
                .starts_with(&from.display().to_string()),
            "only .cmd files"
        );
        std::fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn a_copied_variants_files_take_the_mtime_of_the_same_and_a_new_one_where_they_differ() {
        let t = crate::util::tempdir();
        let (from, tree) = (t.join("patched"), t.join("direct"));
        let old = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let write = |dir: &Path, file: &str, body: &str| {
            let p = dir.join(file);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, body).unwrap();
            set_mtime(&p, old).unwrap();
        };
        write(&from, "include/linux/bpf.h", "same");
        write(&from, "kernel/bpf/arraymap.c", "0001");
        write(&tree, "include/linux/bpf.h", "same");
        write(&tree, "kernel/bpf/arraymap.c", "0001 and 0002");
        write(&tree, "kernel/bpf/arena.c", "only here");
        // A link to the pristine source: never given an mtime.
        write(&t, "pristine/kernel/bpf/core.c", "pristine");
        write(&from, "kernel/bpf/core.c", "pristine");
        fs::hard_link(
            t.join("pristine/kernel/bpf/core.c"),
            tree.join("kernel/bpf/core.c"),
        )
        .unwrap();
        // A patched file another tree links to (the selftests' tree is
        // made from mainline's): it differs, so it is rebuilt, and only
        // this tree's copy takes the new mtime.
        write(&from, "kernel/bpf/syscall.c", "eager");
        write(&tree, "kernel/bpf/syscall.c", "the seed");
        fs::hard_link(
            tree.join("kernel/bpf/syscall.c"),
            t.join("selftests-tree-syscall.c"),
        )
        .unwrap();
        let later = SystemTime::now() - std::time::Duration::from_secs(60);
        set_mtime(&tree.join("include/linux/bpf.h"), later).unwrap();
        let touched: Vec<String> = [
            "include/linux/bpf.h",
            "kernel/bpf/arena.c",
            "kernel/bpf/arraymap.c",
            "kernel/bpf/core.c",
            "kernel/bpf/gone.c",
            "kernel/bpf/syscall.c",
        ]
        .map(String::from)
        .to_vec();
        let newer = align_mtimes(&from, &tree, &touched).unwrap();
        assert_eq!(
            newer,
            [
                "kernel/bpf/arena.c",
                "kernel/bpf/arraymap.c",
                "kernel/bpf/syscall.c"
            ]
        );
        let mtime = |f: &str| fs::metadata(tree.join(f)).unwrap().modified().unwrap();
        assert_eq!(
            mtime("include/linux/bpf.h"),
            old,
            "the same: patched's mtime"
        );
        assert!(mtime("kernel/bpf/arraymap.c") > later, "differs: now");
        assert!(mtime("kernel/bpf/arena.c") > later, "new: now");
        assert_eq!(mtime("kernel/bpf/core.c"), old, "a link: left alone");
        assert!(
            mtime("kernel/bpf/syscall.c") > later,
            "linked, differs: now"
        );
        let other_name = fs::metadata(t.join("selftests-tree-syscall.c")).unwrap();
        assert_eq!(other_name.modified().unwrap(), old, "the other tree's");
        assert_eq!(
            fs::read_to_string(tree.join("kernel/bpf/syscall.c")).unwrap(),
            "the seed"
        );
        fs::remove_dir_all(t).unwrap();
    }
}
