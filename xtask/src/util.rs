//! Small generic helpers used across the harness: status lines, atomic
//! writes, stamps, PATH lookups and spawning children tied to our life.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};

use anyhow::{Context, Result};

/// Prints one status line: `[stage] message`, to stderr so that `--json`
/// output on stdout stays machine-readable.
#[macro_export]
macro_rules! status {
    ($stage:expr, $($arg:tt)*) => {
        eprintln!("[{}] {}", $stage, format_args!($($arg)*))
    };
}

/// Writes `contents` to `path` atomically (temp file + rename), so a killed
/// run never leaves a half-written stamp or manifest.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("renaming {} into place", tmp.display()))
}

/// Gives `path` the modification time `time`: what make compares, set
/// where a copy or a rewrite must keep, or take on, another file's.
pub fn set_mtime(path: &Path, time: std::time::SystemTime) -> Result<()> {
    fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(time))
        .with_context(|| format!("setting the mtime of {}", path.display()))
}

/// A result whose "not found" error is `None`: for files that may be gone,
/// a state rather than a failure.
pub fn gone_is_none<T>(r: std::io::Result<T>) -> std::io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads a stamp file; a missing file reads as empty (nothing recorded),
/// any other failure is an error that names the file.
pub fn read_stamp(path: &Path) -> Result<String> {
    Ok(gone_is_none(fs::read_to_string(path))
        .with_context(|| format!("reading the stamp {}", path.display()))?
        .unwrap_or_default())
}

/// The last `n` lines of `text`.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `text` as a directory name: letters, digits, '.' and '-' kept, any
/// other character '_'.
pub fn name_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether `command` is an executable file in a directory of $PATH.
pub fn on_path(command: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(command).is_file()))
}

/// A finished command's stdout then stderr, as one (lossy) text.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Spawns `command` so that the kernel kills the child (SIGKILL) when the
/// harness dies: no QEMU outlives its run. Only the child: what a killed
/// make leaves running is stopped by the next build (see build_orphans.rs).
pub fn spawn_tied(command: &mut Command) -> std::io::Result<Child> {
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    command.spawn()
}

/// A fresh, empty directory for a unit test.
#[cfg(test)]
pub fn tempdir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "xtask-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_lines_keeps_the_tail() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(last_lines("a", 5), "a");
    }

    #[test]
    fn tied_children_run() {
        let status = spawn_tied(Command::new("true").arg("x"))
            .unwrap()
            .wait()
            .unwrap();
        assert!(status.success());
    }

    #[test]
    fn atomic_writes_replace_the_stamp() {
        let t = tempdir();
        let p = t.join("stamp");
        assert_eq!(read_stamp(&p).unwrap(), "");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(read_stamp(&p).unwrap(), "two");
        fs::create_dir(t.join("dir")).unwrap();
        let err = format!("{:#}", read_stamp(&t.join("dir")).unwrap_err());
        assert!(err.starts_with("reading the stamp "), "{err}");
        fs::remove_dir_all(t).unwrap();
    }
}
