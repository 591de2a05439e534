//! The harness on a developer's own patch, for real. A git repository of
//! the kernel tree (made once, in the cache) has a branch of two commits:
//! a one-line change that lets array maps take BPF_F_NO_PREALLOC, and
//! two test_progs tests for it (`branch/array_no_prealloc.c`, and
//! `branch/no_prealloc_probe.c`, which skips where the kernel lacks the
//! change); a C test beside this file (`branch/no_prealloc.c`) makes the
//! same map with bpf(). `kselftest --new-on` and `run --expect` pass on
//! the branch, and on a branch that reverts the change both fail, naming
//! the test; there the probing test skips, and `--new-on` fails it. They boot
//! kernels, so they are ignored by a plain `cargo test` and run by `cargo
//! xtask ci` (`cargo test -p xtask --test branch -- --ignored
//! --test-threads=1`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::{as_git_user, cache, git, project, run_to_end, Ran};

const XTASK: &str = env!("CARGO_BIN_EXE_xtask");
/// The tree the repository is made of: the harness's default source,
/// Debian's linux-source-7.3, as its source directory in the cache is
/// named, and where the fetched tarballs are kept.
const SOURCE_PREFIX: &str = "debian-7.3.";
const TARBALLS: &str = "debian/tarballs";
const TARBALL_PREFIX: &str = "linux-source-7.3_";
/// The branch, and the variant the harness names after it.
const BRANCH: &str = "dev/array-no-prealloc";
const VARIANT: &str = "array-no-prealloc";
/// The branch with the kernel change reverted on top.
const REVERTED: &str = "dev/no-prealloc-reverted";
const REVERTED_VARIANT: &str = "no-prealloc-reverted";
const NEW_TEST: &str = "array_no_prealloc";
/// The change: arraymap.c's flag mask, before and after.
const MASK: &str = "\t BPF_F_PRESERVE_ELEMS | BPF_F_INNER_MAP)";
const MASK_AFTER: &str = "\t BPF_F_PRESERVE_ELEMS | BPF_F_INNER_MAP | BPF_F_NO_PREALLOC)";
const CHANGE: &str = "bpf: Let array maps take BPF_F_NO_PREALLOC";
const TEST: &str = "selftests/bpf: Test an array map with BPF_F_NO_PREALLOC";
const TEST_FILE: &str = "tools/testing/selftests/bpf/prog_tests/array_no_prealloc.c";
const TEST_SOURCE: &str = include_str!("branch/array_no_prealloc.c");
/// The second test, which skips where the change is missing. Its name
/// holds no other's: test_progs's `-t` selects by substring.
const PROBE_TEST: &str = "no_prealloc_probe";
const PROBE_FILE: &str = "tools/testing/selftests/bpf/prog_tests/no_prealloc_probe.c";
const PROBE_SOURCE: &str = include_str!("branch/no_prealloc_probe.c");

/// What the repository is made of: the marker holds it, so that an edit
/// here makes the repository again.
fn recipe() -> String {
    [
        BRANCH,
        REVERTED,
        MASK,
        MASK_AFTER,
        CHANGE,
        TEST,
        TEST_FILE,
        TEST_SOURCE,
        PROBE_FILE,
        PROBE_SOURCE,
    ]
    .join("\n")
}

/// The repository: main is the tree as one commit, and the two
/// branches on it. Made once (about 80 s: a copy of the tree, then a
/// git add of 96,000 files) in the cache, beside a marker that says it
/// is whole.
fn repository() -> PathBuf {
    let repo = cache().join("test-repos/linux-7.3");
    let marker = |r: &Path| r.join(".git/bpflab-complete");
    if fs::read_to_string(marker(&repo)).is_ok_and(|m| m == recipe()) {
        return repo;
    }
    // Beside it, renamed when whole (`with_extension` would eat `.3`).
    let making = repo.parent().unwrap().join("linux-7.3.making");
    let _ = fs::remove_dir_all(&making);
    fs::create_dir_all(repo.parent().unwrap()).unwrap();
    unpack_tree(&making);
    git(&making, &["init", "-q", "-b", "main"]);
    // --force: Debian's tree ignores its own top level (`/*`).
    git(&making, &["add", "--force", "--all"]);
    git(&making, &["commit", "-q", "--no-verify", "-m", "Linux 7.3"]);
    make_branches(&making);
    fs::write(marker(&making), recipe()).unwrap();
    let _ = fs::remove_dir_all(&repo);
    fs::rename(&making, &repo).unwrap();
    repo
}

/// The default source's tree into `to`: a copy of the pristine tree the
/// kernels were built from (a job with a restored cache may lack the
/// tarball), else the fetched tarball unpacked.
fn unpack_tree(to: &Path) {
    let sources = fs::read_dir(cache().join("sources")).ok();
    let pristine = sources.into_iter().flatten().flatten().find_map(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let tree = e.path().join("pristine");
        (name.starts_with(SOURCE_PREFIX) && tree.join("Makefile").is_file()).then_some(tree)
    });
    let tarball = || {
        let dir = fs::read_dir(cache().join(TARBALLS)).ok()?;
        dir.flatten().map(|e| e.path()).find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(TARBALL_PREFIX)
        })
    };
    let status = match pristine {
        Some(tree) => Command::new("cp").arg("-a").arg(tree).arg(to).status(),
        None => {
            let tarball = tarball().unwrap_or_else(|| {
                panic!("no {TARBALL_PREFIX}*.tar.xz in the cache and no kernel built: run cargo xtask build-kernel first")
            });
            fs::create_dir_all(to).unwrap();
            Command::new("tar")
                .args(["xf"])
                .arg(&tarball)
                .args(["--strip-components=1", "-C"])
                .arg(to)
                .status()
        }
    };
    assert!(
        status.unwrap().success(),
        "making the tree in {}",
        to.display()
    );
}

/// The branch (the change, then its test) and the reverted branch.
fn make_branches(repo: &Path) {
    git(repo, &["checkout", "-q", "-b", BRANCH]);
    let arraymap = repo.join("kernel/bpf/arraymap.c");
    let text = fs::read_to_string(&arraymap).unwrap();
    assert!(text.contains(MASK), "arraymap.c's flag mask moved");
    fs::write(&arraymap, text.replacen(MASK, MASK_AFTER, 1)).unwrap();
    git(repo, &["commit", "-q", "-a", "-m", CHANGE]);
    fs::write(repo.join(TEST_FILE), TEST_SOURCE).unwrap();
    fs::write(repo.join(PROBE_FILE), PROBE_SOURCE).unwrap();
    git(repo, &["add", "--force", TEST_FILE, PROBE_FILE]);
    git(repo, &["commit", "-q", "-m", TEST]);
    git(repo, &["checkout", "-q", "-b", REVERTED]);
    git(repo, &["revert", "--no-edit", "HEAD~1"]);
    git(repo, &["checkout", "-q", BRANCH]);
}

/// The C test, built static for the guest, in the project (shared with
/// the guest).
fn c_test() -> PathBuf {
    let dir = project().join("target/branch-test");
    fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("no_prealloc");
    let source = project().join("xtask/tests/branch/no_prealloc.c");
    let cc = Command::new("cc")
        .args(["-static", "-O2", "-Wall", "-o"])
        .arg(&exe)
        .arg(&source)
        .status()
        .unwrap();
    assert!(cc.success(), "compiling {}", source.display());
    exe
}

/// `cargo xtask SUBCOMMAND --kernel-src REPO --base main --head HEAD
/// ARGS...`, under TCG.
fn xtask(subcommand: &str, head: &str, args: &[&str]) -> Ran {
    let repo = repository();
    let mut c = Command::new(XTASK);
    c.arg(subcommand)
        .arg("--kernel-src")
        .arg(&repo)
        .args(["--base", "main", "--head", head, "--accel", "tcg"])
        .args(args)
        .current_dir(project())
        .stdin(Stdio::null());
    run_to_end(c, Duration::from_secs(1800))
}

/// kselftest of the new test, new on `variant`, on base and `variant`.
fn kselftest(head: &str, variant: &str) -> Ran {
    kselftest_of(NEW_TEST, head, variant)
}

/// kselftest of `test`, new on `variant`, on base and `variant`.
fn kselftest_of(test: &str, head: &str, variant: &str) -> Ran {
    let kernels = format!("base,{variant}");
    let args = ["--kernel", &kernels, "-t", test, "--new-on", variant];
    xtask(
        "kselftest",
        head,
        &[&args[..], &["--runner", "test_progs"]].concat(),
    )
}

/// The C test on base and `variant`, expected to fail on base.
fn run(head: &str, variant: &str) -> Ran {
    let exe = c_test();
    let kernels = format!("base,{variant}");
    let args = ["--kernel", &kernels, "--expect", "base=fail", "--"];
    xtask("run", head, &[&args[..], &[exe.to_str().unwrap()]].concat())
}

/// The row of `test` in a kselftest table.
fn row<'a>(out: &'a str, test: &str) -> &'a str {
    let name = format!("test_progs:{test} ");
    out.lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_else(|| panic!("no row for {test} in:\n{out}"))
}

#[test]
#[ignore = "boots kernels: run by cargo xtask ci"]
fn a_branch_s_new_test_fails_on_base_and_passes_on_the_branch() {
    let ks = kselftest(BRANCH, VARIANT);
    assert_eq!(
        ks.code, 0,
        "kselftest --new-on:\n{}{}",
        ks.stdout, ks.stderr
    );
    let cells: Vec<&str> = row(&ks.stderr, NEW_TEST).split_whitespace().collect();
    assert_eq!(cells[1..], ["FAIL", "ok"], "base, then the branch");
    assert!(ks.stdout.contains("3 passed, 1 failed"), "{}", ks.stdout);
    let ran = run(BRANCH, VARIANT);
    assert_eq!(ran.code, 0, "run --expect:\n{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains("run: 2 of 2 kernels as expected"),
        "{}",
        ran.stdout
    );
}

#[test]
#[ignore = "boots kernels: run by cargo xtask ci"]
fn with_the_change_reverted_both_fail_naming_the_test() {
    let ks = kselftest(REVERTED, REVERTED_VARIANT);
    assert_eq!(
        ks.code, 1,
        "kselftest --new-on:\n{}{}",
        ks.stdout, ks.stderr
    );
    let cells: Vec<&str> = row(&ks.stderr, NEW_TEST).split_whitespace().collect();
    assert_eq!(cells[1..], ["FAIL", "FAIL"], "base, then the branch");
    assert!(ks.stdout.contains("2 passed, 2 failed"), "{}", ks.stdout);
    let named = format!("test_progs:{NEW_TEST} is FAIL on {REVERTED_VARIANT}");
    assert!(ks.stderr.contains(&named), "{}", ks.stderr);
    let ran = run(REVERTED, REVERTED_VARIANT);
    assert_eq!(ran.code, 1, "run --expect:\n{}{}", ran.stdout, ran.stderr);
    let named = format!("run: 1 of 2 kernels as expected; not {REVERTED_VARIANT}");
    assert!(ran.stdout.contains(&named), "{}", ran.stdout);
    assert!(
        ran.stderr
            .contains("array map with BPF_F_NO_PREALLOC: Invalid argument"),
        "the C test says why: {}",
        ran.stderr
    );
}

#[test]
#[ignore = "boots kernels: run by cargo xtask ci"]
fn a_new_test_that_skips_on_the_branch_fails_naming_it() {
    // Without the change the probing test skips on both kernels: on base
    // that is what a new test does, on the branch it tested nothing.
    let ks = kselftest_of(PROBE_TEST, REVERTED, REVERTED_VARIANT);
    assert_eq!(
        ks.code, 1,
        "kselftest --new-on, a skip:\n{}{}",
        ks.stdout, ks.stderr
    );
    let cells: Vec<&str> = row(&ks.stderr, PROBE_TEST).split_whitespace().collect();
    assert_eq!(cells[1..], ["skip", "skip"], "base, then the branch");
    let named = format!(
        "test_progs:{PROBE_TEST} skips on {REVERTED_VARIANT}: --new-on holds it to pass from its variant on"
    );
    assert!(ks.stderr.contains(&named), "{}", ks.stderr);
    let on_base = format!("test_progs:{PROBE_TEST} skips on base");
    assert!(!ks.stderr.contains(&on_base), "{}", ks.stderr);
}

/// format-series of the branch with `args`, as a user with a name.
fn format_series(args: &[&str]) -> Ran {
    let mut c = Command::new(XTASK);
    c.arg("format-series")
        .arg("--kernel-src")
        .arg(repository())
        .args(["--base", "main", "--head", BRANCH])
        .args(args)
        .current_dir(project())
        .stdin(Stdio::null());
    as_git_user(&mut c, "Ada Lovelace", "ada@example.org");
    run_to_end(c, Duration::from_secs(900))
}

/// A branch is posted as the project's series is, with a cover letter
/// of its own (the project's is refused: its table is this series'),
/// its commits' authors kept, and checkpatch holding each patch: the
/// branch's commits have no Signed-off-by, and it says so.
#[test]
#[ignore = "prepares the branch's check trees and runs checkpatch: run by cargo xtask ci"]
fn a_branch_is_posted_with_its_own_cover_letter_and_checked() {
    let dir = std::env::temp_dir().join(format!("bpflab-branch-posting-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let out = dir.join("posting");
    let cover = dir.join("cover.txt");
    fs::write(&cover, format!("{CHANGE}\n\nArray maps take the flag.\n")).unwrap();
    let out_arg = out.to_str().unwrap();

    let refused = format_series(&["--out", out_arg]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--cover FILE"),
        "{}",
        refused.stderr
    );
    assert!(!out.exists(), "nothing written before the refusal");

    let ran = format_series(&["--out", out_arg, "--cover", cover.to_str().unwrap()]);
    let said = format!("{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.code, 1, "{said}");
    assert!(
        said.contains("wrote 3 mails (the cover letter and 2 patches)"),
        "{said}"
    );
    assert!(said.contains("Missing Signed-off-by"), "{said}");
    assert!(
        said.contains("checkpatch --strict is not clean on: 0001-"),
        "{said}"
    );
    let letter = fs::read_to_string(out.join("0000-cover-letter.patch")).unwrap();
    assert!(
        letter.contains(&format!("[PATCH bpf-next 0/2] {CHANGE}"))
            && letter.contains("Array maps take the flag."),
        "{letter}"
    );
    let first = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("0001-")
        })
        .unwrap();
    let patch = fs::read_to_string(first).unwrap();
    assert!(
        patch.contains("\nFrom: bpflab <bpflab@localhost>\n"),
        "{patch}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

/// A branch goes through the maintainer's gates as the project's series
/// does, each patch on its own too: its change builds clean at each
/// prefix, and checkpatch names the missing Signed-off-by.
#[test]
#[ignore = "builds the branch's objects with W=1 and sparse: run by cargo xtask ci"]
fn a_branch_goes_through_the_gates_patch_by_patch() {
    let mut c = Command::new(XTASK);
    c.arg("check-patches")
        .arg("--each")
        .arg("--kernel-src")
        .arg(repository())
        .args(["--base", "main", "--head", BRANCH])
        .current_dir(project())
        .stdin(Stdio::null());
    let ran = run_to_end(c, Duration::from_secs(1200));
    let said = format!("{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.code, 1, "{said}");
    let built = said
        .lines()
        .filter(|l| {
            l.starts_with("[each patch] 000")
                && l.ends_with("builds with W=1 and sparse, nothing new")
        })
        .count();
    assert_eq!(
        built, 2,
        "each of the branch's two patches on its own: {said}"
    );
    assert!(said.contains("Missing Signed-off-by"), "{said}");
    assert!(!said.contains("on its own ("), "{said}");
}

/// `git bisect run` over the reverted branch with `run --bisect`: good at
/// the change, bad at the revert, the test commit between them tested
/// (its kernel built and booted). Bisect names the revert. In a worktree
/// of its own, so the repository's checkout is left as it is. The
/// command's failing status is bad, not skip: the unit test of
/// `bisect_exit` holds that, as this bisect meets a good commit only.
#[test]
#[ignore = "builds and boots a kernel per bisect step: run by cargo xtask ci"]
fn git_bisect_run_names_the_commit_that_broke_the_test() {
    let repo = repository();
    // One place, so that each run finds the kernels the last one built
    // (the harness names a source after its directory).
    let tree = cache().join("test-repos/bisect");
    if tree.exists() {
        git(
            &repo,
            &["worktree", "remove", "--force", tree.to_str().unwrap()],
        );
    }
    let wt = tree.to_str().unwrap();
    // Checked out sparsely (the harness reads commits with git, not the
    // checkout's files): seconds, not a minute of 96,000 files.
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "--no-checkout",
            "--detach",
            wt,
            REVERTED,
        ],
    );
    git(
        &tree,
        &["sparse-checkout", "set", "--no-cone", "/MAINTAINERS"],
    );
    git(&tree, &["checkout", "-q", "--detach", REVERTED]);
    let good = format!("{BRANCH}~1");
    let step = format!(
        "cd {} && {XTASK} run --bisect --kernel-src {wt} --base {good} --kernel branch \
         --accel tcg -- {}",
        project().display(),
        c_test().display()
    );
    git(&tree, &["bisect", "start", REVERTED, &good]);
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(&tree)
        .args(["bisect", "run", "sh", "-c", &step]);
    let ran = run_to_end(c, Duration::from_secs(1800));
    let log = git(&tree, &["bisect", "log"]);
    git(&tree, &["bisect", "reset"]);
    git(&repo, &["worktree", "remove", "--force", wt]);
    let said = format!("{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.code, 0, "{said}\n{log}");
    assert!(said.contains("is the first bad commit"), "{said}");
    let revert = format!("Revert \"{CHANGE}\"");
    let blamed = said
        .split("is the first bad commit")
        .nth(1)
        .unwrap_or_default();
    assert!(blamed.contains(&revert), "{said}");
    // The test commit between was tested, not skipped.
    assert!(log.contains("# good:") && !log.contains("# skip:"), "{log}");
}
