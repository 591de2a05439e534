//! Just enough of a BTF reader to find a kernel function's BTF id, which
//! a BPF program's call of that function (a kfunc) carries in its imm.
//! The layout is include/uapi/linux/btf.h's: a header, then the type
//! section (`struct btf_type` records, ids from 1, each followed by data
//! of its kind) and the string section the names point into. A kind this
//! reader does not know is sized from the optional layout section, as
//! libbpf does; without one it is an error rather than a guess.

use std::io;
use std::ops::Range;

/// The BTF of the running kernel.
pub const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

const BTF_MAGIC: u16 = 0xEB9F;
/// magic, version, flags, hdr_len, type_off/len, str_off/len.
const HEADER_V1: usize = 24;
/// The layout section's offset and length follow.
const HEADER_LAYOUT: usize = 32;
/// name_off, info, size/type.
const TYPE_HEAD: usize = 12;

pub const BTF_KIND_FUNC: u32 = 12;

/// Bytes after the head of a type of `kind` with `vlen` elements, for the
/// kinds of include/uapi/linux/btf.h (INT .. ENUM64).
fn known_kind_data(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG
        2 | 7..=12 | 16 | 18 => 0,
        // INT (its encoding), VAR (linkage), DECL_TAG (component index)
        1 | 14 | 17 => 4,
        // ARRAY: struct btf_array
        3 => 12,
        // STRUCT, UNION: btf_member; DATASEC: btf_var_secinfo; ENUM64
        4 | 5 | 15 | 19 => 12 * vlen,
        // ENUM: btf_enum; FUNC_PROTO: btf_param
        6 | 13 => 8 * vlen,
        _ => return None,
    })
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// A parsed BTF blob: each type's kind and name, by id.
#[derive(Debug)]
pub struct Btf {
    data: Vec<u8>,
    strings: Range<usize>,
    /// (kind, name_off) of type id i + 1.
    types: Vec<(u32, u32)>,
}

impl Btf {
    /// The running kernel's BTF.
    pub fn vmlinux() -> io::Result<Btf> {
        let data = std::fs::read(VMLINUX)?;
        Btf::parse(data).map_err(|e| io::Error::other(format!("{VMLINUX}: {e}")))
    }

    pub fn parse(data: Vec<u8>) -> Result<Btf, String> {
        let head = |off| u32_at(&data, off).ok_or("truncated header");
        match u16_at(&data, 0) {
            Some(BTF_MAGIC) => {}
            Some(m) if m == BTF_MAGIC.swap_bytes() => {
                return Err("BTF of the other byte order".into())
            }
            m => return Err(format!("bad magic {m:x?}")),
        }
        let hdr_len = head(4)? as usize;
        if hdr_len < HEADER_V1 {
            return Err(format!("header of {hdr_len} bytes"));
        }
        // The section whose offset and length are at `off` of the header.
        let section = |off: usize| -> Result<Range<usize>, String> {
            let (start, len) = (hdr_len + head(off)? as usize, head(off + 4)? as usize);
            if start + len > data.len() {
                return Err(format!("section at {start}+{len} past the end"));
            }
            Ok(start..start + len)
        };
        let types = section(8)?;
        let strings = section(16)?;
        let layout = if hdr_len >= HEADER_LAYOUT {
            section(24)?
        } else {
            0..0
        };
        let types = Btf::walk(&data, types, &data[layout])?;
        Ok(Btf {
            data,
            strings,
            types,
        })
    }

    /// (kind, name_off) of every type in `types`; `layout` sizes the kinds
    /// [`known_kind_data`] does not know (struct btf_layout per kind).
    fn walk(data: &[u8], types: Range<usize>, layout: &[u8]) -> Result<Vec<(u32, u32)>, String> {
        let mut found = Vec::new();
        let mut at = types.start;
        while at < types.end {
            let (id, start) = (found.len() + 1, at);
            let bad = || format!("type {id} at {start} runs past the type section");
            let (name_off, info) = (
                u32_at(data, at).ok_or_else(bad)?,
                u32_at(data, at + 4).ok_or_else(bad)?,
            );
            let (kind, vlen) = ((info >> 24) & 0x7f, (info & 0xff_ffff) as usize);
            let extra = known_kind_data(kind, vlen)
                .or_else(|| {
                    let l = layout.get(kind as usize * 4..kind as usize * 4 + 2)?;
                    Some(l[0] as usize + vlen * l[1] as usize)
                })
                .ok_or_else(|| format!("type {id}: unknown kind {kind} and no layout for it"))?;
            at += TYPE_HEAD + extra;
            if at > types.end {
                return Err(bad());
            }
            found.push((kind, name_off));
        }
        Ok(found)
    }

    /// The NUL-terminated name at `off` of the string section.
    fn name(&self, off: u32) -> Option<&[u8]> {
        let s = self
            .data
            .get(self.strings.start + off as usize..self.strings.end)?;
        s.split(|&b| b == 0).next()
    }

    /// The id of the type of `kind` named `name`, the first if several.
    pub fn find(&self, name: &str, kind: u32) -> Option<u32> {
        let i = self
            .types
            .iter()
            .position(|&(k, off)| k == kind && self.name(off) == Some(name.as_bytes()))?;
        Some(i as u32 + 1)
    }

    /// The id of the function (BTF_KIND_FUNC) `name`.
    pub fn func_id(&self, name: &str) -> Option<u32> {
        self.find(name, BTF_KIND_FUNC)
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    /// A BTF blob of `types` (raw records) and `strings`, with a layout
    /// section if `layout` is not empty.
    fn blob(types: &[u32], strings: &[u8], layout: &[u8]) -> Vec<u8> {
        let hdr_len = if layout.is_empty() {
            HEADER_V1
        } else {
            HEADER_LAYOUT
        };
        let type_len = types.len() * 4;
        let mut b = Vec::new();
        b.extend(BTF_MAGIC.to_ne_bytes());
        b.extend([1, 0]);
        let mut head = vec![hdr_len as u32, 0, type_len as u32];
        head.extend([type_len as u32, strings.len() as u32]);
        if !layout.is_empty() {
            head.extend([(type_len + strings.len()) as u32, layout.len() as u32]);
        }
        b.extend(head.iter().flat_map(|w| w.to_ne_bytes()));
        b.extend(types.iter().flat_map(|w| w.to_ne_bytes()));
        b.extend(strings);
        b.extend(layout);
        b
    }

    fn info(kind: u32, vlen: u32) -> u32 {
        kind << 24 | vlen
    }

    const STRINGS: &[u8] = b"\0int\0a\0b\0foo\0pair\0bar\0";
    // Offsets into STRINGS.
    const INT: u32 = 1;
    const A: u32 = 5;
    const B: u32 = 7;
    const FOO: u32 = 9;
    const PAIR: u32 = 13;
    const BAR: u32 = 18;

    /// 1 int, 2 int (*)(int a, int b), 3 foo, 4 struct pair {a, b}, 5 bar.
    fn types() -> Vec<u32> {
        let mut t = vec![INT, info(1, 0), 4, 0x0100_0020];
        t.extend([0, info(13, 2), 1, A, 1, B, 1]);
        t.extend([FOO, info(BTF_KIND_FUNC, 0), 2]);
        t.extend([PAIR, info(4, 2), 8, A, 1, 0, B, 1, 32]);
        t.extend([BAR, info(BTF_KIND_FUNC, 0), 2]);
        t
    }

    #[test]
    fn finds_functions_by_name_past_other_kinds() {
        let btf = Btf::parse(blob(&types(), STRINGS, &[])).unwrap();
        assert_eq!(btf.func_id("foo"), Some(3));
        assert_eq!(btf.func_id("bar"), Some(5));
        // Named, but not functions.
        assert_eq!(btf.func_id("int"), None);
        assert_eq!(btf.func_id("pair"), None);
        assert_eq!(btf.find("pair", 4), Some(4));
        assert_eq!(btf.func_id("ba"), None);
        assert_eq!(btf.func_id("nope"), None);
    }

    #[test]
    fn unknown_kinds_need_the_layout_section() {
        // Kind 20, one u32 of info and 2 elements of 8 bytes, before bar.
        let mut t = types();
        let tail = t.split_off(t.len() - 3);
        t.extend([0, info(20, 2), 0, 7, 1, 2, 3, 4]);
        t.extend(tail);
        let err = Btf::parse(blob(&t, STRINGS, &[])).unwrap_err();
        assert!(err.contains("unknown kind 20"), "{err}");
        let mut layout = vec![0u8; 21 * 4];
        layout[20 * 4..20 * 4 + 2].copy_from_slice(&[4, 8]);
        let btf = Btf::parse(blob(&t, STRINGS, &layout)).unwrap();
        assert_eq!(btf.func_id("bar"), Some(6));
    }

    #[test]
    fn refuses_what_is_not_btf() {
        let good = blob(&types(), STRINGS, &[]);
        let mut bad_magic = good.clone();
        bad_magic[0] ^= 1;
        assert!(Btf::parse(bad_magic).unwrap_err().contains("magic"));
        let mut swapped = good.clone();
        swapped.swap(0, 1);
        assert!(Btf::parse(swapped).unwrap_err().contains("byte order"));
        // The last type cut short, strings and all.
        let cut = good[..HEADER_V1 + types().len() * 4 - 4].to_vec();
        assert!(Btf::parse(cut).is_err());
        // A type longer than the type section says.
        let mut t = types();
        t.truncate(t.len() - 1);
        let err = Btf::parse(blob(&t, STRINGS, &[])).unwrap_err();
        assert!(err.contains("type 5"), "{err}");
    }

    /// The running kernel's BTF, where there is one (the guest's always).
    #[test]
    fn vmlinux_has_common_functions() {
        if !std::path::Path::new(VMLINUX).exists() {
            return;
        }
        let btf = Btf::vmlinux().unwrap();
        for f in ["schedule", "vfs_read"] {
            assert!(btf.func_id(f).is_some(), "{f} not in {VMLINUX}");
        }
        assert_eq!(btf.func_id("no_such_function_in_any_kernel"), None);
    }
}
