//! `cargo xtask run`: a host command, or a shell, in the test VM. The
//! host's root is shared read-only and the project read-write (see
//! `vm/share.rs`); the command runs in the caller's working directory
//! with the caller's environment, its stdout and stderr streamed back,
//! and the exit status is the command's (128+N for a signal).
//!
//! Exit status: the command's; 125 when the VM could not run it (setup,
//! boot, a panic, a timeout); a kernel splat turns a 0 into 1 unless
//! `--allow-splat`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use guest_common::protocol::Program;
use guest_common::request::HostCommand;

use crate::cli::RunArgs;
use crate::hostdeps;
use crate::kernel::Flavor;
use crate::vm::process::VmOutcome;
use crate::vm::qemu::GuestIo;
use crate::vm::session::{self, GuestRun};
use crate::vm::share::Sharing;
use crate::vm::symbolize;
use crate::vm::targets::BootConfig;

/// The VM could not run the command (as `env` and `docker run` use it).
pub const EXIT_VM: u8 = 125;

pub fn run(args: RunArgs) -> ExitCode {
    match run_command(&args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(EXIT_VM)
        }
    }
}

fn run_command(args: &RunArgs) -> Result<u8> {
    let command = host_command(args)?;
    let boot = BootConfig {
        kernels: vec![args.kernel.clone()],
        config: args.kernel_config,
        extra_config: args.config.clone(),
        debug: args.debug,
        accel: args.accel,
        claim: Flavor::patched().name().to_string(),
        timeout: args.timeout,
        bundle: None,
        machine: args.machine.machine(),
    };
    let source = args.source.config()?;
    hostdeps::ensure_boot(&source)?;
    hostdeps::ensure_share(args.share)?;
    let prepared = session::prepare(&source, &boot, "run")?;
    let target = &prepared.targets[0];
    let mut session = prepared.session;
    let run_dir = session.run_dir.clone();
    session.sharing = Sharing::Host(args.share);
    session.host_command = Some(command);
    let outputs = (run_dir.join("stdout"), run_dir.join("stderr"));
    session.io = if args.shell {
        GuestIo::Shell {
            console: run_dir.join(format!("console-{}.raw", target.name)),
        }
    } else {
        GuestIo::Command {
            stdout: outputs.0.clone(),
            stderr: outputs.1.clone(),
            stdin: None,
        }
    };
    let ran = if args.shell {
        let _terminal = TerminalGuard::save();
        session.run_guest(target, target.guest(Program::Command, Vec::new(), None))
    } else {
        session.run_command_relayed(
            target,
            (&outputs.0, &outputs.1),
            std::io::stdout(),
            std::io::stderr(),
        )
    };
    // Relayed, or in the capped console log: the raw copies (as large as
    // the command made them) are not kept.
    let raw = match &session.io {
        GuestIo::Command { stdout, stderr, .. } => vec![stdout, stderr],
        GuestIo::Shell { console } => vec![console],
        GuestIo::Console => vec![],
    };
    for file in raw {
        let _ = std::fs::remove_file(file);
    }
    exit_code(&ran?, args.allow_splat, target.vmlinux.as_deref())
}

/// The command's status, after what the kernel said about it.
fn exit_code(ran: &GuestRun, allow_splat: bool, vmlinux: Option<&Path>) -> Result<u8> {
    if let Some(why) = &ran.vm_failure {
        bail!("{why}");
    }
    let verdict = &ran.report.verdict;
    let status = verdict
        .status()
        .with_context(|| format!("the guest's verdict has no exit status: {}", verdict.detail))?;
    let splats = report_splats(&ran.outcome, vmlinux);
    Ok(if splats > 0 && !allow_splat && status == 0 {
        1
    } else {
        status
    })
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
/// with what environment.
fn host_command(args: &RunArgs) -> Result<HostCommand> {
    let argv = if args.shell {
        vec![shell_program()]
    } else if args.command.is_empty() {
        bail!(
            "no command: give one after `--` (e.g. `cargo xtask run -- uname -a`) or use --shell"
        );
    } else {
        args.command.clone()
    };
    if args.shell && !terminal::is_tty(0) {
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
        shell: args.shell,
        stdin: !args.shell && terminal::is_piped(0),
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

/// The user's terminal: its size, and its settings put back after QEMU
/// (which makes it raw) however QEMU ended.
mod terminal {
    pub fn is_tty(fd: i32) -> bool {
        // SAFETY: isatty only inspects the descriptor.
        unsafe { libc::isatty(fd) == 1 }
    }

    /// A pipe or a file, whose bytes the guest's command gets (a
    /// terminal, /dev/null or a socket does not: the command reads
    /// /dev/null, as before).
    pub fn is_piped(fd: i32) -> bool {
        // SAFETY: stat is plain data; fstat fills it or fails.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: st is valid for fstat's write.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return false;
        }
        matches!(st.st_mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFREG)
    }

    pub fn size() -> Option<(u16, u16)> {
        // SAFETY: winsize is plain data; the ioctl fills it or fails.
        let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
        for fd in [1, 0, 2] {
            // SAFETY: ws is valid for the ioctl's write.
            if unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0 && ws.ws_row > 0 {
                return Some((ws.ws_row, ws.ws_col));
            }
        }
        None
    }
}

/// Restores stdin's terminal settings and file status flags when
/// dropped: QEMU makes the terminal raw and non-blocking, and when it is
/// killed it cannot undo either.
struct TerminalGuard {
    termios: Option<libc::termios>,
    flags: libc::c_int,
}

impl TerminalGuard {
    fn save() -> TerminalGuard {
        // SAFETY: termios is plain data; tcgetattr fills it or fails.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: t is valid for the call; F_GETFL only reads.
        let (ok, flags) = unsafe {
            (
                libc::tcgetattr(0, &mut t) == 0,
                libc::fcntl(0, libc::F_GETFL),
            )
        };
        TerminalGuard {
            termios: ok.then_some(t),
            flags,
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        // SAFETY: the values came from the same descriptor.
        unsafe {
            if let Some(t) = &self.termios {
                libc::tcsetattr(0, libc::TCSANOW, t);
            }
            if self.flags >= 0 {
                libc::fcntl(0, libc::F_SETFL, self.flags);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn pipes_and_files_are_forwarded_terminals_and_dev_null_are_not() {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        assert!(terminal::is_piped(file.as_raw_fd()), "a file");
        let (read, _write) = std::io::pipe().unwrap();
        assert!(terminal::is_piped(read.as_raw_fd()), "a pipe");
        let null = std::fs::File::open("/dev/null").unwrap();
        assert!(!terminal::is_piped(null.as_raw_fd()), "/dev/null");
        assert!(!terminal::is_piped(-1), "no descriptor");
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
}
