//! What each scenario does to a mapping. The scenarios and their names
//! are guest-common's (`bench/mod.rs`), shared with the host; how the
//! guest carries them out is the guest's own.

use guest_common::bench::Scenario;

use crate::stats;

/// A trait: `Scenario` is guest-common's, so the guest cannot give it
/// methods of its own.
pub trait Access {
    /// The pages a pattern accesses, in order, of a mapping of `pages`
    /// pages; empty for the seed's scenarios.
    fn sparse_pages(self, pages: usize) -> Vec<usize>;
    /// Whether the pattern goes through every page in order (either
    /// way): threads sharing a mapping then split it into runs.
    fn sweeps(self) -> bool;
    /// Whether the pattern reads its pages rather than writes them.
    fn reads(self) -> bool;
    /// Whether mmap() takes MAP_POPULATE.
    fn populate(self) -> bool;
    /// Whether the pattern writes every page, first to last.
    fn touch(self) -> bool;
}

impl Access for Scenario {
    fn sparse_pages(self, pages: usize) -> Vec<usize> {
        match self {
            Scenario::SparseOneIn64 => (0..pages).step_by(64).collect(),
            Scenario::SparseRandom1pct => stats::random_pages(pages, (pages / 100).max(1)),
            Scenario::Stride2 => (0..pages).step_by(2).collect(),
            Scenario::ReverseSweep => (0..pages).rev().collect(),
            Scenario::ReadAll => (0..pages).collect(),
            _ => Vec::new(),
        }
    }

    fn sweeps(self) -> bool {
        self.touch() || matches!(self, Scenario::ReadAll | Scenario::ReverseSweep)
    }

    fn reads(self) -> bool {
        self == Scenario::ReadAll
    }

    fn populate(self) -> bool {
        matches!(
            self,
            Scenario::PopulateNoaccess | Scenario::PopulateTouchall
        )
    }

    fn touch(self) -> bool {
        matches!(
            self,
            Scenario::NopopulateTouchall | Scenario::PopulateTouchall
        )
    }
}
