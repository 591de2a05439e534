//! A run's session: the kernels resolved and copied into the run's own
//! directory, the guest image, the accelerator, each guest booted and its
//! outcome judged. Shared by `vmtest` and `bench`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use guest_common::protocol::{Inject, Program, PLAN_KERNELS};
use guest_common::request::{HostCommand, Request, ShareKind};

use super::accel::AccelPicker;
use super::guest_image;
use super::process::{self, Limits, VmEnd, VmOutcome};
use super::qemu::{Accel, AccelChoice, GuestCommand, GuestIo, VmConfig};
use super::relay::Relay;
use super::share::{self, ActiveShare};
use crate::cli::{SourceArgs, VmArgs};
use crate::kernel::series::Series;
use crate::kernel::{self, Flavor, KernelSpec};
use crate::report::protocol::{self, Death, GuestReport, Status, TestResult, Verdict};
use crate::{hostdeps, project};

/// A kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub bzimage: PathBuf,
    /// Which side of the plan's P/U cases the guest asserts.
    pub flavor: Flavor,
    pub debug: bool,
    /// The kernel's vmlinux in its build tree, for kernels we built.
    pub vmlinux: Option<PathBuf>,
}

impl Target {
    /// What the guest runs on this kernel.
    pub fn guest(
        &self,
        program: Program,
        args: Vec<String>,
        inject: Option<Inject>,
    ) -> GuestCommand {
        GuestCommand {
            program,
            kernel: self.flavor.name().into(),
            args,
            inject,
        }
    }
}

/// Resolves `--kernel` names to bzImages, building what is missing, and
/// copies each image into `run_dir` while the cache is still locked: a
/// later run may rebuild the cache's kernels while this one boots them.
pub fn targets(source: &SourceArgs, vm: &VmArgs, run_dir: &Path) -> Result<Vec<Target>> {
    let series = Series::load(&source.patches)?;
    let mut specs: Vec<(usize, KernelSpec)> = Vec::new();
    let mut out: Vec<(usize, Target)> = Vec::new();
    for (i, word) in vm.kernels.iter().enumerate() {
        let Some(flavors) = kernel::expand_word(word, &series) else {
            out.push((i, own_kernel(word, vm, &series)?));
            continue;
        };
        for flavor in flavors {
            let spec = KernelSpec {
                flavor,
                debug: vm.debug,
            };
            if !specs.iter().any(|(_, s)| *s == spec) {
                specs.push((i, spec));
            }
        }
    }
    // Held until the built kernels are copied out of the cache.
    let mut lock = None;
    if !specs.is_empty() {
        let only: Vec<KernelSpec> = specs.iter().map(|(_, s)| s.clone()).collect();
        let (manifest, cache) = kernel::build_locked(source, &only)?;
        lock = Some(cache);
        for ((i, spec), info) in specs.iter().zip(manifest.kernels) {
            let target = Target {
                name: info.name,
                bzimage: info.bzimage,
                flavor: spec.flavor.clone(),
                debug: spec.debug,
                vmlinux: Some(info.vmlinux),
            };
            out.push((*i, target));
        }
    }
    // Stable: the kernels one word names keep their order.
    out.sort_by_key(|(i, _)| *i);
    let mut targets: Vec<Target> = out.into_iter().map(|(_, t)| t).collect();
    unique_names(&mut targets);
    if lock.is_some() {
        for t in &mut targets {
            let copy = run_dir.join(format!("{}.bzImage", t.name));
            fs::copy(&t.bzimage, &copy).with_context(|| {
                format!("copying {} into {}", t.bzimage.display(), run_dir.display())
            })?;
            t.bzimage = copy;
        }
    }
    Ok(targets)
}

/// Before anything is built: every kernel `--kernel` names must be one the
/// test plan has expectations for.
pub fn check_plan_kernels(source: &SourceArgs, vm: &VmArgs) -> Result<()> {
    let series = Series::load(&source.patches)?;
    for word in &vm.kernels {
        for flavor in kernel::expand_word(word, &series).unwrap_or_default() {
            if !PLAN_KERNELS.contains(&flavor.name()) {
                bail!(
                    "--kernel {word}: the test plan has no expectations for the variant {} (it has them for {}): \
                     add them to selftests (runner::Kernel), or measure it with bench and kselftest",
                    flavor.name(),
                    PLAN_KERNELS.join(", ")
                );
            }
        }
    }
    Ok(())
}

/// A bzImage of the user's own, given by path, asserting `--claim`.
fn own_kernel(path: &str, vm: &VmArgs, series: &Series) -> Result<Target> {
    let p = Path::new(path);
    if !p.is_file() {
        bail!(
            "--kernel {path}: not one of {}, nor an existing bzImage file",
            kernel::known_words(series)
        );
    }
    Ok(Target {
        name: p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
        bzimage: p.to_path_buf(),
        flavor: Flavor::from_name(&vm.claim),
        debug: vm.debug,
        vmlinux: None,
    })
}

/// Two kernels with one name would overwrite each other's logs and reports.
fn unique_names(targets: &mut [Target]) {
    let mut seen = std::collections::HashSet::new();
    for (i, t) in targets.iter_mut().enumerate() {
        if !seen.insert(t.name.clone()) {
            t.name = format!("{}-{}", t.name, i + 1);
            seen.insert(t.name.clone());
        }
    }
}

/// What every subcommand that boots guests needs before the first boot.
pub struct Prepared {
    pub targets: Vec<Target>,
    pub session: Session,
}

/// Boots guests for one run: its directory, guest image, allowlist,
/// accelerator and timeout.
pub struct Session {
    pub run_dir: PathBuf,
    allowlist: Vec<String>,
    /// The hermetic guest image, built at the first boot that needs it.
    initramfs: Option<PathBuf>,
    picker: AccelPicker,
    timeout: Option<u64>,
    /// Share the host with each guest (`Some`), forcing a transport or
    /// not; `None` boots the hermetic initramfs.
    pub share: Option<Option<ShareKind>>,
    /// Where the console and a host command's output go.
    pub io: GuestIo,
    /// The host command a `Program::Command` guest runs.
    pub host_command: Option<HostCommand>,
    /// A host command whose stdout stays still this long (seconds; 3x on
    /// debug kernels) is hung: the VM is stopped. None: no such limit.
    pub output_stall: Option<u64>,
}

/// Host tools, the allowlist, a run directory, the kernels and the guest
/// binaries, in that order: cheap checks fail before anything is built.
pub fn prepare(source: &SourceArgs, vm: &VmArgs, what: &str) -> Result<Prepared> {
    hostdeps::ensure(hostdeps::BOOT).context("checking the host tools for booting a kernel")?;
    let allowlist = guest_common::splat::allowlist();
    let cache_dir = project::cache_dir(source.cache_dir.as_deref())?;
    let run_dir = project::new_run_dir(&cache_dir, what)?;
    let targets = targets(source, vm, &run_dir)?;
    // Also what `planned_tests` lists the tests with.
    guest_image::compile()?;
    Ok(Prepared {
        targets,
        session: Session {
            run_dir,
            allowlist,
            initramfs: None,
            picker: AccelPicker::new(vm.accel, &cache_dir),
            timeout: vm.timeout,
            share: None,
            io: GuestIo::Console,
            host_command: None,
            output_stall: None,
        },
    })
}

/// A guest run that produced a report: complete, or what was kept of a
/// run the VM did not finish (then `vm_failure` says why).
pub struct GuestRun {
    pub accel: Accel,
    pub report: GuestReport,
    pub outcome: VmOutcome,
    pub vm_failure: Option<String>,
}

impl Session {
    /// Boots `target` with `guest` and returns its report, or an error that
    /// says why the VM could not do its job.
    pub fn run_guest(&mut self, target: &Target, guest: GuestCommand) -> Result<GuestRun> {
        loop {
            let accel = self.picker.current();
            let results = self.run_dir.join(format!("results-{}.txt", target.name));
            let console_log = self.run_dir.join(format!("console-{}.log", target.name));
            // Held until QEMU is gone: dropping it stops virtiofsd.
            let share = self.start_share(target, guest.program)?;
            let initramfs = match &share {
                Some((_, image)) => image.clone(),
                None => self.hermetic_image()?,
            };
            let mut cfg =
                VmConfig::new(accel, &target.bzimage, &initramfs, &results, guest.clone());
            cfg.share = share.as_ref().map(|(s, _)| s.devices.clone());
            cfg.io = self.io.clone();
            let limits = self.limits_for(accel, target);
            let over = share
                .as_ref()
                .map(|(s, _)| format!(", host shared over {}", s.kind.name()))
                .unwrap_or_default();
            crate::status!(
                &target.name,
                "booting under {}{over} (console: {})",
                accel.name(),
                console_log.display()
            );
            // Once QEMU is connected, virtiofsd's sockets are not needed:
            // gone from then on, even if the harness is killed.
            let mut release = || {
                if let Some((s, _)) = &share {
                    s.release_sockets();
                }
            };
            let outcome = process::run(&cfg, &console_log, &limits, &self.allowlist, &mut release)?;
            drop(share);
            if let VmEnd::KvmFailure(line) = &outcome.end {
                // A host command that already started must not run twice.
                if self.host_command.is_some() && outcome.boot_secs.is_some() {
                    bail!("KVM failed after the command started ({line}); rerun with --accel tcg");
                }
                if self.picker.choice() == AccelChoice::Auto {
                    crate::status!(
                        &target.name,
                        "KVM cannot run this kernel here ({line}); rerunning under TCG"
                    );
                    self.picker.kvm_failed(line);
                    continue;
                }
                bail!("KVM cannot run this kernel here ({line}); use --accel tcg");
            }
            if matches!(outcome.end, VmEnd::NoPowerOff) {
                crate::status!(
                    &target.name,
                    "the guest gave its verdict but did not power off; QEMU was killed"
                );
            }
            // Lossy: a character cut in half by a dying guest must not
            // cost the lines before it.
            let text =
                String::from_utf8_lossy(&fs::read(&results).unwrap_or_default()).into_owned();
            let judged = judge(&outcome, &text, &limits, guest.program)?;
            return Ok(GuestRun {
                accel,
                report: judged.report,
                outcome,
                vm_failure: judged.vm_failure,
            });
        }
    }
}

impl Session {
    /// Runs the host command on `target` with its stdout and stderr
    /// written to the files `out` and `err` (made empty first) and
    /// streamed to `to_out` and `to_err` as the guest writes them.
    pub fn run_command_relayed(
        &mut self,
        target: &Target,
        (out, err): (&Path, &Path),
        to_out: impl std::io::Write + Send + 'static,
        to_err: impl std::io::Write + Send + 'static,
    ) -> Result<GuestRun> {
        for file in [out, err] {
            fs::write(file, b"").with_context(|| format!("creating {}", file.display()))?;
        }
        self.io = GuestIo::Command {
            stdout: out.to_path_buf(),
            stderr: err.to_path_buf(),
        };
        let relays = (Relay::start(out, to_out)?, Relay::start(err, to_err)?);
        let ran = self.run_guest(target, target.guest(Program::Command, Vec::new(), None));
        let relayed = (relays.0.finish(), relays.1.finish());
        relayed.0.and(relayed.1)?;
        ran
    }

    /// The limits of one boot: a host command that prints as it goes is
    /// also held to `output_stall` on its stdout.
    fn limits_for(&self, accel: Accel, target: &Target) -> Limits {
        let mut limits = limits(
            accel,
            target.debug,
            self.timeout,
            self.host_command.as_ref(),
        );
        if let (Some(secs), GuestIo::Command { stdout, .. }) = (self.output_stall, &self.io) {
            limits.stall = Duration::from_secs(secs * slowdown(target.debug));
            limits.output = Some(stdout.clone());
        }
        limits
    }

    fn hermetic_image(&mut self) -> Result<PathBuf> {
        if self.initramfs.is_none() {
            self.initramfs = Some(guest_image::build(&self.run_dir)?);
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
    ) -> Result<Option<(ActiveShare, PathBuf)>> {
        let Some(forced) = self.share else {
            return Ok(None);
        };
        // The guest mounts the project at this path inside the host's
        // root: a symlink in it would lead outside.
        let root = project::root()
            .canonicalize()
            .context("resolving the project directory")?;
        let log = self.run_dir.join(format!("virtiofsd-{}.log", target.name));
        let active = share::start(forced, &root, &log)?;
        let bindir = match program {
            Program::Command => None,
            _ => Some(guest_image::guest_bin_dir().canonicalize()?),
        };
        let request = Request {
            share: Some(active.request(&root, bindir.as_deref())),
            command: self.host_command.clone(),
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
fn slowdown(debug: bool) -> u64 {
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

fn limits(
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

/// A judged guest run: its report, and why the VM failed its job if it
/// did (the report then holds what could be kept).
#[derive(Debug)]
pub struct Judged {
    pub report: GuestReport,
    pub vm_failure: Option<String>,
}

/// Why the VM did not finish by itself, in order of what explains the
/// most: a panic, then a timeout.
fn vm_death(outcome: &VmOutcome, limits: &Limits) -> Option<String> {
    if let Some(panic) = &outcome.panic {
        return Some(format!("the kernel panicked: {}", panic.trim()));
    }
    match &outcome.end {
        VmEnd::BootTimeout => Some(format!(
            "the guest did not reach /init within {:?}; QEMU was killed",
            limits.boot
        )),
        VmEnd::Timeout => Some(format!(
            "the guest hung: no end within {:?}; QEMU was killed",
            limits.overall
        )),
        VmEnd::Stalled if limits.output.is_some() => Some(format!(
            "the guest hung: the command printed nothing for {:?}; QEMU was killed",
            limits.stall
        )),
        VmEnd::Stalled => Some(format!(
            "the guest hung: no results line for {:?}; QEMU was killed",
            limits.stall
        )),
        VmEnd::KvmFailure(line) => Some(format!("KVM failed: {line}")),
        VmEnd::Exited { .. } | VmEnd::NoPowerOff => None,
    }
}

/// What QEMU itself said, for a run that ended without a verdict.
fn qemu_said(outcome: &VmOutcome) -> String {
    let mut said = String::new();
    if let VmEnd::Exited { code: Some(code) } = outcome.end {
        if code != 0 {
            said = format!("; QEMU exited with status {code}");
        }
    }
    if !outcome.qemu_stderr.is_empty() {
        said += &format!("; QEMU said: {}", outcome.qemu_stderr.join(" / "));
    }
    said
}

/// Decides whether the VM did its job. When it did not (a panic, a
/// timeout, a missing verdict, a program that could not run), every
/// result that arrived is kept, the test that was running is marked
/// crashed and the rest not run, as far as the guest announced its plan;
/// with no plan there is nothing to keep and the run is an error.
pub fn judge(
    outcome: &VmOutcome,
    results: &str,
    limits: &Limits,
    program: Program,
) -> Result<Judged> {
    let failure = match vm_death(outcome, limits) {
        Some(death) => death,
        None => match protocol::parse_results(results, program) {
            Ok(report) if report.verdict == Verdict::Error => format!(
                "the guest could not run its program: {}",
                report.verdict_detail
            ),
            Ok(report) => {
                return Ok(Judged {
                    report,
                    vm_failure: None,
                })
            }
            Err(err) => format!("{err}{}", qemu_said(outcome)),
        },
    };
    let tail = &outcome.tail[outcome.tail.len().saturating_sub(12)..];
    let explained = format!(
        "{failure} (console: {})\nlast console lines:\n    {}",
        outcome.console_log.display(),
        tail.join("\n    ")
    );
    // From the first splat of the running test on, or else the last lines.
    let death = match outcome.splat_in_test.split_first() {
        Some((first, after)) => Death {
            cause: failure.clone(),
            first_splat: Some(first.clone()),
            excerpt: after.to_vec(),
        },
        None => Death {
            cause: failure.clone(),
            first_splat: None,
            excerpt: tail[tail.len().saturating_sub(8)..].to_vec(),
        },
    };
    // A host command has no plan to salvage: the caller gets the outcome
    // (its output files, the console) with the failure.
    if program == Program::Command {
        return Ok(Judged {
            report: GuestReport {
                results: Vec::new(),
                verdict: Verdict::Error,
                verdict_detail: failure,
                bench: Vec::new(),
            },
            vm_failure: Some(explained),
        });
    }
    let Ok(transcript) = protocol::read_transcript(results) else {
        bail!("{explained}");
    };
    let Some(kept) = protocol::salvage(&transcript, &death) else {
        bail!("{explained}");
    };
    Ok(Judged {
        report: GuestReport {
            results: kept,
            verdict: Verdict::Error,
            verdict_detail: failure,
            bench: transcript.bench,
        },
        vm_failure: Some(explained),
    })
}

/// The name of the harness's own T28 check.
pub const CONSOLE_CHECK: &str = "t28_console_clean";

/// The harness's own T28 check: a clean console, as one more result.
/// When a test crashed, the splats from its start on are already its
/// failure: only the ones before count here, so one crash is not counted
/// twice.
pub fn console_check(outcome: &VmOutcome, results: &[TestResult]) -> TestResult {
    let crashed = results.iter().any(|r| r.status == Status::Crashed);
    let splats = if crashed {
        &outcome.splats[..outcome.splats_before_last_start]
    } else {
        &outcome.splats[..]
    };
    TestResult {
        name: CONSOLE_CHECK.into(),
        status: if splats.is_empty() {
            Status::Pass
        } else {
            Status::Fail
        },
        millis: 0,
        message: match splats.first() {
            None => String::new(),
            Some(first) => format!(
                "kernel reported {} problem line(s) on the console, first: {} (see {})",
                splats.len(),
                first.trim(),
                outcome.console_log.display()
            ),
        },
    }
}

pub fn check_filters(filters: &[String]) -> Result<()> {
    for f in filters {
        if f.is_empty()
            || !f
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            bail!(
                "test filter {f:?}: use letters, digits, '_' and '-' only (e.g. t14 or dontneed)"
            );
        }
    }
    Ok(())
}

/// The tests a run with `filters` plans, in plan order: the static
/// selftests binary lists them on the host too, so a typo in a filter
/// fails here rather than after a boot, and a run that stops early can
/// list what it did not run.
pub fn planned_tests(filters: &[String]) -> Result<Vec<String>> {
    let bin = guest_image::guest_bin_dir().join("selftests");
    let out = std::process::Command::new(&bin)
        .arg("--list")
        .output()
        .with_context(|| format!("listing the tests with {}", bin.display()))?;
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    select(&names, filters).map_err(|f| {
        anyhow::anyhow!(
            "test filter {f:?} matches no test; `{} --list` lists them",
            bin.display()
        )
    })
}

/// The names any filter selects (all without filters), or the first
/// filter that selects nothing.
fn select(names: &[String], filters: &[String]) -> Result<Vec<String>, String> {
    if let Some(f) = filters
        .iter()
        .find(|f| !names.iter().any(|n| n.contains(f.as_str())))
    {
        return Err(f.clone());
    }
    Ok(names
        .iter()
        .filter(|n| filters.is_empty() || filters.iter().any(|f| n.contains(f.as_str())))
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmtest_refuses_a_variant_the_plan_does_not_know() {
        use crate::cli::{Cli, Command};
        use clap::Parser;
        let dir = crate::util::tempdir();
        let diff = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n";
        fs::write(dir.join("1.patch"), diff).unwrap();
        fs::write(dir.join("2.patch"), diff).unwrap();
        fs::write(dir.join("series"), "1.patch\n[window]\n2.patch\n").unwrap();
        let check = |kernels: &str| {
            let cli = Cli::try_parse_from(
                ["x", "vmtest", "--kernel", kernels, "--patches"]
                    .iter()
                    .copied()
                    .chain([dir.to_str().unwrap()]),
            )
            .unwrap();
            let Command::Vmtest(a) = cli.command else {
                panic!("not vmtest")
            };
            check_plan_kernels(&a.source, &a.vm).map_err(|e| e.to_string())
        };
        assert_eq!(check("base,patched,/boot/bzImage"), Ok(()));
        for words in ["window", "all"] {
            let err = check(words).unwrap_err();
            assert!(
                err.starts_with(&format!(
                    "--kernel {words}: the test plan has no expectations for the variant window"
                )),
                "{err}"
            );
        }
        fs::remove_dir_all(dir).unwrap();
    }

    fn outcome(end: VmEnd) -> VmOutcome {
        VmOutcome {
            end,
            console_log: "/tmp/console.log".into(),
            tail: vec!["[    1.0] Run /init as init process".into()],
            splats: vec![],
            splat_in_test: vec![],
            splats_before_last_start: 0,
            panic: None,
            boot_secs: Some(1.5),
            elapsed: Duration::from_secs(3),
            qemu_stderr: vec![],
        }
    }

    fn lim() -> Limits {
        limits(Accel::Tcg, false, None, None)
    }

    const OK: &str = "BPFLAB-PLAN 1\nBPFLAB-RESULT t01_a pass 3\nBPFLAB-VERDICT pass exit=0\n";
    const CUT: &str = "BPFLAB-PLAN 3 t01_a t02_b t03_c\nBPFLAB-START t01_a\nBPFLAB-RESULT t01_a pass 3\nBPFLAB-START t02_b\n";

    fn err(o: &VmOutcome, text: &str) -> String {
        format!(
            "{:#}",
            judge(o, text, &lim(), Program::Selftests).unwrap_err()
        )
    }

    fn statuses(j: &Judged) -> Vec<Status> {
        j.report.results.iter().map(|r| r.status).collect()
    }

    #[test]
    fn a_clean_run_is_judged_complete() {
        let o = outcome(VmEnd::Exited { code: Some(0) });
        let j = judge(&o, OK, &lim(), Program::Selftests).unwrap();
        assert_eq!(j.report.results.len(), 1);
        assert!(j.vm_failure.is_none());
        assert_eq!(console_check(&o, &j.report.results).status, Status::Pass);
    }

    #[test]
    fn a_panic_mid_run_keeps_results_and_names_the_test() {
        let mut o = outcome(VmEnd::Exited { code: Some(0) });
        o.panic = Some("[    2.000000] Kernel panic - not syncing: sysrq triggered crash".into());
        o.splat_in_test = vec![
            "[    1.900000] BUG: unable to handle page fault".into(),
            "[    1.900001] Call Trace:".into(),
        ];
        let j = judge(&o, CUT, &lim(), Program::Selftests).unwrap();
        let why = j.vm_failure.as_deref().unwrap();
        assert!(why.contains("panicked") && why.contains("sysrq"), "{why}");
        assert_eq!(
            statuses(&j),
            [Status::Pass, Status::Crashed, Status::NotRun]
        );
        let crashed = &j.report.results[1].message;
        assert!(
            crashed.starts_with("the kernel panicked: [    2.000000] Kernel panic"),
            "{crashed}"
        );
        assert!(
            crashed.contains("first splat: [    1.900000] BUG: unable"),
            "{crashed}"
        );
        // Before any plan there is nothing to keep.
        assert!(err(&o, "").contains("panicked"));
    }

    #[test]
    fn a_crash_is_not_counted_again_by_the_console_check() {
        let mut o = outcome(VmEnd::Exited { code: Some(0) });
        o.splats = vec![
            "[    1.000000] WARNING: CPU: 0 PID: 9 at x".into(),
            "[    2.000000] Kernel panic - not syncing: dumptest".into(),
        ];
        o.splats_before_last_start = 1;
        o.panic = Some(o.splats[1].clone());
        let j = judge(&o, CUT, &lim(), Program::Selftests).unwrap();
        let c = console_check(&o, &j.report.results);
        assert_eq!(c.status, Status::Fail, "the earlier WARNING still counts");
        assert!(
            c.message.starts_with("kernel reported 1 problem line(s)"),
            "{}",
            c.message
        );
        o.splats_before_last_start = 0;
        assert_eq!(console_check(&o, &j.report.results).status, Status::Pass);
        // Without a crash every splat counts.
        assert!(console_check(&o, &[]).message.contains("2 problem line(s)"));
    }

    #[test]
    fn a_hang_mid_run_is_handled_like_a_crash() {
        let j = judge(&outcome(VmEnd::Timeout), CUT, &lim(), Program::Selftests).unwrap();
        assert!(j.vm_failure.as_deref().unwrap().contains("the guest hung"));
        assert_eq!(
            statuses(&j),
            [Status::Pass, Status::Crashed, Status::NotRun]
        );
        assert!(j.report.results[2].message.contains("during t02_b"));
    }

    #[test]
    fn a_guest_that_stops_reporting_is_hung() {
        let j = judge(&outcome(VmEnd::Stalled), CUT, &lim(), Program::Selftests).unwrap();
        let why = j.vm_failure.unwrap();
        assert!(
            why.contains("the guest hung: no results line for 120s"),
            "{why}"
        );
        assert_eq!(j.report.results[1].status, Status::Crashed);
    }

    #[test]
    fn timeouts_and_missing_verdicts_are_vm_failures() {
        assert!(err(&outcome(VmEnd::BootTimeout), "").contains("did not reach /init"));
        let o = outcome(VmEnd::Exited { code: Some(0) });
        assert!(err(&o, "").contains("no verdict"));
        let j = judge(&o, "BPFLAB-PLAN 1 t01_a\n", &lim(), Program::Selftests).unwrap();
        assert!(j.vm_failure.unwrap().contains("no verdict"));
        assert_eq!(j.report.results[0].status, Status::NotRun);
        let e = err(&o, "BPFLAB-VERDICT error exec /bin/selftests: ENOENT\n");
        assert!(e.contains("could not run its program"), "{e}");
        assert!(err(&o, "BPFLAB-PLAN 1\nBPFLAB-RESULT t01 maybe 1\n").contains("malformed"));
    }

    #[test]
    fn splats_fail_the_console_check() {
        let mut o = outcome(VmEnd::Exited { code: Some(0) });
        o.splats = vec!["[    5.000000] WARNING: CPU: 0 PID: 1 at lkdtm".into()];
        let c = console_check(&o, &[]);
        assert_eq!(c.status, Status::Fail);
        assert!(c.message.contains("WARNING"), "{}", c.message);
    }

    #[test]
    fn filters_select_like_the_guest_runner() {
        let names: Vec<String> = ["t01_a", "t02_b", "t14_c"].map(String::from).to_vec();
        assert_eq!(select(&names, &[]).unwrap(), names);
        assert_eq!(
            select(&names, &["t14".into(), "t01".into()]).unwrap(),
            ["t01_a", "t14_c"]
        );
        assert_eq!(select(&names, &["t99".into()]).unwrap_err(), "t99");
    }

    #[test]
    fn filters_must_fit_on_the_kernel_command_line() {
        assert!(check_filters(&["t14".into(), "dont_need-x".into()]).is_ok());
        assert!(check_filters(&["a b".into()]).is_err());
        assert!(check_filters(&["t1,t2".into()]).is_err());
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
