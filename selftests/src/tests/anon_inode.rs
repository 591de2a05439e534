//! T33: what a fault changes that user space can see besides the page.
//! A map's fd, like an eventfd's, is a file of the one anonymous inode all
//! such files share. A fault that hands the page back to the core in
//! `vmf->page` goes through `fault_dirty_shared_page()` on a write: the
//! page is marked dirty and `file_update_time()` runs on that shared
//! inode. For array maps that is mainline (0001); eager inserts at mmap()
//! time, and from 0002 on the fault maps the page itself. For arena maps
//! it is eager and mainline; from 0003 on the arena's fault maps the page
//! itself too.
//!
//! T39: the same once soft-dirty tracking is armed (`clear_refs` 4). The
//! mapping is then write-notified: every kernel, eager too, write-protects
//! the ptes, so a first write to a present page takes the write-protect
//! fault, which dirties the page and moves the times. A first write to an
//! unmapped page takes one fault on every kernel too: mainline's
//! finish_fault() maps it writable (and dirties it), and from 0002 on the
//! handler inserts it writable (vmf_insert_page_mkwrite()), leaving the
//! page and the times alone; vmf_insert_page() would map it read-only and
//! take a second fault.

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

/// The times of the map fd and of an unrelated eventfd, both files of the
/// shared anonymous inode.
struct Inode<'a> {
    fds: [(BorrowedFd<'a>, &'static str); 2],
}

impl<'a> Inode<'a> {
    fn new(map_fd: BorrowedFd<'a>, other: &'a OwnedFd) -> Self {
        Inode {
            fds: [(map_fd, "the map fd"), (other.as_fd(), "an eventfd")],
        }
    }

    fn times(&self) -> [Times; 2] {
        self.fds.map(|(fd, what)| times(fd, what))
    }

    /// What a first write changed since `start`: the times of both fds
    /// moved forward (true), or nothing (false); anything else fails.
    fn moved_since(&self, start: &[Times; 2], what: &str) -> bool {
        let now = self.times();
        if now == *start {
            return false;
        }
        for (i, (_, fd)) in self.fds.iter().enumerate() {
            assert!(
                now[i].mtime > start[i].mtime && now[i].ctime > start[i].ctime,
                "{what}: {fd}'s times changed but not both forward ({:?} to {:?})",
                start[i],
                now[i]
            );
        }
        true
    }
}

/// Checks what the first write at `addr` changed since `start`: the
/// times of the shared inode and the page's dirty bit move together, as
/// `dirties` says for the kernel at hand.
fn check_first_write(inode: &Inode, start: &[Times; 2], addr: usize, dirties: bool, what: &str) {
    let moved = inode.moved_since(start, what);
    let dirty = page_dirty(addr, what);
    assert_eq!(
        (moved, dirty),
        (dirties, dirties),
        "{what}: (the anonymous inode's times moved, the page is dirty) after the first write; \
         fault_dirty_shared_page() does both, a handler that maps the page does neither"
    );
}

/// T33: through fresh mappings of a 4-page array map, the first read of a
/// page changes neither the map fd's nor an unrelated eventfd's mtime and
/// ctime, nor makes the page dirty. The first write does both on mainline
/// (the times of both fds move forward together), and neither on the
/// others.
pub fn t33_fault_timestamps(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(4);
    pm.fill_all();
    let other = eventfd();
    let inode = Inode::new(pm.map.fd(), &other);
    let reader = ok(pm.mmap(4, RO, 0), "read-only mapping");
    let writer = ok(pm.mmap(4, RW, 0), "writable mapping");

    let start = inode.times();
    thread::sleep(TICK);
    check_page(&reader, 1, 1, &format!("{ctx}: first read of page 1"));
    check_first_read(
        &inode,
        &start,
        reader.addr() + PAGE,
        &format!("{ctx}: array map"),
    );

    write_page_2_a_tick_later(
        &inode,
        &start,
        &writer,
        ctx.kernel.array_fault_returns_page(),
        &format!("{ctx}: array map, page 2"),
    );
    assert_eq!(pm.lookup_word(2, 0), 0x7733, "LOOKUP_ELEM after the write");
    Ok(())
}

/// A coarse clock tick after `start`, the first write of page 2 of `m`
/// (0x7733 in its first word), checked as `check_first_write` does.
fn write_page_2_a_tick_later(
    inode: &Inode,
    start: &[Times; 2],
    m: &Mapping,
    dirties: bool,
    what: &str,
) {
    thread::sleep(TICK);
    m.write_u64(2 * PAGE, 0x7733);
    check_first_write(inode, start, m.addr() + 2 * PAGE, dirties, what);
}

/// Checks that the first read of the page at `addr` changed nothing.
fn check_first_read(inode: &Inode, start: &[Times; 2], addr: usize, what: &str) {
    assert_eq!(
        inode.times(),
        *start,
        "{what}: a read fault changed the anonymous inode's times (map fd, eventfd)"
    );
    assert!(
        !page_dirty(addr, what),
        "{what}: a read made the page dirty"
    );
}

/// T33 for arena maps: the first read of a page (which allocates it)
/// changes nothing; the first write of another dirties it and moves the
/// times on eager and mainline, and does neither from 0003 on.
pub fn t33_arena_fault_timestamps(ctx: &Ctx) -> Result<(), Skip> {
    let (arena, m) = arena_mapping(4);
    let other = eventfd();
    let inode = Inode::new(arena.fd(), &other);

    let start = inode.times();
    thread::sleep(TICK);
    assert_eq!(m.read_u64(PAGE), 0, "a fresh arena page reads zero");
    check_first_read(&inode, &start, m.addr() + PAGE, &format!("{ctx}: arena"));

    write_page_2_a_tick_later(
        &inode,
        &start,
        &m,
        ctx.kernel.arena_fault_returns_page(),
        &format!("{ctx}: arena, page 2"),
    );
    assert_eq!(m.read_u64(2 * PAGE), 0x7733, "arena page 2 after the write");
    Ok(())
}

/// Minor faults to write `val` at `off` of `m`.
fn faults_to_write(m: &Mapping, off: usize, val: u64) -> u64 {
    let before = proc::minor_faults();
    m.write_u64(off, val);
    proc::minor_faults() - before
}

/// T39: with soft-dirty tracking armed on a fresh mapping of a 4-page
/// array map, writing page 2 and then page 3 sets the soft-dirty bit of
/// each page written and of no other, and takes one fault on every
/// kernel. It dirties the page and moves the shared inode's times where
/// the page was present (the write-protect fault) or the handler returns
/// it in vmf->page (mainline); from 0002 on a write to an unmapped page
/// is inserted writable and dirty in the pte, and does neither.
pub fn t39_soft_dirty_write_faults(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 4;
    let pm = PagedMap::new(PAGES);
    pm.fill_all();
    let other = eventfd();
    let inode = Inode::new(pm.map.fd(), &other);
    let m = ok(pm.mmap(PAGES, RW, 0), "writable mapping");
    warm_up_fault_counting();
    ok(
        proc::clear_soft_dirty(),
        "writing 4 to /proc/self/clear_refs",
    );
    let soft_dirty = || ok(proc::pagemap_soft_dirty(m.addr(), PAGES), "pagemap");
    assert_eq!(
        soft_dirty(),
        [false; PAGES],
        "{ctx}: soft-dirty bits after clear_refs"
    );

    let mut written = Vec::new();
    let mut want_dirty = [false; PAGES];
    for page in [2, 3] {
        let present = ctx.present_after(0..PAGES, &written).contains(&page);
        let dirties = present || ctx.kernel.array_fault_returns_page();
        let start = inode.times();
        thread::sleep(TICK);
        let faults = faults_to_write(&m, page * PAGE, 0x3900 + page as u64);
        let what = format!("{ctx}: soft-dirty armed, first write of page {page}");
        assert_eq!(
            faults,
            1,
            "{what}: faults (the page was {}present)",
            if present { "" } else { "not " }
        );
        check_first_write(&inode, &start, m.addr() + page * PAGE, dirties, &what);
        written.push(page);
        want_dirty[page] = true;
        assert_eq!(
            soft_dirty(),
            want_dirty,
            "{what}: soft-dirty bits of pages 0..{PAGES}"
        );
        assert_eq!(
            faults_to_write(&m, page * PAGE, 0x3911),
            0,
            "{what}: a second write faults"
        );
        assert_eq!(
            pm.lookup_word(page, 0),
            0x3911,
            "LOOKUP_ELEM of page {page}"
        );
    }
    Ok(())
}
