//! A developer's git branch as the source and the series: the tree at
//! `--base REV` is base (its tracked files, read with `git archive`, so
//! build products in the checkout do not matter), and the commits from
//! there to `--head` (HEAD by default), from `git format-patch`, are the
//! series: one variant named after the branch. Uncommitted changes to
//! tracked files are its last patch, `uncommitted-changes.patch`, unless
//! `--clean`, which refuses them. The checkout is only read.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// `--base` and what goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitRange {
    /// The base commit, resolved.
    pub base: String,
    /// The branch's tip as given (`HEAD` takes the working tree's
    /// uncommitted changes too), and its commit.
    pub head: String,
    pub head_commit: String,
    /// Refuse uncommitted changes instead of testing them.
    pub clean: bool,
}

/// Runs git in `repo`; its stdout, or an error with its stderr.
fn git(repo: &Path, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .with_context(|| format!("running git {} in {}", args.join(" "), repo.display()))?;
    if !out.status.success() {
        bail!(
            "git {} in {}: {}",
            args.join(" "),
            repo.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The commit `rev` names in `repo`, for the flag `flag`.
fn commit(repo: &Path, rev: &str, flag: &str) -> Result<String> {
    let spec = format!("{rev}^{{commit}}");
    git(repo, &["rev-parse", "--verify", "--quiet", &spec])
        .map(|s| s.trim().to_string())
        .map_err(|_| {
            anyhow::anyhow!(
                "{flag} {rev}: not a commit of {}; name a branch, tag or commit there",
                repo.display()
            )
        })
}

/// `--base` and `--head` resolved in `repo`.
pub fn range(repo: &Path, base: &str, head: &str, clean: bool) -> Result<GitRange> {
    git(repo, &["rev-parse", "--git-dir"]).with_context(|| {
        format!(
            "--base needs --kernel-src to be a git checkout; {} is not",
            repo.display()
        )
    })?;
    Ok(GitRange {
        base: commit(repo, base, "--base")?,
        head: head.to_string(),
        head_commit: commit(repo, head, "--head")?,
        clean,
    })
}

/// The branch's name, as a variant's (lower-case letters, digits and
/// `-`; `branch` when nothing of it is left or it is a reserved word).
fn variant_name(repo: &Path, head: &str) -> Result<String> {
    let name = git(repo, &["rev-parse", "--abbrev-ref", head])?;
    let last = name.trim().rsplit('/').next().unwrap_or("").to_lowercase();
    let word: String = last
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let word = word.trim_matches('-').to_string();
    let reserved = ["", "head", "base", "all", "both"].contains(&word.as_str());
    Ok(if reserved || word.ends_with("-debug") {
        "branch".to_string()
    } else {
        word
    })
}

/// The uncommitted changes to tracked files, when the head is the
/// working tree's.
fn uncommitted(repo: &Path, range: &GitRange) -> Result<String> {
    if range.head != "HEAD" {
        return Ok(String::new());
    }
    git(repo, &["diff", "--binary", "HEAD"])
}

/// The series of `range` in `repo`: its patches and a `series` file in a
/// directory under `root` named after what it holds, made once.
pub fn series(repo: &Path, range: &GitRange, root: &Path) -> Result<PathBuf> {
    let dirty = uncommitted(repo, range)?;
    if !dirty.is_empty() && range.clean {
        bail!(
            "{} has uncommitted changes and --clean refuses them: commit or stash them, or drop --clean to test them as the last patch",
            repo.display()
        );
    }
    let variant = variant_name(repo, &range.head)?;
    let key = Sha256::digest(format!(
        "{}..{}\0{variant}\0{dirty}",
        range.base, range.head_commit
    ));
    let dir = root.join(&hex::encode(key)[..16]);
    if dir.join("series").is_file() {
        return Ok(dir);
    }
    let tmp = root.join(format!("{}.making", &hex::encode(key)[..16]));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let span = format!("{}..{}", range.base, range.head_commit);
    let out = tmp.to_string_lossy().into_owned();
    let made = git(repo, &["format-patch", "--no-signature", "-o", &out, &span])?;
    let mut names: Vec<String> = made
        .lines()
        .filter_map(|l| Path::new(l.trim()).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    if !dirty.is_empty() {
        let name = format!("{:04}-uncommitted-changes.patch", names.len() + 1);
        fs::write(tmp.join(&name), &dirty).with_context(|| format!("writing {name}"))?;
        names.push(name);
    }
    if names.is_empty() {
        bail!(
            "--base {}: no commit between it and {} and nothing uncommitted: name the commit your branch starts from",
            range.base,
            range.head
        );
    }
    let text = format!("[{variant}]\n{}\n", names.join("\n"));
    fs::write(tmp.join("series"), text).context("writing the series file")?;
    fs::rename(&tmp, &dir).with_context(|| format!("renaming {}", tmp.display()))?;
    Ok(dir)
}

/// The tree at `commit` of `repo`, its tracked files only, unpacked into
/// `<dir>/pristine` once (through a temporary directory renamed at the
/// end, as a tarball is).
pub fn archive_once(repo: &Path, commit: &str, dir: &Path) -> Result<PathBuf> {
    let pristine = dir.join("pristine");
    if pristine.join("Makefile").is_file() {
        return Ok(pristine);
    }
    let tmp = dir.join("pristine.unpacking");
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    crate::status!(
        "source",
        "reading {commit} of {} (git archive)",
        repo.display()
    );
    let tar = tmp.join("tree.tar");
    git(
        repo,
        &[
            "archive",
            "--format=tar",
            "-o",
            &tar.to_string_lossy(),
            commit,
        ],
    )?;
    let sh = crate::project::shell()?;
    xshell::cmd!(sh, "tar -xf {tar} -C {tmp}")
        .quiet()
        .run()
        .context("unpacking the archive")?;
    fs::remove_file(&tar).context("removing the archive")?;
    if !tmp.join("Makefile").is_file() || !tmp.join("kernel/bpf").is_dir() {
        bail!(
            "{commit} of {} is not a kernel tree (no Makefile or kernel/bpf at its top)",
            repo.display()
        );
    }
    fs::rename(&tmp, &pristine).with_context(|| format!("renaming {}", tmp.display()))?;
    Ok(pristine)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(repo: &Path, args: &[&str]) {
        let mut all = vec![
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ];
        all.extend(args);
        git(repo, &all).unwrap();
    }

    /// A repository with a kernel-shaped first commit and a branch
    /// `dev/My_Fix` of two commits on it.
    fn repo() -> PathBuf {
        let r = crate::util::tempdir();
        run(&r, &["init", "-q", "-b", "main"]);
        fs::create_dir_all(r.join("kernel/bpf")).unwrap();
        fs::write(r.join("Makefile"), "all:\n").unwrap();
        fs::write(r.join("kernel/bpf/a.c"), "int a;\n").unwrap();
        run(&r, &["add", "-A"]);
        run(&r, &["commit", "-q", "-m", "base"]);
        run(&r, &["checkout", "-q", "-b", "dev/My_Fix"]);
        fs::write(r.join("kernel/bpf/a.c"), "int a = 1;\n").unwrap();
        run(&r, &["commit", "-q", "-am", "bpf: one"]);
        fs::write(r.join("kernel/bpf/b.c"), "int b;\n").unwrap();
        run(&r, &["add", "-A"]);
        run(&r, &["commit", "-q", "-m", "bpf: two"]);
        r
    }

    #[test]
    fn a_branch_is_its_commits_as_one_variant_and_its_uncommitted_changes_last() {
        let r = repo();
        let out = crate::util::tempdir();
        let range = range(&r, "main", "HEAD", false).unwrap();
        let dir = series(&r, &range, &out).unwrap();
        let text = fs::read_to_string(dir.join("series")).unwrap();
        assert_eq!(text, "[my-fix]\n0001-bpf-one.patch\n0002-bpf-two.patch\n");
        let s = crate::kernel::series::Series::load(&dir).unwrap();
        assert_eq!(s.variant_names(), ["my-fix"]);
        assert_eq!(s.patches.len(), 2);
        fs::write(r.join("kernel/bpf/a.c"), "int a = 2;\n").unwrap();
        let dirty = series(&r, &range, &out).unwrap();
        assert_ne!(dirty, dir, "a new series for new changes");
        let s = crate::kernel::series::Series::load(&dirty).unwrap();
        assert_eq!(s.patches[2].name, "0003-uncommitted-changes.patch");
        let clean = GitRange {
            clean: true,
            ..range
        };
        let err = series(&r, &clean, &out).unwrap_err().to_string();
        assert!(
            err.contains("uncommitted") && err.contains("--clean"),
            "{err}"
        );
    }

    #[test]
    fn the_base_is_the_commit_s_tracked_files_and_bad_revisions_are_named() {
        let r = repo();
        fs::write(r.join("built.o"), "junk").unwrap();
        let range = range(&r, "main", "HEAD", false).unwrap();
        let dir = crate::util::tempdir();
        let tree = archive_once(&r, &range.base, &dir).unwrap();
        assert_eq!(
            fs::read_to_string(tree.join("kernel/bpf/a.c")).unwrap(),
            "int a;\n"
        );
        assert!(!tree.join("kernel/bpf/b.c").exists(), "the branch's file");
        assert!(!tree.join("built.o").exists(), "an untracked file");
        let err = super::range(&r, "nope", "HEAD", false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--base nope: not a commit"), "{err}");
        let plain = crate::util::tempdir();
        let err = super::range(&plain, "main", "HEAD", false).unwrap_err();
        assert!(format!("{err:#}").contains("not"), "{err:#}");
    }
}
