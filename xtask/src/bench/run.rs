//! A bench run: every kernel measured in one run, side by side: the grid
//! of patterns, sizes and threads (the seed's table among its rows),
//! under icount with the model's estimate for the seed's machine; the
//! head variant's targets; and CI's gate on steadiness and on the record
//! (`docs/bench/icount.json`). This file settles the run's clock and
//! drives the steps, each in a file of its own.

use anyhow::{bail, Result};

use super::boots::{boot_all, guest_args};
use super::calibration::model_for;
use super::gate::RunShape;
use super::grid::Clock;
use super::options::BenchOptions;
use super::outcome::BenchOutcome;
use super::output::report;
use super::record::{record, RecordRun};
use super::shape;
use crate::kernel::choice::Chosen;
use crate::kernel::SourceConfig;
use crate::vm::qemu::{AccelChoice, TcgThreads};
use crate::vm::session::{self, Prepared, SessionOptions};
use crate::vm::targets::BootConfig;

/// A bench run settled before anything boots: its clock, the boot that
/// clock takes, the shape the record compares, and the series' head.
pub struct Bench {
    source: SourceConfig,
    /// Its kernels, each playing itself.
    chosen: Chosen,
    boot: BootConfig,
    options: BenchOptions,
    clock: Clock,
    shape: RunShape,
    head: String,
    /// The base and every variant: what a record holds.
    series_kernels: Vec<String>,
}

/// Kernel arguments of every icount boot.
const FIXED_LAYOUT: [&str; 2] = ["nokaslr", "norandmaps"];

impl Bench {
    /// The clock (`clock_for`) and, under icount, one address layout and
    /// one vCPU; the series' head. Errors on a clock the accelerator or
    /// the gates cannot take.
    pub fn new(
        source: SourceConfig,
        chosen: Chosen,
        mut boot: BootConfig,
        options: BenchOptions,
    ) -> Result<Bench> {
        options.check()?;
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
            // Known once the guest's binaries are built (`run`).
            pins: None,
        };
        let series = &chosen.series;
        let head = series.whole().name.clone();
        let mut series_kernels = vec![series.base.name.as_str().to_string()];
        series_kernels.extend(series.variant_names().into_iter().map(String::from));
        Ok(Bench {
            source,
            chosen,
            boot,
            options,
            clock,
            shape,
            head,
            series_kernels,
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
        } = session::prepare(
            &self.source,
            &self.chosen,
            &self.boot,
            "bench",
            SessionOptions {
                tcg_threads: match self.clock {
                    Clock::Wall => TcgThreads::Multi,
                    Clock::Icount => TcgThreads::Icount,
                },
                ..SessionOptions::default()
            },
        )?;
        let opts = &self.options;
        let mut shape = self.shape.clone();
        if opts.record || opts.gate {
            let bench = crate::vm::guest_image::guest_bin_dir().join("bench");
            let guest = guest_args(opts.quick);
            shape.pins = Some(shape::pins(
                &self.boot.machine,
                guest,
                &self.chosen.series,
                &bench,
            )?);
        }
        let measured = match boot_all(&mut session, &kernels, opts.repeat, opts.quick) {
            Ok(done) => done,
            Err(stop) => return Ok(stop),
        };
        let model = model_for(&measured.results, measured.clock);
        let (failed, goals) = report(opts, &measured, model.as_ref(), &self.head, &shape)?;
        let verdict = BenchOutcome::of_gates(failed);
        if !opts.record {
            return Ok(verdict);
        }
        let run = RecordRun {
            results: &measured.results,
            shape,
            goals: goals.as_ref(),
            head: &self.head,
            series_kernels: self.series_kernels.clone(),
            verdict,
        };
        record(run, &opts.drop_targets)
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

#[cfg(test)]
mod tests {
    use super::*;

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
