//! The grid: every access pattern at every map size, by one thread and by
//! 2 and 4 threads sharing one mapping. Each row carries its timed cycles,
//! the user page faults a cycle takes (rusage: what the mapping's faults
//! cost beyond the instructions), and for one thread the Rss the pattern
//! leaves. The host's targets, model and regression gate read these rows;
//! the rows themselves are guest-common's (`bench/grid.rs`), shared with
//! the host.

use guest_common::bench::grid::{Pattern, PAGES, PATTERNS, THREADS};
use serde::Serialize;

use crate::access::Access;
use crate::stats::{self, Summary};
use crate::sys::{self, describe, ArrayMap, Mapping, Results};
use crate::threads::{self, Mode};
use crate::{apply_pattern, time_cycle, Scenario};

/// One grid row; kind "grid".
#[derive(Serialize)]
struct GridRecord {
    kind: &'static str,
    scenario: &'static str,
    size_bytes: u64,
    pages: usize,
    threads: usize,
    samples: usize,
    min_ns: u64,
    median_ns: u64,
    p90_ns: u64,
    /// Minor faults of the process per timed cycle.
    faults_per_cycle: f64,
    /// Of those, the ones taken inside mmap() (MAP_POPULATE's, through
    /// get_user_pages: no exception); the rest are the user's, each an
    /// exception entry and return.
    mmap_faults: u64,
    /// Rss of the mapping after one more, untimed, cycle (one thread).
    rss_kb: Option<u64>,
    cycles_ns: Vec<u64>,
}

/// Timed cycles for a size: the table's count up to 8 MiB, fewer above
/// (a cycle's cost grows with the pages), never fewer than 3.
pub fn iterations(iterations: usize, pages: usize) -> usize {
    let scaled = iterations * 2048 / pages.max(1);
    scaled.clamp(iterations.min(3), iterations)
}

/// Every row of the grid, size by size (one map per size). A size's
/// records are sent after its rows, and sent out before the next size
/// starts: no serial port is busy while a row is timed.
pub fn run(results: &mut Results, iterations_per_row: usize) -> Result<(), String> {
    println!("\ngrid: patterns x sizes x threads (median cycle, faults per cycle):");
    results.drain();
    let _fifo = sys::Fifo::enter();
    // The table counts in u64, as the records and the host do.
    for &pages in PAGES {
        let pages = pages as usize;
        let size = (pages * sys::PAGE) as u64;
        let map = ArrayMap::create(size).map_err(|e| describe("grid map", &e))?;
        let iterations = iterations(iterations_per_row, pages);
        let warmup = stats::warmup_rounds(iterations);
        let mut rows = vec![];
        for &threads in THREADS {
            let threads = threads as usize;
            for &Pattern { scenario, .. } in PATTERNS {
                let row = measure(&map, scenario, threads, (warmup, iterations))
                    .map_err(|e| format!("grid {} {pages}p {threads}t: {e}", scenario.name()))?;
                rows.push(record(&map, scenario, threads, row)?);
            }
        }
        for (line, json) in rows {
            println!("{line}");
            results.emit(&json)?;
        }
        results.drain();
    }
    Ok(())
}

/// What one row measured: the timed cycles, the faults over them, the
/// faults inside one mmap(), Rss.
struct Row {
    cycles: Vec<u64>,
    faults: u64,
    mmap_faults: u64,
    rss_kb: Option<u64>,
}

fn measure(
    map: &ArrayMap,
    scenario: Scenario,
    threads: usize,
    (warmup, iterations): (usize, usize),
) -> Result<Row, String> {
    if threads > 1 {
        let block = threads::block(map, scenario, (Mode::Shared, threads), (warmup, iterations))?;
        let (mmap_faults, _) = untimed_cycle(map, scenario, &[])?;
        return Ok(Row {
            cycles: block.samples.iter().map(|s| s.0).collect(),
            faults: block.faults,
            mmap_faults,
            rss_kb: None,
        });
    }
    let pages = scenario.sparse_pages(map.size as usize / sys::PAGE);
    // Let deferred frees (RCU callbacks) of the previous row run.
    std::thread::sleep(std::time::Duration::from_millis(20));
    for _ in 0..warmup {
        time_cycle(map, scenario, &pages)?;
    }
    let before = sys::minor_faults();
    let mut cycles = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        cycles.push(time_cycle(map, scenario, &pages)?.0);
    }
    let faults = sys::minor_faults() - before;
    let (mmap_faults, rss_kb) = untimed_cycle(map, scenario, &pages)?;
    Ok(Row {
        cycles,
        faults,
        mmap_faults,
        rss_kb: Some(rss_kb),
    })
}

/// One more cycle, untimed: the faults its mmap() took, and the Rss
/// the pattern on `pages` leaves.
fn untimed_cycle(
    map: &ArrayMap,
    scenario: Scenario,
    pages: &[usize],
) -> Result<(u64, u64), String> {
    let before = sys::minor_faults();
    let mapping = Mapping::new(map, scenario.populate()).map_err(|e| describe("mmap", &e))?;
    let mmap_faults = sys::minor_faults() - before;
    apply_pattern(&mapping, scenario, pages);
    let rss_kb = sys::rss_kb(&mapping)?;
    mapping.unmap().map_err(|e| describe("munmap", &e))?;
    Ok((mmap_faults, rss_kb))
}

/// A row's table line and its JSON record.
fn record(
    map: &ArrayMap,
    scenario: Scenario,
    threads: usize,
    row: Row,
) -> Result<(String, String), String> {
    let s: Summary = stats::summarize(&row.cycles).ok_or("no samples")?;
    let faults_per_cycle = row.faults as f64 / s.samples as f64;
    let pages = map.size as usize / sys::PAGE;
    let line = format!(
        "{:>8} {threads}t {:<20} {:>11} {faults_per_cycle:>8.1} faults{}",
        stats::fmt_size(map.size),
        scenario.name(),
        stats::fmt_us(s.median_ns),
        row.rss_kb
            .map_or(String::new(), |kb| format!(", Rss {kb} kB"))
    );
    let record = GridRecord {
        kind: "grid",
        scenario: scenario.name(),
        size_bytes: map.size,
        pages,
        threads,
        samples: s.samples,
        min_ns: s.min_ns,
        median_ns: s.median_ns,
        p90_ns: s.p90_ns,
        faults_per_cycle,
        mmap_faults: row.mmap_faults,
        rss_kb: row.rss_kb,
        cycles_ns: row.cycles,
    };
    let json = serde_json::to_string(&record).map_err(|e| format!("serialize: {e}"))?;
    Ok((line, json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bigger_maps_take_fewer_cycles_but_never_below_three() {
        assert_eq!(iterations(30, 1), 30);
        assert_eq!(iterations(30, 2048), 30);
        assert_eq!(iterations(30, 16384), 3);
        assert_eq!(iterations(10, 16384), 3);
        assert_eq!(iterations(2, 16384), 2, "never above the requested count");
        assert_eq!(iterations(100, 16384), 12);
    }

    #[test]
    fn every_pattern_but_no_access_touches_a_one_page_map() {
        for s in PATTERNS.iter().map(|p| p.scenario) {
            let accesses = s.touch() || !s.sparse_pages(1).is_empty();
            let idle = matches!(s, Scenario::NopopulateNoaccess | Scenario::PopulateNoaccess);
            assert_eq!(accesses, !idle, "{s:?}");
        }
    }
}
