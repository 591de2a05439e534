//! `cargo xtask bundle`: packs what the test steps of `ci` need, apart
//! from the cache (see `kernel::bundle`): the bzImages of the kernels
//! they boot, and each kernel's test_progs run directory with its files.
//! A CI workflow's build job makes it; its test jobs download it. Its
//! manifest, written last, says what it was made from: a run that takes
//! the bundle refuses it unless this checkout would build the same.

use std::fs;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::BundleArgs;
use crate::kernel::bundle_manifest::{self, BundleManifest, BundledKernel};
use crate::kernel::manifest::SourceInfo;
use crate::kernel::series::Series;
use crate::kernel::{self, bundle, KernelConfig, SourceConfig};
use crate::kselftest::{self, runner::Runner};
use crate::vm::targets::{Provenance, Target};
use crate::{hostdeps, project};

pub fn run(args: BundleArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    let llvm = args.llvm.choose()?;
    let mut deps = hostdeps::kernel_build(&source);
    deps.extend(hostdeps::kselftest(llvm.0));
    hostdeps::ensure(&deps).context("checking the host tools for the bundle")?;
    let out = &args.out;
    if out.exists() {
        fs::remove_dir_all(out).with_context(|| format!("removing the old {}", out.display()))?;
    }
    let kernel_config = args.configuration.kernel_config;
    // Before the build: what it is built from.
    let origin = bundle_manifest::origin(&source, kernel_config)?;
    let series = source.series()?;
    let (targets, kernels, built_from) = kernels((&source, &series), kernel_config, out)?;
    let config = (kernel_config, None, llvm);
    // Links into the cache, made in the bundle's directory, copied into
    // it dereferenced and then removed.
    let links = out.join("links");
    let (dirs, left_out) =
        kselftest::build_for((&source, &series), config, &targets, (&Runner::ALL, &links))?;
    let dest = bundle::kselftest_dir(out, kernel_config);
    for (t, dir) in targets.iter().zip(&dirs) {
        copy_dereferenced(dir, &dest.join("run").join(&t.name))?;
    }
    fs::remove_dir_all(&links).with_context(|| format!("removing {}", links.display()))?;
    kselftest::build::save_left_out(&dest, &left_out)?;
    let manifest = BundleManifest {
        origin,
        llvm: Some(llvm.0),
        built_from,
        kernels,
    };
    bundle_manifest::write(out, &manifest)?;
    let sh = project::shell()?;
    let sizes = xshell::cmd!(sh, "du -sh {out}/kernels {dest}").read()?;
    crate::status!(
        "bundle",
        "{} kernels in {}:\n{sizes}",
        targets.len(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Builds the kernels a bundle holds and copies each image into `out`:
/// them as targets, as the manifest records them, and their source.
fn kernels(
    (source, series): (&SourceConfig, &Series),
    kernel_config: KernelConfig,
    out: &Path,
) -> Result<(Vec<Target>, Vec<BundledKernel>, SourceInfo)> {
    let mut targets = Vec::new();
    let mut kernels = Vec::new();
    let mut built_from = None;
    for (words, debug) in bundle::KERNELS {
        let words: Vec<String> = words.split(',').map(str::to_string).collect();
        let specs = kernel::specs_for(
            &words,
            series,
            (kernel_config, *debug),
            &kernel::ExtraConfig::default(),
        )?;
        let manifest = kernel::build(source, &specs)?;
        built_from = Some(manifest.source);
        for (spec, info) in specs.into_iter().zip(manifest.kernels) {
            let to = bundle::image(out, &info.name);
            copy(&info.bzimage, &to)?;
            kernels.push(BundledKernel {
                name: info.name.clone(),
                version: info.version,
                patches: info.patches,
            });
            targets.push(Target {
                name: info.name,
                bzimage: to,
                plays: spec.flavor.clone(),
                flavor: spec.flavor,
                debug: spec.debug,
                provenance: Provenance::Built {
                    vmlinux: info.vmlinux,
                },
            });
        }
    }
    let built_from = built_from.context("bundle::KERNELS names no kernel")?;
    Ok((targets, kernels, built_from))
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to.parent().context("a path without a parent")?)?;
    fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// `from` as real files at `to` (a run directory is mostly links into
/// the cache, which a test job does not have).
fn copy_dereferenced(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to.parent().context("a path without a parent")?)?;
    let sh = project::shell()?;
    xshell::cmd!(sh, "cp -rL {from} {to}")
        .run()
        .with_context(|| format!("copying {} into the bundle", from.display()))
}
