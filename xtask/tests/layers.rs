//! The harness's layers only look down: a unit test that reads the `use`
//! lines (and every other `crate::` path) of each module outside its
//! tests and holds them to the table below. Commands sit on top; the
//! layers they call never reach back up to the command line, a command,
//! or the installer of host tools. And commands stand side by side: no
//! command names another, so what two share lives in a layer below.
//! Inside a module, no two files name each other (`super::`): what both
//! need goes in a file below them. And a kernel is chosen once, in
//! `kernel::choice`: no other module expands a `--kernel` word or applies
//! `--claim`, and no suite loads the series.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Each top-level module and the top-level modules it may name. The
/// command layer (main, cli, config_file, commands, and the test-only
/// docs_claims) may name anything.
const ALLOWED: &[(&str, &[&str])] = &[
    ("hostdeps", &["kernel", "vm", "project", "util"]),
    (
        "kselftest",
        &["kernel", "vm", "report", "project", "util", "build_orphans"],
    ),
    (
        "vm",
        &["kernel", "report", "project", "util", "build_orphans"],
    ),
    ("bench", &["kernel", "vm", "report", "project", "util"]),
    ("expect", &["vm", "report", "util"]),
    (
        "mutants",
        &["plan", "fuzz", "kernel", "vm", "report", "project", "util"],
    ),
    (
        "plan",
        &["kernel", "vm", "report", "project", "util", "build_orphans"],
    ),
    ("fuzz", &["kernel", "vm", "report", "project", "util"]),
    ("posting", &["kernel", "bench", "project", "util"]),
    ("kernel", &["project", "util", "build_orphans"]),
    ("fresh_root", &["ci", "project", "util"]),
    ("ci", &["kernel", "project", "util", "workers"]),
    ("workers", &[]),
    ("report", &["project", "util"]),
    ("build_orphans", &["project", "util"]),
    ("project", &[]),
    ("util", &[]),
];
/// `docs_claims` (test-only) holds the docs to the command line and the
/// layers below it, so it sits with them.
const TOP: &[&str] = &["main", "cli", "config_file", "commands", "docs_claims"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to: its first directory, or its stem.
fn module_of(file: &Path) -> String {
    first_name(file.strip_prefix(src()).unwrap())
}

/// The first directory of a relative path, or its file's stem.
fn first_name(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The code outside the file's `#[cfg(test)]` module, which by the
/// house style closes every file.
fn non_test(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod tests")
        .map_or(text, |i| &text[..i])
}

/// The top-level modules `code` names through `crate::`: plain paths
/// (`crate::vm::share`) and brace groups (`use crate::{hostdeps, kernel::x}`).
fn named(code: &str) -> BTreeSet<String> {
    names_after(code, "crate::")
}

/// The first name of each path in `code` that starts with `prefix`
/// (`crate::`, `super::super::`): of a plain path, or of each item of a
/// brace group (`prefix{a, b::{c, d}}` gives a and b). A prefix inside a
/// longer name or path (`xcrate::`, `super::super::` for `super::`) does
/// not count; a macro (`crate::status!`) is no module.
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix).map(|i| from + i) {
        from = at + prefix.len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            out.extend(group_items(group).iter().map(|i| first_segment(i.trim())));
        } else if !rest[first_segment(rest).len()..].starts_with('!') {
            out.insert(first_segment(rest));
        }
    }
    out.retain(|n| !n.is_empty());
    out
}

/// The leading name of a path: `vm` of `vm::share`.
fn first_segment(path: &str) -> String {
    path.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The items of a brace group, from just after its `{` to its `}`: split
/// at its own commas, not those of a group inside it.
fn group_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start, mut end) = (0, 0, group.len());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                end = i;
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..end]);
    items
}

#[test]
fn every_layer_names_only_the_layers_below_it() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut broken = Vec::new();
    for file in &files {
        let module = module_of(file);
        if TOP.contains(&module.as_str()) {
            continue;
        }
        let allowed = ALLOWED
            .iter()
            .find(|(m, _)| *m == module)
            .unwrap_or_else(|| panic!("{}: module {module} has no row in ALLOWED", file.display()))
            .1;
        let text = fs::read_to_string(file).unwrap();
        for name in named(non_test(&text)) {
            if name != module && !allowed.contains(&name.as_str()) {
                broken.push(format!("{} names crate::{name}", file.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports that look up:\n{}",
        broken.join("\n")
    );
}

#[test]
fn imports_are_read_from_paths_and_groups() {
    let code = "use crate::{hostdeps, kernel::series::Series};\nuse crate::vm::share;\ncrate::status!(\"x\", \"y\");\nlet x = crate::util::tempdir();\nuse crate::{ci::{steps, times}, workers};";
    let got: Vec<String> = named(code).into_iter().collect();
    assert_eq!(got, ["ci", "hostdeps", "kernel", "util", "vm", "workers"]);
    assert_eq!(
        non_test("a\n#[cfg(test)]\nmod tests {\nuse crate::cli;\n}"),
        "a\n"
    );
}

/// The commands: the files and folders of `commands/`, but its mod.rs.
fn command_names() -> Vec<String> {
    fs::read_dir(src().join("commands"))
        .unwrap()
        .map(|e| first_name(Path::new(&e.unwrap().file_name())))
        .filter(|name| name != "mod")
        .collect()
}

/// The commands that the code of a file `depth` modules below
/// `commands/` names: through `crate::commands::` or `commands::`, or
/// through as many `super::`s as lead up to `commands/` (one more in its
/// tests module).
fn commands_named(text: &str, depth: usize, commands: &[String]) -> BTreeSet<String> {
    let code = non_test(text);
    let tests = &text[code.len()..];
    let mut out = names_after(code, &"super::".repeat(depth));
    out.extend(names_after(tests, &"super::".repeat(depth + 1)));
    out.extend(names_after(text, "crate::commands::"));
    out.extend(names_after(text, "commands::"));
    out.retain(|name| commands.contains(name));
    out
}

#[test]
fn no_command_names_another() {
    let commands = command_names();
    let dir = src().join("commands");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let mut found = BTreeSet::new();
    for file in &files {
        let rel = file.strip_prefix(&dir).unwrap();
        let own = first_name(rel);
        if own == "mod" {
            continue;
        }
        let depth = rel.components().count() - usize::from(rel.ends_with("mod.rs"));
        let text = fs::read_to_string(file).unwrap();
        for other in commands_named(&text, depth, &commands) {
            if other != own {
                found.insert((own.clone(), other));
            }
        }
    }
    let named: Vec<String> = found
        .iter()
        .map(|(a, b)| format!("commands/{a} names the command {b}"))
        .collect();
    assert!(
        named.is_empty(),
        "a command names only itself; what two share goes into a layer below them:\n{}",
        named.join("\n")
    );
}

#[test]
fn commands_are_read_through_super_and_commands_paths() {
    let commands = ["bench", "cache", "ci", "fuzz", "run", "vmtest"].map(String::from);
    let text = "use super::vmtest;\nuse super::super::fuzz::x;\nfn f() {\n    crate::commands::{bench, ci::y};\n    commands::cache::z();\n}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    fn g() {\n        super::run();\n        super::super::ci::q();\n    }\n}\n";
    let got: Vec<String> = commands_named(text, 1, &commands).into_iter().collect();
    // super::super::fuzz is the crate's fuzz, and super::run in the
    // tests the file's own run.
    assert_eq!(got, ["bench", "cache", "ci", "vmtest"]);
    let nested: Vec<String> = commands_named("use super::super::fuzz;", 2, &commands)
        .into_iter()
        .collect();
    assert_eq!(nested, ["fuzz"]);
}

/// The sibling files each file of a module folder names through `super::`
/// (outside its tests): `super::x::Y` or `use super::{x, y::Z}`.
fn siblings_named(dir: &Path) -> Vec<(String, BTreeSet<String>)> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    let stems: Vec<String> = files
        .iter()
        .map(|f| first_name(f.strip_prefix(dir).unwrap()))
        .collect();
    files
        .iter()
        .zip(&stems)
        .filter(|(_, stem)| *stem != "mod")
        .map(|(file, stem)| {
            let text = fs::read_to_string(file).unwrap();
            let mut named = names_after(non_test(&text), "super::");
            named.retain(|n| n != stem && stems.contains(n));
            (stem.clone(), named)
        })
        .collect()
}

#[test]
fn no_two_files_of_a_module_name_each_other() {
    let mut dirs = Vec::new();
    for e in fs::read_dir(src()).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            dirs.push(p);
        }
    }
    let mut circles = Vec::new();
    for dir in &dirs {
        let named = siblings_named(dir);
        for (a, of_a) in &named {
            for (b, of_b) in &named {
                if a < b && of_a.contains(b) && of_b.contains(a) {
                    circles.push(format!("{}: {a}.rs and {b}.rs", dir.display()));
                }
            }
        }
    }
    assert!(
        circles.is_empty(),
        "files that import each other; move what both need below them:\n{}",
        circles.join("\n")
    );
}

// A kernel is chosen once, in `kernel::choice` (docs/ARCHITECTURE.md):
// outside it no module expands a `--kernel` word, takes a bzImage path
// for one, or parses `--claim`, and no suite loads the series: each
// reads `Chosen::series`. What still loads it is listed: the kernel
// layer and the two commands that build kernels without booting them.

/// Where each call may appear: the module that owns it, and for
/// `expand_word` the kernel module's own word lists (`specs_for`, for
/// build-kernel and bundle).
const ONLY_IN: &[(&str, &[&str])] = &[
    ("expand_word(", &["kernel/choice.rs", "kernel/mod.rs"]),
    ("own_kernel_path(", &["kernel/choice.rs"]),
    ("Claims::parse(", &["kernel/choice.rs", "kernel/claim.rs"]),
];

/// The modules that load the series, and how often: `choice`, the
/// kernel layer's own (the trees, a bundle's origin), and build-kernel
/// and bundle, which boot nothing.
const SERIES_LOADS: &[(&str, usize)] = &[
    ("commands/build_kernel.rs", 1),
    ("commands/bundle.rs", 1),
    ("kernel/bundle_manifest.rs", 1),
    ("kernel/choice.rs", 1),
    ("kernel/mod.rs", 1),
];

/// Every source file's code outside its closing test module, by its path
/// under src/, sorted.
fn code_by_path() -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut code: Vec<(String, String)> = files
        .iter()
        .map(|p| {
            let text = fs::read_to_string(p).unwrap();
            let rel = p
                .strip_prefix(src())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, non_test(&text).to_string())
        })
        .collect();
    code.sort();
    code
}

#[test]
fn no_module_but_the_choice_expands_a_word_or_applies_a_claim() {
    let mut problems = Vec::new();
    for (file, code) in code_by_path() {
        for (call, owners) in ONLY_IN {
            if code.contains(call) && !owners.contains(&file.as_str()) {
                problems.push(format!(
                    "{file} calls {call}..): choose through kernel::choice"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_suite_loads_the_series_itself() {
    let mut loads: Vec<(String, usize)> = code_by_path()
        .into_iter()
        .map(|(file, code)| {
            let n = code.matches(".series()").count();
            (file, n)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    loads.sort();
    let listed: Vec<(String, usize)> = SERIES_LOADS
        .iter()
        .map(|(f, n)| (f.to_string(), *n))
        .collect();
    assert_eq!(
        loads, listed,
        "the modules that load the series themselves: a suite reads Chosen::series"
    );
}

/// Where a suite's kernels are chosen (`BootConfig::choose` or
/// `choice::choose`, each with its `Sides`): in the command that runs
/// it, once, and for a mutant's own bzImage, which no `--kernel` names,
/// in the mutants' judging of it.
const CHOOSES: &[(&str, usize)] = &[
    ("commands/bench.rs", 1),
    ("commands/fuzz.rs", 1),
    ("commands/kselftest.rs", 1),
    ("commands/mutants.rs", 1),
    ("commands/run.rs", 1),
    ("commands/vmtest.rs", 1),
    ("mutants/on_kernel.rs", 2),
];

#[test]
fn the_kernels_are_chosen_in_the_command() {
    let mut calls: Vec<(String, usize)> = code_by_path()
        .into_iter()
        .map(|(file, code)| {
            let code_lines = code.lines().filter(|l| !l.trim_start().starts_with("//"));
            (
                file.clone(),
                code_lines.map(|l| l.matches("Sides::").count()).sum(),
            )
        })
        .filter(|(file, n)| *n > 0 && file != "kernel/choice.rs")
        .collect();
    calls.sort();
    let listed: Vec<(String, usize)> = CHOOSES.iter().map(|(f, n)| (f.to_string(), *n)).collect();
    assert_eq!(
        calls, listed,
        "where kernels are chosen: a suite takes a Chosen from its command"
    );
}
