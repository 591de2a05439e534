//! How a bench run was made, as far as it moves a row's instructions: the
//! flags (`--quick`, `--cpus`, the kernel arguments) and the pins (the
//! guest bench binary, QEMU's version, the guest's memory, QEMU's
//! arguments and the patches). A record and a run are compared only when
//! their shapes are the same, and a record holds one shape, whole.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::kernel::series::Series;
use crate::vm::qemu::{self, Accel, GuestCommand, Machine, TcgThreads, VmConfig};

/// The command that re-makes the record, for the lines that ask for it.
pub const RECORD_COMMAND: &str = "cargo xtask bench --quick --repeat 3 --kernel all --record";

/// How a run was made: a record and a run are compared only when these
/// are the same.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunShape {
    /// `--quick` (fewer cycles and warm-ups per row).
    pub quick: bool,
    /// `--cpus`, and the kernel arguments after the harness's.
    pub cpus: Option<u32>,
    pub append: Vec<String>,
    /// None in a record made before the pins.
    #[serde(default)]
    pub pins: Option<ShapePins>,
}

/// What else decides a row's instructions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShapePins {
    /// The guest's `bench` binary's sha256.
    pub bench_sha256: String,
    /// `qemu-system-x86_64 --version`'s first line.
    pub qemu_version: String,
    /// The guest's memory.
    pub memory_mib: u32,
    /// QEMU's arguments for a bench boot, the per-boot files as
    /// placeholders.
    pub qemu_args: Vec<String>,
    /// The series' patches (`Series::hash`, the base's included).
    pub patches_sha256: String,
    /// `rustc --version` of the toolchain that built the bench binary:
    /// the GitHub workflow's jobs pin it, so their binary is this one
    /// (`ci::steps`'s tests hold them to it).
    #[serde(default)]
    pub rustc_version: String,
}

/// One pin of a shape, as text to compare and show.
type PinText = fn(&ShapePins) -> String;

impl RunShape {
    /// How `run` differs from this (the record's) shape, every way in one
    /// line; None when alike.
    pub fn mismatch(&self, run: &RunShape) -> Option<String> {
        let Some(pins) = &self.pins else {
            return Some(format!(
                "before the shape pins (the guest bench binary, QEMU's version, memory and arguments, the patches): record it again with `{RECORD_COMMAND}`"
            ));
        };
        let mut apart = vec![];
        let mut differs = |what: &str, recorded: String, now: String| {
            if recorded != now {
                apart.push(format!("{what} {recorded}, this run {now}"));
            }
        };
        differs("--quick", self.quick.to_string(), run.quick.to_string());
        differs(
            "--cpus",
            format!("{:?}", self.cpus),
            format!("{:?}", run.cpus),
        );
        differs(
            "kernel arguments",
            format!("{:?}", self.append),
            format!("{:?}", run.append),
        );
        // Each pin read once, from the record's pins and from the run's.
        let pinned: [(&str, PinText); 6] = [
            ("bench binary sha256", |p| p.bench_sha256.clone()),
            ("QEMU", |p| p.qemu_version.clone()),
            ("memory MiB", |p| p.memory_mib.to_string()),
            ("QEMU arguments", |p| format!("{:?}", p.qemu_args)),
            ("patches sha256", |p| p.patches_sha256.clone()),
            ("rustc", |p| p.rustc_version.clone()),
        ];
        for (what, read) in pinned {
            let now = run.pins.as_ref().map_or("unknown".into(), read);
            differs(what, read(pins), now);
        }
        (!apart.is_empty()).then(|| format!("with {}", apart.join("; ")))
    }
}

/// This run's pins: the bench binary as built, the QEMU on the PATH, and
/// the memory and QEMU arguments a bench boot of `machine` takes.
pub fn pins(
    machine: &Machine,
    guest_args: Vec<String>,
    series: &Series,
    bench_binary: &Path,
) -> Result<ShapePins> {
    let binary = std::fs::read(bench_binary)
        .with_context(|| format!("reading the guest bench binary {}", bench_binary.display()))?;
    let cfg = boot_config(machine, guest_args);
    Ok(ShapePins {
        bench_sha256: hex::encode(Sha256::digest(&binary)),
        qemu_version: crate::vm::process::qemu_version()?,
        memory_mib: cfg.memory_mib,
        qemu_args: qemu::qemu_args(&cfg),
        patches_sha256: series.hash(),
        rustc_version: rustc_version()?,
    })
}

/// `rustc --version`, as cargo resolves the toolchain for the guest build.
fn rustc_version() -> Result<String> {
    let out = std::process::Command::new("rustc")
        .arg("--version")
        .current_dir(crate::project::root())
        .output()
        .context("running rustc --version")?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().next() {
        Some(line) if out.status.success() => Ok(line.trim().to_string()),
        _ => anyhow::bail!("rustc --version gave no version ({})", out.status),
    }
}

/// A bench boot's QEMU configuration, its files and kernel as
/// placeholders: what every boot of a run shares.
fn boot_config(machine: &Machine, guest_args: Vec<String>) -> VmConfig {
    let guest = GuestCommand {
        program: guest_common::protocol::Program::Bench,
        kernel: "KERNEL".into(),
        args: guest_args,
        inject: None,
    };
    let file = Path::new;
    let mut cfg = VmConfig::new(
        Accel::Tcg,
        file("BZIMAGE"),
        file("INITRAMFS"),
        file("RESULTS"),
        guest,
    );
    cfg.tcg_threads = TcgThreads::Icount;
    machine.apply(&mut cfg);
    cfg
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A shape with every pin set.
    pub fn shape() -> RunShape {
        RunShape {
            quick: true,
            cpus: Some(1),
            append: vec!["nokaslr".into()],
            pins: Some(ShapePins {
                bench_sha256: "b1".into(),
                qemu_version: "QEMU emulator version 10.0.0".into(),
                memory_mib: 4096,
                qemu_args: vec!["-m".into(), "4096M".into()],
                patches_sha256: "p1".into(),
                rustc_version: "rustc 1.95.0 (59807616e 2026-04-14)".into(),
            }),
        }
    }

    #[test]
    fn a_run_made_otherwise_is_named_in_every_way_it_differs() {
        let recorded = shape();
        assert_eq!(recorded.mismatch(&shape()), None);
        let mut run = shape();
        run.quick = false;
        let pins = run.pins.as_mut().unwrap();
        pins.bench_sha256 = "b2".into();
        pins.qemu_version = "QEMU emulator version 9.2.0".into();
        pins.memory_mib = 8192;
        pins.qemu_args = vec!["-m".into(), "8192M".into()];
        pins.patches_sha256 = "p2".into();
        pins.rustc_version = "rustc 1.96.0 (0 2026-05-28)".into();
        let why = recorded.mismatch(&run).unwrap();
        for part in [
            "--quick true, this run false",
            "bench binary sha256 b1, this run b2",
            "QEMU QEMU emulator version 10.0.0, this run QEMU emulator version 9.2.0",
            "memory MiB 4096, this run 8192",
            "QEMU arguments [\"-m\", \"4096M\"], this run [\"-m\", \"8192M\"]",
            "patches sha256 p1, this run p2",
            "rustc rustc 1.95.0 (59807616e 2026-04-14), this run rustc 1.96.0",
        ] {
            assert!(why.contains(part), "{why} lacks {part}");
        }
        assert!(!why.contains('\n'), "one line: {why}");
    }

    #[test]
    fn a_record_from_before_the_pins_asks_to_be_made_again() {
        let mut old = shape();
        old.pins = None;
        let why = old.mismatch(&shape()).unwrap();
        assert!(why.starts_with("before the shape pins"), "{why}");
        assert!(why.contains(RECORD_COMMAND), "{why}");
    }

    #[test]
    fn the_qemu_arguments_pinned_follow_the_machine_not_the_boot() {
        let plain = boot_config(&Machine::default(), vec!["--quick".into()]);
        let args = qemu::qemu_args(&plain);
        assert!(args.windows(2).any(|w| w == ["-m", "4096M"]), "{args:?}");
        assert!(args.iter().any(|a| a.contains("icount")), "{args:?}");
        let more = Machine {
            memory_mib: Some(8192),
            qemu_args: vec!["-cpu".into(), "max".into()],
            ..Machine::default()
        };
        let other = qemu::qemu_args(&boot_config(&more, vec!["--quick".into()]));
        assert_ne!(args, other);
        assert!(other.ends_with(&["-cpu".into(), "max".into()]), "{other:?}");
    }
}
