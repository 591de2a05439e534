//! Our own minimal `bpf(2)` wrapper: raw syscall with a `#[repr(C)]`
//! `union bpf_attr`, covering only what the tests need. Layouts follow
//! include/uapi/linux/bpf.h of Linux 6.12 and are checked at compile time.
//! BPF_MAP_CREATE lives in guest-common, shared with bench.

use std::ffi::CString;
use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use guest_common::bpf::{map_create, MapCreateAttr};

use super::cvt;
use crate::asm::Insn;

pub use guest_common::bpf::{BPF_F_MMAPABLE, BPF_MAP_TYPE_ARRAY};

pub const BPF_MAP_TYPE_HASH: u32 = 1;
pub const BPF_MAP_TYPE_RINGBUF: u32 = 27;
pub const BPF_MAP_TYPE_ARENA: u32 = 33;

pub const BPF_F_NUMA_NODE: u32 = 1 << 2;
pub const BPF_F_RDONLY: u32 = 1 << 3;
pub const BPF_F_RDONLY_PROG: u32 = 1 << 7;
/// Arena: a user fault on a page the arena does not hold is SIGSEGV
/// instead of allocating it.
pub const BPF_F_SEGV_ON_FAULT: u32 = 1 << 17;

pub const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
pub const BPF_PROG_TYPE_KPROBE: u32 = 2;
pub const BPF_PROG_TYPE_SYSCALL: u32 = 31;

/// prog_flags of BPF_PROG_LOAD: the program may sleep (syscall programs
/// must be).
pub const BPF_F_SLEEPABLE: u32 = 1 << 4;

pub const BPF_ANY: u64 = 0;

const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_PROG_LOAD: u32 = 5;
const BPF_PROG_TEST_RUN: u32 = 10;
const BPF_MAP_GET_NEXT_ID: u32 = 12;
const BPF_MAP_GET_FD_BY_ID: u32 = 14;
const BPF_OBJ_GET_INFO_BY_FD: u32 = 15;
const BPF_MAP_FREEZE: u32 = 22;
const BPF_MAP_LOOKUP_BATCH: u32 = 24;

/// MAP_LOOKUP_ELEM / MAP_UPDATE_ELEM / MAP_FREEZE.
#[repr(C)]
#[derive(Clone, Copy)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// MAP_LOOKUP_BATCH and friends.
#[repr(C)]
#[derive(Clone, Copy)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// MAP_GET_NEXT_ID / MAP_GET_FD_BY_ID.
#[repr(C)]
#[derive(Clone, Copy)]
struct ObjIdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// Our slice of `union bpf_attr`. The kernel accepts a shorter or longer
/// attr as long as the bytes it does not know are zero.
#[repr(C)]
pub union BpfAttr {
    map_elem: MapElemAttr,
    batch: BatchAttr,
    prog_load: ProgLoadAttr,
    test_run: TestRunAttr,
    obj_id: ObjIdAttr,
    info: InfoAttr,
    raw: [u64; 18],
}

const _: () = {
    assert!(offset_of!(MapElemAttr, key) == 8);
    assert!(offset_of!(MapElemAttr, flags) == 24);
    assert!(offset_of!(BatchAttr, count) == 32);
    assert!(offset_of!(BatchAttr, map_fd) == 36);
    assert!(size_of::<BatchAttr>() == 56);
    assert!(offset_of!(ProgLoadAttr, log_buf) == 32);
    assert!(offset_of!(ProgLoadAttr, prog_name) == 48);
    assert!(offset_of!(TestRunAttr, data_in) == 16);
    assert!(offset_of!(TestRunAttr, repeat) == 32);
    assert!(offset_of!(TestRunAttr, flags) == 64);
    assert!(offset_of!(InfoAttr, info) == 8);
    assert!(size_of::<BpfAttr>() == 144);
    assert!(offset_of!(MapInfo, map_extra) == 80);
};

fn zeroed_attr() -> BpfAttr {
    BpfAttr { raw: [0; 18] }
}

fn sys_bpf(cmd: u32, attr: &mut BpfAttr) -> io::Result<libc::c_long> {
    // SAFETY: attr points to a live, initialised buffer of the size we pass;
    // the kernel reads (and for some commands writes) only within it.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut BpfAttr,
            size_of::<BpfAttr>() as libc::c_uint,
        )
    })
}

fn fd_u32(fd: BorrowedFd<'_>) -> u32 {
    fd.as_raw_fd() as u32
}

fn owned(ret: libc::c_long) -> OwnedFd {
    // SAFETY: the bpf syscall returned a fresh descriptor that nobody owns.
    unsafe { OwnedFd::from_raw_fd(ret as RawFd) }
}

/// Parameters of BPF_MAP_CREATE.
#[derive(Clone, Debug, Default)]
pub struct MapSpec {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub numa_node: u32,
    pub map_extra: u64,
}

impl MapSpec {
    /// A plain array map (u32 keys), without BPF_F_MMAPABLE.
    pub fn array(value_size: u32, max_entries: u32) -> Self {
        MapSpec {
            map_type: BPF_MAP_TYPE_ARRAY,
            key_size: 4,
            value_size,
            max_entries,
            ..Default::default()
        }
    }

    /// The array map the patch is about.
    pub fn mmapable_array(value_size: u32, max_entries: u32) -> Self {
        Self::array(value_size, max_entries).flags(BPF_F_MMAPABLE)
    }

    pub fn flags(mut self, flags: u32) -> Self {
        self.map_flags |= flags;
        self
    }

    /// Allocate the map's memory on `node` (BPF_F_NUMA_NODE).
    pub fn on_node(mut self, node: u32) -> Self {
        self.map_flags |= BPF_F_NUMA_NODE;
        self.numa_node = node;
        self
    }

    pub fn create(&self) -> io::Result<Map> {
        let fd = map_create(&MapCreateAttr {
            map_type: self.map_type,
            key_size: self.key_size,
            value_size: self.value_size,
            max_entries: self.max_entries,
            map_flags: self.map_flags,
            numa_node: self.numa_node,
            map_extra: self.map_extra,
            ..Default::default()
        })?;
        Ok(Map {
            fd,
            key_size: self.key_size as usize,
            value_size: self.value_size as usize,
        })
    }
}

/// An owned map fd plus the sizes needed to size lookup buffers.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    key_size: usize,
    value_size: usize,
}

impl Map {
    /// Wraps a fd obtained e.g. from [`map_get_fd_by_id`].
    pub fn from_fd(fd: OwnedFd) -> io::Result<Map> {
        let info = map_info(fd.as_fd())?;
        Ok(Map {
            fd,
            key_size: info.key_size as usize,
            value_size: info.value_size as usize,
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn value_size(&self) -> usize {
        self.value_size
    }

    /// The fd alone, to keep or close apart from the map's sizes.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        assert_eq!(key.len(), self.key_size, "map update: key size");
        assert_eq!(value.len(), self.value_size, "map update: value size");
        map_update(self.fd(), key, value, BPF_ANY)
    }

    pub fn lookup(&self, key: &[u8]) -> io::Result<Vec<u8>> {
        assert_eq!(key.len(), self.key_size, "map lookup: key size");
        let mut value = vec![0u8; self.value_size];
        map_lookup(self.fd(), key, &mut value)?;
        Ok(value)
    }

    /// Update of an array element by index.
    pub fn update_idx(&self, idx: u32, value: &[u8]) -> io::Result<()> {
        self.update(&idx.to_ne_bytes(), value)
    }

    pub fn lookup_idx(&self, idx: u32) -> io::Result<Vec<u8>> {
        self.lookup(&idx.to_ne_bytes())
    }

    pub fn freeze(&self) -> io::Result<()> {
        map_freeze(self.fd())
    }

    pub fn id(&self) -> io::Result<u32> {
        Ok(map_info(self.fd())?.id)
    }
}

pub fn map_update(fd: BorrowedFd<'_>, key: &[u8], value: &[u8], flags: u64) -> io::Result<()> {
    let mut attr = zeroed_attr();
    attr.map_elem = MapElemAttr {
        map_fd: fd_u32(fd),
        _pad: 0,
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        flags,
    };
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// `out` must be exactly value_size bytes long.
pub fn map_lookup(fd: BorrowedFd<'_>, key: &[u8], out: &mut [u8]) -> io::Result<()> {
    let mut attr = zeroed_attr();
    attr.map_elem = MapElemAttr {
        map_fd: fd_u32(fd),
        _pad: 0,
        key: key.as_ptr() as u64,
        value: out.as_mut_ptr() as u64,
        flags: 0,
    };
    sys_bpf(BPF_MAP_LOOKUP_ELEM, &mut attr).map(drop)
}

pub fn map_freeze(fd: BorrowedFd<'_>) -> io::Result<()> {
    let mut attr = zeroed_attr();
    attr.map_elem = MapElemAttr {
        map_fd: fd_u32(fd),
        _pad: 0,
        key: 0,
        value: 0,
        flags: 0,
    };
    sys_bpf(BPF_MAP_FREEZE, &mut attr).map(drop)
}

/// The values of the first `count` elements of an array map (u32 keys)
/// in one BPF_MAP_LOOKUP_BATCH, `value_size` bytes each.
pub fn map_lookup_all(fd: BorrowedFd<'_>, count: u32, value_size: usize) -> io::Result<Vec<u8>> {
    let mut keys = vec![0u32; count as usize];
    let mut values = vec![0u8; count as usize * value_size];
    let mut next = 0u32;
    let mut attr = zeroed_attr();
    attr.batch = BatchAttr {
        in_batch: 0,
        out_batch: &mut next as *mut u32 as u64,
        keys: keys.as_mut_ptr() as u64,
        values: values.as_mut_ptr() as u64,
        count,
        map_fd: fd_u32(fd),
        elem_flags: 0,
        flags: 0,
    };
    // ENOENT: the batch reached the map's end, with every element read.
    match sys_bpf(BPF_MAP_LOOKUP_BATCH, &mut attr) {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(e),
    }
    // SAFETY: batch is the variant we initialised; the kernel set count.
    let filled = unsafe { attr.batch.count };
    if filled != count {
        return Err(io::Error::other(format!(
            "BPF_MAP_LOOKUP_BATCH read {filled} of {count} elements"
        )));
    }
    Ok(values)
}

/// Prefix of `struct bpf_map_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MapInfo {
    pub map_type: u32,
    pub id: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub name: [u8; 16],
    pub ifindex: u32,
    pub btf_vmlinux_value_type_id: u32,
    pub netns_dev: u64,
    pub netns_ino: u64,
    pub btf_id: u32,
    pub btf_key_type_id: u32,
    pub btf_value_type_id: u32,
    pub btf_vmlinux_id: u32,
    pub map_extra: u64,
}

pub fn map_info(fd: BorrowedFd<'_>) -> io::Result<MapInfo> {
    let mut info = MapInfo::default();
    let mut attr = zeroed_attr();
    attr.info = InfoAttr {
        bpf_fd: fd_u32(fd),
        info_len: size_of::<MapInfo>() as u32,
        info: &mut info as *mut MapInfo as u64,
    };
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok(info)
}

pub fn map_get_fd_by_id(id: u32) -> io::Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.obj_id = ObjIdAttr {
        id,
        next_id: 0,
        open_flags: 0,
    };
    Ok(owned(sys_bpf(BPF_MAP_GET_FD_BY_ID, &mut attr)?))
}

/// The next map id after `start` (ENOENT at the end).
pub fn map_get_next_id(start: u32) -> io::Result<u32> {
    let mut attr = zeroed_attr();
    attr.obj_id = ObjIdAttr {
        id: start,
        next_id: 0,
        open_flags: 0,
    };
    sys_bpf(BPF_MAP_GET_NEXT_ID, &mut attr)?;
    // SAFETY: obj_id is the variant we initialised; the kernel filled next_id.
    Ok(unsafe { attr.obj_id.next_id })
}

/// Every map id currently allocated.
pub fn map_ids() -> io::Result<Vec<u32>> {
    let mut ids = Vec::new();
    let mut cur = 0;
    loop {
        match map_get_next_id(cur) {
            Ok(id) => {
                ids.push(id);
                cur = id;
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(ids),
            Err(e) => return Err(e),
        }
    }
}

/// A failed BPF_PROG_LOAD with the verifier's log.
#[derive(Debug)]
pub struct LoadError {
    pub err: io::Error,
    pub log: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BPF_PROG_LOAD: {}; verifier log:\n{}",
            super::err_name(&self.err),
            self.log
        )
    }
}

#[derive(Debug)]
pub struct Prog {
    fd: OwnedFd,
}

impl Prog {
    pub fn load(prog_type: u32, insns: &[Insn]) -> Result<Prog, LoadError> {
        Self::load_with_flags(prog_type, 0, insns)
    }

    /// BPF_PROG_LOAD with `prog_flags` (e.g. [`BPF_F_SLEEPABLE`]).
    pub fn load_with_flags(
        prog_type: u32,
        prog_flags: u32,
        insns: &[Insn],
    ) -> Result<Prog, LoadError> {
        let license = CString::new("GPL").expect("static string");
        let try_load = |log: &mut [u8], level: u32| {
            let mut attr = zeroed_attr();
            attr.prog_load = ProgLoadAttr {
                prog_type,
                insn_cnt: insns.len() as u32,
                insns: insns.as_ptr() as u64,
                license: license.as_ptr() as u64,
                log_level: level,
                log_size: log.len() as u32,
                log_buf: if log.is_empty() {
                    0
                } else {
                    log.as_mut_ptr() as u64
                },
                kern_version: 0,
                prog_flags,
                prog_name: [0; 16],
                prog_ifindex: 0,
                expected_attach_type: 0,
            };
            sys_bpf(BPF_PROG_LOAD, &mut attr)
        };
        match try_load(&mut [], 0) {
            Ok(fd) => Ok(Prog { fd: owned(fd) }),
            Err(err) => {
                // Load again with a log only on failure, to explain it.
                let mut log = vec![0u8; 256 * 1024];
                let _ = try_load(&mut log, 1);
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                Err(LoadError {
                    err,
                    log: String::from_utf8_lossy(&log[..end]).into_owned(),
                })
            }
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// BPF_PROG_TEST_RUN once on `data`; returns the program's r0.
    pub fn test_run(&self, data: &[u8]) -> io::Result<u32> {
        self.run_test((data.as_ptr() as u64, data.len()), (0, 0), 1)
    }

    /// BPF_PROG_TEST_RUN of a syscall program: it gets `ctx` as its
    /// context (and may write it back); no data, no repeat, which it
    /// refuses. Returns the program's r0.
    pub fn test_run_ctx(&self, ctx: &mut [u8]) -> io::Result<u32> {
        self.run_test((0, 0), (ctx.as_mut_ptr() as u64, ctx.len()), 0)
    }

    /// BPF_PROG_TEST_RUN with `data` and `ctx` (address, length), `repeat`
    /// times; the program's r0.
    fn run_test(&self, data: (u64, usize), ctx: (u64, usize), repeat: u32) -> io::Result<u32> {
        let mut attr = zeroed_attr();
        attr.test_run = TestRunAttr {
            prog_fd: fd_u32(self.fd()),
            retval: 0,
            data_size_in: data.1 as u32,
            data_size_out: 0,
            data_in: data.0,
            data_out: 0,
            repeat,
            duration: 0,
            ctx_size_in: ctx.1 as u32,
            ctx_size_out: 0,
            ctx_in: ctx.0,
            ctx_out: 0,
            flags: 0,
            cpu: 0,
            batch_size: 0,
            _pad: 0,
        };
        sys_bpf(BPF_PROG_TEST_RUN, &mut attr)?;
        // SAFETY: test_run is the variant we initialised; the kernel set retval.
        Ok(unsafe { attr.test_run.retval })
    }
}
