//! The record on disk: `--record` writes this run's rows to
//! `docs/bench/icount.json` and the head's targets met to
//! `docs/bench/targets-met.txt`; `--gate` and `--gate-targets` hold a
//! run to them and say why on stderr.

use std::fs;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::gate::{regressions, unsteady_report, BenchRecord, RunShape};
use super::grid::Clock;
use super::guest_records::KernelBench;
use super::outcome::BenchOutcome;
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
    if let Some(why) = record.mismatch(shape) {
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
        eprintln!("bench gate: in the record but not measured in this run: {m}");
    }
    for k in &c.unrecorded {
        eprintln!(
            "bench gate: {k} has no rows in the record: not compared (record it with --record)"
        );
    }
    if unsteady > 0 {
        eprintln!("bench gate: {unsteady} one-thread row(s) of 1 ms or more are unsteady (boots more than 1% apart; listed above)");
    }
    if c.compared == 0 {
        eprintln!(
            "bench gate: no row of this run is in {}: nothing was compared",
            record_path().display()
        );
        return Ok(true);
    }
    let failed = c.rows_worse > 0 || unsteady > 0 || !c.missing.is_empty();
    eprintln!(
        "bench gate: {} of {} rows within the record, {} recorded rows not measured, {unsteady} unsteady: {}",
        c.compared - c.rows_worse,
        c.compared,
        c.missing.len(),
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

/// `--record`: this run's kernels into the record (the others kept when
/// it was made alike), unless a steady row was not; then the verdict.
pub(super) fn record(
    results: &[KernelBench],
    shape: RunShape,
    goals: Option<&Targets>,
    head: &str,
    verdict: BenchOutcome,
) -> Result<BenchOutcome> {
    let (_, unsteady) = unsteady_report(results);
    if unsteady > 0 {
        eprintln!("bench: not recorded: {unsteady} one-thread row(s) of 1 ms or more are unsteady (listed above)");
        return Ok(BenchOutcome::GateFailed);
    }
    let path = record_path();
    let new = BenchRecord::of(results, shape);
    let record = match read_record() {
        Ok(old) => old.merged(new),
        Err(_) => new,
    };
    crate::util::write_atomic(&path, serde_json::to_string_pretty(&record)?.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "wrote {} ({})",
        path.display(),
        record
            .kernels
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(t) = goals {
        let path = targets_met_path();
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
    }
    Ok(verdict)
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
        let shape = RunShape {
            quick: true,
            cpus: Some(1),
            append: vec![],
        };
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
}
