//! The fuzzer's operations, one per line of a reproducer. Mappings are
//! named by their place in the arena (`@page+pages`, `@page.word`) and
//! maps by name (`m3`), never by an order of creation: any subsequence of
//! a run is a run, which is what shrinking needs. An operation whose
//! object is gone in a subsequence is skipped by the model (and so by the
//! executor). `Display` writes an operation's line; `parse` reads it back.

mod parse;

use std::fmt;

pub use self::parse::{parse_ops, ParseError};

/// Protection of a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prot {
    None,
    Read,
    ReadWrite,
}

impl Prot {
    pub const ALL: [Prot; 3] = [Prot::None, Prot::Read, Prot::ReadWrite];

    pub fn word(self) -> &'static str {
        match self {
            Prot::None => "none",
            Prot::Read => "r",
            Prot::ReadWrite => "rw",
        }
    }

    pub fn bits(self) -> i32 {
        match self {
            Prot::None => libc::PROT_NONE,
            Prot::Read => libc::PROT_READ,
            Prot::ReadWrite => libc::PROT_READ | libc::PROT_WRITE,
        }
    }

    pub fn readable(self) -> bool {
        self != Prot::None
    }

    pub fn writable(self) -> bool {
        self == Prot::ReadWrite
    }
}

/// madvise(2) advice the fuzzer gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Advice {
    DontNeed,
    PopulateRead,
    PopulateWrite,
    WillNeed,
    Cold,
    PageOut,
}

impl Advice {
    pub const ALL: [Advice; 6] = [
        Advice::DontNeed,
        Advice::PopulateRead,
        Advice::PopulateWrite,
        Advice::WillNeed,
        Advice::Cold,
        Advice::PageOut,
    ];

    pub fn word(self) -> &'static str {
        match self {
            Advice::DontNeed => "dontneed",
            Advice::PopulateRead => "populate_read",
            Advice::PopulateWrite => "populate_write",
            Advice::WillNeed => "willneed",
            Advice::Cold => "cold",
            Advice::PageOut => "pageout",
        }
    }

    pub fn bits(self) -> i32 {
        match self {
            Advice::DontNeed => libc::MADV_DONTNEED,
            Advice::PopulateRead => 22,
            Advice::PopulateWrite => 23,
            Advice::WillNeed => libc::MADV_WILLNEED,
            Advice::Cold => 20,
            Advice::PageOut => 21,
        }
    }
}

/// A range of arena pages: `@at+pages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Range {
    pub at: usize,
    pub pages: usize,
}

impl Range {
    pub fn end(&self) -> usize {
        self.at + self.pages
    }

    pub fn contains(&self, page: usize) -> bool {
        (self.at..self.end()).contains(&page)
    }
}

/// One u64 of the arena: `@page.word` (word 0..512 of the page).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Word {
    pub page: usize,
    pub word: usize,
}

/// How mremap changes a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Remap {
    /// To this many pages, in place.
    Shrink(usize),
    /// To this many pages: VM_DONTEXPAND refuses it.
    Grow(usize),
    /// Moved whole to this arena page (MREMAP_MAYMOVE | MREMAP_FIXED).
    Move(usize),
}

/// Where `BPF_MAP_LOOKUP/UPDATE` or a BPF program reach a map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Elem {
    pub map: u32,
    pub index: u32,
}

/// A child's access to a page it inherited: read, or write a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Access {
    pub at: Word,
    pub write: Option<u64>,
}

/// A BPF array map to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Create {
    pub map: u32,
    pub value_size: u32,
    pub entries: u32,
    pub mmapable: bool,
    pub rdonly_prog: bool,
    pub node: Option<u32>,
}

/// A mapping of a map at a place in the arena (always MAP_FIXED).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mmap {
    pub range: Range,
    pub map: u32,
    /// In pages.
    pub pgoff: usize,
    pub prot: Prot,
    pub private: bool,
    pub populate: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Op {
    Create(Create),
    /// A BPF ring buffer of `pages` data pages (a power of two): its
    /// mappings stay eager on every kernel of the series.
    CreateRingbuf {
        map: u32,
        pages: u32,
    },
    Mmap(Mmap),
    Munmap(Range),
    Mremap {
        range: Range,
        how: Remap,
    },
    Mprotect {
        range: Range,
        prot: Prot,
    },
    Madvise {
        range: Range,
        advice: Advice,
    },
    Mlock(Range),
    Munlock(Range),
    /// A load or a store by this process.
    Touch(Access),
    /// A child reads and writes what it inherited, then exits.
    Fork(Vec<Access>),
    /// process_vm_readv of whole pages, or process_vm_writev of a word.
    PvmRead(Range),
    PvmWrite(Word, u64),
    /// /proc/self/mem: read whole pages, or write a word.
    MemRead(Range),
    MemWrite(Word, u64),
    /// write(2) of the mapping's pages to a file (the kernel reads them).
    FileFromMap(Range),
    /// read(2) of a file of bytes `fill` into the mapping.
    FileToMap {
        range: Range,
        fill: u8,
    },
    /// BPF_MAP_UPDATE_ELEM of a value whose bytes are `fill`.
    Update {
        elem: Elem,
        fill: u8,
    },
    Lookup(Elem),
    /// A BPF program stores `value` at u64 `word` of the element.
    ProgStore {
        elem: Elem,
        word: u32,
        value: i32,
    },
    /// A BPF program loads u64 `word` of the element (returns its low half).
    ProgLoad {
        elem: Elem,
        word: u32,
    },
    Freeze(u32),
    /// Closes the map's fd; its mappings keep it alive.
    Close(u32),
    /// A new fd for the map, by its id.
    Reopen(u32),
    /// The map gone: its fd closed and every mapping of it unmapped
    /// (the arena's pages reserved again), so that maps come and go.
    Drop(u32),
    /// The libbpf skeleton client (.data, .bss, .rodata mmapped) once.
    Skeleton(u64),
    /// `op` (a load or store, MAP_POPULATE, MADV_POPULATE_*) with one
    /// page allocation of this thread failing after `pass` that succeed
    /// (fail_page_alloc's `space`, armed for this thread alone).
    FailAlloc {
        pass: u32,
        op: Box<Op>,
    },
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}+{}", self.at, self.pages)
    }
}

impl fmt::Display for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}.{}", self.page, self.word)
    }
}

impl fmt::Display for Elem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{} {}", self.map, self.index)
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.write {
            None => write!(f, "{}=r", self.at),
            Some(v) => write!(f, "{}=w:{v:x}", self.at),
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Create(c) => {
                write!(
                    f,
                    "create m{} value={} entries={}",
                    c.map, c.value_size, c.entries
                )?;
                if !c.mmapable {
                    f.write_str(" nommap")?;
                }
                if c.rdonly_prog {
                    f.write_str(" rdonly_prog")?;
                }
                if let Some(n) = c.node {
                    write!(f, " node={n}")?;
                }
                Ok(())
            }
            Op::CreateRingbuf { map, pages } => write!(f, "create_ringbuf m{map} pages={pages}"),
            Op::Mmap(m) => {
                write!(
                    f,
                    "mmap {} m{} pgoff={} {}",
                    m.range,
                    m.map,
                    m.pgoff,
                    m.prot.word()
                )?;
                if m.private {
                    f.write_str(" private")?;
                }
                if m.populate {
                    f.write_str(" populate")?;
                }
                Ok(())
            }
            Op::Munmap(r) => write!(f, "munmap {r}"),
            Op::Mremap { range, how } => match how {
                Remap::Shrink(n) => write!(f, "mremap {range} shrink={n}"),
                Remap::Grow(n) => write!(f, "mremap {range} grow={n}"),
                Remap::Move(to) => write!(f, "mremap {range} to=@{to}"),
            },
            Op::Mprotect { range, prot } => write!(f, "mprotect {range} {}", prot.word()),
            Op::Madvise { range, advice } => write!(f, "madvise {range} {}", advice.word()),
            Op::Mlock(r) => write!(f, "mlock {r}"),
            Op::Munlock(r) => write!(f, "munlock {r}"),
            Op::Touch(a) => write!(f, "touch {a}"),
            Op::Fork(accesses) => {
                f.write_str("fork")?;
                for a in accesses {
                    write!(f, " {a}")?;
                }
                Ok(())
            }
            Op::PvmRead(r) => write!(f, "pvm_read {r}"),
            Op::PvmWrite(w, v) => write!(f, "pvm_write {w}={v:x}"),
            Op::MemRead(r) => write!(f, "mem_read {r}"),
            Op::MemWrite(w, v) => write!(f, "mem_write {w}={v:x}"),
            Op::FileFromMap(r) => write!(f, "file_from_map {r}"),
            Op::FileToMap { range, fill } => write!(f, "file_to_map {range} fill={fill:x}"),
            Op::Update { elem, fill } => write!(f, "update {elem} fill={fill:x}"),
            Op::Lookup(e) => write!(f, "lookup {e}"),
            Op::ProgStore { elem, word, value } => {
                write!(f, "prog_store {elem} word={word} value={value}")
            }
            Op::ProgLoad { elem, word } => write!(f, "prog_load {elem} word={word}"),
            Op::Freeze(m) => write!(f, "freeze m{m}"),
            Op::Close(m) => write!(f, "close m{m}"),
            Op::Reopen(m) => write!(f, "reopen m{m}"),
            Op::Drop(m) => write!(f, "drop m{m}"),
            Op::Skeleton(seed) => write!(f, "skeleton {seed:x}"),
            Op::FailAlloc { pass, op } => write!(f, "fail_alloc pass={pass} {op}"),
        }
    }
}
