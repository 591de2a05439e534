//! `--gdb`: the gdb command that attaches to a guest QEMU holds stopped
//! at its gdbstub, with the kernel's vmlinux and the tree's scripts/gdb
//! helpers (vmlinux-gdb.py next to vmlinux, `CONFIG_GDB_SCRIPTS`).

use std::net::TcpListener;
use std::path::Path;

use anyhow::{bail, Result};

/// gdb's arguments to debug the kernel `vmlinux` (None: a kernel of the
/// user's own, whose symbols gdb is not given) at the local `port`.
pub fn command(vmlinux: Option<&Path>, port: u16) -> Vec<String> {
    // The command is printed before QEMU listens, and a busy host can
    // take longer than gdb's default 15 s retry to start it.
    let mut args = vec![
        "gdb".to_string(),
        "-q".to_string(),
        "-iex".to_string(),
        "set tcp connect-timeout 120".to_string(),
    ];
    if let Some(vmlinux) = vmlinux {
        // The tree holds both vmlinux-gdb.py's link and what it leads to.
        let tree = vmlinux
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("/"));
        args.extend([
            "-iex".to_string(),
            format!("add-auto-load-safe-path {}", tree.display()),
            "-ex".to_string(),
            format!("file {}", vmlinux.display()),
        ]);
    }
    args.extend(["-ex".to_string(), format!("target remote localhost:{port}")]);
    args
}

/// `args` as one line a shell reads back as them.
pub fn shell_line(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Fails, naming the fix, when the port is taken: QEMU would stop with a
/// line less clear.
pub fn check_port(port: u16) -> Result<()> {
    if TcpListener::bind(("127.0.0.1", port)).is_err() {
        bail!("--gdb {port}: the port is in use on this host; pick another: --gdb PORT");
    }
    Ok(())
}

/// What `--gdb` prints before the boot: how to attach and what to use.
pub fn announcement(vmlinux: Option<&Path>, port: u16) -> String {
    let line = shell_line(&command(vmlinux, port));
    let helpers = if vmlinux.is_some() {
        "\n  then: `break array_map_mmap_fault`, `continue`; `lx-dmesg` prints the kernel log, \
         `lx-symbols` loads module symbols (scripts/gdb, CONFIG_GDB_SCRIPTS)"
    } else {
        "\n  (a kernel of your own: give gdb its vmlinux with `file`)"
    };
    format!("the guest waits for gdb on localhost:{port}; attach with:\n  {line}{helpers}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_loads_vmlinux_and_trusts_its_tree() {
        let v = Path::new("/c/sources/k/patched/_build-default/vmlinux");
        let args = command(Some(v), 1234);
        assert_eq!(
            args,
            [
                "gdb",
                "-q",
                "-iex",
                "set tcp connect-timeout 120",
                "-iex",
                "add-auto-load-safe-path /c/sources/k/patched",
                "-ex",
                "file /c/sources/k/patched/_build-default/vmlinux",
                "-ex",
                "target remote localhost:1234"
            ]
        );
        assert_eq!(
            shell_line(&args),
            "gdb -q -iex 'set tcp connect-timeout 120' \
             -iex 'add-auto-load-safe-path /c/sources/k/patched' \
             -ex 'file /c/sources/k/patched/_build-default/vmlinux' \
             -ex 'target remote localhost:1234'"
        );
        assert_eq!(
            command(None, 9),
            [
                "gdb",
                "-q",
                "-iex",
                "set tcp connect-timeout 120",
                "-ex",
                "target remote localhost:9"
            ]
        );
        assert_eq!(shell_line(&["it's".into()]), r"'it'\''s'");
        let said = announcement(Some(v), 1234);
        assert!(
            said.contains("lx-dmesg") && said.contains("lx-symbols"),
            "{said}"
        );
    }

    #[test]
    fn a_taken_port_is_named_with_the_fix() {
        let held = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = held.local_addr().unwrap().port();
        let err = check_port(port).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("--gdb {port}: the port is in use")),
            "{err}"
        );
        drop(held);
        assert!(check_port(port).is_ok());
    }
}
