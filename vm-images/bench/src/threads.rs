//! The 2- and 4-thread rows: threads of one process at once, each
//! mapping, touching and unmapping a mapping of its own, or all touching
//! their share of one mapping that the main thread maps and unmaps. The
//! workers live for a whole block of cycles and meet the main thread at
//! two barriers per cycle, so a cycle's time holds no thread creation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;

use crate::access::Access;
use crate::stats;
use crate::sys::{self, describe, ArrayMap, Mapping};
use crate::Scenario;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Each thread maps the whole map itself.
    Own,
    /// One mapping; each thread touches its share of the pages.
    Shared,
}

/// The rows' kinds as the host reads them: (kind, mode, threads).
pub const KINDS: [(&str, Mode, usize); 4] = [
    ("own2", Mode::Own, 2),
    ("shared2", Mode::Shared, 2),
    ("own4", Mode::Own, 4),
    ("shared4", Mode::Shared, 4),
];

/// The patterns timed with threads: the seed's table and the two sparse
/// ones.
pub const SCENARIOS: [Scenario; 6] = [
    Scenario::NopopulateNoaccess,
    Scenario::NopopulateTouchall,
    Scenario::PopulateNoaccess,
    Scenario::PopulateTouchall,
    Scenario::SparseOneIn64,
    Scenario::SparseRandom1pct,
];

/// The pages thread `t` of `threads` touches of a `pages`-page mapping:
/// all of them (`Own`), or its slice of the sweep or every `threads`-th
/// page of the sparse pattern (`Shared`).
pub fn share(scenario: Scenario, mode: Mode, t: usize, threads: usize, pages: usize) -> Vec<usize> {
    let all: Vec<usize> = if scenario.touch() {
        (0..pages).collect()
    } else {
        scenario.sparse_pages(pages)
    };
    match mode {
        Mode::Own => all,
        // A sweep stays a sweep: each thread takes a run of its own.
        Mode::Shared if scenario.sweeps() => {
            let n = all.len();
            all[t * n / threads..(t + 1) * n / threads].to_vec()
        }
        Mode::Shared => all.into_iter().skip(t).step_by(threads).collect(),
    }
}

/// What one row's block measured.
pub struct Block {
    /// The timed cycles' (whole cycle, 0) pairs, as `time_cycle` gives
    /// them (the mmap() alone is not timed here).
    pub samples: Vec<(u64, u64)>,
    /// Minor faults of every thread over the timed cycles: counted from
    /// the first timed cycle, when the workers' own stacks are faulted in.
    pub faults: u64,
}

/// `warmup + iterations` cycles of one row. A failed mmap() or munmap()
/// ends the row with its error once every thread has run the cycles out:
/// none may leave the others waiting at a barrier.
pub fn block(
    map: &ArrayMap,
    scenario: Scenario,
    (mode, threads): (Mode, usize),
    (warmup, iterations): (usize, usize),
) -> Result<Block, String> {
    let pages = map.size as usize / sys::PAGE;
    let cycles = warmup + iterations;
    let start = Barrier::new(threads + 1);
    let done = Barrier::new(threads + 1);
    let shared_at = AtomicUsize::new(0);
    let failed: Mutex<Option<String>> = Mutex::new(None);
    let (start, done, shared_at, failed) = (&start, &done, &shared_at, &failed);
    let fail = |e: String| {
        failed.lock().unwrap().get_or_insert(e);
    };
    let mut samples = Vec::with_capacity(iterations);
    let mut faults_before = 0;
    std::thread::sleep(std::time::Duration::from_millis(20));
    thread::scope(|s| {
        for t in 0..threads {
            let mine = share(scenario, mode, t, threads, pages);
            s.spawn(move || {
                for _ in 0..cycles {
                    start.wait();
                    let at = shared_at.load(Ordering::Acquire);
                    if let Err(e) = work(map, scenario, mode, at, &mine) {
                        fail(e);
                    }
                    done.wait();
                }
            });
        }
        for cycle in 0..cycles {
            if cycle == warmup {
                faults_before = sys::minor_faults();
            }
            let t0 = sys::now_ns();
            let shared = match mode {
                Mode::Shared => Mapping::new(map, scenario.populate())
                    .map_err(|e| fail(describe("mmap (shared, threads)", &e)))
                    .ok(),
                Mode::Own => None,
            };
            shared_at.store(shared.as_ref().map_or(0, Mapping::addr), Ordering::Release);
            start.wait();
            done.wait();
            if let Some(m) = shared {
                if let Err(e) = m.unmap() {
                    fail(describe("munmap (shared, threads)", &e));
                }
            }
            if cycle >= warmup {
                samples.push((sys::now_ns() - t0, 0));
            }
        }
    });
    let faults = sys::minor_faults() - faults_before;
    let first_error = failed.lock().unwrap().take();
    match first_error {
        Some(e) => Err(e),
        None => Ok(Block { samples, faults }),
    }
}

/// One worker's part of a cycle.
fn work(
    map: &ArrayMap,
    scenario: Scenario,
    mode: Mode,
    shared_at: usize,
    pages: &[usize],
) -> Result<(), String> {
    match mode {
        Mode::Own => {
            let m = Mapping::new(map, scenario.populate())
                .map_err(|e| describe("mmap (own, threads)", &e))?;
            crate::access(&m, scenario, pages);
            m.unmap().map_err(|e| describe("munmap (own, threads)", &e))
        }
        // The main thread's mmap() failed: it reports that.
        Mode::Shared if shared_at == 0 => Ok(()),
        Mode::Shared => {
            let len = map.size as usize;
            // SAFETY: the main thread keeps the mapping at `shared_at`
            // (map.size bytes) until every worker has passed `done`.
            unsafe {
                if scenario.reads() {
                    std::hint::black_box(sys::read_pages_at(shared_at, len, pages));
                } else {
                    sys::touch_pages_at(shared_at, len, pages);
                }
            }
            Ok(())
        }
    }
}

/// Every row's label: "own2 nopopulate_touchall".
pub fn label(kind: &str, scenario: Scenario) -> String {
    format!("{kind} {}", scenario.name())
}

/// The iterations a threaded row takes: as many as a single-thread one.
pub fn iterations(iterations: usize) -> (usize, usize) {
    (stats::warmup_rounds(iterations), iterations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_common::bench::grid::{PAGES, PATTERNS};

    #[test]
    fn shares_split_the_pages_without_overlap() {
        let grid = PATTERNS.iter().map(|p| p.scenario);
        for (scenario, pages) in SCENARIOS
            .into_iter()
            .chain(grid)
            .flat_map(|s| PAGES.iter().map(move |&p| (s, p as usize)))
        {
            for threads in [2, 4] {
                let mut all: Vec<usize> = (0..threads)
                    .flat_map(|t| share(scenario, Mode::Shared, t, threads, pages))
                    .collect();
                let n = all.len();
                all.sort_unstable();
                all.dedup();
                assert_eq!(all.len(), n, "{scenario:?}: a page touched twice");
                let own = share(scenario, Mode::Own, 0, threads, pages);
                let mut own_sorted = own.clone();
                own_sorted.sort_unstable();
                assert_eq!(
                    all, own_sorted,
                    "{scenario:?}: shares must cover the pattern"
                );
            }
        }
        assert!(share(Scenario::NopopulateNoaccess, Mode::Own, 0, 2, 2048).is_empty());
        // A sweep shared by threads is runs of it, each in the sweep's
        // order (the window grows along them).
        assert_eq!(
            share(Scenario::ReverseSweep, Mode::Shared, 1, 2, 8),
            [3, 2, 1, 0]
        );
        assert_eq!(share(Scenario::ReadAll, Mode::Shared, 0, 4, 8), [0, 1]);
        assert_eq!(share(Scenario::Stride2, Mode::Shared, 1, 2, 8), [2, 6]);
    }
}
