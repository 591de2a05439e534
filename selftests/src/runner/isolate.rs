//! Running one test in its own forked process group with a timeout, so a
//! stray SIGBUS/SIGSEGV or a hang costs only that test.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use super::options::InjectKind;
use super::{Ctx, Outcome, Skip, Test};
use crate::child::{self, describe_status, panic_message};

const LKDTM_DIRECT: &str = "/sys/kernel/debug/provoke-crash/DIRECT";

/// Harness self-tests: what an injected test does instead of its body.
fn injected(kind: InjectKind) -> Result<(), Skip> {
    match kind {
        InjectKind::Crash => {
            println!("[selftests] inject=crash: panicking the kernel through lkdtm");
            let _ = io::stdout().flush();
            let r = std::fs::write(LKDTM_DIRECT, "PANIC");
            panic!("inject=crash: the kernel survived lkdtm PANIC ({r:?})");
        }
        InjectKind::Stall => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        InjectKind::Freeze => unreachable!("the runner itself freezes, not the test"),
    }
}

/// Test child: run the test, report "P", "S<reason>" or "F<message>".
fn child_main(t: &Test, ctx: &Ctx, inject: Option<InjectKind>, w: OwnedFd) -> ! {
    // SAFETY: process setup syscalls with valid arguments.
    unsafe {
        libc::setpgid(0, 0);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        let rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: libc::RLIM_INFINITY,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &rl);
    }
    let body = || match inject {
        Some(kind) => injected(kind),
        None => (t.func)(ctx),
    };
    let msg = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => "P".to_string(),
        Ok(Err(Skip(r))) => format!("S{r}"),
        Err(p) => format!("F{}", panic_message(&*p)),
    };
    let _ = io::stdout().flush();
    let _ = File::from(w).write_all(msg.as_bytes());
    // SAFETY: leave without running the runner's destructors.
    unsafe { libc::_exit(0) }
}

/// Runs `t` in a child; kills its process group after `timeout`.
pub fn run_isolated(t: &Test, ctx: &Ctx, timeout: Duration, inject: Option<InjectKind>) -> Outcome {
    let (r, w) = child::pipe();
    let _ = io::stdout().flush();
    let _ = io::stderr().flush();
    // SAFETY: the runner is single-threaded; the child runs the test and
    // _exit()s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Outcome::Fail(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(r);
        child_main(t, ctx, inject, w);
    }
    drop(w);
    // Also from the parent, so kill(-pid) works even before the child ran.
    // SAFETY: plain syscalls on our own child / our own fd.
    unsafe {
        libc::setpgid(pid, pid);
        libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
    }
    let mut pipe = File::from(r);
    let mut msg = Vec::new();
    let end = supervise(pid, &mut pipe, &mut msg, timeout);
    let timeout_msg = format!(
        "timeout: killed after {} s (the test normally takes a fraction of that)",
        timeout.as_secs()
    );
    if end == End::Unkillable {
        // Left to reap_orphans() later: waiting here would stall the run.
        return Outcome::Fail(format!(
            "{timeout_msg}, and it did not die within {} s: stuck in the kernel",
            KILL_GRACE.as_secs()
        ));
    }
    // Leftover helpers in the test's process group die with it.
    // SAFETY: the group leader is a zombie we have not reaped, so the pgid
    // cannot have been reused.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let status = child::waitpid(pid);
    drain(&mut pipe, &mut msg);
    reap_orphans();
    if end == End::Killed {
        return Outcome::Fail(timeout_msg);
    }
    outcome_of(&String::from_utf8_lossy(&msg), status)
}

/// How long a SIGKILLed test may take to die: longer means it is stuck in
/// the kernel (a fault that never completes inside a kernel loop).
const KILL_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Exited,
    /// Killed at its timeout.
    Killed,
    /// Killed, but still not dead after KILL_GRACE.
    Unkillable,
}

/// Collects the child's report until it exits; kills it at the deadline.
fn supervise(pid: libc::pid_t, pipe: &mut File, msg: &mut Vec<u8>, timeout: Duration) -> End {
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    loop {
        let mut pfd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        drain(pipe, msg);
        if has_exited(pid) {
            return if timed_out { End::Killed } else { End::Exited };
        }
        if timed_out && Instant::now() >= deadline + KILL_GRACE {
            return End::Unkillable;
        }
        if !timed_out && Instant::now() >= deadline {
            timed_out = true;
            // SAFETY: killing our own child's process group.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

fn outcome_of(msg: &str, status: i32) -> Outcome {
    let mut chars = msg.chars();
    match chars.next() {
        Some('P') => Outcome::Pass,
        Some('S') => Outcome::Skip(chars.as_str().to_string()),
        Some('F') => Outcome::Fail(chars.as_str().to_string()),
        _ => Outcome::Fail(format!(
            "test process {} without reporting a result",
            describe_status(status)
        )),
    }
}

fn drain(pipe: &mut File, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
}

/// Whether `pid` has exited, without reaping it.
fn has_exited(pid: libc::pid_t) -> bool {
    // SAFETY: siginfo is plain data written by waitid.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        r == 0 && info.si_pid() == pid
    }
}

/// Reaps descendants of finished tests that were reparented to us and
/// have exited; one still dying is reaped after a later test. It does not
/// wait: a process stuck in the kernel must not slow every later test.
fn reap_orphans() {
    loop {
        let mut status = 0;
        // SAFETY: valid out-pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r <= 0 {
            return; // ECHILD: nothing left; 0: nothing exited yet
        }
    }
}

#[cfg(test)]
mod unit {
    use super::super::Kernel;
    use super::*;

    fn t_pass(_: &Ctx) -> Result<(), Skip> {
        Ok(())
    }
    fn t_skip(_: &Ctx) -> Result<(), Skip> {
        Err(Skip::new("no such device"))
    }
    fn t_fail(ctx: &Ctx) -> Result<(), Skip> {
        panic!("expected 0, got 1 on the {ctx}")
    }
    fn t_sigbus(_: &Ctx) -> Result<(), Skip> {
        // std's stack-overflow handler would swallow a raise()d SIGBUS
        // (real faults re-fault after it returns): use the default action.
        // SAFETY: resetting a disposition and raising a signal in the
        // forked test process.
        unsafe {
            libc::signal(libc::SIGBUS, libc::SIG_DFL);
            libc::raise(libc::SIGBUS);
        }
        Ok(())
    }
    fn t_hang(_: &Ctx) -> Result<(), Skip> {
        std::thread::sleep(Duration::from_secs(60));
        Ok(())
    }

    /// The isolation machinery itself (forks; the only unit test that does,
    /// since run_isolated reaps any child of the process).
    #[test]
    fn isolated_outcomes() {
        let ctx = Ctx {
            kernel: Kernel::Mainline,
        };
        let run = |f, secs, inject| {
            run_isolated(&Test::new("t", f), &ctx, Duration::from_secs(secs), inject)
        };
        assert!(matches!(run(t_pass, 10, None), Outcome::Pass));
        assert!(matches!(run(t_skip, 10, None), Outcome::Skip(r) if r == "no such device"));
        assert!(
            matches!(run(t_fail, 10, None), Outcome::Fail(m) if m.contains("expected 0, got 1 on the mainline kernel"))
        );
        assert!(
            matches!(run(t_sigbus, 10, None), Outcome::Fail(m) if m.contains("killed by SIGBUS"))
        );
        let start = Instant::now();
        assert!(matches!(run(t_hang, 1, None), Outcome::Fail(m) if m.starts_with("timeout")));
        // A stall injected into a passing test is cut off by its timeout too.
        let stalled = run(t_pass, 1, Some(InjectKind::Stall));
        assert!(matches!(stalled, Outcome::Fail(m) if m.starts_with("timeout")));
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}
