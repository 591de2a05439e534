//! `cargo xtask`: build, boot and measure the lazy mmap BPF patch series.
//!
//! This file only parses the command line and dispatches. The commands
//! (`commands/`: build_kernel, check_patches, vmtest, run, kselftest,
//! bench, ci, fresh_root, bundle, mutants, fuzz, cache) are thin; the
//! work is in the layers below them: `kernel/` (source to bzImage),
//! `vm/` (bzImage to a guest's report), the suites on a run's kernels
//! (`plan/`, `kselftest/`, `fuzz/`, `mutants/`, `bench/`), `ci/` (ci's
//! steps, their running and what a run cost), `fresh_root/` (the install
//! proof) and `report/` (what the guest said, and the test reports the
//! user reads).

mod bench;
mod build_orphans;
mod ci;
mod cli;
mod commands;
mod config_file;
#[cfg(test)]
mod docs_claims;
mod expect;
mod fresh_root;
mod fuzz;
mod hostdeps;
mod kernel;
mod kselftest;
mod mutants;
mod plan;
mod posting;
mod project;
mod report;
mod util;
mod vm;
mod workers;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> std::process::ExitCode {
    let args = match config_file::arguments(std::env::args_os().collect()) {
        Ok(args) => args,
        Err(err) => {
            eprintln!("error: {err:#}");
            return std::process::ExitCode::from(project::EXIT_SETUP);
        }
    };
    // clap's own exit code for bad usage (2) is ours for a VM failure.
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return if err.use_stderr() {
                std::process::ExitCode::from(project::EXIT_SETUP)
            } else {
                std::process::ExitCode::SUCCESS
            };
        }
    };
    let result = match cli.command {
        Command::BuildKernel(args) => commands::build_kernel::run(args),
        Command::Vmtest(args) => commands::vmtest::run(args),
        Command::CheckPatches(args) => commands::check_patches::run(args),
        Command::FormatSeries(args) => commands::format_series::run(args),
        Command::Run(args) => Ok(commands::run::run(args)),
        Command::Kselftest(args) => commands::kselftest::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Ci(args) => commands::ci::run(args),
        Command::Bundle(args) => commands::bundle::run(args),
        Command::FreshRoot(args) => commands::fresh_root::run(args),
        Command::Mutants(args) => commands::mutants::run(args),
        Command::Fuzz(args) => commands::fuzz::run(args),
        Command::Cache(args) => commands::cache::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(project::EXIT_SETUP)
        }
    }
}
