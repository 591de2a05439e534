//! T23-T24: the mapping keeps the map alive after its fd is closed, and
//! core dumps skip the map (VM_DONTDUMP), resident pages or not.

use std::time::{Duration, Instant};

use super::common::*;
use crate::child::allow_core_dumps;
use crate::sys::bpf::{map_get_fd_by_id, map_ids};

/// T23: mmap, close the fd, touch untouched pages: the data is there; the
/// map id lives while mapped and disappears after the last munmap.
pub fn t23_mapping_outlives_fd(_ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(8);
    pm.fill_all();
    let id = ok(pm.map.id(), "map id");
    let m = pm.map_rw();
    drop(pm); // closes the only fd
    for p in [6, 0, 3] {
        check_page_full(&m, p, p, &format!("page {p} after closing the map fd"));
    }
    m.write_u64(2 * PAGE + 16, 0x2323);
    {
        let again = ok(
            Map::from_fd(ok(map_get_fd_by_id(id), "MAP_GET_FD_BY_ID while mapped")),
            "map info",
        );
        let v = ok(again.lookup_idx(2), "LOOKUP_ELEM via the fresh fd");
        assert_eq!(
            u64::from_ne_bytes(v[16..24].try_into().unwrap()),
            0x2323,
            "write through the mapping seen via a fresh fd"
        );
    }
    assert!(
        ok(map_ids(), "MAP_GET_NEXT_ID").contains(&id),
        "map id {id} vanished while still mapped"
    );
    drop(m);
    // The last reference goes with the VMA's file; allow for deferral.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match map_get_fd_by_id(id) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => break,
            Err(e) => panic!("MAP_GET_FD_BY_ID after munmap: {}", err_name(&e)),
            Ok(_) => {
                assert!(
                    Instant::now() < deadline,
                    "map id {id} still alive 5 s after the last munmap"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    assert!(
        !ok(map_ids(), "MAP_GET_NEXT_ID").contains(&id),
        "map id {id} still listed after the last munmap"
    );
    Ok(())
}

/// Restores /proc/sys/kernel/core_pattern on drop.
struct CorePattern(String);

impl CorePattern {
    const PATH: &'static str = "/proc/sys/kernel/core_pattern";

    fn set(pattern: &str) -> CorePattern {
        let old = ok(std::fs::read_to_string(Self::PATH), "reading core_pattern");
        ok(std::fs::write(Self::PATH, pattern), "setting core_pattern");
        CorePattern(old.trim_end().to_string())
    }
}

impl Drop for CorePattern {
    fn drop(&mut self) {
        let _ = std::fs::write(Self::PATH, &self.0);
    }
}

/// One ELF program header of a core file.
#[derive(Debug, Clone, Copy)]
struct Phdr {
    p_type: u32,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
}

fn parse_phdrs(core: &[u8]) -> Vec<Phdr> {
    let u16_at = |o: usize| u16::from_le_bytes(core[o..o + 2].try_into().unwrap());
    let u32_at = |o: usize| u32::from_le_bytes(core[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(core[o..o + 8].try_into().unwrap());
    assert!(
        core.len() >= 64 && &core[..4] == b"\x7fELF",
        "core file is not ELF"
    );
    assert_eq!(
        (core[4], core[5]),
        (2, 1),
        "core file is not ELF64 little-endian"
    );
    assert_eq!(u16_at(16), 4, "core file is not ET_CORE");
    let (phoff, phentsize, phnum) = (
        u64_at(0x20) as usize,
        u16_at(0x36) as usize,
        u16_at(0x38) as usize,
    );
    (0..phnum)
        .map(|i| {
            let o = phoff + i * phentsize;
            Phdr {
                p_type: u32_at(o),
                vaddr: u64_at(o + 16),
                filesz: u64_at(o + 32),
                memsz: u64_at(o + 40),
            }
        })
        .collect()
}

/// T24: the core dump of a process holding a 64 MiB mapping (two pages of
/// it resident) has a PT_LOAD for it with no file bytes.
pub fn t24_coredump_skips_map(_ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 64 * MIB / PAGE;
    let pm = PagedMap::new(PAGES);
    pm.fill(0);
    pm.fill(100);
    let m = pm.map_rw();
    check_page(&m, 0, 0, "before the dump");
    check_page(&m, 100, 100, "before the dump");

    let _pattern = CorePattern::set("/tmp/core.%p");
    let child = spawn(|| {
        allow_core_dumps();
        // Ask for every kind of mapping, file-backed shared ones included,
        // so that only VM_DONTDUMP can keep the map out.
        std::fs::write("/proc/self/coredump_filter", "0x1ff").expect("coredump_filter");
        std::process::abort();
    });
    let pid = child.pid();
    let res = child.wait();
    res.expect_signal(libc::SIGABRT, "aborting child");
    assert!(
        res.core_dumped(),
        "the aborting child did not dump core ({})",
        res.describe()
    );
    let path = format!("/tmp/core.{pid}");
    let core = ok(std::fs::read(&path), &format!("reading {path}"));
    let _ = std::fs::remove_file(&path);

    let phdrs = parse_phdrs(&core);
    let load = phdrs
        .iter()
        .find(|p| p.p_type == 1 && p.vaddr == m.addr() as u64)
        .unwrap_or_else(|| {
            panic!(
                "no PT_LOAD at the map's address {:#x} among {} headers",
                m.addr(),
                phdrs.len()
            )
        });
    assert_eq!(load.memsz, m.len() as u64, "p_memsz of the map's segment");
    assert_eq!(
        load.filesz, 0,
        "p_filesz of the map's segment (VM_DONTDUMP)"
    );
    assert!(
        core.len() < m.len(),
        "core file of {} bytes is bigger than the map",
        core.len()
    );
    Ok(())
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn elf_core_program_headers() {
        let mut core = vec![0u8; 64 + 2 * 56];
        core[..6].copy_from_slice(b"\x7fELF\x02\x01");
        core[16..18].copy_from_slice(&4u16.to_le_bytes());
        core[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        core[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        core[0x38..0x3a].copy_from_slice(&2u16.to_le_bytes());
        let ph = 64 + 56;
        core[ph..ph + 4].copy_from_slice(&1u32.to_le_bytes());
        core[ph + 16..ph + 24].copy_from_slice(&0x7f00_0000_0000u64.to_le_bytes());
        core[ph + 40..ph + 48].copy_from_slice(&(64u64 << 20).to_le_bytes());
        let p = parse_phdrs(&core);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].p_type, 0);
        assert_eq!(
            (p[1].p_type, p[1].vaddr, p[1].filesz, p[1].memsz),
            (1, 0x7f00_0000_0000, 0, 64 << 20)
        );
    }
}
