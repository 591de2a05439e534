//! fail_page_alloc (debugfs), armed for the fuzzing thread alone: one
//! page allocation fails, after `pass` that succeed. Whether it fired is
//! read back from its `times` counter, never assumed: a fault that found
//! its page tables there allocates nothing.

use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

pub const FAIL_PAGE_ALLOC: &str = "/sys/kernel/debug/fail_page_alloc";

/// This thread's switch: while it reads 1, the thread's allocations are
/// subject to the injection (task-filter).
pub struct Injector {
    make_it_fail: fs::File,
}

fn knob(name: &str) -> String {
    format!("{FAIL_PAGE_ALLOC}/{name}")
}

fn set(name: &str, value: &str) -> io::Result<()> {
    fs::write(knob(name), value)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", knob(name))))
}

impl Injector {
    /// Whether the kernel has the injection (CONFIG_FAIL_PAGE_ALLOC and
    /// debugfs mounted).
    pub fn available() -> bool {
        Path::new(FAIL_PAGE_ALLOC).exists()
    }

    /// Sets fail_page_alloc up for this thread; nothing fails until
    /// [`Injector::armed`].
    pub fn new() -> io::Result<Injector> {
        for (name, value) in [
            ("times", "0"),
            ("task-filter", "Y"),
            ("probability", "100"),
            ("interval", "1"),
            // A report's stack trace would read as a splat in the log.
            ("verbose", "0"),
            ("min-order", "0"),
            // Page tables are GFP_KERNEL: sleeping allocations must fail.
            ("ignore-gfp-wait", "N"),
            ("ignore-gfp-highmem", "N"),
        ] {
            set(name, value)?;
        }
        let make_it_fail = fs::OpenOptions::new()
            .write(true)
            .open("/proc/thread-self/make-it-fail")?;
        Ok(Injector { make_it_fail })
    }

    /// Runs `f` with one allocation of this thread failing after `pass`
    /// that succeed; what `f` returned, and whether the failure fired.
    pub fn armed<T>(&self, pass: u32, f: impl FnOnce() -> T) -> io::Result<(T, bool)> {
        // Counted in pages (an order-0 allocation is 1): an allocation
        // passes while more than its size is left.
        set("space", &(pass + 1).to_string())?;
        set("times", "1")?;
        self.make_it_fail.write_at(b"1", 0)?;
        let out = f();
        self.make_it_fail.write_at(b"0", 0)?;
        let left = fs::read_to_string(knob("times"))?;
        set("times", "0")?;
        Ok((out, left.trim() == "0"))
    }
}
