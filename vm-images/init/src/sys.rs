//! Thin wrappers over the system calls /init needs.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;

/// Symbolic errno names keep verdict details short and greppable
/// (`mount /proc: ENODEV` rather than a locale-dependent sentence).
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::ENOEXEC => "ENOEXEC",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::ETXTBSY => "ETXTBSY",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::ENOSYS => "ENOSYS",
        libc::ELOOP => "ELOOP",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// `what: ENAME` for an io::Error, falling back to its text when it carries
/// no errno (e.g. a Rust-level error).
pub fn describe(what: &str, err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(errno) => format!("{what}: {}", errno_name(errno)),
        None => format!("{what}: {err}"),
    }
}

/// One filesystem /init mounts.
pub struct Mount {
    pub fstype: &'static str,
    pub target: &'static str,
    /// Optional mounts may be missing from the kernel config: ENODEV (no such
    /// filesystem) and ENOENT (mount point cannot exist) are not errors.
    pub optional: bool,
}

const fn required(fstype: &'static str, target: &'static str) -> Mount {
    Mount {
        fstype,
        target,
        optional: false,
    }
}

/// Order matters: /sys/fs/bpf and /sys/kernel/debug live inside sysfs.
pub const MOUNTS: &[Mount] = &[
    required("proc", "/proc"),
    required("sysfs", "/sys"),
    required("devtmpfs", "/dev"),
    required("tmpfs", "/tmp"),
    required("bpf", "/sys/fs/bpf"),
    Mount {
        fstype: "debugfs",
        target: "/sys/kernel/debug",
        optional: true,
    },
];

/// Outcome of mounting one filesystem.
pub enum Mounted {
    Yes,
    /// An optional filesystem the kernel does not have.
    Absent(String),
}

/// Creates the mount point if needed and mounts `m` there. On failure returns
/// the verdict detail, e.g. `mount /proc: ENODEV`.
pub fn mount(m: &Mount) -> Result<Mounted, String> {
    if let Err(e) = std::fs::create_dir_all(m.target) {
        // sysfs refuses mkdir (EPERM): a missing /sys/kernel/debug just
        // means the kernel was built without debugfs.
        if m.optional {
            return Ok(Mounted::Absent(describe(
                &format!("mkdir {}", m.target),
                &e,
            )));
        }
        return Err(describe(&format!("mkdir {}", m.target), &e));
    }
    let src = CString::new(m.fstype).expect("no NUL in fstype");
    let target = CString::new(m.target).expect("no NUL in target");
    // SAFETY: all pointers are valid NUL-terminated strings or NULL data.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            src.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        return Ok(Mounted::Yes);
    }
    let err = io::Error::last_os_error();
    let what = format!("mount {}", m.target);
    match err.raw_os_error() {
        Some(libc::ENODEV | libc::ENOENT) if m.optional => {
            Ok(Mounted::Absent(describe(&what, &err)))
        }
        _ => Err(describe(&what, &err)),
    }
}

/// The kernel only opens /dev/console for init if the initramfs ships that
/// node. Once devtmpfs is mounted, give any closed stdio fd the console, so
/// that the child's output is not silently lost.
pub fn ensure_console_stdio() {
    // SAFETY: fcntl(F_GETFD) only queries whether the fd is open.
    let closed: Vec<i32> = (0..3)
        .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1)
        .collect();
    if closed.is_empty() {
        return;
    }
    let Ok(console) = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open("/dev/console")
    else {
        return;
    };
    for fd in closed {
        // SAFETY: dup2 onto a closed stdio slot; console stays open meanwhile.
        unsafe { libc::dup2(console.as_raw_fd(), fd) };
    }
}

/// Seconds since boot, as the text of the first field of /proc/uptime.
pub fn uptime() -> String {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// Writes `line` to a serial port in one write(), after switching the port to
/// raw mode so the tty layer neither rewrites "\n" as "\r\n" nor echoes; then
/// waits for the UART to drain, because a reboot right after would otherwise
/// cut the line off.
pub fn write_serial_line(path: &str, line: &str) -> Result<(), String> {
    let port = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(path)
        .map_err(|e| describe(&format!("open {path}"), &e))?;
    let fd = port.as_raw_fd();
    // SAFETY: termios is plain data; tcgetattr fills it before it is used.
    unsafe {
        let mut tio: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd, &mut tio) == 0 {
            libc::cfmakeraw(&mut tio);
            if libc::tcsetattr(fd, libc::TCSANOW, &tio) != 0 {
                return Err(describe(
                    &format!("tcsetattr {path}"),
                    &io::Error::last_os_error(),
                ));
            }
        }
    }
    // SAFETY: the buffer is valid for line.len() bytes.
    let n = unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
    if n < 0 {
        return Err(describe(
            &format!("write {path}"),
            &io::Error::last_os_error(),
        ));
    }
    if n as usize != line.len() {
        return Err(format!("write {path}: short write {n}/{}", line.len()));
    }
    // SAFETY: fd is open; tcdrain fails harmlessly with ENOTTY on non-ttys.
    unsafe { libc::tcdrain(fd) };
    Ok(())
}

/// Writes `data` to a (proc/debugfs) control file with a single write().
pub fn write_control(path: &str, data: &str) -> Result<(), String> {
    use std::io::Write;
    let mut f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| describe(&format!("open {path}"), &e))?;
    f.write_all(data.as_bytes())
        .map_err(|e| describe(&format!("write {path}"), &e))
}

/// Flushes filesystems and resets the machine. QEMU runs with -no-reboot, so
/// this ends the VM. Never returns: if reboot() fails, PID 1 still must not
/// exit (that would panic the kernel), so it parks forever.
pub fn reboot() -> ! {
    // SAFETY: plain syscalls without pointer arguments.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_AUTOBOOT);
    }
    crate::say(&describe("reboot", &io::Error::last_os_error()));
    sleep_forever()
}

pub fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(libc::ENODEV), "ENODEV");
        assert_eq!(errno_name(libc::ENOENT), "ENOENT");
        assert_eq!(errno_name(9999), "errno 9999");
        let e = io::Error::from_raw_os_error(libc::EPERM);
        assert_eq!(describe("mount /proc", &e), "mount /proc: EPERM");
    }

    #[test]
    fn mount_table_order() {
        let pos = |t: &str| MOUNTS.iter().position(|m| m.target == t).unwrap();
        assert!(pos("/sys") < pos("/sys/fs/bpf"));
        assert!(pos("/sys") < pos("/sys/kernel/debug"));
        assert!(MOUNTS
            .iter()
            .filter(|m| m.optional)
            .all(|m| m.fstype == "debugfs"));
    }

    /// On a tty (a pty here, standing in for ttyS1) the line must arrive
    /// byte for byte: without raw mode, ONLCR would turn "\n" into "\r\n".
    #[test]
    fn serial_line_to_tty_is_raw() {
        use std::io::Read;
        use std::os::fd::FromRawFd;
        // SAFETY: standard pty setup; ptsname's buffer is copied at once.
        let (mut master, slave) = unsafe {
            let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(fd >= 0);
            assert_eq!(libc::grantpt(fd), 0);
            assert_eq!(libc::unlockpt(fd), 0);
            let name = std::ffi::CStr::from_ptr(libc::ptsname(fd));
            (
                std::fs::File::from_raw_fd(fd),
                name.to_str().unwrap().to_string(),
            )
        };
        // Keep the slave open, so the master does not see a hangup before
        // the read.
        let _hold = OpenOptions::new().read(true).open(&slave).unwrap();
        write_serial_line(&slave, "BPFLAB-VERDICT fail exit=1\n").unwrap();
        let mut buf = [0u8; 64];
        let n = master.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"BPFLAB-VERDICT fail exit=1\n");
    }

    #[test]
    fn serial_line_to_plain_file() {
        let path = std::env::temp_dir().join(format!("init-test-{}", std::process::id()));
        std::fs::write(&path, "").unwrap();
        let p = path.to_str().unwrap();
        write_serial_line(p, "BPFLAB-VERDICT pass exit=0\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "BPFLAB-VERDICT pass exit=0\n"
        );
        std::fs::remove_file(&path).unwrap();
        assert!(write_serial_line(p, "x\n").unwrap_err().ends_with("ENOENT"));
    }
}
