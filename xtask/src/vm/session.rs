//! A run's session: its directory, the guest image, the accelerator, and
//! each guest booted, QEMU watched and its outcome handed to `assess`.
//! Shared by the suites (`plan`, `kselftest::campaign`, `fuzz::campaign`,
//! `bench`) and `vm::command`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use guest_common::protocol::Program;
use guest_common::request::{HostCommand, Request};

use super::accel::AccelPicker;
use super::assess::assess;
use super::boot_log::{self, Missing};
use super::failed::VmFailed;
use super::guest_image;
use super::process::{self, Limits, VmEnd, VmOutcome};
use super::qemu::{Accel, AccelChoice, GuestCommand, GuestIo, Machine, TcgThreads, VmConfig};
use super::relay::Relay;
use super::share::{self, ActiveShare, ShareChoice, Sharing};
use super::targets::{targets, BootConfig, Target};
use crate::kernel::choice::Chosen;
use crate::kernel::SourceConfig;
use crate::project;
use crate::report::protocol::GuestReport;

/// What every subcommand that boots guests needs before the first boot.
pub struct Prepared {
    pub targets: Vec<Target>,
    pub session: Session,
}

/// How every guest of a run boots, given once when the run is set up.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// The hermetic initramfs, or the host shared with each guest.
    pub sharing: Sharing,
    /// How long the results channel may stay still (seconds) instead of
    /// the default for the accelerator (the fault tests' shorter one).
    pub results_stall: Option<u64>,
    /// How TCG runs the vCPUs of this run's guests (a boot may say
    /// otherwise: `BootSpec`).
    pub tcg_threads: TcgThreads,
}

/// What one boot of a host command adds to the run's options.
#[derive(Debug, Clone, Default)]
pub struct BootSpec {
    /// The host command a `Program::Command` guest runs.
    pub host_command: Option<HostCommand>,
    /// A host command whose stdout stays still this long (seconds; 3x on
    /// debug kernels) is hung: the VM is stopped. None: no such limit.
    pub output_stall: Option<u64>,
    /// How TCG runs this boot's vCPUs, instead of the run's way.
    pub tcg_threads: Option<TcgThreads>,
}

/// One boot's spec, and where its console and a host command's output
/// go.
struct ThisBoot {
    spec: BootSpec,
    io: GuestIo,
}

/// Boots guests for one run: its directory, guest image, allowlist,
/// accelerator, timeout and options. A clone boots other kernels beside
/// it (the boot numbering is shared).
#[derive(Clone)]
pub struct Session {
    run_dir: PathBuf,
    allowlist: Vec<String>,
    /// The hermetic guest image, built at the first boot that needs it.
    initramfs: Option<PathBuf>,
    picker: AccelPicker,
    timeout: Option<u64>,
    /// The run's options; `sharing` falls back from virtiofs to 9p when
    /// virtiofsd dies (`--share auto`).
    options: SessionOptions,
    /// Files of the run's own in the hermetic image (the fuzz client, a
    /// reproducer).
    extra_files: Vec<guest_image::Entry>,
    /// The developer's CPUs, memory and arguments for every guest.
    machine: Machine,
    /// Boots so far per kernel: each boot keeps its own console log and
    /// results file (`console-<kernel>-<boot>.log`), so a run resumed in a
    /// new boot never overwrites the trace of the one that died.
    boots: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
}

/// Host tools, the allowlist, a run directory, the kernels and the guest
/// binaries, in that order: cheap checks fail before anything is built.
pub fn prepare(
    source: &SourceConfig,
    chosen: &Chosen,
    vm: &BootConfig,
    what: &str,
    options: SessionOptions,
) -> Result<Prepared> {
    let allowlist = guest_common::splat::allowlist();
    let cache_dir = &source.cache_dir;
    let run_dir = project::new_run_dir(cache_dir, what)?;
    let targets = targets(source, chosen, vm, &run_dir)?;
    // Also what `planned_tests` lists the tests with.
    guest_image::compile()?;
    Ok(Prepared {
        targets,
        session: Session {
            run_dir,
            allowlist,
            initramfs: None,
            picker: AccelPicker::new(vm.accel, cache_dir),
            timeout: vm.timeout,
            options,
            extra_files: Vec::new(),
            machine: vm.machine.clone(),
            boots: Default::default(),
        },
    })
}

/// A guest run that produced a report: complete, or what was kept of a
/// run the VM did not finish (then `vm_failure` says why).
pub struct GuestRun {
    pub accel: Accel,
    pub report: GuestReport,
    pub outcome: VmOutcome,
    pub vm_failure: Option<VmFailed>,
}

impl Session {
    /// The session with files of the run's own in its hermetic image:
    /// part of its setup, before the first boot or clone.
    pub fn with_extra_files(mut self, files: Vec<guest_image::Entry>) -> Session {
        self.extra_files = files;
        self
    }

    /// The run's directory: its reports, console logs and guest images.
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// How TCG runs the vCPUs of this run's guests.
    pub fn tcg_threads(&self) -> TcgThreads {
        self.options.tcg_threads
    }

    /// Boots `target` with `guest` and returns its report, or an error that
    /// says why the VM could not do its job.
    pub fn run_guest(&mut self, target: &Target, guest: GuestCommand) -> Result<GuestRun> {
        let this = ThisBoot {
            spec: BootSpec::default(),
            io: GuestIo::Console,
        };
        self.boot_guest(target, guest, &this)
    }

    /// Runs `command` on `target` with the user's terminal on the guest's
    /// console, whose raw copy goes to `console`.
    pub fn run_shell(
        &mut self,
        target: &Target,
        command: HostCommand,
        console: &Path,
    ) -> Result<GuestRun> {
        let this = ThisBoot {
            spec: BootSpec {
                host_command: Some(command),
                ..BootSpec::default()
            },
            io: GuestIo::Shell {
                console: console.to_path_buf(),
            },
        };
        self.boot_guest(
            target,
            target.guest(Program::Command, Vec::new(), None),
            &this,
        )
    }

    fn boot_guest(
        &mut self,
        target: &Target,
        guest: GuestCommand,
        this: &ThisBoot,
    ) -> Result<GuestRun> {
        loop {
            let accel = self.picker.current();
            let (results, console_log) = self.next_boot_files(target);
            // Held until QEMU is gone: dropping it stops virtiofsd.
            let mut share = self.start_share(target, guest.program, &this.spec)?;
            let initramfs = match &share {
                Some((_, image)) => image.clone(),
                None => self.hermetic_image()?,
            };
            let mut cfg =
                VmConfig::new(accel, &target.bzimage, &initramfs, &results, guest.clone());
            cfg.share = share.as_ref().map(|(s, _)| s.devices.clone());
            cfg.io = this.io.clone();
            cfg.tcg_threads = this.spec.tcg_threads.unwrap_or(self.options.tcg_threads);
            self.machine.apply(&mut cfg);
            let limits = self.limits_for(accel, target, this);
            announce(target, &cfg, share.as_ref().map(|(s, _)| s), &console_log)?;
            // Once QEMU is connected, virtiofsd's sockets are not needed:
            // gone from then on, even if the harness is killed.
            let mut release = || {
                if let Some((s, _)) = &share {
                    s.release_sockets();
                }
            };
            let outcome = process::run(&cfg, &console_log, &limits, &self.allowlist, &mut release)?;
            let died = match (&mut share, outcome.boot_secs) {
                (Some((s, _)), None) => s.daemon_exited(),
                _ => None,
            };
            drop(share);
            let console = read_lossy(&console_log)?.unwrap_or_default();
            let ours = target.is_ours();
            let lacks = boot_log::missing_option(&console, &outcome.end, ours);
            if self.boot_again(target, &outcome, died, lacks, &this.spec)? {
                continue;
            }
            tell_after(target, &outcome, &console);
            let text = read_lossy(&results)?;
            let lacks = lacks.map(|m| m.line(&target.bzimage));
            let assessed = assess(
                &outcome,
                text.as_deref(),
                &limits,
                guest.program,
                lacks.as_deref(),
            )?;
            return Ok(GuestRun {
                accel,
                report: assessed.report,
                outcome,
                vm_failure: assessed.vm_failure,
            });
        }
    }
}

/// Says how `target` boots, and where gdb attaches when asked for.
fn announce(
    target: &Target,
    cfg: &VmConfig,
    share: Option<&ActiveShare>,
    console_log: &Path,
) -> Result<()> {
    if let Some(port) = cfg.gdb {
        super::gdb::check_port(port)?;
        crate::status!(
            &target.name,
            "{}",
            super::gdb::announcement(target.vmlinux(), port)
        );
    }
    let over = share
        .map(|s| format!(", host shared over {}", s.kind.name()))
        .unwrap_or_default();
    crate::status!(
        &target.name,
        "booting under {}{over} (console: {})",
        cfg.accel.name(),
        console_log.display()
    );
    Ok(())
}

/// What a finished boot leaves to say besides its verdict: a guest that
/// did not power off, and the optional features its kernel went without
/// (the tests that need them fail; the boot does not).
fn tell_after(target: &Target, outcome: &VmOutcome, console: &str) {
    if matches!(outcome.end, VmEnd::NoPowerOff) {
        crate::status!(
            &target.name,
            "the guest gave its verdict but did not power off; QEMU was killed"
        );
    }
    for absent in boot_log::absent_features(console) {
        crate::status!(&target.name, "note: {}", absent.line(&target.bzimage));
    }
}

/// Why a boot over virtiofs failed for want of virtiofs, which 9p may
/// get around: virtiofsd died before the guest booted, or the kernel
/// lacks virtiofs. A guest stopped by another option its kernel `lacks`
/// takes virtiofsd with it: not virtiofsd's failure.
fn share_failure(
    virtiofsd_died: Option<String>,
    lacks: Option<Missing>,
    kernel: &Path,
) -> Option<String> {
    match lacks {
        Some(m) if m == boot_log::NO_VIRTIOFS => Some(m.line(kernel)),
        Some(_) => None,
        None => virtiofsd_died,
    }
}

/// A file the guest wrote, lossily: a character cut in half by a dying
/// guest must not cost the lines before it. None: QEMU never wrote it.
fn read_lossy(path: &Path) -> Result<Option<String>> {
    Ok(crate::util::gone_is_none(fs::read(path))
        .with_context(|| format!("reading the guest's {}", path.display()))?
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
}

impl Session {
    /// Whether a boot that could not run its guest is to be done again:
    /// over 9p when virtiofsd died before the guest booted (`--share
    /// auto`), under TCG when KVM cannot run the kernel (`--accel auto`).
    /// Err when it cannot be done again.
    fn boot_again(
        &mut self,
        target: &Target,
        outcome: &VmOutcome,
        virtiofsd_died: Option<String>,
        lacks: Option<Missing>,
        spec: &BootSpec,
    ) -> Result<bool> {
        if let Some(why) = share_failure(virtiofsd_died, lacks, &target.bzimage) {
            // Nothing ran in the guest: the boot can be done again.
            if self.options.sharing != Sharing::Host(ShareChoice::Auto) {
                bail!("{why}; use --share 9p");
            }
            crate::status!(&target.name, "{why}; sharing over 9p from now on");
            self.options.sharing = Sharing::Host(ShareChoice::NineP);
            return Ok(true);
        }
        let VmEnd::KvmFailure(line) = &outcome.end else {
            return Ok(false);
        };
        // A host command that already started must not run twice.
        if spec.host_command.is_some() && outcome.boot_secs.is_some() {
            bail!("KVM failed after the command started ({line}); rerun with --accel tcg");
        }
        if self.picker.choice() != AccelChoice::Auto {
            bail!("KVM cannot run this kernel here ({line}); use --accel tcg");
        }
        crate::status!(
            &target.name,
            "KVM cannot run this kernel here ({line}); rerunning under TCG"
        );
        self.picker.kvm_failed(line);
        Ok(true)
    }

    /// Runs `spec`'s host command on `target` with its stdout and stderr
    /// written to the files `out` and `err` (made empty first) and
    /// streamed to `to_out` and `to_err` as the guest writes them.
    pub fn run_command_relayed(
        &mut self,
        target: &Target,
        spec: BootSpec,
        (out, err): (&Path, &Path),
        to_out: impl std::io::Write + Send + 'static,
        to_err: impl std::io::Write + Send + 'static,
    ) -> Result<GuestRun> {
        for file in [out, err] {
            fs::write(file, b"").with_context(|| format!("creating {}", file.display()))?;
        }
        let stdin = spec
            .host_command
            .as_ref()
            .is_some_and(|c| c.stdin)
            .then(|| self.run_dir.join("stdin.sock"));
        let this = ThisBoot {
            spec,
            io: GuestIo::Command {
                stdout: out.to_path_buf(),
                stderr: err.to_path_buf(),
                stdin,
            },
        };
        let relays = (Relay::start(out, to_out)?, Relay::start(err, to_err)?);
        let guest = target.guest(Program::Command, Vec::new(), None);
        let ran = self.boot_guest(target, guest, &this);
        let relayed = (relays.0.finish(), relays.1.finish());
        relayed.0.and(relayed.1)?;
        ran
    }

    /// The results file and console log of `target`'s next boot.
    fn next_boot_files(&mut self, target: &Target) -> (PathBuf, PathBuf) {
        let mut boots = self.boots.lock().expect("boot numbering lock");
        let n = boots.entry(target.name.clone()).or_default();
        *n += 1;
        let stem = format!("{}-{n}", target.name);
        (
            self.run_dir.join(format!("results-{stem}.txt")),
            self.run_dir.join(format!("console-{stem}.log")),
        )
    }

    /// The limits of one boot: a host command that prints as it goes is
    /// also held to `output_stall` on its stdout.
    fn limits_for(&self, accel: Accel, target: &Target, this: &ThisBoot) -> Limits {
        if self.machine.gdb.is_some() {
            // The guest waits for gdb, and then for the developer at
            // every breakpoint.
            return unlimited(self.timeout);
        }
        let mut limits = limits(
            accel,
            target.debug,
            self.timeout,
            this.spec.host_command.as_ref(),
        );
        if let Some(secs) = self.options.results_stall {
            limits.stall = Duration::from_secs(secs);
        }
        if let (Some(secs), GuestIo::Command { stdout, .. }) = (this.spec.output_stall, &this.io) {
            limits.stall = Duration::from_secs(secs * slowdown(target.debug));
            limits.output = Some(stdout.clone());
        }
        limits
    }

    /// The run's hermetic initramfs, built on the first call: call it
    /// before cloning the session for guests that boot side by side.
    pub fn hermetic_image(&mut self) -> Result<PathBuf> {
        if self.initramfs.is_none() {
            self.initramfs = Some(guest_image::build(&self.run_dir, &self.extra_files)?);
        }
        Ok(self.initramfs.clone().expect("just built"))
    }

    /// The share for one boot (virtiofsd serves one connection) and the
    /// initramfs that tells the guest about it: /init and the request,
    /// the programs read from the host's build directory.
    fn start_share(
        &self,
        target: &Target,
        program: Program,
        spec: &BootSpec,
    ) -> Result<Option<(ActiveShare, PathBuf)>> {
        let Sharing::Host(choice) = self.options.sharing else {
            return Ok(None);
        };
        // The guest mounts the project at this path inside the host's
        // root: a symlink in it would lead outside.
        let root = project::root()
            .canonicalize()
            .context("resolving the project directory")?;
        let log = self.run_dir.join(format!("virtiofsd-{}.log", target.name));
        let active = share::start(choice, &root, &log)?;
        let bindir = match program {
            Program::Command => None,
            _ => Some(guest_image::guest_bin_dir().canonicalize()?),
        };
        let request = Request {
            share: Some(active.request(&root, bindir.as_deref())),
            command: spec.host_command.clone(),
        };
        let image = self.run_dir.join(format!("initramfs-{}.cpio", target.name));
        let image = guest_image::build_for_share(&image, &request)?;
        Ok(Some((active, image)))
    }
}

/// How much slower a debug kernel (KASAN, lockdep, ...) runs: its boot,
/// overall and per-test limits are this much longer.
pub const DEBUG_SLOWDOWN: u32 = 3;

/// [`DEBUG_SLOWDOWN`] for a debug kernel, 1 otherwise.
pub fn slowdown(debug: bool) -> u64 {
    if debug {
        u64::from(DEBUG_SLOWDOWN)
    } else {
        1
    }
}

const TCG_BOOT: u64 = 60;
const TCG_OVERALL: u64 = 900;

/// No limit, in practice: an interactive shell lasts as long as its user.
const FOREVER: u64 = 365 * 24 * 3600;

/// No limit but `timeout`, if one is given.
fn unlimited(timeout: Option<u64>) -> Limits {
    let overall = Duration::from_secs(timeout.unwrap_or(FOREVER));
    Limits {
        boot: overall,
        overall,
        stall: overall,
        output: None,
    }
}

pub(super) fn limits(
    accel: Accel,
    debug: bool,
    timeout: Option<u64>,
    command: Option<&HostCommand>,
) -> Limits {
    let slow = slowdown(debug);
    if let Some(cmd) = command {
        // A host command says nothing on the results channel until it
        // ends: only the boot and overall limits apply.
        let default = if cmd.shell {
            FOREVER
        } else {
            TCG_OVERALL * slow
        };
        let overall = Duration::from_secs(timeout.unwrap_or(default));
        return Limits {
            boot: Duration::from_secs(TCG_BOOT * slow),
            overall,
            stall: overall,
            output: None,
        };
    }
    // The slowest test (T19) takes 9 s under TCG and its timeout is 60 s,
    // plus up to 10 s for its maps to go: 120 s without a results line is
    // a wedged guest.
    let (boot, overall, stall) = match accel {
        Accel::Kvm => (30, 600, 90),
        Accel::Tcg => (TCG_BOOT, TCG_OVERALL, 120),
    };
    Limits {
        boot: Duration::from_secs(boot * slow),
        overall: Duration::from_secs(timeout.unwrap_or(overall * slow)),
        stall: Duration::from_secs(stall * slow),
        output: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtiofsd_is_blamed_only_when_no_other_option_is_missing() {
        let k = Path::new("/tmp/bzImage");
        let died = || Some("virtiofsd exited (exit status: 1): x".to_string());
        assert_eq!(share_failure(died(), None, k), died());
        assert_eq!(share_failure(None, None, k), None);
        let virtiofs = share_failure(None, Some(boot_log::NO_VIRTIOFS), k).unwrap();
        assert!(virtiofs.contains("(CONFIG_VIRTIO_FS"), "{virtiofs}");
        let proc = boot_log::missing_option(
            "bpflab-init: error: mount proc on /proc: ENODEV\n",
            &VmEnd::Exited { code: Some(0) },
            true,
        );
        assert!(proc.is_some());
        assert_eq!(share_failure(died(), proc, k), None);
    }

    #[test]
    fn debug_kernels_get_longer_limits() {
        assert!(
            limits(Accel::Tcg, true, None, None).boot > limits(Accel::Tcg, false, None, None).boot
        );
        assert_eq!(
            limits(Accel::Tcg, false, Some(5), None).overall,
            Duration::from_secs(5)
        );
    }
}
