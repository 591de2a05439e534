//! A differential fuzzer of mmap-able BPF array maps: seeded random
//! sequences of map and mapping operations, each executed on the running
//! kernel and applied to a model of it, compared after every step.
//! `cargo xtask fuzz` runs it in the guest on every kernel with one seed.

pub mod check;
pub mod exec;
pub mod gen;
pub mod model;
pub mod op;
pub mod report;
pub mod rng;
pub mod run;
pub mod shrink;
pub mod threads;
