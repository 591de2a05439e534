//! The raw system calls the benchmark needs: bpf(BPF_MAP_CREATE), mmap, the
//! monotonic clock, /proc parsing, and the results port.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use guest_common::bpf::{map_create, MapCreateAttr, BPF_F_MMAPABLE, BPF_MAP_TYPE_ARRAY};
use guest_common::port;

/// Array element size: one page per element, so the map is exactly `size`.
const VALUE_SIZE: u32 = 4096;
/// The benchmark touches one byte per 4 KiB page (x86_64 base page).
pub const PAGE: usize = 4096;

/// `what: ENAME (text)`; the name makes logs greppable, the text readable.
pub fn describe(what: &str, err: &io::Error) -> String {
    format!("{what}: {}", guest_common::err_name(err))
}

/// A BPF_F_MMAPABLE array map of `size` bytes (a multiple of 4 KiB).
pub struct ArrayMap {
    fd: OwnedFd,
    pub size: u64,
}

impl ArrayMap {
    pub fn create(size: u64) -> io::Result<ArrayMap> {
        let max_entries = u32::try_from(size / u64::from(VALUE_SIZE))
            .map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
        let mut attr = MapCreateAttr {
            map_type: BPF_MAP_TYPE_ARRAY,
            key_size: 4,
            value_size: VALUE_SIZE,
            max_entries,
            map_flags: BPF_F_MMAPABLE,
            ..Default::default()
        };
        attr.map_name[..12].copy_from_slice(b"bpflab_bench");
        let fd = map_create(&attr)?;
        Ok(ArrayMap { fd, size })
    }
}

/// A MAP_SHARED read/write mapping of a whole map. Dropping it unmaps it;
/// `unmap()` does so explicitly so the benchmark can time and check it.
pub struct Mapping {
    addr: *mut u8,
    len: usize,
}

impl Mapping {
    pub fn new(map: &ArrayMap, populate: bool) -> io::Result<Mapping> {
        let len = map.size as usize;
        let flags = libc::MAP_SHARED | if populate { libc::MAP_POPULATE } else { 0 };
        // SAFETY: a fresh mapping chosen by the kernel; nothing aliases it.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                map.fd.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            addr: addr.cast(),
            len,
        })
    }

    pub fn addr(&self) -> usize {
        self.addr as usize
    }

    /// Writes one byte per page, faulting each page in if it is not mapped.
    pub fn touch_all(&self) {
        for off in (0..self.len).step_by(PAGE) {
            // SAFETY: off < len, inside our writable mapping. Volatile so the
            // compiler cannot drop or merge the stores.
            unsafe { self.addr.add(off).write_volatile(1) };
        }
    }

    pub fn unmap(self) -> io::Result<()> {
        let (addr, len) = (self.addr, self.len);
        std::mem::forget(self);
        // SAFETY: addr/len is exactly the mapping we created, unmapped once.
        if unsafe { libc::munmap(addr.cast(), len) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: as in unmap(); only reached on paths that did not unmap.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The value in kB of a `Name:   123 kB` line of /proc/<pid>/status.
pub fn parse_status_kb(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The Rss (kB) of the VMA starting at `addr` in /proc/<pid>/smaps text.
pub fn parse_smaps_rss(smaps: &str, addr: usize) -> Option<u64> {
    let mut in_vma = false;
    for line in smaps.lines() {
        if let Some(start) = vma_start(line) {
            in_vma = start == addr;
        } else if in_vma {
            if let Some(kb) = parse_status_kb(line, "Rss") {
                return Some(kb);
            }
        }
    }
    None
}

/// Start address of an smaps VMA header line (`7f00-7f10 rw-s ...`); field
/// lines (`Rss:  4 kB`) are not headers.
fn vma_start(line: &str) -> Option<usize> {
    let range = line.split_whitespace().next()?;
    let (start, end) = range.split_once('-')?;
    usize::from_str_radix(end, 16).ok()?;
    usize::from_str_radix(start, 16).ok()
}

pub fn vmpte_kb() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| describe("read /proc/self/status", &e))?;
    parse_status_kb(&status, "VmPTE").ok_or_else(|| "no VmPTE in /proc/self/status".into())
}

pub fn rss_kb(mapping: &Mapping) -> Result<u64, String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")
        .map_err(|e| describe("read /proc/self/smaps (CONFIG_PROC_PAGE_MONITOR?)", &e))?;
    parse_smaps_rss(&smaps, mapping.addr())
        .ok_or_else(|| format!("no Rss for mapping {:#x} in smaps", mapping.addr()))
}

/// The machine-readable results channel (the guest's second serial port).
pub struct Results {
    file: File,
    path: String,
}

impl Results {
    /// Opens without O_CREAT, so a missing /dev/ttyS1 is an error rather than
    /// a regular file nobody reads; a tty is put in raw mode (see [`port`]).
    pub fn open(path: &str) -> Result<Results, String> {
        let file =
            port::open(path, false).map_err(|e| describe(&format!("open results {path}"), &e))?;
        port::set_raw(&file).map_err(|e| describe(&format!("tcsetattr {path}"), &e))?;
        Ok(Results {
            file,
            path: path.to_string(),
        })
    }

    /// Sends `BPFLAB-BENCH <json>` in a single write() and echoes it to
    /// stdout.
    pub fn emit(&mut self, json: &str) -> Result<(), String> {
        let line = format!("BPFLAB-BENCH {json}\n");
        port::write_line(&self.file, &line)
            .map_err(|e| describe(&format!("write results {}", self.path), &e))?;
        print!("{line}");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0001000 r--p 00000000 00:1f 123    /bin/bench
Size:                  4 kB
Rss:                   4 kB
VmFlags: rd mr mw me
7f0000000000-7f0000800000 rw-s 00000000 00:0f 1042   anon_inode:bpf-map
Size:               8192 kB
KernelPageSize:        4 kB
Rss:                8192 kB
Pss:                8192 kB
VmFlags: rd wr sh mr mw me ms dc de mm
7f0000800000-7f0000801000 rw-p 00000000 00:00 0
Size:                  4 kB
Rss:                   0 kB
";

    #[test]
    fn smaps_rss() {
        assert_eq!(parse_smaps_rss(SMAPS, 0x7f00_0000_0000), Some(8192));
        assert_eq!(parse_smaps_rss(SMAPS, 0x7f00_0080_0000), Some(0));
        assert_eq!(parse_smaps_rss(SMAPS, 0x55d0_c000_0000), Some(4));
        assert_eq!(parse_smaps_rss(SMAPS, 0x1000), None);
        assert_eq!(vma_start("Rss:   4 kB"), None);
        assert_eq!(vma_start("VmFlags: rd wr"), None);
    }

    #[test]
    fn status_fields() {
        let status = "Name:\tbench\nVmPTE:\t      48 kB\nVmSwap:\t0 kB\n";
        assert_eq!(parse_status_kb(status, "VmPTE"), Some(48));
        assert_eq!(parse_status_kb(status, "VmSwap"), Some(0));
        assert_eq!(parse_status_kb(status, "VmPT"), None);
        assert_eq!(parse_status_kb(status, "VmRSS"), None);
    }

    #[test]
    fn own_status_has_vmpte() {
        assert!(vmpte_kb().is_ok());
    }

    #[test]
    fn clock_moves_forward() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a && a > 0);
    }
}
