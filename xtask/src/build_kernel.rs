//! `cargo xtask build-kernel`: the series applied to a kernel tree, and the
//! base and patched kernels built from it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::cache::{write_atomic, Cache};
use crate::kbuild::{self, BuildRequest};
use crate::manifest::{KernelInfo, Manifest, PatchInfo, SourceInfo};
use crate::series::Series;
use crate::source::KernelSource;
use crate::{apply, hostdeps, kconfig, mirror, project};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Which kernels to build.
    #[arg(long, value_enum, default_value_t = Which::Both)]
    pub kernel: Which,
    /// Build the debug variants (KASAN, lockdep, DEBUG_VM, ...) instead.
    #[arg(long)]
    pub debug: bool,
    /// Print the manifest of the kernels as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Where the kernel comes from and where builds are kept; shared by every
/// subcommand that needs kernels.
#[derive(clap::Args, Debug, Clone)]
pub struct SourceArgs {
    /// A kernel tree (directory or git checkout) or a .tar.xz/.tar.gz; it
    /// is only read. Default: Debian's linux-source-6.12.
    #[arg(long, value_name = "PATH")]
    pub kernel_src: Option<PathBuf>,
    /// The cache of trees and builds (default: $BPF_LAZY_MMAP_CACHE, then
    /// $XDG_CACHE_HOME/bpf-lazy-mmap, then ~/.cache/bpf-lazy-mmap).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The patch series to apply (a directory with a `series` file).
    #[arg(long, value_name = "DIR", default_value_os_t = project::root().join("patches"))]
    pub patches: PathBuf,
    /// Parallel make jobs (default: number of CPUs + 1).
    #[arg(long)]
    pub jobs: Option<usize>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Base,
    Patched,
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Base,
    Patched,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSpec {
    pub flavor: Flavor,
    pub debug: bool,
}

impl Flavor {
    /// "base" or "patched": also the side of the plan's P/U cases.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Base => "base",
            Flavor::Patched => "patched",
        }
    }
}

impl KernelSpec {
    pub fn name(&self) -> String {
        let base = self.flavor.name();
        if self.debug {
            format!("{base}-debug")
        } else {
            base.to_string()
        }
    }

    fn build_dir_name(&self) -> &'static str {
        if self.debug {
            "_build-debug"
        } else {
            "_build-default"
        }
    }
}

impl Which {
    pub fn specs(self, debug: bool) -> Vec<KernelSpec> {
        let flavors = match self {
            Which::Base => vec![Flavor::Base],
            Which::Patched => vec![Flavor::Patched],
            Which::Both => vec![Flavor::Base, Flavor::Patched],
        };
        flavors
            .into_iter()
            .map(|flavor| KernelSpec { flavor, debug })
            .collect()
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let manifest = build(&args.source, &args.kernel.specs(args.debug))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&manifest)?);
    } else {
        for k in &manifest.kernels {
            crate::status!("done", "{} {}: {}", k.name, k.version, k.bzimage.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds `specs` (or finds them up to date) and returns their manifest.
pub fn build(args: &SourceArgs, specs: &[KernelSpec]) -> Result<Manifest> {
    build_locked(args, specs).map(|(manifest, _lock)| manifest)
}

/// Like `build`, and also hands back the cache, still locked, so the
/// caller can take what it needs before another run may rebuild it.
pub fn build_locked(args: &SourceArgs, specs: &[KernelSpec]) -> Result<(Manifest, Cache)> {
    let started = Instant::now();
    let source = KernelSource::from_arg(args.kernel_src.as_deref())?;
    let series = Series::load(&args.patches)?;
    let mut deps = hostdeps::BUILD.to_vec();
    if source.is_default() {
        deps.extend_from_slice(hostdeps::DEFAULT_SOURCE);
    }
    hostdeps::ensure(&deps).context("checking the host tools for building a kernel")?;

    let cache = Cache::open(&project::cache_dir(args.cache_dir.as_deref())?)?;
    let key = source.cache_key()?;
    let pristine = source.pristine(&cache, &key)?;
    let dir = cache.source_dir(&key);
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()) + 1);

    let mut kernels = Vec::new();
    let mut base_key = None;
    let mut patched_key = None;
    for spec in specs {
        let name = spec.name();
        let (tree, tree_key, patches) = match spec.flavor {
            Flavor::Base => {
                let tree = dir.join("base");
                if base_key.is_none() {
                    let t = Instant::now();
                    let report =
                        mirror::sync(&pristine, &tree, &Default::default()).with_context(|| {
                            format!("mirroring {} into {}", pristine.display(), tree.display())
                        })?;
                    crate::status!(
                        "base",
                        "tree ready in {:.1?} ({} file(s) relinked)",
                        t.elapsed(),
                        report.linked + report.removed
                    );
                    base_key = Some(report.fingerprint);
                }
                (tree, base_key.clone().unwrap_or_default(), vec![])
            }
            Flavor::Patched => {
                let tree = dir.join("patched");
                if patched_key.is_none() {
                    let t = Instant::now();
                    patched_key = Some(
                        apply::prepare_patched(&pristine, &tree, &series)
                            .context("preparing the patched tree")?,
                    );
                    crate::status!("patched", "tree ready in {:.1?}", t.elapsed());
                }
                let patches = series
                    .patches
                    .iter()
                    .map(|p| PatchInfo {
                        name: p.name.clone(),
                        sha256: p.sha256.clone(),
                    })
                    .collect();
                (tree, patched_key.clone().unwrap_or_default(), patches)
            }
        };
        let build_dir = tree.join(spec.build_dir_name());
        let built = kbuild::build(&BuildRequest {
            name: &name,
            tree: &tree,
            build_dir: build_dir.clone(),
            fragments: kconfig::fragments(spec.debug),
            tree_key,
            ccache_dir: cache.ccache_dir(),
            jobs,
        })?;
        kernels.push(KernelInfo {
            name,
            version: crate::source::kernel_release(&build_dir)?,
            bzimage: built.bzimage,
            vmlinux: built.vmlinux,
            config: built.config,
            build_log: built.log,
            patches,
        });
    }
    let (kind, path) = match &source {
        KernelSource::Directory { path } => ("directory", path.clone()),
        KernelSource::Tarball { path } => ("tarball", path.clone()),
    };
    let manifest = Manifest {
        cache_dir: cache.root().to_path_buf(),
        source: SourceInfo {
            kind: kind.into(),
            path,
            pristine,
        },
        kernels,
    };
    write_atomic(
        &cache.manifest_path(),
        serde_json::to_string_pretty(&manifest)?.as_bytes(),
    )?;
    crate::status!("build-kernel", "done in {:.1?}", started.elapsed());
    Ok((manifest, cache))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names() {
        let names: Vec<String> = Which::Both
            .specs(false)
            .iter()
            .map(KernelSpec::name)
            .collect();
        assert_eq!(names, ["base", "patched"]);
        let names: Vec<String> = Which::Patched
            .specs(true)
            .iter()
            .map(KernelSpec::name)
            .collect();
        assert_eq!(names, ["patched-debug"]);
    }
}
