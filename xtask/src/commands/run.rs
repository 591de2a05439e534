//! `cargo xtask run`: a host command, or a shell, in the test VM (the
//! work is `vm::command`).
//!
//! Exit status: the command's; 125 when the VM could not run it (setup,
//! boot, a panic, a timeout); a kernel splat turns a 0 into 1 unless
//! `--allow-splat`.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::RunArgs;
use crate::hostdeps;
use crate::kernel::Flavor;
use crate::vm::command::{self, CommandOptions};
use crate::vm::targets::BootConfig;

/// The VM could not run the command (as `env` and `docker run` use it).
pub const EXIT_VM: u8 = 125;

pub fn run(args: RunArgs) -> ExitCode {
    match run_command(&args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(EXIT_VM)
        }
    }
}

fn run_command(args: &RunArgs) -> Result<u8> {
    let boot = BootConfig {
        kernels: vec![args.kernel.clone()],
        config: args.build.configuration.kernel_config,
        extra_config: args.build.config.clone(),
        debug: args.build.debug.debug,
        accel: args.accel.accel,
        claim: Flavor::patched().name().to_string(),
        timeout: args.timeout.timeout,
        bundle: None,
        machine: args.machine.machine(),
    };
    let options = CommandOptions {
        command: args.command.clone(),
        shell: args.shell,
        share: args.share.share,
        allow_splat: args.allow_splat,
    };
    let host_command = command::host_command(&options)?;
    let source = args.source.config()?;
    hostdeps::ensure_boot(&source)?;
    hostdeps::ensure_share(options.share)?;
    command::run(&source, &boot, &options, host_command)
}
