//! T04-T08: what user space reads and writes through the mapping is the
//! map's memory, whoever wrote it and at whatever offset it is mapped;
//! the same mappings are refused as before. P = U throughout, except the
//! residency cross-checks that show the lazy path was the one exercised.

use super::common::*;
use crate::asm::{self, Size, R0, R1, R2};
use std::os::fd::AsRawFd;

use crate::sys::bpf::{
    Prog, BPF_F_RDONLY, BPF_F_RDONLY_PROG, BPF_MAP_TYPE_HASH, BPF_PROG_TYPE_SOCKET_FILTER,
};
use crate::sys::ENOTSUPP;

/// T04: UPDATE_ELEM then read through an untouched page; write through
/// the mapping then LOOKUP_ELEM; two mappings at different offsets agree.
pub fn t04_syscall_and_mapping_coherent(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(16);
    let m = pm.map_rw();

    pm.fill(5);
    // The update went through the kernel's address: nothing got mapped.
    assert_eq!(
        rss(m.addr()),
        ctx.pick_at_mmap(m.len() / PAGE, 0, m.len() as u64),
        "{ctx}: Rss after UPDATE_ELEM"
    );
    check_page_full(
        &m,
        5,
        5,
        "page 5 read through the mapping after UPDATE_ELEM",
    );

    // First access to page 9 is a write.
    for w in [0, 17, 511] {
        m.write_u64(9 * PAGE + w * 8, pattern(900, w));
    }
    for w in [0, 17, 511] {
        assert_eq!(
            pm.lookup_word(9, w),
            pattern(900, w),
            "LOOKUP_ELEM of page 9 word {w} after a write through the mapping"
        );
    }

    // A second mapping of pages 6..10 at map offset 6.
    let b = ok(pm.mmap(4, RW, 6), "mmap of pages 6..10");
    m.write_u64(7 * PAGE + 8, 0x1111);
    assert_eq!(
        b.read_u64(PAGE + 8),
        0x1111,
        "page 7 via the offset mapping after a write via the first"
    );
    b.write_u64(2 * PAGE + 16, 0x2222);
    assert_eq!(
        m.read_u64(8 * PAGE + 16),
        0x2222,
        "page 8 via the first mapping after a write via the offset one"
    );
    assert_eq!(
        pm.lookup_word(8, 2),
        0x2222,
        "LOOKUP_ELEM of page 8 after a write via the offset mapping"
    );
    assert_eq!(
        b.read_u64(3 * PAGE),
        pattern(900, 0),
        "page 9 via the offset mapping"
    );
    Ok(())
}

fn load(insns: &[asm::Insn], what: &str) -> Prog {
    Prog::load(BPF_PROG_TYPE_SOCKET_FILTER, insns).unwrap_or_else(|e| panic!("loading {what}: {e}"))
}

/// A socket filter run by TEST_RUN needs at least an Ethernet header.
const PKT: [u8; 64] = [0; 64];

/// Program: *(u64 *)(elem[key] + off) = imm; return 1.
fn prog_store(map_fd: i32, key: u32, off: i16, imm: i32) -> Prog {
    let mut v = asm::lookup_prologue(map_fd, key, 2);
    v.extend([
        asm::st_mem(Size::DW, R0, off, imm),
        asm::mov64_imm(R0, 1),
        asm::exit(),
    ]);
    v.extend(asm::null_branch(-1));
    load(&v, "store program")
}

/// Program: return *(u32 *)(elem[key] + off).
fn prog_load_u32(map_fd: i32, key: u32, off: i16) -> Prog {
    let mut v = asm::lookup_prologue(map_fd, key, 1);
    v.extend([asm::ldx_mem(Size::W, R0, R0, off), asm::exit()]);
    v.extend(asm::null_branch(-1));
    load(&v, "load program")
}

#[track_caller]
fn run(p: &Prog, what: &str) -> u32 {
    ok(p.test_run(&PKT), what)
}

/// T05: a program (via bpf_map_lookup_elem) writes a page user space has
/// not touched and user space reads it; user space writes and the program
/// reads it back as retval.
pub fn t05_prog_and_mapping_coherent(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(16);
    let fd = pm.map.fd().as_raw_fd();
    let m = pm.map_rw();

    let store = prog_store(fd, 5, 24, 0x1234_5678);
    assert_eq!(
        run(&store, "store program"),
        1,
        "store program found no element 5"
    );
    assert_eq!(
        rss(m.addr()),
        ctx.pick_at_mmap(m.len() / PAGE, 0, m.len() as u64),
        "{ctx}: Rss after a program wrote the map"
    );
    assert_eq!(
        m.read_u64(5 * PAGE + 24),
        0x1234_5678,
        "program's store read through an untouched page"
    );

    m.write_u32(9 * PAGE + 32, 0xCAFE_F00D);
    let load = prog_load_u32(fd, 9, 32);
    assert_eq!(
        run(&load, "load program"),
        0xCAFE_F00D,
        "program's view of a store through the mapping"
    );

    // And the same page again after the program overwrote it.
    let store9 = prog_store(fd, 9, 32, 0x0BAD_BEEF);
    run(&store9, "second store program");
    assert_eq!(
        m.read_u64(9 * PAGE + 32),
        0x0BAD_BEEF,
        "program's store over a page user space touched"
    );
    Ok(())
}

/// T05: direct value access (BPF_PSEUDO_MAP_VALUE) to every page of a
/// one-element map whose value spans 4 pages.
pub fn t05_direct_value_every_page(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 4;
    let map = ok(
        MapSpec::mmapable_array((PAGES * PAGE) as u32, 1).create(),
        "creating a 1-element 16 KiB-value map",
    );
    let fd = map.fd().as_raw_fd();
    let m = ok(mm::map_shared(map.fd(), PAGES * PAGE, RW, 0), "mmap");

    // Writer: value[p * 4096 + 8] = 0x0D1EC000 + p for every page.
    let mut w = Vec::new();
    for p in 0..PAGES {
        w.extend(asm::ld_map_value(R1, fd, (p * PAGE) as i32));
        w.push(asm::st_mem(Size::DW, R1, 8, 0x0D1E_C000 + p as i32));
    }
    w.extend([asm::mov64_imm(R0, 1), asm::exit()]);
    let writer = load(&w, "direct-value writer");
    assert_eq!(run(&writer, "direct-value writer"), 1);
    assert_eq!(
        rss(m.addr()),
        ctx.pick_at_mmap(m.len() / PAGE, 0, m.len() as u64),
        "{ctx}: Rss after direct-value stores"
    );
    for p in 0..PAGES {
        assert_eq!(
            m.read_u64(p * PAGE + 8),
            0x0D1E_C000 + p as u64,
            "direct-value store to page {p} read via the mapping"
        );
    }

    // Reader: sum of the u32 at value[p * 4096 + 16]; one byte per page.
    for p in 0..PAGES {
        m.write_u32(p * PAGE + 16, ((p as u32) + 1) << (8 * p));
    }
    let mut r = vec![asm::mov64_imm(R0, 0)];
    for p in 0..PAGES {
        r.extend(asm::ld_map_value(R1, fd, (p * PAGE + 16) as i32));
        r.push(asm::ldx_mem(Size::W, R2, R1, 0));
        r.push(asm::add64_reg(R0, R2));
    }
    r.push(asm::exit());
    let reader = load(&r, "direct-value reader");
    assert_eq!(
        run(&reader, "direct-value reader"),
        0x0403_0201,
        "per-page bytes seen by direct-value loads"
    );
    Ok(())
}

/// T06: mmap at offset k shows page k; out-of-range and overflowing
/// offsets are refused and never map anything. Should one be accepted,
/// its memory is only read through process_vm_readv, so that a mapping
/// of the wrong memory fails this test with a message rather than killing
/// it with a signal.
pub fn t06_mmap_offsets(_ctx: &Ctx) -> Result<(), Skip> {
    const N: usize = 16;
    let pm = PagedMap::new(N);
    pm.fill_all();
    for k in [0, 1, 7, N - 1] {
        let m = ok(pm.mmap(1, RW, k), "one page at offset k");
        check_page_full(&m, 0, k, &format!("mmap(1 page, offset {k})"));
    }
    let tail = ok(pm.mmap(3, RO, N - 3), "the last 3 pages");
    (0..3).for_each(|i| check_page(&tail, i, N - 3 + i, "tail mapping"));

    expect_errno(pm.mmap(1, RW, N), &[libc::EINVAL], "mmap at offset N");
    expect_errno(
        pm.mmap(2, RW, N - 1),
        &[libc::EINVAL],
        "mmap of 2 pages at offset N-1",
    );
    expect_errno(pm.mmap(N + 1, RW, 0), &[libc::EINVAL], "mmap of N+1 pages");
    let fd = pm.map.fd().as_raw_fd();
    expect_errno(
        mm::mmap_raw(0, PAGE, RO, libc::MAP_SHARED, fd, 1 << 62),
        &[libc::EINVAL],
        "mmap at offset 1<<62",
    );

    // Offsets whose byte or page arithmetic wraps around.
    let huge = [
        !(PAGE as u64 - 1),
        1 << 63,
        0u64.wrapping_sub((N * PAGE) as u64),
        0xffff_ffff_0000_0000,
    ];
    for off in huge {
        for pages in [1, 2] {
            match mm::mmap_raw(0, pages * PAGE, RO, libc::MAP_SHARED, fd, off) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOVERFLOW)) => {}
                Err(e) => panic!(
                    "mmap({pages} pages, offset {off:#x}): expected EINVAL or EOVERFLOW, got {}",
                    err_name(&e)
                ),
                Ok(addr) => {
                    // SAFETY: the kernel just created this mapping for us.
                    let bad = unsafe { Mapping::from_raw(addr, pages * PAGE) };
                    // Whatever it maps (the map's header page, memory past
                    // the map, nothing at all), it must not be loaded
                    // from directly: the kernel reads it for us, and a
                    // fault comes back as an error instead of a signal.
                    let first = match mm::read_u64_via_kernel(addr) {
                        Ok(word) => format!("its first word reads {word:#x}"),
                        Err(e) => format!("reading it fails with {}", err_name(&e)),
                    };
                    drop(bad);
                    panic!(
                        "mmap({pages} pages, offset {off:#x}) succeeded at {addr:#x} instead of failing with EINVAL or EOVERFLOW; {first}"
                    );
                }
            }
        }
    }
    Ok(())
}

/// T07: 1000 elements of value_size 12 (elem_size 16) = 16000 bytes map
/// as 4 pages; 5 pages is EINVAL; bytes past 16000 read 0.
pub fn t07_size_rounding(_ctx: &Ctx) -> Result<(), Skip> {
    let map = ok(
        MapSpec::mmapable_array(12, 1000).create(),
        "creating 1000 x 12-byte map",
    );
    let value = |i: u32| -> Vec<u8> {
        [i, !i, 0xAAAA_AAAA]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect()
    };
    for i in 0..1000 {
        ok(map.update_idx(i, &value(i)), "UPDATE_ELEM");
    }
    expect_errno(
        mm::map_shared(map.fd(), 5 * PAGE, RO, 0),
        &[libc::EINVAL],
        "mmap of 5 pages of a 16000-byte map",
    );
    expect_errno(
        mm::map_shared(map.fd(), PAGE, RO, 4 * PAGE as u64),
        &[libc::EINVAL],
        "mmap at page 4 of a 16000-byte map",
    );
    // A length that is not a page multiple is rounded up to 4 pages.
    let m = ok(
        mm::map_shared(map.fd(), 16000, RW, 0),
        "mmap of 16000 bytes",
    );
    let last = ok(
        mm::map_shared(map.fd(), PAGE, RO, 3 * PAGE as u64),
        "mmap of page 3",
    );
    for i in [0usize, 1, 255, 256, 999] {
        assert_eq!(
            m.read_bytes(i * 16, 12),
            value(i as u32),
            "element {i} at offset {}",
            i * 16
        );
        assert_eq!(
            m.read_bytes(i * 16 + 12, 4),
            [0; 4],
            "padding of element {i}"
        );
    }
    assert_eq!(
        last.read_bytes(999 * 16 - 3 * PAGE, 12),
        value(999),
        "element 999 via the page-3 mapping"
    );
    let past = m.read_bytes(16000, 4 * PAGE - 16000);
    assert!(
        past.iter().all(|&b| b == 0),
        "bytes past 16000 are not zero: {past:?}"
    );
    Ok(())
}

/// T08: the mappings the kernel refused before it still refuses.
pub fn t08_refused_mappings(_ctx: &Ctx) -> Result<(), Skip> {
    let plain = ok(
        MapSpec::array(PAGE as u32, 4).create(),
        "array without BPF_F_MMAPABLE",
    );
    expect_errno(
        mm::map_shared(plain.fd(), PAGE, RW, 0),
        &[libc::EINVAL],
        "mmap of an array without BPF_F_MMAPABLE",
    );

    let pm = PagedMap::new(4);
    let private = mm::mmap(0, PAGE, RO, libc::MAP_PRIVATE, Some(pm.map.fd()), 0);
    expect_errno(private, &[libc::EINVAL], "MAP_PRIVATE mmap");
    expect_errno(
        mm::map_shared(pm.map.fd(), 0, RW, 0),
        &[libc::EINVAL],
        "mmap of length 0",
    );

    let rdonly_fd = ok(
        MapSpec::mmapable_array(PAGE as u32, 4)
            .flags(BPF_F_RDONLY)
            .create(),
        "BPF_F_RDONLY map",
    );
    expect_errno(
        mm::map_shared(rdonly_fd.fd(), PAGE, RW, 0),
        &[libc::EACCES],
        "writable mmap through a BPF_F_RDONLY fd",
    );

    let ro = PagedMap::with_flags(4, BPF_F_RDONLY_PROG);
    expect_errno(
        ro.mmap(4, RW, 0),
        &[libc::EACCES],
        "writable mmap of a BPF_F_RDONLY_PROG map before freeze",
    );
    drop(ok(
        ro.mmap(4, RO, 0),
        "read-only mmap of a BPF_F_RDONLY_PROG map",
    ));
    ok(ro.map.freeze(), "BPF_MAP_FREEZE");
    expect_errno(
        ro.mmap(4, RW, 0),
        &[libc::EPERM],
        "writable mmap of a frozen BPF_F_RDONLY_PROG map",
    );
    drop(ok(ro.mmap(4, RO, 0), "read-only mmap of a frozen map"));

    let hash = ok(
        MapSpec {
            map_type: BPF_MAP_TYPE_HASH,
            key_size: 4,
            value_size: 8,
            max_entries: 16,
            ..Default::default()
        }
        .create(),
        "hash map",
    );
    // The hash map has no ->map_mmap: the kernel says ENOTSUPP.
    expect_errno(
        mm::map_shared(hash.fd(), PAGE, RO, 0),
        &[ENOTSUPP, libc::EINVAL, libc::ENODEV],
        "mmap of a hash map",
    );
    Ok(())
}
