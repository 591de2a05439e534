//! Reading operations back from their text, one a line of a reproducer:
//! the inverse of `Op`'s `Display`.

use std::fmt;
use std::str::FromStr;

use super::{Access, Advice, Create, Elem, Mmap, Op, Prot, Range, Remap, Word};

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

/// The two numbers of `@a<sep>b`; `what` names the form in the error.
fn at_pair(text: &str, sep: char, what: &str) -> Result<(usize, usize), ParseError> {
    let (a, b) = text
        .strip_prefix('@')
        .and_then(|t| t.split_once(sep))
        .ok_or_else(|| bad(what, text))?;
    Ok((num(a)?, num(b)?))
}

fn range(text: &str) -> Result<Range, ParseError> {
    let (at, pages) = at_pair(text, '+', "not a range (@page+pages)")?;
    Ok(Range { at, pages })
}

fn word(text: &str) -> Result<Word, ParseError> {
    let (page, word) = at_pair(text, '.', "not a word (@page.word)")?;
    Ok(Word { page, word })
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

/// A line's words and what the parsers ask of them.
struct Line<'a> {
    text: &'a str,
    words: Vec<&'a str>,
}

impl<'a> Line<'a> {
    fn new(text: &'a str) -> Line<'a> {
        Line {
            text,
            words: text.split_whitespace().collect(),
        }
    }

    /// Word `i`; a line without one is too short.
    fn arg(&self, i: usize) -> Result<&'a str, ParseError> {
        self.words
            .get(i)
            .copied()
            .ok_or_else(|| bad("too short", self.text))
    }

    /// Whether the line has the word `f`.
    fn flag(&self, f: &str) -> bool {
        self.words.contains(&f)
    }

    /// `key=value` of the line, or an error naming the key.
    fn value(&self, key: &str) -> Result<&'a str, ParseError> {
        self.words
            .iter()
            .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
            .ok_or_else(|| ParseError(format!("missing {key}= in {:?}", self.words.join(" "))))
    }
}

impl FromStr for Op {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Op, ParseError> {
        if let Some(rest) = text.trim_start().strip_prefix("fail_alloc ") {
            return fail_alloc(rest);
        }
        let line = Line::new(text);
        let name = line.arg(0)?;
        for parse in [map_op, mapping_op, access_op, element_op] {
            if let Some(op) = parse(name, &line)? {
                return Ok(op);
            }
        }
        Err(bad("unknown operation", name))
    }
}

/// `pass=N OP`: the operation with an allocation failing in it.
fn fail_alloc(rest: &str) -> Result<Op, ParseError> {
    let (pass, op) = rest
        .trim_start()
        .split_once(char::is_whitespace)
        .ok_or_else(|| bad("not fail_alloc pass=N OP", rest))?;
    let pass = pass
        .strip_prefix("pass=")
        .ok_or_else(|| bad("not pass=N", pass))?;
    Ok(Op::FailAlloc {
        pass: num(pass)?,
        op: Box::new(op.parse()?),
    })
}

/// A map's creation and lifetime, and the skeleton client; None for
/// another operation's `name`.
fn map_op(name: &str, l: &Line) -> Result<Option<Op>, ParseError> {
    Ok(Some(match name {
        "create" => Op::Create(Create {
            map: map_name(l.arg(1)?)?,
            value_size: num(l.value("value")?)?,
            entries: num(l.value("entries")?)?,
            mmapable: !l.flag("nommap"),
            rdonly_prog: l.flag("rdonly_prog"),
            node: l.value("node").ok().map(num).transpose()?,
        }),
        "create_ringbuf" => Op::CreateRingbuf {
            map: map_name(l.arg(1)?)?,
            pages: num(l.value("pages")?)?,
        },
        "freeze" => Op::Freeze(map_name(l.arg(1)?)?),
        "close" => Op::Close(map_name(l.arg(1)?)?),
        "reopen" => Op::Reopen(map_name(l.arg(1)?)?),
        "drop" => Op::Drop(map_name(l.arg(1)?)?),
        "skeleton" => Op::Skeleton(hex(l.arg(1)?)?),
        _ => return Ok(None),
    }))
}

/// What makes, reshapes and removes mappings; None for another
/// operation's `name`.
fn mapping_op(name: &str, l: &Line) -> Result<Option<Op>, ParseError> {
    Ok(Some(match name {
        "mmap" => Op::Mmap(Mmap {
            range: range(l.arg(1)?)?,
            map: map_name(l.arg(2)?)?,
            pgoff: num(l.value("pgoff")?)?,
            prot: enum_word(&Prot::ALL, Prot::word, l.arg(4)?)?,
            private: l.flag("private"),
            populate: l.flag("populate"),
        }),
        "munmap" => Op::Munmap(range(l.arg(1)?)?),
        "mremap" => Op::Mremap {
            range: range(l.arg(1)?)?,
            how: remap(l)?,
        },
        "mprotect" => Op::Mprotect {
            range: range(l.arg(1)?)?,
            prot: enum_word(&Prot::ALL, Prot::word, l.arg(2)?)?,
        },
        "madvise" => Op::Madvise {
            range: range(l.arg(1)?)?,
            advice: enum_word(&Advice::ALL, Advice::word, l.arg(2)?)?,
        },
        "mlock" => Op::Mlock(range(l.arg(1)?)?),
        "munlock" => Op::Munlock(range(l.arg(1)?)?),
        _ => return Ok(None),
    }))
}

/// `shrink=N`, `grow=N` or `to=@P` of an mremap line.
fn remap(l: &Line) -> Result<Remap, ParseError> {
    Ok(if let Ok(n) = l.value("shrink") {
        Remap::Shrink(num(n)?)
    } else if let Ok(n) = l.value("grow") {
        Remap::Grow(num(n)?)
    } else {
        Remap::Move(num(l.value("to")?.trim_start_matches('@'))?)
    })
}

/// Reads and writes of mapped memory, by this process, a child or the
/// kernel; None for another operation's `name`.
fn access_op(name: &str, l: &Line) -> Result<Option<Op>, ParseError> {
    Ok(Some(match name {
        "touch" => Op::Touch(access(l.arg(1)?)?),
        "fork" => Op::Fork(
            l.words[1..]
                .iter()
                .map(|a| access(a))
                .collect::<Result<_, _>>()?,
        ),
        "pvm_read" => Op::PvmRead(range(l.arg(1)?)?),
        "pvm_write" => {
            let (at, v) = word_value(l.arg(1)?)?;
            Op::PvmWrite(at, v)
        }
        "mem_read" => Op::MemRead(range(l.arg(1)?)?),
        "mem_write" => {
            let (at, v) = word_value(l.arg(1)?)?;
            Op::MemWrite(at, v)
        }
        "file_from_map" => Op::FileFromMap(range(l.arg(1)?)?),
        "file_to_map" => Op::FileToMap {
            range: range(l.arg(1)?)?,
            fill: hex(l.value("fill")?)? as u8,
        },
        _ => return Ok(None),
    }))
}

/// An element through the syscall or a BPF program; None for another
/// operation's `name`.
fn element_op(name: &str, l: &Line) -> Result<Option<Op>, ParseError> {
    Ok(Some(match name {
        "update" => Op::Update {
            elem: elem(l.arg(1)?, l.arg(2)?)?,
            fill: hex(l.value("fill")?)? as u8,
        },
        "lookup" => Op::Lookup(elem(l.arg(1)?, l.arg(2)?)?),
        "prog_store" => Op::ProgStore {
            elem: elem(l.arg(1)?, l.arg(2)?)?,
            word: num(l.value("word")?)?,
            value: num(l.value("value")?)?,
        },
        "prog_load" => Op::ProgLoad {
            elem: elem(l.arg(1)?, l.arg(2)?)?,
            word: num(l.value("word")?)?,
        },
        _ => return Ok(None),
    }))
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
        [map_ops(), mapping_ops(), access_ops(), element_ops()].concat()
    }

    fn map_ops() -> Vec<Op> {
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
            Op::Freeze(2),
            Op::Close(2),
            Op::Reopen(2),
            Op::Drop(2),
            Op::Skeleton(0x1234),
        ]
    }

    fn mapping_ops() -> Vec<Op> {
        let remap = |how| Op::Mremap {
            range: r(10, 4),
            how,
        };
        vec![
            Op::Mmap(Mmap {
                range: r(10, 4),
                map: 2,
                pgoff: 1,
                prot: Prot::ReadWrite,
                private: true,
                populate: true,
            }),
            Op::Munmap(r(11, 1)),
            remap(Remap::Shrink(2)),
            remap(Remap::Grow(8)),
            remap(Remap::Move(300)),
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
        ]
    }

    fn access_ops() -> Vec<Op> {
        let read = |at| Access { at, write: None };
        let write = |at, v| Access { at, write: Some(v) };
        vec![
            Op::Touch(write(w(12, 511), 0xdead)),
            Op::Fork(vec![read(w(10, 0)), write(w(11, 3), u64::MAX)]),
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
            Op::FailAlloc {
                pass: 1,
                op: Box::new(Op::Touch(read(w(12, 4)))),
            },
        ]
    }

    fn element_ops() -> Vec<Op> {
        let e = Elem { map: 2, index: 7 };
        vec![
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
