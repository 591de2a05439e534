//! The reference model: what every operation returns and leaves behind,
//! on a kernel that fills mappings as its variant says (`Fill`). The
//! contents of the maps, the mappings and their present pages, errnos
//! and signals all come from here; the executor's observations are
//! compared with them after every step.
//!
//! On base (eager), a page that MADV_DONTNEED zapped stays a hole: the
//! VMA has no fault handler, so an access takes SIGBUS (a user access)
//! or EFAULT (the kernel's), where the lazy kernels fault the page in.
//!
//! On prefault and adaptive a fault's window grows while faults are
//! sequential, as the map file's record of the last window says
//! (`selftests::runner::model::fault`): each map keeps one record per
//! file opened on it (`MapModel::records`), which every mapping made from
//! that file, and a forked child's copy of it, reads and updates. On
//! adaptive, mmap() also maps every page of an array map's mapping of at
//! most POPULATE_PAGES pages (the record left alone); a page zapped since
//! faults in again as on prefault.

mod access;
pub mod inject;
pub mod layout;
pub mod maps;

use std::collections::BTreeMap;

use guest_common::ENOTSUPP;
use selftests::runner::model::{fault, Fill};
use selftests::runner::Kernel;

pub use self::layout::{Layout, VmaModel};
pub use self::maps::MapModel;
use crate::op::{Access, Advice, Create, Elem, Mmap, Op, Prot, Range, Remap, Word};

pub const PAGE: usize = 4096;
pub const WORDS: usize = PAGE / 8;
/// The arena: every mapping of the fuzzer lies in these pages.
pub const ARENA_PAGES: usize = 2048;

/// What an operation returned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ret {
    /// Not run: an object it names is gone (in a shrunk subsequence) or
    /// its range lies outside the arena.
    Skipped,
    Ok,
    /// A loaded word; a BPF program's return value.
    Value(u64),
    /// Bytes read: an element, pages read through the kernel.
    Bytes(Vec<u8>),
    /// A short transfer: this many bytes, then a fault.
    Partial(usize),
    Errno(i32),
    Signal(i32),
    /// A child's accesses, in order.
    Child(Vec<Ret>),
}

/// The model's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    pub kernel: Kernel,
    /// NUMA nodes online in the guest.
    pub nodes: u32,
    /// Whether the skeleton client is there to run.
    pub client: bool,
    /// Whether fail_page_alloc is there to inject with (`fail_alloc`).
    pub inject: bool,
    pub maps: BTreeMap<u32, MapModel>,
    pub layout: Layout,
}

impl Model {
    pub fn new(kernel: Kernel, nodes: u32, client: bool) -> Model {
        Model {
            kernel,
            nodes,
            client,
            inject: false,
            maps: BTreeMap::new(),
            layout: Layout::default(),
        }
    }

    pub fn fill(&self) -> Fill {
        self.kernel.fill()
    }

    /// Applies `op`; what it returns.
    pub fn apply(&mut self, op: &Op) -> Ret {
        match op {
            Op::Create(c) => self.create(c),
            Op::CreateRingbuf { map, pages } => self.create_ringbuf(*map, *pages),
            Op::Mmap(m) => self.mmap(m),
            Op::Munmap(r) if in_arena(*r) => {
                self.unmap(*r);
                Ret::Ok
            }
            Op::Mremap { range, how } => self.mremap(*range, *how),
            Op::Mprotect { range, prot } => self.mprotect(*range, *prot),
            Op::Madvise { range, advice } => self.madvise(*range, *advice),
            Op::Mlock(r) => self.mlock(*r),
            // Never locked (see `mlock`): nothing to undo.
            Op::Munlock(r) => match self.layout.holding(*r) {
                Some(_) => Ret::Ok,
                None => Ret::Skipped,
            },
            Op::Touch(a) => self.touch(*a),
            Op::Fork(accesses) => self.fork(accesses),
            Op::PvmRead(r) => self.transfer(*r, access::Kind::RemoteRead),
            Op::PvmWrite(w, v) => self.write_word(*w, *v, access::Kind::RemoteWrite),
            Op::MemRead(r) => self.transfer(*r, access::Kind::ForcedRead),
            Op::MemWrite(w, v) => self.write_word(*w, *v, access::Kind::ForcedWrite),
            Op::FileFromMap(r) => self.transfer(*r, access::Kind::CopyFromUser),
            Op::FileToMap { range, fill } => self.file_to_map(*range, *fill),
            Op::Update { elem, fill } => self.update(*elem, *fill),
            Op::Lookup(e) => match self.open_array(e.map) {
                Some(m) => m
                    .value(e.index as usize)
                    .map_or(Ret::Errno(libc::ENOENT), |v| Ret::Bytes(v.to_vec())),
                None => Ret::Skipped,
            },
            Op::ProgStore { elem, word, value } => self.prog_store(*elem, *word, *value),
            Op::ProgLoad { elem, word } => self.prog_load(*elem, *word),
            Op::Freeze(m) => self.freeze(*m),
            Op::Close(m) => self.close(*m),
            Op::Reopen(m) => match self.maps.get_mut(m) {
                Some(map) if !map.fd_open => {
                    map.reopen();
                    Ret::Ok
                }
                _ => Ret::Skipped,
            },
            Op::Drop(m) => match self.maps.get(m) {
                Some(_) => {
                    for r in self.ranges_of(*m) {
                        self.unmap(r);
                    }
                    self.maps.remove(m);
                    Ret::Ok
                }
                None => Ret::Skipped,
            },
            Op::Skeleton(_) if self.client => Ret::Ok,
            // What it returns if the failure does not fire; what it may
            // return if it does is `injected_outcomes`.
            Op::FailAlloc { op, .. } if self.inject && injectable(op) => self.apply(op),
            _ => Ret::Skipped,
        }
    }

    /// The map `m` if the fuzzer holds an fd of it.
    pub fn open_map(&self, m: u32) -> Option<&MapModel> {
        self.maps.get(&m).filter(|map| map.fd_open)
    }

    /// The array map `m` if the fuzzer holds an fd of it (the element
    /// operations' maps).
    pub fn open_array(&self, m: u32) -> Option<&MapModel> {
        self.open_map(m).filter(|map| !map.ringbuf)
    }

    /// How `map`'s mappings are filled: a ring buffer's eagerly on every
    /// kernel (the series leaves its vm_ops alone), an array's as the
    /// kernel's variant says.
    pub fn fill_of(&self, map: u32) -> Fill {
        match self.maps.get(&map) {
            Some(m) if m.ringbuf => Fill::Eager,
            _ => self.fill(),
        }
    }

    /// Whether mmap() maps every page of a mapping of `pages` pages of
    /// `map`: a ring buffer's on every kernel, an array's on eager and,
    /// up to POPULATE_PAGES, on adaptive.
    pub fn populated_at_mmap(&self, map: u32, pages: usize) -> bool {
        self.fill_of(map) == Fill::Eager || self.kernel.populates(pages)
    }

    fn create_ringbuf(&mut self, map: u32, pages: u32) -> Ret {
        if self.maps.contains_key(&map) {
            return Ret::Skipped;
        }
        if !pages.is_power_of_two() {
            return Ret::Errno(libc::EINVAL);
        }
        self.maps.insert(map, MapModel::ringbuf(pages as usize));
        Ret::Ok
    }

    fn create(&mut self, c: &Create) -> Ret {
        let Create {
            map,
            value_size,
            entries,
            mmapable,
            rdonly_prog,
            node,
        } = *c;
        if self.maps.contains_key(&map) {
            return Ret::Skipped;
        }
        if value_size == 0 || entries == 0 || node.is_some_and(|n| n >= self.nodes) {
            return Ret::Errno(libc::EINVAL);
        }
        let m = MapModel::new(value_size as usize, entries as usize, mmapable, rdonly_prog);
        self.maps.insert(map, m);
        Ret::Ok
    }

    fn mmap(&mut self, m: &Mmap) -> Ret {
        let Mmap {
            range: r,
            map,
            pgoff,
            prot,
            private,
            populate,
        } = *m;
        if !in_arena(r) || self.open_map(map).is_none() {
            return Ret::Skipped;
        }
        // MAP_FIXED: what was there goes first, and stays gone if the
        // map's ->mmap() refuses (6.12 leaves the gap).
        self.unmap(r);
        let m = &self.maps[&map];
        // A ring buffer maps only its consumer page writable.
        let rb_refuses = m.ringbuf && prot.writable() && (pgoff, r.pages) != (0, 1);
        let refused = if private {
            Some(libc::EINVAL)
        } else if prot.writable() && m.frozen {
            Some(libc::EPERM)
        } else if prot.writable() && m.rdonly_prog {
            Some(libc::EACCES)
        } else if rb_refuses {
            Some(libc::EPERM)
        } else if !m.mmapable || pgoff + r.pages > m.pages() {
            Some(libc::EINVAL)
        } else {
            None
        };
        if let Some(errno) = refused {
            return Ret::Errno(errno);
        }
        // Adaptive's populate is best effort (mmap() succeeds whatever it
        // maps): what it leaves with a failure is `inject`'s.
        let present = match self.populated_at_mmap(map, r.pages) {
            true => (pgoff..pgoff + r.pages).collect(),
            false => Default::default(),
        };
        let file = m.file();
        self.layout.insert(VmaModel {
            start: r.at,
            pages: r.pages,
            map,
            pgoff,
            prot,
            maywrite: prot.writable(),
            present,
            file,
        });
        if populate && prot.readable() {
            // MAP_POPULATE's errors are not the caller's.
            let _ = self.fault_in(r, access::Kind::Populate);
        }
        Ret::Ok
    }

    /// Unmaps `r` (munmap, or MAP_FIXED and mremap over it); a map left
    /// with neither an fd nor a mapping is freed.
    fn unmap(&mut self, r: Range) {
        for gone in self.layout.unmap(r) {
            self.forget_if_unreachable(gone.map);
        }
    }

    fn forget_if_unreachable(&mut self, map: u32) {
        if self.maps.get(&map).is_some_and(|m| !m.fd_open) && !self.layout.maps_a(map) {
            self.maps.remove(&map);
        }
    }

    fn mremap(&mut self, r: Range, how: Remap) -> Ret {
        if !self.layout.is_exactly(r) {
            return Ret::Skipped;
        }
        match how {
            Remap::Shrink(n) if (1..r.pages).contains(&n) => {
                self.unmap(Range {
                    at: r.at + n,
                    pages: r.pages - n,
                });
                Ret::Ok
            }
            // VM_DONTEXPAND.
            Remap::Grow(n) if n > r.pages && r.at + n <= ARENA_PAGES => Ret::Errno(libc::EFAULT),
            Remap::Move(to) => {
                let dest = Range {
                    at: to,
                    pages: r.pages,
                };
                if !in_arena(dest) || (dest.at < r.end() && r.at < dest.end()) {
                    return Ret::Skipped;
                }
                let mut v = self.layout.remove(r.at).expect("is_exactly");
                // What was at the destination goes; the map it belonged to
                // is judged unreachable only with the moved VMA back in.
                let gone = self.layout.unmap(dest);
                v.start = to;
                // The page tables move with it.
                self.layout.insert(v);
                for g in gone {
                    self.forget_if_unreachable(g.map);
                }
                Ret::Ok
            }
            _ => Ret::Skipped,
        }
    }

    fn mprotect(&mut self, r: Range, prot: Prot) -> Ret {
        let Some(v) = self.layout.holding(r) else {
            return Ret::Skipped;
        };
        if prot.writable() && !v.maywrite {
            return Ret::Errno(libc::EACCES);
        }
        if v.prot != prot {
            self.layout.isolate(r).expect("held").prot = prot;
        }
        Ret::Ok
    }

    fn madvise(&mut self, r: Range, advice: Advice) -> Ret {
        let Some(v) = self.layout.holding(r) else {
            return Ret::Skipped;
        };
        let prot = v.prot;
        match advice {
            Advice::DontNeed => {
                let v = self.layout.get_mut(v.start).expect("held");
                let zapped = v.map_page(r.at)..v.map_page(r.end() - 1) + 1;
                v.present.retain(|p| !zapped.contains(p));
                Ret::Ok
            }
            Advice::PopulateRead if !prot.readable() => Ret::Errno(libc::EINVAL),
            Advice::PopulateWrite if !prot.writable() => Ret::Errno(libc::EINVAL),
            Advice::PopulateRead | Advice::PopulateWrite => {
                match self.fault_in(r, access::Kind::Populate) {
                    Ok(()) => Ret::Ok,
                    Err(_) => Ret::Errno(libc::EFAULT),
                }
            }
            Advice::WillNeed | Advice::Cold | Advice::PageOut => Ret::Ok,
        }
    }

    /// mlock() never locks these VMAs (VM_SPECIAL: vma_supports_mlock()
    /// refuses them) but still populates them.
    fn mlock(&mut self, r: Range) -> Ret {
        let Some(v) = self.layout.holding(r) else {
            return Ret::Skipped;
        };
        if !v.prot.readable() {
            // populate_vma_page_range(): -EFAULT, which mlock reports so.
            return Ret::Errno(libc::ENOMEM);
        }
        match self.fault_in(r, access::Kind::Populate) {
            Ok(()) => Ret::Ok,
            Err(_) => Ret::Errno(libc::ENOMEM),
        }
    }

    fn update(&mut self, e: Elem, fill: u8) -> Ret {
        let Some(m) = self.open_array(e.map) else {
            return Ret::Skipped;
        };
        if m.frozen {
            return Ret::Errno(libc::EPERM);
        }
        if e.index as usize >= m.entries {
            return Ret::Errno(libc::E2BIG);
        }
        self.maps
            .get_mut(&e.map)
            .expect("open")
            .update(e.index as usize, fill);
        Ret::Ok
    }

    /// Where word `word` of element `e` lies in the value area, if the
    /// verifier lets a program reach it.
    fn prog_offset(m: &MapModel, e: Elem, word: u32) -> Option<usize> {
        let off = word as usize * 8;
        (off + 8 <= m.value_size).then(|| e.index as usize * m.elem_size() + off)
    }

    fn prog_store(&mut self, e: Elem, word: u32, value: i32) -> Ret {
        let Some(m) = self.open_array(e.map) else {
            return Ret::Skipped;
        };
        if m.rdonly_prog {
            return Ret::Errno(libc::EACCES);
        }
        let Some(off) = Self::prog_offset(m, e, word) else {
            return Ret::Errno(libc::EACCES);
        };
        if e.index as usize >= m.entries {
            // The program's lookup found nothing.
            return Ret::Value(1);
        }
        // BPF_ST | BPF_DW sign-extends its immediate.
        let m = self.maps.get_mut(&e.map).expect("open");
        m.write_u64(off, i64::from(value) as u64);
        Ret::Value(0)
    }

    fn prog_load(&self, e: Elem, word: u32) -> Ret {
        let Some(m) = self.open_array(e.map) else {
            return Ret::Skipped;
        };
        let Some(off) = Self::prog_offset(m, e, word) else {
            return Ret::Errno(libc::EACCES);
        };
        // A frozen RDONLY_PROG map's contents are constants to the
        // verifier, which reads them through map_direct_value_addr():
        // an array of more than one element has none (-ENOTSUPP).
        if m.rdonly_prog && m.frozen && m.entries != 1 {
            return Ret::Errno(ENOTSUPP);
        }
        if e.index as usize >= m.entries {
            return Ret::Value(0);
        }
        // r0 is returned as 32 bits.
        Ret::Value(m.read_u64(off) & 0xffff_ffff)
    }

    fn freeze(&mut self, map: u32) -> Ret {
        let Some(m) = self.open_map(map) else {
            return Ret::Skipped;
        };
        // Frozen, the fd's syscall side has lost its write permission.
        if m.frozen {
            return Ret::Errno(libc::EPERM);
        }
        if self.layout.writers(map) > 0 {
            return Ret::Errno(libc::EBUSY);
        }
        self.maps.get_mut(&map).expect("open").frozen = true;
        Ret::Ok
    }

    fn close(&mut self, map: u32) -> Ret {
        match self.maps.get_mut(&map) {
            Some(m) if m.fd_open => {
                m.fd_open = false;
                self.forget_if_unreachable(map);
                Ret::Ok
            }
            _ => Ret::Skipped,
        }
    }

    /// The arena ranges of `map`'s VMAs, in order.
    pub fn ranges_of(&self, map: u32) -> Vec<Range> {
        self.layout
            .iter()
            .filter(|v| v.map == map)
            .map(|v| Range {
                at: v.start,
                pages: v.pages,
            })
            .collect()
    }

    /// The map page and byte offset in the value area behind arena word
    /// `w`, if a VMA maps it.
    pub fn word_at(&self, w: Word) -> Option<(u32, usize)> {
        let v = self.layout.at(w.page)?;
        Some((v.map, v.map_page(w.page) * PAGE + w.word * 8))
    }
}

/// Whether `fail_alloc` takes `op`: an access or a populate, whose
/// faults allocate page tables.
pub fn injectable(op: &Op) -> bool {
    matches!(
        op,
        Op::Touch(_)
            | Op::Madvise {
                advice: Advice::PopulateRead | Advice::PopulateWrite,
                ..
            }
            | Op::Mmap(Mmap { populate: true, .. })
    )
}

/// Whether `r` lies in the arena and is not empty.
pub fn in_arena(r: Range) -> bool {
    r.pages > 0 && r.end() <= ARENA_PAGES
}

/// One access of this process (or a child) and what it returns.
pub fn access_word(at: Word) -> bool {
    at.page < ARENA_PAGES && at.word < WORDS
}

impl Model {
    fn touch(&mut self, a: Access) -> Ret {
        if !access_word(a.at) {
            return Ret::Skipped;
        }
        let kind = match a.write {
            None => access::Kind::UserRead,
            Some(_) => access::Kind::UserWrite,
        };
        match self.access_page(a.at.page, kind) {
            Err(fail) => fail.user_ret(),
            Ok(()) => {
                let (map, off) = self.word_at(a.at).expect("accessible");
                let m = self.maps.get_mut(&map).expect("mapped");
                match a.write {
                    None => Ret::Value(m.read_u64(off)),
                    Some(v) => {
                        m.write_u64(off, v);
                        Ret::Ok
                    }
                }
            }
        }
    }

    fn fork(&mut self, accesses: &[Access]) -> Ret {
        // The child's page tables are copies (VM_MIXEDMAP): its faults
        // are its own; the pages it writes are shared, and so are the
        // files, with the records its faults leave.
        let mut child = self.clone();
        let rets = accesses.iter().map(|a| child.touch(*a)).collect();
        self.maps = child.maps;
        Ret::Child(rets)
    }

    fn write_word(&mut self, w: Word, value: u64, kind: access::Kind) -> Ret {
        if !access_word(w) || self.layout.at(w.page).is_none() {
            return Ret::Skipped;
        }
        let r = Range {
            at: w.page,
            pages: 1,
        };
        match self.fault_in(r, kind) {
            Err(fail) => fail.transfer_ret(kind, 0),
            Ok(()) => {
                let (map, off) = self.word_at(w).expect("accessible");
                self.maps
                    .get_mut(&map)
                    .expect("mapped")
                    .write_u64(off, value);
                Ret::Ok
            }
        }
    }

    /// A transfer through the kernel of pages `r` of one VMA: read out
    /// (process_vm_readv, /proc/self/mem, write(2) to a file), page by
    /// page until a fault.
    fn transfer(&mut self, r: Range, kind: access::Kind) -> Ret {
        if self.layout.holding(r).is_none() {
            return Ret::Skipped;
        }
        match self.fault_in(r, kind) {
            Ok(()) => Ret::Bytes(self.read_pages(r)),
            Err(fail) => fail.transfer_ret(kind, fail.done * PAGE),
        }
    }

    fn file_to_map(&mut self, r: Range, fill: u8) -> Ret {
        if self.layout.holding(r).is_none() {
            return Ret::Skipped;
        }
        let kind = access::Kind::CopyToUser;
        let (done, result) = match self.fault_in(r, kind) {
            Ok(()) => (r.pages, Ret::Value((r.pages * PAGE) as u64)),
            Err(fail) => (fail.done, fail.transfer_ret(kind, fail.done * PAGE)),
        };
        let v = self.layout.at(r.at).expect("held").clone();
        let m = self.maps.get_mut(&v.map).expect("mapped");
        for page in r.at..r.at + done {
            let mp = v.map_page(page);
            m.bytes[mp * PAGE..(mp + 1) * PAGE].fill(fill);
        }
        result
    }

    /// The bytes of arena pages `r` (one VMA's).
    pub fn read_pages(&self, r: Range) -> Vec<u8> {
        let v = self.layout.at(r.at).expect("held");
        let m = &self.maps[&v.map];
        (r.at..r.end())
            .flat_map(|p| m.page(v.map_page(p)).iter().copied())
            .collect()
    }

    /// Faults in arena pages `r` of one VMA in order, as `kind` does.
    fn fault_in(&mut self, r: Range, kind: access::Kind) -> Result<(), access::Fail> {
        for (i, page) in (r.at..r.end()).enumerate() {
            self.access_page(page, kind).map_err(|mut f| {
                f.done = i;
                f
            })?;
        }
        Ok(())
    }

    /// One page accessed as `kind`: refused, a hole on base, or present
    /// (faulted in as the kernel's fill says).
    fn access_page(&mut self, page: usize, kind: access::Kind) -> Result<(), access::Fail> {
        let Some(v) = self.layout.at(page) else {
            return Err(access::Fail::unmapped());
        };
        let fill = self.fill_of(v.map);
        if !kind.permitted(v.prot) {
            return Err(access::Fail::refused());
        }
        let mp = v.map_page(page);
        if v.present.contains(&mp) {
            return Ok(());
        }
        if fill == Fill::Eager {
            return Err(access::Fail::hole());
        }
        let (start, map, file) = (v.start, v.map, v.file);
        let record = self.maps[&map].records[file];
        let v = self.layout.get_mut(start).expect("found");
        let (mapped, record) = fault(fill, &v.present, &v.map_pages(), mp, record);
        v.present.extend(mapped);
        if fill == Fill::Growing {
            self.maps.get_mut(&map).expect("mapped").records[file] = Some(record);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use selftests::runner::model::{Record, POPULATE_PAGES};

    fn ops(text: &str) -> Vec<Op> {
        crate::op::parse_ops(text).unwrap()
    }

    #[test]
    fn a_mapping_moved_over_its_own_maps_last_other_mapping_keeps_the_map() {
        let mut m = Model::new(Kernel::Mainline, 2, false);
        for op in ops("create m0 value=4096 entries=16\n\
             mmap @0+4 m0 pgoff=0 rw\n\
             mmap @10+4 m0 pgoff=4 rw\n\
             close m0\n\
             mremap @0+4 to=@10\n")
        {
            assert_ne!(m.apply(&op), Ret::Skipped, "{op}");
        }
        assert!(m.maps.contains_key(&0), "the moved mapping still holds m0");
        assert_eq!(m.ranges_of(0), [Range { at: 10, pages: 4 }]);
        // Its last mapping gone, the map is gone.
        m.apply(&Op::Munmap(Range { at: 10, pages: 4 }));
        assert!(!m.maps.contains_key(&0));
    }

    #[test]
    fn a_zapped_page_is_a_hole_on_base_and_faults_in_again_elsewhere() {
        let touch = "create m0 value=4096 entries=4\n\
                     mmap @0+4 m0 pgoff=0 rw\n\
                     madvise @1+1 dontneed\n\
                     touch @1.0=r\n";
        let last = |k: Kernel| {
            let mut m = Model::new(k, 1, false);
            ops(touch).iter().map(|op| m.apply(op)).last().unwrap()
        };
        assert_eq!(last(Kernel::Eager), Ret::Signal(libc::SIGBUS));
        assert_eq!(last(Kernel::Adaptive), Ret::Value(0));
    }

    /// A model after `text`, on `kernel`, every operation run.
    fn run(kernel: Kernel, text: &str) -> Model {
        let mut m = Model::new(kernel, 1, false);
        for op in ops(text) {
            assert_ne!(m.apply(&op), Ret::Skipped, "{op}");
        }
        m
    }

    /// The present map pages of the VMA at arena page `at`.
    fn present(m: &Model, at: usize) -> Vec<usize> {
        m.layout.at(at).unwrap().present.iter().copied().collect()
    }

    fn record(start: usize, size: usize) -> Option<Record> {
        Some(Record { start, size })
    }

    #[test]
    fn two_mappings_of_one_map_fault_through_one_record() {
        // Map pages 0..8 at arena 0, 8..16 at arena 100, from one fd.
        let text = "create m0 value=4096 entries=64\n\
                    mmap @0+8 m0 pgoff=0 rw\n\
                    mmap @100+8 m0 pgoff=8 rw\n\
                    touch @7.0=r\n\
                    touch @100.0=r\n";
        let m = run(Kernel::Prefault, text);
        // 8 is right above the window 7 left (7..8), though in the other
        // mapping: it maps 8..10.
        assert_eq!(present(&m, 100), [8, 9]);
        assert_eq!(m.maps[&0].records, [record(8, 2)]);
        // A reopened fd is a new file, with a record of its own: map page
        // 10 faulted through it is alone, through the first file it is
        // right above 8..10.
        let m = run(
            Kernel::Prefault,
            &format!(
                "{text}close m0\nreopen m0\nmmap @200+8 m0 pgoff=10 rw\ntouch @200.0=r\n\
                 touch @102.0=r\n"
            ),
        );
        assert_eq!(present(&m, 200), [10]);
        assert_eq!(present(&m, 100), (8..14).collect::<Vec<_>>());
        assert_eq!(m.maps[&0].records, [record(10, 4), record(10, 1)]);
    }

    #[test]
    fn a_forked_childs_faults_leave_the_record_to_the_parent() {
        let text = "create m0 value=4096 entries=64\n\
                    mmap @0+32 m0 pgoff=0 rw\n\
                    touch @0.0=r\n\
                    fork @1.0=r\n\
                    touch @3.0=r\n";
        let m = run(Kernel::Prefault, text);
        // The child's fault at 1 mapped 1..3 in its own page tables; the
        // file it shares records that window, so the parent's fault at 3
        // grows it to 3..7.
        assert_eq!(present(&m, 0), [0, 3, 4, 5, 6]);
        assert_eq!(m.maps[&0].records, [record(3, 4)]);
    }

    #[test]
    fn adaptive_populates_a_small_array_mapping_at_mmap() {
        let text = format!(
            "create m0 value=4096 entries=300\n\
             mmap @0+{POPULATE_PAGES} m0 pgoff=0 r\n\
             mmap @1000+{} m0 pgoff=0 r\n",
            POPULATE_PAGES + 1
        );
        let m = run(Kernel::Adaptive, &text);
        assert_eq!(present(&m, 0), (0..POPULATE_PAGES).collect::<Vec<_>>());
        assert_eq!(
            present(&m, 1000),
            Vec::<usize>::new(),
            "above POPULATE_PAGES: lazy"
        );
        assert_eq!(m.maps[&0].records, [None], "mmap() leaves the record");
        // Prefault populates neither.
        let m = run(Kernel::Prefault, &text);
        assert_eq!(present(&m, 0), Vec::<usize>::new());
    }

    #[test]
    fn a_page_zapped_on_adaptive_faults_in_again_with_the_window() {
        let text = "create m0 value=4096 entries=16\n\
                    mmap @0+16 m0 pgoff=0 rw\n\
                    madvise @4+8 dontneed\n\
                    touch @4.0=r\n\
                    touch @5.0=w:1\n\
                    touch @7.0=r\n";
        let m = run(Kernel::Adaptive, text);
        // 4 alone (no record yet), 5..7, then 7..11; 11 stays a hole.
        let want: Vec<usize> = (0..11).chain(12..16).collect();
        assert_eq!(present(&m, 0), want);
        assert_eq!(m.maps[&0].records, [record(7, 4)]);
        // 11 is right above it: 8 pages asked, 12 is present.
        let mut m = m;
        m.apply(&"touch @11.0=r".parse().unwrap());
        assert_eq!(present(&m, 0), (0..16).collect::<Vec<_>>());
        assert_eq!(m.maps[&0].records, [record(11, 1)]);
    }

    #[test]
    fn a_downward_window_stops_short_of_a_present_page() {
        let mut text = String::from(
            "create m0 value=4096 entries=64\nmmap @0+64 m0 pgoff=0 rw\ntouch @20.0=r\n",
        );
        // Downwards from 40: windows of 1, 2, 4 and 8 pages, down to 26.
        for page in [40, 39, 37, 33] {
            text += &format!("touch @{page}.0=r\n");
        }
        let mut m = run(Kernel::Prefault, &text);
        assert_eq!(m.maps[&0].records, [record(26, 8)]);
        // 25 asks for 16 pages down, 10..=25: the batch meets 20, and the
        // window is 21..=25.
        m.apply(&"touch @25.0=r".parse().unwrap());
        assert_eq!(present(&m, 0), (20..41).collect::<Vec<_>>());
        assert_eq!(m.maps[&0].records, [record(21, 5)]);
    }
}
