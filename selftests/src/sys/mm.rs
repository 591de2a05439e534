//! mmap and friends returning `io::Result`, and [`Mapping`], an RAII
//! owner of a mapped range. Accesses go through volatile loads and stores:
//! the point of most tests is *which* accesses fault, so the compiler must
//! neither drop nor merge them.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::{cvt, cvt_int};

pub const MADV_POPULATE_READ: i32 = 22;
pub const MADV_POPULATE_WRITE: i32 = 23;
pub const MADV_COLLAPSE: i32 = 25;

pub const RW: i32 = libc::PROT_READ | libc::PROT_WRITE;
pub const RO: i32 = libc::PROT_READ;

pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Raw mmap(2). The offset goes to the kernel untouched (SYS_mmap rather
/// than glibc) so the huge-offset cases of T06 test the kernel's checks.
pub fn mmap_raw(
    addr: usize,
    len: usize,
    prot: i32,
    flags: i32,
    fd: i32,
    offset: u64,
) -> io::Result<usize> {
    // SAFETY: mapping memory cannot break Rust's invariants unless it
    // replaces memory Rust uses; callers pass addr 0 or ranges they own.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mmap,
            addr as libc::c_ulong,
            len as libc::c_ulong,
            prot as libc::c_ulong,
            flags as libc::c_ulong,
            fd as libc::c_long,
            offset as libc::c_ulong,
        )
    };
    Ok(cvt(ret)? as usize)
}

/// mmap(2) returning an owning [`Mapping`].
pub fn mmap(
    addr: usize,
    len: usize,
    prot: i32,
    flags: i32,
    fd: Option<BorrowedFd<'_>>,
    offset: u64,
) -> io::Result<Mapping> {
    let raw = fd.map_or(-1, |f| f.as_raw_fd());
    let addr = mmap_raw(addr, len, prot, flags, raw, offset)?;
    // The kernel maps whole pages; so does the Mapping.
    let len = len.div_ceil(page_size()) * page_size();
    Ok(Mapping { addr, len })
}

/// MAP_SHARED mapping of `fd` at `offset` (bytes), kernel-chosen address.
pub fn map_shared(fd: BorrowedFd<'_>, len: usize, prot: i32, offset: u64) -> io::Result<Mapping> {
    mmap(0, len, prot, libc::MAP_SHARED, Some(fd), offset)
}

/// Private anonymous memory.
pub fn anon(len: usize, prot: i32) -> io::Result<Mapping> {
    mmap(
        0,
        len,
        prot,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        None,
        0,
    )
}

/// A PROT_NONE placeholder of `len` bytes aligned to `align`, to be
/// replaced with MAP_FIXED.
pub fn reserve(len: usize, align: usize) -> io::Result<Mapping> {
    let big = anon(len + align, libc::PROT_NONE)?;
    let (start, total) = big.leak();
    let aligned = (start + align - 1) & !(align - 1);
    if aligned > start {
        munmap(start, aligned - start)?;
    }
    let tail = start + total - (aligned + len);
    if tail > 0 {
        munmap(aligned + len, tail)?;
    }
    Ok(Mapping { addr: aligned, len })
}

pub fn munmap(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: see mmap_raw; callers unmap only ranges they own.
    cvt_int(unsafe { libc::munmap(addr as *mut libc::c_void, len) }).map(drop)
}

pub fn mremap(
    old: usize,
    old_len: usize,
    new_len: usize,
    flags: i32,
    new_addr: usize,
) -> io::Result<usize> {
    // SAFETY: as for munmap.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mremap,
            old as libc::c_ulong,
            old_len as libc::c_ulong,
            new_len as libc::c_ulong,
            flags as libc::c_ulong,
            new_addr as libc::c_ulong,
        )
    };
    Ok(cvt(ret)? as usize)
}

pub fn madvise(addr: usize, len: usize, advice: i32) -> io::Result<()> {
    // SAFETY: advice on our own ranges; DONTNEED on shared map memory does
    // not free anything Rust owns.
    cvt_int(unsafe { libc::madvise(addr as *mut libc::c_void, len, advice) }).map(drop)
}

pub fn mprotect(addr: usize, len: usize, prot: i32) -> io::Result<()> {
    // SAFETY: callers only change protection of mappings they own.
    cvt_int(unsafe { libc::mprotect(addr as *mut libc::c_void, len, prot) }).map(drop)
}

pub fn mlock(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: no memory is changed.
    cvt_int(unsafe { libc::mlock(addr as *const libc::c_void, len) }).map(drop)
}

pub fn munlock(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: no memory is changed.
    cvt_int(unsafe { libc::munlock(addr as *const libc::c_void, len) }).map(drop)
}

/// mincore(2): one byte per page, bit 0 = resident.
pub fn mincore(addr: usize, len: usize) -> io::Result<Vec<u8>> {
    let mut vec = vec![0u8; len.div_ceil(page_size())];
    // SAFETY: vec has one byte per page of the range.
    cvt_int(unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) })?;
    Ok(vec)
}

/// process_vm_readv(2) of `buf.len()` bytes at `remote` in process `pid`.
pub fn process_vm_readv(pid: libc::pid_t, remote: usize, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: remote as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the local iovec covers `buf`; the kernel checks the remote one.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    Ok(cvt(n as libc::c_long)? as usize)
}

/// The u64 at `addr` of this process, read by the kernel on our behalf
/// (process_vm_readv). For memory that may not be readable: an address
/// that is unmapped, or whose fault would raise SIGBUS or SIGSEGV, comes
/// back as an error (EFAULT) instead of killing the reader.
pub fn read_u64_via_kernel(addr: usize) -> io::Result<u64> {
    let mut buf = [0u8; 8];
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let n = process_vm_readv(me, addr, &mut buf)?;
    if n != buf.len() {
        return Err(io::Error::other(format!(
            "process_vm_readv at {addr:#x}: {n} of 8 bytes"
        )));
    }
    Ok(u64::from_ne_bytes(buf))
}

/// Volatile 64-bit load.
///
/// # Safety
/// `addr` must be 8-byte aligned and mapped readable (or the caller must
/// be prepared to die of the resulting signal, e.g. in a forked child).
pub unsafe fn peek(addr: usize) -> u64 {
    (addr as *const u64).read_volatile()
}

/// Volatile 64-bit store.
///
/// # Safety
/// As for [`peek`], and the memory must not be in use by Rust code.
pub unsafe fn poke(addr: usize, val: u64) {
    (addr as *mut u64).write_volatile(val)
}

/// An owned mapped range, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    addr: usize,
    len: usize,
}

// The mapping is plain shared memory accessed only with volatile
// operations; threads in T18 share one on purpose.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Takes ownership of an existing range (e.g. the result of mremap).
    ///
    /// # Safety
    /// The range must be a mapping nobody else will unmap.
    pub unsafe fn from_raw(addr: usize, len: usize) -> Mapping {
        Mapping { addr, len }
    }

    pub fn addr(&self) -> usize {
        self.addr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Gives up ownership without unmapping.
    pub fn leak(self) -> (usize, usize) {
        let r = (self.addr, self.len);
        std::mem::forget(self);
        r
    }

    #[track_caller]
    fn check(&self, off: usize, size: usize) {
        assert!(
            off + size <= self.len && off.is_multiple_of(size.min(8)),
            "access at offset {off:#x} (size {size}) outside mapping of {:#x} bytes",
            self.len
        );
    }

    #[track_caller]
    pub fn read_u64(&self, off: usize) -> u64 {
        self.check(off, 8);
        // SAFETY: in bounds and aligned; signals are what tests look for.
        unsafe { peek(self.addr + off) }
    }

    #[track_caller]
    pub fn write_u64(&self, off: usize, val: u64) {
        self.check(off, 8);
        // SAFETY: in bounds and aligned; memory not borrowed by Rust.
        unsafe { poke(self.addr + off, val) }
    }

    #[track_caller]
    pub fn read_u32(&self, off: usize) -> u32 {
        self.check(off, 4);
        // SAFETY: in bounds and aligned.
        unsafe { ((self.addr + off) as *const u32).read_volatile() }
    }

    #[track_caller]
    pub fn write_u32(&self, off: usize, val: u32) {
        self.check(off, 4);
        // SAFETY: in bounds and aligned.
        unsafe { ((self.addr + off) as *mut u32).write_volatile(val) }
    }

    #[track_caller]
    pub fn read_u8(&self, off: usize) -> u8 {
        self.check(off, 1);
        // SAFETY: in bounds.
        unsafe { ((self.addr + off) as *const u8).read_volatile() }
    }

    #[track_caller]
    pub fn write_u8(&self, off: usize, val: u8) {
        self.check(off, 1);
        // SAFETY: in bounds.
        unsafe { ((self.addr + off) as *mut u8).write_volatile(val) }
    }

    /// Copies `n` bytes out (byte-wise volatile reads).
    #[track_caller]
    pub fn read_bytes(&self, off: usize, n: usize) -> Vec<u8> {
        assert!(off + n <= self.len, "read_bytes out of range");
        (off..off + n).map(|o| self.read_u8(o)).collect()
    }

    #[track_caller]
    pub fn write_bytes(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len, "write_bytes out of range");
        for (i, b) in data.iter().enumerate() {
            self.write_u8(off + i, *b);
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let _ = munmap(self.addr, self.len);
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn reads_through_the_kernel_fail_cleanly() {
        let word = 0x1234_5678_9abc_def0u64;
        assert_eq!(
            read_u64_via_kernel(std::ptr::addr_of!(word) as usize).unwrap(),
            word
        );
        let none = anon(page_size(), libc::PROT_NONE).unwrap();
        let err = read_u64_via_kernel(none.addr()).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EFAULT), "{err}");
    }
}
