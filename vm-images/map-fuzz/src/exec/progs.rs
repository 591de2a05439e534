//! BPF programs that store into and load from a map's element, as a BPF
//! program writing its map's memory does, hand-assembled and run with
//! BPF_PROG_TEST_RUN (socket filters: no INET needed).

use std::os::fd::{AsRawFd, BorrowedFd};

use selftests::asm::{self, Insn, Size, R0};
use selftests::sys::bpf::{Prog, BPF_PROG_TYPE_SOCKET_FILTER};

use crate::model::Ret;
use crate::op::Elem;

/// Loads and runs `body` and an exit after a lookup of `e` (the value
/// pointer in r0); the NULL branch returns `null_ret`.
fn run(map: BorrowedFd<'_>, e: Elem, body: &[Insn], null_ret: i32) -> Ret {
    let mut insns = asm::lookup_prologue(map.as_raw_fd(), e.index, body.len());
    insns.extend_from_slice(body);
    insns.push(asm::exit());
    insns.extend(asm::null_branch(null_ret));
    let prog = match Prog::load(BPF_PROG_TYPE_SOCKET_FILTER, &insns) {
        Ok(p) => p,
        Err(e) => return Ret::Errno(e.err.raw_os_error().unwrap_or(-1)),
    };
    // A socket filter's test run wants a packet of at least an Ethernet
    // header.
    match prog.test_run(&[0u8; 64]) {
        Ok(r0) => Ret::Value(u64::from(r0)),
        Err(err) => Ret::Errno(err.raw_os_error().unwrap_or(-1)),
    }
}

/// `*(u64 *)(value + 8 * word) = value`; returns 0, or 1 if the lookup
/// found nothing.
pub fn store(map: BorrowedFd<'_>, e: Elem, word: u32, value: i32) -> Ret {
    let body = [
        asm::st_mem(Size::DW, R0, (word * 8) as i16, value),
        asm::mov64_imm(R0, 0),
    ];
    run(map, e, &body, 1)
}

/// Returns the low half of `*(u64 *)(value + 8 * word)`, or 0 if the
/// lookup found nothing.
pub fn load(map: BorrowedFd<'_>, e: Elem, word: u32) -> Ret {
    let body = [asm::ldx_mem(Size::DW, R0, R0, (word * 8) as i16)];
    run(map, e, &body, 0)
}
