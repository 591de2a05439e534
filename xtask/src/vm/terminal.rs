//! The user's terminal: whether a descriptor is one (or a pipe or a
//! file), its size, and its settings put back after QEMU (which makes it
//! raw) however QEMU ended.

pub fn is_tty(fd: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

/// A pipe or a file, whose bytes the guest's command gets (a
/// terminal, /dev/null or a socket does not: the command reads
/// /dev/null, as before).
pub fn is_piped(fd: i32) -> bool {
    // SAFETY: stat is plain data; fstat fills it or fails.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is valid for fstat's write.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return false;
    }
    matches!(st.st_mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFREG)
}

pub fn size() -> Option<(u16, u16)> {
    // SAFETY: winsize is plain data; the ioctl fills it or fails.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    for fd in [1, 0, 2] {
        // SAFETY: ws is valid for the ioctl's write.
        if unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0 && ws.ws_row > 0 {
            return Some((ws.ws_row, ws.ws_col));
        }
    }
    None
}

/// Restores stdin's terminal settings and file status flags when
/// dropped: QEMU makes the terminal raw and non-blocking, and when it is
/// killed it cannot undo either.
pub struct TerminalGuard {
    termios: Option<libc::termios>,
    flags: libc::c_int,
}

impl TerminalGuard {
    pub fn save() -> TerminalGuard {
        // SAFETY: termios is plain data; tcgetattr fills it or fails.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: t is valid for the call; F_GETFL only reads.
        let (ok, flags) = unsafe {
            (
                libc::tcgetattr(0, &mut t) == 0,
                libc::fcntl(0, libc::F_GETFL),
            )
        };
        TerminalGuard {
            termios: ok.then_some(t),
            flags,
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        // SAFETY: the values came from the same descriptor.
        unsafe {
            if let Some(t) = &self.termios {
                libc::tcsetattr(0, libc::TCSANOW, t);
            }
            if self.flags >= 0 {
                libc::fcntl(0, libc::F_SETFL, self.flags);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipes_and_files_are_forwarded_terminals_and_dev_null_are_not() {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        assert!(is_piped(file.as_raw_fd()), "a file");
        let (read, _write) = std::io::pipe().unwrap();
        assert!(is_piped(read.as_raw_fd()), "a pipe");
        let null = std::fs::File::open("/dev/null").unwrap();
        assert!(!is_piped(null.as_raw_fd()), "/dev/null");
        assert!(!is_piped(-1), "no descriptor");
    }
}
