//! A bench run: every kernel measured in one run, side by side: the grid
//! of patterns, sizes and threads (the seed's table among its rows),
//! under icount with the model's estimate for the seed's machine; the
//! head variant's targets; and CI's gate on steadiness and on the record
//! (`docs/bench/icount.json`).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use guest_common::protocol::Program;

use super::fill::fill_table;
use super::gate::{regressions, unsteady_report, BenchRecord, RunShape};
use super::grid::{combined, grid_table, Clock, RowKey};
use super::host_noise;
use super::model::{fit_report, seed_cells, Cell, Model};
use super::plot;
use super::records::KernelBench;
use super::records::{parse_records, summary_json, sweep_series, sweep_summary};
use super::seed::seed_table;
use super::sparse::sparse_table;
use super::targets::{self, targets, Targets};
use super::threads::threads_table;
use crate::kernel::series::Series;
use crate::kernel::SourceConfig;
use crate::project;
use crate::report::protocol::Outcome;
use crate::vm::qemu::{Accel, AccelChoice, TcgThreads};
use crate::vm::session::{self, GuestRun, Prepared, Session};
use crate::vm::targets::{BootConfig, Target};

/// What a bench run does beyond its kernels and how they boot: the
/// command's flags, resolved.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Fewer iterations, the grid alone (CI's run).
    pub quick: bool,
    /// Boots per kernel, at least one.
    pub repeat: usize,
    /// Where bench.json, table.txt and sweep.svg go.
    pub out: PathBuf,
    /// The clock asked for; None: icount under TCG, wall under KVM.
    pub clock: Option<Clock>,
    /// Write the record (`record_path`) and the targets met in this run.
    pub record: bool,
    /// Hold the run to steadiness and to the record.
    pub gate: bool,
    /// Hold the run to the targets the record's run met.
    pub gate_targets: bool,
}

/// How a bench run ended; what went wrong is said on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchOutcome {
    /// Measured and reported, and every gate asked for passed.
    Passed,
    /// Measured and reported, and a gate failed or `--record` found an
    /// unsteady row.
    GateFailed,
    /// A boot ended the run: the benchmark failed in the guest, or the
    /// kernel reported problems.
    BenchFailed,
    /// A boot ended the run: the VM could not do its job, or the guest's
    /// records could not be read.
    VmFailed,
}

impl BenchOutcome {
    fn of_gates(failed: bool) -> BenchOutcome {
        if failed {
            BenchOutcome::GateFailed
        } else {
            BenchOutcome::Passed
        }
    }
}

/// A bench run settled before anything boots: its clock, the boot that
/// clock takes, the shape the record compares, and the series' head.
pub struct Bench {
    source: SourceConfig,
    boot: BootConfig,
    options: BenchOptions,
    clock: Clock,
    shape: RunShape,
    head: String,
}

/// Kernel arguments of every icount boot.
const FIXED_LAYOUT: [&str; 2] = ["nokaslr", "norandmaps"];

/// How long the host's memory is probed after each round of boots.
const HOST_NOISE_PROBE: std::time::Duration = std::time::Duration::from_secs(3);

/// What the boots gave: every kernel's records, the clock they were
/// taken on, the host's noise between rounds (wall clock only).
struct Measured {
    results: Vec<KernelBench>,
    clock: Clock,
    host_noise: Vec<Option<host_noise::Noise>>,
}

/// The model and the cells it was fitted on, and where they came from.
struct Calibrated {
    model: Model,
    cells: Vec<Cell>,
    source: String,
}

/// The record `--record` writes and `--gate` reads.
pub fn record_path() -> PathBuf {
    project::root().join("docs/bench/icount.json")
}

/// The targets met in the record's run, which `--record` writes and
/// `--gate-targets` holds.
pub fn targets_met_path() -> PathBuf {
    project::root().join("docs/bench/targets-met.txt")
}

impl Bench {
    /// The clock (`clock_for`) and, under icount, one address layout and
    /// one vCPU; the series' head. Errors on a clock the accelerator or
    /// the gates cannot take.
    pub fn new(source: SourceConfig, mut boot: BootConfig, options: BenchOptions) -> Result<Bench> {
        let kvm_first = crate::vm::accel::auto_tries_kvm(&source.cache_dir);
        let needs_icount = options.record || options.gate;
        let (clock, accel) = clock_for(options.clock, boot.accel, needs_icount, kvm_first)?;
        boot.accel = accel;
        if clock == Clock::Icount {
            // One address layout in every boot: with KASLR and mmap's random
            // base, a cycle's instructions move from boot to boot with where
            // its page tables and VMAs land (up to 20% on rows of 10k).
            boot.machine
                .append
                .splice(0..0, FIXED_LAYOUT.map(String::from));
            // One vCPU: with several on icount's one host thread, TCG switches
            // vCPUs on the host's clock, and threads sharing a mapping then
            // interleave (and spin on each other's locks) differently in each
            // boot: 29 of 225 4-thread rows over 1%, up to 27%. With one, 1
            // row of 675 is over 1%, and none by more than 1.3%.
            boot.machine.cpus.get_or_insert(1);
        }
        let shape = RunShape {
            quick: options.quick,
            cpus: boot.machine.cpus,
            append: boot.machine.append.clone(),
        };
        let head = Series::load(&source.patches)?.whole().name.clone();
        Ok(Bench {
            source,
            boot,
            options,
            clock,
            shape,
            head,
        })
    }

    /// What the kernels are built from: the host tools it needs are the
    /// caller's to ensure before `run`.
    pub fn source(&self) -> &SourceConfig {
        &self.source
    }

    /// Boots every kernel, prints the tables, writes the files, holds the
    /// run to the gates asked for and, with `record`, records it.
    pub fn run(self) -> Result<BenchOutcome> {
        let Prepared {
            targets: kernels,
            mut session,
        } = session::prepare(&self.source, &self.boot, "bench")?;
        session.tcg_threads = match self.clock {
            Clock::Wall => TcgThreads::Multi,
            Clock::Icount => TcgThreads::Icount,
        };
        let opts = &self.options;
        let measured = match boot_all(&mut session, &kernels, opts.repeat, opts.quick) {
            Ok(done) => done,
            Err(stop) => return Ok(stop),
        };
        let model = model_for(&measured.results, measured.clock);
        let (failed, goals) = report(opts, &measured, model.as_ref(), &self.head, &self.shape)?;
        let verdict = BenchOutcome::of_gates(failed);
        if opts.record {
            return record(
                &measured.results,
                self.shape,
                goals.as_ref(),
                &self.head,
                verdict,
            );
        }
        Ok(verdict)
    }
}

/// The clock of the run and the accelerator it takes. Unless asked,
/// icount under TCG (and always for the record and the gate, which
/// compare instructions), the wall clock where KVM runs. icount counts
/// TCG's instructions: it takes TCG and refuses KVM.
fn clock_for(
    asked: Option<Clock>,
    accel: AccelChoice,
    needs_icount: bool,
    kvm_first: bool,
) -> Result<(Clock, AccelChoice)> {
    let clock = match (asked, accel) {
        (Some(Clock::Wall), _) if needs_icount => {
            bail!("--record and --gate compare guest instructions: drop --clock wall")
        }
        (Some(c), _) => c,
        (None, _) if needs_icount => Clock::Icount,
        (None, AccelChoice::Kvm) => Clock::Wall,
        (None, AccelChoice::Auto) if kvm_first => Clock::Wall,
        (None, _) => Clock::Icount,
    };
    match (clock, accel) {
        (Clock::Icount, AccelChoice::Kvm) => bail!(
            "--clock icount counts TCG's guest instructions; KVM has no such clock: use --accel tcg or --clock wall"
        ),
        (Clock::Icount, _) => Ok((clock, AccelChoice::Tcg)),
        (Clock::Wall, a) => Ok((clock, a)),
    }
}

/// Every kernel booted `repeat` times, interleaved so drift on a noisy
/// host hits all; the records, the clock they were taken on, and the
/// host's noise between rounds. Err: how the run ended.
fn boot_all(
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
            if run.accel == Accel::Tcg && session.tcg_threads == TcgThreads::Icount {
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

/// The model fitted on this run's base and patched, else on the record's.
fn model_for(results: &[KernelBench], clock: Clock) -> Option<Calibrated> {
    if clock != Clock::Icount {
        return None;
    }
    let from_run = seed_cells(|kernel, scenario| {
        let k = results.iter().find(|k| k.kernel == kernel)?;
        let key = RowKey::find(scenario, 2048, 1)?;
        combined(k, &key).map(|c| (c.median_ns, c.user_faults))
    });
    let (cells, source) = match from_run {
        Some(cells) => (cells, "this run's base and patched".to_string()),
        None => {
            let record = read_record().ok()?;
            let cells = seed_cells(|kernel, scenario| {
                let key = RowKey::find(scenario, 2048, 1)?;
                record
                    .row(kernel, &key)
                    .map(|r| (r.instructions, r.user_faults))
            })?;
            (
                cells,
                format!(
                    "the record's base and patched ({})",
                    record_path().display()
                ),
            )
        }
    };
    Model::fit(&cells).map(|model| Calibrated {
        model,
        cells,
        source,
    })
}

/// Prints the tables and writes bench.json, table.txt and sweep.svg;
/// whether a gate failed.
fn report(
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
    }
    if opts.gate_targets {
        let path = targets_met_path();
        let held = fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {}: --gate-targets holds the targets it lists; write it with --record",
                path.display()
            )
        })?;
        failed |= gate_targets(goals.as_ref(), head, &held);
    }
    Ok((failed, goals))
}

/// CI's gate: steadiness and the record. True when it failed.
fn gate(results: &[KernelBench], clock: Clock, unsteady: usize, shape: &RunShape) -> Result<bool> {
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
fn gate_targets(goals: Option<&Targets>, head: &str, held: &str) -> bool {
    let Some(t) = goals else {
        eprintln!("bench: --gate-targets needs base, patched and {head} in the run");
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

fn read_record() -> Result<BenchRecord> {
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
fn record(
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

/// One benchmark boot, or how it ended the run (said why on stderr): the
/// VM failed, the benchmark failed, or the kernel splatted.
fn boot_once(
    session: &mut Session,
    target: &Target,
    quick: bool,
) -> Result<GuestRun, BenchOutcome> {
    // CI's quick run measures the grid alone: what the gate reads.
    let args = if quick {
        vec!["--quick".into(), "--grid-only".into()]
    } else {
        vec![]
    };
    let run = session
        .run_guest(target, target.guest(Program::Bench, args, None))
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
            &sweep_series(results),
        ),
    )?;
    eprintln!(
        "wrote {}/bench.json, table.txt and sweep.svg",
        out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gates_pass_only_on_what_they_judged() {
        let one_boot = [KernelBench {
            kernel: "base".into(),
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

    #[test]
    fn icount_under_tcg_the_wall_clock_where_kvm_runs() {
        use AccelChoice::{Auto, Kvm, Tcg};
        let pick = |asked, accel, gate, kvm| clock_for(asked, accel, gate, kvm).unwrap();
        assert_eq!(pick(None, Auto, false, false), (Clock::Icount, Tcg));
        assert_eq!(pick(None, Auto, false, true), (Clock::Wall, Auto));
        assert_eq!(pick(None, Kvm, false, true), (Clock::Wall, Kvm));
        assert_eq!(pick(None, Tcg, false, true), (Clock::Icount, Tcg));
        assert_eq!(
            pick(None, Auto, true, true),
            (Clock::Icount, Tcg),
            "the gate compares instructions"
        );
        assert_eq!(
            pick(Some(Clock::Wall), Tcg, false, false),
            (Clock::Wall, Tcg)
        );
        assert_eq!(
            pick(Some(Clock::Icount), Auto, false, true),
            (Clock::Icount, Tcg)
        );
        let err = |asked, accel, gate| {
            clock_for(asked, accel, gate, false)
                .unwrap_err()
                .to_string()
        };
        assert!(err(Some(Clock::Icount), Kvm, false).contains("use --accel tcg"));
        assert!(err(None, Kvm, true).contains("use --accel tcg"));
        assert!(err(Some(Clock::Wall), Tcg, true).contains("drop --clock wall"));
    }
}
