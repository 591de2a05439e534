//! The kernels of a run: `--kernel` words resolved to bzImages (built
//! when missing) or a bzImage of the user's own, each copied into the
//! run's directory, and checked against what the test plan knows.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use guest_common::protocol::{Inject, Program, PLAN_KERNELS};

use super::qemu::{AccelChoice, GuestCommand};
use crate::kernel::series::Series;
use crate::kernel::{self, ExtraConfig, Flavor, KernelConfig, KernelSpec, SourceConfig};

/// How a run boots its kernels: which, debug or not, the accelerator,
/// the plan side a bzImage of the user's own claims, and the overall
/// time limit. Built by the command layer from its flags.
#[derive(Debug, Clone)]
pub struct BootConfig {
    /// `--kernel` words: base, a variant, all, both, or a bzImage path.
    pub kernels: Vec<String>,
    /// The configuration of the kernels it builds.
    pub config: KernelConfig,
    /// The developer's own fragments (`--config`), on top of it.
    pub extra_config: Vec<PathBuf>,
    pub debug: bool,
    pub accel: AccelChoice,
    /// The plan kernel (`guest_common::protocol::PLAN_KERNELS`) a bzImage
    /// given by path is held to.
    pub claim: String,
    /// Seconds before the guest is killed; None: the default limits.
    pub timeout: Option<u64>,
    /// Take the kernels from this bundle (`kernel::bundle`), building
    /// nothing.
    pub bundle: Option<PathBuf>,
    /// CPUs, memory, kernel and QEMU arguments of every guest.
    pub machine: super::qemu::Machine,
}

/// A kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub bzimage: PathBuf,
    /// Which side of the plan's P/U cases the guest asserts.
    pub flavor: Flavor,
    pub debug: bool,
    /// The kernel's vmlinux in its build tree, for kernels we built.
    pub vmlinux: Option<PathBuf>,
}

impl Target {
    /// What the guest runs on this kernel.
    pub fn guest(
        &self,
        program: Program,
        args: Vec<String>,
        inject: Option<Inject>,
    ) -> GuestCommand {
        GuestCommand {
            program,
            kernel: self.flavor.name().into(),
            args,
            inject,
        }
    }
}

/// Resolves `--kernel` names to bzImages, building what is missing, and
/// copies each image into `run_dir` while the cache is still locked: a
/// later run may rebuild the cache's kernels while this one boots them.
pub fn targets(source: &SourceConfig, vm: &BootConfig, run_dir: &Path) -> Result<Vec<Target>> {
    let series = Series::load(&source.patches)?;
    let extra = ExtraConfig::load(&vm.extra_config)?;
    let mut specs: Vec<(usize, KernelSpec)> = Vec::new();
    let mut out: Vec<(usize, Target)> = Vec::new();
    for (i, word) in vm.kernels.iter().enumerate() {
        let Some(flavors) = kernel::expand_word(word, &series) else {
            out.push((i, own_kernel(word, vm, &series)?));
            continue;
        };
        for flavor in flavors {
            let spec = KernelSpec {
                flavor,
                config: vm.config,
                debug: vm.debug,
                extra: extra.clone(),
            };
            if !specs.iter().any(|(_, s)| *s == spec) {
                specs.push((i, spec));
            }
        }
    }
    if let Some(bundle) = &vm.bundle {
        for (i, spec) in specs.drain(..) {
            out.push((i, from_bundle(bundle, spec)?));
        }
    }
    // Held until the built kernels are copied out of the cache.
    let mut lock = None;
    if !specs.is_empty() {
        let only: Vec<KernelSpec> = specs.iter().map(|(_, s)| s.clone()).collect();
        let (manifest, held) = kernel::build_locked(source, &only)?;
        lock = Some(held);
        for ((i, spec), info) in specs.iter().zip(manifest.kernels) {
            let target = Target {
                name: info.name,
                bzimage: info.bzimage,
                flavor: spec.flavor.clone(),
                debug: spec.debug,
                vmlinux: Some(info.vmlinux),
            };
            out.push((*i, target));
        }
    }
    // Stable: the kernels one word names keep their order.
    out.sort_by_key(|(i, _)| *i);
    let mut targets: Vec<Target> = out.into_iter().map(|(_, t)| t).collect();
    unique_names(&mut targets);
    if lock.is_some() {
        for t in &mut targets {
            let copy = run_dir.join(format!("{}.bzImage", t.name));
            fs::copy(&t.bzimage, &copy).with_context(|| {
                format!("copying {} into {}", t.bzimage.display(), run_dir.display())
            })?;
            t.bzimage = copy;
        }
    }
    Ok(targets)
}

/// A kernel of `spec` from a bundle.
fn from_bundle(bundle: &Path, spec: KernelSpec) -> Result<Target> {
    let name = spec.name();
    let bzimage = kernel::bundle::image(bundle, &name);
    if !bzimage.is_file() {
        bail!(
            "the bundle {} has no {name} kernel ({} is missing); make it with `cargo xtask bundle`",
            bundle.display(),
            bzimage.display()
        );
    }
    Ok(Target {
        name,
        bzimage,
        flavor: spec.flavor,
        debug: spec.debug,
        vmlinux: None,
    })
}

/// Before anything is built: every kernel `--kernel` names must be one the
/// test plan has expectations for.
pub fn check_plan_kernels(source: &SourceConfig, vm: &BootConfig) -> Result<()> {
    let series = Series::load(&source.patches)?;
    for word in &vm.kernels {
        for flavor in kernel::expand_word(word, &series).unwrap_or_default() {
            if !PLAN_KERNELS.contains(&flavor.name()) {
                bail!(
                    "--kernel {word}: the test plan has no expectations for the variant {} (it has them for {}): \
                     add them to selftests (runner::Kernel), or measure it with bench and kselftest",
                    flavor.name(),
                    PLAN_KERNELS.join(", ")
                );
            }
        }
    }
    Ok(())
}

/// A bzImage of the user's own, given by path, asserting `--claim`.
fn own_kernel(path: &str, vm: &BootConfig, series: &Series) -> Result<Target> {
    let p = Path::new(path);
    if !p.is_file() {
        bail!(
            "--kernel {path}: not one of {}, nor an existing bzImage file",
            kernel::known_words(series)
        );
    }
    Ok(Target {
        name: p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
        bzimage: p.to_path_buf(),
        flavor: Flavor::from_name(&vm.claim),
        debug: vm.debug,
        vmlinux: None,
    })
}

/// Two kernels with one name would overwrite each other's logs and reports.
fn unique_names(targets: &mut [Target]) {
    let mut seen = std::collections::HashSet::new();
    for (i, t) in targets.iter_mut().enumerate() {
        if !seen.insert(t.name.clone()) {
            t.name = format!("{}-{}", t.name, i + 1);
            seen.insert(t.name.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmtest_refuses_a_variant_the_plan_does_not_know() {
        use crate::cli::{Cli, Command};
        use clap::Parser;
        let dir = crate::util::tempdir();
        let diff = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n";
        fs::write(dir.join("1.patch"), diff).unwrap();
        fs::write(dir.join("2.patch"), diff).unwrap();
        fs::write(dir.join("series"), "1.patch\n[window]\n2.patch\n").unwrap();
        let check = |kernels: &str| {
            let cli = Cli::try_parse_from(
                ["x", "vmtest", "--kernel", kernels, "--patches"]
                    .iter()
                    .copied()
                    .chain([dir.to_str().unwrap()]),
            )
            .unwrap();
            let Command::Vmtest(a) = cli.command else {
                panic!("not vmtest")
            };
            check_plan_kernels(&a.source.config().unwrap(), &a.vm.boot()).map_err(|e| e.to_string())
        };
        assert_eq!(check("base,patched,/boot/bzImage"), Ok(()));
        for words in ["window", "all"] {
            let err = check(words).unwrap_err();
            assert!(
                err.starts_with(&format!(
                    "--kernel {words}: the test plan has no expectations for the variant window"
                )),
                "{err}"
            );
        }
        fs::remove_dir_all(dir).unwrap();
    }
}
