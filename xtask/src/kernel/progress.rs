//! A long kernel build as the user sees it: how far along it is and about
//! how long is left, from counting kbuild's step lines (`  CC  ...`) in
//! make's log against what an earlier build of the same tree and flavor
//! counted. On a terminal a progress bar; elsewhere (a pipe, CI) a plain
//! line at most every 10%. The first build has no estimate and only counts.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::util::{read_stamp, write_atomic};

/// In the build directory: how many steps the reference build counted.
const COUNT_STAMP: &str = ".bpflab-objects";
/// Without an estimate, a plain "so far" line this often.
const PLAIN_EVERY: Duration = Duration::from_secs(60);

/// Whether a line of make's output is one kbuild step: two spaces, an
/// upper-case tag (CC, AS, LD, AR, HOSTCC, OBJCOPY, ...), maybe `[M]`,
/// then what it made.
pub fn is_object_line(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("  ") else {
        return false;
    };
    let (tag, what) = rest.split_once(' ').unwrap_or((rest, ""));
    let what = what.trim_start();
    let what = what.strip_prefix("[M]").unwrap_or(what).trim_start();
    tag.len() >= 2
        && tag.starts_with(|c: char| c.is_ascii_uppercase())
        && tag
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !what.is_empty()
}

/// Counts step lines in a log as it grows, reading only what is new.
pub struct LogCounter {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    pub count: usize,
}

impl LogCounter {
    pub fn new(path: &Path) -> LogCounter {
        LogCounter {
            path: path.to_path_buf(),
            offset: 0,
            partial: Vec::new(),
            count: 0,
        }
    }

    /// Reads what was appended since the last call; returns the count.
    pub fn poll(&mut self) -> usize {
        let mut new = Vec::new();
        if let Ok(mut f) = fs::File::open(&self.path) {
            if f.seek(SeekFrom::Start(self.offset)).is_ok() {
                let n = f.read_to_end(&mut new).unwrap_or(0);
                self.offset += n as u64;
            }
        }
        self.feed(&new);
        self.count
    }

    /// Counts the complete lines in `bytes`, keeping a trailing partial
    /// line for the next call.
    fn feed(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        let text = String::from_utf8_lossy(&self.partial[..last]);
        self.count += text.lines().filter(|l| is_object_line(l)).count();
        self.partial.drain(..=last);
    }
}

/// The reference count for the next build: this build's, unless it did
/// less than half the work of the reference (an incremental build says
/// nothing about how long a full one takes).
pub fn next_reference(reference: Option<usize>, counted: usize) -> usize {
    match reference {
        Some(r) if counted < r / 2 => r,
        _ => counted,
    }
}

/// The reference count recorded in `build_dir`, if any.
pub fn reference(build_dir: &Path) -> Option<usize> {
    // Only an estimate: an unreadable count means no estimate.
    let n: usize = read_stamp(&build_dir.join(COUNT_STAMP))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (n > 0).then_some(n)
}

/// Records the reference count after a successful build.
pub fn record(build_dir: &Path, counted: usize) -> anyhow::Result<()> {
    let n = next_reference(reference(build_dir), counted);
    write_atomic(&build_dir.join(COUNT_STAMP), format!("{n}\n").as_bytes())
}

/// Where a build leaves how long it took and how many objects it
/// compiled (`517 3085`): `ci` reads the base kernel's as the machine's
/// speed.
pub const BUILD_SECONDS_STAMP: &str = ".bpflab-build-seconds";

/// Records a successful build's time and the objects it compiled.
pub fn record_time(build_dir: &Path, took: Duration, counted: usize) -> anyhow::Result<()> {
    let text = format!("{} {counted}\n", took.as_secs());
    write_atomic(&build_dir.join(BUILD_SECONDS_STAMP), text.as_bytes())
}

/// How far along, in percent; 99 at most until the build has ended.
pub fn percent(done: usize, expected: usize) -> u32 {
    (done.saturating_mul(100) / expected.max(1)).min(99) as u32
}

/// Time left at the rate so far; unknown before the first step or once
/// the build has done more than the reference.
pub fn eta(elapsed: Duration, done: usize, expected: usize) -> Option<Duration> {
    if done == 0 || done >= expected {
        return None;
    }
    Some(elapsed.mul_f64((expected - done) as f64 / done as f64))
}

/// `45s`, `2m10s`, `1h05m`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// A progress bar only on a terminal, and never in CI.
pub fn use_bar(stderr_is_terminal: bool, ci: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && ci.is_none_or(|v| v.is_empty())
}

/// Whether a plain line is due: each time the build passes another 10%.
pub fn line_due(last_tenth: u32, percent: u32) -> bool {
    percent / 10 > last_tenth
}

/// `40% (1234/3085 objects), about 2m10s left`.
pub fn estimate_text(done: usize, expected: usize, elapsed: Duration) -> String {
    let left = eta(elapsed, done, expected).map_or("time left unknown".to_string(), |d| {
        format!("about {} left", format_duration(d))
    });
    format!(
        "{}% ({done}/{expected} objects), {left}",
        percent(done, expected)
    )
}

/// `1234 objects so far, 2m00s elapsed`.
pub fn count_text(done: usize, elapsed: Duration) -> String {
    format!(
        "{done} objects so far, {} elapsed (no earlier build to estimate from)",
        format_duration(elapsed)
    )
}

enum Shown {
    Bar(ProgressBar),
    Lines { last_tenth: u32, last_line: Instant },
}

/// The progress of one build, drawn as a bar or written as plain lines.
pub struct Progress {
    name: String,
    expected: Option<usize>,
    started: Instant,
    shown: Shown,
}

impl Progress {
    pub fn start(name: &str, expected: Option<usize>) -> Progress {
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let shown = if use_bar(terminal, std::env::var_os("CI").as_deref()) {
            Shown::Bar(bar(name, expected))
        } else {
            Shown::Lines {
                last_tenth: 0,
                last_line: Instant::now(),
            }
        };
        Progress {
            name: name.to_string(),
            expected,
            started: Instant::now(),
            shown,
        }
    }

    pub fn update(&mut self, done: usize) {
        let elapsed = self.started.elapsed();
        match (&mut self.shown, self.expected) {
            (Shown::Bar(bar), Some(expected)) => {
                bar.set_position(done.min(expected) as u64);
                bar.set_message(estimate_text(done, expected, elapsed));
            }
            (Shown::Bar(bar), None) => bar.set_message(count_text(done, elapsed)),
            (Shown::Lines { last_tenth, .. }, Some(expected)) => {
                let pct = percent(done, expected);
                if line_due(*last_tenth, pct) {
                    *last_tenth = pct / 10;
                    let text = estimate_text(done, expected, elapsed);
                    crate::status!(self.name, "build {text}");
                }
            }
            (Shown::Lines { last_line, .. }, None) => {
                if last_line.elapsed() >= PLAIN_EVERY {
                    *last_line = Instant::now();
                    crate::status!(self.name, "building: {}", count_text(done, elapsed));
                }
            }
        }
    }

    pub fn finish(self) {
        if let Shown::Bar(bar) = self.shown {
            bar.finish_and_clear();
        }
    }
}

fn bar(name: &str, expected: Option<usize>) -> ProgressBar {
    let bar =
        ProgressBar::with_draw_target(expected.map(|n| n as u64), ProgressDrawTarget::stderr());
    let template = if expected.is_some() {
        "[{prefix}] build [{bar:30}] {msg}"
    } else {
        "[{prefix}] building {spinner} {msg}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(name.to_string());
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_kbuild_steps_only() {
        for line in [
            "  CC      kernel/bpf/arraymap.o",
            "  AS      arch/x86/entry/entry_64.o",
            "  LD      vmlinux.o",
            "  LD [M]  drivers/x.ko",
            "  HOSTCC  scripts/kconfig/conf.o",
            "  OBJCOPY arch/x86/boot/setup.bin",
        ] {
            assert!(is_object_line(line), "{line}");
        }
        for line in [
            "make[1]: Entering directory '/x'",
            "   CC     three spaces",
            "  CC",
            "  | ^~~~",
            "kernel/bpf/arraymap.c:12: warning: unused",
            "  Cc      not a tag",
        ] {
            assert!(!is_object_line(line), "{line}");
        }
    }

    #[test]
    fn counter_keeps_partial_lines_for_later() {
        let mut c = LogCounter::new(Path::new("/nonexistent"));
        c.feed(b"  CC      a.o\n  CC   ");
        assert_eq!(c.count, 1);
        c.feed(b"   b.o\nmake: done\n  LD      vmlinux\n");
        assert_eq!(c.count, 3);
        assert_eq!(c.poll(), 3);
    }

    #[test]
    fn counter_reads_a_growing_log() {
        let t = crate::util::tempdir();
        let log = t.join("build.log");
        let mut c = LogCounter::new(&log);
        assert_eq!(c.poll(), 0);
        fs::write(&log, "  CC      a.o\n").unwrap();
        assert_eq!(c.poll(), 1);
        fs::write(&log, "  CC      a.o\n  CC      b.o\n  AR      c.a\n").unwrap();
        assert_eq!(c.poll(), 3);
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn reference_survives_incremental_builds() {
        assert_eq!(next_reference(None, 3085), 3085);
        assert_eq!(next_reference(Some(3085), 12), 3085);
        assert_eq!(next_reference(Some(3085), 2900), 2900);
        assert_eq!(next_reference(Some(3085), 3500), 3500);
        let t = crate::util::tempdir();
        assert_eq!(reference(&t), None);
        record(&t, 3085).unwrap();
        record(&t, 10).unwrap();
        assert_eq!(reference(&t), Some(3085));
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn percent_and_time_left() {
        assert_eq!(percent(1234, 3085), 40);
        assert_eq!(percent(3085, 3085), 99);
        assert_eq!(percent(5000, 3085), 99);
        assert_eq!(percent(0, 0), 0);
        let e = eta(Duration::from_secs(60), 1000, 3000).unwrap();
        assert_eq!(e, Duration::from_secs(120));
        assert_eq!(eta(Duration::from_secs(60), 0, 3000), None);
        assert_eq!(eta(Duration::from_secs(60), 3000, 3000), None);
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(format_duration(Duration::from_secs(45)), "45s");
        assert_eq!(format_duration(Duration::from_secs(130)), "2m10s");
        assert_eq!(format_duration(Duration::from_secs(3900)), "1h05m");
    }

    #[test]
    fn lines_carry_the_estimate() {
        assert_eq!(
            estimate_text(1234, 3085, Duration::from_secs(87)),
            "40% (1234/3085 objects), about 2m10s left"
        );
        assert_eq!(
            estimate_text(3100, 3085, Duration::from_secs(87)),
            "99% (3100/3085 objects), time left unknown"
        );
        assert!(count_text(12, Duration::from_secs(61)).starts_with("12 objects so far, 1m01s"));
    }

    #[test]
    fn a_bar_only_on_a_terminal_outside_ci() {
        let ci = std::ffi::OsStr::new("true");
        assert!(use_bar(true, None));
        assert!(!use_bar(false, None));
        assert!(!use_bar(true, Some(ci)));
        assert!(use_bar(true, Some(std::ffi::OsStr::new(""))));
    }

    #[test]
    fn plain_lines_every_tenth() {
        assert!(!line_due(0, 9));
        assert!(line_due(0, 10));
        assert!(!line_due(1, 19));
        assert!(line_due(1, 25));
    }
}
