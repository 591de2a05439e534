//! Low-level code the guest programs (/init, selftests, bench, map-fuzz)
//! share: signal and errno names, how a failed mount is named
//! ([`mount_what`]), panic payloads as text ([`panic_text`]),
//! the /proc readers ([`proc`]), the results port ([`port`]), the one raw
//! `bpf(2)` command both test programs issue themselves ([`bpf`]), and what
//! the host harness shares with them: the results protocol ([`protocol`]),
//! the list of kernel splats ([`splat`]) and the bench's patterns and grid
//! ([`bench`]).

pub mod bench;
pub mod bpf;
pub mod cmdline;
pub mod panic;
pub mod port;
pub mod proc;
pub mod protocol;
pub mod request;
pub mod splat;

pub use panic::panic_text;

use std::io;

/// The kernel-internal ENOTSUPP (524) that leaks out of some bpf paths.
pub const ENOTSUPP: i32 = 524;

/// Signal names for the usual suspects; callers choose how to print the
/// others.
pub fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return None,
    })
}

/// [`signal_name`] for messages: `SIGBUS`, or `signal 40` for the others.
pub fn signal_label(sig: i32) -> String {
    signal_name(sig).map_or_else(|| format!("signal {sig}"), str::to_string)
}

/// Symbolic name of an errno value for the usual suspects; callers
/// choose how to print the others.
pub fn errno_symbol(errno: i32) -> Option<&'static str> {
    Some(match errno {
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
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::ELOOP => "ELOOP",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        ENOTSUPP => "ENOTSUPP",
        _ => return None,
    })
}

/// Symbolic name of an errno value: keeps messages short and greppable
/// (`mount proc on /proc: ENODEV` rather than a locale-dependent sentence);
/// `errno 9999` for the others.
pub fn errno_name(errno: i32) -> String {
    errno_symbol(errno).map_or_else(|| format!("errno {errno}"), str::to_string)
}

/// `EINVAL (Invalid argument)`-style rendering of an `io::Error`: the name
/// makes logs greppable, the text readable.
pub fn err_name(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(e) => format!("{} ({err})", errno_name(e)),
        None => err.to_string(),
    }
}

/// `what: ENAME` for an io::Error, falling back to its text when it carries
/// no errno (e.g. a Rust-level error).
pub fn describe(what: &str, err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(errno) => format!("{what}: {}", errno_name(errno)),
        None => format!("{what}: {err}"),
    }
}

/// What a mount is, for its error: the file system type and the mount
/// point, which the host reads to name the option a kernel lacks
/// (xtask's `vm::boot_log`, by these words); a bind mount, its source.
pub fn mount_what(source: &str, target: &str, fstype: &str, flags: libc::c_ulong) -> String {
    if flags & libc::MS_BIND != 0 {
        format!("bind-mount {source} on {target}")
    } else {
        format!("mount {fstype} on {target}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGBUS), Some("SIGBUS"));
        assert_eq!(signal_name(libc::SIGSEGV), Some("SIGSEGV"));
        assert_eq!(signal_name(64), None);
        assert_eq!(signal_label(libc::SIGABRT), "SIGABRT");
        assert_eq!(signal_label(40), "signal 40");
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(libc::EINVAL), "EINVAL");
        assert_eq!(errno_name(libc::ENODEV), "ENODEV");
        assert_eq!(errno_name(libc::ENOENT), "ENOENT");
        assert_eq!(errno_name(ENOTSUPP), "ENOTSUPP");
        assert_eq!(errno_name(9999), "errno 9999");
        assert_eq!(errno_symbol(libc::EBUSY), Some("EBUSY"));
        assert_eq!(errno_symbol(9999), None);
        let e = io::Error::from_raw_os_error(libc::EBUSY);
        assert!(err_name(&e).starts_with("EBUSY ("));
        let e = io::Error::from_raw_os_error(libc::EPERM);
        assert_eq!(describe("mount /proc", &e), "mount /proc: EPERM");
    }

    #[test]
    fn a_mount_is_named_by_its_type_and_mount_point() {
        assert_eq!(
            mount_what("proc", "/proc", "proc", 0),
            "mount proc on /proc"
        );
        assert_eq!(
            mount_what("bpflab-root", "/host", "virtiofs", libc::MS_RDONLY),
            "mount virtiofs on /host"
        );
        assert_eq!(
            mount_what("/etc/lease", "/host/etc/resolv.conf", "", libc::MS_BIND),
            "bind-mount /etc/lease on /host/etc/resolv.conf"
        );
    }
}
