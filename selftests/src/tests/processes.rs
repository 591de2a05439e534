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

/// T16: /proc/self/mem, process_vm_readv and `/proc/<child>/mem` on pages
/// nobody touched return the right bytes; a /proc/self/mem write lands.
pub fn t16_remote_access_untouched(ctx: &Ctx) -> Result<(), Skip> {
    // Pages in windows of their own, so each access is to an untouched
    // page on the prefault kernel too.
    const PAGES: usize = 6 * FAULT_WINDOW;
    let w = |i: usize| i * FAULT_WINDOW;
    let pm = PagedMap::new(PAGES);
    pm.fill_all();
    let m = pm.map_rw();
    let at = |i: usize| (m.addr() + w(i) * PAGE) as u64;
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
        ctx.rss_after(0..PAGES, &[w(1), w(2), w(3)]),
        "{ctx}: Rss after the remote accesses"
    );

    let (ready, done) = (Gate::new(), Gate::new());
    let child = spawn(|| {
        ready.open();
        done.wait();
        // Pages 4 and 5 were faulted into this process by the parent.
        assert_eq!(
            rss(m.addr()),
            ctx.rss_after(0..PAGES, &[w(1), w(2), w(3), w(4), w(5)]),
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
    Ok(())
}

/// T17: kernel accesses to untouched pages: read() into them from a file
/// and /dev/urandom, write() from them into a pipe, vmsplice() (GUP) and
/// O_DIRECT against /dev/ram0 (which the VM's kernel must have).
pub fn t17_gup_kernel_access(_ctx: &Ctx) -> Result<(), Skip> {
    // Map pages 0-2 and 8-10 are at win(0)-win(2) and win(8)-win(10): windows of
    // their own, so each access is to an untouched page on prefault too.
    let win = |i: usize| i * FAULT_WINDOW;
    let pm = PagedMap::new(win(11));
    (0..4).for_each(|i| pm.fill(win(i)));
    let m = pm.map_rw();
    let page_ptr = |i: usize| (m.addr() + win(i) * PAGE) as *mut libc::c_void;

    // read() from a tmpfs file into untouched page 8 (copy_to_user faults).
    let path = format!("/tmp/t17-{}.dat", std::process::id());
    ok(
        std::fs::write(&path, page_image(700)),
        "writing the source file",
    );
    let f = ok(File::open(&path), "open source file");
    let _ = std::fs::remove_file(&path);
    // SAFETY: page 8 of our mapping is writable and PAGE bytes long.
    let n = unsafe { libc::read(f.as_raw_fd(), page_ptr(8), PAGE) };
    assert_eq!(
        n,
        PAGE as isize,
        "read() from a file into an untouched page: {}",
        std::io::Error::last_os_error()
    );
    assert!(
        pm.lookup_page(win(8)) == page_image(700),
        "LOOKUP_ELEM after read() from a file"
    );

    // read() from /dev/urandom into untouched page 9.
    let rnd = ok(File::open("/dev/urandom"), "open /dev/urandom");
    // SAFETY: as above.
    let n = unsafe { libc::read(rnd.as_raw_fd(), page_ptr(9), PAGE) };
    assert_eq!(
        n,
        PAGE as isize,
        "read() from /dev/urandom: {}",
        std::io::Error::last_os_error()
    );
    let got = pm.lookup_page(win(9));
    assert!(
        got == m.read_bytes(win(9) * PAGE, PAGE),
        "LOOKUP_ELEM and the mapping disagree after reading /dev/urandom"
    );
    assert!(
        got.iter().any(|&b| b != 0),
        "page 9 still zero after reading /dev/urandom into it"
    );

    // write() from untouched page 0 into a pipe (copy_from_user faults).
    let (r, w) = crate::child::pipe();
    let (mut r, w) = (File::from(r), File::from(w));
    // SAFETY: page 0 is mapped and PAGE bytes long.
    let n = unsafe { libc::write(w.as_raw_fd(), page_ptr(0), PAGE) };
    assert_eq!(
        n,
        PAGE as isize,
        "write() from an untouched page: {}",
        std::io::Error::last_os_error()
    );
    let mut buf = vec![0u8; PAGE];
    ok(r.read_exact(&mut buf), "reading the pipe");
    expect_page(&buf, win(0), "write() from an untouched page");

    // vmsplice() pins untouched page 1 by GUP; the pipe then references
    // the map page itself, so a later update shows when the pipe is read.
    let iov = libc::iovec {
        iov_base: page_ptr(1),
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
        pm.map.update_idx(win(1) as u32, &page_image(701)),
        "UPDATE_ELEM of page 1",
    );
    ok(r.read_exact(&mut buf), "reading the vmspliced pipe");
    expect_page(
        &buf,
        701,
        "vmspliced page after UPDATE_ELEM (pipe must hold the map page itself)",
    );

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
    let n = unsafe { libc::pwrite(dev.as_raw_fd(), page_ptr(2), PAGE, 0) };
    assert_eq!(
        n,
        PAGE as isize,
        "O_DIRECT write from an untouched page: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: page 10 likewise.
    let n = unsafe { libc::pread(dev.as_raw_fd(), page_ptr(10), PAGE, 0) };
    assert_eq!(
        n,
        PAGE as isize,
        "O_DIRECT read into an untouched page: {}",
        std::io::Error::last_os_error()
    );
    assert!(
        pm.lookup_page(win(10)) == page_image(win(2)),
        "LOOKUP_ELEM after the O_DIRECT round trip via /dev/ram0"
    );
    Ok(())
}
