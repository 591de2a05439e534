//! What a fresh-root check found, kept as JSON: per command its exit and
//! time, the packages the harness had to install, and the dependency list
//! it proved. A record in `docs/fresh-root/` ties that list to the code: a
//! unit test fails when the declared packages change without a new check.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::Form;
use crate::ci::times::{self, CiTimes};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CommandResult {
    pub command: String,
    /// None: killed by a signal.
    pub exit: Option<i32>,
    pub secs: u64,
    /// The command's last `N passed, N failed` line, if it printed one.
    pub closing: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub form: Form,
    pub commit: String,
    pub date: String,
    pub bootstrap_secs: u64,
    pub packages_at_start: usize,
    pub packages_at_end: usize,
    pub commands: Vec<CommandResult>,
    /// Packages the commands installed by name (apt-mark's manual ones),
    /// that is, every package the fresh root was found to be missing.
    pub installed: Vec<String>,
    /// The Debian packages the harness declares (`hostdeps::declared_packages`).
    pub declared: Vec<String>,
    pub passed: bool,
    pub total_secs: u64,
    /// The full form's ci, run first with an empty cache: its steps'
    /// times, the cold run `docs/ci-times-cold.json` records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_times: Option<CiTimes>,
}

/// Where a passing check of `form` is recorded in the project.
pub fn record_path(form: Form) -> PathBuf {
    crate::project::root()
        .join("docs/fresh-root")
        .join(format!("{}.json", form.name()))
}

/// The times of the last ci run in the cache `cache` (its newest
/// `runs/ci-*/ci-times.json`), if one wrote them.
pub fn last_ci_times(cache: &Path) -> Option<CiTimes> {
    let runs = std::fs::read_dir(cache.join("runs")).ok()?;
    let newest = runs
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("ci-"))
        .map(|e| e.path().join(times::FILE_NAME))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max()?;
    times::read(&newest.1).ok()
}

/// The last closing line of a test runner in `text`: ours
/// (`N passed, N failed...`, after an optional `word:`), or cargo test's.
pub fn closing_line(line: &str) -> Option<&str> {
    let re = regex::Regex::new(r"^(\w+: )?\d+ passed, \d+ failed|^test result: ").unwrap();
    let line = line.trim();
    re.is_match(line).then_some(line)
}

/// `after` minus `before`, sorted.
pub fn added(before: &[String], after: &[String]) -> Vec<String> {
    let mut new: Vec<String> = after
        .iter()
        .filter(|p| !before.contains(p))
        .cloned()
        .collect();
    new.sort();
    new.dedup();
    new
}

/// A table of the commands, their results and times.
pub fn table(s: &Summary) -> String {
    let w = s
        .commands
        .iter()
        .map(|c| c.command.len())
        .max()
        .unwrap_or(0)
        .max(12);
    let mut out = format!(
        "{:<w$}  {:<8} {:>7}  closing line\n",
        "command", "result", "time"
    );
    out += &format!(
        "{:<w$}  {:<8} {:>6}s\n",
        "(mmdebstrap)", "ok", s.bootstrap_secs
    );
    for c in &s.commands {
        let result = match c.exit {
            Some(0) => "ok".to_string(),
            Some(n) => format!("FAIL({n})"),
            None => "KILLED".to_string(),
        };
        out += &format!(
            "{:<w$}  {:<8} {:>6}s  {}\n",
            c.command,
            result,
            c.secs,
            c.closing.as_deref().unwrap_or("")
        );
    }
    out += &format!(
        "{:<w$}  {:<8} {:>6}s",
        "total",
        if s.passed { "passed" } else { "FAILED" },
        s.total_secs
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::{Context, Result};
    use std::path::Path;

    fn read(path: &Path) -> Result<Summary> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    #[test]
    fn closing_lines_of_our_commands_and_of_cargo_test() {
        assert_eq!(
            closing_line("129 passed, 0 failed\n"),
            Some("129 passed, 0 failed")
        );
        assert_eq!(
            closing_line("steps: 18 passed, 0 failed"),
            Some("steps: 18 passed, 0 failed")
        );
        assert_eq!(
            closing_line("test result: ok. 3 passed; 0 failed"),
            Some("test result: ok. 3 passed; 0 failed")
        );
        assert_eq!(closing_line("[vmtest] 3 passed, 1 failed so far"), None);
    }

    #[test]
    fn what_the_run_installed() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            added(&s(&["gcc", "make"]), &s(&["lld-19", "gcc", "make", "bc"])),
            s(&["bc", "lld-19"])
        );
    }

    /// The full form's ci times are the newest ci run's in the root's
    /// cache: not another command's run, not an older ci's.
    #[test]
    fn the_ci_times_carried_out_are_the_last_ci_runs() {
        let cache = std::env::temp_dir().join(format!("fresh-ci-times-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        assert_eq!(last_ci_times(&cache), None, "no runs at all");
        let write = |run: &str, total: f64| {
            let dir = cache.join("runs").join(run);
            std::fs::create_dir_all(&dir).unwrap();
            let t = CiTimes {
                commit: None,
                cold: true,
                base_build_seconds: Some(500.0),
                steps: vec![],
                total_seconds: total,
            };
            times::write(&dir, &t).unwrap();
            // Apart in mtime, whatever the file system's granularity.
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        write("ci-1-1", 1.0);
        write("ci-2-1", 2.0);
        write("vmtest-3-1", 3.0);
        std::fs::create_dir_all(cache.join("runs/ci-4-1")).unwrap();
        let got = last_ci_times(&cache).map(|t| t.total_seconds);
        std::fs::remove_dir_all(&cache).unwrap();
        assert_eq!(got, Some(2.0));
    }

    /// The records at `paths` that exist, each held to `declared`: it
    /// passed, is of its form, and proved that list. How many there are;
    /// an error names the first that falls short and the fix.
    fn check_recorded(paths: &[(Form, PathBuf)], declared: &[String]) -> Result<usize, String> {
        let mut found = 0;
        for (form, path) in paths {
            if !path.exists() {
                continue;
            }
            found += 1;
            let rec = read(path).map_err(|e| format!("{e:#}"))?;
            let again = match form {
                Form::Quick => "cargo xtask fresh-root --quick --record",
                _ => "cargo xtask fresh-root --record",
            };
            if !rec.passed || rec.form != *form {
                return Err(format!(
                    "{} records no passing {} check: run `{again}`",
                    path.display(),
                    form.name()
                ));
            }
            if rec.declared != declared {
                return Err(format!(
                    "the host packages changed since {} was recorded: run `{again}`",
                    path.display()
                ));
            }
        }
        Ok(found)
    }

    /// A recorded check proved today's dependency list, and passed: when
    /// hostdeps changes, `cargo xtask fresh-root --record` must run again.
    /// Inside a fresh-root check ci filters this test out by name
    /// (`ci::steps::RECORD_TEST`); it never passes on its own say.
    #[test]
    fn the_recorded_fresh_root_checks_cover_todays_dependencies() {
        let declared = crate::hostdeps::declared_packages();
        let paths = [Form::Full, Form::Quick].map(|f| (f, record_path(f)));
        let found = check_recorded(&paths, &declared).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            found > 0,
            "no fresh-root check is recorded in docs/fresh-root/"
        );
    }

    /// A record that proved another dependency list fails, naming the
    /// command that makes it again. (That no environment lets the test
    /// above pass on its own say is ci's: `ci::steps`' test holds the
    /// unit step to filter it out by name inside a fresh root only.)
    #[test]
    fn a_stale_record_fails_naming_the_command_that_remakes_it() {
        let dir = crate::util::tempdir();
        let path = dir.join("quick.json");
        let stale = Summary {
            form: Form::Quick,
            commit: "c".into(),
            date: "d".into(),
            bootstrap_secs: 0,
            packages_at_start: 0,
            packages_at_end: 0,
            commands: vec![],
            installed: vec![],
            declared: vec!["gcc".into()],
            passed: true,
            total_secs: 0,
            ci_times: None,
        };
        std::fs::write(&path, serde_json::to_string(&stale).unwrap()).unwrap();
        let got = check_recorded(&[(Form::Quick, path)], &["gcc".into(), "make".into()]);
        std::fs::remove_dir_all(&dir).unwrap();
        let e = got.unwrap_err();
        assert!(e.contains("the host packages changed since"), "{e}");
        assert!(
            e.contains("run `cargo xtask fresh-root --quick --record`"),
            "{e}"
        );
    }
}
