//! `cargo xtask ci`: everything a BPF tree's CI runs, in order, each step
//! in a folded section, with a summary table at the end.

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::cli::CiArgs;
use crate::vm::virtiofsd;
use crate::{hostdeps, project};

/// One CI step: a name and the command it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub name: &'static str,
    pub program: String,
    pub args: Vec<String>,
}

/// The steps, as data: cheap checks first, so a formatting slip fails in
/// seconds rather than after the kernel builds.
pub fn steps(args: &CiArgs, xtask: &str) -> Vec<Step> {
    let cargo = |name, a: &[&str]| Step {
        name,
        program: "cargo".into(),
        args: a.iter().map(|s| s.to_string()).collect(),
    };
    let cache: Vec<String> = args
        .cache_dir
        .iter()
        .flat_map(|d| ["--cache-dir".to_string(), d.display().to_string()])
        .collect();
    let xt = |name, a: &[&str]| Step {
        name,
        program: xtask.into(),
        args: a
            .iter()
            .map(|s| s.to_string())
            .chain(cache.iter().cloned())
            .collect(),
    };
    let mut steps = vec![
        cargo("fmt", &["fmt", "--all", "--", "--check"]),
        cargo(
            "clippy",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        ),
        cargo("unit tests", &["test", "--workspace"]),
        // checkpatch --strict, git am, W=1 and sparse: minutes, not the
        // kernel builds' tens of minutes.
        xt("patch checks", &["check-patches"]),
        xt("build base + patched", &["build-kernel"]),
    ];
    if !args.no_debug {
        steps.push(xt(
            "build patched-debug",
            &["build-kernel", "--kernel", "patched", "--debug"],
        ));
    }
    steps.push(xt("vmtest base + patched", &["vmtest"]));
    if !args.no_debug {
        steps.push(xt(
            "vmtest patched-debug",
            &["vmtest", "--kernel", "patched", "--debug"],
        ));
    }
    if !args.no_faults {
        steps.push(booting_tests("fault tests", "faults"));
    }
    steps.push(booting_tests("share tests", "share"));
    steps.push(xt("bench --quick", &["bench", "--quick"]));
    steps
}

/// An xtask test suite whose tests boot kernels: ignored by a plain
/// `cargo test`, one guest at a time, as their time limits assume.
fn booting_tests(name: &'static str, suite: &str) -> Step {
    Step {
        name,
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

struct Outcome {
    name: &'static str,
    ok: bool,
    code: Option<i32>,
    took: Duration,
}

pub fn run(args: CiArgs) -> Result<ExitCode> {
    let started = Instant::now();
    // Host tools first: a missing one fails here, before any long step.
    let mut deps = hostdeps::BUILD.to_vec();
    deps.extend_from_slice(hostdeps::BOOT);
    deps.extend_from_slice(hostdeps::DEFAULT_SOURCE);
    deps.extend_from_slice(hostdeps::SHARE_TESTS);
    deps.extend_from_slice(hostdeps::PATCH_CHECKS);
    hostdeps::ensure(&deps).context("checking the host tools")?;
    // The share tests use virtiofs; a missing virtiofsd is installed once
    // here rather than inside a test's time limit.
    if let Err(why) = virtiofsd::find() {
        crate::status!("deps", "{why}");
        virtiofsd::install().context("installing virtiofsd for the share tests")?;
    }
    let xtask = std::env::current_exe().context("finding the xtask binary")?;
    let gha = std::env::var_os("GITHUB_ACTIONS").is_some();
    let mut outcomes = Vec::new();
    for step in steps(&args, &xtask.display().to_string()) {
        if gha {
            println!("::group::{}", step.name);
        } else {
            println!("\n===== {} =====", step.name);
        }
        let t = Instant::now();
        let mut command = Command::new(&step.program);
        // Every step, the fault tests' own xtask runs included, uses the
        // same cache.
        if let Some(dir) = &args.cache_dir {
            command.env(project::CACHE_ENV, dir);
        }
        let status = command
            .args(&step.args)
            .current_dir(project::root())
            .status()
            .with_context(|| format!("running {} {}", step.program, step.args.join(" ")))?;
        let outcome = Outcome {
            name: step.name,
            ok: status.success(),
            code: status.code(),
            took: t.elapsed(),
        };
        if gha {
            println!("::endgroup::");
        }
        println!(
            "----- {}: {} in {:.0?}",
            step.name,
            if outcome.ok { "ok" } else { "FAILED" },
            outcome.took
        );
        let stop = !outcome.ok && step.program == "cargo" && step.args[0] != "test";
        outcomes.push(outcome);
        // fmt or clippy failing: the rest would only waste the CI's time.
        if stop {
            break;
        }
    }
    println!("\n{}", summary(&outcomes, started.elapsed()));
    let failed = outcomes.iter().filter(|o| !o.ok).count();
    println!("steps: {} passed, {failed} failed", outcomes.len() - failed);
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(project::EXIT_TESTS_FAILED)
    })
}

fn summary(outcomes: &[Outcome], total: Duration) -> String {
    let mut out = format!("{:<24} {:<8} {:>8}\n", "step", "result", "time");
    for o in outcomes {
        let result = match (o.ok, o.code) {
            (true, _) => "ok".to_string(),
            (false, Some(c)) => format!("FAIL({c})"),
            (false, None) => "KILLED".to_string(),
        };
        out += &format!(
            "{:<24} {:<8} {:>7.0}s\n",
            o.name,
            result,
            o.took.as_secs_f64()
        );
    }
    out += &format!("{:<24} {:<8} {:>7.0}s", "total", "", total.as_secs_f64());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> CiArgs {
        CiArgs {
            no_debug: false,
            no_faults: false,
            cache_dir: None,
        }
    }

    #[test]
    fn cheap_checks_come_first_and_everything_runs() {
        let s = steps(&args(), "/x/xtask");
        let names: Vec<&str> = s.iter().map(|s| s.name).collect();
        assert_eq!(&names[..3], ["fmt", "clippy", "unit tests"]);
        for n in [
            "patch checks",
            "build base + patched",
            "build patched-debug",
            "vmtest base + patched",
            "vmtest patched-debug",
            "fault tests",
            "share tests",
            "bench --quick",
        ] {
            assert!(names.contains(&n), "missing step {n}: {names:?}");
        }
        let clippy = &s[1];
        assert!(clippy
            .args
            .ends_with(&["-D".to_string(), "warnings".to_string()]));
    }

    #[test]
    fn options_drop_steps_and_pass_the_cache() {
        let a = CiArgs {
            no_debug: true,
            no_faults: true,
            cache_dir: Some("/c".into()),
        };
        let s = steps(&a, "/x/xtask");
        assert!(s
            .iter()
            .all(|s| !s.name.contains("debug") && s.name != "fault tests"));
        let vm = s
            .iter()
            .find(|s| s.name == "vmtest base + patched")
            .unwrap();
        assert_eq!(vm.args, ["vmtest", "--cache-dir", "/c"]);
    }

    #[test]
    fn summary_table() {
        let o = vec![
            Outcome {
                name: "fmt",
                ok: true,
                code: Some(0),
                took: Duration::from_secs(2),
            },
            Outcome {
                name: "vmtest",
                ok: false,
                code: Some(1),
                took: Duration::from_secs(90),
            },
        ];
        let s = summary(&o, Duration::from_secs(92));
        assert!(s.contains("fmt") && s.contains("ok"));
        assert!(s.contains("FAIL(1)"));
        assert!(s.lines().last().unwrap().starts_with("total"));
    }
}
