//! The gates a maintainer runs on a series before reading it: the tree's
//! own `scripts/checkpatch.pl --strict`, `git am` onto a clean git tree
//! of the source, and warning-free builds of the objects the series
//! touches with `W=1` and sparse, compared with the same objects of the
//! base tree (only new warnings count).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xshell::cmd;

use super::series::Series;

/// checkpatch's verdict on one patch: its `total:` line, the warnings it
/// gave only because this tree lacks an upstream commit, and, when it is
/// not clean, what it said.
pub struct CheckpatchResult {
    pub patch: String,
    pub total: String,
    /// `UNKNOWN_COMMIT_ID` warnings for ids of [`UPSTREAM_COMMITS`].
    pub upstream_ids: Vec<String>,
    /// The files the patch adds or deletes, when checkpatch asked whether
    /// MAINTAINERS needs updating for them and the tree's MAINTAINERS
    /// names each under an entry already (its one `FILE_PATH_CHANGES`
    /// warning so answered).
    pub maintained: Vec<String>,
    pub clean: bool,
    pub report: String,
}

/// Runs the tree's checkpatch on every patch of the series.
pub fn checkpatch(tree: &Path, series: &Series) -> Result<Vec<CheckpatchResult>> {
    let patches: Vec<(String, PathBuf)> = series
        .own()
        .iter()
        .map(|p| (p.name.clone(), p.path.clone()))
        .collect();
    checkpatch_files(tree, &patches)
}

/// Runs the tree's checkpatch on each of `patches` (name, file). Patches
/// are passed by absolute path: given a relative path from inside a git
/// checkout, checkpatch reports false trailing-whitespace errors.
pub fn checkpatch_files(
    tree: &Path,
    patches: &[(String, PathBuf)],
) -> Result<Vec<CheckpatchResult>> {
    let script = tree.join("scripts/checkpatch.pl");
    if !script.is_file() {
        bail!(
            "{} is missing: the kernel source has no checkpatch",
            script.display()
        );
    }
    let maintainers = fs::read_to_string(tree.join("MAINTAINERS"))
        .with_context(|| format!("reading {}/MAINTAINERS", tree.display()))?;
    let sh = crate::project::shell()?;
    let mut results = Vec::new();
    for (name, path) in patches {
        let path = path
            .canonicalize()
            .with_context(|| format!("resolving {}", path.display()))?;
        // checkpatch looks a `Fixes:` id up in the git repository it runs
        // in, and ours holds no kernel commits: its warning for an id of
        // UPSTREAM_COMMITS is counted and named, not hidden, and
        // `unknown_fixes` checks the tag's id and subject instead.
        let out = cmd!(
            sh,
            "perl {script} --strict --no-tree --no-color --show-types {path}"
        )
        .quiet()
        .ignore_status()
        .output()
        .with_context(|| format!("running checkpatch on {name}"))?;
        let mut report = String::from_utf8_lossy(&out.stdout).into_owned();
        let text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let unknown = unknown_fixes(&text);
        for line in &unknown {
            report.push_str(&format!(
                "\n{line}: not a commit of UPSTREAM_COMMITS in xtask/src/kernel/hygiene.rs: \
                 name the upstream commit by its 12-character id and exact subject"
            ));
        }
        let total = report
            .lines()
            .find(|l| l.starts_with("total:"))
            .unwrap_or("total: (none: checkpatch did not finish)")
            .to_string();
        let upstream_ids = upstream_id_warnings(&report);
        let maintained = maintained_file_changes(&report, &text, &maintainers);
        let excused = upstream_ids.len() + usize::from(!maintained.is_empty());
        results.push(CheckpatchResult {
            patch: name.clone(),
            clean: is_clean(&total, excused) && unknown.is_empty(),
            total,
            upstream_ids,
            maintained,
            report,
        });
    }
    Ok(results)
}

/// Upstream commits a patch of the series may name in `Fixes:`: id and
/// subject. 0001 was merged into bpf-next as f5b57e9e9cfd (2026-08-15);
/// 317460317a02 (v6.9) brought the arena map, whose fault 0003 fixes.
pub const UPSTREAM_COMMITS: &[(&str, &str)] = &[
    (
        "f5b57e9e9cfd",
        "bpf: Populate mmap-able array map memory lazily",
    ),
    ("317460317a02", "bpf: Introduce bpf_arena."),
];

/// The `Fixes:` lines of a patch that do not name one of
/// [`UPSTREAM_COMMITS`] by its id and its exact subject.
pub fn unknown_fixes(patch_text: &str) -> Vec<String> {
    patch_text
        .lines()
        .take_while(|l| *l != "---")
        .filter(|l| l.starts_with("Fixes:"))
        .filter(|l| {
            !UPSTREAM_COMMITS
                .iter()
                .any(|(id, subject)| *l == format!("Fixes: {id} (\"{subject}\")"))
        })
        .map(str::to_string)
        .collect()
}

/// The ids of [`UPSTREAM_COMMITS`] that checkpatch (`--show-types`)
/// warned it could not find.
pub fn upstream_id_warnings(report: &str) -> Vec<String> {
    report
        .lines()
        .filter_map(|l| l.strip_prefix("WARNING:UNKNOWN_COMMIT_ID: Unknown commit id '"))
        .filter_map(|l| l.split('\'').next())
        .filter(|id| UPSTREAM_COMMITS.iter().any(|(known, _)| known == id))
        .map(str::to_string)
        .collect()
}

/// The files a patch adds or deletes, if checkpatch gave its
/// `FILE_PATH_CHANGES` warning ("does MAINTAINERS need updating?") and
/// `maintainers` (the tree's MAINTAINERS) answers no: each file lies under
/// a directory an `F:` line names, or is named itself. Empty otherwise,
/// and the warning counts.
pub fn maintained_file_changes(report: &str, patch_text: &str, maintainers: &str) -> Vec<String> {
    if !report.contains("WARNING:FILE_PATH_CHANGES:") {
        return Vec::new();
    }
    let patterns: Vec<&str> = maintainers
        .lines()
        .filter_map(|l| l.strip_prefix("F:"))
        .map(str::trim)
        .collect();
    let covered = |file: &str| {
        patterns
            .iter()
            .any(|p| *p == file || (p.ends_with('/') && file.starts_with(p)))
    };
    let mut changed = Vec::new();
    let mut lines = patch_text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(paths) = line.strip_prefix("diff --git a/") else {
            continue;
        };
        let file = paths.split(" b/").next().unwrap_or(paths);
        if lines
            .peek()
            .is_some_and(|l| l.starts_with("new file mode") || l.starts_with("deleted file mode"))
        {
            changed.push(file.to_string());
        }
    }
    if changed.is_empty() || !changed.iter().all(|f| covered(f)) {
        return Vec::new();
    }
    changed
}

/// `total: 0 errors, W warnings, 0 checks, N lines checked`, where the W
/// warnings are exactly the `excused` ones (upstream ids, file changes
/// MAINTAINERS covers).
pub fn is_clean(total: &str, excused: usize) -> bool {
    total.starts_with(&format!("total: 0 errors, {excused} warnings, 0 checks,"))
}

/// Applies the series with `git am` to a clean git tree of `pristine`, a
/// Debian baseline's patches first (7.3's revert and re-apply of the lazy
/// mapping net to the tree as shipped).
/// The repository (one commit of the whole source) is made once under
/// `dir`; each check checks out only the files the series touches into a
/// throwaway clone. Err names the first patch that does not apply.
pub fn git_am(pristine: &Path, series: &Series, dir: &Path) -> Result<()> {
    let repo = source_repo(pristine, dir)?;
    let work = dir.join("am-check");
    sparse_clone(&repo, &work, &series.touched_files())?;
    let sh = crate::project::shell()?;
    set_identity(&sh);
    sh.change_dir(&work);
    let patches: Vec<PathBuf> = series.applied().iter().map(|p| p.path.clone()).collect();
    let out = cmd!(sh, "git am --quiet {patches...}")
        .quiet()
        .ignore_status()
        .output()
        .context("running git am")?;
    let said = crate::util::output_text(&out);
    sh.change_dir(dir);
    let _ = fs::remove_dir_all(&work);
    if !out.status.success() {
        bail!(
            "git am does not apply the series to a clean tree: {}",
            said.trim()
        );
    }
    Ok(())
}

/// A throwaway clone of `repo` at `work` (made anew) sharing its
/// objects, with only `files` checked out.
pub fn sparse_clone(repo: &Path, work: &Path, files: &[String]) -> Result<()> {
    let _ = fs::remove_dir_all(work);
    let sh = crate::project::shell()?;
    cmd!(sh, "git clone --quiet --no-checkout --shared {repo} {work}")
        .quiet()
        .run()
        .with_context(|| format!("cloning {} into {}", repo.display(), work.display()))?;
    sh.change_dir(work);
    cmd!(sh, "git sparse-checkout set --no-cone {files...}")
        .quiet()
        .run()
        .context("git sparse-checkout")?;
    cmd!(sh, "git checkout --quiet")
        .quiet()
        .run()
        .context("git checkout")
}

/// A fixed committer: git am needs one, and the check must not depend on
/// the user's git configuration.
fn set_identity(sh: &xshell::Shell) {
    for who in ["COMMITTER", "AUTHOR"] {
        sh.set_var(format!("GIT_{who}_NAME"), "bpflab");
        sh.set_var(format!("GIT_{who}_EMAIL"), "bpflab@localhost");
    }
}

/// What marks `source.git` whole; its name changed when the commit's
/// date was fixed, so that older repositories are made again.
const SOURCE_REPO_DONE: &str = "bpflab-complete-fixed-date";

/// The one commit's identity and date: fixed, so that the commit's id is
/// the tree's alone, the same on every machine, and a posting's
/// `base-commit:` names it.
const SOURCE_COMMIT_DATE: &str = "@1000000000 +0000";

/// `<dir>/source.git`: the pristine tree as one commit, made once. Only
/// the repository is written; the pristine tree is only read.
pub fn source_repo(pristine: &Path, dir: &Path) -> Result<PathBuf> {
    let repo = dir.join("source.git");
    if repo.join(SOURCE_REPO_DONE).is_file() {
        return Ok(repo);
    }
    let _ = fs::remove_dir_all(&repo);
    crate::status!("patches", "making a git repository of the source (once)");
    let sh = crate::project::shell()?;
    set_identity(&sh);
    cmd!(sh, "git init --quiet --bare {repo}").quiet().run()?;
    // From inside the work tree; --force because a packaged source may
    // ignore itself (Debian's .gitignore ignores `/*`).
    sh.change_dir(pristine);
    let _git = (
        sh.push_env("GIT_DIR", &repo),
        sh.push_env("GIT_WORK_TREE", pristine),
    );
    cmd!(sh, "git add --all --force")
        .quiet()
        .run()
        .context("git add of the source")?;
    let _dates = (
        sh.push_env("GIT_AUTHOR_DATE", SOURCE_COMMIT_DATE),
        sh.push_env("GIT_COMMITTER_DATE", SOURCE_COMMIT_DATE),
    );
    cmd!(sh, "git commit --quiet --no-verify -m source")
        .quiet()
        .run()
        .context("committing the source")?;
    fs::write(repo.join(SOURCE_REPO_DONE), b"")?;
    Ok(repo)
}

/// Compiler and sparse diagnostics, `file: kind: message` with line and
/// column numbers dropped (a patch moves lines), counted.
pub fn diagnostics(output: &str) -> BTreeMap<String, usize> {
    let mut found = BTreeMap::new();
    for line in output.lines() {
        let Some((place, rest)) = line.split_once(": ") else {
            continue;
        };
        let rest = rest.trim();
        if !(rest.starts_with("warning:") || rest.starts_with("error:")) {
            continue;
        }
        // Out-of-tree builds name sources relative to the build directory.
        let file = place.split(':').next().unwrap_or(place);
        let file = file.trim_start_matches("../");
        *found.entry(format!("{file}: {rest}")).or_default() += 1;
    }
    found
}

/// Diagnostics the patched build has more of than the base build.
pub fn new_diagnostics(base: &str, patched: &str) -> Vec<String> {
    let before = diagnostics(base);
    diagnostics(patched)
        .into_iter()
        .filter(|(d, n)| before.get(d).copied().unwrap_or(0) < *n)
        .map(|(d, _)| d)
        .collect()
}

/// Builds `objects` of `tree` with W=1 and sparse (C=1 checks what it
/// compiles) in a build directory of their own, configured like the
/// normal kernels; returns make's output.
pub fn checked_build(tree: &Path, objects: &[String], jobs: usize) -> Result<String> {
    let build = tree.join("_build-check");
    let (base, fragments) = super::kconfig::plan(tree, super::KernelConfig::Lean, false)?;
    let fragments = super::kconfig::adapt(tree, &fragments, &build.join("fragments"))?.fragments;
    // Lean: ours only, so nothing of the tree's own config to lose.
    super::kconfig::configure(tree, &build, base, &fragments, &build.join("config.log"))
        .context("configuring the check build")?;
    for o in objects {
        let _ = fs::remove_file(build.join(o));
    }
    let sh = crate::project::shell()?;
    sh.change_dir(tree);
    // ASCII quotes in the diagnostics, whatever the user's locale (the
    // kernel's Makefile unexports LC_ALL, so LANG and LC_* decide).
    for var in ["LANG", "LC_CTYPE", "LC_MESSAGES"] {
        sh.set_var(var, "C");
    }
    let jobs = jobs.to_string();
    let out = cmd!(
        sh,
        "make O=_build-check -j{jobs} W=1 C=1 CHECK=sparse {objects...}"
    )
    .quiet()
    .ignore_status()
    .output()
    .context("running make W=1 C=1")?;
    let text = crate::util::output_text(&out);
    if !out.status.success() {
        bail!(
            "make W=1 C=1 of {} failed in {}: {}",
            objects.join(" "),
            tree.display(),
            crate::util::last_lines(&text, 15)
        );
    }
    Ok(text)
}

/// The objects built from the C files a series touches.
pub fn objects_of(files: &[String]) -> Vec<String> {
    files
        .iter()
        // tools/ is built by its own makefiles, not kbuild: its selftests
        // are built and run by the suites that use them.
        .filter(|f| !f.starts_with("tools/"))
        .filter_map(|f| f.strip_suffix(".c").map(|stem| format!("{stem}.o")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpatch_totals() {
        assert!(is_clean(
            "total: 0 errors, 0 warnings, 0 checks, 99 lines checked",
            0
        ));
        assert!(!is_clean(
            "total: 1 errors, 0 warnings, 0 checks, 99 lines checked",
            0
        ));
        assert!(!is_clean(
            "total: 0 errors, 0 warnings, 2 checks, 99 lines checked",
            0
        ));
        assert!(!is_clean("total: (none: checkpatch did not finish)", 0));
        // One warning, and it is the upstream id's: clean; a second one
        // is not.
        let one = "total: 0 errors, 1 warnings, 0 checks, 30 lines checked";
        assert!(is_clean(one, 1));
        assert!(!is_clean(one, 0));
        assert!(!is_clean(
            "total: 0 errors, 2 warnings, 0 checks, 30 lines checked",
            1
        ));
    }

    #[test]
    fn maintainers_answers_a_file_path_warning_only_for_files_it_covers() {
        let report = "WARNING:FILE_PATH_CHANGES: added, moved or deleted file(s), does MAINTAINERS need updating?\n";
        let patch = "diff --git a/tools/testing/selftests/bpf/progs/x.c b/tools/testing/selftests/bpf/progs/x.c\n\
                     new file mode 100644\n\
                     diff --git a/kernel/bpf/arraymap.c b/kernel/bpf/arraymap.c\n\
                     index 1..2 100644\n";
        let maintainers = "BPF [GENERAL]\nF:\tkernel/bpf/\nF:\ttools/testing/selftests/bpf/\n";
        assert_eq!(
            maintained_file_changes(report, patch, maintainers),
            ["tools/testing/selftests/bpf/progs/x.c"]
        );
        let elsewhere = patch.replace("tools/testing/selftests/bpf/", "tools/new/");
        assert!(maintained_file_changes(report, &elsewhere, maintainers).is_empty());
        assert!(maintained_file_changes("", patch, maintainers).is_empty());
    }

    #[test]
    fn tools_files_are_no_kbuild_objects() {
        let files = [
            "kernel/bpf/arraymap.c".to_string(),
            "tools/testing/selftests/bpf/progs/x.c".to_string(),
            "include/linux/bpf.h".to_string(),
        ];
        assert_eq!(objects_of(&files), ["kernel/bpf/arraymap.o"]);
    }

    #[test]
    fn only_upstream_ids_excuse_an_unknown_commit_warning() {
        let report = "WARNING:UNKNOWN_COMMIT_ID: Unknown commit id 'f5b57e9e9cfd', maybe rebased or not pulled?\n\
                      WARNING:UNKNOWN_COMMIT_ID: Unknown commit id 'deadbeef0000', maybe rebased or not pulled?\n\
                      WARNING:LONG_LINE: line length of 101 exceeds 100 columns\n";
        assert_eq!(upstream_id_warnings(report), ["f5b57e9e9cfd"]);
    }

    #[test]
    fn a_fixes_tag_must_name_a_known_upstream_commit_exactly() {
        let good = "Subject: x\n\nFixes: f5b57e9e9cfd (\"bpf: Populate mmap-able array map memory lazily\")\n---\n";
        assert!(unknown_fixes(good).is_empty());
        let wrong_id = good.replace("f5b57e9e9cfd", "f5b57e9e9cfe");
        assert_eq!(unknown_fixes(&wrong_id).len(), 1, "a wrong id passed");
        let wrong_subject = good.replace("lazily", "eagerly");
        assert_eq!(
            unknown_fixes(&wrong_subject).len(),
            1,
            "a wrong subject passed"
        );
        // Only the commit message counts, not a diff line after `---`.
        let in_diff = "Subject: x\n---\n+Fixes: deadbeef0000 (\"y\")\n";
        assert!(unknown_fixes(in_diff).is_empty());
    }

    #[test]
    fn the_series_fixes_tags_name_known_commits() {
        let series = Series::load(&crate::project::root().join("patches")).unwrap();
        for p in &series.patches {
            let text = fs::read_to_string(&p.path).unwrap();
            assert_eq!(unknown_fixes(&text), Vec::<String>::new(), "{}", p.name);
        }
    }

    #[test]
    fn only_warnings_the_base_lacks_are_new() {
        let base = "\
kernel/bpf/syscall.c:10:5: warning: no previous prototype for 'f' [-Wmissing-prototypes]
kernel/bpf/arraymap.c:20:1: warning: symbol 'x' was not declared. Should it be static?
  CC      kernel/bpf/syscall.o
";
        // The same warnings on moved lines, and one new one.
        let patched = "\
kernel/bpf/syscall.c:14:5: warning: no previous prototype for 'f' [-Wmissing-prototypes]
kernel/bpf/arraymap.c:25:1: warning: symbol 'x' was not declared. Should it be static?
../kernel/bpf/arraymap.c:60:9: warning: incorrect type in assignment (different base types)
";
        assert_eq!(
            new_diagnostics(base, patched),
            ["kernel/bpf/arraymap.c: warning: incorrect type in assignment (different base types)"]
        );
        assert!(new_diagnostics(patched, base).is_empty());
        // A warning twice where base has it once is new.
        let twice = format!("{base}kernel/bpf/syscall.c:99:5: warning: no previous prototype for 'f' [-Wmissing-prototypes]\n");
        assert_eq!(new_diagnostics(base, &twice).len(), 1);
    }

    #[test]
    fn objects_are_the_c_files() {
        let files = [
            "include/linux/bpf.h",
            "kernel/bpf/arraymap.c",
            "kernel/bpf/syscall.c",
        ]
        .map(String::from);
        assert_eq!(
            objects_of(&files),
            ["kernel/bpf/arraymap.o", "kernel/bpf/syscall.o"]
        );
    }
}
