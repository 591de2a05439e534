//! `cargo xtask build-kernel`: the series applied to a kernel tree, and the
//! base kernel and each variant of the series built from it (the work is
//! in `kernel/`).

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::BuildKernelArgs;
use crate::{hostdeps, kernel};

pub fn run(args: BuildKernelArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    let series = source.series()?;
    let extra = kernel::ExtraConfig::load(&args.build.config)?;
    let specs = kernel::specs_for(
        &args.kernel,
        &series,
        (
            args.build.configuration.kernel_config,
            args.build.debug.enabled,
        ),
        &extra,
    )?;
    hostdeps::ensure_kernel_build(&source)?;
    let manifest = kernel::build(&source, &specs)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&manifest)?);
    } else {
        for k in &manifest.kernels {
            crate::status!("done", "{} {}: {}", k.name, k.version, k.bzimage.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
