//! From a kernel source to built kernels: the source and its pristine
//! tree (a tarball, a tree, or a git branch's base: `git`), the hard-link
//! mirrors, the series applied, the configuration, the build, and the
//! manifest that records what was built; and which series the suites of
//! this one's own take (`own_series`).

pub mod apply;
pub mod bundle;
pub mod bundle_manifest;
pub mod cache;
pub mod choice;
pub mod claim;
pub mod debian;
pub mod disk_usage;
pub mod each_patch;
pub mod extra;
pub mod first_build;
pub mod git;
pub mod hygiene;
pub mod kbuild;
pub mod kconfig;
pub mod manifest;
pub mod mirror;
pub mod own_series;
pub mod progress;
pub mod series;
pub mod source;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result};

use self::cache::{Cache, TreeLock};
pub use self::extra::ExtraConfig;
use self::kbuild::BuildRequest;
use self::manifest::{KernelInfo, Manifest, PatchInfo, SourceInfo};
use self::series::{BaseName, Series};
use self::source::KernelSource;
use crate::util::write_atomic;

/// Where the kernel comes from and where its trees and builds go: what
/// every kernel operation takes, built by the command layer from its flags.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// A kernel tree or tarball; None: Debian's package `debian` names.
    pub kernel_src: Option<PathBuf>,
    /// `--source`: which of Debian's linux-source packages, when
    /// `kernel_src` is None.
    pub debian: debian::Spec,
    /// The cache of trees and builds (resolved: `project::cache_dir`).
    pub cache_dir: PathBuf,
    /// The patch series (a directory with a `series` file).
    pub patches: PathBuf,
    /// Parallel make jobs.
    pub jobs: usize,
    /// `--base`: the source is `kernel_src`'s commit, the series its
    /// branch's (`patches` then holds it, made by `git::series`).
    pub git: Option<git::GitRange>,
}

/// The Debian source the project's series (`patches/`) is rebased on:
/// on another the baseline's kernels are built without it.
pub const SERIES_SOURCE: &str = "7.3";

impl SourceConfig {
    /// The series this source builds: for one of Debian's packages the
    /// harness keeps a baseline of (`sources/debian-X.Y`), its eager
    /// base and mainline variant, then the series when it goes onto this
    /// source (the project's own onto `SERIES_SOURCE` only, any other
    /// `--patches` anywhere); else `patches` alone, on the tree as it is.
    pub fn series(&self) -> Result<Series> {
        let own = Series::load(&self.patches)?;
        let Some(dir) = self.baseline_dir() else {
            return Ok(own);
        };
        let project_series = crate::project::root().join("patches");
        let is_projects =
            fs::canonicalize(&self.patches).ok() == fs::canonicalize(&project_series).ok();
        let takes = !is_projects || self.debian.series == SERIES_SOURCE;
        Series::baseline(&dir, takes.then_some(own))
    }

    /// The harness's baseline of this source's Debian package, if it
    /// keeps one.
    pub fn baseline_dir(&self) -> Option<PathBuf> {
        if !self.debian_source() {
            return None;
        }
        let dir = crate::project::root()
            .join("sources")
            .join(format!("debian-{}", self.debian.series));
        dir.is_dir().then_some(dir)
    }

    /// Whether the source is one of Debian's packages, which the host
    /// tools then include (apt's client fetches it).
    pub fn debian_source(&self) -> bool {
        self.kernel_src.is_none()
    }
}

/// The series the project's default source builds: the baseline of
/// Debian's `SERIES_SOURCE` (eager, mainline), then patches/.
pub fn project_series() -> Result<Series> {
    let root = crate::project::root();
    let dir = root.join("sources").join(format!("debian-{SERIES_SOURCE}"));
    Series::baseline(&dir, Some(Series::load(&root.join("patches"))?))
}

/// Every baseline the harness keeps of a Debian package
/// (`sources/debian-X.Y`).
pub fn baseline_dirs() -> Result<Vec<PathBuf>> {
    let root = crate::project::root().join("sources");
    let mut dirs = Vec::new();
    for entry in fs::read_dir(&root).with_context(|| format!("reading {}", root.display()))? {
        let path = entry?.path();
        if path.join("series").is_file() {
            dirs.push(path);
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// Make jobs when none are asked for: the CPUs + 1.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) + 1
}

/// Which kernel: the base (the source as it is, or a Debian package's
/// eager baseline), or a variant of the series.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Flavor {
    Base(BaseName),
    /// A variant of the series by name: "mainline", "prefault", ...
    Variant(String),
}

/// Which configuration a kernel is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
pub enum KernelConfig {
    /// `kconfig/*.config` onto allnoconfig: what the test plan, the bench
    /// and the default sets of the BPF selftests need; minutes to build.
    #[default]
    Lean,
    /// BPF CI's: the tree's own `tools/testing/selftests/bpf/config`,
    /// `config.vm` and `config.x86_64`, then ours, onto the defaults:
    /// every BPF selftest builds and can run; several times as long.
    #[value(name = "bpf-ci")]
    BpfCi,
}

/// One kernel to build: a flavor, its configuration, plain or with the
/// debug options, and the developer's own fragments on top.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSpec {
    pub flavor: Flavor,
    pub config: KernelConfig,
    pub debug: bool,
    pub extra: ExtraConfig,
}

impl Flavor {
    pub fn from_name(name: &str) -> Flavor {
        match name {
            "base" => Flavor::Base(BaseName::Base),
            "eager" => Flavor::Base(BaseName::Eager),
            name => Flavor::Variant(name.to_string()),
        }
    }

    /// "base", "eager" or the variant's name: also the tree's directory,
    /// and what the guest reads from its command line to pick its
    /// expectations.
    pub fn name(&self) -> &str {
        match self {
            Flavor::Base(b) => b.as_str(),
            Flavor::Variant(name) => name,
        }
    }

    pub fn is_base(&self) -> bool {
        matches!(self, Flavor::Base(_))
    }
}

/// The kernels one `--kernel` word names: the base kernel (`base`, or a
/// Debian baseline's `eager`), a variant of `series`, `all` (base and
/// every variant) or `both` (base and the first variant). None for any
/// other word.
pub fn expand_word(word: &str, series: &Series) -> Option<Vec<Flavor>> {
    let base = Flavor::Base(series.base.name);
    let variants = || {
        series
            .variants
            .iter()
            .map(|v| Flavor::Variant(v.name.clone()))
    };
    let first = || Flavor::Variant(series.variants[0].name.clone());
    match word {
        w if w == base.name() => Some(vec![base]),
        "all" => Some(std::iter::once(base).chain(variants()).collect()),
        "both" => Some(vec![base, first()]),
        name if series.variant(name).is_some() => Some(vec![Flavor::from_name(name)]),
        _ => None,
    }
}

/// Whether `word` names several kernels (`all`, `both`).
pub fn names_several(word: &str) -> bool {
    matches!(word, "all" | "both")
}

/// What `expand_word` accepts, for an error message.
pub fn known_words(series: &Series) -> String {
    format!(
        "{}, {} (the series' variants), all or both",
        series.base.name.as_str(),
        series.variant_names().join(", ")
    )
}

/// `--kernel` words (no paths) to kernels of `config`, `debug` or not,
/// with `extra` fragments, each once.
pub fn specs_for(
    words: &[String],
    series: &Series,
    (config, debug): (KernelConfig, bool),
    extra: &ExtraConfig,
) -> Result<Vec<KernelSpec>> {
    let mut specs: Vec<KernelSpec> = Vec::new();
    for word in words {
        let flavors = expand_word(word, series)
            .with_context(|| format!("--kernel {word}: not one of {}", known_words(series)))?;
        for flavor in flavors {
            let spec = KernelSpec {
                flavor,
                config,
                debug,
                extra: extra.clone(),
            };
            if !specs.contains(&spec) {
                specs.push(spec);
            }
        }
    }
    Ok(specs)
}

impl KernelSpec {
    /// `eager`, `mainline-debug`, `prefault-bpfci`, `base-bpfci-debug`,
    /// `mainline+net` (with `--config net.config`), ...
    pub fn name(&self) -> String {
        format!(
            "{}{}{}",
            self.flavor.name(),
            self.suffix(),
            self.extra.name_suffix()
        )
    }

    /// What the name adds to the flavor's: the config, then debug.
    fn suffix(&self) -> &'static str {
        match (self.config, self.debug) {
            (KernelConfig::Lean, false) => "",
            (KernelConfig::Lean, true) => "-debug",
            (KernelConfig::BpfCi, false) => "-bpfci",
            (KernelConfig::BpfCi, true) => "-bpfci-debug",
        }
    }

    fn build_dir_name(&self) -> String {
        let dir = match self.suffix() {
            "" => "_build-default".to_string(),
            s => format!("_build{s}"),
        };
        dir + &self.extra.dir_suffix()
    }
}

/// Builds `specs` (or finds them up to date) and returns their manifest.
pub fn build(args: &SourceConfig, specs: &[KernelSpec]) -> Result<Manifest> {
    build_locked(args, specs).map(|(manifest, _held)| manifest)
}

/// Like `build`, and also hands back the locks of the kernels' trees, so
/// the caller can take what it needs before another run may rebuild them.
pub fn build_locked(args: &SourceConfig, specs: &[KernelSpec]) -> Result<(Manifest, TreeLocks)> {
    in_cache(args, || build_specs(args, specs))
}

/// The locks of trees in the cache, held while the value lives: no other
/// run prepares, builds or prunes them meanwhile.
#[derive(Debug)]
pub struct TreeLocks {
    _trees: Vec<TreeLock>,
}

/// Holds the trees (or work directories: `kselftest`, `check`) `names`
/// of `args`'s source, waiting for the runs that hold them. The caller
/// holds no other lock of the cache.
pub fn hold(args: &SourceConfig, names: &[&str]) -> Result<TreeLocks> {
    in_cache(args, || {
        let Opened { mut cache, key, .. } = open(args, None)?;
        lock_trees(&mut cache, &key, names)
    })
}

/// The work directory `name` of another source in the cache that holds
/// `done` (a path in it), the one whose `done` is newest, held; for a
/// first build of `args`'s to start from a copy of it. None when there is
/// none, or a run holds it: a first build does without rather than wait,
/// so two runs copying from each other's never wait for each other.
pub fn hold_other_work(
    args: &SourceConfig,
    name: &str,
    done: &Path,
) -> Result<Option<(PathBuf, TreeLocks)>> {
    in_cache(args, || {
        let Opened { mut cache, key, .. } = open(args, None)?;
        cache.release();
        let sources = cache.root().join("sources");
        let Some(other) = newest_other(&sources, &key, &Path::new(name).join(done))? else {
            return Ok(None);
        };
        let Some(lock) = cache.try_lock_tree(&other, name)? else {
            return Ok(None);
        };
        let held = TreeLocks { _trees: vec![lock] };
        Ok(Some((sources.join(other).join(name), held)))
    })
}

/// Of the sources under `sources` but `own`, the one whose `rel` is the
/// newest file.
fn newest_other(sources: &Path, own: &str, rel: &Path) -> Result<Option<String>> {
    let entries = match fs::read_dir(sources) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", sources.display())),
    };
    let mut newest: Option<(SystemTime, String)> = None;
    for entry in entries.flatten() {
        let key = entry.file_name().to_string_lossy().into_owned();
        let modified = fs::metadata(entry.path().join(rel)).and_then(|m| m.modified());
        if let (false, Ok(t)) = (key == own, modified) {
            if newest.as_ref().is_none_or(|(n, _)| t > *n) {
                newest = Some((t, key));
            }
        }
    }
    Ok(newest.map(|(_, key)| key))
}

/// Lets the cache's lock go and takes the trees' locks, in the order of
/// their names, so that two runs that want the same trees never wait for
/// each other each holding one.
fn lock_trees(cache: &mut Cache, key: &str, names: &[&str]) -> Result<TreeLocks> {
    cache.release();
    let mut names = names.to_vec();
    names.sort_unstable();
    names.dedup();
    let trees = names
        .iter()
        .map(|n| cache.lock_tree(key, n))
        .collect::<Result<_>>()?;
    Ok(TreeLocks { _trees: trees })
}

fn build_specs(args: &SourceConfig, specs: &[KernelSpec]) -> Result<(Manifest, TreeLocks)> {
    let started = Instant::now();
    let Opened {
        source,
        series,
        mut cache,
        key,
        pristine,
    } = open(args, None)?;
    let names: Vec<&str> = specs.iter().map(|s| s.flavor.name()).collect();
    let held = lock_trees(&mut cache, &key, &names)?;
    let mut trees = Trees::new(cache.source_dir(&key), &pristine, &series);
    let jobs = args.jobs;
    let mut kernels = Vec::new();
    let mut before: Option<first_build::PreviousBuild> = None;
    for spec in specs {
        // Only a branch's pristine tree is the cache's alone to realign
        // (a checkout's is the developer's, hard-linked).
        let other_base = match &source {
            KernelSource::Git { .. } => first_build::other_base(&cache, &key, spec, &pristine)?,
            _ => None,
        };
        let tree = trees.prepare(&spec.flavor)?;
        let path = tree.path.clone();
        let variant = match &spec.flavor {
            Flavor::Variant(v) => series.variant(v),
            Flavor::Base(_) => None,
        };
        if let Some(other) = other_base {
            first_build::from_other_base(other, spec, &path);
        }
        if let (Some(b), Some(v)) = (&before, variant) {
            let touched = series.upto(v).touched_files();
            first_build::from_earlier(b, (spec, v.patches), &path, &touched)?;
        }
        kernels.push(build_one(spec, tree, &cache, jobs)?);
        before = Some(first_build::PreviousBuild {
            spec,
            tree: path,
            patches: variant.map_or(0, |v| v.patches),
        });
    }
    let manifest = Manifest {
        cache_dir: cache.root().to_path_buf(),
        source: source_info(&source, &pristine),
        kernels,
    };
    // The manifest is the cache's: written under its lock, which a run
    // holding trees may wait for (its holders never wait for a tree).
    cache.relock()?;
    write_atomic(
        &cache.manifest_path(),
        serde_json::to_string_pretty(&manifest)?.as_bytes(),
    )?;
    crate::status!("build-kernel", "done in {:.1?}", started.elapsed());
    Ok((manifest, held))
}

/// Builds the one variant of `series`, a series of the caller's making
/// (a mutant's: `Series::variant_with`), in its own tree like any
/// variant, so it rebuilds incrementally from the last one. The bzImage
/// is copied to `keep` before the tree is let go, and the returned info
/// names the copy: another run may build its own series in the tree as
/// soon as it is free, and the caller boots what it built. The inner
/// error is the series' (it does not apply or build); the outer one the
/// cache's. The cache's manifest is left alone: it lists the project's
/// kernels.
pub fn build_series(
    args: &SourceConfig,
    series: Series,
    config: (KernelConfig, bool),
    keep: &Path,
) -> Result<Result<KernelInfo>> {
    in_cache(args, || build_one_series(args, series, config, keep))
}

fn build_one_series(
    args: &SourceConfig,
    series: Series,
    (config, debug): (KernelConfig, bool),
    keep: &Path,
) -> Result<Result<KernelInfo>> {
    let Opened {
        series,
        mut cache,
        key,
        pristine,
        ..
    } = open(args, Some(series))?;
    let spec = KernelSpec {
        flavor: Flavor::Variant(series.whole().name.clone()),
        config,
        debug,
        extra: ExtraConfig::default(),
    };
    let _held = lock_trees(&mut cache, &key, &[spec.flavor.name()])?;
    let mut trees = Trees::new(cache.source_dir(&key), &pristine, &series);
    let built = trees
        .prepare(&spec.flavor)
        .and_then(|tree| build_one(&spec, tree, &cache, args.jobs));
    let Ok(mut built) = built else {
        return Ok(built);
    };
    std::fs::copy(&built.bzimage, keep)
        .with_context(|| format!("copying {} to {}", built.bzimage.display(), keep.display()))?;
    built.bzimage = keep.to_path_buf();
    Ok(Ok(built))
}

/// Two trees of their own (`<source>/check/`), mirrored and patched but
/// not built, for checks that compile a few objects: `base`, what the
/// series' own patches apply to (a Debian baseline's mainline, or the
/// base), and `patched`, with the whole series. A series checked there
/// never touches the trees the kernels are built from. They stay locked
/// while the value lives.
pub struct PreparedTrees {
    pub pristine: PathBuf,
    pub base: PathBuf,
    pub patched: PathBuf,
    /// Where each prefix of the series' own patches is built in turn
    /// (`each_patch`).
    pub each_patch: PathBuf,
    /// The source's directory in the cache (it holds both trees).
    pub source_dir: PathBuf,
    pub series: Series,
    _held: TreeLocks,
}

pub fn prepare_trees(args: &SourceConfig) -> Result<PreparedTrees> {
    in_cache(args, || prepare_check_trees(args))
}

fn prepare_check_trees(args: &SourceConfig) -> Result<PreparedTrees> {
    let Opened {
        series,
        mut cache,
        key,
        pristine,
        ..
    } = open(args, None)?;
    // Both trees, and the git repository of the source the checks make.
    let held = lock_trees(&mut cache, &key, &[CHECK_DIR])?;
    let source_dir = cache.source_dir(&key);
    let mut trees = Trees::new(source_dir.join(CHECK_DIR), &pristine, &series);
    // What the series' own patches apply to: a baseline's mainline, or
    // the base.
    let start = match series.start() {
        Some(v) => Flavor::Variant(v.name.clone()),
        None => Flavor::Base(series.base.name),
    };
    let base = trees.prepare(&start)?.path;
    let whole = Flavor::Variant(series.whole().name.clone());
    let patched = trees.prepare(&whole)?.path;
    Ok(PreparedTrees {
        pristine,
        base,
        patched,
        each_patch: source_dir.join(CHECK_DIR).join("each-patch"),
        source_dir,
        series,
        _held: held,
    })
}

/// The check trees' directory in a source's, and the name of its lock.
const CHECK_DIR: &str = "check";

/// Runs `work` on the pristine tree of `args`'s source and the source's
/// directory in the cache (for what is built from the tree beside the
/// kernels: the fuzzer's libbpf), with the cache locked.
pub fn with_pristine<T>(
    args: &SourceConfig,
    work: impl FnOnce(&Path, &Path) -> Result<T>,
) -> Result<T> {
    in_cache(args, || {
        let Opened {
            cache,
            key,
            pristine,
            ..
        } = open(args, None)?;
        work(&pristine, &cache.source_dir(&key))
    })
}

/// Runs `work`, which writes into the cache; a failure on a full disk
/// becomes the one line that says so. Only the public entry points call
/// it, so an error is explained once.
fn in_cache<T>(args: &SourceConfig, work: impl FnOnce() -> Result<T>) -> Result<T> {
    work().map_err(|e| disk_usage::explain_disk_full(&args.cache_dir, e))
}

/// A source and series ready to work on: the cache locked, the pristine
/// tree in place. (The host tools are the command's to ensure.)
struct Opened {
    source: KernelSource,
    series: Series,
    cache: Cache,
    key: String,
    pristine: PathBuf,
}

/// `series`, or the one `args.patches` holds.
fn open(args: &SourceConfig, series: Option<Series>) -> Result<Opened> {
    let series = match series {
        Some(s) => s,
        None => args.series()?,
    };
    let cache = Cache::open(&args.cache_dir)?;
    let source = resolve(args, &cache)?;
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

/// The source `args` names, a Debian one fetched (or found in `cache`).
fn resolve(args: &SourceConfig, cache: &Cache) -> Result<KernelSource> {
    Ok(match (&args.git, &args.kernel_src) {
        (Some(range), Some(repo)) => KernelSource::git(repo, &range.base)?,
        (_, Some(path)) => KernelSource::from_path(path)?,
        (_, None) => KernelSource::Debian {
            release: debian::fetch(cache.root(), &args.debian)?,
        },
    })
}

/// What identifies `args`'s kernel source as a build takes it: a Debian
/// upload's package and exact version, a git commit, a tarball's path,
/// size and mtime, a directory's path (not its contents). Resolves a
/// Debian source as a build does.
pub fn source_identity(args: &SourceConfig) -> Result<String> {
    in_cache(args, || {
        let cache = Cache::open(&args.cache_dir)?;
        let source = resolve(args, &cache)?;
        let package = match &source {
            KernelSource::Debian { release } => format!(" {} {}", release.package, release.version),
            _ => String::new(),
        };
        Ok(format!("{}{package}", source.cache_key()?))
    })
}

fn source_info(source: &KernelSource, pristine: &Path) -> SourceInfo {
    let (kind, path) = match source {
        KernelSource::Directory { path } => ("directory", path.clone()),
        KernelSource::Tarball { path } => ("tarball", path.clone()),
        KernelSource::Git { repo, .. } => ("git", repo.clone()),
        KernelSource::Debian { release } => ("debian", release.tarball.clone()),
    };
    let package = match source {
        KernelSource::Debian { release } => Some(manifest::DebianPackage {
            name: release.package.clone(),
            version: release.version.clone(),
            suite: release.suite.clone(),
        }),
        _ => None,
    };
    SourceInfo {
        kind: kind.into(),
        path,
        pristine: pristine.to_path_buf(),
        package,
    }
}

/// The trees of one source (base and each variant of the series), each
/// brought up to date at most once per run.
struct Trees<'a> {
    dir: PathBuf,
    pristine: &'a Path,
    series: &'a Series,
    /// State keys of the trees brought up to date so far, by name.
    keys: HashMap<String, String>,
}

/// A tree ready to build: where it is, its state key, and its patches.
struct ReadyTree {
    path: PathBuf,
    key: String,
    patches: Vec<PatchInfo>,
}

impl<'a> Trees<'a> {
    fn new(dir: PathBuf, pristine: &'a Path, series: &'a Series) -> Trees<'a> {
        Trees {
            dir,
            pristine,
            series,
            keys: HashMap::new(),
        }
    }

    fn prepare(&mut self, flavor: &Flavor) -> Result<ReadyTree> {
        let name = flavor.name();
        let path = self.dir.join(name);
        let series = match flavor {
            Flavor::Base(_) if !self.series.base.patches.is_empty() => {
                Some(self.series.base_only())
            }
            Flavor::Base(_) => None,
            Flavor::Variant(v) => {
                let variant = self.series.variant(v).with_context(|| {
                    format!(
                        "no kernel variant {v}: the series builds {}",
                        self.series.variant_names().join(", ")
                    )
                })?;
                Some(self.series.upto(variant))
            }
        };
        if !self.keys.contains_key(name) {
            let t = Instant::now();
            let key = match &series {
                None => self.mirror_base(&path, name)?,
                Some(s) => apply::prepare_patched(self.pristine, &path, s)
                    .with_context(|| format!("preparing the {name} tree"))?,
            };
            crate::status!(name, "tree ready in {:.1?}", t.elapsed());
            self.keys.insert(name.to_string(), key);
        }
        Ok(ReadyTree {
            key: self.keys[name].clone(),
            patches: series.map_or_else(Vec::new, |s| patch_infos(&s)),
            path,
        })
    }

    fn mirror_base(&self, path: &Path, name: &str) -> Result<String> {
        let report = mirror::sync(self.pristine, path, &Default::default()).with_context(|| {
            format!(
                "mirroring {} into {}",
                self.pristine.display(),
                path.display()
            )
        })?;
        crate::status!(name, "{} file(s) relinked", report.linked + report.removed);
        Ok(report.fingerprint)
    }
}

/// Every patch a kernel's tree was given, the base's first.
fn patch_infos(series: &Series) -> Vec<PatchInfo> {
    series
        .applied()
        .iter()
        .map(|p| PatchInfo {
            name: p.name.clone(),
            sha256: p.sha256.clone(),
        })
        .collect()
}

fn build_one(spec: &KernelSpec, tree: ReadyTree, cache: &Cache, jobs: usize) -> Result<KernelInfo> {
    let name = spec.name();
    let build_dir = tree.path.join(spec.build_dir_name());
    let copied = first_build::from_plain(spec, &tree.path, &build_dir)?;
    let (base, mut fragments) = kconfig::plan(&tree.path, spec.config, spec.debug)?;
    // The developer's, after ours: a later fragment wins.
    fragments.extend(
        spec.extra
            .fragments()
            .iter()
            .map(|p| kconfig::Fragment::new(p.clone(), kconfig::Origin::Developer)),
    );
    let built = kbuild::build(&BuildRequest {
        name: &name,
        tree: &tree.path,
        build_dir: build_dir.clone(),
        base,
        fragments,
        tree_key: tree.key,
        ccache_dir: cache.ccache_dir(),
        jobs,
    });
    let built = match built {
        Ok(b) => b,
        Err(e) => {
            // A fragment that does not configure leaves no copy behind.
            if copied {
                let _ = std::fs::remove_dir_all(&build_dir);
            }
            return Err(e);
        }
    };
    Ok(KernelInfo {
        name,
        version: source::kernel_release(&build_dir)?,
        bzimage: built.bzimage,
        vmlinux: built.vmlinux,
        config: built.config,
        build_log: built.log,
        patches: tree.patches,
        config_not_taken: built.config_not_taken,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(flavors: &[Flavor]) -> Vec<&str> {
        flavors.iter().map(Flavor::name).collect()
    }

    #[test]
    fn kernel_words_name_base_and_the_series_variants() {
        let series = project_series().unwrap();
        let expand = |w: &str| expand_word(w, &series).map(|f| names(&f).join(","));
        assert_eq!(
            expand("all").as_deref(),
            Some("eager,mainline,direct,prefault,adaptive")
        );
        assert_eq!(expand("both").as_deref(), Some("eager,mainline"));
        assert_eq!(expand("prefault").as_deref(), Some("prefault"));
        assert_eq!(expand("/boot/vmlinuz"), None);
        // A Debian baseline's base kernel is eager: base names none.
        assert_eq!(expand("base"), None);
        // A tree of the developer's: base, then the series.
        let tree = Series::load(&crate::project::root().join("patches")).unwrap();
        let words_of = |w: &str| expand_word(w, &tree).map(|f| names(&f).join(","));
        assert_eq!(
            words_of("all").as_deref(),
            Some("base,direct,prefault,adaptive")
        );
        assert_eq!(words_of("eager"), None);
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let all = words(&["eager", "mainline", "prefault", "eager"]);
        let none = ExtraConfig::default();
        let specs = specs_for(&all, &series, (KernelConfig::Lean, true), &none).unwrap();
        let got: Vec<String> = specs.iter().map(KernelSpec::name).collect();
        assert_eq!(got, ["eager-debug", "mainline-debug", "prefault-debug"]);
        let specs = specs_for(&all, &series, (KernelConfig::BpfCi, false), &none).unwrap();
        let got: Vec<String> = specs.iter().map(KernelSpec::name).collect();
        assert_eq!(got, ["eager-bpfci", "mainline-bpfci", "prefault-bpfci"]);
        let dirs: Vec<String> = [
            (KernelConfig::Lean, false),
            (KernelConfig::Lean, true),
            (KernelConfig::BpfCi, false),
            (KernelConfig::BpfCi, true),
        ]
        .map(|(config, debug)| {
            KernelSpec {
                flavor: Flavor::Base(BaseName::Base),
                config,
                debug,
                extra: ExtraConfig::default(),
            }
            .build_dir_name()
        })
        .to_vec();
        assert_eq!(
            dirs,
            [
                "_build-default",
                "_build-debug",
                "_build-bpfci",
                "_build-bpfci-debug"
            ]
        );
        let err = format!(
            "{:#}",
            specs_for(
                &words(&["nope"]),
                &series,
                (KernelConfig::Lean, false),
                &none
            )
            .unwrap_err()
        );
        assert_eq!(
            err,
            "--kernel nope: not one of eager, mainline, direct, prefault, adaptive (the series' variants), all or both"
        );
    }
}
