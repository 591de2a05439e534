//! The docs' claims held to the code, so that they cannot go stale
//! unseen: every mutant id, plan test, `--claim` value, `cargo xtask`
//! flag, ci step, local link and source file that README.md, docs/ and
//! the command line's help cite must exist. Test-only; it sits with the command layer
//! because it reads the command line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use regex::Regex;

use crate::cli::Cli;
use crate::project;

/// A document: its path from the project root, and its text.
struct Doc {
    path: PathBuf,
    text: String,
}

/// README.md and every Markdown file under docs/.
fn docs() -> Vec<Doc> {
    let root = project::root();
    let mut paths = vec![root.join("README.md")];
    markdown_under(&root.join("docs"), &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| Doc {
            text: std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
            path: p.strip_prefix(&root).unwrap().to_path_buf(),
        })
        .collect()
}

fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            markdown_under(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// The command line's help, every subcommand's in full: it cites plan
/// tests and mutant ids too.
fn help() -> Doc {
    let mut cli = Cli::command();
    let mut text = cli.render_long_help().to_string();
    for sub in cli.get_subcommands_mut() {
        text += &sub.render_long_help().to_string();
    }
    Doc {
        path: "xtask/src/cli.rs (--help)".into(),
        text,
    }
}

/// The docs and the help text.
fn everything() -> Vec<Doc> {
    let mut all = docs();
    all.push(help());
    all
}

/// The documents that describe the project as it is, not a dated run:
/// a range of plan tests there must reach the plan's last test.
fn describes_the_present(doc: &Doc) -> bool {
    let p = doc.path.to_string_lossy();
    !p.ends_with("MEASUREMENTS.md") && !p.ends_with("SERIES.md")
}

/// Each match of `re` in `doc`, with its line number, as problems where
/// `bad` says what is wrong with it.
fn scan(
    doc: &Doc,
    re: &Regex,
    mut bad: impl FnMut(&regex::Captures) -> Option<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in doc.text.lines().enumerate() {
        for caps in re.captures_iter(line) {
            if let Some(why) = bad(&caps) {
                out.push(format!("{}:{}: {why}", doc.path.display(), n + 1));
            }
        }
    }
    out
}

fn assert_none(problems: Vec<String>, what: &str) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

/// Every id `cargo xtask mutants --list` gives for the project's series.
fn mutant_ids() -> BTreeSet<String> {
    let series = crate::kernel::project_series().unwrap();
    let texts = crate::mutants::read_patches(&series).unwrap();
    crate::mutants::of_series(&series, &texts)
        .into_iter()
        .map(|m| m.id)
        .collect()
}

#[test]
fn every_mutant_id_cited_is_one_the_series_has() {
    let ids = mutant_ids();
    let id = Regex::new(r"\b\d{4}\.\d+\.[a-z]+\d+\b").unwrap();
    let filter = Regex::new(r"--filter[ =]([0-9][^\s`]*)").unwrap();
    let mut problems = Vec::new();
    for doc in everything() {
        problems.extend(scan(&doc, &id, |c| {
            (!ids.contains(&c[0])).then(|| format!("mutant {} does not exist", &c[0]))
        }));
        // `--filter` keeps the ids that contain one of its words.
        problems.extend(scan(&doc, &filter, |c| {
            c[1].split(',')
                .find(|w| !w.is_empty() && !ids.iter().any(|i| i.contains(w)))
                .map(|w| format!("--filter {w} matches no mutant"))
        }));
    }
    assert_none(
        problems,
        "mutant ids that `cargo xtask mutants --list` does not give",
    );
}

/// The plan's test functions, and the console check the host adds.
fn plan_tests() -> Vec<&'static str> {
    let mut names: Vec<&str> = selftests::tests::ALL.iter().map(|t| t.name).collect();
    names.push(crate::vm::assess::CONSOLE_CHECK);
    names
}

/// The plan's case ids (T01 …), from its test functions' names.
fn plan_ids() -> BTreeSet<u32> {
    plan_tests()
        .iter()
        .filter_map(|n| n.get(1..3)?.parse().ok())
        .collect()
}

#[test]
fn every_plan_test_cited_is_in_the_plan() {
    let (names, ids) = (plan_tests(), plan_ids());
    let last = *ids.last().unwrap();
    let case = Regex::new(r"\bT(\d{2})\b").unwrap();
    let function = Regex::new(r"\bt(\d{2})(_[a-z0-9_]+)?\b").unwrap();
    let range = Regex::new(r"\bT01\s*(?:–|-|to)\s*T(\d{2})\b").unwrap();
    let mut problems = Vec::new();
    for doc in everything() {
        problems.extend(scan(&doc, &case, |c| {
            let n: u32 = c[1].parse().unwrap();
            (!ids.contains(&n)).then(|| format!("T{n:02} is not in the plan"))
        }));
        // `t14_dontneed_then_touch` by its name, `-- t14` or `t02_touch`
        // as a filter: the start of a name.
        problems.extend(scan(&doc, &function, |c| {
            let start = match c.get(2) {
                Some(_) => c[0].to_string(),
                None => format!("{}_", &c[0]),
            };
            (!names.iter().any(|n| n.starts_with(&start)))
                .then(|| format!("no plan test {}", &c[0]))
        }));
        if describes_the_present(&doc) {
            problems.extend(scan(&doc, &range, |c| {
                let end: u32 = c[1].parse().unwrap();
                (end != last).then(|| format!("T01–T{end:02}: the plan runs to T{last:02}"))
            }));
        }
    }
    assert_none(problems, "plan tests the plan does not have");
}

#[test]
fn every_claim_cited_is_a_plan_kernel() {
    let kernels = guest_common::protocol::PLAN_KERNELS;
    // SIDE, KERNEL=SIDE, comma-separated; a list of the sides a|b|c; an
    // upper-case word is a placeholder.
    let claim = Regex::new(r"--claim[ =]([A-Za-z0-9_./|=,-]*[A-Za-z0-9_|])").unwrap();
    let mut problems = Vec::new();
    for doc in everything() {
        problems.extend(scan(&doc, &claim, |c| {
            c[1].split(',').find_map(|item| {
                let side = item.rsplit_once('=').map_or(item, |(_, s)| s);
                if side.chars().all(|ch| ch.is_ascii_uppercase()) {
                    return None;
                }
                let named: Vec<&str> = side.split('|').collect();
                if let Some(bad) = named.iter().find(|k| !kernels.contains(k)) {
                    return Some(format!("--claim {item}: {bad} is not one of {kernels:?}"));
                }
                // A list of the values is the whole list.
                (named.len() > 1 && named.len() != kernels.len())
                    .then(|| format!("--claim {side}: the values are {kernels:?}"))
            })
        }));
    }
    assert_none(problems, "--claim values that vmtest refuses");
}

/// The long flags (and their aliases) `sub` takes; None when there is no
/// such subcommand.
fn flags_of(sub: &str) -> Option<BTreeSet<String>> {
    let cli = Cli::command();
    let cmd = cli.find_subcommand(sub)?;
    let mut flags: BTreeSet<String> = ["help".to_string()].into();
    for arg in cmd.get_arguments() {
        flags.extend(arg.get_long().map(str::to_string));
        flags.extend(
            arg.get_all_aliases()
                .unwrap_or_default()
                .into_iter()
                .map(str::to_string),
        );
    }
    Some(flags)
}

/// What `cargo xtask SUB …` on `line` says wrongly: an unknown subcommand,
/// or a flag SUB does not take, up to the end of its code span, a `#`
/// comment or the `--` that ends the options.
fn command_problems(line: &str) -> Vec<String> {
    let start = Regex::new(r"cargo xtask ([a-z][a-z-]*)").unwrap();
    let flag = Regex::new(r"^[\[(|]*--([a-z][a-z0-9-]*)").unwrap();
    let mut out = Vec::new();
    for c in start.captures_iter(line) {
        let sub = &c[1];
        let Some(flags) = flags_of(sub) else {
            out.push(format!("cargo xtask {sub}: no such subcommand"));
            continue;
        };
        let rest = &line[c.get(0).unwrap().end()..];
        let rest = rest.split(['`', '#']).next().unwrap_or_default();
        for word in rest.split_whitespace().take_while(|w| *w != "--") {
            let Some(f) = flag.captures(word) else {
                continue;
            };
            if !flags.contains(&f[1]) {
                out.push(format!("cargo xtask {sub} takes no --{}", &f[1]));
            }
        }
    }
    out
}

#[test]
fn every_xtask_flag_cited_exists() {
    let mut problems = Vec::new();
    for doc in docs() {
        for (n, line) in doc.text.lines().enumerate() {
            for p in command_problems(line) {
                problems.push(format!("{}:{}: {p}", doc.path.display(), n + 1));
            }
        }
    }
    assert_none(
        problems,
        "cargo xtask commands with flags that do not exist",
    );
}

#[test]
fn every_ci_step_cited_exists() {
    let options = crate::ci::Options {
        debug: true,
        ..crate::ci::Options::default()
    };
    let steps: BTreeSet<&str> = crate::ci::steps::steps(&options, "xtask")
        .iter()
        .map(|s| s.id)
        .collect();
    let step = Regex::new(r"--step[ =]([a-z0-9,-]+)").unwrap();
    let mut problems = Vec::new();
    for doc in docs() {
        problems.extend(scan(&doc, &step, |c| {
            c[1].split(',')
                .find(|id| !steps.contains(id))
                .map(|id| format!("--step {id}: ci has no such step"))
        }));
    }
    assert_none(problems, "ci steps that do not exist");
}

/// A heading's anchor as GitHub makes it: lower case, spaces to `-`,
/// other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of `text`'s headings, code blocks skipped.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_local_link_resolves() {
    let root = project::root();
    let link = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut problems = Vec::new();
    for doc in docs() {
        let dir = root.join(&doc.path).parent().unwrap().to_path_buf();
        problems.extend(scan(&doc, &link, |c| {
            let target = &c[1];
            if target.contains("://") || target.starts_with("mailto:") {
                return None;
            }
            let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
            let path = if file.is_empty() {
                root.join(&doc.path)
            } else {
                dir.join(file)
            };
            if !path.exists() {
                return Some(format!("{target}: no such file"));
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            (!fragment.is_empty() && !anchors(&text).contains(fragment))
                .then(|| format!("{target}: no such heading"))
        }));
    }
    assert_none(problems, "links that lead nowhere");
}

/// The heading a missing option's line sends its reader to is there.
#[test]
fn the_missing_option_line_leads_to_a_heading() {
    let cited = crate::vm::boot_log::USAGE_ANCHOR;
    let (file, fragment) = cited.split_once('#').unwrap();
    let text = std::fs::read_to_string(project::root().join(file)).unwrap();
    assert!(
        anchors(&text).contains(fragment),
        "{cited}: no such heading"
    );
}

#[test]
fn the_checks_see_what_they_check() {
    assert_eq!(
        anchor("The BPF tree's own selftests on the series"),
        "the-bpf-trees-own-selftests-on-the-series"
    );
    assert!(command_problems("`cargo xtask vmtest --kernel all --fail-fast -- --nope`").is_empty());
    assert_eq!(
        command_problems("cargo xtask vmtest [--nope N] # --other"),
        ["cargo xtask vmtest takes no --nope"]
    );
    assert_eq!(
        command_problems("cargo xtask nope"),
        ["cargo xtask nope: no such subcommand"]
    );
    assert!(mutant_ids().contains("0004.110.cond2"));
    assert!(plan_ids().contains(&1));
}

/// USAGE.md's `bpflab.toml` example: one line a key, every key the file
/// takes, and no key it does not.
#[test]
fn the_bpflab_toml_example_has_every_key_and_no_other() {
    let usage = docs()
        .into_iter()
        .find(|d| d.path.ends_with("USAGE.md"))
        .expect("docs/USAGE.md");
    let start = usage
        .text
        .find("```toml\n")
        .expect("a toml block in USAGE.md")
        + 8;
    let block = &usage.text[start..];
    let block = &block[..block.find("```").expect("the toml block's end")];
    let shown: BTreeSet<&str> = block
        .lines()
        .filter_map(|l| l.split_once(" = ").map(|(k, _)| k.trim()))
        .collect();
    let keys: BTreeSet<&str> = crate::config_file::KEYS.iter().copied().collect();
    let missing: Vec<&&str> = keys.difference(&shown).collect();
    let unknown: Vec<&&str> = shown.difference(&keys).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "USAGE.md's bpflab.toml example: keys missing {missing:?}, keys the file does not take {unknown:?}"
    );
    let example = project::root().join("bpflab.toml");
    if let Err(e) = crate::config_file::ConfigFile::parse(block, &example) {
        panic!("USAGE.md's bpflab.toml example does not parse: {e:#}");
    }
}

/// The docs that describe the code as it is (MEASUREMENTS.md and
/// SERIES.md record runs, and may name files as they were then).
fn present_tense(doc: &Doc) -> bool {
    !doc.path.ends_with("MEASUREMENTS.md") && !doc.path.ends_with("SERIES.md")
}

/// Whether a source file cited as `path` is there: from the project
/// root, or from a crate's `src/` (the docs cite `vm/qemu.rs` for
/// `xtask/src/vm/qemu.rs`).
fn source_exists(path: &str) -> bool {
    let root = project::root();
    let crates = ["", "xtask/src", "selftests/src", "guest-common/src"];
    let guests = ["init", "bench", "map-fuzz"].map(|g| format!("vm-images/{g}/src"));
    crates
        .iter()
        .map(|c| c.to_string())
        .chain(guests)
        .any(|dir| root.join(dir).join(path).exists())
}

#[test]
fn every_source_file_cited_exists() {
    let file = Regex::new(r"`([A-Za-z0-9_./-]+/[A-Za-z0-9_.-]+\.rs)`").unwrap();
    let mut problems = Vec::new();
    for doc in docs().iter().filter(|d| present_tense(d)) {
        problems.extend(scan(doc, &file, |c| {
            (!source_exists(&c[1])).then(|| format!("{}: no such source file", &c[1]))
        }));
    }
    assert_none(problems, "source files that are not there");
}

/// README's count of the targets met is the list's, the list is what the
/// record meets, and the total is the targets' own.
#[test]
fn the_targets_met_are_the_lists_and_the_list_is_the_records() {
    let head = crate::kernel::project_series()
        .unwrap()
        .whole()
        .name
        .clone();
    let listed = crate::bench::met::listed().unwrap();
    let (cells, rss_recorded) = crate::bench::met::record_verdicts(&head).unwrap();
    let mut problems = Vec::new();
    for name in &listed {
        // A record from before the Rss was kept cannot judge those cells.
        if !rss_recorded && name.contains("Rss") {
            continue;
        }
        match cells.iter().find(|(n, _)| n == name) {
            Some((_, "met")) => {}
            Some((_, word)) => problems.push(format!("{name}: the record has it {word}")),
            None => problems.push(format!("{name}: no such target")),
        }
    }
    let count = Regex::new(r"meets (\d+) of its (\d+)").unwrap();
    for doc in docs().iter().filter(|d| present_tense(d)) {
        problems.extend(scan(doc, &count, |c| {
            let (n, of): (usize, usize) = (c[1].parse().unwrap(), c[2].parse().unwrap());
            (n != listed.len() || of != crate::bench::met::TARGETS).then(|| {
                format!(
                    "{n} of {of} targets: docs/bench/targets-met.txt lists {} of {}",
                    listed.len(),
                    crate::bench::met::TARGETS
                )
            })
        }));
    }
    assert_none(
        problems,
        "targets met that the list or the record does not bear out",
    );
}

/// README is what a newcomer acts on in two minutes: at most 150 lines,
/// with the quick loop; the detail belongs in docs/.
#[test]
fn the_readme_is_short_and_names_the_quick_loop() {
    let readme = std::fs::read_to_string(project::root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 150,
        "README.md has {lines} lines, over 150: move the detail to docs/"
    );
    for step in ["cargo test --workspace", "cargo xtask vmtest --kernel "] {
        assert!(
            readme.contains(&format!("\n{step}")),
            "README.md's Hacking section does not give `{step}`"
        );
    }
}

/// MEASUREMENTS.md holds the current figure per topic and the commit that
/// measured it, history being git's: every row of its tables names a
/// commit, and the file stays a page per topic, not a log.
#[test]
fn measurements_are_current_figures_each_with_its_commit() {
    let text = std::fs::read_to_string(project::root().join("docs/MEASUREMENTS.md")).unwrap();
    assert!(
        text.len() <= 20_000,
        "docs/MEASUREMENTS.md is {} bytes, over 20000: replace superseded rows, history is git's",
        text.len()
    );
    let commit = Regex::new(r"\b[0-9a-f]{7,12}\b").unwrap();
    let mut problems = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let row = line.starts_with("| ") && !line.starts_with("| what ");
        let last = line.trim_end_matches('|').rsplit('|').next().unwrap_or("");
        if row && !commit.is_match(last) {
            problems.push(format!(
                "docs/MEASUREMENTS.md:{}: a row without its commit",
                n + 1
            ));
        }
        if line.len() > 400 {
            problems.push(format!(
                "docs/MEASUREMENTS.md:{}: a row of {} characters, over 400",
                n + 1,
                line.len()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
