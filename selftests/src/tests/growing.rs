//! T36-T38: the growing window (patch 0004, kernel A), whose only state is
//! the page table: a fault maps one page more than the mapped run next to
//! it, up to FAULT_WINDOW. Every kernel holds the presence model's exact
//! expectations (`runner::model`): for access sequences that change
//! direction and density, for two mappings of one map used in turn, across
//! fork and mremap; concurrent sweeps check contents and the log.

use std::ops::Range;
use std::sync::Barrier;
use std::thread;

use super::common::*;
use crate::runner::Filled;

/// A mapping of map pages `vma`, read page by page in `order` (map
/// pages): its present pages and minor faults against the model's.
fn read_in_order(ctx: &Ctx, pm: &PagedMap, vma: Range<usize>, order: &[usize], what: &str) {
    let m = ok(pm.mmap(vma.len(), RW, vma.start), what);
    let at: Vec<usize> = order.iter().map(|p| p - vma.start).collect();
    warm_up_fault_counting();
    let faults = faults_to_read(&m, &at) as usize;
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
        check_page(&m, p - vma.start, p, &format!("{ctx}: {what}: page {p}"));
    }
}

/// T36 (W is the window): a 4W-page map read through fresh mappings in
/// eight orders. Sequential from 0 to 40, then every 8th page of 100..164,
/// then sequential from 200 to the end: A's window grows, falls back to
/// one page, and grows again from 1. A reverse sweep grows it downwards;
/// a stride of 2 never grows it. A sweep from the middle upwards, then
/// from the middle downwards, meets the first sweep's run.
pub fn t36_growing_window_sequences(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 4 * FAULT_WINDOW;
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
    // 10..13 and 15 mapped, then 14: the run below ends at 12, short of
    // 14, and is no run; the run above (15) grows the window down to 13.
    let short = [10, 11, 15, 14];
    read_in_order(ctx, &pm, all, &short, "a run below that stops short");
    Ok(())
}

/// T37: the window's state lives in each mapping's page table. Two
/// mappings of one map read in turn each fill as if alone. A fork child
/// continues the parent's sweep from the page tables it inherited, and the
/// parent's stay as they were. A sweep continues through a mapping moved
/// by mremap() as if it had not moved.
pub fn t37_growing_window_state_is_the_page_table(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(T37_PAGES);
    pm.fill_all();
    two_mappings_in_turn(ctx, &pm);
    fork_child_continues(ctx, &pm);
    moved_mapping_continues(ctx, &pm);
    Ok(())
}

const T37_PAGES: usize = 2 * FAULT_WINDOW;

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

/// Two mappings of the map, read in turn, 10 pages at a time.
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

/// Fork: the child goes on where the parent stopped.
fn fork_child_continues(ctx: &Ctx, pm: &PagedMap) {
    let m = pm.map_rw();
    let first: Vec<usize> = T37_FIRST.collect();
    std::hint::black_box(touch_pages(&m, &first));
    let parent = present_pages(m.addr(), T37_PAGES);
    let then: Vec<usize> = T37_THEN.collect();
    let child_want = ctx.present_after_from(0..T37_PAGES, &parent, &then);
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
