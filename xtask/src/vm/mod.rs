//! From built kernels to a guest's report: the guest image, the QEMU
//! arguments, running QEMU and watching its console, and the session that
//! boots each kernel of a run and judges what came back.

pub mod accel;
pub mod console;
pub mod guest_image;
pub mod process;
pub mod qemu;
pub mod relay;
pub mod session;
pub mod share;
pub mod virtiofsd;
