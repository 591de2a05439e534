//! One module per subcommand, each thin: it turns its flags into the
//! configurations the layers below take, ensures the host tools it needs
//! (only commands install anything), calls down, and maps the outcome to
//! output and an exit code.

pub mod bench;
pub mod build_kernel;
pub mod bundle;
pub mod cache;
pub mod check_patches;
pub mod ci;
pub mod format_series;
pub mod fresh_root;
pub mod fuzz;
pub mod kselftest;
pub mod mutants;
pub mod run;
pub mod vmtest;
