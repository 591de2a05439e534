//! Guest /init (PID 1): mount the basics, run the program named on the kernel
//! command line, report one verdict line to the host on /dev/ttyS1, reboot.
//!
//! PID 1 must never exit: the kernel panics when init dies. So every path,
//! including a Rust panic, ends in `sys::reboot()`, which never returns.

mod cmdline;
mod command;
mod dhcp;
mod net;
mod share;
mod sys;
mod verdict;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::panic;
use std::process::Command;

use guest_common::cmdline::{self as kernel_cmdline, GuestCommand as Config};
use guest_common::panic_text;
use guest_common::protocol::Verdict;
use guest_common::protocol::{Inject, Program};
use guest_common::request::{Request, Share, REQUEST_PATH};
use verdict::Exit;

/// The second serial port carries machine-readable results to the host; the
/// first (the console, our stdout) carries everything humans read.
const RESULTS: &str = guest_common::protocol::RESULTS_PORT;
const SYSRQ_TRIGGER: &str = "/proc/sysrq-trigger";
const LKDTM_DIRECT: &str = "/sys/kernel/debug/provoke-crash/DIRECT";

fn main() {
    let verdict = panic::catch_unwind(run)
        .unwrap_or_else(|payload| Verdict::error(format!("init panic: {}", panic_text(&*payload))));
    // Reporting must not be able to take PID 1 down either.
    let _ = panic::catch_unwind(|| report(&verdict));
    sys::reboot()
}

/// What every console line of /init starts with.
const SAY_PREFIX: &str = "bpflab-init: ";

/// Prints a human line on the console. Errors are ignored: there is nobody
/// to tell, and println! would panic.
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{SAY_PREFIX}{line}");
    let _ = out.flush();
}

/// Everything between boot and the verdict.
fn run() -> Verdict {
    let mounted = mount_all();
    // Only now does /dev/console surely exist (devtmpfs).
    sys::ensure_console_stdio();
    if let Err(detail) = mounted {
        return Verdict::error(detail);
    }
    if let Err(detail) = sys::loopback_up() {
        say(&format!("loopback not up ({detail})"));
    }

    let (config, network) = match read_config() {
        Ok(c) => c,
        Err(detail) => return Verdict::error(detail),
    };
    if network {
        match net::configure() {
            Ok(line) => say(&line),
            Err(detail) => {
                say(&format!("error: {detail}"));
                return Verdict::error(detail);
            }
        }
    }

    match config.inject {
        Some(Inject::Panic) => return inject_panic(),
        Some(Inject::Warn) => {
            if let Err(detail) = inject_warn() {
                return Verdict::error(detail);
            }
        }
        Some(Inject::Hang) | Some(Inject::Flood) | None => {}
    }

    let request = match read_request() {
        Ok(r) => r,
        Err(detail) => return Verdict::error(detail),
    };
    let verdict = match prepare_shares(&config, &request, network) {
        Err(detail) => {
            // Its own line, as a failed mount of mount_all has.
            say(&format!("error: {detail}"));
            Verdict::error(detail)
        }
        Ok(()) => match (&request.command, config.program) {
            (Some(cmd), Program::Command) => command::run(cmd),
            (None, Program::Command) => {
                Verdict::error("bpflab.run=command without a command in the request")
            }
            _ => run_program(&config, request.share.as_ref()),
        },
    };

    // After the program, so the host has seen the guest boot: the flood
    // must test the log cap, not the boot timeout.
    if config.inject == Some(Inject::Flood) {
        flood_console();
    }

    if config.inject == Some(Inject::Hang) {
        say(&format!(
            "inject=hang: program gave {}, withholding the verdict forever",
            verdict::wire(&verdict).trim_end()
        ));
        sys::sleep_forever();
    }
    verdict
}

/// Mounts every filesystem in `sys::MOUNTS`; the first hard failure wins.
fn mount_all() -> Result<(), String> {
    for m in sys::MOUNTS {
        match sys::mount(m) {
            Ok(sys::Mounted::Yes) => {}
            Ok(sys::Mounted::Absent(why)) => say(&format!("{} not available ({why})", m.fstype)),
            Err(detail) => {
                say(&format!("error: {detail}"));
                return Err(detail);
            }
        }
    }
    Ok(())
}

/// The host's request from the initramfs, if it wrote one.
fn read_request() -> Result<Request, String> {
    match std::fs::read(REQUEST_PATH) {
        Ok(bytes) => Request::decode(&bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Request::default()),
        Err(e) => Err(sys::describe(&format!("read {REQUEST_PATH}"), &e)),
    }
}

/// The host root at /host when the host shares it; for a host command,
/// the whole root it runs in.
fn prepare_shares(config: &Config, request: &Request, network: bool) -> Result<(), String> {
    let Some(share) = &request.share else {
        return match config.program {
            Program::Command => Err("bpflab.run=command without a share in the request".into()),
            _ => Ok(()),
        };
    };
    share::mount_host_root(share)?;
    say(&format!("host root shared over {}", share.kind.name()));
    if config.program == Program::Command {
        share::build_command_root(share)?;
        if network {
            share::cover_resolv_conf(net::RESOLV_CONF)?;
        }
    }
    Ok(())
}

/// Reads and parses /proc/cmdline, printing any warnings: the program,
/// and whether the network is to be configured.
fn read_config() -> Result<(Config, bool), String> {
    let text = std::fs::read_to_string("/proc/cmdline")
        .map_err(|e| sys::describe("read /proc/cmdline", &e))?;
    let parsed = kernel_cmdline::parse(&text).map_err(|e| {
        say(&format!("error: kernel command line: {e}"));
        format!("cmdline: {e}")
    })?;
    for w in &parsed.warnings {
        say(&format!("warning: {w}"));
    }
    Ok((parsed.command, parsed.network))
}

/// Crashes the kernel on purpose so the host can test its panic detection.
/// Returning at all means the crash did not happen.
fn inject_panic() -> Verdict {
    say("inject=panic: crashing the kernel via sysrq-trigger");
    match sys::write_control(SYSRQ_TRIGGER, "c") {
        Ok(()) => Verdict::error("inject panic: kernel survived sysrq c"),
        Err(detail) => Verdict::error(format!("inject panic: {detail}")),
    }
}

/// Provokes a real kernel WARNING (lkdtm) so the host can test that it
/// notices warnings in the console log even when the tests pass.
fn inject_warn() -> Result<(), String> {
    say("inject=warn: provoking a kernel WARNING via lkdtm");
    sys::write_control(LKDTM_DIRECT, "WARNING").map_err(|d| format!("inject warn: {d}"))
}

/// Bytes written by the flood injection: more than the log cap the host's
/// fault test sets (a serial console under TCG takes ~0.3 MiB/s).
const FLOOD_BYTES: usize = 6 << 20;

/// Floods the console so the host can test that its log stays bounded.
fn flood_console() {
    use std::io::Write;
    say("inject=flood: writing 6 MiB to the console");
    let line = [b'#'; 1023];
    let mut out = std::io::stdout().lock();
    for _ in 0..FLOOD_BYTES / 1024 {
        // A console that stops taking output is the host's problem to report.
        if out
            .write_all(&line)
            .and_then(|()| out.write_all(b"\n"))
            .is_err()
        {
            break;
        }
    }
    let _ = out.flush();
}

/// Runs the selected program with inherited stdio and maps how it ended.
fn run_program(config: &Config, share: Option<&Share>) -> Verdict {
    let name = config.program.name();
    let path = cmdline::program_path(config.program, share);
    // The host measures boot-to-first-test from this line.
    say(&format!("starting {name} at {}s", sys::uptime()));
    let status = Command::new(&path)
        .args(cmdline::program_args(config, RESULTS))
        .env("PATH", "/bin")
        .env("RUST_BACKTRACE", "1")
        .status();
    match status {
        Err(e) => Verdict::error(sys::describe(&format!("exec {path}"), &e)),
        Ok(st) => match (st.code(), st.signal()) {
            (Some(code), _) => verdict::from_exit(Exit::Code(code)),
            (None, Some(sig)) => verdict::from_exit(Exit::Signal(sig)),
            (None, None) => Verdict::error(format!("unknown wait status {st:?}")),
        },
    }
}

/// Sends the verdict to the host and a readable copy to the console.
fn report(verdict: &Verdict) {
    let line = verdict::wire(verdict);
    say(&format!(
        "verdict: {}",
        line.trim_start_matches(guest_common::protocol::VERDICT)
            .trim()
    ));
    if let Err(detail) = sys::write_serial_line(RESULTS, &line) {
        say(&format!("error: could not send the verdict: {detail}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_marker_is_what_init_says_when_it_starts_the_program() {
        assert_eq!(
            format!("{SAY_PREFIX}starting"),
            guest_common::protocol::BOOT_MARKER
        );
    }
}
