//! Statistics and iteration planning (pure code, host-tested).

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// The map size of the seed's timing table; sweep iteration counts are scaled
/// relative to it.
pub const TABLE_SIZE: u64 = 8 * MIB;

/// min / median / p90 of a set of samples, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub samples: usize,
    pub min_ns: u64,
    pub median_ns: u64,
    pub p90_ns: u64,
}

/// Summarizes samples. Median: mean of the middle two for an even count.
/// p90: nearest rank (the smallest sample with at least 90% of samples at or
/// below it), so it is always a measured value. None for no samples.
pub fn summarize(samples: &[u64]) -> Option<Summary> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_unstable();
    let n = s.len();
    let median_ns = if n % 2 == 1 {
        s[n / 2]
    } else {
        // Written so that it cannot overflow.
        s[n / 2 - 1] + (s[n / 2] - s[n / 2 - 1]) / 2
    };
    Some(Summary {
        samples: n,
        min_ns: s[0],
        median_ns,
        p90_ns: nearest_rank(&s, 90),
    })
}

/// Nearest-rank percentile of sorted, non-empty samples.
fn nearest_rank(sorted: &[u64], pct: usize) -> u64 {
    let rank = (pct * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// Warm-up rounds before measuring: enough to fault in code, page tables and
/// caches, few enough not to matter for the time budget.
pub fn warmup_rounds(iterations: usize) -> usize {
    (iterations / 10).clamp(1, 3)
}

/// Fewest samples a sweep point gets: enough for a median that one slow
/// call cannot move (a 1 GiB base mapping costs ~0.15 s under TCG).
pub const MIN_SWEEP_ITERATIONS: usize = 10;

/// Iterations for a sweep point: the table's count for sizes up to 8 MiB,
/// scaled down in proportion above that (the cost is linear in size), but
/// never below MIN_SWEEP_ITERATIONS (or `iterations` if that is smaller).
pub fn sweep_iterations(iterations: usize, size: u64) -> usize {
    let scaled = iterations as u128 * u128::from(TABLE_SIZE) / u128::from(size.max(1));
    let scaled = usize::try_from(scaled).unwrap_or(usize::MAX);
    scaled
        .clamp(iterations.min(MIN_SWEEP_ITERATIONS), iterations)
        .max(1)
}

/// Sweep sizes; `--quick` stops at 64 MiB.
pub fn sweep_sizes(quick: bool) -> Vec<u64> {
    let all = [4 * KIB, 64 * KIB, MIB, 8 * MIB, 64 * MIB, 256 * MIB, GIB];
    all.into_iter()
        .filter(|&s| !quick || s <= 64 * MIB)
        .collect()
}

/// Touching every page costs a fault per page after the patch; cap the sizes
/// it is measured at to bound the run time.
pub const SWEEP_TOUCH_MAX: u64 = 64 * MIB;
/// The memory measurement touches the mapping only up to this size.
pub const MEMORY_TOUCH_MAX: u64 = 256 * MIB;

/// Runs each scenario in its own block: `warmup` discarded calls, then
/// `iterations` measured ones. Blocks, not interleaving: work one scenario
/// leaves behind (page tables and pages freed after RCU grace periods once
/// a touched mapping is unmapped) must not land in the next scenario's
/// timings, and the warm-up absorbs what the previous block left.
/// Drift across a run is handled by repeating whole boots on the host.
/// Returns the samples per scenario.
pub fn sample_blocks<T: Clone, E>(
    scenarios: usize,
    warmup: usize,
    iterations: usize,
    mut measure: impl FnMut(usize) -> Result<T, E>,
) -> Result<Vec<Vec<T>>, E> {
    let mut samples = vec![Vec::with_capacity(iterations); scenarios];
    for (i, block) in samples.iter_mut().enumerate() {
        // Let deferred frees (RCU callbacks) of the previous block run.
        std::thread::sleep(std::time::Duration::from_millis(20));
        for call in 0..warmup + iterations {
            let ns = measure(i)?;
            if call >= warmup {
                block.push(ns);
            }
        }
    }
    Ok(samples)
}

/// `count` distinct page indexes below `pages`, sorted, from a fixed-seed
/// xorshift: every kernel and every boot writes the same pages.
pub fn random_pages(pages: usize, count: usize) -> Vec<usize> {
    let count = count.min(pages);
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut picked = std::collections::BTreeSet::new();
    while picked.len() < count {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        picked.insert((state % pages as u64) as usize);
    }
    picked.into_iter().collect()
}

/// "4 KiB", "64 MiB", "1 GiB" for the human table.
pub fn fmt_size(bytes: u64) -> String {
    match bytes {
        b if b >= GIB && b % GIB == 0 => format!("{} GiB", b / GIB),
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b >= KIB && b % KIB == 0 => format!("{} KiB", b / KIB),
        b => format!("{b} B"),
    }
}

/// Nanoseconds as microseconds with one decimal, the seed table's unit.
pub fn fmt_us(ns: u64) -> String {
    format!("{}.{}us", ns / 1000, (ns % 1000) / 100)
}

/// Two MemFree readings 50 ms apart within 1 MiB of each other: nothing
/// big is being freed any more. An unreadable value counts as settled.
pub fn settled(before: Option<u64>, after: Option<u64>) -> bool {
    match (before, after) {
        (Some(a), Some(b)) => a.abs_diff(b) < 1024,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_pages_are_distinct_in_range_and_repeatable() {
        let pages = random_pages(2048, 20);
        assert_eq!(pages.len(), 20);
        assert!(pages.windows(2).all(|w| w[0] < w[1]), "{pages:?}");
        assert!(pages.iter().all(|&p| p < 2048), "{pages:?}");
        assert_eq!(pages, random_pages(2048, 20));
        assert_eq!(random_pages(4, 9), [0, 1, 2, 3]);
    }

    #[test]
    fn summarize_odd_and_even() {
        assert_eq!(summarize(&[]), None);
        let s = summarize(&[5]).unwrap();
        assert_eq!((s.samples, s.min_ns, s.median_ns, s.p90_ns), (1, 5, 5, 5));
        let s = summarize(&[3, 1, 2]).unwrap();
        assert_eq!((s.min_ns, s.median_ns, s.p90_ns), (1, 2, 3));
        let s = summarize(&[4, 1, 3, 2]).unwrap();
        assert_eq!((s.min_ns, s.median_ns, s.p90_ns), (1, 2, 4));
        let s = summarize(&[10, 20]).unwrap();
        assert_eq!(s.median_ns, 15);
        let s = summarize(&[u64::MAX, u64::MAX - 2]).unwrap();
        assert_eq!(s.median_ns, u64::MAX - 1);
    }

    #[test]
    fn p90_nearest_rank() {
        let v: Vec<u64> = (1..=10).collect();
        assert_eq!(summarize(&v).unwrap().p90_ns, 9);
        let v: Vec<u64> = (1..=30).rev().collect();
        let s = summarize(&v).unwrap();
        assert_eq!((s.min_ns, s.median_ns, s.p90_ns), (1, 15, 27));
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(summarize(&v).unwrap().p90_ns, 90);
        let v: Vec<u64> = (1..=11).collect();
        assert_eq!(summarize(&v).unwrap().p90_ns, 10, "rank ceil(9.9) = 10");
    }

    #[test]
    fn warmups() {
        assert_eq!(warmup_rounds(1), 1);
        assert_eq!(warmup_rounds(10), 1);
        assert_eq!(warmup_rounds(30), 3);
        assert_eq!(warmup_rounds(1000), 3);
    }

    #[test]
    fn sweep_iteration_counts() {
        assert_eq!(sweep_iterations(30, 4 * KIB), 30);
        assert_eq!(sweep_iterations(30, 8 * MIB), 30);
        assert_eq!(sweep_iterations(30, 64 * MIB), 10);
        assert_eq!(sweep_iterations(30, GIB), 10);
        assert_eq!(sweep_iterations(100, 64 * MIB), 12);
        assert_eq!(sweep_iterations(10, 64 * MIB), 10);
        assert_eq!(
            sweep_iterations(2, GIB),
            2,
            "never above the requested count"
        );
        assert_eq!(sweep_iterations(1, 4 * KIB), 1);
        assert_eq!(sweep_iterations(usize::MAX, 4 * KIB), usize::MAX);
    }

    #[test]
    fn sizes() {
        assert_eq!(sweep_sizes(false).len(), 7);
        assert_eq!(*sweep_sizes(false).last().unwrap(), GIB);
        assert_eq!(*sweep_sizes(true).last().unwrap(), 64 * MIB);
        assert!(sweep_sizes(false).windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn block_sampling_discards_warmup() {
        let mut calls = Vec::new();
        let mut t = 0u64;
        let samples = sample_blocks::<u64, ()>(2, 1, 3, |i| {
            calls.push(i);
            t += 1;
            Ok(t)
        })
        .unwrap();
        assert_eq!(calls, [0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(samples[0], [2, 3, 4]);
        assert_eq!(samples[1], [6, 7, 8]);
        let err = sample_blocks(2, 1, 3, |i| if i == 1 { Err("boom") } else { Ok(1) });
        assert_eq!(err, Err("boom"));
    }

    #[test]
    fn memory_settling() {
        assert!(settled(Some(3_000_000), Some(3_000_500)));
        assert!(!settled(Some(3_000_000), Some(3_065_536)));
        assert!(settled(None, Some(1)));
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_size(4 * KIB), "4 KiB");
        assert_eq!(fmt_size(256 * MIB), "256 MiB");
        assert_eq!(fmt_size(GIB), "1 GiB");
        assert_eq!(fmt_size(1000), "1000 B");
        assert_eq!(fmt_us(1_100), "1.1us");
        assert_eq!(fmt_us(1_341_999), "1341.9us");
        assert_eq!(fmt_us(42), "0.0us");
    }
}
