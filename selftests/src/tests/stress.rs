//! T18-T20: concurrency and scale. Bounded by iteration counts and a few
//! seconds each, since the guest may run under TCG emulation.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use super::common::*;
use crate::child::{describe_status, waitpid};
use crate::kmsg::Kmsg;
use crate::proc;
use crate::sys::trace::PageFrees;

/// T18: 16 threads fault the same untouched page at once (read), then
/// another page (write): everybody sees the same data and exactly those
/// pages (P) or their window (W) become resident: racing window fills
/// step over the pages the others mapped.
pub fn t18_same_page_concurrent_faults(ctx: &Ctx) -> Result<(), Skip> {
    const THREADS: usize = 16;
    // Four windows: the prefault kernel must map the first one only.
    const PAGES: usize = 4 * FAULT_WINDOW;
    let pm = PagedMap::new(PAGES);
    pm.fill(7);
    let m = pm.map_rw();
    let barrier = Barrier::new(THREADS);
    let seen: Vec<thread::Result<u64>> = thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    m.read_u64(7 * PAGE + 8)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join()).collect()
    });
    for (t, v) in seen.into_iter().enumerate() {
        let v = v.expect("reader thread panicked");
        assert_eq!(
            v,
            pattern(7, 1),
            "thread {t}'s read of page 7 during concurrent first faults"
        );
    }
    assert_eq!(
        rss(m.addr()),
        ctx.rss_after(0..PAGES, &[7]),
        "{ctx}: Rss after 16 concurrent faults on one page"
    );

    thread::scope(|s| {
        for t in 0..THREADS {
            let (m, barrier) = (&m, &barrier);
            s.spawn(move || {
                barrier.wait();
                m.write_u64(9 * PAGE + t * 8, 0x9000 + t as u64);
            });
        }
    });
    let page9 = pm.lookup_page(9);
    for t in 0..THREADS {
        let got = u64::from_ne_bytes(page9[t * 8..t * 8 + 8].try_into().unwrap());
        assert_eq!(
            got,
            0x9000 + t as u64,
            "word {t} of page 9 after concurrent first writes"
        );
    }
    assert_eq!(
        present_pages(m.addr(), PAGES),
        ctx.present_after(0..PAGES, &[7, 9]),
        "{ctx}: present pages"
    );
    Ok(())
}

/// Pages of the map in T18's fault races.
const RACE_PAGES: usize = 64;
/// Reader threads in T18's fault races.
const READERS: usize = 4;
/// Reader r owns pages r*PER..(r+1)*PER.
const PER: usize = 8;
// Readers stop after MIN_ITERS once every background loop has done
// MIN_LOOPS rounds, or at the deadline, whichever is later/first.
const MIN_ITERS: u64 = 3000;
const MIN_LOOPS: u64 = 5;

/// T18: threads fault disjoint pages (read, write, read back) while others
/// loop MADV_DONTNEED, mmap+munmap, fork and UPDATE_ELEM on the same map.
/// Data must stay right; the runner checks dmesg afterwards; freeze must
/// succeed once everything is unmapped (open/close stayed balanced).
pub fn t18_fault_races(ctx: &Ctx) -> Result<(), Skip> {
    let pm = PagedMap::new(RACE_PAGES);
    pm.fill_all();
    let mapping = pm.map_rw();
    let m = &mapping;
    // On U a zapped page of `m` would SIGBUS the readers (no .fault): the
    // zapper works on a second mapping nobody reads instead.
    let zap_other = (!ctx.is_lazy()).then(|| ok(pm.mmap(RACE_PAGES, RW, 0), "second mapping"));
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(3);
    let hard_stop = deadline + Duration::from_secs(2);
    let counts: [AtomicU64; 4] = Default::default();
    // Everybody starts together, so the loops really overlap.
    let start = Barrier::new(READERS + 4);
    let race = FaultRace {
        start: &start,
        stop: &stop,
        counts: &counts,
        deadline,
        hard_stop,
    };
    let pm = &pm;
    let zap = zap_other.as_ref().unwrap_or(m);

    let iters: Vec<thread::Result<u64>> = thread::scope(|s| {
        let readers: Vec<_> = (0..READERS)
            .map(|r| s.spawn(move || fault_race_reader(race, r, m)))
            .collect();
        s.spawn(move || dontneed_loop(race, zap, &race.counts[0]));
        s.spawn(move || mmap_munmap_loop(race, pm, &race.counts[1]));
        s.spawn(move || fork_reader_loop(race, m, &race.counts[2]));
        s.spawn(move || update_elem_loop(race, pm, &race.counts[3]));
        let iters = readers.into_iter().map(|h| h.join()).collect();
        stop.store(true, Ordering::Relaxed);
        iters
    });

    check_fault_race_results(pm, iters, &counts);
    drop(zap_other);
    drop(mapping);
    ok(
        pm.map.freeze(),
        "BPF_MAP_FREEZE after all mappings are gone",
    );
    Ok(())
}

/// What T18's racing threads share: the common start, the stop flag, one
/// round counter per background loop (dontneed, mmap, fork, update) and
/// the two time limits.
#[derive(Clone, Copy)]
struct FaultRace<'a> {
    start: &'a Barrier,
    stop: &'a AtomicBool,
    counts: &'a [AtomicU64; 4],
    /// The readers stop here at the latest.
    deadline: Instant,
    /// The background loops stop here even if the stop flag never comes.
    hard_stop: Instant,
}

impl FaultRace<'_> {
    /// Whether the background loops go on.
    fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && Instant::now() < self.hard_stop
    }

    /// Whether every background loop has done its MIN_LOOPS rounds.
    fn background_done(&self) -> bool {
        self.counts
            .iter()
            .all(|c| c.load(Ordering::Relaxed) >= MIN_LOOPS)
    }
}

/// Reader `r`: reads, writes and reads back its own pages until the race
/// is over; returns the number of iterations.
fn fault_race_reader(race: FaultRace, r: usize, m: &Mapping) -> u64 {
    let mut it = 0u64;
    race.start.wait();
    while (it < MIN_ITERS || !race.background_done()) && Instant::now() < race.deadline {
        for p in r * PER..(r + 1) * PER {
            assert_eq!(
                m.read_u64(p * PAGE),
                pattern(p, 0),
                "reader {r}: page {p} word 0, iteration {it}"
            );
            m.write_u64(p * PAGE + 8, it);
            assert_eq!(
                m.read_u64(p * PAGE + 8),
                it,
                "reader {r}: page {p} read-back, iteration {it}"
            );
        }
        it += 1;
    }
    it
}

/// Zaps all of `zap` with MADV_DONTNEED, round after round.
fn dontneed_loop(race: FaultRace, zap: &Mapping, rounds: &AtomicU64) {
    race.start.wait();
    while race.running() {
        ok(
            mm::madvise(zap.addr(), zap.len(), libc::MADV_DONTNEED),
            "MADV_DONTNEED",
        );
        rounds.fetch_add(1, Ordering::Relaxed);
        thread::yield_now();
    }
}

/// Maps the whole map read-only, checks a few pages and unmaps it again.
fn mmap_munmap_loop(race: FaultRace, pm: &PagedMap, rounds: &AtomicU64) {
    race.start.wait();
    while race.running() {
        let t = ok(pm.mmap(RACE_PAGES, RO, 0), "mmap in the mapper thread");
        for p in [32, 45, RACE_PAGES - 1] {
            assert_eq!(t.read_u64(p * PAGE), pattern(p, 0), "mapper: page {p}");
        }
        drop(t);
        rounds.fetch_add(1, Ordering::Relaxed);
    }
}

/// Forks children that read page 33 of `m` and exit with the verdict.
fn fork_reader_loop(race: FaultRace, m: &Mapping, rounds: &AtomicU64) {
    let addr = m.addr() + 33 * PAGE;
    let want = pattern(33, 0);
    race.start.wait();
    while race.running() {
        // SAFETY: the child of a multi-threaded process only loads
        // one word and _exit()s: no locks, no allocation.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let v = unsafe { mm::peek(addr) };
            unsafe { libc::_exit(i32::from(v != want)) };
        }
        assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
        let st = waitpid(pid);
        assert!(
            st == 0,
            "fork child reading page 33: {} (exit 1 = wrong data)",
            describe_status(st)
        );
        rounds.fetch_add(1, Ordering::Relaxed);
    }
}

/// Rewrites the upper half of the map with UPDATE_ELEM, a new round
/// number in word 1 each time.
fn update_elem_loop(race: FaultRace, pm: &PagedMap, rounds: &AtomicU64) {
    let mut images: Vec<Vec<u8>> = (RACE_PAGES / 2..RACE_PAGES).map(page_image).collect();
    let mut n = 0u64;
    race.start.wait();
    while race.running() {
        n += 1;
        for (i, img) in images.iter_mut().enumerate() {
            img[8..16].copy_from_slice(&n.to_ne_bytes());
            ok(
                pm.map.update_idx((RACE_PAGES / 2 + i) as u32, img),
                "UPDATE_ELEM in the updater thread",
            );
        }
        rounds.fetch_add(1, Ordering::Relaxed);
    }
}

/// Prints the background loops' rounds, then checks that every reader
/// made progress with its last writes in the map, and that every
/// background loop ran.
fn check_fault_race_results(pm: &PagedMap, iters: Vec<thread::Result<u64>>, counts: &[AtomicU64]) {
    let loops: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    println!("[selftests] t18: background loops (dontneed, mmap, fork, update) = {loops:?}");
    for (r, it) in iters.into_iter().enumerate() {
        let it = it.expect("reader thread panicked");
        assert!(it > 0, "reader {r} made no progress");
        for p in r * PER..(r + 1) * PER {
            assert_eq!(
                pm.lookup_word(p, 1),
                it - 1,
                "LOOKUP_ELEM of reader {r}'s last write to page {p}"
            );
            assert_eq!(
                pm.lookup_word(p, 0),
                pattern(p, 0),
                "page {p} word 0 after the races"
            );
        }
    }
    for (name, n) in ["madvise", "mmap", "fork", "update"].iter().zip(&loops) {
        assert!(*n > 0, "the {name} thread never ran");
    }
}

/// T19: 50 rounds of create 64 MiB map, touch every page, destroy: memory
/// comes back (MemAvailable within a few MiB of its baseline).
pub fn t19_no_leak_after_many_maps(_ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 64 * MIB / PAGE;
    const ROUNDS: usize = 50;
    const WARMUP: usize = 5;
    // Noise allowed below the baseline, measured as MemAvailable plus the
    // free pages parked on per-CPU lists (100-240 MiB of them after the
    // rounds, varying from run to run: without them MemAvailable drifted
    // by up to 29 MiB). Counted so, the drift is under 1 MiB on the normal
    // and the debug kernel; debug kernels keep more slack for KASAN's
    // lazily freed vmalloc shadow. A leak of the map's pages would be
    // 64 MiB per round, 3.2 GiB in all.
    let slack_kb: u64 = if is_debug_kernel() {
        16 * 1024
    } else {
        8 * 1024
    };
    let round = || {
        let map = ok(
            MapSpec::mmapable_array(PAGE as u32, PAGES as u32).create(),
            "creating a 64 MiB map",
        );
        let m = ok(
            mm::map_shared(map.fd(), PAGES * PAGE, RW, 0),
            "mmap of 64 MiB",
        );
        for p in 0..PAGES {
            m.write_u8(p * PAGE, 1);
        }
    };
    // Warm up before the baseline: slab caches, per-cpu lists, and the
    // kernel's vmalloc address space, whose page tables (and KASAN shadow)
    // grow until lazily freed areas get purged and reused. Then let the
    // deferred frees finish.
    let t0 = Instant::now();
    for _ in 0..WARMUP {
        round();
    }
    let base = settled_mem_available();
    let t1 = Instant::now();
    for _ in 0..ROUNDS {
        round();
    }
    let t2 = Instant::now();
    // Maps are freed from a workqueue: give it time to catch up.
    let deadline = t2 + Duration::from_secs(30);
    let now = loop {
        let now = available_kb();
        if now + slack_kb >= base {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "free memory (MemAvailable + per-CPU lists) did not recover after {ROUNDS} x 64 MiB maps: baseline {base} kB, now {now} kB ({} kB missing)",
            base - now
        );
        thread::sleep(Duration::from_millis(100));
    };
    let recovery = t2.elapsed();
    println!(
        "[selftests] t19: warm-up {} ms, {ROUNDS} rounds {} ms, recovery {} ms; free (MemAvailable + per-CPU lists) {base} kB -> {now} kB, settled {} kB (slack {slack_kb} kB)",
        (t1 - t0).as_millis(),
        (t2 - t1).as_millis(),
        recovery.as_millis(),
        settled_mem_available()
    );
    Ok(())
}

/// T19, to the page: every page an array map and an arena held goes back
/// to the page allocator once the map and its mapping are gone, each seen
/// freed by the kmem:mm_page_free event. T19's count of free memory keeps
/// megabytes of slack; a fault handler that takes a page reference and
/// never drops it leaks one page a fault, which only this sees.
pub fn t19_every_page_freed(_ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 1024;
    let array = ok(
        MapSpec::mmapable_array(PAGE as u32, PAGES as u32).create(),
        "creating a 4 MiB array map",
    );
    let m = ok(
        mm::map_shared(array.fd(), PAGES * PAGE, RW, 0),
        "mmap of the array map",
    );
    every_page_freed("array map", PAGES, (array, m));
    every_page_freed("arena", PAGES, arena_mapping(PAGES));
    Ok(())
}

/// Touches each of `pages` pages of `m`, notes their page frame numbers,
/// destroys the map and its mapping, and fails naming the pages that
/// never came back to the page allocator.
fn every_page_freed(what: &str, pages: usize, (map, m): (Map, Mapping)) {
    for p in 0..pages {
        m.write_u8(p * PAGE, 1);
    }
    let entries = ok(proc::pagemap(m.addr(), pages), "reading /proc/self/pagemap");
    let pfns: Vec<u64> = entries.iter().map(|e| e.pfn).collect();
    assert!(
        entries.iter().all(|e| e.present && e.pfn != 0),
        "{what}: pagemap shows a touched page without its frame (not root?)"
    );
    let frees = ok(PageFrees::start(), "tracing kmem:mm_page_free");
    drop(m);
    drop(map);
    // The map is freed from a workqueue, after an RCU grace period.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let freed = ok(frees.freed(), "reading the trace");
        let kept: Vec<u64> = pfns
            .iter()
            .copied()
            .filter(|p| !freed.contains(p))
            .collect();
        if kept.is_empty() {
            println!("[selftests] t19: {what}: all {pages} pages freed with it");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {} of its {pages} pages never went back to the page allocator after the map was destroyed (pfn {:#x} the first): a page reference taken and never dropped",
            kept.len(),
            kept[0]
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// KASAN or lockdep kernel (the harness's `--debug` variant).
fn is_debug_kernel() -> bool {
    std::path::Path::new("/proc/lockdep").exists()
        || Kmsg::open_from_start()
            .map(|mut k| {
                k.read_new()
                    .iter()
                    .any(|m| m.contains("KernelAddressSanitizer"))
            })
            .unwrap_or(false)
}

/// MemAvailable once it stops moving (two readings 200 ms apart within
/// 512 kB), at most after 30 s.
/// MemAvailable plus the free pages on the per-CPU lists, which a burst
/// of frees leaves there (MemAvailable does not count them).
fn available_kb() -> u64 {
    let pcp = ok(guest_common::proc::pcp_free_kb(), "per-CPU free pages");
    ok(proc::mem_available_kb(), "MemAvailable") + pcp
}

fn settled_mem_available() -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = available_kb();
    loop {
        thread::sleep(Duration::from_millis(200));
        let now = available_kb();
        if now.abs_diff(last) < 512 || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// T20: a 1 GiB map: mmap() is fast and maps nothing (P) / everything (U);
/// then 32 mappings of it at once.
pub fn t20_huge_map_lazy(ctx: &Ctx) -> Result<(), Skip> {
    const PAGES: usize = 1024 * MIB / PAGE;
    const MAPPINGS: usize = 32;
    // The VM has 4 GiB; the 1 GiB map and its page tables must fit easily.
    let total_kb = ok(proc::meminfo_kb("MemTotal"), "MemTotal");
    assert!(
        total_kb >= 2560 * 1024,
        "T20 needs ~3 GiB of guest RAM (the VM is booted with 4 GiB), MemTotal is {total_kb} kB"
    );
    let pm = PagedMap::new(PAGES);
    let window = 32 * MIB / PAGE; // pages per mapping on U, see below
    let probe = |i: usize| i * window + 5;
    for p in [0, PAGES / 2, PAGES - 1]
        .into_iter()
        .chain((0..MAPPINGS).map(probe))
    {
        pm.fill(p);
    }

    let t0 = Instant::now();
    let m = pm.map_rw();
    let took = t0.elapsed();
    println!(
        "[selftests] t20: mmap of 1 GiB took {} us on the {ctx}",
        took.as_micros()
    );
    if ctx.is_lazy() {
        // O(1) mmap: generous even under TCG; the eager path inserts 262144 PTEs.
        assert!(
            took < Duration::from_millis(200),
            "{ctx}: mmap of a 1 GiB map took {took:?}"
        );
    }
    assert_eq!(
        rss(m.addr()),
        ctx.pick(0, m.len() as u64),
        "{ctx}: Rss of an untouched 1 GiB mapping"
    );
    for p in [0, PAGES / 2, PAGES - 1] {
        check_page(&m, p, p, "1 GiB mapping");
    }
    drop(m);
    many_mappings(ctx, &pm, window, MAPPINGS);
    Ok(())
}

/// T20's second half: `mappings` mappings of `pm` at once, of the whole
/// map on P and W; on U each would insert 262144 PTEs (far too slow under
/// TCG), so U maps a `window`-page part of each, covering the map once.
/// One page read through each: Rss, then the page tables they cost.
fn many_mappings(ctx: &Ctx, pm: &PagedMap, window: usize, mappings: usize) {
    let pages = pm.pages;
    let probe = |i: usize| i * window + 5;
    let pte_before = ok(proc::vm_pte_kb(), "VmPTE");
    let maps: Vec<Mapping> = (0..mappings)
        .map(|i| match ctx.kernel {
            Kernel::Mainline | Kernel::Direct | Kernel::Prefault | Kernel::Adaptive => pm.map_rw(),
            Kernel::Eager => ok(pm.mmap(window, RW, i * window), "32 MiB window"),
        })
        .collect();
    for (i, mp) in maps.iter().enumerate() {
        assert_eq!(
            rss(mp.addr()),
            ctx.pick(0, mp.len() as u64),
            "{ctx}: Rss of mapping {i} of {mappings}"
        );
        let at = ctx.pick(probe(i), 5);
        check_page(mp, at, probe(i), &format!("mapping {i}"));
        // The page read, its window or the whole 32 MiB: per kernel.
        let vma = ctx.pick(0..pages, i * window..(i + 1) * window);
        let want = ctx.present_after(vma, &[probe(i)]).len() * PAGE;
        assert_eq!(
            rss(mp.addr()),
            want as u64,
            "{ctx}: Rss of mapping {i} after reading map page {}",
            probe(i)
        );
    }
    let pte_kb = ok(proc::vm_pte_kb(), "VmPTE") - pte_before;
    println!("[selftests] t20: {mappings} mappings cost {pte_kb} kB of page tables on the {ctx}");
    match ctx.kernel {
        // One touched page (or window) per mapping: a PTE page plus upper
        // levels each.
        Kernel::Mainline | Kernel::Direct | Kernel::Prefault | Kernel::Adaptive => assert!(
            pte_kb < 1024,
            "{ctx}: {mappings} lazily populated mappings use {pte_kb} kB of page tables"
        ),
        // 1 GiB worth of PTEs: 2 MiB of PTE pages.
        Kernel::Eager => assert!(
            pte_kb >= 2048,
            "{ctx}: eagerly populated windows use only {pte_kb} kB of page tables"
        ),
    }
}
