//! The results port: the guest's second serial port (/dev/ttyS1), where the
//! host reads the machine-readable `BPFLAB-...` lines, one per write().

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// Opens `path` write-only with O_NOCTTY: the guest programs have no
/// controlling terminal and must not acquire the port as one. Only with
/// `create` may a missing path become a (truncated) regular file, for
/// host-mode result files; otherwise a missing /dev/ttyS1 is an error rather
/// than a regular file nobody reads.
pub fn open(path: &str, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(create)
        .truncate(create)
        .custom_flags(libc::O_NOCTTY)
        .open(path)
}

/// Puts a tty in raw mode, so the tty layer neither rewrites "\n" as "\r\n"
/// nor echoes; anything else (a plain file) is left as it is. An error is
/// tcsetattr's.
pub fn set_raw(port: &File) -> io::Result<()> {
    let fd = port.as_raw_fd();
    // SAFETY: termios is plain data; tcgetattr fills it before it is used.
    unsafe {
        let mut tio: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd, &mut tio) == 0 {
            libc::cfmakeraw(&mut tio);
            if libc::tcsetattr(fd, libc::TCSANOW, &tio) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Writes `line` in a single write(), so lines from different writers
/// cannot interleave on the port. A short write is an error without errno
/// (`short write N/LEN`), not a second write() that another writer's line
/// could slip in front of.
pub fn write_line(mut port: &File, line: &str) -> io::Result<()> {
    let n = port.write(line.as_bytes())?;
    if n != line.len() {
        return Err(io::Error::other(format!("short write {n}/{}", line.len())));
    }
    Ok(())
}

/// Waits until everything written to a tty has been sent (tcdrain): a
/// line still in the UART when the kernel dies would never reach the host.
/// On anything else (a plain file) there is nothing to wait for.
pub fn drain(port: &File) {
    // SAFETY: tcdrain on an fd we own; ENOTTY for non-ttys is ignored.
    unsafe { libc::tcdrain(port.as_raw_fd()) };
}

/// Waits until what went to stdout has left the UART, when stdout is a
/// tty (the console): the kernel writes its messages to the console past
/// the tty's buffer, and a panic's line would overtake a line still in
/// it (a test's START marker, then found after the panic it caused).
pub fn drain_stdout() {
    // SAFETY: tcdrain on stdout; ENOTTY (a file or a pipe) is ignored.
    unsafe { libc::tcdrain(libc::STDOUT_FILENO) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a tty (a pty here, standing in for ttyS1) the line must arrive
    /// byte for byte: without raw mode, ONLCR would turn "\n" into "\r\n".
    #[test]
    fn line_to_tty_is_raw() {
        use std::io::Read;
        use std::os::fd::FromRawFd;
        // SAFETY: standard pty setup; ptsname's buffer is copied at once.
        let (mut master, slave) = unsafe {
            let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(fd >= 0);
            assert_eq!(libc::grantpt(fd), 0);
            assert_eq!(libc::unlockpt(fd), 0);
            let name = std::ffi::CStr::from_ptr(libc::ptsname(fd));
            (File::from_raw_fd(fd), name.to_str().unwrap().to_string())
        };
        // Keep the slave open, so the master does not see a hangup before
        // the read.
        let _hold = OpenOptions::new().read(true).open(&slave).unwrap();
        let port = open(&slave, false).unwrap();
        set_raw(&port).unwrap();
        write_line(&port, "BPFLAB-VERDICT fail exit=1\n").unwrap();
        let mut buf = [0u8; 64];
        let n = master.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"BPFLAB-VERDICT fail exit=1\n");
    }

    #[test]
    fn plain_files() {
        let path = std::env::temp_dir().join(format!("guest-common-{}", std::process::id()));
        let p = path.to_str().unwrap();
        let missing = open(p, false).unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));
        let port = open(p, true).unwrap();
        set_raw(&port).unwrap();
        write_line(&port, "BPFLAB-PLAN 1\n").unwrap();
        write_line(&port, "BPFLAB-RESULT t pass 0\n").unwrap();
        drop(port);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "BPFLAB-PLAN 1\nBPFLAB-RESULT t pass 0\n"
        );
        // `create` truncates what an earlier run left.
        drop(open(p, true).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        std::fs::remove_file(&path).unwrap();
    }
}
