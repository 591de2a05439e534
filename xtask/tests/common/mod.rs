//! What the test suites that boot kernels share: running an xtask to its
//! end within a deadline, with its output kept.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A finished run: exit status (-1 for a signal), stdout, stderr.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` to its end; a run over `limit` fails the test (a
/// harness that cannot end its guest must fail, not hang CI).
pub fn run_to_end(mut command: Command, limit: Duration) -> Ran {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running xtask");
    // Drained in the background so a chatty run cannot block.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            pipe.read_to_end(&mut v).ok();
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let code = wait_with_deadline(&mut child, limit);
    Ran {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
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
