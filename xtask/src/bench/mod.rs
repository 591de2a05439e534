//! The benchmark: the guest's `BPFLAB-BENCH` records combined over boots
//! into the grid, the seed's table and the older sections, the model of
//! the seed's machine, the series' targets, the sweep plot, the record
//! CI's gate holds runs to, and the host's memory noise between rounds.

pub mod fill;
pub mod gate;
pub mod grid;
pub mod host_noise;
pub mod interval;
pub mod model;
pub mod plot;
pub mod records;
pub mod run;
pub mod seed;
pub mod sparse;
pub mod targets;
pub mod threads;
