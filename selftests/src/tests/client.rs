//! T25: libbpf's global-data (.rodata) sequence, the most common real user
//! of mmap-able arrays: the image lives in anonymous memory, goes into a
//! BPF_F_RDONLY_PROG map, the map is frozen and mapped read-only over the
//! anonymous memory with MAP_FIXED.

use super::common::*;
use crate::sys::bpf::BPF_F_RDONLY_PROG;

pub fn t25_libbpf_global_data(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 4;
    let size = PAGES * PAGE;
    // bpf_object__init_internal_map(): MAP_SHARED|MAP_ANONYMOUS, RW.
    let anon = ok(
        mm::mmap(0, size, RW, libc::MAP_SHARED | libc::MAP_ANONYMOUS, None, 0),
        "anonymous image mapping",
    );
    for p in 0..PAGES {
        anon.write_bytes(p * PAGE, &page_image(40 + p));
    }
    let image = anon.read_bytes(0, size);

    let map = ok(
        MapSpec::mmapable_array(size as u32, 1)
            .flags(BPF_F_RDONLY_PROG)
            .create(),
        "creating the RDONLY_PROG map",
    );
    // bpf_object__populate_internal_map(): update from the mapping, freeze.
    ok(
        map.update_idx(0, &image),
        "UPDATE_ELEM with the initial image",
    );
    ok(map.freeze(), "BPF_MAP_FREEZE");

    // bpf_object__load(): map the frozen map read-only over the image.
    let (addr, _) = anon.leak();
    let fixed = ok(
        mm::mmap(
            addr,
            size,
            RO,
            libc::MAP_SHARED | libc::MAP_FIXED,
            Some(map.fd()),
            0,
        ),
        "mmap(MAP_FIXED, PROT_READ) over the image",
    );
    assert_eq!(fixed.addr(), addr, "MAP_FIXED address");
    let v = vma_at(addr);
    assert_eq!(
        (v.start, v.len(), v.name.as_str()),
        (addr, size, "anon_inode:bpf-map"),
        "VMA after MAP_FIXED"
    );
    assert_eq!(
        v.rss_bytes(),
        ctx.pick_at_mmap(size / PAGE, 0, size as u64),
        "{ctx}: Rss of the frozen .rodata mapping before any access"
    );
    for p in [2, 0, 3, 1] {
        check_page_full(&fixed, p, 40 + p, "global data after MAP_FIXED");
    }
    assert_eq!(
        rss(addr),
        size as u64,
        "{ctx}: Rss after reading every page"
    );

    expect_errno(
        mm::map_shared(map.fd(), size, RW, 0),
        &[libc::EPERM],
        "writable mmap of the frozen map",
    );
    expect_errno(
        mm::mprotect(addr, size, RW),
        &[libc::EACCES],
        "mprotect(PROT_WRITE) of the .rodata mapping",
    );
    expect_signal("write to the .rodata mapping", libc::SIGSEGV, || {
        fixed.write_u64(0, 0)
    });
    Ok(())
}
