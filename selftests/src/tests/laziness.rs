//! T01-T03: the point of the patch. mmap() of the eager kernel inserts
//! every page; the lazy ones insert none and fault pages in on touch,
//! while the VMA keeps the flags the eager path gave it.

use super::common::*;

/// 8 MiB of 4 KiB elements.
const PAGES: usize = 2048;

/// T01: an untouched 8 MiB mapping has no resident pages (P) / all (U),
/// by smaps, mincore() and pagemap.
pub fn t01_untouched_mapping_has_no_rss(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(PAGES);
    let m = pm.map_rw();
    let v = vma_at(m.addr());
    assert_eq!(v.name, "anon_inode:bpf-map", "name of the map's VMA");
    assert_eq!(
        (v.start, v.len()),
        (m.addr(), m.len()),
        "bounds of the map's VMA"
    );
    let full = m.len() as u64;
    assert_eq!(
        v.rss_bytes(),
        ctx.pick(0, full),
        "{ctx}: smaps Rss of an untouched 8 MiB mapping (bytes)"
    );

    let resident = ok(mm::mincore(m.addr(), m.len()), "mincore")
        .iter()
        .filter(|&&b| b & 1 != 0)
        .count();
    assert_eq!(
        resident,
        ctx.pick(0, PAGES),
        "{ctx}: mincore() resident pages of an untouched mapping"
    );

    let present = present_pages(m.addr(), PAGES).len();
    assert_eq!(
        present,
        ctx.pick(0, PAGES),
        "{ctx}: pagemap present pages of an untouched mapping"
    );
    Ok(())
}

/// T02: touching pages {0, k, last} makes exactly those resident (P) or
/// their windows (W), at the cost of one minor fault each; U has
/// everything resident already and takes no fault.
pub fn t02_touch_three_pages(ctx: &Ctx) -> Result<(), Skip> {
    let touched = [0, 1000, PAGES - 1];
    let pm = PagedMap::new(PAGES);
    touched.iter().for_each(|&p| pm.fill(p));
    let m = pm.map_rw();

    warm_up_fault_counting();
    let faults = faults_to_read(&m, &touched);

    // Three windows on prefault as well: the pages are far apart.
    if ctx.is_lazy() {
        assert!(
            faults == 3,
            "{ctx}: touching 3 untouched pages took {faults} minor faults, expected 3 (one per page)"
        );
    } else {
        assert!(
            faults == 0,
            "{ctx}: touching 3 pre-populated pages took {faults} minor faults, expected 0"
        );
    }
    let want = ctx.present_after(0..PAGES, &touched);
    assert_eq!(
        rss(m.addr()),
        (want.len() * PAGE) as u64,
        "{ctx}: Rss after touching pages {touched:?} of 8 MiB"
    );
    let present = present_pages(m.addr(), PAGES);
    assert!(
        present == want,
        "{ctx}: pagemap present pages after touching {touched:?}: {} pages {}, expected {} pages {}",
        present.len(),
        ranges(&present),
        want.len(),
        ranges(&want)
    );
    for p in touched {
        check_page(&m, p, p, "data of a touched page");
    }
    Ok(())
}

/// T03: VmFlags keep VM_DONTEXPAND, VM_DONTDUMP and VM_MIXEDMAP (de dd mm)
/// on both kernels; wr/mw only for writable mappings; never me/ex.
pub fn t03_vmflags_mixedmap_dontdump(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(4);
    pm.fill_all();
    for (prot, label) in [(RW, "writable"), (RO, "read-only")] {
        let m = ok(pm.mmap(4, prot, 0), label);
        for when in ["after mmap", "after a fault"] {
            let v = vma_at(m.addr());
            let flags = v.vm_flags.join(" ");
            for f in ["rd", "sh", "mr", "de", "dd", "mm"] {
                assert!(
                    v.has_flag(f),
                    "{ctx}: {label} mapping {when}: VmFlags [{flags}] lack {f:?}"
                );
            }
            for f in ["me", "ex"] {
                assert!(
                    !v.has_flag(f),
                    "{ctx}: {label} mapping {when}: VmFlags [{flags}] have {f:?}"
                );
            }
            let writable = prot == RW;
            assert_eq!(
                v.has_flag("wr"),
                writable,
                "{ctx}: {label} mapping {when}: 'wr' in [{flags}]"
            );
            assert_eq!(
                v.has_flag("mw"),
                writable,
                "{ctx}: {label} mapping {when}: 'mw' in [{flags}]"
            );
            check_page(&m, 2, 2, label);
        }
    }
    Ok(())
}
