//! The grid: every pattern at every map size, by one thread and by 2 and
//! 4 sharing one mapping. The guest times every row
//! (`vm-images/bench/src/grid.rs`); the host tables, fits, gates and
//! holds targets to them (xtask's `bench/grid.rs`), by these names and
//! labels. A pattern joins the grid with one line of [`PATTERNS`] (a new
//! way to access a mapping also needs its [`Scenario`] and the guest's
//! `vm-images/bench/src/access.rs`); the lists are slices, so no length
//! changes with them.

use super::Scenario;

/// One pattern of the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    pub scenario: Scenario,
    /// What the host's tables call it; `docs/bench/targets-met.txt`
    /// names its targets by it.
    pub label: &'static str,
}

impl Pattern {
    /// rustfmt spreads a struct literal over four lines; a call keeps
    /// each row of [`PATTERNS`] on one.
    const fn new(scenario: Scenario, label: &'static str) -> Pattern {
        Pattern { scenario, label }
    }
}

/// The patterns, in the host's tables' order.
pub const PATTERNS: &[Pattern] = &[
    Pattern::new(Scenario::NopopulateNoaccess, "no access"),
    Pattern::new(Scenario::NopopulateTouchall, "write all"),
    Pattern::new(Scenario::ReadAll, "read all"),
    Pattern::new(Scenario::ReverseSweep, "write all, last first"),
    Pattern::new(Scenario::PopulateNoaccess, "MAP_POPULATE"),
    Pattern::new(Scenario::PopulateTouchall, "MAP_POPULATE, write all"),
    Pattern::new(Scenario::Stride2, "write every 2nd page"),
    Pattern::new(Scenario::SparseOneIn64, "write 1 page in 64"),
    Pattern::new(Scenario::SparseRandom1pct, "write 1% at random"),
];

/// Map sizes in pages: 4 KiB (libbpf's small .data and .bss maps), 64
/// KiB, 1 MiB, the seed's 8 MiB and 64 MiB; 128 to 512 bracket the size
/// up to which the head populates at mmap().
pub const PAGES: &[u64] = &[1, 16, 64, 128, 256, 512, 2048, 16384];

/// Threads per row: one, or 2 and 4 sharing one mapping, each taking its
/// share of the pattern (a run of the sweeps, every n-th page of the
/// others). Only the one-thread rows carry Rss.
pub const THREADS: &[u64] = &[1, 2, 4];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Both sides find a row by its scenario and the host's tables by its
    /// label: either twice would merge two rows.
    #[test]
    fn no_two_patterns_share_a_scenario_or_a_label() {
        let names: BTreeSet<&str> = PATTERNS.iter().map(|p| p.scenario.name()).collect();
        let labels: BTreeSet<&str> = PATTERNS.iter().map(|p| p.label).collect();
        assert_eq!(
            names.len(),
            PATTERNS.len(),
            "a scenario twice: {PATTERNS:?}"
        );
        assert_eq!(labels.len(), PATTERNS.len(), "a label twice: {PATTERNS:?}");
    }

    /// A name is a JSON value and a console word; a label is a table
    /// cell and starts a line of `targets-met.txt`, which is trimmed and
    /// skipped when it starts with `#`.
    #[test]
    fn every_row_is_well_formed() {
        for p in PATTERNS {
            let name = p.scenario.name();
            let word = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_';
            assert!(
                !name.is_empty() && name.bytes().all(word),
                "{name:?}: a name is one lower-case word"
            );
            let label = p.label;
            assert!(
                label.split(' ').all(|w| !w.is_empty())
                    && !label.starts_with('#')
                    && !label.chars().any(char::is_control),
                "{label:?}: a label is words, single-spaced, on one line"
            );
        }
    }

    /// The host's tables walk sizes and threads in order, and its targets
    /// find a pattern's label at 1 page and its Rss at 1 thread.
    #[test]
    fn sizes_and_threads_ascend_from_one() {
        for (what, list) in [("PAGES", PAGES), ("THREADS", THREADS)] {
            assert_eq!(list.first(), Some(&1), "{what} starts at 1: {list:?}");
            assert!(
                list.windows(2).all(|w| w[0] < w[1]),
                "{what} ascends: {list:?}"
            );
        }
    }
}
