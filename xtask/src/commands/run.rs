//! `cargo xtask run`: a host command, or a shell, in the test VM (the
//! work is `vm::command`); on several kernels, or with `--expect`, the
//! command on each in turn, held to what each is expected to do
//! (`expect`).
//!
//! Exit status, on one kernel: the command's; 125 when the VM could not
//! run it (setup, boot, a panic, a timeout); a kernel splat turns a 0
//! into 1 unless `--allow-splat`. On several: 0 when every kernel did as
//! expected, 1 when one did not, 125 when a VM could not run it. With
//! `--bisect`, as `git bisect run` takes it (`command::bisect_exit`).

use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::cli::RunArgs;
use crate::expect;
use crate::hostdeps;
use crate::kernel::choice::Sides;
use crate::project::EXIT_TESTS_FAILED;
use crate::vm::command::{self, CommandOptions};
use crate::vm::targets::BootConfig;

/// The VM could not run the command (as `env` and `docker run` use it).
pub const EXIT_VM: u8 = 125;

pub fn run(args: RunArgs) -> ExitCode {
    let ran = run_command(&args);
    if let Err(err) = &ran {
        eprintln!("error: {err:#}");
    }
    match (args.bisect, ran) {
        (true, ran) => ExitCode::from(command::bisect_exit(&ran)),
        (false, Ok(code)) => ExitCode::from(code),
        (false, Err(_)) => ExitCode::from(EXIT_VM),
    }
}

fn run_command(args: &RunArgs) -> Result<u8> {
    let boot = BootConfig {
        kernels: args.kernel.clone(),
        config: args.build.configuration.kernel_config,
        extra_config: args.build.config.clone(),
        debug: args.build.debug.enabled,
        accel: args.accel.choice,
        claim: None,
        timeout: args.timeout.secs,
        bundle: None,
        machine: args.machine.machine(),
    };
    let options = CommandOptions {
        command: args.command.clone(),
        shell: args.shell,
        share: args.share.choice,
        allow_splat: args.allow_splat,
    };
    let expectations = expect::parse_expectations(&args.expect)?;
    let host_command = command::host_command(&options)?;
    let source = args.source.config()?;
    let chosen = boot.choose(&source, Sides::Own)?;
    let several = chosen.kernels.len() > 1 || !expectations.is_empty();
    if several && args.bisect {
        bail!("--bisect judges one kernel: give one --kernel");
    }
    if several {
        command::check_each(&options, &host_command)?;
    }
    hostdeps::ensure_boot(&source)?;
    hostdeps::ensure_share(options.share)?;
    if !several {
        return command::run(&source, (&chosen, &boot), &options, host_command);
    }
    let check = |kernels: &[String]| expect::check_names(&expectations, kernels);
    let (run_dir, ran) =
        command::run_each(&source, (&chosen, &boot), (&options, host_command), check)?;
    let rows = expect::held_rows(ran, &expectations, args.allow_splat);
    eprint!("\n{}", expect::table(&rows));
    let junit = run_dir.join("junit.xml");
    std::fs::write(&junit, expect::junit(&rows, &args.command.join(" ")))
        .with_context(|| format!("writing {}", junit.display()))?;
    eprintln!(
        "reports: {} (junit.xml, each kernel's output, console logs)",
        run_dir.display()
    );
    let differ: Vec<&str> = rows
        .iter()
        .filter(|r| !r.as_expected)
        .map(|r| r.ran.kernel.as_str())
        .collect();
    println!(
        "run: {} of {} kernels as expected{}",
        rows.len() - differ.len(),
        rows.len(),
        if differ.is_empty() {
            String::new()
        } else {
            format!("; not {}", differ.join(", "))
        }
    );
    Ok(if rows.iter().any(|r| r.ran.status.is_err()) {
        EXIT_VM
    } else if differ.is_empty() {
        0
    } else {
        EXIT_TESTS_FAILED
    })
}
