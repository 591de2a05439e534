//! Thin wrappers over the system calls /init needs.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;

use guest_common::port;

pub use guest_common::{describe, mount_what};

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
    // T19 traces the page allocator's frees (kmem:mm_page_free).
    Mount {
        fstype: "tracefs",
        target: "/sys/kernel/tracing",
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
/// the verdict detail, e.g. `mount proc on /proc: ENODEV`.
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
    match mount_fs(m.fstype, m.target, m.fstype, 0, "") {
        Ok(()) => Ok(Mounted::Yes),
        Err((errno, detail)) => match errno {
            libc::ENODEV | libc::ENOENT if m.optional => Ok(Mounted::Absent(detail)),
            _ => Err(detail),
        },
    }
}

/// mount(2): `source` of type `fstype` on `target`, with `flags` and the
/// file system's `data` options. On failure, the errno and a detail such
/// as `mount virtiofs on /host: ENODEV` ([`mount_what`]).
pub fn mount_fs(
    source: &str,
    target: &str,
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> Result<(), (i32, String)> {
    let c = |s: &str| CString::new(s).expect("no NUL in mount arguments");
    let (src, tgt, fst, dat) = (c(source), c(target), c(fstype), c(data));
    // SAFETY: all pointers are valid NUL-terminated strings.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            tgt.as_ptr(),
            fst.as_ptr(),
            flags,
            dat.as_ptr().cast(),
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    Err((
        err.raw_os_error().unwrap_or(0),
        describe(&mount_what(source, target, fstype, flags), &err),
    ))
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
/// Brings the loopback interface up, as a booted system has it: tests
/// that talk to 127.0.0.1 or ::1 in the initial network namespace need it.
/// Any socket reaches the interface ioctls; AF_UNIX needs no INET.
pub fn loopback_up() -> Result<(), String> {
    // SAFETY: socket has no memory arguments.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(describe("socket", &io::Error::last_os_error()));
    }
    // SAFETY: ifreq is plain data.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: ifr is a valid ifreq for both ioctls, fd a socket of ours.
    let result = unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr) < 0 {
            Err(describe("SIOCGIFFLAGS lo", &io::Error::last_os_error()))
        } else {
            ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr) < 0 {
                Err(describe("SIOCSIFFLAGS lo", &io::Error::last_os_error()))
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: fd is ours and closed once.
    unsafe { libc::close(fd) };
    result
}

pub fn uptime() -> String {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// Writes `line` to a serial port in one write(), in raw mode (see
/// [`port`]); then waits for the UART to drain, because a reboot right after
/// would otherwise cut the line off.
pub fn write_serial_line(path: &str, line: &str) -> Result<(), String> {
    let port = port::open(path, false).map_err(|e| describe(&format!("open {path}"), &e))?;
    port::set_raw(&port).map_err(|e| describe(&format!("tcsetattr {path}"), &e))?;
    port::write_line(&port, line).map_err(|e| describe(&format!("write {path}"), &e))?;
    // SAFETY: fd is open; tcdrain fails harmlessly with ENOTTY on non-ttys.
    unsafe { libc::tcdrain(port.as_raw_fd()) };
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
    fn mount_table_order() {
        let pos = |t: &str| MOUNTS.iter().position(|m| m.target == t).unwrap();
        assert!(pos("/sys") < pos("/sys/fs/bpf"));
        assert!(pos("/sys") < pos("/sys/kernel/debug"));
        assert!(pos("/sys") < pos("/sys/kernel/tracing"));
        assert!(MOUNTS
            .iter()
            .filter(|m| m.optional)
            .all(|m| m.fstype == "debugfs" || m.fstype == "tracefs"));
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
