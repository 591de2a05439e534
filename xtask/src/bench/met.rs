//! The record's own account of the targets met, for the docs' checks
//! (`docs_claims`): the targets `docs/bench/icount.json` meets, worked out
//! from its rows as `--record` worked them out from the run, and the
//! lines of `docs/bench/targets-met.txt`.

use anyhow::{Context, Result};
use guest_common::bench::grid::{PAGES, THREADS};

use super::calibration::model_for;
use super::gate::RecordRow;
use super::grid::Clock;
use super::guest_records::{KernelBench, Record};
use super::record::{read_record, targets_met_path};
use super::targets::{self, RSS, TIMED};

/// How many targets the head is held to: every timed target at every
/// size and thread count, and the Rss targets at every size.
pub const TARGETS: usize = TIMED.len() * THREADS.len() * PAGES.len() + RSS.len() * PAGES.len();

/// The targets `docs/bench/targets-met.txt` lists, a name each.
pub fn listed() -> Result<Vec<String>> {
    let path = targets_met_path();
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(targets::held(&text).map(String::from).collect())
}

/// The record's targets of `head`: every cell and its verdict, from the
/// record's rows as one boot of each kernel, with the model fitted on
/// them; and whether the record holds the Rss that the Rss targets read
/// (a record from before it does not: those cells are "not measured").
pub fn record_verdicts(head: &str) -> Result<(Vec<(String, &'static str)>, bool)> {
    let record = read_record()?;
    let kernels: Vec<KernelBench> = record
        .kernels
        .iter()
        .map(|(name, rows)| KernelBench {
            kernel: name.clone(),
            boots: vec![rows.iter().map(as_guest_record).collect()],
        })
        .collect();
    let rss = record
        .kernels
        .values()
        .flatten()
        .any(|r| r.rss_kb.is_some());
    let model = model_for(&kernels, Clock::Icount);
    let t = targets::targets(
        &kernels,
        head,
        Clock::Icount,
        model.as_ref().map(|c| &c.model),
    )
    .context("the record lacks eager, mainline or the head")?;
    Ok((t.cells, rss))
}

/// A recorded row as the guest's record of one boot would give it.
fn as_guest_record(row: &RecordRow) -> Record {
    let ns = row.instructions.round() as u64;
    let extra = [
        ("pages", serde_json::json!(row.pages)),
        ("threads", serde_json::json!(row.threads)),
        ("faults_per_cycle", serde_json::json!(row.faults)),
        (
            "mmap_faults",
            serde_json::json!(row.faults - row.user_faults),
        ),
        ("rss_kb", serde_json::json!(row.rss_kb)),
    ];
    Record {
        kind: "grid".into(),
        scenario: Some(row.scenario.clone()),
        size_bytes: row.pages * 4096,
        samples: Some(1),
        min_ns: Some(ns),
        median_ns: Some(ns),
        p90_ns: Some(ns),
        extra: extra.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}
