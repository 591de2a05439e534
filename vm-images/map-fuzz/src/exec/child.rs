//! `fork`: a child reads and writes words of what it inherited and tells
//! the parent, through a pipe, what each access gave.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};

use selftests::sys::catch;

use crate::model::Ret;

/// One access's report: a tag byte and a u64.
const REPORT: usize = 9;
const TAG_VALUE: u8 = 1;
const TAG_OK: u8 = 2;
const TAG_SIGNAL: u8 = 3;

/// Forks; the child does `accesses` (address, value to store or None to
/// load) in order and exits. Their returns, or the child's own fate.
pub fn fork_and_access(accesses: &[(usize, Option<u64>)]) -> Ret {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Ret::Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(-1));
    }
    // SAFETY: the fuzzer is single-threaded when it forks; the child only
    // accesses memory and writes to the pipe before _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: in the child: its own copy of the write end.
        unsafe { libc::close(fds[0]) };
        run_child(fds[1], accesses);
    }
    // SAFETY: the parent owns both ends now.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(write_end);
    if pid < 0 {
        return Ret::Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(-1));
    }
    let mut bytes = Vec::new();
    let _ = std::fs::File::from(read_end).read_to_end(&mut bytes);
    let mut status = 0;
    // SAFETY: pid is our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Ret::Bytes(format!("child ended with wait status {status:#x}").into_bytes());
    }
    Ret::Child(bytes.chunks(REPORT).map(decode).collect())
}

fn run_child(fd: i32, accesses: &[(usize, Option<u64>)]) -> ! {
    for &(addr, write) in accesses {
        let (tag, value) = match write {
            None => match catch::load_u64(addr) {
                Ok(v) => (TAG_VALUE, v),
                Err(c) => (TAG_SIGNAL, c.signal as u64),
            },
            Some(v) => match catch::store_u64(addr, v) {
                None => (TAG_OK, 0),
                Some(c) => (TAG_SIGNAL, c.signal as u64),
            },
        };
        let mut report = [0u8; REPORT];
        report[0] = tag;
        report[1..].copy_from_slice(&value.to_ne_bytes());
        // SAFETY: report is a live buffer of REPORT bytes.
        unsafe { libc::write(fd, report.as_ptr().cast(), REPORT) };
    }
    // SAFETY: _exit skips the parent's atexit handlers and buffers.
    unsafe { libc::_exit(0) }
}

fn decode(report: &[u8]) -> Ret {
    let value = u64::from_ne_bytes(report[1..REPORT].try_into().unwrap_or([0; 8]));
    match report[0] {
        TAG_VALUE => Ret::Value(value),
        TAG_OK => Ret::Ok,
        _ => Ret::Signal(value as i32),
    }
}
