//! From a kernel source to built kernels: the source and its pristine
//! tree, the hard-link mirrors, the series applied, the configuration, the
//! build, and the manifest that records what was built.

pub mod apply;
pub mod cache;
pub mod hygiene;
pub mod kbuild;
pub mod kconfig;
pub mod manifest;
pub mod mirror;
pub mod progress;
pub mod series;
pub mod source;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use self::cache::Cache;
use self::kbuild::BuildRequest;
use self::manifest::{KernelInfo, Manifest, PatchInfo, SourceInfo};
use self::series::Series;
use self::source::KernelSource;
use crate::cli::SourceArgs;
use crate::util::write_atomic;
use crate::{hostdeps, project};

/// The two kernels the project compares.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Base,
    Patched,
}

/// One kernel to build: a flavor, plain or with the debug options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSpec {
    pub flavor: Flavor,
    pub debug: bool,
}

impl Flavor {
    /// "base" or "patched": also the side of the plan's P/U cases, as the
    /// guest reads it from its command line.
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

/// Builds `specs` (or finds them up to date) and returns their manifest.
pub fn build(args: &SourceArgs, specs: &[KernelSpec]) -> Result<Manifest> {
    build_locked(args, specs).map(|(manifest, _lock)| manifest)
}

/// Like `build`, and also hands back the cache, still locked, so the
/// caller can take what it needs before another run may rebuild it.
pub fn build_locked(args: &SourceArgs, specs: &[KernelSpec]) -> Result<(Manifest, Cache)> {
    let started = Instant::now();
    let Opened {
        source,
        series,
        cache,
        key,
        pristine,
    } = open(args)?;
    let mut trees = Trees {
        dir: cache.source_dir(&key),
        pristine: &pristine,
        series: &series,
        base_key: None,
        patched_key: None,
    };
    let jobs = jobs(args);
    let mut kernels = Vec::new();
    for spec in specs {
        let tree = trees.prepare(spec.flavor)?;
        kernels.push(build_one(spec, tree, &cache, jobs)?);
    }
    let manifest = Manifest {
        cache_dir: cache.root().to_path_buf(),
        source: source_info(&source, &pristine),
        kernels,
    };
    write_atomic(
        &cache.manifest_path(),
        serde_json::to_string_pretty(&manifest)?.as_bytes(),
    )?;
    crate::status!("build-kernel", "done in {:.1?}", started.elapsed());
    Ok((manifest, cache))
}

/// Parallel make jobs: `--jobs`, else the CPUs + 1.
pub fn jobs(args: &SourceArgs) -> usize {
    args.jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()) + 1)
}

/// Base and patched trees of their own (`<source>/check/`), mirrored and
/// patched but not built, for checks that compile a few objects: a series
/// checked there never touches the trees the kernels are built from. The
/// cache stays locked while the value lives.
pub struct PreparedTrees {
    pub pristine: PathBuf,
    pub base: PathBuf,
    pub patched: PathBuf,
    /// The source's directory in the cache (it holds both trees).
    pub source_dir: PathBuf,
    pub series: Series,
    _lock: Cache,
}

pub fn prepare_trees(args: &SourceArgs) -> Result<PreparedTrees> {
    let Opened {
        series,
        cache,
        key,
        pristine,
        ..
    } = open(args)?;
    let source_dir = cache.source_dir(&key);
    let mut trees = Trees {
        dir: source_dir.join("check"),
        pristine: &pristine,
        series: &series,
        base_key: None,
        patched_key: None,
    };
    let base = trees.prepare(Flavor::Base)?.path;
    let patched = trees.prepare(Flavor::Patched)?.path;
    Ok(PreparedTrees {
        pristine,
        base,
        patched,
        source_dir,
        series,
        _lock: cache,
    })
}

/// A source and series ready to work on: the host tools checked, the
/// cache locked, the pristine tree in place.
struct Opened {
    source: KernelSource,
    series: Series,
    cache: Cache,
    key: String,
    pristine: PathBuf,
}

fn open(args: &SourceArgs) -> Result<Opened> {
    let source = KernelSource::from_arg(args.kernel_src.as_deref())?;
    let series = Series::load(&args.patches)?;
    check_host_tools(&source)?;
    let cache = Cache::open(&project::cache_dir(args.cache_dir.as_deref())?)?;
    let key = source.cache_key()?;
    let pristine = source.pristine(&cache, &key)?;
    Ok(Opened {
        source,
        series,
        cache,
        key,
        pristine,
    })
}

fn check_host_tools(source: &KernelSource) -> Result<()> {
    let mut deps = hostdeps::BUILD.to_vec();
    if source.is_default() {
        deps.extend_from_slice(hostdeps::DEFAULT_SOURCE);
    }
    hostdeps::ensure(&deps).context("checking the host tools for building a kernel")
}

fn source_info(source: &KernelSource, pristine: &Path) -> SourceInfo {
    let (kind, path) = match source {
        KernelSource::Directory { path } => ("directory", path.clone()),
        KernelSource::Tarball { path } => ("tarball", path.clone()),
    };
    SourceInfo {
        kind: kind.into(),
        path,
        pristine: pristine.to_path_buf(),
    }
}

/// The base and patched trees of one source, each brought up to date at
/// most once per run.
struct Trees<'a> {
    dir: PathBuf,
    pristine: &'a Path,
    series: &'a Series,
    base_key: Option<String>,
    patched_key: Option<String>,
}

/// A tree ready to build: where it is, its state key, and its patches.
struct ReadyTree {
    path: PathBuf,
    key: String,
    patches: Vec<PatchInfo>,
}

impl Trees<'_> {
    fn prepare(&mut self, flavor: Flavor) -> Result<ReadyTree> {
        let path = self.dir.join(flavor.name());
        let t = Instant::now();
        match flavor {
            Flavor::Base if self.base_key.is_none() => {
                let report =
                    mirror::sync(self.pristine, &path, &Default::default()).with_context(|| {
                        format!(
                            "mirroring {} into {}",
                            self.pristine.display(),
                            path.display()
                        )
                    })?;
                crate::status!(
                    "base",
                    "tree ready in {:.1?} ({} file(s) relinked)",
                    t.elapsed(),
                    report.linked + report.removed
                );
                self.base_key = Some(report.fingerprint);
            }
            Flavor::Patched if self.patched_key.is_none() => {
                let key = apply::prepare_patched(self.pristine, &path, self.series)
                    .context("preparing the patched tree")?;
                crate::status!("patched", "tree ready in {:.1?}", t.elapsed());
                self.patched_key = Some(key);
            }
            _ => {}
        }
        let (key, patches) = match flavor {
            Flavor::Base => (&self.base_key, vec![]),
            Flavor::Patched => (&self.patched_key, self.patch_infos()),
        };
        Ok(ReadyTree {
            path,
            key: key.clone().unwrap_or_default(),
            patches,
        })
    }

    fn patch_infos(&self) -> Vec<PatchInfo> {
        self.series
            .patches
            .iter()
            .map(|p| PatchInfo {
                name: p.name.clone(),
                sha256: p.sha256.clone(),
            })
            .collect()
    }
}

fn build_one(spec: &KernelSpec, tree: ReadyTree, cache: &Cache, jobs: usize) -> Result<KernelInfo> {
    let name = spec.name();
    let build_dir = tree.path.join(spec.build_dir_name());
    let built = kbuild::build(&BuildRequest {
        name: &name,
        tree: &tree.path,
        build_dir: build_dir.clone(),
        fragments: kconfig::fragments(spec.debug),
        tree_key: tree.key,
        ccache_dir: cache.ccache_dir(),
        jobs,
    })?;
    Ok(KernelInfo {
        name,
        version: source::kernel_release(&build_dir)?,
        bzimage: built.bzimage,
        vmlinux: built.vmlinux,
        config: built.config,
        build_log: built.log,
        patches: tree.patches,
    })
}
