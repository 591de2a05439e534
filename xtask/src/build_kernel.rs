//! `cargo xtask build-kernel`: the series applied to a kernel tree, and the
//! base and patched kernels built from it (the work is in `kernel/`).

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::BuildKernelArgs;
use crate::kernel;

pub fn run(args: BuildKernelArgs) -> Result<ExitCode> {
    let manifest = kernel::build(&args.source, &args.kernel.specs(args.debug))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&manifest)?);
    } else {
        for k in &manifest.kernels {
            crate::status!("done", "{} {}: {}", k.name, k.version, k.bzimage.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
