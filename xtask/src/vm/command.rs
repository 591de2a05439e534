//! A host command, or a shell, in the test VM: the host's root shared
//! read-only and the project read-write (`share.rs`), the command run in
//! the caller's working directory with the caller's environment, its
//! stdout and stderr streamed back; its exit status (128+N for a
//! signal), a kernel splat turning a 0 into 1 unless allowed. On several
//! kernels each run keeps the command's own status, its splats and the
//! OOM killer's kills apart, for `expect` to hold to its expectation.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use guest_common::request::HostCommand;

use super::failed::{KernelSign, VmFailed};
use super::process::VmOutcome;
use super::session::{self, BootSpec, GuestRun, SessionOptions};
use super::share::{ShareChoice, Sharing};
use super::symbolize;
use super::targets::{BootConfig, Target};
use super::terminal::{self, TerminalGuard};
use crate::kernel::choice::Chosen;
use crate::kernel::SourceConfig;

/// What runs in the guest, and how.
#[derive(Debug, Clone)]
pub struct CommandOptions {
    /// The command and its arguments (empty with `shell`).
    pub command: Vec<String>,
    /// The caller's shell on the guest's console instead.
    pub shell: bool,
    pub share: ShareChoice,
    /// A kernel splat leaves the command's status as it is.
    pub allow_splat: bool,
}

/// Runs `command` (`host_command`'s) in a guest of `boot`'s one kernel;
/// its status. The host tools to boot and share must be there.
pub fn run(
    source: &SourceConfig,
    (chosen, boot): (&Chosen, &BootConfig),
    options: &CommandOptions,
    command: HostCommand,
) -> Result<u8> {
    let prepared = prepare(source, (chosen, boot), options)?;
    let target = &prepared.targets[0];
    let mut session = prepared.session;
    let run_dir = session.run_dir().to_path_buf();
    let outputs = (run_dir.join("stdout"), run_dir.join("stderr"));
    let console = run_dir.join(format!("console-{}.raw", target.name));
    let ran = if options.shell {
        let _terminal = TerminalGuard::save();
        session.run_shell(target, command, &console)
    } else {
        relayed(&mut session, target, command, (&outputs.0, &outputs.1))
    };
    // Relayed, or in the capped console log: the raw copies (as large as
    // the command made them) are not kept.
    let raw = if options.shell {
        vec![console]
    } else {
        vec![outputs.0, outputs.1]
    };
    for file in raw {
        let _ = std::fs::remove_file(file);
    }
    exit_code(&ran?, options.allow_splat, target.vmlinux())
}

/// The command's run on one kernel of several: its own exit status, as
/// the guest saw it (Err: why the VM could not run it), the splats the
/// kernel reported and the processes the OOM killer killed, apart from
/// it, and where its output is.
#[derive(Debug, Clone)]
pub struct KernelCommand {
    pub kernel: String,
    pub status: std::result::Result<u8, String>,
    pub splats: usize,
    pub oom_kills: usize,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

/// What only one kernel can take, refused before anything is installed
/// when a command is to run on several: a shell, a piped stdin.
pub fn check_each(options: &CommandOptions, command: &HostCommand) -> Result<()> {
    if options.shell {
        bail!("--shell runs on one kernel: give one --kernel and no --expect");
    }
    if command.stdin {
        bail!("a piped stdin can go to one kernel only: give one --kernel, or no stdin");
    }
    Ok(())
}

/// Runs `command` (`check_each`'s) on each kernel of `boot` in turn, its
/// output streamed and kept in the run's directory as `<kernel>.stdout`
/// and `<kernel>.stderr`; a VM that cannot run it is that kernel's
/// result, not the run's end. `check` is given the kernels' names before
/// the first boot. The host tools to boot and share must be there.
pub fn run_each(
    source: &SourceConfig,
    (chosen, boot): (&Chosen, &BootConfig),
    (options, command): (&CommandOptions, HostCommand),
    check: impl Fn(&[String]) -> Result<()>,
) -> Result<(PathBuf, Vec<KernelCommand>)> {
    let prepared = prepare(source, (chosen, boot), options)?;
    let names: Vec<String> = prepared.targets.iter().map(|t| t.name.clone()).collect();
    check(&names)?;
    let mut session = prepared.session;
    let run_dir = session.run_dir().to_path_buf();
    let mut out = Vec::new();
    for target in &prepared.targets {
        eprintln!("== {}: {}", target.name, command.argv.join(" "));
        let stdout = run_dir.join(format!("{}.stdout", target.name));
        let stderr = run_dir.join(format!("{}.stderr", target.name));
        let ran = relayed(&mut session, target, command.clone(), (&stdout, &stderr));
        let splats = ran.as_ref().map_or(0, |r| r.outcome.splats.len());
        let oom_kills = ran
            .as_ref()
            .map_or(0, |r| oom_kills_in(&r.outcome.console_log));
        let status = ran
            .and_then(|r| command_status(&r, target.vmlinux()))
            .map_err(|e| format!("{e:#}"));
        out.push(KernelCommand {
            kernel: target.name.clone(),
            status,
            splats,
            oom_kills,
            stdout,
            stderr,
        });
    }
    Ok((run_dir, out))
}

/// The run's session, the host shared with its guests, and its kernels.
fn prepare(
    source: &SourceConfig,
    (chosen, boot): (&Chosen, &BootConfig),
    options: &CommandOptions,
) -> Result<session::Prepared> {
    let session_options = SessionOptions {
        sharing: Sharing::Host(options.share),
        ..SessionOptions::default()
    };
    session::prepare(source, chosen, boot, "run", session_options)
}

/// `command` on `target`, its stdout and stderr written to `out` and
/// streamed to the harness's own.
fn relayed(
    session: &mut session::Session,
    target: &Target,
    command: HostCommand,
    out: (&Path, &Path),
) -> Result<GuestRun> {
    let spec = BootSpec {
        host_command: Some(command),
        ..BootSpec::default()
    };
    session.run_command_relayed(target, spec, out, std::io::stdout(), std::io::stderr())
}

/// The command's status, after what the kernel said about it.
fn exit_code(ran: &GuestRun, allow_splat: bool, vmlinux: Option<&Path>) -> Result<u8> {
    let status = command_status(ran, vmlinux)?;
    Ok(
        if !ran.outcome.splats.is_empty() && !allow_splat && status == 0 {
            1
        } else {
            status
        },
    )
}

/// The command's own exit status, as the guest saw it (a VM that
/// failed: a `CommandVmFailed` error); the kernel's splats are printed
/// after its output.
fn command_status(ran: &GuestRun, vmlinux: Option<&Path>) -> Result<u8> {
    if let Some(failed) = &ran.vm_failure {
        return Err(CommandVmFailed(failed.clone()).into());
    }
    let verdict = &ran.report.verdict;
    let status = verdict
        .status()
        .with_context(|| format!("the guest's verdict has no exit status: {}", verdict.detail))?;
    report_splats(&ran.outcome, vmlinux);
    Ok(status)
}

/// The VM that was to run the command failed (so the command has no
/// status of its own): what `run` returns, typed, for `--bisect`.
#[derive(Debug)]
pub struct CommandVmFailed(pub VmFailed);

impl std::fmt::Display for CommandVmFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for CommandVmFailed {}

/// `git bisect run`'s exit code: 0 good; 1 bad (the command failed, or
/// the kernel panicked or splatted before it could say); 125 skip (the
/// kernel did not build, or the VM failed with no sign of the kernel's:
/// the commit says nothing). The command's own 125 to 255 are bad too,
/// as bisect would take them for a skip or abort.
pub fn bisect_exit(ran: &Result<u8>) -> u8 {
    const BAD: u8 = 1;
    const SKIP: u8 = 125;
    match ran {
        Ok(0) => 0,
        Ok(_) => BAD,
        Err(e) => match e.downcast_ref::<CommandVmFailed>() {
            Some(CommandVmFailed(f)) if f.sign != KernelSign::Nothing => BAD,
            _ => SKIP,
        },
    }
}

/// How many processes the OOM killer killed, by the console at `log`
/// (`Out of memory: Killed process N (comm)`, or a memory cgroup's).
fn oom_kills_in(log: &Path) -> usize {
    let text = std::fs::read(log).unwrap_or_default();
    oom_kills(&String::from_utf8_lossy(&text))
}

/// How many OOM kills `console` reports.
pub fn oom_kills(console: &str) -> usize {
    console
        .lines()
        .filter(|l| l.contains("Killed process") && l.to_lowercase().contains("out of memory"))
        .count()
}

/// Prints the kernel's splats after the command's output, the first with
/// file:line (`vm::symbolize`); returns how many.
fn report_splats(outcome: &VmOutcome, vmlinux: Option<&Path>) -> usize {
    if let Some(first) = outcome.splats.first() {
        eprintln!(
            "bpflab: the first splat, with file:line:\n{}",
            symbolize::first_splat(&outcome.console_log, first, vmlinux)
        );
        eprintln!(
            "bpflab: the kernel reported {} problem line(s) on the console, first: {} (see {})",
            outcome.splats.len(),
            first.trim(),
            outcome.console_log.display()
        );
    }
    outcome.splats.len()
}

/// What the guest runs: the command (or the caller's shell), where and
/// with what environment; a missing command or a `--shell` without a
/// terminal fails here, before anything is installed or booted.
pub fn host_command(options: &CommandOptions) -> Result<HostCommand> {
    let argv = if options.shell {
        vec![shell_program()]
    } else if options.command.is_empty() {
        bail!(
            "no command: give one after `--` (e.g. `cargo xtask run -- uname -a`) or use --shell"
        );
    } else {
        options.command.clone()
    };
    if options.shell && !terminal::is_tty(0) {
        bail!("--shell needs a terminal on stdin; give a command after `--` instead");
    }
    let cwd = std::env::current_dir().context("reading the working directory")?;
    let cwd = cwd
        .to_str()
        .context("the working directory is not UTF-8; run from a UTF-8 path")?
        .to_string();
    let (rows, cols) = terminal::size().unwrap_or((0, 0));
    Ok(HostCommand {
        argv,
        cwd,
        env: guest_env(std::env::vars_os()),
        shell: options.shell,
        stdin: !options.shell && terminal::is_piped(0),
        rows,
        cols,
    })
}

/// The caller's shell, if the guest can run it.
fn shell_program() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|s| s.starts_with('/') && PathBuf::from(s).is_file())
        .unwrap_or_else(|| "/bin/sh".to_string())
}

/// The caller's environment, less what `cargo run` set for the xtask
/// itself (it would confuse a cargo inside the guest) and what is not
/// UTF-8.
fn guest_env(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(String, String)> {
    const CARGO_RUN: &[&str] = &[
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
    ];
    vars.filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| !k.starts_with("CARGO_PKG_") && !CARGO_RUN.contains(&k.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    /// A commit whose kernel panics or splats is bad; one whose kernel
    /// does not build, or whose VM the host failed, is skipped; any status
    /// of the command's own but 0 is bad, 125 and above too.
    #[test]
    fn bisect_takes_the_kernels_failures_as_bad_and_the_hosts_as_skips() {
        let vm = |sign| -> Result<u8> {
            let failed = VmFailed {
                sign,
                ..VmFailed::of_host("the guest hung".into())
            };
            Err(CommandVmFailed(failed).into())
        };
        assert_eq!(bisect_exit(&Ok(0)), 0);
        for status in [1, 2, 125, 127, 139] {
            assert_eq!(bisect_exit(&Ok(status)), 1, "status {status}");
        }
        assert_eq!(bisect_exit(&vm(KernelSign::Panicked)), 1);
        assert_eq!(bisect_exit(&vm(KernelSign::Splat("BUG: x".into()))), 1);
        assert_eq!(bisect_exit(&vm(KernelSign::Nothing)), 125);
        let build: Result<u8> = Err(anyhow::anyhow!("make failed: the panicked kernel"));
        assert_eq!(bisect_exit(&build), 125, "text is never read");
    }

    #[test]
    fn cargo_run_variables_stay_on_the_host() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("CARGO_PKG_NAME", "xtask"),
            ("CARGO_MANIFEST_DIR", "/w/xtask"),
            ("CARGO_HOME", "/root/.cargo"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = guest_env(vars.into_iter());
        let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["PATH", "CARGO_HOME"]);
    }

    #[test]
    fn the_oom_killers_kills_are_counted_from_the_console() {
        let console = "[    3.1] Out of memory: Killed process 211 (my-test) total-vm:9000kB\n\
                       [    3.2] Memory cgroup out of memory: Killed process 212 (child)\n\
                       [    3.3] my-test: Killed process list printed\n\
                       [    3.4] oom_reaper: reaped process 211 (my-test)\n";
        assert_eq!(oom_kills(console), 2);
        assert_eq!(oom_kills("[ 1.0] Run /init as init process\n"), 0);
    }
}
