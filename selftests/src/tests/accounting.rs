//! T11: write-active accounting and freeze. The patch gives lazy maps a
//! new vm_operations_struct that must share open/close with the old one:
//! every writable VMA (including split, forked and failed ones) must be
//! counted exactly once, which BPF_MAP_FREEZE (EBUSY while any writable
//! mapping exists) makes visible. P = U.

use super::common::*;

#[track_caller]
fn freeze_busy(map: &Map, what: &str) {
    expect_errno(
        map.freeze(),
        &[libc::EBUSY],
        &format!("BPF_MAP_FREEZE {what}"),
    );
}

#[track_caller]
fn freeze_ok(map: &Map, what: &str) {
    ok(map.freeze(), &format!("BPF_MAP_FREEZE {what}"));
}

/// T11: writable mmap blocks freeze, mprotect(PROT_READ) does not release
/// it, munmap does; read-only mappings never block it.
pub fn t11_freeze_busy_while_writable_mapped(_ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(4);
    let m = pm.map_rw();
    m.write_u64(0, 1);
    freeze_busy(&pm.map, "with a writable mapping");
    ok(mm::mprotect(m.addr(), m.len(), RO), "mprotect(PROT_READ)");
    freeze_busy(&pm.map, "after mprotect(PROT_READ) (VM_MAYWRITE stays)");
    drop(m);
    freeze_ok(&pm.map, "after munmap");
    expect_errno(
        pm.mmap(4, RW, 0),
        &[libc::EPERM],
        "writable mmap of a frozen map",
    );
    let ro = ok(pm.mmap(4, RO, 0), "read-only mmap of a frozen map");
    assert_eq!(ro.read_u64(0), 1, "data written before the freeze");

    let other = PagedMap::new(4);
    let ro = ok(other.mmap(4, RO, 0), "read-only mmap");
    ro.read_u64(PAGE);
    freeze_ok(&other.map, "with only a read-only mapping");
    Ok(())
}

/// T11: unmapping the middle page of a 3-page mapping leaves two VMAs,
/// each still counted.
pub fn t11_split_middle_page(_ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(3);
    let (addr, _) = pm.map_rw().leak();
    ok(mm::munmap(addr + PAGE, PAGE), "munmap of the middle page");
    freeze_busy(&pm.map, "with both outer pages mapped");
    ok(mm::munmap(addr, PAGE), "munmap of the first page");
    freeze_busy(&pm.map, "with the last page still mapped");
    ok(mm::munmap(addr + 2 * PAGE, PAGE), "munmap of the last page");
    freeze_ok(&pm.map, "after both pieces are gone");
    Ok(())
}

/// T11: the child's copy of a writable mapping keeps freeze EBUSY until
/// the child exits.
pub fn t11_fork_holds_write_active(_ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(4);
    let m = pm.map_rw();
    let (go, done) = (Gate::new(), Gate::new());
    let child = spawn(|| {
        go.open();
        done.wait();
    });
    go.wait();
    drop(m);
    freeze_busy(&pm.map, "while a forked child holds the mapping");
    done.open();
    child.wait().expect_success("child");
    freeze_ok(&pm.map, "after the child exited");
    Ok(())
}

/// T11: closing the map fd does not drop the mapping's count: freeze via
/// a fresh fd (GET_FD_BY_ID) is still EBUSY.
pub fn t11_closed_fd_still_busy(_ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(4);
    let id = ok(pm.map.id(), "map id");
    let m = pm.map_rw();
    drop(pm);
    m.write_u64(8, 42);
    let fresh = ok(
        Map::from_fd(ok(
            crate::sys::bpf::map_get_fd_by_id(id),
            "MAP_GET_FD_BY_ID",
        )),
        "map info",
    );
    freeze_busy(&fresh, "via a fresh fd after closing the original");
    drop(m);
    freeze_ok(&fresh, "after munmap");
    assert_eq!(
        u64::from_ne_bytes(ok(fresh.lookup_idx(0), "lookup")[8..16].try_into().unwrap()),
        42
    );
    Ok(())
}

/// T11: a writable mmap() that the map refuses does not leak a count.
pub fn t11_failed_mmap_balanced(_ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(4);
    let keep = pm.map_rw();
    // Both reach array_map_mmap() after the count was raised.
    expect_errno(
        pm.mmap(5, RW, 0),
        &[libc::EINVAL],
        "writable mmap of 5 pages of a 4-page map",
    );
    expect_errno(
        pm.mmap(1, RW, 4),
        &[libc::EINVAL],
        "writable mmap at offset 4 of a 4-page map",
    );
    expect_errno(
        mm::mmap(0, PAGE, RW, libc::MAP_PRIVATE, Some(pm.map.fd()), 0),
        &[libc::EINVAL],
        "writable MAP_PRIVATE mmap",
    );
    freeze_busy(&pm.map, "with one good writable mapping");
    drop(keep);
    freeze_ok(&pm.map, "after the only successful mapping is gone");
    Ok(())
}

/// T11: MAP_FIXED anonymous memory over the mapping releases it (entirely
/// or piecewise).
pub fn t11_map_fixed_anon_releases(_ctx: &Ctx) -> Result<(), Skip> {
    let anon_over = |addr: usize, len: usize| {
        let (a, _) = ok(
            mm::mmap(
                addr,
                len,
                RW,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                None,
                0,
            ),
            "MAP_FIXED anonymous mmap",
        )
        .leak();
        assert_eq!(a, addr, "MAP_FIXED address");
    };
    let pm = PagedMap::new(3);
    let (addr, len) = pm.map_rw().leak();
    // SAFETY: the range is ours; this only makes sure it is unmapped at the end.
    let _cleanup = unsafe { Mapping::from_raw(addr, len) };
    anon_over(addr + PAGE, PAGE);
    freeze_busy(&pm.map, "with the outer pages still mapped");
    anon_over(addr, len);
    freeze_ok(&pm.map, "after anonymous memory replaced the whole mapping");
    Ok(())
}
