//! T35: a fault whose page tables cannot be allocated. fail_page_alloc
//! (debugfs), armed for this thread alone, fails one page allocation: the
//! page table that a window fill needs past a 2 MiB boundary, or the one
//! the faulting page itself needs. These are vm_insert_pages()'s errors
//! other than -EBUSY, which nothing else in the plan can reach. Its
//! arena twin fails the page table an arena page's fault needs, the one
//! error of the arena's own insert (0003).

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
    let at = two_page_tables();
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

/// A reserved (PROT_NONE) 4 MiB-aligned 4 MiB, the address returned, whose
/// first 2 MiB have their page table (an anonymous page there is written)
/// and whose second 2 MiB do not; both share their upper page tables.
fn two_page_tables() -> usize {
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
    at
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
    assert_spent(ctx, &spent, own, "page 40's page table");
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

/// Pages in T35's arena: one page table's worth, so that unmapping the
/// arena frees its page table.
const ARENA_PAGES: usize = 2 * MIB / PAGE;
/// The arena page T35 reads.
const ARENA_PAGE: usize = 40;

/// T35 for arena maps, three times: an arena page the arena holds (written
/// through a first mapping, which is then unmapped with its page table) is
/// read through a fresh mapping while its page table fails once (the
/// core's pre-allocation of it passes). From 0003 on (D, W, A) the
/// handler's insert allocates the table, fails, and the fault reports OOM:
/// the core retries it, one counted fault, the failure spent every time.
/// On U and P (7.3's arena) the handler returns the page and the core maps
/// it in its pre-allocated table: one fault, and the failure stays armed
/// in at least one try. Either way the read finds what was written.
pub fn t35_arena_page_table_failure(ctx: &Ctx) -> Result<(), Skip> {
    let (arena, at) = arena_alone_in_a_page_table();
    let tries: Vec<(u64, bool)> = (0..3)
        .map(|i| arena_table_fails(ctx, &arena, at, MAGIC + i))
        .collect();
    let faults: Vec<u64> = tries.iter().map(|t| t.0).collect();
    let spent: Vec<bool> = tries.iter().map(|t| t.1).collect();
    let own = !ctx.kernel.arena_fault_returns_page();
    assert_spent(
        ctx,
        &spent,
        own,
        &format!("arena page {ARENA_PAGE}'s page table"),
    );
    let least = *faults.iter().min().expect("three tries");
    assert_eq!(
        least, 1,
        "{ctx}: arena: minor faults to read page {ARENA_PAGE} while its page table fails once (three tries: {faults:?})"
    );
    Ok(())
}

/// What T35's arena tries write: the try's number is added.
const MAGIC: u64 = 0x7E35_A7E0_0000_0000;

/// A fresh arena of ARENA_PAGES and the 2 MiB-aligned address it is to be
/// mapped at, alone in its page table's range, with an anonymous page
/// written in the 2 MiB below it so that the upper page tables stay.
fn arena_alone_in_a_page_table() -> (Map, usize) {
    let at = two_page_tables() + 2 * MIB;
    ok(mm::munmap(at, 2 * MIB), "unmapping the arena's 2 MiB");
    let arena = ok(
        MapSpec {
            map_type: crate::sys::bpf::BPF_MAP_TYPE_ARENA,
            max_entries: ARENA_PAGES as u32,
            map_flags: crate::sys::bpf::BPF_F_MMAPABLE,
            ..Default::default()
        }
        .create(),
        "creating T35's arena",
    );
    (arena, at)
}

/// One try: `marker` written to ARENA_PAGE through a mapping that is then
/// unmapped, and read back through a fresh one while its page table fails
/// once; the read's minor faults, and whether the failure was spent.
fn arena_table_fails(ctx: &Ctx, arena: &Map, at: usize, marker: u64) -> (u64, bool) {
    let map_at = |flags| {
        ok(
            mm::mmap(
                at,
                ARENA_PAGES * PAGE,
                RW,
                libc::MAP_SHARED | flags,
                Some(arena.fd()),
                0,
            ),
            "mapping T35's arena at its address",
        )
    };
    // The address was unmapped for the arena: whatever might have taken
    // it meanwhile is refused, not replaced.
    let first = map_at(libc::MAP_FIXED_NOREPLACE);
    first.write_u64(ARENA_PAGE * PAGE, marker);
    // Unmapping frees the page table (nothing else maps its 2 MiB); the
    // arena keeps the page.
    drop(first);
    let m = map_at(libc::MAP_FIXED_NOREPLACE);
    warm_up_fault_counting();
    let (faults, spent) = Injection::new(1).armed(|| faults_to_read(&m, &[ARENA_PAGE]));
    assert_eq!(
        m.read_u64(ARENA_PAGE * PAGE),
        marker,
        "{ctx}: arena page {ARENA_PAGE} after a read while its page table failed"
    );
    let got = present_pages(m.addr(), ARENA_PAGES);
    assert_pages(
        ctx,
        &got,
        &[ARENA_PAGE],
        "arena: after reading a page while its page table failed once",
    );
    (faults, spent)
}

/// Whether an injected failure of `table` was spent (`spent`, per try) as
/// the kernel's handler says: every time where the handler inserts the
/// page itself (`own`), and not every time where the core maps it in the
/// table it pre-allocated (one try that leaves the failure armed proves
/// it; see T35 B).
#[track_caller]
fn assert_spent(ctx: &Ctx, spent: &[bool], own: bool, table: &str) {
    let holds = if own {
        spent.iter().all(|&s| s)
    } else {
        spent.iter().any(|&s| !s)
    };
    assert!(
        holds,
        "{ctx}: the failing allocation of {table} fired in the three tries: {spent:?}, expected {}",
        if own { "every time" } else { "not every time" }
    );
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
