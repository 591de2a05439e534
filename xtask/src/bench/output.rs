//! What a measured bench run gives the user: the tables printed,
//! bench.json, table.txt and sweep.svg written, and the gates asked for
//! held.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use super::boots::Measured;
use super::calibration::Calibrated;
use super::fill::fill_table;
use super::gate::{unsteady_report, RunShape};
use super::grid::{grid_table, Clock};
use super::guest_records::{summary_json, sweep_curves, sweep_summary, KernelBench};
use super::host_noise;
use super::model::fit_report;
use super::options::BenchOptions;
use super::plot;
use super::record::{gate, gate_targets, read_targets_met, record_holds};
use super::seed::seed_table;
use super::sparse::sparse_table;
use super::targets::{targets, Targets};
use super::threads::threads_table;

/// Prints the tables and writes bench.json, table.txt and sweep.svg;
/// whether a gate failed.
pub(super) fn report(
    opts: &BenchOptions,
    measured: &Measured,
    model: Option<&Calibrated>,
    head: &str,
    shape: &RunShape,
) -> Result<(bool, Option<Targets>)> {
    let (results, clock) = (&measured.results[..], measured.clock);
    let m = model.map(|c| &c.model);
    let mut text = seed_table(results, clock, m);
    if let Some(c) = model {
        text.push_str(&fit_report(&c.model, &c.cells, &c.source));
    }
    text.push_str(&grid_table(results, clock, m));
    let (steadiness, unsteady) = unsteady_report(results);
    if clock == Clock::Icount {
        text.push_str(&steadiness);
    }
    if !opts.quick {
        let unit = match clock {
            Clock::Icount => "icount: a guest µs below is a thousand guest instructions, one vCPU",
            Clock::Wall => "the wall clock",
        };
        text.push_str(&format!(
            "\nThe older sections ({unit}):\n{}{}{}{}",
            sparse_table(results),
            threads_table(results),
            fill_table(results),
            sweep_summary(results)
        ));
    }
    let goals = targets(results, head, clock, m);
    if let Some(t) = &goals {
        text.push_str(&t.text);
    }
    text.push_str(&format!(
        "
{}",
        host_noise::summary(&measured.host_noise)
    ));
    println!("{text}");
    let mut json = summary_json(
        clock.name(),
        opts.quick,
        results.first().map_or(0, |k| k.boots.len()),
        results,
    );
    json["host_noise"] = serde_json::json!(measured.host_noise);
    write_outputs(&opts.out, &text, &json, clock, results)?;
    let mut failed = false;
    if opts.gate {
        failed |= gate(results, clock, unsteady, shape)?;
    } else if opts.record && record_holds(shape)? {
        eprintln!("bench: --record holds this run to the record it would replace (same shape), as --gate does");
        failed |= gate(results, clock, unsteady, shape)?;
    }
    if opts.gate_targets {
        let held = read_targets_met()?;
        failed |= gate_targets(goals.as_ref(), head, &held);
    }
    Ok((failed, goals))
}

/// bench.json, table.txt and sweep.svg in `out`.
fn write_outputs(
    out: &Path,
    text: &str,
    json: &serde_json::Value,
    clock: Clock,
    results: &[KernelBench],
) -> Result<()> {
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    fs::write(out.join("bench.json"), serde_json::to_string_pretty(json)?)?;
    fs::write(out.join("table.txt"), text)?;
    fs::write(
        out.join("sweep.svg"),
        plot::svg(
            &format!(
                "mmap()+munmap() of a BPF_F_MMAPABLE array map ({} clock)",
                clock.name()
            ),
            "map size",
            "time (µs)",
            &sweep_curves(results),
        ),
    )?;
    eprintln!(
        "wrote {}/bench.json, table.txt and sweep.svg",
        out.display()
    );
    Ok(())
}
