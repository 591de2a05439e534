//! The test runner and the result protocol parsed by the host harness.
//!
//! ```text
//! selftests [--kernel base|patched] [--results PATH] [--list] [FILTER...]
//! ```
//!
//! Without `--kernel` the binary is in host mode and reports every selected
//! test as skipped. In guest mode each test runs in its own forked process
//! group with a timeout, so a stray SIGBUS/SIGSEGV or a hang costs only
//! that test; after each test the new /dev/kmsg records are scanned for
//! kernel splats (T28).
//!
//! Result lines (written to `--results`, one write() each, and echoed to
//! stdout):
//! ```text
//! BPFLAB-PLAN <n>
//! BPFLAB-RESULT <name> pass <ms>
//! BPFLAB-RESULT <name> fail <ms> <message on one line>
//! BPFLAB-RESULT <name> skip 0 <reason>
//! ```

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use guest_common::port;

use crate::child::{self, describe_status, panic_message};
use crate::kmsg::{find_splats, Kmsg};

/// Which kernel the guest booted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Without the patch (U): mmap() inserts every page eagerly.
    Base,
    /// With the patch (P): pages are faulted in on demand.
    Patched,
}

/// What a test knows about its environment.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub kernel: Kernel,
}

impl Ctx {
    pub fn is_patched(&self) -> bool {
        self.kernel == Kernel::Patched
    }

    /// The expectation for the kernel we run on.
    pub fn pick<T>(&self, patched: T, base: T) -> T {
        match self.kernel {
            Kernel::Patched => patched,
            Kernel::Base => base,
        }
    }
}

impl fmt::Display for Ctx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kernel {
            Kernel::Patched => "patched kernel",
            Kernel::Base => "base kernel",
        })
    }
}

/// A test's reason for not running (only for missing environment).
#[derive(Debug)]
pub struct Skip(pub String);

impl Skip {
    pub fn new(reason: impl Into<String>) -> Skip {
        Skip(reason.into())
    }
}

pub type TestFn = fn(&Ctx) -> Result<(), Skip>;

#[derive(Clone, Copy)]
pub struct Test {
    pub name: &'static str,
    pub func: TestFn,
    pub timeout: Duration,
}

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

impl Test {
    pub const fn new(name: &'static str, func: TestFn) -> Test {
        Test {
            name,
            func,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    pub const fn with_timeout(mut self, secs: u64) -> Test {
        self.timeout = Duration::from_secs(secs);
        self
    }
}

const USAGE: &str = "usage: selftests [--kernel base|patched] [--results PATH] [--list] [FILTER...]
  --kernel K     run the tests (guest mode) on kernel K; without it every
                 selected test is reported as skipped (host mode)
  --results PATH also write BPFLAB- result lines to PATH (e.g. /dev/ttyS1)
  --list         print the selected test names and exit
  FILTER         run only tests whose name contains one of the substrings";

const HOST_SKIP: &str = "guest-only: run cargo xtask vmtest";

#[derive(Debug, Default)]
struct Options {
    kernel: Option<Kernel>,
    results: Option<String>,
    list: bool,
    help: bool,
    filters: Vec<String>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or(format!("{name} needs a value"))
        };
        match flag {
            "--kernel" => {
                o.kernel = Some(match value("--kernel")?.as_str() {
                    "base" => Kernel::Base,
                    "patched" => Kernel::Patched,
                    k => return Err(format!("unknown kernel {k:?} (want base or patched)")),
                })
            }
            "--results" => o.results = Some(value("--results")?),
            "--list" => o.list = true,
            "-h" | "--help" => o.help = true,
            f if f.starts_with('-') => return Err(format!("unknown option {f}")),
            _ => o.filters.push(a.clone()),
        }
    }
    Ok(o)
}

/// The tests whose name contains any of `filters` (all if none), in plan
/// order.
pub fn selected(filters: &[String]) -> Vec<Test> {
    crate::tests::ALL
        .iter()
        .filter(|t| filters.is_empty() || filters.iter().any(|f| t.name.contains(f.as_str())))
        .copied()
        .collect()
}

/// Where result lines go besides stdout.
struct ResultSink {
    file: Option<File>,
}

impl ResultSink {
    fn open(path: Option<&str>) -> io::Result<ResultSink> {
        let Some(path) = path else {
            return Ok(ResultSink { file: None });
        };
        let regular = std::fs::metadata(path).map(|m| m.is_file()).unwrap_or(true);
        let file = port::open(path, regular)?;
        // Raw mode is best effort here: a cooked port still gets the lines.
        let _ = port::set_raw(&file);
        Ok(ResultSink { file: Some(file) })
    }

    fn emit(&mut self, line: &str) {
        debug_assert!(!line.contains('\n'));
        if let Some(f) = &self.file {
            if let Err(e) = port::write_line(f, &format!("{line}\n")) {
                eprintln!("[selftests] writing results: {e}");
            }
        }
        println!("{line}");
        let _ = io::stdout().flush();
    }
}

/// Makes a message fit on one protocol line.
pub fn one_line(msg: &str) -> String {
    let joined = msg
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" | ");
    let clean: String = joined
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    const MAX: usize = 3000;
    if clean.len() <= MAX {
        clean
    } else {
        let mut end = MAX;
        while !clean.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &clean[..end])
    }
}

#[derive(Debug)]
enum Outcome {
    Pass,
    Skip(String),
    Fail(String),
}

/// Host mode: report each selected test as skipped. Returns their number.
pub fn run_host(filters: &[String], results: Option<&str>) -> io::Result<usize> {
    let tests = selected(filters);
    let mut sink = ResultSink::open(results)?;
    sink.emit(&format!("BPFLAB-PLAN {}", tests.len()));
    for t in &tests {
        sink.emit(&format!("BPFLAB-RESULT {} skip 0 {HOST_SKIP}", t.name));
    }
    Ok(tests.len())
}

/// The whole command line; returns the exit code.
pub fn main_with_args(args: &[String]) -> i32 {
    let opts = match parse_args(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("selftests: {e}\n{USAGE}");
            return 2;
        }
    };
    if opts.help {
        println!("{USAGE}");
        return 0;
    }
    if opts.list {
        for t in selected(&opts.filters) {
            println!("{}", t.name);
        }
        return 0;
    }
    let Some(kernel) = opts.kernel else {
        return match run_host(&opts.filters, opts.results.as_deref()) {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("selftests: cannot open results file: {e}");
                2
            }
        };
    };
    let mut sink = match ResultSink::open(opts.results.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("selftests: cannot open results file: {e}");
            return 2;
        }
    };
    run_guest(Ctx { kernel }, &selected(&opts.filters), &mut sink)
}

fn run_guest(ctx: Ctx, tests: &[Test], sink: &mut ResultSink) -> i32 {
    child::install_panic_hook();
    // Orphaned grandchildren of a test are reparented to us and reaped.
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let mut kmsg = match Kmsg::open_at_end() {
        Ok(k) => Some(k),
        Err(e) => {
            println!(
                "[selftests] warning: cannot read /dev/kmsg ({e}); per-test dmesg checks disabled"
            );
            None
        }
    };
    println!("[selftests] running {} tests on the {ctx}", tests.len());
    sink.emit(&format!("BPFLAB-PLAN {}", tests.len()));
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for t in tests {
        println!("[selftests] {} ...", t.name);
        let start = Instant::now();
        let mut outcome = run_isolated(t, &ctx);
        let ms = start.elapsed().as_millis();
        // Per-test half of T28: anything the kernel reported meanwhile.
        if let Some(k) = kmsg.as_mut() {
            let splats = find_splats(&k.read_new());
            if !splats.is_empty() {
                let shown: Vec<_> = splats.iter().take(5).cloned().collect();
                let report = format!("kernel splat in dmesg: {}", shown.join(" | "));
                outcome = match outcome {
                    Outcome::Fail(m) => Outcome::Fail(format!("{m} | {report}")),
                    _ => Outcome::Fail(report),
                };
            }
        }
        match outcome {
            Outcome::Pass => {
                passed += 1;
                sink.emit(&format!("BPFLAB-RESULT {} pass {ms}", t.name));
                println!("[selftests] {} ok ({ms} ms)", t.name);
            }
            Outcome::Skip(reason) => {
                skipped += 1;
                let reason = one_line(&reason);
                sink.emit(&format!("BPFLAB-RESULT {} skip 0 {reason}", t.name));
                println!("[selftests] {} skipped: {reason}", t.name);
            }
            Outcome::Fail(msg) => {
                failed += 1;
                let msg = one_line(&msg);
                sink.emit(&format!("BPFLAB-RESULT {} fail {ms} {msg}", t.name));
                println!("[selftests] {} FAILED ({ms} ms): {msg}", t.name);
            }
        }
    }
    println!("[selftests] {passed} passed, {failed} failed, {skipped} skipped on the {ctx}");
    i32::from(failed > 0)
}

/// Test child: run the test, report "P", "S<reason>" or "F<message>".
fn child_main(t: &Test, ctx: &Ctx, w: OwnedFd) -> ! {
    // SAFETY: process setup syscalls with valid arguments.
    unsafe {
        libc::setpgid(0, 0);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        let rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: libc::RLIM_INFINITY,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &rl);
    }
    let msg = match catch_unwind(AssertUnwindSafe(|| (t.func)(ctx))) {
        Ok(Ok(())) => "P".to_string(),
        Ok(Err(Skip(r))) => format!("S{r}"),
        Err(p) => format!("F{}", panic_message(&*p)),
    };
    let _ = io::stdout().flush();
    let _ = File::from(w).write_all(msg.as_bytes());
    // SAFETY: leave without running the runner's destructors.
    unsafe { libc::_exit(0) }
}

fn run_isolated(t: &Test, ctx: &Ctx) -> Outcome {
    let (r, w) = child::pipe();
    let _ = io::stdout().flush();
    let _ = io::stderr().flush();
    // SAFETY: the runner is single-threaded; the child runs the test and
    // _exit()s.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Outcome::Fail(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(r);
        child_main(t, ctx, w);
    }
    drop(w);
    // Also from the parent, so kill(-pid) works even before the child ran.
    // SAFETY: plain syscalls on our own child / our own fd.
    unsafe {
        libc::setpgid(pid, pid);
        libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
    }
    let mut pipe = File::from(r);
    let mut msg = Vec::new();
    let deadline = Instant::now() + t.timeout;
    let mut timed_out = false;
    loop {
        let mut pfd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        drain(&mut pipe, &mut msg);
        if has_exited(pid) {
            break;
        }
        if !timed_out && Instant::now() >= deadline {
            timed_out = true;
            // SAFETY: killing our own child's process group.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
    // Leftover helpers in the test's process group die with it.
    // SAFETY: the group leader is a zombie we have not reaped, so the pgid
    // cannot have been reused.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let status = child::waitpid(pid);
    drain(&mut pipe, &mut msg);
    reap_orphans();
    if timed_out {
        return Outcome::Fail(format!("timeout: killed after {} s", t.timeout.as_secs()));
    }
    let msg = String::from_utf8_lossy(&msg).into_owned();
    let mut chars = msg.chars();
    match chars.next() {
        Some('P') => Outcome::Pass,
        Some('S') => Outcome::Skip(chars.as_str().to_string()),
        Some('F') => Outcome::Fail(chars.as_str().to_string()),
        _ => Outcome::Fail(format!(
            "test process {} without reporting a result",
            describe_status(status)
        )),
    }
}

fn drain(pipe: &mut File, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
}

/// Whether `pid` has exited, without reaping it.
fn has_exited(pid: libc::pid_t) -> bool {
    // SAFETY: siginfo is plain data written by waitid.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        r == 0 && info.si_pid() == pid
    }
}

/// Reaps descendants of finished tests that were reparented to us.
fn reap_orphans() {
    for _ in 0..20 {
        let mut status = 0;
        // SAFETY: valid out-pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r < 0 {
            return; // ECHILD: nothing left
        }
        if r == 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn option_parsing() {
        let o = parse_args(&args(&[
            "--kernel",
            "patched",
            "--results=/dev/ttyS1",
            "t01",
            "t14",
        ]))
        .unwrap();
        assert_eq!(o.kernel, Some(Kernel::Patched));
        assert_eq!(o.results.as_deref(), Some("/dev/ttyS1"));
        assert_eq!(o.filters, vec!["t01", "t14"]);
        assert!(!o.list);
        assert_eq!(
            parse_args(&args(&["--kernel=base", "--list"]))
                .unwrap()
                .kernel,
            Some(Kernel::Base)
        );
        assert!(parse_args(&args(&["--kernel", "other"])).is_err());
        assert!(parse_args(&args(&["--kernel"])).is_err());
        assert!(parse_args(&args(&["--bogus"])).is_err());
        assert_eq!(main_with_args(&args(&["--nope"])), 2);
    }

    #[test]
    fn registry_is_in_plan_order_and_complete() {
        let names: Vec<&str> = crate::tests::ALL.iter().map(|t| t.name).collect();
        let ids: Vec<u32> = names
            .iter()
            .map(|n| {
                assert!(
                    n.starts_with('t') && n.as_bytes()[3] == b'_',
                    "bad test name {n}"
                );
                n[1..3].parse().unwrap()
            })
            .collect();
        assert!(
            ids.windows(2).all(|w| w[0] <= w[1]),
            "tests not in plan order: {names:?}"
        );
        for id in 1..=28 {
            assert!(ids.contains(&id), "no test for T{id:02}");
        }
        let mut dedup = names.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), names.len(), "duplicate test names");
        assert!(names.contains(&"t14_dontneed_then_touch"));
    }

    #[test]
    fn filters_select_by_substring() {
        assert_eq!(selected(&[]).len(), crate::tests::ALL.len());
        let s = selected(&args(&["t14_", "t01_"]));
        assert!(s
            .iter()
            .all(|t| t.name.starts_with("t14_") || t.name.starts_with("t01_")));
        assert!(s.len() >= 2);
        assert!(selected(&args(&["no-such-test"])).is_empty());
    }

    #[test]
    fn messages_fit_one_line() {
        assert_eq!(one_line("a\nb\r\n\n  c  \n"), "a | b |   c");
        assert_eq!(one_line("tab\there"), "tab here");
        assert!(one_line(&"x".repeat(5000)).len() < 3100);
    }

    #[test]
    fn host_mode_reports_skips_to_the_results_file() {
        let path = std::env::temp_dir().join(format!("selftests-host-{}.txt", std::process::id()));
        let p = path.to_str().unwrap().to_string();
        assert_eq!(main_with_args(&args(&["--results", &p, "t01_"])), 0);
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("BPFLAB-PLAN {}", lines.len() - 1));
        assert!(lines[1].starts_with("BPFLAB-RESULT t01_"));
        assert!(lines[1].ends_with(&format!(" skip 0 {HOST_SKIP}")));
    }

    fn t_pass(_: &Ctx) -> Result<(), Skip> {
        Ok(())
    }
    fn t_skip(_: &Ctx) -> Result<(), Skip> {
        Err(Skip::new("no such device"))
    }
    fn t_fail(ctx: &Ctx) -> Result<(), Skip> {
        panic!("expected 0, got 1 on the {ctx}")
    }
    fn t_sigbus(_: &Ctx) -> Result<(), Skip> {
        // std's stack-overflow handler would swallow a raise()d SIGBUS
        // (real faults re-fault after it returns): use the default action.
        // SAFETY: resetting a disposition and raising a signal in the
        // forked test process.
        unsafe {
            libc::signal(libc::SIGBUS, libc::SIG_DFL);
            libc::raise(libc::SIGBUS);
        }
        Ok(())
    }
    fn t_hang(_: &Ctx) -> Result<(), Skip> {
        std::thread::sleep(Duration::from_secs(60));
        Ok(())
    }

    /// The isolation machinery itself (forks; the only unit test that does,
    /// since run_isolated reaps any child of the process).
    #[test]
    fn isolated_outcomes() {
        let ctx = Ctx {
            kernel: Kernel::Patched,
        };
        let run = |f: TestFn, secs: u64| run_isolated(&Test::new("t", f).with_timeout(secs), &ctx);
        assert!(matches!(run(t_pass, 10), Outcome::Pass));
        assert!(matches!(run(t_skip, 10), Outcome::Skip(r) if r == "no such device"));
        assert!(
            matches!(run(t_fail, 10), Outcome::Fail(m) if m.contains("expected 0, got 1 on the patched kernel"))
        );
        assert!(matches!(run(t_sigbus, 10), Outcome::Fail(m) if m.contains("killed by SIGBUS")));
        let start = Instant::now();
        assert!(matches!(run(t_hang, 1), Outcome::Fail(m) if m.starts_with("timeout")));
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn ctx_picks_the_side() {
        let p = Ctx {
            kernel: Kernel::Patched,
        };
        let b = Ctx {
            kernel: Kernel::Base,
        };
        assert_eq!((p.pick(0, 1), b.pick(0, 1)), (0, 1));
        assert_eq!(p.to_string(), "patched kernel");
    }
}
