//! The record on disk: `--record` writes this run's rows to
//! `docs/bench/icount.json`, whole and of one shape, and the head's
//! targets met to `docs/bench/targets-met.txt`, refusing a run that
//! failed a gate, booted once, was unsteady, lacked a kernel, or would
//! drop a target unasked (`--drop-target`); `--gate` and `--gate-targets`
//! hold a run to them and say why on stderr.

use std::fs;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::gate::{partial_rows, regressions, unsteady_report, BenchRecord, RunShape};
use super::grid::Clock;
use super::guest_records::KernelBench;
use super::outcome::BenchOutcome;
use super::shape::RECORD_COMMAND;
use super::targets::{self, Targets};
use crate::project;

/// The record `--record` writes and `--gate` reads.
pub(super) fn record_path() -> PathBuf {
    project::root().join("docs/bench/icount.json")
}

/// The targets met in the record's run, which `--record` writes and
/// `--gate-targets` holds.
pub(super) fn targets_met_path() -> PathBuf {
    project::root().join("docs/bench/targets-met.txt")
}

/// CI's gate: steadiness and the record. True when it failed.
pub(super) fn gate(
    results: &[KernelBench],
    clock: Clock,
    unsteady: usize,
    shape: &RunShape,
) -> Result<bool> {
    if clock != Clock::Icount {
        bail!("--gate compares guest instructions, and this run was on a wall clock (KVM): use --accel tcg");
    }
    let boots = results.iter().map(|k| k.boots.len()).min().unwrap_or(0);
    if boots < 2 {
        bail!("--gate judges steadiness across boots, and this run booted each kernel {boots} time(s): add --repeat 2");
    }
    let record = read_record()?;
    if let Some(why) = record.shape.mismatch(shape) {
        bail!(
            "{} was recorded {why}: the rows' instructions differ; run as recorded, or record again",
            record_path().display()
        );
    }
    let c = regressions(&record, results);
    for w in &c.worse {
        eprintln!("bench gate: worse than the record: {w}");
    }
    for m in &c.missing {
        eprintln!("bench gate: in the record but not measured in every boot of this run: {m}");
    }
    for u in &c.unrecorded {
        eprintln!("bench gate: measured but not in the record: {u} (record it with --record)");
    }
    if unsteady > 0 {
        eprintln!("bench gate: {unsteady} row(s) are unsteady (boots further apart than their bound; listed above)");
    }
    let failed = c.failed() || unsteady > 0;
    eprintln!(
        "bench gate: {} of {} rows within the record, {} recorded not measured, {} measured not recorded, {unsteady} unsteady: {}",
        c.compared - c.rows_worse,
        c.compared,
        c.missing.len(),
        c.unrecorded.len(),
        if failed { "FAILED" } else { "passed" }
    );
    Ok(failed)
}

/// The targets gate: every target `held` (the record's met list) names
/// must be met in this run; an unmeasured or open one is no pass, and an
/// empty list holds nothing. True when it failed.
pub(super) fn gate_targets(goals: Option<&Targets>, head: &str, held: &str) -> bool {
    let Some(t) = goals else {
        eprintln!("bench: --gate-targets needs eager, mainline and {head} in the run");
        return true;
    };
    let n = targets::held(held).count();
    if n == 0 {
        eprintln!(
            "bench: {} lists no target met: nothing to hold (record one with --record)",
            targets_met_path().display()
        );
        return true;
    }
    let lost = t.lost(held);
    for name in &lost {
        eprintln!("bench: target of {head} met in the record, not in this run: {name}");
    }
    eprintln!(
        "bench targets: {} of the {n} met in the record still met; {} met, {} MISSED, {} undecided of {}: {}",
        n - lost.len(),
        t.met,
        t.missed,
        t.undecided,
        t.met + t.missed + t.undecided,
        if lost.is_empty() { "passed" } else { "FAILED" }
    );
    !lost.is_empty()
}

/// The targets met in the record's run, a line each (`targets::held`).
pub(super) fn read_targets_met() -> Result<String> {
    let path = targets_met_path();
    fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {}: --gate-targets holds the targets it lists; write it with --record",
            path.display()
        )
    })
}

/// Whether `--record` holds this run to the record it would replace, as
/// `--gate` does: whenever that record was made in this run's shape, so
/// only a run made otherwise (another bench, QEMU, memory or series)
/// starts a record afresh, and a slower row never replaces a faster one
/// quietly. No record yet holds nothing.
pub(super) fn record_holds(shape: &RunShape) -> Result<bool> {
    let path = record_path();
    match fs::read_to_string(&path) {
        Ok(text) => {
            recorded_in_shape(&text, shape).with_context(|| format!("parsing {}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Whether the record `text` was made in `shape`.
fn recorded_in_shape(text: &str, shape: &RunShape) -> Result<bool> {
    let record: BenchRecord = serde_json::from_str(text)?;
    Ok(record.shape.mismatch(shape).is_none())
}

pub(super) fn read_record() -> Result<BenchRecord> {
    let path = record_path();
    let text = fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {}: make it with `cargo xtask bench --record`",
            path.display()
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// A measured run as `--record` takes it.
pub(super) struct RecordRun<'a> {
    pub(super) results: &'a [KernelBench],
    pub(super) shape: RunShape,
    pub(super) goals: Option<&'a Targets>,
    pub(super) head: &'a str,
    /// Every kernel of the series: a record holds them all.
    pub(super) series_kernels: Vec<String>,
    /// How the gates this run was held to ended.
    pub(super) verdict: BenchOutcome,
}

/// `--record`: this run, whole, as the record, and its targets met as the
/// list, unless `refusal` finds a reason not to; then the verdict.
pub(super) fn record(run: RecordRun, drops: &[String]) -> Result<BenchOutcome> {
    let met_before = match fs::read_to_string(targets_met_path()) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(e).with_context(|| format!("reading {}", targets_met_path().display()))
        }
    };
    let (_, unsteady) = unsteady_report(run.results);
    let refused = refusal(&run, unsteady, &met_before, drops);
    for why in &refused {
        eprintln!("bench: not recorded: {why}");
    }
    if !refused.is_empty() {
        return Ok(BenchOutcome::GateFailed);
    }
    let path = record_path();
    let record = BenchRecord::of(run.results, run.shape);
    crate::util::write_atomic(&path, serde_json::to_string_pretty(&record)?.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    let kernels: Vec<&str> = record.kernels.keys().map(String::as_str).collect();
    eprintln!("wrote {} ({})", path.display(), kernels.join(", "));
    let Some(t) = run.goals else {
        return Ok(run.verdict);
    };
    let change = targets_change(&t.met_list(), &met_before, drops);
    for name in &change.added {
        eprintln!("bench: target newly met, added to the list: {name}");
    }
    for name in &change.lost {
        eprintln!("bench: target dropped from the list (--drop-target): {name}");
    }
    let path = targets_met_path();
    let head = run.head;
    let text = format!(
        "# The targets of {head} met in the record's run (`bench --record`), a line\n\
         # each: `bench --gate-targets` fails when one of them is no longer met.\n{}",
        t.met_list()
    );
    crate::util::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "wrote {} ({} of {head}'s targets met)",
        path.display(),
        t.met
    );
    Ok(run.verdict)
}

/// Why `run` is not to be recorded, a line each; empty when it may be.
fn refusal(run: &RecordRun, unsteady: usize, met_before: &str, drops: &[String]) -> Vec<String> {
    let mut why = vec![];
    if run.verdict != BenchOutcome::Passed {
        why.push("a gate this run was held to failed (above): a record is made from a run that passes its gates".to_string());
    }
    let boots = run.results.iter().map(|k| k.boots.len()).min().unwrap_or(0);
    if boots < 2 {
        why.push(format!("each kernel booted {boots} time(s), and a record judges steadiness across boots: add --repeat 2 (`{RECORD_COMMAND}`)"));
    }
    if unsteady > 0 {
        why.push(format!("{unsteady} row(s) are unsteady (listed above)"));
    }
    for row in partial_rows(run.results) {
        why.push(format!(
            "a record holds rows measured in every boot, and {row}"
        ));
    }
    let lacking: Vec<&str> = run
        .series_kernels
        .iter()
        .filter(|name| !run.results.iter().any(|k| &&k.kernel == name))
        .map(String::as_str)
        .collect();
    if !lacking.is_empty() {
        why.push(format!(
            "a record holds every kernel of the series, and this run lacks {}: run with --kernel all",
            lacking.join(", ")
        ));
    }
    let Some(t) = run.goals else {
        why.push(format!(
            "the targets need eager, mainline and {} in the run",
            run.head
        ));
        return why;
    };
    let change = targets_change(&t.met_list(), met_before, drops);
    for name in &change.undropped {
        why.push(format!(
            "target met in the record and not in this run: {name} (to let it go: --drop-target '{name}')"
        ));
    }
    for name in &change.unknown_drops {
        why.push(format!(
            "--drop-target '{name}': not a target that this run drops from {}",
            targets_met_path().display()
        ));
    }
    why
}

/// How the list of targets met changes from `before` to `now` (both
/// `met_list`s), with `drops` the targets the user lets go.
#[derive(Debug, Default, PartialEq)]
struct TargetsChange {
    /// Met now and not before.
    added: Vec<String>,
    /// Met before and not now, and named in `drops`.
    lost: Vec<String>,
    /// Met before and not now, and not named in `drops`: a refusal.
    undropped: Vec<String>,
    /// Named in `drops` and not lost: a refusal.
    unknown_drops: Vec<String>,
}

fn targets_change(now: &str, before: &str, drops: &[String]) -> TargetsChange {
    let now: Vec<&str> = targets::held(now).collect();
    let before: Vec<&str> = targets::held(before).collect();
    let mut change = TargetsChange::default();
    for name in &before {
        if now.contains(name) {
            continue;
        }
        if drops.iter().any(|d| d == name) {
            change.lost.push(name.to_string());
        } else {
            change.undropped.push(name.to_string());
        }
    }
    change.added = now
        .iter()
        .filter(|n| !before.contains(n))
        .map(|n| n.to_string())
        .collect();
    change.unknown_drops = drops
        .iter()
        .filter(|d| !change.lost.contains(d))
        .cloned()
        .collect();
    change
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gates_pass_only_on_what_they_judged() {
        let one_boot = [KernelBench {
            kernel: "eager".into(),
            boots: vec![vec![]],
        }];
        let shape = crate::bench::shape::tests::shape();
        let err = gate(&one_boot, Clock::Icount, 0, &shape).unwrap_err();
        assert!(err.to_string().contains("add --repeat 2"), "{err}");
        let t = |words: &[&'static str]| Targets {
            cells: words
                .iter()
                .enumerate()
                .map(|(i, &w)| (format!("cell {i}"), w))
                .collect(),
            ..Targets::default()
        };
        let held = "# met in the record\ncell 0\ncell 1\n";
        assert!(!gate_targets(
            Some(&t(&["met", "met", "MISSED"])),
            "adaptive",
            held
        ));
        assert!(gate_targets(Some(&t(&["met", "MISSED"])), "adaptive", held));
        assert!(
            gate_targets(Some(&t(&["met", "not established"])), "adaptive", held),
            "an open target is no pass"
        );
        assert!(
            gate_targets(Some(&t(&["met"])), "adaptive", held),
            "a held target gone from the table is no pass"
        );
        assert!(
            gate_targets(Some(&t(&["met", "met"])), "adaptive", "# nothing\n"),
            "an empty list holds nothing"
        );
        assert!(gate_targets(None, "adaptive", held));
    }

    #[test]
    fn a_record_of_this_runs_shape_holds_the_run_that_would_replace_it() {
        let shape = crate::bench::shape::tests::shape();
        let record = BenchRecord::of(&[two_boots("eager")], shape.clone());
        let text = serde_json::to_string(&record).unwrap();
        assert!(recorded_in_shape(&text, &shape).unwrap());
        let mut other = shape.clone();
        other.quick = false;
        assert!(!recorded_in_shape(&text, &other).unwrap());
        assert!(recorded_in_shape("{", &shape).is_err());
    }

    fn met(words: &[&'static str]) -> Targets {
        Targets {
            cells: words
                .iter()
                .enumerate()
                .map(|(i, &w)| (format!("cell {i}"), w))
                .collect(),
            met: words.iter().filter(|w| **w == "met").count(),
            ..Targets::default()
        }
    }

    fn two_boots(name: &str) -> KernelBench {
        KernelBench {
            kernel: name.into(),
            boots: vec![vec![], vec![]],
        }
    }

    /// A kernel whose every boot measured one grid row.
    fn bench_row(name: &str, boots: usize) -> KernelBench {
        let key = crate::bench::grid::RowKey::find("nopopulate_touchall", 2048, 1).unwrap();
        let rec = crate::bench::grid::tests::grid_record(&key, &[9, 9, 9], 0.0, None);
        KernelBench {
            kernel: name.into(),
            boots: vec![vec![rec]; boots],
        }
    }

    #[test]
    fn a_record_is_refused_after_a_failed_gate_one_boot_or_a_kernel_lacking() {
        let results = [two_boots("eager"), two_boots("adaptive")];
        let goals = met(&["met"]);
        let run = |verdict, results| run_of(verdict, results, &goals);
        let ok = run(BenchOutcome::Passed, &results);
        assert_eq!(refusal(&ok, 0, "cell 0\n", &[]), Vec::<String>::new());
        let why = refusal(&run(BenchOutcome::GateFailed, &results), 0, "", &[]);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(
            why[0].starts_with("a gate this run was held to failed"),
            "{why:?}"
        );
        let once = [
            KernelBench {
                boots: vec![vec![]],
                ..two_boots("eager")
            },
            two_boots("adaptive"),
        ];
        let why = refusal(&run(BenchOutcome::Passed, &once), 0, "", &[]);
        assert!(
            why.len() == 1 && why[0].contains("add --repeat 2"),
            "{why:?}"
        );
        let why = refusal(&run(BenchOutcome::Passed, &results[1..]), 0, "", &[]);
        assert!(
            why.len() == 1 && why[0].contains("lacks eager: run with --kernel all"),
            "{why:?}"
        );
        let mut half = [bench_row("eager", 2), bench_row("adaptive", 2)];
        half[1].boots[0].clear();
        let why = refusal(&run(BenchOutcome::Passed, &half), 0, "cell 0\n", &[]);
        assert!(
            why.len() == 1 && why[0].ends_with("(measured in 1 of 2 boots)"),
            "{why:?}"
        );
        let why = refusal(&ok, 3, "", &[]);
        assert!(
            why.len() == 1 && why[0].starts_with("3 row(s) are unsteady"),
            "{why:?}"
        );
    }

    fn run_of<'a>(
        verdict: BenchOutcome,
        results: &'a [KernelBench],
        goals: &'a Targets,
    ) -> RecordRun<'a> {
        RecordRun {
            results,
            shape: crate::bench::shape::tests::shape(),
            goals: Some(goals),
            head: "adaptive",
            series_kernels: vec!["eager".into(), "adaptive".into()],
            verdict,
        }
    }

    #[test]
    fn a_target_that_would_leave_the_list_is_named_and_needs_drop_target() {
        let results = [two_boots("eager"), two_boots("adaptive")];
        let goals = met(&["met", "MISSED", "met"]);
        let run = run_of(BenchOutcome::Passed, &results, &goals);
        let before = "# the list\ncell 0\ncell 1\n";
        let why = refusal(&run, 0, before, &[]);
        assert_eq!(
            why,
            ["target met in the record and not in this run: cell 1 (to let it go: --drop-target 'cell 1')"]
        );
        assert!(refusal(&run, 0, before, &["cell 1".into()]).is_empty());
        let why = refusal(&run, 0, before, &["cell 1".into(), "cell 9".into()]);
        assert!(
            why.len() == 1 && why[0].starts_with("--drop-target 'cell 9': not a target"),
            "{why:?}"
        );
        let change = targets_change(&goals.met_list(), before, &["cell 1".into()]);
        assert_eq!(
            change,
            TargetsChange {
                added: vec!["cell 2".into()],
                lost: vec!["cell 1".into()],
                ..TargetsChange::default()
            }
        );
    }
}
