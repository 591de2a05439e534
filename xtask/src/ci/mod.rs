//! What `cargo xtask ci` runs, as a library below its command: a step
//! (`step`), the steps (`steps`, with the fault tests' split in
//! `faults`), the order the two workers take them in (`queue`), the host
//! tools they need (`tools`), running them (`runner`), what a run
//! cost (`times`), and which steps may take a bundle (`bundle`).

pub mod bundle;
mod commit;
mod faults;
mod queue;
pub mod runner;
pub mod step;
pub mod steps;
pub mod times;
pub mod tools;

use std::path::PathBuf;

/// What a run is asked for: ci's flags, as this library takes them.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The debug kernels' steps too.
    pub debug: bool,
    /// Without the harness's fault tests.
    pub no_faults: bool,
    /// The cache every step is given (`--cache-dir`).
    pub cache_dir: Option<PathBuf>,
    /// Only these steps, by id (`--step`); every step when empty.
    pub only: Vec<String>,
    /// Inside a fresh-root check, which is making the record the unit
    /// test `steps::RECORD_TEST` holds the host tools to: the unit step
    /// filters that test out, so it counts as filtered, not passed.
    pub in_fresh_root: bool,
}
