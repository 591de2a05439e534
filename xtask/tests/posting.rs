//! The posting (`format-series`) as a maintainer takes it: on the 7.3
//! tree, the mbox applies with git am onto the base it names, every
//! patch is the author's and passes checkpatch --strict as posted, and
//! the cover letter's table is the bench record's. And what it refuses,
//! before anything is written: a version without its changelog, an
//! author without a name.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{as_git_user, cache, git, project, run_to_end, Ran};

const XTASK: &str = env!("CARGO_BIN_EXE_xtask");
const SETUP_FAILED: i32 = 3;
const NAME: &str = "Ada Lovelace";
const EMAIL: &str = "ada@example.org";

/// format-series with `args`, as a user whose git identity is
/// `name`/`email` (set in the environment's git configuration, which
/// outranks every file's).
fn format_series(args: &[&str], name: &str, email: &str) -> Ran {
    let mut c = Command::new(XTASK);
    c.arg("format-series").args(args).stdin(Stdio::null());
    as_git_user(&mut c, name, email);
    run_to_end(c, Duration::from_secs(900))
}

fn out_dir(tag: &str) -> PathBuf {
    let dir = project()
        .join("target/posting-tests")
        .join(format!("{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// The harness's git repository of Debian's 7.3 source, which the
/// posting's base-commit names.
fn source_repo() -> PathBuf {
    let sources = fs::read_dir(cache().join("sources")).expect("a kernel cache");
    sources
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("debian-7.3.") && p.join("source.git").is_dir()
        })
        .expect("the 7.3 source's git repository: run cargo xtask check-patches first")
        .join("source.git")
}

/// The record's cell as the cover letter writes it: thousands of
/// instructions and user faults.
fn recorded(record: &serde_json::Value, kernel: &str, scenario: &str, pages: u64) -> String {
    let row = record["kernels"][kernel]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scenario"] == scenario && r["pages"] == pages && r["threads"] == 1)
        .unwrap_or_else(|| panic!("no {kernel} {scenario} {pages} row"));
    format!(
        "{:.1}k / {}",
        row["instructions"].as_f64().unwrap() / 1000.0,
        row["user_faults"].as_f64().unwrap().round()
    )
}

#[test]
#[ignore = "prepares the 7.3 trees and runs get_maintainer.pl and checkpatch: run by cargo xtask ci"]
fn the_posting_applies_onto_its_base_and_each_patch_passes_checkpatch() {
    let out = out_dir("v1");
    let ran = format_series(&["--out", out.to_str().unwrap()], NAME, EMAIL);
    let said = format!("{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.code, 0, "{said}");
    assert!(
        said.contains("wrote 6 mails (the cover letter and 5 patches)"),
        "{said}"
    );
    let checked = said
        .lines()
        .filter(|l| l.contains("checkpatch") && l.contains("--strict 000"))
        .count();
    assert_eq!(checked, 5, "checkpatch per patch: {said}");
    let base = said
        .lines()
        .find_map(|l| l.strip_prefix("base-commit: "))
        .and_then(|l| l.split_whitespace().next())
        .expect("the base named")
        .to_string();
    let mails = mails_in(&out);
    assert_eq!(mails.len(), 6, "{mails:?}");
    each_mail_is_the_authors(&mails);
    let letter = fs::read_to_string(&mails[0]).unwrap();
    assert!(letter.contains(&format!("base-commit: {base}")), "{letter}");
    assert!(!letter.contains("*** "), "{letter}");
    the_table_is_the_records(&letter);
    applies_onto(&base, &out);
    let thread = fs::read_to_string(out.join("thread.mbox")).unwrap();
    let froms = thread.lines().filter(|l| l.starts_with("From ")).count();
    assert!(
        thread.starts_with(&letter),
        "the thread starts with the cover letter"
    );
    assert_eq!(froms, 6, "the thread: the cover letter and 5 patches");
    fs::remove_dir_all(&out).unwrap();
}

/// The mails written to `out`, cover letter first.
fn mails_in(out: &Path) -> Vec<PathBuf> {
    let mut mails: Vec<PathBuf> = fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "patch"))
        .collect();
    mails.sort();
    mails
}

/// From the author, numbered and prefixed, addressed to bpf and linux-mm,
/// each patch signed off by the author; the placeholder nowhere.
fn each_mail_is_the_authors(mails: &[PathBuf]) {
    let author = format!("{NAME} <{EMAIL}>");
    for (i, mail) in mails.iter().enumerate() {
        let text = fs::read_to_string(mail).unwrap();
        let name = mail.display();
        assert!(!text.contains("bpf-lazy-mmap@localhost"), "{name}");
        assert!(text.contains(&format!("\nFrom: {author}\n")), "{name}");
        assert!(text.contains(&format!("[PATCH bpf-next {i}/5]")), "{name}");
        let to = text.split("\nTo: ").nth(1).expect("a To: header");
        let to = &to[..to.find("\nCc: ").expect("a Cc: header after it")];
        assert!(to.contains("bpf@vger.kernel.org"), "{name}: {to}");
        assert!(text.contains("linux-mm@kvack.org"), "{name}");
        if i > 0 {
            assert!(
                text.contains(&format!("\nSigned-off-by: {author}\n")),
                "{name}"
            );
        }
    }
}

/// Two rows of the cover letter's table, cell for cell the record's.
fn the_table_is_the_records(letter: &str) {
    let text = fs::read_to_string(project().join("docs/bench/icount.json")).unwrap();
    let record: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (label, scenario, pages) in [
        ("write all, 8 MiB", "nopopulate_touchall", 2048),
        ("write all, 64 KiB", "nopopulate_touchall", 16),
    ] {
        let line = letter
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row: {letter}"));
        let cells: Vec<String> = ["eager", "mainline", "adaptive"]
            .iter()
            .map(|k| recorded(&record, k, scenario, pages))
            .collect();
        let shown: Vec<&str> = line[label.len()..]
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(shown, cells, "{line}");
    }
}

/// `out`'s mbox applies with git am onto `base` in a clone of the
/// source's repository, each commit the author's.
fn applies_onto(base: &str, out: &Path) {
    let clone = out.join("am");
    let status = Command::new("git")
        .args(["clone", "--quiet", "--no-checkout", "--shared"])
        .arg(source_repo())
        .arg(&clone)
        .status()
        .unwrap();
    assert!(status.success());
    let dirs = ["kernel/bpf/", "tools/testing/selftests/bpf/"];
    git(
        &clone,
        &[&["sparse-checkout", "set", "--no-cone"][..], &dirs].concat(),
    );
    git(&clone, &["checkout", "--quiet", base]);
    git(
        &clone,
        &["am", "--quiet", out.join("series.mbox").to_str().unwrap()],
    );
    let authors = git(
        &clone,
        &["log", "--format=%an <%ae>", &format!("{base}..HEAD")],
    );
    let author = format!("{NAME} <{EMAIL}>");
    assert_eq!(
        authors.lines().collect::<Vec<_>>(),
        vec![author.as_str(); 5]
    );
}

#[test]
fn a_version_without_its_changelog_or_an_author_without_a_name_is_refused() {
    let out = out_dir("refused");
    let dir = out.to_str().unwrap();
    let v2 = format_series(&["--out", dir, "--version", "2"], NAME, EMAIL);
    assert_eq!(v2.code, SETUP_FAILED, "{}", v2.stderr);
    assert!(
        v2.stderr
            .contains("patches/changelog.txt has no `v2:` section"),
        "{}",
        v2.stderr
    );
    assert_eq!(v2.stderr.trim().lines().count(), 1, "{}", v2.stderr);
    let nameless = format_series(&["--out", dir], "", EMAIL);
    assert_eq!(nameless.code, SETUP_FAILED, "{}", nameless.stderr);
    assert!(
        nameless.stderr.contains("git config user.name is not set"),
        "{}",
        nameless.stderr
    );
    assert!(!out.exists(), "nothing is written before the refusal");
}
