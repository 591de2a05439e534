//! `cargo xtask`: build, boot and measure the lazy mmap BPF patch series.
//!
//! This file only parses the command line and dispatches. The commands
//! (`build_kernel`, `check_patches`, `vmtest`, `run`, `kselftest`, `bench`,
//! `ci`, `fresh_root`) are thin; the work is in
//! `kernel/` (source to bzImage), `vm/` (bzImage to a guest's report) and
//! `report/` (what the guest said, and what the user reads).

mod bench;
mod build_kernel;
mod check_patches;
mod ci;
mod cli;
mod fresh_root;
mod hostdeps;
mod kernel;
mod kselftest;
mod leftovers;
mod project;
mod report;
mod run;
mod util;
mod vm;
mod vmtest;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> std::process::ExitCode {
    // clap's own exit code for bad usage (2) is ours for a VM failure.
    let cli = match Cli::try_parse() {
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
        Command::BuildKernel(args) => build_kernel::run(args),
        Command::Vmtest(args) => vmtest::run(args),
        Command::CheckPatches(args) => check_patches::run(args),
        Command::Run(args) => Ok(run::run(args)),
        Command::Kselftest(args) => kselftest::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Ci(args) => ci::run(args),
        Command::FreshRoot(args) => fresh_root::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(project::EXIT_SETUP)
        }
    }
}
