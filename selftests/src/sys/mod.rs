//! Small wrappers around the system calls the tests use: `bpf(2)` in
//! [`bpf`] (with the kernel's BTF read in [`btf`]), memory management in
//! [`mm`], kprobes in [`perf`], the page allocator's frees in [`trace`].
//! Everything returns `io::Result` so tests can assert on the exact errno.

pub mod bpf;
pub mod btf;
pub mod catch;
pub mod mm;
pub mod perf;
pub mod trace;

use std::io;

// Shared with /init and bench.
pub use guest_common::{err_name, errno_name, ENOTSUPP};

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
