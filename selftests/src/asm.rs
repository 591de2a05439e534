//! Hand-assembled BPF instructions (`struct bpf_insn`), enough for the
//! small socket-filter programs of T05 and the arena programs of T41: no
//! libbpf, no clang in the guest.

pub const R0: u8 = 0;
pub const R1: u8 = 1;
pub const R2: u8 = 2;
pub const R3: u8 = 3;
pub const R4: u8 = 4;
pub const R5: u8 = 5;
pub const R6: u8 = 6;
pub const R7: u8 = 7;
pub const R10: u8 = 10;

// Instruction classes.
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_ST: u8 = 0x02;
const BPF_STX: u8 = 0x03;
const BPF_ALU: u8 = 0x04;
const BPF_JMP: u8 = 0x05;
const BPF_ALU64: u8 = 0x07;
// Modes.
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
// Operand source.
const BPF_K: u8 = 0x00;
const BPF_X: u8 = 0x08;
// ALU / JMP operations.
const BPF_ADD: u8 = 0x00;
const BPF_MOV: u8 = 0xb0;
const BPF_JA: u8 = 0x00;
const BPF_JEQ: u8 = 0x10;
const BPF_JGT: u8 = 0x20;
const BPF_JNE: u8 = 0x50;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;

/// ld_imm64 src_reg: imm is a map fd.
pub const BPF_PSEUDO_MAP_FD: u8 = 1;
/// ld_imm64 src_reg: imm is a map fd, second imm an offset into value 0.
pub const BPF_PSEUDO_MAP_VALUE: u8 = 2;
/// call src_reg: imm is the BTF id of a kernel function (a kfunc).
pub const BPF_PSEUDO_KFUNC_CALL: u8 = 2;

pub const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
pub const BPF_FUNC_KTIME_GET_NS: i32 = 5;
pub const BPF_FUNC_GET_CURRENT_PID_TGID: i32 = 14;

/// Access size of loads and stores.
#[derive(Clone, Copy, Debug)]
pub enum Size {
    B,
    H,
    W,
    DW,
}

impl Size {
    fn bits(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::H => 0x08,
            Size::B => 0x10,
            Size::DW => 0x18,
        }
    }
}

/// `struct bpf_insn`: dst_reg in the low nibble of `regs`, src_reg in the
/// high one (little-endian bitfield layout).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

const _: () = assert!(std::mem::size_of::<Insn>() == 8);

impl Insn {
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (dst & 0xf) | (src << 4),
            off,
            imm,
        }
    }

    pub fn dst(&self) -> u8 {
        self.regs & 0xf
    }

    pub fn src(&self) -> u8 {
        self.regs >> 4
    }

    /// The 8 bytes the kernel sees.
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = self.regs;
        b[2..4].copy_from_slice(&self.off.to_le_bytes());
        b[4..8].copy_from_slice(&self.imm.to_le_bytes());
        b
    }
}

pub fn mov64_imm(dst: u8, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm)
}

pub fn mov64_reg(dst: u8, src: u8) -> Insn {
    Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0)
}

/// dst = (u32)src: the low half, zero-extended.
pub fn mov32_reg(dst: u8, src: u8) -> Insn {
    Insn::new(BPF_ALU | BPF_MOV | BPF_X, dst, src, 0, 0)
}

pub fn add64_imm(dst: u8, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | BPF_ADD | BPF_K, dst, 0, 0, imm)
}

pub fn add64_reg(dst: u8, src: u8) -> Insn {
    Insn::new(BPF_ALU64 | BPF_ADD | BPF_X, dst, src, 0, 0)
}

/// Two-slot 64-bit immediate load with a pseudo source register.
pub fn ld_imm64(dst: u8, src: u8, imm_lo: i32, imm_hi: i32) -> [Insn; 2] {
    [
        Insn::new(BPF_LD | Size::DW.bits() | BPF_IMM, dst, src, 0, imm_lo),
        Insn::new(0, 0, 0, 0, imm_hi),
    ]
}

/// dst = pointer to the map (for helper calls).
pub fn ld_map_fd(dst: u8, map_fd: i32) -> [Insn; 2] {
    ld_imm64(dst, BPF_PSEUDO_MAP_FD, map_fd, 0)
}

/// `dst = &value[off]` of a single-entry array map (direct value access).
pub fn ld_map_value(dst: u8, map_fd: i32, off: i32) -> [Insn; 2] {
    ld_imm64(dst, BPF_PSEUDO_MAP_VALUE, map_fd, off)
}

/// dst = *(size *)(src + off)
pub fn ldx_mem(size: Size, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(BPF_LDX | size.bits() | BPF_MEM, dst, src, off, 0)
}

/// *(size *)(dst + off) = src
pub fn stx_mem(size: Size, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(BPF_STX | size.bits() | BPF_MEM, dst, src, off, 0)
}

/// *(size *)(dst + off) = imm
pub fn st_mem(size: Size, dst: u8, off: i16, imm: i32) -> Insn {
    Insn::new(BPF_ST | size.bits() | BPF_MEM, dst, 0, off, imm)
}

/// if dst == imm goto pc + 1 + off
pub fn jeq_imm(dst: u8, imm: i32, off: i16) -> Insn {
    Insn::new(BPF_JMP | BPF_JEQ | BPF_K, dst, 0, off, imm)
}

/// if dst != imm goto pc + 1 + off
pub fn jne_imm(dst: u8, imm: i32, off: i16) -> Insn {
    Insn::new(BPF_JMP | BPF_JNE | BPF_K, dst, 0, off, imm)
}

/// if dst != src goto pc + 1 + off
pub fn jne_reg(dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(BPF_JMP | BPF_JNE | BPF_X, dst, src, off, 0)
}

/// if dst > src (unsigned) goto pc + 1 + off
pub fn jgt_reg(dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(BPF_JMP | BPF_JGT | BPF_X, dst, src, off, 0)
}

/// goto pc + 1 + off
pub fn ja(off: i16) -> Insn {
    Insn::new(BPF_JMP | BPF_JA, 0, 0, off, 0)
}

pub fn call(helper: i32) -> Insn {
    Insn::new(BPF_JMP | BPF_CALL, 0, 0, 0, helper)
}

/// Call of the kernel function with BTF id `btf_id` in vmlinux's BTF
/// (off 0: not a module's).
pub fn kfunc_call(btf_id: u32) -> Insn {
    Insn::new(
        BPF_JMP | BPF_CALL,
        0,
        BPF_PSEUDO_KFUNC_CALL,
        0,
        btf_id as i32,
    )
}

pub fn exit() -> Insn {
    Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
}

/// r0 = bpf_map_lookup_elem(map, &key), then `if r0 == NULL` jump over
/// `body` instructions plus their closing exit. The caller appends the body
/// (using the value pointer in r0), an exit, and [`null_branch`].
pub fn lookup_prologue(map_fd: i32, key: u32, body: usize) -> Vec<Insn> {
    let mut v = vec![
        st_mem(Size::W, R10, -4, key as i32),
        mov64_reg(R2, R10),
        add64_imm(R2, -4),
    ];
    v.extend(ld_map_fd(R1, map_fd));
    v.push(call(BPF_FUNC_MAP_LOOKUP_ELEM));
    // Skip the body and its exit to the NULL branch.
    v.push(jeq_imm(R0, 0, (body + 1) as i16));
    v
}

/// Tail of [`lookup_prologue`]: the NULL branch.
pub fn null_branch(null_ret: i32) -> [Insn; 2] {
    [mov64_imm(R0, null_ret), exit()]
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn encodings_match_the_kernel_uapi() {
        assert_eq!(mov64_imm(R0, 1).to_bytes(), [0xb7, 0x00, 0, 0, 1, 0, 0, 0]);
        assert_eq!(
            mov64_reg(R2, R10).to_bytes(),
            [0xbf, 0xa2, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            add64_imm(R2, -4).to_bytes(),
            [0x07, 0x02, 0, 0, 0xfc, 0xff, 0xff, 0xff]
        );
        assert_eq!(add64_reg(R0, R2).to_bytes(), [0x0f, 0x20, 0, 0, 0, 0, 0, 0]);
        assert_eq!(call(1).to_bytes(), [0x85, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(exit().to_bytes(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(jeq_imm(R0, 0, 3).to_bytes(), [0x15, 0x00, 3, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn jumps_moves_and_kfunc_calls() {
        assert_eq!(mov32_reg(R0, R0).to_bytes(), [0xbc, 0x00, 0, 0, 0, 0, 0, 0]);
        assert_eq!(jne_imm(R1, 0, 2).to_bytes(), [0x55, 0x01, 2, 0, 0, 0, 0, 0]);
        assert_eq!(
            jne_reg(R1, R0, 9).to_bytes(),
            [0x5d, 0x01, 9, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            jgt_reg(R0, R7, 4).to_bytes(),
            [0x2d, 0x70, 4, 0, 0, 0, 0, 0]
        );
        assert_eq!(ja(-7).to_bytes(), [0x05, 0, 0xf9, 0xff, 0, 0, 0, 0]);
        // call with src_reg BPF_PSEUDO_KFUNC_CALL, imm the BTF id.
        assert_eq!(
            kfunc_call(0x1234).to_bytes(),
            [0x85, 0x20, 0, 0, 0x34, 0x12, 0, 0]
        );
    }

    #[test]
    fn memory_ops() {
        // ldx r0 = *(u32 *)(r1 + 16)
        assert_eq!(
            ldx_mem(Size::W, R0, R1, 16).to_bytes(),
            [0x61, 0x10, 16, 0, 0, 0, 0, 0]
        );
        assert_eq!(ldx_mem(Size::DW, R0, R1, 8).code, 0x79);
        assert_eq!(ldx_mem(Size::B, R0, R1, 0).code, 0x71);
        assert_eq!(ldx_mem(Size::H, R0, R1, 0).code, 0x69);
        // stx *(u64 *)(r10 - 8) = r1
        assert_eq!(
            stx_mem(Size::DW, R10, R1, -8).to_bytes(),
            [0x7b, 0x1a, 0xf8, 0xff, 0, 0, 0, 0]
        );
        // st *(u32 *)(r10 - 4) = 7
        assert_eq!(
            st_mem(Size::W, R10, -4, 7).to_bytes(),
            [0x62, 0x0a, 0xfc, 0xff, 7, 0, 0, 0]
        );
        assert_eq!(st_mem(Size::DW, R0, 8, 1).code, 0x7a);
    }

    #[test]
    fn ld_imm64_pseudo_sources() {
        let [a, b] = ld_map_fd(R1, 5);
        assert_eq!(a.to_bytes(), [0x18, 0x11, 0, 0, 5, 0, 0, 0]);
        assert_eq!(b.to_bytes(), [0; 8]);
        let [a, b] = ld_map_value(R3, 9, 8192);
        assert_eq!(
            (a.code, a.dst(), a.src(), a.imm),
            (0x18, R3, BPF_PSEUDO_MAP_VALUE, 9)
        );
        assert_eq!((b.code, b.regs, b.off, b.imm), (0, 0, 0, 8192));
    }

    #[test]
    fn lookup_skeleton_jumps_over_body() {
        let v = lookup_prologue(3, 7, 2);
        let jeq = v.last().unwrap();
        assert_eq!((jeq.code, jeq.off), (0x15, 3));
        assert_eq!(v[0].imm, 7);
        // 3 stack/key insns + 2 ld_imm64 slots + call + jeq
        assert_eq!(v.len(), 7);
    }
}
