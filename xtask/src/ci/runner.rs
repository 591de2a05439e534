//! Runs ci's chosen steps: each one alone in turn, printed as it goes,
//! and each queued section on two workers (`workers.rs`), printed step
//! by step as they end; then the summary table, the run's times and the
//! cache trimmed to its cap.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};

use super::commit;
use super::queue::{longest_first, sections, waits_for};
use super::times::{self, CiTimes, StepTime};
use super::Step;
use crate::kernel::disk_usage::{self, human};
use crate::{project, workers};

/// What a run of the chosen steps is given beside them.
pub struct Setup<'a> {
    /// The cache as the command line gave it, passed on to every step.
    pub cache_dir: Option<&'a Path>,
    /// The cache it names.
    pub cache: &'a Path,
    /// The environment every step runs with, beside the cache.
    pub env: &'a [(String, String)],
    /// When the run started: a base build since then is this run's.
    pub started_at: SystemTime,
}

/// A run of the steps: what each came to, and what its times need.
pub struct Ran {
    outcomes: Vec<Outcome>,
    run_dir: PathBuf,
    cold: bool,
    /// The base kernel's build in this run, when the cache was cold.
    base: Option<f64>,
}

/// Runs `selected` in sections, in order: after fmt or clippy fails,
/// none of the rest.
pub fn run(selected: &[Step], setup: &Setup) -> Result<Ran> {
    let cold = times::cache_is_cold(setup.cache);
    // The queue's order; without a record, the steps' own (a broken one
    // is named after the run, by report_times).
    let record = times::read(&project::root().join(times::COLD_RECORD)).ok();
    let run_dir = project::new_run_dir(setup.cache, "ci")?;
    let ctx = StepContext {
        cache_dir: setup.cache_dir,
        env: setup.env,
        logs: run_dir.join("steps"),
        gha: std::env::var_os("GITHUB_ACTIONS").is_some(),
    };
    let mut outcomes = Vec::new();
    let mut base = None;
    for section in sections(selected) {
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
            base = times::base_build_seconds(setup.cache, setup.started_at);
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
    Ok(Ran {
        outcomes,
        run_dir,
        cold,
        base,
    })
}

impl Ran {
    /// The steps that ran.
    pub fn ran(&self) -> usize {
        self.outcomes.len()
    }

    /// The steps that failed.
    pub fn failed(&self) -> usize {
        self.outcomes.iter().filter(|o| !o.ok).count()
    }

    /// The summary table, with the run's `total` time.
    pub fn summary(&self, total: Duration) -> String {
        summary(&self.outcomes, total)
    }

    /// Writes the run's times, prints the cold run's projection on the
    /// slowest machine, and with `record` puts the run on record.
    pub fn keep_times(&self, total: Duration, record: bool) -> Result<()> {
        let times = times_of(&self.outcomes, self.cold, self.base, total);
        report_times(&self.run_dir, &times, record)
    }

    /// The cache trimmed to `cap`, this run's directory kept.
    pub fn trim_cache(&self, cache: &Path, cap: u64) -> Result<()> {
        trim_cache(cache, cap, &self.run_dir)
    }
}

/// What a step came to.
struct Outcome {
    id: &'static str,
    name: &'static str,
    ok: bool,
    code: Option<i32>,
    took: Duration,
    /// The host's idle CPU share while it ran, in percent.
    idle_percent: Option<f64>,
}

/// Where the guests mount a tmpfs over the host's root they share.
const HIDDEN_FROM_GUESTS: [&str; 3] = ["/tmp", "/run", "/var/tmp"];

/// kselftest runs test_progs from its run directory in the cache, over
/// the shared host root: a cache under a directory the guests cover with
/// a tmpfs fails every runner, after the builds. Said before them, when
/// a step of `selected` runs kselftest.
pub fn guests_see(selected: &[Step], cache: &Path) -> Result<()> {
    if selected.iter().any(|s| s.id.starts_with("kselftest")) {
        cache_in_sight(cache)
    } else {
        Ok(())
    }
}

/// Whether the guests see `cache`: not under a tmpfs of theirs.
fn cache_in_sight(cache: &Path) -> Result<()> {
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
    let cpu = times::cpu_ticks();
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
            .zip(times::cpu_ticks())
            .and_then(|(from, to)| times::idle_percent(from, to)),
    })
}

/// The run's times, as ci-times.json holds them.
fn times_of(outcomes: &[Outcome], cold: bool, base: Option<f64>, total: Duration) -> CiTimes {
    CiTimes {
        commit: commit::id(),
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

/// Writes `times` into the run's directory, prints the projection, and
/// with `record` puts them on record.
fn report_times(run_dir: &Path, times: &CiTimes, record: bool) -> Result<()> {
    let path = times::write(run_dir, times)?;
    println!("times: {}", path.display());
    let on_record = project::root().join(times::COLD_RECORD);
    if record {
        times::record(times, &on_record)?;
        println!("recorded as the cold run: {}", on_record.display());
    }
    match times::read(&on_record) {
        Ok(cold) => {
            let p = times::project(&cold, times)?;
            let base = cold.base_build_seconds.unwrap_or_default();
            println!("{}", times::projection_text(&p, base));
        }
        Err(_) if !on_record.exists() => println!(
            "no cold run on record ({}) to project from: make one with `cargo xtask ci --record-times --cache-dir EMPTY_DIR`",
            times::COLD_RECORD
        ),
        Err(e) => return Err(e),
    }
    Ok(())
}

/// The cache trimmed to `cap` as `cache --prune --cache-cap` does, this
/// run's directory kept; a cache still over it is named, not failed.
fn trim_cache(cache: &Path, cap: u64, run_dir: &Path) -> Result<()> {
    let series = crate::kernel::project_series()?;
    let week = Duration::from_secs(7 * 86400);
    let t = disk_usage::trim(cache, &series.variant_names(), week, Some(cap), run_dir)?;
    for p in &t.removed {
        println!("cache cap: removed {}", p.display());
    }
    let total = disk_usage::total(&t.parts);
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
    use crate::ci::Runs;

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
        let e = cache_in_sight(Path::new("/tmp/bpflab-nonexistent/cache"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--cache-dir /tmp/bpflab-nonexistent/cache: under /tmp"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        cache_in_sight(Path::new("/root/.cache/bpflab")).unwrap();
        cache_in_sight(Path::new("/tmpdir/cache")).unwrap();
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
