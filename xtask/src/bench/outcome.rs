//! How a bench run ended: passed, a gate failed, the benchmark failed,
//! or a VM could not do its job.

/// How a bench run ended; what went wrong is said on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchOutcome {
    /// Measured and reported, and every gate asked for passed.
    Passed,
    /// Measured and reported, and a gate failed or `--record` found an
    /// unsteady row.
    GateFailed,
    /// A boot ended the run: the benchmark failed in the guest, or the
    /// kernel reported problems.
    BenchFailed,
    /// A boot ended the run: the VM could not do its job, or the guest's
    /// records could not be read.
    VmFailed,
}

impl BenchOutcome {
    pub(super) fn of_gates(failed: bool) -> BenchOutcome {
        if failed {
            BenchOutcome::GateFailed
        } else {
            BenchOutcome::Passed
        }
    }
}
