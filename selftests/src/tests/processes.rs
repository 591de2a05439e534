//! T15-T17: other processes and the kernel itself reaching pages user
//! space never touched: fork children, `/proc/<pid>/mem`, process_vm_readv,
//! and kernel accesses through copy_{to,from}_user and GUP (read/write,
//! vmsplice, O_DIRECT). P = U in results; residency differs.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

use super::common::*;

/// T15: a fork child reads pages the parent never touched and writes
/// some; the parent and LOOKUP_ELEM see the writes. The child starts with
/// the parent's resident pages (VM_MIXEDMAP page tables are copied at
/// fork): the touched ones (P), their window (W) or all of them (U).
pub fn t15_fork_child_sees_and_writes(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 3 * FAULT_WINDOW;
    let pm = PagedMap::new(PAGES);
    pm.fill_all();
    let m = pm.map_rw();
    std::hint::black_box(touch_pages(&m, &[0, 1]));
    let want_child_rss = ctx.rss_after(0..PAGES, &[0, 1]);
    run_in_child("fork child", || {
        assert_eq!(
            rss(m.addr()),
            want_child_rss,
            "{ctx}: child's Rss right after fork"
        );
        for p in 2..PAGES {
            check_page(&m, p, p, &format!("child's read of page {p}"));
        }
        m.write_u64(10 * PAGE + 40, 0xC41D_0010);
        m.write_u64(3 * PAGE + 56, 0xC41D_0003);
    });
    assert_eq!(
        rss(m.addr()),
        ctx.rss_after(0..PAGES, &[0, 1]),
        "{ctx}: parent's Rss after the child ran"
    );
    assert_eq!(
        m.read_u64(10 * PAGE + 40),
        0xC41D_0010,
        "parent's read of the child's write to page 10"
    );
    assert_eq!(
        pm.lookup_word(3, 7),
        0xC41D_0003,
        "LOOKUP_ELEM of the child's write to page 3"
    );
    Ok(())
}

#[track_caller]
fn expect_page(buf: &[u8], page: usize, what: &str) {
    assert!(
        buf == page_image(page),
        "{what}: wrong data for map page {page} (first bytes {:02x?})",
        &buf[..16]
    );
}

/// Map page of window `i`: T16 and T17 put each page they access in a
/// window of its own.
fn window_page(i: usize) -> usize {
    i * FAULT_WINDOW
}

/// Address of map page [`window_page`]`(i)` in `m`, a mapping of the map
/// from page 0.
fn window_addr(m: &Mapping, i: usize) -> usize {
    m.addr() + window_page(i) * PAGE
}

/// T16's map: six windows. Pages in windows of their own, so each access
/// is to an untouched page on the prefault kernel too.
const T16_PAGES: usize = 6 * FAULT_WINDOW;

/// T16: /proc/self/mem, process_vm_readv and `/proc/<child>/mem` on pages
/// nobody touched return the right bytes; a /proc/self/mem write lands.
pub fn t16_remote_access_untouched(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(T16_PAGES);
    pm.fill_all();
    let m = pm.map_rw();
    // Stays open until the child's accesses are done too.
    let _mem = check_own_remote_access(ctx, &pm, &m);
    check_child_remote_access(ctx, &m);
    Ok(())
}

/// T16 in this process: /proc/self/mem reads window 1 and writes window
/// 3, process_vm_readv reads window 2. Returns /proc/self/mem, open.
fn check_own_remote_access(ctx: &Ctx, pm: &PagedMap, m: &Mapping) -> File {
    let w = window_page;
    let at = |i: usize| window_addr(m, i) as u64;
    let mut buf = vec![0u8; PAGE];
    let mem = ok(
        OpenOptions::new()
            .read(true)
            .write(true)
            .open("/proc/self/mem"),
        "open /proc/self/mem",
    );
    assert_eq!(
        ok(mem.read_at(&mut buf, at(1)), "/proc/self/mem read"),
        PAGE
    );
    expect_page(&buf, w(1), "/proc/self/mem read of an untouched page");
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    assert_eq!(
        ok(
            mm::process_vm_readv(me, at(2) as usize, &mut buf),
            "process_vm_readv(self)"
        ),
        PAGE
    );
    expect_page(&buf, w(2), "process_vm_readv of an untouched page");
    assert_eq!(
        ok(
            mem.write_at(&0xFEED_u64.to_ne_bytes(), at(3)),
            "/proc/self/mem write"
        ),
        8
    );
    assert_eq!(
        pm.lookup_word(w(3), 0),
        0xFEED,
        "LOOKUP_ELEM after a /proc/self/mem write"
    );
    // Each remote access populated this process' page table (P, W).
    assert_eq!(
        rss(m.addr()),
        ctx.rss_after(0..T16_PAGES, &[w(1), w(2), w(3)]),
        "{ctx}: Rss after the remote accesses"
    );
    mem
}

/// T16 on a fork child: `/proc/<child>/mem` reads window 4 and
/// process_vm_readv window 5 of the child's `m`, then the child checks
/// its Rss.
fn check_child_remote_access(ctx: &Ctx, m: &Mapping) {
    let w = window_page;
    let at = |i: usize| window_addr(m, i) as u64;
    let mut buf = vec![0u8; PAGE];
    let (ready, done) = (Gate::new(), Gate::new());
    let child = spawn(|| {
        ready.open();
        done.wait();
        // Pages 4 and 5 were faulted into this process by the parent.
        assert_eq!(
            rss(m.addr()),
            ctx.rss_after(0..T16_PAGES, &[w(1), w(2), w(3), w(4), w(5)]),
            "{ctx}: child's Rss after remote reads"
        );
    });
    ready.wait();
    let cmem = ok(
        File::open(format!("/proc/{}/mem", child.pid())),
        "open /proc/<child>/mem",
    );
    assert_eq!(
        ok(cmem.read_at(&mut buf, at(4)), "/proc/<child>/mem read"),
        PAGE
    );
    expect_page(
        &buf,
        w(4),
        "/proc/<child>/mem read of a page untouched in the child",
    );
    assert_eq!(
        ok(
            mm::process_vm_readv(child.pid(), at(5) as usize, &mut buf),
            "process_vm_readv(child)"
        ),
        PAGE
    );
    expect_page(
        &buf,
        w(5),
        "process_vm_readv of a page untouched in the child",
    );
    done.open();
    child.wait().expect_success("child holding the mapping");
}

/// T17: kernel accesses to untouched pages: read() into them from a file
/// and /dev/urandom, write() from them into a pipe, vmsplice() (GUP) and
/// O_DIRECT against /dev/ram0 (which the VM's kernel must have).
pub fn t17_gup_kernel_access(_ctx: &Ctx) -> Result<(), Skip> {
    // Map pages 0-2 and 8-10 are at win(0)-win(2) and win(8)-win(10): windows of
    // their own, so each access is to an untouched page on prefault too.
    let win = window_page;
    let pm = PagedMap::new(win(11));
    (0..4).for_each(|i| pm.fill(win(i)));
    let m = pm.map_rw();
    // Every file and pipe stays open until the end of the test.
    let _source = read_file_into_untouched_page(&pm, &m);
    let _urandom = read_urandom_into_untouched_page(&pm, &m);
    let (mut r, w) = write_untouched_page_into_pipe(&m);
    vmsplice_untouched_page(&pm, &m, &mut r, &w);
    let _ramdisk = o_direct_through_untouched_pages(&pm, &m);
    Ok(())
}

/// Where T17 points the kernel: the start of map page
/// [`window_page`]`(i)` in `m`.
fn window_ptr(m: &Mapping, i: usize) -> *mut libc::c_void {
    window_addr(m, i) as *mut libc::c_void
}

/// T17: read() from a tmpfs file into untouched window 8; returns the
/// file, open.
fn read_file_into_untouched_page(pm: &PagedMap, m: &Mapping) -> File {
    // read() from a tmpfs file into untouched page 8 (copy_to_user faults).
    let path = format!("/tmp/t17-{}.dat", std::process::id());
    ok(
        std::fs::write(&path, page_image(700)),
        "writing the source file",
    );
    let f = ok(File::open(&path), "open source file");
    let _ = std::fs::remove_file(&path);
    // SAFETY: page 8 of our mapping is writable and PAGE bytes long.
    let n = unsafe { libc::read(f.as_raw_fd(), window_ptr(m, 8), PAGE) };
    assert_eq!(
        n,
        PAGE as isize,
        "read() from a file into an untouched page: {}",
        std::io::Error::last_os_error()
    );
    assert!(
        pm.lookup_page(window_page(8)) == page_image(700),
        "LOOKUP_ELEM after read() from a file"
    );
    f
}

/// T17: read() from /dev/urandom into untouched window 9; returns
/// /dev/urandom, open.
fn read_urandom_into_untouched_page(pm: &PagedMap, m: &Mapping) -> File {
    // read() from /dev/urandom into untouched page 9.
    let rnd = ok(File::open("/dev/urandom"), "open /dev/urandom");
    // SAFETY: page 9 of our mapping is writable and PAGE bytes long.
    let n = unsafe { libc::read(rnd.as_raw_fd(), window_ptr(m, 9), PAGE) };
    assert_eq!(
        n,
        PAGE as isize,
        "read() from /dev/urandom: {}",
        std::io::Error::last_os_error()
    );
    let got = pm.lookup_page(window_page(9));
    assert!(
        got == m.read_bytes(window_page(9) * PAGE, PAGE),
        "LOOKUP_ELEM and the mapping disagree after reading /dev/urandom"
    );
    assert!(
        got.iter().any(|&b| b != 0),
        "page 9 still zero after reading /dev/urandom into it"
    );
    rnd
}

/// T17: write() from untouched window 0 into a fresh pipe; returns the
/// pipe's (read, write) ends for the vmsplice step.
fn write_untouched_page_into_pipe(m: &Mapping) -> (File, File) {
    // write() from untouched page 0 into a pipe (copy_from_user faults).
    let (r, w) = crate::child::pipe();
    let (mut r, w) = (File::from(r), File::from(w));
    // SAFETY: page 0 is mapped and PAGE bytes long.
    let n = unsafe { libc::write(w.as_raw_fd(), window_ptr(m, 0), PAGE) };
    assert_eq!(
        n,
        PAGE as isize,
        "write() from an untouched page: {}",
        std::io::Error::last_os_error()
    );
    let mut buf = vec![0u8; PAGE];
    ok(r.read_exact(&mut buf), "reading the pipe");
    expect_page(&buf, window_page(0), "write() from an untouched page");
    (r, w)
}

/// T17: vmsplice() of untouched window 1 into the pipe `r`/`w`.
fn vmsplice_untouched_page(pm: &PagedMap, m: &Mapping, r: &mut File, w: &File) {
    // vmsplice() pins untouched page 1 by GUP; the pipe then references
    // the map page itself, so a later update shows when the pipe is read.
    let iov = libc::iovec {
        iov_base: window_ptr(m, 1),
        iov_len: PAGE,
    };
    // SAFETY: one iovec over our mapped page.
    let n = unsafe { libc::vmsplice(w.as_raw_fd(), &iov, 1, 0) };
    assert_eq!(
        n,
        PAGE as isize,
        "vmsplice of an untouched page: {}",
        std::io::Error::last_os_error()
    );
    ok(
        pm.map.update_idx(window_page(1) as u32, &page_image(701)),
        "UPDATE_ELEM of page 1",
    );
    let mut buf = vec![0u8; PAGE];
    ok(r.read_exact(&mut buf), "reading the vmspliced pipe");
    expect_page(
        &buf,
        701,
        "vmspliced page after UPDATE_ELEM (pipe must hold the map page itself)",
    );
}

/// T17: O_DIRECT write from untouched window 2 to /dev/ram0, then read
/// back into untouched window 10; returns /dev/ram0, open.
fn o_direct_through_untouched_pages(pm: &PagedMap, m: &Mapping) -> File {
    // O_DIRECT: the block layer pins the pages (FOLL_PIN) for the bio.
    // The VM's kernel always has /dev/ram0 (kconfig/bpf.config:
    // CONFIG_BLK_DEV_RAM=y, CONFIG_BLK_DEV_RAM_COUNT=1).
    let dev = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open("/dev/ram0")
        .unwrap_or_else(|e| {
            panic!(
                "opening /dev/ram0 with O_DIRECT: {} (the kernel should have a ramdisk: CONFIG_BLK_DEV_RAM=y, CONFIG_BLK_DEV_RAM_COUNT=1)",
                err_name(&e)
            )
        });
    // SAFETY: page 2 is mapped, page-aligned and PAGE bytes long.
    let n = unsafe { libc::pwrite(dev.as_raw_fd(), window_ptr(m, 2), PAGE, 0) };
    assert_eq!(
        n,
        PAGE as isize,
        "O_DIRECT write from an untouched page: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: page 10 likewise.
    let n = unsafe { libc::pread(dev.as_raw_fd(), window_ptr(m, 10), PAGE, 0) };
    assert_eq!(
        n,
        PAGE as isize,
        "O_DIRECT read into an untouched page: {}",
        std::io::Error::last_os_error()
    );
    assert!(
        pm.lookup_page(window_page(10)) == page_image(window_page(2)),
        "LOOKUP_ELEM after the O_DIRECT round trip via /dev/ram0"
    );
    dev
}
