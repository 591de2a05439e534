//! `cargo xtask bench`: the seed's timing table, measured on each kernel in
//! one run, side by side, plus the sparse patterns, the prefault window's
//! targets, the size sweep and its plot.

use std::fs;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use guest_common::protocol::Program;

use crate::cli::BenchArgs;
use crate::host_noise;
use crate::hostdeps;
use crate::project::{self, EXIT_INFRA, EXIT_TESTS_FAILED};
use crate::report::bench::KernelBench;
use crate::report::bench::{parse_records, summary_json, sweep_series, sweep_summary, table};
use crate::report::fill::fill_table;
use crate::report::plot;
use crate::report::protocol::Outcome;
use crate::report::sparse::sparse_table;
use crate::report::targets::window_targets;
use crate::report::threads::threads_table;
use crate::vm::session::{self, GuestRun, Prepared, Session};
use crate::vm::targets::Target;

/// How long the host's memory is probed after each round of boots.
const HOST_NOISE_PROBE: std::time::Duration = std::time::Duration::from_secs(3);

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    let repeat = args.repeat.unwrap_or(if args.quick { 1 } else { 3 });
    if repeat == 0 {
        bail!("--repeat 0: at least one boot per kernel is needed");
    }
    let source = args.source.config()?;
    hostdeps::ensure_boot(&source)?;
    let Prepared {
        targets,
        mut session,
    } = session::prepare(&source, &args.vm.boot(), "bench")?;
    let mut results: Vec<KernelBench> = targets
        .iter()
        .map(|t| KernelBench {
            kernel: t.name.clone(),
            boots: vec![],
        })
        .collect();
    let mut accel = "?";
    let mut host_noise = vec![];
    // Interleave boots across kernels so drift on a noisy host hits all.
    for round in 0..repeat {
        for (target, bench) in targets.iter().zip(results.iter_mut()) {
            crate::status!(&target.name, "benchmark boot {} of {repeat}", round + 1);
            let run = match boot_once(&mut session, target, args.quick) {
                Ok(run) => run,
                Err(code) => return Ok(code),
            };
            accel = run.accel.name();
            bench.boots.push(parse_records(&run.report.bench)?);
        }
        // Between rounds, with no VM running: the host's own swing.
        host_noise.push(host_noise::probe(HOST_NOISE_PROBE));
    }
    let text = format!(
        "{}{}{}{}{}{}\n{}",
        table(&results, accel),
        sparse_table(&results),
        threads_table(&results),
        fill_table(&results),
        window_targets(&results),
        sweep_summary(&results),
        host_noise::summary(&host_noise),
    );
    println!("{text}");
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| project::root().join("target/bench"));
    let mut json = summary_json(accel, args.quick, repeat, &results);
    json["host_noise"] = serde_json::json!(host_noise);
    write_outputs(&out, &text, &json, accel, &results)?;
    Ok(ExitCode::SUCCESS)
}

/// One benchmark boot, or the exit code that ends the run (said why on
/// stderr): the VM failed, the benchmark failed, or the kernel splatted.
fn boot_once(session: &mut Session, target: &Target, quick: bool) -> Result<GuestRun, ExitCode> {
    let args = if quick {
        vec!["--quick".into()]
    } else {
        vec![]
    };
    let run = session
        .run_guest(target, target.guest(Program::Bench, args, None))
        .with_context(|| format!("benchmarking {}: the VM could not do its job", target.name))
        .inspect_err(|e| eprintln!("error: {e:#}"));
    let Ok(run) = run else {
        return Err(ExitCode::from(EXIT_INFRA));
    };
    if let Some(why) = &run.vm_failure {
        eprintln!(
            "error: benchmarking {}: the VM could not do its job: {why}",
            target.name
        );
        return Err(ExitCode::from(EXIT_INFRA));
    }
    if run.report.verdict.outcome != Outcome::Pass {
        eprintln!(
            "error: the benchmark failed on {}: {} (console: {})",
            target.name,
            run.report.verdict.detail,
            run.outcome.console_log.display()
        );
        return Err(ExitCode::from(EXIT_TESTS_FAILED));
    }
    if let Some(first) = run.outcome.splats.first() {
        eprintln!(
            "error: the {} kernel reported problems during the benchmark, first: {} (console: {})",
            target.name,
            first.trim(),
            run.outcome.console_log.display()
        );
        return Err(ExitCode::from(EXIT_TESTS_FAILED));
    }
    Ok(run)
}

/// bench.json, table.txt and sweep.svg in `out`.
fn write_outputs(
    out: &Path,
    text: &str,
    json: &serde_json::Value,
    accel: &str,
    results: &[KernelBench],
) -> Result<()> {
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    fs::write(out.join("bench.json"), serde_json::to_string_pretty(json)?)?;
    fs::write(out.join("table.txt"), text)?;
    fs::write(
        out.join("sweep.svg"),
        plot::svg(
            &format!("mmap()+munmap() of a BPF_F_MMAPABLE array map ({accel})"),
            "map size",
            "time (µs)",
            &sweep_series(results),
        ),
    )?;
    eprintln!(
        "wrote {}/bench.json, table.txt and sweep.svg",
        out.display()
    );
    Ok(())
}
