//! The harness's layers only look down: a unit test that reads the `use`
//! lines (and every other `crate::` path) of each module outside its
//! tests and holds them to the table below. Commands sit on top; the
//! layers they call never reach back up to the command line, a command,
//! or the installer of host tools.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Each top-level module and the top-level modules it may name. The
/// command layer (main, cli, config_file, commands) may name anything.
const ALLOWED: &[(&str, &[&str])] = &[
    ("hostdeps", &["kernel", "vm", "project", "util"]),
    (
        "kselftest",
        &["kernel", "vm", "report", "project", "util", "leftovers"],
    ),
    ("vm", &["kernel", "report", "project", "util", "leftovers"]),
    ("mutants", &["kernel", "report", "project", "util"]),
    ("fuzz", &["kernel", "project", "util"]),
    ("kernel", &["project", "util", "leftovers"]),
    ("fresh_root", &["ci", "project", "util"]),
    ("ci", &["kernel", "project", "util", "workers"]),
    ("host_noise", &[]),
    ("workers", &[]),
    ("report", &["project", "util"]),
    ("leftovers", &["project", "util"]),
    ("project", &[]),
    ("util", &[]),
];
const TOP: &[&str] = &["main", "cli", "config_file", "commands"];

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
    let rel = file.strip_prefix(src()).unwrap();
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
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // `crate::status!` is the status macro at the crate root.
            if !rest[name.len()..].starts_with('!') {
                out.insert(name);
            }
        }
    }
    out.retain(|n| !n.is_empty());
    out
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
    let code = "use crate::{hostdeps, kernel::series::Series};\nuse crate::vm::share;\ncrate::status!(\"x\", \"y\");\nlet x = crate::util::tempdir();";
    let got: Vec<String> = named(code).into_iter().collect();
    assert_eq!(got, ["hostdeps", "kernel", "util", "vm"]);
    assert_eq!(
        non_test("a\n#[cfg(test)]\nmod tests {\nuse crate::cli;\n}"),
        "a\n"
    );
}
