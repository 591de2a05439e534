//! T35: a fault whose page tables cannot be allocated. fail_page_alloc
//! (debugfs), armed for this thread alone, fails one page allocation: the
//! page table that a window fill needs past a 2 MiB boundary, or the one
//! the faulting page itself needs. These are vm_insert_pages()'s errors
//! other than -EBUSY, which nothing else in the plan can reach.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;

use super::common::*;

const FAIL_PAGE_ALLOC: &str = "/sys/kernel/debug/fail_page_alloc";

/// One page allocation of this thread failing, after `pass` that succeed.
struct Injection {
    make_it_fail: File,
    times: File,
}

impl Injection {
    /// Sets fail_page_alloc up; nothing fails until [`Injection::armed`].
    fn new(pass: u32) -> Injection {
        for (knob, value) in [
            ("task-filter", "Y".to_string()),
            ("probability", "100".into()),
            ("interval", "1".into()),
            ("verbose", "0".into()),
            ("min-order", "0".into()),
            ("ignore-gfp-wait", "N".into()),
            ("ignore-gfp-highmem", "N".into()),
            // Counted in pages (an order-0 allocation is 1); an
            // allocation passes while more than its size is left.
            ("space", (pass + 1).to_string()),
            ("times", "1".into()),
        ] {
            let path = format!("{FAIL_PAGE_ALLOC}/{knob}");
            ok(
                fs::write(&path, value),
                &format!("writing {path} (CONFIG_FAIL_PAGE_ALLOC?)"),
            );
        }
        // Opened now: once armed, opening a file could be what fails.
        let open = |path: &str| {
            ok(
                fs::OpenOptions::new().read(true).write(true).open(path),
                &format!("opening {path}"),
            )
        };
        Injection {
            make_it_fail: open("/proc/thread-self/make-it-fail"),
            times: open(&format!("{FAIL_PAGE_ALLOC}/times")),
        }
    }

    /// Runs `f` with this thread's allocations subject to the injection;
    /// whether the failure was spent.
    fn armed<T>(&self, f: impl FnOnce() -> T) -> (T, bool) {
        ok(self.make_it_fail.write_at(b"1", 0), "arming make-it-fail");
        let out = f();
        ok(
            self.make_it_fail.write_at(b"0", 0),
            "disarming make-it-fail",
        );
        // debugfs attributes cannot seek: one read, then one write.
        let mut buf = [0u8; 16];
        let n = ok(
            (&self.times).read(&mut buf),
            "reading fail_page_alloc/times",
        );
        let left = String::from_utf8_lossy(&buf[..n]).trim().to_string();
        ok((&self.times).write(b"0"), "clearing fail_page_alloc/times");
        (out, left == "0")
    }
}

/// The map's pages 0..PAGES mapped so that map page 32 starts a new 2 MiB
/// region whose page table does not exist yet, while that of the region
/// before it does (an anonymous page there was written). 4 MiB-aligned,
/// so both regions share their upper page tables. Through a file of its
/// own, so that windows grow from a fresh record.
fn across_a_page_table(pm: &PagedMap) -> Mapping {
    const SPLIT: usize = 32;
    let (at, _) = ok(mm::reserve(4 * MIB, 4 * MIB), "reserving 4 MiB").leak();
    let anon = ok(
        mm::mmap(
            at,
            PAGE,
            RW,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            None,
            0,
        ),
        "an anonymous page in the first 2 MiB",
    );
    anon.write_u64(0, 1);
    anon.leak();
    let start = at + 2 * MIB - SPLIT * PAGE;
    let fd = ok(pm.own_file(), "a file of the map's own");
    ok(
        mm::mmap(
            start,
            PAGES * PAGE,
            RW,
            libc::MAP_SHARED | libc::MAP_FIXED,
            Some(fd.as_fd()),
            0,
        ),
        "the map across the 2 MiB boundary",
    )
}

/// Map pages in T35's mappings: lazy on both window kernels.
const PAGES: usize = POPULATE_PAGES + FAULT_WINDOW;

/// T35 (a 2 MiB boundary at map page 32). A: reading pages 24, 25 and 27
/// grows a window to 4 pages (27..30); reading page 31 asks for 8 while
/// the page table past the boundary cannot be allocated: the fill stops
/// at the failure, and 31 is mapped alone (W, A), the window it recorded
/// of 1 page, so that reading 32 then maps 32..33. On P and D no fault
/// reaches the boundary, and the failure stays armed. B: reading page 40
/// while its own page table cannot be allocated (the first allocation,
/// the core's pre-allocation, passes): the fault reports OOM, the core
/// retries it, and the read succeeds in one counted fault; the least of
/// three tries is compared, which rules out a stray fault of the test
/// itself.
pub fn t35_window_fill_page_table_failures(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(PAGES);
    pm.fill_all();
    let m = across_a_page_table(&pm);
    let present = |m: &Mapping| present_pages(m.addr(), PAGES);
    let grown = [24, 25, 27];
    for p in grown {
        check_page(&m, p, p, "growing a window up to the boundary");
    }
    let (_, spent) = Injection::new(0).armed(|| check_page(&m, 31, 31, "page 31, fill failing"));
    let reaches = ctx.kernel.fill() == Fill::Growing;
    let mut model = Filled::new(ctx.kernel, 0..PAGES);
    model.touch(&grown);
    if reaches {
        // The window's fill failed at 32: 31 alone, and so recorded.
        model.present.insert(31);
        model.record = Some(Record { start: 31, size: 1 });
        model.faults += 1;
    } else {
        model.touch(&[31]);
    }
    assert_pages(
        ctx,
        &present(&m),
        &model.pages(),
        "after reading page 31 with the page table past it failing",
    );
    // Only a window's fill reaches past page 31; elsewhere the failure
    // must stay armed, or the case would be another test.
    assert_eq!(
        spent, reaches,
        "{ctx}: the failing allocation of the page table past page 31 fired: {spent}, expected {reaches}"
    );
    for p in [32, 40] {
        check_page(&m, p, p, &format!("page {p} after the failure"));
        model.touch(&[p]);
        let what = format!("after reading page {p} as well");
        assert_pages(ctx, &present(&m), &model.pages(), &what);
    }

    let tries: Vec<(u64, bool)> = (0..3).map(|_| own_table_fails(ctx, &pm)).collect();
    let faults: Vec<u64> = tries.iter().map(|t| t.0).collect();
    let spent: Vec<bool> = tries.iter().map(|t| t.1).collect();
    // The handlers that insert pages themselves allocate the table past
    // the core's pre-allocation, so the failure reaches their error paths
    // every time. 0001's handler hands the page back to the core, which
    // uses its pre-allocated table; eager takes no fault. There the armed
    // failure may still be spent by an allocation the fault did not make
    // (a debug kernel's stack depot refills its pool in the thread that
    // needs it), so one try of three that leaves it armed is the proof.
    let own = matches!(
        ctx.kernel,
        Kernel::Direct | Kernel::Prefault | Kernel::Adaptive
    );
    let holds = if own {
        spent.iter().all(|&s| s)
    } else {
        spent.iter().any(|&s| !s)
    };
    assert!(
        holds,
        "{ctx}: the failing allocation of page 40's page table fired in the three tries: {spent:?}, expected {}",
        if own { "every time" } else { "not every time" }
    );
    let least = *faults.iter().min().expect("three tries");
    let want = ctx.pick(1, 0);
    assert_eq!(
        least,
        want,
        "{ctx}: minor faults to read page 40 while its page table fails once (three tries: {faults:?})"
    );
    Ok(())
}

/// Case B once, on a fresh mapping: the read's minor faults, and whether
/// the armed failure was spent.
fn own_table_fails(ctx: &Ctx, pm: &PagedMap) -> (u64, bool) {
    let m = across_a_page_table(pm);
    warm_up_fault_counting();
    let (faults, spent) = Injection::new(1).armed(|| faults_to_read(&m, &[40]));
    check_page(
        &m,
        40,
        40,
        &format!("{ctx}: page 40, its page table failing once"),
    );
    let got = present_pages(m.addr(), PAGES);
    assert_present_window(
        ctx,
        &got,
        &[40],
        "after reading page 40, its page table failing once",
    );
    (faults, spent)
}

/// What touching `touched` leaves present in a PAGES-page mapping at map
/// page 0, on this kernel.
#[track_caller]
fn assert_present_window(ctx: &Ctx, got: &[usize], touched: &[usize], what: &str) {
    assert_pages(ctx, got, &ctx.present_after(0..PAGES, touched), what);
}

/// The present map pages `got` are `want`, or a panic naming both as
/// ranges.
#[track_caller]
fn assert_pages(ctx: &Ctx, got: &[usize], want: &[usize], what: &str) {
    assert!(
        got == want,
        "{ctx}: {what}: present {}, expected {}",
        ranges(got),
        ranges(want)
    );
}
