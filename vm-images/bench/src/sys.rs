//! The raw system calls the benchmark needs: bpf(BPF_MAP_CREATE), mmap, the
//! monotonic clock, VmPTE and Rss (read by `guest_common::proc`), and the
//! results port.

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

    /// Writes one byte to each of `pages` (page indexes inside the mapping).
    pub fn touch_pages(&self, pages: &[usize]) {
        for &page in pages {
            assert!(page * PAGE < self.len, "page {page} outside the mapping");
            // SAFETY: checked just above to lie inside our writable mapping.
            unsafe { self.addr.add(page * PAGE).write_volatile(1) };
        }
    }

    /// Reads one byte of each of `pages`; their sum, so the loads stay.
    pub fn read_pages(&self, pages: &[usize]) -> u64 {
        pages
            .iter()
            .map(|&page| {
                assert!(page * PAGE < self.len, "page {page} outside the mapping");
                // SAFETY: checked just above to lie inside our mapping.
                u64::from(unsafe { self.addr.add(page * PAGE).read_volatile() })
            })
            .sum()
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

/// Writes one byte to each of `pages` of the `len`-byte mapping at `addr`.
///
/// # Safety
/// `addr..addr + len` must stay a writable mapping throughout.
pub unsafe fn touch_pages_at(addr: usize, len: usize, pages: &[usize]) {
    for &page in pages {
        assert!(page * PAGE < len, "page {page} outside the mapping");
        // SAFETY: inside the mapping, which the caller keeps in place.
        unsafe { (addr as *mut u8).add(page * PAGE).write_volatile(1) };
    }
}

/// Reads one byte of each of `pages` of the `len`-byte mapping at
/// `addr`; their sum, so the loads stay.
///
/// # Safety
/// `addr..addr + len` must stay a readable mapping throughout.
pub unsafe fn read_pages_at(addr: usize, len: usize, pages: &[usize]) -> u64 {
    pages
        .iter()
        .map(|&page| {
            assert!(page * PAGE < len, "page {page} outside the mapping");
            // SAFETY: inside the mapping, which the caller keeps in place.
            u64::from(unsafe { (addr as *const u8).add(page * PAGE).read_volatile() })
        })
        .sum()
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: as in unmap(); only reached on paths that did not unmap.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

/// SCHED_FIFO for this thread and the threads it starts, while it lives;
/// SCHED_OTHER again after. Threads of equal FIFO priority run in the
/// order they were woken and are not preempted by the tick, so where
/// threads share one vCPU (icount) their interleaving no longer hangs on
/// the fair scheduler's history: under it, any change to the kernel moved
/// the threads' rows, by up to 46%, with the faults' cost unchanged.
pub struct Fifo(bool);

impl Fifo {
    pub fn enter() -> Fifo {
        // RT throttling would stop the rows for 50 ms in each second.
        let _ = std::fs::write("/proc/sys/kernel/sched_rt_runtime_us", "-1");
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: sched_setscheduler on the calling thread with a valid param.
        let ok = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
        if !ok {
            eprintln!(
                "bench: SCHED_FIFO refused ({}): the threads' rows keep the fair scheduler",
                io::Error::last_os_error()
            );
        }
        Fifo(ok)
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        if self.0 {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: as in enter().
            unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
        }
    }
}

/// Minor page faults this process has taken so far.
pub fn minor_faults() -> u64 {
    // SAFETY: an all-zero rusage is valid, and getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_minflt as u64
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

/// Page-table memory of this process in kB.
pub fn vmpte_kb() -> Result<u64, String> {
    guest_common::proc::vm_pte_kb().map_err(|e| describe("VmPTE", &e))
}

/// Rss in kB of the mapping, from /proc/self/smaps.
pub fn rss_kb(mapping: &Mapping) -> Result<u64, String> {
    guest_common::proc::rss_kb(mapping.addr()).map_err(|e| {
        describe(
            &format!(
                "Rss of the mapping at {:#x} (CONFIG_PROC_PAGE_MONITOR?)",
                mapping.addr()
            ),
            &e,
        )
    })
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
        let line = format!(
            "{}\n",
            guest_common::protocol::Line::Bench(json.to_string())
        );
        port::write_line(&self.file, &line)
            .map_err(|e| describe(&format!("write results {}", self.path), &e))?;
        print!("{line}");
        Ok(())
    }

    /// Waits until the results port and the console have sent all they
    /// were given: a UART still sending interrupts the guest at times
    /// the host decides, which icount's guest time would count.
    pub fn drain(&self) {
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        for fd in [self.file.as_raw_fd(), libc::STDOUT_FILENO] {
            // SAFETY: tcdrain on an open descriptor; ENOTTY (a file or a
            // pipe) is fine: nothing is queued in a UART then.
            unsafe { libc::tcdrain(fd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_status_has_vmpte() {
        assert!(vmpte_kb().is_ok());
    }

    #[test]
    fn rss_of_a_touched_mapping() {
        let len = 4 * PAGE;
        // SAFETY: a fresh anonymous mapping, owned by the Mapping below.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        let m = Mapping {
            addr: addr.cast(),
            len,
        };
        assert_eq!(rss_kb(&m).unwrap(), 0);
        m.touch_all();
        assert_eq!(rss_kb(&m).unwrap(), 16);
    }

    #[test]
    fn clock_moves_forward() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a && a > 0);
    }
}
