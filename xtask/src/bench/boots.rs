//! A bench run's boots: every kernel booted `repeat` times, interleaved,
//! each boot's `BPFLAB-BENCH` records read, and the host's memory noise
//! probed between rounds on a wall clock.

use anyhow::Context;
use guest_common::protocol::Program;

use super::grid::Clock;
use super::guest_records::{parse_records, KernelBench};
use super::host_noise;
use super::outcome::BenchOutcome;
use crate::report::protocol::Outcome;
use crate::vm::qemu::{Accel, TcgThreads};
use crate::vm::session::{GuestRun, Session};
use crate::vm::targets::Target;

/// How long the host's memory is probed after each round of boots.
const HOST_NOISE_PROBE: std::time::Duration = std::time::Duration::from_secs(3);

/// What the boots gave: every kernel's records, the clock they were
/// taken on, the host's noise between rounds (wall clock only).
pub(super) struct Measured {
    pub(super) results: Vec<KernelBench>,
    pub(super) clock: Clock,
    pub(super) host_noise: Vec<Option<host_noise::Noise>>,
}

/// Every kernel booted `repeat` times, interleaved so drift on a noisy
/// host hits all; the records, the clock they were taken on, and the
/// host's noise between rounds. Err: how the run ended.
pub(super) fn boot_all(
    session: &mut Session,
    kernels: &[Target],
    repeat: usize,
    quick: bool,
) -> Result<Measured, BenchOutcome> {
    let mut results: Vec<KernelBench> = kernels
        .iter()
        .map(|t| KernelBench {
            kernel: t.name.clone(),
            boots: vec![],
        })
        .collect();
    let mut clock = Clock::Wall;
    let mut host_noise = vec![];
    for round in 0..repeat {
        for (target, bench) in kernels.iter().zip(results.iter_mut()) {
            crate::status!(&target.name, "benchmark boot {} of {repeat}", round + 1);
            let run = boot_once(session, target, quick)?;
            if run.accel == Accel::Tcg && session.tcg_threads() == TcgThreads::Icount {
                clock = Clock::Icount;
            }
            let records = parse_records(&run.report.bench).map_err(|e| {
                eprintln!("error: benchmarking {}: {e:#}", target.name);
                BenchOutcome::VmFailed
            })?;
            bench.boots.push(records);
        }
        // Between rounds, with no VM running: the host's own swing, which
        // a wall clock sees and icount does not.
        if clock == Clock::Wall {
            host_noise.push(host_noise::probe(HOST_NOISE_PROBE));
        }
    }
    Ok(Measured {
        results,
        clock,
        host_noise,
    })
}

/// The guest bench's arguments. CI's quick run measures the grid alone:
/// what the gate reads.
pub(super) fn guest_args(quick: bool) -> Vec<String> {
    if quick {
        vec!["--quick".into(), "--grid-only".into()]
    } else {
        vec![]
    }
}

/// One benchmark boot, or how it ended the run (said why on stderr): the
/// VM failed, the benchmark failed, or the kernel splatted.
fn boot_once(
    session: &mut Session,
    target: &Target,
    quick: bool,
) -> Result<GuestRun, BenchOutcome> {
    let run = session
        .run_guest(
            target,
            target.guest(Program::Bench, guest_args(quick), None),
        )
        .with_context(|| format!("benchmarking {}: the VM could not do its job", target.name))
        .inspect_err(|e| eprintln!("error: {e:#}"));
    let Ok(run) = run else {
        return Err(BenchOutcome::VmFailed);
    };
    if let Some(why) = &run.vm_failure {
        eprintln!(
            "error: benchmarking {}: the VM could not do its job: {why}",
            target.name
        );
        return Err(BenchOutcome::VmFailed);
    }
    if run.report.verdict.outcome != Outcome::Pass {
        eprintln!(
            "error: the benchmark failed on {}: {} (console: {})",
            target.name,
            run.report.verdict.detail,
            run.outcome.console_log.display()
        );
        return Err(BenchOutcome::BenchFailed);
    }
    if let Some(first) = run.outcome.splats.first() {
        eprintln!(
            "error: the {} kernel reported problems during the benchmark, first: {} (console: {})",
            target.name,
            first.trim(),
            run.outcome.console_log.display()
        );
        return Err(BenchOutcome::BenchFailed);
    }
    Ok(run)
}
