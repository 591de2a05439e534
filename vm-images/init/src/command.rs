//! Runs the host command of the request inside the shared host root: in
//! its host working directory, with its environment, its stdout and
//! stderr on two virtio-serial ports the host relays, or for `--shell` a
//! session on the virtio console with the host terminal's size.

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use guest_common::request::{
    exit_status, HostCommand, HOST_ROOT, SHELL_TTY, STDERR_PORT, STDIN_PORT, STDOUT_PORT,
};

use crate::say;
use crate::sys::describe;
use guest_common::protocol::{Detail, Outcome, Verdict};

/// Ports and consoles appear when the host side announces them, which may
/// be after /init starts.
const DEVICE_WAIT: Duration = Duration::from_secs(10);

/// Runs `cmd` and returns the verdict that carries its exit status.
pub fn run(cmd: &HostCommand) -> Verdict {
    let cwd = format!("{HOST_ROOT}{}", cmd.cwd);
    if !Path::new(&cwd).is_dir() {
        return Verdict::error(format!(
            "the working directory {} is not visible in the guest (the host root is shared \
             read-only with tmpfs over /tmp, /run and /var/tmp; the project read-write): \
             run from inside the project",
            cmd.cwd
        ));
    }
    let (mut command, mut errors) = match prepare(cmd) {
        Ok(c) => c,
        Err(detail) => return Verdict::error(detail),
    };
    say(&format!("starting command at {}s", crate::sys::uptime()));
    let status = match command.spawn() {
        Ok(mut child) => match child.wait() {
            Ok(st) => exit_status(st.code(), st.signal()),
            Err(e) => return Verdict::error(describe("wait", &e)),
        },
        Err(e) => not_started(cmd, &e, &mut errors),
    };
    // Give the host time to take the last output off the ports before
    // the reboot ends the VM.
    std::thread::sleep(Duration::from_millis(100));
    from_status(status)
}

/// The verdict of a command that ended with `status` (0-255, as a shell
/// gives it).
pub fn from_status(status: i32) -> Verdict {
    Verdict {
        outcome: if status == 0 {
            Outcome::Pass
        } else {
            Outcome::Fail
        },
        detail: Detail::Status(u8::try_from(status).unwrap_or(u8::MAX)),
    }
}

/// Like a shell: 127 for a command that is not there, 126 for one that
/// cannot be executed; the reason goes where the command's errors go.
fn not_started(cmd: &HostCommand, err: &std::io::Error, errors: &mut File) -> i32 {
    let status = if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    let line = describe(&format!("bpflab: {}", cmd.argv[0]), err);
    say(&line);
    use std::io::Write;
    let _ = writeln!(errors, "{line}");
    status
}

/// The command, and where to say it could not start: a second handle on
/// its stderr (a virtio port admits one opener only) or its terminal.
fn prepare(cmd: &HostCommand) -> Result<(Command, File), String> {
    let mut command = Command::new(&cmd.argv[0]);
    command
        .args(&cmd.argv[1..])
        .env_clear()
        .envs(cmd.env.iter().map(|(k, v)| (k, v)));
    let cwd = cmd.cwd.clone();
    let (tty, errors) = if cmd.shell {
        wait_for(Path::new(SHELL_TTY))?;
        (Some((cmd.rows, cmd.cols)), output_port(STDERR_PORT, true)?)
    } else {
        let stderr = output_port(STDERR_PORT, false)?;
        let errors = stderr
            .try_clone()
            .map_err(|e| describe("dup of the stderr port", &e))?;
        let stdin = if cmd.stdin {
            let port = find_port(STDIN_PORT)?;
            Stdio::from(
                File::open(&port).map_err(|e| describe(&format!("open {}", port.display()), &e))?,
            )
        } else {
            Stdio::null()
        };
        command
            .stdin(stdin)
            .stdout(output_port(STDOUT_PORT, false)?)
            .stderr(stderr);
        (None, errors)
    };
    // SAFETY: between fork and exec the closure makes system calls
    // (chroot, chdir, setsid, open, ioctl, dup2) and allocates path
    // strings, which is sound because /init never starts a thread.
    unsafe {
        command.pre_exec(move || enter(&cwd, tty));
    }
    Ok((command, errors))
}

/// In the child: into the host root and working directory, a session of
/// its own, and for a shell the console as its controlling terminal.
fn enter(cwd: &str, tty: Option<(u16, u16)>) -> std::io::Result<()> {
    into_host_root()?;
    std::env::set_current_dir(cwd)?;
    // SAFETY: setsid has no preconditions.
    if unsafe { libc::setsid() } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let Some((rows, cols)) = tty else {
        return Ok(());
    };
    let term = OpenOptions::new().read(true).write(true).open(SHELL_TTY)?;
    let fd = term.as_raw_fd();
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: fd is an open terminal; the pointers are valid for the call.
    unsafe {
        if libc::ioctl(fd, libc::TIOCSCTTY, 0) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if rows > 0 && cols > 0 {
            libc::ioctl(fd, libc::TIOCSWINSZ, &size);
        }
        for target in 0..3 {
            libc::dup2(fd, target);
        }
    }
    Ok(())
}

/// The host root as the command's root, the way switch_root makes a new
/// root: in a mount namespace of its own, [`HOST_ROOT`] moved onto `/`.
/// A plain chroot would leave the command "chrooted", and the kernel
/// refuses a user namespace to a chrooted task (the BPF selftests'
/// deny_namespace and token tests make them). /init keeps its own root.
fn into_host_root() -> std::io::Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL in a constant path");
    let (root, dot, host) = (c("/"), c("."), c(HOST_ROOT));
    let check = |rc: libc::c_int| {
        if rc < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // SAFETY: plain system calls on NUL-terminated paths that outlive them.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS))?;
        // Nothing of this namespace's moves reaches /init's.
        let private = libc::MS_REC | libc::MS_PRIVATE;
        check(libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            private,
            std::ptr::null(),
        ))?;
        check(libc::chdir(host.as_ptr()))?;
        check(libc::mount(
            dot.as_ptr(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_MOVE,
            std::ptr::null(),
        ))?;
        check(libc::chroot(dot.as_ptr()))?;
    }
    Ok(())
}

/// The device of the virtio-serial port named `name` (or the shell's
/// console), opened for writing.
fn output_port(name: &str, shell: bool) -> Result<File, String> {
    let path = if shell {
        PathBuf::from(SHELL_TTY)
    } else {
        find_port(name)?
    };
    OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| describe(&format!("open {}", path.display()), &e))
}

/// /dev/vportNpM of the port the host named `name`, waiting for it.
fn find_port(name: &str) -> Result<PathBuf, String> {
    let started = Instant::now();
    loop {
        if let Ok(dir) = std::fs::read_dir("/sys/class/virtio-ports") {
            for entry in dir.flatten() {
                let named = std::fs::read_to_string(entry.path().join("name")).unwrap_or_default();
                if named.trim() == name {
                    let dev = Path::new("/dev").join(entry.file_name());
                    wait_for(&dev)?;
                    return Ok(dev);
                }
            }
        }
        if started.elapsed() > DEVICE_WAIT {
            return Err(format!(
                "no virtio-serial port named {name} within {DEVICE_WAIT:?} (is the kernel built \
                 with CONFIG_VIRTIO_CONSOLE?)"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_for(path: &Path) -> Result<(), String> {
    let started = Instant::now();
    while !path.exists() {
        if started.elapsed() > DEVICE_WAIT {
            return Err(format!(
                "{} did not appear within {DEVICE_WAIT:?}",
                path.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_carries_the_status() {
        let v = from_status(0);
        assert_eq!((v.outcome, v.status()), (Outcome::Pass, Some(0)));
        let v = from_status(137);
        assert_eq!(v.outcome, Outcome::Fail);
        assert_eq!(crate::verdict::wire(&v), "BPFLAB-VERDICT fail status=137\n");
    }
}
