//! T41: an arena page freed by BPF while a user fault on it is between
//! looking it up and mapping it. 7.3's arena_vm_fault() looks the page up
//! under arena->spinlock, takes a reference, drops the lock and returns
//! the page in vmf->page; the core maps it later, in finish_fault(). A
//! bpf_arena_free_pages() that clears the kernel mapping and zaps the user
//! mappings in between finds no pte to zap, and finish_fault() then maps
//! a page the arena has freed: user space keeps a page BPF no longer sees
//! (eager and mainline, whose arena is 7.3's). From 0003 on (direct,
//! prefault, adaptive) the handler inserts the page itself, then looks
//! again under the lock: the page is no longer the arena's, so it zaps
//! what it inserted and the retried access finds no page, which with
//! BPF_F_SEGV_ON_FAULT is SIGSEGV.
//!
//! No timing luck: a kprobe on both places where the page is mapped holds
//! the faulting thread there, a BPF program spinning, until the free has
//! run to its end, which the free program reports in a state map.

use std::os::fd::AsRawFd;
use std::thread::{self, ScopedJoinHandle};
use std::time::{Duration, Instant};

use super::common::*;
use crate::asm::{self, Insn, Size, R0, R1, R10, R2, R3, R4, R5, R6, R7};
use crate::sys::bpf::{
    Prog, BPF_F_SEGV_ON_FAULT, BPF_F_SLEEPABLE, BPF_PROG_TYPE_KPROBE, BPF_PROG_TYPE_SYSCALL,
};
use crate::sys::btf::{Btf, VMLINUX};
use crate::sys::catch::{self, Caught};
use crate::sys::perf::Kprobe;

/// Tries at the race, each on a page of its own, before the test gives up.
const ATTEMPTS: usize = 3;
/// Where the page gets mapped: finish_fault() where the handler returned
/// it in vmf->page (eager, mainline), vmf_insert_page_mkwrite() in the
/// handler from 0003 on.
const MAPPING_POINTS: [&str; 2] = ["finish_fault", "vmf_insert_page_mkwrite"];
/// How long the kprobe holds the fault at most, waiting for the free.
const HOLD_NS: i32 = 2_000_000_000;
/// The spin's bound in iterations, BPF_MAX_LOOPS (the most bpf_iter_num
/// takes): a quarter of a second or so natively; HOLD_NS may end it first.
const SPINS: i32 = 8 << 20;
/// How long the test waits for the held fault to enter the kprobe.
const ENTER_TIMEOUT: Duration = Duration::from_secs(5);
/// What the test writes to a page before the race, plus the page's number.
const MAGIC: u64 = 0x7E41_57A1_E000_0000;

// The u32 words of the state map's one value, shared by the programs.
/// The tid whose next mapping the kprobe holds; it clears it, to hold once.
const ARMED: i16 = 0;
/// Set by the kprobe once it holds the fault.
const ENTERED: i16 = 4;
/// Set by the free program once bpf_arena_free_pages() returned.
const FREED: i16 = 8;
/// Set by the kprobe when it saw FREED while it held the fault.
const RACED: i16 = 12;
/// The kprobe's `struct bpf_iter_num` on its stack.
const ITER: i16 = -8;

/// BTF ids of the kernel functions the programs call.
struct Kfuncs {
    alloc: u32,
    free: u32,
    iter_new: u32,
    iter_next: u32,
    iter_destroy: u32,
}

impl Kfuncs {
    fn resolve() -> Kfuncs {
        let btf = ok(Btf::vmlinux(), "reading the kernel's BTF");
        let id = |name| {
            btf.func_id(name)
                .unwrap_or_else(|| panic!("{VMLINUX} has no function {name}"))
        };
        Kfuncs {
            alloc: id("bpf_arena_alloc_pages"),
            free: id("bpf_arena_free_pages"),
            iter_new: id("bpf_iter_num_new"),
            iter_next: id("bpf_iter_num_next"),
            iter_destroy: id("bpf_iter_num_destroy"),
        }
    }
}

/// Syscall program: r0 = bpf_arena_alloc_pages(arena, *(u64 *)ctx, 1,
/// NUMA_NO_NODE, 0) != NULL.
fn alloc_insns(arena: i32, k: &Kfuncs) -> Vec<Insn> {
    let mut v = vec![asm::ldx_mem(Size::DW, R2, R1, 0)];
    v.extend(asm::ld_map_fd(R1, arena));
    v.extend([
        asm::mov64_imm(R3, 1),
        asm::mov64_imm(R4, -1),
        asm::mov64_imm(R5, 0),
        asm::kfunc_call(k.alloc),
        // Not the address itself: r0 is 32 bits, its low half may be 0.
        asm::mov64_reg(R6, R0),
        asm::mov64_imm(R0, 0),
        asm::jeq_imm(R6, 0, 1),
        asm::mov64_imm(R0, 1),
        asm::exit(),
    ]);
    v
}

/// Syscall program: bpf_arena_free_pages(arena, *(u64 *)ctx, 1), then
/// FREED = 1: the free, clear, flush and zap, is over.
fn free_insns(arena: i32, state: i32, k: &Kfuncs) -> Vec<Insn> {
    let mut v = vec![asm::ldx_mem(Size::DW, R2, R1, 0)];
    v.extend(asm::ld_map_fd(R1, arena));
    v.extend([asm::mov64_imm(R3, 1), asm::kfunc_call(k.free)]);
    v.extend(asm::ld_map_value(R1, state, 0));
    v.extend([
        asm::st_mem(Size::W, R1, FREED, 1),
        asm::mov64_imm(R0, 0),
        asm::exit(),
    ]);
    v
}

/// Kprobe program: in the ARMED thread only, once, ENTERED = 1 and spin.
fn hold_insns(state: i32, k: &Kfuncs) -> Vec<Insn> {
    let spin = spin_insns(k);
    // Both jumps skip to the closing `return 0`.
    let past = spin.len() as i16 + 2;
    let mut v = asm::ld_map_value(R6, state, 0).to_vec();
    v.extend([
        asm::call(asm::BPF_FUNC_GET_CURRENT_PID_TGID),
        // The low half is the thread's id.
        asm::mov32_reg(R0, R0),
        asm::ldx_mem(Size::W, R1, R6, ARMED),
        asm::jeq_imm(R1, 0, past + 1),
        asm::jne_reg(R1, R0, past),
        asm::st_mem(Size::W, R6, ARMED, 0),
        asm::st_mem(Size::W, R6, ENTERED, 1),
    ]);
    v.extend(spin);
    v.extend([asm::mov64_imm(R0, 0), asm::exit()]);
    v
}

/// The spin, r6 = the state: until FREED (then RACED = 1) or HOLD_NS.
/// An open-coded bpf_iter_num loop, which the verifier walks until its
/// state converges, not once per iteration as a counted loop: a counted
/// loop short enough to verify would hold the fault for a few ms only.
fn spin_insns(k: &Kfuncs) -> Vec<Insn> {
    vec![
        asm::call(asm::BPF_FUNC_KTIME_GET_NS),
        asm::mov64_reg(R7, R0),
        asm::add64_imm(R7, HOLD_NS),
        asm::mov64_reg(R1, R10),
        asm::add64_imm(R1, ITER as i32),
        asm::mov64_imm(R2, 0),
        asm::mov64_imm(R3, SPINS),
        asm::kfunc_call(k.iter_new),
        // 8, the loop:
        asm::mov64_reg(R1, R10),
        asm::add64_imm(R1, ITER as i32),
        asm::kfunc_call(k.iter_next),
        // Drained: to 18.
        asm::jeq_imm(R0, 0, 6),
        asm::ldx_mem(Size::W, R1, R6, FREED),
        // Freed: to 17.
        asm::jne_imm(R1, 0, 3),
        asm::call(asm::BPF_FUNC_KTIME_GET_NS),
        // Past the deadline: to 18.
        asm::jgt_reg(R0, R7, 2),
        asm::ja(-9),
        // 17:
        asm::st_mem(Size::W, R6, RACED, 1),
        // 18:
        asm::mov64_reg(R1, R10),
        asm::add64_imm(R1, ITER as i32),
        asm::kfunc_call(k.iter_destroy),
    ]
}

/// The programs' shared words, the one value of an array map: they reach
/// it directly (BPF_PSEUDO_MAP_VALUE), the test by LOOKUP/UPDATE_ELEM.
struct State(Map);

impl State {
    fn new() -> State {
        State(ok(MapSpec::array(16, 1).create(), "creating the state map"))
    }

    /// Arms the kprobe for thread `tid` (0: for none), the rest cleared.
    fn arm(&self, tid: u32) {
        let mut value = [0u8; 16];
        value[..4].copy_from_slice(&tid.to_ne_bytes());
        ok(self.0.update_idx(0, &value), "arming the kprobe");
    }

    fn word(&self, off: i16) -> u32 {
        let value = ok(self.0.lookup_idx(0), "reading the state map");
        let off = off as usize;
        u32::from_ne_bytes(value[off..off + 4].try_into().unwrap())
    }
}

#[track_caller]
fn load(prog_type: u32, flags: u32, insns: &[Insn], what: &str) -> Prog {
    Prog::load_with_flags(prog_type, flags, insns)
        .unwrap_or_else(|e| panic!("loading the {what} program: {e}"))
}

/// A syscall program run on the user address `addr`; its r0.
#[track_caller]
fn run_on(prog: &Prog, addr: usize, what: &str) -> u32 {
    let mut ctx = (addr as u64).to_ne_bytes();
    ok(prog.test_run_ctx(&mut ctx), what)
}

/// The arena and its mapping, the state map, the programs and the
/// kprobes. The kprobes come first: dropped first, they detach before the
/// programs and maps go.
struct Rig {
    _kprobes: Vec<Kprobe>,
    _hold: Prog,
    alloc: Prog,
    free: Prog,
    state: State,
    m: Mapping,
    _arena: Map,
}

impl Rig {
    fn new(pages: usize) -> Rig {
        let k = Kfuncs::resolve();
        let (arena, m) = arena_mapping_with(pages, BPF_F_SEGV_ON_FAULT);
        let state = State::new();
        let (afd, sfd) = (arena.fd().as_raw_fd(), state.0.fd().as_raw_fd());
        let syscall =
            |insns: &[Insn], what| load(BPF_PROG_TYPE_SYSCALL, BPF_F_SLEEPABLE, insns, what);
        let alloc = syscall(&alloc_insns(afd, &k), "alloc");
        let free = syscall(&free_insns(afd, sfd, &k), "free");
        let hold = load(BPF_PROG_TYPE_KPROBE, 0, &hold_insns(sfd, &k), "kprobe");
        let kprobes = MAPPING_POINTS
            .iter()
            .map(|f| ok(Kprobe::attach(hold.fd(), f), &format!("kprobe on {f}")))
            .collect();
        Rig {
            _kprobes: kprobes,
            _hold: hold,
            alloc,
            free,
            state,
            m,
            _arena: arena,
        }
    }
}

/// Two CPUs this process may run on: the held fault spins on one, with
/// preemption off, and the free must run on the other.
fn two_cpus() -> [usize; 2] {
    // SAFETY: cpu_set_t is plain data, which sched_getaffinity fills.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(
        rc,
        0,
        "sched_getaffinity: {}",
        std::io::Error::last_os_error()
    );
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `set` is initialised and `c` within it.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    assert!(
        cpus.len() >= 2,
        "T41 needs two CPUs, one to hold the fault and one to free the page; \
         this process may run on {cpus:?}"
    );
    [cpus[0], cpus[1]]
}

/// Pins the calling thread to `cpu`.
fn pin_to(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_SET stays within it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(
        rc,
        0,
        "pinning a thread to CPU {cpu}: {}",
        std::io::Error::last_os_error()
    );
}

/// The faulting thread, pinned to `cpu`. It runs its steps once unarmed,
/// so that everything it touches but the page at `addr` is mapped (the
/// kprobe must not hold another fault of it), then armed: the read of
/// `addr` faults and the kprobe holds it where the page gets mapped.
fn held_read(state: &State, addr: usize, cpu: usize, magic: u64) -> Result<u64, Caught> {
    pin_to(cpu);
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    let mut read = Ok(0);
    for armed in [0, tid] {
        // The pte goes; the arena keeps the page.
        ok(
            mm::madvise(addr, PAGE, libc::MADV_DONTNEED),
            "MADV_DONTNEED",
        );
        state.arm(armed);
        read = catch::load_u64(addr);
        if armed == 0 {
            assert_eq!(read, Ok(magic), "the unarmed read of the page at {addr:#x}");
        }
    }
    read
}

/// Polls ENTERED until the kprobe holds the read (true), or the reading
/// thread ended without that, or ENTER_TIMEOUT passed (false).
fn wait_entered(state: &State, reader: &ScopedJoinHandle<'_, Result<u64, Caught>>) -> bool {
    let deadline = Instant::now() + ENTER_TIMEOUT;
    loop {
        if state.word(ENTERED) == 1 {
            return true;
        }
        if reader.is_finished() || Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// What an attempt saw: the state words after it, the held read's result.
struct Attempt {
    words: [u32; 3],
    read: Result<u64, Caught>,
}

impl Attempt {
    fn raced(&self) -> bool {
        self.words[2] == 1
    }

    fn describe(&self) -> String {
        let [entered, freed, raced] = self.words;
        format!(
            "entered {entered}, freed {freed}, raced {raced}, read {:x?}",
            self.read
        )
    }
}

/// One attempt on arena page `page`: allocate it, touch it, then free it
/// while another thread's fault on it is held. `cpus`: the reader's, ours.
fn attempt(rig: &Rig, page: usize, magic: u64, cpus: [usize; 2]) -> Attempt {
    let addr = rig.m.addr() + page * PAGE;
    assert_eq!(
        run_on(&rig.alloc, addr, "running the alloc program"),
        1,
        "bpf_arena_alloc_pages() of the page at {addr:#x} failed"
    );
    rig.state.arm(0);
    // The first touch maps the page.
    rig.m.write_u64(page * PAGE, magic);
    let read = thread::scope(|s| {
        let reader = s.spawn(|| held_read(&rig.state, addr, cpus[0], magic));
        if wait_entered(&rig.state, &reader) {
            let r = run_on(&rig.free, addr, "running the free program");
            assert_eq!(r, 0, "the free program's return value");
        }
        reader.join().expect("the reading thread panicked")
    });
    let words = [ENTERED, FREED, RACED].map(|w| rig.state.word(w));
    Attempt { words, read }
}

/// T41: the free of an arena page runs whole between the fault handler's
/// unlock and the mapping of the page, which then maps a freed page
/// (eager, mainline) or undoes itself (0003 on: SIGSEGV).
pub fn t41_arena_free_races_a_fault(ctx: &Ctx) -> Result<(), Skip> {
    let cpus = two_cpus();
    pin_to(cpus[1]);
    let rig = Rig::new(ATTEMPTS);
    let mut seen = Vec::new();
    for page in 0..ATTEMPTS {
        let magic = MAGIC + page as u64;
        let a = attempt(&rig, page, magic, cpus);
        if a.raced() {
            check_raced(ctx, &rig, page, magic, a.read);
            return Ok(());
        }
        seen.push(format!("attempt {}: {}", page + 1, a.describe()));
    }
    panic!(
        "{ctx}: the race was never made: no free ran whole while a fault on \
         the page was held in {} (kprobes), so nothing was checked: {}",
        MAPPING_POINTS.join(" or "),
        seen.join("; ")
    );
}

/// After the race on arena page `page`, whose held read gave `first`:
/// whether the page is still mapped, and what a second read gives.
fn check_raced(ctx: &Ctx, rig: &Rig, page: usize, magic: u64, first: Result<u64, Caught>) {
    let addr = rig.m.addr() + page * PAGE;
    let present = !present_pages(addr, 1).is_empty();
    let second = catch::load_u64(addr);
    if ctx.kernel.arena_fault_returns_page() {
        assert_eq!(
            first,
            Ok(magic),
            "{ctx}: the read held in finish_fault() while the page was freed: \
             finish_fault() maps the page the handler returned, which the arena \
             no longer holds, so the read should see its {magic:#x}"
        );
        assert!(
            present && second == Ok(magic),
            "{ctx}: the freed page should stay mapped after the race (present: \
             {present}) and read {magic:#x} again without a fault, got {second:x?}"
        );
        return;
    }
    let why = "the handler finds the page it inserted freed and zaps it";
    expect_segv(
        first,
        addr,
        &format!(
            "{ctx}: the read held in vmf_insert_page_mkwrite() ({why}; the retry finds no page)"
        ),
    );
    assert!(
        !present,
        "{ctx}: the freed page is mapped after the race ({why})"
    );
    expect_segv(
        second,
        addr,
        &format!("{ctx}: a second read of the freed page (the arena has none)"),
    );
}

#[track_caller]
fn expect_segv(got: Result<u64, Caught>, addr: usize, what: &str) {
    assert!(
        matches!(got, Err(c) if c.signal == libc::SIGSEGV && c.addr == addr),
        "{what}: expected SIGSEGV at {addr:#x} (BPF_F_SEGV_ON_FAULT), got {got:x?}"
    );
}

#[cfg(test)]
mod unit {
    use super::*;

    const K: Kfuncs = Kfuncs {
        alloc: 101,
        free: 102,
        iter_new: 103,
        iter_next: 104,
        iter_destroy: 105,
    };

    /// Where jump `i` of `v` goes, if it is one (not a call or exit).
    fn target(v: &[Insn], i: usize) -> Option<usize> {
        let (class, op) = (v[i].code & 0x07, v[i].code & 0xf0);
        (class == 0x05 && op != 0x80 && op != 0x90)
            .then(|| (i as isize + 1 + v[i].off as isize) as usize)
    }

    fn kfunc_at(v: &[Insn], i: usize) -> u32 {
        assert_eq!(
            (v[i].code, v[i].src()),
            (0x85, asm::BPF_PSEUDO_KFUNC_CALL),
            "insn {i}"
        );
        v[i].imm as u32
    }

    #[test]
    fn the_spin_loop_jumps_where_it_should() {
        let v = hold_insns(7, &K);
        let n = v.len();
        // The closing return 0 and every jump inside the program.
        assert_eq!((v[n - 2], v[n - 1]), (asm::mov64_imm(R0, 0), asm::exit()));
        let jumps: Vec<(usize, usize)> = (0..n).filter_map(|i| Some((i, target(&v, i)?))).collect();
        assert!(jumps.iter().all(|&(_, t)| t < n), "{jumps:?}");
        // Not armed, or another thread: straight to the return.
        assert_eq!(jumps[0].1, n - 2);
        assert_eq!(jumps[1].1, n - 2);
        let destroy = n - 3;
        assert_eq!(kfunc_at(&v, destroy), K.iter_destroy);
        let next = (0..n)
            .find(|&i| v[i].code == 0x85 && v[i].imm == K.iter_next as i32)
            .unwrap();
        // The loop: back to the setup of iter_next; out to the destroy.
        let back = jumps.iter().find(|&&(i, t)| t < i).unwrap();
        assert_eq!(back.1, next - 2);
        let [(_, drained), (_, freed), (_, late)] = jumps[2..5].try_into().unwrap();
        assert_eq!((drained, late), (destroy - 2, destroy - 2));
        assert_eq!(v[freed], asm::st_mem(Size::W, R6, RACED, 1));
        assert_eq!(freed + 1, destroy - 2);
    }

    #[test]
    fn syscall_programs_pass_the_address_from_their_context() {
        for v in [alloc_insns(3, &K), free_insns(3, 4, &K)] {
            assert_eq!(v[0], asm::ldx_mem(Size::DW, R2, R1, 0));
            assert_eq!(
                (v[1].dst(), v[1].src(), v[1].imm),
                (R1, asm::BPF_PSEUDO_MAP_FD, 3)
            );
            assert_eq!(*v.last().unwrap(), asm::exit());
        }
        assert_eq!(kfunc_at(&alloc_insns(3, &K), 6), K.alloc);
        assert_eq!(kfunc_at(&free_insns(3, 4, &K), 4), K.free);
        let v = alloc_insns(3, &K);
        assert_eq!(target(&v, 9), Some(11));
    }
}
