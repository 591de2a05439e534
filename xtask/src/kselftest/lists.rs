//! `kselftest/ALLOWLIST` (the default set) and `kselftest/DENYLIST` (what
//! cannot run in this VM), in the BPF CI's form: one test per line, each
//! with its reason after `#`. A plain name is a test of every test_progs
//! flavor; `RUNNER:NAME` is one runner's (test_maps and test_verifier
//! cannot be told which tests to run: theirs are whole-program lines in
//! ALLOWLIST, and in DENYLIST a test whose result is then not counted; a
//! test_verifier test is named by its description, spaces and all).

use anyhow::{bail, Context, Result};

use super::runner::Runner;

/// One line of a list: a test name (or glob), the runner it is of (None:
/// every test_progs flavor), and why it is listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub runner: Option<Runner>,
    pub name: String,
    pub reason: String,
    /// The file it came from, to name in a skip's reason.
    pub list: &'static str,
}

impl Entry {
    /// Whether this entry is about `runner`'s tests.
    pub fn of(&self, runner: Runner) -> bool {
        match self.runner {
            Some(r) => r == runner,
            None => runner.is_test_progs(),
        }
    }

    /// Whether a result of `runner` named `test` (without the runner's
    /// prefix) is this entry's: by name, or for test_verifier by the
    /// description after its `#N/u ` or `#N/p `.
    pub fn names(&self, runner: Runner, test: &str) -> bool {
        if !self.of(runner) {
            return false;
        }
        let test = match runner {
            Runner::Verifier => test.split_once(' ').map_or(test, |(_, d)| d),
            _ => test,
        };
        test == self.name || test.starts_with(&format!("{}/", self.name))
    }
}

/// The entries about `runner`.
pub fn for_runner(entries: &[Entry], runner: Runner) -> Vec<Entry> {
    entries.iter().filter(|e| e.of(runner)).cloned().collect()
}

pub const ALLOWLIST: &str = "ALLOWLIST";
pub const DENYLIST: &str = "DENYLIST";
/// What only the lean kernels cannot run (as BPF CI keeps a DENYLIST per
/// architecture): options the lean configuration leaves out on purpose.
pub const DENYLIST_LEAN: &str = "DENYLIST.lean";

/// The series' own tests of the default set, each with the variant it is
/// new in (`NAME  VARIANT  # why`): held as `--new-on VARIANT` holds
/// `-t`'s, to fail before that variant and pass from it on.
pub const NEW_ON: &str = "NEW_ON";

/// Reads `kselftest/NEW_ON`: (test, variant) pairs.
pub fn load_new_on() -> Result<Vec<(String, String)>> {
    let path = crate::project::root().join("kselftest").join(NEW_ON);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_new_on(&text).with_context(|| format!("in {}", path.display()))
}

/// `NAME  VARIANT  # why` per line; comments and blank lines as in the
/// other lists.
pub fn parse_new_on(text: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (fields, reason) = line.split_once('#').unwrap_or((line, ""));
        let words: Vec<&str> = fields.split_whitespace().collect();
        match (&words[..], reason.trim().is_empty()) {
            ([name, variant], false) => out.push((name.to_string(), variant.to_string())),
            _ => bail!(
                "line {}: `{}` is not `NAME  VARIANT  # why`; write the test, the variant it is new in, and why",
                i + 1,
                line
            ),
        }
    }
    Ok(out)
}

/// Reads `kselftest/<file>` of the project.
pub fn load(file: &'static str) -> Result<Vec<Entry>> {
    let path = crate::project::root().join("kselftest").join(file);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text, file).with_context(|| format!("in {}", path.display()))
}

/// Lines that are empty or start with `#` are comments; every other line
/// is `NAME  # reason`, and a name without a reason is an error.
pub fn parse(text: &str, list: &'static str) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, reason) = line.split_once('#').unwrap_or((line, ""));
        let (name, reason) = (name.trim(), reason.trim());
        let (runner, name) = match super::runner::split_result_name(name) {
            Some((r, n)) => (Some(r), n),
            None => (None, name),
        };
        if reason.is_empty() {
            bail!(
                "line {}: `{name}` has no reason; write `{name}  # why`",
                i + 1
            );
        }
        // test_progs takes its lists comma-separated; subtest names have
        // spaces (and test_maps's names none). test_verifier's are matched
        // here, whole, and some have commas.
        let spaces_allowed = runner != Some(Runner::Maps);
        let commas_allowed = runner == Some(Runner::Verifier);
        if (!spaces_allowed && name.contains(char::is_whitespace))
            || (!commas_allowed && name.contains(','))
        {
            bail!(
                "line {}: `{name}` is not one test name (no spaces or commas)",
                i + 1
            );
        }
        entries.push(Entry {
            runner,
            name: name.to_string(),
            reason: reason.to_string(),
            list,
        });
    }
    Ok(entries)
}

/// The names as one comma-separated test_progs argument.
pub fn joined(entries: &[Entry]) -> String {
    entries
        .iter()
        .map(|e| e.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_carry_their_reasons() {
        let e = parse(
            "# head\n\nmmap   # the feature\nringbuf/ringbuf_n # n\n",
            "TEST",
        )
        .unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "mmap");
        assert_eq!(e[0].reason, "the feature");
        assert_eq!(joined(&e), "mmap,ringbuf/ringbuf_n");
    }

    #[test]
    fn entries_belong_to_test_progs_or_to_one_runner() {
        let e = parse("mmap # a\ntest_maps:test_sockmap # b\ntest_verifier:bounds check on map # c\ntest_progs-cpuv4:arena_list # d\n", "TEST").unwrap();
        assert_eq!(e[0].runner, None);
        assert!(e[0].of(Runner::NoAlu32) && !e[0].of(Runner::Maps));
        assert!(e[0].names(Runner::TestProgs, "mmap/sub"));
        assert!(
            e[1].names(Runner::Maps, "test_sockmap")
                && !e[1].names(Runner::TestProgs, "test_sockmap")
        );
        assert!(e[2].names(Runner::Verifier, "#7/p bounds check on map"));
        assert!(!e[2].names(Runner::Verifier, "#7/p bounds check"));
        assert_eq!(for_runner(&e, Runner::CpuV4).len(), 2);
        assert_eq!(for_runner(&e, Runner::TestProgs).len(), 1);
        assert!(parse("test_maps:a b # test_maps names have no spaces\n", "TEST").is_err());
    }

    #[test]
    fn a_name_without_a_reason_is_refused() {
        let err = parse("mmap\n", "TEST").unwrap_err().to_string();
        assert!(err.contains("line 1: `mmap` has no reason"), "{err}");
        assert!(parse("test_maps:a b # two\n", "TEST").is_err());
        assert!(parse("a,b # two\n", "TEST").is_err());
        // test_verifier's names are matched whole: a comma is a name's.
        let v = parse("test_verifier:valid 1,2 reads # why\n", "TEST").unwrap();
        assert_eq!(for_runner(&v, Runner::Verifier).len(), 1);
    }

    #[test]
    fn the_project_lists_parse_and_hold_the_issue_set() {
        let allow = load(ALLOWLIST).unwrap();
        for name in ["mmap", "skeleton", "global_data", "ringbuf", "arena_list"] {
            assert!(allow.iter().any(|e| e.name == name), "{name} missing");
        }
        load(DENYLIST).unwrap();
        let lean = load(DENYLIST_LEAN).unwrap();
        assert!(lean.iter().all(|e| e.list == DENYLIST_LEAN));
    }

    #[test]
    fn new_on_lines_name_a_test_and_a_variant_with_a_reason() {
        let text = "# the series' own\narray_mmap_refault  mainline  # data after MADV_DONTNEED\n";
        assert_eq!(
            parse_new_on(text).unwrap(),
            [("array_mmap_refault".to_string(), "mainline".to_string())]
        );
        for bad in ["t direct\n", "t # no variant\n", "t a b # two\n"] {
            let err = parse_new_on(bad).unwrap_err().to_string();
            assert!(
                err.contains("line 1") && err.contains("NAME  VARIANT  # why"),
                "{err}"
            );
        }
        // The project's own list parses, and names tests of the default set.
        let allow = load(ALLOWLIST).unwrap();
        for (name, _) in load_new_on().unwrap() {
            assert!(
                allow.iter().any(|e| e.name == name),
                "{name} not in ALLOWLIST"
            );
        }
    }
}
