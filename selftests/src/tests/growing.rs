//! T36-T38, T40: the growing window (patch 0004, kernels W and A), whose
//! only state is the map file's record of the last window: a fault right
//! above it maps up to twice its pages upwards, one right below it as many
//! downwards, up to FAULT_WINDOW, and any other fault its own page. Every
//! kernel holds the presence model's exact expectations
//! (`runner::model`): for access sequences that change direction and
//! density, for two mappings used in turn, across fork and mremap;
//! concurrent sweeps check contents and the log. The maps are larger
//! than adaptive populates at mmap(), so that both window kernels fault.

use std::ops::Range;
use std::sync::Barrier;
use std::thread;

use super::common::*;
use crate::runner::Filled;

/// A mapping of map pages `vma`, read page by page in `order` (map
/// pages): its present pages and minor faults against the model's.
fn read_in_order(ctx: &Ctx, pm: &PagedMap, vma: Range<usize>, order: &[usize], what: &str) {
    let m = ok(pm.mmap(vma.len(), RW, vma.start), what);
    read_mapping_in_order(ctx, &m, vma, order, what);
}

/// The same through `m`, a fresh mapping of map pages `vma`.
fn read_mapping_in_order(ctx: &Ctx, m: &Mapping, vma: Range<usize>, order: &[usize], what: &str) {
    let at: Vec<usize> = order.iter().map(|p| p - vma.start).collect();
    warm_up_fault_counting();
    let faults = faults_to_read(m, &at) as usize;
    let mut model = Filled::new(ctx.kernel, vma.clone());
    model.touch(order);
    assert!(
        faults == model.faults,
        "{ctx}: {what}: {faults} minor faults, expected {}",
        model.faults
    );
    assert_present(
        &present_map_pages(m.addr(), vma.len(), vma.start),
        &model.pages(),
        &format!("{ctx}: {what}"),
    );
    for &p in order.iter().step_by(7) {
        check_page(m, p - vma.start, p, &format!("{ctx}: {what}: page {p}"));
    }
}

/// T36 (W is the window, P the largest mapping A populates): a
/// (P+W)-page map read through fresh mappings in eight orders.
/// Sequential from 0 to 40, then every 8th page of 100..164, then
/// sequential from 200 to the end: the window grows, falls back to one
/// page, and grows again from 1. A reverse sweep grows it downwards; a
/// stride of 2 never grows it. A sweep from the middle upwards, then from
/// the middle downwards, grows again from 1 page. Maps of 1, 16, P and
/// P+1 pages read whole take the faults measured for each kernel.
pub fn t36_growing_window_sequences(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = POPULATE_PAGES + FAULT_WINDOW;
    let pm = PagedMap::new(PAGES);
    pm.fill_all();
    let mixed: Vec<usize> = (0..40)
        .chain((100..164).step_by(8))
        .chain(200..PAGES)
        .collect();
    let all = 0..PAGES;
    read_in_order(
        ctx,
        &pm,
        all.clone(),
        &mixed,
        "sequential, sparse, sequential",
    );
    let reverse: Vec<usize> = (0..PAGES).rev().collect();
    read_in_order(ctx, &pm, all.clone(), &reverse, "reverse sweep");
    // The first three windows of a reverse sweep: 1, 2 and 4 pages.
    let last = PAGES - 1;
    let begun = [last, last - 1, last - 3];
    read_in_order(ctx, &pm, all.clone(), &begun, "reverse sweep begun");
    // Downwards to the start of a mapping at map page 5: the window
    // stops at the VMA's first page, not at the map's.
    let from5: Vec<usize> = (5..40).rev().collect();
    read_in_order(
        ctx,
        &pm,
        5..40,
        &from5,
        "reverse sweep of a mapping at map page 5",
    );
    let stride: Vec<usize> = (0..PAGES).step_by(2).collect();
    read_in_order(ctx, &pm, all.clone(), &stride, "stride of 2 pages");
    let middle = PAGES / 2;
    let outwards: Vec<usize> = (middle..middle + 20).chain((0..middle).rev()).collect();
    read_in_order(
        ctx,
        &pm,
        all.clone(),
        &outwards,
        "up from the middle, then down",
    );
    // 10, then 11..12; 15 alone, then 14 right below it grows the
    // window down to 13.
    let turn = [10, 11, 15, 14];
    read_in_order(ctx, &pm, all, &turn, "up, then down from a lone fault");
    across_table_boundaries(ctx, &pm);
    small_maps_read_whole(ctx);
    Ok(())
}

/// T36's sweeps and lone faults across a pte table boundary.
fn across_table_boundaries(ctx: &Ctx, pm: &PagedMap) {
    // Sweeps across a pte table boundary: the upward one's windows fill
    // from the table below into the one at map page 15, the downward one's
    // from the table at map page 25 into the one below.
    let up = across_a_table(pm, 15);
    read_mapping_in_order(
        ctx,
        &up.0,
        0..pm.pages,
        &(0..40).collect::<Vec<_>>(),
        "up across a table boundary",
    );
    let down = across_a_table(pm, 25);
    read_mapping_in_order(
        ctx,
        &down.0,
        0..pm.pages,
        &(0..40).rev().collect::<Vec<_>>(),
        "down across a table boundary",
    );
    // Lone faults at a table's first pte, the table below never
    // allocated: page 15 alone maps itself; 16, then 15, grows the window
    // down to 14, in the table below, which the fill allocates.
    for order in [&[15][..], &[16, 15]] {
        let fresh = across_a_table(pm, 15);
        read_mapping_in_order(
            ctx,
            &fresh.0,
            0..pm.pages,
            order,
            &format!("{order:?} at a table's first pte, the table below missing"),
        );
    }
}

/// Maps of 1, 16, P and P+1 pages read whole, first page to last, where
/// the eager map takes no fault. The faults are held to the figures
/// measured, not only to the model: U none, P and D one per page, W a
/// window doubling from 1 to 64 pages, A none up to P pages (mmap()
/// populated them) and W's above.
fn small_maps_read_whole(ctx: &Ctx) {
    let p = POPULATE_PAGES;
    for (pages, growing, adaptive) in [(1, 1, 0), (16, 5, 0), (p, 10, 0), (p + 1, 10, 10)] {
        let pm = PagedMap::new(pages);
        pm.fill_all();
        let want = match ctx.kernel {
            Kernel::Eager => 0,
            Kernel::Mainline | Kernel::Direct => pages,
            Kernel::Prefault => growing,
            Kernel::Adaptive => adaptive,
        };
        let whole: Vec<usize> = (0..pages).collect();
        let model = ctx.faults_after(0..pages, &whole) as usize;
        assert!(
            model == want,
            "{ctx}: the model takes {model} faults to read a {pages}-page map whole, the measured figure is {want}"
        );
        read_in_order(
            ctx,
            &pm,
            0..pages,
            &whole,
            &format!("a {pages}-page map read whole"),
        );
    }
}

/// A fresh mapping of the whole map, through a file of its own, placed
/// so that map page `first` is the first of a pte table (its address 2
/// MiB aligned), and the reservation around it, unmapped after it.
fn across_a_table(pm: &PagedMap, first: usize) -> (Mapping, Mapping) {
    const TABLE: usize = 512 * PAGE;
    let around = ok(
        mm::reserve(2 * TABLE, TABLE),
        "reserving two pte tables' span",
    );
    let addr = around.addr() + TABLE - first * PAGE;
    let fd = ok(pm.own_file(), "a file of the map's own");
    let m = ok(
        mm::mmap(
            addr,
            pm.pages * PAGE,
            RW,
            libc::MAP_SHARED | libc::MAP_FIXED,
            Some(fd.as_fd()),
            0,
        ),
        "mapping the map across a pte table boundary",
    );
    (m, around)
}

/// T37: the window's state is the map file's record. Two mappings through
/// files of their own, read in turn, each fill as if alone; two through
/// one file, read in turn, share its record. A fork child continues the
/// parent's sweep from the record it shares, and the parent's pages stay
/// as they were. A sweep continues through a mapping moved by mremap()
/// as if it had not moved.
pub fn t37_growing_window_state_is_the_file_record(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(T37_PAGES);
    pm.fill_all();
    two_mappings_in_turn(ctx, &pm);
    two_mappings_of_one_file_in_turn(ctx, &pm);
    fork_child_continues(ctx, &pm);
    moved_mapping_continues(ctx, &pm);
    Ok(())
}

/// More than adaptive populates at mmap().
const T37_PAGES: usize = POPULATE_PAGES + FAULT_WINDOW;

/// Map pages 0..8, read before the fork or the move; 8..40, after it.
const T37_FIRST: std::ops::Range<usize> = 0..8;
const T37_THEN: std::ops::Range<usize> = 8..40;

#[track_caller]
fn assert_model(ctx: &Ctx, m: &Mapping, want: &[usize], what: &str) {
    assert_present(
        &present_pages(m.addr(), T37_PAGES),
        want,
        &format!("{ctx}: {what}"),
    );
}

/// Two mappings of the map through files of their own, read in turn, 10
/// pages at a time.
fn two_mappings_in_turn(ctx: &Ctx, pm: &PagedMap) {
    let (a, b) = (pm.map_rw(), pm.map_rw());
    let mut read = Vec::new();
    for chunk in [0..10, 10..20, 20..30] {
        let pages: Vec<usize> = chunk.collect();
        std::hint::black_box(touch_pages(&a, &pages));
        std::hint::black_box(touch_pages(&b, &pages));
        read.extend(pages);
        let want = ctx.present_after(0..T37_PAGES, &read);
        for (m, name) in [(&a, "first"), (&b, "second")] {
            let what = format!(
                "{name} of two mappings read in turn, after pages 0..{}",
                read.len()
            );
            assert_model(ctx, m, &want, &what);
        }
    }
}

/// Two mappings through one file, read in turn, 10 pages at a time: each
/// first fault of a turn meets the other's last window.
fn two_mappings_of_one_file_in_turn(ctx: &Ctx, pm: &PagedMap) {
    let len = T37_PAGES * PAGE;
    let a = ok(mm::map_shared(pm.map.fd(), len, RW, 0), "first mapping");
    let b = ok(mm::map_shared(pm.map.fd(), len, RW, 0), "second mapping");
    let mut models = [
        Filled::new(ctx.kernel, 0..T37_PAGES),
        Filled::new(ctx.kernel, 0..T37_PAGES),
    ];
    let mut record = None;
    for chunk in [0..10, 10..20, 20..30] {
        let pages: Vec<usize> = chunk.clone().collect();
        for (i, m) in [&a, &b].into_iter().enumerate() {
            std::hint::black_box(touch_pages(m, &pages));
            let model = &mut models[i];
            for &p in &pages {
                model.record = record;
                model.touch(&[p]);
                record = model.record;
            }
            let what = format!("mapping {i} of one file read in turn, after {chunk:?}");
            assert_model(ctx, m, &model.pages(), &what);
        }
    }
}

/// Fork: the child goes on where the parent stopped, from the record of
/// the file they share.
fn fork_child_continues(ctx: &Ctx, pm: &PagedMap) {
    let m = pm.map_rw();
    let first: Vec<usize> = T37_FIRST.collect();
    std::hint::black_box(touch_pages(&m, &first));
    let mut model = Filled::new(ctx.kernel, 0..T37_PAGES);
    model.touch(&first);
    let parent = present_pages(m.addr(), T37_PAGES);
    assert_model(ctx, &m, &model.pages(), "parent after reading pages 0..8");
    let then: Vec<usize> = T37_THEN.collect();
    let child_want = model.touch(&then).pages();
    run_in_child("fork child continuing the sweep", || {
        std::hint::black_box(touch_pages(&m, &then));
        assert_model(ctx, &m, &child_want, "child after reading pages 8..40");
    });
    assert_model(ctx, &m, &parent, "parent after the child's reads");
}

/// mremap: the moved mapping keeps its ptes and so its window.
fn moved_mapping_continues(ctx: &Ctx, pm: &PagedMap) {
    let m = pm.map_rw();
    let first: Vec<usize> = T37_FIRST.collect();
    std::hint::black_box(touch_pages(&m, &first));
    let (addr, len) = m.leak();
    let to = move_elsewhere(addr, len, "mremap of the mapping");
    // SAFETY: mremap() moved the mapping there; nothing else owns it.
    let moved = unsafe { mm::Mapping::from_raw(to, len) };
    let then: Vec<usize> = T37_THEN.collect();
    std::hint::black_box(touch_pages(&moved, &then));
    let all: Vec<usize> = T37_FIRST.chain(T37_THEN).collect();
    let want = ctx.present_after(0..T37_PAGES, &all);
    assert_model(
        ctx,
        &moved,
        &want,
        "moved mapping after reading pages 0..8 before the move and 8..40 after",
    );
    for p in [0, 7, 8, 39] {
        check_page(
            &moved,
            p,
            p,
            &format!("{ctx}: page {p} of the moved mapping"),
        );
    }
}

/// T38: four threads sweep one shared mapping of 8 MiB at once, two
/// upwards and two downwards from staggered pages, then each checks every
/// page: all present, each with its own data (the runner checks the log,
/// KASAN and lockdep on the debug kernel).
pub fn t38_growing_window_concurrent_sweeps(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 2048;
    const THREADS: usize = 4;
    let pm = PagedMap::new(PAGES);
    pm.fill_all();
    let m = pm.map_rw();
    let start = Barrier::new(THREADS);
    let (m, start) = (&m, &start);
    thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let from = t * PAGES / THREADS + 3;
                let order: Vec<usize> = if t % 2 == 0 {
                    (from..PAGES).chain(0..from).collect()
                } else {
                    (0..from).rev().chain((from..PAGES).rev()).collect()
                };
                start.wait();
                for &p in &order {
                    assert_eq!(
                        m.read_u64(p * PAGE),
                        pattern(p, 0),
                        "{ctx}: thread {t}: word 0 of page {p}"
                    );
                }
            });
        }
    });
    let got = present_pages(m.addr(), PAGES);
    assert_eq!(
        got.len(),
        PAGES,
        "{ctx}: after four concurrent sweeps: present {}",
        ranges(&got)
    );
    for p in (0..PAGES).step_by(97) {
        check_page_full(m, p, p, &format!("{ctx}: page {p} after the sweeps"));
    }
    Ok(())
}

/// T40: a hole refilled by a sweep, upwards or downwards, is filled up to
/// the run past it and no further. Through a (P+W)-page mapping, pages
/// 0..128 are read, then 40..80 zapped. Upwards, reading 40, 41, 43, 47,
/// 55 and 71 takes windows of 1, 2, 4, 8 and 16 pages and then 9 (of 32,
/// stopped short of 80) on W and A: 6 faults, and 0..128 present again.
/// Downwards, reading 79, 78, 76, 72, 64 and 48 takes 1, 2, 4, 8, 16 and
/// 9 pages (of 32, stopped short of 39). P and D take a fault per page,
/// 40 of them; U gets SIGBUS (its VMA has no fault handler). The counts
/// are written out here, and the model must agree with them.
pub fn t40_growing_window_fills_holes_in_place(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(POPULATE_PAGES + FAULT_WINDOW);
    pm.fill_all();
    let up: Vec<usize> = (40..80).collect();
    let down: Vec<usize> = (40..80).rev().collect();
    fill_hole(ctx, &pm, &up, "upwards from 40");
    fill_hole(ctx, &pm, &down, "downwards from 79");
    Ok(())
}

/// Reads pages 0..128 of a fresh mapping of `pm`, zaps 40..80 and reads
/// them again in `order`, page by page as a sweep would.
fn fill_hole(ctx: &Ctx, pm: &PagedMap, order: &[usize], what: &str) {
    const SWEPT: usize = 128;
    let m = pm.map_rw();
    let swept: Vec<usize> = (0..SWEPT).collect();
    std::hint::black_box(touch_pages(&m, &swept));
    ok(
        mm::madvise(m.addr() + 40 * PAGE, 40 * PAGE, libc::MADV_DONTNEED),
        "MADV_DONTNEED of pages 40..80",
    );
    let mut model = Filled::new(ctx.kernel, 0..pm.pages);
    model.touch(&swept);
    model.present.retain(|p| !(40..80).contains(p));
    let what = format!("{ctx}: {what}");
    assert_present(
        &present_map_pages(m.addr(), pm.pages, 0),
        &model.pages(),
        &format!("{what}: after the zap"),
    );
    if !ctx.is_lazy() {
        expect_signal("read of a zapped page", libc::SIGBUS, || {
            m.read_u64(40 * PAGE);
        });
        return;
    }
    warm_up_fault_counting();
    let faults = faults_to_read(&m, order) as usize;
    let before = model.faults;
    model.touch(order);
    let want = match ctx.kernel.fill() {
        Fill::Growing => 6,
        _ => 40,
    };
    assert_eq!(
        model.faults - before,
        want,
        "{what}: the model disagrees with the test"
    );
    assert_eq!(faults, want, "{what}: minor faults to read pages 40..80");
    assert_present(
        &present_map_pages(m.addr(), pm.pages, 0),
        &model.pages(),
        &what,
    );
    for p in order.iter().step_by(5) {
        check_page(&m, *p, *p, &format!("{what}: page {p}"));
    }
}
