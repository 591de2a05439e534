//! Small wrappers around the system calls the tests use: `bpf(2)` in
//! [`bpf`], memory management in [`mm`]. Everything returns `io::Result`
//! so tests can assert on the exact errno.

pub mod bpf;
pub mod mm;

use std::io;

/// The kernel-internal ENOTSUPP (524) that leaks out of some bpf paths.
pub const ENOTSUPP: i32 = 524;

/// Symbolic name of an errno value, for failure messages.
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        ENOTSUPP => "ENOTSUPP",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// `EINVAL (Invalid argument)`-style rendering of an `io::Error`.
pub fn err_name(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(e) => format!("{} ({err})", errno_name(e)),
        None => err.to_string(),
    }
}

/// Converts a raw syscall return value (-1 + errno on failure).
pub(crate) fn cvt(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Same for functions returning `c_int`.
pub(crate) fn cvt_int(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(errno_name(libc::EINVAL), "EINVAL");
        assert_eq!(errno_name(ENOTSUPP), "ENOTSUPP");
        assert_eq!(errno_name(9999), "errno 9999");
        let e = io::Error::from_raw_os_error(libc::EBUSY);
        assert!(err_name(&e).starts_with("EBUSY ("));
    }
}
