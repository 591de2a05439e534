//! Running one guest under QEMU: the console read live into a bounded log,
//! kernel splats and panics spotted as they happen, boot and overall
//! timeouts enforced, and QEMU always reaped.

use std::collections::VecDeque;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::console;
use super::qemu::{self, GuestIo, VmConfig};
use super::relay::TailReader;
use crate::util::spawn_tied;

/// Console log cap: a guest flooding the console cannot fill the disk.
pub const LOG_CAP_BYTES: u64 = 16 << 20;
/// Overrides the cap, in MiB.
pub const LOG_CAP_ENV: &str = "BPFLAB_CONSOLE_CAP_MIB";

fn log_cap() -> u64 {
    std::env::var(LOG_CAP_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(LOG_CAP_BYTES, |mib| mib << 20)
}
/// How long a guest under KVM may stay silent before KVM is deemed unable
/// to run it.
const KVM_SILENCE_LIMIT: Duration = Duration::from_secs(15);
/// Console lines kept from the first splat of a test on.
const SPLAT_EXCERPT_LINES: usize = 12;
/// Console lines kept in memory for error messages.
const TAIL_LINES: usize = 40;
/// A console line longer than this is split (a flood without newlines).
const MAX_LINE: usize = 4096;
use guest_common::protocol::{self as wire, BOOT_MARKER, START};

#[derive(Debug, Clone)]
pub struct Limits {
    pub boot: Duration,
    pub overall: Duration,
    /// After boot: how long the results channel may stay still. Every test
    /// ends (or is killed at its own timeout) well within it, so silence
    /// this long means the guest is wedged, e.g. after an Oops.
    pub stall: Duration,
    /// For a host command that prints as it goes (test_progs): the file
    /// of its output, which `stall` then watches instead.
    pub output: Option<PathBuf>,
}

#[derive(Debug)]
pub enum VmEnd {
    /// QEMU exited by itself (the guest rebooted, or QEMU failed).
    Exited {
        code: Option<i32>,
    },
    BootTimeout,
    Timeout,
    /// No results line for `Limits::stall` after boot.
    Stalled,
    /// The guest gave its verdict but did not power off within
    /// `POWER_OFF_GRACE` (e.g. a CPU stuck in the kernel blocks the
    /// reboot); QEMU was killed. The run itself is complete.
    NoPowerOff,
    /// KVM could not run this kernel; rerun under TCG.
    KvmFailure(String),
}

#[derive(Debug)]
pub struct VmOutcome {
    pub end: VmEnd,
    pub console_log: PathBuf,
    pub tail: Vec<String>,
    pub splats: Vec<String>,
    /// The first splat since the last test started (its `BPFLAB-START`
    /// line, echoed on the console), or since boot, and the console lines
    /// that followed it (a few): the likely culprit when the kernel dies
    /// during a test.
    pub splat_in_test: Vec<String>,
    /// How many of `splats` came before the last test started.
    pub splats_before_last_start: usize,
    pub panic: Option<String>,
    /// Host seconds from QEMU start to /init starting the tests.
    pub boot_secs: Option<f64>,
    pub elapsed: Duration,
    pub qemu_stderr: Vec<String>,
}

/// Kills and reaps QEMU when dropped, on every path out of `run`
/// (killing a process that already exited is harmless).
struct Reaper(std::process::Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One line of QEMU's output: the guest's console or QEMU's own stderr.
enum QemuOutput {
    Console(String),
    Stderr(String),
}

/// Runs the guest of `cfg` to its end. `on_guest_output` is called once,
/// at the guest's first console line: QEMU has set up every device by
/// then.
pub fn run(
    cfg: &VmConfig,
    console_log: &Path,
    limits: &Limits,
    allowlist: &[String],
    on_guest_output: &mut dyn FnMut(),
) -> Result<VmOutcome> {
    // The results file must start empty: a stale verdict must never count.
    fs::write(&cfg.results, b"").with_context(|| format!("creating {}", cfg.results.display()))?;
    let args = qemu::qemu_args(cfg);
    let started = Instant::now();
    // Under --shell QEMU's stdio is the user's terminal and the console a
    // file; otherwise the console is QEMU's stdout.
    let console_file = match &cfg.io {
        GuestIo::Shell { console } => Some(console.as_path()),
        _ => None,
    };
    let mut command = Command::new("qemu-system-x86_64");
    command.args(&args).stderr(Stdio::piped());
    if console_file.is_some() {
        command.stdin(Stdio::inherit()).stdout(Stdio::inherit());
    } else {
        command.stdin(Stdio::null()).stdout(Stdio::piped());
    }
    if let Some(path) = console_file {
        fs::write(path, b"").with_context(|| format!("creating {}", path.display()))?;
    }
    // QEMU dies with the harness (see spawn_tied), and with `run` (Reaper).
    let mut child = Reaper(spawn_tied(&mut command).context(
        "starting qemu-system-x86_64 (install it with `apt-get install qemu-system-x86`)",
    )?);
    feed_stdin(&cfg.io);
    let (tx, rx) = mpsc::channel();
    let console_done = Arc::new(AtomicBool::new(false));
    let console: Box<dyn Read + Send> = match console_file {
        Some(path) => Box::new(TailReader::open(path, console_done.clone())?),
        None => Box::new(child.0.stdout.take().context("qemu stdout")?),
    };
    let stderr = child.0.stderr.take().context("qemu stderr")?;
    let tx2 = tx.clone();
    let out_reader = std::thread::spawn(move || {
        read_lines(console, |l| tx.send(QemuOutput::Console(l)).is_ok())
    });
    let err_reader =
        std::thread::spawn(move || read_lines(stderr, |l| tx2.send(QemuOutput::Stderr(l)).is_ok()));

    let mut watch = Watcher {
        log: BoundedLog::create(console_log, log_cap())?,
        tail: VecDeque::new(),
        splats: Vec::new(),
        splat_in_test: Vec::new(),
        splats_before_last_start: 0,
        panic: None,
        boot_secs: None,
        qemu_stderr: Vec::new(),
        kvm_failure: None,
        console_lines: 0,
        // A guest stopped for gdb is silent by design, not a KVM failure.
        watch_kvm: cfg.accel == qemu::Accel::Kvm && cfg.gdb.is_none(),
        started,
        allowlist,
        on_guest_output,
    };
    let end = watch.until_end(&mut child, &rx, limits, &cfg.results)?;
    drop(child);
    console_done.store(true, Ordering::Release);
    let _ = out_reader.join();
    let _ = err_reader.join();
    for line in rx.try_iter() {
        watch.handle(line)?;
    }
    watch.log.finish()?;
    Ok(VmOutcome {
        end,
        console_log: console_log.to_path_buf(),
        tail: watch.tail.into_iter().collect(),
        splats: watch.splats,
        splat_in_test: watch.splat_in_test,
        splats_before_last_start: watch.splats_before_last_start,
        panic: watch.panic,
        boot_secs: watch.boot_secs,
        elapsed: started.elapsed(),
        qemu_stderr: watch.qemu_stderr,
    })
}

/// What the harness notices in QEMU's output as it arrives.
struct Watcher<'a> {
    log: BoundedLog,
    tail: VecDeque<String>,
    splats: Vec<String>,
    splat_in_test: Vec<String>,
    splats_before_last_start: usize,
    panic: Option<String>,
    boot_secs: Option<f64>,
    qemu_stderr: Vec<String>,
    kvm_failure: Option<String>,
    console_lines: u64,
    watch_kvm: bool,
    started: Instant,
    allowlist: &'a [String],
    on_guest_output: &'a mut dyn FnMut(),
}

impl Watcher<'_> {
    /// Handles QEMU's output until QEMU exits, KVM fails, or a limit is hit.
    fn until_end(
        &mut self,
        child: &mut Reaper,
        rx: &mpsc::Receiver<QemuOutput>,
        limits: &Limits,
        results: &Path,
    ) -> Result<VmEnd> {
        let mut progress = ChannelWatch::new(results);
        let mut output = limits.output.as_deref().map(ChannelWatch::new);
        loop {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                self.handle(line)?;
            }
            if let Some(line) = self.kvm_failure.take() {
                return Ok(VmEnd::KvmFailure(line));
            }
            if let Some(why) = self.silent_kvm() {
                return Ok(VmEnd::KvmFailure(why));
            }
            if let Some(status) = child.0.try_wait()? {
                return Ok(VmEnd::Exited {
                    code: status.code(),
                });
            }
            let elapsed = self.started.elapsed();
            if self.boot_secs.is_none() && elapsed > limits.boot {
                return Ok(VmEnd::BootTimeout);
            }
            if elapsed > limits.overall {
                return Ok(VmEnd::Timeout);
            }
            let still = progress.still_for();
            if progress.verdict && still > POWER_OFF_GRACE {
                return Ok(VmEnd::NoPowerOff);
            }
            let quiet = output.as_mut().map_or(still, ChannelWatch::still_for);
            if self.boot_secs.is_some() && quiet > limits.stall {
                return Ok(VmEnd::Stalled);
            }
        }
    }

    /// Some nested hypervisors' KVM neither runs the kernel nor reports an
    /// error: the guest stays silent. A kernel under KVM writes to its
    /// console within a second or two, so silence this long is a failure.
    fn silent_kvm(&self) -> Option<String> {
        let silent =
            self.watch_kvm && self.console_lines == 0 && self.started.elapsed() > KVM_SILENCE_LIMIT;
        silent.then(|| {
            format!(
                "no console output within {} s under KVM",
                KVM_SILENCE_LIMIT.as_secs()
            )
        })
    }

    fn handle(&mut self, line: QemuOutput) -> Result<()> {
        match line {
            QemuOutput::Console(l) => {
                if self.console_lines == 0 {
                    (self.on_guest_output)();
                }
                self.console_lines += 1;
                self.log.write_line(&l)?;
                if self.boot_secs.is_none() && l.contains(BOOT_MARKER) {
                    self.boot_secs = Some(self.started.elapsed().as_secs_f64());
                }
                if l.contains(START) {
                    self.splat_in_test.clear();
                    self.splats_before_last_start = self.splats.len();
                }
                let splat = console::is_splat(&l, self.allowlist);
                let started = !self.splat_in_test.is_empty();
                if (splat || started) && self.splat_in_test.len() < SPLAT_EXCERPT_LINES {
                    self.splat_in_test.push(l.clone());
                }
                if splat {
                    if self.panic.is_none() && console::is_panic(&l) {
                        self.panic = Some(l.clone());
                    }
                    if self.splats.len() < 100 {
                        self.splats.push(l.clone());
                    }
                }
                if self.tail.len() == TAIL_LINES {
                    self.tail.pop_front();
                }
                self.tail.push_back(l);
            }
            QemuOutput::Stderr(l) => {
                self.log.write_line(&format!("[qemu stderr] {l}"))?;
                if self.watch_kvm && qemu::is_kvm_failure(&l) {
                    self.kvm_failure.get_or_insert_with(|| l.clone());
                }
                if self.qemu_stderr.len() < 50 {
                    self.qemu_stderr.push(l);
                }
            }
        }
        Ok(())
    }
}

/// How long a guest may take to power off after its verdict.
const POWER_OFF_GRACE: Duration = Duration::from_secs(15);

/// Watches a channel (a file QEMU appends to: the results, or a host
/// command's output) for whether it is still growing and whether the
/// verdict is in.
struct ChannelWatch<'a> {
    path: &'a Path,
    len: u64,
    since: Instant,
    verdict: bool,
}

impl<'a> ChannelWatch<'a> {
    fn new(path: &'a Path) -> ChannelWatch<'a> {
        ChannelWatch {
            path,
            len: 0,
            since: Instant::now(),
            verdict: false,
        }
    }

    /// How long the file has not grown.
    fn still_for(&mut self) -> Duration {
        let len = fs::metadata(self.path).map_or(0, |m| m.len());
        if len != self.len {
            self.len = len;
            self.since = Instant::now();
            let text = fs::read_to_string(self.path).unwrap_or_default();
            self.verdict = text
                .lines()
                .any(|l| matches!(l.parse(), Ok(wire::Line::Verdict(_))));
        }
        self.since.elapsed()
    }
}

/// Splits a byte stream into lines (lossy UTF-8, `\r` dropped, long lines
/// split) and hands each to `sink` until it refuses or the stream ends.
fn read_lines(stream: impl Read, mut sink: impl FnMut(String) -> bool) {
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = match reader
            .by_ref()
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let line = String::from_utf8_lossy(&buf[..n]);
        let line = line.trim_end_matches(['\n', '\r']).replace('\r', "");
        if !sink(line) {
            return;
        }
    }
}

/// A log file that stops growing at LOG_CAP_BYTES and says so once.
struct BoundedLog {
    file: fs::File,
    cap: u64,
    written: u64,
    dropped_lines: u64,
}

impl BoundedLog {
    fn create(path: &Path, cap: u64) -> Result<BoundedLog> {
        Ok(BoundedLog {
            file: fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
            cap,
            written: 0,
            dropped_lines: 0,
        })
    }

    fn write_line(&mut self, line: &str) -> Result<()> {
        if self.written + line.len() as u64 + 1 > self.cap {
            self.dropped_lines += 1;
            return Ok(());
        }
        self.file.write_all(line.as_bytes())?;
        self.file.write_all(b"\n")?;
        self.written += line.len() as u64 + 1;
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        if self.dropped_lines > 0 {
            writeln!(
                self.file,
                "[harness] console log capped at {} MiB: {} later line(s) not kept",
                self.cap >> 20,
                self.dropped_lines
            )?;
        }
        Ok(())
    }
}

/// With a stdin port, copies the harness's stdin into it: connects to
/// QEMU's socket (QEMU starts the guest only then) and shuts its side at
/// stdin's end, which the guest's command reads as EOF. Detached: when the
/// guest is gone first, the next write fails and the thread ends; a stdin
/// that never ends holds only this thread.
fn feed_stdin(io: &GuestIo) {
    let GuestIo::Command {
        stdin: Some(socket),
        ..
    } = io
    else {
        return;
    };
    let socket = socket.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut stream = loop {
            match std::os::unix::net::UnixStream::connect(&socket) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => {
                    eprintln!(
                        "error: connecting stdin to the guest at {}: {e}",
                        socket.display()
                    );
                    return;
                }
            }
        };
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut stream);
        // Half a close: QEMU reads every byte, then the end. A whole close
        // is a hang-up, on which QEMU drops what the guest has not read.
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let _ = std::io::copy(&mut stream, &mut std::io::sink());
    });
}

/// QEMU's version line (`qemu-system-x86_64 --version`'s first): what
/// the bench's record pins, since another QEMU executes a guest's
/// instructions differently.
pub fn qemu_version() -> Result<String> {
    let out = Command::new("qemu-system-x86_64")
        .arg("--version")
        .output()
        .context("running qemu-system-x86_64 --version (install it with `apt-get install qemu-system-x86`)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().next() {
        Some(line) if out.status.success() => Ok(line.trim().to_string()),
        _ => bail!(
            "qemu-system-x86_64 --version gave no version ({})",
            out.status
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_and_cleaned() {
        let mut got = Vec::new();
        let long = "x".repeat(MAX_LINE + 10);
        let input = format!("a\r\nb\n{long}\nlast");
        read_lines(input.as_bytes(), |l| {
            got.push(l);
            true
        });
        assert_eq!(got[0], "a");
        assert_eq!(got[1], "b");
        assert_eq!(got[2].len(), MAX_LINE);
        assert_eq!(got[3].len(), 10);
        assert_eq!(got[4], "last");
    }

    #[test]
    fn progress_is_growth_of_the_results_file() {
        let t = crate::util::tempdir();
        let path = t.join("results.txt");
        fs::write(&path, b"").unwrap();
        let mut p = ChannelWatch::new(&path);
        std::thread::sleep(Duration::from_millis(30));
        assert!(p.still_for() >= Duration::from_millis(30));
        fs::write(&path, b"BPFLAB-START t01\n").unwrap();
        assert!(p.still_for() < Duration::from_millis(30));
        assert!(!p.verdict);
        fs::write(&path, b"BPFLAB-START t01\nBPFLAB-VERDICT pass exit=0\n").unwrap();
        p.still_for();
        assert!(p.verdict);
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn log_is_bounded() {
        let t = crate::util::tempdir();
        let path = t.join("console.log");
        let mut log = BoundedLog::create(&path, LOG_CAP_BYTES).unwrap();
        let line = "y".repeat(1 << 16);
        for _ in 0..((LOG_CAP_BYTES >> 16) + 50) {
            log.write_line(&line).unwrap();
        }
        log.finish().unwrap();
        let size = fs::metadata(&path).unwrap().len();
        assert!(size <= LOG_CAP_BYTES + 200, "{size}");
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("line(s) not kept\n"));
        fs::remove_dir_all(t).unwrap();
    }
}
