//! What a ci run cost: every step's time, written as `ci-times.json` in
//! the run's directory, and the cold run's time on the slowest machine
//! of this project, projected from the cold run on record
//! (`docs/ci-times-cold.json`), so that a step that grows the cold run
//! past its budget is seen in the run that adds it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::kernel::progress::BUILD_SECONDS_STAMP;
use crate::util::write_atomic;

/// The file each ci run writes into its run directory.
pub const FILE_NAME: &str = "ci-times.json";
/// The cold run on record, in the project.
pub const COLD_RECORD: &str = "docs/ci-times-cold.json";
/// The base kernel's cold build on the slowest machine of this project,
/// of the same source as the cold run on record (7.3's eager). Measured
/// there on 6.12: 727 s (2026-12-02); 7.3's eager by estimate, scaled by
/// 7.3's eager against 6.12's each built alone here (653 s / 584 s,
/// x1.118). A machine's speed is its base build against this.
pub const SLOWEST_BASE_SECONDS: f64 = 813.0;
/// What a cold run may take on the slowest machine: 85 of CI's 90
/// minutes, the rest kept for machines slower still. It was 60 until the
/// proof of a developer's branch (issue 38: a git repository of the tree,
/// its kernels and test_progs, about 4 min cold here) came in with the
/// cold run at about 62 min (2423 s at 1c72f2a, base 471 s); 70 until a
/// debug kernel came into the run that decides what lands (issue 54:
/// adaptive-debug's cold build, its plan and the debug mutants, 873 s of
/// a cold run of 4222 s at e7f0991, base 684 s: about 84 min there). On
/// record: 4520 s at 09598c4 with them, base 800 s: about 77 min there.
pub const BUDGET_SECONDS: f64 = 5100.0;

/// One step of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepTime {
    pub id: String,
    pub name: String,
    pub seconds: f64,
    pub ok: bool,
    /// The share of the host's CPU time that was idle while the step ran
    /// (others beside it included), in percent: where a core waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_percent: Option<f64>,
}

/// One ci run's times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CiTimes {
    /// HEAD's commit id, when the run was in a git checkout.
    pub commit: Option<String>,
    /// The kernel cache had no kernel tree and no ccache at the start:
    /// every kernel was built from nothing.
    pub cold: bool,
    /// The base kernel's build in this run, when it was built from
    /// nothing: the machine's speed.
    pub base_build_seconds: Option<f64>,
    pub steps: Vec<StepTime>,
    pub total_seconds: f64,
}

impl CiTimes {
    /// Every step ran and passed.
    fn passed(&self) -> bool {
        self.steps.iter().all(|s| s.ok)
    }
}

/// A cold run's time on the slowest machine, as projected.
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    pub seconds: f64,
    /// What the run on record's machine is scaled by.
    pub factor: f64,
    pub recorded_commit: Option<String>,
    /// This run's steps the record has no time for, counted at this
    /// run's time (warm, so the projection is low by their cold cost).
    pub unrecorded: Vec<String>,
}

/// The slowest machine's time for a run of `record`'s steps and of those
/// in `run` it lacks: the record's cold times, scaled by the speed of the
/// machine that made it. Every step of a ci compiles or runs guests on
/// both cores, so the whole scales with the base build.
pub fn project(record: &CiTimes, run: &CiTimes) -> Result<Projection> {
    let base = record
        .base_build_seconds
        .filter(|s| *s > 0.0)
        .context("the cold run on record has no base build time")?;
    let factor = SLOWEST_BASE_SECONDS / base;
    let unrecorded: Vec<&StepTime> = run
        .steps
        .iter()
        .filter(|s| !record.steps.iter().any(|r| r.id == s.id))
        .collect();
    let seconds =
        (record.total_seconds + unrecorded.iter().map(|s| s.seconds).sum::<f64>()) * factor;
    Ok(Projection {
        seconds,
        factor,
        recorded_commit: record.commit.clone(),
        unrecorded: unrecorded.iter().map(|s| s.id.clone()).collect(),
    })
}

/// The lines ci prints after its table.
pub fn projection_text(p: &Projection, record_base: f64) -> String {
    let commit = p
        .recorded_commit
        .as_deref()
        .map_or("?", |c| &c[..c.len().min(12)]);
    let mut text = format!(
        "a cold ci on the slowest machine (base kernel {SLOWEST_BASE_SECONDS:.0} s): about {:.0} min \
         ({COLD_RECORD} at {commit}, base {record_base:.0} s there, x{:.2})",
        p.seconds / 60.0,
        p.factor
    );
    if !p.unrecorded.is_empty() {
        text += &format!(
            "\n  not in that record, counted at this run's time: {}",
            p.unrecorded.join(", ")
        );
    }
    if p.seconds > BUDGET_SECONDS {
        text += &format!(
            "\n  WARNING: over the budget of {:.0} min: cut a step or move it out of ci (README)",
            BUDGET_SECONDS / 60.0
        );
    }
    text
}

/// Writes `times` into `run_dir`; returns the file's path.
pub fn write(run_dir: &Path, times: &CiTimes) -> Result<PathBuf> {
    let path = run_dir.join(FILE_NAME);
    write_to(&path, times)?;
    Ok(path)
}

fn write_to(path: &Path, times: &CiTimes) -> Result<()> {
    let json = serde_json::to_string_pretty(times).context("serialising ci times")?;
    write_atomic(path, format!("{json}\n").as_bytes())
}

/// Reads a `ci-times.json` (a run's, or the record).
pub fn read(path: &Path) -> Result<CiTimes> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Puts a run's times on record: only a cold run that passed whole, with
/// its base build timed, can be projected from.
pub fn record(times: &CiTimes, to: &Path) -> Result<()> {
    if !times.cold {
        bail!(
            "not recorded: the run started with kernels in the cache; run it with an empty one (--cache-dir EMPTY_DIR)"
        );
    }
    if !times.passed() {
        bail!("not recorded: a step failed");
    }
    if times.base_build_seconds.is_none() {
        bail!("not recorded: the base kernel's build time was not found in the cache");
    }
    write_to(to, times)
}

/// Whether a kernel cache holds nothing built: no kernel tree, no ccache.
pub fn cache_is_cold(cache: &Path) -> bool {
    let empty = |d: PathBuf| std::fs::read_dir(d).map_or(true, |mut e| e.next().is_none());
    empty(cache.join("sources")) && empty(cache.join("ccache"))
}

/// The base kernel's last build time in `cache`, if a build wrote one
/// since `since`.
pub fn base_build_seconds(cache: &Path, since: std::time::SystemTime) -> Option<f64> {
    let sources = std::fs::read_dir(cache.join("sources")).ok()?;
    sources
        .flatten()
        .flat_map(|e| {
            // A tree's base, or a Debian baseline's eager.
            ["base", "eager"].map(|b| {
                e.path()
                    .join(b)
                    .join("_build-default")
                    .join(BUILD_SECONDS_STAMP)
            })
        })
        .filter(|p| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= since)
        })
        .find_map(|p| parse_build_seconds(&std::fs::read_to_string(p).ok()?))
}

/// The host's CPU time so far, in ticks of all cores: busy and idle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTicks {
    busy: u64,
    idle: u64,
}

/// The host's CPU time now; None where /proc/stat cannot be read.
pub fn cpu_ticks() -> Option<CpuTicks> {
    parse_cpu_ticks(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// /proc/stat's `cpu` line: user nice system idle iowait irq softirq
/// steal (guest time is in user already). Waiting for I/O is idle.
fn parse_cpu_ticks(text: &str) -> Option<CpuTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let n: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal] = n[..] else {
        return None;
    };
    Some(CpuTicks {
        busy: user + nice + system + irq + softirq + steal,
        idle: idle + iowait,
    })
}

/// The idle share of the CPU time between two readings, in percent.
pub fn idle_percent(from: CpuTicks, to: CpuTicks) -> Option<f64> {
    let idle = to.idle.checked_sub(from.idle)?;
    let all = idle + to.busy.checked_sub(from.busy)?;
    (all > 0).then(|| 100.0 * idle as f64 / all as f64)
}

/// The seconds of a build-seconds stamp (`517 3085`).
pub fn parse_build_seconds(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, seconds: f64) -> StepTime {
        StepTime {
            id: id.into(),
            name: id.into(),
            seconds,
            ok: true,
            idle_percent: None,
        }
    }

    fn times(steps: Vec<StepTime>, total: f64, base: Option<f64>) -> CiTimes {
        CiTimes {
            commit: Some("0123456789abcdef".into()),
            cold: true,
            base_build_seconds: base,
            steps,
            total_seconds: total,
        }
    }

    #[test]
    fn the_idle_share_is_read_from_proc_stat() {
        let at = |user: u64, idle: u64, iowait: u64| {
            parse_cpu_ticks(&format!(
                "cpu  {user} 0 100 {idle} {iowait} 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
            ))
            .unwrap()
        };
        // 300 ticks busy, 100 idle and 100 waiting for I/O: 40% idle.
        let p = idle_percent(at(1000, 500, 0), at(1300, 600, 100)).unwrap();
        assert!((p - 40.0).abs() < 1e-9, "{p}");
        assert_eq!(
            idle_percent(at(1, 1, 0), at(1, 1, 0)),
            None,
            "no time passed"
        );
        assert_eq!(parse_cpu_ticks("cpu0 1 2 3\n"), None);
        assert_eq!(parse_cpu_ticks("cpu  1 2 x 4 5 6 7 8\n"), None);
        assert!(cpu_ticks().is_some(), "this host's /proc/stat");
    }

    #[test]
    fn the_record_is_scaled_by_the_machine_that_made_it() {
        let record = times(
            vec![step("build", 1000.0), step("vmtest", 400.0)],
            1410.0,
            Some(500.0),
        );
        let run = times(
            vec![step("build", 20.0), step("vmtest", 300.0)],
            330.0,
            None,
        );
        let p = project(&record, &run).unwrap();
        assert!((p.factor - 1.626).abs() < 0.001, "{}", p.factor);
        assert!((p.seconds - 1410.0 * 1.626).abs() < 1.0, "{}", p.seconds);
        assert!(p.unrecorded.is_empty());
    }

    #[test]
    fn a_step_the_record_lacks_is_counted_and_named() {
        let record = times(
            vec![step("build", 1000.0)],
            1000.0,
            Some(SLOWEST_BASE_SECONDS),
        );
        let run = times(vec![step("build", 10.0), step("new", 200.0)], 210.0, None);
        let p = project(&record, &run).unwrap();
        assert_eq!(p.seconds, 1200.0);
        assert_eq!(p.unrecorded, ["new"]);
        let text = projection_text(&p, SLOWEST_BASE_SECONDS);
        assert!(text.contains("about 20 min"), "{text}");
        assert!(
            text.contains("not in that record, counted at this run's time: new"),
            "{text}"
        );
        assert!(!text.contains("WARNING"), "{text}");
    }

    #[test]
    fn over_the_budget_warns() {
        let record = times(vec![step("build", 3200.0)], 3200.0, Some(500.0));
        let p = project(&record, &record).unwrap();
        assert!(projection_text(&p, 500.0).contains("WARNING: over the budget of 85 min"));
    }

    #[test]
    fn a_record_without_a_base_time_cannot_project() {
        let record = times(vec![step("build", 3000.0)], 3000.0, None);
        let e = project(&record, &record).unwrap_err();
        assert!(e.to_string().contains("no base build time"), "{e}");
    }

    #[test]
    fn only_a_cold_whole_passing_run_is_recorded() {
        let dir = std::env::temp_dir().join(format!("ci-times-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let to = dir.join("cold.json");
        let mut t = times(vec![step("build", 600.0)], 610.0, Some(517.0));
        t.cold = false;
        assert!(record(&t, &to)
            .unwrap_err()
            .to_string()
            .contains("empty one"));
        t.cold = true;
        t.steps[0].ok = false;
        assert!(record(&t, &to)
            .unwrap_err()
            .to_string()
            .contains("a step failed"));
        t.steps[0].ok = true;
        record(&t, &to).unwrap();
        assert_eq!(read(&to).unwrap(), t);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cold_means_no_tree_and_no_ccache() {
        let dir = std::env::temp_dir().join(format!("ci-cold-{}", std::process::id()));
        assert!(cache_is_cold(&dir));
        std::fs::create_dir_all(dir.join("ccache/0")).unwrap();
        assert!(!cache_is_cold(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn build_seconds_stamp() {
        assert_eq!(parse_build_seconds("517 3085\n"), Some(517.0));
        assert_eq!(parse_build_seconds(""), None);
    }
}
