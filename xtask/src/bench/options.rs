//! What a bench run is asked for beyond its kernels and how they boot:
//! the command's flags, resolved.

use std::path::PathBuf;

use anyhow::{bail, Result};

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
    /// The targets met in the record that `record` may drop from the list.
    pub drop_targets: Vec<String>,
    /// Hold the run to steadiness and to the record.
    pub gate: bool,
    /// Hold the run to the targets the record's run met.
    pub gate_targets: bool,
}

impl BenchOptions {
    /// What the flags ask for that no run can give, before anything
    /// boots: a record from one boot a kernel.
    pub fn check(&self) -> Result<()> {
        if self.record && self.repeat < 2 {
            bail!(
                "--record judges steadiness across boots, and this run boots each kernel {} time(s) (--quick boots once unless told): add --repeat 2",
                self.repeat
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_from_one_boot_is_refused_before_anything_boots() {
        let opts = |record, repeat| BenchOptions {
            quick: true,
            repeat,
            out: PathBuf::new(),
            clock: None,
            record,
            drop_targets: vec![],
            gate: false,
            gate_targets: false,
        };
        let err = opts(true, 1).check().unwrap_err().to_string();
        assert!(err.contains("add --repeat 2"), "{err}");
        assert!(opts(true, 2).check().is_ok());
        assert!(opts(false, 1).check().is_ok());
    }
}
