//! What the kernel tells us about our memory: /proc/self/smaps (Rss,
//! VmFlags per VMA), /proc/self/status (VmPTE), /proc/meminfo
//! (MemAvailable), pagemap present bits, numa_maps, and minor fault counts.
//! Parsers are pure functions with host-side unit tests.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::FileExt;

/// One VMA from smaps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vma {
    pub start: usize,
    pub end: usize,
    pub perms: String,
    pub pgoff: u64,
    pub name: String,
    /// "Key: value" lines; value is the first number (kB for sizes).
    pub fields: Vec<(String, u64)>,
    pub vm_flags: Vec<String>,
}

impl Vma {
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    pub fn contains(&self, addr: usize) -> bool {
        self.start <= addr && addr < self.end
    }

    pub fn field(&self, key: &str) -> Option<u64> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// A field given in kB, in bytes.
    pub fn kb_field_bytes(&self, key: &str) -> Option<u64> {
        self.field(key).map(|kb| kb * 1024)
    }

    /// Resident bytes (Rss).
    pub fn rss_bytes(&self) -> u64 {
        self.kb_field_bytes("Rss").expect("smaps entry without Rss")
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.vm_flags.iter().any(|f| f == flag)
    }
}

fn parse_header(line: &str) -> Option<Vma> {
    let mut it = line.split_whitespace();
    let range = it.next()?;
    let (s, e) = range.split_once('-')?;
    let start = usize::from_str_radix(s, 16).ok()?;
    let end = usize::from_str_radix(e, 16).ok()?;
    let perms = it.next()?.to_string();
    if perms.len() != 4 {
        return None;
    }
    let pgoff = u64::from_str_radix(it.next()?, 16).ok()?;
    let _dev = it.next()?;
    let _inode = it.next()?;
    let name = it.collect::<Vec<_>>().join(" ");
    Some(Vma {
        start,
        end,
        perms,
        pgoff,
        name,
        ..Default::default()
    })
}

/// Parses the whole of an smaps file.
pub fn parse_smaps(text: &str) -> Vec<Vma> {
    let mut out: Vec<Vma> = Vec::new();
    for line in text.lines() {
        if let Some(v) = parse_header(line) {
            out.push(v);
            continue;
        }
        let Some(cur) = out.last_mut() else { continue };
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        if key == "VmFlags" {
            cur.vm_flags = rest.split_whitespace().map(str::to_string).collect();
        } else if let Some(num) = rest.split_whitespace().next().and_then(|n| n.parse().ok()) {
            cur.fields.push((key.trim().to_string(), num));
        }
    }
    out
}

/// The VMA of process `pid` ("self" or a number) containing `addr`.
pub fn find_vma_of(pid: &str, addr: usize) -> io::Result<Option<Vma>> {
    let text = fs::read_to_string(format!("/proc/{pid}/smaps"))?;
    Ok(parse_smaps(&text).into_iter().find(|v| v.contains(addr)))
}

pub fn find_vma(addr: usize) -> io::Result<Option<Vma>> {
    find_vma_of("self", addr)
}

/// A "Key:   N kB" value from /proc/*/status or /proc/meminfo.
pub fn parse_kb(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, rest) = l.split_once(':')?;
        if k.trim() != key {
            return None;
        }
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Page-table memory of this process, in kB.
pub fn vm_pte_kb() -> io::Result<u64> {
    let text = fs::read_to_string("/proc/self/status")?;
    parse_kb(&text, "VmPTE").ok_or_else(|| io::Error::other("no VmPTE in /proc/self/status"))
}

pub fn mem_available_kb() -> io::Result<u64> {
    meminfo_kb("MemAvailable")
}

pub fn meminfo_kb(key: &str) -> io::Result<u64> {
    let text = fs::read_to_string("/proc/meminfo")?;
    parse_kb(&text, key).ok_or_else(|| io::Error::other(format!("no {key} in /proc/meminfo")))
}

/// Minor faults from the text of /proc/<pid>/stat (field 10).
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
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru.ru_minflt as u64
    }
}

/// A decoded /proc/<pid>/pagemap entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagemapEntry {
    pub present: bool,
    pub swapped: bool,
    pub exclusive: bool,
    pub file_or_shared: bool,
    /// Zero unless the reader has CAP_SYS_ADMIN.
    pub pfn: u64,
}

pub fn parse_pagemap_entry(raw: u64) -> PagemapEntry {
    PagemapEntry {
        present: (raw >> 63) & 1 == 1,
        swapped: (raw >> 62) & 1 == 1,
        file_or_shared: (raw >> 61) & 1 == 1,
        exclusive: (raw >> 56) & 1 == 1,
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

/// Present bit per page.
pub fn pagemap_present(addr: usize, pages: usize) -> io::Result<Vec<bool>> {
    Ok(pagemap(addr, pages)?.iter().map(|e| e.present).collect())
}

/// Pages per node ("N<node>=<pages>") of the numa_maps line for the VMA
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

/// Online NUMA nodes from a sysfs list such as "0-1" or "0,2-3".
pub fn parse_node_list(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<u32>().ok()),
        }
    }
    out
}

#[cfg(test)]
mod unit {
    use super::*;

    const SMAPS: &str = "\
55d4a0000000-55d4a0021000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
Rss:                   8 kB
VmFlags: rd wr mr mw me ac
7f0000000000-7f0000800000 rw-s 00000000 00:0e 1042                       anon_inode:bpf-map
Size:               8192 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                  12 kB
Pss:                  12 kB
AnonHugePages:         0 kB
FilePmdMapped:         0 kB
THPeligible:           0
VmFlags: rd wr sh mr mw ms de dd mm
7f0000800000-7f0000801000 r--s 00002000 00:0e 1042                       anon_inode:bpf-map
Size:                  4 kB
Rss:                   0 kB
VmFlags: rd sh mr ms de dd mm
";

    #[test]
    fn smaps_entries() {
        let v = parse_smaps(SMAPS);
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].name, "[heap]");
        let m = &v[1];
        assert_eq!(
            (m.start, m.end, m.len()),
            (0x7f0000000000, 0x7f0000800000, 8 << 20)
        );
        assert_eq!(m.perms, "rw-s");
        assert_eq!(m.name, "anon_inode:bpf-map");
        assert_eq!(m.rss_bytes(), 12 * 1024);
        assert_eq!(m.field("THPeligible"), Some(0));
        assert_eq!(m.field("KernelPageSize"), Some(4));
        assert!(m.has_flag("mm") && m.has_flag("dd") && m.has_flag("de"));
        assert!(!m.has_flag("me"));
        assert_eq!(v[2].pgoff, 0x2000);
        assert!(!v[2].has_flag("wr"));
        assert!(v[1].contains(0x7f00007fffff) && !v[1].contains(0x7f0000800000));
    }

    #[test]
    fn status_and_meminfo() {
        let status = "Name:\tselftests\nVmPTE:\t      52 kB\nVmSwap:\t       0 kB\n";
        assert_eq!(parse_kb(status, "VmPTE"), Some(52));
        let meminfo = "MemTotal:        4015600 kB\nMemFree:         3800000 kB\nMemAvailable:    3900000 kB\n";
        assert_eq!(parse_kb(meminfo, "MemAvailable"), Some(3_900_000));
        assert_eq!(parse_kb(meminfo, "Mem"), None);
    }

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
        assert_eq!(parse_node_list("0-1\n"), vec![0, 1]);
        assert_eq!(parse_node_list("0,2-3"), vec![0, 2, 3]);
        assert_eq!(parse_node_list("0"), vec![0]);
    }
}
