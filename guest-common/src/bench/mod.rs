//! What the host harness and the guest's `bench` share about the
//! benchmark: its access patterns by name ([`Scenario`]) and the grid of
//! them ([`grid`]). A name is the key of every record the guest writes
//! and of the host's record (`docs/bench/icount.json`), so it is spelt
//! here only.

pub mod grid;

/// What one mmap()+munmap() cycle does to the mapping between the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    NopopulateNoaccess,
    NopopulateTouchall,
    PopulateNoaccess,
    PopulateTouchall,
    /// Write one page in every 64.
    SparseOneIn64,
    /// Write 1% of the pages, picked at random with a fixed seed.
    SparseRandom1pct,
    /// Write every second page.
    Stride2,
    /// Write every page, from the last to the first.
    ReverseSweep,
    /// Read every page, first to last: read faults take do_read_fault().
    ReadAll,
}

impl Scenario {
    /// The name in records and on the guest's console.
    pub const fn name(self) -> &'static str {
        match self {
            Scenario::NopopulateNoaccess => "nopopulate_noaccess",
            Scenario::NopopulateTouchall => "nopopulate_touchall",
            Scenario::PopulateNoaccess => "populate_noaccess",
            Scenario::PopulateTouchall => "populate_touchall",
            Scenario::SparseOneIn64 => "sparse_1in64",
            Scenario::SparseRandom1pct => "sparse_random_1pct",
            Scenario::Stride2 => "stride_2",
            Scenario::ReverseSweep => "reverse_sweep",
            Scenario::ReadAll => "nopopulate_readall",
        }
    }
}
