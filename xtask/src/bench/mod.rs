//! The benchmark as a library: `run::Bench` settles a run (`options`, `outcome`) from plain
//! configurations (the clock, icount's layout), boots every kernel
//! (`boots`), prints and writes its report (`output`) and holds it to the
//! record (`record`). The rest is the numbers: the guest's `BPFLAB-BENCH`
//! records combined over boots (`guest_records`) into the grid, the seed's
//! table and the older sections, the model of the seed's machine, the
//! series' targets, the sweep plot, the record's checks (`gate`), and the
//! host's memory noise between rounds.

mod boots;
mod calibration;
mod fill;
mod gate;
pub mod grid;
mod guest_records;
mod host_noise;
mod interval;
#[cfg(test)]
pub mod met;
mod model;
pub mod options;
pub mod outcome;
mod output;
mod plot;
mod record;
pub mod run;
mod seed;
mod shape;
mod sparse;
mod targets;
mod threads;

pub use gate::{BenchRecord, RecordRow};

/// The bench record (`docs/bench/icount.json`), as `--record` wrote it.
pub fn recorded() -> anyhow::Result<BenchRecord> {
    record::read_record()
}
