//! The executor: each operation done on the running kernel, its return
//! observed as a `Ret` the model's can be compared with. Every mapping
//! lies in an arena reserved at start (PROT_NONE anonymous memory): an
//! operation that leaves a gap in it (munmap, a failed MAP_FIXED mmap,
//! mremap) reserves the gap again, so no other mapping of the process
//! can ever land in the arena.

mod child;
pub mod inject;
pub mod progs;

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use selftests::sys::bpf::{self, MapSpec, BPF_F_RDONLY_PROG};
use selftests::sys::{catch, mm};

use self::inject::Injector;
use crate::model::{Ret, ARENA_PAGES, PAGE};
use crate::op::{Access, Create, Elem, Mmap, Op, Range, Remap, Word};

/// A map the executor created.
struct RealMap {
    fd: Option<OwnedFd>,
    /// Its kernel id, to reopen it.
    id: u32,
    value_size: usize,
    entries: u32,
}

pub struct Executor {
    arena: usize,
    maps: BTreeMap<u32, RealMap>,
    /// A memfd for read(2) and write(2) against mappings.
    file: OwnedFd,
    /// /proc/self/mem.
    mem: std::fs::File,
    client: Option<PathBuf>,
    /// fail_page_alloc for `fail_alloc`, if the kernel has it.
    injector: Option<Injector>,
    /// A private page of ours that `counted_access` writes first.
    scratch: mm::Mapping,
}

/// What an operation with an injected allocation failure did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    pub ret: Ret,
    /// Whether the failure fired (fail_page_alloc's `times` spent).
    pub fired: bool,
    /// A load's or store's minor faults.
    pub faults: Option<u64>,
}

const RESERVE: i32 = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;

impl Executor {
    /// Reserves the arena; `client` is the skeleton client, if present;
    /// `inject`: set fail_page_alloc up.
    pub fn new(client: Option<PathBuf>, inject: bool) -> io::Result<Executor> {
        // Aligned to its size: its 2 MiB regions, under a page table
        // each, hold nothing of the process but the arena's mappings
        // (`model::inject`). Never unmapped while the process lives.
        let (arena, _) = mm::reserve(ARENA_PAGES * PAGE, ARENA_PAGES * PAGE)?.leak();
        // SAFETY: memfd_create takes a NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"bpflab-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let scratch = mm::anon(PAGE, libc::PROT_READ | libc::PROT_WRITE)?;
        Ok(Executor {
            arena,
            maps: BTreeMap::new(),
            // SAFETY: the kernel just returned this fd to us.
            file: unsafe { OwnedFd::from_raw_fd(fd) },
            mem: std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/proc/self/mem")?,
            client,
            injector: match inject {
                true => {
                    warm_counted_access(scratch.addr())?;
                    Some(Injector::new()?)
                }
                false => None,
            },
            scratch,
        })
    }

    /// Does `op` (which the model did not skip) with one page allocation
    /// failing after `pass`; a load's or store's minor faults counted.
    pub fn apply_injected(&mut self, pass: u32, op: &Op) -> io::Result<Injected> {
        let injector = self
            .injector
            .take()
            .expect("the model injects only where fail_page_alloc is");
        let done = injector.armed(pass, || match op {
            Op::Touch(a) => {
                let scratch = self.scratch.addr();
                let (ret, faults) = counted_access(self.word_addr(a.at), a.write, scratch);
                (ret, Some(faults))
            }
            other => (self.apply(other), None),
        });
        self.injector = Some(injector);
        let ((ret, faults), fired) = done?;
        Ok(Injected { ret, fired, faults })
    }

    pub fn arena(&self) -> usize {
        self.arena
    }

    pub fn addr(&self, page: usize) -> usize {
        self.arena + page * PAGE
    }

    fn word_addr(&self, w: Word) -> usize {
        self.addr(w.page) + w.word * 8
    }

    /// The fd of map `m`, which the model says is open.
    pub fn fd(&self, m: u32) -> BorrowedFd<'_> {
        self.maps[&m]
            .fd
            .as_ref()
            .expect("the model holds it open")
            .as_fd()
    }

    /// Does `op` (which the model did not skip).
    pub fn apply(&mut self, op: &Op) -> Ret {
        match op {
            Op::Create(c) => self.create(c),
            Op::CreateRingbuf { map, pages } => self.create_ringbuf(*map, *pages),
            Op::Mmap(m) => self.mmap(m),
            Op::Munmap(r) => self.munmap(*r),
            Op::Mremap { range, how } => self.mremap(*range, *how),
            Op::Mprotect { range, prot } => done(mm::mprotect(
                self.addr(range.at),
                range.pages * PAGE,
                prot.bits(),
            )),
            Op::Madvise { range, advice } => done(mm::madvise(
                self.addr(range.at),
                range.pages * PAGE,
                advice.bits(),
            )),
            Op::Mlock(r) => done(mm::mlock(self.addr(r.at), r.pages * PAGE)),
            Op::Munlock(r) => done(mm::munlock(self.addr(r.at), r.pages * PAGE)),
            Op::Touch(a) => self.touch(*a),
            Op::Fork(accesses) => self.fork(accesses),
            Op::PvmRead(r) => self.pvm_read(*r),
            Op::PvmWrite(w, v) => self.pvm_write(*w, *v),
            Op::MemRead(r) => self.mem_read(*r),
            Op::MemWrite(w, v) => self.mem_write(*w, *v),
            Op::FileFromMap(r) => self.file_from_map(*r),
            Op::FileToMap { range, fill } => self.file_to_map(*range, *fill),
            Op::Update { elem, fill } => self.update(*elem, *fill),
            Op::Lookup(e) => self.lookup(*e),
            Op::ProgStore { elem, word, value } => {
                progs::store(self.fd(elem.map), *elem, *word, *value)
            }
            Op::ProgLoad { elem, word } => progs::load(self.fd(elem.map), *elem, *word),
            Op::Freeze(m) => done(bpf::map_freeze(self.fd(*m))),
            Op::Close(m) => {
                self.maps.get_mut(m).expect("held").fd = None;
                Ret::Ok
            }
            Op::Reopen(m) => self.reopen(*m),
            Op::Drop(_) => unreachable!("done by `drop_map` with the model's ranges"),
            Op::Skeleton(seed) => self.skeleton(*seed),
            Op::FailAlloc { .. } => unreachable!("done by `apply_injected`"),
        }
    }

    /// `drop`: every mapping of `map` unmapped (`ranges`, the model's
    /// before it applied the operation) and its fd closed.
    pub fn drop_map(&mut self, map: u32, ranges: &[Range]) -> Ret {
        for r in ranges {
            if let Err(e) = mm::munmap(self.addr(r.at), r.pages * PAGE) {
                return errno(&e);
            }
            self.reserve(*r);
        }
        self.maps.remove(&map);
        Ret::Ok
    }

    /// Forgets the maps the model let go of (closed and unmapped: the
    /// kernel frees them).
    pub fn retain_maps(&mut self, alive: impl Fn(u32) -> bool) {
        self.maps.retain(|&m, _| alive(m));
    }

    /// The values of every element of open map `m`, in one batch.
    pub fn values(&self, m: u32) -> io::Result<Vec<u8>> {
        let real = &self.maps[&m];
        bpf::map_lookup_all(self.fd(m), real.entries, real.value_size)
    }

    /// PROT_NONE anonymous memory over `r` again.
    fn reserve(&self, r: Range) {
        mm::mmap_raw(
            self.addr(r.at),
            r.pages * PAGE,
            libc::PROT_NONE,
            RESERVE | libc::MAP_FIXED,
            -1,
            0,
        )
        .expect("reserving arena pages again");
    }

    fn create(&mut self, c: &Create) -> Ret {
        let mut spec = if c.mmapable {
            MapSpec::mmapable_array(c.value_size, c.entries)
        } else {
            MapSpec::array(c.value_size, c.entries)
        };
        if c.rdonly_prog {
            spec = spec.flags(BPF_F_RDONLY_PROG);
        }
        if let Some(n) = c.node {
            spec = spec.on_node(n);
        }
        self.create_as(c.map, &spec)
    }

    fn create_ringbuf(&mut self, map: u32, pages: u32) -> Ret {
        let spec = MapSpec {
            map_type: bpf::BPF_MAP_TYPE_RINGBUF,
            max_entries: pages.saturating_mul(PAGE as u32),
            ..Default::default()
        };
        self.create_as(map, &spec)
    }

    /// Creates `spec` and keeps it as map `map`.
    fn create_as(&mut self, map: u32, spec: &MapSpec) -> Ret {
        let made = spec.create().and_then(|m| Ok((m.id()?, m)));
        match made {
            Ok((id, m)) => {
                let real = RealMap {
                    id,
                    value_size: m.value_size(),
                    entries: spec.max_entries,
                    fd: Some(m.into_fd()),
                };
                self.maps.insert(map, real);
                Ret::Ok
            }
            Err(e) => errno(&e),
        }
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
        let mut flags = libc::MAP_FIXED;
        flags |= if private {
            libc::MAP_PRIVATE
        } else {
            libc::MAP_SHARED
        };
        if populate {
            flags |= libc::MAP_POPULATE;
        }
        let fd = self.fd(map).as_raw_fd();
        let got = mm::mmap_raw(
            self.addr(r.at),
            r.pages * PAGE,
            prot.bits(),
            flags,
            fd,
            (pgoff * PAGE) as u64,
        );
        match got {
            Ok(addr) if addr == self.addr(r.at) => Ret::Ok,
            Ok(addr) => panic!("MAP_FIXED mapped {addr:#x}, not {:#x}", self.addr(r.at)),
            Err(e) => {
                // The old mapping is gone (or, on a kernel that keeps it,
                // goes now): the model's range is reserve either way.
                self.reserve(r);
                errno(&e)
            }
        }
    }

    /// munmap, the gap reserved again.
    fn munmap(&mut self, r: Range) -> Ret {
        let ret = done(mm::munmap(self.addr(r.at), r.pages * PAGE));
        self.reserve(r);
        ret
    }

    fn mremap(&mut self, r: Range, how: Remap) -> Ret {
        let (addr, len) = (self.addr(r.at), r.pages * PAGE);
        match how {
            Remap::Shrink(n) => {
                let ret = done(mm::mremap(addr, len, n * PAGE, 0, 0).map(drop));
                self.reserve(Range {
                    at: r.at + n,
                    pages: r.pages - n,
                });
                ret
            }
            // In place or not at all: a success would show in the layout.
            Remap::Grow(n) => done(mm::mremap(addr, len, n * PAGE, 0, 0).map(drop)),
            Remap::Move(to) => {
                let flags = libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED;
                let ret = done(mm::mremap(addr, len, len, flags, self.addr(to)).map(drop));
                self.reserve(r);
                ret
            }
        }
    }

    fn touch(&mut self, a: Access) -> Ret {
        access(self.word_addr(a.at), a.write)
    }

    /// A child does `accesses` at their addresses in the arena.
    fn fork(&self, accesses: &[Access]) -> Ret {
        let addrs: Vec<(usize, Option<u64>)> = accesses
            .iter()
            .map(|a| (self.word_addr(a.at), a.write))
            .collect();
        child::fork_and_access(&addrs)
    }

    fn pvm_read(&self, r: Range) -> Ret {
        let mut buf = vec![0u8; r.pages * PAGE];
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        transferred(mm::process_vm_readv(me, self.addr(r.at), &mut buf), buf)
    }

    fn pvm_write(&self, w: Word, v: u64) -> Ret {
        let bytes = v.to_ne_bytes();
        let local = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: 8,
        };
        let remote = libc::iovec {
            iov_base: self.word_addr(w) as *mut libc::c_void,
            iov_len: 8,
        };
        // SAFETY: the local iovec covers `bytes`; the kernel checks the
        // remote one.
        let n = unsafe { libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0) };
        match n {
            8 => Ret::Ok,
            n if n < 0 => errno(&io::Error::last_os_error()),
            n => Ret::Partial(n as usize),
        }
    }

    /// A read of whole pages through /proc/self/mem.
    fn mem_read(&self, r: Range) -> Ret {
        let mut buf = vec![0u8; r.pages * PAGE];
        transferred(self.mem.read_at(&mut buf, self.addr(r.at) as u64), buf)
    }

    /// A write of one word through /proc/self/mem.
    fn mem_write(&self, w: Word, v: u64) -> Ret {
        match self
            .mem
            .write_at(&v.to_ne_bytes(), self.word_addr(w) as u64)
        {
            Ok(8) => Ret::Ok,
            other => transferred(other, Vec::new()),
        }
    }

    fn file_from_map(&self, r: Range) -> Ret {
        let fd = self.file.as_raw_fd();
        let len = r.pages * PAGE;
        // SAFETY: fd is our memfd; the buffer is the mapping, which the
        // kernel checks.
        let n = unsafe {
            libc::ftruncate(fd, 0);
            libc::pwrite(fd, self.addr(r.at) as *const libc::c_void, len, 0)
        };
        if n < 0 {
            return errno(&io::Error::last_os_error());
        }
        if n as usize != len {
            return Ret::Partial(n as usize);
        }
        let mut back = vec![0u8; len];
        // SAFETY: `back` is ours, of `len` bytes.
        let m = unsafe { libc::pread(fd, back.as_mut_ptr().cast(), len, 0) };
        assert_eq!(m as usize, len, "reading the memfd back");
        Ret::Bytes(back)
    }

    fn file_to_map(&self, r: Range, fill: u8) -> Ret {
        let fd = self.file.as_raw_fd();
        let len = r.pages * PAGE;
        let bytes = vec![fill; len];
        // SAFETY: fd is our memfd; `bytes` is ours; the destination is the
        // mapping, which the kernel checks.
        let n = unsafe {
            libc::ftruncate(fd, 0);
            let w = libc::pwrite(fd, bytes.as_ptr().cast(), len, 0);
            assert_eq!(w as usize, len, "filling the memfd");
            libc::pread(fd, self.addr(r.at) as *mut libc::c_void, len, 0)
        };
        match n {
            n if n < 0 => errno(&io::Error::last_os_error()),
            n if n as usize == len => Ret::Value(n as u64),
            n => Ret::Partial(n as usize),
        }
    }

    fn update(&self, e: Elem, fill: u8) -> Ret {
        let value = vec![fill; self.maps[&e.map].value_size];
        done(bpf::map_update(
            self.fd(e.map),
            &e.index.to_ne_bytes(),
            &value,
            bpf::BPF_ANY,
        ))
    }

    fn lookup(&self, e: Elem) -> Ret {
        let mut value = vec![0u8; self.maps[&e.map].value_size];
        match bpf::map_lookup(self.fd(e.map), &e.index.to_ne_bytes(), &mut value) {
            Ok(()) => Ret::Bytes(value),
            Err(err) => errno(&err),
        }
    }

    /// A new fd for map `m`, by its id.
    fn reopen(&mut self, m: u32) -> Ret {
        let real = self.maps.get_mut(&m).expect("held");
        match bpf::map_get_fd_by_id(real.id) {
            Ok(fd) => {
                real.fd = Some(fd);
                Ret::Ok
            }
            Err(e) => errno(&e),
        }
    }

    fn skeleton(&self, seed: u64) -> Ret {
        let client = self
            .client
            .as_ref()
            .expect("the model runs it only when present");
        match std::process::Command::new(client)
            .arg(seed.to_string())
            .stdin(std::process::Stdio::null())
            .output()
        {
            Ok(out) if out.status.success() => Ret::Ok,
            Ok(out) => Ret::Bytes(
                format!(
                    "{}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                )
                .into_bytes(),
            ),
            Err(e) => errno(&e),
        }
    }
}

/// A load of the word at `addr`, or a store of `write` to it.
fn access(addr: usize, write: Option<u64>) -> Ret {
    match write {
        None => match catch::load_u64(addr) {
            Ok(v) => Ret::Value(v),
            Err(c) => Ret::Signal(c.signal),
        },
        Some(v) => match catch::store_u64(addr, v) {
            None => Ret::Ok,
            Some(c) => Ret::Signal(c.signal),
        },
    }
}

/// `access`, and the minor faults of this thread while it ran. Only the
/// access may fault in between. The code would fault its own text in the
/// first time it runs ([`warm_counted_access`] runs it first); and after
/// a fork every private page of ours is copy-on-write, the first store to
/// each a fault: so the stores the measured code makes (its stack, the
/// catch's statics, getrusage's buffer) are made once before, by the same
/// code on `scratch`, a private page of ours.
#[inline(never)]
fn counted_access(addr: usize, write: Option<u64>, scratch: usize) -> (Ret, u64) {
    selftests::proc::minor_faults();
    access(scratch, Some(0));
    let before = selftests::proc::minor_faults();
    let ret = access(addr, write);
    (ret, selftests::proc::minor_faults() - before)
}

/// Runs `counted_access`'s every path, so that its text is mapped before
/// it counts anything; then checks that it counts a page's first store
/// as one fault and the accesses after it as none.
fn warm_counted_access(scratch: usize) -> io::Result<()> {
    let page = mm::anon(PAGE, libc::PROT_READ | libc::PROT_WRITE)?;
    for _ in 0..2 {
        counted_access(scratch, Some(1), scratch);
        counted_access(scratch, None, scratch);
    }
    let counted = [
        counted_access(page.addr(), Some(2), scratch),
        counted_access(page.addr(), Some(3), scratch),
        counted_access(page.addr(), None, scratch),
    ];
    if counted != [(Ret::Ok, 1), (Ret::Ok, 0), (Ret::Value(3), 0)] {
        return Err(io::Error::other(format!(
            "counting faults: a fresh page's store, another and a load gave {counted:?}, \
             expected 1, 0 and 0 faults"
        )));
    }
    Ok(())
}

/// Ok, or the errno.
fn done(r: io::Result<()>) -> Ret {
    match r {
        Ok(()) => Ret::Ok,
        Err(e) => errno(&e),
    }
}

fn errno(e: &io::Error) -> Ret {
    Ret::Errno(e.raw_os_error().unwrap_or(-1))
}

/// A read of `buf.len()` bytes: all of them, a short count, or the error.
fn transferred(n: io::Result<usize>, buf: Vec<u8>) -> Ret {
    match n {
        Ok(n) if n == buf.len() && n > 0 => Ret::Bytes(buf),
        Ok(n) => Ret::Partial(n),
        Err(e) => errno(&e),
    }
}
