//! Forked helper processes: "this must die of SIGBUS", "run this in a
//! child and propagate its assertion", parent/child handshakes, and the
//! panic-message capture the runner also uses.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use guest_common::{panic_text, signal_label};

/// The first panic message of this process (with location). Later panics,
/// e.g. `thread::scope` re-raising "a scoped thread panicked", would hide
/// the real assertion.
static FIRST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Records panic messages for [`take_panic_message`] and prints them.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = panic_text(info.payload());
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        let loc = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let full = if name == "main" {
            format!("{msg}{loc}")
        } else {
            format!("[thread {name}] {msg}{loc}")
        };
        eprintln!("[selftests] panic: {full}");
        if let Ok(mut first) = FIRST_PANIC.lock() {
            first.get_or_insert(full);
        }
    }));
}

pub fn take_panic_message() -> Option<String> {
    FIRST_PANIC.lock().ok()?.take()
}

/// The message of a caught panic: hook-recorded if possible (it has the
/// location and the first of several panics), else the payload's text.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    take_panic_message().unwrap_or_else(|| panic_text(p))
}

/// Human description of a wait(2) status.
pub fn describe_status(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        let core = if libc::WCOREDUMP(status) {
            " (core dumped)"
        } else {
            ""
        };
        format!("killed by {}{core}", signal_label(libc::WTERMSIG(status)))
    } else {
        format!("wait status {status:#x}")
    }
}

pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 returns.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: fresh descriptors owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn set_rlimit_core(limit: libc::rlim_t) {
    let rl = libc::rlimit {
        rlim_cur: limit,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain syscall with a valid struct.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &rl) };
}

/// Allow a core dump in this process (T24).
pub fn allow_core_dumps() {
    set_rlimit_core(libc::RLIM_INFINITY);
}

/// A forked child running a closure.
pub struct Child {
    pid: libc::pid_t,
    msg: Option<OwnedFd>,
    reaped: bool,
}

/// How a [`Child`] ended.
#[derive(Debug)]
pub struct ChildResult {
    pub status: i32,
    /// The child's panic message, if it panicked.
    pub message: String,
}

/// Forks; the child runs `f` and exits 0, or 101 after a panic whose
/// message is sent back to the parent. The child never returns into the
/// caller's code. Only for single-threaded callers (it allocates after
/// fork).
pub fn spawn<F: FnOnce()>(f: F) -> Child {
    let (r, w) = pipe();
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: fork in a single-threaded process; the child only runs `f`
    // and then _exit()s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        drop(r);
        // Test children die of signals on purpose: no stray core files.
        set_rlimit_core(0);
        let code = match catch_unwind(AssertUnwindSafe(f)) {
            Ok(()) => 0,
            Err(p) => {
                let msg = panic_message(&*p);
                let mut w = std::fs::File::from(w);
                let _ = w.write_all(msg.as_bytes());
                101
            }
        };
        let _ = std::io::stdout().flush();
        // SAFETY: terminating the child without running the parent's
        // destructors (they belong to the parent).
        unsafe { libc::_exit(code) }
    }
    drop(w);
    Child {
        pid,
        msg: Some(r),
        reaped: false,
    }
}

impl Child {
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Waits for the child and collects its panic message.
    pub fn wait(mut self) -> ChildResult {
        let mut message = String::new();
        if let Some(fd) = self.msg.take() {
            let _ = std::fs::File::from(fd).read_to_string(&mut message);
        }
        let status = waitpid(self.pid);
        self.reaped = true;
        ChildResult { status, message }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            // The parent bailed out (panicked): do not leave the child.
            // SAFETY: signalling and reaping our own child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            waitpid(self.pid);
        }
    }
}

/// Blocking waitpid, retrying on EINTR.
pub fn waitpid(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return status;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::Interrupted,
            "waitpid({pid}): {e}"
        );
    }
}

impl ChildResult {
    pub fn signal(&self) -> Option<i32> {
        libc::WIFSIGNALED(self.status).then(|| libc::WTERMSIG(self.status))
    }

    pub fn exit_code(&self) -> Option<i32> {
        libc::WIFEXITED(self.status).then(|| libc::WEXITSTATUS(self.status))
    }

    pub fn core_dumped(&self) -> bool {
        libc::WIFSIGNALED(self.status) && libc::WCOREDUMP(self.status)
    }

    pub fn describe(&self) -> String {
        let mut s = describe_status(self.status);
        if !self.message.is_empty() {
            s.push_str(": ");
            s.push_str(&self.message);
        }
        s
    }

    #[track_caller]
    pub fn expect_success(&self, what: &str) {
        assert!(
            self.exit_code() == Some(0),
            "{what}: child {}",
            self.describe()
        );
    }

    #[track_caller]
    pub fn expect_signal(&self, sig: i32, what: &str) {
        assert!(
            self.signal() == Some(sig),
            "{what}: expected the child to die of {}, but it {}",
            signal_label(sig),
            self.describe()
        );
    }
}

/// Runs `f` in a forked child; a failed assertion there fails the caller.
#[track_caller]
pub fn run_in_child<F: FnOnce()>(what: &str, f: F) {
    spawn(f).wait().expect_success(what);
}

/// Runs `f` in a forked child and requires it to die of `sig`.
#[track_caller]
pub fn expect_signal<F: FnOnce()>(what: &str, sig: i32, f: F) {
    spawn(f).wait().expect_signal(sig, what);
}

/// A one-shot handshake between a parent and a forked child (pipe-based,
/// so it works across fork).
pub struct Gate {
    r: OwnedFd,
    w: OwnedFd,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    pub fn new() -> Gate {
        let (r, w) = pipe();
        Gate { r, w }
    }

    pub fn open(&self) {
        // SAFETY: writing one byte from a valid buffer to our pipe.
        let n = unsafe { libc::write(self.w.as_raw_fd(), b"x".as_ptr().cast(), 1) };
        assert_eq!(n, 1, "gate write: {}", std::io::Error::last_os_error());
    }

    pub fn wait(&self) {
        let mut b = [0u8; 1];
        loop {
            // SAFETY: reading one byte into a valid buffer.
            let n = unsafe { libc::read(self.r.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
            if n == 1 {
                return;
            }
            let e = std::io::Error::last_os_error();
            assert!(
                n < 0 && e.kind() == std::io::ErrorKind::Interrupted,
                "gate read: {e}"
            );
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn status_descriptions() {
        assert_eq!(describe_status(64), "killed by signal 64");
        // exit(3): status 3 << 8; SIGSEGV with core: 11 | 0x80
        assert_eq!(describe_status(3 << 8), "exited with status 3");
        assert_eq!(
            describe_status(libc::SIGSEGV | 0x80),
            "killed by SIGSEGV (core dumped)"
        );
        let r = ChildResult {
            status: libc::SIGBUS,
            message: String::new(),
        };
        assert_eq!(r.signal(), Some(libc::SIGBUS));
        assert_eq!(r.exit_code(), None);
    }
}
