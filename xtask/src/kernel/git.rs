//! A developer's git branch as the source and the series: the tree at
//! `--base REV` is base (its tracked files, read with `git archive`, so
//! build products in the checkout do not matter), and the commits from
//! there to `--head` (HEAD by default), from `git format-patch`, are the
//! series. Uncommitted changes to tracked files are its last patch,
//! `uncommitted-changes.patch`, unless `--clean`, which refuses them.
//! The checkout is only read.
//!
//! Without `--variant` the series is one variant named after the branch.
//! Each `--variant NAME=REV` cuts it (stacked branches): NAME is the
//! kernel of the commits from the base up to REV, which must be one of
//! them (not the base: its variant would have no patch; and not a merge,
//! which format-patch gives none). Cuts go in the branch's order, not the
//! order given. The head is a variant of its own, named after the
//! branch, unless a cut names its commit; either way that variant, the
//! head's, takes the uncommitted changes.

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
    /// The `--variant` cuts, as given.
    pub cuts: Vec<Cut>,
}

/// A `--variant NAME=REV`: the variant NAME ends with REV's commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub name: String,
    /// REV as given, for messages, and its commit.
    pub rev: String,
    pub commit: String,
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

/// The commit `rev` names in `repo`, for the flag and value `given`.
fn commit(repo: &Path, rev: &str, given: &str) -> Result<String> {
    let spec = format!("{rev}^{{commit}}");
    git(repo, &["rev-parse", "--verify", "--quiet", &spec])
        .map(|s| s.trim().to_string())
        .map_err(|_| {
            anyhow::anyhow!(
                "{given}: not a commit of {}; name a branch, tag or commit there",
                repo.display()
            )
        })
}

/// `--base`, `--head` and `--variant`s resolved in `repo`.
pub fn range(
    repo: &Path,
    base: &str,
    head: &str,
    clean: bool,
    variants: &[String],
) -> Result<GitRange> {
    git(repo, &["rev-parse", "--git-dir"]).with_context(|| {
        format!(
            "--base needs --kernel-src to be a git checkout; {} is not",
            repo.display()
        )
    })?;
    Ok(GitRange {
        base: commit(repo, base, &format!("--base {base}"))?,
        head: head.to_string(),
        head_commit: commit(repo, head, &format!("--head {head}"))?,
        clean,
        cuts: cuts(repo, variants)?,
    })
}

/// The `--variant NAME=REV`s resolved: usable names, each once, each at
/// a commit of its own.
fn cuts(repo: &Path, variants: &[String]) -> Result<Vec<Cut>> {
    let mut cuts: Vec<Cut> = Vec::new();
    for given in variants {
        let Some((name, rev)) = given.split_once('=') else {
            bail!("--variant {given}: not NAME=REV; e.g. --variant lazy-flag=HEAD~1");
        };
        if !super::series::usable_name(name) {
            bail!(
                "--variant {given}: {name} is not a usable variant name: use lower-case letters, \
                 digits and '-', not base, eager, all, both or a name ending in -debug"
            );
        }
        if cuts.iter().any(|c| c.name == name) {
            bail!(
                "--variant {given}: the variant {name} is named twice; give each cut its own name"
            );
        }
        let commit = commit(repo, rev, &format!("--variant {given}"))?;
        if let Some(c) = cuts.iter().find(|c| c.commit == commit) {
            bail!(
                "--variant {given} and {}={}: the same commit, so one would add no patch; drop one",
                c.name,
                c.rev
            );
        }
        let (name, rev) = (name.to_string(), rev.to_string());
        cuts.push(Cut { name, rev, commit });
    }
    Ok(cuts)
}

/// The branch's name, as a variant's (lower-case letters, digits and
/// `-`; `branch` when nothing of it is left or it is a reserved word, or
/// `head`, a detached HEAD's).
fn variant_name(repo: &Path, head: &str) -> Result<String> {
    let name = git(repo, &["rev-parse", "--abbrev-ref", head])?;
    let last = name.trim().rsplit('/').next().unwrap_or("").to_lowercase();
    let word: String = last
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let word = word.trim_matches('-').to_string();
    Ok(if word == "head" || !super::series::usable_name(&word) {
        "branch".to_string()
    } else {
        word
    })
}

/// The head's own variant, named after the branch; none when a cut
/// names the head's commit, which is then the head's variant.
fn head_variant(repo: &Path, range: &GitRange) -> Result<Option<String>> {
    if range.cuts.iter().any(|c| c.commit == range.head_commit) {
        return Ok(None);
    }
    let name = variant_name(repo, &range.head)?;
    if let Some(c) = range.cuts.iter().find(|c| c.name == name) {
        bail!(
            "--variant {name}={}: {name} is the head's variant (the branch's name); name this cut otherwise, or name the head's with --variant NAME={}",
            c.rev,
            range.head
        );
    }
    Ok(Some(name))
}

/// The uncommitted changes to tracked files, when the head is the
/// working tree's.
fn uncommitted(repo: &Path, range: &GitRange) -> Result<String> {
    if range.head != "HEAD" {
        return Ok(String::new());
    }
    git(repo, &["diff", "--binary", "HEAD"])
}

/// The series directory's name: everything the series is made of, the
/// cuts too, so that two layouts of one branch never share it.
fn series_key(range: &GitRange, head: Option<&str>, dirty: &str) -> String {
    let mut cuts: Vec<String> = range
        .cuts
        .iter()
        .map(|c| format!("{}={}", c.name, c.commit))
        .collect();
    // The order given does not change the series.
    cuts.sort();
    let key = Sha256::digest(format!(
        "{}..{}\0{}\0{}\0{dirty}",
        range.base,
        range.head_commit,
        head.unwrap_or(""),
        cuts.join(",")
    ));
    hex::encode(key)[..16].to_string()
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
    let head = head_variant(repo, range)?;
    let key = series_key(range, head.as_deref(), &dirty);
    let dir = root.join(&key);
    if dir.join("series").is_file() {
        return Ok(dir);
    }
    let tmp = root.join(format!("{key}.making"));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    if let Err(e) = write_series(repo, range, head.as_deref(), &dirty, &tmp) {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, &dir).with_context(|| format!("renaming {}", tmp.display()))?;
    Ok(dir)
}

/// The patches of `range` and the uncommitted ones, `dirty`, into `dir`,
/// with the `series` file that cuts them into variants.
fn write_series(
    repo: &Path,
    range: &GitRange,
    head: Option<&str>,
    dirty: &str,
    dir: &Path,
) -> Result<()> {
    let span = format!("{}..{}", range.base, range.head_commit);
    let out = dir.to_string_lossy().into_owned();
    let made = git(repo, &["format-patch", "--no-signature", "-o", &out, &span])?;
    let mut names: Vec<String> = made
        .lines()
        .filter_map(|l| Path::new(l.trim()).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    let commits = patch_commits(dir, &names)?;
    if !dirty.is_empty() {
        let name = format!("{:04}-uncommitted-changes.patch", names.len() + 1);
        fs::write(dir.join(&name), dirty).with_context(|| format!("writing {name}"))?;
        names.push(name);
    }
    if names.is_empty() {
        bail!(
            "--base {}: no commit between it and {} and nothing uncommitted: name the commit your branch starts from",
            range.base,
            range.head
        );
    }
    let mut ends = cut_ends(range, &commits, names.len())?;
    ends.extend(head.map(|h| (h.to_string(), names.len())));
    let text = series_text(&names, &ends)?;
    fs::write(dir.join("series"), text).context("writing the series file")
}

/// The commit each patch came from: format-patch's `From <commit>` line.
fn patch_commits(dir: &Path, names: &[String]) -> Result<Vec<String>> {
    names
        .iter()
        .map(|name| {
            let body = fs::read(dir.join(name)).with_context(|| format!("reading {name}"))?;
            let first = body.split(|b| *b == b'\n').next().unwrap_or_default();
            let first = String::from_utf8_lossy(first);
            let commit = first
                .strip_prefix("From ")
                .and_then(|l| l.split(' ').next());
            commit
                .map(str::to_string)
                .with_context(|| format!("{name}: git format-patch wrote no From line"))
        })
        .collect()
}

/// Where each cut's variant ends, in patches (`total` with the
/// uncommitted one, for a cut at the head), in the branch's order.
fn cut_ends(range: &GitRange, commits: &[String], total: usize) -> Result<Vec<(String, usize)>> {
    let mut ends = Vec::new();
    for c in &range.cuts {
        let given = format!("--variant {}={}", c.name, c.rev);
        let end = match commits.iter().position(|x| *x == c.commit) {
            _ if c.commit == range.base => bail!(
                "{given}: that is --base itself, so its variant would have no patch; cut at a commit after it"
            ),
            _ if c.commit == range.head_commit => total,
            Some(i) => i + 1,
            None => bail!(
                "{given}: not a commit from --base to --head {}; name one of git log --no-merges {}..{}",
                range.head,
                &range.base[..12],
                range.head
            ),
        };
        ends.push((c.name.clone(), end));
    }
    ends.sort_by_key(|(_, end)| *end);
    Ok(ends)
}

/// The `series` file: each variant's `[name]` line before the patches it
/// adds to the one before it.
fn series_text(names: &[String], ends: &[(String, usize)]) -> Result<String> {
    let mut text = String::new();
    let mut from = 0;
    for (name, end) in ends {
        if *end <= from {
            // Only a merge at the head, which has no patch, gets here.
            bail!("the variant {name} adds no patch to the one before it (a merge has none): cut elsewhere");
        }
        text.push_str(&format!("[{name}]\n"));
        for patch in &names[from..*end] {
            text.push_str(&format!("{patch}\n"));
        }
        from = *end;
    }
    Ok(text)
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
    unpack_archive(repo, commit, &tmp)?;
    if !tmp.join("Makefile").is_file() || !tmp.join("kernel/bpf").is_dir() {
        bail!(
            "{commit} of {} is not a kernel tree (no Makefile or kernel/bpf at its top)",
            repo.display()
        );
    }
    fs::rename(&tmp, &pristine).with_context(|| format!("renaming {}", tmp.display()))?;
    Ok(pristine)
}

/// `git archive` of `commit` piped into `tar -x` in `dir`: no archive on
/// disk (writing one, 1.4 GB for a kernel tree, then reading it back had
/// cost 55 s of a 7 s unpacking here). tar's failure is told first: git
/// then dies of the broken pipe. git's stderr is not read (it could fill
/// the pipe while tar runs); the commit was resolved before.
fn unpack_archive(repo: &Path, commit: &str, dir: &Path) -> Result<()> {
    use std::process::{Command, Stdio};
    let mut git = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["archive", "--format=tar", commit])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("running git archive")?;
    let archive = git.stdout.take().context("git archive's output")?;
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(dir)
        .stdin(archive)
        .output()
        .context("running tar -x")?;
    let git = git.wait().context("waiting for git archive")?;
    if !tar.status.success() {
        bail!(
            "unpacking git archive {commit} into {}: {}",
            dir.display(),
            String::from_utf8_lossy(&tar.stderr).trim()
        );
    }
    if !git.success() {
        bail!("git archive {commit} in {} failed ({git})", repo.display());
    }
    Ok(())
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
        let range = range(&r, "main", "HEAD", false, &[]).unwrap();
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
        let range = range(&r, "main", "HEAD", false, &[]).unwrap();
        let dir = crate::util::tempdir();
        let tree = archive_once(&r, &range.base, &dir).unwrap();
        assert_eq!(
            fs::read_to_string(tree.join("kernel/bpf/a.c")).unwrap(),
            "int a;\n"
        );
        assert!(!tree.join("kernel/bpf/b.c").exists(), "the branch's file");
        assert!(!tree.join("built.o").exists(), "an untracked file");
        let err = super::range(&r, "nope", "HEAD", false, &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--base nope: not a commit"), "{err}");
        let plain = crate::util::tempdir();
        let err = super::range(&plain, "main", "HEAD", false, &[]).unwrap_err();
        assert!(format!("{err:#}").contains("not"), "{err:#}");
    }

    /// `repo()` with a third commit, `bpf: three`, on the branch.
    fn stacked() -> PathBuf {
        let r = repo();
        fs::write(r.join("kernel/bpf/c.c"), "int c;\n").unwrap();
        run(&r, &["add", "-A"]);
        run(&r, &["commit", "-q", "-m", "bpf: three"]);
        r
    }

    /// The series `variants` cut `r`'s branch from main into, made under
    /// `out`: its directory and `series` file, or the error on one line.
    fn layout(r: &Path, out: &Path, variants: &[&str]) -> Result<(PathBuf, String), String> {
        let variants: Vec<String> = variants.iter().map(|v| v.to_string()).collect();
        let made = range(r, "main", "HEAD", false, &variants).and_then(|g| series(r, &g, out));
        let dir = made.map_err(|e| format!("{e:#}"))?;
        let text = fs::read_to_string(dir.join("series")).unwrap();
        Ok((dir, text))
    }

    fn remove(dirs: &[&Path]) {
        for d in dirs {
            fs::remove_dir_all(d).unwrap();
        }
    }

    const ONE_TWO_HEAD: &str =
        "[one]\n0001-bpf-one.patch\n[two]\n0002-bpf-two.patch\n[my-fix]\n0003-bpf-three.patch\n";

    #[test]
    fn cuts_are_variants_and_the_head_is_one_of_its_own() {
        let (r, out) = (stacked(), crate::util::tempdir());
        let (dir, text) = layout(&r, &out, &["one=HEAD~2", "two=HEAD~1"]).unwrap();
        assert_eq!(text, ONE_TWO_HEAD);
        let two = fs::read_to_string(dir.join("0002-bpf-two.patch")).unwrap();
        assert!(
            two.contains("Subject: [PATCH 2/3] bpf: two") && two.contains("+++ b/kernel/bpf/b.c"),
            "{two}"
        );
        let s = crate::kernel::series::Series::load(&dir).unwrap();
        let got: Vec<_> = s.variants.iter().map(|v| (&*v.name, v.patches)).collect();
        assert_eq!(got, [("one", 1), ("two", 2), ("my-fix", 3)]);
        remove(&[&r, &out]);
    }

    #[test]
    fn cuts_go_in_the_branch_s_order_whatever_the_order_given() {
        let (r, out, other) = (stacked(), crate::util::tempdir(), crate::util::tempdir());
        let (backwards, text) = layout(&r, &out, &["two=HEAD~1", "one=HEAD~2"]).unwrap();
        assert_eq!(text, ONE_TWO_HEAD);
        let (forwards, _) = layout(&r, &other, &["one=HEAD~2", "two=HEAD~1"]).unwrap();
        assert_eq!(backwards.file_name(), forwards.file_name(), "one layout");
        remove(&[&r, &out, &other]);
    }

    #[test]
    fn a_cut_at_the_head_is_the_head_s_variant_and_takes_the_uncommitted_changes() {
        let (r, out) = (stacked(), crate::util::tempdir());
        let committed =
            "[one]\n0001-bpf-one.patch\n[top]\n0002-bpf-two.patch\n0003-bpf-three.patch\n";
        let (_, text) = layout(&r, &out, &["top=HEAD", "one=HEAD~2"]).unwrap();
        assert_eq!(text, committed);
        fs::write(r.join("kernel/bpf/a.c"), "int a = 2;\n").unwrap();
        let (dir, text) = layout(&r, &out, &["top=dev/My_Fix", "one=HEAD~2"]).unwrap();
        assert_eq!(text, format!("{committed}0004-uncommitted-changes.patch\n"));
        let dirty = fs::read_to_string(dir.join("0004-uncommitted-changes.patch")).unwrap();
        assert!(dirty.contains("+int a = 2;"), "{dirty}");
        remove(&[&r, &out]);
    }

    #[test]
    fn uncommitted_changes_land_in_the_head_s_own_variant() {
        let (r, out) = (stacked(), crate::util::tempdir());
        fs::write(r.join("kernel/bpf/a.c"), "int a = 2;\n").unwrap();
        let (_, text) = layout(&r, &out, &["one=HEAD~2"]).unwrap();
        assert_eq!(
            text,
            "[one]\n0001-bpf-one.patch\n[my-fix]\n0002-bpf-two.patch\n0003-bpf-three.patch\n\
             0004-uncommitted-changes.patch\n"
        );
        remove(&[&r, &out]);
    }

    #[test]
    fn two_layouts_of_one_branch_never_share_a_directory() {
        let (r, out) = (stacked(), crate::util::tempdir());
        let layouts: [&[&str]; 5] = [
            &[],
            &["one=HEAD~2"],
            &["one=HEAD~1"],
            &["uno=HEAD~2"],
            &["one=HEAD~2", "top=HEAD"],
        ];
        let dirs: std::collections::BTreeSet<PathBuf> = layouts
            .iter()
            .map(|l| layout(&r, &out, l).unwrap().0)
            .collect();
        assert_eq!(dirs.len(), layouts.len(), "{dirs:?}");
        remove(&[&r, &out]);
    }

    /// Every refusal of a `--variant`, with what its message says.
    const BAD_CUTS: &[(&[&str], &str)] = &[
        (&["one=nope"], "--variant one=nope: not a commit of"),
        (&["one"], "--variant one: not NAME=REV"),
        (&["One=HEAD~1"], "One is not a usable variant name"),
        (&["base=HEAD~1"], "base is not a usable variant name"),
        (&["both=HEAD~1"], "both is not a usable variant name"),
        (&["x-debug=HEAD~1"], "x-debug is not a usable variant name"),
        (
            &["a=HEAD~1", "a=HEAD~2"],
            "--variant a=HEAD~2: the variant a is named twice",
        ),
        (
            &["a=HEAD~1", "b=HEAD~1"],
            "--variant b=HEAD~1 and a=HEAD~1: the same commit",
        ),
        (&["a=main"], "--variant a=main: that is --base itself"),
        (
            &["a=side"],
            "--variant a=side: not a commit from --base to --head HEAD;",
        ),
        (
            &["my-fix=HEAD~1"],
            "--variant my-fix=HEAD~1: my-fix is the head's variant",
        ),
    ];

    #[test]
    fn bad_cuts_are_refused_on_one_line_and_leave_nothing() {
        let (r, out) = (stacked(), crate::util::tempdir());
        // A commit off the branch: `side`, from main.
        run(&r, &["checkout", "-q", "-b", "side", "main"]);
        fs::write(r.join("kernel/bpf/s.c"), "int s;\n").unwrap();
        run(&r, &["add", "-A"]);
        run(&r, &["commit", "-q", "-m", "side"]);
        run(&r, &["checkout", "-q", "dev/My_Fix"]);
        for (variants, says) in BAD_CUTS {
            let err = layout(&r, &out, variants).unwrap_err();
            assert!(
                err.contains(says) && !err.contains('\n'),
                "{variants:?}: {err}"
            );
        }
        // Past --head is not between either.
        let g = range(&r, "main", "HEAD~1", false, &["a=HEAD".into()]).unwrap();
        let err = format!("{:#}", series(&r, &g, &out).unwrap_err());
        assert!(
            err.contains("a=HEAD: not a commit from --base to --head HEAD~1"),
            "{err}"
        );
        let left: Vec<_> = fs::read_dir(&out).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        remove(&[&r, &out]);
    }
}
