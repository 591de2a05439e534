//! What /proc says about a process' memory, for the selftests and the
//! benchmark alike: the VMAs of `/proc/<pid>/smaps` (bounds, Rss and the
//! other per-VMA sizes, VmFlags) and the `Key:  N kB` lines of
//! `/proc/<pid>/status` (VmPTE) and `/proc/meminfo` (MemAvailable,
//! MemFree, MemTotal). The parsers are pure and tested on the host; the
//! readers around them only add the file name to their errors.

use std::fs;
use std::io;

/// One VMA of an smaps file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vma {
    pub start: usize,
    pub end: usize,
    /// `rw-s` and the like.
    pub perms: String,
    /// The file offset, in bytes.
    pub pgoff: u64,
    /// The path or pseudo-name (`anon_inode:bpf-map`, `[heap]`); empty
    /// for anonymous memory.
    pub name: String,
    /// The `Key: value` lines in file order, each with its first number
    /// (kB for the sizes).
    pub fields: Vec<(String, u64)>,
    /// The two-letter codes of the VmFlags line.
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
        (self.start..self.end).contains(&addr)
    }

    /// The number of line `key`, if the entry has one.
    pub fn field(&self, key: &str) -> Option<u64> {
        self.fields.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
    }

    /// The number of line `key`; a missing line is an error naming the VMA.
    pub fn require(&self, key: &str) -> io::Result<u64> {
        self.field(key)
            .ok_or_else(|| io::Error::other(format!("smaps entry of {self} has no {key} line")))
    }

    /// Resident memory in kB.
    pub fn rss_kb(&self) -> io::Result<u64> {
        self.require("Rss")
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.vm_flags.iter().any(|f| f == flag)
    }
}

/// `7f00…-7f10… rw-s anon_inode:bpf-map`: enough to tell VMAs apart in
/// messages.
impl std::fmt::Display for Vma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:x}-{:x} {}", self.start, self.end, self.perms)?;
        if !self.name.is_empty() {
            write!(f, " {}", self.name)?;
        }
        Ok(())
    }
}

/// A VMA header line (`start-end perms offset dev inode [name]`); field
/// lines such as `Rss:  4 kB` or `VmFlags: rd wr` are not headers.
fn parse_header(line: &str) -> Option<Vma> {
    let mut it = line.split_whitespace();
    let (start, end) = it.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = it.next()?;
    if perms.len() != 4 {
        return None;
    }
    let pgoff = u64::from_str_radix(it.next()?, 16).ok()?;
    let _dev = it.next()?;
    let _inode = it.next()?;
    Some(Vma {
        start,
        end,
        perms: perms.to_string(),
        pgoff,
        name: it.collect::<Vec<_>>().join(" "),
        ..Vma::default()
    })
}

/// Every VMA of the text of an smaps file, in address order.
pub fn parse_smaps(text: &str) -> Vec<Vma> {
    let mut vmas: Vec<Vma> = Vec::new();
    for line in text.lines() {
        if let Some(vma) = parse_header(line) {
            vmas.push(vma);
            continue;
        }
        let (Some(cur), Some((key, rest))) = (vmas.last_mut(), line.split_once(':')) else {
            continue;
        };
        if key == "VmFlags" {
            cur.vm_flags = rest.split_whitespace().map(str::to_string).collect();
        } else if let Some(n) = rest.split_whitespace().next().and_then(|n| n.parse().ok()) {
            cur.fields.push((key.trim().to_string(), n));
        }
    }
    vmas
}

/// The VMA of process `pid` (`"self"` or a number) that contains `addr`.
pub fn find_vma_of(pid: &str, addr: usize) -> io::Result<Option<Vma>> {
    let path = format!("/proc/{pid}/smaps");
    let text = fs::read_to_string(&path).map_err(|e| with_path(&path, e))?;
    Ok(parse_smaps(&text).into_iter().find(|v| v.contains(addr)))
}

/// The VMA of this process that contains `addr`.
pub fn find_vma(addr: usize) -> io::Result<Option<Vma>> {
    find_vma_of("self", addr)
}

/// The VMA of this process that contains `addr`; none is an error.
pub fn vma_at(addr: usize) -> io::Result<Vma> {
    find_vma(addr)?
        .ok_or_else(|| io::Error::other(format!("no VMA in /proc/self/smaps contains {addr:#x}")))
}

/// Rss in kB of the VMA of this process that contains `addr`.
pub fn rss_kb(addr: usize) -> io::Result<u64> {
    vma_at(addr)?.rss_kb()
}

/// The number of the `key:` line of /proc/*/status or /proc/meminfo text
/// (kB for sizes). The key must match in full: `Mem` finds nothing.
pub fn parse_kb(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, rest) = line.split_once(':')?;
        if k.trim() != key {
            return None;
        }
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Field `key` of a /proc file that has `Key:  N kB` lines.
fn kb_of(path: &str, key: &str) -> io::Result<u64> {
    let text = fs::read_to_string(path).map_err(|e| with_path(path, e))?;
    parse_kb(&text, key).ok_or_else(|| io::Error::other(format!("no {key} line in {path}")))
}

/// A /proc/self/status field in kB.
pub fn status_kb(key: &str) -> io::Result<u64> {
    kb_of("/proc/self/status", key)
}

/// Page-table memory of this process, in kB.
pub fn vm_pte_kb() -> io::Result<u64> {
    status_kb("VmPTE")
}

/// A /proc/meminfo field in kB.
pub fn meminfo_kb(key: &str) -> io::Result<u64> {
    kb_of("/proc/meminfo", key)
}

pub fn mem_available_kb() -> io::Result<u64> {
    meminfo_kb("MemAvailable")
}

/// Free pages parked on the per-CPU page lists, in kB: free, but not in
/// MemFree or MemAvailable until the lists are drained.
pub fn pcp_free_kb() -> io::Result<u64> {
    let path = "/proc/zoneinfo";
    let text = fs::read_to_string(path).map_err(|e| with_path(path, e))?;
    Ok(parse_pcp_pages(&text) * 4)
}

/// The sum of the `count:` lines of /proc/zoneinfo's pagesets, in pages.
pub fn parse_pcp_pages(zoneinfo: &str) -> u64 {
    zoneinfo
        .lines()
        .filter_map(|l| l.trim().strip_prefix("count:"))
        .filter_map(|n| n.trim().parse::<u64>().ok())
        .sum()
}

/// Adds the path to an I/O error (its kind stays).
fn with_path(path: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcp_pages_are_the_pagesets_counts() {
        let zoneinfo = "Node 0, zone   Normal
  pages free     1000
        nr_free_pages 1000
  pagesets
    cpu: 0
              count: 63
              high:  378
              batch: 63
    cpu: 1
              count: 7
              high:  378
";
        assert_eq!(parse_pcp_pages(zoneinfo), 70);
    }

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
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
THPeligible:           0
VmFlags: rd wr sh mr mw ms de dd mm
7f0000800000-7f0000801000 r--s 00002000 00:0e 1042                       anon_inode:bpf-map
Size:                  4 kB
Rss:                   0 kB
VmFlags: rd sh mr ms de dd mm
7f0000900000-7f0000901000 rw-p 00000000 00:00 0
Size:                  4 kB
";

    #[test]
    fn smaps_entries() {
        let v = parse_smaps(SMAPS);
        assert_eq!(v.len(), 4);
        assert_eq!(v[0].name, "[heap]");
        assert_eq!(v[0].rss_kb().unwrap(), 8);
        let m = &v[1];
        assert_eq!(
            (m.start, m.end, m.len()),
            (0x7f00_0000_0000, 0x7f00_0080_0000, 8 << 20)
        );
        assert_eq!((m.perms.as_str(), m.pgoff), ("rw-s", 0));
        assert_eq!(m.name, "anon_inode:bpf-map");
        assert_eq!(m.rss_kb().unwrap(), 12);
        assert_eq!(m.field("THPeligible"), Some(0));
        assert_eq!(m.field("KernelPageSize"), Some(4));
        assert_eq!(m.field("ShmemPmdMapped"), Some(0));
        assert_eq!(m.field("Swap"), None);
        assert!(m.has_flag("mm") && m.has_flag("dd") && m.has_flag("de"));
        assert!(!m.has_flag("me") && !m.has_flag("m"));
        assert!(m.contains(0x7f00_007f_ffff) && !m.contains(0x7f00_0080_0000));
        assert_eq!(v[2].pgoff, 0x2000);
        assert!(!v[2].has_flag("wr"));
        assert_eq!(v[3].name, "");
        assert!(v[3].vm_flags.is_empty());
    }

    #[test]
    fn missing_fields_are_errors_naming_the_vma() {
        let v = parse_smaps(SMAPS);
        let err = v[3].rss_kb().unwrap_err().to_string();
        assert_eq!(
            err,
            "smaps entry of 7f0000900000-7f0000901000 rw-p has no Rss line"
        );
        let err = v[1].require("Swap").unwrap_err().to_string();
        assert!(err.contains("anon_inode:bpf-map has no Swap line"), "{err}");
    }

    #[test]
    fn field_lines_are_not_headers() {
        assert_eq!(parse_header("Rss:   4 kB"), None);
        assert_eq!(parse_header("VmFlags: rd wr"), None);
        assert_eq!(parse_header("7f00-7f10 rw-s"), None);
        assert!(parse_header("7f00-7f10 rw-s 00000000 00:0e 1").is_some());
        assert!(parse_smaps("Rss: 4 kB\n").is_empty());
    }

    #[test]
    fn kb_lines() {
        let status = "Name:\tselftests\nVmPTE:\t      52 kB\nVmSwap:\t       0 kB\n";
        assert_eq!(parse_kb(status, "VmPTE"), Some(52));
        assert_eq!(parse_kb(status, "VmSwap"), Some(0));
        assert_eq!(parse_kb(status, "VmPT"), None);
        assert_eq!(parse_kb(status, "VmRSS"), None);
        let meminfo = "MemTotal:        4015600 kB\nMemFree:         3800000 kB\nMemAvailable:    3900000 kB\n";
        assert_eq!(parse_kb(meminfo, "MemAvailable"), Some(3_900_000));
        assert_eq!(parse_kb(meminfo, "MemFree"), Some(3_800_000));
        assert_eq!(parse_kb(meminfo, "Mem"), None);
    }

    #[test]
    fn own_process() {
        // Linux hosts have all three files; the heap of this process is
        // somewhere in smaps.
        assert!(vm_pte_kb().is_ok());
        assert!(meminfo_kb("MemTotal").unwrap() > 0);
        let local = 0u64;
        let stack = vma_at(std::ptr::addr_of!(local) as usize).unwrap();
        assert!(stack.rss_kb().unwrap() > 0, "{stack}");
        let err = meminfo_kb("NoSuchKey").unwrap_err().to_string();
        assert_eq!(err, "no NoSuchKey line in /proc/meminfo");
        let err = find_vma_of("0", 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().starts_with("/proc/0/smaps: "), "{err}");
    }
}
