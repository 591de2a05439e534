//! T12-T14: split, moved and zapped VMAs. The fault handler computes the
//! map page from vmf->pgoff, so every piece of a split or moved VMA must
//! still show its own page; a zapped page must come back (P) where the
//! eager kernel, lacking .fault, raises SIGBUS (U).

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::common::*;

/// T12: unmap page 3, make pages 5-6 read-only, then touch every piece.
pub fn t12_split_vma_pgoff(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(8);
    pm.fill_all();
    let m = pm.map_rw();
    let base = m.addr();
    ok(mm::munmap(base + 3 * PAGE, PAGE), "munmap of page 3");
    ok(
        mm::mprotect(base + 5 * PAGE, 2 * PAGE, RO),
        "mprotect of pages 5-6",
    );

    for (first, end, perms) in [
        (0, 3, "rw-s"),
        (4, 5, "rw-s"),
        (5, 7, "r--s"),
        (7, 8, "rw-s"),
    ] {
        let v = vma_at(base + first * PAGE);
        assert_eq!(
            (v.start, v.end, v.perms.as_str(), v.pgoff),
            (
                base + first * PAGE,
                base + end * PAGE,
                perms,
                (first * PAGE) as u64
            ),
            "VMA of pages {first}..{end} after the splits"
        );
        assert_eq!(
            v.rss_bytes(),
            ctx.pick_at_mmap(pm.pages, 0, ((end - first) * PAGE) as u64),
            "{ctx}: Rss of pages {first}..{end}"
        );
    }
    for p in [7, 5, 0, 6, 4, 2, 1] {
        check_page_full(&m, p, p, &format!("page {p} after the splits"));
    }
    for p in [0, 4, 7] {
        m.write_u64(p * PAGE + 72, 0x7000 + p as u64);
        assert_eq!(
            pm.lookup_word(p, 9),
            0x7000 + p as u64,
            "LOOKUP_ELEM after a write to piece at page {p}"
        );
    }
    expect_signal("write to the read-only piece", libc::SIGSEGV, || {
        m.write_u64(5 * PAGE, 1)
    });
    expect_signal("read of the unmapped page 3", libc::SIGSEGV, || {
        m.read_u64(3 * PAGE);
    });
    Ok(())
}

/// T13: mremap() cannot grow the mapping, can shrink it, and moving a
/// half-touched mapping keeps the touched pages and faults the rest in
/// correctly at the new address.
pub fn t13_mremap(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(8);
    pm.fill_all();

    check_mremap_cannot_grow(&pm);
    check_mremap_shrinks(&pm);

    // Move a mapping whose pages 0..4 are touched and 4..8 are not.
    let src = pm.map_rw();
    let touched = [0, 1, 2, 3];
    std::hint::black_box(touch_pages(&src, &touched));
    assert_eq!(
        rss(src.addr()),
        ctx.rss_after(0..8, &touched),
        "{ctx}: Rss before the move"
    );
    let moved = move_to_reserved_range(src);
    check_moved_mapping(ctx, &pm, &moved, &touched);
    drop(moved);
    // The move must leave the write-active count balanced.
    ok(
        pm.map.freeze(),
        "BPF_MAP_FREEZE after unmapping the moved mapping",
    );
    Ok(())
}

/// T13: growing a 4-page mapping of `pm`, in place or with
/// MREMAP_MAYMOVE, is refused (EFAULT) and leaves it intact.
fn check_mremap_cannot_grow(pm: &PagedMap) {
    let small = ok(pm.mmap(4, RW, 0), "4-page mmap");
    expect_errno(
        mm::mremap(small.addr(), 4 * PAGE, 8 * PAGE, 0, 0),
        &[libc::EFAULT],
        "mremap growing in place",
    );
    expect_errno(
        mm::mremap(small.addr(), 4 * PAGE, 8 * PAGE, libc::MREMAP_MAYMOVE, 0),
        &[libc::EFAULT],
        "mremap growing with MREMAP_MAYMOVE",
    );
    check_page(&small, 3, 3, "mapping after the refused growth");
    drop(small);
}

/// T13: shrinking the whole 8-page mapping of `pm` to 4 pages keeps it in
/// place, removes the tail and keeps the first 4 pages right.
fn check_mremap_shrinks(pm: &PagedMap) {
    let (addr, _) = pm.map_rw().leak();
    let shrunk = ok(
        mm::mremap(addr, 8 * PAGE, 4 * PAGE, 0, 0),
        "mremap shrinking 8 -> 4 pages",
    );
    assert_eq!(shrunk, addr, "shrinking mremap moved the mapping");
    // SAFETY: the shrunk mapping is ours; the tail was unmapped by mremap.
    let shrunk = unsafe { Mapping::from_raw(addr, 4 * PAGE) };
    assert_eq!(vma_at(addr).len(), 4 * PAGE, "VMA length after shrinking");
    expect_errno(
        mm::mincore(addr + 4 * PAGE, PAGE),
        &[libc::ENOMEM],
        "mincore of the removed tail",
    );
    (0..4).for_each(|p| check_page(&shrunk, p, p, "shrunk mapping"));
    drop(shrunk);
}

/// Moves the 8-page mapping `src` with mremap(MREMAP_MAYMOVE|MREMAP_FIXED)
/// onto a freshly reserved range; checks that it landed there and that
/// nothing is left at the old address.
fn move_to_reserved_range(src: Mapping) -> Mapping {
    let dst = ok(mm::reserve(8 * PAGE, PAGE), "reserving the destination");
    let (src_addr, _) = src.leak();
    let (dst_addr, _) = dst.leak();
    let moved = ok(
        mm::mremap(
            src_addr,
            8 * PAGE,
            8 * PAGE,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            dst_addr,
        ),
        "mremap(MREMAP_MAYMOVE|MREMAP_FIXED)",
    );
    assert_eq!(moved, dst_addr, "mremap destination");
    // SAFETY: mremap moved the whole mapping there.
    let moved = unsafe { Mapping::from_raw(dst_addr, 8 * PAGE) };
    expect_errno(
        mm::mincore(src_addr, 8 * PAGE),
        &[libc::ENOMEM],
        "mincore of the old address",
    );
    moved
}

/// T13 after the move: the VMA, Rss and present pages are those of the
/// `touched` pages before it, every page reads right, and a write at the
/// new address reaches the map.
fn check_moved_mapping(ctx: &Ctx, pm: &PagedMap, moved: &Mapping, touched: &[usize]) {
    let dst_addr = moved.addr();
    let v = vma_at(dst_addr);
    assert_eq!((v.start, v.len()), (dst_addr, 8 * PAGE), "moved VMA");
    assert_eq!(
        v.rss_bytes(),
        ctx.rss_after(0..8, touched),
        "{ctx}: Rss right after the move"
    );
    assert_eq!(
        present_pages(dst_addr, 8),
        ctx.present_after(0..8, touched),
        "{ctx}: present pages after the move"
    );
    for p in [7, 0, 5, 3, 4, 1, 6, 2] {
        check_page_full(moved, p, p, &format!("page {p} at the new address"));
    }
    moved.write_u64(6 * PAGE, 0x6666);
    assert_eq!(
        pm.lookup_word(6, 0),
        0x6666,
        "LOOKUP_ELEM after a write at the new address"
    );
}

/// A populated 8-page mapping whose PTEs were then zapped by DONTNEED.
fn zapped(ctx: &Ctx) -> (PagedMap, Mapping) {
    let pm = PagedMap::new(8);
    pm.fill_all();
    let m = pm.map_rw();
    ok(
        mm::madvise(m.addr(), m.len(), mm::MADV_POPULATE_READ),
        "MADV_POPULATE_READ",
    );
    check_page(&m, 2, 2, "before DONTNEED");
    ok(
        mm::madvise(m.addr(), m.len(), libc::MADV_DONTNEED),
        "MADV_DONTNEED",
    );
    assert_eq!(rss(m.addr()), 0, "{ctx}: Rss after MADV_DONTNEED");
    (pm, m)
}

/// T14: touching a page after MADV_DONTNEED re-faults the map's data on
/// P (not zeros); U has no .fault and raises SIGBUS.
pub fn t14_dontneed_then_touch(ctx: &Ctx) -> Result<(), Skip> {
    let (pm, m) = zapped(ctx);
    match ctx.kernel {
        Kernel::Mainline | Kernel::Direct | Kernel::Prefault | Kernel::Adaptive => {
            for p in 0..8 {
                check_page_full(&m, p, p, &format!("{ctx}: page {p} after DONTNEED"));
            }
            assert_eq!(
                rss(m.addr()),
                m.len() as u64,
                "{ctx}: Rss after re-touching"
            );
            m.write_u64(3 * PAGE, 0x3333);
            assert_eq!(
                pm.lookup_word(3, 0),
                0x3333,
                "LOOKUP_ELEM after a write to a re-faulted page"
            );
        }
        Kernel::Eager => {
            expect_signal("read after DONTNEED", libc::SIGBUS, || {
                m.read_u64(2 * PAGE);
            });
            expect_signal("write after DONTNEED", libc::SIGBUS, || {
                m.write_u64(5 * PAGE, 1)
            });
        }
    }
    Ok(())
}

/// T14: /proc/self/mem after DONTNEED: data on P, EIO on U (GUP hits the
/// same missing .fault).
pub fn t14_dontneed_then_proc_mem(ctx: &Ctx) -> Result<(), Skip> {
    let (_pm, m) = zapped(ctx);
    let mem = ok(File::open("/proc/self/mem"), "open /proc/self/mem");
    let mut buf = vec![0u8; PAGE];
    let r = mem.read_at(&mut buf, (m.addr() + 2 * PAGE) as u64);
    match ctx.kernel {
        Kernel::Mainline | Kernel::Direct | Kernel::Prefault | Kernel::Adaptive => {
            assert_eq!(
                ok(r, &format!("{ctx}: /proc/self/mem read after DONTNEED")),
                PAGE
            );
            assert!(
                buf == page_image(2),
                "{ctx}: /proc/self/mem returned wrong data for a zapped page"
            );
        }
        Kernel::Eager => expect_errno(
            r,
            &[libc::EIO],
            &format!("{ctx}: /proc/self/mem read after DONTNEED"),
        ),
    }
    Ok(())
}

/// T14: MADV_POPULATE_READ after DONTNEED: repopulates on P, EFAULT on U.
pub fn t14_dontneed_then_populate_read(ctx: &Ctx) -> Result<(), Skip> {
    let (_pm, m) = zapped(ctx);
    let r = mm::madvise(m.addr(), m.len(), mm::MADV_POPULATE_READ);
    match ctx.kernel {
        Kernel::Mainline | Kernel::Direct | Kernel::Prefault | Kernel::Adaptive => {
            ok(r, &format!("{ctx}: MADV_POPULATE_READ after DONTNEED"));
            assert_eq!(
                rss(m.addr()),
                m.len() as u64,
                "{ctx}: Rss after repopulating"
            );
            (0..8).for_each(|p| check_page(&m, p, p, "repopulated page"));
        }
        Kernel::Eager => {
            expect_errno(
                r,
                &[libc::EFAULT],
                &format!("{ctx}: MADV_POPULATE_READ after DONTNEED"),
            );
            assert_eq!(rss(m.addr()), 0, "{ctx}: Rss after the failed populate");
        }
    }
    Ok(())
}
