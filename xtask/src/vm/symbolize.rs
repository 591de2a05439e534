//! A splat with file:line: the first reported splat's lines from the
//! console, passed through the kernel tree's own
//! `scripts/decode_stacktrace.sh` with that kernel's vmlinux, as a kernel
//! developer would by hand. The raw console log stays as it was.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use super::process::VmOutcome;
use crate::report::protocol::{Status, TestResult};

/// A splat's lines end at its end-of-trace marker, or after this many.
const MAX_LINES: usize = 60;

/// The console's lines from the one that reported `splat` to the end of
/// its trace. `Code:` lines are left out: decoding them prints a page of
/// disassembly that the raw log already holds.
pub fn excerpt(console: &str, splat: &str) -> Vec<String> {
    let splat = splat.trim();
    let Some(start) = console.lines().position(|l| l.trim() == splat) else {
        return vec![];
    };
    let mut out = vec![];
    for line in console.lines().skip(start).take(MAX_LINES) {
        if !line.contains(" Code: ") {
            out.push(line.to_string());
        }
        if line.contains("---[ end trace") {
            break;
        }
    }
    out
}

/// The decoded text with build-directory prefixes cut, so that a location
/// reads `drivers/misc/lkdtm/bugs.c:112` whichever tree compiled it.
pub fn tidy(decoded: &str) -> String {
    decoded
        .lines()
        .map(|line| {
            let mut line = line.to_string();
            while let Some(at) = line.find("/../") {
                let start = line[..at].rfind([' ', '(']).map_or(0, |i| i + 1);
                line.replace_range(start..at + 4, "");
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `lines` through the tree's decode_stacktrace.sh with `vmlinux` (in the
/// tree's build directory).
fn decode(vmlinux: &Path, lines: &[String]) -> Result<String> {
    let tree = vmlinux
        .parent()
        .and_then(Path::parent)
        .context("vmlinux is not inside a build directory of a tree")?;
    let script = tree.join("scripts/decode_stacktrace.sh");
    if !script.is_file() {
        bail!("{} is missing", script.display());
    }
    let mut child = Command::new("bash")
        .arg(&script)
        .arg(vmlinux)
        .arg(tree)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("running decode_stacktrace.sh (it needs bash and binutils' addr2line)")?;
    let mut stdin = child.stdin.take().context("its stdin")?;
    stdin.write_all((lines.join("\n") + "\n").as_bytes())?;
    drop(stdin);
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("decode_stacktrace.sh exited with {}", out.status);
    }
    Ok(tidy(&String::from_utf8_lossy(&out.stdout)))
}

/// The first splat of `console_log`, symbolized, or one line saying why
/// it could not be.
pub fn first_splat(console_log: &Path, splat: &str, vmlinux: Option<&Path>) -> String {
    let Some(vmlinux) = vmlinux.filter(|v| v.is_file()) else {
        return "(no vmlinux for this kernel: the splat is not symbolized)".into();
    };
    let console = std::fs::read_to_string(console_log).unwrap_or_default();
    let lines = excerpt(&console, splat);
    if lines.is_empty() {
        return "(the splat is not in the console log: not symbolized)".into();
    }
    decode(vmlinux, &lines)
        .unwrap_or_else(|e| format!("(the splat could not be symbolized: {e:#})"))
}

/// A failed console check (T28) gets the symbolized first splat as its
/// detail, after its summary.
pub fn onto_console_check(check: &mut TestResult, outcome: &VmOutcome, vmlinux: Option<&Path>) {
    let Some(first) = outcome.splats.first() else {
        return;
    };
    if check.status != Status::Fail {
        return;
    }
    let decoded = first_splat(&outcome.console_log, first, vmlinux);
    check.detail.extend(
        decoded
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.trim_end().to_string()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONSOLE: &str = "[    2.4] lkdtm: Performing direct entry WARNING
[    2.5] WARNING: CPU: 1 PID: 62 at drivers/misc/lkdtm/bugs.c:112 lkdtm_WARNING+0xf/0x20
[    2.6] RIP: 0010:lkdtm_WARNING+0xf/0x20
[    2.6] Code: 37 e8 c1 ff 5b
[    2.7]  direct_entry+0xe3/0x130
[    2.8] ---[ end trace 0000000000000000 ]---
[    2.9] after the trace
";

    #[test]
    fn the_excerpt_runs_from_the_splat_to_its_end_without_code() {
        let lines = excerpt(
            CONSOLE,
            "[    2.5] WARNING: CPU: 1 PID: 62 at drivers/misc/lkdtm/bugs.c:112 lkdtm_WARNING+0xf/0x20\r",
        );
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].contains("WARNING: CPU: 1"));
        assert!(lines.iter().all(|l| !l.contains("Code:")));
        assert!(lines[3].contains("end trace"));
        assert!(excerpt(CONSOLE, "not there").is_empty());
    }

    #[test]
    fn build_directory_prefixes_are_cut() {
        let decoded = "RIP: 0010:lkdtm_WARNING (/c/sources/t/base/_build-default/../drivers/misc/lkdtm/bugs.c:112 (discriminator 1))\nplain line";
        assert_eq!(
            tidy(decoded),
            "RIP: 0010:lkdtm_WARNING (drivers/misc/lkdtm/bugs.c:112 (discriminator 1))\nplain line"
        );
    }

    #[test]
    fn without_vmlinux_it_says_so_in_one_line() {
        let said = first_splat(Path::new("/nonexistent"), "x", None);
        assert!(said.contains("no vmlinux"), "{said}");
        let said = first_splat(
            Path::new("/nonexistent"),
            "x",
            Some(Path::new("/nonexistent/vmlinux")),
        );
        assert!(said.contains("no vmlinux"), "{said}");
    }
}
