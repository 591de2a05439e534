//! The command line: every subcommand's arguments, as clap structs. The
//! command modules take these and never import each other for them. Each
//! flag is declared once: a flag that several subcommands take lives in
//! a group (a `clap::Args` struct) that each of them flattens, and where
//! two flags share a name but not a meaning, a comment says why. A group
//! of one flag names its field for what it holds (`share.choice`,
//! `vms.count`, `cache_cap.size`) and keeps the flag's id, bpflab.toml's
//! key, and its long name and value name as they were (`id = "share"`).

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use anyhow::Result;

use crate::kernel::{self, KernelConfig, SourceConfig};
use crate::kselftest::llvm::{self, Llvm};
use crate::project;
use crate::vm::qemu::{AccelChoice, Network};
use crate::vm::share::ShareChoice;
use crate::vm::targets::BootConfig;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "Build, boot and measure the lazy mmap BPF patch series"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Apply patches/ to a kernel tree and build the base kernel (eager on
    /// a Debian source) and each variant (mainline, direct, ...), or the
    /// debug kernels.
    BuildKernel(BuildKernelArgs),
    /// Boot each kernel under QEMU and run the test plan's selftests in the
    /// guest (T01-T41, exact expectations per kernel).
    Vmtest(VmtestArgs),
    /// The series through checkpatch --strict, git am, W=1 and sparse.
    CheckPatches(CheckPatchesArgs),
    /// Write the series as a posting (git format-patch on the tree's base,
    /// a cover letter, your identity, get_maintainer.pl's addresses) to a
    /// directory and an mbox; nothing is sent.
    FormatSeries(FormatSeriesArgs),
    /// Run a host command (or a shell) in the test VM, the host shared in.
    Run(RunArgs),
    /// The BPF tree's own selftests (BPF CI's five runners), built from the
    /// tree under test, on each kernel; fails on a test that fails only on
    /// a variant.
    Kselftest(KselftestArgs),
    /// Reproduce the seed's timing table on each kernel, side by side.
    Bench(BenchArgs),
    /// Everything CI runs: fmt, clippy, unit tests, workflow lint, patch
    /// checks, the kernels and test_progs, vmtest and test_progs on every
    /// kernel, mutants, the fuzzer, the fault, share and developer-flag
    /// tests, the bench gate, adaptive-debug's plan and the debug mutants
    /// (the other debug kernels with --debug).
    Ci(CiArgs),
    /// Pack what ci's test steps need (bzImages, test_progs run
    /// directories) apart from the cache, for a CI workflow's test jobs.
    Bundle(BundleArgs),
    /// Prove the install steps: README's commands from a fresh clone in a
    /// minimal Debian root with an empty cache (as root).
    FreshRoot(FreshRootArgs),
    /// Mutation testing: every line the series adds mutated, each mutant
    /// built as a kernel and held to the test plan; killed or survived.
    Mutants(MutantsArgs),
    /// Differential fuzzing: seeded random operations on maps and their
    /// mappings on every kernel, each checked against a model; a
    /// divergence gives a shrunk reproducer.
    Fuzz(FuzzArgs),
    /// What the kernel cache holds, by part, with sizes; `--prune` takes
    /// out old runs and the trees of kernels the series no longer names.
    Cache(CacheArgs),
}

/// `--cache-dir`, for every command that uses the kernel cache.
#[derive(clap::Args, Debug, Clone)]
pub struct CacheDirArg {
    /// The cache of trees and builds (default: $BPFLAB_CACHE, then
    /// $XDG_CACHE_HOME/bpflab, then ~/.cache/bpflab).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// `--patches`, for the commands that build kernels and for `cache`,
/// whose `--prune` keeps the series' kernels.
#[derive(clap::Args, Debug, Clone)]
pub struct PatchesArg {
    /// The patch series to apply (a directory with a `series` file).
    #[arg(long, value_name = "DIR", default_value_os_t = project::root().join("patches"))]
    pub patches: PathBuf,
}

/// Where the kernel comes from and where builds are kept; shared by every
/// subcommand that needs kernels.
#[derive(clap::Args, Debug, Clone)]
pub struct SourceArgs {
    /// A kernel tree (directory or git checkout) or a .tar.xz/.tar.gz; it
    /// is only read. Default: Debian's package `--source` names.
    #[arg(long, value_name = "PATH")]
    pub kernel_src: Option<PathBuf>,
    /// Which of Debian's linux-source packages, without --kernel-src:
    /// debian:MAJOR.MINOR, the newest upload of linux-source-MAJOR.MINOR
    /// in Debian's registry (any suite), or debian:MAJOR.MINOR@VERSION for
    /// one upload [default: debian:7.3].
    #[arg(long, value_name = "debian:X.Y")]
    pub source: Option<String>,
    #[command(flatten)]
    pub cache: CacheDirArg,
    #[command(flatten)]
    pub series: PatchesArg,
    /// Parallel make jobs (default: number of CPUs + 1).
    #[arg(long)]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub branch: BranchArgs,
}

/// A developer's branch in the `--kernel-src` checkout as the source and
/// the series (`kernel::git`).
#[derive(clap::Args, Debug, Clone)]
pub struct BranchArgs {
    /// With --kernel-src a git checkout: base is the tree at REV, and the
    /// commits from REV to --head are the series, one variant named after
    /// the branch (instead of --patches).
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// The branch's tip; HEAD takes the uncommitted changes to tracked
    /// files too, as the last patch.
    #[arg(long, value_name = "REV", default_value = "HEAD")]
    pub head: String,
    /// With --base: refuse uncommitted changes instead of testing them.
    #[arg(long)]
    pub clean: bool,
    /// With --base, stacked branches: the variant NAME is the commits
    /// from --base up to REV, one of them (repeatable or comma-separated;
    /// in the branch's order whatever the order given). The head is a
    /// variant of its own, named after the branch, unless one names it;
    /// the head's takes the uncommitted changes.
    #[arg(long = "variant", value_delimiter = ',', value_name = "NAME=REV")]
    pub variants: Vec<String>,
}

/// `--kernel-config` alone, for `bundle`, which takes no fragments; the
/// other commands take it in `KernelBuildArgs`.
#[derive(clap::Args, Debug, Clone)]
pub struct KernelConfigArg {
    /// The kernels' configuration: lean (ours, minutes) or bpf-ci (the
    /// tree's selftests config and ours, as BPF CI builds).
    #[arg(long, value_enum, default_value_t = KernelConfig::Lean)]
    pub kernel_config: KernelConfig,
}

/// `--debug` of the commands that build or boot debug kernels instead of
/// plain ones. ci's `--debug` is its own: it adds them to the run.
#[derive(clap::Args, Debug, Clone)]
pub struct DebugArg {
    /// Build (and boot) the debug variants of the kernels (lockdep,
    /// DEBUG_ATOMIC_SLEEP, DEBUG_VM, PAGE_TABLE_CHECK; KASAN with
    /// `--config kconfig/kasan.config`) instead of the plain ones, mutants'
    /// too: slower, and they see what a plain kernel cannot, such as a
    /// lock never released.
    #[arg(id = "debug", long = "debug")]
    pub enabled: bool,
}

/// Which build of each kernel: debug or not, our configuration and the
/// developer's fragments; for build-kernel, run and the booting suites.
#[derive(clap::Args, Debug, Clone)]
pub struct KernelBuildArgs {
    #[command(flatten)]
    pub debug: DebugArg,
    #[command(flatten)]
    pub configuration: KernelConfigArg,
    /// A kconfig fragment of your own, merged after the project's and
    /// checked like them (repeatable); the kernel gets a build of its
    /// own, named `<kernel>+<fragment>`, and the others are not rebuilt.
    #[arg(long = "config", value_name = "FRAGMENT")]
    pub config: Vec<PathBuf>,
}

/// `--accel`, for every command that boots.
#[derive(clap::Args, Debug, Clone)]
pub struct AccelArg {
    /// Accelerator: KVM where it can run the kernel, else TCG.
    #[arg(id = "accel", long = "accel", value_name = "ACCEL")]
    #[arg(value_enum, default_value_t = AccelChoice::Auto)]
    pub choice: AccelChoice,
}

/// `--timeout`, for run and the booting suites.
#[derive(clap::Args, Debug, Clone)]
pub struct TimeoutArg {
    /// Kill the guest after this many seconds (default: vmtest 900 under
    /// TCG, 600 under KVM; a host command, as run and kselftest boot, 900,
    /// and no limit for run --shell; kselftest --all 4 hours, on
    /// --kernel-config bpf-ci 2 hours; 3x each for debug kernels); the
    /// results that arrived are kept.
    #[arg(id = "timeout", long = "timeout", value_name = "SECS")]
    pub secs: Option<u64>,
}

/// `--share` of run and kselftest, which always share the host and only
/// pick how; vmtest's own `--share` turns sharing on.
#[derive(clap::Args, Debug, Clone)]
pub struct ShareArg {
    /// How the host is shared (auto: virtiofs, else 9p); kselftest's
    /// test_progs runs from the cache through it.
    #[arg(id = "share", long = "share", value_name = "SHARE")]
    #[arg(value_enum, default_value_t = ShareChoice::Auto)]
    pub choice: ShareChoice,
}

/// `--vms`, for the suites that run guests side by side.
#[derive(clap::Args, Debug, Clone)]
pub struct VmsArg {
    /// Guests at once, never two on one kernel (kselftest's each run one
    /// runner). Under TCG a guest keeps one host core busy, so on two
    /// cores `--vms 2` uses both.
    #[arg(id = "vms", long = "vms", value_name = "N", default_value = "1")]
    pub count: std::num::NonZeroUsize,
}

/// `--llvm`, for the commands that build test_progs (kselftest, bundle);
/// ci's steps take the default.
#[derive(clap::Args, Debug, Clone)]
pub struct LlvmArg {
    /// The LLVM that builds test_progs, by major version: Debian's
    /// /usr/lib/llvm-N, 18 or later (-mcpu=v4, for test_progs-cpuv4),
    /// installed when missing (as root). Default: the newest of those
    /// installed, else 19.
    #[arg(
        id = "llvm",
        long = "llvm",
        value_name = "N",
        value_parser = llvm::parse_version
    )]
    pub version: Option<u32>,
}

impl LlvmArg {
    /// The LLVM chosen, from what this machine has installed.
    pub fn choose(&self) -> Result<Llvm> {
        let installed = llvm::installed(Path::new(llvm::LIB));
        llvm::choose(self.version, &installed, crate::hostdeps::can_apt_install())
    }
}

/// `--cache-cap`, for ci and cache.
#[derive(clap::Args, Debug, Clone)]
pub struct CacheCapArg {
    /// The size the cache should stay under (`20G`): after its steps ci
    /// trims the cache to it (as `cache --prune`, the oldest runs first,
    /// this run's kept); `cache --prune` removes the oldest runs until it
    /// is, and `cache` exits 1 when the cache is over it.
    #[arg(id = "cache_cap", long = "cache-cap", value_name = "SIZE")]
    pub size: Option<String>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct BuildKernelArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    // Not VmArgs's --kernel: it builds named kernels, it cannot take a
    // bzImage path.
    /// Kernels to build, comma-separated: the base kernel (eager on a
    /// Debian source, base on a tree of your own), a variant (mainline,
    /// direct, prefault, ...), all (the base and every variant) or both
    /// (the base and the first variant).
    #[arg(long, alias = "kernels", value_delimiter = ',', default_value = "all")]
    pub kernel: Vec<String>,
    #[command(flatten)]
    pub build: KernelBuildArgs,
    /// Print the manifest of the kernels as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The guest machine: CPUs, memory, kernel and QEMU arguments.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MachineArgs {
    /// vCPUs of each guest (default 4).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub cpus: Option<u32>,
    /// Memory of each guest: MiB, or with M or G (default 4G).
    #[arg(long, value_name = "SIZE", value_parser = crate::vm::qemu::parse_memory)]
    pub memory: Option<u32>,
    /// Kernel command-line arguments, after the harness's (repeatable;
    /// each value may hold several, space-separated).
    #[arg(long, value_name = "ARGS")]
    pub append: Vec<String>,
    /// An argument for qemu-system-x86_64, after the harness's
    /// (repeatable, one word each: `--qemu-arg=-device --qemu-arg=virtio-rng-pci`).
    #[arg(long = "qemu-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub qemu_args: Vec<String>,
    /// The guest's network: none, or user (QEMU's user-mode network on
    /// virtio-net; address and DNS from QEMU's DHCP, the host at
    /// 10.0.2.2). Our lean kernels get kconfig/net.config for it.
    #[arg(long, value_enum, default_value_t = Network::None, value_name = "MODE")]
    pub network: Network,
    /// Wait for gdb before the kernel runs: QEMU's gdbstub on this local
    /// port (default 1234), the gdb command to connect printed, no time
    /// limits unless --timeout.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "1234")]
    pub gdb: Option<u16>,
}

impl MachineArgs {
    pub fn machine(&self) -> crate::vm::qemu::Machine {
        crate::vm::qemu::Machine {
            cpus: self.cpus,
            memory_mib: self.memory,
            append: self
                .append
                .iter()
                .flat_map(|a| a.split_whitespace().map(str::to_string))
                .collect(),
            qemu_args: self.qemu_args.clone(),
            network: self.network,
            gdb: self.gdb,
        }
    }
}

/// Options shared by every subcommand that boots kernels.
#[derive(clap::Args, Debug, Clone)]
pub struct VmArgs {
    // Not build-kernel's --kernel (no bzImage path there) nor run's (one
    // kernel, mainline by default).
    /// Kernels to run, comma-separated: the base kernel (eager on a Debian
    /// source, base on a tree of your own), a variant (mainline, direct,
    /// prefault, ...), all (the base and every variant), both (the base
    /// and the first variant), or the path of a bzImage of your own. bench
    /// and fuzz take this series' kernels only: eager, mainline, its
    /// variants, all or both.
    #[arg(
        long = "kernel",
        alias = "kernels",
        value_delimiter = ',',
        default_value = "all"
    )]
    pub kernels: Vec<String>,
    #[command(flatten)]
    pub build: KernelBuildArgs,
    #[command(flatten)]
    pub accel: AccelArg,
    /// Which side of the plan (eager, mainline, direct, prefault,
    /// adaptive) a kernel the plan does not know is held to: SIDE for
    /// every such kernel (a source's base, default eager; a branch's
    /// variants, which vmtest refuses without it; a bzImage by path,
    /// default mainline), KERNEL=SIDE for one; comma-separated. This
    /// series' own kernels are held to their own side.
    #[arg(long, value_name = "[KERNEL=]SIDE", value_parser = crate::kernel::claim::parse_arg)]
    pub claim: Option<String>,
    #[command(flatten)]
    pub timeout: TimeoutArg,
    /// Take the kernels (and test_progs) from this bundle, made by `cargo
    /// xtask bundle`, and build nothing.
    #[arg(long, value_name = "DIR", env = crate::kernel::bundle::BUNDLE_ENV)]
    pub bundle: Option<PathBuf>,
    #[command(flatten)]
    pub machine: MachineArgs,
    /// Harness self-test: make the guest panic, warn, hang or flood before
    /// or after its program, or crash|freeze|stall:TEST when TEST starts.
    #[arg(long, hide = true)]
    pub inject: Option<String>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct VmtestArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub vm: VmArgs,
    /// Stop at the first failing test; the rest are reported as not run.
    #[arg(long)]
    pub fail_fast: bool,
    /// Stop after N failing tests; the rest are reported as not run.
    #[arg(long, value_name = "N", conflicts_with = "fail_fast")]
    pub max_failures: Option<std::num::NonZeroUsize>,
    // Not ShareArg: vmtest packs its programs unless told, so here the
    // flag is optional and giving it turns sharing on. Its own id keeps
    // bpflab.toml's `share` (ShareArg's) from turning it on.
    /// Read the test programs from the host over a share instead of
    /// packing them into the initramfs (auto: virtiofs, else 9p).
    #[arg(
        id = "share_programs",
        long = "share",
        value_enum,
        num_args = 0..=1,
        default_missing_value = "auto",
        value_name = "HOW"
    )]
    pub share: Option<ShareChoice>,
    // Not kselftest's --stall: a different silence (the results channel,
    // not test_progs's output).
    /// Harness self-test: how long the results channel may stay still
    /// before the guest is taken for wedged (default 120 under TCG).
    #[arg(long, hide = true, value_name = "SECS")]
    pub stall: Option<u64>,
    /// Test name filters (substrings), e.g. `-- t14 t02`.
    #[arg(last = true)]
    pub filters: Vec<String>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct MutantsArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Only the mutants of this patch: its number (`2`, `0002`) or file name.
    #[arg(long, value_name = "N")]
    pub patch: Option<String>,
    /// Only mutants whose id contains one of these (comma-separated), e.g.
    /// `0004.100`, `cmp`.
    #[arg(long, value_delimiter = ',', value_name = "TEXT")]
    pub filter: Vec<String>,
    /// Only the mutants of mutants/CI_SAMPLE (what ci runs), each held to
    /// the plan tests its line names.
    #[arg(long, conflicts_with_all = ["patch", "filter"])]
    pub sample: bool,
    /// Only the mutants of this file, in mutants/CI_SAMPLE's form (an id,
    /// its digest as `--list` shows it, the plan tests that kill it as
    /// `T03` or `T06/T09`, what it stands for), each held to the tests its
    /// line names; for any series.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["patch", "filter", "sample"])]
    pub sample_file: Option<PathBuf>,
    /// List the mutants (id, digest, file:line, the change), run nothing.
    #[arg(long)]
    pub list: bool,
    /// Run every mutant again, not taking earlier outcomes from the ledger
    /// (an outcome is kept for the same mutated series and test sources;
    /// after changing the kernel source, run with --fresh).
    #[arg(long)]
    pub fresh: bool,
    #[command(flatten)]
    pub accel: AccelArg,
    /// What judges a mutant: the test plan (`--fail-fast`), or the
    /// fuzzer (`--fuzz-seconds` of it, `--seed`) held to the model of
    /// the mutant's variant.
    #[arg(long, value_enum, default_value_t = crate::mutants::MutantJudge::Plan)]
    pub judge: crate::mutants::MutantJudge,
    /// With `--judge fuzz`: seconds of fuzzing a mutant (CI's budget).
    #[arg(long, value_name = "N", default_value = "60")]
    pub fuzz_seconds: u64,
    // Not fuzz's --seed: one fixed seed for every mutant, where fuzz's
    // comes from the clock unless given.
    /// With `--judge fuzz`: the seed, the same for every mutant.
    #[arg(long, value_name = "S", default_value = "1")]
    pub seed: u64,
    /// Start no new mutant after N minutes: a long list in pieces. The
    /// ledger keeps what is done, and the same command again goes on.
    #[arg(long, value_name = "N")]
    pub minutes: Option<u64>,
    #[command(flatten)]
    pub debug: DebugArg,
}

#[derive(clap::Args, Debug, Clone)]
pub struct FuzzArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub vm: VmArgs,
    /// Seconds of fuzzing on each kernel (debug kernels: the same
    /// seconds, fewer operations).
    #[arg(long, value_name = "N", default_value = "60")]
    pub seconds: u64,
    /// The seed (default: from the clock); a run is reproduced by its
    /// seed on every kernel.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Threads doing operations at once; then only what holds in every
    /// order is checked (contents, errors, the log).
    #[arg(long, value_name = "T", default_value = "1")]
    pub threads: std::num::NonZeroUsize,
    /// With one thread: of --seconds, the last ones go to rounds of four
    /// threads racing faults on shared mappings (default a quarter; 0
    /// for none; a replay does not race).
    #[arg(long, value_name = "N")]
    pub race_seconds: Option<u64>,
    /// Run a reproducer (one operation a line) instead of drawing.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    #[command(flatten)]
    pub vms: VmsArg,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CheckPatchesArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Also every patch on its own: each prefix of the series built
    /// (the objects it touches, W=1 and sparse), so that a patch that
    /// breaks the build or warns is named even when a later one fixes it.
    #[arg(long)]
    pub each: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct FormatSeriesArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// The posting's version (default: the newest `vN:` of the
    /// changelog, kept with the series; 1 without one). v2 and later need
    /// their section there.
    #[arg(long = "version", value_name = "N")]
    pub series_version: Option<u32>,
    /// Ask for comments only: `[RFC PATCH bpf-next]`, whatever the cover
    /// letter's `Prefix:` line says (without either, `[PATCH bpf-next]`).
    #[arg(long)]
    pub rfc: bool,
    /// Where to write the posting (default: target/posting/vN); a
    /// directory another posting left is replaced.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The cover letter of a series of your own (--kernel-src): a subject
    /// line, Cc: lines, a blank line, the body (@CHANGELOG@ takes
    /// changelog.txt beside it); this project's is patches/cover-letter.txt.
    #[arg(long, value_name = "FILE")]
    pub cover: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    // Not VmArgs's --kernel: mainline by default, and no `all`/`both`
    // unless asked (a command on five kernels is a choice).
    /// The kernels, comma-separated: the base kernel (eager, or a tree's
    /// base), a variant (mainline, prefault, ...), or the path of a
    /// bzImage of your own.
    /// With more than one, or with --expect, the command runs on each in
    /// turn and is held to what each is expected to do.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "mainline",
        value_name = "KERNEL"
    )]
    pub kernel: Vec<String>,
    /// What the command is expected to do on a kernel: KERNEL=pass (exit
    /// 0, no splat), KERNEL=fail (the command fails: any other exit or a
    /// signal) or KERNEL=splat (the kernel splats, whatever the exit),
    /// comma-separated; pass on every kernel not named. A command not
    /// there or not runnable (126, 127) and an OOM kill meet none.
    /// Prints a table, writes junit.xml, and exits 1 when a kernel did
    /// otherwise.
    #[arg(long, value_delimiter = ',', value_name = "KERNEL=pass|fail|splat")]
    pub expect: Vec<String>,
    #[command(flatten)]
    pub build: KernelBuildArgs,
    #[command(flatten)]
    pub accel: AccelArg,
    #[command(flatten)]
    pub share: ShareArg,
    /// An interactive shell on the guest's console instead of a command.
    #[arg(long, conflicts_with = "command")]
    pub shell: bool,
    /// A kernel splat on the console does not change the exit status.
    #[arg(long)]
    pub allow_splat: bool,
    /// Exit as `git bisect run` takes it: 0 good; 1 bad (the command
    /// failed, or the kernel panicked or splatted); 125 skip (the kernel
    /// did not build, or its VM failed with no sign of the kernel's).
    /// One kernel, no --expect.
    #[arg(long, conflicts_with_all = ["expect", "shell"])]
    pub bisect: bool,
    #[command(flatten)]
    pub timeout: TimeoutArg,
    #[command(flatten)]
    pub machine: MachineArgs,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

impl SourceArgs {
    /// `--source`, or the default; refused beside `--kernel-src`.
    fn debian(&self) -> Result<kernel::debian::Spec> {
        match (&self.source, &self.kernel_src) {
            (Some(s), Some(path)) => anyhow::bail!(
                "--source {s} and --kernel-src {} name two kernel sources; give one",
                path.display()
            ),
            (Some(s), None) => kernel::debian::Spec::parse(s),
            (None, _) => Ok(kernel::debian::Spec::default()),
        }
    }

    /// The configuration the kernel layer takes: the cache resolved, the
    /// jobs decided.
    pub fn config(&self) -> Result<SourceConfig> {
        let cache_dir = project::cache_dir(self.cache.cache_dir.as_deref())?;
        let (git, patches) = match (&self.branch.base, &self.kernel_src) {
            (Some(base), Some(repo)) => {
                let b = &self.branch;
                let range = kernel::git::range(repo, base, &b.head, b.clean, &b.variants)?;
                let series = kernel::git::series(repo, &range, &cache_dir.join("git-series"))?;
                (Some(range), series)
            }
            (Some(_), None) => {
                anyhow::bail!("--base needs --kernel-src: the git checkout your branch is in")
            }
            (None, _) if self.branch.clean => {
                anyhow::bail!("--clean goes with --base: it refuses a branch's uncommitted changes")
            }
            (None, _) if !self.branch.variants.is_empty() => {
                anyhow::bail!("--variant goes with --base: it cuts a branch's series into variants; add --base REV")
            }
            (None, _) => (None, self.series.patches.clone()),
        };
        Ok(SourceConfig {
            kernel_src: self.kernel_src.clone(),
            debian: self.debian()?,
            cache_dir,
            patches,
            jobs: self.jobs.unwrap_or_else(kernel::default_jobs),
            git,
        })
    }
}

impl VmArgs {
    /// The configuration the VM layer boots with.
    pub fn boot(&self) -> BootConfig {
        BootConfig {
            kernels: self.kernels.clone(),
            config: self.build.configuration.kernel_config,
            extra_config: self.build.config.clone(),
            debug: self.build.debug.enabled,
            accel: self.accel.choice,
            claim: self.claim.clone(),
            timeout: self.timeout.secs,
            bundle: self.bundle.clone(),
            machine: self.machine.machine(),
        }
    }
}

impl VmtestArgs {
    /// After how many failures the run stops, if it does.
    pub fn stop_after(&self) -> Option<usize> {
        if self.fail_fast {
            Some(1)
        } else {
            self.max_failures.map(std::num::NonZeroUsize::get)
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct KselftestArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub vm: VmArgs,
    #[command(flatten)]
    pub share: ShareArg,
    /// Run the tests whose names contain NAME (test_progs's -t; repeated
    /// or comma-separated) instead of kselftest/ALLOWLIST. Each must pass
    /// on every kernel: a skip fails as a failure does.
    #[arg(short = 't', long = "test", value_name = "NAME", value_delimiter = ',')]
    pub tests: Vec<String>,
    /// Run every test test_progs has (kselftest/DENYLIST still applies).
    #[arg(long, conflicts_with = "tests")]
    pub all: bool,
    /// The variant -t's tests are new in: they must not pass on base and
    /// the variants before it (their feature is missing there), and must
    /// pass, not skip, from it on. Without it, -t's tests must pass on
    /// every kernel.
    #[arg(long, value_name = "VARIANT", requires = "tests")]
    pub new_on: Option<String>,
    /// The runners, comma-separated (default: all five, as BPF CI runs
    /// them): test_progs, test_progs-no_alu32, test_progs-cpuv4 (-t and
    /// the lists choose their tests), test_maps, test_verifier (always
    /// whole).
    #[arg(
        long = "runner",
        value_enum,
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub runners: Vec<crate::kselftest::runner::Runner>,
    /// test_progs's parallel mode (-j): N workers in the guest. A boot that
    /// dies is followed by serial ones, which name the test that killed it.
    #[arg(long, value_name = "N")]
    pub parallel: Option<usize>,
    #[command(flatten)]
    pub vms: VmsArg,
    #[command(flatten)]
    pub llvm: LlvmArg,
    /// Build test_progs and the test modules, boot nothing.
    #[arg(long)]
    pub build_only: bool,
    // Not vmtest's --stall: a different silence (test_progs's output, not
    // the results channel).
    /// Harness self-test: how long test_progs may print nothing before
    /// the running test is taken for hung (default 600 under TCG).
    #[arg(long, hide = true, value_name = "SECS")]
    pub stall: Option<u64>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub vm: VmArgs,
    // Not fresh-root's --quick: another command's shorter form.
    /// Fewer iterations, one boot per kernel, sweep up to 64 MiB (for CI).
    #[arg(long)]
    pub quick: bool,
    /// Boots per kernel, interleaved across kernels (default 3, 1 with
    /// --quick); the spread across boots is reported.
    #[arg(long)]
    pub repeat: Option<usize>,
    // Not bundle's --out, which has no default.
    /// Where to write bench.json and sweep.svg (default: target/bench).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The guest's clock: icount (guest instructions, 1 ns each: the
    /// same from boot to boot; TCG only) or wall. Default: icount under
    /// TCG, wall under KVM.
    #[arg(long, value_enum)]
    pub clock: Option<crate::bench::grid::Clock>,
    // Not fresh-root's --record: another record.
    /// Write every row's instructions and faults to docs/bench/icount.json,
    /// the record `--gate` holds runs to (icount only): a whole record,
    /// every kernel, two boots or more, refused after a failed gate.
    #[arg(long)]
    pub record: bool,
    /// With --record: let this target, met in docs/bench/targets-met.txt
    /// and not in this run, leave the list (repeatable; each one lost
    /// must be named).
    #[arg(long, value_name = "NAME", requires = "record")]
    pub drop_target: Vec<String>,
    /// Exit 1 when a row is unsteady (boots more than 1% apart, 1.5%
    /// for 2 and 4 threads), a row or kernel of docs/bench/icount.json is
    /// not measured, a measured one is not recorded, or a row is worse
    /// than the record by more than the record's spread (icount only;
    /// what ci runs).
    #[arg(long)]
    pub gate: bool,
    /// Exit 1 when a target of the series' head variant that
    /// docs/bench/targets-met.txt lists (the ones met in the record's run,
    /// written by --record) is MISSED, open or not measured in this run
    /// (what ci runs).
    #[arg(long)]
    pub gate_targets: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CiArgs {
    // Not DebugArg: the debug kernels in addition, not instead.
    /// Also the rest of the debug kernels' steps: mainline-debug's build
    /// and plan, both with KASAN (`kconfig/kasan.config`), test_progs and
    /// the fuzzer on them. Every ci builds adaptive-debug and runs its
    /// plan and the debug mutant sample; a second debug
    /// build and KASAN's are more than a cold ci can spare, so ci leaves
    /// them to this flag and to the workflow's jobs.
    #[arg(long)]
    pub debug: bool,
    /// Skip the harness's fault tests (they boot kernels on purpose to fail).
    #[arg(long)]
    pub no_faults: bool,
    #[command(flatten)]
    pub cache: CacheDirArg,
    /// Run only these steps, by id (comma-separated or repeated), e.g.
    /// `--step build,vmtest-mainline`: the workflow's jobs each run some.
    #[arg(long, value_delimiter = ',', value_name = "ID")]
    pub step: Vec<String>,
    /// Put this run's times on record as the cold run ci projects from
    /// (docs/ci-times-cold.json): only a whole run that passed, started
    /// on an empty kernel cache.
    #[arg(long)]
    pub record_times: bool,
    #[command(flatten)]
    pub cache_cap: CacheCapArg,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CacheArgs {
    #[command(flatten)]
    pub cache: CacheDirArg,
    #[command(flatten)]
    pub series: PatchesArg,
    /// Remove run directories older than `--runs-older-than` and the
    /// trees and builds of kernels the series (`--patches`) no longer
    /// names; base and mutant are kept.
    #[arg(long)]
    pub prune: bool,
    /// With `--prune`: the age, in days, past which a run's directory goes.
    #[arg(long, value_name = "DAYS", default_value = "7")]
    pub runs_older_than: u64,
    #[command(flatten)]
    pub cache_cap: CacheCapArg,
}

#[derive(clap::Args, Debug, Clone)]
pub struct BundleArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub configuration: KernelConfigArg,
    #[command(flatten)]
    pub llvm: LlvmArg,
    /// Where to write it (made afresh).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug, Clone)]
pub struct FreshRootArgs {
    /// The shorter form: ci's checks (every host tool they use installed),
    /// then the mainline kernel and test_progs built and booted, instead of
    /// `cargo xtask vmtest` and `cargo xtask ci`.
    #[arg(long)]
    pub quick: bool,
    /// Where the root and the logs go (default: <cache>/fresh-root, in
    /// --cache-dir's cache; the root's own cache starts empty whatever
    /// that is).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheDirArg,
    /// On success, write the summary to docs/fresh-root/<form>.json.
    #[arg(long)]
    pub record: bool,
    /// Keep the root after a passing check (a failing one's is kept).
    #[arg(long)]
    pub keep: bool,
    // Not run's command: a host command in the fresh clone, not the guest.
    /// Run this command in the fresh clone instead, e.g. `-- cargo xtask
    /// check-patches` (never recorded).
    #[arg(last = true, value_name = "CMD", conflicts_with = "quick")]
    pub command: Vec<String>,
}

/// One definition of a flag, as the subcommands see it: a group that
/// several of them flatten gives each the same one.
#[cfg(test)]
#[derive(Debug)]
pub struct FlagDefinition {
    pub id: String,
    pub long: String,
    pub subcommands: Vec<String>,
}

/// Every flag's definitions, told apart by id, long name and help.
#[cfg(test)]
pub fn flag_definitions() -> Vec<FlagDefinition> {
    use clap::CommandFactory;
    let mut found: std::collections::BTreeMap<_, Vec<String>> = Default::default();
    for sub in Cli::command().get_subcommands() {
        for arg in sub.get_arguments() {
            let Some(long) = arg.get_long() else {
                continue;
            };
            let help = format!("{:?} {:?}", arg.get_help(), arg.get_long_help());
            let id = arg.get_id().to_string();
            let subcommands = found.entry((id, long.to_string(), help)).or_default();
            subcommands.push(sub.get_name().to_string());
        }
    }
    found
        .into_iter()
        .map(|((id, long, _), subcommands)| FlagDefinition {
            id,
            long,
            subcommands,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flag names two definitions share, their meanings differing
    /// (a comment at each says how).
    const DECLARED_APART: &[&str] = &[
        "debug", "kernel", "out", "quick", "record", "seed", "share", "stall",
    ];

    #[test]
    fn a_flag_is_declared_once_unless_its_meanings_differ() {
        let mut definitions = std::collections::BTreeMap::<String, usize>::new();
        for d in flag_definitions() {
            *definitions.entry(d.long).or_default() += 1;
        }
        let apart: Vec<&str> = definitions
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(long, _)| long.as_str())
            .collect();
        assert_eq!(
            apart, DECLARED_APART,
            "a flag declared twice: flatten one group into both subcommands, \
             or say in a comment why they differ and list it here"
        );
    }

    #[test]
    fn share_flags() {
        let parse = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
            Command::Vmtest(a) => a.share,
            _ => panic!("not vmtest"),
        };
        assert_eq!(parse(&["x", "vmtest"]), None);
        assert_eq!(parse(&["x", "vmtest", "--share"]), Some(ShareChoice::Auto));
        assert_eq!(
            parse(&["x", "vmtest", "--share", "9p"]),
            Some(ShareChoice::NineP)
        );
        assert_eq!(
            parse(&["x", "vmtest", "--share", "--", "t14"]),
            Some(ShareChoice::Auto)
        );
        let Command::Run(r) = Cli::try_parse_from(["x", "run", "--", "ls", "-l", "--color"])
            .unwrap()
            .command
        else {
            panic!("not run");
        };
        assert_eq!(r.command, ["ls", "-l", "--color"]);
        assert_eq!(
            (r.kernel, r.share.choice),
            (vec!["mainline".to_string()], ShareChoice::Auto)
        );
        assert!(Cli::try_parse_from(["x", "run", "--shell", "--", "ls"]).is_err());
    }

    #[test]
    fn variants_are_listed_or_repeated_and_go_with_base() {
        let source = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
            Command::BuildKernel(a) => a.source,
            _ => panic!("not build-kernel"),
        };
        let listed = source(&[
            "x",
            "build-kernel",
            "--cache-dir",
            "/nonexistent",
            "--variant",
            "a=HEAD~1,b=HEAD",
        ]);
        let repeated = source(&[
            "x",
            "build-kernel",
            "--variant=a=HEAD~1",
            "--variant",
            "b=HEAD",
        ]);
        assert_eq!(listed.branch.variants, ["a=HEAD~1", "b=HEAD"]);
        assert_eq!(repeated.branch.variants, listed.branch.variants);
        let err = listed.config().unwrap_err().to_string();
        assert!(err.starts_with("--variant goes with --base"), "{err}");
    }

    #[test]
    fn claim_is_a_plan_kernel() {
        let cli =
            Cli::try_parse_from(["xtask", "vmtest", "--claim", "eager,base=mainline"]).unwrap();
        let Command::Vmtest(args) = cli.command else {
            panic!("not vmtest");
        };
        assert_eq!(args.vm.claim.as_deref(), Some("eager,base=mainline"));
        let cli = Cli::try_parse_from(["xtask", "vmtest"]).unwrap();
        assert!(matches!(cli.command, Command::Vmtest(a) if a.vm.claim.is_none()));
        for bad in ["other", "base", "patched", "x=base"] {
            assert!(
                Cli::try_parse_from(["xtask", "vmtest", "--claim", bad]).is_err(),
                "{bad}"
            );
        }
        let cli =
            Cli::try_parse_from(["xtask", "build-kernel", "--kernel", "base,prefault"]).unwrap();
        assert!(matches!(cli.command, Command::BuildKernel(a) if a.kernel == ["base", "prefault"]));
    }

    #[test]
    fn machine_flags_on_every_booting_command() {
        let machine = |args: &[&str]| {
            let m = match Cli::try_parse_from(args).unwrap().command {
                Command::Vmtest(a) => a.vm.machine,
                Command::Bench(a) => a.vm.machine,
                Command::Kselftest(a) => a.vm.machine,
                Command::Run(a) => a.machine,
                _ => panic!("no machine flags"),
            };
            m.machine()
        };
        let flags = [
            "--cpus",
            "2",
            "--memory",
            "6G",
            "--append",
            "nokaslr loglevel=7",
            "--append=quiet",
            "--qemu-arg=-device",
            "--qemu-arg",
            "virtio-rng-pci",
        ];
        for cmd in ["vmtest", "bench", "kselftest", "run"] {
            let mut args = vec!["x", cmd];
            args.extend(flags);
            let m = machine(&args);
            assert_eq!((m.cpus, m.memory_mib), (Some(2), Some(6144)), "{cmd}");
            assert_eq!(m.append, ["nokaslr", "loglevel=7", "quiet"], "{cmd}");
            assert_eq!(m.qemu_args, ["-device", "virtio-rng-pci"], "{cmd}");
        }
        assert_eq!(machine(&["x", "vmtest"]), Default::default());
        for bad in [["--cpus", "0"], ["--memory", "12"], ["--memory", "4T"]] {
            let mut args = vec!["x", "vmtest"];
            args.extend(bad);
            assert!(Cli::try_parse_from(&args).is_err(), "{bad:?}");
        }
    }
}
