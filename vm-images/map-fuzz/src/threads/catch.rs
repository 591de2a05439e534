//! A load or store that may fault, from several threads at once: the
//! SIGSEGV or SIGBUS it raises is caught and the access skipped.
//! `selftests::sys::catch` keeps where to resume in statics behind one
//! lock, which would let only one fault happen at a time; here each
//! thread keeps its own (thread-local cells, read by the handler, which
//! runs on the faulting thread), so faults race as the kernel sees them.

use std::cell::Cell;

thread_local! {
    /// The access instruction, and where to go on instead of it.
    static AT: Cell<usize> = const { Cell::new(0) };
    static RESUME: Cell<usize> = const { Cell::new(0) };
    static SIGNAL: Cell<i32> = const { Cell::new(0) };
}

const SIGNALS: [i32; 2] = [libc::SIGSEGV, libc::SIGBUS];

extern "C" fn on_fault(sig: i32, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: an SA_SIGINFO handler gets a valid ucontext; the cells are
    // const-initialised thread-locals without destructors, plain memory.
    unsafe {
        let gregs = &mut (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs;
        let rip = &mut gregs[libc::REG_RIP as usize];
        if *rip as usize != AT.with(Cell::get) {
            // Not our access: die of it as without the handler.
            libc::signal(sig, libc::SIG_DFL);
            return;
        }
        SIGNAL.with(|s| s.set(sig));
        *rip = RESUME.with(Cell::get) as libc::greg_t;
    }
}

/// The handler installed for the process while it lives; the actions
/// before it are put back on drop.
pub struct Installed {
    old: [libc::sigaction; 2],
}

impl Installed {
    pub fn new() -> Installed {
        // SAFETY: sigaction is plain data; the handler touches only its
        // thread's cells and the ucontext the kernel hands it.
        let old = SIGNALS.map(|sig| unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            let handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) = on_fault;
            act.sa_sigaction = handler as usize;
            act.sa_flags = libc::SA_SIGINFO;
            let mut old: libc::sigaction = std::mem::zeroed();
            assert_eq!(libc::sigaction(sig, &act, &mut old), 0, "sigaction({sig})");
            old
        });
        Installed { old }
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        for (sig, old) in SIGNALS.iter().zip(&self.old) {
            // SAFETY: restoring the action saved in `new`.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
    }
}

/// Runs `access` with this thread's cells for where the access is and
/// where to resume; what it returned, or the signal it raised.
fn caught<T>(access: impl FnOnce(*mut usize, *mut usize) -> T) -> Result<T, i32> {
    SIGNAL.with(|s| s.set(0));
    let out = access(AT.with(Cell::as_ptr), RESUME.with(Cell::as_ptr));
    match SIGNAL.with(Cell::get) {
        0 => Ok(out),
        sig => Err(sig),
    }
}

/// Loads the u64 at `addr` (with the handler installed), or the signal.
pub fn load(addr: usize) -> Result<u64, i32> {
    caught(|at, resume| {
        let mut val: u64 = 0;
        // SAFETY: the load lands, or faults and the handler resumes after
        // it with `val` as it was; the cells are this thread's.
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
                resume = in(reg) resume,
                at = in(reg) at,
                addr = in(reg) addr,
                val = inout(reg) val,
                options(nostack),
            );
        }
        val
    })
}

/// Stores `val` at `addr` (with the handler installed); the signal, if any.
pub fn store(addr: usize, val: u64) -> Result<(), i32> {
    caught(|at, resume| {
        // SAFETY: as for `load`: the store lands or is skipped.
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
                resume = in(reg) resume,
                at = in(reg) at,
                addr = in(reg) addr,
                val = in(reg) val,
                options(nostack),
            );
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One thread faults on every access while the other never does, for
    /// a while long enough that they overlap many times: state shared
    /// between them (one cell for the signal, or for where to resume)
    /// shows as a fault on the clean thread or none on the faulting one,
    /// or kills the process.
    #[test]
    fn faults_of_two_threads_at_once_are_each_caught() {
        let _handler = Installed::new();
        let none = selftests::sys::mm::anon(4096, libc::PROT_NONE).unwrap();
        let rw = selftests::sys::mm::anon(4096, libc::PROT_READ | libc::PROT_WRITE).unwrap();
        let ro = selftests::sys::mm::anon(4096, libc::PROT_READ).unwrap();
        let (a, b, c) = (none.addr(), rw.addr(), ro.addr());
        let start = std::sync::Barrier::new(2);
        let done = std::sync::atomic::AtomicBool::new(false);
        let stop = || done.load(std::sync::atomic::Ordering::Relaxed);
        std::thread::scope(|s| {
            let faulting = s.spawn(|| {
                start.wait();
                let mut i = 0u64;
                while !stop() {
                    if load(a) != Err(libc::SIGSEGV) || store(c, i).is_ok() {
                        return false;
                    }
                    i += 1;
                }
                true
            });
            start.wait();
            let until = std::time::Instant::now() + std::time::Duration::from_millis(500);
            let mut i = 0u64;
            let mut clean = true;
            while clean && std::time::Instant::now() < until {
                clean = store(b, i).is_ok() && load(b) == Ok(i);
                i += 1;
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            assert!(clean, "a clean access saw another thread's fault");
            assert!(faulting.join().unwrap(), "a fault went uncaught or unseen");
        });
        assert_eq!(load(c), Ok(0), "the stores were skipped");
    }
}
