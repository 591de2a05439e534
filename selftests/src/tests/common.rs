//! Helpers shared by the test modules: a page-per-element array map with
//! recognisable contents, page checks, smaps look-ups and errno asserts.

use std::io;
pub use std::os::fd::{AsFd, OwnedFd};

pub use crate::child::{expect_signal, run_in_child, spawn, Gate};
pub use crate::proc::Vma;
pub use crate::runner::model::Record;
pub use crate::runner::{Ctx, Fill, Filled, Kernel, Skip, FAULT_WINDOW, POPULATE_PAGES};
pub use crate::sys::bpf::{self, Map, MapSpec};
pub use crate::sys::err_name;
pub use crate::sys::mm::{self, Mapping, RO, RW};

pub const PAGE: usize = 4096;
pub const MIB: usize = 1 << 20;
const WORDS: usize = PAGE / 8;

/// The u64 at `word` of map page `page`: distinct per page and word, never
/// zero, so a wrong page, a wrong offset or a zero page all show.
pub fn pattern(page: usize, word: usize) -> u64 {
    0xA500_0000_0000_005A | ((page as u64 & 0xff_ffff) << 32) | ((word as u64 & 0xff_ffff) << 8)
}

/// A whole page of [`pattern`] words.
pub fn page_image(page: usize) -> Vec<u8> {
    (0..WORDS)
        .flat_map(|w| pattern(page, w).to_ne_bytes())
        .collect()
}

fn word(bytes: &[u8], w: usize) -> u64 {
    u64::from_ne_bytes(bytes[w * 8..w * 8 + 8].try_into().unwrap())
}

/// An mmap-able array map with one page per element (value_size 4096),
/// so element `i` is page `i` of any mapping at offset 0. Filling goes
/// through BPF_MAP_UPDATE_ELEM, i.e. the kernel's vmalloc address, and
/// leaves user mappings untouched.
pub struct PagedMap {
    pub map: Map,
    pub pages: usize,
}

impl PagedMap {
    #[track_caller]
    pub fn new(pages: usize) -> PagedMap {
        Self::with_flags(pages, 0)
    }

    #[track_caller]
    pub fn with_flags(pages: usize, flags: u32) -> PagedMap {
        let map = MapSpec::mmapable_array(PAGE as u32, pages as u32)
            .flags(flags)
            .create()
            .unwrap_or_else(|e| panic!("creating a {pages}-page mmapable array: {}", err_name(&e)));
        PagedMap { map, pages }
    }

    #[track_caller]
    pub fn fill(&self, page: usize) {
        self.map
            .update_idx(page as u32, &page_image(page))
            .unwrap_or_else(|e| panic!("UPDATE_ELEM of page {page}: {}", err_name(&e)));
    }

    pub fn fill_all(&self) {
        (0..self.pages).for_each(|p| self.fill(p));
    }

    #[track_caller]
    pub fn lookup_page(&self, page: usize) -> Vec<u8> {
        self.map
            .lookup_idx(page as u32)
            .unwrap_or_else(|e| panic!("LOOKUP_ELEM of page {page}: {}", err_name(&e)))
    }

    #[track_caller]
    pub fn lookup_word(&self, page: usize, w: usize) -> u64 {
        word(&self.lookup_page(page), w)
    }

    /// A file of the map's own (BPF_MAP_GET_FD_BY_ID, not a dup): a
    /// fault's window grows from the last window of its file
    /// (`runner::model`), so that mappings made through it start as the
    /// model's fresh one does.
    pub fn own_file(&self) -> io::Result<OwnedFd> {
        bpf::map_get_fd_by_id(self.map.id()?)
    }

    /// mmap(MAP_SHARED) of `pages` pages starting at map page `first`,
    /// through a file of its own ([`PagedMap::own_file`]).
    pub fn mmap(&self, pages: usize, prot: i32, first: usize) -> io::Result<Mapping> {
        let fd = self.own_file()?;
        mm::map_shared(fd.as_fd(), pages * PAGE, prot, (first * PAGE) as u64)
    }

    /// The whole map, read-write.
    #[track_caller]
    pub fn map_rw(&self) -> Mapping {
        self.mmap(self.pages, RW, 0).unwrap_or_else(|e| {
            panic!(
                "mmap of the whole {}-page map: {}",
                self.pages,
                err_name(&e)
            )
        })
    }
}

/// Checks sample words of the page mapped at `addr` against map page `page`.
#[track_caller]
pub fn check_page_at(addr: usize, page: usize, what: &str) {
    for w in [0, 1, 137, WORDS - 1] {
        // SAFETY: callers pass the address of a mapped page.
        let got = unsafe { mm::peek(addr + w * 8) };
        assert_eq!(
            got,
            pattern(page, w),
            "{what}: word {w} of the page at {addr:#x} should be map page {page}'s"
        );
    }
}

/// Like [`check_page_at`] for page `at` of `m`.
#[track_caller]
pub fn check_page(m: &Mapping, at: usize, page: usize, what: &str) {
    assert!((at + 1) * PAGE <= m.len());
    check_page_at(m.addr() + at * PAGE, page, what);
}

/// Compares every word of page `at` of `m` with map page `page`.
#[track_caller]
pub fn check_page_full(m: &Mapping, at: usize, page: usize, what: &str) {
    for w in 0..WORDS {
        let got = m.read_u64(at * PAGE + w * 8);
        assert_eq!(
            got,
            pattern(page, w),
            "{what}: word {w} of mapping page {at} should be map page {page}'s"
        );
    }
}

/// The smaps entry of the VMA containing `addr`; none is a failure.
#[track_caller]
pub fn vma_at(addr: usize) -> Vma {
    ok(
        crate::proc::vma_at(addr),
        "looking up a VMA in /proc/self/smaps",
    )
}

/// Resident bytes of the VMA containing `addr`.
#[track_caller]
pub fn rss(addr: usize) -> u64 {
    vma_at(addr).rss_bytes()
}

/// The smaps numbers a test relies on: a missing line fails the test,
/// naming the VMA and the line, instead of skipping the check.
pub trait SmapsValues {
    /// The number of line `key` (kB for sizes).
    fn value(&self, key: &str) -> u64;

    /// Rss in bytes.
    #[track_caller]
    fn rss_bytes(&self) -> u64 {
        self.value("Rss") * 1024
    }
}

impl SmapsValues for Vma {
    #[track_caller]
    fn value(&self, key: &str) -> u64 {
        ok(self.require(key), "/proc/self/smaps")
    }
}

/// Present pages (pagemap) among `pages` pages from `addr`.
#[track_caller]
pub fn present_pages(addr: usize, pages: usize) -> Vec<usize> {
    crate::proc::pagemap_present(addr, pages)
        .expect("reading /proc/self/pagemap")
        .iter()
        .enumerate()
        .filter_map(|(i, &p)| p.then_some(i))
        .collect()
}

/// Sorted page numbers as runs, "0-15 992-1007 2047", for messages.
pub fn ranges(pages: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &p in pages {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == p => *end = p,
            _ => runs.push((p, p)),
        }
    }
    let words: Vec<String> = runs
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    if words.is_empty() {
        "none".to_string()
    } else {
        words.join(" ")
    }
}

/// Requires `r` to fail with one of `want`.
#[track_caller]
pub fn expect_errno<T>(r: io::Result<T>, want: &[i32], what: &str) {
    let names = want
        .iter()
        .map(|&e| crate::sys::errno_name(e))
        .collect::<Vec<_>>()
        .join(" or ");
    match r {
        Ok(_) => panic!("{what}: expected {names}, but it succeeded"),
        Err(e) if want.contains(&e.raw_os_error().unwrap_or(0)) => {}
        Err(e) => panic!("{what}: expected {names}, got {}", err_name(&e)),
    }
}

/// Unwraps with the errno name in the message.
#[track_caller]
pub fn ok<T>(r: io::Result<T>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {}", err_name(&e)))
}

/// A write to `off` of `m` must be refused with SIGSEGV (SEGV_ACCERR) at
/// that address. It runs in this process, so the page tables checked
/// next are the ones the refused write left.
#[track_caller]
pub fn refused_write(m: &Mapping, off: usize, what: &str) {
    let addr = m.addr() + off;
    let got = crate::sys::catch::store_u64(addr, 0xBAD0_BAD0);
    let want = crate::sys::catch::Caught {
        signal: libc::SIGSEGV,
        code: crate::sys::catch::SEGV_ACCERR,
        addr,
    };
    assert!(
        got == Some(want),
        "{what}: expected SIGSEGV (SEGV_ACCERR) at {addr:#x}, got {got:?}"
    );
}

/// Pages present in `[addr, addr + pages)`, as map pages: the mappings
/// there map page `first + i` at page `i`.
pub fn present_map_pages(addr: usize, pages: usize, first: usize) -> Vec<usize> {
    present_pages(addr, pages)
        .into_iter()
        .map(|p| p + first)
        .collect()
}

#[track_caller]
pub fn assert_present(got: &[usize], want: &[usize], what: &str) {
    assert!(
        got == want,
        "{what}: present map pages {}, expected {}",
        ranges(got),
        ranges(want)
    );
}

/// Moves the mapping at `addr` (`len` bytes, given up by its owner) to a
/// fresh address with mremap(MREMAP_FIXED); returns the new address.
pub fn move_elsewhere(addr: usize, len: usize, what: &str) -> usize {
    let dst = ok(mm::reserve(len, PAGE), "reserving the mremap target");
    let (dst, _) = dst.leak();
    ok(
        mm::mremap(
            addr,
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            dst,
        ),
        what,
    )
}

/// An arena map of `pages` pages and its one mapping, read-write: an
/// arena takes a single mapping, and allocates a page on its first touch.
pub fn arena_mapping(pages: usize) -> (Map, Mapping) {
    arena_mapping_with(pages, 0)
}

/// The same with more map flags (e.g. BPF_F_SEGV_ON_FAULT: a touch of a
/// page the arena does not hold is SIGSEGV instead).
pub fn arena_mapping_with(pages: usize, flags: u32) -> (Map, Mapping) {
    let arena = ok(
        MapSpec {
            map_type: crate::sys::bpf::BPF_MAP_TYPE_ARENA,
            max_entries: pages as u32,
            map_flags: crate::sys::bpf::BPF_F_MMAPABLE | flags,
            ..Default::default()
        }
        .create(),
        &format!("creating a {pages}-page arena"),
    );
    let m = ok(
        mm::map_shared(arena.fd(), pages * PAGE, RW, 0),
        "mmap of the arena",
    );
    (arena, m)
}

/// Minor faults to read word 0 of each of `pages` of `m` (each once).
pub fn faults_to_read(m: &Mapping, pages: &[usize]) -> u64 {
    let before = crate::proc::minor_faults();
    std::hint::black_box(touch_pages(m, pages));
    crate::proc::minor_faults() - before
}

/// Runs the fault-counting code once on anonymous memory, so that the
/// count that follows holds only the faults of the pages it touches.
pub fn warm_up_fault_counting() {
    let warm = ok(mm::anon(2 * PAGE, RW), "anonymous warm-up mapping");
    std::hint::black_box(faults_to_read(&warm, &[0, 1]));
}

/// Reads word 0 of each page (faulting each in) and returns their sum, so
/// the loads cannot be optimised out.
#[inline(never)]
pub fn touch_pages(m: &Mapping, pages: &[usize]) -> u64 {
    pages
        .iter()
        .fold(0u64, |acc, &p| acc.wrapping_add(m.read_u64(p * PAGE)))
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn patterns_are_distinct_and_nonzero() {
        assert_ne!(pattern(0, 0), 0);
        assert_ne!(pattern(1, 0), pattern(0, 0));
        assert_ne!(pattern(0, 1), pattern(0, 0));
        assert_ne!(pattern(262_143, 511), pattern(262_142, 511));
        let img = page_image(7);
        assert_eq!(img.len(), PAGE);
        assert_eq!(word(&img, 3), pattern(7, 3));
    }

    #[test]
    fn page_runs() {
        assert_eq!(ranges(&[]), "none");
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0-2 5 7-8");
    }
}
