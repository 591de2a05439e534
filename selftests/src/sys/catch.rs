//! A store or load that may fault, run in this very process: the SIGSEGV
//! or SIGBUS it raises is caught and the access skipped. The test then sees
//! both the signal and its own page tables as the fault left them (a
//! forked child's die with it).

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

/// What a caught store raised: the signal, its si_code, the address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caught {
    pub signal: i32,
    pub code: i32,
    pub addr: usize,
}

/// The store instruction, and where to go on instead of it.
static AT: AtomicUsize = AtomicUsize::new(0);
static RESUME: AtomicUsize = AtomicUsize::new(0);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
static CODE: AtomicI32 = AtomicI32::new(0);
static ADDR: AtomicUsize = AtomicUsize::new(0);
/// The handler and its statics are the process's: one store at a time.
static ONE: Mutex<()> = Mutex::new(());

const SIGNALS: [i32; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// si_code of a SIGSEGV for an access the mapping does not permit.
pub const SEGV_ACCERR: i32 = 2;

extern "C" fn on_fault(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: an SA_SIGINFO handler gets a valid siginfo and ucontext.
    unsafe {
        let gregs = &mut (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs;
        let rip = &mut gregs[libc::REG_RIP as usize];
        if *rip as usize != AT.load(SeqCst) {
            // Not our store: die of it as without the handler.
            libc::signal(sig, libc::SIG_DFL);
            return;
        }
        SIGNAL.store(sig, SeqCst);
        CODE.store((*info).si_code, SeqCst);
        ADDR.store((*info).si_addr() as usize, SeqCst);
        *rip = RESUME.load(SeqCst) as libc::greg_t;
    }
}

/// Runs `access` with the fault handler installed: the signal the
/// access raised, if any.
fn guarded(access: impl FnOnce()) -> Option<Caught> {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    SIGNAL.store(0, SeqCst);
    // SAFETY: sigaction is plain data; the handler only touches statics
    // and the ucontext the kernel hands it.
    let old = SIGNALS.map(|sig| unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        let handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) = on_fault;
        act.sa_sigaction = handler as usize;
        act.sa_flags = libc::SA_SIGINFO;
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(sig, &act, &mut old), 0, "sigaction({sig})");
        old
    });
    access();
    for (sig, old) in SIGNALS.iter().zip(&old) {
        // SAFETY: restoring the action saved above.
        unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
    }
    let signal = SIGNAL.load(SeqCst);
    (signal != 0).then(|| Caught {
        signal,
        code: CODE.load(SeqCst),
        addr: ADDR.load(SeqCst),
    })
}

/// Stores `val` at `addr`; the signal it raised, if any.
pub fn store_u64(addr: usize, val: u64) -> Option<Caught> {
    guarded(|| {
        // SAFETY: the store either lands at `addr`, which the caller
        // maps, or faults and the handler resumes after it; registers
        // are unchanged.
        unsafe {
            std::arch::asm!(
                "lea {t}, [rip + 3f]",
                "mov [{resume}], {t}",
                "lea {t}, [rip + 2f]",
                "mov [{at}], {t}",
                "2:",
                "mov qword ptr [{addr}], {val}",
                "3:",
                t = out(reg) _,
                resume = in(reg) RESUME.as_ptr(),
                at = in(reg) AT.as_ptr(),
                addr = in(reg) addr,
                val = in(reg) val,
                options(nostack),
            );
        }
    })
}

/// Loads the u64 at `addr`, or the signal the load raised.
pub fn load_u64(addr: usize) -> Result<u64, Caught> {
    let mut val: u64 = 0;
    let caught = guarded(|| {
        // SAFETY: as for `store_u64`: the load lands or is skipped, and
        // then `val` keeps its 0.
        unsafe {
            std::arch::asm!(
                "lea {t}, [rip + 3f]",
                "mov [{resume}], {t}",
                "lea {t}, [rip + 2f]",
                "mov [{at}], {t}",
                "2:",
                "mov {val}, qword ptr [{addr}]",
                "3:",
                t = out(reg) _,
                resume = in(reg) RESUME.as_ptr(),
                at = in(reg) AT.as_ptr(),
                addr = in(reg) addr,
                val = inout(reg) val,
                options(nostack),
            );
        }
    });
    match caught {
        None => Ok(val),
        Some(c) => Err(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_to_a_read_only_page_is_caught_and_skipped() {
        let m = crate::sys::mm::anon(4096, libc::PROT_READ).unwrap();
        let got = store_u64(m.addr() + 8, 7).expect("no signal");
        assert_eq!(got.signal, libc::SIGSEGV);
        assert_eq!(got.code, SEGV_ACCERR);
        assert_eq!(got.addr, m.addr() + 8);
        assert_eq!(m.read_u64(8), 0, "the store was not skipped");
    }

    #[test]
    fn a_load_from_a_prot_none_page_is_caught() {
        let m = crate::sys::mm::anon(4096, libc::PROT_NONE).unwrap();
        let got = load_u64(m.addr() + 16).unwrap_err();
        assert_eq!((got.signal, got.code), (libc::SIGSEGV, SEGV_ACCERR));
        let r = crate::sys::mm::anon(4096, libc::PROT_READ | libc::PROT_WRITE).unwrap();
        r.write_u64(8, 99);
        assert_eq!(load_u64(r.addr() + 8), Ok(99));
    }

    #[test]
    fn a_store_that_can_land_does() {
        let m = crate::sys::mm::anon(4096, libc::PROT_READ | libc::PROT_WRITE).unwrap();
        assert_eq!(store_u64(m.addr() + 16, 0x1234), None);
        assert_eq!(m.read_u64(16), 0x1234);
    }
}
