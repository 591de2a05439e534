//! A kernel is chosen once, in `kernel::choice` (docs/ARCHITECTURE.md):
//! outside it no module expands a `--kernel` word, takes a bzImage path
//! for one, or parses `--claim`, and no suite loads the series: each
//! reads `Chosen::series`. What still loads it is listed: the kernel
//! layer and the two commands that build kernels without booting them.

use std::fs;
use std::path::{Path, PathBuf};

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

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every source file's code outside its closing test module, by its path
/// under src/.
fn code() -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut dirs = vec![src()];
    while let Some(dir) = dirs.pop() {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = fs::read_to_string(&p).unwrap();
                let code = text
                    .find("#[cfg(test)]\nmod tests")
                    .map_or(text.as_str(), |i| &text[..i]);
                let rel = p
                    .strip_prefix(src())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                files.push((rel, code.to_string()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn no_module_but_the_choice_expands_a_word_or_applies_a_claim() {
    let mut problems = Vec::new();
    for (file, code) in code() {
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
    let mut loads: Vec<(String, usize)> = code()
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
