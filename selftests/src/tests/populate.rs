//! T09-T10: explicit population still fills the whole mapping, and
//! read-only mappings stay read-only whether or not a page is present.

use super::common::*;

const PAGES: usize = 512;
const SAMPLE: [usize; 4] = [0, 1, 255, PAGES - 1];

/// T09: MAP_POPULATE, MADV_POPULATE_READ/WRITE and mlock() leave the
/// mapping fully resident on both kernels.
pub fn t09_populate_fills_everything(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(PAGES);
    SAMPLE.iter().for_each(|&p| pm.fill(p));
    let full = (PAGES * PAGE) as u64;

    let populated = ok(
        mm::mmap(
            0,
            PAGES * PAGE,
            RW,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            Some(pm.map.fd()),
            0,
        ),
        "mmap(MAP_POPULATE)",
    );
    let after_populate = rss(populated.addr());
    assert_eq!(after_populate, full, "{ctx}: Rss after mmap(MAP_POPULATE)");
    assert_eq!(
        present_pages(populated.addr(), PAGES).len(),
        PAGES,
        "{ctx}: present pages after MAP_POPULATE"
    );
    SAMPLE
        .iter()
        .for_each(|&p| check_page(&populated, p, p, "MAP_POPULATE mapping"));
    drop(populated);

    for (advice, name) in [
        (mm::MADV_POPULATE_READ, "MADV_POPULATE_READ"),
        (mm::MADV_POPULATE_WRITE, "MADV_POPULATE_WRITE"),
    ] {
        let m = pm.map_rw();
        ok(mm::madvise(m.addr(), m.len(), advice), name);
        assert_eq!(rss(m.addr()), full, "{ctx}: Rss after {name}");
        SAMPLE.iter().for_each(|&p| check_page(&m, p, p, name));
    }
    let ro = ok(pm.mmap(PAGES, RO, 0), "read-only mmap");
    ok(
        mm::madvise(ro.addr(), ro.len(), mm::MADV_POPULATE_READ),
        "MADV_POPULATE_READ on a read-only mapping",
    );
    assert_eq!(
        rss(ro.addr()),
        full,
        "{ctx}: Rss after MADV_POPULATE_READ of a read-only mapping"
    );
    expect_errno(
        mm::madvise(ro.addr(), ro.len(), mm::MADV_POPULATE_WRITE),
        &[libc::EINVAL],
        "MADV_POPULATE_WRITE on a read-only mapping",
    );
    drop(ro);

    let m = pm.map_rw();
    ok(mm::mlock(m.addr(), m.len()), "mlock");
    let v = vma_at(m.addr());
    assert_eq!(v.rss_bytes(), full, "{ctx}: Rss after mlock");
    // VM_SPECIAL mappings are populated but never marked VM_LOCKED.
    assert!(
        !v.has_flag("lo"),
        "{ctx}: mlock set VM_LOCKED on the map VMA: [{}]",
        v.vm_flags.join(" ")
    );
    SAMPLE
        .iter()
        .for_each(|&p| check_page(&m, p, p, "mlocked mapping"));
    ok(mm::munlock(m.addr(), m.len()), "munlock");
    Ok(())
}

/// T09: MAP_POPULATE|MAP_NONBLOCK does not populate: nothing resident on
/// P, everything on U (eager mmap).
pub fn t09_populate_nonblock(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(PAGES);
    pm.fill(7);
    let m = ok(
        mm::mmap(
            0,
            PAGES * PAGE,
            RW,
            libc::MAP_SHARED | libc::MAP_POPULATE | libc::MAP_NONBLOCK,
            Some(pm.map.fd()),
            0,
        ),
        "mmap(MAP_POPULATE|MAP_NONBLOCK)",
    );
    assert_eq!(
        rss(m.addr()),
        ctx.pick_at_mmap(m.len() / PAGE, 0, m.len() as u64),
        "{ctx}: Rss after mmap(MAP_POPULATE|MAP_NONBLOCK)"
    );
    check_page(&m, 7, 7, "MAP_NONBLOCK mapping");
    assert_eq!(
        rss(m.addr()),
        ctx.rss_after(0..PAGES, &[7]),
        "{ctx}: Rss after reading page 7 of the MAP_NONBLOCK mapping"
    );
    Ok(())
}

/// T10: writes to a read-only mapping are SIGSEGV (not SIGBUS), present
/// page or not; mprotect() to write or exec is EACCES. P = U.
pub fn t10_readonly_mapping(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(4);
    pm.fill_all();
    let m = ok(pm.mmap(4, RO, 0), "read-only mmap");
    check_page(&m, 0, 0, "read-only mapping"); // page 0 (W: 0-3) now present

    refused_write(&m, 8, "write to a present page of a read-only mapping");
    refused_write(
        &m,
        2 * PAGE,
        "write to an untouched page of a read-only mapping",
    );
    let present = present_pages(m.addr(), 4);
    assert_eq!(
        present,
        ctx.present_after(0..4, &[0]),
        "{ctx}: present pages of the read-only mapping"
    );

    expect_errno(
        mm::mprotect(m.addr(), m.len(), RW),
        &[libc::EACCES],
        "mprotect(PROT_READ|PROT_WRITE) of a read-only mapping",
    );
    expect_errno(
        mm::mprotect(m.addr(), PAGE, RW),
        &[libc::EACCES],
        "mprotect(PROT_WRITE) of one page",
    );
    expect_errno(
        mm::mprotect(m.addr(), m.len(), RO | libc::PROT_EXEC),
        &[libc::EACCES],
        "mprotect(PROT_EXEC) of a read-only mapping",
    );
    let w = pm.map_rw();
    expect_errno(
        mm::mprotect(w.addr(), w.len(), RW | libc::PROT_EXEC),
        &[libc::EACCES],
        "mprotect(PROT_EXEC) of a writable mapping",
    );

    // The write attempts changed nothing.
    for p in 0..4 {
        check_page(&m, p, p, "read-only mapping after the refused writes");
    }
    Ok(())
}
