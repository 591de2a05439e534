//! The benchmark as a library: `run::Bench` settles a run (`options`) from plain
//! configurations (the clock, icount's layout), boots every kernel
//! (`boots`), prints and writes its report (`output`) and holds it to the
//! record (`record`). The rest is the numbers: the guest's `BPFLAB-BENCH`
//! records combined over boots (`records`) into the grid, the seed's
//! table and the older sections, the model of the seed's machine, the
//! series' targets, the sweep plot, the record's checks (`gate`), and the
//! host's memory noise between rounds.

mod boots;
mod calibration;
pub mod fill;
pub mod gate;
pub mod grid;
pub mod host_noise;
pub mod interval;
pub mod model;
pub mod options;
mod output;
pub mod plot;
mod record;
pub mod records;
pub mod run;
pub mod seed;
pub mod sparse;
pub mod targets;
pub mod threads;
