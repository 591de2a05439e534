//! The kernels of a run: `--kernel` words resolved to bzImages (built
//! when missing) or a bzImage of the user's own, each copied into the
//! run's directory, and checked against what the test plan knows.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use guest_common::protocol::{Inject, Program};

use super::qemu::{AccelChoice, GuestCommand};
use crate::kernel::choice::{self, Chosen, Made, Sides};
use crate::kernel::{self, ExtraConfig, Flavor, KernelConfig, KernelSpec, SourceConfig};

/// How a run boots its kernels: which, debug or not, the accelerator,
/// the plan side a kernel the plan does not know claims, and the
/// overall time limit. Built by the command layer from its flags.
#[derive(Debug, Clone)]
pub struct BootConfig {
    /// `--kernel` words: base, a variant, all, both, or a bzImage path,
    /// for `kernel::choice` to choose from.
    pub kernels: Vec<String>,
    /// The configuration of the kernels it builds.
    pub config: KernelConfig,
    /// The developer's own fragments (`--config`), on top of it.
    pub extra_config: Vec<PathBuf>,
    pub debug: bool,
    pub accel: AccelChoice,
    /// `--claim` (`kernel::claim::Claims`): the plan side a kernel the
    /// plan does not know is held to: a bzImage given by path (None:
    /// mainline), a source's base (None: eager) or a variant of another
    /// series.
    pub claim: Option<String>,
    /// Seconds before the guest is killed; None: the default limits.
    pub timeout: Option<u64>,
    /// Take the kernels from this bundle (`kernel::bundle`), building
    /// nothing.
    pub bundle: Option<PathBuf>,
    /// CPUs, memory, kernel and QEMU arguments of every guest.
    pub machine: super::qemu::Machine,
}

impl BootConfig {
    /// Its kernels (`--kernel`, `--claim`), chosen once for `source` by
    /// the suite's rule.
    pub fn choose(&self, source: &SourceConfig, sides: Sides) -> Result<Chosen> {
        choice::choose(source, &self.kernels, self.claim.as_deref(), sides)
    }
}

/// A kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub bzimage: PathBuf,
    /// What the kernel is: base or a variant (a bzImage by path: what it
    /// plays).
    pub flavor: Flavor,
    /// What the guest is told it is (`bpflab.kernel`), as
    /// `kernel::choice` chose it.
    pub plays: Flavor,
    pub debug: bool,
    /// Where it came from, set when `--kernel` is resolved: later steps
    /// read it rather than guess it from the paths.
    pub provenance: Provenance,
}

/// Where a kernel of a run came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provenance {
    /// Built from the source and the series here: its vmlinux is in the
    /// build tree.
    Built { vmlinux: PathBuf },
    /// Built by the harness, taken from a bundle (`kernel::bundle`).
    Bundle,
    /// A bzImage of the user's own, by the path `--kernel` gave: the run
    /// boots a copy of it, and this path boots it again.
    Image(PathBuf),
}

impl Target {
    /// The kernel's vmlinux in its build tree, for kernels built here.
    pub fn vmlinux(&self) -> Option<&Path> {
        match &self.provenance {
            Provenance::Built { vmlinux } => Some(vmlinux),
            Provenance::Bundle | Provenance::Image(_) => None,
        }
    }

    /// Built by the harness, so with its configuration (a serial console
    /// among it), whether here or into a bundle.
    pub fn is_ours(&self) -> bool {
        !matches!(self.provenance, Provenance::Image(_))
    }

    /// What the guest runs on this kernel.
    pub fn guest(
        &self,
        program: Program,
        args: Vec<String>,
        inject: Option<Inject>,
    ) -> GuestCommand {
        GuestCommand {
            program,
            kernel: self.plays.name().into(),
            args,
            inject,
        }
    }
}

/// The chosen kernels as bzImages, building what is missing, each
/// copied into `run_dir` while the cache is still locked: a later run may
/// rebuild the cache's kernels while this one boots them.
pub fn targets(
    source: &SourceConfig,
    chosen: &Chosen,
    vm: &BootConfig,
    run_dir: &Path,
) -> Result<Vec<Target>> {
    let extra = ExtraConfig::load(&vm.extra_config)?;
    let mut specs: Vec<(usize, KernelSpec, Flavor)> = Vec::new();
    let mut out: Vec<(usize, Target)> = Vec::new();
    for (i, k) in chosen.kernels.iter().enumerate() {
        match &k.made {
            Made::Image(path) => out.push((i, own_kernel(path, &k.plays, vm.debug))),
            Made::Built(flavor) => {
                let spec = KernelSpec {
                    flavor: flavor.clone(),
                    config: vm.config,
                    debug: vm.debug,
                    extra: extra.clone(),
                };
                specs.push((i, spec, k.plays.clone()));
            }
        }
    }
    if let (Some(bundle), false) = (&vm.bundle, specs.is_empty()) {
        let now = kernel::bundle_manifest::origin(source, vm.config)?;
        kernel::bundle_manifest::check(bundle, &now)?;
        for (i, spec, plays) in specs.drain(..) {
            out.push((i, from_bundle(bundle, spec, plays)?));
        }
    }
    // Held until the built kernels are copied out of the cache.
    let mut lock = None;
    if !specs.is_empty() {
        let only: Vec<KernelSpec> = specs.iter().map(|(_, s, _)| s.clone()).collect();
        let (manifest, held) = kernel::build_locked(source, &only)?;
        lock = Some(held);
        for ((i, spec, plays), info) in specs.iter().zip(manifest.kernels) {
            let target = Target {
                name: info.name,
                bzimage: info.bzimage,
                flavor: spec.flavor.clone(),
                plays: plays.clone(),
                debug: spec.debug,
                provenance: Provenance::Built {
                    vmlinux: info.vmlinux,
                },
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
fn from_bundle(bundle: &Path, spec: KernelSpec, plays: Flavor) -> Result<Target> {
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
        plays,
        debug: spec.debug,
        provenance: Provenance::Bundle,
    })
}

/// A bzImage of the user's own, given by path, playing what its claim
/// chose.
fn own_kernel(path: &Path, plays: &Flavor, debug: bool) -> Target {
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    Target {
        name,
        bzimage: path.to_path_buf(),
        flavor: plays.clone(),
        plays: plays.clone(),
        debug,
        provenance: Provenance::Image(path.to_path_buf()),
    }
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

    fn target(provenance: Provenance) -> Target {
        Target {
            name: "k".into(),
            bzimage: "/run/k.bzImage".into(),
            flavor: Flavor::from_name("mainline"),
            plays: Flavor::from_name("mainline"),
            debug: false,
            provenance,
        }
    }

    /// A bundle's kernels were built by the harness too: a silent console
    /// that timed out is a hang, not a kernel without a serial console
    /// (`boot_log::missing_option`); only a built one has a vmlinux.
    #[test]
    fn the_provenance_says_whose_kernel_and_where_its_vmlinux_is() {
        let built = target(Provenance::Built {
            vmlinux: "/cache/k/vmlinux".into(),
        });
        assert!(built.is_ours());
        assert_eq!(built.vmlinux(), Some(Path::new("/cache/k/vmlinux")));
        let bundled = target(Provenance::Bundle);
        assert!(bundled.is_ours());
        assert_eq!(bundled.vmlinux(), None);
        let image = target(Provenance::Image("./m.bzImage".into()));
        assert!(!image.is_ours());
        assert_eq!(image.vmlinux(), None);
    }
}
