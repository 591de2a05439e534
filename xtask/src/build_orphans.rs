//! What an interrupted build left running, found and stopped.
//!
//! Only make itself dies with the harness (see `util::spawn_tied`): its
//! sub-makes and compilers are reparented and go on writing into the build
//! directory. So every process a build starts inherits a tag in its
//! environment, and a marker file beside the build holds the tag while it
//! runs. The next run, holding the cache lock, stops exactly those
//! processes before it touches the directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use crate::util::gone_is_none;

/// The environment variable that carries a build's tag to its processes.
pub const TAG_VAR: &str = "BPFLAB_BUILD_TAG";

/// How long stopped processes get to disappear.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// The marker file of one build: present while the build runs.
pub struct Marker {
    path: PathBuf,
}

/// An interrupted build, once what it left running is stopped.
pub struct Interrupted {
    /// When it started: what it wrote since is suspect.
    pub started: SystemTime,
    /// How many of its processes were still running.
    pub stopped: usize,
}

impl Marker {
    pub fn new(path: PathBuf) -> Marker {
        Marker { path }
    }

    /// Starts a build: writes a fresh tag to the marker and returns it, to
    /// be set as [`TAG_VAR`] in the build's environment.
    pub fn begin(&self) -> Result<String> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let tag = format!("{}-{nanos}", std::process::id());
        fs::write(&self.path, &tag).with_context(|| format!("writing {}", self.path.display()))?;
        Ok(tag)
    }

    /// Ends a build that ran to its end, successful or not.
    pub fn end(&self) -> Result<()> {
        fs::remove_file(&self.path).with_context(|| format!("removing {}", self.path.display()))
    }

    /// The build this marker records, if it never ended, after stopping
    /// whatever it left running. The marker stays until [`Marker::end`]:
    /// a run killed while cleaning up is cleaned up after again.
    pub fn recover(&self, what: &str) -> Result<Option<Interrupted>> {
        let reading = || format!("reading {}", self.path.display());
        let Some(meta) = gone_is_none(fs::metadata(&self.path)).with_context(reading)? else {
            return Ok(None);
        };
        let tag = fs::read_to_string(&self.path).with_context(reading)?;
        let stopped = stop_tagged(tag.trim(), what)?;
        Ok(Some(Interrupted {
            started: meta.modified()?,
            stopped,
        }))
    }
}

/// SIGKILLs every process carrying `tag` and waits until none is left.
fn stop_tagged(tag: &str, what: &str) -> Result<usize> {
    let first = tagged(tag);
    let started = Instant::now();
    loop {
        let left = tagged(tag);
        if left.is_empty() {
            return Ok(first.len());
        }
        if started.elapsed() > STOP_WAIT {
            bail!(
                "{} process(es) left running by the interrupted {what} do not stop \
                 (pids {left:?}): kill them, then run again",
                left.len()
            );
        }
        for pid in left {
            // SAFETY: kill() takes no pointers. A pid that is gone is harmless.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The live processes whose environment carries `tag` (a zombie's
/// environment reads empty, and processes we may not read are not ours).
fn tagged(tag: &str) -> Vec<u32> {
    if tag.is_empty() {
        return Vec::new();
    }
    let entry = format!("{TAG_VAR}={tag}");
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != std::process::id())
        .filter(|pid| {
            fs::read(Path::new("/proc").join(pid.to_string()).join("environ"))
                .is_ok_and(|env| environ_has(&env, &entry))
        })
        .collect()
}

/// Whether a /proc/PID/environ blob holds exactly `entry` ("NAME=value").
fn environ_has(environ: &[u8], entry: &str) -> bool {
    environ.split(|&b| b == 0).any(|e| e == entry.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    #[test]
    fn environ_entries_match_whole() {
        let env = b"PATH=/bin\0BPFLAB_BUILD_TAG=1-2\0HOME=/root\0";
        assert!(environ_has(env, "BPFLAB_BUILD_TAG=1-2"));
        assert!(!environ_has(env, "BPFLAB_BUILD_TAG=1"));
        assert!(!environ_has(env, "BPFLAB_BUILD_TAG=1-23"));
    }

    #[test]
    fn a_finished_build_leaves_nothing_to_recover() {
        let t = crate::util::tempdir();
        let marker = Marker::new(t.join("m"));
        assert!(marker.recover("test").unwrap().is_none());
        marker.begin().unwrap();
        marker.end().unwrap();
        assert!(marker.recover("test").unwrap().is_none());
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn recovery_stops_the_tagged_processes_and_their_children_only() {
        let t = crate::util::tempdir();
        let marker = Marker::new(t.join("m"));
        let tag = marker.begin().unwrap();
        // A shell and its child, as make and a compiler.
        let mut shell = Command::new("sh")
            .args(["-c", "sleep 60 & wait"])
            .env(TAG_VAR, &tag)
            .spawn()
            .unwrap();
        let mut untagged = Command::new("sleep").arg("60").spawn().unwrap();
        // Until the shell has started its sleep.
        let started = Instant::now();
        while tagged(&tag).len() < 2 && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let found = marker
            .recover("test")
            .unwrap()
            .expect("an interrupted build");
        assert_eq!(found.stopped, 2);
        assert_eq!(shell.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(
            untagged.try_wait().unwrap().is_none(),
            "untagged was stopped"
        );
        untagged.kill().unwrap();
        untagged.wait().unwrap();
        assert!(tagged(&tag).is_empty());
        fs::remove_dir_all(t).unwrap();
    }
}
