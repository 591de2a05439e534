//! Guest selftests for "bpf: Populate mmap-able array map memory lazily".
//!
//! The same binary runs on the eager kernel (eager `remap_vmalloc_range()`)
//! and on each variant of the series (pages faulted in by a `.fault`
//! vm_op); the runner is told which one it is and each test asserts that
//! kernel's side. The cases T01-T41, with what each expects on every
//! kernel and the functions that implement it, are in `docs/TEST-PLAN.md`.

pub mod asm;
pub mod child;
pub mod kmsg;
pub mod proc;
pub mod runner;
pub mod sys;
pub mod tests;
