//! The patched tree: a hard-link mirror of the pristine source with the
//! series applied. Files the series touches are real copies, so patching
//! never reaches the source. Applying is all-or-nothing.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use xshell::cmd;

use super::mirror;
use super::series::{Patch, Series};
use crate::util::{gone_is_none, read_stamp, write_atomic};

const STAMP: &str = ".bpflab-applied";

/// Recorded after a successful apply; a mismatch means re-apply.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
struct Applied {
    series_hash: String,
    /// Of the pristine versions of the files the series touches only: an
    /// edit elsewhere in the source needs a rebuild, not a re-apply.
    touched_fingerprint: String,
    files: Vec<String>,
}

/// What the stamp says was applied (nothing, without one). A stamp that
/// cannot be read would hide which files differ from pristine: an error.
fn applied(stamp: &Path) -> Result<Applied> {
    let text = read_stamp(stamp)?;
    if text.is_empty() {
        return Ok(Applied::default());
    }
    serde_json::from_str(&text).with_context(|| {
        format!(
            "the stamp {} is corrupt; remove the tree {} and run again",
            stamp.display(),
            stamp.parent().unwrap_or(stamp).display()
        )
    })
}

/// Brings `tree` to "pristine + series". Returns the tree's state key
/// (changes whenever the source or the series does).
pub fn prepare_patched(pristine: &Path, tree: &Path, series: &Series) -> Result<String> {
    let stamp_path = tree.join(STAMP);
    let old = applied(&stamp_path)?;
    let mut files = series.touched_files();
    // Files an older series patched must go back to pristine too.
    files.extend(old.files.iter().cloned());
    files.sort();
    files.dedup();
    let keep: HashSet<PathBuf> = files.iter().map(PathBuf::from).collect();
    let report = mirror::sync(pristine, tree, &keep)?;
    let want = Applied {
        series_hash: series.hash(),
        touched_fingerprint: mirror::fingerprint_of(pristine, &series.touched_files())?,
        files: series.touched_files(),
    };
    let tree_key = format!("{}+{}", report.fingerprint, want.series_hash);
    if old == want {
        return Ok(tree_key);
    }
    crate::status!(
        "apply",
        "applying {} patch(es) to {}",
        series.applied().len(),
        tree.display()
    );
    // Until the new stamp is written the tree is not "applied", but the
    // stamp keeps naming every file that may differ from pristine, so a
    // run after a failed apply still restores them with fresh mtimes.
    let pending = Applied {
        files: files.clone(),
        ..Applied::default()
    };
    write_atomic(
        &stamp_path,
        serde_json::to_string_pretty(&pending)?.as_bytes(),
    )?;
    let before = snapshot(tree, &files)?;
    for f in &files {
        mirror::replace_with_copy(pristine, tree, Path::new(f))?;
    }
    apply_all_or_nothing(tree, &series.applied())?;
    keep_mtimes_of_unchanged(tree, &before)?;
    write_atomic(&stamp_path, serde_json::to_string_pretty(&want)?.as_bytes())?;
    Ok(tree_key)
}

/// A touched file's content digest and mtime before a re-apply.
type Snapshot = Vec<(String, Option<(Vec<u8>, SystemTime)>)>;

fn snapshot(tree: &Path, files: &[String]) -> Result<Snapshot> {
    files
        .iter()
        .map(|f| {
            let path = tree.join(f);
            let state = || -> std::io::Result<_> {
                let Some(body) = gone_is_none(fs::read(&path))? else {
                    return Ok(None);
                };
                let mtime = fs::metadata(&path)?.modified()?;
                Ok(Some((Sha256::digest(&body).to_vec(), mtime)))
            };
            let state = state().with_context(|| format!("reading {}", path.display()))?;
            Ok((f.clone(), state))
        })
        .collect()
}

/// A file the new series leaves as it was gets its old mtime back, so
/// make rebuilds only what really changed: a series that differs in one
/// file of several (a mutant, an edited patch) does not rebuild every
/// object that includes the others.
fn keep_mtimes_of_unchanged(tree: &Path, before: &Snapshot) -> Result<()> {
    for (f, state) in before {
        let Some((digest, mtime)) = state else {
            continue;
        };
        let path = tree.join(f);
        let Ok(body) = fs::read(&path) else {
            continue;
        };
        if Sha256::digest(&body).as_slice() == digest.as_slice() {
            crate::util::set_mtime(&path, *mtime)?;
        }
    }
    Ok(())
}

/// Applies `patches` in order as one input to `git apply`, which changes
/// nothing unless every hunk of every patch applies (separate inputs would
/// each be atomic only on their own). On failure, finds the first patch
/// that does not apply and names it with git's first complaint.
pub fn apply_all_or_nothing(tree: &Path, patches: &[Patch]) -> Result<()> {
    let sh = crate::project::shell()?;
    sh.change_dir(tree);
    // Never let git find a repository above the tree (a cache inside a
    // checkout): paths must be relative to the tree.
    sh.set_var(
        "GIT_CEILING_DIRECTORIES",
        tree.parent().unwrap_or(Path::new("/")),
    );
    let git_apply = |patches: &[Patch], check: bool| -> Result<(bool, String)> {
        let mut input = Vec::new();
        for p in patches {
            input.extend(
                fs::read(&p.path).with_context(|| format!("reading {}", p.path.display()))?,
            );
            input.push(b'\n');
        }
        let check = check.then_some("--check");
        let out = cmd!(sh, "git apply --whitespace=nowarn {check...}")
            .stdin(input)
            .quiet()
            .ignore_status()
            .output()
            .context("running git apply")?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    };
    let (ok, all_errors) = git_apply(patches, false)?;
    if ok {
        return Ok(());
    }
    for k in 1..=patches.len() {
        let (ok, errors) = git_apply(&patches[..k], true)?;
        if !ok {
            bail!(
                "patch {} does not apply to {}: {}; rebase it onto this kernel tree (nothing was applied)",
                patches[k - 1].path.display(),
                tree.display(),
                first_error(&errors)
            );
        }
    }
    bail!(
        "the series does not apply to {}: {}; nothing was applied",
        tree.display(),
        first_error(&all_errors)
    )
}

/// git apply's first complaint without the `error: ` prefix, e.g.
/// "patch failed: kernel/bpf/arraymap.c:560".
fn first_error(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or_else(|| stderr.lines().next().unwrap_or("git apply failed"))
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::tempdir;

    fn fake_tree(root: &Path) {
        fs::create_dir_all(root.join("kernel/bpf")).unwrap();
        fs::write(root.join("Makefile"), "all:\n").unwrap();
        fs::write(root.join("kernel/bpf/arraymap.c"), "one\ntwo\nthree\n").unwrap();
        fs::write(root.join("kernel/bpf/syscall.c"), "alpha\nbeta\ngamma\n").unwrap();
    }

    fn patch(dir: &Path, name: &str, body: &str) -> String {
        fs::write(dir.join(name), body).unwrap();
        name.to_string()
    }

    const GOOD: &str = "--- a/kernel/bpf/arraymap.c\n+++ b/kernel/bpf/arraymap.c\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
    const BAD: &str = "--- a/kernel/bpf/syscall.c\n+++ b/kernel/bpf/syscall.c\n@@ -1,3 +1,3 @@\n alpha\n-delta\n+DELTA\n gamma\n";

    fn tree_snapshot(root: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for f in ["Makefile", "kernel/bpf/arraymap.c", "kernel/bpf/syscall.c"] {
            out.push((f.to_string(), fs::read_to_string(root.join(f)).unwrap()));
        }
        out
    }

    #[test]
    fn a_corrupt_stamp_is_an_error_that_says_what_to_remove() {
        let t = tempdir();
        let stamp = t.join(STAMP);
        assert_eq!(applied(&stamp).unwrap(), Applied::default(), "no stamp yet");
        fs::write(&stamp, "{\"series_hash\": ").unwrap();
        let err = format!("{:#}", applied(&stamp).unwrap_err());
        assert!(err.contains("is corrupt; remove the tree"), "{err}");
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn good_then_bad_applies_nothing_and_names_the_bad_patch() {
        let t = tempdir();
        let (src, tree, pdir) = (t.join("src"), t.join("patched"), t.join("patches"));
        fake_tree(&src);
        fs::create_dir_all(&pdir).unwrap();
        let good = patch(&pdir, "0001-good.patch", GOOD);
        let bad = patch(&pdir, "0002-bad.patch", BAD);
        fs::write(pdir.join("series"), format!("{good}\n{bad}\n")).unwrap();
        let series = Series::load(&pdir).unwrap();
        let before = tree_snapshot(&src);

        let err = format!("{:#}", prepare_patched(&src, &tree, &series).unwrap_err());
        assert!(err.contains("0002-bad.patch"), "{err}");
        assert!(err.contains("kernel/bpf/syscall.c"), "{err}");
        assert!(err.contains("nothing was applied"), "{err}");
        // No half-patched tree: the good patch's file is pristine too.
        assert_eq!(tree_snapshot(&tree), before);
        let stamp: Applied =
            serde_json::from_str(&fs::read_to_string(tree.join(STAMP)).unwrap()).unwrap();
        assert!(
            stamp.series_hash.is_empty(),
            "a failed apply must not look applied"
        );
        assert!(stamp.files.contains(&"kernel/bpf/arraymap.c".to_string()));
        // And the source was never touched.
        assert_eq!(tree_snapshot(&src), before);
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn apply_reapply_and_source_untouched() {
        let t = tempdir();
        let (src, tree, pdir) = (t.join("src"), t.join("patched"), t.join("patches"));
        fake_tree(&src);
        fs::create_dir_all(&pdir).unwrap();
        let good = patch(&pdir, "0001-good.patch", GOOD);
        fs::write(pdir.join("series"), format!("{good}\n")).unwrap();
        let before = tree_snapshot(&src);

        let series = Series::load(&pdir).unwrap();
        let k1 = prepare_patched(&src, &tree, &series).unwrap();
        assert_eq!(
            fs::read_to_string(tree.join("kernel/bpf/arraymap.c")).unwrap(),
            "one\nTWO\nthree\n"
        );
        assert_eq!(tree_snapshot(&src), before);
        // Nothing changed: same key, nothing re-applied.
        assert_eq!(prepare_patched(&src, &tree, &series).unwrap(), k1);

        // A different series: the old patch's file goes back to pristine.
        let other = patch(
            &pdir,
            "0001-other.patch",
            "--- a/kernel/bpf/syscall.c\n+++ b/kernel/bpf/syscall.c\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n",
        );
        fs::write(pdir.join("series"), format!("{other}\n")).unwrap();
        let series = Series::load(&pdir).unwrap();
        let k2 = prepare_patched(&src, &tree, &series).unwrap();
        assert_ne!(k1, k2);
        assert_eq!(
            fs::read_to_string(tree.join("kernel/bpf/arraymap.c")).unwrap(),
            "one\ntwo\nthree\n"
        );
        assert_eq!(
            fs::read_to_string(tree.join("kernel/bpf/syscall.c")).unwrap(),
            "alpha\nBETA\ngamma\n"
        );
        assert_eq!(tree_snapshot(&src), before);
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn a_file_the_new_series_leaves_as_it_was_keeps_its_mtime() {
        let t = tempdir();
        let (src, tree, pdir) = (t.join("src"), t.join("patched"), t.join("patches"));
        fake_tree(&src);
        fs::create_dir_all(&pdir).unwrap();
        let both = |second: &str| {
            let b = format!("--- a/kernel/bpf/syscall.c\n+++ b/kernel/bpf/syscall.c\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+{second}\n gamma\n");
            patch(&pdir, "0002.patch", &b);
            fs::write(pdir.join("series"), "0001.patch\n0002.patch\n").unwrap();
            Series::load(&pdir).unwrap()
        };
        patch(&pdir, "0001.patch", GOOD);
        prepare_patched(&src, &tree, &both("BETA")).unwrap();
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        for f in ["kernel/bpf/arraymap.c", "kernel/bpf/syscall.c"] {
            let file = fs::File::options().write(true).open(tree.join(f)).unwrap();
            file.set_modified(old).unwrap();
        }
        prepare_patched(&src, &tree, &both("BETA2")).unwrap();
        let mtime = |f: &str| fs::metadata(tree.join(f)).unwrap().modified().unwrap();
        assert_eq!(mtime("kernel/bpf/arraymap.c"), old, "unchanged: mtime kept");
        assert_ne!(mtime("kernel/bpf/syscall.c"), old, "changed: a new mtime");
        assert_eq!(
            fs::read_to_string(tree.join("kernel/bpf/syscall.c")).unwrap(),
            "alpha\nBETA2\ngamma\n"
        );
        fs::remove_dir_all(t).unwrap();
    }
}
