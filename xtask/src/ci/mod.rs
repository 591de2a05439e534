//! What `cargo xtask ci` runs, as a library below its command: what a
//! run is asked for (`Options`) and what one step is (`Step`, here), the
//! steps (`steps`, with the fault tests' split in `faults`), the order the
//! two workers take them in (`queue`), the host tools they need
//! (`tools`), running them (`runner`), what a run cost (`times`), and
//! which steps may take a bundle (`bundle`).

pub mod bundle;
mod commit;
mod faults;
mod queue;
pub mod runner;
pub mod steps;
pub mod times;
pub mod tools;

use std::path::PathBuf;

/// What a run is asked for: ci's flags, as this library takes them.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The debug kernels' steps too.
    pub debug: bool,
    /// Without the harness's fault tests.
    pub no_faults: bool,
    /// The cache every step is given (`--cache-dir`).
    pub cache_dir: Option<PathBuf>,
    /// Only these steps, by id (`--step`); every step when empty.
    pub only: Vec<String>,
    /// Inside a fresh-root check, which is making the record the unit
    /// test `steps::RECORD_TEST` holds the host tools to: the unit step
    /// filters that test out, so it counts as filtered, not passed.
    pub in_fresh_root: bool,
}

/// One CI step: a stable id (`--step`, the workflow's matrix), a name
/// for humans, the command it runs, and whether it runs alone.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub id: &'static str,
    pub name: &'static str,
    pub program: String,
    pub args: Vec<String>,
    pub runs: Runs,
}

/// How a step runs. Consecutive queued steps make a section that two
/// workers share (`workers.rs`): under TCG a guest keeps one core busy,
/// and these machines have two.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Runs {
    /// Nothing beside it: the checks, the builds (make takes both cores)
    /// and the fault tests that make base stale, kill builds and hold
    /// locks on purpose.
    Alone,
    /// Beside any other queued step: each boots the kernels the build
    /// steps made, or builds what it boots (a mutant kernel, the fuzzer's
    /// libbpf, a `--config` kernel) in trees of its own, and each kernel
    /// tree has its own lock, so two steps wait for each other only over
    /// a tree both use.
    Queued,
}

/// An xtask test suite whose tests boot kernels: ignored by a plain
/// `cargo test`, one guest at a time, as their time limits assume.
pub fn booting_tests(id: &'static str, name: &'static str, suite: &str) -> Step {
    Step {
        id,
        name,
        runs: Runs::Alone,
        program: "cargo".into(),
        args: [
            "test",
            "-p",
            "xtask",
            "--test",
            suite,
            "--",
            "--ignored",
            "--test-threads=1",
            // The figures some of them print belong in CI's log.
            "--nocapture",
        ]
        .map(String::from)
        .to_vec(),
    }
}
