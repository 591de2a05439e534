//! The fuzzer's operations, one per line of a reproducer. Mappings are
//! named by their place in the arena (`@page+pages`, `@page.word`) and
//! maps by name (`m3`), never by an order of creation: any subsequence of
//! a run is a run, which is what shrinking needs. An operation whose
//! object is gone in a subsequence is skipped by the model (and so by the
//! executor).

use std::fmt;
use std::str::FromStr;

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
        }
    }
}

/// A reproducer line that is not an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad(what: &str, text: &str) -> ParseError {
    ParseError(format!("{what}: {text:?}"))
}

fn num<T: FromStr>(text: &str) -> Result<T, ParseError> {
    text.parse().map_err(|_| bad("not a number", text))
}

fn hex(text: &str) -> Result<u64, ParseError> {
    u64::from_str_radix(text, 16).map_err(|_| bad("not a hex number", text))
}

fn map_name(text: &str) -> Result<u32, ParseError> {
    num(text
        .strip_prefix('m')
        .ok_or_else(|| bad("not a map (m0, m1, ...)", text))?)
}

fn range(text: &str) -> Result<Range, ParseError> {
    let (at, pages) = text
        .strip_prefix('@')
        .and_then(|t| t.split_once('+'))
        .ok_or_else(|| bad("not a range (@page+pages)", text))?;
    Ok(Range {
        at: num(at)?,
        pages: num(pages)?,
    })
}

fn word(text: &str) -> Result<Word, ParseError> {
    let (page, word) = text
        .strip_prefix('@')
        .and_then(|t| t.split_once('.'))
        .ok_or_else(|| bad("not a word (@page.word)", text))?;
    Ok(Word {
        page: num(page)?,
        word: num(word)?,
    })
}

fn access(text: &str) -> Result<Access, ParseError> {
    let (at, what) = text
        .split_once('=')
        .ok_or_else(|| bad("not an access (@p.w=r, @p.w=w:hex)", text))?;
    let write = match what {
        "r" => None,
        w => Some(hex(w
            .strip_prefix("w:")
            .ok_or_else(|| bad("not an access", text))?)?),
    };
    Ok(Access {
        at: word(at)?,
        write,
    })
}

/// `key=value` of `words`, or an error naming the key.
fn value<'a>(words: &[&'a str], key: &str) -> Result<&'a str, ParseError> {
    words
        .iter()
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .ok_or_else(|| ParseError(format!("missing {key}= in {:?}", words.join(" "))))
}

fn elem(map: &str, index: &str) -> Result<Elem, ParseError> {
    Ok(Elem {
        map: map_name(map)?,
        index: num(index)?,
    })
}

fn word_value(text: &str) -> Result<(Word, u64), ParseError> {
    let (w, v) = text
        .split_once('=')
        .ok_or_else(|| bad("not @page.word=hex", text))?;
    Ok((word(w)?, hex(v)?))
}

fn enum_word<T: Copy>(
    all: &[T],
    name: impl Fn(T) -> &'static str,
    text: &str,
) -> Result<T, ParseError> {
    all.iter()
        .copied()
        .find(|&x| name(x) == text)
        .ok_or_else(|| bad("unknown word", text))
}

impl FromStr for Op {
    type Err = ParseError;

    fn from_str(line: &str) -> Result<Op, ParseError> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let arg = |i: usize| w.get(i).copied().ok_or_else(|| bad("too short", line));
        let flag = |f: &str| w.contains(&f);
        Ok(match arg(0)? {
            "create" => Op::Create(Create {
                map: map_name(arg(1)?)?,
                value_size: num(value(&w, "value")?)?,
                entries: num(value(&w, "entries")?)?,
                mmapable: !flag("nommap"),
                rdonly_prog: flag("rdonly_prog"),
                node: value(&w, "node").ok().map(num).transpose()?,
            }),
            "create_ringbuf" => Op::CreateRingbuf {
                map: map_name(arg(1)?)?,
                pages: num(value(&w, "pages")?)?,
            },
            "mmap" => Op::Mmap(Mmap {
                range: range(arg(1)?)?,
                map: map_name(arg(2)?)?,
                pgoff: num(value(&w, "pgoff")?)?,
                prot: enum_word(&Prot::ALL, Prot::word, arg(4)?)?,
                private: flag("private"),
                populate: flag("populate"),
            }),
            "munmap" => Op::Munmap(range(arg(1)?)?),
            "mremap" => Op::Mremap {
                range: range(arg(1)?)?,
                how: if let Ok(n) = value(&w, "shrink") {
                    Remap::Shrink(num(n)?)
                } else if let Ok(n) = value(&w, "grow") {
                    Remap::Grow(num(n)?)
                } else {
                    Remap::Move(num(value(&w, "to")?.trim_start_matches('@'))?)
                },
            },
            "mprotect" => Op::Mprotect {
                range: range(arg(1)?)?,
                prot: enum_word(&Prot::ALL, Prot::word, arg(2)?)?,
            },
            "madvise" => Op::Madvise {
                range: range(arg(1)?)?,
                advice: enum_word(&Advice::ALL, Advice::word, arg(2)?)?,
            },
            "mlock" => Op::Mlock(range(arg(1)?)?),
            "munlock" => Op::Munlock(range(arg(1)?)?),
            "touch" => Op::Touch(access(arg(1)?)?),
            "fork" => Op::Fork(w[1..].iter().map(|a| access(a)).collect::<Result<_, _>>()?),
            "pvm_read" => Op::PvmRead(range(arg(1)?)?),
            "pvm_write" => {
                let (at, v) = word_value(arg(1)?)?;
                Op::PvmWrite(at, v)
            }
            "mem_read" => Op::MemRead(range(arg(1)?)?),
            "mem_write" => {
                let (at, v) = word_value(arg(1)?)?;
                Op::MemWrite(at, v)
            }
            "file_from_map" => Op::FileFromMap(range(arg(1)?)?),
            "file_to_map" => Op::FileToMap {
                range: range(arg(1)?)?,
                fill: hex(value(&w, "fill")?)? as u8,
            },
            "update" => Op::Update {
                elem: elem(arg(1)?, arg(2)?)?,
                fill: hex(value(&w, "fill")?)? as u8,
            },
            "lookup" => Op::Lookup(elem(arg(1)?, arg(2)?)?),
            "prog_store" => Op::ProgStore {
                elem: elem(arg(1)?, arg(2)?)?,
                word: num(value(&w, "word")?)?,
                value: num(value(&w, "value")?)?,
            },
            "prog_load" => Op::ProgLoad {
                elem: elem(arg(1)?, arg(2)?)?,
                word: num(value(&w, "word")?)?,
            },
            "freeze" => Op::Freeze(map_name(arg(1)?)?),
            "close" => Op::Close(map_name(arg(1)?)?),
            "reopen" => Op::Reopen(map_name(arg(1)?)?),
            "drop" => Op::Drop(map_name(arg(1)?)?),
            "skeleton" => Op::Skeleton(hex(arg(1)?)?),
            other => return Err(bad("unknown operation", other)),
        })
    }
}

/// A reproducer: one operation a line; blank lines and `#` comments are
/// skipped. An error names the line.
pub fn parse_ops(text: &str) -> Result<Vec<Op>, ParseError> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            l.parse()
                .map_err(|e| ParseError(format!("line {}: {e}", i + 1)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(at: usize, pages: usize) -> Range {
        Range { at, pages }
    }

    fn w(page: usize, word: usize) -> Word {
        Word { page, word }
    }

    /// One of each, with every option that has a spelling.
    pub fn every_op() -> Vec<Op> {
        let e = Elem { map: 2, index: 7 };
        vec![
            Op::Create(Create {
                map: 2,
                value_size: 4000,
                entries: 9,
                mmapable: true,
                rdonly_prog: true,
                node: Some(1),
            }),
            Op::Create(Create {
                map: 3,
                value_size: 8,
                entries: 1,
                mmapable: false,
                rdonly_prog: false,
                node: None,
            }),
            Op::CreateRingbuf { map: 4, pages: 8 },
            Op::Mmap(Mmap {
                range: r(10, 4),
                map: 2,
                pgoff: 1,
                prot: Prot::ReadWrite,
                private: true,
                populate: true,
            }),
            Op::Munmap(r(11, 1)),
            Op::Mremap {
                range: r(10, 4),
                how: Remap::Shrink(2),
            },
            Op::Mremap {
                range: r(10, 4),
                how: Remap::Grow(8),
            },
            Op::Mremap {
                range: r(10, 4),
                how: Remap::Move(300),
            },
            Op::Mprotect {
                range: r(10, 1),
                prot: Prot::None,
            },
            Op::Madvise {
                range: r(10, 2),
                advice: Advice::PopulateWrite,
            },
            Op::Mlock(r(10, 3)),
            Op::Munlock(r(12, 1)),
            Op::Touch(Access {
                at: w(12, 511),
                write: Some(0xdead),
            }),
            Op::Fork(vec![
                Access {
                    at: w(10, 0),
                    write: None,
                },
                Access {
                    at: w(11, 3),
                    write: Some(u64::MAX),
                },
            ]),
            Op::Fork(vec![]),
            Op::PvmRead(r(10, 2)),
            Op::PvmWrite(w(10, 1), 5),
            Op::MemRead(r(10, 1)),
            Op::MemWrite(w(13, 2), 0),
            Op::FileFromMap(r(10, 3)),
            Op::FileToMap {
                range: r(10, 1),
                fill: 0xab,
            },
            Op::Update {
                elem: e,
                fill: 0x5a,
            },
            Op::Lookup(e),
            Op::ProgStore {
                elem: e,
                word: 3,
                value: -9,
            },
            Op::ProgLoad { elem: e, word: 3 },
            Op::Freeze(2),
            Op::Close(2),
            Op::Reopen(2),
            Op::Drop(2),
            Op::Skeleton(0x1234),
        ]
    }

    #[test]
    fn every_operation_reads_back_as_it_was_written() {
        for op in every_op() {
            let line = op.to_string();
            assert_eq!(line.parse::<Op>(), Ok(op), "{line}");
        }
        let text: String = every_op().iter().map(|o| format!("{o}\n")).collect();
        let with_comments = format!("# seed 7\n\n{text}");
        assert_eq!(parse_ops(&with_comments).unwrap(), every_op());
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = parse_ops("lookup m1 2\nmunmap @3-4\n").unwrap_err();
        assert_eq!(err.0, "line 2: not a range (@page+pages): \"@3-4\"");
        assert!("frobnicate m1"
            .parse::<Op>()
            .unwrap_err()
            .0
            .contains("unknown operation"));
        assert!("create m1 value=8"
            .parse::<Op>()
            .unwrap_err()
            .0
            .contains("missing entries="));
    }
}
