//! A mutants run as a suite: each mutant of the series held to the
//! expectations of the variant its patch belongs to (0001's on
//! `mainline`, 0002's and 0003's on `direct`, and so on), built as that
//! variant's whole series with the one patch mutated, as the kernel
//! variant `mutant` (one tree, rebuilt incrementally), and run through
//! the plan with `--fail-fast`. First the judge runs on each such
//! variant unmutated, built the same way, a control that must pass, or
//! no outcome would mean anything. Killed, crashed (counted as killed), survived; did not
//! build, undecided (the judge broke) and errors (the host failed) are
//! not counted and fail the run. With a sample, each mutant is held to
//! the tests its line names: those run first, alone (and the control
//! runs them), and the whole plan only when they do not kill it; the
//! sample's lines are checked against who killed what.

use std::time::Instant;

use anyhow::{bail, Result};

use super::control::control;
use super::judge::{self, judge_all, Judging};
use super::outcome;
use super::report::{self, Summary};
use super::select::Selected;
use super::JudgeOptions;
use super::Mutant;
use crate::kernel::SourceConfig;
use crate::project;

/// What the run found: the report, and each sample line its named
/// tests did not hold.
pub struct Judged {
    pub summary: Summary,
    pub sample_misses: Vec<String>,
}

impl Judged {
    pub fn passed(&self) -> bool {
        self.summary.passed() && self.sample_misses.is_empty()
    }
}

/// Judges `chosen`'s mutants as `options` says, in a new run directory
/// of the cache. The host tools to build and boot (and fuzz) must be
/// there.
pub fn run(source: &SourceConfig, chosen: &Selected, options: &JudgeOptions) -> Result<Judged> {
    let run_dir = project::new_run_dir(&source.cache_dir, "mutants")?;
    // What besides the mutated series decides an outcome: a change to any
    // of it runs the mutant again.
    let decides = judge::what_decides(options, source, &chosen.series)?;
    let counted: Vec<&Mutant> = chosen
        .mutants
        .iter()
        .filter(|m| !chosen.equivalent.contains_key(&m.id))
        .collect();
    if counted.is_empty() {
        bail!("no mutant to judge: every one chosen is listed in mutants/EQUIVALENT (`--list` shows them)");
    }
    let sample = chosen.sample.as_ref();
    let mut controls = control(
        options,
        (source, &chosen.series, &run_dir),
        (&counted, sample),
    )?;
    let started = Instant::now();
    let ctx = Judging {
        options,
        source,
        series: &chosen.series,
        texts: &chosen.texts,
        decides: &decides,
        run_dir: &run_dir,
        sample,
    };
    let (outcomes, remembered) =
        judge_all(&ctx, &chosen.mutants, &chosen.equivalent, &mut controls)?;
    let secs = (started.elapsed().as_secs_f64(), remembered);
    let summary = report::write(&chosen.mutants, &outcomes, &run_dir, secs)?;
    let sample_misses = sample
        .map(|s| outcome::sample_misses(s, &chosen.mutants, &outcomes))
        .unwrap_or_default();
    Ok(Judged {
        summary,
        sample_misses,
    })
}
