//! T26-T28: THP advice, NUMA placement, and a clean kernel log.

use std::collections::BTreeMap;

use super::common::*;
use crate::kmsg::{find_splats, Kmsg};
use crate::proc;

const THP_ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// The bracketed choice of a sysfs mode list: `always [madvise] never`.
fn selected_mode(text: &str) -> Option<&str> {
    let (_, rest) = text.split_once('[')?;
    Some(rest.split_once(']')?.0)
}

/// T26: MADV_HUGEPAGE on a 2 MiB-aligned mapping is accepted and changes
/// nothing: faults still map 4 KiB pages one at a time, and collapsing
/// is refused (VM_MIXEDMAP/VM_DONTEXPAND VMAs are never THP candidates).
pub fn t26_thp_madvise_no_effect(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 4 * MIB / PAGE;
    const HALF: usize = PAGES / 2;
    let filled = [0, 1, 300, HALF - 1, HALF, PAGES - 1];
    let pm = PagedMap::new(PAGES);
    filled.iter().for_each(|&p| pm.fill(p));

    let m = map_2mib_aligned(&pm, 4 * MIB);
    advise_hugepage(ctx, &m);
    require_thp_enabled(ctx);

    // Fault in the first (aligned) 2 MiB page by page: one fault per 4 KiB
    // page (P, D), per window (W) or per growing window (A), never one for
    // the whole 2 MiB.
    let first_half: Vec<usize> = (0..HALF).collect();
    warm_up_fault_counting();
    let faults = faults_to_read(&m, &first_half);
    let want = ctx.faults_after(0..PAGES, &first_half);
    assert!(
        faults == want,
        "{ctx}: reading the first 2 MiB page by page after MADV_HUGEPAGE took {faults} minor faults, expected {want}"
    );
    expect_errno(
        mm::madvise(m.addr(), 2 * MIB, mm::MADV_COLLAPSE),
        &[libc::EINVAL],
        "MADV_COLLAPSE of the map",
    );

    check_mapped_by_4k_pages(ctx, &m, PAGES, &first_half);
    for p in filled {
        check_page(&m, p, p, "after MADV_HUGEPAGE");
    }
    Ok(())
}

/// The first `len` bytes of `pm`, mapped shared at a 2 MiB-aligned
/// address (a fixed mapping over a reserved range, which is leaked to it).
fn map_2mib_aligned(pm: &PagedMap, len: usize) -> Mapping {
    let (at, _) = ok(mm::reserve(len, 2 * MIB), "reserving a 2 MiB-aligned range").leak();
    let m = ok(
        mm::mmap(
            at,
            len,
            RW,
            libc::MAP_SHARED | libc::MAP_FIXED,
            Some(pm.map.fd()),
            0,
        ),
        "MAP_FIXED mmap",
    );
    assert_eq!(m.addr() % (2 * MIB), 0, "mapping not 2 MiB aligned");
    m
}

/// MADV_HUGEPAGE on all of `m`: accepted, flagged `hg`, the VMA whole.
fn advise_hugepage(ctx: &Ctx, m: &Mapping) {
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
}

/// Fails unless THP is enabled (always or madvise), and logs the mode.
fn require_thp_enabled(ctx: &Ctx) {
    // The VM's kernel has THP (CONFIG_TRANSPARENT_HUGEPAGE=y): with it
    // switched off, "changes nothing" would prove nothing.
    let thp = ok(
        std::fs::read_to_string(THP_ENABLED),
        &format!("reading {THP_ENABLED}"),
    );
    let mode = selected_mode(&thp);
    assert!(
        matches!(mode, Some("always" | "madvise")),
        "{ctx}: THP must be enabled for MADV_HUGEPAGE to mean anything: {THP_ENABLED} says {:?}",
        thp.trim()
    );
    println!("[selftests] t26: THP enabled = {}", thp.trim());
}

/// After touching `touched` of the `pages`-page mapping `m`: smaps shows
/// 4 KiB pages and no huge ones, and Rss and the present pages are those
/// of 4 KiB faults on this kernel.
fn check_mapped_by_4k_pages(ctx: &Ctx, m: &Mapping, pages: usize, touched: &[usize]) {
    let v = vma_at(m.addr());
    for (field, want) in [
        ("KernelPageSize", 4),
        ("MMUPageSize", 4),
        ("AnonHugePages", 0),
        ("FilePmdMapped", 0),
        ("ShmemPmdMapped", 0),
    ] {
        assert_eq!(
            v.value(field),
            want,
            "{ctx}: smaps {field} (kB) after MADV_HUGEPAGE and touching 2 MiB"
        );
    }
    assert_eq!(
        v.rss_bytes(),
        ctx.rss_after(0..pages, touched),
        "{ctx}: Rss after touching the first 2 MiB"
    );
    let present = present_pages(m.addr(), pages);
    assert_eq!(
        present,
        ctx.present_after(0..pages, touched),
        "{ctx}: present 4 KiB pages"
    );
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

/// [`page_nodes`] or a failure (move_pages needs CONFIG_MIGRATION, which
/// kconfig/bpf.config asks for).
#[track_caller]
fn nodes_of_pages(addr: usize, pages: usize) -> Vec<i32> {
    ok(
        page_nodes(addr, pages),
        "move_pages() query (CONFIG_NUMA and CONFIG_MIGRATION)",
    )
}

/// Pages per node of the VMA at `addr`, from /proc/self/numa_maps.
#[track_caller]
fn numa_maps_nodes(addr: usize) -> BTreeMap<u32, u64> {
    let text = ok(
        std::fs::read_to_string("/proc/self/numa_maps"),
        "reading /proc/self/numa_maps",
    );
    proc::parse_numa_maps(&text, addr).unwrap_or_else(|| panic!("no numa_maps line for {addr:#x}"))
}

/// T27: a map created with BPF_F_NUMA_NODE faults in pages of that node,
/// for each of the guest's nodes, by move_pages() and by numa_maps.
pub fn t27_numa_node_placement(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 64;
    const ONLINE: &str = "/sys/devices/system/node/online";
    let online = ok(
        std::fs::read_to_string(ONLINE),
        &format!("reading {ONLINE}"),
    );
    let nodes = proc::parse_node_list(&online)
        .unwrap_or_else(|| panic!("{ONLINE} is not a node list: {:?}", online.trim()));
    // The VM boots with numa=fake=2 (CONFIG_NUMA_EMU).
    assert!(
        nodes.len() >= 2,
        "the VM should have 2 NUMA nodes (numa=fake=2), {ONLINE} says {:?}",
        online.trim()
    );
    for &node in &nodes {
        let map = ok(
            MapSpec::mmapable_array(PAGE as u32, PAGES as u32)
                .on_node(node)
                .create(),
            &format!("creating a map on node {node}"),
        );
        let m = ok(mm::map_shared(map.fd(), PAGES * PAGE, RW, 0), "mmap");
        let all_on = |n: i32| vec![n; PAGES];
        let all_counted = BTreeMap::from([(node, PAGES as u64)]);
        assert_eq!(
            nodes_of_pages(m.addr(), PAGES),
            ctx.pick_at_mmap(PAGES, all_on(-libc::ENOENT), all_on(node as i32)),
            "{ctx}: move_pages status before touching (node {node} map)"
        );
        assert_eq!(
            numa_maps_nodes(m.addr()),
            ctx.pick_at_mmap(PAGES, BTreeMap::new(), all_counted.clone()),
            "{ctx}: numa_maps before touching (node {node} map)"
        );
        std::hint::black_box(touch_pages(&m, &(0..PAGES).collect::<Vec<_>>()));
        assert_eq!(
            nodes_of_pages(m.addr(), PAGES),
            all_on(node as i32),
            "{ctx}: nodes of the faulted pages of a node-{node} map"
        );
        assert_eq!(
            numa_maps_nodes(m.addr()),
            all_counted,
            "{ctx}: numa_maps of a touched node-{node} map"
        );
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

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn thp_modes() {
        assert_eq!(selected_mode("[always] madvise never\n"), Some("always"));
        assert_eq!(selected_mode("always [madvise] never"), Some("madvise"));
        assert_eq!(selected_mode("always madvise [never]"), Some("never"));
        assert_eq!(selected_mode("always madvise never"), None);
    }
}
