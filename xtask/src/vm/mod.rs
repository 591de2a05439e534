//! From built kernels to a guest's report: the kernels of a run
//! (`targets`), the guest image, the QEMU arguments, running QEMU and
//! watching its console, the session that boots each kernel, the pure
//! assessment of what came back (`assess`) and of the option a kernel
//! lacks (`boot_log`), and `run`'s host command in a guest (`command`,
//! with the user's `terminal`).

pub mod accel;
pub mod assess;
pub mod boot_log;
pub mod command;
pub mod console;
pub mod failed;
pub mod gdb;
pub mod guest_image;
pub mod process;
pub mod qemu;
pub mod relay;
pub mod schedule;
pub mod session;
pub mod share;
pub mod symbolize;
pub mod targets;
mod terminal;
pub mod virtiofsd;
