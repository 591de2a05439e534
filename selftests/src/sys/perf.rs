//! Kprobes for BPF programs, the way libbpf attaches them without a BPF
//! link: a perf event of the kprobe PMU on a kernel function (perf_event_open
//! with the symbol in config1), then PERF_EVENT_IOC_SET_BPF and _ENABLE.
//! Layouts and numbers follow include/uapi/linux/perf_event.h.

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::{cvt, cvt_int};

/// The dynamic PMU type of kprobes.
const KPROBE_TYPE: &str = "/sys/bus/event_source/devices/kprobe/type";

/// `struct perf_event_attr` up to config2 (PERF_ATTR_SIZE_VER1); the
/// kernel takes the fields it is not given as zero.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    /// Bit 0 of a kprobe event's config: a kretprobe.
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    /// kprobe_func: a pointer to the function's name.
    config1: u64,
    /// probe_offset: where in the function.
    config2: u64,
}

const PERF_ATTR_SIZE_VER1: usize = 72;
const _: () = assert!(size_of::<PerfEventAttr>() == PERF_ATTR_SIZE_VER1);

const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// _IO('$', 0)
const PERF_EVENT_IOC_ENABLE: libc::Ioctl = 0x2400;
/// _IOW('$', 8, __u32)
const PERF_EVENT_IOC_SET_BPF: libc::Ioctl = 0x4004_2408;

/// A BPF program attached at a kernel function's entry; dropping it
/// (closing the perf event) detaches it.
#[derive(Debug)]
pub struct Kprobe {
    _event: OwnedFd,
}

fn kprobe_pmu_type() -> io::Result<u32> {
    let text = std::fs::read_to_string(KPROBE_TYPE)?;
    text.trim()
        .parse()
        .map_err(|e| io::Error::other(format!("{KPROBE_TYPE}: {text:?}: {e}")))
}

fn ioctl(fd: BorrowedFd<'_>, request: libc::Ioctl, arg: libc::c_ulong) -> io::Result<()> {
    // SAFETY: both requests take an integer argument, no pointer.
    cvt_int(unsafe { libc::ioctl(fd.as_raw_fd(), request, arg) }).map(drop)
}

impl Kprobe {
    /// Runs `prog` (a BPF_PROG_TYPE_KPROBE program) on every call of the
    /// kernel function `symbol`, on every CPU and in every task: the
    /// event's CPU 0 only places the event, a kprobe's BPF programs run
    /// wherever it fires.
    pub fn attach(prog: BorrowedFd<'_>, symbol: &str) -> io::Result<Kprobe> {
        let name = CString::new(symbol).map_err(io::Error::other)?;
        let attr = PerfEventAttr {
            type_: kprobe_pmu_type()?,
            size: PERF_ATTR_SIZE_VER1 as u32,
            config1: name.as_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: attr is a valid perf_event_attr of the size it gives,
        // and the name it points to outlives the call.
        let fd = cvt(unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                -1 as libc::pid_t,
                0 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        })?;
        // SAFETY: a fresh descriptor that nobody else owns.
        let event = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        ioctl(
            event.as_fd(),
            PERF_EVENT_IOC_SET_BPF,
            prog.as_raw_fd() as libc::c_ulong,
        )?;
        ioctl(event.as_fd(), PERF_EVENT_IOC_ENABLE, 0)?;
        Ok(Kprobe { _event: event })
    }
}
