// Each test crate uses a part of this module.
#![allow(dead_code)]

//! What the test suites that boot kernels share: running an xtask to its
//! end within a deadline, with its output kept.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The project's root: where the xtask runs, and what a share writes to.
pub fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The kernel cache, as the harness finds it.
pub fn cache() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = env("BPFLAB_CACHE") {
        return dir.into();
    }
    match env("XDG_CACHE_HOME") {
        Some(dir) => Path::new(&dir).join("bpflab"),
        None => Path::new(&env("HOME").expect("HOME")).join(".cache/bpflab"),
    }
}

/// git in `repo`, with a fixed author, committer and date (the commits a
/// test makes, and so the kernels the harness builds from them, are the
/// same each time); its stdout. A git that fails fails the test.
pub fn git(repo: &Path, args: &[&str]) -> String {
    let mut c = Command::new("git");
    c.arg("-C").arg(repo).args(args);
    for who in ["AUTHOR", "COMMITTER"] {
        c.env(format!("GIT_{who}_NAME"), "bpflab")
            .env(format!("GIT_{who}_EMAIL"), "bpflab@localhost")
            .env(format!("GIT_{who}_DATE"), "2026-01-01T00:00:00Z");
    }
    let out = c.output().expect("running git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `command` run as the git user `name` <`email`>: set in the
/// environment's git configuration, which outranks every file's.
pub fn as_git_user(command: &mut Command, name: &str, email: &str) {
    command
        .env("GIT_CONFIG_COUNT", "2")
        .env("GIT_CONFIG_KEY_0", "user.name")
        .env("GIT_CONFIG_VALUE_0", name)
        .env("GIT_CONFIG_KEY_1", "user.email")
        .env("GIT_CONFIG_VALUE_1", email);
}

/// A finished run: its pid, exit status (-1 for a signal), stdout, stderr.
pub struct Ran {
    pub pid: u32,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` to its end; a run over `limit` fails the test (a
/// harness that cannot end its guest must fail, not hang CI).
pub fn run_to_end(mut command: Command, limit: Duration) -> Ran {
    let mut child = KillOnDrop(
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running xtask"),
    );
    // Drained in the background so a chatty run cannot block.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            pipe.read_to_end(&mut v).ok();
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = drain(Box::new(child.0.stdout.take().unwrap()));
    let err = drain(Box::new(child.0.stderr.take().unwrap()));
    let code = wait_with_deadline(&mut child.0, limit);
    Ran {
        pid: child.0.id(),
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// A child killed when the test lets go of it, also when the test fails:
/// a failed test must not leave a guest running through the next ones.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn wait_with_deadline(child: &mut Child, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code().unwrap_or(-1);
        }
        assert!(
            start.elapsed() < limit,
            "xtask did not finish within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
