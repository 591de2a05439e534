//! T21-T22: the other mmap-able maps must not change. The ringbuf still
//! populates eagerly with the old vm_ops (no .fault: a zapped page is
//! SIGBUS on P too); the arena keeps its own vm_ops. P = U.

use super::common::*;
use crate::sys::bpf::BPF_MAP_TYPE_RINGBUF;

/// T21: ringbuf mappings are fully resident right after mmap(), zapped
/// pages do not come back, and the data pages cannot be mapped writable.
pub fn t21_ringbuf_stays_eager(ctx: &Ctx) -> Result<(), Skip> {
    const DATA: usize = 4 * PAGE;
    let rb = ok(
        MapSpec {
            map_type: BPF_MAP_TYPE_RINGBUF,
            max_entries: DATA as u32,
            ..Default::default()
        }
        .create(),
        "creating a 16 KiB ringbuf",
    );
    let cons = ok(
        mm::map_shared(rb.fd(), PAGE, RW, 0),
        "writable mmap of the consumer page",
    );
    assert_eq!(
        rss(cons.addr()),
        PAGE as u64,
        "{ctx}: Rss of the consumer page right after mmap"
    );
    // Producer page plus the data area mapped twice.
    let prod_len = PAGE + 2 * DATA;
    let prod = ok(
        mm::map_shared(rb.fd(), prod_len, RO, PAGE as u64),
        "read-only mmap of producer + data pages",
    );
    let v = vma_at(prod.addr());
    assert_eq!(
        v.rss_bytes(),
        prod_len as u64,
        "{ctx}: Rss of the ringbuf data mapping right after mmap"
    );
    for f in ["de", "dd", "mm"] {
        assert!(
            v.has_flag(f),
            "{ctx}: ringbuf VmFlags [{}] lack {f}",
            v.vm_flags.join(" ")
        );
    }
    assert_eq!(prod.read_u64(0), 0, "producer position of an empty ringbuf");

    expect_errno(
        mm::map_shared(rb.fd(), PAGE, RW, PAGE as u64),
        &[libc::EPERM],
        "writable mmap of the producer page",
    );
    expect_errno(
        mm::map_shared(rb.fd(), PAGE, RW, 2 * PAGE as u64),
        &[libc::EPERM],
        "writable mmap of a data page",
    );
    expect_errno(
        mm::map_shared(rb.fd(), 2 * PAGE, RW, 0),
        &[libc::EPERM],
        "writable mmap of consumer + producer pages",
    );

    ok(
        mm::madvise(prod.addr() + PAGE, PAGE, libc::MADV_DONTNEED),
        "MADV_DONTNEED of a ringbuf data page",
    );
    assert_eq!(
        rss(prod.addr()),
        (prod_len - PAGE) as u64,
        "{ctx}: Rss after zapping one data page"
    );
    expect_signal("touching a zapped ringbuf page", libc::SIGBUS, || {
        prod.read_u64(PAGE);
    });
    // The untouched neighbours are unaffected.
    assert_eq!(
        prod.read_u64(2 * PAGE),
        0,
        "ringbuf data page next to the zapped one"
    );
    Ok(())
}

/// T22: arena pages appear only when touched; partial munmap and mremap
/// are refused; fork children do not inherit the mapping.
pub fn t22_arena_unchanged(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 16;
    let (_arena, m) = arena_mapping(PAGES);
    check_arena_pages_appear_when_touched(ctx, &m, PAGES);

    expect_errno(
        mm::munmap(m.addr(), PAGE),
        &[libc::EINVAL],
        "partial munmap of the arena",
    );
    let dst = ok(mm::reserve(PAGES * PAGE, PAGE), "reserving a destination");
    check_arena_mremap_refused(&m, &dst, PAGES);

    check_fork_child_lacks_arena(&m);
    Ok(())
}

/// T22: a fresh arena mapping `m` of `pages` pages has no Rss; writing
/// page 3 and reading page 5 make exactly those two present.
fn check_arena_pages_appear_when_touched(ctx: &Ctx, m: &Mapping, pages: usize) {
    let v = vma_at(m.addr());
    assert_eq!(v.rss_bytes(), 0, "{ctx}: Rss of a fresh arena mapping");
    for f in ["de", "dc"] {
        assert!(
            v.has_flag(f),
            "{ctx}: arena VmFlags [{}] lack {f}",
            v.vm_flags.join(" ")
        );
    }
    // VM_MIXEDMAP comes with 0003, whose fault maps the page itself.
    assert_eq!(
        v.has_flag("mm"),
        !ctx.kernel.arena_fault_returns_page(),
        "{ctx}: VM_MIXEDMAP (mm) in the arena's VmFlags [{}]",
        v.vm_flags.join(" ")
    );
    m.write_u64(3 * PAGE, 0xA3E4A);
    assert_eq!(m.read_u64(5 * PAGE), 0, "a fresh arena page reads zero");
    assert_eq!(
        rss(m.addr()),
        2 * PAGE as u64,
        "{ctx}: Rss after touching 2 arena pages"
    );
    assert_eq!(
        present_pages(m.addr(), pages),
        vec![3, 5],
        "{ctx}: present arena pages"
    );
}

/// T22: mremap() of the `pages`-page arena mapping `m` to `dst`, or
/// shrinking or growing it in place, is refused and leaves the VMA and
/// its data as they were.
fn check_arena_mremap_refused(m: &Mapping, dst: &Mapping, pages: usize) {
    expect_errno(
        mm::mremap(
            m.addr(),
            m.len(),
            m.len(),
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            dst.addr(),
        ),
        &[libc::EINVAL],
        "mremap moving the arena",
    );
    expect_errno(
        mm::mremap(m.addr(), m.len(), m.len() / 2, 0, 0),
        &[libc::EINVAL],
        "mremap shrinking the arena",
    );
    expect_errno(
        mm::mremap(m.addr(), m.len(), 2 * m.len(), 0, 0),
        &[libc::EFAULT],
        "mremap growing the arena",
    );
    assert_eq!(
        vma_at(m.addr()).len(),
        pages * PAGE,
        "arena VMA after the refused operations"
    );
    assert_eq!(
        m.read_u64(3 * PAGE),
        0xA3E4A,
        "arena data after the refused operations"
    );
}

/// T22: a fork child has no VMA at the arena's address and gets SIGSEGV
/// touching it.
fn check_fork_child_lacks_arena(m: &Mapping) {
    let addr = m.addr();
    run_in_child("fork child", || {
        let v = crate::proc::find_vma(addr).expect("smaps");
        assert!(
            v.is_none(),
            "the fork child inherited the arena mapping: {v:?}"
        );
    });
    expect_signal(
        "fork child touching the arena address",
        libc::SIGSEGV,
        || {
            m.read_u64(3 * PAGE);
        },
    );
}
