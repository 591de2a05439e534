//! T33: what a fault changes that user space can see besides the page.
//! A map's fd, like an eventfd's, is a file of the one anonymous inode all
//! such files share. A fault that hands the page back to the core
//! (patched's `vmf->page`) goes through `fault_dirty_shared_page()` on a
//! write: the page is marked dirty and `file_update_time()` runs on that
//! shared inode. Base inserts at mmap() time; from patch 0002 on (direct,
//! prefault, adaptive) the fault maps the page itself and returns
//! `VM_FAULT_NOPAGE`: none of them does either.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::thread;
use std::time::Duration;

use super::common::*;
use crate::proc;

/// Longer than a tick of the coarse clock inode times come from (HZ=100
/// at the lowest), so that an update would show.
const TICK: Duration = Duration::from_millis(30);

/// A file's modification and change times, to the nanosecond.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Times {
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn times(fd: BorrowedFd<'_>, what: &str) -> Times {
    // SAFETY: stat is plain data that fstat fills in.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the borrow; `st` is a valid out-pointer.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    assert_eq!(
        rc,
        0,
        "fstat of {what}: {}",
        std::io::Error::last_os_error()
    );
    Times {
        mtime: (st.st_mtime, st.st_mtime_nsec),
        ctime: (st.st_ctime, st.st_ctime_nsec),
    }
}

fn eventfd() -> OwnedFd {
    // SAFETY: no pointers; the fd returned is ours.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh fd nobody else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Whether the page mapped at `addr` is dirty, by its pfn.
fn page_dirty(addr: usize, what: &str) -> bool {
    let entry = proc::pagemap(addr, 1).expect("reading /proc/self/pagemap")[0];
    assert!(
        entry.present && entry.pfn != 0,
        "{what}: not present, or no pfn (not root?)"
    );
    let flags = proc::kpageflags(entry.pfn).expect("reading /proc/kpageflags");
    flags >> proc::KPF_DIRTY & 1 == 1
}

/// T33: through fresh mappings, the first read of a page changes neither
/// the map fd's nor an unrelated eventfd's mtime and ctime, nor makes the
/// page dirty. The first write does all three on patched (the times of
/// both fds move forward together), and none on base or prefault.
pub fn t33_fault_timestamps(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(4);
    pm.fill_all();
    let other = eventfd();
    let fds = [(pm.map.fd(), "the map fd"), (other.as_fd(), "an eventfd")];
    let snapshot = || fds.map(|(fd, what)| times(fd, what));
    let reader = ok(pm.mmap(4, RO, 0), "read-only mapping");
    let writer = ok(pm.mmap(4, RW, 0), "writable mapping");

    let start = snapshot();
    thread::sleep(TICK);
    check_page(&reader, 1, 1, &format!("{ctx}: first read of page 1"));
    assert_eq!(
        snapshot(),
        start,
        "{ctx}: a read fault changed the anonymous inode's times (map fd, eventfd)"
    );
    assert!(
        !page_dirty(reader.addr() + PAGE, "page 1"),
        "{ctx}: a read made page 1 dirty"
    );

    thread::sleep(TICK);
    writer.write_u64(2 * PAGE, 0x7733);
    let after = snapshot();
    let dirty = page_dirty(writer.addr() + 2 * PAGE, "page 2");
    if ctx.kernel.write_fault_dirties_inode() {
        for (i, (_, what)) in fds.iter().enumerate() {
            assert!(
                after[i].mtime > start[i].mtime && after[i].ctime > start[i].ctime,
                "{ctx}: the first write fault left {what}'s times as they were ({:?}); \
                 fault_dirty_shared_page() should have updated the shared anonymous inode",
                after[i]
            );
        }
        assert!(dirty, "{ctx}: page 2 is not dirty after a write fault");
    } else {
        assert_eq!(
            after, start,
            "{ctx}: the first write through a mapping changed the anonymous inode's times (map fd, eventfd)"
        );
        assert!(
            !dirty,
            "{ctx}: a write through the mapping made page 2 dirty"
        );
    }
    assert_eq!(pm.lookup_word(2, 0), 0x7733, "LOOKUP_ELEM after the write");
    Ok(())
}
