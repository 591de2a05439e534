//! What test_progs is built without. Its BPF programs compile against the
//! vmlinux.h of the kernel under test, and our lean test kernel (no INET,
//! cgroups, netfilter, ...) lacks types some of them use: one such program
//! would stop the whole build. Those programs, and the prog_tests that
//! load them, are left out of our copy of the selftests and named in the
//! report; every other test is built and run.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The programs and tests left out, and why; valid for one `stamp` (the
/// BTF and the sources they were found with).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    pub stamp: String,
    /// BPF program sources (`progs/NAME.c`) by NAME, with the compiler's
    /// first complaint.
    pub progs: Vec<(String, String)>,
    /// prog_tests sources (`prog_tests/NAME.c`) by NAME.
    pub tests: BTreeSet<String>,
    /// Those of `tests` that failed to compile themselves, with the
    /// compiler's first complaint (the rest load a left-out program).
    #[serde(default)]
    pub test_errors: Vec<(String, String)>,
}

/// Files by name, each with the compiler's first complaint.
pub type Complaints = Vec<(String, String)>;

/// What a failed `make -k` could not build: BPF objects (by program
/// name) and test objects, each with the first error seen for it.
pub fn failures(log: &str) -> (Complaints, Complaints) {
    let mut progs = Complaints::new();
    let mut tests = Complaints::new();
    for line in log.lines() {
        let Some(target) = failed_target(line) else {
            continue;
        };
        let file = target.rsplit('/').next().unwrap_or(target);
        if let Some(name) = file.strip_suffix(".bpf.o") {
            if !progs.iter().any(|(p, _)| p == name) {
                progs.push((
                    name.to_string(),
                    first_error(log, &format!("progs/{name}.c:")),
                ));
            }
        } else if let Some(name) = file.strip_suffix(".test.o") {
            if !tests.iter().any(|(t, _)| t == name) {
                let why = first_error(log, &format!("prog_tests/{name}.c:"));
                tests.push((name.to_string(), why));
            }
        }
    }
    (progs, tests)
}

/// `make: *** [Makefile:752: /o/x.bpf.o] Error 1` → `/o/x.bpf.o`.
fn failed_target(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("make: *** [")?;
    let (inside, tail) = rest.split_once(']')?;
    if !tail.trim_start().starts_with("Error") {
        return None;
    }
    Some(inside.rsplit(": ").next().unwrap_or(inside))
}

/// The first `<prefix>L:C: error: ...` (or `fatal error:`) of the log,
/// without its place; the lines may carry the path before `prefix`.
fn first_error(log: &str, prefix: &str) -> String {
    log.lines()
        .filter(|l| l.starts_with(prefix) || l.contains(&format!("/{prefix}")))
        .find_map(|l| l.split_once(" error: ").map(|(_, e)| e.trim().to_string()))
        .unwrap_or_else(|| "did not compile".to_string())
}

/// Whether `text` names `file` as a whole name: `"x.skel.h"` or
/// `"./x.bpf.o"`, but not `"test_x.skel.h"`.
fn mentions(text: &str, file: &str) -> bool {
    text.match_indices(file)
        .any(|(at, _)| matches!(text[..at].chars().next_back(), None | Some('"' | '/' | '<')))
}

/// The skeletons built from `prog`: its own, and the linked skeletons
/// whose `NAME.skel.h-deps` in the Makefile include it.
fn skeletons_of(prog: &str, makefile: &str) -> Vec<String> {
    let mut names = vec![prog.to_string()];
    let object = format!("{prog}.bpf.o");
    for line in makefile.lines() {
        let Some((lhs, deps)) = line.split_once(":=") else {
            continue;
        };
        let Some(skel) = lhs.trim().strip_suffix(".skel.h-deps") else {
            continue;
        };
        if deps.split_whitespace().any(|d| d == object) && !names.iter().any(|n| n == skel) {
            names.push(skel.to_string());
        }
    }
    names
}

/// The prog_tests that load `prog` through a skeleton or by file name.
pub fn tests_using(prog: &str, makefile: &str, tests: &[(String, String)]) -> Vec<String> {
    let files: Vec<String> = skeletons_of(prog, makefile)
        .iter()
        .flat_map(|s| ["skel.h", "lskel.h", "subskel.h", "bpf.o"].map(|ext| format!("{s}.{ext}")))
        .collect();
    tests
        .iter()
        .filter(|(_, text)| files.iter().any(|f| mentions(text, f)))
        .map(|(name, _)| name.clone())
        .collect()
}

/// The tests a prog_tests source defines, as the Makefile finds them:
/// lines `void test_NAME(` or `void serial_test_NAME(`.
pub fn defined_tests(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("void ")?;
            let rest = rest.strip_prefix("serial_").unwrap_or(rest);
            let rest = rest.strip_prefix("test_")?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest[name.len()..].starts_with('(').then_some(name)
        })
        .collect()
}

/// The `DEFINE_TEST(NAME)` entries of a generated tests.h, in its order.
pub fn listed_tests(header: &str) -> Vec<String> {
    header
        .lines()
        .filter_map(|l| l.strip_prefix("DEFINE_TEST(")?.strip_suffix(')'))
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
  CLNG-BPF [test_progs] bpf_dctcp.bpf.o
progs/bpf_dctcp.c:199:40: error: use of undeclared identifier 'ICSK_ACK_TIMER'
progs/bpf_dctcp.c:203:37: error: use of undeclared identifier 'ICSK_ACK_NOW'
make: *** [Makefile:752: /c/out/bpf_dctcp.bpf.o] Error 1
make: *** [Makefile:752: /c/out/cgroup_iter.bpf.o] Error 1
/t/bpf/prog_tests/bpf_attr_size.c:8:10: fatal error: 'cgroup_skb_direct_packet_access.skel.h' file not found
make: *** [Makefile:700: /c/out/sockmap.test.o] Error 1
make: *** [Makefile:700: /c/out/bpf_attr_size.test.o] Error 1
make: *** [Makefile:753: test_progs-extras] Error 127
make: *** Waiting for unfinished jobs....
";

    #[test]
    fn failed_objects_are_read_from_make_s_log() {
        let (progs, tests) = failures(LOG);
        assert_eq!(
            progs,
            [
                (
                    "bpf_dctcp".to_string(),
                    "use of undeclared identifier 'ICSK_ACK_TIMER'".to_string()
                ),
                ("cgroup_iter".to_string(), "did not compile".to_string()),
            ]
        );
        assert_eq!(
            tests,
            [
                ("sockmap".to_string(), "did not compile".to_string()),
                (
                    "bpf_attr_size".to_string(),
                    "'cgroup_skb_direct_packet_access.skel.h' file not found".to_string()
                )
            ]
        );
    }

    #[test]
    fn the_test_list_is_read_as_the_makefile_writes_it() {
        let src = "static void test_helper(void)\nvoid test_mmap(void)\n{\nvoid serial_test_ringbuf(void) {}\nvoid test_x_y2 (void)\n";
        assert_eq!(defined_tests(src), ["mmap", "ringbuf"]);
        let h = "/* Generated header, do not edit */\nDEFINE_TEST(mmap)\nDEFINE_TEST(ringbuf)\n";
        assert_eq!(listed_tests(h), ["mmap", "ringbuf"]);
    }

    #[test]
    fn a_test_is_left_out_with_the_programs_it_loads() {
        let makefile = "test_subskeleton.skel.h-deps := test_subskeleton_lib2.bpf.o test_subskeleton_lib.bpf.o test_subskeleton.bpf.o\n";
        let tests = [
            ("bpf_tcp_ca", "#include \"bpf_dctcp.skel.h\"\n"),
            ("other", "#include \"test_bpf_dctcp.skel.h\"\n"),
            (
                "by_file",
                "bpf_object__open_file(\"./bpf_dctcp.bpf.o\", NULL)",
            ),
            ("subskeleton", "#include \"test_subskeleton.skel.h\"\n"),
        ]
        .map(|(n, t)| (n.to_string(), t.to_string()));
        assert_eq!(
            tests_using("bpf_dctcp", makefile, &tests),
            ["bpf_tcp_ca", "by_file"]
        );
        assert_eq!(
            tests_using("test_subskeleton_lib", makefile, &tests),
            ["subskeleton"]
        );
    }
}
