//! `cargo xtask`: build, boot and measure the lazy mmap BPF patch series.
//!
//! This file only parses the command line and dispatches; each subcommand
//! lives in its own module.

mod apply;
mod bench;
mod build_kernel;
mod cache;
mod ci;
mod console;
mod guest_image;
mod hostdeps;
mod kbuild;
mod kconfig;
mod manifest;
mod mirror;
mod plot;
mod project;
mod qemu;
mod report;
mod series;
mod source;
mod vm;
mod vmtest;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "Build, boot and measure the lazy mmap BPF patch series"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply patches/ to a kernel tree and build the base and patched kernels.
    BuildKernel(build_kernel::Args),
    /// Boot each kernel under QEMU and run the selftests in the guest.
    Vmtest(vmtest::Args),
    /// Reproduce the seed's timing table on each kernel, side by side.
    Bench(bench::Args),
    /// Everything CI runs: checks, unit tests, kernels, vmtest, faults, bench.
    Ci(ci::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::BuildKernel(args) => build_kernel::run(args),
        Command::Vmtest(args) => vmtest::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Ci(args) => ci::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(project::EXIT_SETUP)
        }
    }
}
