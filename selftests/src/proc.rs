//! What the kernel tells us about our memory: /proc/self/smaps (Rss,
//! VmFlags per VMA), /proc/self/status (VmPTE) and /proc/meminfo
//! (MemAvailable) through `guest_common::proc`; here the readers only the
//! tests need: pagemap present bits, numa_maps, online nodes and minor
//! fault counts. Parsers are pure functions with host-side unit tests.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::FileExt;

// smaps, status and meminfo are read the same way by the benchmark.
pub use guest_common::proc::{
    find_vma, find_vma_of, mem_available_kb, meminfo_kb, parse_kb, parse_smaps, vm_pte_kb, vma_at,
    Vma,
};

/// Minor faults from the text of `/proc/<pid>/stat` (field 10).
pub fn parse_stat_minflt(text: &str) -> Option<u64> {
    // comm may contain spaces and parentheses: split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    // rest starts with field 3 (state); minflt is field 10.
    rest.split_whitespace().nth(7)?.parse().ok()
}

/// Minor faults of the calling thread so far. getrusage() rather than
/// reading /proc, so that measuring does not itself allocate and fault.
pub fn minor_faults() -> u64 {
    // SAFETY: rusage is plain data and getrusage only writes into it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `ru` is a valid out-pointer.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    assert_eq!(
        r,
        0,
        "getrusage(RUSAGE_THREAD): {}",
        io::Error::last_os_error()
    );
    ru.ru_minflt as u64
}

/// A decoded `/proc/<pid>/pagemap` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagemapEntry {
    pub present: bool,
    pub swapped: bool,
    pub exclusive: bool,
    pub file_or_shared: bool,
    /// Written since soft-dirty tracking was last armed (`clear_refs` 4),
    /// or in a VMA made since then.
    pub soft_dirty: bool,
    /// Zero unless the reader has CAP_SYS_ADMIN.
    pub pfn: u64,
}

pub fn parse_pagemap_entry(raw: u64) -> PagemapEntry {
    PagemapEntry {
        present: (raw >> 63) & 1 == 1,
        swapped: (raw >> 62) & 1 == 1,
        file_or_shared: (raw >> 61) & 1 == 1,
        exclusive: (raw >> 56) & 1 == 1,
        soft_dirty: (raw >> 55) & 1 == 1,
        pfn: raw & ((1 << 55) - 1),
    }
}

/// Pagemap entries of `pages` pages starting at `addr` in this process.
pub fn pagemap(addr: usize, pages: usize) -> io::Result<Vec<PagemapEntry>> {
    let page = crate::sys::mm::page_size();
    let f = fs::File::open("/proc/self/pagemap")?;
    let mut buf = vec![0u8; pages * 8];
    f.read_exact_at(&mut buf, (addr / page * 8) as u64)?;
    Ok(buf
        .chunks_exact(8)
        .map(|c| parse_pagemap_entry(u64::from_ne_bytes(c.try_into().unwrap())))
        .collect())
}

/// `/proc/kpageflags` bit: the page is dirty.
pub const KPF_DIRTY: u32 = 4;

/// The flags `/proc/kpageflags` gives the page at `pfn` (root only).
pub fn kpageflags(pfn: u64) -> io::Result<u64> {
    let f = fs::File::open("/proc/kpageflags")?;
    let mut buf = [0u8; 8];
    f.read_exact_at(&mut buf, pfn * 8)?;
    Ok(u64::from_ne_bytes(buf))
}

/// Arms soft-dirty tracking for every mapping of this process: clears
/// the soft-dirty bits and write-protects the ptes (`clear_refs` 4).
pub fn clear_soft_dirty() -> io::Result<()> {
    fs::write("/proc/self/clear_refs", "4")
}

/// Soft-dirty bit per page.
pub fn pagemap_soft_dirty(addr: usize, pages: usize) -> io::Result<Vec<bool>> {
    Ok(pagemap(addr, pages)?.iter().map(|e| e.soft_dirty).collect())
}

/// Present bit per page.
pub fn pagemap_present(addr: usize, pages: usize) -> io::Result<Vec<bool>> {
    Ok(pagemap(addr, pages)?.iter().map(|e| e.present).collect())
}

/// Pages per node (`N<node>=<pages>`) of the numa_maps line for the VMA
/// starting at `start`.
pub fn parse_numa_maps(text: &str, start: usize) -> Option<BTreeMap<u32, u64>> {
    let line = text.lines().find(|l| {
        l.split_whitespace()
            .next()
            .and_then(|a| usize::from_str_radix(a, 16).ok())
            == Some(start)
    })?;
    let mut nodes = BTreeMap::new();
    for tok in line.split_whitespace() {
        if let Some((n, count)) = tok.strip_prefix('N').and_then(|t| t.split_once('=')) {
            if let (Ok(n), Ok(c)) = (n.parse(), count.parse()) {
                nodes.insert(n, c);
            }
        }
    }
    Some(nodes)
}

/// Online NUMA nodes from a sysfs list such as "0-1" or "0,2-3"; None if
/// any part of it is not a node number or range.
pub fn parse_node_list(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => out.push(part.parse::<u32>().ok()?),
        }
    }
    Some(out)
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn stat_minflt() {
        let stat = "1234 (self tests) R 1 1234 1234 0 -1 4194560 777 0 3 0 5 6";
        assert_eq!(parse_stat_minflt(stat), Some(777));
        assert_eq!(parse_stat_minflt("garbage"), None);
    }

    #[test]
    fn pagemap_bits() {
        let e = parse_pagemap_entry((1 << 63) | (1 << 61) | 0x1234);
        assert!(e.present && e.file_or_shared && !e.swapped && !e.exclusive);
        assert_eq!(e.pfn, 0x1234);
        assert!(!parse_pagemap_entry(0).present);
    }

    #[test]
    fn numa_maps_and_nodes() {
        let text = "7f0000000000 default file=anon_inode:bpf-map mapped=64 N0=40 N1=24 kernelpagesize_kB=4\n\
                    7f0000100000 default anon=1 dirty=1 N0=1 kernelpagesize_kB=4\n";
        let n = parse_numa_maps(text, 0x7f0000000000).unwrap();
        assert_eq!(n.get(&0), Some(&40));
        assert_eq!(n.get(&1), Some(&24));
        assert!(parse_numa_maps(text, 0x1000).is_none());
        assert_eq!(parse_node_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_node_list("0,2-3"), Some(vec![0, 2, 3]));
        assert_eq!(parse_node_list("0"), Some(vec![0]));
        assert_eq!(parse_node_list(""), Some(vec![]));
        assert_eq!(parse_node_list("0-x"), None);
        assert_eq!(parse_node_list("node0"), None);
    }
}
