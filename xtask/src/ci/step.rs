//! What one ci step is: its id, name, command, and whether it runs alone
//! or queued; and the step that runs an xtask suite of booting tests.

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
