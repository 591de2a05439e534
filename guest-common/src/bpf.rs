//! BPF_MAP_CREATE, the one `bpf(2)` command both selftests and bench issue
//! themselves. The layout follows include/uapi/linux/bpf.h of Linux 6.12 and
//! is checked at compile time.

use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

pub const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub const BPF_F_MMAPABLE: u32 = 1 << 10;

const BPF_MAP_CREATE: libc::c_long = 0;

/// The BPF_MAP_CREATE member of `union bpf_attr`. The kernel treats the
/// rest of the union, which we do not pass, as zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MapCreateAttr {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub inner_map_fd: u32,
    pub numa_node: u32,
    pub map_name: [u8; 16],
    pub map_ifindex: u32,
    pub btf_fd: u32,
    pub btf_key_type_id: u32,
    pub btf_value_type_id: u32,
    pub btf_vmlinux_value_type_id: u32,
    pub map_extra: u64,
    pub value_type_btf_obj_fd: i32,
    pub map_token_fd: i32,
}

const _: () = {
    assert!(size_of::<MapCreateAttr>() == 80);
    assert!(offset_of!(MapCreateAttr, numa_node) == 24);
    assert!(offset_of!(MapCreateAttr, map_name) == 28);
    assert!(offset_of!(MapCreateAttr, map_extra) == 64);
};

/// Creates a map; closing (dropping) the fd releases it unless something
/// else, e.g. a mapping, still holds a reference.
pub fn map_create(attr: &MapCreateAttr) -> io::Result<OwnedFd> {
    // SAFETY: attr is a live, fully initialised bpf_attr prefix of the size
    // passed; the kernel only reads it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_CREATE,
            attr as *const MapCreateAttr,
            size_of::<MapCreateAttr>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}
