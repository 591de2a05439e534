//! What a bench run is asked for beyond its kernels and how they boot:
//! the command's flags, resolved.

use std::path::PathBuf;

use super::grid::Clock;

/// What a bench run does beyond its kernels and how they boot: the
/// command's flags, resolved.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Fewer iterations, the grid alone (CI's run).
    pub quick: bool,
    /// Boots per kernel, at least one.
    pub repeat: usize,
    /// Where bench.json, table.txt and sweep.svg go.
    pub out: PathBuf,
    /// The clock asked for; None: icount under TCG, wall under KVM.
    pub clock: Option<Clock>,
    /// Write this run's rows to the record (`docs/bench/icount.json`) and
    /// the head's targets met to `docs/bench/targets-met.txt`.
    pub record: bool,
    /// Hold the run to steadiness and to the record.
    pub gate: bool,
    /// Hold the run to the targets the record's run met.
    pub gate_targets: bool,
}
