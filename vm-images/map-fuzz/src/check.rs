//! After every step: the kernel's state against the model's. The VMAs
//! (/proc/self/maps), the present pages of each (/proc/self/pagemap),
//! the bytes of every present readable page, every element's value
//! through BPF_MAP_LOOKUP_BATCH, and the kernel log. Reading a present
//! page faults nothing, so checking never changes what it checks.

use selftests::kmsg::{find_splats, Kmsg};
use selftests::proc::pagemap_present;

use crate::exec::Executor;
use crate::model::{Model, VmaModel, ARENA_PAGES, PAGE};
use crate::op::{Prot, Range};

/// How much a check looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Everything: every VMA's bytes, every element, the layout.
    Full,
    /// What one operation can have changed: the present pages everywhere
    /// (one pagemap read a VMA), the bytes of the VMAs over `pages`, the
    /// layout after an operation on VMAs.
    After { pages: Vec<Range>, layout: bool },
}

/// The first way the kernel's memory and maps differ from `model`'s, on
/// one line (the kernel log, which reading consumes, is `log`'s).
pub fn matches(model: &Model, exec: &Executor, scope: &Scope) -> Result<(), String> {
    let (pages, full) = match scope {
        Scope::After { pages, layout: l } => {
            if *l {
                layout(model, exec)?;
            }
            (pages.as_slice(), false)
        }
        Scope::Full => (&[][..], true),
    };
    if full {
        layout(model, exec)?;
        vm_flags(model, exec)?;
    }
    for v in model.layout.iter() {
        presence(v, exec)?;
        let touched = pages.iter().any(|r| v.start < r.end() && r.at < v.end());
        if full || touched {
            contents(model, v, exec)?;
        }
    }
    if full {
        for (&m, map) in model
            .maps
            .iter()
            .filter(|(_, map)| map.fd_open && !map.ringbuf)
        {
            values(m, map, exec)?;
        }
    }
    Ok(())
}

/// Every element of open map `m`, by BPF_MAP_LOOKUP_BATCH.
fn values(m: u32, map: &crate::model::MapModel, exec: &Executor) -> Result<(), String> {
    let got = exec
        .values(m)
        .map_err(|e| format!("BPF_MAP_LOOKUP_BATCH of m{m}: {e}"))?;
    for (i, got) in got.chunks(map.value_size).enumerate() {
        let want = map.value(i).expect("in range");
        if got != want {
            let at = first_difference(got, want);
            return Err(format!(
                "element {i} of m{m}, byte {at}: BPF_MAP_LOOKUP_BATCH gives {}, the model {}",
                hex(&got[at..(at + 8).min(got.len())]),
                hex(&want[at..(at + 8).min(want.len())])
            ));
        }
    }
    Ok(())
}

/// A splat in the kernel log since the last call.
pub fn log(kmsg: &mut Kmsg) -> Result<(), String> {
    let new = kmsg.read_new();
    match find_splats(&new).first() {
        Some(splat) => Err(format!("kernel log: {splat}")),
        None => Ok(()),
    }
}

/// A map VMA in the arena as /proc/self/maps shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapsLine {
    pub start: usize,
    pub pages: usize,
    pub prot: Prot,
    /// The map page at its start (the offset column, in pages).
    pub pgoff: usize,
}

/// The BPF map VMAs of `/proc/self/maps` text inside the arena at
/// `arena`, in arena pages.
pub fn parse_maps(text: &str, arena: usize) -> Vec<MapsLine> {
    let end = arena + ARENA_PAGES * PAGE;
    // The maps file is smaps without the field lines.
    guest_common::proc::parse_smaps(text)
        .into_iter()
        .filter(|v| v.name == "anon_inode:bpf-map" && v.start >= arena && v.end <= end)
        .map(|v| MapsLine {
            start: (v.start - arena) / PAGE,
            pages: v.len() / PAGE,
            prot: match v.perms.as_bytes() {
                [b'r', b'w', ..] => Prot::ReadWrite,
                [b'r', ..] => Prot::Read,
                _ => Prot::None,
            },
            pgoff: v.pgoff as usize / PAGE,
        })
        .collect()
}

fn layout(model: &Model, exec: &Executor) -> Result<(), String> {
    let text = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| format!("reading /proc/self/maps: {e}"))?;
    let got = parse_maps(&text, exec.arena());
    let want: Vec<MapsLine> = model
        .layout
        .iter()
        .map(|v| MapsLine {
            start: v.start,
            pages: v.pages,
            prot: v.prot,
            pgoff: v.pgoff,
        })
        .collect();
    if got == want {
        return Ok(());
    }
    let show = |l: &[MapsLine]| {
        l.iter()
            .map(|m| {
                format!(
                    "@{}+{} {} pgoff={}",
                    m.start,
                    m.pages,
                    m.prot.word(),
                    m.pgoff
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    Err(format!(
        "VMAs: the kernel has [{}], the model [{}]",
        show(&got),
        show(&want)
    ))
}

/// The VmFlags every mapping of a map must show, and those it must not:
/// shared, may-read, VM_DONTEXPAND, VM_DONTDUMP, VM_MIXEDMAP; never
/// executable or may-execute, never locked (VM_SPECIAL refuses mlock).
const ALWAYS: [&str; 5] = ["sh", "mr", "de", "dd", "mm"];
const NEVER: [&str; 3] = ["ex", "me", "lo"];

/// What the VmFlags line of `v` lacks or has against the model, if
/// anything: `rd`/`wr` as its protection, `mw` as it was first mapped.
pub fn flags_wrong(v: &VmaModel, flags: &[String]) -> Option<String> {
    let has = |f: &str| flags.iter().any(|x| x == f);
    let mut want: Vec<&str> = ALWAYS.to_vec();
    let mut not: Vec<&str> = NEVER.to_vec();
    for (flag, on) in [
        ("rd", v.prot.readable()),
        ("wr", v.prot.writable()),
        ("mw", v.maywrite),
    ] {
        if on {
            want.push(flag);
        } else {
            not.push(flag);
        }
    }
    let lacks: Vec<&str> = want.into_iter().filter(|f| !has(f)).collect();
    let extra: Vec<&str> = not.into_iter().filter(|f| has(f)).collect();
    (!lacks.is_empty() || !extra.is_empty()).then(|| {
        format!(
            "VmFlags of @{}+{} [{}]: lacks [{}], has [{}] it should not",
            v.start,
            v.pages,
            flags.join(" "),
            lacks.join(" "),
            extra.join(" ")
        )
    })
}

fn vm_flags(model: &Model, exec: &Executor) -> Result<(), String> {
    let text = std::fs::read_to_string("/proc/self/smaps")
        .map_err(|e| format!("reading /proc/self/smaps: {e}"))?;
    let smaps = guest_common::proc::parse_smaps(&text);
    for v in model.layout.iter() {
        let addr = exec.addr(v.start);
        let Some(k) = smaps.iter().find(|k| k.start == addr) else {
            return Err(format!("VMAs: /proc/self/smaps has no VMA at @{}", v.start));
        };
        if let Some(wrong) = flags_wrong(v, &k.vm_flags) {
            return Err(wrong);
        }
    }
    Ok(())
}

fn presence(v: &VmaModel, exec: &Executor) -> Result<(), String> {
    let present = pagemap_present(exec.addr(v.start), v.pages)
        .map_err(|e| format!("reading pagemap: {e}"))?;
    for (i, &got) in present.iter().enumerate() {
        let want = v.present.contains(&(v.pgoff + i));
        if got != want {
            let (now, model) = if got {
                ("present", "absent")
            } else {
                ("absent", "present")
            };
            return Err(format!(
                "page @{} (map page {} of m{}): {now}, the model has it {model}; \
                 the model's present map pages of @{}+{}: {:?}",
                v.start + i,
                v.pgoff + i,
                v.map,
                v.start,
                v.pages,
                v.present
            ));
        }
    }
    Ok(())
}

fn contents(model: &Model, v: &VmaModel, exec: &Executor) -> Result<(), String> {
    if !v.prot.readable() {
        return Ok(());
    }
    let map = &model.maps[&v.map];
    for &mp in &v.present {
        let page = v.start + (mp - v.pgoff);
        // SAFETY: a present page of a readable mapping of ours: reading it
        // faults nothing and cannot fail.
        let got = unsafe { std::slice::from_raw_parts(exec.addr(page) as *const u8, PAGE) };
        let want = map.page(mp);
        if got != want {
            let at = first_difference(got, want);
            return Err(format!(
                "page @{page} (map page {mp} of m{}) byte {at}: the mapping has {}, the model {}",
                v.map,
                hex(&got[at..(at + 8).min(PAGE)]),
                hex(&want[at..(at + 8).min(PAGE)])
            ));
        }
    }
    Ok(())
}

fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_flags_follow_the_protection_and_the_first_mapping() {
        let v = VmaModel {
            start: 3,
            pages: 2,
            map: 0,
            pgoff: 0,
            prot: Prot::Read,
            maywrite: true,
            present: Default::default(),
            file: 0,
        };
        let flags = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(flags_wrong(&v, &flags("rd sh mr mw de dd mm")), None);
        let missing = flags_wrong(&v, &flags("rd sh mr mw de dd")).unwrap();
        assert!(
            missing.ends_with("lacks [mm], has [] it should not"),
            "{missing}"
        );
        let extra = flags_wrong(&v, &flags("rd wr sh mr mw me de dd mm")).unwrap();
        assert!(
            extra.ends_with("lacks [], has [me wr] it should not"),
            "{extra}"
        );
    }

    #[test]
    fn map_vmas_are_read_from_proc_maps_in_arena_pages() {
        let arena = 0x7f00_0000_0000;
        let text = "\
7f0000000000-7f0000002000 ---p 00000000 00:00 0 
7f0000002000-7f0000004000 rw-s 00000000 00:0f 1052 anon_inode:bpf-map
7f0000004000-7f0000005000 r--s 00002000 00:0f 1052 anon_inode:bpf-map
7f0000005000-7f0000006000 ---s 00003000 00:0f 1052 anon_inode:bpf-map
7f1000000000-7f1000001000 rw-s 00000000 00:0f 1053 anon_inode:bpf-map
";
        assert_eq!(
            parse_maps(text, arena),
            [
                MapsLine {
                    start: 2,
                    pages: 2,
                    prot: Prot::ReadWrite,
                    pgoff: 0
                },
                MapsLine {
                    start: 4,
                    pages: 1,
                    prot: Prot::Read,
                    pgoff: 2
                },
                MapsLine {
                    start: 5,
                    pages: 1,
                    prot: Prot::None,
                    pgoff: 3
                },
            ],
            "outside the arena is not ours"
        );
    }
}
