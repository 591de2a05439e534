//! T26-T28: THP advice, NUMA placement, and a clean kernel log.

use std::collections::BTreeMap;

use super::common::*;
use crate::kmsg::{find_splats, Kmsg};
use crate::proc;

/// T26: MADV_HUGEPAGE on a 2 MiB-aligned mapping is accepted and changes
/// nothing: faults still map 4 KiB pages one at a time, and collapsing
/// is refused (VM_MIXEDMAP/VM_DONTEXPAND VMAs are never THP candidates).
pub fn t26_thp_madvise_no_effect(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 4 * MIB / PAGE;
    const HALF: usize = PAGES / 2;
    let filled = [0, 1, 300, HALF - 1, HALF, PAGES - 1];
    let pm = PagedMap::new(PAGES);
    filled.iter().for_each(|&p| pm.fill(p));

    let (at, _) = ok(
        mm::reserve(4 * MIB, 2 * MIB),
        "reserving a 2 MiB-aligned range",
    )
    .leak();
    let m = ok(
        mm::mmap(
            at,
            4 * MIB,
            RW,
            libc::MAP_SHARED | libc::MAP_FIXED,
            Some(pm.map.fd()),
            0,
        ),
        "MAP_FIXED mmap",
    );
    assert_eq!(m.addr() % (2 * MIB), 0, "mapping not 2 MiB aligned");
    ok(
        mm::madvise(m.addr(), m.len(), libc::MADV_HUGEPAGE),
        "MADV_HUGEPAGE",
    );
    let v = vma_at(m.addr());
    assert!(
        v.has_flag("hg"),
        "{ctx}: VmFlags after MADV_HUGEPAGE: [{}]",
        v.vm_flags.join(" ")
    );
    assert_eq!(v.len(), m.len(), "MADV_HUGEPAGE split the VMA");
    if let Ok(mode) = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled") {
        println!("[selftests] t26: THP enabled = {}", mode.trim());
    }

    // Fault in the first (aligned) 2 MiB page by page.
    std::hint::black_box(touch_pages(&m, &(0..HALF).collect::<Vec<_>>()));
    expect_errno(
        mm::madvise(m.addr(), 2 * MIB, mm::MADV_COLLAPSE),
        &[libc::EINVAL],
        "MADV_COLLAPSE of the map",
    );

    let v = vma_at(m.addr());
    for (field, want) in [
        ("KernelPageSize", 4),
        ("MMUPageSize", 4),
        ("AnonHugePages", 0),
        ("FilePmdMapped", 0),
        ("ShmemPmdMapped", 0),
    ] {
        if let Some(got) = v.field(field) {
            assert_eq!(
                got, want,
                "{ctx}: smaps {field} (kB) after MADV_HUGEPAGE and touching 2 MiB"
            );
        }
    }
    assert_eq!(
        v.rss_bytes(),
        ctx.pick(2 * MIB as u64, 4 * MIB as u64),
        "{ctx}: Rss after touching the first 2 MiB"
    );
    let present = present_pages(m.addr(), PAGES).len();
    assert_eq!(present, ctx.pick(HALF, PAGES), "{ctx}: present 4 KiB pages");
    for p in filled {
        check_page(&m, p, p, "after MADV_HUGEPAGE");
    }
    Ok(())
}

/// Node of each page via move_pages(2) in query mode (nodes == NULL);
/// -ENOENT for pages not mapped.
fn page_nodes(addr: usize, pages: usize) -> std::io::Result<Vec<i32>> {
    let ptrs: Vec<*mut libc::c_void> = (0..pages)
        .map(|p| (addr + p * PAGE) as *mut libc::c_void)
        .collect();
    let mut status = vec![i32::MIN; pages];
    // SAFETY: ptrs and status hold `pages` entries; nodes NULL = query.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as libc::c_long,
            pages as libc::c_ulong,
            ptrs.as_ptr(),
            std::ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0 as libc::c_long,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(status)
}

/// Pages per node of the VMA at `addr`, from /proc/self/numa_maps.
fn numa_maps_nodes(addr: usize) -> BTreeMap<u32, u64> {
    let text = ok(
        std::fs::read_to_string("/proc/self/numa_maps"),
        "reading numa_maps",
    );
    proc::parse_numa_maps(&text, addr).unwrap_or_else(|| panic!("no numa_maps line for {addr:#x}"))
}

/// T27: a map created with BPF_F_NUMA_NODE faults in pages of that node,
/// for each of the guest's nodes.
pub fn t27_numa_node_placement(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 64;
    let online = std::fs::read_to_string("/sys/devices/system/node/online").unwrap_or_default();
    let nodes = proc::parse_node_list(&online);
    if nodes.len() < 2 {
        return Err(Skip::new(format!(
            "needs 2 NUMA nodes, online: {:?}",
            online.trim()
        )));
    }
    let use_move_pages = match page_nodes(0, 0) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            println!("[selftests] t27: move_pages() not available, using numa_maps");
            false
        }
        _ => true,
    };
    for &node in &nodes[..2] {
        let map = ok(
            MapSpec::mmapable_array(PAGE as u32, PAGES as u32)
                .on_node(node)
                .create(),
            &format!("creating a map on node {node}"),
        );
        let m = ok(mm::map_shared(map.fd(), PAGES * PAGE, RW, 0), "mmap");
        let all_on = |n: i32| vec![n; PAGES];
        if use_move_pages {
            let before = ok(page_nodes(m.addr(), PAGES), "move_pages query");
            assert_eq!(
                before,
                ctx.pick(all_on(-libc::ENOENT), all_on(node as i32)),
                "{ctx}: move_pages status before touching (node {node} map)"
            );
        } else {
            let before = numa_maps_nodes(m.addr());
            let want = ctx.pick(BTreeMap::new(), BTreeMap::from([(node, PAGES as u64)]));
            assert_eq!(
                before, want,
                "{ctx}: numa_maps before touching (node {node} map)"
            );
        }
        std::hint::black_box(touch_pages(&m, &(0..PAGES).collect::<Vec<_>>()));
        if use_move_pages {
            let after = ok(page_nodes(m.addr(), PAGES), "move_pages query");
            assert_eq!(
                after,
                all_on(node as i32),
                "{ctx}: nodes of the faulted pages of a node-{node} map"
            );
        } else {
            let after = numa_maps_nodes(m.addr());
            assert_eq!(
                after,
                BTreeMap::from([(node, PAGES as u64)]),
                "{ctx}: numa_maps of a touched node-{node} map"
            );
        }
    }
    Ok(())
}

/// T28: the whole kernel log has no splat (the runner also checks the
/// records of every single test).
pub fn t28_dmesg_clean(_ctx: &Ctx) -> Result<(), Skip> {
    let mut k = ok(Kmsg::open_from_start(), "opening /dev/kmsg");
    let records = k.read_new();
    assert!(!records.is_empty(), "/dev/kmsg returned no records at all");
    let splats = find_splats(&records);
    assert!(
        splats.is_empty(),
        "kernel log has {} splat line(s):\n{}",
        splats.len(),
        splats.join("\n")
    );
    Ok(())
}
